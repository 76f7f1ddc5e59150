package requests

import (
	"context"
	"errors"
	"fmt"

	"github.com/checkoutlock/circulation-storage/internal/postgres"
	"github.com/checkoutlock/circulation-storage/internal/record"
	"github.com/jackc/pgx/v5"

	storage "github.com/checkoutlock/circulation-storage"
	"github.com/checkoutlock/schemas"
	"github.com/checkoutlock/schemas/errs"
)

// A returned item finds its next reader: what a check-in makes of the
// item and of the first request of its queue, as FOLIO's check-in does
// (mod-circulation's RequestQueue and CheckInByBarcodeResource). It is the
// one home of the return's transitions; every check-in, with a loan to
// close or without (package lending's), and every item handed on from
// the hold shelf (handOn), takes its statuses from returnTransition.
//
//	queue head                           checked in at        item              request
//	none                                 anywhere             Available         -
//	Hold, Recall or Page, Hold Shelf     its pickup point     Awaiting pickup   Open - Awaiting pickup (+ holdShelfExpirationDate)
//	Hold, Recall or Page, Hold Shelf     elsewhere            In transit        Open - In transit (+ item's inTransitDestinationServicePointId)
//	Hold, Recall or Page, Delivery       anywhere             Awaiting delivery Open - Awaiting delivery
//
// A request that names no pickup point is held where the item is checked
// in. A request already awaiting pickup, and checked in at its pickup
// point again, keeps its hold shelf expiration date.

// queueHead is the first open request of an item's queue, as a check-in
// reads it: its id, status, fulfilment preference and pickup point.
type queueHead struct {
	ID, Status, Fulfilment, PickupServicePointID string
}

// Returned is what a check-in makes of an item and its queue's head.
type Returned struct {
	// ItemStatus is the item's status after the check-in; Destination the
	// service point it is in transit to ("" unless In transit).
	ItemStatus, Destination string
	// RequestStatus is the head request's status after the check-in ("" when
	// there is no request); HoldShelf says it starts its time on the hold
	// shelf now (its expiration date is set).
	RequestStatus string
	HoldShelf     bool
	// RequestID is the head request's id ("" when there is none).
	RequestID string
}

// returnTransition is the table above.
func returnTransition(head *queueHead, servicePointID string) Returned {
	switch {
	case head == nil:
		return Returned{ItemStatus: schemas.ItemAvailable}
	case head.Fulfilment == "Delivery":
		return Returned{ItemStatus: schemas.ItemAwaitingDelivery, RequestStatus: schemas.RequestAwaitingDelivery}
	case head.PickupServicePointID == servicePointID || head.PickupServicePointID == "":
		return Returned{ItemStatus: schemas.ItemAwaitingPickup, RequestStatus: schemas.RequestAwaitingPickup,
			HoldShelf: head.Status != schemas.RequestAwaitingPickup}
	}
	return Returned{ItemStatus: schemas.ItemInTransit, Destination: head.PickupServicePointID, RequestStatus: schemas.RequestInTransit}
}

// itemRowAtSQL locks an item's row (its request queue's lock) and answers
// its version and status, for a check-in's write made at the version it
// read. Parameters: $1 the item, $2 the tenant.
var itemRowAtSQL = postgres.WithTables(`SELECT version, status_name FROM %s WHERE tenant_id = $2 AND id = $1::uuid FOR NO KEY UPDATE`, postgres.TableItem)

// queueHeadNowSQL reads the head of an item's queue (its id, status,
// fulfilment preference and pickup point), in a statement of its own
// after the item's row is locked, so that it sees every request written
// before (request writes take the item's row first). Parameters: $1 the
// item, $2 the tenant.
var queueHeadNowSQL = `
SELECT h.id::text, h.jsonb ->> 'status', coalesce(h.jsonb ->> 'fulfillmentPreference', 'Hold Shelf'),
       coalesce(h.jsonb ->> 'pickupServicePointId', '')
  FROM (` + QueueHeadSQL(postgres.Table(postgres.TableRequest), "$1::uuid", "$2") + `) h`

// returnItemSQL writes a check-in's item: its status, its in-transit
// destination (none when NULL), one version on. Parameters: @tenant,
// @item, @status, @destination (NULL for none), @metadata_user.
var returnItemSQL = postgres.WithTables(`
UPDATE %s SET jsonb = `+record.WithMetadata(`CASE WHEN @destination::text IS NULL THEN `+record.ItemWithStatusExpr("@status::text")+`
                         ELSE jsonb_set(`+record.ItemWithStatusExpr("@status::text")+`, '{inTransitDestinationServicePointId}', to_jsonb(@destination::text)) END`,
	"@metadata_user", true)+`
 WHERE tenant_id = @tenant AND id = @item::uuid`, postgres.TableItem)

// returnRequestSQL writes the head request's new status and, when it
// starts its time on the hold shelf, its holdShelfExpirationDate: now and
// the pickup service point's holdShelfExpiryPeriod (FOLIO's; none without
// one), moved off the service point's closed days and hours as its
// holdShelfClosedLibraryDateManagement says (migration 35's
// calendar_moved, the rule of a loan's due date too), and no later than
// postgres.LastTime. Parameters: @tenant, @request, @status, @hold_shelf, @metadata_user.
var returnRequestSQL = postgres.WithTables(`
UPDATE %[1]s r SET jsonb = `+record.WithMetadata(`CASE WHEN @hold_shelf::boolean AND e.at IS NOT NULL
        THEN jsonb_set(jsonb_set(r.jsonb, '{status}', to_jsonb(@status::text)), '{holdShelfExpirationDate}',
                       to_jsonb(to_char(e.at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')))
        ELSE jsonb_set(r.jsonb, '{status}', to_jsonb(@status::text)) END`, "@metadata_user", true)+`
  FROM (SELECT (SELECT least(%[3]s(@tenant, sp_id, now() + `+periodInterval("p")+`, strategy,
                                 (p ->> 'intervalId') IN ('Minutes', 'Hours'), NULL, now()), `+postgres.LastTime+`)
                FROM (SELECT sp.jsonb -> 'holdShelfExpiryPeriod' AS p, sp.id AS sp_id,
                             sp.jsonb ->> 'holdShelfClosedLibraryDateManagement' AS strategy
                        FROM %[2]s sp, %[1]s q
                       WHERE q.tenant_id = @tenant AND q.id = @request::uuid AND sp.tenant_id = @tenant
                         AND sp.id = (q.jsonb ->> 'pickupServicePointId')::uuid) period
               WHERE p IS NOT NULL) AS at) e
 WHERE r.tenant_id = @tenant AND r.id = @request::uuid`, postgres.TableRequest, postgres.TableServicePoint, funcCalendarMoved)

// funcCalendarMoved is migration 35's function moving a date off a
// service point's closed days and hours.
const funcCalendarMoved postgres.TableName = "calendar_moved"

// ReturnItem is a check-in's write of the item (itemID, read at version)
// checked in at servicePointID, in the transaction tx: the item's row
// locked, its queue's head read, and the item and the head request given
// their statuses (returnTransition). It answers why it wrote nothing: the
// item does not exist, or changed since (CodeVersionConflict).
func ReturnItem(ctx context.Context, tx pgx.Tx, t storage.Tenant, itemID string, version int, servicePointID string) (Returned, error) {
	var stored int
	var status string
	err := tx.QueryRow(ctx, itemRowAtSQL, itemID, string(t)).Scan(&stored, &status)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return Returned{}, errs.Errorf(errs.KindInvalid, schemas.CodeValidation, "itemId: item %s does not exist", itemID).With("itemId", itemID)
	case err != nil:
		return Returned{}, postgres.Interpret(err, t)
	case stored != version:
		return Returned{}, errs.Errorf(errs.KindConflict, schemas.CodeVersionConflict,
			"Cannot check in item %s because it has been changed: stored _version is %d, request has %d; nothing was written",
			itemID, stored, version).With("_version", fmt.Sprint(stored))
	}
	var head *queueHead
	var h queueHead
	switch err := tx.QueryRow(ctx, queueHeadNowSQL, itemID, string(t)).Scan(&h.ID, &h.Status, &h.Fulfilment, &h.PickupServicePointID); {
	case err == nil:
		head = &h
	case !errors.Is(err, pgx.ErrNoRows):
		return Returned{}, postgres.Interpret(err, t)
	}
	r := returnTransition(head, servicePointID)
	if head != nil {
		r.RequestID = head.ID
	}
	var destination *string
	if r.Destination != "" {
		destination = &r.Destination
	}
	user := record.MetadataUser(ctx)
	// The item is written one version on whatever its status was: a
	// check-out that read it before the check-in is then refused.
	if _, err := tx.Exec(ctx, returnItemSQL, pgx.StrictNamedArgs{"tenant": string(t), "item": itemID, "status": r.ItemStatus,
		"destination": destination, "metadata_user": user}); err != nil {
		return Returned{}, postgres.Interpret(err, t)
	}
	if head != nil && (r.RequestStatus != head.Status || r.HoldShelf) {
		if _, err := tx.Exec(ctx, returnRequestSQL, pgx.StrictNamedArgs{"tenant": string(t), "request": head.ID, "status": r.RequestStatus,
			"hold_shelf": r.HoldShelf, "metadata_user": user}); err != nil {
			return Returned{}, postgres.Interpret(err, t)
		}
	}
	return r, nil
}
