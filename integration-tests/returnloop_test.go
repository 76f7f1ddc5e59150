package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/checkoutlock/integration-tests/harness"
	"github.com/checkoutlock/schemas"
)

// requestState is a request as stored: its status, position and hold
// shelf expiration date ("" for none).
type requestState struct {
	Status, Position, HoldShelfExpiration string
}

func readRequest(t *testing.T, c *harness.Cluster, id string) requestState {
	t.Helper()
	var r requestState
	err := c.DB.QueryRow(context.Background(), fmt.Sprintf(`SELECT jsonb ->> 'status', coalesce(jsonb ->> 'position', ''),
		coalesce(jsonb ->> 'holdShelfExpirationDate', '') FROM %s.request WHERE id = $1::uuid`, c.Schema), id).
		Scan(&r.Status, &r.Position, &r.HoldShelfExpiration)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// itemState is an item's status and in-transit destination as stored.
func itemState(t *testing.T, c *harness.Cluster, barcode string) (status, destination string) {
	t.Helper()
	err := c.DB.QueryRow(context.Background(), fmt.Sprintf(`SELECT status_name, coalesce(jsonb ->> 'inTransitDestinationServicePointId', '')
		FROM %s.item WHERE barcode = $1`, c.Schema), barcode).Scan(&status, &destination)
	if err != nil {
		t.Fatal(err)
	}
	return status, destination
}

// keepHolds gives the service point sp a hold shelf that keeps a request
// duration intervals (FOLIO's holdShelfExpiryPeriod), through storage.
func keepHolds(t *testing.T, c *harness.Cluster, sp string, duration int, interval string) {
	t.Helper()
	var doc map[string]any
	c.Do(c.Storage, "GET", "/service-points/"+sp, nil).Want(t, http.StatusOK).Decode(t, &doc)
	delete(doc, "metadata")
	doc["pickupLocation"] = true
	doc["holdShelfExpiryPeriod"] = map[string]any{"duration": duration, "intervalId": interval}
	c.Do(c.Storage, "PUT", "/service-points/"+sp, doc).Want(t, http.StatusNoContent)
}

// TestAReturnedBookFindsItsNextReader: FOLIO's return loop across the
// real binaries, as mod-circulation's own tests expect it
// (CheckInByBarcodeTests, ServicePointCheckInTests,
// SingleOpenHoldShelfRequestTests, HoldShelfFulfillmentTests). A book on
// loan with a hold waiting at the desk where it is checked in goes on the
// hold shelf: the item Awaiting pickup, the request Open - Awaiting pickup
// with its hold shelf expiration date (the desk's holdShelfExpiryPeriod),
// the loan closed; another patron is refused it, the requester borrows it
// and fills the request. Checked in at another desk, it goes In transit to
// the request's pickup point (the request Open - In transit) and, checked
// in there, onto the hold shelf. A kiosk or sorter checking a book in
// (09) hears alert Y with CV01 for a hold here, CV02 and the destination
// (CT) for a hold elsewhere, and alert N with no CV for a book with no
// queue.
func TestAReturnedBookFindsItsNextReader(t *testing.T) {
	t.Parallel()
	c, lib, door := sip2Cluster(t, 1, 3, 4, 0, nil)
	owner, requester, other := lib.Patrons[0], lib.Patrons[1], lib.Patrons[2]
	here := harness.ServicePoint
	// The desk here keeps holds three days; another desk.
	keepHolds(t, c, here, 3, "Days")
	var elsewhere struct{ ID string }
	c.Do(c.Storage, "POST", "/service-points", map[string]any{"name": "Branch desk", "code": "branch", "discoveryDisplayName": "Branch",
		"pickupLocation": true, "holdShelfExpiryPeriod": map[string]any{"duration": 2, "intervalId": "Hours"}}).
		Want(t, http.StatusCreated).Decode(t, &elsewhere)
	hold := func(item, pickup string) string {
		t.Helper()
		var out struct{ ID string }
		c.Do(c.Storage, "POST", "/request-storage/requests", map[string]any{"requestType": "Hold", "requestLevel": "Item",
			"requestDate": "2026-01-01T10:00:00.000Z", "requesterId": c.IDOf(t, "/users", "users", requester),
			"itemId": c.IDOf(t, "/item-storage/items", "items", item), "status": "Open - Not yet filled", "position": 1,
			"fulfillmentPreference": "Hold Shelf", "pickupServicePointId": pickup}).Want(t, http.StatusCreated).Decode(t, &out)
		return out.ID
	}
	var slip struct {
		Item struct {
			Title, Barcode, Status, FromServicePoint, ToServicePoint string
		}
		Request *struct {
			RequestID, ServicePointPickup, HoldShelfExpirationDate string
		}
		Requester *struct {
			Barcode, FirstName, LastName, PatronGroup string
		}
	}
	checkIn := func(item, servicePoint string) map[string]any {
		t.Helper()
		var out struct {
			Item             map[string]any  `json:"item"`
			StaffSlipContext json.RawMessage `json:"staffSlipContext"`
		}
		c.Do(c.Circulations[0], "POST", "/circulation/check-in-by-barcode", map[string]string{"itemBarcode": item, "servicePointId": servicePoint}).
			Want(t, http.StatusOK).Decode(t, &out)
		slip.Request, slip.Requester = nil, nil
		if err := json.Unmarshal(out.StaffSlipContext, &slip); err != nil {
			t.Fatalf("staffSlipContext %s: %v", out.StaffSlipContext, err)
		}
		return out.Item
	}
	var hereName string
	c.DB.QueryRow(context.Background(), fmt.Sprintf(`SELECT name FROM %s.service_point WHERE id = $1::uuid`, c.Schema), here).Scan(&hereName)
	onShelfUntil := func(r requestState, period time.Duration) {
		t.Helper()
		at, err := schemas.ParseDateTime(r.HoldShelfExpiration)
		if err != nil || at.Before(time.Now().Add(period-time.Minute)) || at.After(time.Now().Add(period+time.Minute)) {
			t.Errorf("hold shelf expiration %q, want about %s from now", r.HoldShelfExpiration, period)
		}
	}
	for _, item := range lib.Items[0] {
		c.CheckOut(0, item, owner).Want(t, http.StatusCreated)
	}
	shelf, transit, kiosk, plain := lib.Items[0][0], lib.Items[0][1], lib.Items[0][2], lib.Items[0][3]

	// Checked in where its hold waits: onto the hold shelf.
	req := hold(shelf, here)
	answered := checkIn(shelf, here)
	if status := answered["status"].(map[string]any)["name"]; status != "Awaiting pickup" {
		t.Errorf("the check-in answered the item %v, want Awaiting pickup", answered)
	}
	if status, dest := itemState(t, c, shelf); status != "Awaiting pickup" || dest != "" {
		t.Errorf("item %q in transit to %q, want Awaiting pickup, going nowhere", status, dest)
	}
	r := readRequest(t, c, req)
	if r.Status != "Open - Awaiting pickup" || r.Position != "1" {
		t.Errorf("request %+v, want Open - Awaiting pickup at position 1", r)
	}
	onShelfUntil(r, 72*time.Hour)
	// The hold slip (FOLIO's staffSlipContext): the book, the request and
	// whom it waits for.
	if slip.Item.Barcode != shelf || slip.Item.Status != "Awaiting pickup" || slip.Item.FromServicePoint != hereName || slip.Item.ToServicePoint != "" ||
		slip.Request == nil || slip.Request.RequestID != req || slip.Request.ServicePointPickup != hereName ||
		slip.Request.HoldShelfExpirationDate != r.HoldShelfExpiration || slip.Requester == nil || slip.Requester.Barcode != requester {
		t.Errorf("the hold slip: %+v %+v %+v", slip.Item, slip.Request, slip.Requester)
	}
	if n := openLoans(t, c, owner); n != 3 {
		t.Errorf("the owner has %d loans open, want 3 (the one checked in closed)", n)
	}
	// Only the requester may take it from the shelf.
	if res := c.CheckOut(0, shelf, other); res.Status != http.StatusUnprocessableEntity {
		t.Errorf("another patron's check-out of a book on the hold shelf: %d %s, want 422", res.Status, res.Body)
	}
	c.CheckOut(0, shelf, requester).Want(t, http.StatusCreated)
	if r := readRequest(t, c, req); r.Status != "Closed - Filled" {
		t.Errorf("the request after its requester borrowed the book: %+v, want Closed - Filled", r)
	}

	// Checked in at another desk: in transit to the pickup point, then,
	// checked in there, onto its hold shelf.
	req = hold(transit, elsewhere.ID)
	answered = checkIn(transit, here)
	if answered["status"].(map[string]any)["name"] != "In transit" || answered["inTransitDestinationServicePointId"] != elsewhere.ID ||
		fmt.Sprint(answered["inTransitDestinationServicePoint"]) != fmt.Sprintf("map[code:branch id:%s name:Branch desk]", elsewhere.ID) {
		t.Errorf("the check-in answered the item %v, want In transit to %s", answered, elsewhere.ID)
	}
	// The transit slip: from here to the branch, for the requester.
	if slip.Item.FromServicePoint != hereName || slip.Item.ToServicePoint != "Branch desk" || slip.Request == nil ||
		slip.Request.RequestID != req || slip.Request.HoldShelfExpirationDate != "" || slip.Requester == nil || slip.Requester.Barcode != requester {
		t.Errorf("the transit slip: %+v %+v %+v", slip.Item, slip.Request, slip.Requester)
	}
	if status, dest := itemState(t, c, transit); status != "In transit" || dest != elsewhere.ID {
		t.Errorf("item %q in transit to %q, want In transit to %s", status, dest, elsewhere.ID)
	}
	if r := readRequest(t, c, req); r.Status != "Open - In transit" || r.HoldShelfExpiration != "" {
		t.Errorf("request %+v, want Open - In transit, not yet on a shelf", r)
	}
	checkIn(transit, elsewhere.ID)
	if status, dest := itemState(t, c, transit); status != "Awaiting pickup" || dest != "" {
		t.Errorf("item at its destination %q in transit to %q, want Awaiting pickup", status, dest)
	}
	r = readRequest(t, c, req)
	if r.Status != "Open - Awaiting pickup" {
		t.Errorf("request at its pickup point %+v, want Open - Awaiting pickup", r)
	}
	onShelfUntil(r, 2*time.Hour)

	// A kiosk or a sorter is told where the book goes.
	k := harness.DialSIP2(t, door.SIP2Addr)
	k.Login("user_id", "passw0rd")
	hold(kiosk, here)
	if got := k.Send(checkInMsg(kiosk)); !strings.HasPrefix(got, "101YUY") || harness.SIP2Field(got, "CV") != "01" ||
		strings.Contains(got, "|CT") {
		t.Errorf("09 of a book a hold here waits for: %q, want ok, alert Y, CV01 and no CT", got)
	}
	hold(plain, elsewhere.ID)
	if got := k.Send(checkInMsg(plain)); !strings.HasPrefix(got, "101YUY") || harness.SIP2Field(got, "CV") != "02" ||
		harness.SIP2Field(got, "CT") != "branch" {
		t.Errorf("09 of a book a hold elsewhere waits for: %q, want ok, alert Y, CV02 and CTbranch (its code)", got)
	}
	// With no queue: back on the shelf, no alert.
	c.CheckOut(0, kiosk, requester).Want(t, http.StatusCreated)
	if checkIn(kiosk, here); slip.Request != nil || slip.Requester != nil || slip.Item.Status != "Available" {
		t.Errorf("the slip of a book no one waits for: %+v %+v %+v", slip.Item, slip.Request, slip.Requester)
	}
	c.CheckOut(0, kiosk, requester).Want(t, http.StatusCreated)
	if got := k.Send(checkInMsg(kiosk)); !strings.HasPrefix(got, "101YUN") || strings.Contains(got, "|CV") {
		t.Errorf("09 of a book no one waits for: %q, want ok, alert N and no CV", got)
	}
	if status, _ := itemState(t, c, kiosk); status != "Available" {
		t.Errorf("a book no one waits for, checked in: %q, want Available", status)
	}
	// Item information (17) says where each is: 08 on the hold shelf,
	// 10 in transit, 03 available.
	for item, want := range map[string]string{transit: "08", plain: "10", kiosk: "03"} {
		if got := k.Send("17" + harness.SIP2Date() + "AOdiku|AB" + item + "|"); !strings.HasPrefix(got, "18"+want) {
			t.Errorf("17 of %s: %q, want circulation status %s", item, got, want)
		}
	}
}

// TestAHoldShelfPastTheLastYearEndsWithIt: a desk keeping holds 100,000
// months (what its schema takes) would put a hold shelf's expiration past
// the year 9999, which no service reads back. The book checked in there
// goes on the hold shelf until the last instant of 9999 instead, and the
// request, read, is written back as read.
func TestAHoldShelfPastTheLastYearEndsWithIt(t *testing.T) {
	t.Parallel()
	c := harness.NewCluster(t, harness.Options{Circulations: 1, FeatureOn: true})
	lib := c.SetupLibrary(2, 1, 0)
	book := lib.Items[0][0]
	keepHolds(t, c, harness.ServicePoint, 100000, "Months")
	c.CheckOut(0, book, lib.Patrons[0]).Want(t, http.StatusCreated)
	var hold struct{ ID string }
	c.Do(c.Storage, "POST", "/request-storage/requests", map[string]any{"requestType": "Hold", "requestLevel": "Item",
		"requestDate": "2026-01-01T10:00:00.000Z", "requesterId": c.IDOf(t, "/users", "users", lib.Patrons[1]),
		"itemId": c.IDOf(t, "/item-storage/items", "items", book), "status": "Open - Not yet filled", "position": 1,
		"fulfillmentPreference": "Hold Shelf", "pickupServicePointId": harness.ServicePoint}).Want(t, http.StatusCreated).Decode(t, &hold)
	c.CheckIn(0, book).Want(t, http.StatusOK)
	if r := readRequest(t, c, hold.ID); r.Status != schemas.RequestAwaitingPickup || r.HoldShelfExpiration != "9999-12-31T23:59:59.999Z" {
		t.Errorf("the hold: %q until %q, want %q until 9999-12-31T23:59:59.999Z", r.Status, r.HoldShelfExpiration, schemas.RequestAwaitingPickup)
	}
	var doc map[string]any
	c.Do(c.Storage, "GET", "/request-storage/requests/"+hold.ID, nil).Want(t, http.StatusOK).Decode(t, &doc)
	delete(doc, "metadata")
	c.Do(c.Storage, "PUT", "/request-storage/requests/"+hold.ID, doc).Want(t, http.StatusNoContent)
}

// TestSIP2CheckInKeepsItsReturnDate: a book drop or a sorter checking in
// what it took offline (09 with a return date) has the loan closed at the
// time the book came back, not when the message arrived; a return date in
// the future is now; one more than a minute before the loan's date comes
// from before the loan and closes nothing, and one within a minute before
// it is the loan's date.
func TestSIP2CheckInKeepsItsReturnDate(t *testing.T) {
	t.Parallel()
	c, lib, door := sip2Cluster(t, 1, 1, 3, 0, nil)
	patron, items := lib.Patrons[0], lib.Items[0]
	for _, item := range items {
		c.CheckOut(0, item, patron).Want(t, http.StatusCreated)
	}
	returned := func(item string) time.Time {
		t.Helper()
		var at string
		if err := c.DB.QueryRow(context.Background(), fmt.Sprintf(`SELECT l.jsonb ->> 'returnDate' FROM %[1]s.loan l
			JOIN %[1]s.item i ON i.id = l.item_id WHERE i.barcode = $1 AND l.status_name = 'Closed'`, c.Schema), item).Scan(&at); err != nil {
			t.Fatal(err)
		}
		d, err := schemas.ParseDateTime(at)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	loanDate := func(item string) time.Time {
		t.Helper()
		var at string
		if err := c.DB.QueryRow(context.Background(), fmt.Sprintf(`SELECT l.jsonb ->> 'loanDate' FROM %[1]s.loan l
			JOIN %[1]s.item i ON i.id = l.item_id WHERE i.barcode = $1`, c.Schema), item).Scan(&at); err != nil {
			t.Fatal(err)
		}
		d, _ := schemas.ParseDateTime(at)
		return d
	}
	// Dated in UTC, as SIP2 writes it: "YYYYMMDD   ZHHMMSS".
	sip2UTC := func(d time.Time) string { return d.UTC().Format("20060102") + "   Z" + d.UTC().Format("150405") }
	kiosk := harness.DialSIP2(t, door.SIP2Addr)
	kiosk.Login("user_id", "passw0rd")
	checkIn := func(item string, at time.Time) {
		t.Helper()
		got := kiosk.Send("09N" + harness.SIP2Date() + sip2UTC(at) + "APdesk|AOdiku|AB" + item + "|AC|")
		if !strings.HasPrefix(got, "101") {
			t.Fatalf("09 of %s: %q, want checked in", item, got)
		}
	}
	// The loans are a few seconds old; move the first two back a day so
	// that a return an hour ago falls after them.
	if _, err := c.DB.Exec(context.Background(), fmt.Sprintf(`UPDATE %[1]s.loan SET jsonb = jsonb_set(jsonb, '{loanDate}', to_jsonb($1::text))
		WHERE item_id IN (SELECT id FROM %[1]s.item WHERE barcode = ANY($2))`, c.Schema),
		schemas.FormatTime(time.Now().Add(-24*time.Hour)), items[:2]); err != nil {
		t.Fatal(err)
	}
	hourAgo := time.Now().Add(-time.Hour).Truncate(time.Second)
	checkIn(items[0], hourAgo)
	if got := returned(items[0]); !got.Equal(hourAgo) {
		t.Errorf("returned an hour ago offline: the loan says %s, want %s", got, hourAgo)
	}
	checkIn(items[1], time.Now().Add(48*time.Hour))
	if got := returned(items[1]); got.After(time.Now()) || got.Before(time.Now().Add(-time.Minute)) {
		t.Errorf("a return date in the future: the loan says %s, want now", got)
	}
	// Three days before the loan: from before it (the book came back and
	// was lent again since), which it does not close.
	checkIn(items[2], loanDate(items[2]).Add(-72*time.Hour))
	var open int
	if err := c.DB.QueryRow(context.Background(), fmt.Sprintf(`SELECT count(*) FROM %[1]s.loan WHERE status_name = 'Open'
		AND item_id = (SELECT id FROM %[1]s.item WHERE barcode = $1)`, c.Schema), items[2]).Scan(&open); err != nil || open != 1 {
		t.Fatalf("a return dated before the loan: %d open loans (%v), want the loan left open", open, err)
	}
	// Half a minute before it (a clock behind): the loan's own return,
	// dated when it was lent.
	checkIn(items[2], loanDate(items[2]).Add(-30*time.Second))
	if got, lent := returned(items[2]), loanDate(items[2]); !got.Equal(lent) {
		t.Errorf("a return date half a minute before the loan: the loan says %s, want the loan's date %s", got, lent)
	}
}

// TestACancelledHoldHandsTheBookOn: a request cancelled while its book
// waits on the hold shelf gives the book to the next request of the
// queue (on the shelf for it, when it waits at the same desk, with a date
// of its own), and a request deleted there, the queue's last, puts the
// book back on the open shelf (Available), each in the write's own
// transaction.
func TestACancelledHoldHandsTheBookOn(t *testing.T) {
	t.Parallel()
	c := harness.NewCluster(t, harness.Options{Circulations: 1, FeatureOn: true})
	lib := c.SetupLibrary(3, 1, 0)
	owner, book := lib.Patrons[0], lib.Items[0][0]
	here := harness.ServicePoint
	keepHolds(t, c, here, 1, "Days")
	hold := func(patron string, position int) string {
		t.Helper()
		var out struct{ ID string }
		c.Do(c.Storage, "POST", "/request-storage/requests", map[string]any{"requestType": "Hold", "requestLevel": "Item",
			"requestDate": "2026-01-01T10:00:00.000Z", "requesterId": c.IDOf(t, "/users", "users", patron),
			"itemId": c.IDOf(t, "/item-storage/items", "items", book), "status": "Open - Not yet filled", "position": position,
			"fulfillmentPreference": "Hold Shelf", "pickupServicePointId": here}).Want(t, http.StatusCreated).Decode(t, &out)
		return out.ID
	}
	c.CheckOut(0, book, owner).Want(t, http.StatusCreated)
	first, second := hold(lib.Patrons[1], 1), hold(lib.Patrons[2], 2)
	c.CheckIn(0, book).Want(t, http.StatusOK)
	if r := readRequest(t, c, first); r.Status != "Open - Awaiting pickup" {
		t.Fatalf("the first request after the check-in: %+v", r)
	}
	var doc map[string]any
	c.Do(c.Storage, "GET", "/request-storage/requests/"+first, nil).Want(t, http.StatusOK).Decode(t, &doc)
	delete(doc, "metadata")
	doc["status"] = "Closed - Cancelled"
	c.Do(c.Storage, "PUT", "/request-storage/requests/"+first, doc).Want(t, http.StatusNoContent)
	if status, _ := itemState(t, c, book); status != "Awaiting pickup" {
		t.Errorf("the book after its first request was cancelled: %q, want kept on the shelf for the next", status)
	}
	if r := readRequest(t, c, second); r.Status != "Open - Awaiting pickup" || r.Position != "1" || r.HoldShelfExpiration == "" {
		t.Errorf("the next request: %+v, want Open - Awaiting pickup at 1, with a date", r)
	}
	c.Do(c.Storage, "DELETE", "/request-storage/requests/"+second, nil).Want(t, http.StatusNoContent)
	if status, _ := itemState(t, c, book); status != "Available" {
		t.Errorf("the book after its last request was deleted: %q, want Available", status)
	}
}
