// Package storage is the domain of circulation-storage: the records it keeps
// (check-out locks; patrons, items, loan policies, circulation rules, loans
// and settings; tenants), the services that keep them, the rule matching,
// and the errors they report (of package errs). It imports neither the HTTP framework nor the
// database driver: the packages under internal implement the services by
// concern (locks, records, lending, accounts, tenants, outbox, sweeper, on
// the pools of internal/postgres), package httpapi serves them, and the app
// wires them.
package storage

import (
	"github.com/checkoutlock/schemas"
	"github.com/checkoutlock/schemas/errs"
)

// Unavailable is the error for a database that cannot be reached.
func Unavailable(cause error) *errs.Error {
	e := errs.Errorf(errs.KindUnavailable, schemas.CodeDatabaseUnavailable, "Database unavailable, try again later").Because(cause)
	e.RetryAfter = schemas.UnavailableRetryAfter
	return e
}

// The outbox's event kinds and types beside FOLIO's CREATED, UPDATED and
// DELETED of a loan, an item or a request: a check-out's and a
// check-in's own event.
const (
	EventKindCheckOut = "check-out"
	EventKindCheckIn  = "check-in"
	EventKindRenewal  = "renewal"
	EventCheckedOut   = "CHECKED_OUT"
	EventCheckedIn    = "CHECKED_IN"
	EventRenewed      = "RENEWED"
	// EventCheckedInBeforeLoan is a check-in's event when it was dated
	// before the item's open loan was lent: nothing closed.
	EventCheckedInBeforeLoan = "RETURNED_BEFORE_LOAN"
)
