package circulation

import (
	"context"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/checkoutlock/schemas"
	"github.com/checkoutlock/schemas/errs"
)

// RenewRequest is FOLIO's renew by barcode: the item on loan to the
// patron, and what the caller may learn of the patron and do for them.
type RenewRequest struct {
	ItemBarcode, UserBarcode, ServicePointID string
	// ItemID and UserID name the loan by ids (RenewByID): its refusals
	// then name them, as FOLIO's renew by id does.
	ItemID, UserID string
	Access         PatronAccess
	// Overrides are the refusals a librarian overrides, already allowed
	// by the caller's permissions.
	Overrides RenewalOverrides
}

// RenewalOverrides are FOLIO's overrideBlocks of a renewal: the refusals a
// librarian lifts (schemas.RenewalOverrideLifts), with the comment every
// override needs.
type RenewalOverrides struct {
	// PatronBlock lifts the patron's manual and automated blocks.
	PatronBlock bool
	// Renewal lifts the loan policy's refusals (renewalBlock, or
	// renewalDueDateRequiredBlock with DueDate): the loan is then due at
	// the policy's due date, or at DueDate where the policy gives none or
	// none later than the loan's.
	Renewal bool
	DueDate time.Time
	Comment string
}

// Any says whether o overrides anything.
func (o RenewalOverrides) Any() bool { return o.PatronBlock || o.Renewal }

// Blocks are the blocks o lifts, by FOLIO's names
// (schemas.HeaderRenewalOverride's).
func (o RenewalOverrides) Blocks() []string {
	var out []string
	if o.Renewal {
		out = append(out, schemas.OverrideRenewalBlock)
	}
	if o.PatronBlock {
		out = append(out, schemas.OverridePatronBlock)
	}
	return out
}

// itemNamed and userNamed are how the request names the item and the
// patron, for its refusals: by id when it was renewed by ids, else by
// barcode.
func (r RenewRequest) itemNamed() (key, value string) {
	if r.ItemID != "" {
		return "itemId", r.ItemID
	}
	return "itemBarcode", r.ItemBarcode
}

func (r RenewRequest) userNamed() (key, value string) {
	if r.UserID != "" {
		return "userId", r.UserID
	}
	return "userBarcode", r.UserBarcode
}

// RenewResult is a renewal done: the loan as stored, its item and patron.
type RenewResult struct {
	Loan   Loan
	Item   Item
	Patron Patron
	// Named says the caller may be told who the borrower is (Access:
	// Details, or the patron's right PIN); when not, Patron is Unnamed and
	// the answer names no borrower beyond the barcode the caller gave.
	Named bool
	// PolicyName is the name of the loan policy the loan was renewed
	// under (FOLIO's loanPolicy.name).
	PolicyName string
}

// ActionRenewed is a renewed loan's action.
const ActionRenewed = "renewed"

// RenewByBarcode renews the loan of the item to the patron, as
// mod-circulation's RenewByBarcodeResource does: every refusal at once,
// in FOLIO's order and words; the new due date from the policy the rules
// choose now, counted from the current due date or from now as the
// policy says. The write renews the loan only at the version and renewal
// count read and while the item has no open recall (storage checks all
// in it), so two renewals of one loan at once renew it once, and a
// renewal beside a claim, a declaration of loss or a check-in never
// undoes it.
//
// A self-check machine (no Access.Details) renews without the patron's
// PIN only where the tenant does not require it: where it does, it is
// refused before anything is read (CodePinRequired), and a PIN given is
// checked, whatever the tenant requires, before any of FOLIO's refusals
// (which tell whether the patron holds the item). With the right PIN the
// renewal goes on as a librarian's.
//
// The renewal's write carries the call's write id: a call sent again with
// its Idempotency-Key answers the loan its write renewed, whether the
// write meets the key at storage or the call is refused before it writes
// (where its item is no longer on loan to the patron the barcode names,
// its PIN is checked against the patron the write renewed for:
// renewNotLent).
func (s *Service) RenewByBarcode(ctx context.Context, req RenewRequest) (RenewResult, error) {
	ctx = identified(ctx)
	if err := s.pinBeforeAnything(ctx, req.Access); err != nil {
		return RenewResult{}, err
	}
	reads, err := s.storage.ReadForCheckOut(ctx, req.ItemBarcode, req.UserBarcode)
	if err != nil {
		return RenewResult{}, err
	}
	return s.renewRead(ctx, req, reads)
}

// RenewByID renews the loan of the item req.ItemID to the patron
// req.UserID, as mod-circulation's RenewByIdResource does (mod-patron's
// renewals, a patron's from the discovery layer): validation's one read,
// the item and the patron named by their ids (either may have no
// barcode), judged as FOLIO judges: the item (none: "No item with ID"),
// its open loan (none: "No open loan") and whose it is (another's, or no
// patron with that id: "Cannot renew item checked out to different
// user"); then the renewal judged and written as RenewByBarcode's, its
// refusals naming the ids. The caller names the patron by id, as FOLIO's
// modules and the desk do, not a kiosk: it gives no PIN and its answer
// names the borrower (req.Access is not asked).
func (s *Service) RenewByID(ctx context.Context, req RenewRequest) (RenewResult, error) {
	ctx = identified(ctx)
	req.Access = PatronAccess{Details: true}
	reads, err := s.storage.ReadForCheckOutByID(ctx, req.ItemID, req.UserID)
	if err != nil {
		return RenewResult{}, err
	}
	return s.renewRead(ctx, req, reads)
}

// renewRead is a renewal from validation's read: the PIN given checked,
// the loan judged and written, and a write whose answer was lost answered
// from its write id. A renewal of an item not on loan to the patron read
// is renewNotLent's.
func (s *Service) renewRead(ctx context.Context, req RenewRequest, reads CheckOutReads) (RenewResult, error) {
	if !reads.lentToPatron() {
		return s.renewNotLent(ctx, req, reads)
	}
	named, err := s.named(ctx, reads.Patron, req.Access)
	if err != nil {
		return RenewResult{}, err
	}
	stored, refused := s.renew(ctx, req, reads)
	if refused != nil {
		l, ok, err := s.landed(ctx, schemas.WriteRenewal, refused)
		if !ok {
			return RenewResult{}, err
		}
		stored = *l.Loan
	}
	return s.renewedAnswer(ctx, req, stored, reads, reads.Patron, named), nil
}

// renewNotLent is a renewal of an item not on loan to the patron read,
// which judgeRenewal refuses, unless it is a call sent again with its
// Idempotency-Key whose write landed (the barcodes it names changed
// since, or its loan was closed): its write is looked up by its id before
// the PIN given is checked, and where it landed the PIN is checked, and a
// wrong one counted, against the patron the write renewed for, never the
// one the barcode names now. Storage not answering the lookup, or the key
// being another request's (KeyReused), is the answer, no PIN checked. A
// call whose write did not land, or without a key, has its PIN checked
// against the patron read, then is refused.
func (s *Service) renewNotLent(ctx context.Context, req RenewRequest, reads CheckOutReads) (RenewResult, error) {
	if w, ok := WriteOf(ctx); ok && w.Keyed {
		l, found, err := s.landedAs(ctx, w, schemas.WriteRenewal)
		if err != nil {
			return RenewResult{}, err
		}
		if found {
			renewedFor := &Patron{ID: l.Loan.UserID}
			named, err := s.named(ctx, renewedFor, req.Access)
			if err != nil {
				return RenewResult{}, err
			}
			return s.renewedAnswer(ctx, req, *l.Loan, reads, renewedFor, named), nil
		}
	}
	if _, err := s.named(ctx, reads.Patron, req.Access); err != nil {
		return RenewResult{}, err
	}
	_, refused := s.renew(ctx, req, reads)
	return RenewResult{}, refused
}

// policyOf is the loan policy a renewed loan was renewed under, the one
// it names (loanPolicyId): read, the one read for the call (by the call,
// or by ofLoan), else read by its id (a renewal sent again with its
// Idempotency-Key after the rules changed to choose another). Where it
// cannot be read, it has the loan's id and no name: the answer then names
// none.
func (s *Service) policyOf(ctx context.Context, loan Loan, read LoanPolicy) LoanPolicy {
	if read.ID == loan.LoanPolicyID {
		return read
	}
	p, err := s.storage.LoanPolicy(ctx, loan.LoanPolicyID)
	if err != nil {
		s.logger.WarnContext(ctx, "renewal landed: its loan policy could not be read for its answer",
			slog.String("loan_id", loan.ID), slog.String("loan_policy_id", loan.LoanPolicyID), slog.Any("error", err))
		return LoanPolicy{ID: loan.LoanPolicyID}
	}
	return p
}

// renewedAnswer is a renewal's answer: the loan renewed, as stored, with
// its item, patron (ofLoan) and policy (policyOf), the patron named only
// when named, and only when they are checked: the patron whose PIN the
// call's was checked against, or the one it read. Any other (a call sent
// again with its Idempotency-Key after the barcodes it gave were given to
// other records, its PIN checked against the patron it read) is named
// only to a caller who may be told any borrower (req.Access.Details); an
// unnamed one is shown by the barcode the caller gave.
func (s *Service) renewedAnswer(ctx context.Context, req RenewRequest, stored Loan, reads CheckOutReads, checked *Patron, named bool) RenewResult {
	theirs := s.ofLoan(ctx, stored, reads)
	theirs.Policy = s.policyOf(ctx, stored, theirs.Policy)
	if checked.ID != stored.UserID {
		named = req.Access.Details
	}
	if named {
		return RenewResult{Loan: stored, Item: *theirs.Item, Patron: *theirs.Patron, Named: true, PolicyName: theirs.Policy.Name}
	}
	return RenewResult{Loan: stored, Item: *theirs.Item, Patron: theirs.Patron.Unnamed(req.UserBarcode), PolicyName: theirs.Policy.Name}
}

// renew judges and writes a renewal from what it read: the loan as
// stored, or the refusal.
func (s *Service) renew(ctx context.Context, req RenewRequest, reads CheckOutReads) (Loan, error) {
	item, loan := reads.Item, reads.OpenLoanOf
	now := schemas.WireTime(s.now())
	policy := reads.Policy
	due, refusals := judgeRenewal(reads, req, now)
	if len(refusals) > 0 {
		return Loan{}, &errs.Refusal{Errors: refusals}
	}
	renewed := Loan{ID: loan.ID, UserID: loan.UserID, ItemID: item.ID, DueDate: due, Action: ActionRenewed, Status: schemas.LoanOpen,
		LoanPolicyID: policy.ID, RenewalCount: loan.RenewalCount + 1, Doc: loan.Doc}
	if o := req.Overrides; o.Any() {
		renewed.Action, renewed.ActionComment = schemas.LoanRenewedThroughOverride, o.Comment
	}
	var stored Loan
	err := s.settled(ctx, func(ctx context.Context) error {
		var err error
		stored, err = s.storage.RenewLoan(ctx, renewed, loan.RenewalCount, req.Overrides)
		return err
	})
	switch {
	case err == nil:
		return stored, nil
	case errs.IsCode(err, schemas.CodeRenewalBlockedByRecall):
		return Loan{}, refusal(errs.Errorf(errs.KindInvalid, schemas.CodeRenewalBlockedByRecall,
			"items cannot be renewed when there is an active recall request").Because(err))
	case errs.IsCode(err, schemas.CodeLoanChanged):
		return Loan{}, loanChangedMeanwhile(err).With(req.itemNamed())
	case ambiguous(err):
		s.logger.WarnContext(ctx, "renewal outcome unknown: storage did not answer whether the loan was renewed",
			slog.String("loan_id", loan.ID), slog.Any("error", err))
		return Loan{}, unanswered(ctx, err, "renewal", "loanId", loan.ID)
	}
	return Loan{}, err
}

// judgeRenewal is FOLIO's refusals of a renewal of the item's loan to the
// patron from what was read (the item, its open loan, whose it is, then
// renewalRefusals), and the new due date when there are none.
func judgeRenewal(reads CheckOutReads, req RenewRequest, now time.Time) (time.Time, []*errs.Error) {
	item, loan := reads.Item, reads.OpenLoanOf
	itemKey, itemValue := req.itemNamed()
	switch {
	case item == nil && req.ItemID != "":
		return time.Time{}, []*errs.Error{errs.Errorf(errs.KindInvalid, schemas.CodeItemNotFound,
			"No item with ID %s exists", req.ItemID).With("itemId", req.ItemID)}
	case item == nil:
		return time.Time{}, []*errs.Error{errs.Errorf(errs.KindInvalid, schemas.CodeItemBarcodeNotFound,
			"No item with barcode %s exists", req.ItemBarcode).With("itemBarcode", req.ItemBarcode)}
	case loan == nil:
		return time.Time{}, []*errs.Error{errs.Errorf(errs.KindInvalid, schemas.CodeNoOpenLoan,
			"No open loan for item %s", itemValue).With(itemKey, itemValue)}
	case !reads.lentToPatron():
		return time.Time{}, []*errs.Error{errs.Errorf(errs.KindInvalid, schemas.CodeItemCheckedOutToDifferentUser,
			"Cannot renew item checked out to different user").With(req.userNamed())}
	}
	if req.Overrides.Any() {
		return overriddenRenewal(reads, req.Overrides, now)
	}
	return renewalRefusals(reads, now)
}

// overriddenRenewal is a renewal through an override, as mod-circulation's
// renewThroughOverride judges it: a comment first; then renewalRefusals'
// refusals less those the override lifts (schemas.RenewalOverrideLifts).
// Lifting the loan policy's, the loan is due at the policy's due date
// when it is later than the loan's, else at the override's due date
// (required: OVERRIDE_RENEWAL_DUE_DATE_REQUIRED where the policy does not
// lend or renew or counts from a date it does not know,
// OVERRIDE_RENEWAL_DUE_DATE_REQUIRED_WHEN_DUE_DATE_UNCHANGED where its
// date would not move the loan's), which must be later than the loan's;
// and an override of a renewal nothing else refuses and the policy would
// allow is refused (OVERRIDE_RENEWAL_NOT_ALLOWED_FOR_CURRENT_LOAN): there
// is nothing to override.
func overriddenRenewal(reads CheckOutReads, o RenewalOverrides, now time.Time) (time.Time, []*errs.Error) {
	if strings.TrimSpace(o.Comment) == "" {
		return time.Time{}, []*errs.Error{errs.Errorf(errs.KindInvalid, schemas.CodeOverrideRenewalCommentRequired,
			"Override renewal request must have a comment").With("comment", "")}
	}
	due, refusals := renewalRefusals(reads, now)
	// Each of the policy's refusals is a case for the override; a due
	// date the policy's would not move goes too, the override giving the
	// loan its own, judged below.
	overridable := false
	kept := slices.DeleteFunc(refusals, func(e *errs.Error) bool {
		block := schemas.RenewalOverridableBlock(e.Code)
		policys := block != "" && block != schemas.OverridePatronBlock
		overridable = overridable || policys
		return schemas.RenewalOverrideLifts(e.Code, o.PatronBlock, o.Renewal) || (o.Renewal && policys)
	})
	if !o.Renewal || !reads.RulesSet {
		return due, kept
	}
	loan, policy := reads.OpenLoanOf, reads.Policy
	withPolicy := func(e *errs.Error) *errs.Error {
		return e.With("loanPolicyId", policy.ID).With("loanPolicyName", policy.Name)
	}
	proposed, policys, computable := policyOverrideDue(reads, now)
	switch {
	case policys:
		due = proposed
	case !o.DueDate.IsZero():
		due = o.DueDate
	case !computable:
		return time.Time{}, append(kept, errs.Errorf(errs.KindInvalid, schemas.CodeOverrideRenewalDueDateRequired,
			"New due date must be specified when due date calculation fails").With("dueDate", ""))
	default:
		return time.Time{}, append(kept, errs.Errorf(errs.KindInvalid, schemas.CodeOverrideRenewalDueDateRequiredWhenDueDateUnchanged,
			"New due date is required when renewal would not change the due date").With("dueDate", ""))
	}
	if computable && len(kept) == 0 && !overridable {
		// FOLIO's words, its missing space kept.
		return time.Time{}, append(kept, withPolicy(errs.Errorf(errs.KindInvalid, schemas.CodeOverrideRenewalNotAllowedForCurrentLoan,
			"Override renewal does not match any of expected cases: item is not loanable, item is not renewable, "+
				"reached number of renewals limit,renewal date falls outside of the date ranges in the loan policy, "+
				"items cannot be renewed when there is an active recall request, item is Declared lost, item is Aged to lost, "+
				"renewal would not change the due date, loan has reminder fees")))
	}
	if !due.After(loan.DueDate) {
		kept = append(kept, withPolicy(errs.Errorf(errs.KindInvalid, schemas.CodeRenewalWouldNotChangeDueDate,
			"renewal would not change the due date")))
	}
	return due, kept
}

// RenewalOutlook is what a renewal of a loan would meet now: the policy
// the rules choose for it, whether it renews and how many renewals it
// leaves, and FOLIO's refusals (none when the renewal would be done). The
// desk's page offers a renewal only where it has no refusal.
type RenewalOutlook struct {
	PolicyName string
	// Renewable says the policy lends and renews; Unlimited that it
	// renews without limit, else Left is the renewals it has left.
	Renewable, Unlimited bool
	Left                 int
	Refusals             []*errs.Error
	// OverrideNeedsDueDate says an override of the policy's refusals
	// would need the librarian's due date (policyOverrideDue): the
	// policy gives none later than the loan's.
	OverrideNeedsDueDate bool
}

// RenewalOutlook judges a renewal of the item's loan to the patron, named
// by their ids, as RenewByID would, from the same read, writing nothing.
func (s *Service) RenewalOutlook(ctx context.Context, itemID, userID string) (RenewalOutlook, error) {
	reads, err := s.storage.ReadForCheckOutByID(ctx, itemID, userID)
	if err != nil {
		return RenewalOutlook{}, err
	}
	now := schemas.WireTime(s.now())
	_, refusals := judgeRenewal(reads, RenewRequest{ItemID: itemID, UserID: userID}, now)
	out := RenewalOutlook{Refusals: refusals}
	if reads.RulesSet && reads.Item != nil && reads.OpenLoanOf != nil {
		p := reads.Policy
		out.PolicyName, out.Renewable, out.Unlimited = p.Name, p.Loanable && p.Renewable, p.Renewals.Unlimited
		if out.Renewable && !out.Unlimited {
			out.Left = max(0, p.Renewals.NumberAllowed-reads.OpenLoanOf.RenewalCount)
		}
		_, policys, _ := policyOverrideDue(reads, now)
		out.OverrideNeedsDueDate = !policys
	}
	return out, nil
}

// renewalRefusals are FOLIO's reasons not to renew, in the order
// mod-circulation adds them (RenewalResource, RenewalValidator), and,
// when there are none, the new due date.
func renewalRefusals(reads CheckOutReads, now time.Time) (time.Time, []*errs.Error) {
	item, patron, loan, policy := reads.Item, reads.Patron, reads.OpenLoanOf, reads.Policy
	var out []*errs.Error
	withPolicy := func(e *errs.Error) *errs.Error {
		return e.With("loanPolicyId", policy.ID).With("loanPolicyName", policy.Name)
	}
	if !patron.ActiveAt(now) {
		out = append(out, errs.Errorf(errs.KindInvalid, schemas.CodeUserIsInactiveOrExpired,
			"Cannot renew loan when user is inactive or expired").With("reason", "User is inactive."))
	}
	if blocks := blocking(reads.ManualBlocks, stopsRenewals); len(blocks) > 0 {
		var reasons []string
		for _, b := range blocks {
			reasons = append(reasons, b.Desc)
		}
		out = append(out, errs.Errorf(errs.KindInvalid, schemas.CodeUserBlockedManually, "Patron blocked from renewing").
			With("reason", strings.Join(reasons, ";")))
	}
	for _, b := range reads.AutomatedBlocks {
		if b.BlockRenewals {
			out = append(out, automaticallyBlocked(b.ConditionID, b.Message))
		}
	}
	if !reads.RulesSet {
		return time.Time{}, append(out, errs.Errorf(errs.KindInvalid, schemas.CodeNoLoanPolicy,
			"No loan policy applies: the circulation rules are not set").With("itemBarcode", item.Barcode))
	}
	if !policy.Loanable {
		out = append(out, withPolicy(errs.Errorf(errs.KindInvalid, schemas.CodeItemNotLoanable, "item is not loanable")))
	}
	if reads.OpenRecall {
		out = append(out, errs.Errorf(errs.KindInvalid, schemas.CodeRenewalBlockedByRecall,
			"items cannot be renewed when there is an active recall request"))
	}
	// The item's status, from schemas' table of loan actions: a claim of
	// return is checked last, as FOLIO checks it.
	statusRefusal, statusRefused := schemas.LoanActionRefused(schemas.LoanActionRenew, item.Status)
	if statusRefused && item.Status != schemas.ItemClaimedReturned {
		out = append(out, errs.Errorf(errs.KindInvalid, statusRefusal.Code, "%s", statusRefusal.Message).With("itemId", item.ID))
	}
	switch {
	case !policy.Renewable:
		out = append(out, withPolicy(errs.Errorf(errs.KindInvalid, schemas.CodeLoanNotRenewable, "loan is not renewable")))
	case !policy.Renewals.Unlimited && loan.RenewalCount >= policy.Renewals.NumberAllowed:
		out = append(out, withPolicy(errs.Errorf(errs.KindInvalid, schemas.CodeLoanRenewalLimitReached, "loan at maximum renewal number")))
	}
	if h := reads.QueueHead; h != nil && h.RequestType == "Hold" && !policy.HoldsRenewable {
		out = append(out, withPolicy(errs.Errorf(errs.KindInvalid, schemas.CodeRenewalBlockedByHoldRequest,
			"Items with this loan policy cannot be renewed when there is an active, pending hold request")))
	}
	if statusRefused && item.Status == schemas.ItemClaimedReturned {
		out = append(out, errs.Errorf(errs.KindInvalid, statusRefusal.Code, "%s", statusRefusal.Message).With("itemId", item.ID))
	}
	if !policy.Loanable || !policy.Renewable {
		return time.Time{}, out
	}
	due, ok := policyRenewalDue(reads, now)
	if !ok {
		return time.Time{}, append(out, withPolicy(errs.Errorf(errs.KindInvalid, schemas.CodeLoanPolicyRenewFromNotRecognized,
			"cannot determine when to renew from")))
	}
	if !due.After(loan.DueDate) {
		out = append(out, withPolicy(errs.Errorf(errs.KindInvalid, schemas.CodeRenewalWouldNotChangeDueDate,
			"renewal would not change the due date")))
	}
	return due, out
}

// policyOverrideDue is the due date an override of the loan policy's
// refusals renews the open loan to of itself: the policy's, where it
// gives one later than the loan's (policys); else the librarian gives
// it (FOLIO's renewalDueDateRequiredBlock's dueDate). computable says
// whether the policy gives one at all.
func policyOverrideDue(reads CheckOutReads, now time.Time) (due time.Time, policys, computable bool) {
	due, computable = policyRenewalDue(reads, now)
	return due, computable && due.After(reads.OpenLoanOf.DueDate), computable
}

// policyRenewalDue is the due date the loan policy gives a renewal now
// (its renewal period, its period for holds when a hold heads the queue),
// and whether it gives one: it lends and renews, counting from a date it
// knows.
func policyRenewalDue(reads CheckOutReads, now time.Time) (time.Time, bool) {
	policy, loan := reads.Policy, reads.OpenLoanOf
	if !policy.Loanable || !policy.Renewable {
		return time.Time{}, false
	}
	var from time.Time
	switch policy.Renewals.From {
	case RenewFromDueDate:
		from = loan.DueDate
	case RenewFromNow:
		from = now
	default:
		return time.Time{}, false
	}
	period := policy.Renewals.Period
	if h := reads.QueueHead; h != nil && h.RequestType == "Hold" && policy.Renewals.HoldPeriod.Duration > 0 {
		period = policy.Renewals.HoldPeriod
	}
	return period.DueDate(from), true
}
