package lending

import (
	"context"
	"testing"

	"github.com/checkoutlock/circulation-storage/internal/dbtest"
	"github.com/checkoutlock/circulation-storage/internal/postgres"
	"github.com/checkoutlock/circulation-storage/internal/recordstore"
)

// library is what a test of the loan writes works with: the records, to
// arrange them and read them back, and the loan writes.
type library struct {
	*recordstore.Records
	*Loans
}

// newLibrary is a library of db whose loan writes apply policy.
func newLibrary(db *postgres.DB, policy Policy) library {
	return library{Records: recordstore.NewRecords(db), Loans: NewLoans(db, policy)}
}

// blockedBy reports whether some server process waits for one that pid
// holds.
func blockedBy(t *testing.T, f dbtest.Fixture, pid int) bool {
	t.Helper()
	var n int
	if err := f.DB.Pool.QueryRow(context.Background(), `SELECT count(*) FROM pg_stat_activity
		WHERE $1 = ANY (pg_blocking_pids(pid))`, pid).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n > 0
}
