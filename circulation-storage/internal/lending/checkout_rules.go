package lending

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/checkoutlock/circulation-storage/internal/postgres"
	"github.com/checkoutlock/circulation-storage/internal/record"
	"github.com/checkoutlock/circulation-storage/internal/rules"
	"github.com/checkoutlock/schemas"
	"github.com/checkoutlock/schemas/errs"

	storage "github.com/checkoutlock/circulation-storage"
)

// writeRule is how the check-out's write judges one of schemas.CheckOutRules:
// broken is an SQL condition on checkOutSQL's CTEs, true when the
// check-out breaks the rule; refuse, when set, says the refusal from what
// the statement answered (else the rule's own code and words), alone
// whether the refusal is answered by itself when no other rule is broken.
// From this one list come the write's verdict (checkOutSQL's allowed),
// the rules a loan made offline records it broke (offline.brokenRules)
// and the refusal (refusal): a rule is never judged one way and reported
// another.
type writeRule struct {
	schemas.CheckOutRule
	broken string
	refuse func(r *checkOutResult, w storage.CheckOutWrite) []*errs.Error
	alone  bool
}

// writeConditions are the rules' conditions, by name, on checkOutSQL's
// CTEs: borrower (active, blocked), automated, charged and charged_count,
// lent (refused), queued (other), limited and counted.
var writeConditions = map[string]writeRule{
	schemas.RuleBlockedManually: {broken: `coalesce((SELECT blocked FROM borrower), false)`},
	schemas.RuleBlockedAutomatically: {broken: `EXISTS (SELECT 1 FROM automated)`,
		refuse: func(r *checkOutResult, _ storage.CheckOutWrite) []*errs.Error {
			var blocks []struct{ Condition, Message string }
			_ = json.Unmarshal(r.Automated, &blocks)
			var out []*errs.Error
			for _, b := range blocks {
				// FOLIO's AutomatedPatronBlocksValidator: the condition's message.
				out = append(out, errs.Errorf(errs.KindInvalid, schemas.CodeUserBlockedAutomatically, "%s", b.Message).
					With("patronBlockConditionId", b.Condition))
			}
			return out
		}},
	schemas.RuleItemsChargedOut: {broken: rules.Reached("SELECT n FROM charged_count", "SELECT lim FROM charged"), alone: true,
		refuse: func(r *checkOutResult, _ storage.CheckOutWrite) []*errs.Error {
			return []*errs.Error{storage.ChargedOutLimitReached(postgres.Deref(r.ChargedReason), *r.ChargedLimit, *r.Charged)}
		}},
	schemas.RuleInactive: {broken: `NOT coalesce((SELECT active FROM borrower), true)`},
	schemas.RuleItemStatus: {broken: `coalesce((SELECT refused FROM lent), false)`,
		refuse: func(r *checkOutResult, w storage.CheckOutWrite) []*errs.Error {
			item := record.FieldValue(w.Loan, "itemId")
			return []*errs.Error{errs.Errorf(errs.KindInvalid, schemas.CodeItemStatusRefused,
				"Item %s has the item status %s and cannot be checked out", item, postgres.Deref(r.RefusedStatus)).With("itemId", item)}
		}},
	schemas.RuleRequested: {broken: `(SELECT other FROM queued)`, alone: true,
		refuse: func(r *checkOutResult, _ storage.CheckOutWrite) []*errs.Error {
			return []*errs.Error{errs.Errorf(errs.KindInvalid, schemas.CodeItemRequestedByAnotherPatron,
				"The item's first request is another patron's; nothing was written").With("requestId", postgres.Deref(r.Head))}
		}},
	schemas.RuleItemLimit: {broken: rules.Reached("SELECT n FROM counted", "SELECT n FROM limited"), alone: true,
		refuse: func(r *checkOutResult, _ storage.CheckOutWrite) []*errs.Error {
			return []*errs.Error{storage.ItemLimitReached(*r.Limit, *r.Open)}
		}},
	schemas.RuleNotLoanable: {broken: `NOT coalesce((SELECT loanable FROM limited), true)`},
}

// writeRules are schemas.CheckOutRules with their conditions, in order:
// a rule without a condition, or a condition of no rule, stops the
// program before it serves.
var writeRules = judgedBy(schemas.CheckOutRules, writeConditions)

// judgedBy pairs each rule with its condition.
func judgedBy(list []schemas.CheckOutRule, conditions map[string]writeRule) []writeRule {
	var names []string
	for name := range conditions {
		names = append(names, name)
	}
	var out []writeRule
	for _, r := range list {
		c, ok := conditions[r.Name]
		if !ok {
			panic("lending: the check-out's write has no condition for the rule " + r.Name)
		}
		c.CheckOutRule = r
		out = append(out, c)
	}
	for _, name := range names {
		if !slices.ContainsFunc(list, func(r schemas.CheckOutRule) bool { return r.Name == name }) {
			panic("lending: the check-out's write judges " + name + ", which is no check-out rule")
		}
	}
	return out
}

// judgedSQL is the body of checkOutSQL's judged CTE: one row per rule
// (n its place, name, code, hit whether the check-out breaks it).
func judgedSQL(list []writeRule) string {
	var rows []string
	for i, r := range list {
		rows = append(rows, fmt.Sprintf("(%d, %s, %s, coalesce((%s), false))", i, postgres.Lit(r.Name), postgres.Lit(r.Code), r.broken))
	}
	return `SELECT n, name, code, hit FROM (VALUES ` + strings.Join(rows, ",\n        ") + `) v(n, name, code, hit)`
}

// brokenRulesSQL is the rules a check-out's write finds broken, from
// judged, as a JSON array of their codes, each once, in the rules' order:
// what a loan made offline records of itself (offline.brokenRules).
const brokenRulesSQL = `coalesce((SELECT jsonb_agg(code ORDER BY n) FROM (SELECT code, min(n) AS n FROM judged WHERE hit GROUP BY code) c), '[]'::jsonb)`

// refusal is every rule of list the write r refused w for, all at once, in the
// rules' order (FOLIO's: the patron, then the item, then the policy), nil
// when it refused none. A refusal of one rule answered alone (the queue,
// the item limit, maximum items charged out) is that one error, with what
// the write counted; any other is an *errs.Refusal.
func (r *checkOutResult) refusal(w storage.CheckOutWrite, list []writeRule) error {
	if w.Offline {
		// Refused for no rule: the fence, the item's version or the
		// deadline said why (checkOutAnswer).
		return nil
	}
	lifted := overrides(w)
	var out []*errs.Error
	alone := false // the last refusal is one answered alone
	for _, rule := range list {
		if !slices.Contains(r.Broken, rule.Name) || lifted.Lift(rule.CheckOutRule) {
			continue
		}
		for _, e := range rule.refusals(r, w) {
			out = append(out, e)
			alone = rule.alone
		}
	}
	switch {
	case len(out) == 0:
		return nil
	case len(out) == 1 && alone:
		return out[0]
	}
	return &errs.Refusal{Errors: out}
}

// refusals are the errors of rule broken by w, as r saw it.
func (rule writeRule) refusals(r *checkOutResult, w storage.CheckOutWrite) []*errs.Error {
	if rule.refuse != nil {
		return rule.refuse(r, w)
	}
	e := errs.Errorf(errs.KindInvalid, rule.Code, "%s", rule.Says)
	switch rule.Of {
	case schemas.RuleOfPatron:
		return []*errs.Error{e.With("userId", record.FieldValue(w.Loan, "userId"))}
	default:
		return []*errs.Error{e.With("itemId", record.FieldValue(w.Loan, "itemId"))}
	}
}

// overrides are the overrides w carries.
func overrides(w storage.CheckOutWrite) schemas.Overrides {
	return schemas.Overrides{PatronBlock: w.OverridePatronBlock, ItemLimit: w.OverrideItemLimit, ItemNotLoanable: w.OverrideItemNotLoanable}
}
