package circulation

import (
	"context"
	"time"

	"github.com/checkoutlock/schemas"
	"github.com/checkoutlock/schemas/errs"
)

// PatronRecords is what storage reads for a patron summary: the patron
// (nil when there is none), their open loans counted and the first
// listed, the item limit they meet first (0: none), and their blocks.
type PatronRecords struct {
	Patron          *Patron
	OpenLoanCount   int
	OverdueCount    int
	OpenLoans       []SummaryLoan
	ItemLimit       int
	ManualBlocks    []ManualBlock
	AutomatedBlocks []AutomatedBlock
}

// SummaryLoan is an open loan as a kiosk lists it.
type SummaryLoan struct {
	ItemBarcode, Title string
	DueDate            time.Time
}

// PatronSummary is what a self-check machine shows a patron: whether they
// may borrow, and why not in the words a check-out's refusal would use.
type PatronSummary struct {
	PatronRecords
	CanBorrow bool
	Reasons   []*errs.Error
}

// PatronSummary reads what a self-check machine shows the patron with
// barcode: a patron that does not exist is KindNotFound.
func (s *Service) PatronSummary(ctx context.Context, barcode string) (PatronSummary, error) {
	recs, err := s.storage.PatronSummary(ctx, barcode)
	if err != nil {
		return PatronSummary{}, err
	}
	if recs.Patron == nil {
		return PatronSummary{}, errs.Errorf(errs.KindNotFound, schemas.CodeUserBarcodeNotFound,
			"Could not find user with matching barcode").With("userBarcode", barcode)
	}
	out := PatronSummary{PatronRecords: recs}
	// The check-out's own refusals, in its order.
	if len(recs.ManualBlocks) > 0 {
		out.Reasons = append(out.Reasons, manuallyBlocked(recs.ManualBlocks))
	}
	for _, b := range recs.AutomatedBlocks {
		if b.BlockBorrowing {
			out.Reasons = append(out.Reasons, automaticallyBlocked(b.ConditionID, b.Message))
		}
	}
	if !recs.Patron.ActiveAt(s.now()) {
		out.Reasons = append(out.Reasons, errs.Errorf(errs.KindInvalid, schemas.CodeUserInactive, "Cannot check out to inactive user").
			With("userBarcode", barcode))
	}
	if recs.ItemLimit > 0 && recs.OpenLoanCount >= recs.ItemLimit {
		out.Reasons = append(out.Reasons, ItemLimitReached(recs.ItemLimit, PolicyMatch{}, ""))
	}
	out.CanBorrow = len(out.Reasons) == 0
	return out, nil
}

// ItemSummary is what a self-check machine shows of an item: the item and,
// when it is on loan, its due date.
type ItemSummary struct {
	Item    Item
	DueDate time.Time
}

// ItemSummary reads what a self-check machine shows of the item with
// barcode: an item that does not exist is KindNotFound.
func (s *Service) ItemSummary(ctx context.Context, barcode string) (ItemSummary, error) {
	item, err := s.storage.ItemByBarcode(ctx, barcode)
	if err != nil {
		return ItemSummary{}, err
	}
	out := ItemSummary{Item: item}
	loan, found, err := s.storage.OpenLoanForItem(ctx, item.ID)
	if err != nil {
		return ItemSummary{}, err
	}
	if found {
		out.DueDate = loan.DueDate
	}
	return out, nil
}

// VerifyPatronPin checks the PIN a patron typed at a self-check machine:
// nil when it matches; CodePinInvalid when it does not, the patron has
// none or there is no such patron (one answer for the three);
// CodePinLocked after too many wrong ones.
func (s *Service) VerifyPatronPin(ctx context.Context, barcode, pin string) error {
	id, found, err := s.storage.PatronIDByBarcode(ctx, barcode)
	if err != nil {
		return err
	}
	if !found {
		return errs.Errorf(errs.KindInvalid, schemas.CodePinInvalid, "Wrong PIN")
	}
	return s.storage.VerifyPin(ctx, id, pin)
}
