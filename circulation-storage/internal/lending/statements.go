package lending

import (
	"github.com/checkoutlock/circulation-storage/internal/postgres"
	"github.com/checkoutlock/circulation-storage/locksql"
)

// CheckOutStatements are the statements a check-out sends to PostgreSQL,
// the very values this package runs (no copy of their text): validation's
// read (ReadForCheckOut) and the write's batch (checkOutBatch), each lean
// and in full (gate.go). Package checkoutsql hands them to the
// benchmark's floor, which runs them with nothing around them.
type CheckOutStatements struct {
	// Read and ReadLean are checkOutReadSQL; their arguments are named
	// (ReadNames), their row is CheckOutRow. GenericPlans is sent before
	// the read, in its round trip (postgres.GenericPlansSQL).
	Read, ReadLean locksql.Named
	ReadNames      []string
	GenericPlans   string
	// Claim stores the write's id (postgres.ClaimSQL, named arguments
	// tenant, id, kind, digest); WriteSettings is the settings the rest of
	// the write runs under: its generic plans, its events recorded by the
	// transaction itself (no argument).
	Claim, WriteSettings string
	// AcquireInWrite, LockRows, PatronRow, ItemRow and DropInWrite are
	// the write's row locks and its own lock, in the batch's order
	// (queueCheckOut), their arguments as there.
	AcquireInWrite, LockRows, PatronRow, ItemRow, DropInWrite string
	// Write and WriteLean are checkOutSQL; their arguments are named
	// (WriteNames).
	Write, WriteLean locksql.Named
	WriteNames       []string
}

// Statements is the check-out's statements, as this package runs them.
func Statements() CheckOutStatements {
	return CheckOutStatements{
		Read: checkOutReadSQL, ReadLean: checkOutReadLeanSQL, ReadNames: append([]string(nil), checkOutReadNames...), GenericPlans: postgres.GenericPlansSQL,
		Claim: postgres.ClaimSQL, WriteSettings: writeSettingsSQL,
		AcquireInWrite: acquireInWriteSQL, LockRows: lockRowsSQL, PatronRow: postgres.PatronRowSQL, ItemRow: itemRowSQL, DropInWrite: dropInWriteSQL,
		Write: checkOutWrite, WriteLean: checkOutWriteLean, WriteNames: append([]string(nil), checkOutNames...),
	}
}
