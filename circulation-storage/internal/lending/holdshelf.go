package lending

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/checkoutlock/circulation-storage/internal/postgres"
	"github.com/checkoutlock/circulation-storage/internal/records"
	"github.com/jackc/pgx/v5"

	storage "github.com/checkoutlock/circulation-storage"
	"github.com/checkoutlock/schemas"
)

// Hold shelf expiry: a request left on the hold shelf past its
// holdShelfExpirationDate is closed "Closed - Pickup expired"
// (schemas.RequestPickupExpired), as FOLIO's
// hold shelf clearance closes it, and its item goes to the next request of
// its queue or back to the shelf: the return's transitions
// (returnTransition) at the expired request's pickup point, in the same
// transaction. The triggers of migration 9 announce the request's and the
// item's changes.

// expiredOnShelfSQL is a batch of requests past their hold shelf
// expiration date, of any tenant, found through the index of migration 23
// and each checked as a date. Parameter: $1 the batch's size.
var expiredOnShelfSQL = postgres.WithTables(`
SELECT tenant_id, id::text FROM %s
 WHERE status = '`+schemas.RequestAwaitingPickup+`'
   AND jsonb ->> 'holdShelfExpirationDate' < to_char(now() AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')
   AND `+postgres.StoredTime("jsonb ->> 'holdShelfExpirationDate'", "holdShelfExpirationDate")+` < now()
 ORDER BY jsonb ->> 'holdShelfExpirationDate' LIMIT $1`, postgres.TableRequest)

// onShelfSQL reads, under its queue's lock, request $2 of tenant $1 while
// it is still on item $3's hold shelf past its date: a request moved to
// another item meanwhile is that item's queue's, not locked here.
var onShelfSQL = postgres.WithTables(`
SELECT jsonb, version FROM %s
 WHERE tenant_id = $1 AND id = $2::uuid AND item_id = $3::uuid AND status = '`+schemas.RequestAwaitingPickup+`'
   AND `+postgres.StoredTime("jsonb ->> 'holdShelfExpirationDate'", "holdShelfExpirationDate")+` < now()`, postgres.TableRequest)

// ExpireHoldShelves closes up to batch requests past their hold shelf
// expiration date, of every tenant, each in a transaction of its own, and
// answers how many it closed.
func ExpireHoldShelves(ctx context.Context, db *postgres.DB, batch int) (int, error) {
	rows, err := db.Pool.Query(ctx, expiredOnShelfSQL, batch)
	if err != nil {
		return 0, postgres.Interpret(err, "")
	}
	type due struct{ tenant, id string }
	var found []due
	for rows.Next() {
		var d due
		if err := rows.Scan(&d.tenant, &d.id); err != nil {
			rows.Close()
			return 0, postgres.Interpret(err, "")
		}
		found = append(found, d)
	}
	if err := rows.Err(); err != nil {
		return 0, postgres.Interpret(err, "")
	}
	closed := 0
	for _, d := range found {
		t := storage.Tenant(d.tenant)
		done, err := expireOnShelf(ctx, db, t, d.id)
		if err != nil {
			return closed, fmt.Errorf("hold shelf expiry of request %s of %s: %w", d.id, d.tenant, err)
		}
		if done {
			closed++
		}
	}
	return closed, nil
}

// expireOnShelf closes request id of t, found past its hold shelf date,
// and hands its item on, in one transaction, unless it left the shelf
// meanwhile (done false).
func expireOnShelf(ctx context.Context, db *postgres.DB, t storage.Tenant, id string) (done bool, err error) {
	err = db.InTx(ctx, t, func(tx pgx.Tx) error {
		var itemID string
		if err := tx.QueryRow(ctx, postgres.WithTables(`SELECT item_id::text FROM %s WHERE tenant_id = $1 AND id = $2::uuid`,
			postgres.TableRequest), string(t), id).Scan(&itemID); err != nil {
			if errors.Is(err, pgx.ErrNoRows) {
				return nil
			}
			return postgres.Interpret(err, t)
		}
		// The queue's lock (its item's row) first, as every write of a
		// request takes it; then the request as it stands under it.
		if _, err := tx.Exec(ctx, itemRowAtSQL, itemID, string(t)); err != nil {
			return postgres.Interpret(err, t)
		}
		var doc json.RawMessage
		var version int
		err := tx.QueryRow(ctx, onShelfSQL, string(t), id, itemID).Scan(&doc, &version)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil // filled, cancelled, put back or moved meanwhile
		}
		if err != nil {
			return postgres.Interpret(err, t)
		}
		var req map[string]any
		if err := json.Unmarshal(doc, &req); err != nil {
			return err
		}
		req["status"] = schemas.RequestPickupExpired
		pickup, _ := req["pickupServicePointId"].(string)
		closedDoc, err := json.Marshal(req)
		if err != nil {
			return err
		}
		if err := records.UpdateRequestIn(ctx, tx, t, id, version, closedDoc); err != nil {
			return err
		}
		done = true
		return HandOn(ctx, tx, t, itemID, pickup)
	})
	return done, err
}

// HandOn is records.Records' ShelfLeft: a request left the hold shelf of
// item itemID (cancelled, closed, deleted) at servicePointID, in the
// transaction tx of its write; the item, while still Awaiting pickup,
// goes to the next request of its queue, or back to the shelf, as a
// check-in there would send it.
func HandOn(ctx context.Context, tx pgx.Tx, t storage.Tenant, itemID, servicePointID string) error {
	var version int
	var status string
	err := tx.QueryRow(ctx, itemRowAtSQL, itemID, string(t)).Scan(&version, &status)
	if errors.Is(err, pgx.ErrNoRows) || (err == nil && status != schemas.ItemAwaitingPickup) {
		return nil
	}
	if err != nil {
		return postgres.Interpret(err, t)
	}
	_, err = returnItem(ctx, tx, t, itemID, version, servicePointID)
	return err
}
