package circulation_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"github.com/checkoutlock/schemas"
	"github.com/checkoutlock/schemas/errs"
	"log/slog"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/checkoutlock/circulation"
	"github.com/checkoutlock/circulation/storagefake"
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
// valid. FOLIO's default for the field applies (the environment's, for the
// feature flag) and the field is named in settingsError (absence is not an
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
			{name: "null", null: true}, {name: "below the bound", value: 999}, {name: "one", value: 1},
			{name: "above the bound", value: 600001}, {name: "past int32", value: 1e10}, {name: "absent"},
		}, func() circulation.LockSettings {
			w := fromStore(ms(100, 200))
			w.LockTTL, w.LockTTLSource = 2*time.Second, circulation.FromDefault
			return w
		}()},
		{"retryIntervalsMs", list, []variant{
			{name: "object", value: map[string]any{"a": 1}}, {name: "strings", value: []string{"100"}},
			{name: "null", null: true}, {name: "a null inside", value: []any{100, nil}},
			{name: "zero wait", value: []int{0}}, {name: "wait above the bound", value: []int{60001}},
			{name: "51 waits", value: slices.Repeat([]int{100}, 51)},
			{name: "waits past the request timeout", value: []int{10000, 10000}}, {name: "absent"},
		}, func() circulation.LockSettings {
			w := fromStore(folioRetries(250 * time.Millisecond))
			w.RetrySource = circulation.FromDefault
			return w
		}()},
		{"noOfRetryAttempts", pair, []variant{
			{name: "string", value: "2"}, {name: "null", null: true}, {name: "negative", value: -1},
			{name: "above the bound", value: 51}, {name: "absent"},
		}, fromStore(folioRetries(100 * time.Millisecond))}, // FOLIO's count, the stored wait
		{"retryInterval", pair, []variant{
			{name: "string", value: "100"}, {name: "null", null: true}, {name: "zero", value: 0},
			{name: "below the bound", value: 49}, {name: "above the bound", value: 60001}, {name: "absent"},
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
				s := newStack(t, tableEnv)
				s.settings.UseBounds(locksettings.DefaultBounds(19 * time.Second))
				s.fake.AddSetting(locksettings.Scope, locksettings.Key, doc)
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
// each now leaves FOLIO's default in effect for the bad field, and the lock
// on.
func TestReportedStoredValues(t *testing.T) {
	t.Parallel()
	env := tableEnv
	for _, c := range []struct {
		name   string
		stored string
		want   circulation.LockSettings
	}{
		{"a string cannot switch the lock off", `{"checkOutLockFeatureEnabled":"true"}`,
			circulation.LockSettings{Enabled: true, LockTTL: 2 * time.Second, RetryIntervals: folioRetries(250 * time.Millisecond),
				RetrySource: circulation.FromDefault}},
		{"a bad list does not drop the retries", `{"retryIntervalsMs":{"a":1},"noOfRetryAttempts":5,"retryInterval":10}`,
			circulation.LockSettings{Enabled: true, LockTTL: 2 * time.Second, RetryIntervals: ms(250, 250, 250, 250, 250),
				RetrySource: circulation.FromSettings}},
		{"a one-millisecond lock", `{"lockTtl":1}`,
			circulation.LockSettings{Enabled: true, LockTTL: 2 * time.Second, RetryIntervals: folioRetries(250 * time.Millisecond),
				RetrySource: circulation.FromDefault}},
		{"a hundred retries without a wait", `{"noOfRetryAttempts":100,"retryInterval":0}`,
			circulation.LockSettings{Enabled: true, LockTTL: 2 * time.Second, RetryIntervals: folioRetries(250 * time.Millisecond),
				RetrySource: circulation.FromDefault}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			s := newStack(t, env)
			s.settings.UseBounds(locksettings.DefaultBounds(19 * time.Second))
			s.fake.AddSetting(locksettings.Scope, locksettings.Key, json.RawMessage(c.stored))
			got := effective(t, s.settings, okapi(t))
			if got.SettingsError == "" {
				t.Errorf("no settingsError for %s", c.stored)
			}
			want := c.want
			want.EnabledSource, want.LockTTLSource = circulation.FromEnvironment, circulation.FromDefault
			got.SettingsError = ""
			if !reflect.DeepEqual(got, want) {
				t.Errorf("stored %s:\n effective %+v\n want      %+v", c.stored, got, want)
			}
			// The check-out runs under the lock, with FOLIO's default TTL.
			if _, err := s.checkOut(t); err != nil {
				t.Fatalf("check-out: %v", err)
			}
			wantCount(t, s.fake, storagefake.RouteAcquire, 1)
			if locks := s.fake.Locks(); len(locks) != 1 || locks[0].TTLMs != 2000 {
				t.Errorf("locks %+v, want one of 2000 ms", locks)
			}
		})
	}
}

// TestPutRefusesValuesOutOfBounds: every value out of bounds is named in
// one 422, and nothing is written.
func TestPutRefusesValuesOutOfBounds(t *testing.T) {
	t.Parallel()
	s := newStack(t, tableEnv)
	s.settings.UseBounds(locksettings.DefaultBounds(19 * time.Second))
	ttl, attempts, interval, waits := 999, 100, 0, []int{100, 30000}
	_, err := s.settings.Put(okapi(t), locksettings.Stored{LockTTL: &ttl, NoOfRetryAttempts: &attempts,
		RetryInterval: &interval, RetryIntervalsMs: &waits})
	wantStrings(t, "refusals", refusals(t, err), []string{
		"VALIDATION_FAILED: lockTtl: must be from 1000 to 600000 ms, got 999 [lockTtl=999]",
		"VALIDATION_FAILED: retryInterval: must be from 50 to 60000 ms, got 0 [retryInterval=0]",
		"VALIDATION_FAILED: noOfRetryAttempts: must be from 0 to 50, got 100 [noOfRetryAttempts=100]",
		"VALIDATION_FAILED: retryIntervalsMs: makes the retry waits add up to 30100 ms, more than the 19000 ms a check-out may wait [retryIntervalsMs=[100,30000]]",
	})
	wantCount(t, s.fake, storagefake.RoutePostSetting, 0)
	wantCount(t, s.fake, storagefake.RoutePutSetting, 0)
}

// TestPutReplacesTheWholeDocument and TestPatchChangesOnlyTheNamedFields:
// PUT stores exactly its body (what it leaves out falls back to the
// environment); PATCH keeps what it does not name, and null removes a field.
func TestPutReplacesTheWholeDocument(t *testing.T) {
	t.Parallel()
	s := newStack(t, tableEnv)
	ctx := okapi(t)
	off, ttl := false, 5000
	if _, err := s.settings.Put(ctx, locksettings.Stored{CheckOutLockFeatureEnabled: &off}); err != nil {
		t.Fatal(err)
	}
	got, err := s.settings.Put(ctx, locksettings.Stored{LockTTL: &ttl})
	if err != nil {
		t.Fatal(err)
	}
	if !got.Enabled || got.EnabledSource != circulation.FromEnvironment || got.LockTTL != 5*time.Second {
		t.Errorf("after PUT {lockTtl}: %+v, want the environment's enabled and lockTtl 5000", got)
	}
	wantStored(t, s.fake, `{"lockTtl":5000}`)
}

func TestPatchChangesOnlyTheNamedFields(t *testing.T) {
	t.Parallel()
	s := newStack(t, tableEnv)
	ctx := okapi(t)
	off := false
	if _, err := s.settings.Put(ctx, locksettings.Stored{CheckOutLockFeatureEnabled: &off}); err != nil {
		t.Fatal(err)
	}
	got, err := s.settings.Patch(ctx, json.RawMessage(`{"lockTtl":5000}`))
	if err != nil {
		t.Fatal(err)
	}
	if got.Enabled || got.EnabledSource != circulation.FromSettings || got.LockTTL != 5*time.Second {
		t.Errorf("after PATCH {lockTtl}: %+v, want still off, lockTtl 5000", got)
	}
	wantStored(t, s.fake, `{"checkOutLockFeatureEnabled":false,"lockTtl":5000}`)

	if _, err := s.settings.Patch(ctx, json.RawMessage(`{"retryIntervalsMs":[100,200],"checkOutLockFeatureEnabled":null}`)); err != nil {
		t.Fatal(err)
	}
	wantStored(t, s.fake, `{"lockTtl":5000,"retryIntervalsMs":[100,200]}`)
	if got := effective(t, s.settings, ctx); !got.Enabled || got.EnabledSource != circulation.FromEnvironment {
		t.Errorf("after PATCH {checkOutLockFeatureEnabled: null}: %+v, want the environment's (on)", got)
	}

	// A patch out of bounds writes nothing.
	writes := len(s.fake.Writes())
	_, err = s.settings.Patch(ctx, json.RawMessage(`{"lockTtl":10,"retryInterval":"x"}`))
	wantStrings(t, "refusals", refusals(t, err), []string{`VALIDATION_FAILED: retryInterval: must be an integer, got "x" [retryInterval="x"]`})
	_, err = s.settings.Patch(ctx, json.RawMessage(`{"lockTtl":10}`))
	wantStrings(t, "refusals", refusals(t, err), []string{"VALIDATION_FAILED: lockTtl: must be from 1000 to 600000 ms, got 10 [lockTtl=10]"})
	if w := s.fake.Writes(); len(w) != writes {
		t.Errorf("refused patches wrote: %+v", w[writes:])
	}
	wantStored(t, s.fake, `{"lockTtl":5000,"retryIntervalsMs":[100,200]}`)
}

// TestConcurrentPatchesLoseNothing: librarians on two instances change
// different fields at the same moment; both changes are kept, because each
// write names the version it read and the loser merges again.
func TestConcurrentPatchesLoseNothing(t *testing.T) {
	t.Parallel()
	fake := storagefake.New(t)
	seed(fake)
	a, b := stackOver(t, fake, tableEnv), stackOver(t, fake, tableEnv)
	if _, err := a.settings.Put(okapi(t), locksettings.Stored{}); err != nil {
		t.Fatal(err)
	}
	for round := range 10 {
		var wg sync.WaitGroup
		errs := make([]error, 2)
		for i, st := range []*stack{a, b} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				field := map[int]string{0: "lockTtl", 1: "retryInterval"}[i]
				value := map[int]int{0: 1000 + round*100, 1: 100 + round*10}[i]
				_, errs[i] = st.settings.Patch(okapi(t), json.RawMessage(fmt.Sprintf(`{%q:%d}`, field, value)))
			}()
		}
		wg.Wait()
		for _, err := range errs {
			if err != nil {
				t.Fatalf("round %d: %v", round, err)
			}
		}
		wantStored(t, fake, fmt.Sprintf(`{"lockTtl":%d,"retryInterval":%d}`, 1000+round*100, 100+round*10))
	}
}

// TestSettingsChangesAreLogged: every change is logged at info with who
// made it, and the old and new values.
func TestSettingsChangesAreLogged(t *testing.T) {
	t.Parallel()
	fake := storagefake.New(t)
	seed(fake)
	s := stackOver(t, fake, tableEnv)
	var buf bytes.Buffer
	var mu sync.Mutex
	logger := slog.New(slog.NewJSONHandler(&lockedWriter{w: &buf, mu: &mu}, &slog.HandlerOptions{Level: slog.LevelInfo}))
	s.settings = circulation.NewSettings(s.storage, tableEnv, time.Minute, logger)
	ctx := circulation.WithOkapi(t.Context(), circulation.Okapi{Tenant: tenant, UserID: "aaaaaaaa-aaaa-4aaa-8aaa-aaaaaaaaaaaa"})
	off := false
	if _, err := s.settings.Put(ctx, locksettings.Stored{CheckOutLockFeatureEnabled: &off}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.settings.Patch(ctx, json.RawMessage(`{"lockTtl":4000}`)); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	var changes []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		if rec["msg"] == "check-out lock settings changed" {
			changes = append(changes, rec)
		}
	}
	if len(changes) != 2 {
		t.Fatalf("%d change lines, want 2:\n%s", len(changes), buf.String())
	}
	for i, want := range []struct {
		change   string
		old, new string
	}{
		{"replace", `null`, `{"checkOutLockFeatureEnabled":false}`},
		{"patch", `{"checkOutLockFeatureEnabled":false}`, `{"checkOutLockFeatureEnabled":false,"lockTtl":4000}`},
	} {
		c := changes[i]
		old, _ := json.Marshal(c["old"])
		nw, _ := json.Marshal(c["new"])
		if c["level"] != "INFO" || c["change"] != want.change || c["user_id"] != "aaaaaaaa-aaaa-4aaa-8aaa-aaaaaaaaaaaa" ||
			string(old) != want.old || string(nw) != want.new {
			t.Errorf("change %d logged as %v, want %s of %s → %s by the user", i, c, want.change, want.old, want.new)
		}
	}
}

type lockedWriter struct {
	w  *bytes.Buffer
	mu *sync.Mutex
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// TestSettingsCacheIsBounded: however many tenants ask, at most the
// configured number are cached.
func TestSettingsCacheIsBounded(t *testing.T) {
	t.Parallel()
	s := newStack(t, tableEnv)
	s.settings.UseCacheSize(5)
	for i := range 50 {
		ctx := circulation.WithOkapi(t.Context(), circulation.Okapi{Tenant: fmt.Sprintf("tenant%d", i)})
		effective(t, s.settings, ctx)
	}
	if n := s.settings.CachedTenants(); n != 5 {
		t.Errorf("%d tenants cached, want 5", n)
	}
}

// TestUnknownTenantSettingsAreRefusedAndNotCached: settings of a tenant
// storage does not know are an error, as every other call for it is, and
// are never cached: invented tenant names cannot fill the cache.
func TestUnknownTenantSettingsAreRefusedAndNotCached(t *testing.T) {
	t.Parallel()
	s := newStack(t, tableEnv)
	s.fake.AddTenant(tenant)
	effective(t, s.settings, okapi(t))
	for i := range 20 {
		ctx := circulation.WithOkapi(t.Context(), circulation.Okapi{Tenant: fmt.Sprintf("nobody%d", i)})
		_, err := s.settings.Effective(ctx)
		wantError(t, err, errs.KindBadRequest, schemas.CodeTenantNotInitialized)
	}
	if n := s.settings.CachedTenants(); n != 1 {
		t.Errorf("%d tenants cached, want only the known one", n)
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
			s.fake.AddSetting(locksettings.Scope, locksettings.Key, c.value)
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
			wantCount(t, s.fake, storagefake.RouteAcquire, 0)

			// A change writes FOLIO's shape, keeping the other fields.
			if _, err := s.settings.Patch(okapi(t), json.RawMessage(`{"lockTtl":5000}`)); err != nil {
				t.Fatalf("patch: %v", err)
			}
			wantStored(t, s.fake, `{"checkOutLockFeatureEnabled":false,"noOfRetryAttempts":2,"retryInterval":100,"lockTtl":5000}`)
		})
	}
	t.Run("a string that holds no object", func(t *testing.T) {
		t.Parallel()
		s := newStack(t, lockOn)
		s.fake.AddSetting(locksettings.Scope, locksettings.Key, `checkOutLockFeatureEnabled=false`)
		got := effective(t, s.settings, okapi(t))
		if !got.Enabled || got.EnabledSource != circulation.FromEnvironment ||
			!strings.Contains(got.SettingsError, "neither a JSON object nor a string holding one") {
			t.Errorf("effective %+v, want the lock on and the value named unreadable", got)
		}
	})
}
