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
	// MaterialType is the item's material type, {"id", "name"}: FOLIO's
	// refusals name it.
	MaterialType json.RawMessage
	// ManualBlocks are the patron's manual blocks in force for borrowing
	// or renewals (not expired), a JSON array; nil when there are none.
	ManualBlocks json.RawMessage
	// AutomatedBlocks are the patron's automated blocks (conditions over
	// their patron group's limits), a JSON array; nil when there are none.
	AutomatedBlocks json.RawMessage
	// QueueHead is the first request of the item's queue, nil when the
	// item has no open request.
	QueueHead json.RawMessage
	// OpenRecall says the item has an open recall, which stops a renewal.
	OpenRecall bool
	// RulesSet says whether the rules are set; it is reported only when
	// the patron and the item exist, and then Match and LoanPolicy are set.
	RulesSet   bool
	Match      *PolicyMatch
	LoanPolicy json.RawMessage
	// OpenLoans counts the patron's open loans (not those of items Claimed
	// returned) of the item's material type when the rule named one, and of
	// its loan type when the rule named one: the item limit's count.
	OpenLoans int
	// Limit is the item limit storage enforces on this check-out's write,
	// nil when none is: the same the write will count against.
	Limit *ItemLimit
	// LockSetting is the tenant's check-out lock settings entry as stored
	// (nil when there is none), read in the same statement: a check-out
	// whose caller does not hold the settings learns them with its
	// validation instead of in a call of its own.
	LockSetting json.RawMessage
}

// CheckOutStore reads a check-out's records in one round trip to the
// database (two when an instance first meets a tenant's check-out gate).
type CheckOutStore interface {
	// ReadForCheckOut gathers the records for a check-out of itemBarcode
	// to userBarcode.
	ReadForCheckOut(ctx context.Context, t Tenant, itemBarcode, userBarcode string) (CheckOutRecords, error)
	// ReadForCheckOutByID is ReadForCheckOut with the item and the patron
	// named by their ids, as a renewal by id names them.
	ReadForCheckOutByID(ctx context.Context, t Tenant, itemID, userID string) (CheckOutRecords, error)
	// ReadPatronSummary gathers what a self-check machine shows the patron
	// with userBarcode.
	ReadPatronSummary(ctx context.Context, t Tenant, userBarcode string) (PatronSummary, error)
}

// PatronSummaryLoans is how many of a patron's open loans a summary lists.
const PatronSummaryLoans = 50

// PatronSummary is what a self-check machine shows a patron, read in one
// statement: the patron as a check-out's validation sees them (nil when
// there is no such patron), their open loans (the PatronSummaryLoans due
// first, a JSON array, nil when none) and how many, how many are overdue,
// the smallest item limit a loan policy the rules may choose for the
// patron's group enforces (nil when none), and their blocks as validation
// reads them.
type PatronSummary struct {
	User          json.RawMessage
	OpenLoanCount int
	OverdueCount  int
	OpenLoans     json.RawMessage
	// ItemLimits are the item limits that apply to the patron, each with
	// the loans it counts and whether it is reached (the write's own
	// rules and comparison); Unlimited says some material type and loan
	// type has no enforced limit, so that limits never stop every
	// check-out.
	ItemLimits      json.RawMessage
	Unlimited       bool
	ManualBlocks    json.RawMessage
	AutomatedBlocks json.RawMessage
	// FeeFineBalance is what the patron owes (rules.BalanceSQL: their
	// open fees/fines' remaining, a decimal of two places), FeeFineCount
	// how many open fees/fines, and FeesFines the first
	// PatronSummaryFeesFines of them, oldest first.
	FeeFineBalance string
	FeeFineCount   int
	FeesFines      json.RawMessage
}

// PatronSummaryFeesFines is how many of a patron's open fees/fines a
// summary lists.
const PatronSummaryFeesFines = 50
