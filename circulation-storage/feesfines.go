package storage

import (
	"context"
	"encoding/json"

	"github.com/checkoutlock/schemas"
)

// FeeFineActionWrite is an action on a patron's fees/fines (mod-feesfines'
// pay, waive, transfer, refund and cancel), written as one transaction:
// the wire's (schemas.FeeFineActionWrite).
type FeeFineActionWrite = schemas.FeeFineActionWrite

// FeeFineCheck asks whether an action of an amount would be allowed.
type FeeFineCheck struct {
	AccountIDs []string              `json:"accountIds"`
	Action     schemas.FeeFineAction `json:"action"`
	Amount     string                `json:"amount"`
}

// FeeFineChecked is a check's answer (mod-feesfines' checkActionResponse).
type FeeFineChecked struct {
	AccountID       string `json:"accountId"`
	Amount          string `json:"amount"`
	Allowed         bool   `json:"allowed"`
	RemainingAmount string `json:"remainingAmount,omitempty"`
	ErrorMessage    string `json:"errorMessage,omitempty"`
}

// FeeFineActor writes and checks the actions on fees/fines.
type FeeFineActor interface {
	// Act judges the action (the one rule Check asks too) under the
	// accounts' row locks and writes it: each account's remaining, status
	// and payment status and its fee/fine action, in one transaction with
	// the write's own id; its answer is fee-fine-action-response.json. A
	// write whose id landed before answers that write's answer (a
	// *Replayed) and moves no money.
	Act(ctx context.Context, t Tenant, w FeeFineActionWrite) (json.RawMessage, error)
	// Check is whether Act would be allowed now, and what would remain.
	Check(ctx context.Context, t Tenant, c FeeFineCheck) (FeeFineChecked, error)
}
