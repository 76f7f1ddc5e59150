// A check-out's write: the one call to storage that judges every rule
// again and writes the loan (write), storage's refusals of it in FOLIO's
// words (refused), and a write whose answer was lost, sent again as the
// same write (retryAmbiguous).

package circulation

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"time"

	"github.com/checkoutlock/schemas"
	"github.com/checkoutlock/schemas/errs"

	"github.com/cenkalti/backoff/v4"
)

// write makes the check-out's writes: the item becomes "Checked out" and the
// loan is created, in one storage transaction fenced by lockID (when set), so
// the item and its loan are never seen apart. Storage counts the patron's
// open loans against the item limit in that transaction and refuses at the
// limit, so the count is exact at the moment of the write, whatever
// check-outs did since validation; under the lock, the write asks storage
// to release the lock with the loan. It runs on a context the
// request cannot cancel, and carries the call's write id: a write whose
// answer was lost is sent again with it (Service.once), and answered
// from it.
//
// A write that acquires its lock (acquire set) waits for it first: the
// request's leaving ends that call, so storage stops waiting and writes
// nothing, unless it had already begun the write, which it then finishes.
func (s *Service) write(ctx context.Context, co checkOut, lockID string, acquire *LockAcquisition) (written, error) {
	request := ctx
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), WriteTimeout+waitOf(acquire))
	defer cancel()
	loan := Loan{
		ID:                     co.loanID(),
		UserID:                 co.patron.ID,
		ItemID:                 co.item.ID,
		LoanDate:               co.req.LoanDate,
		DueDate:                co.policy.Period.DueDate(co.req.LoanDate),
		Action:                 schemas.LoanCheckedOut,
		Status:                 schemas.LoanOpen,
		LoanPolicyID:           co.policy.ID,
		CheckoutServicePointID: co.req.ServicePointID,
		// FOLIO's: the group the patron borrowed as, kept when it changes.
		PatronGroupIDAtCheckout: co.patron.PatronGroupID,
	}
	// FOLIO's OverridingLoanValidator: the loan says it was made through
	// an override, with the comment; an item its policy does not lend is
	// lent until the override's due date.
	if o := co.req.Overrides; o.Any() {
		loan.Action, loan.ActionComment = ActionOverride, o.Comment
		if o.ItemNotLoanable && !co.policy.Loanable {
			loan.DueDate = o.DueDate
		}
	}
	lifted := co.req.Overrides
	if off := co.req.Offline; off != nil {
		loan.DueDate, loan.Offline = off.dueDate(co), &OfflineRecord{TransactionDate: off.TransactionDate, RecordedBy: off.RecordedBy, Kiosk: off.Kiosk}
		lifted.Offline = true
	}
	var stored CheckedOut
	err := s.once(request, ctx, func(ctx context.Context) error {
		call := ctx
		if acquire != nil {
			var leave context.CancelFunc
			call, leave = context.WithCancel(ctx)
			defer context.AfterFunc(request, leave)()
			defer leave()
		}
		var err error
		stored, err = s.storage.CheckOutItem(call, loan, co.item, lockID, acquire, lifted)
		return err
	})
	if err == nil {
		res := CheckOutResult{Loan: stored.Loan, Item: stored.Item, Patron: co.patron}
		if stored.Replayed {
			// Its write had landed before (a call sent again with its
			// Idempotency-Key): storage answered that write's loan, whose
			// item and patron may not be those read now, nor the PIN
			// checked theirs.
			if err := s.pinOfLoan(ctx, co.req, stored.Loan); err != nil {
				return written{}, err
			}
			res = s.checkedOutBefore(ctx, stored.Loan)
		}
		return written{res, stored.LockReleased, stored.LockWaited}, nil
	}
	if refused := co.refused(err); refused != nil {
		// The write judged the rules again and found some broken since
		// validation (another check-out came first, a request joined the
		// queue, the patron was blocked): every one, in FOLIO's words.
		return written{}, refused
	}
	switch {
	case errs.IsCode(err, schemas.CodeItemChanged):
		return written{}, errs.Errorf(errs.KindConflict, schemas.CodeItemChanged,
			"The item was changed by another request; nothing was changed, try again").
			With("itemBarcode", co.req.ItemBarcode).Because(err)
	case ambiguous(err):
		s.logger.ErrorContext(ctx, "check-out outcome unknown: storage did not answer whether the loan was created",
			slog.String("loan_id", loan.ID), slog.String("item_id", co.item.ID), slog.Any("error", err))
		return written{}, unanswered(ctx, err, "check-out", "loanId", loan.ID)
	}
	return written{}, err
}

// WriteRefusals are the codes of the rules storage's check-out write
// answers alone when only that one is broken, and beside the others when
// several are, in words circulation puts in FOLIO's (refused); the
// others come in FOLIO's words already.
var WriteRefusals = []string{schemas.CodeItemLimitReached, schemas.CodeItemRequestedByAnotherPatron,
	schemas.CodeUserBlockedAutomatically, schemas.CodeItemHasOpenLoan}

// refused is storage's refusal of the check-out's write (err: one error
// of a rule, or a Refusal of every rule broken) in FOLIO's words, as
// validation words the same rules; nil when err refuses no rule.
func (co checkOut) refused(err error) *errs.Refusal {
	var entries []*errs.Error
	var r *errs.Refusal
	if errors.As(err, &r) {
		entries = r.Errors
	} else if e, ok := errs.As(err); ok && slices.Contains(WriteRefusals, e.Code) {
		entries = []*errs.Error{e}
	} else {
		return nil
	}
	out := &errs.Refusal{}
	for _, e := range entries {
		out.Errors = append(out.Errors, co.inFOLIOsWords(e))
	}
	return out
}

// inFOLIOsWords is one of the write's refusals (e) as FOLIO words it, from
// what validation read: the item limit with the criteria of the rule that
// set it, the item's title and the patron's name for another patron's
// request, an automated block with its condition.
func (co checkOut) inFOLIOsWords(e *errs.Error) *errs.Error {
	switch e.Code {
	case schemas.CodeItemLimitReached:
		limit := itemLimitOf(e)
		if co.limit != nil {
			limit = co.limit.Limit
		}
		return ItemLimitReached(limit, co.match, co.req.ItemBarcode)
	case schemas.CodeItemRequestedByAnotherPatron:
		return requestedByAnotherPatron(co)
	case schemas.CodeUserBlockedAutomatically:
		condition := schemas.ConditionItemsChargedOut
		for _, p := range e.Parameters {
			if p.Key == "patronBlockConditionId" {
				condition = p.Value
			}
		}
		return automaticallyBlocked(condition, e.Message)
	case schemas.CodeItemHasOpenLoan:
		return errs.Errorf(errs.KindInvalid, schemas.CodeItemHasOpenLoan, "Cannot check out item that already has an open loan").
			With("itemBarcode", co.req.ItemBarcode)
	}
	return e
}

// waitOf is the longest a write waits for its lock: acquire's wait, none
// without one.
func waitOf(acquire *LockAcquisition) time.Duration {
	if acquire == nil {
		return 0
	}
	return acquire.Wait
}

// ambiguous reports whether a failed write may nevertheless have been
// applied: no answer, or a server error, as opposed to a definite refusal
// (storage too busy to take the write, CodeCheckOutsBusy, wrote nothing)
// and a call that never left (ErrNotSent: nothing of it ran).
func ambiguous(err error) bool {
	if errs.IsCode(err, schemas.CodeCheckOutsBusy) || errors.Is(err, ErrNotSent) {
		return false
	}
	return errs.IsKind(err, errs.KindUnavailable) || errs.IsKind(err, errs.KindInternal) ||
		errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled)
}

// retryAmbiguous runs op until it succeeds, fails definitely, or has been
// retried max times (100 ms apart, on the service's clock) or ctx ends; it
// returns op's last error.
func (s *Service) retryAmbiguous(ctx context.Context, max uint64, op func() error) error {
	var last error
	_ = backoff.RetryNotifyWithTimer(func() error {
		last = op()
		if last != nil && !errs.IsKind(last, errs.KindUnavailable) {
			return backoff.Permanent(last)
		}
		return last
	}, backoff.WithContext(backoff.WithMaxRetries(backoff.NewConstantBackOff(100*time.Millisecond), max), ctx), nil, s.newTimer())
	return last
}
