package circulation

import (
	"context"
	"encoding/json"
	"log/slog"
	"time"

	"github.com/checkoutlock/schemas"
	"github.com/checkoutlock/schemas/errs"
)

// CheckInRequest is a check-in by barcode.
type CheckInRequest struct {
	ItemBarcode    string
	ServicePointID string
	// CheckInDate defaults to now.
	CheckInDate time.Time
	// ClaimedReturnedResolution is how the library resolved the claim
	// of an item claimed returned (FOLIO's claimedReturnedResolution,
	// "" for none): it decides the loan's action
	// (schemas.CheckInAction), and with it whether the overdue fine is
	// charged.
	ClaimedReturnedResolution string
}

// CheckInResult is what a check-in left of the item and its queue, and
// the loan it closed, if any.
type CheckInResult struct {
	Returned
	Loan *Loan
}

// Returned is what a check-in's write left, as storage read it in the
// write's transaction: the item as stored and, when its queue had a first
// request, that request as the check-in left it (on the hold shelf, in
// transit, awaiting delivery), what a staff slip names of its requester,
// and its pickup point.
type Returned struct {
	Item Item
	// CheckedInAt is the service point the item was checked in at (its
	// ID alone when the write's answer was lost).
	CheckedInAt ServicePointRef
	// Request and Requester are nil when the item's queue is empty.
	Request, Requester json.RawMessage
	Pickup             ServicePointRef
	// BeforeLoan is the item's open loan, left as it was, when the
	// check-in was dated before it was lent: nothing was closed or
	// changed, and storage recorded the check-in for the desk.
	BeforeLoan *Loan
}

// ServicePointRef names a service point.
type ServicePointRef struct {
	ID   string `json:"id"`
	Name string `json:"name"`
	Code string `json:"code,omitempty"`
}

// checkInAttempts bounds how often a check-in reads its item and loan
// again after another write of the loan came first.
const checkInAttempts = 3

// CheckIn makes an item available and closes its open loan, both in one
// storage transaction, so the item and its loan never disagree, whatever
// fails: the write carries the call's write id, and one whose answer was
// lost is sent again with it (Service.once). The loan is closed only at
// the version read; when another write of it (a renewal, a claim) came
// first, the check-in reads the item and its loan again and is judged
// anew, up to checkInAttempts times: the book is in hand, and its return
// is what the desk asked for. A call sent again with its Idempotency-Key
// answers what its write left, whichever write it meets.
func (s *Service) CheckIn(ctx context.Context, req CheckInRequest) (CheckInResult, error) {
	ctx = identified(ctx)
	// A check-in is dated when the item came back: now, or the date the
	// caller gives (a book drop's, a sorter's).
	req.CheckInDate = s.happened(req.CheckInDate)
	var res CheckInResult
	var err error
	for range checkInAttempts {
		if res, err = s.checkInOnce(ctx, req); !errs.IsCode(err, schemas.CodeLoanChanged) {
			break
		}
	}
	l, ok, err := s.landed(ctx, schemas.WriteCheckIn, err)
	if ok && l.Returned != nil {
		res, err = CheckInResult{Returned: *l.Returned, Loan: l.Loan}, nil
	}
	if err == nil && res.BeforeLoan != nil {
		return res, returnedBeforeLoan(req, *res.BeforeLoan)
	}
	return res, err
}

// returnedBeforeLoan is the answer to a check-in dated before the item's
// open loan (open) was lent: it closed nothing, and was recorded for the
// desk. A kiosk told so keeps nothing to send again.
func returnedBeforeLoan(req CheckInRequest, open Loan) *errs.Error {
	return errs.Errorf(errs.KindInvalid, schemas.CodeReturnedBeforeLoan,
		"Item %s was checked in as returned at %s, but it was lent again at %s, after that: its loan stays open, and the return is recorded for the desk",
		req.ItemBarcode, schemas.FormatTime(req.CheckInDate), schemas.FormatTime(open.LoanDate)).
		With("itemBarcode", req.ItemBarcode).With("loanId", open.ID)
}

// checkInOnce is one attempt of CheckIn.
func (s *Service) checkInOnce(ctx context.Context, req CheckInRequest) (CheckInResult, error) {
	item, err := s.storage.ItemByBarcode(ctx, req.ItemBarcode)
	if errs.IsKind(err, errs.KindNotFound) {
		return CheckInResult{}, &errs.Refusal{Errors: []*errs.Error{errs.Errorf(errs.KindInvalid, schemas.CodeItemBarcodeNotFound,
			"No item with barcode %s could be found", req.ItemBarcode).With("itemBarcode", req.ItemBarcode)}}
	}
	if err != nil {
		return CheckInResult{}, err
	}
	loan, found, err := s.storage.OpenLoanForItem(ctx, item.ID)
	if err != nil {
		return CheckInResult{}, err
	}
	// From here on the request cannot cancel the work: a write once begun
	// is settled.
	request := ctx
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), WriteTimeout)
	defer cancel()
	if !found {
		// No loan to close: only the item changes, as its queue says (an
		// item in transit reaching its pickup point goes on the hold
		// shelf).
		returned, closed, err := s.returnItem(request, ctx, item, req.ServicePointID)
		if err != nil {
			return CheckInResult{}, err
		}
		return CheckInResult{Returned: returned, Loan: closed}, nil
	}
	loan.Status = schemas.LoanClosed
	// The item's status at the version read, which the write is fenced
	// by: a claim resolved is a claim still standing.
	loan.Action = schemas.CheckInAction(item.Status, req.ClaimedReturnedResolution)
	// Never returned before it was lent: a check-in dated that near its
	// loan is the loan's own, returned when it was lent; one dated well
	// before it comes from before the loan, and storage's write closes
	// nothing (schemas.ReturnedBeforeLent).
	loan.ReturnDate = req.CheckInDate
	if loan.ReturnDate.Before(loan.LoanDate) && !schemas.ReturnedBeforeLent(loan.ReturnDate, loan.LoanDate) {
		loan.ReturnDate = loan.LoanDate
	}
	loan.CheckinServicePointID = req.ServicePointID
	// The loan is closed only while the item is at the version read with
	// it, also when the item says Available already: otherwise a check-out
	// that came in between, checking the item out with a new loan, would
	// have its loan closed by this check-in.
	var closed Loan
	var returned Returned
	err = s.once(request, ctx, func(ctx context.Context) error {
		var err error
		closed, returned, err = s.storage.CheckInItem(ctx, loan, item)
		return err
	})
	switch {
	case err == nil:
		return CheckInResult{Returned: returned, Loan: &closed}, nil
	case errs.IsCode(err, schemas.CodeLoanChanged):
		return CheckInResult{}, loanChangedMeanwhile(err).With("itemBarcode", req.ItemBarcode)
	case errs.IsKind(err, errs.KindConflict):
		return CheckInResult{}, itemChanged(err, req.ItemBarcode)
	case ambiguous(err):
		s.logger.ErrorContext(ctx, "check-in outcome unknown: storage did not answer whether the loan was closed",
			slog.String("loan_id", loan.ID), slog.String("item_id", item.ID), slog.Any("error", err))
		return CheckInResult{}, unanswered(ctx, err, "check-in", "loanId", loan.ID)
	}
	return CheckInResult{}, err
}

// returnItem checks in an item with no open loan (storage's ReturnItem) at
// the version it was read, with the call's write id: a write whose answer
// was lost is sent again with it. A version conflict means another
// request changed it first: nothing was written.
//
// Its write id is the call's: a call sent again whose first check-in
// closed the item's loan is answered that, the loan with it.
func (s *Service) returnItem(request, ctx context.Context, item Item, servicePointID string) (Returned, *Loan, error) {
	var stored Returned
	var closed *Loan
	err := s.once(request, ctx, func(ctx context.Context) error {
		var err error
		stored, closed, err = s.storage.ReturnItem(ctx, item, servicePointID)
		return err
	})
	switch {
	case err == nil:
		return stored, closed, nil
	case errs.IsKind(err, errs.KindConflict):
		return Returned{}, nil, itemChanged(err, item.Barcode)
	case ambiguous(err):
		s.logger.ErrorContext(ctx, "check-in outcome unknown: storage did not answer whether the item was checked in",
			slog.String("item_id", item.ID), slog.Any("error", err))
		return Returned{}, nil, unanswered(ctx, err, "check-in", "itemId", item.ID)
	}
	return Returned{}, nil, err
}

// itemChanged is the answer to a write refused because another request
// changed its item first (err): nothing was changed.
func itemChanged(err error, itemBarcode string) *errs.Error {
	return errs.Errorf(errs.KindConflict, schemas.CodeItemChanged,
		"The item was changed by another request; nothing was changed, try again").
		With("itemBarcode", itemBarcode).Because(err)
}
