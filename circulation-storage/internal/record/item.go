package record

import "github.com/checkoutlock/circulation-storage/internal/postgres"

// ItemWithStatus is the item row's document with the status named
// (a constant, never a client's value), dated now, one
// version on, and going nowhere (no inTransitDestinationServicePointId):
// what a check-out or a loan action writes.
func ItemWithStatus(name string) string { return ItemWithStatusExpr(postgres.Lit(name)) }

// ItemWithStatusExpr is ItemWithStatus with the status an SQL expression
// (a check-in's, decided by the item's queue: package requests'
// returnItemSQL): the one place an item's status is written.
func ItemWithStatusExpr(status string) string {
	return `jsonb_set(jsonb_set(jsonb - 'inTransitDestinationServicePointId', '{status}', jsonb_build_object('name', ` + status + `, 'date', ` + SQLNow + `)),
                   '{_version}', to_jsonb(version + 1))`
}
