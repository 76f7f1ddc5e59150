package integration

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/google/uuid"

	"github.com/checkoutlock/integration-tests/harness"
	"github.com/checkoutlock/schemas"
)

// queueCluster is a cluster whose library (patrons patrons, one item
// each) picks holds up at the service point, the librarian's headers, and
// place, which places a request of kind by patron for item (an id)
// through circulation and answers its id.
func queueCluster(t *testing.T, patrons int) (*harness.Cluster, harness.Library, map[string]string, func(kind, patron, item string) string) {
	t.Helper()
	c := harness.NewCluster(t, harness.Options{Circulations: 1, FeatureOn: true})
	lib := c.SetupLibrary(patrons, 1, 0)
	keepHolds(t, c, harness.ServicePoint, 1, "Days")
	librarian := c.HeadersWith(schemas.HeaderToken, c.Token(schemas.RoleLibrarian))
	place := func(kind, patron, item string) string {
		t.Helper()
		var r struct{ ID string }
		c.DoWith(c.Circulations[0], "POST", "/circulation/requests", map[string]any{"requestType": kind, "requestDate": "2026-03-01T10:00:00.000Z",
			"requesterId": c.IDOf(t, "/users", "users", patron), "itemId": item, "fulfillmentPreference": "Hold Shelf",
			"pickupServicePointId": harness.ServicePoint}, librarian).Want(t, http.StatusCreated).Decode(t, &r)
		return r.ID
	}
	return c, lib, librarian, place
}

// queueOrder is the item's open requests as stored: ids in their
// positions' order, and whether the positions are 1 to n, each once.
func queueOrder(t *testing.T, c *harness.Cluster, item string) (ids []string, dense bool) {
	t.Helper()
	rows, err := c.DB.Query(context.Background(), fmt.Sprintf(`SELECT id::text, (jsonb ->> 'position')::int FROM %s.request
		WHERE item_id = $1::uuid AND left(status, 5) = 'Open ' ORDER BY (jsonb ->> 'position')::int, id`, c.Schema), item)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	dense = true
	for rows.Next() {
		var id string
		var position int
		if err := rows.Scan(&id, &position); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
		dense = dense && position == len(ids)
	}
	return ids, dense
}

// reordering is a reorder body giving ids the positions 1 to n in their
// order, or the positions given.
func reordering(ids []string, positions ...int) map[string]any {
	queue := make([]map[string]any, len(ids))
	for i, id := range ids {
		p := i + 1
		if positions != nil {
			p = positions[i]
		}
		queue[i] = map[string]any{"id": id, "newPosition": p}
	}
	return map[string]any{"reorderedQueue": queue}
}

// TestARequestQueueIsReorderedAsFOLIOReordersIt: an item's queue read and
// reordered through circulation as FOLIO's Requests app does
// (mod-circulation's RequestQueueResourceTest). Refused in FOLIO's words,
// one error, nothing changed: positions not 1 to n (a gap, a zero, one
// twice), a request of the queue left out, one not in it, one named
// twice, a page or a request on the hold shelf moved from first; an item
// without a queue is 404, a self-check machine 403. Reordered, sent twice
// with its Idempotency-Key: answered with the queue in its new order, each
// request with its summaries, each moved request written once.
func TestARequestQueueIsReorderedAsFOLIOReordersIt(t *testing.T) {
	t.Parallel()
	c, lib, librarian, place := queueCluster(t, 6)
	out := c.IDOf(t, "/item-storage/items", "items", lib.Items[0][0])
	shelf := c.IDOf(t, "/item-storage/items", "items", lib.Items[1][0])
	c.CheckOut(0, lib.Items[0][0], lib.Patrons[0]).Want(t, http.StatusCreated)
	queue := []string{place("Hold", lib.Patrons[1], out), place("Hold", lib.Patrons[2], out), place("Recall", lib.Patrons[3], out),
		place("Recall", lib.Patrons[4], out)}
	reorder := func(item string, body map[string]any, headers map[string]string) harness.Response {
		return c.DoWith(c.Circulations[0], "POST", "/circulation/requests/queue/item/"+item+"/reorder", body, headers)
	}
	// answered holds an answer to the queue's ids, in order, positions 1
	// to n, each with its requester's summary.
	answered := func(what string, r harness.Response, want []string) {
		t.Helper()
		var page struct {
			Requests []struct {
				ID        string
				Position  int
				Requester struct{ Barcode string }
			}
			TotalRecords int
		}
		r.Want(t, http.StatusOK).Decode(t, &page)
		var got []string
		for i, q := range page.Requests {
			got = append(got, q.ID)
			if q.Position != i+1 || q.Requester.Barcode == "" {
				t.Errorf("%s: request %d is %+v, want at position %d with its requester", what, i, q, i+1)
			}
		}
		if !slices.Equal(got, want) || page.TotalRecords != len(want) {
			t.Errorf("%s: the queue %v (%d), want %v", what, got, page.TotalRecords, want)
		}
	}
	answered("the queue read", c.DoWith(c.Circulations[0], "GET", "/circulation/requests/queue/item/"+out, nil, librarian), queue)

	refusedAs := func(what string, r harness.Response, message string) {
		t.Helper()
		var env struct {
			Errors []struct{ Message, Code string }
		}
		r.Want(t, http.StatusUnprocessableEntity).Decode(t, &env)
		if len(env.Errors) != 1 || env.Errors[0].Message != message || env.Errors[0].Code != schemas.CodeValidation {
			t.Errorf("%s: %s, want one %s %q", what, r.Body, schemas.CodeValidation, message)
		}
		if got, dense := queueOrder(t, c, out); !slices.Equal(got, queue) || !dense {
			t.Errorf("%s: the queue %v after the refusal, want %v", what, got, queue)
		}
	}
	const sequential, inconsistent = "Positions must have sequential order.", "There is inconsistency between provided reordered queue and existing queue."
	refusedAs("a gap", reorder(out, reordering(queue, 1, 2, 5, 4), librarian), sequential)
	refusedAs("a zero", reorder(out, reordering(queue, 0, 2, 3, 4), librarian), sequential)
	refusedAs("a position twice", reorder(out, reordering(queue, 1, 1, 2, 3), librarian), sequential)
	refusedAs("a request left out", reorder(out, reordering(queue[:3]), librarian), inconsistent)
	refusedAs("a request not in the queue", reorder(out, reordering(append(slices.Clone(queue[:3]), uuid.NewString())), librarian), inconsistent)
	refusedAs("a request twice", reorder(out, reordering([]string{queue[0], queue[0], queue[1], queue[2]}), librarian), inconsistent)
	missing := uuid.NewString()
	r := reorder(missing, reordering(queue), librarian).Want(t, http.StatusNotFound)
	if !strings.Contains(string(r.Body), "Item record with ID "+missing+" cannot be found") {
		t.Errorf("an item without a queue: %s", r.Body)
	}
	reorder(out, reordering(queue), c.HeadersWith(schemas.HeaderToken, c.Token(schemas.RoleSelfCheck))).Want(t, http.StatusForbidden)

	versions := func() map[string]any {
		out := map[string]any{}
		for _, id := range queue {
			out[id] = storedDoc(t, c, "request", id)["_version"]
		}
		return out
	}
	before := versions()
	moved := []string{queue[3], queue[2], queue[0], queue[1]}
	keyed := c.HeadersWith(schemas.HeaderToken, c.Token(schemas.RoleLibrarian), schemas.HeaderIdempotencyKey, uuid.NewString())
	body := reordering(queue, 3, 4, 2, 1)
	answered("the queue reordered", reorder(strings.ToUpper(out), body, keyed), moved)
	answered("the reorder sent again", reorder(strings.ToUpper(out), body, keyed), moved)
	if got, dense := queueOrder(t, c, out); !slices.Equal(got, moved) || !dense {
		t.Errorf("the queue stored %v, want %v", got, moved)
	}
	for id, v := range versions() {
		if v != before[id].(float64)+1 {
			t.Errorf("request %s at version %v, was %v: want written once", id, v, before[id])
		}
	}

	// A page stays first.
	page := place("Page", lib.Patrons[1], shelf)
	hold := place("Hold", lib.Patrons[2], shelf)
	r = reorder(shelf, reordering([]string{hold, page}), librarian)
	if r.Status != http.StatusUnprocessableEntity || !strings.Contains(string(r.Body), "Page requests can not be displaced from position 1.") {
		t.Errorf("a page moved from first: %d %s", r.Status, r.Body)
	}
	// The first request, on the hold shelf once the item is back, stays
	// first; the others still move.
	c.CheckIn(0, lib.Items[0][0]).Want(t, http.StatusOK)
	refusedFirst := reorder(out, reordering([]string{moved[1], moved[0], moved[2], moved[3]}), librarian)
	if refusedFirst.Status != http.StatusUnprocessableEntity ||
		!strings.Contains(string(refusedFirst.Body), "Requests can not be displaced from position 1 when fulfillment begun.") {
		t.Errorf("a request on the hold shelf moved from first: %d %s", refusedFirst.Status, refusedFirst.Body)
	}
	kept := []string{moved[0], moved[3], moved[1], moved[2]}
	answered("the rest of the queue reordered", reorder(out, reordering(kept), librarian), kept)
}

// TestReordersBesideOtherWritesKeepTheQueueWhole: two reorders of one
// item's queue sent together with a hold placed and a request cancelled,
// over two circulation instances, fifteen rounds. Each write is judged
// under the queue's lock: a reorder that named the queue as it was before
// another write changed it is refused as inconsistent, nothing changed.
// Every round the queue's positions are 1 to n, each once, the placed hold
// in it and the cancelled request out of it; after a reorder that landed,
// in its order (the other's, when both landed, whichever came last), the
// hold last.
func TestReordersBesideOtherWritesKeepTheQueueWhole(t *testing.T) {
	t.Parallel()
	const rounds = 15
	c := harness.NewCluster(t, harness.Options{Circulations: 2, FeatureOn: true})
	lib := c.SetupLibrary(rounds+4, 1, 0)
	keepHolds(t, c, harness.ServicePoint, 1, "Days")
	librarian := c.HeadersWith(schemas.HeaderToken, c.Token(schemas.RoleLibrarian))
	item := c.IDOf(t, "/item-storage/items", "items", lib.Items[0][0])
	c.CheckOut(0, lib.Items[0][0], lib.Patrons[0]).Want(t, http.StatusCreated)
	place := func(i int, patron string) harness.Response {
		return c.DoWith(c.Circulations[i%2], "POST", "/circulation/requests", map[string]any{"requestType": "Hold",
			"requestDate": "2026-03-01T10:00:00.000Z", "requesterId": c.IDOf(t, "/users", "users", patron), "itemId": item,
			"fulfillmentPreference": "Hold Shelf", "pickupServicePointId": harness.ServicePoint}, librarian)
	}
	for i := 1; i <= 3; i++ {
		place(i, lib.Patrons[i]).Want(t, http.StatusCreated)
	}
	landed := 0
	for round := range rounds {
		queue, _ := queueOrder(t, c, item)
		reversed := slices.Clone(queue)
		slices.Reverse(reversed)
		rotated := append(slices.Clone(queue[1:]), queue[0])
		orders := [][]string{reversed, rotated}
		cancelled := queue[round%len(queue)]
		var doc map[string]any
		c.DoWith(c.Circulations[0], "GET", "/circulation/requests/"+cancelled, nil, librarian).Want(t, http.StatusOK).Decode(t, &doc)
		doc["status"] = schemas.RequestCancelled
		answers := make([]harness.Response, 4)
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i := range answers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				switch i {
				case 0, 1:
					answers[i] = c.DoWith(c.Circulations[i], "POST", "/circulation/requests/queue/item/"+item+"/reorder", reordering(orders[i]), librarian)
				case 2:
					answers[i] = place(round, lib.Patrons[4+round])
				case 3:
					delete(doc, "_version")
					answers[i] = c.DoWith(c.Circulations[1], "PUT", "/circulation/requests/"+cancelled, doc, librarian)
				}
			}()
		}
		close(start)
		wg.Wait()
		if answers[2].Status != http.StatusCreated || answers[3].Status != http.StatusNoContent {
			t.Fatalf("round %d: the hold %d %s, the cancellation %d %s", round, answers[2].Status, answers[2].Body, answers[3].Status, answers[3].Body)
		}
		var hold struct{ ID string }
		answers[2].Decode(t, &hold)
		got, dense := queueOrder(t, c, item)
		if !dense || len(got) != len(queue) || !slices.Contains(got, hold.ID) || slices.Contains(got, cancelled) {
			t.Fatalf("round %d: the queue %v (dense %v), was %v, want %s in it and %s out", round, got, dense, queue, hold.ID, cancelled)
		}
		var last []string // the order of a reorder that landed
		for i, a := range answers[:2] {
			switch a.Status {
			case http.StatusOK:
				landed++
				if last == nil || !slices.Equal(got[:len(got)-1], last) {
					last = slices.DeleteFunc(slices.Clone(orders[i]), func(id string) bool { return id == cancelled })
				}
			case http.StatusUnprocessableEntity:
				if !strings.Contains(string(a.Body), "inconsistency") {
					t.Fatalf("round %d: reorder %d refused: %s", round, i, a.Body)
				}
			default:
				t.Fatalf("round %d: reorder %d answered %d %s", round, i, a.Status, a.Body)
			}
		}
		// A reorder that landed named the queue before the hold joined it:
		// its order, then the hold.
		if last != nil && (!slices.Equal(got[:len(got)-1], last) || got[len(got)-1] != hold.ID) {
			t.Fatalf("round %d: answers %d %d; the queue %v, want the order %v landed, then the hold %s", round,
				answers[0].Status, answers[1].Status, got, last, hold.ID)
		}
	}
	t.Logf("%d of %d reorders landed beside a hold placed and a request cancelled", landed, 2*rounds)
}
