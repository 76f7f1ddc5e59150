package postgres

import (
	"context"

	"github.com/google/uuid"

	storage "github.com/checkoutlock/circulation-storage"
	"github.com/checkoutlock/circulation-storage/locksql"
)

// PatronRowSQL locks a patron's row (locksql.PatronRow). It is the first
// row locked by every write that judges a patron's blocks (a check-out's,
// a renewal's, a request's written through circulation) and by every
// write that can newly block them (a loss declared, an aging to lost or a
// billing of one of their loans, a check-in that charges a fine, a
// fee/fine or a manual block written): so such writes of one patron take
// their turns, and none judges the patron from a snapshot taken before
// another committed. Each takes it before any item, loan or request row,
// so they wait for each other in one order. Parameters: $1 the patron,
// $2 the tenant.
var PatronRowSQL = WithTables(locksql.PatronRow, TablePatron)

// LockPatron locks patron's row of t (PatronRowSQL) in q, a transaction;
// a patron that is no id locks nothing (what is written then names no
// patron, and is refused as such).
func LockPatron(ctx context.Context, q Querier, t storage.Tenant, patron string) error {
	if uuid.Validate(patron) != nil {
		return nil
	}
	_, err := q.Exec(ctx, PatronRowSQL, patron, string(t))
	return Interpret(err, t)
}
