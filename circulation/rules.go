package circulation

import (
	"slices"
	"time"

	"github.com/checkoutlock/schemas"
	"github.com/checkoutlock/schemas/errs"
)

// judge is circulation's reading of one of schemas.CheckOutRules before the
// lock is taken: the rule's refusals, in FOLIO's words, from what
// validation read (co, reads) at now; none when the check-out keeps it.
// Storage's check-out write judges the same rules, by the same table,
// where nothing can change under it: these are the words the desk reads
// at once, and the patron summary's verdict.
type judge func(co *checkOut, reads CheckOutReads, now time.Time) []*errs.Error

// judges are the rules' judges, by name: one for each of
// schemas.CheckOutRules (TestCirculationJudgesEveryCheckOutRule).
var judges = map[string]judge{
	schemas.RuleBlockedManually: func(_ *checkOut, reads CheckOutReads, _ time.Time) []*errs.Error {
		if blocks := blocking(reads.ManualBlocks, stopsBorrowing); len(blocks) > 0 {
			return []*errs.Error{manuallyBlocked(blocks)}
		}
		return nil
	},
	// FOLIO's AutomatedPatronBlocksValidator: one refusal per condition
	// that blocks borrowing, its message as the condition gives it;
	// maximum items charged out is a rule of its own.
	schemas.RuleBlockedAutomatically: func(_ *checkOut, reads CheckOutReads, _ time.Time) []*errs.Error {
		return automatedRefusals(reads, func(id string) bool { return id != schemas.ConditionItemsChargedOut })
	},
	schemas.RuleItemsChargedOut: func(_ *checkOut, reads CheckOutReads, _ time.Time) []*errs.Error {
		return automatedRefusals(reads, func(id string) bool { return id == schemas.ConditionItemsChargedOut })
	},
	// FOLIO's InactiveUserValidator: inactive, or expired.
	schemas.RuleInactive: func(co *checkOut, reads CheckOutReads, now time.Time) []*errs.Error {
		if reads.Patron != nil && !reads.Patron.ActiveAt(now) {
			return []*errs.Error{errs.Errorf(errs.KindInvalid, schemas.CodeUserInactive, "Cannot check out to inactive user").
				With("userBarcode", co.req.UserBarcode)}
		}
		return nil
	},
	schemas.RuleItemStatus: func(co *checkOut, _ CheckOutReads, _ time.Time) []*errs.Error {
		if slices.Contains(schemas.ItemStatusesNotCheckedOut, co.item.Status) {
			return []*errs.Error{errs.Errorf(errs.KindInvalid, schemas.CodeItemStatusRefused,
				"%s (%s) (Barcode: %s) has the item status %s and cannot be checked out",
				co.item.Title, co.item.MaterialTypeName, co.item.Barcode, co.item.Status).
				With("itemBarcode", co.req.ItemBarcode)}
		}
		return nil
	},
	schemas.RuleRequested: func(co *checkOut, reads CheckOutReads, _ time.Time) []*errs.Error {
		if h := reads.QueueHead; h != nil && reads.Patron != nil && h.RequesterID != reads.Patron.ID {
			return []*errs.Error{requestedByAnotherPatron(*co)}
		}
		return nil
	},
	schemas.RuleItemLimit: func(co *checkOut, _ CheckOutReads, _ time.Time) []*errs.Error {
		if co.limit != nil && co.limit.Reached {
			return []*errs.Error{ItemLimitReached(co.limit.Limit, co.match, co.req.ItemBarcode)}
		}
		return nil
	},
	schemas.RuleNotLoanable: func(co *checkOut, _ CheckOutReads, _ time.Time) []*errs.Error {
		if !co.policy.Loanable {
			return []*errs.Error{errs.Errorf(errs.KindInvalid, schemas.CodeItemNotLoanable, "Item is not loanable").
				With("itemBarcode", co.req.ItemBarcode).With("loanPolicyName", co.policy.Name)}
		}
		return nil
	},
}

// refusalsOf is the refusals of whose rules (schemas.RuleOfPatron, …), in
// the rules' order, but those the check-out's overrides lift.
func refusalsOf(whose string, co *checkOut, reads CheckOutReads, now time.Time) []*errs.Error {
	lifted := schemas.Overrides{PatronBlock: co.req.Overrides.PatronBlock, ItemLimit: co.req.Overrides.ItemLimit,
		ItemNotLoanable: co.req.Overrides.ItemNotLoanable}
	var out []*errs.Error
	for _, r := range schemas.RulesOf(whose) {
		if lifted.Lift(r) {
			continue
		}
		judge, ok := judges[r.Name]
		if !ok {
			panic("circulation: no judge of the check-out rule " + r.Name)
		}
		out = append(out, judge(co, reads, now)...)
	}
	return out
}

// automatedRefusals is FOLIO's refusal of each automated block of
// borrowing whose condition is one of these.
func automatedRefusals(reads CheckOutReads, these func(conditionID string) bool) []*errs.Error {
	var out []*errs.Error
	for _, b := range reads.AutomatedBlocks {
		if b.BlockBorrowing && these(b.ConditionID) {
			out = append(out, automaticallyBlocked(b.ConditionID, b.Message))
		}
	}
	return out
}
