package circulation_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/checkoutlock/circulation"
	"github.com/checkoutlock/circulation-storage/storagetest"
	"github.com/checkoutlock/schemas/locksettings"
)

// TestPutRefusesValuesOutOfBounds: every value out of bounds is named in
// one 422, and nothing is written.
func TestPutRefusesValuesOutOfBounds(t *testing.T) {
	t.Parallel()
	s := newStack(t, tableEnv, withBounds(locksettings.DefaultBounds(19*time.Second)))
	ttl, attempts, interval, waits := 99, 100, 0, []int{100, 30000}
	_, err := s.settings.Put(okapi(t), locksettings.Stored{LockTTL: &ttl, NoOfRetryAttempts: &attempts,
		RetryInterval: &interval, RetryIntervalsMs: &waits})
	wantStrings(t, "refusals", refusals(t, err), []string{
		"VALIDATION_FAILED: lockTtl: must be from 100 to 600000 ms, got 99 [lockTtl=99]",
		"VALIDATION_FAILED: retryInterval: must be from 1 to 60000 ms, got 0 [retryInterval=0]",
		"VALIDATION_FAILED: noOfRetryAttempts: must be from 0 to 50, got 100 [noOfRetryAttempts=100]",
		"VALIDATION_FAILED: retryIntervalsMs: makes the retry waits add up to 30100 ms, more than the 19000 ms a check-out may wait [retryIntervalsMs=[100,30000]]",
	})
	wantCount(t, s.store, storagetest.RoutePostSetting, 0)
	wantCount(t, s.store, storagetest.RoutePutSetting, 0)
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
	wantStored(t, s.store, `{"lockTtl":5000}`)
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
	wantStored(t, s.store, `{"checkOutLockFeatureEnabled":false,"lockTtl":5000}`)

	if _, err := s.settings.Patch(ctx, json.RawMessage(`{"retryIntervalsMs":[100,200],"checkOutLockFeatureEnabled":null}`)); err != nil {
		t.Fatal(err)
	}
	wantStored(t, s.store, `{"lockTtl":5000,"retryIntervalsMs":[100,200]}`)
	if got := effective(t, s.settings, ctx); !got.Enabled || got.EnabledSource != circulation.FromEnvironment {
		t.Errorf("after PATCH {checkOutLockFeatureEnabled: null}: %+v, want the environment's (on)", got)
	}

	// A patch out of bounds writes nothing.
	writes := len(s.store.Writes())
	_, err = s.settings.Patch(ctx, json.RawMessage(`{"lockTtl":10,"retryInterval":"x"}`))
	wantStrings(t, "refusals", refusals(t, err), []string{`VALIDATION_FAILED: retryInterval: must be an integer, got "x" [retryInterval="x"]`})
	_, err = s.settings.Patch(ctx, json.RawMessage(`{"lockTtl":10}`))
	wantStrings(t, "refusals", refusals(t, err), []string{"VALIDATION_FAILED: lockTtl: must be from 100 to 600000 ms, got 10 [lockTtl=10]"})
	if w := s.store.Writes(); len(w) != writes {
		t.Errorf("refused patches wrote: %+v", w[writes:])
	}
	wantStored(t, s.store, `{"lockTtl":5000,"retryIntervalsMs":[100,200]}`)
}

// TestConcurrentPatchesLoseNothing: librarians on two instances change
// different fields at the same moment; both changes are kept, because each
// write names the version it read and the loser merges again.
func TestConcurrentPatchesLoseNothing(t *testing.T) {
	t.Parallel()
	fake := storagetest.Start(t, storagetest.LockDefault(tableEnv.Enabled))
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
	fake := storagetest.Start(t, storagetest.LockDefault(tableEnv.Enabled))
	seed(fake)
	s := stackOver(t, fake, tableEnv)
	var buf bytes.Buffer
	var mu sync.Mutex
	logger := slog.New(slog.NewJSONHandler(&lockedWriter{w: &buf, mu: &mu}, &slog.HandlerOptions{Level: slog.LevelInfo}))
	s.settings = circulation.NewSettings(s.storage, circulation.SettingsConfig{Env: tableEnv, TTL: time.Minute}, logger)
	ctx := circulation.WithOkapi(t.Context(), circulation.Okapi{Tenant: fake.Tenant, UserID: "aaaaaaaa-aaaa-4aaa-8aaa-aaaaaaaaaaaa"})
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

// TestPatchNamesAnInvalidStoredField: a field stored invalid (written
// straight into the settings entry) is not dropped by a patch of other
// fields: the patch is refused, naming it, and nothing is written; a patch
// that names it, with a value or null, goes through.
func TestPatchNamesAnInvalidStoredField(t *testing.T) {
	t.Parallel()
	s := newStack(t, tableEnv)
	ctx := okapi(t)
	s.store.AddSettingUnchecked(locksettings.Scope, locksettings.Key, json.RawMessage(`{"lockTtl":5000,"retryInterval":"often"}`))
	writes := len(s.store.Writes())
	_, err := s.settings.Patch(ctx, json.RawMessage(`{"lockTtl":6000}`))
	wantStrings(t, "refusals", refusals(t, err), []string{
		`VALIDATION_FAILED: retryInterval: the stored value is invalid (must be an integer, got "often"): set it, or set it to null, in this patch [retryInterval="often"]`})
	if w := s.store.Writes(); len(w) != writes {
		t.Errorf("the refused patch wrote: %+v", w[writes:])
	}
	if _, err := s.settings.Patch(ctx, json.RawMessage(`{"lockTtl":6000,"retryInterval":null}`)); err != nil {
		t.Fatalf("a patch naming the invalid field: %v", err)
	}
	wantStored(t, s.store, `{"lockTtl":6000}`)
}
