package rules

import (
	"github.com/checkoutlock/circulation-storage/internal/postgres"
	"github.com/checkoutlock/schemas"
)

// Loan counting, beside the rules that count: what counts against
// a patron's limits, how the item limit counts, and "at the limit", each
// written once and asked by validation, the patron summary, the automated
// blocks and the check-out's write alike.

// OpenLoanCount is the item limit's count, in the database, never by
// fetching loans: the patron's open loans, not counting items Claimed
// returned, of the material type and of the loan type (an item's temporary
// one when set) when they are not NULL. Validation and the check-out's
// write count with it, so they never count differently; the write counts
// inside its own statement, after the patron's row is locked
// (locksql.LockRows, locksql.PatronRow), so the limit holds whoever calls and however many writes
// race. loan and item are the tables, tenant, user, materialType and
// loanType the SQL expressions that give them.
func OpenLoanCount(loan, item, tenant, user, materialType, loanType string) string {
	return `
SELECT count(*)
  FROM ` + loan + ` l
  JOIN ` + item + ` i ON i.tenant_id = l.tenant_id AND i.id = l.item_id
 WHERE l.tenant_id = ` + tenant + ` AND l.user_id = ` + user + `
   AND ` + CountedLoan("l", "i") + `
   AND (` + materialType + ` IS NULL OR i.material_type_id = ` + materialType + `)
   AND (` + loanType + ` IS NULL OR coalesce(i.temporary_loan_type_id, i.permanent_loan_type_id) = ` + loanType + `)`
}

// CountedLoan is SQL saying that the loan row l, of the item row i, counts
// against the patron's limits: open, its item not Claimed returned. The
// item limit's count (OpenLoanCount), the maximum items charged out and
// the automated blocks' counts ask it, so they never count differently.
func CountedLoan(l, i string) string {
	return l + `.status_name = ` + postgres.Lit(schemas.LoanOpen) + ` AND ` + i + `.status_name <> ` + postgres.Lit(schemas.ItemClaimedReturned)
}

// Reached is "at the limit": count loans counted against limit, both SQL
// expressions, leave no room for one more. The item limit's check in the
// check-out's write, validation's and the patron summary's verdicts, and
// the maximum items charged out all compare with it, so that what a kiosk
// is told is what the write will do. A NULL limit is never reached.
func Reached(count, limit string) string {
	return `coalesce((` + count + `) >= (` + limit + `), false)`
}
