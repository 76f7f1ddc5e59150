package lending

import (
	"github.com/checkoutlock/circulation-storage/internal/postgres"
	"github.com/checkoutlock/circulation-storage/internal/records"
)

// library is what a test of the loan writes works with: the records, to
// arrange them and read them back, and the loan writes.
type library struct {
	*records.Records
	*Loans
}

// newLibrary is a library of db whose loan writes apply policy.
func newLibrary(db *postgres.DB, policy Policy) library {
	return library{Records: records.NewRecords(db), Loans: NewLoans(db, policy, testBursts)}
}

// testBursts bounds the patrons' bursts of a test's loan writes.
var testBursts = BurstConfig{MaxWaitingPerPatron: 64, MaxWaiting: 4096}
