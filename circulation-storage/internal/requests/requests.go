// Package requests writes circulation's requests on PostgreSQL, each in
// one transaction that keeps its item's queue whole and FOLIO's rules
// whoever calls: a request's place in its item's queue (queue.go), its
// judging by FOLIO's request rules and the writes its type calls for
// (judge.go), where it may be picked up (pickup.go), the return loop that
// hands a returned item to its queue's next request (return.go), the hold
// shelf and its expiry (holdshelf.go), and the expiry of requests past
// their date (expiry.go). Package recordstore serves the requests through its
// Writer, package lending's check-in returns items through ReturnItem, and
// the sweeper closes the expired requests with it.
package requests

import (
	"context"
	"encoding/json"

	"github.com/checkoutlock/circulation-storage/internal/postgres"
	"github.com/jackc/pgx/v5"

	storage "github.com/checkoutlock/circulation-storage"
	"github.com/checkoutlock/schemas"
)

// Writer writes requests, each in a transaction of its own that keeps
// the return loop and FOLIO's request rules: a request leaving the hold
// shelf hands its item on (handOn), an open page leaving its Paged item
// puts it back on the shelf (unpage), and one written through
// circulation is judged (judgeRequest).
type Writer struct {
	db *postgres.DB
	// queueWrites holds a place for each write of a request running on
	// this instance: a quarter of the pool's connections. Writes of one
	// item's queue take their turns on the item's row (queue.go),
	// each holding a connection while it waits; twenty of them for one
	// item must not hold every connection that reads of other records
	// need. The others wait for a place here, holding none.
	queueWrites chan struct{}
}

// New returns the writer of requests on db.
func New(db *postgres.DB) *Writer {
	return &Writer{db: db,
		queueWrites: make(chan struct{}, max(1, int(db.Pool.Config().MaxConns)/4))}
}

// Turn waits for a place among the writes of requests (queueWrites),
// for as long as ctx allows; release gives it back.
func (w *Writer) Turn(ctx context.Context, t storage.Tenant) (release func(), err error) {
	select {
	case w.queueWrites <- struct{}{}:
		return func() { <-w.queueWrites }, nil
	case <-ctx.Done():
		return nil, postgres.Interpret(ctx.Err(), t)
	}
}

// Create is storage.RecordService's Create of request id (doc), in its
// turn: placed in its queue and judged, in one transaction.
func (w *Writer) Create(ctx context.Context, t storage.Tenant, id string, doc json.RawMessage) (json.RawMessage, error) {
	release, err := w.Turn(ctx, t)
	if err != nil {
		return nil, err
	}
	defer release()
	return w.db.InTxOnce(ctx, t, schemas.WriteRequestCreate, func(tx pgx.Tx) (json.RawMessage, error) {
		if err := lockRequester(ctx, tx, t, doc); err != nil {
			return nil, err
		}
		stored, err := createRequest(ctx, tx, t, id, doc)
		if err != nil {
			return nil, err
		}
		return stored, judgeRequest(ctx, tx, t, id, stored, kind{})
	})
}

// Update is storage.RecordService's Update of request id, written at
// version as doc, in its turn: moved in its queue (or both queues), its
// item handed on when it left the hold shelf or an open page, and judged,
// in one transaction.
func (w *Writer) Update(ctx context.Context, t storage.Tenant, id string, version int, doc json.RawMessage) error {
	release, err := w.Turn(ctx, t)
	if err != nil {
		return err
	}
	defer release()
	_, err = w.db.InTxOnce(ctx, t, schemas.WriteRequestUpdate, func(tx pgx.Tx) (json.RawMessage, error) {
		if err := lockRequester(ctx, tx, t, doc); err != nil {
			return nil, err
		}
		shelf, err := onShelf(ctx, tx, t, id)
		if err != nil {
			return nil, err
		}
		before, err := requestKind(ctx, tx, t, id)
		if err != nil {
			return nil, err
		}
		paged, err := pagedItem(ctx, tx, t, id)
		if err != nil {
			return nil, err
		}
		if err := updateRequest(ctx, tx, t, id, version, doc); err != nil {
			return nil, err
		}
		if err := leftShelf(ctx, tx, t, id, shelf); err != nil {
			return nil, err
		}
		if err := leftPage(ctx, tx, t, id, paged); err != nil {
			return nil, err
		}
		return nil, judgeRequest(ctx, tx, t, id, doc, before)
	})
	return err
}

// Delete is storage.RecordService's Delete of request id, in the
// transaction tx of a write that has taken its Turn: deleteFn deletes
// it once its queue is locked, its position is given up, and its item is
// handed on when it left the hold shelf or an open page. Whether it was
// on the shelf or an open page is read under the queue's lock: a
// check-in that put it on the shelf while the delete waited for the
// queue has committed, and the item it left Awaiting pickup is handed on.
func Delete(ctx context.Context, tx pgx.Tx, t storage.Tenant, id string, deleteFn func() (bool, error)) error {
	var shelf *shelfPlace
	var paged string
	err := deleteRequest(ctx, tx, t, id, func() (bool, error) {
		var err error
		if shelf, err = onShelf(ctx, tx, t, id); err != nil {
			return false, err
		}
		if paged, err = pagedItem(ctx, tx, t, id); err != nil {
			return false, err
		}
		return deleteFn()
	})
	if err != nil {
		return err
	}
	if err := leftShelf(ctx, tx, t, id, shelf); err != nil {
		return err
	}
	return leftPage(ctx, tx, t, id, paged)
}
