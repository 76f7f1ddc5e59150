// Package ha proves that a failover of the database loses no acknowledged
// check-out and never lets a patron past the item limit: both services run
// as OS processes on a three-node PostgreSQL cluster managed by Patroni
// (harness.StartHA), under a workload of check-outs, check-ins, same-patron
// bursts and direct lock traffic, while the primary is switched over,
// killed and cut off the network. make test-ha runs it. The proofs run at
// once, each on a cluster of its own: most of their time is spent waiting
// for Patroni to notice a fault.
package ha

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/checkoutlock/integration-tests/harness"
	"github.com/checkoutlock/schemas"
)

var (
	run     = flag.Bool("ha", false, "run the failover proof (make test-ha): starts etcd and three Patroni-managed PostgreSQL nodes")
	repeats = flag.Int("ha.kills", 3, "how many times the asynchronous run kills its primary")
	latency = flag.Duration("ha.latency", 5*time.Millisecond, "delay, each way, of everything the database nodes send each other")
)

func TestMain(m *testing.M) {
	flag.Parse()
	os.Exit(harness.Main(m))
}

// limit is every patron's item limit.
const limit = 3

// fault is one way of losing the primary, and how to mend it afterwards.
type fault struct {
	name   string
	inject func(t testing.TB, h *harness.HA) (heal func())
}

var (
	switchover = fault{"switchover", func(t testing.TB, h *harness.HA) func() {
		leader := h.Leader(10 * time.Second)
		s, _ := h.State()
		candidate := s.SyncStandby
		if candidate == "" {
			for _, n := range h.Nodes {
				if n != leader {
					candidate = n.Name
					break
				}
			}
		}
		h.Switchover(leader, h.Node(candidate))
		return func() {}
	}}
	kill = fault{"kill", func(t testing.TB, h *harness.HA) func() {
		leader := h.Leader(10 * time.Second)
		leader.Kill()
		return leader.Start
	}}
	partition = fault{"partition", func(t testing.TB, h *harness.HA) func() {
		leader := h.Leader(10 * time.Second)
		leader.Partition(true)
		return func() { leader.Partition(false) }
	}}
)

// TestFailoverSynchronous: with synchronous replication, every fault ends
// with every acknowledged check-out and check-in in the database, no
// patron above the limit at any moment, items and loans in agreement, no
// lock held by two clients at once, and the services answering again
// without a restart.
func TestFailoverSynchronous(t *testing.T) {
	t.Parallel()
	proof(t, true, []fault{switchover, kill, partition})
}

// TestFailoverAsynchronous is the same with asynchronous replication, the
// primary killed again and again: it reports what was lost (acknowledged
// writes that the new primary never received), and fails only if the
// database's invariants break, which the lock's fence must prevent even
// then.
func TestFailoverAsynchronous(t *testing.T) {
	t.Parallel()
	faults := []fault{switchover, partition}
	for range *repeats {
		faults = append(faults, kill)
	}
	proof(t, false, faults)
}

func proof(tt *testing.T, sync bool, faults []fault) {
	if !*run {
		tt.Skip("the failover proof starts a Patroni cluster: make test-ha (go test ./integration-tests/ha -args -ha)")
	}
	t := harness.RepeatFailures(tt)
	h := harness.StartHA(t, sync)
	h.SetReplicationLatency(*latency)
	h.CreateDatabase("circulation")
	c := harness.NewCluster(t, harness.Options{
		DatabaseURL: h.URL("circulation"), Storages: 2, Circulations: 3, FeatureOn: true,
		LockTTLMs: 3000, RetryIntervalMs: "500|500|1000",
	})
	const patrons, bursters, lockers = 24, 6, 3
	lib := c.SetupLibrary(patrons+bursters+lockers, 8, limit)
	w := newWorkload(t, c, lib, patrons, bursters)
	for i, f := range faults {
		r := w.through(t, h, f)
		t.Logf("SUMMARY ha sync=%t replication_latency=%s fault=%d:%s %s", sync, *latency, i+1, f.name, r)
		if r.serverErrors > 0 || r.overLimit > 0 || len(r.violations) > 0 || r.doubleWrites > 0 ||
			(r.lostCheckOuts > 0 || r.lostCheckIns > 0) && sync {
			t.Errorf("fault %s: %s\n  %s", f.name, r, strings.Join(r.violations, "\n  "))
		}
	}
}

// result is what one fault did to the clients and the database.
type result struct {
	// recovery is the time from the fault to the first check-out, sent
	// after the fault was in place, that succeeded (the proof fails when
	// none does in time).
	recovery time.Duration
	// answers counts what the clients were answered from the fault to the
	// recovery, by status and error code.
	answers map[string]int
	// total counts every answer of the phase.
	total int
	// serverErrors counts 5xx answers other than a clean 503, over the
	// whole phase.
	serverErrors int
	// lostCheckOuts are 201 answers whose loan is not in the database;
	// lostCheckIns 200 answers whose loan is not closed.
	lostCheckOuts, lostCheckIns int
	// overLimit counts monitor samples with a patron above the limit.
	overLimit int
	// doubleGrants counts pairs of clients that held one patron's lock at
	// the same time (a grant lost with the primary: lock statements do not
	// wait for the standby, LOCK_SYNCHRONOUS_COMMIT=off); doubleWrites the
	// pairs of those that both wrote under it, which the fence must make
	// zero; fenced the writes under a grant, and refused those the fence
	// refused (LOCK_LOST); lockGrants the grants of the phase.
	doubleGrants, doubleWrites, fenced, refused, lockGrants int
	// reconnects is the storage instances' listener reconnections so far;
	// handOff the time from a release on one storage instance to the
	// waiter's grant on the other, once the cluster is healthy again.
	reconnects float64
	handOff    time.Duration
	// from and to are the primary before the fault and after the
	// recovery.
	from, to string
	// rebuilt names the replicas that did not rejoin by themselves and
	// were rebuilt from the leader (harness.HA.WaitHealthy).
	rebuilt    []string
	violations []string
}

func (r result) String() string {
	keys := make([]string, 0, len(r.answers))
	for k := range r.answers {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var seen []string
	for _, k := range keys {
		seen = append(seen, fmt.Sprintf("%s:%d", k, r.answers[k]))
	}
	return fmt.Sprintf("recovery=%s answers_until_recovered={%s} requests=%d server_errors=%d lost_checkouts=%d lost_checkins=%d over_limit_samples=%d lock_grants=%d fenced_writes=%d refused_lock_lost=%d double_grants=%d double_writes=%d listener_reconnects=%.0f hand_off_after=%s violations=%d",
		r.recovery.Round(time.Millisecond), strings.Join(seen, " "), r.total, r.serverErrors, r.lostCheckOuts, r.lostCheckIns,
		r.overLimit, r.lockGrants, r.fenced, r.refused, r.doubleGrants, r.doubleWrites, r.reconnects, r.handOff.Round(100*time.Microsecond), len(r.violations)) +
		fmt.Sprintf(" primary=%s->%s rebuilt_replicas=[%s]", r.from, r.to, strings.Join(r.rebuilt, " "))
}

// workload drives check-outs and check-ins for many patrons at their
// limits, same-patron bursts, and lock traffic straight to storage.
type workload struct {
	c   *harness.Cluster
	lib harness.Library
	// lib.Patrons[:patrons] take turns; the next bursters burst; the
	// rest are the lockers'.
	patrons, bursters int
	// lockers are the patrons whose locks are taken straight from storage.
	lockers []*locker
}

// locker is a patron whose lock clients take straight from storage, and
// the item they check out and in under it, as a check-out's fenced write
// does.
type locker struct {
	patron, item string
	mu           sync.Mutex
	version      int // the item's _version as last written; 0: read it
}

func newWorkload(t testing.TB, c *harness.Cluster, lib harness.Library, patrons, bursters int) *workload {
	w := &workload{c: c, lib: lib, patrons: patrons, bursters: bursters}
	for p := patrons + bursters; p < len(lib.Patrons); p++ {
		var patron, item string
		err := c.DB.QueryRow(context.Background(), `SELECT (SELECT id::text FROM `+pgx.Identifier{c.Schema, "patron"}.Sanitize()+
			` WHERE barcode = $1), (SELECT id::text FROM `+pgx.Identifier{c.Schema, "item"}.Sanitize()+` WHERE barcode = $2)`,
			lib.Patrons[p], lib.Items[p][0]).Scan(&patron, &item)
		if err != nil {
			t.Fatal(err)
		}
		w.lockers = append(w.lockers, &locker{patron: patron, item: item})
	}
	return w
}

// answer is one client request's outcome.
type answer struct {
	sent, done time.Time
	checkOut   bool
	status     int
	codes      []string
	loanID     string
	err        error
}

// grant is one client's hold of a patron's lock, from the 201 it received
// until it sent the release (or the lock expired, if sooner), and what its
// fenced write did: wrote, or refused because the lock was lost.
type grant struct {
	patron         string
	from, till     time.Time
	wrote, refused bool
}

// through runs the workload for a while, injects the fault, keeps going
// until check-outs succeed again and a while longer, stops, heals the
// cluster and checks the database.
func (w *workload) through(t testing.TB, h *harness.HA, f fault) result {
	ctx, stop := context.WithCancel(context.Background())
	var mu sync.Mutex
	var answers []answer
	var grants []grant
	var wg sync.WaitGroup
	recordAnswer := func(a answer) {
		mu.Lock()
		answers = append(answers, a)
		mu.Unlock()
	}

	// Check-outs and check-ins: eight clients, patrons at random.
	for client := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rnd := rand.New(rand.NewPCG(uint64(client), uint64(time.Now().UnixNano())))
			for n := 0; ctx.Err() == nil; n++ {
				p := rnd.IntN(w.patrons)
				item := w.lib.Items[p][rnd.IntN(len(w.lib.Items[p]))]
				if rnd.IntN(3) == 0 {
					recordAnswer(w.send(n, item, "", false))
				} else {
					recordAnswer(w.send(n, item, w.lib.Patrons[p], true))
				}
			}
		}()
	}
	// Bursts: a patron scans all eight of their items at once; then they
	// are all checked in.
	wg.Add(1)
	go func() {
		defer wg.Done()
		for round := 0; ctx.Err() == nil; round++ {
			p := w.patrons + round%w.bursters
			var bwg sync.WaitGroup
			for i, item := range w.lib.Items[p] {
				bwg.Add(1)
				go func() {
					defer bwg.Done()
					recordAnswer(w.send(i, item, w.lib.Patrons[p], true))
				}()
			}
			bwg.Wait()
			for i, item := range w.lib.Items[p] {
				recordAnswer(w.send(i, item, "", false))
			}
		}
	}()
	// Lock traffic: two clients per locker patron, on both storage
	// instances, each holding the lock for a fenced write and its undoing.
	for l := range 2 * len(w.lockers) {
		lk := w.lockers[l/2]
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				if g, ok := w.holdLock(l, lk); ok {
					mu.Lock()
					grants = append(grants, g)
					mu.Unlock()
				}
			}
		}()
	}
	// The monitor: no patron above the limit and no item that disagrees
	// with its loans, read every 50 ms; reads that fail (the database is
	// failing over) are skipped. The first disagreement is timed and named,
	// so a violation found at the end of the phase can be placed.
	overLimit := 0
	var firstDisagreement time.Time
	var disagreeing string
	monitorDone := make(chan struct{})
	// The clients and the monitor stop with the phase, and also when a
	// wait below fails the test: they must not go on into the next test.
	defer func() {
		stop()
		wg.Wait()
		<-monitorDone
	}()
	go func() {
		defer close(monitorDone)
		pool, err := pgxpool.New(ctx, h.URL("circulation"))
		if err != nil {
			return
		}
		defer pool.Close()
		loan, item := pgx.Identifier{w.c.Schema, "loan"}.Sanitize(), pgx.Identifier{w.c.Schema, "item"}.Sanitize()
		q := `SELECT (SELECT count(*) FROM (SELECT user_id FROM ` + loan + ` WHERE status_name = 'Open' GROUP BY user_id HAVING count(*) > $1) over),
			(SELECT string_agg(i.barcode || ' ' || i.status_name, ', ') FROM ` + item + ` i
			  WHERE (i.status_name = 'Checked out') <> EXISTS (SELECT 1 FROM ` + loan + ` l WHERE l.item_id = i.id AND l.status_name = 'Open'))`
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			qctx, cancel := context.WithTimeout(ctx, time.Second)
			var n int
			var items *string
			if err := pool.QueryRow(qctx, q, limit).Scan(&n, &items); err == nil {
				overLimit += n
				if items != nil && firstDisagreement.IsZero() {
					firstDisagreement, disagreeing = time.Now(), *items
				}
			}
			cancel()
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()

	// Steady load, then the fault.
	waitOnCluster(t, h, 60*time.Second, "check-outs before the fault", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return countCreated(answers, time.Time{}) >= 20
	})
	from := h.Leader(10 * time.Second).Name
	faultAt := time.Now()
	heal := f.inject(t, h)
	// A check-out sent while the fault was being injected (a kill takes a
	// moment) may still have been served by the old primary.
	injected := time.Now()
	var recovered time.Time
	waitOnCluster(t, h, 120*time.Second, "a check-out to succeed after the fault", func() bool {
		mu.Lock()
		defer mu.Unlock()
		for _, a := range answers {
			if a.checkOut && a.status == http.StatusCreated && a.sent.After(injected) &&
				(recovered.IsZero() || a.done.Before(recovered)) {
				recovered = a.done
			}
		}
		return !recovered.IsZero()
	})
	// A while longer, so the recovered cluster is under load too.
	waitOnCluster(t, h, 60*time.Second, "more check-outs after the recovery", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return countCreated(answers, recovered) >= 20
	})
	stop()
	wg.Wait()
	<-monitorDone
	heal()
	rebuiltBefore := len(h.Reinitialized)
	healthy := h.WaitHealthy(180 * time.Second)

	r := result{recovery: recovered.Sub(faultAt), answers: map[string]int{}, overLimit: overLimit, lockGrants: len(grants),
		from: from, to: healthy.Leader, rebuilt: h.Reinitialized[rebuiltBefore:]}
	if r.to == r.from {
		r.violations = append(r.violations, "the primary did not change: "+from)
	}
	var created, closed []string
	for _, a := range answers {
		r.total++
		if a.status >= 500 && a.status != http.StatusServiceUnavailable {
			r.serverErrors++
			r.violations = append(r.violations, fmt.Sprintf("answer %d %v", a.status, a.codes))
		}
		if a.err != nil {
			r.violations = append(r.violations, "no answer: "+a.err.Error())
		}
		if !a.sent.Before(faultAt) && a.done.Before(recovered) {
			key := fmt.Sprint(a.status)
			if a.err != nil {
				key = "no_answer"
			}
			if len(a.codes) > 0 {
				key += "/" + a.codes[0]
			}
			r.answers[key]++
		}
		switch {
		case a.checkOut && a.status == http.StatusCreated:
			created = append(created, a.loanID)
		case !a.checkOut && a.status == http.StatusOK && a.loanID != "":
			closed = append(closed, a.loanID)
		}
	}
	r.doubleGrants, r.doubleWrites = overlapping(grants)
	for _, g := range grants {
		if g.wrote {
			r.fenced++
		}
		if g.refused {
			r.refused++
		}
	}
	if !firstDisagreement.IsZero() {
		r.violations = append(r.violations, fmt.Sprintf("items and loans first disagreed %s after the fault: %s",
			firstDisagreement.Sub(faultAt).Round(time.Millisecond), disagreeing))
	}
	r.lostCheckOuts, r.lostCheckIns = w.lost(t, created, closed)
	// Locks whose release failed during the fault expire by their TTL;
	// then nothing may be left, and items and loans must agree.
	w.c.DB.Reset()
	waitUntil(t, 30*time.Second, "locks left by the fault to expire", func() bool {
		var n int
		err := w.c.DB.QueryRow(context.Background(), `SELECT count(*) FROM `+
			pgx.Identifier{w.c.Schema, "check_out_lock"}.Sanitize()+` WHERE expires_at > now()`).Scan(&n)
		return err == nil && n == 0
	})
	r.violations = append(r.violations, w.c.Violations(harness.Invariants{ItemLimit: limit})...)
	r.reconnects, r.handOff = w.listenersBack(t)
	return r
}

// listenersBack waits for every storage instance's release listener to
// listen again (on the new primary), and checks that a release on one
// instance wakes a waiter on the other by its notification, as before the
// fault. It returns the listeners' reconnections so far and the hand-off's
// time.
func (w *workload) listenersBack(t testing.TB) (reconnects float64, handOff time.Duration) {
	t.Helper()
	for _, s := range w.c.Storages {
		waitUntil(t, 60*time.Second, s.Name+"'s listener to listen again", func() bool {
			up, _ := w.c.Metric(t, s, "checkout_lock_listener_up")
			return up == 1
		})
		n, _ := w.c.Metric(t, s, "checkout_lock_listener_reconnects_total")
		reconnects += n
	}
	a, b := w.c.Storages[0], w.c.Storages[1]
	const (
		byRelease = `checkout_lock_wakeups_total{cause="release"}`
		byPoll    = `checkout_lock_wakeups_total{cause="poll"}`
	)
	// The waiter's safety-net poll can fire in the moment between the
	// release's commit and its notification, and take the lock first: that
	// hand-off proves nothing about the notification, so it is tried again.
	for try := 1; ; try++ {
		releaseBefore, _ := w.c.Metric(t, b, byRelease)
		pollBefore, _ := w.c.Metric(t, b, byPoll)
		user, holder, waiter := uuid.NewString(), uuid.NewString(), uuid.NewString()
		w.c.Do(a, "POST", "/check-out-lock-storage", map[string]any{"userId": user, "id": holder, "ttlMs": 60000}).Want(t, http.StatusCreated)
		result := make(chan harness.Response, 1)
		go func() {
			result <- w.c.Do(b, "POST", "/check-out-lock-storage", map[string]any{"userId": user, "id": waiter, "ttlMs": 60000, "waitMs": 20000})
		}()
		waitUntil(t, 10*time.Second, "the waiter to wait", func() bool {
			n, _ := w.c.Metric(t, b, "checkout_lock_waiters")
			return n == 1
		})
		released := time.Now()
		w.c.Do(a, "DELETE", "/check-out-lock-storage/"+holder, nil).Want(t, http.StatusNoContent)
		(<-result).Want(t, http.StatusCreated)
		handOff = time.Since(released)
		w.c.Do(b, "DELETE", "/check-out-lock-storage/"+waiter, nil).Want(t, http.StatusNoContent)
		releaseAfter, _ := w.c.Metric(t, b, byRelease)
		if releaseAfter == releaseBefore+1 {
			return reconnects, handOff
		}
		pollAfter, _ := w.c.Metric(t, b, byPoll)
		if pollAfter == pollBefore || try == 3 {
			t.Fatalf("the waiter was not woken by the release's notification (try %d): release wake-ups %v, then %v; poll wake-ups %v, then %v",
				try, releaseBefore, releaseAfter, pollBefore, pollAfter)
		}
	}
}

// send checks an item out (userBarcode set) or in, through a circulation
// instance chosen by n.
func (w *workload) send(n int, item, userBarcode string, checkOut bool) answer {
	a := answer{sent: time.Now(), checkOut: checkOut}
	var res harness.Response
	if checkOut {
		res = w.c.CheckOut(n, item, userBarcode)
	} else {
		res = w.c.CheckIn(n, item)
	}
	a.done, a.status, a.err = time.Now(), res.Status, res.Err
	if res.Err == nil && res.Status >= 400 {
		a.codes = res.ErrorCodes()
	}
	switch {
	case checkOut && res.Status == http.StatusCreated:
		var loan struct{ ID string }
		_ = json.Unmarshal(res.Body, &loan)
		a.loanID = loan.ID
	case !checkOut && res.Status == http.StatusOK:
		var body struct {
			Loan *struct{ ID string } `json:"loan"`
		}
		_ = json.Unmarshal(res.Body, &body)
		if body.Loan != nil {
			a.loanID = body.Loan.ID
		}
	}
	return a
}

// holdLock acquires the locker's lock from storage instance l mod 2,
// waiting up to a second, makes the fenced write a check-out makes under it
// (the locker's item checked out, then straight back in), and releases it.
func (w *workload) holdLock(l int, lk *locker) (grant, bool) {
	s := w.c.Storages[l%len(w.c.Storages)]
	res := w.c.Do(s, "POST", "/check-out-lock-storage", map[string]any{
		"userId": lk.patron, "id": uuid.NewString(), "ttlMs": 3000, "waitMs": 1000})
	if res.Status != http.StatusCreated {
		if res.Status != http.StatusServiceUnavailable || res.Err != nil {
			// Storage failing over: do not spin.
			time.Sleep(50 * time.Millisecond) // pacing the client, not waiting for an event
		}
		return grant{}, false
	}
	g := grant{patron: lk.patron, from: time.Now()}
	var lock struct {
		ID        string    `json:"id"`
		ExpiresAt time.Time `json:"expiresAt"`
	}
	_ = json.Unmarshal(res.Body, &lock)
	g.wrote, g.refused = w.fencedWrite(s, lk, lock.ID)
	g.till = time.Now()
	if !lock.ExpiresAt.IsZero() && lock.ExpiresAt.Before(g.till) {
		g.till = lock.ExpiresAt
	}
	w.c.Do(s, "DELETE", "/check-out-lock-storage/"+lock.ID, nil)
	return g, true
}

// fencedWrite checks the locker's item out under lockID, as a check-out's
// write does, and back in; it says whether the check-out was written, or
// refused because the lock was lost.
func (w *workload) fencedWrite(s *harness.Process, lk *locker, lockID string) (wrote, refused bool) {
	lk.mu.Lock()
	defer lk.mu.Unlock()
	if lk.version == 0 && !w.syncItem(s, lk) {
		return false, false
	}
	now := time.Now().UTC()
	loanID := uuid.NewString()
	loan := map[string]any{"id": loanID, "userId": lk.patron, "itemId": lk.item, "action": "checkedout",
		"status": map[string]any{"name": "Open"}, "loanDate": schemas.FormatTime(now),
		"dueDate": schemas.FormatTime(now.Add(time.Hour))}
	res := w.c.DoWith(s, "POST", "/loan-storage/loans", loan, w.c.HeadersWith(schemas.HeaderLockID, lockID,
		schemas.HeaderItemVersion, strconv.Itoa(lk.version)))
	switch {
	case res.Status == http.StatusConflict && slices.Contains(res.ErrorCodes(), schemas.CodeLockLost):
		return false, true
	case res.Status != http.StatusCreated:
		lk.version = 0 // unknown: read it again next time
		return false, false
	}
	lk.version++
	loan["status"], loan["action"], loan["returnDate"] = map[string]any{"name": schemas.LoanClosed}, schemas.LoanCheckedIn, schemas.FormatTime(now)
	if r := w.c.DoWith(s, "PUT", "/loan-storage/loans/"+loanID, loan, w.c.HeadersWith(schemas.HeaderCheckInItemVersion,
		strconv.Itoa(lk.version))); r.Status == http.StatusOK {
		lk.version++
	} else {
		lk.version = 0
	}
	return true, false
}

// syncItem reads the locker's item and, if a write whose answer was lost
// left it checked out, checks it back in; it says whether the item is
// ready for the next write.
func (w *workload) syncItem(s *harness.Process, lk *locker) bool {
	var item struct {
		Version int `json:"_version"`
		Status  struct {
			Name string `json:"name"`
		} `json:"status"`
	}
	if r := w.c.Do(s, "GET", "/item-storage/items/"+lk.item, nil); r.Status != http.StatusOK || json.Unmarshal(r.Body, &item) != nil {
		return false
	}
	if item.Status.Name == "Checked out" {
		var page struct {
			Loans []map[string]any `json:"loans"`
		}
		r := w.c.Do(s, "GET", "/loan-storage/loans?status=Open&itemId="+lk.item, nil)
		if r.Status != http.StatusOK || json.Unmarshal(r.Body, &page) != nil || len(page.Loans) != 1 {
			return false
		}
		loan := page.Loans[0]
		loan["status"], loan["action"], loan["returnDate"] = map[string]any{"name": schemas.LoanClosed}, schemas.LoanCheckedIn, schemas.FormatTime(time.Now())
		if r := w.c.DoWith(s, "PUT", "/loan-storage/loans/"+loan["id"].(string), loan, w.c.HeadersWith(schemas.HeaderCheckInItemVersion,
			strconv.Itoa(item.Version))); r.Status != http.StatusOK {
			return false
		}
		item.Version++
	}
	lk.version = item.Version
	return true
}

// overlapping counts pairs of grants of one patron's lock that were held
// at the same time, and those pairs whose holders both wrote under it.
func overlapping(grants []grant) (held, wrote int) {
	by := map[string][]grant{}
	for _, g := range grants {
		by[g.patron] = append(by[g.patron], g)
	}
	for _, gs := range by {
		sort.Slice(gs, func(i, j int) bool { return gs[i].from.Before(gs[j].from) })
		for i := 1; i < len(gs); i++ {
			for j := i - 1; j >= 0 && j >= i-4; j-- {
				if gs[j].till.After(gs[i].from) {
					held++
					if gs[i].wrote && gs[j].wrote {
						wrote++
					}
				}
			}
		}
	}
	return held, wrote
}

// lost counts the acknowledged check-outs whose loan is not stored, and
// the acknowledged check-ins whose loan is not closed.
func (w *workload) lost(t testing.TB, created, closed []string) (checkOuts, checkIns int) {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), w.c.DB.Config().ConnString())
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	stored := map[string]string{}
	rows, err := pool.Query(context.Background(), `SELECT id::text, status_name FROM `+pgx.Identifier{w.c.Schema, "loan"}.Sanitize())
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id, status string
		if err := rows.Scan(&id, &status); err != nil {
			t.Fatal(err)
		}
		stored[id] = status
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	for _, id := range created {
		if _, ok := stored[id]; !ok {
			checkOuts++
		}
	}
	for _, id := range closed {
		if stored[id] != "Closed" {
			checkIns++
		}
	}
	return checkOuts, checkIns
}

// countCreated counts the successful check-outs sent after since.
func countCreated(answers []answer, since time.Time) int {
	n := 0
	for _, a := range answers {
		if a.checkOut && a.status == http.StatusCreated && a.sent.After(since) {
			n++
		}
	}
	return n
}

// waitUntil polls ok until it holds, failing the test after timeout.
func waitUntil(t testing.TB, timeout time.Duration, what string, ok func() bool) {
	t.Helper()
	if !harness.Poll(timeout, 20*time.Millisecond, ok) {
		t.Fatalf("no %s within %s", what, timeout)
	}
}

// waitOnCluster is waitUntil for what the cluster's state decides: a
// timeout fails the test with the cluster's state and its nodes' logs.
func waitOnCluster(t testing.TB, h *harness.HA, timeout time.Duration, what string, ok func() bool) {
	t.Helper()
	if !harness.Poll(timeout, 20*time.Millisecond, ok) {
		t.Fatalf("no %s within %s. %s", what, timeout, h.Describe())
	}
}

// TestFailoverRebuildsAStuckReplica: a replica that cannot come back by
// itself (its control file gone; after an asynchronous failover, a replica
// that diverged beyond what pg_rewind mends is as stuck) is rebuilt from the leader by WaitHealthy, which the proof relies
// on after each fault, and streams again.
func TestFailoverRebuildsAStuckReplica(tt *testing.T) {
	tt.Parallel()
	if !*run {
		tt.Skip("starts a Patroni cluster: make test-ha (go test ./integration-tests/ha -args -ha)")
	}
	t := harness.RepeatFailures(tt)
	h := harness.StartHA(t, false)
	leader := h.Leader(10 * time.Second)
	var replica *harness.Node
	for _, n := range h.Nodes {
		if n != leader {
			replica = n
			break
		}
	}
	replica.Kill()
	if err := replica.Break(); err != nil {
		t.Fatal(err)
	}
	// Until its member key expires, the cluster still lists it running.
	h.Await(30*time.Second, replica.Name+" gone from the cluster", func(s harness.HAState) bool {
		for _, m := range s.Members {
			if m.Name == replica.Name {
				return false
			}
		}
		return true
	})
	replica.Start()
	s := h.WaitHealthy(180 * time.Second)
	if !slices.Equal(h.Reinitialized, []string{replica.Name}) {
		t.Errorf("rebuilt %v, want [%s]", h.Reinitialized, replica.Name)
	}
	t.Logf("SUMMARY ha rebuilt=%v leader=%s", h.Reinitialized, s.Leader)
}
