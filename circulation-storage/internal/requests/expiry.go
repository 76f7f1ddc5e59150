package requests

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/checkoutlock/circulation-storage/internal/postgres"
	"github.com/jackc/pgx/v5"

	storage "github.com/checkoutlock/circulation-storage"
	"github.com/checkoutlock/schemas"
	"github.com/checkoutlock/schemas/errs"
)

// Request expiry: an open request not yet on the hold shelf past its
// requestExpirationDate is closed "Closed - Unfilled"
// (schemas.RequestUnfilled), as FOLIO's scheduled request expiration
// (mod-circulation-storage's RequestExpirationService) closes it: one
// "Open - Not yet filled", "Open - In transit" or "Open - Awaiting
// delivery". A request on the hold shelf waits out its
// holdShelfExpirationDate whatever its requestExpirationDate
// (holdshelf.go).
//
// Each request is closed by the one write of a request (Writer.Update),
// at the version read, in a transaction of its own, as a cancellation
// is: its position given up, the requests after it moving up one, and an
// open page's Paged item put back on the shelf when no other page waits
// for it (unpage). An item in transit or awaiting delivery for it goes
// on as it is, as after a cancellation: its check-in at its destination
// hands it to the queue's next request, or back to the shelf
// (ReturnItem). The triggers of migration 9 announce each change.

// expiringStatuses are the statuses a request is closed in once past its
// requestExpirationDate (FOLIO's RequestExpirationService), as the index
// of migration 27 lists them.
var expiringStatuses = []string{schemas.RequestNotYetFilled, schemas.RequestInTransit, schemas.RequestAwaitingDelivery}

// inExpiringStatus is SQL saying that the request row's status is one of
// expiringStatuses.
var inExpiringStatus = "status IN (" + postgres.Lits(expiringStatuses...) + ")"

// expiredRequestsSQL is a batch of requests past their request expiration
// date, of any tenant, found through the index of migration 27 and each
// read as the time it names (postgres.Passed), but those of $2 (tenants)
// and $3 (ids), one by one. Parameter: $1 the batch's size.
var expiredRequestsSQL = postgres.WithTables(`
SELECT tenant_id, id::text FROM %s
 WHERE `+inExpiringStatus+`
   AND `+postgres.Passed("jsonb ->> 'requestExpirationDate'", "requestExpirationDate")+`
   AND (tenant_id, id) NOT IN (SELECT * FROM unnest($2::text[], $3::uuid[]))
 ORDER BY jsonb ->> 'requestExpirationDate' LIMIT $1`, postgres.TableRequest)

// expiredRequestSQL reads request $2 of tenant $1, its document and its
// version, while it is still open past its request expiration date and
// not on the hold shelf.
var expiredRequestSQL = postgres.WithTables(`
SELECT jsonb, version FROM %s
 WHERE tenant_id = $1 AND id = $2::uuid AND `+inExpiringStatus+`
   AND `+postgres.Passed("jsonb ->> 'requestExpirationDate'", "requestExpirationDate"), postgres.TableRequest)

// expiryWrites bounds how often the expiry of one request reads it again
// because another write of it (its queue moving, say) came between its
// read and its write.
const expiryWrites = 3

// Expire closes up to batch requests past their request expiration
// date, each on its own (CloseEach), but those of skip.
func Expire(ctx context.Context, db *postgres.DB, batch int, skip []Ref) (found, closed int, failed []Failure, err error) {
	w := New(db)
	return CloseEach(ctx, db, expiredRequestsSQL, batch, skip, func(k Ref) (bool, error) {
		return expireRequest(ctx, db, w, k.Tenant, k.ID)
	})
}

// expireRequest closes request id of t, found past its request expiration
// date, through w's write of it at the version read, unless it was
// filled, cancelled, given another date, put on the hold shelf or deleted
// meanwhile (done false). A write refused because another write of the
// request came between the read and it is read and judged again, up to
// expiryWrites times; the last refusal is then its failure, and the
// request is tried again at the next pass.
func expireRequest(ctx context.Context, db *postgres.DB, w *Writer, t storage.Tenant, id string) (done bool, err error) {
	for range expiryWrites {
		var doc json.RawMessage
		var version int
		err = db.Pool.QueryRow(ctx, expiredRequestSQL, string(t), id).Scan(&doc, &version)
		if errors.Is(err, pgx.ErrNoRows) {
			return false, nil
		}
		if err != nil {
			return false, postgres.Interpret(err, t)
		}
		var req map[string]any
		if err := json.Unmarshal(doc, &req); err != nil {
			return false, err
		}
		req["status"] = schemas.RequestUnfilled
		var closedDoc json.RawMessage
		if closedDoc, err = json.Marshal(req); err != nil {
			return false, err
		}
		err = w.Update(ctx, t, id, version, closedDoc)
		switch {
		case err == nil:
			return true, nil
		case errs.IsCode(err, schemas.CodeNotFound):
			return false, nil // deleted meanwhile
		case !errs.IsCode(err, schemas.CodeVersionConflict) && !errs.IsCode(err, schemas.CodeConflict):
			return false, err
		}
		// Written meanwhile, or moved to another item while the write
		// waited for its queue: read again.
	}
	return false, err
}
