package integration

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/google/uuid"

	"github.com/checkoutlock/integration-tests/harness"
	"github.com/checkoutlock/schemas"
)

// historyLength is how long TestHistoriesAreLinearizable records (make
// test: the default; make test-long: HISTORY, two minutes).
var historyLength = flag.Duration("history", 20*time.Second, "how long the history checker records operations under faults")

// historyArtifacts is where a history that is not linearizable is written,
// as porcupine's visualisation (an HTML page): CHECKOUT_LOCK_ARTIFACTS, or
// the system's temporary directory.
func historyArtifacts() string {
	if dir := os.Getenv("CHECKOUT_LOCK_ARTIFACTS"); dir != "" {
		return dir
	}
	return os.TempDir()
}

// The history's library: cells of three patrons and four items (the item
// limit two), four cells worked on at a time by eight clients, four new
// ones every cellLife: each cell's history (porcupine checks a cell's on
// its own) stays as short as the short run's, however long the run.
const (
	historyPatrons = 3
	historyItems   = 4
	cellsAtOnce    = 4
	cellLife       = 10 * time.Second
	historyClients = 8
	// faultGap is the time between the end of one fault and the next.
	faultGap = 2 * time.Second
	// faultsAtMost bounds the history, as a multiple of historyLength, on
	// a machine too slow for every kind of fault to come in historyLength.
	faultsAtMost = 3
)

// The faults, one after another, each kind in turn.
const (
	faultBackends    = "storage backends terminated"
	faultStorage     = "storage killed and restarted"
	faultCirculation = "circulation killed and restarted"
	faultPostgres    = "PostgreSQL restarted"
	faultCut         = "circulation-storage connections cut"
	faultAnswers     = "storage's answers to writes lost"
)

var faultKinds = []string{faultBackends, faultStorage, faultCirculation, faultPostgres, faultCut, faultAnswers}

// lostAnswers are the writes at storage whose answers a faultAnswers
// loses, on the way back to each circulation instance: the next of each,
// written, its answer never heard.
var lostAnswers = []string{"POST /loan-storage/loans", "POST /check-out-storage/check-outs", "PUT /loan-storage/loans/", "PUT /item-storage/items/",
	"POST /request-storage/requests", "PUT /request-storage/requests/"}

// TestHistoriesAreLinearizable: clients check items out (live, offline,
// and at storage at the item's version read) and in, renew, claim returned
// and declare lost, place holds, recalls and pages, cancel requests at the
// version read and move them to other items, replace loans at the version
// read, and read the items, loans and queues, all at once, over two storage
// and two circulation instances with the check-out lock on, on a
// PostgreSQL of the test's own, while, one after another: every storage
// backend is terminated, a storage instance is killed and started again, a
// circulation instance is killed and started again, PostgreSQL is
// restarted (stopped fast or crashed, in turn), and every connection
// between circulation and storage is cut (each circulation instance
// reaches storage through a proxy of its own). One more client works a
// cell of its own by script (lostAfterAgeing), so that every history
// holds a loan aged, billed and declared lost. A client whose write went
// unanswered waits until the services read again before its next. Every
// operation's call, answer and time is recorded, and the history of each
// cell of the
// library (patrons and the items they borrow, under an item limit) is
// checked with porcupine against the model of the cell (cellmodel_test.go):
// it must be linearizable, a refusal for the rules the model gives in that
// state, a write whose answer was lost allowed either way; and every
// refusal because another write came first must have had one that could
// (conflictsExplained). A history that is not linearizable is written as
// porcupine's visualisation, whose path the failure names.
func TestHistoriesAreLinearizable(t *testing.T) {
	t.Parallel()
	pg := harness.StartPostgres(t)
	// Storage's sweeper passes four times a second: a loan made long
	// overdue is aged to lost within a pass, while the clients work on it.
	c := harness.NewCluster(t, harness.Options{Circulations: 2, Storages: 2, FeatureOn: true, CirculationProxies: true,
		DatabaseURL: pg.CreateDatabase("circulation"), StorageEnv: []string{"LOCK_SWEEP_INTERVAL=250ms"}})
	generations := int(*historyLength/cellLife) + 1
	// One cell more than the clients draw from: lostAfterAgeing's own.
	w := setupCellLibrary(t, c, generations*cellsAtOnce+1, historyPatrons, historyItems)
	w.ageing = true

	start := time.Now()
	clock := readWallClock(t, start)
	// The history lasts historyLength and, on a machine slow enough that
	// the faults in turn have not all come by then, until each has come
	// once (injectFaults ends it).
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	var mu sync.Mutex
	var ops []porcupine.Operation
	var wg sync.WaitGroup
	record := func(client int, r recorded) {
		mu.Lock()
		defer mu.Unlock()
		ops = append(ops, porcupine.Operation{ClientId: client, Input: r.in, Output: r.out,
			Call: r.call.Nanoseconds(), Return: r.ret.Nanoseconds(), Metadata: r.answered})
	}
	var script scripted
	wg.Go(func() {
		script = w.lostAfterAgeing(ctx, generations*cellsAtOnce, start, func(r recorded) { record(historyClients, r) })
	})
	for client := range historyClients {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(client), uint64(time.Now().UnixNano())))
			mems := map[int]*cellMemory{}
			for ctx.Err() == nil {
				gen := min(int(time.Since(start)/cellLife), generations-1)
				cell := gen*cellsAtOnce + rng.IntN(cellsAtOnce)
				if mems[cell] == nil {
					mems[cell] = newCellMemory(historyItems)
				}
				in, ok := w.chooseOp(rng, cell, mems[cell])
				if !ok {
					continue
				}
				r, ok := w.do(rng, in, mems[cell], start)
				if !ok {
					continue
				}
				record(client, r)
				if r.out.Outcome == outUnknown || r.out.Outcome == outNotDone {
					// The services are not answering: wait until they read
					// again, as a desk would, rather than send write after
					// write into the fault (each one unknown more).
					harness.Poll(cellLife, 100*time.Millisecond, func() bool {
						_, answered := w.read(pick(rng, c.Storages), cellInput{Kind: opReadItems, Cell: cell}, newCellMemory(historyItems))
						return answered || ctx.Err() != nil
					})
				}
			}
		})
	}
	faults := injectFaults(t, c, pg, start, *historyLength)
	stop()
	wg.Wait()
	recorded := time.Since(start).Round(time.Second)

	ops = append(ops, agings(t, w, start, clock, ops)...)
	annotate(ops)
	counts := map[string]int{}
	unknown, pastLimit, atLimit := 0, 0, 0
	for _, op := range ops {
		in, out := op.Input.(cellInput), op.Output.(cellOutput)
		name := in.Kind.String()
		if !in.Kind.read() {
			name += " " + outcomeNames[out.Outcome]
		}
		counts[name]++
		if out.Outcome == outUnknown {
			unknown++
		}
		if in.Kind.lends() && out.Outcome == outRefused && slices.ContainsFunc(out.Codes, func(c string) bool {
			return c == schemas.CodeItemLimitLoanType || c == schemas.CodeItemLimitReached
		}) {
			atLimit++
		}
		if in.Kind == opCheckOutOffline && out.Outcome == outDone && slices.Contains(out.Broken, schemas.CodeItemLimitReached) {
			// Said by the loan itself: the model holds its word to the
			// patron's open loans then.
			pastLimit++
		}
	}
	model := cellModel(newCell(historyItems))
	checking := time.Now()
	failed := checkCells(t, model, ops, 3*time.Minute)
	checked := time.Since(checking).Round(time.Second)
	unexplained := conflictsExplained(ops)
	faultTotal := 0
	for _, n := range faults {
		faultTotal += n
	}
	cells := len(model.Partition(ops))
	t.Logf("SUMMARY TestHistoriesAreLinearizable: %d operations by %d clients over %s (%d unknown); %d faults %v; "+
		"%d cells of %d patrons and %d items (%d patrons, %d items) each checked on its own, item limit %d; "+
		"%d check-outs refused at the limit, %d made offline past it; %d loans aged, billed and declared lost and %d check-outs at a stale version refused (lostAfterAgeing); "+
		"checked in %s: %d cells not found linearizable, %d conflicts without a write that came first; %v",
		len(ops), historyClients, recorded, unknown, faultTotal, faults, cells, historyPatrons, historyItems,
		cells*historyPatrons, cells*historyItems, cellItemLimit, atLimit, pastLimit, script.done, script.conflicts, checked, len(failed), len(unexplained), counts)
	if script.done == 0 && *historyLength >= 20*time.Second {
		t.Errorf("no loan was aged, billed and declared lost in %s: lostAfterAgeing never ran to its end", *historyLength)
	}
	for _, kind := range faultKinds {
		if faults[kind] == 0 && *historyLength >= 20*time.Second {
			t.Errorf("no fault of kind %q in %s: the faults %v", kind, recorded, faults)
		}
	}
	if len(failed) > 0 {
		t.Errorf("against the model of a cell, these cells' histories are not found linearizable:\n%s", strings.Join(failed, "\n"))
	}
	if len(unexplained) > 0 {
		t.Errorf("refused because another write came first, with no write that could have come first:\n%s", strings.Join(unexplained, "\n"))
	}
}

// lostAfterAgeing is one client's script on a cell of its own (cell),
// over and over until ctx ends, each operation recorded: an item checked
// in, then checked out long overdue, its loans read until the sweeper has
// aged and billed the loan, the loan declared lost, and the fees read;
// and, each time it comes back to an item, a check-out at storage at the
// version the item had when last seen on the shelf (stale by then).
// Whatever the other clients draw, the history then holds a loan aged,
// billed and declared lost, which the model bills once. It answers how
// what the script did (scripted).
func (w *cellWorld) lostAfterAgeing(ctx context.Context, cell int, start time.Time, record func(recorded)) scripted {
	rng := rand.New(rand.NewPCG(uint64(cell), uint64(time.Now().UnixNano())))
	mem := newCellMemory(historyItems)
	do := func(in cellInput) (cellOutput, bool) {
		r, ok := w.do(rng, in, mem, start)
		if ok {
			record(r)
		}
		return r.out, ok
	}
	var s scripted
	// stale is each item's version when it was last seen on the shelf: by
	// the time the script comes back to the item, it has been lent since,
	// and a check-out at storage at that version (another patron's) must
	// be refused as a conflict, or the item's version fence is not kept.
	stale := map[int]int{}
	for round := 0; ctx.Err() == nil; round++ {
		item := round % historyItems
		do(cellInput{Kind: opCheckIn, Cell: cell, Item: item})
		if v, ok := stale[item]; ok {
			out, _ := do(cellInput{Kind: opCheckOutStorage, Cell: cell, Item: item, Patron: 1, ID: uuid.NewString(), Version: v})
			if out.Outcome == outRefused && slices.Contains(out.Codes, schemas.CodeVersionConflict) {
				s.conflicts++
			}
			delete(stale, item)
		}
		if shelf, ok := do(cellInput{Kind: opReadItems, Cell: cell}); ok && shelf.Items[item].Status == schemas.ItemAvailable {
			stale[item] = shelf.Items[item].Version
		}
		lent, _ := do(cellInput{Kind: opCheckOut, Cell: cell, Item: item, Overdue: true})
		if lent.Outcome != outDone {
			continue
		}
		billed := harness.Poll(5*time.Second, 50*time.Millisecond, func() bool {
			out, ok := do(cellInput{Kind: opReadLoans, Cell: cell})
			return ctx.Err() != nil || ok && slices.ContainsFunc(out.Loans, func(l readLoan) bool { return l.ID == lent.ID && l.Billed })
		})
		if !billed || ctx.Err() != nil {
			continue
		}
		if declared, _ := do(cellInput{Kind: opDeclare, Cell: cell, Item: item, ID: lent.ID}); declared.Outcome != outDone {
			continue
		}
		if _, ok := do(cellInput{Kind: opReadFees, Cell: cell}); ok {
			s.done++
		}
	}
	return s
}

// scripted is what lostAfterAgeing's script did: how many times it ran to
// its end, and how many of its check-outs at a stale version were refused
// as conflicts.
type scripted struct{ done, conflicts int }

// injectFaults injects the faults, each kind in turn, faultGap apart, from
// start until length has passed and each kind has come at least once (but
// for no longer than faultsAtMost), and says how many of each it injected.
func injectFaults(t *testing.T, c *harness.Cluster, pg *harness.Postgres, start time.Time, length time.Duration) map[string]int {
	t.Helper()
	faults := map[string]int{}
	for i := 0; ; i++ {
		next := time.Now().Add(faultGap)
		if next.Sub(start) >= length && (i >= len(faultKinds) || next.Sub(start) >= faultsAtMost*length) {
			<-time.After(time.Until(start.Add(length)))
			return faults
		}
		<-time.After(faultGap)
		kind := faultKinds[i%len(faultKinds)]
		n := faults[kind]
		switch kind {
		case faultBackends:
			c.TerminateStorageBackends(t)
		case faultStorage:
			s := c.Storages[n%len(c.Storages)]
			s.Kill()
			s.Start()
		case faultCirculation:
			p := c.Circulations[n%len(c.Circulations)]
			p.Kill()
			p.Start()
		case faultPostgres:
			if n%2 == 0 {
				pg.Restart()
			} else {
				pg.Crash()
				pg.Start()
			}
			c.DB.Reset()
		case faultCut:
			for _, p := range c.CirculationProxies {
				p.Cut()
			}
		case faultAnswers:
			for _, p := range c.CirculationProxies {
				for _, write := range lostAnswers {
					p.LoseAnswers(2, write)
				}
				// Payments are few among the writes and many are
				// refused: more of theirs, so that one done is lost.
				p.LoseAnswers(8, "POST /fee-fine-storage/actions")
			}
		}
		faults[kind]++
	}
}

// agings are the agings to lost storage's sweeper made during the history
// ops of w, as operations of it: each loan the database says was aged
// (its agedToLostDelayedBilling.agedToLostDate, kept through a check-in)
// is an operation of a client of its own. Its aging took effect at some
// time from its transaction's start (the date, its now(), read on this
// machine's wall clock, less 10 ms for the dates' rounding, placed among
// the history's times by clock) until the first read that shows it (its
// item Aged to lost, or the loan billed by it), or, when none does, the
// agings' own read: the sweeper goes on after the clients stop, and an
// aging committed after the last of their operations ends after it too.
func agings(t *testing.T, w *cellWorld, start time.Time, clock *wallClock, ops []porcupine.Operation) []porcupine.Operation {
	t.Helper()
	type where struct{ cell, item int }
	items := map[string]where{}
	for n, cell := range w.cells {
		for k, it := range cell.items {
			items[it.id] = where{n, k}
		}
	}
	type aged struct {
		id, item string
		at       time.Time
	}
	rows, err := w.c.DB.Query(context.Background(), fmt.Sprintf(`SELECT id::text, item_id::text, (jsonb #>> '{agedToLostDelayedBilling,agedToLostDate}')::timestamptz
		FROM %s.loan WHERE jsonb #>> '{agedToLostDelayedBilling,agedToLostDate}' IS NOT NULL`, w.c.Schema))
	if err != nil {
		t.Fatal(err)
	}
	var found []aged
	for rows.Next() {
		var a aged
		if err := rows.Scan(&a.id, &a.item, &a.at); err != nil {
			t.Fatal(err)
		}
		found = append(found, a)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	// Every aging read was committed by now.
	end := time.Since(start).Nanoseconds()
	for _, op := range ops {
		end = max(end, op.Return+1)
	}
	var out []porcupine.Operation
	for _, a := range found {
		in := cellInput{Kind: opAge, Cell: items[a.item].cell, Item: items[a.item].item, ID: a.id}
		began, exact := clock.notAfter(a.at)
		op := porcupine.Operation{ClientId: historyClients + 1 + len(out), Input: in, Output: cellOutput{Outcome: outDone},
			Call: (began - 10*time.Millisecond).Nanoseconds(), Return: end}
		for _, r := range ops {
			if !exact {
				// Began as much earlier as the wall clock was set back: a
				// read begun after it may show the item's aging before.
				break
			}
			// A read begun after the aging began: its item was lent by
			// then, so Aged to lost is this loan's.
			rin, rout := r.Input.(cellInput), r.Output.(cellOutput)
			if rin.Cell != in.Cell || r.Call <= began.Nanoseconds() || r.Return >= op.Return {
				continue
			}
			shows := rin.Kind == opReadItems && len(rout.Items) > in.Item && rout.Items[in.Item].Status == schemas.ItemAgedToLost ||
				rin.Kind == opReadLoans && slices.ContainsFunc(rout.Loans, func(l readLoan) bool { return l.ID == a.id && l.Billed })
			if shows {
				op.Return = r.Return
			}
		}
		out = append(out, op)
	}
	return out
}

// wallClock places times read on this machine's wall clock, as
// PostgreSQL's dates are, among a history's, which are taken on the
// monotonic clock (time.Since(start)): the wall clock may be stepped or
// slewed while the history runs, and a date set against start alone
// would then be placed seconds away from the operations around it.
type wallClock struct {
	mu      sync.Mutex
	samples []clockSample // in the order taken
	back    bool          // a sample read the wall clock earlier than the one before
}

// A clockSample is one reading of both clocks.
type clockSample struct {
	wall time.Time     // the wall clock's reading
	at   time.Duration // the monotonic clock's, since the history's start
}

// wallClockEvery is how often readWallClock reads the clocks.
const wallClockEvery = 5 * time.Millisecond

// readWallClock reads both clocks from start every wallClockEvery until t
// ends.
func readWallClock(t *testing.T, start time.Time) *wallClock {
	c := &wallClock{}
	read := func() {
		now := time.Now()
		c.mu.Lock()
		defer c.mu.Unlock()
		s := clockSample{wall: now.Round(0), at: now.Sub(start)}
		if n := len(c.samples); n > 0 && s.wall.Before(c.samples[n-1].wall) {
			c.back = true
		}
		c.samples = append(c.samples, s)
	}
	read()
	done := make(chan struct{})
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		tick := time.NewTicker(wallClockEvery)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
				read()
			}
		}
	}()
	t.Cleanup(func() { close(done); <-stopped })
	return c
}

// notAfter is a time of the history no later than the moment the wall
// clock read wall (unless the wall clock was set back in the
// wallClockEvery after that moment): the reading before the first one
// past wall. exact says the wall clock was never seen set back,
// so that the time is also at most wallClockEvery (and any step forward
// in it) early; else it may be as much earlier as the clock was set back.
// A wall before every reading is set against the first.
func (c *wallClock) notAfter(wall time.Time) (at time.Duration, exact bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	first := slices.IndexFunc(c.samples, func(s clockSample) bool { return s.wall.After(wall) })
	switch first {
	case 0:
		return c.samples[0].at - c.samples[0].wall.Sub(wall), !c.back
	case -1:
		return c.samples[len(c.samples)-1].at, !c.back
	}
	return c.samples[first-1].at, !c.back
}

// annotate marks, in every read of loans, the loans no answer named: only
// those can be the loan of a check-out whose answer was lost and named
// none; and every check-out made offline that a write overlaps which may
// move its patron's count of open loans (CountMayMove).
func annotate(ops []porcupine.Operation) {
	claimed := map[string]bool{}
	for _, op := range ops {
		in, out := op.Input.(cellInput), op.Output.(cellOutput)
		if in.Kind.lends() {
			claimed[out.ID], claimed[in.ID] = true, true
		}
	}
	for i, op := range ops {
		in, out := op.Input.(cellInput), op.Output.(cellOutput)
		switch in.Kind {
		case opReadLoans:
			out.Unclaimed = make([]bool, len(out.Loans))
			for k, l := range out.Loans {
				out.Unclaimed[k] = !claimed[l.ID]
			}
		case opCheckOutOffline:
			out.CountMayMove = slices.ContainsFunc(ops, func(other porcupine.Operation) bool {
				oin, oout := other.Input.(cellInput), other.Output.(cellOutput)
				return oin.Cell == in.Cell && (oin.Kind == opCheckIn || oin.Kind == opClaim || oin.Kind == opDeclare ||
					oin.Kind == opPay || oin.Kind == opWaive || oin.Kind == opAge) &&
					(oout.Outcome == outDone || oout.Outcome == outUnknown) && other.Call < op.Return && other.Return > op.Call
			})
		}
		ops[i].Output = out
	}
}

// checkCells checks each cell's history on its own against model, two at
// a time (porcupine would check them all at once): a history that is
// linearizable is found so in seconds; one that is not may take much
// longer to give up on, and "unknown" after timeout fails the test too. One
// that is not linearizable is written as porcupine's visualisation, and as
// JSON; checkCells answers a line for each.
func checkCells(t *testing.T, model porcupine.NondeterministicModel, ops []porcupine.Operation, timeout time.Duration) []string {
	t.Helper()
	m := model.ToModel()
	var failed []string
	var mu sync.Mutex
	sem := make(chan struct{}, 2)
	var checks sync.WaitGroup
	for _, part := range model.Partition(ops) {
		checks.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			result, info := porcupine.CheckOperationsVerbose(m, part, timeout)
			if result == porcupine.Ok {
				return
			}
			cell := part[0].Input.(cellInput).Cell
			base := filepath.Join(historyArtifacts(), fmt.Sprintf("checkout-lock-history-%s-%s-cell-%d",
				time.Now().UTC().Format("20060102T150405"), strings.ReplaceAll(t.Name(), "/", "-"), cell))
			if err := porcupine.VisualizePath(m, info, base+".html"); err != nil {
				t.Errorf("write the history's visualisation: %v", err)
			}
			if data, err := json.Marshal(part); err == nil {
				_ = os.WriteFile(base+".json", data, 0o644)
			}
			mu.Lock()
			failed = append(failed, fmt.Sprintf("cell %d: %s (%d operations): %s.html", cell, result, len(part), base))
			mu.Unlock()
		})
	}
	checks.Wait()
	slices.Sort(failed)
	return failed
}

// touchSame says whether writes a and b of a cell may change the same
// item: both their own, or either a request cancelled or moved (which may
// have moved since it was read) and so any.
func touchSame(a, b cellInput) bool {
	anyItem := func(in cellInput) bool { return in.Kind == opCancel || in.Kind == opMove }
	return anyItem(a) || anyItem(b) || a.Item == b.Item
}

// conflictsExplained answers a line for every write of ops refused because
// another came first (outConflict) for which no other write could have:
// one of its cell that overlaps it in time and may have written (done, or
// not known) what it read (touchSame), or, refused for the patron's lock, a
// check-out of the same patron that overlaps it.
func conflictsExplained(ops []porcupine.Operation) []string {
	byCell := map[int][]porcupine.Operation{}
	for _, op := range ops {
		in := op.Input.(cellInput)
		byCell[in.Cell] = append(byCell[in.Cell], op)
	}
	var out []string
	for _, cell := range slices.Sorted(maps.Keys(byCell)) {
		part := byCell[cell]
		for i, op := range part {
			in, o := op.Input.(cellInput), op.Output.(cellOutput)
			if o.Outcome != outConflict {
				continue
			}
			lock := slices.Contains(o.Codes, schemas.CodeUnableToAcquireLock) || slices.Contains(o.Codes, schemas.CodeLockHeld)
			explained := false
			for j, other := range part {
				oin, oout := other.Input.(cellInput), other.Output.(cellOutput)
				if j == i || other.Call > op.Return || other.Return < op.Call || oin.Kind.read() {
					continue
				}
				if lock {
					explained = oin.Kind.lends() && oin.Patron == in.Patron
				} else {
					explained = (oout.Outcome == outDone || oout.Outcome == outUnknown) && touchSame(in, oin)
				}
				if explained {
					break
				}
			}
			if !explained {
				out = append(out, fmt.Sprintf("cell %d: %s at %s", cell, describeOp(in, o), time.Duration(op.Call)))
			}
		}
	}
	return out
}
