package requests

import (
	"context"
	"encoding/json"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/checkoutlock/circulation-storage/internal/postgres"
	"github.com/checkoutlock/circulation-storage/internal/record"

	storage "github.com/checkoutlock/circulation-storage"
	"github.com/checkoutlock/schemas"
	"github.com/checkoutlock/schemas/errs"
)

// queued is an open request as a reorder of its queue judges it.
type queued struct {
	id, status, requestType string
	position                int
}

var (
	// queueSQL reads the open requests of item $2 of tenant $1.
	queueSQL = postgres.WithTables(`SELECT id::text, status, coalesce(jsonb ->> 'requestType', ''), position FROM %s
 WHERE item_id = $2 AND tenant_id = $1 AND `+Open("status")+` ORDER BY position`, postgres.TableRequest)
	// reorderSQL gives each open request of @item (of @tenant) @ids[i]
	// the position @positions[i], where it has another, its metadata
	// naming @metadata_user. The position key is checked at the
	// statement's end, the queue whole.
	reorderSQL = postgres.WithTables(`UPDATE %s r SET jsonb = `+record.WithMetadata(`jsonb_set(r.jsonb, '{position}', to_jsonb(n.position))`,
		"@metadata_user", true)+`
  FROM unnest(@ids::uuid[], @positions::integer[]) AS n(id, position)
 WHERE r.tenant_id = @tenant AND r.item_id = @item AND r.id = n.id AND `+Open("r.status")+`
   AND r.position IS DISTINCT FROM n.position`, postgres.TableRequest)
)

// ReorderQueue implements storage.QueueReorderer, in its turn among the
// writes of requests, with the call's write id: a reorder sent again
// after it landed writes nothing.
func (w *Writer) ReorderQueue(ctx context.Context, t storage.Tenant, item string, order []storage.QueuePlace) error {
	release, err := w.Turn(ctx, t)
	if err != nil {
		return err
	}
	defer release()
	_, err = w.db.InTxOnce(ctx, t, schemas.WriteQueueReorder, func(tx pgx.Tx) (json.RawMessage, error) {
		if err := lockQueues(ctx, tx, t, item); err != nil {
			return nil, err
		}
		rows, err := tx.Query(ctx, queueSQL, string(t), item)
		if err != nil {
			return nil, postgres.Interpret(err, t)
		}
		queue, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (queued, error) {
			var q queued
			err := row.Scan(&q.id, &q.status, &q.requestType, &q.position)
			return q, err
		})
		if err != nil {
			return nil, postgres.Interpret(err, t)
		}
		if err := reorderRefused(item, queue, order); err != nil {
			return nil, err
		}
		ids, positions := make([]string, len(order)), make([]int, len(order))
		for i, p := range order {
			ids[i], positions[i] = strings.ToLower(p.ID), p.NewPosition
		}
		_, err = tx.Exec(ctx, reorderSQL, pgx.StrictNamedArgs{"tenant": string(t), "item": item, "ids": ids, "positions": positions,
			"metadata_user": record.MetadataUser(ctx)})
		return nil, postgres.Interpret(err, t)
	})
	return err
}

// reorderRefused is why order may not be item's queue (the queue's open
// requests as stored, under its lock), in FOLIO's words and order
// (RequestQueueValidation): a queue with no open request is not found;
// the positions must be 1 to n, each once; the requests exactly the
// queue's; a page, and a request whose fulfilment has begun (any open
// status but Not yet filled), must stay first. nil when it may.
func reorderRefused(item string, queue []queued, order []storage.QueuePlace) error {
	if len(queue) == 0 {
		return errs.Errorf(errs.KindNotFound, schemas.CodeNotFound, "Item record with ID %s cannot be found", item).With("itemId", item)
	}
	refused := func(message string) error {
		return &errs.Refusal{Errors: []*errs.Error{errs.Errorf(errs.KindInvalid, schemas.CodeValidation, "%s", message).With("newPosition", "")}}
	}
	positions := make([]int, len(order))
	for i, p := range order {
		positions[i] = p.NewPosition
	}
	slices.Sort(positions)
	for i, p := range positions {
		if p != i+1 {
			return refused("Positions must have sequential order.")
		}
	}
	byID := make(map[string]queued, len(queue))
	for _, q := range queue {
		byID[q.id] = q
	}
	// Exactly the queue's requests, each once.
	named := make(map[string]bool, len(order))
	for _, p := range order {
		id := strings.ToLower(p.ID)
		if _, ok := byID[id]; !ok || named[id] {
			return refused("There is inconsistency between provided reordered queue and existing queue.")
		}
		named[id] = true
	}
	if len(named) != len(queue) {
		return refused("There is inconsistency between provided reordered queue and existing queue.")
	}
	for _, rule := range []struct {
		first   func(queued) bool
		message string
	}{
		{func(q queued) bool { return q.requestType == schemas.RequestTypePage }, "Page requests can not be displaced from position 1."},
		{func(q queued) bool { return q.status != schemas.RequestNotYetFilled },
			"Requests can not be displaced from position 1 when fulfillment begun."},
	} {
		for _, p := range order {
			if rule.first(byID[strings.ToLower(p.ID)]) && p.NewPosition != 1 {
				return refused(rule.message)
			}
		}
	}
	return nil
}
