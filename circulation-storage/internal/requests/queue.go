package requests

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/checkoutlock/circulation-storage/internal/postgres"
	"github.com/checkoutlock/circulation-storage/internal/record"

	storage "github.com/checkoutlock/circulation-storage"
	"github.com/checkoutlock/schemas"
	"github.com/checkoutlock/schemas/errs"
)

// An item's queue is its open requests ("Open - …"), and storage keeps it
// whole whatever the order of writes: the open requests of an item hold
// the positions 1 to n, each once, and a closed request holds none.
//
//   - A write of a request first locks the queues it changes: the rows of
//     their items, in the items' id order (lockQueuesSQL), as a check-out's
//     write, which fills a queue's first request, does by updating its
//     item. Writes of one queue take their turns; none waits for another
//     while holding what that one waits for, so no two deadlock (twenty
//     requests for one item at once did, through the position key's
//     checks, each waiting for the other's).
//   - A request joining a queue (created open, reopened, moved to another
//     item) goes to its end when it names no position, or to the position
//     it names when that is the end (n + 1); a position taken is refused
//     (ALREADY_EXISTS, naming it), one beyond the end too (VALIDATION_FAILED).
//   - An open request given another position in its queue moves there, the
//     requests between moving one place to make room.
//   - A request leaving a queue (closed, deleted, moved to another item)
//     gives its position up: the requests after it move up one. A closed
//     request's position is removed from what it stores.
//
// The requests moved are written with it, each recorded as an event.

// Open is SQL saying that the request whose status column (or
// expression) is status is open (schemas.OpenRequestStatuses: in its item's queue): the one
// test of an open request, for every statement that reads or moves a
// queue.
func Open(status string) string {
	return status + " IN (" + postgres.Lits(schemas.OpenRequestStatuses...) + ")"
}

// ShiftedPosition is the request document of the row row (an alias, or ""
// for the statement's one table) moved by places in its queue: the one way
// a queue is shifted, whether a request joins, leaves or moves, or a
// check-out fills the first (by, SQL giving an integer).
func ShiftedPosition(row, by string) string {
	col := func(c string) string {
		if row == "" {
			return c
		}
		return row + "." + c
	}
	return "jsonb_set(" + col("jsonb") + ", '{position}', to_jsonb(" + col("position") + " + " + by + "))"
}

// FillSQL is the statement that fills the first request of a queue, the
// one head (SQL giving its id) names, of tenant, when when (SQL) holds: it
// becomes "Closed - Filled" and gives its position up, its metadata
// saying metadataUser changed it. It returns the request's id and
// document. A check-out's write fills with it the request its loan is
// for; the requests after it move up with ShiftSQL.
func FillSQL(tenant, head, when, metadataUser string) string {
	return `UPDATE ` + postgres.Table(postgres.TableRequest) + ` r
       SET jsonb = ` + record.WithMetadata(`jsonb_set(r.jsonb - 'position', '{status}', to_jsonb(`+postgres.Lit(schemas.RequestFilled)+`::text))`, metadataUser, true) + `
     WHERE r.tenant_id = ` + tenant + ` AND r.id = ` + head + ` AND ` + when + `
    RETURNING r.id, r.jsonb`
}

// ShiftSQL is the statement that moves the open requests of item's queue
// (of tenant) whose position within (SQL on r.position and r.id) takes in
// by places (SQL giving an integer), when when (SQL) holds: the one way a
// queue's requests move, whether one joins, leaves or moves, or a
// check-out fills the first. It returns each request's id, its position
// before, and its document.
func ShiftSQL(item, tenant, by, within, when string) string {
	return `UPDATE ` + postgres.Table(postgres.TableRequest) + ` r
       SET jsonb = ` + ShiftedPosition("r", by) + `
     WHERE r.item_id = ` + item + ` AND r.tenant_id = ` + tenant + ` AND ` + Open("r.status") + `
       AND ` + within + ` AND ` + when + `
    RETURNING r.id, r.position, r.jsonb`
}

// lockQueuesSQL locks the queues of the items $2 of tenant $1.
var lockQueuesSQL = postgres.WithTables(`SELECT id FROM %s WHERE tenant_id = $1 AND id = ANY($2::uuid[]) ORDER BY id FOR NO KEY UPDATE`, postgres.TableItem)

// queueLengthSQL counts the open requests of item $2 of tenant $1, but for
// request $3.
var queueLengthSQL = postgres.WithTables(`SELECT count(*) FROM %s
 WHERE item_id = $2 AND tenant_id = $1 AND `+Open("status")+` AND id IS DISTINCT FROM $3::uuid`, postgres.TableRequest)

// storedRequestSQL reads what request $2 of tenant $1 is in its queue,
// and its version.
var storedRequestSQL = postgres.WithTables(`SELECT item_id::text, `+Open("status")+`, position, version FROM %s WHERE tenant_id = $1 AND id = $2`, postgres.TableRequest)

// shiftQueueSQL moves the open requests of @item (of @tenant) at positions
// @from to @to, but request @except, by @by places.
var shiftQueueSQL = ShiftSQL("@item", "@tenant", "@by::integer", "r.position BETWEEN @from AND @to AND r.id IS DISTINCT FROM @except::uuid", "true")

// shiftArgs are shiftQueueSQL's arguments: item's open requests at
// positions from to to, but request except, move by places.
func shiftArgs(t storage.Tenant, item string, from, to, by int, except string) pgx.StrictNamedArgs {
	return pgx.StrictNamedArgs{"tenant": string(t), "item": item, "from": from, "to": to, "by": by, "except": except}
}

// queuePlace is a request's place in a queue: its item, and its position
// when it is open (0 when it holds none); as stored, its version.
type queuePlace struct {
	item     string
	open     bool
	position int
	version  int
}

// requestDoc is a request document as a write handles it: its fields as
// sent, and its place.
type requestDoc struct {
	fields map[string]json.RawMessage
	place  queuePlace
	// named says whether the document names a position.
	named bool
}

func decodeRequest(doc json.RawMessage) (requestDoc, error) {
	var d requestDoc
	if err := json.Unmarshal(doc, &d.fields); err != nil {
		return d, errs.Errorf(errs.KindInvalid, schemas.CodeValidation, "A request must be a JSON object")
	}
	// The schema has checked the fields: an id (in either case, compared
	// here as the database writes it), a status, an integer position
	// (which JSON may write 2.0).
	var status string
	_ = json.Unmarshal(d.fields["itemId"], &d.place.item)
	d.place.item = strings.ToLower(d.place.item)
	_ = json.Unmarshal(d.fields["status"], &status)
	d.place.open = schemas.RequestIsOpen(status)
	if raw, ok := d.fields["position"]; ok && string(raw) != "null" {
		var p float64
		if err := json.Unmarshal(raw, &p); err != nil || p != math.Trunc(p) || p < 1 || p > math.MaxInt32 {
			return d, errs.Errorf(errs.KindInvalid, schemas.CodeValidation, "position: %s is not a position from 1", string(raw)).
				With("position", string(raw))
		}
		d.named, d.place.position = true, int(p)
	}
	return d, nil
}

// encode is the document to store: a closed request without a position,
// an open one at place.position.
func (d requestDoc) encode() json.RawMessage {
	delete(d.fields, "position")
	if d.place.open {
		d.fields["position"] = json.RawMessage(strconv.Itoa(d.place.position))
	}
	out, _ := json.Marshal(d.fields)
	return out
}

// lockQueues locks the queues of items (ids, any order, "" skipped).
func lockQueues(ctx context.Context, tx pgx.Tx, t storage.Tenant, items ...string) error {
	ids := slices.DeleteFunc(slices.Clone(items), func(s string) bool { return s == "" })
	slices.Sort(ids)
	ids = slices.Compact(ids)
	if len(ids) == 0 {
		return nil
	}
	rows, err := tx.Query(ctx, lockQueuesSQL, string(t), ids)
	if err != nil {
		return postgres.Interpret(err, t)
	}
	rows.Close()
	return postgres.Interpret(rows.Err(), t)
}

// storedPlace is request id's place as stored; found false when there is
// no such request.
func storedPlace(ctx context.Context, q postgres.Querier, t storage.Tenant, id string) (queuePlace, bool, error) {
	var p queuePlace
	var pos *int
	err := q.QueryRow(ctx, storedRequestSQL, string(t), id).Scan(&p.item, &p.open, &pos, &p.version)
	if errors.Is(err, pgx.ErrNoRows) {
		return p, false, nil
	}
	if err != nil {
		return p, false, postgres.Interpret(err, t)
	}
	if pos != nil && p.open {
		p.position = *pos
	}
	return p, true, nil
}

// join places request id (doc) in item's queue, with the queue locked: at
// its end, or at the position doc names when that is the end.
func join(ctx context.Context, tx pgx.Tx, t storage.Tenant, id string, d *requestDoc) error {
	var n int
	if err := tx.QueryRow(ctx, queueLengthSQL, string(t), d.place.item, postgres.Nullable(id)).Scan(&n); err != nil {
		return postgres.Interpret(err, t)
	}
	if !d.named {
		d.place.position = n + 1
		return nil
	}
	return placeAt(*d, n, true)
}

// placeAt checks the position d names in a queue of n other open
// requests: joining it, only its end (n + 1); already in it, any from 1
// to n + 1.
func placeAt(d requestDoc, n int, joining bool) error {
	p := d.place.position
	switch {
	case p > n+1:
		return errs.Errorf(errs.KindInvalid, schemas.CodeValidation,
			"position: %d is beyond the end of the queue of item %s, which has %d other open requests; positions run from 1 without a gap",
			p, d.place.item, n).With("position", strconv.Itoa(p))
	case joining && p <= n:
		return errs.Errorf(errs.KindInvalid, schemas.CodeAlreadyExists,
			"Request with position %d already exists in the queue of item %s: the queue has %d open requests; leave position out, or give %d, to join its end",
			p, d.place.item, n, n+1).With("position", strconv.Itoa(p))
	}
	return nil
}

// movedMeanwhile is the answer to a write of request id that another
// write moved to another item's queue while this one waited for the
// queues it had read.
func movedMeanwhile(id string) error {
	return errs.Errorf(errs.KindConflict, schemas.CodeConflict,
		"Request %s was moved to another item while this write waited for its queue: nothing was written; read it again", id).With("id", id)
}

// leave gives up from's position in its item's queue (request id leaving
// it): the requests after it move up one.
func leave(ctx context.Context, tx pgx.Tx, t storage.Tenant, id string, from queuePlace) error {
	if !from.open || from.position == 0 {
		return nil
	}
	_, err := tx.Exec(ctx, shiftQueueSQL, shiftArgs(t, from.item, from.position+1, math.MaxInt32, -1, id))
	return postgres.Interpret(err, t)
}

// createRequest is Create for a request.
func createRequest(ctx context.Context, tx pgx.Tx, t storage.Tenant, id string, doc json.RawMessage) (json.RawMessage, error) {
	d, err := decodeRequest(doc)
	if err != nil {
		return nil, err
	}
	if d.place.open {
		if err := lockQueues(ctx, tx, t, d.place.item); err != nil {
			return nil, err
		}
		if err := join(ctx, tx, t, "", &d); err != nil {
			return nil, err
		}
	}
	return record.Insert(ctx, tx, t, storage.Requests, id, d.encode(), false)
}

// updateRequest is Update for a request, written at version (0: none
// named, refused).
func updateRequest(ctx context.Context, tx pgx.Tx, t storage.Tenant, id string, version int, doc json.RawMessage) error {
	d, err := decodeRequest(doc)
	if err != nil {
		return err
	}
	before, found, err := storedPlace(ctx, tx, t, id)
	if err != nil || !found {
		if err == nil {
			err = errs.NotFound(storage.Requests.Name, id)
		}
		return err
	}
	if err := lockQueues(ctx, tx, t, before.item, d.place.item); err != nil {
		return err
	}
	// Read again under the queues' locks: a write that moved the request
	// meanwhile has committed, and is in what is read now. Moved to a
	// third item, whose queue this write has not locked, it is the
	// client's to try again.
	item := before.item
	if before, found, err = storedPlace(ctx, tx, t, id); err != nil || !found {
		if err == nil {
			err = errs.NotFound(storage.Requests.Name, id)
		}
		return err
	}
	if before.item != item && before.item != d.place.item {
		return movedMeanwhile(id)
	}
	if version != before.version {
		// Another write came first: nothing is judged from a request
		// read before it.
		return record.StaleVersion(id, before.version, version)
	}
	staying := before.open && before.position > 0 && d.place.open && before.item == d.place.item
	switch {
	case staying && !d.named:
		d.place.position = before.position
	case staying:
		var n int
		if err := tx.QueryRow(ctx, queueLengthSQL, string(t), d.place.item, id).Scan(&n); err != nil {
			return postgres.Interpret(err, t)
		}
		if err := placeAt(d, n, false); err != nil {
			return err
		}
	case d.place.open:
		if err := join(ctx, tx, t, id, &d); err != nil {
			return err
		}
	}
	// The position key is checked at commit: the requests between move
	// around this one.
	if _, err := tx.Exec(ctx, `SET CONSTRAINTS `+pgx.Identifier{postgres.SharedSchema, "request_queue_position_key"}.Sanitize()+` DEFERRED`); err != nil {
		return postgres.Interpret(err, t)
	}
	if err := record.Update(ctx, tx, t, storage.Requests, id, version, d.encode(), nil); err != nil {
		return err
	}
	switch {
	case staying && d.place.position < before.position:
		_, err = tx.Exec(ctx, shiftQueueSQL, shiftArgs(t, d.place.item, d.place.position, before.position-1, 1, id))
	case staying && d.place.position > before.position:
		_, err = tx.Exec(ctx, shiftQueueSQL, shiftArgs(t, d.place.item, before.position+1, d.place.position, -1, id))
	case !staying:
		return leave(ctx, tx, t, id, before)
	}
	return postgres.Interpret(err, t)
}

// deleteRequest locks the queue of request id, has deleteFn delete it
// (what deleteFn reads of the request is then what the delete ends) and,
// once it is deleted, gives its position up.
func deleteRequest(ctx context.Context, tx pgx.Tx, t storage.Tenant, id string, deleteFn func() (bool, error)) error {
	before, found, err := storedPlace(ctx, tx, t, id)
	if err != nil || !found {
		return err
	}
	if err := lockQueues(ctx, tx, t, before.item); err != nil {
		return err
	}
	item := before.item
	if before, found, err = storedPlace(ctx, tx, t, id); err != nil || !found {
		return err
	}
	if before.item != item {
		return movedMeanwhile(id)
	}
	deleted, err := deleteFn()
	if err != nil || !deleted {
		return err
	}
	return leave(ctx, tx, t, id, before)
}

// shelfPlace is a request waiting on its item's hold shelf: the item and
// the request's pickup point.
type shelfPlace struct {
	item, pickup string
}

// onShelf is request id's hold shelf, when it is Open - Awaiting pickup
// (nil otherwise).
func onShelf(ctx context.Context, tx pgx.Tx, t storage.Tenant, id string) (*shelfPlace, error) {
	var p shelfPlace
	err := tx.QueryRow(ctx, postgres.WithTables(`SELECT item_id::text, coalesce(jsonb ->> 'pickupServicePointId', '') FROM %s
 WHERE tenant_id = $1 AND id = $2::uuid AND status = '`+schemas.RequestAwaitingPickup+`'`, postgres.TableRequest), string(t), id).Scan(&p.item, &p.pickup)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, postgres.Interpret(err, t)
	}
	return &p, nil
}

// leftShelf hands the item on (handOn) when request id, on the hold
// shelf before (shelf), is on it no more: closed, moved or deleted.
func leftShelf(ctx context.Context, tx pgx.Tx, t storage.Tenant, id string, shelf *shelfPlace) error {
	if shelf == nil {
		return nil
	}
	still, err := onShelf(ctx, tx, t, id)
	if err != nil || still != nil {
		return err
	}
	return handOn(ctx, tx, t, shelf.item, shelf.pickup)
}

// kind is what a request is for and whose it is: its item, its type and
// its requester (lowercase).
type kind struct {
	item, requestType, requester string
}

// requestKind is request id's kind as stored (empty when there is none).
func requestKind(ctx context.Context, tx pgx.Tx, t storage.Tenant, id string) (kind, error) {
	var k kind
	err := tx.QueryRow(ctx, postgres.WithTables(`SELECT item_id::text, coalesce(jsonb ->> 'requestType', ''), lower(coalesce(jsonb ->> 'requesterId', ''))
  FROM %s WHERE tenant_id = $1 AND id = $2::uuid`, postgres.TableRequest), string(t), id).Scan(&k.item, &k.requestType, &k.requester)
	if errors.Is(err, pgx.ErrNoRows) {
		return kind{}, nil
	}
	return k, postgres.Interpret(err, t)
}

// judgeRequest has request id, written as doc, judged (judge) when the
// write came through circulation and the request is open and of another
// kind than before (placed: before is empty; another item, type or
// requester: a request placed anew, whose rules a change must not skip).
func judgeRequest(ctx context.Context, tx pgx.Tx, t storage.Tenant, id string, doc json.RawMessage, before kind) error {
	if !storage.RequestRulesFrom(ctx) {
		return nil
	}
	d, err := decodeRequest(doc)
	if err != nil || !d.place.open {
		return err
	}
	now := kind{item: d.place.item, requestType: record.FieldValue(doc, "requestType"),
		requester: strings.ToLower(record.FieldValue(doc, "requesterId"))}
	if now == before {
		return nil
	}
	return judge(ctx, tx, t, id, now.requester, d.place.item)
}

// pagedItemSQL is the item of request $2 of tenant $1 while the request is
// an open page and its item Paged.
var pagedItemSQL = postgres.WithTables(`SELECT i.id::text FROM %[1]s r JOIN %[2]s i ON i.tenant_id = r.tenant_id AND i.id = r.item_id
 WHERE r.tenant_id = $1 AND r.id = $2::uuid AND `+Open("r.status")+` AND r.jsonb ->> 'requestType' = '`+schemas.RequestTypePage+`'
   AND i.status_name = '`+schemas.ItemPaged+`'`, postgres.TableRequest, postgres.TableItem)

// pagedItem is the Paged item request id is an open page of ("" when it
// is not one).
func pagedItem(ctx context.Context, tx pgx.Tx, t storage.Tenant, id string) (string, error) {
	var item string
	err := tx.QueryRow(ctx, pagedItemSQL, string(t), id).Scan(&item)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", nil
	}
	return item, postgres.Interpret(err, t)
}

// leftPage puts the Paged item before back on the shelf (unpage) when
// request id, an open page of it, is one no more.
func leftPage(ctx context.Context, tx pgx.Tx, t storage.Tenant, id, before string) error {
	if before == "" {
		return nil
	}
	if still, err := pagedItem(ctx, tx, t, id); err != nil || still == before {
		return err
	}
	return unpage(ctx, tx, t, before)
}

// QueueHeadSQL is the first request of an item's queue: the open request
// ("Open - …") with the lowest position, the earliest when positions are
// missing. It answers id, requester_id, position and the request, or no
// row. request is the table; item and tenant SQL expressions.
func QueueHeadSQL(request, item, tenant string) string {
	return `SELECT r.id, r.requester_id, r.position, r.jsonb FROM ` + request + ` r
     WHERE r.item_id = ` + item + ` AND r.tenant_id = ` + tenant + ` AND ` + Open("r.status") + `
     ORDER BY r.position NULLS LAST, r.jsonb ->> 'requestDate', r.id LIMIT 1`
}
