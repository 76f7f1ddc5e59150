package integration

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/checkoutlock/integration-tests/harness"
	"github.com/checkoutlock/schemas"
)

// The waiting acquisition across real storage instances: a request that
// finds a patron's lock held waits, and is woken by the release (announced
// by the releasing transaction, heard by every instance's listener), by the
// holder's expiry, or, as a safety net, by polling.

// lockBody is an acquisition for user under id, waiting up to waitMs.
func lockBody(user, id string, ttlMs, waitMs int) map[string]any {
	b := map[string]any{"userId": user, "id": id, "ttlMs": ttlMs}
	if waitMs > 0 {
		b["waitMs"] = waitMs
	}
	return b
}

// wakeups reads a storage instance's wake-up counters.
func wakeups(t *testing.T, c *harness.Cluster, p *harness.Process) map[string]float64 {
	t.Helper()
	out := map[string]float64{}
	for _, cause := range []string{"release", "expiry", "poll"} {
		out[cause] = metric(t, c, p, fmt.Sprintf(`checkout_lock_wakeups_total{cause=%q}`, cause))
	}
	return out
}

func waitListening(t *testing.T, c *harness.Cluster, ps ...*harness.Process) {
	t.Helper()
	for _, p := range ps {
		waitFor(t, p.Name+"'s listener to listen", func() bool { return metric(t, c, p, "checkout_lock_listener_up") == 1 })
	}
}

// TestWaiterWokenByReleaseOnAnotherInstance: a lock held through storage A,
// a waiter on storage B, the lock released through A: B's waiter is granted
// it, woken by the release's notification. Polling is set to a minute, so
// nothing else could have woken it in time.
func TestWaiterWokenByReleaseOnAnotherInstance(t *testing.T) {
	t.Parallel()
	c := harness.NewCluster(t, harness.Options{Circulations: 1, Storages: 2, StorageEnv: []string{"LOCK_WAIT_POLL_INTERVAL=1m"}})
	a, b := c.Storages[0], c.Storages[1]
	waitListening(t, c, a, b)
	var latencies []time.Duration
	const rounds = 5
	for range rounds {
		user, holder := uuid.NewString(), uuid.NewString()
		c.Do(a, "POST", "/check-out-lock-storage", lockBody(user, holder, 60000, 0)).Want(t, http.StatusCreated)
		waiter := uuid.NewString()
		result := make(chan harness.Response, 1)
		go func() { result <- c.Do(b, "POST", "/check-out-lock-storage", lockBody(user, waiter, 60000, 20000)) }()
		waitFor(t, "the waiter to wait on B", func() bool { return metric(t, c, b, "checkout_lock_waiters") == 1 })
		released := time.Now()
		c.Do(a, "DELETE", "/check-out-lock-storage/"+holder, nil).Want(t, http.StatusNoContent)
		r := <-result
		latencies = append(latencies, time.Since(released))
		var got struct{ ID string }
		r.Want(t, http.StatusCreated).Decode(t, &got)
		if got.ID != waiter {
			t.Fatalf("waiter granted lock %s, want its own id %s", got.ID, waiter)
		}
		c.Do(b, "DELETE", "/check-out-lock-storage/"+waiter, nil).Want(t, http.StatusNoContent)
	}
	w := wakeups(t, c, b)
	if w["release"] != rounds || w["poll"] != 0 || w["expiry"] != 0 {
		t.Errorf("B's wake-ups %v, want %d by release and none by poll or expiry", w, rounds)
	}
	slices.Sort(latencies)
	summary(t, rounds, rounds, 0, 0, fmt.Sprintf("release_to_grant_median=%s max=%s wakeups=%v",
		latencies[rounds/2].Round(100*time.Microsecond), latencies[rounds-1].Round(100*time.Microsecond), w))
}

// TestWaiterWokenByExpiry: a holder that never releases; the waiter on the
// other instance is granted the lock once it expires, woken by a timer set
// to the expiry (no statement announces it).
func TestWaiterWokenByExpiry(t *testing.T) {
	t.Parallel()
	c := harness.NewCluster(t, harness.Options{Circulations: 1, Storages: 2, StorageEnv: []string{"LOCK_WAIT_POLL_INTERVAL=1m"}})
	a, b := c.Storages[0], c.Storages[1]
	waitListening(t, c, a, b)
	user := uuid.NewString()
	var holder struct{ ExpiresAt time.Time }
	// The holder's lock lives long enough for B to find it held and set
	// its timer, however slowly this machine runs those steps.
	c.Do(a, "POST", "/check-out-lock-storage", lockBody(user, uuid.NewString(), 3000, 0)).Want(t, http.StatusCreated).Decode(t, &holder)
	start := time.Now()
	r := c.Do(b, "POST", "/check-out-lock-storage", lockBody(user, uuid.NewString(), 60000, 20000))
	waited := time.Since(start)
	var got struct{ CreationDate time.Time }
	r.Want(t, http.StatusCreated).Decode(t, &got)
	if got.CreationDate.Before(holder.ExpiresAt) {
		t.Errorf("granted at %s, before the holder's expiry %s", got.CreationDate, holder.ExpiresAt)
	}
	if w := wakeups(t, c, b); w["expiry"] < 1 || w["release"] != 0 || w["poll"] != 0 {
		t.Errorf("B's wake-ups %v, want one by expiry and none by release or poll", w)
	}
	summary(t, 1, 1, 0, 0, fmt.Sprintf("waited=%s holder_ttl=3000ms", waited.Round(time.Millisecond)))
}

// TestListenerLossIsSurvived: the release listener's session is killed
// (pg_terminate_backend) and then cut off from PostgreSQL for a while.
// Waiters are served all along, by polling while no notification can
// arrive; the listener reconnects by itself, and wake-ups come by
// notification again.
func TestListenerLossIsSurvived(t *testing.T) {
	t.Parallel()
	// The lock is released through A and waited for on B, whose listener
	// is what can wake the waiter (a release wakes the waiters of its own
	// instance at once, without the listener).
	c := harness.NewCluster(t, harness.Options{Circulations: 1, Storages: 2, ListenProxy: true,
		StorageEnv: []string{"LOCK_WAIT_POLL_INTERVAL=1m", "LOCK_WAIT_POLL_UNLISTENED=50ms"}})
	a, s := c.Storages[0], c.Storages[1]
	waitListening(t, c, s)
	handOff := func() harness.Response {
		t.Helper()
		user, holder := uuid.NewString(), uuid.NewString()
		c.Do(a, "POST", "/check-out-lock-storage", lockBody(user, holder, 60000, 0)).Want(t, http.StatusCreated)
		result := make(chan harness.Response, 1)
		go func() {
			result <- c.Do(s, "POST", "/check-out-lock-storage", lockBody(user, uuid.NewString(), 60000, 10000))
		}()
		waitFor(t, "the waiter to wait", func() bool { return metric(t, c, s, "checkout_lock_waiters") == 1 })
		c.Do(a, "DELETE", "/check-out-lock-storage/"+holder, nil).Want(t, http.StatusNoContent)
		return (<-result).Want(t, http.StatusCreated)
	}

	// Killed: the listener notices, reconnects and listens again.
	var killed int
	err := c.DB.QueryRow(context.Background(),
		`SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = $1`,
		harness.ListenerName(c.Tenant, 1)).Scan(&killed)
	if err != nil || killed != 1 {
		t.Fatalf("terminate the listener's session: %d killed, %v", killed, err)
	}
	waitFor(t, "the listener to reconnect", func() bool {
		return metric(t, c, s, "checkout_lock_listener_reconnects_total") >= 1 && metric(t, c, s, "checkout_lock_listener_up") == 1
	})
	before := wakeups(t, c, s)
	handOff()
	if w := wakeups(t, c, s); w["release"] != before["release"]+1 {
		t.Errorf("after the reconnect: wake-ups %v (before %v), want one more by release", w, before)
	}

	// Cut off: no notification can arrive; waiters are served by polling.
	c.ListenProxy.Refuse(true)
	c.ListenProxy.Cut()
	waitFor(t, "the listener to be down", func() bool { return metric(t, c, s, "checkout_lock_listener_up") == 0 })
	before = wakeups(t, c, s)
	handOff()
	if w := wakeups(t, c, s); w["poll"] <= before["poll"] || w["release"] != before["release"] {
		t.Errorf("while cut off: wake-ups %v (before %v), want the waiter served by polling", w, before)
	}

	// Back: notifications again.
	c.ListenProxy.Refuse(false)
	waitListening(t, c, s)
	before = wakeups(t, c, s)
	handOff()
	if w := wakeups(t, c, s); w["release"] != before["release"]+1 {
		t.Errorf("after the cut: wake-ups %v (before %v), want one more by release", w, before)
	}
	summary(t, 3, 3, 0, 0, fmt.Sprintf("reconnects=%.0f", metric(t, c, s, "checkout_lock_listener_reconnects_total")))
}

// TestLocalReleaseWakesAtOnce: a release wakes the waiters of its own
// storage instance at once, without the round trip of its notification:
// with the listener cut off and polling set to a minute, the waiter is
// still granted the lock as it is released, woken by "release".
func TestLocalReleaseWakesAtOnce(t *testing.T) {
	t.Parallel()
	c := harness.NewCluster(t, harness.Options{Circulations: 1, ListenProxy: true,
		StorageEnv: []string{"LOCK_WAIT_POLL_INTERVAL=1m", "LOCK_WAIT_POLL_UNLISTENED=1m"}})
	s := c.Storage
	waitListening(t, c, s)
	c.ListenProxy.Refuse(true)
	c.ListenProxy.Cut()
	waitFor(t, "the listener to be down", func() bool { return metric(t, c, s, "checkout_lock_listener_up") == 0 })
	user, holder, waiter := uuid.NewString(), uuid.NewString(), uuid.NewString()
	c.Do(s, "POST", "/check-out-lock-storage", lockBody(user, holder, 60000, 0)).Want(t, http.StatusCreated)
	result := make(chan harness.Response, 1)
	go func() { result <- c.Do(s, "POST", "/check-out-lock-storage", lockBody(user, waiter, 60000, 20000)) }()
	waitFor(t, "the waiter to wait", func() bool { return metric(t, c, s, "checkout_lock_waiters") == 1 })
	before := wakeups(t, c, s)
	released := time.Now()
	c.Do(s, "DELETE", "/check-out-lock-storage/"+holder, nil).Want(t, http.StatusNoContent)
	var got struct{ ID string }
	(<-result).Want(t, http.StatusCreated).Decode(t, &got)
	took := time.Since(released)
	if got.ID != waiter {
		t.Fatalf("granted %s, want the waiter's %s", got.ID, waiter)
	}
	if w := wakeups(t, c, s); w["release"] != before["release"]+1 || w["poll"] != before["poll"] {
		t.Errorf("wake-ups %v (before %v), want one more by release and none by poll", w, before)
	}
	summary(t, 2, 2, 0, 0, fmt.Sprintf("release_to_grant=%s listener_up=0", took.Round(100*time.Microsecond)))
}

// TestManyWaitersOneHolderAtATime: 100 acquisitions for one patron at once,
// over two storage instances, each releasing right after it acquires. Every
// one acquires exactly once, none times out, and there are never two
// holders at a time. Three rounds.
func TestManyWaitersOneHolderAtATime(t *testing.T) {
	t.Parallel()
	// A hundred acquisitions at once open every connection its two
	// storage instances may (sixty): the test run's PostgreSQL allows
	// enough for the clusters beside it (scripts/test-postgres.sh).
	c := harness.NewCluster(t, harness.Options{Circulations: 1, Storages: 2})
	waitListening(t, c, c.Storages...)
	const waiters = 100
	rounds := scaled(3)
	for round := range rounds {
		user := uuid.NewString()
		var holders, overlaps atomic.Int64
		var wg sync.WaitGroup
		answers := make([]int, waiters)
		// refused keeps the first answer other than 201, and the first
		// release other than 204, for the failure's message.
		var refused sync.Map
		start := time.Now()
		for i := range waiters {
			wg.Add(1)
			go func() {
				defer wg.Done()
				s := c.Storages[i%2]
				id := uuid.NewString()
				r := c.Do(s, "POST", "/check-out-lock-storage", lockBody(user, id, 10000, 20000))
				answers[i] = r.Status
				if r.Status != http.StatusCreated {
					refused.LoadOrStore("acquire", fmt.Sprintf("%d %s (err %v)", r.Status, r.Body, r.Err))
					return
				}
				if holders.Add(1) > 1 {
					overlaps.Add(1)
				}
				holders.Add(-1)
				if d := c.Do(s, "DELETE", "/check-out-lock-storage/"+id, nil); d.Status != http.StatusNoContent {
					refused.LoadOrStore("release", fmt.Sprintf("%d %s (err %v)", d.Status, d.Body, d.Err))
				}
			}()
		}
		wg.Wait()
		took := time.Since(start)
		granted := 0
		for _, s := range answers {
			if s == http.StatusCreated {
				granted++
			}
		}
		first := func(what string) any { v, _ := refused.Load(what); return v }
		if granted != waiters || overlaps.Load() != 0 {
			t.Fatalf("round %d after %s: %d of %d granted, %d overlaps; answers %v; first refusal %v",
				round, time.Since(start).Round(time.Millisecond), granted, waiters, overlaps.Load(), answers, first("acquire"))
		}
		if n := liveLocks(t, c); n != 0 {
			t.Fatalf("round %d: %d live locks left; first failed release %v", round, n, first("release"))
		}
		summary(t, waiters, granted, 0, int(overlaps.Load()), fmt.Sprintf("round=%d took=%s", round, took.Round(time.Millisecond)))
	}
}

// TestGoneWaiterLeavesNoLock: a waiter whose client goes away stops
// waiting and gets nothing; and when its client goes away while the lock is
// being granted to it (the grant statement slowed by latency between
// storage and PostgreSQL), the lock is released at once, not left to
// expire.
func TestGoneWaiterLeavesNoLock(t *testing.T) {
	t.Parallel()
	c := harness.NewCluster(t, harness.Options{Circulations: 1, DBProxy: true})
	s := c.Storage
	waitListening(t, c, s)
	wait := func(ctx context.Context, user string) chan harness.Response {
		result := make(chan harness.Response, 1)
		go func() {
			req, _ := http.NewRequestWithContext(ctx, "POST", s.URL()+"/check-out-lock-storage",
				strings.NewReader(fmt.Sprintf(`{"userId":%q,"ttlMs":60000,"waitMs":20000}`, user)))
			req.Header.Set("X-Okapi-Tenant", c.Tenant)
			req.Header.Set("X-Okapi-Token", c.Token(schemas.RoleTenantAdmin))
			req.Header.Set("Content-Type", "application/json")
			res, err := http.DefaultClient.Do(req)
			if err == nil {
				body, _ := io.ReadAll(res.Body)
				res.Body.Close()
				result <- harness.Response{Status: res.StatusCode, Body: body}
				return
			}
			result <- harness.Response{Err: err}
		}()
		return result
	}
	hold := func(user string) string {
		var l struct{ ID string }
		c.Do(s, "POST", "/check-out-lock-storage", lockBody(user, uuid.NewString(), 60000, 0)).Want(t, http.StatusCreated).Decode(t, &l)
		return l.ID
	}

	// Gone before the release: it stops waiting, and the release grants
	// it nothing.
	user := uuid.NewString()
	holder := hold(user)
	ctx, cancel := context.WithCancel(t.Context())
	result := wait(ctx, user)
	waitFor(t, "the waiter to wait", func() bool { return metric(t, c, s, "checkout_lock_waiters") == 1 })
	cancel()
	if r := <-result; r.Err == nil {
		t.Fatalf("cancelled waiter answered %d", r.Status)
	}
	waitFor(t, "the gone waiter to stop waiting", func() bool { return metric(t, c, s, "checkout_lock_waiters") == 0 })
	c.Do(s, "DELETE", "/check-out-lock-storage/"+holder, nil).Want(t, http.StatusNoContent)
	if n := liveLocks(t, c); n != 0 {
		t.Fatalf("%d live locks after the gone waiter's patron was released, want 0", n)
	}

	// Gone while being granted: the grant statement takes a round trip of
	// 2 × 300 ms; the client leaves in the middle of it. A client that was
	// still there when the grant came back (the test ran too slowly to
	// leave in time), or one the server answered before it saw the client
	// leave, got the lock: it proves nothing, so the lock is released and
	// the round is tried again.
	const rounds = 3
	for round, tries := 0, 0; round < rounds; tries++ {
		if tries == 3*rounds {
			t.Fatalf("in %d tries, the client left before its grant came back only %d times", tries, round)
		}
		user := uuid.NewString()
		holder := hold(user)
		ctx, cancel := context.WithCancel(t.Context())
		result := wait(ctx, user)
		waitFor(t, "the waiter to wait", func() bool { return metric(t, c, s, "checkout_lock_waiters") == 1 })
		gone := metric(t, c, s, "checkout_lock_grants_to_gone_clients_total")
		c.DBProxy.SetLatency(300 * time.Millisecond)
		// The release commits, the waiter is notified and sends its grant
		// statement; the DELETE's own answer comes back after the
		// latency, and the client leaves while the grant is in flight.
		c.Do(s, "DELETE", "/check-out-lock-storage/"+holder, nil).Want(t, http.StatusNoContent)
		cancel()
		r := <-result
		c.DBProxy.SetLatency(0)
		if r.Err == nil {
			var granted struct{ ID string }
			r.Want(t, http.StatusCreated).Decode(t, &granted)
			c.Do(s, "DELETE", "/check-out-lock-storage/"+granted.ID, nil).Want(t, http.StatusNoContent)
			continue
		}
		// The client is gone; the server may have answered its grant before
		// it saw the connection close (then it believed the client there:
		// that proves nothing either, and the lock is released as above).
		if !harness.Poll(5*time.Second, 25*time.Millisecond, func() bool {
			return metric(t, c, s, "checkout_lock_grants_to_gone_clients_total") == gone+1
		}) {
			var locks struct{ CheckoutLocks []struct{ ID string } }
			c.Do(s, "GET", "/check-out-lock-storage?userId="+user, nil).Want(t, http.StatusOK).Decode(t, &locks)
			for _, l := range locks.CheckoutLocks {
				c.Do(s, "DELETE", "/check-out-lock-storage/"+l.ID, nil).Want(t, http.StatusNoContent)
			}
			continue
		}
		round++
		waitFor(t, "the lock granted to the gone client to be released", func() bool { return liveLocks(t, c) == 0 })
	}
	summary(t, 1+rounds, 0, 1+rounds, 0, "locks_left=0")
}

// TestWorkloadBurstHandOff (workload 4) is the self-check machine's scene: a
// patron scans ten items at once, the check-outs spread over three
// circulation and two storage instances, with the seed's 500|500|1000. With
// room under the limit all ten go through; at limit 5 exactly five do and
// the other five get the item-limit refusal. Never "unable to acquire
// lock": the lock is handed from one check-out to the next as it is
// released.
//
// Not parallel: every check-out must be served within the seed's retry
// budget, which the parallel tests' load stretched.
func TestWorkloadBurstHandOff(t *testing.T) {
	for _, tc := range []struct {
		name         string
		limit, wants int
	}{{"limit 50", 50, 10}, {"limit 5", 5, 5}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := harness.NewCluster(t, harness.Options{Circulations: 3, Storages: 2, FeatureOn: true, RetryIntervalMs: "500|500|1000"})
			waitListening(t, c, c.Storages...)
			const scans = 10
			rounds := scaled(3)
			lib := c.SetupLibrary(rounds, scans, tc.limit)
			requests, successes, limited := 0, 0, 0
			var slowest time.Duration
			for round := range rounds {
				start := time.Now()
				created := 0
				for _, r := range burst(c, lib.Patrons[round], lib.Items[round]) {
					requests++
					switch {
					case r.Status == http.StatusCreated:
						created++
					case r.Status == http.StatusUnprocessableEntity && slices.Equal(r.ErrorCodes(), []string{"ITEM_LIMIT_LOAN_TYPE"}):
						limited++
					default:
						t.Fatalf("round %d: unexpected answer %d %s", round, r.Status, r.Body)
					}
				}
				slowest = max(slowest, time.Since(start))
				successes += created
				if created != tc.wants {
					t.Fatalf("round %d: %d of %d scans checked out, want %d", round, created, scans, tc.wants)
				}
				if n := c.OpenLoans(t, lib.Patrons[round]); n != tc.wants {
					t.Fatalf("round %d: %d open loans, want %d", round, n, tc.wants)
				}
			}
			violations := c.Violations(harness.Invariants{ItemLimit: tc.limit})
			summary(t, requests, successes, limited, len(violations), fmt.Sprintf("limit=%d slowest_burst=%s", tc.limit, slowest.Round(time.Millisecond)))
			c.CheckInvariants(t, harness.Invariants{ItemLimit: tc.limit})
		})
	}
}

// TestCheckOutWriteWakesTheWaiter: a check-out's write that releases its
// lock with the loan (X-Check-Out-Release-Lock) wakes the patron's waiter
// as a release does: on another storage instance by the notification the
// write's transaction sends, and on the writing instance at once, even
// with its listener cut off. Polling is set to a minute, so nothing else
// could wake either in time.
func TestCheckOutWriteWakesTheWaiter(t *testing.T) {
	t.Parallel()
	c := harness.NewCluster(t, harness.Options{Circulations: 1, Storages: 2, ListenProxy: true,
		StorageEnv: []string{"LOCK_WAIT_POLL_INTERVAL=1m", "LOCK_WAIT_POLL_UNLISTENED=1m"}})
	a, b := c.Storages[0], c.Storages[1]
	waitListening(t, c, a, b)
	lib := c.SetupLibrary(1, 2, 5)
	user := patronID(t, c, lib.Patrons[0])
	// write checks item out to user under lock through a, releasing it.
	write := func(barcode, lock string) {
		var page struct {
			Items []struct {
				ID      string `json:"id"`
				Version int    `json:"_version"`
			} `json:"items"`
		}
		c.Do(a, "GET", "/item-storage/items?barcode="+barcode, nil).Want(t, http.StatusOK).Decode(t, &page)
		now := time.Now().UTC()
		c.DoWith(a, "POST", "/loan-storage/loans", map[string]any{
			"id": uuid.NewString(), "userId": user, "itemId": page.Items[0].ID, "action": "checkedout", "status": map[string]any{"name": "Open"},
			"loanDate": schemas.FormatTime(now), "dueDate": schemas.FormatTime(now.Add(time.Hour)),
		}, c.HeadersWith(schemas.HeaderLockID, lock, schemas.HeaderItemVersion, fmt.Sprint(page.Items[0].Version),
			schemas.HeaderReleaseLock, "true")).Want(t, http.StatusCreated)
		c.Do(a, "GET", "/check-out-lock-storage/"+lock, nil).Want(t, http.StatusNotFound)
	}
	for i, waitOn := range []*harness.Process{b, a} {
		if waitOn == a {
			c.ListenProxy.Refuse(true)
			c.ListenProxy.Cut()
			waitFor(t, "a's listener to be down", func() bool { return metric(t, c, a, "checkout_lock_listener_up") == 0 })
		}
		holder, waiter := uuid.NewString(), uuid.NewString()
		c.Do(a, "POST", "/check-out-lock-storage", lockBody(user, holder, 60000, 0)).Want(t, http.StatusCreated)
		result := make(chan harness.Response, 1)
		go func() {
			result <- c.Do(waitOn, "POST", "/check-out-lock-storage", lockBody(user, waiter, 60000, 20000))
		}()
		waitFor(t, "the waiter to wait on "+waitOn.Name, func() bool { return metric(t, c, waitOn, "checkout_lock_waiters") == 1 })
		before := wakeups(t, c, waitOn)
		written := time.Now()
		write(lib.Items[0][i], holder)
		var got struct{ ID string }
		(<-result).Want(t, http.StatusCreated).Decode(t, &got)
		took := time.Since(written)
		if got.ID != waiter {
			t.Fatalf("granted %s, want the waiter's %s", got.ID, waiter)
		}
		if w := wakeups(t, c, waitOn); w["release"] != before["release"]+1 || w["poll"] != before["poll"] || w["expiry"] != before["expiry"] {
			t.Errorf("%s's wake-ups %v (before %v), want one more by release and none by poll or expiry", waitOn.Name, w, before)
		}
		c.Do(waitOn, "DELETE", "/check-out-lock-storage/"+waiter, nil).Want(t, http.StatusNoContent)
		t.Logf("waiter on %s granted %s after the write", waitOn.Name, took.Round(100*time.Microsecond))
	}
	if n := c.OpenLoans(t, lib.Patrons[0]); n != 2 {
		t.Errorf("%d open loans, want the 2 written", n)
	}
}
