// Package ha proves that a failover of the database loses no acknowledged
// check-out and never lets a patron past the item limit: both services run
// as OS processes on a three-node PostgreSQL cluster managed by Patroni
// (harness.StartHA), under a workload of check-outs, check-ins, same-patron
// bursts and direct lock traffic, while the primary is switched over,
// killed and cut off the network. make test-ha runs it.
package ha

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/checkoutlock/integration-tests/harness"
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
	inject func(t *testing.T, h *harness.HA) (heal func())
}

var (
	switchover = fault{"switchover", func(t *testing.T, h *harness.HA) func() {
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
	kill = fault{"kill", func(t *testing.T, h *harness.HA) func() {
		leader := h.Leader(10 * time.Second)
		leader.Kill()
		return leader.Start
	}}
	partition = fault{"partition", func(t *testing.T, h *harness.HA) func() {
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
	proof(t, true, []fault{switchover, kill, partition})
}

// TestFailoverAsynchronous is the same with asynchronous replication, the
// primary killed again and again: it reports what was lost (acknowledged
// writes that the new primary never received), and fails only if the
// database's invariants break, which the lock's fence must prevent even
// then.
func TestFailoverAsynchronous(t *testing.T) {
	faults := []fault{switchover, partition}
	for range *repeats {
		faults = append(faults, kill)
	}
	proof(t, false, faults)
}

func proof(t *testing.T, sync bool, faults []fault) {
	if !*run {
		t.Skip("the failover proof starts a Patroni cluster: make test-ha (go test ./integration-tests/ha -args -ha)")
	}
	h := harness.StartHA(t, sync)
	h.SetReplicationLatency(*latency)
	h.CreateDatabase("circulation")
	c := harness.NewCluster(t, harness.Options{
		DatabaseURL: h.URL("circulation"), Storages: 2, Circulations: 3, FeatureOn: true,
		LockTTLMs: 3000, RetryIntervalMs: "500|500|1000",
	})
	const patrons, bursters = 24, 6
	lib := c.SetupLibrary(patrons+bursters, 8, limit)
	w := newWorkload(c, lib, patrons)
	for i, f := range faults {
		r := w.through(t, h, f)
		t.Logf("SUMMARY ha sync=%t replication_latency=%s fault=%d:%s %s", sync, *latency, i+1, f.name, r)
		if r.serverErrors > 0 || r.overLimit > 0 || len(r.violations) > 0 || r.doubleGrants > 0 && sync ||
			(r.lostCheckOuts > 0 || r.lostCheckIns > 0) && sync || r.recovery < 0 {
			t.Errorf("fault %s: %s\n  %s", f.name, r, strings.Join(r.violations, "\n  "))
		}
	}
}

// result is what one fault did to the clients and the database.
type result struct {
	// recovery is the time from the fault to the first check-out, sent
	// after it, that succeeded; negative if none did.
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
	// the same time; lockGrants the grants of the phase.
	doubleGrants, lockGrants int
	// reconnects is the storage instances' listener reconnections so far;
	// handOff the time from a release on one storage instance to the
	// waiter's grant on the other, once the cluster is healthy again.
	reconnects float64
	handOff    time.Duration
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
	return fmt.Sprintf("recovery=%s answers_until_recovered={%s} requests=%d server_errors=%d lost_checkouts=%d lost_checkins=%d over_limit_samples=%d lock_grants=%d double_grants=%d listener_reconnects=%.0f hand_off_after=%s violations=%d",
		r.recovery.Round(time.Millisecond), strings.Join(seen, " "), r.total, r.serverErrors, r.lostCheckOuts, r.lostCheckIns,
		r.overLimit, r.lockGrants, r.doubleGrants, r.reconnects, r.handOff.Round(100*time.Microsecond), len(r.violations))
}

// workload drives check-outs and check-ins for many patrons at their
// limits, same-patron bursts, and lock traffic straight to storage.
type workload struct {
	c       *harness.Cluster
	lib     harness.Library
	patrons int // lib.Patrons[:patrons] take turns; the rest burst
}

func newWorkload(c *harness.Cluster, lib harness.Library, patrons int) *workload {
	return &workload{c: c, lib: lib, patrons: patrons}
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
// until it sent the release (or the lock expired, if sooner).
type grant struct {
	patron     string
	from, till time.Time
}

// through runs the workload for a while, injects the fault, keeps going
// until check-outs succeed again and a while longer, stops, heals the
// cluster and checks the database.
func (w *workload) through(t *testing.T, h *harness.HA, f fault) result {
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
			p := w.patrons + round%(len(w.lib.Patrons)-w.patrons)
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
	// Lock traffic: two clients per patron for three patrons, on both
	// storage instances, each holding the lock briefly.
	for l := range 6 {
		patron := uuid.NewSHA1(uuid.NameSpaceOID, []byte(fmt.Sprintf("ha-lock-%d", l/2))).String()
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				if g, ok := w.holdLock(l, patron); ok {
					mu.Lock()
					grants = append(grants, g)
					mu.Unlock()
				}
			}
		}()
	}
	// The monitor: no patron above the limit, read every 50 ms; reads that
	// fail (the database is failing over) are skipped.
	overLimit := 0
	monitorDone := make(chan struct{})
	go func() {
		defer close(monitorDone)
		pool, err := pgxpool.New(ctx, h.URL("circulation"))
		if err != nil {
			return
		}
		defer pool.Close()
		q := `SELECT count(*) FROM (SELECT user_id FROM ` + pgx.Identifier{w.c.Schema, "loan"}.Sanitize() +
			` WHERE status_name = 'Open' GROUP BY user_id HAVING count(*) > $1) over`
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			qctx, cancel := context.WithTimeout(ctx, time.Second)
			var n int
			if err := pool.QueryRow(qctx, q, limit).Scan(&n); err == nil {
				overLimit += n
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
	waitUntil(t, 60*time.Second, "check-outs before the fault", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return countCreated(answers, time.Time{}) >= 20
	})
	faultAt := time.Now()
	heal := f.inject(t, h)
	var recovered time.Time
	waitUntil(t, 120*time.Second, "a check-out to succeed after the fault", func() bool {
		mu.Lock()
		defer mu.Unlock()
		for _, a := range answers {
			if a.checkOut && a.status == http.StatusCreated && a.sent.After(faultAt) &&
				(recovered.IsZero() || a.done.Before(recovered)) {
				recovered = a.done
			}
		}
		return !recovered.IsZero()
	})
	// A while longer, so the recovered cluster is under load too.
	waitUntil(t, 60*time.Second, "more check-outs after the recovery", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return countCreated(answers, recovered) >= 20
	})
	stop()
	wg.Wait()
	<-monitorDone
	heal()
	h.WaitHealthy(120 * time.Second)

	r := result{recovery: recovered.Sub(faultAt), answers: map[string]int{}, overLimit: overLimit, lockGrants: len(grants)}
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
	r.doubleGrants = overlapping(grants)
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
func (w *workload) listenersBack(t *testing.T) (reconnects float64, handOff time.Duration) {
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
	const woken = `checkout_lock_wakeups_total{cause="release"}`
	before, _ := w.c.Metric(t, b, woken)
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
	if after, _ := w.c.Metric(t, b, woken); after != before+1 {
		t.Errorf("the waiter was not woken by the release's notification: release wake-ups %v, then %v", before, after)
	}
	w.c.Do(b, "DELETE", "/check-out-lock-storage/"+waiter, nil).Want(t, http.StatusNoContent)
	return reconnects, handOff
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

// holdLock acquires patron's lock from storage instance l mod 2, waiting up
// to a second, holds it for a few milliseconds and releases it.
func (w *workload) holdLock(l int, patron string) (grant, bool) {
	s := w.c.Storages[l%len(w.c.Storages)]
	res := w.c.Do(s, "POST", "/check-out-lock-storage", map[string]any{
		"userId": patron, "id": uuid.NewString(), "ttlMs": 3000, "waitMs": 1000})
	if res.Status != http.StatusCreated {
		if res.Status != http.StatusServiceUnavailable || res.Err != nil {
			// Storage failing over: do not spin.
			time.Sleep(50 * time.Millisecond) // pacing the client, not waiting for an event
		}
		return grant{}, false
	}
	g := grant{patron: patron, from: time.Now()}
	var lock struct {
		ID        string    `json:"id"`
		ExpiresAt time.Time `json:"expiresAt"`
	}
	_ = json.Unmarshal(res.Body, &lock)
	time.Sleep(5 * time.Millisecond) // the work done under the lock
	g.till = time.Now()
	if !lock.ExpiresAt.IsZero() && lock.ExpiresAt.Before(g.till) {
		g.till = lock.ExpiresAt
	}
	w.c.Do(s, "DELETE", "/check-out-lock-storage/"+lock.ID, nil)
	return g, true
}

// overlapping counts pairs of grants of one patron's lock that were held at
// the same time.
func overlapping(grants []grant) int {
	by := map[string][]grant{}
	for _, g := range grants {
		by[g.patron] = append(by[g.patron], g)
	}
	n := 0
	for _, gs := range by {
		sort.Slice(gs, func(i, j int) bool { return gs[i].from.Before(gs[j].from) })
		for i := 1; i < len(gs); i++ {
			for j := i - 1; j >= 0 && j >= i-4; j-- {
				if gs[j].till.After(gs[i].from) {
					n++
				}
			}
		}
	}
	return n
}

// lost counts the acknowledged check-outs whose loan is not stored, and
// the acknowledged check-ins whose loan is not closed.
func (w *workload) lost(t *testing.T, created, closed []string) (checkOuts, checkIns int) {
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
func waitUntil(t *testing.T, timeout time.Duration, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("no %s within %s", what, timeout)
		}
		time.Sleep(20 * time.Millisecond) // polling with a deadline
	}
}
