// Package checkoutsql hands out the statements a check-out sends to
// PostgreSQL, as circulation-storage runs them: validation's read of
// everything a check-out needs, and the write's batch (its id, its row
// locks, its own lock, the one statement that judges every rule and
// writes the item and the loan). Their text has one home, package
// lending, which builds them from the rules' and the records' fragments;
// this package only exposes them, and the row lending scans the read
// into, for the benchmark's floor
// (integration-tests/bench/checkoutfloor), which runs them with nothing
// around them, as package locksql's statements are run by the lock's.
package checkoutsql

import (
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/checkoutlock/circulation-storage/internal/lending"
	"github.com/checkoutlock/circulation-storage/internal/postgres"
)

// Statements is the check-out's statements: see lending.CheckOutStatements.
type Statements = lending.CheckOutStatements

// CheckOut is the check-out's statements, as circulation-storage runs them.
func CheckOut() Statements { return lending.Statements() }

// ReadRow is the row validation's read answers (Statements.Read and
// ReadLean), every column by name, as circulation-storage scans it: see
// lending.CheckOutRow.
type ReadRow = lending.CheckOutRow

// ReadJSON makes a session's type map read json and jsonb values as
// circulation-storage's sessions read them (postgres.RegisterJSON), so
// that the floor scans the read's values the same way too.
func ReadJSON(m *pgtype.Map) { postgres.RegisterJSON(m) }
