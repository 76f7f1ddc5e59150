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
	"github.com/checkoutlock/schemas"
)

// TestCrashLosesOnlyLocksAndTheFenceRefusesTheirWrites is the safety
// argument for acquiring and releasing locks without waiting for the WAL
// flush (LOCK_SYNCHRONOUS_COMMIT=off, the default), against a PostgreSQL of
// the test's own that it crashes (pg_ctl stop -m immediate), with the WAL
// writer slowed to its maximum and the background writer off so that
// asynchronous commits are still unflushed when it does.
//
// First, locks acquired just before the crash: after the restart, some are
// gone, and every check-out write under a lost lock is refused (409
// LOCK_LOST), while the writes under the locks that survived go through
// (crashed again with other patrons' locks, up to three times, until a
// crash loses some).
// Then a burst of check-outs for many patrons at their limits, crashed
// half-way and resumed after the restart: no patron above the limit, no
// item without its loan, every 201 a loan.
func TestCrashLosesOnlyLocksAndTheFenceRefusesTheirWrites(t *testing.T) {
	t.Parallel()
	pg := harness.StartPostgres(t, "wal_writer_delay=10s", "bgwriter_lru_maxpages=0")
	ctx := context.Background()
	c := harness.NewCluster(t, harness.Options{DatabaseURL: pg.CreateDatabase("circulation"), Circulations: 3, FeatureOn: true})
	const limit, lockers, attempts, bursters = 3, 10, 3, 12
	lib := c.SetupLibrary(attempts*lockers+bursters, 6, limit)

	// Locks acquired right before the crash. A crash may find the WAL
	// flushed past all of them (a synchronous commit of storage's own, the
	// WAL writer woken by a full page, on a loaded machine): then another
	// ten patrons' locks are acquired and the server crashed again, up to
	// attempts times, until one crash loses some.
	type held struct{ patron, lock, item string }
	lost, kept, asked := 0, 0, 0
	for attempt := 0; attempt < attempts && lost == 0; attempt++ {
		var locks []held
		for i := attempt * lockers; i < (attempt+1)*lockers; i++ {
			patron, lock := patronID(t, c, lib.Patrons[i]), uuid.NewString()
			c.Do(c.Storage, "POST", "/check-out-lock-storage", map[string]any{"userId": patron, "id": lock, "ttlMs": 600000}).
				Want(t, http.StatusCreated)
			locks = append(locks, held{patron, lock, itemID(t, c, lib.Items[i][0])})
		}
		pg.Crash()
		pg.Start()
		c.DB.Reset()
		// Storage starts afresh, so that what follows meets the database
		// and not a pooled connection the crash broke (a request on one
		// answers 503, as TestFaultDatabaseCutDuringCheckOuts shows): this
		// part is about what the crash did to the locks.
		c.Storage.Restart()
		waitFor(t, "storage to reach the restarted database", func() bool {
			return c.Do(c.Storage, "GET", "/admin/ready", nil).Status == http.StatusOK
		})
		for _, l := range locks {
			var exists bool
			if err := c.DB.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM `+pgx.Identifier{c.Schema, "check_out_lock"}.Sanitize()+
				` WHERE id = $1)`, l.lock).Scan(&exists); err != nil {
				t.Fatal(err)
			}
			now := time.Now().UTC()
			r := c.DoWith(c.Storage, "POST", "/loan-storage/loans", map[string]any{
				"id": uuid.NewString(), "userId": l.patron, "itemId": l.item, "action": "checkedout", "status": map[string]any{"name": "Open"},
				"loanDate": schemas.FormatTime(now), "dueDate": schemas.FormatTime(now.Add(time.Hour)),
			}, c.HeadersWith(schemas.HeaderLockID, l.lock, schemas.HeaderItemVersion, "1"))
			switch {
			case exists && r.Status == http.StatusCreated:
				kept++
				c.Do(c.Storage, "DELETE", "/check-out-lock-storage/"+l.lock, nil).Want(t, http.StatusNoContent)
			case !exists && r.Status == http.StatusConflict && len(r.ErrorCodes()) == 1 && r.ErrorCodes()[0] == schemas.CodeLockLost:
				lost++
			default:
				t.Fatalf("lock %s (row after the restart: %v): write answered %d %s", l.lock, exists, r.Status, r.Body)
			}
		}
		asked += len(locks)
	}
	if lost == 0 {
		t.Fatalf("%d crashes lost none of the %d locks acquired just before them: the test proves nothing", attempts, asked)
	}

	// A burst for every other patron, crashed half-way, resumed after.
	var mu sync.Mutex
	var created []string
	answers := map[string]int{}
	record := func(rs []harness.Response) {
		mu.Lock()
		defer mu.Unlock()
		for _, r := range rs {
			key := fmt.Sprint(r.Status)
			if r.Err != nil {
				key = "no answer"
			} else if codes := r.ErrorCodes(); len(codes) > 0 {
				key += " " + codes[0]
			}
			answers[key]++
			switch {
			case r.Status == http.StatusCreated:
				var loan struct{ ID string }
				_ = json.Unmarshal(r.Body, &loan)
				created = append(created, loan.ID)
			case r.Err != nil, r.Status >= 500 && r.Status != http.StatusServiceUnavailable:
				t.Errorf("answer %d %s (%v)", r.Status, r.Body, r.Err)
			}
		}
	}
	var wg sync.WaitGroup
	crashed := make(chan struct{})
	first := attempts * lockers // the bursting patrons
	for p := first; p < first+bursters; p++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if p%2 == 1 {
				<-crashed // half the patrons scan after the crash began
			}
			record(burst(c, lib.Patrons[p], lib.Items[p]))
		}()
	}
	waitFor(t, "check-outs before the crash", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(created) >= 6
	})
	pg.Crash()
	close(crashed)
	pg.Start()
	wg.Wait()
	c.DB.Reset()
	waitFor(t, "storage to reach the restarted database", func() bool {
		return c.Do(c.Storage, "GET", "/admin/ready", nil).Status == http.StatusOK
	})
	// Every patron scans again after the restart, until at the limit (a
	// scan meeting a connection the crash broke answers 503).
	for range 5 {
		for p := first; p < first+bursters; p++ {
			if c.OpenLoans(t, lib.Patrons[p]) < limit {
				record(burst(c, lib.Patrons[p], lib.Items[p]))
			}
		}
	}
	// Locks whose release failed in the crash expire by their TTL.
	waitFor(t, "locks left by the crash to expire", func() bool { return liveLocks(t, c) == 0 })
	violations := c.Violations(harness.Invariants{ItemLimit: limit})
	stored := map[string]bool{}
	rows, err := c.DB.Query(ctx, `SELECT id::text FROM `+pgx.Identifier{c.Schema, "loan"}.Sanitize())
	if err != nil {
		t.Fatal(err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range ids {
		stored[id] = true
	}
	for _, id := range created {
		if !stored[id] {
			violations = append(violations, "a 201 answer's loan is not stored: "+id)
		}
	}
	for p := first; p < first+bursters; p++ {
		if n := c.OpenLoans(t, lib.Patrons[p]); n != limit {
			violations = append(violations, fmt.Sprintf("patron %s has %d open loans after scanning its 6 items again and again, want %d", lib.Patrons[p], n, limit))
		}
	}
	summary(t, asked+sumOf(answers), kept+len(created), lost, len(violations),
		fmt.Sprintf("locks_lost_in_crash=%d locks_kept=%d writes_refused_lock_lost=%d burst_answers=%v", lost, kept, lost, answers))
	if len(violations) > 0 {
		t.Fatalf("invariant violations:\n  %v", violations)
	}
}

func sumOf(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}
