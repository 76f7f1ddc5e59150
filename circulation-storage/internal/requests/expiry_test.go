package requests

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/checkoutlock/circulation-storage/internal/dbtest"
	"github.com/checkoutlock/circulation-storage/internal/pgtest"
	"github.com/checkoutlock/circulation-storage/internal/postgres"
	"github.com/checkoutlock/circulation-storage/internal/sample"
	"github.com/google/uuid"

	"github.com/checkoutlock/schemas"
)

// storedRequest is request id of f's tenant as stored; its metadata's
// updatedDate apart.
func storedRequest(t *testing.T, f dbtest.Fixture, id string) (doc map[string]any, updated string) {
	t.Helper()
	var raw []byte
	if err := f.DB.Pool.QueryRow(context.Background(), `SELECT jsonb FROM `+dbtest.View(f.Tenant, postgres.TableRequest)+` WHERE id = $1`, id).Scan(&raw); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	meta, _ := doc["metadata"].(map[string]any)
	updated, _ = meta["updatedDate"].(string)
	delete(doc, "metadata")
	return doc, updated
}

// stamp is now and d, as FOLIO writes a time.
func stamp(d time.Duration) string { return schemas.FormatTime(time.Now().Add(d)) }

// TestRequestsPastTheirExpirationDateAreClosed: FOLIO's scheduled request
// expiration (mod-circulation-storage's RequestExpirationApiTest:
// canExpireASingleOpenUnfilledRequest, canExpireAnFirstOpenUnfilledRequest,
// canExpireSingleOpenAwaitingDeliveryRequest,
// canExpireOpenUnfilledWithNoExpirationDate,
// canExpireOpenAwaitingWithNoHoldShelfExpirationDate,
// updatedDateIsUpdatedOnRequestExpiration). An open request past its
// requestExpirationDate, not yet filled, in transit or awaiting delivery,
// is closed "Closed - Unfilled": stored as it was but for its status, its
// position gone, one version on and its metadata's updatedDate moved; the
// requests after it in its queue move up one (one moved up before it is
// closed itself is two versions on). A date written with an
// offset is read as the time it names, whatever its text: one whose
// text is later than now's but whose time has passed is closed, one whose
// text is earlier but whose time is to come is not. A request without a
// date, with one to come or one that cannot be read is left; so is one
// on the hold shelf, whose hold shelf date has not passed. An expired
// page's Paged book goes back on the shelf; an item in transit or
// awaiting delivery for an expired request goes on as it is. Each change
// is announced, and a second run finds nothing.
func TestRequestsPastTheirExpirationDateAreClosed(t *testing.T) {
	t.Parallel()
	// A database of its own: the expiry closes the requests of every
	// tenant in it.
	db := dbtest.OpenDB(t, pgtest.Fresh(t))
	f := dbtest.LibraryIn(t, db, sample.LoadData)
	ctx := context.Background()
	w := New(db)
	bob, dave, erin, frank := sample.ID("1002"), sample.ID("1004"), sample.ID("1005"), sample.ID("1006")
	queue, transit, delivery, shelf, paged := sample.ID("book-121"), sample.ID("book-122"), sample.ID("book-123"),
		sample.ID("book-124"), sample.ID("book-125")
	for item, status := range map[string]string{queue: schemas.ItemCheckedOut, transit: schemas.ItemInTransit, delivery: schemas.ItemAwaitingDelivery,
		shelf: schemas.ItemAwaitingPickup, paged: schemas.ItemPaged} {
		f.Exec(t, "UPDATE "+dbtest.View(f.Tenant, postgres.TableItem)+` SET jsonb = jsonb_set(jsonb, '{status,name}', to_jsonb($2::text)) WHERE id = $1`, item, status)
	}
	request := func(kind, requester, item, status string, position int, dates map[string]string) string {
		t.Helper()
		d := map[string]any{"requestType": kind, "requestLevel": "Item", "requestDate": "2026-01-01T10:00:00.000Z",
			"requesterId": requester, "itemId": item, "status": status, "position": position,
			"fulfillmentPreference": "Hold Shelf", "pickupServicePointId": sample.ServicePointDesk1}
		for k, v := range dates {
			d[k] = v
		}
		doc, _ := json.Marshal(d)
		id := uuid.NewString()
		if _, err := w.Create(ctx, f.Tenant, id, doc); err != nil {
			t.Fatal(err)
		}
		return id
	}
	expires := func(at string) map[string]string { return map[string]string{"requestExpirationDate": at} }
	// Written as a clock five hours ahead of UTC shows it: three hours
	// from now by its text, two hours ago by its time; and five hours
	// behind: an hour ago by its text, four hours to come by its time.
	ahead := time.Now().Add(-2 * time.Hour).In(time.FixedZone("", 5*3600)).Format("2006-01-02T15:04:05.000-07:00")
	behind := time.Now().Add(4 * time.Hour).In(time.FixedZone("", -5*3600)).Format("2006-01-02T15:04:05.000-07:00")

	first := request("Hold", bob, queue, schemas.RequestNotYetFilled, 1, expires(stamp(-time.Hour)))
	toCome := request("Hold", dave, queue, schemas.RequestNotYetFilled, 2, expires(stamp(time.Hour)))
	aheadOfUTC := request("Hold", erin, queue, schemas.RequestNotYetFilled, 3, expires(ahead))
	behindUTC := request("Hold", frank, queue, schemas.RequestNotYetFilled, 4, expires(behind))
	none := request("Recall", sample.ID("1001"), queue, schemas.RequestNotYetFilled, 5, nil)
	inTransit := request("Hold", bob, transit, schemas.RequestInTransit, 1, expires(stamp(-time.Minute)))
	awaitingDelivery := request("Hold", bob, delivery, schemas.RequestAwaitingDelivery, 1, expires(stamp(-time.Minute)))
	onShelf := request("Hold", bob, shelf, schemas.RequestAwaitingPickup, 1,
		map[string]string{"requestExpirationDate": stamp(-time.Minute), "holdShelfExpirationDate": stamp(time.Hour)})
	page := request("Page", bob, paged, schemas.RequestNotYetFilled, 1, expires(stamp(-time.Minute)))
	behindPage := request("Hold", dave, paged, schemas.RequestNotYetFilled, 2, nil)
	// A date stored before the rule that cannot be read as one.
	unread := request("Hold", erin, transit, schemas.RequestNotYetFilled, 2, nil)
	f.Exec(t, "UPDATE "+dbtest.View(f.Tenant, postgres.TableRequest)+` SET jsonb = jsonb_set(jsonb, '{requestExpirationDate}', '"2020-01-01"') WHERE id = $1`, unread)

	expired := []string{first, aheadOfUTC, inTransit, awaitingDelivery, page}
	type before struct {
		doc     map[string]any
		updated string
	}
	was := map[string]before{}
	for _, id := range expired {
		doc, updated := storedRequest(t, f, id)
		was[id] = before{doc, updated}
	}
	items := func() string {
		t.Helper()
		var out string
		if err := db.Pool.QueryRow(ctx, `SELECT string_agg(status_name || ' ' || version, ', ' ORDER BY array_position($1::uuid[], id))
			FROM `+dbtest.View(f.Tenant, postgres.TableItem)+` WHERE id = ANY($1::uuid[])`, []string{transit, delivery, shelf, paged}).Scan(&out); err != nil {
			t.Fatal(err)
		}
		return out
	}
	itemsBefore := items()
	events := f.Count(t, postgres.TableOutbox, "")

	found, closed, failed, err := Expire(ctx, db, 10, nil)
	if err != nil || found != len(expired) || closed != len(expired) || len(failed) != 0 {
		t.Fatalf("the expiry: found %d, closed %d, failed %v, %v; want %d found and closed", found, closed, failed, err, len(expired))
	}
	for _, id := range expired {
		want := was[id].doc
		want["status"] = schemas.RequestUnfilled
		delete(want, "position")
		want["_version"] = want["_version"].(float64) + 1
		if id == aheadOfUTC {
			// Moved up when the first request of its queue was closed.
			want["_version"] = want["_version"].(float64) + 1
		}
		got, updated := storedRequest(t, f, id)
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("request %s after the expiry:\n%v\nwant\n%v", id, got, want)
		}
		if updated <= was[id].updated {
			t.Errorf("request %s: updatedDate %q, was %q; want it moved", id, updated, was[id].updated)
		}
	}
	for id, want := range map[string]string{toCome: "Open - Not yet filled 1", behindUTC: "Open - Not yet filled 2", none: "Open - Not yet filled 3",
		onShelf: "Open - Awaiting pickup 1", behindPage: "Open - Not yet filled 1", unread: "Open - Not yet filled 1"} {
		var got string
		if err := db.Pool.QueryRow(ctx, `SELECT status || ' ' || coalesce(jsonb ->> 'position', '-') FROM `+
			dbtest.View(f.Tenant, postgres.TableRequest)+` WHERE id = $1`, id).Scan(&got); err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Errorf("request %s after the expiry: %q, want %q", id, got, want)
		}
	}
	// The paged book back on the shelf, one version on; the others as
	// they were.
	if got, want := items(), "In transit 1, Awaiting delivery 1, Awaiting pickup 1, Available 2"; got != want {
		t.Errorf("the items after the expiry: %s, want %s (before: %s)", got, want, itemsBefore)
	}
	// Each closed request, each request moved up and the paged book.
	if n := f.Count(t, postgres.TableOutbox, "") - events; n < len(expired)+5 {
		t.Errorf("%d events announced, want the closed requests', the moved ones' and the book's", n)
	}
	if found, closed, failed, err := Expire(ctx, db, 10, nil); found != 0 || closed != 0 || failed != nil || err != nil {
		t.Errorf("a second expiry: found %d, closed %d, failed %v, %v; want nothing", found, closed, failed, err)
	}
}

// TestRequestExpiryWritesAtTheVersionRead: a request past its expiration
// date, read by the expiry, is given a later date while the expiry's
// write waits for its queue. Having the queue, the write at the version
// read is refused; read again, the request is no longer past its date:
// nothing is closed.
func TestRequestExpiryWritesAtTheVersionRead(t *testing.T) {
	t.Parallel()
	f := dbtest.SetupLibrary(t, sample.LoadData)
	ctx := context.Background()
	item := sample.ID("book-126")
	f.Exec(t, "UPDATE "+dbtest.View(f.Tenant, postgres.TableItem)+` SET jsonb = jsonb_set(jsonb, '{status,name}', '"Checked out"') WHERE id = $1`, item)
	id := uuid.NewString()
	doc, _ := json.Marshal(map[string]any{"requestType": "Hold", "requestLevel": "Item", "requestDate": "2026-01-01T10:00:00.000Z",
		"requesterId": sample.ID("1002"), "itemId": item, "status": schemas.RequestNotYetFilled, "position": 1,
		"fulfillmentPreference": "Hold Shelf", "pickupServicePointId": sample.ServicePointDesk1, "requestExpirationDate": stamp(-time.Hour)})
	if _, err := New(f.DB).Create(ctx, f.Tenant, id, doc); err != nil {
		t.Fatal(err)
	}
	queue := dbtest.Hold(t, f, postgres.TableItem, item)
	type result struct {
		done bool
		err  error
	}
	done := make(chan result, 1)
	go func() {
		closed, err := expireRequest(ctx, f.DB, New(f.DB), f.Tenant, id)
		done <- result{closed, err}
	}()
	dbtest.Eventually(t, "the expiry's write waiting for the item's queue", func() bool { return queue.Blocked(t, f) != 0 })
	later := stamp(24 * time.Hour)
	if _, err := queue.Tx.Exec(ctx, "UPDATE "+dbtest.View(f.Tenant, postgres.TableRequest)+
		` SET jsonb = jsonb_set(jsonb, '{requestExpirationDate}', to_jsonb($2::text)) WHERE id = $1`, id, later); err != nil {
		t.Fatal(err)
	}
	if err := queue.Tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-done:
		if r.done || r.err != nil {
			t.Fatalf("the expiry: closed %v, %v; want nothing closed", r.done, r.err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the expiry never ended")
	}
	if n := f.Count(t, postgres.TableRequest, "id = $1 AND status = $2 AND position = 1 AND jsonb ->> 'requestExpirationDate' = $3",
		id, schemas.RequestNotYetFilled, later); n != 1 {
		t.Error("the request given a later date was closed")
	}
}
