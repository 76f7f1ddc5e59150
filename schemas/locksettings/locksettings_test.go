package locksettings

import (
	"encoding/json"
	"slices"
	"strconv"
	"testing"
	"time"
)

// TestDecodeRefusesWhatReadsTwoWays: a key given twice, or a field's name
// inside another field, is refused whole; the same in a string holding
// the object (FOLIO's way); a plain value decodes.
func TestDecodeRefusesWhatReadsTwoWays(t *testing.T) {
	t.Parallel()
	asString := func(s string) string { return strconv.Quote(s) }
	for _, tc := range []struct {
		value string
		field string // the field refused; "" for a value that decodes
		on    *bool
	}{
		{`{"checkOutLockFeatureEnabled":true}`, "", ptr(true)},
		{asString(`{"checkOutLockFeatureEnabled":false,"lockTtl":3000}`), "", ptr(false)},
		{`{"checkOutLockFeatureEnabled":false,"x":{"checkOutLockFeatureEnabled":true}}`, "checkOutLockFeatureEnabled", nil},
		{asString(`{"checkOutLockFeatureEnabled":false,"x":{"checkOutLockFeatureEnabled":true}}`), "checkOutLockFeatureEnabled", nil},
		{`{"checkOutLockFeatureEnabled":false,"checkOutLockFeatureEnabled":true}`, "checkOutLockFeatureEnabled", nil},
		{`{"lockTtl":3000,"x":[{"lockTtl":1}]}`, "lockTtl", nil},
		{`{"x":{"y":{"retryIntervalsMs":[1]}},"checkOutLockFeatureEnabled":true}`, "retryIntervalsMs", nil},
		{`{"note":"checkOutLockFeatureEnabled: true","checkOutLockFeatureEnabled":false}`, "", ptr(false)},
		{`{"x":{"a":1,"b":[1,{"c":2}]},"checkOutLockFeatureEnabled":true}`, "", ptr(true)},
	} {
		s, errs := Decode(json.RawMessage(tc.value))
		switch {
		case tc.field == "" && (len(errs) != 0 || (s.CheckOutLockFeatureEnabled == nil) != (tc.on == nil) ||
			(tc.on != nil && *s.CheckOutLockFeatureEnabled != *tc.on)):
			t.Errorf("Decode(%s) = %+v, %v; want the flag %v", tc.value, s, errs, tc.on)
		case tc.field != "" && (len(errs) != 1 || errs[0].Field != tc.field || s.CheckOutLockFeatureEnabled != nil):
			t.Errorf("Decode(%s) = %+v, %v; want %s refused and nothing read", tc.value, s, errs, tc.field)
		}
	}
}

func ptr[T any](v T) *T { return &v }

// TestEachRetryScheduleIsBounded: FOLIO's pair is held to the total wait
// whether or not a per-retry list is given beside it (FOLIO's modules
// reading the entry follow the pair); a list too long is dropped and the
// pair kept when the pair is within it; both within it, both kept.
func TestEachRetryScheduleIsBounded(t *testing.T) {
	t.Parallel()
	b := DefaultBounds(3 * time.Second)
	for _, tc := range []struct {
		stored  Stored
		refused []string
		list    bool
		pair    bool
	}{
		{Stored{RetryIntervalsMs: ptr([]int{100}), NoOfRetryAttempts: ptr(50), RetryInterval: ptr(1000)}, []string{fieldAttempts, fieldInterval}, true, false},
		{Stored{RetryIntervalsMs: ptr([]int{1000, 1000, 1000, 1000}), NoOfRetryAttempts: ptr(2), RetryInterval: ptr(1000)}, []string{fieldIntervals}, false, true},
		{Stored{RetryIntervalsMs: ptr([]int{100}), NoOfRetryAttempts: ptr(2), RetryInterval: ptr(1000)}, nil, true, true},
	} {
		got, errs := b.Check(tc.stored)
		var refused []string
		for _, e := range errs {
			refused = append(refused, e.Field)
		}
		if !slices.Equal(refused, tc.refused) || (got.RetryIntervalsMs != nil) != tc.list ||
			(got.NoOfRetryAttempts != nil && got.RetryInterval != nil) != tc.pair {
			t.Errorf("Check(%+v) = %+v, refusing %v; want %v refused, the list kept %t, the pair kept %t",
				tc.stored, got, refused, tc.refused, tc.list, tc.pair)
		}
	}
}
