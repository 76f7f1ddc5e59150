package requests

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/checkoutlock/circulation-storage/internal/dbtest"
	"github.com/checkoutlock/circulation-storage/internal/pgtest"
	"github.com/checkoutlock/circulation-storage/internal/postgres"
	"github.com/checkoutlock/circulation-storage/internal/sample"
	"github.com/checkoutlock/schemas"
)

// TestHoldShelfExpiryLeavesARequestMovedMeanwhile: a request past its
// hold shelf date, found by the expiry, is moved to another item while the
// expiry waits for the queue of the item it was found on. Having the
// queue, the expiry finds the request no longer that item's: it closes
// nothing and hands that item to no one; the request stays open on the
// other item.
func TestHoldShelfExpiryLeavesARequestMovedMeanwhile(t *testing.T) {
	t.Parallel()
	f := dbtest.SetupLibrary(t, sample.LoadData)
	ctx := context.Background()
	first, other := sample.ID("book-041"), sample.ID("book-042")
	f.Exec(t, "UPDATE "+dbtest.View(f.Tenant, postgres.TableItem)+` SET jsonb = jsonb_set(jsonb, '{status,name}', '"Awaiting pickup"') WHERE id = $1`, first)
	id := uuid.NewString()
	doc, _ := json.Marshal(map[string]any{"requestType": "Hold", "requestLevel": "Item", "requestDate": "2026-01-01T10:00:00.000Z",
		"requesterId": sample.ID("1002"), "itemId": first, "status": schemas.RequestAwaitingPickup, "position": 1,
		"fulfillmentPreference": "Hold Shelf", "pickupServicePointId": sample.ServicePointDesk1,
		"holdShelfExpirationDate": schemas.FormatTime(time.Now().Add(-time.Hour))})
	if _, err := New(f.DB).Create(ctx, f.Tenant, id, doc); err != nil {
		t.Fatal(err)
	}
	// The first item's queue held: the expiry finds the request, then
	// waits for it; meanwhile the request moves to the other item.
	queue := dbtest.Hold(t, f, postgres.TableItem, first)
	done := make(chan error, 1)
	go func() {
		_, err := expireOnShelf(ctx, f.DB, f.Tenant, id)
		done <- err
	}()
	dbtest.Eventually(t, "the expiry waiting for the item's queue", func() bool { return queue.Blocked(t, f) != 0 })
	if _, err := queue.Tx.Exec(ctx, "UPDATE "+dbtest.View(f.Tenant, postgres.TableRequest)+
		` SET jsonb = jsonb_set(jsonb, '{itemId}', to_jsonb($2::text)) WHERE id = $1`, id, other); err != nil {
		t.Fatal(err)
	}
	if err := queue.Tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("the expiry: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the expiry never ended")
	}
	if n := f.Count(t, postgres.TableRequest, "id = $1 AND item_id = $2 AND status = $3", id, other, schemas.RequestAwaitingPickup); n != 1 {
		t.Error("the request moved to the other item was closed")
	}
	if n := f.Count(t, postgres.TableItem, "id = $1 AND status_name = $2 AND version = 1", first, schemas.ItemAwaitingPickup); n != 1 {
		t.Error("the item the request left was handed on")
	}
}

// TestAHoldShelfDateIsReadAsTheTimeItNames: a hold shelf date written
// with an offset expires when the time it names has passed, whatever its
// text: one written five hours ahead of UTC, its text three hours from
// now and its time two hours ago, is closed "Closed - Pickup expired" at
// once; one written five hours behind, its text an hour ago and its time
// four hours to come, is left on the shelf.
func TestAHoldShelfDateIsReadAsTheTimeItNames(t *testing.T) {
	t.Parallel()
	// A database of its own: the expiry closes the requests of every
	// tenant in it.
	db := dbtest.OpenDB(t, pgtest.Fresh(t))
	f := dbtest.LibraryIn(t, db, sample.LoadData)
	ctx := context.Background()
	w := New(db)
	onShelf := func(item, requester, until string) string {
		t.Helper()
		f.Exec(t, "UPDATE "+dbtest.View(f.Tenant, postgres.TableItem)+` SET jsonb = jsonb_set(jsonb, '{status,name}', '"Awaiting pickup"') WHERE id = $1`, item)
		id := uuid.NewString()
		doc, _ := json.Marshal(map[string]any{"requestType": "Hold", "requestLevel": "Item", "requestDate": "2026-01-01T10:00:00.000Z",
			"requesterId": requester, "itemId": item, "status": schemas.RequestAwaitingPickup, "position": 1,
			"fulfillmentPreference": "Hold Shelf", "pickupServicePointId": sample.ServicePointDesk1, "holdShelfExpirationDate": until})
		if _, err := w.Create(ctx, f.Tenant, id, doc); err != nil {
			t.Fatal(err)
		}
		return id
	}
	ahead := time.Now().Add(-2 * time.Hour).In(time.FixedZone("", 5*3600)).Format("2006-01-02T15:04:05.000-07:00")
	behind := time.Now().Add(4 * time.Hour).In(time.FixedZone("", -5*3600)).Format("2006-01-02T15:04:05.000-07:00")
	passed := onShelf(sample.ID("book-041"), sample.ID("1002"), ahead)
	toCome := onShelf(sample.ID("book-042"), sample.ID("1004"), behind)
	found, closed, failed, err := ExpireHoldShelves(ctx, db, 10, nil)
	if err != nil || found != 1 || closed != 1 || len(failed) != 0 {
		t.Fatalf("the hold shelf expiry: found %d, closed %d, failed %v, %v; want the one past its time", found, closed, failed, err)
	}
	for id, want := range map[string]string{passed: schemas.RequestPickupExpired, toCome: schemas.RequestAwaitingPickup} {
		if n := f.Count(t, postgres.TableRequest, "id = $1 AND status = $2", id, want); n != 1 {
			t.Errorf("request %s is not %s", id, want)
		}
	}
}

// TestADeletedRequestPutOnTheShelfMeanwhileHandsItsItemOn: a hold waiting
// in its item's queue is deleted while a check-in holds the queue; the
// check-in puts it on the hold shelf (the request Awaiting pickup, the
// item too) and commits. Having the queue, the delete finds it on the
// shelf: it deletes it and hands the item on (Available, no one else
// waiting), never leaving it Awaiting pickup for a request that is gone.
func TestADeletedRequestPutOnTheShelfMeanwhileHandsItsItemOn(t *testing.T) {
	t.Parallel()
	f := dbtest.SetupLibrary(t, sample.LoadData)
	ctx := context.Background()
	item := sample.ID("book-043")
	id := uuid.NewString()
	doc, _ := json.Marshal(map[string]any{"requestType": "Hold", "requestLevel": "Item", "requestDate": "2026-01-01T10:00:00.000Z",
		"requesterId": sample.ID("1002"), "itemId": item, "status": schemas.RequestNotYetFilled, "position": 1,
		"fulfillmentPreference": "Hold Shelf", "pickupServicePointId": sample.ServicePointDesk1})
	if _, err := New(f.DB).Create(ctx, f.Tenant, id, doc); err != nil {
		t.Fatal(err)
	}
	checkIn := dbtest.Hold(t, f, postgres.TableItem, item)
	deleted := checkIn.Behind(t, f, "the delete", func() error {
		return f.DB.InTx(ctx, f.Tenant, func(tx pgx.Tx) error {
			return Delete(ctx, tx, f.Tenant, id, func() (bool, error) {
				tag, err := tx.Exec(ctx, "DELETE FROM "+dbtest.View(f.Tenant, postgres.TableRequest)+" WHERE id = $1", id)
				return tag.RowsAffected() == 1, err
			})
		})
	})
	if _, err := checkIn.Tx.Exec(ctx, "UPDATE "+dbtest.View(f.Tenant, postgres.TableRequest)+
		` SET jsonb = jsonb_set(jsonb, '{status}', to_jsonb($2::text)) WHERE id = $1`, id, schemas.RequestAwaitingPickup); err != nil {
		t.Fatal(err)
	}
	if _, err := checkIn.Tx.Exec(ctx, "UPDATE "+dbtest.View(f.Tenant, postgres.TableItem)+
		` SET jsonb = jsonb_set(jsonb, '{status,name}', to_jsonb($2::text)) WHERE id = $1`, item, schemas.ItemAwaitingPickup); err != nil {
		t.Fatal(err)
	}
	if err := checkIn.Tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-deleted:
		if err != nil {
			t.Fatalf("the delete: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the delete never ended")
	}
	if n := f.Count(t, postgres.TableRequest, "id = $1", id); n != 0 {
		t.Error("the request was not deleted")
	}
	if n := f.Count(t, postgres.TableItem, "id = $1 AND status_name = $2", item, schemas.ItemAvailable); n != 1 {
		var status string
		_ = f.DB.Pool.QueryRow(ctx, "SELECT status_name FROM "+dbtest.View(f.Tenant, postgres.TableItem)+" WHERE id = $1", item).Scan(&status)
		t.Errorf("the item the deleted request was on the shelf for is %q, want %q", status, schemas.ItemAvailable)
	}
}
