package circulation

import (
	"context"
	"time"

	"github.com/checkoutlock/schemas"
	"github.com/checkoutlock/schemas/errs"
)

// PatronRecords is what storage reads for a patron summary: the patron
// (nil when there is none), their open loans counted and the first
// listed, the item limits that apply to them, and their blocks.
type PatronRecords struct {
	Patron        *Patron
	OpenLoanCount int
	OverdueCount  int
	OpenLoans     []SummaryLoan
	// ItemLimits are the limits the check-out's write would hold the
	// patron to, for some material type and loan type each, as storage
	// counts and compares them; Unlimited says some kind of item has
	// none.
	ItemLimits      []LimitState
	Unlimited       bool
	ManualBlocks    []ManualBlock
	AutomatedBlocks []AutomatedBlock
	// FeeFineBalance is what the patron owes (a decimal of two places),
	// FeeFineCount how many open fees/fines, FeesFines the oldest of
	// them.
	FeeFineBalance string
	FeeFineCount   int
	FeesFines      []SummaryFeeFine
}

// SummaryFeeFine is an open fee/fine as a kiosk and the desk list it:
// amounts are decimals of two places, as storage wrote them.
type SummaryFeeFine struct {
	ID, FeeFineType, Amount, Remaining, Title, ItemBarcode string
	DateCreated                                            time.Time
}

// LimitState is an item limit that applies to a patron: the limit, the
// criteria of the rule that sets it (as a refusal names them), the loans
// it counts and whether it is reached.
type LimitState struct {
	Limit     int
	Match     PolicyMatch
	OpenLoans int
	Reached   bool
}

// AllLoans says the limit counts all the patron's loans: its rule names
// neither a material type nor a loan type (the patron group's limit, or
// the fallback's).
func (l LimitState) AllLoans() bool { return !l.Match.MaterialTypeMatch && !l.Match.LoanTypeMatch }

// SummaryLoan is an open loan as a kiosk lists it.
type SummaryLoan struct {
	ItemBarcode, Title string
	DueDate            time.Time
	// Overdue is storage's judgement, by the database's clock: the one
	// clock that says what is overdue, for every surface.
	Overdue bool
}

// PatronSummary is what a self-check machine shows a patron: whether they
// may borrow, and why not in the words a check-out's refusal would use;
// in the full view, who they are and their loans out too.
type PatronSummary struct {
	PatronRecords
	CanBorrow bool
	Reasons   []*errs.Error
	// AtItemLimit says the item limits stop every check-out: each limit
	// that applies is reached, and no kind of item is without one. A
	// patron at one limit but not another may borrow.
	AtItemLimit bool
	// Reached are the limits reached, in the words a check-out's refusal
	// would use, whether or not they stop every check-out.
	Reached []*errs.Error
	// Full says the summary names the patron and lists their loans; the
	// verdict alone (Full false) keeps of the patron only the barcode and
	// whether they are active, of their loans only the counts, and of
	// what they owe only whether it is too much (ExcessiveFees).
	Full bool
	// ExcessiveFees says the patron owes more than their group's maximum
	// outstanding fee/fine balance (the automated block's condition).
	ExcessiveFees bool
}

// PatronSummary reads what a self-check machine shows the patron with
// barcode: a patron that does not exist is KindNotFound. The patron may
// borrow unless blocked, inactive or expired, or at every item limit that
// applies (storage counts and compares them as the check-out's write
// does), so that a kiosk is told what a check-out would do. A PIN given is
// checked (counted before it is, as every PIN guess): a wrong one is
// CodePinInvalid, and a locked one CodePinLocked, with nothing shown.
// Without Details or a right PIN the summary is the verdict alone.
func (s *Service) PatronSummary(ctx context.Context, barcode string, access PatronAccess) (PatronSummary, error) {
	recs, err := s.storage.PatronSummary(ctx, barcode)
	if err != nil {
		return PatronSummary{}, err
	}
	if recs.Patron == nil {
		return PatronSummary{}, errs.Errorf(errs.KindNotFound, schemas.CodeUserBarcodeNotFound,
			"Could not find user with matching barcode").With("userBarcode", barcode)
	}
	full, err := s.named(ctx, recs.Patron, access)
	if err != nil {
		return PatronSummary{}, err
	}
	out := PatronSummary{PatronRecords: recs, Full: full}
	// The check-out's own refusals of the patron, by its rules' judges.
	out.Reasons = refusalsOf(schemas.RuleOfPatron, &checkOut{req: CheckOutRequest{UserBarcode: barcode}, patron: *recs.Patron},
		CheckOutReads{Patron: recs.Patron, ManualBlocks: recs.ManualBlocks, AutomatedBlocks: recs.AutomatedBlocks}, s.now())
	out.AtItemLimit = !recs.Unlimited && len(recs.ItemLimits) > 0
	for _, l := range recs.ItemLimits {
		if !l.Reached {
			out.AtItemLimit = false
			continue
		}
		out.Reached = append(out.Reached, ItemLimitReached(l.Limit, l.Match, ""))
	}
	if out.AtItemLimit {
		out.Reasons = append(out.Reasons, out.Reached...)
	}
	out.CanBorrow = len(out.Reasons) == 0
	for _, b := range recs.AutomatedBlocks {
		out.ExcessiveFees = out.ExcessiveFees || b.ConditionID == schemas.ConditionFeeFineBalance
	}
	if !out.Full {
		p := recs.Patron.Unnamed(barcode)
		out.Patron = &p
		out.OpenLoans = nil
		out.FeeFineBalance, out.FeeFineCount, out.FeesFines = "", 0, nil
	}
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
