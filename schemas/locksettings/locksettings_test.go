package locksettings

import (
	"encoding/json"
	"strconv"
	"testing"
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
