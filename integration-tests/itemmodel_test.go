package integration

import (
	"fmt"
	"reflect"
	"slices"
	"strings"

	"github.com/anishathalye/porcupine"

	"github.com/checkoutlock/schemas"
)

// The model the history checker (TestHistoriesAreLinearizable) holds the
// services to: one item, its open loan and its queue of holds, as FOLIO's
// rules move them for a library whose policy lends without a limit, renews
// without a limit while no hold waits, and takes holds of items on loan or
// on the hold shelf. Every write the services answered done must be a step
// of the model from the state before it; a write they refused changed
// nothing; one whose answer was lost either did nothing or made its step;
// and every read returns the model's state. Versions are part of the
// state: every write of a loan or a request moves its version by one, as
// storage's do, so a write made at a version that another write moved on
// has no step.

// modelItem is one item as the model holds it.
type modelItem struct {
	Loan  *modelLoan
	Queue []modelRequest
}

// modelLoan is the item's open loan. ID is "" while not known (a check-out
// whose answer was lost and named no loan), bound by the next read.
type modelLoan struct {
	ID       string
	Patron   string
	Renewals int
	Version  int
}

// modelRequest is an open hold of the item's queue, Waiting once the item
// is on the hold shelf for it.
type modelRequest struct {
	ID      string
	Patron  string
	Version int
	Waiting bool
}

func (s modelItem) clone() modelItem {
	out := modelItem{Queue: slices.Clone(s.Queue)}
	if s.Loan != nil {
		l := *s.Loan
		out.Loan = &l
	}
	return out
}

// status is the item's status in s.
func (s modelItem) status() string {
	switch {
	case s.Loan != nil:
		return schemas.ItemCheckedOut
	case len(s.Queue) > 0 && s.Queue[0].Waiting:
		return schemas.ItemAwaitingPickup
	}
	return schemas.ItemAvailable
}

// queued says whether patron has a hold in the queue.
func (s modelItem) queued(patron string) bool {
	return slices.ContainsFunc(s.Queue, func(r modelRequest) bool { return r.Patron == patron })
}

// opKind is what an operation of the history does.
type opKind int

const (
	opCheckOut opKind = iota
	opCheckIn
	opRenew
	opHold
	opCancel
	opReplaceLoan
	opReadLoan
	opReadQueue
	opReadItem
)

var opNames = []string{"check-out", "check-in", "renew", "hold", "cancel", "replace loan", "read loan", "read queue", "read item"}

// histInput is an operation as called: its item, the patron, the loan or
// request it names, and for a replace or a cancel the version and the
// renewal count of the record as the caller read it.
type histInput struct {
	Kind     opKind
	Item     string
	Patron   string
	ID       string
	Version  int
	Renewals int
}

// outcome is what a write's answer says of it.
type outcome int

const (
	outDone    outcome = iota // 2xx: written
	outRefused                // 4xx, or a 503 that says nothing was written: nothing changed
	outUnknown                // no answer, or one that does not know: either
)

// histOutput is an operation's answer: a write's outcome (with the loan a
// check-out names), or what a read found.
type histOutput struct {
	Outcome outcome
	ID      string
	Loan    *modelLoan
	Queue   []modelRequest
	Status  string
}

// step is the state after a write in, when the model allows it from s.
func step(s modelItem, in histInput) (modelItem, bool) {
	next := s.clone()
	switch in.Kind {
	case opCheckOut:
		if s.Loan != nil || len(s.Queue) > 0 && s.Queue[0].Patron != in.Patron {
			return s, false
		}
		next.Loan = &modelLoan{ID: in.ID, Patron: in.Patron, Version: 1}
		if len(s.Queue) > 0 {
			// The borrower's hold first in the queue is filled; the
			// others move up.
			next.Queue = next.Queue[1:]
			for i := range next.Queue {
				next.Queue[i].Version++
			}
		}
	case opCheckIn:
		if s.Loan == nil {
			// An item without a loan checked in where it is: it stays
			// as it is, a hold on its shelf keeping its date.
			return s, true
		}
		next.Loan = nil
		if len(next.Queue) > 0 {
			next.Queue[0].Waiting = true
			next.Queue[0].Version++
		}
	case opRenew:
		if s.Loan == nil || s.Loan.Patron != in.Patron || len(s.Queue) > 0 {
			return s, false
		}
		next.Loan.Renewals++
		next.Loan.Version++
	case opHold:
		onLoan := s.Loan != nil && s.Loan.Patron != in.Patron
		onShelf := s.Loan == nil && len(s.Queue) > 0 && s.Queue[0].Waiting
		if !onLoan && !onShelf || s.queued(in.Patron) {
			return s, false
		}
		next.Queue = append(next.Queue, modelRequest{ID: in.ID, Patron: in.Patron, Version: 1})
	case opCancel:
		i := slices.IndexFunc(s.Queue, func(r modelRequest) bool { return r.ID == in.ID })
		if i < 0 || s.Queue[i].Version != in.Version {
			return s, false
		}
		next.Queue = slices.Delete(next.Queue, i, i+1)
		for j := i; j < len(next.Queue); j++ {
			next.Queue[j].Version++
		}
		if i == 0 && s.Queue[0].Waiting && len(next.Queue) > 0 {
			// The item on the hold shelf goes to the next hold.
			next.Queue[0].Waiting = true
			next.Queue[0].Version++
		}
	case opReplaceLoan:
		if s.Loan == nil || s.Loan.ID != in.ID || s.Loan.Version != in.Version {
			return s, false
		}
		next.Loan.Version++
		next.Loan.Renewals = in.Renewals
	default:
		return s, false
	}
	return next, true
}

// itemModel is the model as porcupine checks it, one partition an item.
var itemModel = porcupine.NondeterministicModel{
	Partition: func(history []porcupine.Operation) [][]porcupine.Operation {
		byItem := map[string][]porcupine.Operation{}
		var items []string
		for _, op := range history {
			item := op.Input.(histInput).Item
			if _, ok := byItem[item]; !ok {
				items = append(items, item)
			}
			byItem[item] = append(byItem[item], op)
		}
		out := make([][]porcupine.Operation, 0, len(items))
		for _, item := range items {
			out = append(out, byItem[item])
		}
		return out
	},
	Init: func() []any { return []any{modelItem{}} },
	Step: func(state, input, output any) []any {
		s, in, out := state.(modelItem), input.(histInput), output.(histOutput)
		switch in.Kind {
		case opReadLoan:
			switch {
			case s.Loan == nil || out.Loan == nil:
				if (s.Loan == nil) != (out.Loan == nil) {
					return nil
				}
			case s.Loan.ID == "" && *out.Loan == (modelLoan{ID: out.Loan.ID, Patron: s.Loan.Patron, Renewals: s.Loan.Renewals, Version: s.Loan.Version}):
				// The loan of a check-out whose answer was lost, now known.
				next := s.clone()
				next.Loan.ID = out.Loan.ID
				return []any{next}
			case *out.Loan != *s.Loan:
				return nil
			}
			return []any{s}
		case opReadQueue:
			if len(s.Queue) != len(out.Queue) || len(s.Queue) > 0 && !reflect.DeepEqual(s.Queue, out.Queue) {
				return nil
			}
			return []any{s}
		case opReadItem:
			if out.Status != s.status() {
				return nil
			}
			return []any{s}
		}
		if in.Kind == opCheckOut {
			in.ID = out.ID
		}
		next, allowed := step(s, in)
		switch out.Outcome {
		case outDone:
			if allowed {
				return []any{next}
			}
			return nil
		case outRefused:
			return []any{s}
		}
		if allowed {
			return []any{s, next}
		}
		return []any{s}
	},
	Equal: func(a, b any) bool { return reflect.DeepEqual(a, b) },
	DescribeOperation: func(input, output any) string {
		in, out := input.(histInput), output.(histOutput)
		call := fmt.Sprintf("%s %s", opNames[in.Kind], short(in.Patron))
		if in.ID != "" {
			call += fmt.Sprintf(" %s@%d", short(in.ID), in.Version)
		}
		switch in.Kind {
		case opReadLoan, opReadQueue, opReadItem:
			return call + " → " + describeState(modelItem{Loan: out.Loan, Queue: out.Queue}) + " " + out.Status
		}
		return call + " → " + []string{"done", "refused", "unknown"}[out.Outcome] + " " + short(out.ID)
	},
	DescribeState: func(state any) string { return describeState(state.(modelItem)) },
}

func describeState(s modelItem) string {
	var b strings.Builder
	if s.Loan != nil {
		fmt.Fprintf(&b, "loan %s to %s ×%d @%d", short(s.Loan.ID), short(s.Loan.Patron), s.Loan.Renewals, s.Loan.Version)
	} else {
		b.WriteString("no loan")
	}
	for _, r := range s.Queue {
		fmt.Fprintf(&b, "; hold %s by %s @%d", short(r.ID), short(r.Patron), r.Version)
		if r.Waiting {
			b.WriteString(" on the shelf")
		}
	}
	return b.String()
}

// short is an id's first eight characters.
func short(id string) string { return id[:min(8, len(id))] }
