package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/checkoutlock/integration-tests/harness"
	"github.com/checkoutlock/schemas"
	"github.com/checkoutlock/schemas/errs/errhttp"
)

// settleByKey has the clients of the history checker and of the
// model-based test settle a write whose answer was lost by sending the
// very same request again, with the same Idempotency-Key, until a
// definite answer (2xx or 4xx) or settleWithin: a key names one write,
// answered as it was first answered whichever circulation instance takes
// it, and a write that never landed is judged and written then. Off
// (-settle=false), a lost answer stays unknown (the model allows either).
// A check-out made offline is settled so either way: its loan is named by
// what it is (circulation.OfflineLoanID), and sent again it answers that
// loan.
var settleByKey = flag.Bool("settle", true, "settle a write whose answer was lost by sending it again with its Idempotency-Key")

// settleWithin bounds how long a write is sent again for.
const settleWithin = 30 * time.Second

// inFlight bounds how long after its last send a write whose answer was
// lost may still take effect: storage ends a request after REQUEST_TIMEOUT
// (10 s), circulation's write after its WriteTimeout (15 s), and a
// statement that outlives its client is settled or ended within seconds.
// The bound keeps the checker's search finite over a long history, where
// every such write would otherwise stay open to the end.
const inFlight = 30 * time.Second

// cellPatron and cellItem are a cell's patron and item as the library
// has them.
type cellPatron struct{ id, barcode string }
type cellItem struct{ id, barcode string }

// libraryCell is a cell of the library: its patrons and items, which no
// other cell's operations name.
type libraryCell struct {
	patrons []cellPatron
	items   []cellItem
}

// cellWorld is what a history's clients share: the cluster, the
// library's cells and service points, and what a cell's records are made
// of.
type cellWorld struct {
	c                         *harness.Cluster
	cells                     []libraryCell
	points                    [2]string
	policy                    string
	group, material, loanType string
	// settle is settleByKey, for the world's clients.
	settle bool
	// ageing has some check-outs at storage made long overdue, for
	// storage's sweeper to age to lost (a history that holds the
	// sweeper's agings: agings).
	ageing bool
}

// cellLongAgo is when a long overdue loan of a cell was made (ageing):
// due three weeks later, years before now. The cell's lost item fee
// policy ages a loan overdue a week (cellAgedAfter): one lent long ago,
// never one a recall made due soon.
var cellLongAgo = time.Date(2020, time.January, 1, 12, 0, 0, 0, time.UTC)

const cellAgedAfter = 7 * 24 * time.Hour

// setupCellLibrary makes a library of cells under the model's policy
// (cellPolicy): an item limit by loan type, renewals from the due date,
// holds kept two days on the shelf of either of two pickup points; and
// cells cells of patrons patrons and items items each.
func setupCellLibrary(t *testing.T, c *harness.Cluster, cells, patrons, items int) *cellWorld {
	t.Helper()
	lib := c.SetupLibrary(0, 0, cellItemLimit)
	renewable(t, c, lib, map[string]any{"numberAllowed": cellRenewals, "renewFromId": "CURRENT_DUE_DATE"})
	second := "2d3e0c4a-6b1f-4c8e-9a55-7f0b3c1d2e4f"
	c.Do(c.Storage, "POST", "/service-points", map[string]any{"id": second, "name": "Circ Desk 3", "code": "cd3",
		"discoveryDisplayName": "Circulation Desk -- Side Entrance", "pickupLocation": true}).Want(t, http.StatusCreated)
	for _, sp := range []string{harness.ServicePoint, second} {
		keepHolds(t, c, sp, 2, "Days")
	}
	// Money: a desk owning what is charged at either point, taking cash;
	// a loan declared lost billed its lost item fee and processing fee,
	// cancelled when it comes back; a patron owing more than
	// cellFeeLimit blocked from borrowing.
	var owner struct{ ID string }
	c.Do(c.Storage, "POST", "/owners", map[string]any{"owner": "Cell desk", "servicePointOwner": []map[string]string{
		{"value": harness.ServicePoint, "label": "Circ Desk 2"}, {"value": second, "label": "Circ Desk 3"}}}).Want(t, http.StatusCreated).Decode(t, &owner)
	c.Do(c.Storage, "POST", "/payments", map[string]any{"nameMethod": "Cash", "ownerId": owner.ID}).Want(t, http.StatusCreated)
	var lost struct{ ID string }
	c.Do(c.Storage, "POST", "/lost-item-fees-policies", map[string]any{"name": "Cell lost", "chargeAmountItem": map[string]any{
		"chargeType": "anotherCost", "amount": cellLostFee / 100}, "lostItemProcessingFee": cellProcessingFee / 100,
		"chargeAmountItemPatron": true, "chargeAmountItemSystem": true, "returnedLostItemProcessingFee": true, "lostItemReturned": "Remove",
		"itemAgedLostOverdue": map[string]any{"duration": 1, "intervalId": "Weeks"}}).
		Want(t, http.StatusCreated).Decode(t, &lost)
	var rules map[string]any
	c.Do(c.Storage, "GET", "/circulation-rules-storage", nil).Want(t, http.StatusOK).Decode(t, &rules)
	rules["fallbackLostItemPolicyId"] = lost.ID
	c.Do(c.Storage, "PUT", "/circulation-rules-storage", rules).Want(t, http.StatusNoContent)
	blockWith(t, c, lib, schemas.ConditionFeeFineBalance, "Patron owes too much", cellFeeLimit/100, true, false, false)
	w := &cellWorld{c: c, points: [2]string{harness.ServicePoint, second}, policy: lib.PolicyID, group: lib.GroupID,
		material: materialTypeOf(t, c), loanType: loanTypeOf(t, c), settle: *settleByKey}
	var wg sync.WaitGroup
	sem := make(chan struct{}, 4)
	failures := make(chan error, cells)
	w.cells = make([]libraryCell, cells)
	for n := range cells {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			cell, err := w.makeCell(fmt.Sprintf("C%04d", n), patrons, items)
			if err != nil {
				failures <- err
			}
			w.cells[n] = cell
		})
	}
	wg.Wait()
	close(failures)
	for err := range failures {
		t.Fatal(err)
	}
	return w
}

// makeCell makes a cell of patrons patrons and items items, their
// barcodes starting with name.
func (w *cellWorld) makeCell(name string, patrons, items int) (libraryCell, error) {
	var cell libraryCell
	create := func(path string, doc map[string]any) (string, error) {
		r := w.c.Do(w.c.Storage, "POST", path, doc)
		var created struct{ ID string }
		if r.Err != nil || r.Status != http.StatusCreated || json.Unmarshal(r.Body, &created) != nil {
			return "", fmt.Errorf("create %s %v: %d %s %v", path, doc["barcode"], r.Status, r.Body, r.Err)
		}
		return strings.ToLower(created.ID), nil
	}
	for p := range patrons {
		barcode := fmt.Sprintf("%s-P%d", name, p)
		id, err := create("/users", map[string]any{"barcode": barcode, "active": true, "patronGroup": w.group,
			"personal": map[string]any{"lastName": "Patron " + barcode}})
		if err != nil {
			return cell, err
		}
		cell.patrons = append(cell.patrons, cellPatron{id: id, barcode: barcode})
	}
	for i := range items {
		barcode := fmt.Sprintf("%s-I%d", name, i)
		id, err := create("/item-storage/items", map[string]any{"barcode": barcode, "title": "Item " + barcode,
			"status": map[string]any{"name": schemas.ItemAvailable}, "materialTypeId": w.material, "permanentLoanTypeId": w.loanType})
		if err != nil {
			return cell, err
		}
		cell.items = append(cell.items, cellItem{id: id, barcode: barcode})
	}
	return cell, nil
}

// materialTypeOf and loanTypeOf are the library's only material and loan
// types.
func materialTypeOf(t *testing.T, c *harness.Cluster) string {
	return onlyIDOf(t, c, "/material-types", "mtypes")
}

func loanTypeOf(t *testing.T, c *harness.Cluster) string {
	return onlyIDOf(t, c, "/loan-types", "loantypes")
}

func onlyIDOf(t *testing.T, c *harness.Cluster, path, plural string) string {
	t.Helper()
	var page map[string]json.RawMessage
	c.Do(c.Storage, "GET", path, nil).Want(t, http.StatusOK).Decode(t, &page)
	var records []struct{ ID string }
	if err := json.Unmarshal(page[plural], &records); err != nil || len(records) != 1 {
		t.Fatalf("%s: %d records (%v), want one", path, len(records), err)
	}
	return records[0].ID
}

// cellMemory is what a client last read of a cell: the items' versions,
// and the loans and requests as documents, to write back at the version
// read however long ago.
type cellMemory struct {
	fees     []mFee
	items    []readItem
	loans    map[string]map[string]any // open loans by id
	loanOf   []string                  // each item's open loan's id ("" for none)
	requests map[string]map[string]any // open requests by id
	queues   [][]string                // each item's open requests' ids, in order
}

func newCellMemory(items int) *cellMemory {
	return &cellMemory{loans: map[string]map[string]any{}, loanOf: make([]string, items),
		requests: map[string]map[string]any{}, queues: make([][]string, items)}
}

// recorded is one operation of a history: its input and output, and when
// it was called and returned, from the history's start.
type recorded struct {
	in        cellInput
	out       cellOutput
	call, ret time.Duration
	// answered is when the client had its answer, or gave up: ret, but
	// for a write whose outcome is not known, which stays open after it.
	answered time.Duration
}

// chooseOp draws an operation on cell for a client that last read mem,
// false when the one drawn has nothing to work on.
func (w *cellWorld) chooseOp(rng *rand.Rand, cell int, mem *cellMemory) (cellInput, bool) {
	lib := w.cells[cell]
	in := cellInput{Cell: cell, Item: rng.IntN(len(lib.items)), Patron: rng.IntN(len(lib.patrons)), Point: rng.IntN(len(w.points))}
	if rng.IntN(100) < 15 {
		// Money: read what the patrons owe, or pay or waive some of a
		// fee/fine last read open (part of it, all of it, or more than
		// remains), or now and then one read closed.
		var open []mFee
		for _, f := range mem.fees {
			if f.Remaining > 0 || rng.IntN(8) == 0 {
				open = append(open, f)
			}
		}
		if rng.IntN(4) == 0 || len(open) == 0 {
			in.Kind, in.Item, in.Patron, in.Point = opReadFees, 0, 0, 0
			return in, true
		}
		f := open[rng.IntN(len(open))]
		in.Kind, in.ID, in.Patron, in.Item, in.Point = opPay, f.Account, f.Patron, 0, 0
		if rng.IntN(4) == 0 {
			in.Kind = opWaive
		}
		in.Amount = []int{100, 100, 250, f.Remaining, f.Remaining + 100}[rng.IntN(5)]
		if in.Amount <= 0 {
			in.Amount = 100
		}
		return in, true
	}
	switch n := rng.IntN(100); {
	case n < 13:
		in.Kind = opCheckOut
		in.Overdue = w.ageing && rng.IntN(4) == 0
	case n < 16:
		in.Kind = opCheckOutOffline
	case n < 21:
		// At the version last read, however long ago; an item read on
		// loan is left alone.
		if len(mem.items) == 0 || mem.loanOf[in.Item] != "" || onLoanStatus(mem.items[in.Item].Status) {
			return in, false
		}
		in.Kind, in.ID, in.Version = opCheckOutStorage, uuid.NewString(), mem.items[in.Item].Version
		in.Overdue = w.ageing && rng.IntN(2) == 0
	case n < 30:
		in.Kind, in.Patron = opCheckIn, 0
	case n < 38:
		in.Kind = opRenew
		// Mostly by the borrower last read, whose renewal may be done.
		if id := mem.loanOf[in.Item]; id != "" && rng.IntN(4) > 0 {
			in.Patron = w.patronIndex(cell, mem.loans[id]["userId"].(string))
		}
	case n < 44:
		id := mem.loanOf[in.Item]
		if id == "" {
			return in, false
		}
		in.Kind, in.ID = opClaim, id
		if rng.IntN(2) == 0 {
			in.Kind = opDeclare
		}
	case n < 56:
		in.Kind, in.ID = opPlace, uuid.NewString()
		in.Type = []string{schemas.RequestTypeHold, schemas.RequestTypeHold, schemas.RequestTypeRecall, schemas.RequestTypePage}[rng.IntN(4)]
	case n < 62:
		q := mem.queues[in.Item]
		if len(q) == 0 {
			return in, false
		}
		in.Kind, in.ID = opCancel, q[rng.IntN(len(q))]
		in.Version = versionOf(mem.requests[in.ID])
	case n < 66:
		q := mem.queues[in.Item]
		if len(q) == 0 || len(lib.items) < 2 {
			return in, false
		}
		in.Kind, in.ID = opMove, q[rng.IntN(len(q))]
		in.Dest = (in.Item + 1 + rng.IntN(len(lib.items)-1)) % len(lib.items)
	case n < 72:
		id := mem.loanOf[in.Item]
		if id == "" {
			return in, false
		}
		in.Kind, in.ID, in.Version, in.Renewals = opReplaceLoan, id, versionOf(mem.loans[id]), renewalsOf(mem.loans[id])
	case n < 81:
		in.Kind = opReadItems
	case n < 90:
		in.Kind = opReadLoans
	default:
		in.Kind = opReadRequests
	}
	if in.Kind != opPlace && in.Kind != opCheckIn {
		in.Point = 0
	}
	return in, true
}

// onLoanStatus says whether an item of status has an open loan, in the
// model.
func onLoanStatus(status string) bool {
	return status == schemas.ItemCheckedOut || slices.Contains(schemas.ItemStatusesNotCheckedOut, status)
}

// patronIndex is the index in cell of the patron whose id is id.
func (w *cellWorld) patronIndex(cell int, id string) int {
	return slices.IndexFunc(w.cells[cell].patrons, func(p cellPatron) bool { return p.id == strings.ToLower(id) })
}

// itemIndex is the index in cell of the item whose id is id.
func (w *cellWorld) itemIndex(cell int, id string) int {
	return slices.IndexFunc(w.cells[cell].items, func(it cellItem) bool { return it.id == strings.ToLower(id) })
}

// versionOf is a record's _version as read.
func versionOf(doc map[string]any) int {
	n, _ := doc["_version"].(float64)
	return int(n)
}

// renewalsOf is a loan's renewal count as read.
func renewalsOf(loan map[string]any) int {
	n, _ := loan["renewalCount"].(float64)
	return int(n)
}

// pick is one of ps.
func pick(rng *rand.Rand, ps []*harness.Process) *harness.Process { return ps[rng.IntN(len(ps))] }

// do runs in: a write through one of the circulation instances (or at one
// of the storage instances), or a read at one of the storage instances. It
// records what a read found in mem. ok is false for a read that was not
// answered: it says nothing.
func (w *cellWorld) do(rng *rand.Rand, in cellInput, mem *cellMemory, start time.Time) (r recorded, ok bool) {
	lib := w.cells[in.Cell]
	r.in = in
	r.call = time.Since(start)
	if in.Kind.read() {
		out, ok := w.read(pick(rng, w.c.Storages), in, mem)
		r.out, r.ret = out, time.Since(start)
		return r, ok
	}
	item, patron := lib.items[in.Item], lib.patrons[in.Patron]
	now := time.Now().UTC()
	circulation := func() *harness.Process { return pick(rng, w.c.Circulations) }
	storage := func() *harness.Process { return pick(rng, w.c.Storages) }
	var a writeAnswer
	differ := false
	switch in.Kind {
	case opCheckOut:
		body := map[string]any{"itemBarcode": item.barcode, "userBarcode": patron.barcode, "servicePointId": w.points[0]}
		if in.Overdue {
			// Recorded as lent years ago: due years ago.
			body["loanDate"] = schemas.FormatTime(cellLongAgo)
		}
		a = w.write(in.Kind, circulation, "POST", "/circulation/check-out-by-barcode", body, nil, w.settle)
	case opCheckOutOffline:
		a = w.write(in.Kind, circulation, "POST", "/circulation/check-out-by-barcode", map[string]any{"itemBarcode": item.barcode,
			"userBarcode": patron.barcode, "servicePointId": w.points[0],
			// Made offline within the last hour, at a time of its own: the
			// same patron, item and time name the same check-out.
			"offline": map[string]any{"transactionDate": schemas.FormatTime(
				now.Add(-time.Minute - time.Duration(rng.IntN(3_600_000))*time.Millisecond))}}, nil, true)
	case opCheckOutStorage:
		loanDate := now
		if in.Overdue {
			loanDate = cellLongAgo
		}
		a = w.write(in.Kind, storage, "POST", "/loan-storage/loans", map[string]any{"id": in.ID, "userId": patron.id, "itemId": item.id,
			"loanDate": schemas.FormatTime(loanDate), "dueDate": schemas.FormatTime(loanDate.Add(21 * 24 * time.Hour)),
			"action": "checkedout", "status": map[string]any{"name": schemas.LoanOpen}, "loanPolicyId": w.policy,
			"checkoutServicePointId": w.points[0]},
			map[string]string{schemas.HeaderItemVersion: fmt.Sprint(in.Version), schemas.HeaderLockID: uuid.NewString(),
				schemas.HeaderReleaseLock: "true", schemas.HeaderAcquireLock: "ttlMs=10000&waitMs=2000"}, w.settle)
	case opCheckIn:
		a = w.write(in.Kind, circulation, "POST", "/circulation/check-in-by-barcode", map[string]any{"itemBarcode": item.barcode,
			"servicePointId": w.points[in.Point]}, nil, w.settle)
	case opRenew:
		a = w.write(in.Kind, circulation, "POST", "/circulation/renew-by-barcode", map[string]any{"itemBarcode": item.barcode,
			"userBarcode": patron.barcode}, nil, w.settle)
	case opClaim:
		a = w.write(in.Kind, circulation, "POST", "/circulation/loans/"+in.ID+"/claim-item-returned",
			map[string]any{"itemClaimedReturnedDateTime": schemas.FormatTime(now)}, nil, w.settle)
	case opDeclare:
		a = w.write(in.Kind, circulation, "POST", "/circulation/loans/"+in.ID+"/declare-item-lost",
			map[string]any{"declaredLostDateTime": schemas.FormatTime(now), "servicePointId": w.points[0]}, nil, w.settle)
	case opPlace:
		a = w.write(in.Kind, circulation, "POST", "/circulation/requests", map[string]any{"id": in.ID, "requestType": in.Type,
			"requestDate": schemas.FormatTime(now), "requesterId": patron.id, "itemId": item.id,
			"fulfillmentPreference": "Hold Shelf", "pickupServicePointId": w.points[in.Point]}, nil, w.settle)
	case opCancel:
		doc := maps.Clone(mem.requests[in.ID])
		doc["status"] = schemas.RequestCancelled
		a = w.write(in.Kind, circulation, "PUT", "/circulation/requests/"+in.ID, doc, nil, w.settle)
	case opMove:
		a = w.write(in.Kind, circulation, "POST", "/circulation/requests/"+in.ID+"/move",
			map[string]any{"destinationItemId": lib.items[in.Dest].id}, nil, w.settle)
	case opReplaceLoan:
		a = w.write(in.Kind, storage, "PUT", "/loan-storage/loans/"+in.ID, mem.loans[in.ID], nil, w.settle)
	case opPay, opWaive:
		action, method := "pay", "Cash"
		if in.Kind == opWaive {
			action, method = "waive", "Librarian's discretion"
		}
		path, body := "/accounts/"+in.ID+"/"+action, map[string]any{"amount": fmt.Sprintf("%d.%02d", in.Amount/100, in.Amount%100),
			"paymentMethod": method, "notifyPatron": false, "servicePointId": w.points[0], "userName": "History"}
		if rng.IntN(2) == 0 {
			// As a kiosk whose reply was slow sends its payment again, on
			// another connection: the same key, twice at once, to either
			// circulation instance. Both answered, and either paid, the
			// answers must be one: the first's (Differ says they were
			// not). Two refusals may differ: a refusal wrote nothing and is
			// not remembered, so the second is judged again, in the state
			// of its own time.
			var second writeAnswer
			key := uuid.NewString()
			var wg sync.WaitGroup
			other := w.c.Circulations[rng.IntN(len(w.c.Circulations))]
			wg.Go(func() {
				second = w.writeKeyed(key, in.Kind, func() *harness.Process { return other }, "POST", path, body, nil, w.settle)
			})
			a = w.writeKeyed(key, in.Kind, circulation, "POST", path, body, nil, w.settle)
			wg.Wait()
			differ = a.err == nil && second.err == nil && a.status < 500 && second.status < 500 &&
				(a.status < 300 || second.status < 300) && (a.status != second.status || !bytes.Equal(a.body, second.body))
			break
		}
		a = w.write(in.Kind, circulation, "POST", path, body, nil, w.settle)
	}
	r.out = a.output(in.Kind)
	r.out.Differ = differ
	if in.Kind == opCheckOutStorage && r.out.Outcome != outRefused && r.out.Outcome != outNotDone {
		r.out.ID = in.ID
	}
	if in.Kind == opCheckOutOffline && r.out.Outcome == outDone {
		// What its loan says it broke, as storage recorded it: circulation's
		// answer says so too, but when the write's own answer was lost and
		// the loan read back, it answers the loan it meant to write, which
		// says nothing broken.
		var loan struct {
			Offline struct {
				BrokenRules *[]string `json:"brokenRules"`
			} `json:"offline"`
		}
		if w.get(storage(), "/loan-storage/loans/"+r.out.ID, &loan) && loan.Offline.BrokenRules != nil {
			r.out.Broken, r.out.Said = codeSet(*loan.Offline.BrokenRules...), true
		}
	}
	r.ret = time.Since(start)
	r.answered = r.ret
	if r.out.Outcome == outUnknown {
		// It may take effect until inFlight after it was last sent
		// unanswered, or (answered, but not knowing) after its call.
		from := r.call
		if !a.lastUnanswered.IsZero() {
			from = a.lastUnanswered.Sub(start)
		}
		r.ret = max(r.ret, from+inFlight)
	}
	return r, true
}

// writeAnswer is a write's last answer, after every send: its status and
// body, or the error that left it without one; whether a send before it
// went without an answer that says what it did (output) and so may still
// take effect, and when the last send that went so was made; and whether
// the sends were settled by the write's Idempotency-Key (keyed), whose
// answers are the first's.
type writeAnswer struct {
	status          int
	body            []byte
	err             error
	priorUnanswered bool
	lastUnanswered  time.Time
	keyed           bool
}

// write sends a write of kind, with an Idempotency-Key of its own, to a
// process (a circulation or a storage instance, drawn by to for each
// send); with resend, again with the same key and body, to an instance
// drawn again, while it is not answered (no answer, or 5xx), for up to
// settleWithin. A send whose answer alone leaves the outcome not known
// (output) is one that may still take effect.
func (w *cellWorld) write(kind opKind, to func() *harness.Process, method, path string, body any, headers map[string]string, resend bool) writeAnswer {
	return w.writeKeyed(uuid.NewString(), kind, to, method, path, body, headers, resend)
}

// writeKeyed is write with the Idempotency-Key key.
func (w *cellWorld) writeKeyed(key string, kind opKind, to func() *harness.Process, method, path string, body any, headers map[string]string,
	resend bool) writeAnswer {
	a := writeAnswer{keyed: w.settle}
	unanswered := false
	send := func() bool {
		start := time.Now()
		a.priorUnanswered = a.priorUnanswered || unanswered
		a.status, a.body, a.err = w.send(to(), method, path, body, headers, key)
		alone := a
		alone.priorUnanswered = false
		if unanswered = alone.output(kind).Outcome == outUnknown; unanswered {
			a.lastUnanswered = start
		}
		return a.err == nil && a.status < 500
	}
	if !send() && resend {
		harness.Poll(settleWithin, 200*time.Millisecond, send)
	}
	return a
}

// neverSent says whether err is a request that never reached the process:
// nothing listened.
func neverSent(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

// conflictCodes are the refusals of a write because another came first,
// by kind: what it read changed before it wrote (the item, the loan, the
// request; a check-in of an item without a loan meeting one a check-out
// made meanwhile is answered a validation failure; a request moved to
// another item while a write waited for its queue, a conflict), or the
// patron's lock stayed held by another check-out.
var conflictCodes = map[opKind][]string{
	opCheckOut:        {schemas.CodeItemChanged, schemas.CodeUnableToAcquireLock},
	opCheckOutOffline: {schemas.CodeItemChanged, schemas.CodeUnableToAcquireLock},
	opCheckOutStorage: {schemas.CodeLockHeld},
	opCheckIn:         {schemas.CodeLoanChanged, schemas.CodeItemChanged, schemas.CodeValidation},
	opRenew:           {schemas.CodeLoanChanged},
	opClaim:           {schemas.CodeItemChanged, schemas.CodeLoanChanged},
	opDeclare:         {schemas.CodeItemChanged, schemas.CodeLoanChanged},
	opCancel:          {schemas.CodeConflict},
	opMove:            {schemas.CodeVersionConflict, schemas.CodeConflict},
}

// notWritten are the codes of a 503 that says nothing was written.
var notWritten = []string{schemas.CodeCheckOutsBusy, schemas.CodeShuttingDown}

// output is what a's answer says of a write of kind: done (2xx: with the
// loan a check-out made, the renewals a renewal answered); refused (4xx);
// a conflict (a 4xx, or storage's 503 LOCK_HELD, of conflictCodes); not
// done (no process took it; a 503 that says nothing was written, or a
// check-out's or a renewal's that names no loan: it never reached its
// write, which names the loan it would write); otherwise not known, with
// the loan it names. After a send that went unanswered, only a 2xx (or,
// settled by key, a 4xx: the first send's answer) is definite: a send
// judged again may be refused while the first still takes effect.
func (a writeAnswer) output(kind opKind) cellOutput {
	ok := a.err == nil && a.status >= 200 && a.status < 300
	settled := ok || a.keyed && a.err == nil && a.status >= 400 && a.status < 500
	switch {
	case a.priorUnanswered && !settled:
		return cellOutput{Outcome: outUnknown}
	case neverSent(a.err):
		return cellOutput{Outcome: outNotDone}
	case a.err != nil:
		return cellOutput{Outcome: outUnknown}
	case ok:
		var doc struct {
			ID           string `json:"id"`
			RenewalCount int    `json:"renewalCount"`
		}
		_ = json.Unmarshal(a.body, &doc)
		out := cellOutput{Outcome: outDone, Renewals: doc.RenewalCount}
		if kind.lends() {
			out.ID = strings.ToLower(doc.ID)
		}
		return out
	}
	env, _ := errhttp.Decode(a.body)
	var codes []string
	var loanID string
	for _, e := range env.Errors {
		codes = append(codes, e.Code)
		for _, p := range e.Parameters {
			if p.Key == "loanId" {
				loanID = strings.ToLower(p.Value)
			}
		}
	}
	codes = codeSet(codes...)
	conflict := slices.ContainsFunc(codes, func(c string) bool { return slices.Contains(conflictCodes[kind], c) })
	unavailable := a.status == http.StatusServiceUnavailable
	switch {
	case a.status >= 400 && a.status < 500 && conflict:
		return cellOutput{Outcome: outConflict, Codes: codes}
	case a.status >= 400 && a.status < 500:
		return cellOutput{Outcome: outRefused, Codes: codes}
	case unavailable && conflict:
		return cellOutput{Outcome: outConflict, Codes: codes}
	case unavailable && slices.ContainsFunc(codes, func(c string) bool { return slices.Contains(notWritten, c) }):
		return cellOutput{Outcome: outNotDone, Codes: codes}
	case unavailable && loanID == "" && (kind == opCheckOut || kind == opCheckOutOffline || kind == opRenew):
		return cellOutput{Outcome: outNotDone, Codes: codes}
	}
	return cellOutput{Outcome: outUnknown, ID: loanID}
}

// read reads what in asks of its cell at storage p into an output, and
// into mem; false when it was not answered.
func (w *cellWorld) read(p *harness.Process, in cellInput, mem *cellMemory) (cellOutput, bool) {
	lib := w.cells[in.Cell]
	var ids []string
	for _, it := range lib.items {
		ids = append(ids, fmt.Sprintf("%q", it.id))
	}
	anyOf := "(" + strings.Join(ids, " or ") + ")"
	out := cellOutput{Outcome: outDone}
	switch in.Kind {
	case opReadFees:
		var patrons []string
		for _, p := range lib.patrons {
			patrons = append(patrons, fmt.Sprintf("%q", p.id))
		}
		var page struct {
			Accounts []struct {
				ID, UserID, LoanID, FeeFineType string
				Amount, Remaining               json.Number
			}
		}
		if !w.get(p, "/accounts?limit=1000&query="+url.QueryEscape("userId==("+strings.Join(patrons, " or ")+")"), &page) {
			return out, false
		}
		out.Fees = []mFee{}
		for _, a := range page.Accounts {
			out.Fees = append(out.Fees, mFee{Account: strings.ToLower(a.ID), Loan: strings.ToLower(a.LoanID), Patron: w.patronIndex(in.Cell, a.UserID),
				Kind: a.FeeFineType, Amount: cents(a.Amount), Remaining: cents(a.Remaining)})
		}
		sortFees(out.Fees)
		mem.fees = out.Fees
	case opReadItems:
		var page struct {
			Items []struct {
				ID      string
				Status  struct{ Name string }
				Version int `json:"_version"`
			}
		}
		if !w.get(p, "/item-storage/items?limit=100&query="+url.QueryEscape("id=="+anyOf), &page) {
			return out, false
		}
		out.Items = make([]readItem, len(lib.items))
		for _, it := range page.Items {
			if i := w.itemIndex(in.Cell, it.ID); i >= 0 {
				out.Items[i] = readItem{Status: it.Status.Name, Version: it.Version}
			}
		}
		mem.items = out.Items
	case opReadLoans:
		var page struct{ Loans []map[string]any }
		if !w.get(p, "/loan-storage/loans?limit=100&query="+url.QueryEscape("itemId=="+anyOf+` and status.name=="Open"`), &page) {
			return out, false
		}
		clear(mem.loans)
		clear(mem.loanOf)
		for _, l := range page.Loans {
			item := w.itemIndex(in.Cell, l["itemId"].(string))
			id := strings.ToLower(l["id"].(string))
			recalled, _ := l["dueDateChangedByRecall"].(bool)
			// Due long ago: ripe (overdue longer than cellAgedAfter);
			// billed, as its aging says.
			due, err := time.Parse(time.RFC3339, fmt.Sprint(l["dueDate"]))
			billing, _ := l["agedToLostDelayedBilling"].(map[string]any)
			billed, _ := billing["lostItemHasBeenBilled"].(bool)
			out.Loans = append(out.Loans, readLoan{Item: item, mLoan: mLoan{ID: id, Patron: w.patronIndex(in.Cell, l["userId"].(string)),
				Renewals: renewalsOf(l), Version: versionOf(l), Recalled: recalled, Ripe: err == nil && due.Before(time.Now().Add(-cellAgedAfter)),
				Billed: billed}})
			delete(l, "metadata")
			mem.loans[id], mem.loanOf[item] = l, id
		}
		slices.SortFunc(out.Loans, func(a, b readLoan) int { return a.Item - b.Item })
	case opReadRequests:
		var page struct{ Requests []map[string]any }
		if !w.get(p, "/request-storage/requests?limit=1000&query="+url.QueryEscape("itemId=="+anyOf), &page) {
			return out, false
		}
		out.Requests = make([][]mRequest, len(lib.items))
		positions := make([][]int, len(lib.items))
		clear(mem.requests)
		for _, r := range page.Requests {
			status, _ := r["status"].(string)
			if !schemas.RequestIsOpen(status) {
				continue
			}
			item := w.itemIndex(in.Cell, r["itemId"].(string))
			id := strings.ToLower(r["id"].(string))
			pickup, _ := r["pickupServicePointId"].(string)
			position, _ := r["position"].(float64)
			out.Requests[item] = append(out.Requests[item], mRequest{ID: id, Patron: w.patronIndex(in.Cell, r["requesterId"].(string)),
				Type: r["requestType"].(string), Status: status, Pickup: slices.Index(w.points[:], strings.ToLower(pickup)), Version: versionOf(r)})
			positions[item] = append(positions[item], int(position))
			delete(r, "metadata")
			mem.requests[id] = r
		}
		for i := range out.Requests {
			order := make([]int, len(out.Requests[i]))
			for k := range order {
				order[k] = k
			}
			slices.SortFunc(order, func(a, b int) int { return positions[i][a] - positions[i][b] })
			sorted := make([]mRequest, len(order))
			mem.queues[i] = mem.queues[i][:0]
			for k, o := range order {
				sorted[k] = out.Requests[i][o]
				if positions[i][o] != k+1 {
					// A queue whose positions are not 1 to n is no state
					// of the model.
					sorted[k].Status += fmt.Sprintf(" at position %d", positions[i][o])
				}
				mem.queues[i] = append(mem.queues[i], sorted[k].ID)
			}
			out.Requests[i] = sorted
		}
	}
	return out, true
}

// cents is an amount as storage answers it (a decimal of at most two
// places) in cents; -1 for one that is not.
func cents(n json.Number) int {
	whole, frac, _ := strings.Cut(n.String(), ".")
	frac = (frac + "00")[:2]
	var w, f int
	if _, err := fmt.Sscan(whole, &w); err != nil {
		return -1
	}
	if _, err := fmt.Sscan(frac, &f); err != nil {
		return -1
	}
	return w*100 + f
}

// historyClient is the clients' HTTP client: a call gives up after
// twenty seconds, its answer lost.
var historyClient = &http.Client{Timeout: 20 * time.Second,
	Transport: &http.Transport{MaxIdleConnsPerHost: 64, MaxIdleConns: 256}}

// get GETs path from p into v, reporting whether it was answered 200.
func (w *cellWorld) get(p *harness.Process, path string, v any) bool {
	status, data, err := w.send(p, "GET", path, nil, nil, "")
	return err == nil && status == http.StatusOK && json.Unmarshal(data, v) == nil
}

// send sends one request as the tenant's administrator (who may check
// out offline), with key as its Idempotency-Key when not "".
func (w *cellWorld) send(p *harness.Process, method, path string, body any, headers map[string]string, key string) (int, []byte, error) {
	var r io.Reader
	if body != nil {
		data, err := json.Marshal(body)
		if err != nil {
			return 0, nil, err
		}
		r = bytes.NewReader(data)
	}
	ctx, cancel := context.WithTimeout(context.Background(), historyClient.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, p.URL()+path, r)
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	for k, v := range w.c.Headers() {
		req.Header.Set(k, v)
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	if key != "" {
		// In lower case (HTTP's header names are the same in any case, and
		// the services read them so): Go's transport takes a request that
		// names an Idempotency-Key in its own case as one it may send again
		// by itself on a fresh connection when the one it was sent on
		// breaks, and then answers the second send's fate (a process not
		// listening: "never sent"). Whether, and when, a write is sent again
		// is this client's to say (write).
		req.Header["idempotency-key"] = []string{key}
		if !strings.HasPrefix(path, "/circulation/") {
			// A write at storage is named by its write id.
			req.Header.Del("idempotency-key")
			req.Header.Set(schemas.HeaderWriteID, key)
		}
	}
	res, err := historyClient.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer res.Body.Close()
	data, err := io.ReadAll(res.Body)
	return res.StatusCode, data, err
}
