package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/checkoutlock/integration-tests/harness"
)

// TestBackendsTerminatedUnderCheckOuts terminates every database backend
// of storage (pg_terminate_backend, as an operator or a failover does, and
// waits until they have ended) several times while check-outs run at c = 8. Each kill leaves every
// pooled connection dead; the first statement on each fails. No check-out
// that started after a kill may fail for it: storage runs a statement
// again on a fresh connection when its connection was dead. A check-out
// whose write was in flight at the kill is answered with its true outcome:
// a 201 has its loan, anything else has none. Beside every check-out a
// lock is acquired and released straight at storage, where no retry of
// circulation's hides a failed statement: none that started after a kill
// may fail either.
//
// Its cluster has a database of its own: the backends it terminates are
// its storage's alone, whatever runs beside it.
func TestBackendsTerminatedUnderCheckOuts(t *testing.T) {
	t.Parallel()
	c := harness.NewCluster(t, harness.Options{Circulations: 2, FeatureOn: true, DatabaseURL: harness.FreshDatabase(t)})
	const workers, perPatron, rounds, killEvery = 8, 4, 4, 20
	patrons := (rounds + 2) * killEvery / perPatron
	lib := c.SetupLibrary(patrons, perPatron, perPatron)

	type outcome struct {
		item, body string
		status     int
		start, end time.Time
	}
	// A probe is a call straight to storage, which circulation's retries
	// cannot hide: a lock acquired and released.
	type probe struct {
		call, body string
		status     int
		start, end time.Time
	}
	var (
		mu       sync.Mutex
		outcomes []outcome
		probes   []probe
	)
	// Kill after every killEvery answers since the last kill: the kills fall
	// among check-outs at every stage, and none waits on a clock.
	type span struct{ start, end time.Time }
	var kills []span
	harness.UnderKills(patrons*perPatron, workers, rounds, killEvery, func(w, j int) {
		p, i := j/perPatron, j%perPatron
		start := time.Now()
		r := c.CheckOut(w, lib.Items[p][i], lib.Patrons[p])
		mu.Lock()
		outcomes = append(outcomes, outcome{item: lib.Items[p][i], status: r.Status, body: string(r.Body), start: start, end: time.Now()})
		mu.Unlock()
		start = time.Now()
		r = c.Do(c.Storage, "POST", "/check-out-lock-storage", map[string]any{"userId": uuid.NewString(), "ttlMs": 10000})
		got := []probe{{call: "acquire", status: r.Status, body: string(r.Body), start: start, end: time.Now()}}
		var lock struct{ ID string }
		if r.Status == http.StatusCreated && json.Unmarshal(r.Body, &lock) == nil {
			start = time.Now()
			r = c.Do(c.Storage, "DELETE", "/check-out-lock-storage/"+lock.ID, nil)
			got = append(got, probe{call: "release", status: r.Status, body: string(r.Body), start: start, end: time.Now()})
		}
		mu.Lock()
		probes = append(probes, got...)
		mu.Unlock()
	}, func() {
		k := span{start: time.Now()}
		c.TerminateStorageBackends(t)
		k.end = time.Now()
		kills = append(kills, k)
	})

	// A call that overlapped no kill began after one had ended (or before
	// the first): it must succeed. One that overlapped a kill must be
	// answered with its true outcome.
	clear := func(start, end time.Time) bool {
		for _, k := range kills {
			if start.Before(k.end) && end.After(k.start) {
				return false
			}
		}
		return true
	}
	table := func(name string) string { return pgx.Identifier{c.Schema, name}.Sanitize() }
	var created []string
	failedAfter, inFlightFailed := 0, 0
	for _, o := range outcomes {
		var loans int
		if err := c.DB.QueryRow(context.Background(), `SELECT count(*) FROM `+table("loan")+` l JOIN `+table("item")+` i ON i.id = l.item_id
			WHERE i.jsonb->>'barcode' = $1 AND l.status_name = 'Open'`, o.item).Scan(&loans); err != nil {
			t.Fatalf("count loans: %v", err)
		}
		switch {
		case o.status == http.StatusCreated:
			var loan struct{ ID string }
			_ = json.Unmarshal([]byte(o.body), &loan)
			created = append(created, loan.ID)
			if loans != 1 {
				t.Errorf("item %s: check-out answered 201 but has %d open loans", o.item, loans)
			}
		case clear(o.start, o.end):
			failedAfter++
			t.Errorf("item %s: a check-out that overlapped no kill failed: %d %s", o.item, o.status, o.body)
		default:
			inFlightFailed++
			if loans != 0 {
				t.Errorf("item %s: check-out answered %d but has %d open loans", o.item, o.status, loans)
			}
		}
	}
	probesFailed := 0
	for _, p := range probes {
		if p.status >= 300 && clear(p.start, p.end) {
			probesFailed++
			t.Errorf("storage's %s, which overlapped no kill, failed: %d %s", p.call, p.status, p.body)
		}
	}
	violations := c.Violations(harness.Invariants{ItemLimit: perPatron, Created: created})
	summary(t, len(outcomes), len(created), 0, len(violations),
		fmt.Sprintf("kills=%d failed_clear_of_kills=%d failed_overlapping_a_kill=%d storage_calls=%d storage_calls_failed_clear_of_kills=%d",
			rounds, failedAfter, inFlightFailed, len(probes), probesFailed))
	if len(violations) > 0 {
		t.Fatalf("invariant violations: %v", violations)
	}
}
