package circulation_test

import (
	"context"
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/checkoutlock/circulation"
	"github.com/checkoutlock/circulation-storage/storagetest"
	"github.com/checkoutlock/schemas/locksettings"
)

// effective reads the settings in effect, failing t on an error.
func effective(t *testing.T, s *circulation.Settings, ctx context.Context) circulation.LockSettings {
	t.Helper()
	got, err := s.Effective(ctx)
	if err != nil {
		t.Fatalf("effective settings: %v", err)
	}
	return got
}

// The environment of the settings table: lock on, 3 s, three retries.
var tableEnv = circulation.LockSettings{Enabled: true, LockTTL: 3 * time.Second, RetryIntervals: ms(500, 500, 1000)}

// TestStoredFieldsCannotFailOpen walks every stored field through a wrong
// type, null, a value out of bounds and its absence, with the other fields
// valid. The environment's value for the field applies and the field is named in settingsError (absence is not an
// error); every other field keeps its stored value. Above all, no bad value
// turns the lock off.
func TestStoredFieldsCannotFailOpen(t *testing.T) {
	t.Parallel()
	// Two valid documents: the per-retry list, and FOLIO's pair.
	list := map[string]any{"checkOutLockFeatureEnabled": false, "lockTtl": 4000, "retryIntervalsMs": []int{100, 200}}
	pair := map[string]any{"checkOutLockFeatureEnabled": false, "lockTtl": 4000, "noOfRetryAttempts": 2, "retryInterval": 100}
	fromStore := func(waits []time.Duration) circulation.LockSettings {
		return circulation.LockSettings{Enabled: false, LockTTL: 4 * time.Second, RetryIntervals: waits,
			EnabledSource: circulation.FromSettings, LockTTLSource: circulation.FromSettings, RetrySource: circulation.FromSettings}
	}
	type variant struct {
		name  string
		value any // nil: the field is absent
		null  bool
	}
	cases := []struct {
		field    string
		doc      map[string]any
		variants []variant
		// want is the effective settings once the field is not usable.
		want circulation.LockSettings
	}{
		{"checkOutLockFeatureEnabled", list, []variant{
			{name: "string true", value: "true"}, {name: "string false", value: "false"}, {name: "number", value: 0},
			{name: "object", value: map[string]any{"a": 1}}, {name: "null", null: true}, {name: "absent"},
		}, func() circulation.LockSettings {
			w := fromStore(ms(100, 200))
			w.Enabled, w.EnabledSource = true, circulation.FromEnvironment
			return w
		}()},
		{"lockTtl", list, []variant{
			{name: "string", value: "4000"}, {name: "fraction", value: 4000.5}, {name: "bool", value: true},
			{name: "null", null: true}, {name: "below the bound", value: 99}, {name: "one", value: 1},
			{name: "above the bound", value: 600001}, {name: "past int32", value: 1e10}, {name: "absent"},
		}, func() circulation.LockSettings {
			w := fromStore(ms(100, 200))
			w.LockTTL, w.LockTTLSource = 3*time.Second, circulation.FromEnvironment
			return w
		}()},
		{"retryIntervalsMs", list, []variant{
			{name: "object", value: map[string]any{"a": 1}}, {name: "strings", value: []string{"100"}},
			{name: "null", null: true}, {name: "a null inside", value: []any{100, nil}},
			{name: "zero wait", value: []int{0}}, {name: "wait above the bound", value: []int{60001}},
			{name: "51 waits", value: slices.Repeat([]int{100}, 51)},
			{name: "waits past the request timeout", value: []int{10000, 10000}}, {name: "absent"},
		}, func() circulation.LockSettings {
			w := fromStore(ms(500, 500, 1000))
			w.RetrySource = circulation.FromEnvironment
			return w
		}()},
		{"noOfRetryAttempts", pair, []variant{
			{name: "string", value: "2"}, {name: "null", null: true}, {name: "negative", value: -1},
			{name: "above the bound", value: 51}, {name: "absent"},
		}, fromStore(folioRetries(100 * time.Millisecond))}, // FOLIO's count, the stored wait
		{"retryInterval", pair, []variant{
			{name: "string", value: "100"}, {name: "null", null: true}, {name: "zero", value: 0},
			{name: "below the bound", value: 0}, {name: "above the bound", value: 60001}, {name: "absent"},
		}, fromStore(ms(250, 250))}, // the stored count, FOLIO's wait
	}
	for _, c := range cases {
		for _, v := range c.variants {
			t.Run(c.field+"/"+v.name, func(t *testing.T) {
				t.Parallel()
				doc := map[string]any{}
				for k, x := range c.doc {
					doc[k] = x
				}
				delete(doc, c.field)
				switch {
				case v.null:
					doc[c.field] = nil
				case v.value != nil:
					doc[c.field] = v.value
				}
				s := newStack(t, tableEnv, withBounds(locksettings.DefaultBounds(19*time.Second)))
				s.store.AddSettingUnchecked(locksettings.Scope, locksettings.Key, doc)
				got := effective(t, s.settings, okapi(t))
				gotErr := got.SettingsError
				got.SettingsError = ""
				if !reflect.DeepEqual(got, c.want) {
					t.Errorf("stored %v:\n effective %+v\n want      %+v", doc, got, c.want)
				}
				switch {
				case v.name == "absent" && gotErr != "":
					t.Errorf("absent field: settingsError %q, want none", gotErr)
				case v.name != "absent" && !strings.Contains(gotErr, c.field+": "):
					t.Errorf("settingsError %q does not name %s", gotErr, c.field)
				}
			})
		}
	}
}

// folioRetries is FOLIO's default number of retries, each after wait.
func folioRetries(wait time.Duration) []time.Duration {
	return slices.Repeat([]time.Duration{wait}, locksettings.DefaultNoOfRetryAttempts)
}

// TestReportedStoredValues are the stored values found to break check-out:
// each now leaves the environment's value in effect for the bad field, and
// the lock on.
func TestReportedStoredValues(t *testing.T) {
	t.Parallel()
	env := tableEnv
	for _, c := range []struct {
		name   string
		stored string
		want   circulation.LockSettings
	}{
		{"a string cannot switch the lock off", `{"checkOutLockFeatureEnabled":"true"}`,
			circulation.LockSettings{Enabled: true, LockTTL: 3 * time.Second, RetryIntervals: ms(500, 500, 1000)}},
		{"a bad list does not drop the retries", `{"retryIntervalsMs":{"a":1},"noOfRetryAttempts":5,"retryInterval":0}`,
			circulation.LockSettings{Enabled: true, LockTTL: 3 * time.Second, RetryIntervals: ms(250, 250, 250, 250, 250),
				RetrySource: circulation.FromSettings}},
		{"a one-millisecond lock", `{"lockTtl":1}`,
			circulation.LockSettings{Enabled: true, LockTTL: 3 * time.Second, RetryIntervals: ms(500, 500, 1000)}},
		{"a hundred retries without a wait", `{"noOfRetryAttempts":100,"retryInterval":0}`,
			circulation.LockSettings{Enabled: true, LockTTL: 3 * time.Second, RetryIntervals: ms(500, 500, 1000)}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			s := newStack(t, env, withBounds(locksettings.DefaultBounds(19*time.Second)))
			s.store.AddSettingUnchecked(locksettings.Scope, locksettings.Key, json.RawMessage(c.stored))
			got := effective(t, s.settings, okapi(t))
			if got.SettingsError == "" {
				t.Errorf("no settingsError for %s", c.stored)
			}
			want := c.want
			want.EnabledSource, want.LockTTLSource = circulation.FromEnvironment, circulation.FromEnvironment
			if want.RetrySource == "" {
				want.RetrySource = circulation.FromEnvironment
			}
			got.SettingsError = ""
			if !reflect.DeepEqual(got, want) {
				t.Errorf("stored %s:\n effective %+v\n want      %+v", c.stored, got, want)
			}
			// The check-out runs under the lock, with the environment's TTL.
			if _, err := s.checkOut(t); err != nil {
				t.Fatalf("check-out: %v", err)
			}
			wantCount(t, s.store, storagetest.RouteAcquire, 1)
			if locks := s.store.Granted(); len(locks) != 1 || locks[0].TTLMs != 3000 {
				t.Errorf("locks %+v, want one of 3000 ms", locks)
			}
		})
	}
}

// TestTheStoredValueBothWays: FOLIO keeps the entry's value as a string
// holding the JSON object, earlier versions of this service as the object
// itself. Both are read; every write is FOLIO's string.
func TestTheStoredValueBothWays(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name  string
		value any
	}{
		{"a string holding the object (FOLIO)", `{"checkOutLockFeatureEnabled":false,"noOfRetryAttempts":2,"retryInterval":100,"lockTtl":4000}`},
		{"the object (earlier versions)", map[string]any{"checkOutLockFeatureEnabled": false, "noOfRetryAttempts": 2, "retryInterval": 100, "lockTtl": 4000}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			s := newStack(t, lockOn)
			s.store.AddSettingUnchecked(locksettings.Scope, locksettings.Key, c.value)
			got := effective(t, s.settings, okapi(t))
			want := circulation.LockSettings{Enabled: false, LockTTL: 4 * time.Second, RetryIntervals: ms(100, 100),
				EnabledSource: circulation.FromSettings, LockTTLSource: circulation.FromSettings, RetrySource: circulation.FromSettings}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("effective %+v, want %+v", got, want)
			}
			// The lock is off as the entry says: the check-out asks for none.
			if _, err := s.checkOut(t); err != nil {
				t.Fatalf("check-out: %v", err)
			}
			wantCount(t, s.store, storagetest.RouteAcquire, 0)

			// A change writes FOLIO's shape, keeping the other fields.
			if _, err := s.settings.Patch(okapi(t), json.RawMessage(`{"lockTtl":5000}`)); err != nil {
				t.Fatalf("patch: %v", err)
			}
			wantStored(t, s.store, `{"checkOutLockFeatureEnabled":false,"noOfRetryAttempts":2,"retryInterval":100,"lockTtl":5000}`)
		})
	}
	t.Run("a string that holds no object", func(t *testing.T) {
		t.Parallel()
		s := newStack(t, lockOn)
		s.store.AddSettingUnchecked(locksettings.Scope, locksettings.Key, `checkOutLockFeatureEnabled=false`)
		got := effective(t, s.settings, okapi(t))
		if !got.Enabled || got.EnabledSource != circulation.FromEnvironment ||
			!strings.Contains(got.SettingsError, "neither a JSON object nor a string holding one") {
			t.Errorf("effective %+v, want the lock on and the value named unreadable", got)
		}
	})
}
