package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/checkoutlock/integration-tests/harness"
)

// metric reads one sample from a process's /metrics (0 when absent).
func metric(t *testing.T, c *harness.Cluster, p *harness.Process, series string) float64 {
	t.Helper()
	v, _ := c.Metric(t, p, series)
	return v
}

// liveLocks counts live lock rows in the tenant.
func liveLocks(t *testing.T, c *harness.Cluster) int {
	t.Helper()
	var n int
	if err := c.DB.QueryRow(context.Background(), `SELECT count(*) FROM `+
		pgx.Identifier{c.Schema, "check_out_lock"}.Sanitize()+` WHERE expires_at > now()`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func itemStatus(t *testing.T, c *harness.Cluster, barcode string) string {
	t.Helper()
	var page struct {
		Items []struct {
			Status struct{ Name string } `json:"status"`
		} `json:"items"`
	}
	c.Do(c.Storage, "GET", "/item-storage/items?barcode="+barcode, nil).Want(t, http.StatusOK).Decode(t, &page)
	if len(page.Items) != 1 {
		t.Fatalf("item %s not found", barcode)
	}
	return page.Items[0].Status.Name
}

// TestFaultStorageUnreachableWhileAcquiring: storage goes away while a
// check-out waits there for a held lock. The check-out retries on its
// interval schedule, answers a clean 503, nothing is written, and once
// storage is back the check-out succeeds.
func TestFaultStorageUnreachableWhileAcquiring(t *testing.T) {
	t.Parallel()
	// The first wait at storage (5 s) outlasts the test's look at it and
	// the cut, however slowly they run.
	c := harness.NewCluster(t, harness.Options{Circulations: 1, FeatureOn: true, RetryIntervalMs: "5000|300|300", StorageProxy: true})
	lib := c.SetupLibrary(1, 2, 5)
	patron, item := lib.Patrons[0], lib.Items[0][0]
	var lock struct{ ID string }
	c.Do(c.Storage, "POST", "/check-out-lock-storage", map[string]any{"userId": patronID(t, c, patron), "ttlMs": 60000}).
		Want(t, http.StatusCreated).Decode(t, &lock)

	result := make(chan harness.Response, 1)
	go func() { result <- c.CheckOut(0, item, patron) }()
	// The first attempt found the lock held: the check-out now waits at
	// storage for it.
	waitFor(t, "the check-out to wait at storage", func() bool { return metric(t, c, c.Storage, "checkout_lock_waiters") == 1 })
	c.StorageProxy.Refuse(true)
	c.StorageProxy.Cut()

	r := <-result
	if r.Status != http.StatusServiceUnavailable || len(r.ErrorCodes()) != 1 || r.ErrorCodes()[0] != "STORAGE_UNAVAILABLE" {
		t.Fatalf("check-out with storage unreachable: %d %s, want 503 STORAGE_UNAVAILABLE", r.Status, r.Body)
	}
	if n := c.OpenLoans(t, patron); n != 0 {
		t.Errorf("%d open loans, want 0", n)
	}
	if s := itemStatus(t, c, item); s != "Available" {
		t.Errorf("item status %q, want Available", s)
	}

	c.StorageProxy.Refuse(false)
	c.Do(c.Storage, "DELETE", "/check-out-lock-storage/"+lock.ID, nil).Want(t, http.StatusNoContent)
	c.CheckOut(0, item, patron).Want(t, http.StatusCreated)
	c.CheckInvariants(t, harness.Invariants{ItemLimit: 5})
	summary(t, 2, 1, 0, 0, "first=503 STORAGE_UNAVAILABLE after_recovery=201")
}

// loanNamed is the loan a 503 answer names (loanId): a check-out whose
// outcome is not known; "" for none.
func loanNamed(r harness.Response) string {
	var env struct {
		Errors []struct {
			Parameters []struct{ Key, Value string }
		}
	}
	_ = json.Unmarshal(r.Body, &env)
	for _, e := range env.Errors {
		for _, p := range e.Parameters {
			if p.Key == "loanId" {
				return p.Value
			}
		}
	}
	return ""
}

// TestFaultDatabaseCutDuringCheckOuts cuts every connection between storage
// and PostgreSQL, repeatedly, then refuses new ones for a while, in the
// middle of a burst of check-outs. Requests fail cleanly (422 or 503, never
// 500 or no answer), the service recovers by itself, and nothing is half
// written: every 201 is exactly one loan, every loan stored was answered
// 201 or by a 503 naming it (its outcome not known: its first send may
// still have been at storage), no item is left checked out
// without one, and every item's request (each item but the first patron's,
// kept for after the outage, is held for the patron who checks it out) is
// filled if and only if its loan was made (the invariants).
func TestFaultDatabaseCutDuringCheckOuts(t *testing.T) {
	t.Parallel()
	c := harness.NewCluster(t, harness.Options{Circulations: 2, FeatureOn: true, DBProxy: true, RetryIntervalMs: "50|100|200|400|800"})
	const patrons, perPatron, limit = 20, 5, 3
	lib := c.SetupLibrary(patrons, perPatron, limit)
	for p := 1; p < patrons; p++ {
		for i := range perPatron {
			c.Request(t, lib.Items[p][i], lib.Patrons[p], 1)
		}
	}

	var mu sync.Mutex
	var created, unknown []string
	statuses := map[int]int{}
	var wg sync.WaitGroup
	start := make(chan struct{})
	for p := range patrons {
		for i := range perPatron {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				// Spread the burst over the fault window.
				time.Sleep(time.Duration(p*perPatron+i) * 8 * time.Millisecond)
				r := c.CheckOut(p+i, lib.Items[p][i], lib.Patrons[p])
				mu.Lock()
				defer mu.Unlock()
				statuses[r.Status]++
				switch r.Status {
				case http.StatusCreated:
					var loan struct{ ID string }
					_ = json.Unmarshal(r.Body, &loan)
					created = append(created, loan.ID)
				case http.StatusServiceUnavailable:
					// Its outcome not known (its write sent again and
					// answered nothing it could go by): it names the loan,
					// which may be stored or not.
					if id := loanNamed(r); id != "" {
						unknown = append(unknown, id)
					}
				}
			}()
		}
	}
	close(start)
	for range 3 {
		time.Sleep(150 * time.Millisecond) // the fault schedule, not a wait for an event
		c.DBProxy.Cut()
	}
	c.DBProxy.Refuse(true)
	c.DBProxy.Cut()
	time.Sleep(400 * time.Millisecond) // the outage's length
	c.DBProxy.Refuse(false)
	wg.Wait()

	for status, n := range statuses {
		if status != http.StatusCreated && status != http.StatusUnprocessableEntity && status != http.StatusServiceUnavailable {
			t.Errorf("%d answers with status %d; failures must be clean 422 or 503", n, status)
		}
	}
	waitFor(t, "storage ready again", func() bool {
		return c.DoWith(c.Storage, "GET", "/admin/ready", nil, nil).Status == http.StatusOK
	})
	// Recovered by itself: storage writes again, and a patron with room
	// under the limit checks out.
	c.Do(c.Storage, "POST", "/users", map[string]any{"barcode": "after-outage", "active": true,
		"patronGroup": patronGroupOf(t, c), "personal": map[string]any{"lastName": "After"}}).Want(t, http.StatusCreated)
	for i := range perPatron {
		if r := c.CheckOut(0, lib.Items[0][i], "after-outage"); r.Status == http.StatusCreated {
			var loan struct{ ID string }
			_ = json.Unmarshal(r.Body, &loan)
			created = append(created, loan.ID)
			break
		} else if i == perPatron-1 {
			t.Fatalf("no check-out succeeded after the outage: last answer %d %s", r.Status, r.Body)
		}
	}
	// A release lost in the outage leaves a lock that expires by itself.
	waitFor(t, "every lock released or expired", func() bool { return liveLocks(t, c) == 0 })
	violations := c.Violations(harness.Invariants{ItemLimit: limit, Created: created, Unknown: unknown})
	var filled int
	if err := c.DB.QueryRow(context.Background(), `SELECT count(*) FROM `+pgx.Identifier{c.Schema, "request"}.Sanitize()+
		` WHERE status = 'Closed - Filled'`).Scan(&filled); err != nil {
		t.Fatal(err)
	}
	summary(t, patrons*perPatron, statuses[http.StatusCreated], statuses[http.StatusUnprocessableEntity], len(violations),
		fmt.Sprintf("unavailable=%d (%d naming their loan, outcome not known) requests_filled=%d", statuses[http.StatusServiceUnavailable], len(unknown), filled))
	if len(violations) > 0 {
		t.Fatalf("invariant violations: %v", violations)
	}
}

// TestFaultCirculationKilledHoldingLock: an instance is killed (SIGKILL)
// while it holds a patron's lock, acquired by a call of its own (against a
// storage that cannot wait, LOCK_WAIT_AT_STORAGE=false: a check-out whose
// write acquires its lock holds it only inside that call, and storage
// gives back what a vanished caller took). The lock outlives it, refusing
// the patron's check-outs elsewhere, until its TTL passes; then the
// patron's next check-out succeeds, and nothing the killed one started is
// left.
func TestFaultCirculationKilledHoldingLock(t *testing.T) {
	t.Parallel()
	c := harness.NewCluster(t, harness.Options{Circulations: 2, FeatureOn: true, LockTTLMs: 5000,
		RetryIntervalMs: "20|20", StorageProxy: true, CirculationEnv: []string{"LOCK_WAIT_AT_STORAGE=false"}})
	lib := c.SetupLibrary(1, 3, 5)
	patron, items := lib.Patrons[0], lib.Items[0]

	// Slow storage down so instance 1 holds the lock for a while: the lock
	// row is committed, the answer is still on its way when the kill lands.
	// Its write and release are lost in transit, so the lock outlives it
	// however late the kill lands.
	c.StorageProxy.SetLatency(200 * time.Millisecond)
	c.StorageProxy.DropRequests("POST /loan-storage/loans", "DELETE /check-out-lock-storage/")
	go c.CheckOut(0, items[0], patron)
	waitFor(t, "instance 1 holds the patron's lock", func() bool { return liveLocks(t, c) == 1 })
	c.Circulations[0].Kill()
	c.StorageProxy.SetLatency(0)
	c.StorageProxy.DropRequests()

	r := c.CheckOut(1, items[1], patron)
	if r.Status != http.StatusUnprocessableEntity || r.ErrorCodes()[0] != "UNABLE_TO_ACQUIRE_LOCK" {
		t.Fatalf("check-out while the dead instance's lock lives: %d %s, want 422 unable to acquire lock", r.Status, r.Body)
	}
	waitFor(t, "the dead instance's lock expires", func() bool { return liveLocks(t, c) == 0 })
	c.CheckOut(1, items[1], patron).Want(t, http.StatusCreated)
	if s := itemStatus(t, c, items[0]); s != "Available" {
		t.Errorf("the killed check-out's item is %q, want Available", s)
	}
	c.CheckInvariants(t, harness.Invariants{ItemLimit: 5})
	summary(t, 3, 1, 1, 0, "killed_while_holding=1 refused_during_ttl=1 after_ttl=201")
}

// TestFaultReleaseFails: a check-out's write and then the release (DELETE)
// of its lock are lost in transit (a write that succeeds releases the lock
// itself; one that fails leaves the check-out to release it), the lock
// acquired by a call of its own (an instance against a storage that cannot
// wait, LOCK_WAIT_AT_STORAGE=false). The check-out answers 503 and writes
// nothing; the lock stays until its TTL, so the patron's next check-out,
// through an instance whose write acquires its lock, waits for it at
// storage, is woken when it expires, and succeeds, in one attempt.
func TestFaultReleaseFails(t *testing.T) {
	t.Parallel()
	// The lock lives 5 s, so it is surely still held when the test looks
	// at it and sends the next check-out, which may wait 6 s for it. The
	// waiters' safety-net poll is slower than that, so that only the stale
	// lock's expiry can wake the wait: with the default 250 ms poll, a poll
	// landing just after the expiry takes the lock first on a loaded
	// machine.
	c := harness.NewCluster(t, harness.Options{Circulations: 1, FeatureOn: true, LockTTLMs: 5000,
		RetryIntervalMs: "3000|3000", StorageProxy: true,
		StorageEnv: []string{"LOCK_WAIT_POLL_INTERVAL=10s", "LOCK_WAIT_POLL_UNLISTENED=10s"}})
	lib := c.SetupLibrary(1, 2, 5)
	patron, items := lib.Patrons[0], lib.Items[0]
	circ := c.Circulations[0]
	// The lost write is sent again with its id for a second, well within
	// the lock's lifetime.
	polling := c.AddCirculations(1, "LOCK_WAIT_AT_STORAGE=false", "WRITE_SETTLE_TIMEOUT=1s")[0]

	c.StorageProxy.DropRequests("POST /loan-storage/loans", "DELETE /check-out-lock-storage/")
	c.Do(polling, "POST", "/circulation/check-out-by-barcode", map[string]string{"itemBarcode": items[0], "userBarcode": patron,
		"servicePointId": harness.ServicePoint}).Want(t, http.StatusServiceUnavailable)
	c.StorageProxy.DropRequests()
	if n := c.OpenLoans(t, patron); n != 0 {
		t.Fatalf("%d open loans after the lost write, want none", n)
	}
	if got := metric(t, c, polling, `checkout_lock_releases_total{result="failed"}`); got != 1 {
		t.Errorf("release failures counted: %v, want 1", got)
	}
	if n := liveLocks(t, c); n != 1 {
		t.Fatalf("%d live locks after the lost release, want 1 (it expires by itself)", n)
	}

	attempts := `checkout_lock_attempts_sum`
	expiry := `checkout_lock_wakeups_total{cause="expiry"}`
	before, expiryBefore := metric(t, c, circ, attempts), metric(t, c, c.Storage, expiry)
	c.CheckOut(0, items[1], patron).Want(t, http.StatusCreated)
	if got := metric(t, c, circ, attempts) - before; got != 1 {
		t.Errorf("the next check-out made %v lock attempts, want 1 that waited", got)
	}
	if got := metric(t, c, c.Storage, expiry) - expiryBefore; got < 1 {
		t.Errorf("expiry wake-ups %v, want the stale lock's expiry to wake the waiter", got)
	}
	c.CheckInvariants(t, harness.Invariants{ItemLimit: 5})
	summary(t, 2, 1, 0, 0, "write_lost=1 release_failures=1 next_checkout_waited_for_ttl=true")
}

// TestFaultStorageRestartUnderLoad restarts storage (SIGTERM, start again)
// in the middle of a stream of check-outs: no loan is lost or duplicated.
func TestFaultStorageRestartUnderLoad(t *testing.T) {
	t.Parallel()
	c := harness.NewCluster(t, harness.Options{Circulations: 3, FeatureOn: true, RetryIntervalMs: "100|200|400|800"})
	const perPatron, limit = 4, 2
	patrons := scaled(30)
	lib := c.SetupLibrary(patrons, perPatron, limit)

	var mu sync.Mutex
	var created []string
	statuses := map[int]int{}
	done := 0
	halfway := make(chan struct{})
	var wg sync.WaitGroup
	work := make(chan [2]int)
	for w := range 12 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for job := range work {
				p, i := job[0], job[1]
				r := c.CheckOut(w, lib.Items[p][i], lib.Patrons[p])
				mu.Lock()
				statuses[r.Status]++
				if r.Status == http.StatusCreated {
					var loan struct{ ID string }
					_ = json.Unmarshal(r.Body, &loan)
					created = append(created, loan.ID)
				}
				done++
				if done == patrons*perPatron/3 {
					close(halfway)
				}
				mu.Unlock()
			}
		}()
	}
	go func() {
		for p := range patrons {
			for i := range perPatron {
				work <- [2]int{p, i}
			}
		}
		close(work)
	}()
	<-halfway
	c.Storage.Restart()
	wg.Wait()

	for status, n := range statuses {
		if status != http.StatusCreated && status != http.StatusUnprocessableEntity && status != http.StatusServiceUnavailable {
			t.Errorf("%d answers with status %d; failures must be clean 422 or 503", n, status)
		}
	}
	waitFor(t, "every lock released or expired", func() bool { return liveLocks(t, c) == 0 })
	violations := c.Violations(harness.Invariants{ItemLimit: limit, Created: created})
	summary(t, patrons*perPatron, statuses[http.StatusCreated], statuses[http.StatusUnprocessableEntity], len(violations),
		fmt.Sprintf("unavailable=%d storage_restarts=1", statuses[http.StatusServiceUnavailable]))
	if len(violations) > 0 {
		t.Fatalf("invariant violations: %v", violations)
	}
}

// patronGroupOf returns the id of the cluster's one patron group.
func patronGroupOf(t *testing.T, c *harness.Cluster) string {
	t.Helper()
	var page struct {
		Groups []struct{ ID string } `json:"usergroups"`
	}
	c.Do(c.Storage, "GET", "/groups", nil).Want(t, http.StatusOK).Decode(t, &page)
	if len(page.Groups) == 0 {
		t.Fatal("no patron group")
	}
	return page.Groups[0].ID
}
