package schemas

import "slices"

// The rules a check-out is judged by, each written here once: its name,
// whose it is, the code it is refused with, the override that lifts it and
// the words an operator reads of a loan made offline past it. Every judge
// is keyed by this table and follows its order: storage's check-out write
// (the one that decides: its refusal, and the rules a loan made offline
// records it broke, come from its one list of conditions, one per rule
// here), and circulation's validation, which words each refusal as FOLIO
// does before the lock is taken. A judge that lacks a rule here, or knows
// one that is not, fails its package's tests; a rule added here alone
// fails them too, until each judge has it.

// CheckOutRule is one rule of a check-out.
type CheckOutRule struct {
	// Name is the rule, as every judge knows it.
	Name string
	// Of is whose rule it is: the patron's, the item's or the loan
	// policy's. FOLIO reads them in that order, and so do its refusals.
	Of string
	// Code is FOLIO's refusal code (the item limit is storage's own,
	// CodeItemLimitReached; circulation words it by the rule that set it).
	Code string
	// Lifted is the override that lifts the rule ("" none), as FOLIO's
	// check-out-by-barcode request names it (overrideBlocks).
	Lifted string
	// Says is the refusal's message, FOLIO's where FOLIO has one; a
	// judge may say more (the item's title, the limit counted).
	Says string
	// Words say what a loan made offline past the rule did: "lent
	// offline past the item limit" (OfflineWords).
	Words string
}

// Whose a rule is, in FOLIO's order.
const (
	RuleOfPatron = "patron"
	RuleOfItem   = "item"
	RuleOfPolicy = "policy"
)

// The overrides of FOLIO's check-out (overrideBlocks' members).
const (
	OverridePatronBlock     = "patronBlock"
	OverrideItemLimit       = "itemLimitBlock"
	OverrideItemNotLoanable = "itemNotLoanableBlock"
)

// The rules' names.
const (
	RuleBlockedManually      = "blocked_manually"
	RuleBlockedAutomatically = "blocked_automatically"
	RuleItemsChargedOut      = "items_charged_out"
	RuleInactive             = "inactive"
	RuleItemStatus           = "item_status"
	RuleRequested            = "requested_by_another_patron"
	RuleItemLimit            = "item_limit"
	RuleNotLoanable          = "not_loanable"
)

// CheckOutRules are the rules, in the order they are judged and said.
var CheckOutRules = []CheckOutRule{
	{RuleBlockedManually, RuleOfPatron, CodeUserBlockedManually, OverridePatronBlock,
		"Patron blocked from borrowing", "to a patron blocked from borrowing"},
	{RuleBlockedAutomatically, RuleOfPatron, CodeUserBlockedAutomatically, OverridePatronBlock,
		"Patron blocked automatically", "to a patron blocked automatically"},
	{RuleItemsChargedOut, RuleOfPatron, CodeUserBlockedAutomatically, OverridePatronBlock,
		"Maximum number of items charged out has been reached", "to a patron blocked automatically"},
	{RuleInactive, RuleOfPatron, CodeUserInactive, "",
		"Cannot check out to inactive user", "to an inactive or expired patron"},
	{RuleItemStatus, RuleOfItem, CodeItemStatusRefused, "",
		"Item has a status that cannot be checked out", "an item whose status does not lend"},
	{RuleRequested, RuleOfItem, CodeItemRequestedByAnotherPatron, "",
		"The item's first request is another patron's", "an item another patron requested"},
	{RuleItemLimit, RuleOfPolicy, CodeItemLimitReached, OverrideItemLimit,
		"Patron has reached maximum limit of items", "past the item limit"},
	{RuleNotLoanable, RuleOfPolicy, CodeItemNotLoanable, OverrideItemNotLoanable,
		"Item is not loanable", "an item its loan policy does not lend"},
}

// Overrides are the overrides a check-out carries.
type Overrides struct {
	PatronBlock, ItemLimit, ItemNotLoanable bool
}

// Lift says whether o lifts rule r.
func (o Overrides) Lift(r CheckOutRule) bool {
	switch r.Lifted {
	case OverridePatronBlock:
		return o.PatronBlock
	case OverrideItemLimit:
		return o.ItemLimit
	case OverrideItemNotLoanable:
		return o.ItemNotLoanable
	}
	return false
}

// Lifted is the names of the rules o lifts, in CheckOutRules' order.
func (o Overrides) Lifted() []string {
	out := []string{}
	for _, r := range CheckOutRules {
		if o.Lift(r) {
			out = append(out, r.Name)
		}
	}
	return out
}

// RulesOf is the rules of whose (RuleOfPatron, …), in order.
func RulesOf(whose string) []CheckOutRule {
	var out []CheckOutRule
	for _, r := range CheckOutRules {
		if r.Of == whose {
			out = append(out, r)
		}
	}
	return out
}

// SameRules says what a judge's rules (judges, keyed by rule name) lack
// of CheckOutRules and know beyond them (sorted): both empty when the
// judge has every rule and no other. Each judge's tests ask it.
func SameRules[V any](judges map[string]V) (missing, unknown []string) {
	rules := map[string]bool{}
	for _, r := range CheckOutRules {
		rules[r.Name] = true
		if _, ok := judges[r.Name]; !ok {
			missing = append(missing, r.Name)
		}
	}
	for n := range judges {
		if !rules[n] {
			unknown = append(unknown, n)
		}
	}
	slices.Sort(unknown)
	return missing, unknown
}
