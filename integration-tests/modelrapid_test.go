package integration

import (
	"flag"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/google/uuid"
	"pgregory.net/rapid"

	"github.com/checkoutlock/integration-tests/harness"
	"github.com/checkoutlock/schemas"
)

// The model-based test's cells: two patrons and three items each, under the
// model's policy (cellPolicy).
const (
	rapidPatrons = 2
	rapidItems   = 3
	// rapidChecks is how many sequences rapid draws when -rapid.checks
	// does not say: enough for a few seconds of make test.
	rapidChecks = "8"
)

// TestTheWritesFollowTheModel runs rapid's random sequences of the
// operations the history checker makes (cellmodel_test.go: check-outs live,
// offline and at storage at the item's version read or an older one,
// check-ins at either desk, renewals, claims, declarations of loss, holds,
// recalls and pages placed, requests cancelled at the version read or an
// older one and moved, loans replaced at the version read or an older one)
// through the real services, each sequence on a cell of its own, and
// compares each answer with the model: done exactly when the model allows
// it, refused for exactly the reasons the model gives; after each step the
// services' items, loans and queues are the model's. Now and then a few
// steps are sent at once, over both circulation instances, and their
// answers and what is read after them checked with porcupine against the
// model from the state before them. rapid shrinks a failing sequence to
// the shortest.
func TestTheWritesFollowTheModel(t *testing.T) {
	t.Parallel()
	c := harness.NewCluster(t, harness.Options{Circulations: 2, FeatureOn: true})
	w := setupCellLibrary(t, c, 0, 0, 0)
	// Unless the command line says otherwise: rapidChecks sequences, and
	// no file of a failing one left in the package (the failure names the
	// seed that draws it again, -rapid.seed), so that a run of the
	// mutation checks leaves the tree as it was.
	for name, value := range map[string]string{"rapid.checks": rapidChecks, "rapid.nofailfile": "true"} {
		if f := flag.Lookup(name); f != nil && f.Value.String() == f.DefValue {
			if err := flag.Set(name, value); err != nil {
				t.Fatal(err)
			}
		}
	}
	sequences, steps, concurrent := 0, 0, 0
	counts := map[string]int{}
	rapid.Check(t, func(rt *rapid.T) {
		sequences++
		cell, err := w.makeCell(fmt.Sprintf("R%04d", sequences), rapidPatrons, rapidItems)
		if err != nil {
			rt.Fatal(err)
		}
		w.cells = append(w.cells, cell)
		m := &machine{w: w, cell: len(w.cells) - 1, state: newCell(rapidItems), mem: newCellMemory(rapidItems),
			rng: rand.New(rand.NewPCG(uint64(sequences), 1)), start: time.Now(), requestDocs: map[string]map[string]any{},
			loanDocs: map[string]map[string]any{}}
		m.readAll(rt, true)
		for range rapid.IntRange(5, 25).Draw(rt, "steps") {
			if rapid.IntRange(0, 5).Draw(rt, "at once") == 0 {
				m.atOnce(rt, counts)
				concurrent++
			} else {
				m.step(rt, counts)
			}
			steps++
		}
	})
	t.Logf("SUMMARY TestTheWritesFollowTheModel: %d sequences, %d steps (%d of several writes at once): %v", sequences, steps, concurrent, counts)
}

// machine runs one sequence on a cell: the model's state of it, and what
// the client read of it.
type machine struct {
	w     *cellWorld
	cell  int
	state cellState
	mem   *cellMemory
	rng   *rand.Rand
	start time.Time
	// requestDocs and loanDocs are every request and loan of the cell
	// as last read, closed ones among them: a write may name one closed
	// since, or an older version.
	requestDocs, loanDocs map[string]map[string]any
}

// draw draws an operation on the cell in its state now.
func (m *machine) draw(t *rapid.T) cellInput {
	in := cellInput{Cell: m.cell, Kind: rapid.SampledFrom([]opKind{opCheckOut, opCheckOutOffline, opCheckOutStorage, opCheckIn,
		opRenew, opClaim, opDeclare, opPlace, opCancel, opMove, opReplaceLoan, opPay, opWaive}).Draw(t, "kind")}
	var fees []mFee
	for _, f := range m.state.Fees {
		if f.Account != "" {
			fees = append(fees, f)
		}
	}
	switch in.Kind {
	case opPay, opWaive:
		if len(fees) == 0 {
			in.Kind = opDeclare
		}
	}
	switch in.Kind {
	case opClaim, opDeclare, opReplaceLoan:
		if len(m.loanDocs) == 0 {
			in.Kind = opCheckOut
		}
	case opCancel, opMove:
		if len(m.requestDocs) == 0 {
			in.Kind = opPlace
		}
	}
	switch in.Kind {
	case opPay, opWaive:
		f := fees[rapid.IntRange(0, len(fees)-1).Draw(t, "fee")]
		in.ID, in.Patron = f.Account, f.Patron
		in.Amount = rapid.SampledFrom([]int{100, 500, max(f.Remaining, 100), f.Remaining + 100}).Draw(t, "amount")
	case opCheckOut, opCheckOutOffline, opRenew:
		in.Item = rapid.IntRange(0, rapidItems-1).Draw(t, "item")
		in.Patron = rapid.IntRange(0, rapidPatrons-1).Draw(t, "patron")
	case opCheckOutStorage:
		in.Item = rapid.IntRange(0, rapidItems-1).Draw(t, "item")
		in.Patron = rapid.IntRange(0, rapidPatrons-1).Draw(t, "patron")
		in.ID = uuid.NewString()
		in.Version = max(1, m.state.Items[in.Item].Version-rapid.IntRange(0, 1).Draw(t, "versions behind"))
	case opCheckIn:
		in.Item = rapid.IntRange(0, rapidItems-1).Draw(t, "item")
		in.Point = rapid.IntRange(0, 1).Draw(t, "point")
	case opPlace:
		in.Item = rapid.IntRange(0, rapidItems-1).Draw(t, "item")
		in.Patron = rapid.IntRange(0, rapidPatrons-1).Draw(t, "patron")
		in.Type = rapid.SampledFrom([]string{schemas.RequestTypeHold, schemas.RequestTypeRecall, schemas.RequestTypePage}).Draw(t, "type")
		in.Point = rapid.IntRange(0, 1).Draw(t, "point")
		in.ID = uuid.NewString()
	case opClaim, opDeclare, opReplaceLoan:
		in.ID = rapid.SampledFrom(slices.Sorted(maps.Keys(m.loanDocs))).Draw(t, "loan")
		in.Item = m.w.itemIndex(m.cell, m.loanDocs[in.ID]["itemId"].(string))
		in.Version = versionOf(m.loanDocs[in.ID])
		if item, found := m.state.loan(in.ID); found {
			in.Version = m.state.Items[item].Loan.Version
		}
		in.Version = max(1, in.Version-rapid.IntRange(0, 1).Draw(t, "versions behind"))
		in.Renewals = renewalsOf(m.loanDocs[in.ID])
	case opCancel, opMove:
		in.ID = rapid.SampledFrom(slices.Sorted(maps.Keys(m.requestDocs))).Draw(t, "request")
		in.Item = m.w.itemIndex(m.cell, m.requestDocs[in.ID]["itemId"].(string))
		in.Version = versionOf(m.requestDocs[in.ID])
		if item, at, found := m.state.request(in.ID); found {
			in.Item, in.Version = item, m.state.Items[item].Queue[at].Version
		}
		if in.Kind == opCancel {
			in.Version = max(1, in.Version-rapid.IntRange(0, 1).Draw(t, "versions behind"))
		} else {
			in.Dest = (in.Item + 1 + rapid.IntRange(0, rapidItems-2).Draw(t, "to")) % rapidItems
			in.Version = 0
		}
	}
	return in
}

// prepare puts in mem the document in writes back: the request or loan
// as last read, at the version in names.
func (m *machine) prepare(in cellInput, mem *cellMemory) {
	switch in.Kind {
	case opCancel:
		doc := maps.Clone(m.requestDocs[in.ID])
		doc["_version"] = float64(in.Version)
		mem.requests[in.ID] = doc
	case opReplaceLoan:
		doc := maps.Clone(m.loanDocs[in.ID])
		doc["_version"] = float64(in.Version)
		mem.loans[in.ID] = doc
	}
}

// step runs one operation and holds its answer, and the cell after it, to
// the model.
func (m *machine) step(t *rapid.T, counts map[string]int) {
	in := m.draw(t)
	m.prepare(in, m.mem)
	r, _ := m.w.do(m.rng, in, m.mem, m.start)
	counts[in.Kind.String()+" "+outcomeNames[r.out.Outcome]]++
	t.Logf("%s", describeOp(r.in, r.out))
	if r.out.Outcome != outDone && r.out.Outcome != outRefused {
		t.Fatalf("%s: answered %s, alone against the services", describeOp(r.in, r.out), outcomeNames[r.out.Outcome])
	}
	next := cellStep(m.state, r.in, r.out)
	if len(next) != 1 {
		j := judge(m.state, r.in, r.out)
		t.Fatalf("%s; the model, from %s: allowed %t, refused for %v", describeOp(r.in, r.out), describeCell(m.state), j.allowed, j.refusals)
	}
	m.state = next[0]
	m.readAll(t, true)
}

// atOnce sends two or three operations at once and checks their answers,
// and the cell read after them, with porcupine against the model from the
// state before them; the state read is the model's from then on.
func (m *machine) atOnce(t *rapid.T, counts map[string]int) {
	n := rapid.IntRange(2, 3).Draw(t, "at once")
	ins := make([]cellInput, n)
	mems := make([]*cellMemory, n)
	for i := range ins {
		ins[i], mems[i] = m.draw(t), newCellMemory(rapidItems)
		m.prepare(ins[i], mems[i])
	}
	ops := make([]porcupine.Operation, n)
	go1 := make(chan struct{})
	var wg sync.WaitGroup
	for i, in := range ins {
		rng := rand.New(rand.NewPCG(m.rng.Uint64(), uint64(i)))
		wg.Go(func() {
			<-go1
			r, _ := m.w.do(rng, in, mems[i], m.start)
			ops[i] = porcupine.Operation{ClientId: i, Input: r.in, Output: r.out, Call: r.call.Nanoseconds(), Return: r.ret.Nanoseconds()}
		})
	}
	close(go1)
	wg.Wait()
	for _, op := range ops {
		in, out := op.Input.(cellInput), op.Output.(cellOutput)
		counts[in.Kind.String()+" "+outcomeNames[out.Outcome]+" (at once)"]++
		t.Logf("at once: %s", describeOp(in, out))
	}
	reads := m.readAll(t, false)
	for _, r := range reads {
		ops = append(ops, porcupine.Operation{ClientId: n, Input: r.in, Output: r.out, Call: r.call.Nanoseconds(), Return: r.ret.Nanoseconds()})
	}
	annotate(ops)
	model := cellModel(m.state)
	if !porcupine.CheckOperations(model.ToModel(), ops) {
		var lines []string
		for _, op := range ops {
			lines = append(lines, describeOp(op.Input.(cellInput), op.Output.(cellOutput)))
		}
		t.Fatalf("from %s, these are not linearizable against the model:\n%s", describeCell(m.state), lines)
	}
	if unexplained := conflictsExplained(ops); len(unexplained) > 0 {
		t.Fatalf("refused because another write came first, with none that could have: %v", unexplained)
	}
	m.state = stateRead(reads)
}

// readAll reads the cell's items, loans, requests and fees/fines,
// remembers the loans and requests read, and (check) holds them to the
// model's state, which learns the fees/fines' accounts.
func (m *machine) readAll(t *rapid.T, check bool) []recorded {
	var out []recorded
	for _, kind := range []opKind{opReadItems, opReadLoans, opReadRequests, opReadFees} {
		r, ok := m.w.do(m.rng, cellInput{Kind: kind, Cell: m.cell}, m.mem, m.start)
		if !ok {
			t.Fatalf("%s: not answered", kind)
		}
		r.out.Unclaimed = make([]bool, len(r.out.Loans))
		out = append(out, r)
		if check {
			next, fits := readFits(m.state, r.in, r.out)
			if !fits {
				t.Fatalf("%s; the model says %s", describeOp(r.in, r.out), describeCell(m.state))
			}
			if r.in.Kind == opReadFees {
				m.state = next
			}
		}
	}
	for id, doc := range m.mem.loans {
		m.loanDocs[id] = maps.Clone(doc)
	}
	for id, doc := range m.mem.requests {
		m.requestDocs[id] = maps.Clone(doc)
	}
	return out
}

// stateRead is the cell's state as reads (items, loans, requests) show it.
func stateRead(reads []recorded) cellState {
	var s cellState
	for _, r := range reads {
		switch r.in.Kind {
		case opReadItems:
			s.Items = make([]mItem, len(r.out.Items))
			for i, it := range r.out.Items {
				s.Items[i].Status, s.Items[i].Version = it.Status, it.Version
			}
		case opReadLoans:
			for _, l := range r.out.Loans {
				loan := l.mLoan
				s.Items[l.Item].Loan = &loan
			}
		case opReadRequests:
			for i, q := range r.out.Requests {
				s.Items[i].Queue = slices.Clone(q)
			}
		case opReadFees:
			s.Fees = slices.Clone(r.out.Fees)
		}
	}
	return s.sealed()
}
