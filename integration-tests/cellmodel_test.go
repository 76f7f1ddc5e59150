package integration

import (
	"cmp"
	"fmt"
	"hash/fnv"
	"slices"
	"strings"
	"testing"

	"github.com/anishathalye/porcupine"

	"github.com/checkoutlock/schemas"
)

// The model the history checker (TestHistoriesAreLinearizable) and the
// model-based test (TestTheWritesFollowTheModel) hold the services to: one
// cell of the library, a few patrons and a few items that only they
// borrow and request, as FOLIO's rules move them under the library's
// policy (cellPolicy): every item's status and version, its open loan
// (borrower, renewals, version, recalled or not), its queue of requests
// (type, requester, status, pickup point, version), and so every patron's
// open loans against the item limit. A cell is closed: its patrons touch
// only its items, so a cell's history is checked on its own.
//
// Every write the services answered done must be a step of the model from
// the state before it; a write they refused must be refused by the model in
// that state, for the reasons the answer names (judge); a write refused
// because another write came first (a conflict: the item, the loan or the
// request changed since it was read, the patron's lock held) changed
// nothing, and the history must hold a write that could have come first
// (conflictsExplained); a write that said it wrote nothing (storage too busy,
// the process stopping) changed nothing; and one whose answer was lost
// either did nothing or made its step. Every read returns the model's state.
//
// The rules are FOLIO's as circulation and storage keep them:
//
//   - check-out (circulation's, live): refused for an item checked out, with
//     an open loan, whose status does not lend (Declared lost, Claimed
//     returned), whose queue's first request is another patron's, and at the
//     patron's item limit (open loans not counting items Claimed returned);
//     done, the item is Checked out, the loan new, and the borrower's
//     request first in the queue filled (the others move up);
//   - check-out made offline: recorded past every rule (the item limit
//     among them: it already happened) but an item on loan, its loan
//     saying which it broke (offlineBroken); another patron's request first
//     in the queue stays;
//   - check-out written at storage at the item's version read (under the
//     patron's lock it acquires and releases in the write): refused for the
//     rules storage judges in its write (the item limit, another patron's
//     request first, the item's status), then for a version other than the
//     item's;
//   - check-in: the loan closed, and the item to its queue's first request
//     (returnTo: on the hold shelf where it is picked up, else in transit
//     to it) or Available;
//   - renewal: refused for an item without a loan, another patron's, a
//     recall open in its queue, an item Declared lost or Claimed returned,
//     the renewal limit, and a hold first in the queue;
//   - claim returned and declare lost: the item Claimed returned or
//     Declared lost, the loan open still; refused for a closed loan and an
//     item already so;
//   - a request placed (hold, recall, page): refused for a type the item's
//     status does not take, a second open request of the patron's for the
//     item, and the patron's own loan of it; a page makes an Available item
//     Paged, a recall marks the item's loan (once);
//   - a request cancelled at the version read (refused at another), its
//     queue moving up, an item on the hold shelf for it handed to the next
//     request (or put back), a Paged item of an open page put back on the
//     shelf when no other page waits;
//   - a request moved to another item's queue, judged there as one placed;
//   - a loan replaced at storage at the version read (refused at another);
//   - money: a loan declared lost bills its patron the lost item fee and
//     the processing fee (cellLostFee, cellProcessingFee), in the
//     declaration's write, each once a loan (declared lost again after a
//     claim returned, billed nothing more); its item checked in cancels what remains of
//     both (a refund gives back what was paid, and leaves remaining at
//     0); a payment or a waiver of a fee/fine takes its amount from what
//     remains, refused for a fee/fine closed or more than remains; a
//     patron who owes more than cellFeeLimit is blocked from borrowing,
//     by every check-out's judge (a loan made offline records it);
//   - age to lost (storage's sweeper, when the history holds it: a loan
//     lent long ago, due years ago, is ripe): a ripe loan of an item
//     Checked out is aged, the item Aged to lost and the loan one version
//     on, its patron billed as for a declaration, in the aging's write; an
//     aged loan is not renewed (ITEM_AGED_TO_LOST_NOT_RENEWABLE), counts
//     against the limit, may be claimed returned or declared lost (billed
//     nothing more: a loan is billed for its loss once) and comes back
//     by a check-in as a declared loss does.
//
// Versions are part of the state: every write of an item's status moves
// its version by one, as does every write of a loan or a request (a
// request's shift in its queue among them).

// cellPolicy is the library's policy in the model: an item limit of two,
// two renewals a loan, none while a hold is first in the queue or a recall
// is open.
const (
	cellItemLimit = 2
	cellRenewals  = 2
	// The money, in cents: the lost item fee policy's two fees, and the
	// group's maximum outstanding balance, which blocks borrowing.
	cellLostFee       = 1000
	cellProcessingFee = 500
	cellFeeLimit      = 1200
)

// mFee is a patron's fee/fine: its account's id ("" until a read shows
// it: the declaration's answer names none), the loan and the kind it is
// for, its amount and what remains of it, in cents.
type mFee struct {
	Account   string
	Loan      string
	Patron    int
	Kind      string
	Amount    int
	Remaining int
}

// mLoan is an item's open loan. ID is "" while not known (a check-out
// whose answer was lost and named no loan), learnt by the next read that
// shows a loan no answer named.
type mLoan struct {
	ID       string
	Patron   int
	Renewals int
	Version  int
	// Recalled is dueDateChangedByRecall: a recall marks a loan once.
	Recalled bool
	// Ripe says the loan is overdue long enough to be aged to lost (made
	// at storage long overdue); Billed that its aging billed its patron
	// for its loss (agedToLostDelayedBilling.lostItemHasBeenBilled).
	Ripe, Billed bool
}

// mRequest is an open request of an item's queue.
type mRequest struct {
	ID      string
	Patron  int
	Type    string
	Status  string
	Pickup  int
	Version int
}

// mItem is an item: its status and version, its open loan and its queue.
type mItem struct {
	Status  string
	Version int
	Loan    *mLoan
	Queue   []mRequest
}

// cellState is a cell's items, by their index in the cell, and its
// patrons' fees/fines, in the order they were charged.
type cellState struct {
	Items []mItem
	Fees  []mFee
	key   string
}

// newCell is a cell of n items, all Available at version 1.
func newCell(n int) cellState {
	s := cellState{Items: make([]mItem, n)}
	for i := range s.Items {
		s.Items[i] = mItem{Status: schemas.ItemAvailable, Version: 1}
	}
	return s.sealed()
}

// clone is a copy of s that shares nothing with it.
func (s cellState) clone() cellState {
	out := cellState{Items: make([]mItem, len(s.Items)), Fees: slices.Clone(s.Fees)}
	for i, it := range s.Items {
		out.Items[i] = mItem{Status: it.Status, Version: it.Version, Queue: slices.Clone(it.Queue)}
		if it.Loan != nil {
			l := *it.Loan
			out.Items[i].Loan = &l
		}
	}
	return out
}

// sealed is s with its key, which Equal and Hash compare.
func (s cellState) sealed() cellState {
	var b strings.Builder
	for _, it := range s.Items {
		fmt.Fprintf(&b, "%s@%d", it.Status, it.Version)
		if l := it.Loan; l != nil {
			fmt.Fprintf(&b, " L%s/%d×%d@%d/%t/%t/%t", l.ID, l.Patron, l.Renewals, l.Version, l.Recalled, l.Ripe, l.Billed)
		}
		for _, r := range it.Queue {
			fmt.Fprintf(&b, " R%s/%d/%s/%s/%d@%d", r.ID, r.Patron, r.Type, r.Status, r.Pickup, r.Version)
		}
		b.WriteByte('|')
	}
	for _, f := range s.Fees {
		fmt.Fprintf(&b, " F%s/%s/%d/%s/%d/%d", f.Account, f.Loan, f.Patron, f.Kind, f.Amount, f.Remaining)
	}
	s.key = b.String()
	return s
}

// owes is what patron owes in s, in cents.
func (s cellState) owes(patron int) int {
	n := 0
	for _, f := range s.Fees {
		if f.Patron == patron {
			n += f.Remaining
		}
	}
	return n
}

// blocked says whether patron owes more than their group may, in s.
func (s cellState) blocked(patron int) bool { return s.owes(patron) > cellFeeLimit }

// fee finds the fee/fine of account id.
func (s cellState) fee(id string) (int, bool) {
	i := slices.IndexFunc(s.Fees, func(f mFee) bool { return f.Account == id && id != "" })
	return i, i >= 0
}

// open is how many of patron's open loans count against the item limit:
// those of items not Claimed returned.
func (s cellState) open(patron int) int {
	n := 0
	for _, it := range s.Items {
		if it.Loan != nil && it.Loan.Patron == patron && it.Status != schemas.ItemClaimedReturned {
			n++
		}
	}
	return n
}

// head is item's first request, nil for an empty queue.
func (s cellState) head(item int) *mRequest {
	if q := s.Items[item].Queue; len(q) > 0 {
		return &q[0]
	}
	return nil
}

// request finds the open request id: its item and its place in the queue.
func (s cellState) request(id string) (item, at int, found bool) {
	for i, it := range s.Items {
		if j := slices.IndexFunc(it.Queue, func(r mRequest) bool { return r.ID == id }); j >= 0 {
			return i, j, true
		}
	}
	return 0, 0, false
}

// loan finds the item whose open loan is id.
func (s cellState) loan(id string) (item int, found bool) {
	for i, it := range s.Items {
		if it.Loan != nil && it.Loan.ID == id && id != "" {
			return i, true
		}
	}
	return 0, false
}

// opKind is what an operation of a history does.
type opKind int

const (
	opCheckOut        opKind = iota // circulation's check-out by barcode
	opCheckOutOffline               // circulation's check-out by barcode made offline
	opCheckOutStorage               // storage's check-out write at the item's version read, acquiring the lock
	opCheckIn                       // circulation's check-in by barcode
	opRenew                         // circulation's renewal by barcode
	opClaim                         // circulation's claim item returned
	opDeclare                       // circulation's declare item lost
	opPlace                         // circulation's request placed
	opCancel                        // circulation's request cancelled at the version read
	opMove                          // circulation's request moved to another item
	opReplaceLoan                   // storage's loan replaced at the version read
	opPay                           // circulation's payment of a fee/fine
	opWaive                         // circulation's waiver of a fee/fine
	opAge                           // storage's sweeper aging a loan to lost (from the database: agings)
	opReadItems                     // storage's items of the cell
	opReadLoans                     // storage's open loans of the cell's items
	opReadRequests                  // storage's requests of the cell's items
	opReadFees                      // storage's fees/fines of the cell's patrons
)

var opNames = []string{"check-out", "offline check-out", "check-out at storage", "check-in", "renew", "claim returned", "declare lost",
	"place", "cancel", "move", "replace loan", "pay", "waive", "age to lost", "read items", "read loans", "read requests", "read fees"}

func (k opKind) String() string { return opNames[k] }

// read says whether k is a read.
func (k opKind) read() bool { return k >= opReadItems }

// lends says whether k is a check-out: one that takes the patron's lock.
func (k opKind) lends() bool { return k <= opCheckOutStorage }

// cellInput is an operation as called: its cell, the item (by index), the
// patron, the destination of a move, the service point (a check-in's, a
// request's pickup), the request's type; the id of the loan or request it
// names or makes; and the version (of the item, loan or request) and the
// renewals of the record as the caller read it.
type cellInput struct {
	Kind     opKind
	Cell     int
	Item     int
	Patron   int
	Dest     int
	Point    int
	Type     string
	ID       string
	Version  int
	Renewals int
	// Amount is a payment's or a waiver's, in cents; ID names its
	// fee/fine's account.
	Amount int
	// Overdue says a check-out (through circulation, or at storage)
	// makes its loan long overdue: ripe for aging to lost.
	Overdue bool
}

// outcome is what a write's answer says of it.
type outcome int

const (
	outDone     outcome = iota // 2xx: written
	outRefused                 // refused for the rules: Codes says which
	outConflict                // refused because another write came first: nothing written
	outNotDone                 // the service said it wrote nothing (too busy, stopping)
	outUnknown                 // no answer, or one that does not know: either
)

var outcomeNames = []string{"done", "refused", "conflict", "not done", "unknown"}

// cellOutput is an operation's answer: a write's outcome, the codes of a
// refusal or a conflict, the loan a check-out names and the renewals a
// renewal answers; or what a read found, of every item of the cell.
type cellOutput struct {
	Outcome  outcome
	Codes    []string
	ID       string
	Renewals int
	// Broken are the rules the loan of a check-out made offline says it
	// broke (offline.brokenRules, read at storage after the answer), when
	// Said (the read was answered).
	Broken []string
	Said   bool
	// CountMayMove says another write that may move the patron's count of
	// open loans without taking the patron's row (a check-in, a claim, a
	// declaration: annotate sets it) overlaps a check-out made offline:
	// its write counted in the snapshot of its statement, which such a
	// write may have committed after, before its own commit. Its word on
	// the item limit is then not held to the state it is linearized at.
	CountMayMove bool
	Items        []readItem
	Loans        []readLoan
	Requests     [][]mRequest
	// Unclaimed are the read loans no answer named: a loan a check-out
	// whose answer was lost made (loanIDsClaimed sets it).
	Unclaimed []bool
	// Fees are the cell's patrons' fees/fines as read.
	Fees []mFee
	// Differ says a write sent twice at once with one key was answered
	// twice, differently: the second was not the first's answer.
	Differ bool
}

// readItem is an item's status and version as read.
type readItem struct {
	Status  string
	Version int
}

// readLoan is an open loan as read: its item, and the loan.
type readLoan struct {
	Item int
	mLoan
}

// codeSet is codes sorted, once each, for comparing refusals.
func codeSet(codes ...string) []string {
	out := slices.Clone(codes)
	slices.Sort(out)
	return slices.Compact(out)
}

// lend is the check-out of item to patron with loan id: the item Checked
// out, the loan new, and the borrower's request first in the queue filled,
// the others moving up.
func lend(s cellState, item, patron int, id string) cellState {
	next := s.clone()
	it := &next.Items[item]
	it.Status, it.Version = schemas.ItemCheckedOut, it.Version+1
	it.Loan = &mLoan{ID: id, Patron: patron, Version: 1}
	if h := s.head(item); h != nil && h.Patron == patron {
		it.Queue = it.Queue[1:]
		for i := range it.Queue {
			it.Queue[i].Version++
		}
	}
	return next
}

// returnTo is what a check-in at point (or the hold shelf handing an item
// on) makes of item in s (changed in place): the first request's, on the
// hold shelf at its pickup point, else in transit to it; without one,
// Available. The item's version moves whatever its status was; the request's
// when its status changes.
func returnTo(s *cellState, item, point int) {
	it := &s.Items[item]
	it.Version++
	if len(it.Queue) == 0 {
		it.Status = schemas.ItemAvailable
		return
	}
	h := &it.Queue[0]
	status, request := schemas.ItemInTransit, schemas.RequestInTransit
	if h.Pickup == point {
		status, request = schemas.ItemAwaitingPickup, schemas.RequestAwaitingPickup
	}
	it.Status = status
	if h.Status != request {
		h.Status = request
		h.Version++
	}
}

// leave takes the request at place at out of item's queue in s (changed
// in place), the requests after it moving up.
func leave(s *cellState, item, at int) mRequest {
	it := &s.Items[item]
	r := it.Queue[at]
	it.Queue = slices.Delete(it.Queue, at, at+1)
	for j := at; j < len(it.Queue); j++ {
		it.Queue[j].Version++
	}
	return r
}

// requestRefusals are FOLIO's reasons to refuse patron's request of type
// for item in s, besides the request itself (id, "" for one not placed
// yet), in storage's judge's words.
func requestRefusals(s cellState, item, patron int, requestType, id string) []string {
	it := s.Items[item]
	var out []string
	if !slices.Contains(schemas.RequestTypesByItemStatus[it.Status], requestType) {
		out = append(out, schemas.CodeRequestingDisallowed)
	}
	if slices.ContainsFunc(it.Queue, func(r mRequest) bool { return r.Patron == patron && r.ID != id }) {
		out = append(out, schemas.CodeItemAlreadyRequested)
	}
	if it.Loan != nil && it.Loan.Patron == patron {
		out = append(out, schemas.CodeItemAlreadyLoaned)
	}
	return codeSet(out...)
}

// joinQueue has request r join item's queue in s (changed in place),
// and makes the writes its type calls for: a page makes an item on the
// shelf Paged, a recall marks the item's loan once.
func joinQueue(s *cellState, item int, r mRequest) {
	it := &s.Items[item]
	it.Queue = append(it.Queue, r)
	switch r.Type {
	case schemas.RequestTypePage:
		if it.Status == schemas.ItemAvailable {
			it.Status, it.Version = schemas.ItemPaged, it.Version+1
		}
	case schemas.RequestTypeRecall:
		if it.Loan != nil && !it.Loan.Recalled {
			it.Loan.Recalled = true
			it.Loan.Version++
		}
	}
}

// unpage puts item back on the shelf in s (changed in place) when it is
// Paged and no open page waits for it.
func unpage(s *cellState, item int) {
	it := &s.Items[item]
	if it.Status == schemas.ItemPaged && !slices.ContainsFunc(it.Queue, func(r mRequest) bool { return r.Type == schemas.RequestTypePage }) {
		it.Status, it.Version = schemas.ItemAvailable, it.Version+1
	}
}

// judged is what the model makes of a write in a state: the state after
// it when it is allowed; otherwise the refusals it may be answered with
// (each a set of codes: a check-out is refused for everything its
// validation found, or for what its write found).
type judged struct {
	next     cellState
	allowed  bool
	refusals [][]string
}

// checkOutRefusals are a live check-out's reasons to refuse patron item in
// s: validation's (every one, in FOLIO's codes), and its write's (the rules
// the write judges again: the status, another patron's request, the
// limit).
func checkOutRefusals(s cellState, item, patron int) (validation, write []string) {
	it := s.Items[item]
	if s.blocked(patron) {
		validation = append(validation, schemas.CodeUserBlockedAutomatically)
		write = append(write, schemas.CodeUserBlockedAutomatically)
	}
	if it.Status == schemas.ItemCheckedOut {
		validation = append(validation, schemas.CodeItemAlreadyCheckedOut)
	}
	if slices.Contains(schemas.ItemStatusesNotCheckedOut, it.Status) {
		validation = append(validation, schemas.CodeItemStatusRefused)
		write = append(write, schemas.CodeItemStatusRefused)
	}
	if it.Loan != nil {
		validation = append(validation, schemas.CodeItemHasOpenLoan)
	}
	if h := s.head(item); h != nil && h.Patron != patron {
		validation = append(validation, schemas.CodeItemRequestedByAnotherPatron)
		write = append(write, schemas.CodeItemRequestedByAnotherPatron)
	}
	if s.open(patron) >= cellItemLimit {
		// The library's rule names the loan type: FOLIO's code for it.
		validation = append(validation, schemas.CodeItemLimitLoanType)
		write = append(write, schemas.CodeItemLimitLoanType)
	}
	return codeSet(validation...), codeSet(write...)
}

// offlineBroken are the rules a check-out made offline of item by patron
// breaks in s, as storage's write finds them and its loan records them:
// another patron's request first in the queue, the item limit.
func offlineBroken(s cellState, item, patron int) []string {
	var out []string
	if h := s.head(item); h != nil && h.Patron != patron {
		out = append(out, schemas.CodeItemRequestedByAnotherPatron)
	}
	if s.open(patron) >= cellItemLimit {
		out = append(out, schemas.CodeItemLimitReached)
	}
	if s.blocked(patron) {
		out = append(out, schemas.CodeUserBlockedAutomatically)
	}
	return codeSet(out...)
}

// brokenFits says whether the rules a check-out made offline says it
// broke are want: the item limit and the balance's block aside when its
// count or the balance may have moved (CountMayMove).
func brokenFits(out cellOutput, want []string) bool {
	if out.CountMayMove {
		limit := func(code string) bool {
			return code == schemas.CodeItemLimitReached || code == schemas.CodeUserBlockedAutomatically
		}
		return slices.Equal(slices.DeleteFunc(slices.Clone(out.Broken), limit), slices.DeleteFunc(slices.Clone(want), limit))
	}
	return slices.Equal(out.Broken, want)
}

// renewalRefusals are the reasons to refuse patron's renewal of item's
// loan in s, in circulation's and storage's codes (the same).
func renewalRefusals(s cellState, item, patron int) []string {
	it := s.Items[item]
	switch {
	case it.Loan == nil:
		return []string{schemas.CodeNoOpenLoan}
	case it.Loan.Patron != patron:
		return []string{schemas.CodeItemCheckedOutToDifferentUser}
	}
	var out []string
	if slices.ContainsFunc(it.Queue, func(r mRequest) bool { return r.Type == schemas.RequestTypeRecall }) {
		out = append(out, schemas.CodeRenewalBlockedByRecall)
	}
	switch it.Status {
	case schemas.ItemDeclaredLost:
		out = append(out, schemas.CodeItemDeclaredLostNotRenewable)
	case schemas.ItemAgedToLost:
		out = append(out, schemas.CodeItemAgedToLostNotRenewable)
	case schemas.ItemClaimedReturned:
		out = append(out, schemas.CodeItemClaimedReturnedNotRenewable)
	}
	if it.Loan.Renewals >= cellRenewals {
		out = append(out, schemas.CodeLoanRenewalLimitReached)
	}
	if h := s.head(item); h != nil && h.Type == schemas.RequestTypeHold {
		out = append(out, schemas.CodeRenewalBlockedByHoldRequest)
	}
	return codeSet(out...)
}

// judge is the model's verdict on write in in s (out names the loan a
// check-out made).
func judge(s cellState, in cellInput, out cellOutput) judged {
	switch in.Kind {
	case opCheckOut:
		validation, write := checkOutRefusals(s, in.Item, in.Patron)
		if len(validation) > 0 {
			j := judged{refusals: [][]string{validation}}
			if len(write) > 0 {
				j.refusals = append(j.refusals, write)
			}
			return j
		}
		next := lend(s, in.Item, in.Patron, out.ID)
		next.Items[in.Item].Loan.Ripe = in.Overdue
		return judged{next: next, allowed: true}
	case opCheckOutOffline:
		// Recorded past every rule a live check-out keeps but an item on
		// loan (offline.go, schemas.OfflineLifts); one recorded already
		// (its loan named by what it is) is answered its loan again.
		it := s.Items[in.Item]
		if it.Loan != nil && it.Loan.ID == out.ID && out.ID != "" && out.Outcome == outDone {
			return judged{next: s, allowed: true}
		}
		var refused []string
		if it.Status == schemas.ItemCheckedOut {
			refused = append(refused, schemas.CodeItemAlreadyCheckedOut)
		}
		if it.Loan != nil {
			refused = append(refused, schemas.CodeItemHasOpenLoan)
		}
		if len(refused) > 0 {
			return judged{refusals: [][]string{codeSet(refused...)}}
		}
		return judged{next: lend(s, in.Item, in.Patron, out.ID), allowed: true}
	case opCheckOutStorage:
		// Storage's write judges its rules, then the item's version.
		it := s.Items[in.Item]
		var rules []string
		if s.open(in.Patron) >= cellItemLimit {
			rules = append(rules, schemas.CodeItemLimitReached)
		}
		if s.blocked(in.Patron) {
			rules = append(rules, schemas.CodeUserBlockedAutomatically)
		}
		if h := s.head(in.Item); h != nil && h.Patron != in.Patron {
			rules = append(rules, schemas.CodeItemRequestedByAnotherPatron)
		}
		if slices.Contains(schemas.ItemStatusesNotCheckedOut, it.Status) {
			rules = append(rules, schemas.CodeItemStatusRefused)
		}
		switch {
		case len(rules) > 0:
			return judged{refusals: [][]string{codeSet(rules...)}}
		case it.Version != in.Version:
			return judged{refusals: [][]string{{schemas.CodeVersionConflict}}}
		case it.Loan != nil:
			// At the version read of an item on loan: the client writes
			// none (cellClient), and the model allows none.
			return judged{refusals: [][]string{{schemas.CodeItemHasOpenLoan}}}
		}
		next := lend(s, in.Item, in.Patron, in.ID)
		next.Items[in.Item].Loan.Ripe = in.Overdue
		return judged{next: next, allowed: true}
	case opCheckIn:
		next := s.clone()
		if l := next.Items[in.Item].Loan; l != nil {
			// A lost item back: what remains of its loan's fees cancelled.
			for i := range next.Fees {
				if next.Fees[i].Loan == l.ID && l.ID != "" {
					next.Fees[i].Remaining = 0
				}
			}
		}
		next.Items[in.Item].Loan = nil
		returnTo(&next, in.Item, in.Point)
		return judged{next: next, allowed: true}
	case opPay, opWaive:
		i, found := s.fee(in.ID)
		switch {
		case !found:
			return judged{refusals: [][]string{{schemas.CodeNotFound}}}
		case s.Fees[i].Remaining == 0:
			return judged{refusals: [][]string{{schemas.CodeFeeFineClosed}}}
		case in.Amount > s.Fees[i].Remaining:
			return judged{refusals: [][]string{{schemas.CodeFeeFineAmountExceeded}}}
		}
		next := s.clone()
		next.Fees[i].Remaining -= in.Amount
		return judged{next: next, allowed: true}
	case opRenew:
		refused := renewalRefusals(s, in.Item, in.Patron)
		if len(refused) > 0 {
			// Validation's refusal names every reason; the write's, an
			// open recall alone when there is one (circulation answers
			// storage's RENEWAL_BLOCKED_BY_RECALL so), and a loan closed
			// since it was read in storage's words, which circulation
			// passes on as a validation failure.
			j := judged{refusals: [][]string{refused}}
			if slices.Contains(refused, schemas.CodeRenewalBlockedByRecall) {
				j.refusals = append(j.refusals, []string{schemas.CodeRenewalBlockedByRecall})
			}
			if l := s.Items[in.Item].Loan; l == nil || l.Patron != in.Patron {
				j.refusals = append(j.refusals, []string{schemas.CodeValidation})
			}
			return j
		}
		next := s.clone()
		l := next.Items[in.Item].Loan
		l.Renewals++
		l.Version++
		return judged{next: next, allowed: true}
	case opClaim, opDeclare:
		status := schemas.ItemClaimedReturned
		if in.Kind == opDeclare {
			status = schemas.ItemDeclaredLost
		}
		item, found := s.loan(in.ID)
		if !found || s.Items[item].Status == status {
			// A closed loan, or an item already so: FOLIO's
			// validation failures.
			return judged{refusals: [][]string{{schemas.CodeValidation}}}
		}
		next := s.clone()
		it := &next.Items[item]
		it.Status, it.Version = status, it.Version+1
		it.Loan.Version++
		if in.Kind == opDeclare {
			// Billed in the declaration's write, unless it was aged and
			// billed or declared lost before: the lost item fee and the
			// processing fee.
			bill(&next, item)
		}
		return judged{next: next, allowed: true}
	case opAge:
		item, found := s.loan(in.ID)
		if !found || !s.Items[item].Loan.Ripe || s.Items[item].Status != schemas.ItemCheckedOut {
			return judged{}
		}
		next := s.clone()
		it := &next.Items[item]
		it.Status, it.Version = schemas.ItemAgedToLost, it.Version+1
		it.Loan.Version++
		bill(&next, item)
		it.Loan.Billed = true
		return judged{next: next, allowed: true}
	case opPlace:
		if refused := requestRefusals(s, in.Item, in.Patron, in.Type, ""); len(refused) > 0 {
			return judged{refusals: [][]string{refused}}
		}
		next := s.clone()
		joinQueue(&next, in.Item, mRequest{ID: in.ID, Patron: in.Patron, Type: in.Type, Status: schemas.RequestNotYetFilled,
			Pickup: in.Point, Version: 1})
		return judged{next: next, allowed: true}
	case opCancel:
		item, at, found := s.request(in.ID)
		switch {
		case !found:
			return judged{refusals: [][]string{{schemas.CodeValidation}}}
		case s.Items[item].Queue[at].Version != in.Version:
			return judged{refusals: [][]string{{schemas.CodeVersionConflict}}}
		}
		next := s.clone()
		r := leave(&next, item, at)
		if r.Status == schemas.RequestAwaitingPickup && next.Items[item].Status == schemas.ItemAwaitingPickup {
			// Off the hold shelf: the item to the next request, as a
			// check-in at the cancelled request's pickup point.
			returnTo(&next, item, r.Pickup)
		}
		if r.Type == schemas.RequestTypePage {
			unpage(&next, item)
		}
		return judged{next: next, allowed: true}
	case opMove:
		item, at, found := s.request(in.ID)
		if !found {
			return judged{refusals: [][]string{{schemas.CodeValidation}}}
		}
		r := s.Items[item].Queue[at]
		if item == in.Dest {
			// Moved since it was read to the item it is moved to: it keeps
			// its place, written again, and is not judged again.
			next := s.clone()
			next.Items[item].Queue[at].Version++
			return judged{next: next, allowed: true}
		}
		if refused := requestRefusals(s, in.Dest, r.Patron, r.Type, r.ID); len(refused) > 0 {
			return judged{refusals: [][]string{refused}}
		}
		next := s.clone()
		moved := leave(&next, item, at)
		// It keeps its status, on the hold shelf or in transit: the item
		// it leaves keeps its own.
		moved.Version++
		if moved.Type == schemas.RequestTypePage {
			unpage(&next, item)
		}
		joinQueue(&next, in.Dest, moved)
		return judged{next: next, allowed: true}
	case opReplaceLoan:
		item, found := s.loan(in.ID)
		if !found || s.Items[item].Loan.Version != in.Version {
			return judged{refusals: [][]string{{schemas.CodeVersionConflict}}}
		}
		next := s.clone()
		l := next.Items[item].Loan
		l.Version++
		l.Renewals = in.Renewals
		return judged{next: next, allowed: true}
	}
	panic(fmt.Sprintf("judge: %v is no write", in.Kind))
}

// bill bills the patron of item's loan in s (changed in place) for its
// loss, unless its aging billed them: the lost item fee and the
// processing fee, each once a loan (a loan declared lost again after a
// claim returned is billed nothing more).
func bill(s *cellState, item int) {
	l := s.Items[item].Loan
	if l.Billed {
		return
	}
	for kind, amount := range map[string]int{schemas.FeeFineLostItemFee: cellLostFee, schemas.FeeFineLostItemProcessing: cellProcessingFee} {
		if slices.ContainsFunc(s.Fees, func(f mFee) bool { return f.Loan == l.ID && f.Kind == kind }) {
			continue
		}
		s.Fees = append(s.Fees, mFee{Loan: l.ID, Patron: l.Patron, Kind: kind, Amount: amount, Remaining: amount})
	}
	sortFees(s.Fees)
}

// conflictFits says whether a conflict of in answered with codes can be
// what in met in s: the write judged the rules again and found none broken
// (a live check-out refused for its item's version), or found the loan a
// check-in of an item without one did not read (storage's
// CHECK_IN_REQUIRED, which circulation passes on as a validation failure).
// Whether a write came first is conflictsExplained's to say, from the
// history.
func conflictFits(s cellState, in cellInput, codes []string) bool {
	switch {
	case in.Kind == opCheckOut && slices.Contains(codes, schemas.CodeItemChanged):
		_, write := checkOutRefusals(s, in.Item, in.Patron)
		return len(write) == 0
	case in.Kind == opCheckIn && slices.Equal(codes, []string{schemas.CodeValidation}):
		return s.Items[in.Item].Loan != nil
	}
	return true
}

// sortFees orders fees as the model keeps them: by loan, kind, then
// account (one not yet learnt first), then what remains.
func sortFees(fees []mFee) {
	slices.SortStableFunc(fees, func(a, b mFee) int {
		return cmp.Or(cmp.Compare(a.Loan, b.Loan), cmp.Compare(a.Kind, b.Kind), cmp.Compare(a.Account, b.Account),
			cmp.Compare(a.Remaining, b.Remaining))
	})
}

// feesFit says whether the fees read are s's; each account s has not
// learnt yet (a declaration's answer names none) is learnt from a read fee
// of its loan, kind, patron and amounts, and next is s with them learnt.
func feesFit(s cellState, read []mFee) (next cellState, ok bool) {
	if len(read) != len(s.Fees) {
		return s, false
	}
	var learnt *cellState
	used := make([]bool, len(s.Fees))
	for _, r := range read {
		same := func(f mFee) bool {
			return f.Loan == r.Loan && f.Patron == r.Patron && f.Kind == r.Kind && f.Amount == r.Amount && f.Remaining == r.Remaining
		}
		i := slices.IndexFunc(s.Fees, func(f mFee) bool { return f.Account == r.Account && same(f) })
		if i < 0 {
			for k, f := range s.Fees {
				if !used[k] && f.Account == "" && same(f) {
					i = k
					break
				}
			}
			if i < 0 {
				return s, false
			}
			if learnt == nil {
				c := s.clone()
				learnt = &c
			}
			learnt.Fees[i].Account = r.Account
		}
		if used[i] {
			return s, false
		}
		used[i] = true
	}
	if learnt != nil {
		sortFees(learnt.Fees)
		return learnt.sealed(), true
	}
	return s, true
}

// readFits says whether read out of in shows s; when it shows a loan
// s does not know the id of (the loan of a check-out whose answer was
// lost), next is s with it learnt.
func readFits(s cellState, in cellInput, out cellOutput) (next cellState, ok bool) {
	switch in.Kind {
	case opReadFees:
		return feesFit(s, out.Fees)
	case opReadItems:
		if len(out.Items) != len(s.Items) {
			return s, false
		}
		for i, it := range s.Items {
			if out.Items[i] != (readItem{it.Status, it.Version}) {
				return s, false
			}
		}
		return s, true
	case opReadRequests:
		if len(out.Requests) != len(s.Items) {
			return s, false
		}
		for i, it := range s.Items {
			if !slices.Equal(out.Requests[i], it.Queue) {
				return s, false
			}
		}
		return s, true
	case opReadLoans:
		seen := make([]bool, len(s.Items))
		var learnt *cellState
		for k, l := range out.Loans {
			if seen[l.Item] {
				return s, false
			}
			seen[l.Item] = true
			want := s.Items[l.Item].Loan
			switch {
			case want == nil:
				return s, false
			case want.ID == "" && out.Unclaimed[k] && *want == mLoan{Patron: l.Patron, Renewals: l.Renewals, Version: l.Version, Recalled: l.Recalled,
				Ripe: l.Ripe, Billed: l.Billed}:
				if learnt == nil {
					c := s.clone()
					learnt = &c
				}
				learnt.Items[l.Item].Loan.ID = l.ID
			case *want != l.mLoan:
				return s, false
			}
		}
		for i, it := range s.Items {
			if it.Loan != nil && !seen[i] {
				return s, false
			}
		}
		if learnt != nil {
			return learnt.sealed(), true
		}
		return s, true
	}
	panic(fmt.Sprintf("readFits: %v is no read", in.Kind))
}

// cellStep is the model's step: the states after in answered out, from
// s; none when s cannot answer so.
func cellStep(s cellState, in cellInput, out cellOutput) []cellState {
	if in.Kind.read() {
		if next, ok := readFits(s, in, out); ok {
			return []cellState{next}
		}
		return nil
	}
	if out.Differ {
		return nil
	}
	j := judge(s, in, out)
	if j.allowed {
		j.next = j.next.sealed()
	}
	switch out.Outcome {
	case outDone:
		switch {
		case !j.allowed:
			return nil
		case in.Kind == opRenew && out.Renewals != s.Items[in.Item].Loan.Renewals+1:
			return nil
		case in.Kind.lends() && out.ID == "":
			return nil
		case in.Kind == opCheckOutOffline && out.Said && j.next.key != s.key && !brokenFits(out, offlineBroken(s, in.Item, in.Patron)):
			return nil
		}
		return []cellState{j.next}
	case outRefused:
		if !j.allowed && slices.ContainsFunc(j.refusals, func(r []string) bool { return slices.Equal(r, out.Codes) }) {
			return []cellState{s}
		}
		return nil
	case outConflict:
		if conflictFits(s, in, out.Codes) {
			return []cellState{s}
		}
		return nil
	case outNotDone:
		return []cellState{s}
	}
	if j.allowed {
		return []cellState{s, j.next}
	}
	return []cellState{s}
}

// cellModel is the model as porcupine checks it, one partition a cell, each
// from init.
func cellModel(init cellState) porcupine.NondeterministicModel {
	return porcupine.NondeterministicModel{
		Partition: func(history []porcupine.Operation) [][]porcupine.Operation {
			byCell := map[int][]porcupine.Operation{}
			var cells []int
			for _, op := range history {
				c := op.Input.(cellInput).Cell
				if _, ok := byCell[c]; !ok {
					cells = append(cells, c)
				}
				byCell[c] = append(byCell[c], op)
			}
			out := make([][]porcupine.Operation, 0, len(cells))
			for _, c := range cells {
				out = append(out, byCell[c])
			}
			return out
		},
		Init: func() []any { return []any{init.sealed()} },
		Step: func(state, input, output any) []any {
			next := cellStep(state.(cellState), input.(cellInput), output.(cellOutput))
			out := make([]any, len(next))
			for i, s := range next {
				out[i] = s
			}
			return out
		},
		Equal: func(a, b any) bool { return a.(cellState).key == b.(cellState).key },
		Hash: func(state any) uint64 {
			h := fnv.New64a()
			h.Write([]byte(state.(cellState).key))
			return h.Sum64()
		},
		// Porcupine describes the operations and states of a partial
		// path too (a check timed out), some of them nil.
		DescribeOperation: func(input, output any) string {
			in, ok := input.(cellInput)
			if !ok {
				return "(no call)"
			}
			out, ok := output.(cellOutput)
			if !ok {
				return in.Kind.String() + " → (no answer)"
			}
			return describeOp(in, out)
		},
		DescribeState: func(state any) string {
			s, ok := state.(cellState)
			if !ok {
				return "(no state)"
			}
			return describeCell(s)
		},
	}
}

// describeOp is an operation as porcupine's visualisation shows it.
func describeOp(in cellInput, out cellOutput) string {
	call := in.Kind.String()
	switch in.Kind {
	case opReadItems:
		var parts []string
		for i, it := range out.Items {
			parts = append(parts, fmt.Sprintf("item %d %s@%d", i, it.Status, it.Version))
		}
		return call + " → " + strings.Join(parts, "; ")
	case opReadLoans:
		var parts []string
		for _, l := range out.Loans {
			parts = append(parts, fmt.Sprintf("item %d: %s", l.Item, describeLoan(l.mLoan)))
		}
		return call + " → " + strings.Join(parts, "; ")
	case opReadFees:
		var parts []string
		for _, f := range out.Fees {
			parts = append(parts, describeFee(f))
		}
		return call + " → " + strings.Join(parts, "; ")
	case opReadRequests:
		var parts []string
		for i, q := range out.Requests {
			for _, r := range q {
				parts = append(parts, fmt.Sprintf("item %d: %s", i, describeRequest(r)))
			}
		}
		return call + " → " + strings.Join(parts, "; ")
	}
	call += fmt.Sprintf(" item %d patron %d", in.Item, in.Patron)
	switch in.Kind {
	case opCheckIn:
		call = fmt.Sprintf("%s item %d at point %d", in.Kind, in.Item, in.Point)
	case opPlace:
		call += fmt.Sprintf(" %s %s for point %d", in.Type, short(in.ID), in.Point)
	case opCancel, opReplaceLoan:
		call = fmt.Sprintf("%s %s@%d", in.Kind, short(in.ID), in.Version)
	case opMove:
		call = fmt.Sprintf("%s %s to item %d", in.Kind, short(in.ID), in.Dest)
	case opClaim, opDeclare, opAge:
		call = fmt.Sprintf("%s loan %s", in.Kind, short(in.ID))
	case opPay, opWaive:
		call = fmt.Sprintf("%s %d.%02d of %s", in.Kind, in.Amount/100, in.Amount%100, short(in.ID))
	case opCheckOutStorage:
		call += fmt.Sprintf(" at @%d", in.Version)
	}
	if in.Overdue {
		call += " long overdue"
	}
	res := outcomeNames[out.Outcome]
	if len(out.Codes) > 0 {
		res += " " + strings.Join(out.Codes, ",")
	}
	if out.ID != "" {
		res += " " + short(out.ID)
	}
	if in.Kind == opCheckOutOffline && out.Outcome == outDone && out.Said {
		res += fmt.Sprintf(" broke %v", out.Broken)
	}
	if in.Kind == opRenew && out.Outcome == outDone {
		res += fmt.Sprintf(" ×%d", out.Renewals)
	}
	if out.Differ {
		res += " (sent twice with one key, answered two ways)"
	}
	return call + " → " + res
}

func describeLoan(l mLoan) string {
	s := fmt.Sprintf("loan %s to %d ×%d @%d", short(l.ID), l.Patron, l.Renewals, l.Version)
	if l.Recalled {
		s += " recalled"
	}
	if l.Ripe {
		s += " overdue"
	}
	if l.Billed {
		s += " billed"
	}
	return s
}

func describeFee(f mFee) string {
	return fmt.Sprintf("%s %s of patron %d for loan %s: %d of %d left", f.Kind, short(f.Account), f.Patron, short(f.Loan), f.Remaining, f.Amount)
}

func describeRequest(r mRequest) string {
	return fmt.Sprintf("%s %s by %d (%s, point %d) @%d", r.Type, short(r.ID), r.Patron, r.Status, r.Pickup, r.Version)
}

// describeCell is a state as porcupine's visualisation shows it.
func describeCell(s cellState) string {
	var parts []string
	for i, it := range s.Items {
		p := fmt.Sprintf("item %d %s@%d", i, it.Status, it.Version)
		if it.Loan != nil {
			p += ", " + describeLoan(*it.Loan)
		}
		for _, r := range it.Queue {
			p += ", " + describeRequest(r)
		}
		parts = append(parts, p)
	}
	for _, f := range s.Fees {
		parts = append(parts, describeFee(f))
	}
	return strings.Join(parts, "; ")
}

// short is an id's first eight characters.
func short(id string) string { return id[:min(8, len(id))] }

// TestTheModelDescribesAPartialPath: porcupine's visualisation of a check
// that timed out describes operations and states it has not got (nil):
// each is named so, not a panic in place of the check's verdict.
func TestTheModelDescribesAPartialPath(t *testing.T) {
	t.Parallel()
	m := cellModel(cellState{})
	for _, c := range []struct{ got, want string }{
		{m.DescribeOperation(nil, nil), "(no call)"},
		{m.DescribeOperation(cellInput{Kind: opReadItems}, nil), opReadItems.String() + " → (no answer)"},
		{m.DescribeOperation(cellInput{Kind: opReadItems}, cellOutput{}), opReadItems.String() + " → "},
		{m.DescribeState(nil), "(no state)"},
	} {
		if c.got != c.want {
			t.Errorf("described %q, want %q", c.got, c.want)
		}
	}
}
