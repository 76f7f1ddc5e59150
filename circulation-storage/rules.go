package storage

import "context"

// CirculationRules choose the loan policy of a check-out from the patron's
// group, the item's material type and the item's loan type (its temporary
// loan type when set, else its permanent one). It is a structured form of
// FOLIO's rules text.
type CirculationRules struct {
	FallbackLoanPolicyID string `json:"fallbackLoanPolicyId"`
	// FallbackRequestPolicyID is the request policy of a request no rule
	// matches (or whose rule names none); empty, every type is allowed.
	FallbackRequestPolicyID string `json:"fallbackRequestPolicyId,omitempty"`
	// FallbackOverdueFinePolicyID and FallbackLostItemPolicyID are the
	// fee policies of a loan no rule matches, or whose rule names none;
	// empty, nothing is charged.
	FallbackOverdueFinePolicyID string `json:"fallbackOverdueFinePolicyId,omitempty"`
	FallbackLostItemPolicyID    string `json:"fallbackLostItemPolicyId,omitempty"`
	// FallbackNoticePolicyID is the patron notice policy of a loan or a
	// request no rule matches, or whose rule names none; empty, no notice.
	FallbackNoticePolicyID string            `json:"fallbackNoticePolicyId,omitempty"`
	Rules                  []CirculationRule `json:"rules"`
}

// CirculationRule applies LoanPolicyID to check-outs matching every
// criterion it names; an empty criterion matches anything.
type CirculationRule struct {
	PatronGroupID  string `json:"patronGroupId,omitempty"`
	MaterialTypeID string `json:"materialTypeId,omitempty"`
	LoanTypeID     string `json:"loanTypeId,omitempty"`
	LoanPolicyID   string `json:"loanPolicyId"`
	// RequestPolicyID is the request policy of the requests it matches.
	RequestPolicyID string `json:"requestPolicyId,omitempty"`
	// OverdueFinePolicyID and LostItemPolicyID are the fee policies of
	// the loans it matches (FOLIO's o and i).
	OverdueFinePolicyID string `json:"overdueFinePolicyId,omitempty"`
	LostItemPolicyID    string `json:"lostItemPolicyId,omitempty"`
	// NoticePolicyID is the patron notice policy of the loans and
	// requests it matches (FOLIO's n).
	NoticePolicyID string `json:"noticePolicyId,omitempty"`
}

// PolicyMatch is the policy that applies to a check-out and which criteria
// the chosen rule named (see RulesService.MatchLoanPolicy). The item limit counts loans of the same material
// type and/or loan type when, and only when, the rule named them.
type PolicyMatch struct {
	LoanPolicyID      string
	PatronGroupMatch  bool
	MaterialTypeMatch bool
	LoanTypeMatch     bool
	// RuleIndex is the chosen rule's position, or -1 for the fallback.
	RuleIndex int
}

// RulesService keeps a tenant's circulation rules.
type RulesService interface {
	// Rules returns the rules, or a KindNotFound error when none were set.
	Rules(ctx context.Context, t Tenant) (CirculationRules, error)
	// SetRules replaces the rules; a rule naming a record that does not
	// exist is a KindInvalid error.
	SetRules(ctx context.Context, t Tenant, rules CirculationRules) error
	// MatchLoanPolicy chooses the loan policy for a check-out by a patron
	// of the group, of an item of the material type and loan type (its
	// temporary one when set): of the rules whose every named criterion
	// matches, the one naming the most criteria wins; a tie goes to the
	// rule naming the loan type, then the material type, then the patron
	// group (FOLIO's priority); a remaining tie to the earlier rule. When
	// no rule matches, the fallback policy applies. No rules set is a
	// KindNotFound error.
	MatchLoanPolicy(ctx context.Context, t Tenant, patronGroupID, materialTypeID, loanTypeID string) (PolicyMatch, error)
	// AllowedServicePoints is, for each request type the requester may
	// place for the item, the pickup service points a request of it may
	// name (FOLIO's allowed service points): the types the item's status
	// allows (schemas.RequestTypesByItemStatus; every type when
	// ignoreItemStatus, as for a request replaced) and the request policy
	// the rules choose for the requester's group and the item does, each
	// with the pickup locations that policy allows for it, the very set a
	// request placed is judged by. A type with none is absent. A requester
	// or an item that does not exist is a KindInvalid error.
	AllowedServicePoints(ctx context.Context, t Tenant, requesterID, itemID string, ignoreItemStatus bool) (AllowedServicePoints, error)
}

// AllowedServicePoint is a pickup service point a request may name.
type AllowedServicePoint struct {
	ID                   string `json:"id"`
	Name                 string `json:"name"`
	DiscoveryDisplayName string `json:"discoveryDisplayName,omitempty"`
}

// AllowedServicePoints are the pickup service points each request type
// may name, by type (schemas.RequestTypeHold, …), each sorted by name
// (schemas/allowed-service-points-response.json).
type AllowedServicePoints map[string][]AllowedServicePoint

// LoanCounter counts what the item limit needs.
type LoanCounter interface {
	// CountOpenLoans counts the patron's open loans, not counting items
	// whose status is Claimed returned, restricted to items of the material
	// type and/or loan type when given (an item's loan type being its
	// temporary loan type when set, else its permanent one).
	CountOpenLoans(ctx context.Context, t Tenant, userID, materialTypeID, loanTypeID string) (int, error)
}
