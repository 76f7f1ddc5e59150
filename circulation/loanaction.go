package circulation

import (
	"context"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/checkoutlock/schemas"
	"github.com/checkoutlock/schemas/errs"
)

// FOLIO's loan actions that keep a loan open and change its item: the
// patron says they returned the item (claim item returned), or the item
// is declared lost. The item limit then counts the loan as FOLIO counts
// it (storage's one count: an item claimed returned is not counted, one
// declared lost is). A librarian's change of the due date keeps the loan
// open and its item as it is.
const (
	ActionClaimedReturned = "claimedReturned"
	ActionDeclaredLost    = "declaredLost"
	ActionDueDateChanged  = schemas.LoanDueDateChanged
)

// ClaimItemReturnedRequest is FOLIO's claim item returned.
type ClaimItemReturnedRequest struct {
	// At is itemClaimedReturnedDateTime: required.
	At      time.Time
	Comment string
}

// DeclareItemLostRequest is FOLIO's declare item lost.
type DeclareItemLostRequest struct {
	// At is declaredLostDateTime; now when not given, as a desk declares
	// an item lost the moment it says so.
	At             time.Time
	Comment        string
	ServicePointID string
}

// ChangeDueDateRequest is FOLIO's change of a loan's due date.
type ChangeDueDateRequest struct {
	// DueDate is the loan's new due date: required.
	DueDate time.Time
	// Version, UserID and ItemID are the loan as the caller read it, when
	// it sends it back (FOLIO's replacement of a loan): the change is made
	// only at that version (0: the loan as stored), and a borrower or an
	// item other than the loan's is refused ("": not sent).
	Version        int
	UserID, ItemID string
}

// ClaimItemReturned records that the loan's patron says they returned its
// item: the item becomes Claimed returned, the loan stays open with the
// action claimedReturned, the date, and the comment when there is one
// (mod-circulation's ClaimItemReturnedResource). A call sent again with
// its Idempotency-Key is answered done when its write landed (loanAction).
func (s *Service) ClaimItemReturned(ctx context.Context, loanID string, req ClaimItemReturnedRequest) error {
	return s.loanAction(ctx, func(ctx context.Context) error { return s.claimItemReturned(ctx, loanID, req) })
}

// loanAction runs act, a loan action, with the call's write id: one sent
// again with its Idempotency-Key, whose write landed, is done, whether
// the write meets the key at storage or the call is refused before it
// writes (the item's status the action gave it).
func (s *Service) loanAction(ctx context.Context, act func(context.Context) error) error {
	ctx = identified(ctx)
	_, ok, err := s.landed(ctx, schemas.WriteLoanAction, act(ctx))
	if ok {
		return nil
	}
	return err
}

// claimItemReturned is ClaimItemReturned's action.
func (s *Service) claimItemReturned(ctx context.Context, loanID string, req ClaimItemReturnedRequest) error {
	if req.At.IsZero() {
		return refusal(errs.Errorf(errs.KindInvalid, schemas.CodeValidation, "Item claimed returned date is a required field").
			With("itemClaimedReturnedDateTime", ""))
	}
	loan, item, err := s.openLoanAndItem(ctx, loanID)
	if err != nil {
		return err
	}
	if err := actionRefused(schemas.LoanActionClaimReturned, item); err != nil {
		return err
	}
	loan.Action, loan.ClaimedReturnedDate = ActionClaimedReturned, s.happened(req.At)
	if strings.TrimSpace(req.Comment) != "" {
		loan.ActionComment = req.Comment
	}
	return s.actOnLoan(ctx, loan, item)
}

// DeclareItemLost records the loan's item lost: the item becomes Declared
// lost, the loan stays open with the action declaredLost, the date and the
// comment (mod-circulation's DeclareLostResource), billed in the same
// write as the loan's lost item fee policy says to the fee/fine owner
// serving the service point, as a loan action (loanAction).
func (s *Service) DeclareItemLost(ctx context.Context, loanID string, req DeclareItemLostRequest) error {
	return s.loanAction(ctx, func(ctx context.Context) error { return s.declareItemLost(ctx, loanID, req) })
}

// declareItemLost is DeclareItemLost's action.
func (s *Service) declareItemLost(ctx context.Context, loanID string, req DeclareItemLostRequest) error {
	if strings.TrimSpace(req.ServicePointID) == "" {
		return refusal(errs.Errorf(errs.KindInvalid, schemas.CodeValidation, "A service point is required for item to be declared lost").
			With("servicePointId", ""))
	}
	loan, item, err := s.openLoanAndItem(ctx, loanID)
	if err != nil {
		return err
	}
	if err := actionRefused(schemas.LoanActionDeclareLost, item); err != nil {
		return err
	}
	loan.Action, loan.DeclaredLostDate, loan.ActionComment = ActionDeclaredLost, s.happened(req.At), req.Comment
	loan.ActionServicePointID = req.ServicePointID
	return s.actOnLoan(ctx, loan, item)
}

// ChangeDueDate moves an open loan's due date to the one asked, as a
// librarian does at the desk (mod-circulation's ChangeDueDateResource):
// refused when the loan is closed or its item is lost or claimed returned
// (schemas' table of loan actions); a due date the loan has already is
// answered done, nothing written. The loan's action becomes
// dueDateChanged, and storage writes it at the loan's and the item's
// versions read; its due date notices are scheduled again from the new
// date, as a renewal's are. A call sent again with its Idempotency-Key is
// answered done when its write landed (loanAction).
func (s *Service) ChangeDueDate(ctx context.Context, loanID string, req ChangeDueDateRequest) error {
	return s.loanAction(ctx, func(ctx context.Context) error { return s.changeDueDate(ctx, loanID, req) })
}

// changeDueDate is ChangeDueDate's action.
func (s *Service) changeDueDate(ctx context.Context, loanID string, req ChangeDueDateRequest) error {
	if req.DueDate.IsZero() {
		return refusal(errs.Errorf(errs.KindInvalid, schemas.CodeValidation, "A new due date is required in order to change the due date").
			With("dueDate", ""))
	}
	loan, item, err := s.openLoanAndItem(ctx, loanID)
	if err != nil {
		return err
	}
	for _, m := range []struct{ name, sent, stored string }{{"userId", req.UserID, loan.UserID}, {"itemId", req.ItemID, loan.ItemID}} {
		if m.sent != "" && !strings.EqualFold(m.sent, m.stored) {
			return refusal(errs.Errorf(errs.KindInvalid, schemas.CodeValidation,
				"%s: a loan's %s is not changed; the loan is %s's", m.name, m.name, m.stored).With(m.name, m.sent))
		}
	}
	if req.Version != 0 && req.Version != loan.Version {
		return errs.Errorf(errs.KindConflict, schemas.CodeLoanChanged,
			"The loan was changed by another request since it was read (_version %d, the loan sent %d); nothing was changed, read it again",
			loan.Version, req.Version).With("_version", strconv.Itoa(loan.Version))
	}
	if err := actionRefused(schemas.LoanActionChangeDueDate, item); err != nil {
		return err
	}
	due := schemas.WireTime(req.DueDate)
	if due.Equal(loan.DueDate) {
		// Nothing changes: nothing is written, and the patron is not told.
		return nil
	}
	loan.Action, loan.DueDate = ActionDueDateChanged, due
	return s.actOnLoan(ctx, loan, item)
}

// FOLIO's notes added to a loan (its add-info): the patron's or the
// staff's, kept as the loan's action and actionComment.
const (
	ActionPatronInfoAdded = "patronInfoAdded"
	ActionStaffInfoAdded  = "staffInfoAdded"
)

// AddInfo adds a note to a loan, open or closed, as FOLIO's add-info: the
// loan's action becomes action (ActionPatronInfoAdded or
// ActionStaffInfoAdded) and its actionComment comment, written at the
// loan's version read, its item as it is. A call sent again with its
// Idempotency-Key is answered done when its write landed.
func (s *Service) AddInfo(ctx context.Context, loanID, action, comment string) error {
	ctx = identified(ctx)
	_, ok, err := s.landed(ctx, schemas.WriteRecordUpdate, s.addInfo(ctx, loanID, action, comment))
	if ok {
		return nil
	}
	return err
}

// addInfo is AddInfo's write.
func (s *Service) addInfo(ctx context.Context, loanID, action, comment string) error {
	if (action != ActionPatronInfoAdded && action != ActionStaffInfoAdded) || strings.TrimSpace(comment) == "" {
		return refusal(errs.Errorf(errs.KindInvalid, schemas.CodeValidation,
			"An action of type %s or %s, with associated actionComment, required in order to add info",
			ActionPatronInfoAdded, ActionStaffInfoAdded).With("action", action))
	}
	loan, err := s.loanByID(ctx, loanID)
	if err != nil {
		return err
	}
	loan.Action, loan.ActionComment = action, comment
	err = s.settled(ctx, func(ctx context.Context) error { return s.storage.ReplaceLoan(ctx, loan) })
	switch {
	case errs.IsCode(err, schemas.CodeVersionConflict):
		return loanChangedMeanwhile(err).With("loanId", loan.ID)
	case ambiguous(err):
		return unanswered(ctx, err, "loan's note", "loanId", loan.ID)
	}
	return err
}

// happened is when something a caller reports happened (an item came
// back, was claimed returned, was declared lost): at, the date the caller
// gives, in UTC to the millisecond; now when it gives none or one after
// now, which has not happened yet (a client's clock ahead of this
// server's).
func (s *Service) happened(at time.Time) time.Time {
	now := schemas.WireTime(s.now())
	if at.IsZero() || at.After(now) {
		return now
	}
	return at.UTC()
}

// actionRefused is the refusal of action on an open loan of item, by
// the item's status (schemas' table of loan actions); nil when allowed.
func actionRefused(action string, item Item) error {
	if r, refused := schemas.LoanActionRefused(action, item.Status); refused {
		return refusal(errs.Errorf(errs.KindInvalid, r.Code, "%s", r.Message).With("itemId", item.ID))
	}
	return nil
}

// openLoanAndItem reads the loan, which must exist (404) and be open
// (FOLIO's "Loan is closed"), and its item.
func (s *Service) openLoanAndItem(ctx context.Context, loanID string) (Loan, Item, error) {
	loan, err := s.loanByID(ctx, loanID)
	if err != nil {
		return Loan{}, Item{}, err
	}
	if loan.Status != schemas.LoanOpen {
		return Loan{}, Item{}, refusal(errs.Errorf(errs.KindInvalid, schemas.CodeValidation, "Loan is closed").With("loanId", loanID))
	}
	item, err := s.storage.ItemByID(ctx, loan.ItemID)
	return loan, item, err
}

// loanByID reads the loan, which must exist (404, in FOLIO's words).
func (s *Service) loanByID(ctx context.Context, loanID string) (Loan, error) {
	loan, err := s.storage.LoanByID(ctx, loanID)
	if errs.IsKind(err, errs.KindNotFound) {
		return Loan{}, errs.Errorf(errs.KindNotFound, schemas.CodeNotFound, "loan record with ID %q cannot be found", loanID).
			With("id", loanID)
	}
	return loan, err
}

// actOnLoan writes the action: the item's status and the loan, together,
// with the call's write id: a write whose answer was lost is sent again
// with it (Service.once).
func (s *Service) actOnLoan(ctx context.Context, loan Loan, item Item) error {
	err := s.settled(ctx, func(ctx context.Context) error { return s.storage.ActOnLoan(ctx, loan, item) })
	switch {
	case err == nil:
		return nil
	case errs.IsCode(err, schemas.CodeLoanChanged):
		return loanChangedMeanwhile(err).With("loanId", loan.ID)
	case errs.IsKind(err, errs.KindConflict):
		return errs.Errorf(errs.KindConflict, schemas.CodeItemChanged,
			"The item was changed by another request; nothing was changed, try again").With("itemId", item.ID).Because(err)
	case ambiguous(err):
		s.logger.ErrorContext(ctx, "loan action outcome unknown: storage did not answer whether it was written",
			slog.String("loan_id", loan.ID), slog.String("action", loan.Action), slog.Any("error", err))
		return unanswered(ctx, err, "loan action", "loanId", loan.ID)
	}
	return err
}

// loanChangedMeanwhile is the answer to a write of a loan that storage
// refused because another write of the loan (a renewal, a claim, a
// declaration of loss, a check-in) came first: nothing was changed.
func loanChangedMeanwhile(err error) *errs.Error {
	return errs.Errorf(errs.KindConflict, schemas.CodeLoanChanged,
		"The loan was changed by another request meanwhile; nothing was changed, try again").Because(err)
}

// refusal is one reason a request is refused, as FOLIO refuses: an
// envelope of one error.
func refusal(e *errs.Error) error { return &errs.Refusal{Errors: []*errs.Error{e}} }
