package storage

import "context"

// CirculationRules choose the loan policy of a check-out from the patron's
// group, the item's material type and the item's loan type (its temporary
// loan type when set, else its permanent one). It is a structured form of
// FOLIO's rules text.
type CirculationRules struct {
	FallbackLoanPolicyID string            `json:"fallbackLoanPolicyId"`
	Rules                []CirculationRule `json:"rules"`
}

// CirculationRule applies LoanPolicyID to check-outs matching every
// criterion it names; an empty criterion matches anything.
type CirculationRule struct {
	PatronGroupID  string `json:"patronGroupId,omitempty"`
	MaterialTypeID string `json:"materialTypeId,omitempty"`
	LoanTypeID     string `json:"loanTypeId,omitempty"`
	LoanPolicyID   string `json:"loanPolicyId"`
}

// PolicyMatch is the policy that applies to a check-out and which criteria
// the chosen rule named. The item limit counts loans of the same material
// type and/or loan type when, and only when, the rule named them.
type PolicyMatch struct {
	LoanPolicyID      string
	PatronGroupMatch  bool
	MaterialTypeMatch bool
	LoanTypeMatch     bool
	// RuleIndex is the chosen rule's position, or -1 for the fallback.
	RuleIndex int
}

// Match chooses the policy for a check-out. Of the rules whose every named
// criterion equals the check-out's, the one naming the most criteria wins;
// a tie goes to the rule naming the loan type, then the material type, then
// the patron group (FOLIO's priority); a remaining tie to the earlier rule.
// When no rule matches, the fallback policy applies.
func (r CirculationRules) Match(patronGroupID, materialTypeID, loanTypeID string) PolicyMatch {
	best := PolicyMatch{LoanPolicyID: r.FallbackLoanPolicyID, RuleIndex: -1}
	bestRank := -1
	for i, rule := range r.Rules {
		if !criterionMatches(rule.PatronGroupID, patronGroupID) ||
			!criterionMatches(rule.MaterialTypeID, materialTypeID) ||
			!criterionMatches(rule.LoanTypeID, loanTypeID) {
			continue
		}
		rank := specificity(rule)
		if rank > bestRank {
			bestRank = rank
			best = PolicyMatch{
				LoanPolicyID:      rule.LoanPolicyID,
				PatronGroupMatch:  rule.PatronGroupID != "",
				MaterialTypeMatch: rule.MaterialTypeID != "",
				LoanTypeMatch:     rule.LoanTypeID != "",
				RuleIndex:         i,
			}
		}
	}
	return best
}

func criterionMatches(criterion, value string) bool {
	return criterion == "" || criterion == value
}

// specificity orders rules: first by how many criteria they name, then by
// which, loan type weighing more than material type, more than patron group.
// Strictly greater wins, so among equals the earlier rule stays chosen.
func specificity(r CirculationRule) int {
	rank := 0
	if r.PatronGroupID != "" {
		rank += 10 + 1
	}
	if r.MaterialTypeID != "" {
		rank += 10 + 2
	}
	if r.LoanTypeID != "" {
		rank += 10 + 4
	}
	return rank
}

// RulesService keeps a tenant's circulation rules.
type RulesService interface {
	// Rules returns the rules, or a KindNotFound error when none were set.
	Rules(ctx context.Context, t Tenant) (CirculationRules, error)
	// SetRules replaces the rules; a rule naming a record that does not
	// exist is a KindInvalid error.
	SetRules(ctx context.Context, t Tenant, rules CirculationRules) error
}

// LoanCounter counts what the item limit needs.
type LoanCounter interface {
	// CountOpenLoans counts the patron's open loans, not counting items
	// whose status is Claimed returned, restricted to items of the material
	// type and/or loan type when given (an item's loan type being its
	// temporary loan type when set, else its permanent one).
	CountOpenLoans(ctx context.Context, t Tenant, userID, materialTypeID, loanTypeID string) (int, error)
}
