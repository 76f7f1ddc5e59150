package storage

import (
	"context"
	"encoding/json"
)

// CheckOutRecords is everything validating a check-out by barcode reads,
// gathered in one call: the patron, the item, the item's open loan, the
// loan policy the circulation rules choose and the patron's open loans
// counted the way that policy's item limit counts them. A record that does
// not exist is nil; the caller decides what its absence means.
type CheckOutRecords struct {
	User, Item, OpenLoan json.RawMessage
	// RulesSet says whether the rules are set; it is reported only when
	// the patron and the item exist, and then Match and LoanPolicy are set.
	RulesSet   bool
	Match      *PolicyMatch
	LoanPolicy json.RawMessage
	// OpenLoans counts the patron's open loans (not those of items Claimed
	// returned) of the item's material type when the rule named one, and of
	// its loan type when the rule named one: the item limit's count.
	OpenLoans int
}

// CheckOutStore reads a check-out's records in as few round trips to the
// database as it can.
type CheckOutStore interface {
	// CheckOutBasics reads the patron and the item by barcode, the item's
	// open loan and the circulation rules (nil when none are set).
	CheckOutBasics(ctx context.Context, t Tenant, itemBarcode, userBarcode string) (user, item, openLoan json.RawMessage, rules *CirculationRules, err error)
	// PolicyAndCount reads a loan policy and counts the patron's open loans
	// as LoanCounter does.
	PolicyAndCount(ctx context.Context, t Tenant, policyID, userID, materialTypeID, loanTypeID string) (json.RawMessage, int, error)
}

// ReadForCheckOut gathers the records for a check-out of itemBarcode to
// userBarcode: two reads, the second only when the patron and the item
// exist and the rules are set.
func ReadForCheckOut(ctx context.Context, store CheckOutStore, t Tenant, itemBarcode, userBarcode string) (CheckOutRecords, error) {
	var out CheckOutRecords
	var rules *CirculationRules
	var err error
	out.User, out.Item, out.OpenLoan, rules, err = store.CheckOutBasics(ctx, t, itemBarcode, userBarcode)
	if err != nil || out.User == nil || out.Item == nil || rules == nil {
		return out, err
	}
	var user struct {
		ID          string `json:"id"`
		PatronGroup string `json:"patronGroup"`
	}
	var item struct {
		MaterialTypeID      string `json:"materialTypeId"`
		PermanentLoanTypeID string `json:"permanentLoanTypeId"`
		TemporaryLoanTypeID string `json:"temporaryLoanTypeId"`
	}
	if err := json.Unmarshal(out.User, &user); err != nil {
		return CheckOutRecords{}, err
	}
	if err := json.Unmarshal(out.Item, &item); err != nil {
		return CheckOutRecords{}, err
	}
	loanType := item.PermanentLoanTypeID
	if item.TemporaryLoanTypeID != "" {
		loanType = item.TemporaryLoanTypeID
	}
	m := rules.Match(user.PatronGroup, item.MaterialTypeID, loanType)
	out.RulesSet, out.Match = true, &m
	var mt, lt string
	if m.MaterialTypeMatch {
		mt = item.MaterialTypeID
	}
	if m.LoanTypeMatch {
		lt = loanType
	}
	out.LoanPolicy, out.OpenLoans, err = store.PolicyAndCount(ctx, t, m.LoanPolicyID, user.ID, mt, lt)
	if err != nil {
		return CheckOutRecords{}, err
	}
	return out, nil
}
