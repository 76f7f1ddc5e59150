package requests

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/checkoutlock/circulation-storage/internal/postgres"
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
// and read as the time it names (postgres.Passed: a date written with an
// offset expires when its time has passed, not when its text has), but
// those of $2 (tenants) and $3 (ids), one by one. Parameter: $1 the
// batch's size.
var expiredOnShelfSQL = postgres.WithTables(`
SELECT tenant_id, id::text FROM %s
 WHERE status = '`+schemas.RequestAwaitingPickup+`'
   AND `+postgres.Passed("jsonb ->> 'holdShelfExpirationDate'", "holdShelfExpirationDate")+`
   AND (tenant_id, id) NOT IN (SELECT * FROM unnest($2::text[], $3::uuid[]))
 ORDER BY jsonb ->> 'holdShelfExpirationDate' LIMIT $1`, postgres.TableRequest)

// onShelfSQL reads, under its queue's lock, request $2 of tenant $1 while
// it is still on item $3's hold shelf past its date: a request moved to
// another item meanwhile is that item's queue's, not locked here.
var onShelfSQL = postgres.WithTables(`
SELECT jsonb, version FROM %s
 WHERE tenant_id = $1 AND id = $2::uuid AND item_id = $3::uuid AND status = '`+schemas.RequestAwaitingPickup+`'
   AND `+postgres.Passed("jsonb ->> 'holdShelfExpirationDate'", "holdShelfExpirationDate"), postgres.TableRequest)

// Ref names a record the sweeper acts on (a request past its hold shelf
// date or its request expiration date, a loan to age to lost or to bill):
// its tenant and its id.
type Ref struct {
	Tenant storage.Tenant
	ID     string
}

// Failure is a record the sweeper could not act on, and why.
type Failure struct {
	Ref
	Err error
}

// CloseExpired is ExpireHoldShelves or Expire (or a loans' pass of the
// same shape, lending.AgeToLost, lending.BillAgedToLost): acts on up to
// batch records, but those of skip, and says how many it found, how many
// it closed, and which it could not.
type CloseExpired func(ctx context.Context, db *postgres.DB, batch int, skip []Ref) (found, closed int, failed []Failure, err error)

var _, _ CloseExpired = ExpireHoldShelves, Expire

// CloseEach lists, with listSQL, up to batch records to act on, of every
// tenant, but those of skip (that failed before), and closes each with
// close, in a transaction of its own and on its own: one that fails is
// answered in failed, and the others are closed all the same. It answers
// how many it found and closed; err is the listing's failure alone.
// listSQL's parameters: $1 the batch's size, $2 and $3 skip's tenants
// and ids.
func CloseEach(ctx context.Context, db *postgres.DB, listSQL string, batch int, skip []Ref,
	close func(Ref) (done bool, err error)) (found, closed int, failed []Failure, err error) {
	tenants, ids := make([]string, len(skip)), make([]string, len(skip))
	for i, k := range skip {
		tenants[i], ids[i] = string(k.Tenant), k.ID
	}
	rows, err := db.Pool.Query(ctx, listSQL, batch, tenants, ids)
	if err != nil {
		return 0, 0, nil, postgres.Interpret(err, "")
	}
	due, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (Ref, error) {
		var k Ref
		err := row.Scan(&k.Tenant, &k.ID)
		return k, err
	})
	if err != nil {
		return 0, 0, nil, postgres.Interpret(err, "")
	}
	for _, k := range due {
		done, err := close(k)
		switch {
		case err != nil:
			failed = append(failed, Failure{Ref: k, Err: err})
		case done:
			closed++
		}
	}
	return len(due), closed, failed, nil
}

// ExpireHoldShelves closes up to batch requests past their hold shelf
// expiration date, each on its own (CloseEach), but those of skip.
func ExpireHoldShelves(ctx context.Context, db *postgres.DB, batch int, skip []Ref) (found, closed int, failed []Failure, err error) {
	return CloseEach(ctx, db, expiredOnShelfSQL, batch, skip, func(k Ref) (bool, error) {
		return expireOnShelf(ctx, db, k.Tenant, k.ID)
	})
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
		if err := updateRequest(ctx, tx, t, id, version, closedDoc); err != nil {
			return err
		}
		done = true
		return handOn(ctx, tx, t, itemID, pickup)
	})
	return done, err
}

// handOn is told that a request left the hold shelf of item itemID
// (cancelled, closed, deleted, expired: leftShelf, expireOnShelf) at
// servicePointID, in the transaction tx of its write; the item, while
// still Awaiting pickup, goes to the next request of its queue, or back
// to the shelf, as a check-in there would send it.
func handOn(ctx context.Context, tx pgx.Tx, t storage.Tenant, itemID, servicePointID string) error {
	var version int
	var status string
	err := tx.QueryRow(ctx, itemRowAtSQL, itemID, string(t)).Scan(&version, &status)
	if errors.Is(err, pgx.ErrNoRows) || (err == nil && status != schemas.ItemAwaitingPickup) {
		return nil
	}
	if err != nil {
		return postgres.Interpret(err, t)
	}
	_, err = ReturnItem(ctx, tx, t, itemID, version, servicePointID)
	return err
}
