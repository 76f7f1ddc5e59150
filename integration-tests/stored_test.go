package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/checkoutlock/integration-tests/harness"
	"github.com/checkoutlock/schemas"
	"github.com/checkoutlock/schemas/errs/errhttp"
)

// The tests of this file run one at a time, before the parallel ones: each
// starts a cluster whose storage may open a few dozen connections, and with
// the parallel tests' clusters they came near PostgreSQL's hundred.

// errorParams is the first error of a FOLIO error envelope (errhttp's
// decoding): its code and its parameters by key.
func errorParams(t *testing.T, r harness.Response) (string, map[string]string) {
	t.Helper()
	env, ok := errhttp.Decode(r.Body)
	if !ok {
		t.Fatalf("not an error envelope: %d %s", r.Status, r.Body)
	}
	params := map[string]string{}
	for _, p := range env.Errors[0].Parameters {
		params[p.Key] = p.Value
	}
	return env.Errors[0].Code, params
}

// TestStoredDatesCannotBreakAPatron: a date no service can compute with is
// refused where it is written, naming its field (a block's expiry, a
// loan's due date, a patron's expiry, a check-out's loan date), and one
// stored before that rule (written here in SQL) is read as absent with a
// line in storage's log, never a 500: the block stays in force, the loan
// is not counted overdue, the patron does not expire.
func TestStoredDatesCannotBreakAPatron(t *testing.T) {
	t.Parallel()
	c := harness.NewCluster(t, harness.Options{FeatureOn: true})
	lib := c.SetupLibrary(2, 3, 0)
	blocked, expiring := lib.Patrons[0], lib.Patrons[1]
	blockedID, expiringID := patronID(t, c, blocked), patronID(t, c, expiring)

	for _, date := range []string{"0000-01-01T00:00:00Z", "1899-12-31T23:59:59Z", "10000-01-01T00:00:00Z", "2026-02-30T00:00:00Z", "soon"} {
		r := c.Do(c.Storage, "POST", "/manualblocks", map[string]any{"userId": blockedID, "desc": "Bad date", "borrowing": true,
			"expirationDate": date}).Want(t, http.StatusUnprocessableEntity)
		if _, params := errorParams(t, r); params["expirationDate"] != date {
			t.Errorf("block expiring %s: the refusal names %v, not expirationDate", date, params)
		}
		r = c.Do(c.Storage, "PUT", "/users/"+expiringID, map[string]any{"id": expiringID, "barcode": expiring, "active": true,
			"patronGroup": lib.GroupID, "personal": map[string]any{"lastName": "Patron " + expiring}, "expirationDate": date}).
			Want(t, http.StatusUnprocessableEntity)
		if _, params := errorParams(t, r); params["expirationDate"] != date {
			t.Errorf("patron expiring %s: the refusal names %v, not expirationDate", date, params)
		}
	}
	var loan map[string]any
	c.CheckOut(0, lib.Items[0][0], blocked).Want(t, http.StatusCreated).Decode(t, &loan)
	loanID := loan["id"].(string)
	var stored map[string]any
	c.Do(c.Storage, "GET", "/loan-storage/loans/"+loanID, nil).Want(t, http.StatusOK).Decode(t, &stored)
	stored["dueDate"] = "0000-01-01T00:00:00Z"
	r := c.Do(c.Storage, "PUT", "/loan-storage/loans/"+loanID, stored).Want(t, http.StatusUnprocessableEntity)
	if _, params := errorParams(t, r); params["dueDate"] != "0000-01-01T00:00:00Z" {
		t.Errorf("due date 0000: the refusal names %v, not dueDate", params)
	}
	// Go's zero time: refused, not taken for "now".
	r = c.Do(c.Circulations[0], "POST", "/circulation/check-out-by-barcode", map[string]any{"itemBarcode": lib.Items[0][1],
		"userBarcode": blocked, "servicePointId": harness.ServicePoint, "loanDate": "0001-01-01T00:00:00Z"}).
		Want(t, http.StatusUnprocessableEntity)
	if _, params := errorParams(t, r); params["loanDate"] != "0001-01-01T00:00:00Z" {
		t.Errorf("loan date 0001: the refusal names %v, not loanDate", params)
	}
	if n := c.OpenLoans(t, blocked); n != 1 {
		t.Fatalf("%d open loans after the refusals, want 1", n)
	}

	// Stored before the rule, in SQL: an import.
	ctx := context.Background()
	for _, stmt := range []struct {
		sql  string
		args []any
	}{
		{`INSERT INTO circulation_storage.manual_block (tenant_id, id, jsonb) VALUES ($1, gen_random_uuid(),
		    jsonb_build_object('userId', $2::text, 'desc', 'Imported', 'borrowing', true, 'expirationDate', '0000-01-01T00:00:00Z'))`,
			[]any{c.Tenant, blockedID}},
		{`UPDATE circulation_storage.loan SET jsonb = jsonb_set(jsonb, '{dueDate}', '"0000-01-01T00:00:00Z"') WHERE tenant_id = $1 AND id = $2`,
			[]any{c.Tenant, loanID}},
		{`UPDATE circulation_storage.patron SET jsonb = jsonb_set(jsonb, '{expirationDate}', '"0000-12-31T00:00:00Z"') WHERE tenant_id = $1 AND id = $2`,
			[]any{c.Tenant, expiringID}},
	} {
		if _, err := c.DB.Exec(ctx, stmt.sql, stmt.args...); err != nil {
			t.Fatal(err)
		}
	}
	// With an overdue-items limit, the check-out counts overdue loans.
	c.Do(c.Storage, "POST", "/patron-block-limits", map[string]any{"patronGroupId": lib.GroupID,
		"conditionId": schemas.ConditionOverdueItems, "value": 5}).Want(t, http.StatusCreated)

	var summary struct {
		CanBorrow     bool `json:"canBorrow"`
		OpenLoanCount int  `json:"openLoanCount"`
		OverdueCount  int  `json:"overdueCount"`
		Reasons       []struct {
			Code string `json:"code"`
		} `json:"reasons"`
	}
	c.Do(c.Circulations[0], "GET", "/circulation/patron-summary?userBarcode="+blocked, nil).Want(t, http.StatusOK).Decode(t, &summary)
	if summary.CanBorrow || summary.OpenLoanCount != 1 || summary.OverdueCount != 0 || len(summary.Reasons) != 1 ||
		summary.Reasons[0].Code != schemas.CodeUserBlockedManually {
		t.Errorf("summary of the blocked patron: %+v; want the imported block in force, 1 loan, none overdue", summary)
	}
	r = c.CheckOut(0, lib.Items[0][1], blocked).Want(t, http.StatusUnprocessableEntity)
	if codes := r.ErrorCodes(); !slices.Equal(codes, []string{schemas.CodeUserBlockedManually}) {
		t.Errorf("check-out of the blocked patron: %v, want the block alone", codes)
	}
	c.Do(c.Circulations[0], "GET", "/circulation/patron-summary?userBarcode="+expiring, nil).Want(t, http.StatusOK).Decode(t, &summary)
	if !summary.CanBorrow {
		t.Errorf("summary of the patron whose expiry cannot be read: %+v; want them served", summary)
	}
	c.CheckOut(0, lib.Items[1][0], expiring).Want(t, http.StatusCreated)
	// The loan whose due date cannot be read is checked in, written back
	// without it.
	c.CheckIn(0, lib.Items[0][0]).Want(t, http.StatusOK)
	stored = nil
	c.Do(c.Storage, "GET", "/loan-storage/loans/"+loanID, nil).Want(t, http.StatusOK).Decode(t, &stored)
	if _, ok := stored["dueDate"]; ok || stored["status"].(map[string]any)["name"] != "Closed" {
		t.Errorf("the loan checked in: %v; want it closed, without the due date that cannot be read", stored)
	}

	for _, field := range []string{"manual block expirationDate", "loan dueDate", "patron expirationDate"} {
		want := fmt.Sprintf("stored %s", field)
		deadline := time.Now().Add(10 * time.Second)
		for !strings.Contains(c.Storage.Log(), want) {
			if time.Now().After(deadline) {
				t.Errorf("storage's log does not say %q", want)
				break
			}
			time.Sleep(50 * time.Millisecond) // polling a log file, with a deadline
		}
	}
}

// TestAClosedRequestGivesUpItsPlace: a request closed while it kept its
// position (a client's PUT) leaves the queue, the requests after it move
// up, and the first requester's check-out is lent; a closed request
// created with a position stores none; positions stay dense, a taken one
// is refused naming it.
func TestAClosedRequestGivesUpItsPlace(t *testing.T) {
	t.Parallel()
	c := harness.NewCluster(t, harness.Options{FeatureOn: true})
	lib := c.SetupLibrary(4, 1, 0)
	item := lib.Items[0][0]
	first := c.Request(t, item, lib.Patrons[1], 1)
	second := c.Request(t, item, lib.Patrons[2], 2)
	third := c.Request(t, item, lib.Patrons[3], 3)

	positions := func() map[string]any {
		t.Helper()
		out := map[string]any{}
		for _, id := range []string{first, second, third} {
			var req map[string]any
			c.Do(c.Storage, "GET", "/request-storage/requests/"+id, nil).Want(t, http.StatusOK).Decode(t, &req)
			out[id] = req["position"]
		}
		return out
	}
	var req map[string]any
	c.Do(c.Storage, "GET", "/request-storage/requests/"+second, nil).Want(t, http.StatusOK).Decode(t, &req)
	req["status"] = "Closed - Cancelled"
	delete(req, "metadata")
	c.Do(c.Storage, "PUT", "/request-storage/requests/"+second, req).Want(t, http.StatusNoContent)
	if got, want := positions(), map[string]any{first: 1.0, second: nil, third: 2.0}; !mapsEqual(got, want) {
		t.Fatalf("positions after the second request was cancelled: %v, want %v", got, want)
	}

	// A taken position is refused, naming it; a gap too.
	body := func(patron string, position int) map[string]any {
		return map[string]any{"requestType": "Hold", "requestDate": "2026-01-02T10:00:00Z", "requesterId": patronID(t, c, patron),
			"itemId": itemID(t, c, item), "status": "Open - Not yet filled", "position": position, "fulfillmentPreference": "Hold Shelf"}
	}
	r := c.Do(c.Storage, "POST", "/request-storage/requests", body(lib.Patrons[0], 2)).Want(t, http.StatusUnprocessableEntity)
	if code, params := errorParams(t, r); code != schemas.CodeAlreadyExists || params["position"] != "2" {
		t.Errorf("position 2 taken: %s %v", code, params)
	}
	r = c.Do(c.Storage, "POST", "/request-storage/requests", body(lib.Patrons[0], 4)).Want(t, http.StatusUnprocessableEntity)
	if code, params := errorParams(t, r); code != schemas.CodeValidation || params["position"] != "4" {
		t.Errorf("position 4 after a queue of 2: %s %v", code, params)
	}
	// A closed request created with a position holds none.
	closed := body(lib.Patrons[0], 3)
	closed["status"] = "Closed - Unfilled"
	var made map[string]any
	c.Do(c.Storage, "POST", "/request-storage/requests", closed).Want(t, http.StatusCreated).Decode(t, &made)
	if _, ok := made["position"]; ok {
		t.Errorf("a closed request was stored with position %v", made["position"])
	}

	// The first requester's check-out fills the first request; the third
	// moves up to 1.
	c.CheckOut(0, item, lib.Patrons[1]).Want(t, http.StatusCreated)
	if got, want := positions(), map[string]any{first: nil, second: nil, third: 1.0}; !mapsEqual(got, want) {
		t.Fatalf("positions after the first requester's check-out: %v, want %v", got, want)
	}
	c.CheckIn(0, item).Want(t, http.StatusOK)
	c.CheckOut(0, item, lib.Patrons[3]).Want(t, http.StatusCreated)
	c.CheckInvariants(t, harness.Invariants{})
}

func mapsEqual(a, b map[string]any) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// TestConcurrentRequestsForOneItemDoNotDeadlock: twenty requests for one
// item's same position at once, ten rounds: one is created, the others
// are refused with a 4xx (the slowest refusal logged), PostgreSQL detects
// no deadlock,
// and the reads of another record meanwhile answer within 100 ms, or
// within five times the slowest of the same reads just before the writes
// when the machine is that slow (a bound taken in the same run, not a
// machine's speed), most of them: writes holding the reads up would slow
// every read made while they ran, where a machine busy with the tests
// beside this one slows a few now and then.
func TestConcurrentRequestsForOneItemDoNotDeadlock(t *testing.T) {
	t.Parallel()
	c := harness.NewCluster(t, harness.Options{FeatureOn: true})
	const writers, rounds = 20, 10
	lib := c.SetupLibrary(writers, 1, 0)
	requesters := patronIDs(t, c, lib.Patrons)
	deadlocks := func() int64 {
		var n int64
		if err := c.DB.QueryRow(context.Background(), `SELECT deadlocks FROM pg_stat_database WHERE datname = current_database()`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	before := deadlocks()
	other := lib.Items[writers-1][0]
	var slowestRefusal, slowestRead time.Duration
	// Storage's connections opened first, as a running service has them:
	// the first use of each costs a new server process.
	otherID := itemID(t, c, other)
	var warm sync.WaitGroup
	for range writers {
		warm.Add(1)
		go func() {
			defer warm.Done()
			c.Do(c.Storage, "GET", "/request-storage/requests?itemId="+otherID, nil)
		}()
	}
	warm.Wait()
	for round := range rounds {
		item := itemID(t, c, lib.Items[round][0])
		var quiet time.Duration
		for range 10 {
			began := time.Now()
			c.Do(c.Storage, "GET", "/item-storage/items?barcode="+other, nil)
			quiet = max(quiet, time.Since(began))
		}
		bound := max(100*time.Millisecond, 5*quiet)
		// Reads of another record while the writes run, one after
		// another: the slowest of them, how many there were and how many
		// took longer than bound, and any that failed. Writes that held
		// the reads up would hold up every read made while they ran; the
		// machine (the tests beside this one taking the cores) slows a
		// few now and then.
		type readResult struct {
			slowest     time.Duration
			total, slow int
			failed      []int
		}
		read := make(chan readResult, 1)
		done := make(chan struct{})
		go func() {
			var r readResult
			defer func() { read <- r }()
			for {
				select {
				case <-done:
					return
				default:
				}
				began := time.Now()
				if res := c.Do(c.Storage, "GET", "/item-storage/items?barcode="+other, nil); res.Status != http.StatusOK {
					r.failed = append(r.failed, res.Status)
				}
				took := time.Since(began)
				r.total++
				r.slowest = max(r.slowest, took)
				if took > bound {
					r.slow++
				}
			}
		}()
		answers, took := holdsAtOnce(c, item, requesters, 1)
		close(done)
		reads := <-read
		if len(reads.failed) > 0 {
			t.Errorf("round %d: reads of another record answered %v", round, reads.failed)
		}
		slowest := reads.slowest
		created := 0
		for i, a := range answers {
			switch {
			case a.Status == http.StatusCreated:
				created++
			case a.Status < 400 || a.Status >= 500:
				t.Errorf("round %d, writer %d: %d %s", round, i, a.Status, a.Body)
			default:
				// How long a refusal took is logged, not held to a bound:
				// a deadlock is PostgreSQL's count, below, not a time.
				slowestRefusal = max(slowestRefusal, took[i])
			}
		}
		if created != 1 {
			t.Errorf("round %d: %d requests created at position 1, want 1", round, created)
		}
		slowestRead = max(slowestRead, slowest)
		if reads.slow > 1 && 2*reads.slow > reads.total {
			t.Errorf("round %d: %d of %d reads of another record took longer than %v during the writes, the slowest %v (the slowest before them %v)",
				round, reads.slow, reads.total, bound, slowest, quiet)
		}
	}
	t.Logf("%d rounds of %d writers: the slowest refusal %v, the slowest read of another record %v", rounds, writers, slowestRefusal, slowestRead)
	// PostgreSQL counts a deadlock when its backend reports its
	// statistics: at the latest a second after it was idle again.
	deadline := time.Now().Add(3 * time.Second)
	for time.Now().Before(deadline) {
		if n := deadlocks() - before; n > 0 {
			t.Fatalf("PostgreSQL detected %d deadlocks", n)
		}
		time.Sleep(200 * time.Millisecond) // statistics flushed by other backends, polled with a deadline
	}
}

// TestConcurrentRequestsJoinAQueueInTurn: twenty requests naming no
// position, for one item at once, in five rounds: every one is created,
// and the queue holds positions 1 to 20, each once. Writes of one item's
// queue take their turns on the item's row; without it, requests reading
// the same end of the queue would take the same position (and be refused)
// or deadlock.
func TestConcurrentRequestsJoinAQueueInTurn(t *testing.T) {
	t.Parallel()
	c := harness.NewCluster(t, harness.Options{FeatureOn: true})
	const writers, rounds = 20, 5
	lib := c.SetupLibrary(writers, 1, 0)
	requesters := patronIDs(t, c, lib.Patrons)
	for round := range rounds {
		item := itemID(t, c, lib.Items[round][0])
		answers, _ := holdsAtOnce(c, item, requesters, 0)
		for i, a := range answers {
			if a.Status != http.StatusCreated {
				t.Errorf("round %d, writer %d: %d %s", round, i, a.Status, a.Body)
			}
		}
		var queue struct {
			Requests []struct {
				Position int `json:"position"`
			} `json:"requests"`
		}
		res := c.Do(c.Storage, "GET", "/request-storage/requests?itemId="+item+"&limit=100", nil)
		res.Want(t, http.StatusOK)
		if err := json.Unmarshal(res.Body, &queue); err != nil {
			t.Fatal(err)
		}
		positions := make([]int, 0, len(queue.Requests))
		for _, r := range queue.Requests {
			positions = append(positions, r.Position)
		}
		slices.Sort(positions)
		want := make([]int, writers)
		for i := range want {
			want[i] = i + 1
		}
		if !slices.Equal(positions, want) {
			t.Errorf("round %d: the queue's positions are %v, want 1 to %d each once", round, positions, writers)
		}
	}
}

// patronIDs are the ids of the patrons with barcodes, in their order.
func patronIDs(t *testing.T, c *harness.Cluster, barcodes []string) []string {
	t.Helper()
	ids := make([]string, len(barcodes))
	for i, b := range barcodes {
		ids[i] = patronID(t, c, b)
	}
	return ids
}

// holdsAtOnce sends a Hold request for item by each of requesters, all
// released at once, at position when it is positive (else naming none),
// and returns each answer and how long it took.
func holdsAtOnce(c *harness.Cluster, item string, requesters []string, position int) ([]harness.Response, []time.Duration) {
	answers := make([]harness.Response, len(requesters))
	took := make([]time.Duration, len(requesters))
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i, requester := range requesters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req := map[string]any{"requestType": "Hold", "requestDate": "2026-01-02T10:00:00Z", "requesterId": requester,
				"itemId": item, "status": "Open - Not yet filled", "fulfillmentPreference": "Hold Shelf"}
			if position > 0 {
				req["position"] = position
			}
			<-start
			began := time.Now()
			answers[i] = c.Do(c.Storage, "POST", "/request-storage/requests", req)
			took[i] = time.Since(began)
		}()
	}
	close(start)
	wg.Wait()
	return answers, took
}

// lowCluster is a cluster whose one patron has three items.
func lowCluster(t *testing.T) (*harness.Cluster, harness.Library) {
	t.Helper()
	c := harness.NewCluster(t, harness.Options{FeatureOn: true})
	return c, c.SetupLibrary(1, 3, 0)
}

// TestAnOverrideNeedsAComment: an override's comment must hold a visible
// character: empty, spaces, non-ASCII spaces and invisible characters are
// refused naming the field, and nothing is lent.
func TestAnOverrideNeedsAComment(t *testing.T) {
	t.Parallel()
	c, lib := lowCluster(t)
	before := c.Snapshot(t)
	for _, comment := range []string{"", "   ", "\u3000\u00a0", "\u200b\u2060"} {
		r := c.Do(c.Circulations[0], "POST", "/circulation/check-out-by-barcode", map[string]any{"itemBarcode": lib.Items[0][0],
			"userBarcode": lib.Patrons[0], "servicePointId": harness.ServicePoint,
			"overrideBlocks": map[string]any{"patronBlock": map[string]any{}, "comment": comment}})
		if r.Status != http.StatusUnprocessableEntity {
			t.Errorf("override comment %q: %d %s, want 422", comment, r.Status, r.Body)
			continue
		}
		if _, params := errorParams(t, r); params["overrideBlocks.comment"] != comment {
			t.Errorf("override comment %q: the refusal names %v", comment, params)
		}
	}
	if after := c.Snapshot(t); after != before {
		t.Fatalf("a refused override changed the records:\n%s\nwas\n%s", after, before)
	}
}

// TestCheckOutsAndCheckInsAtTheTenantsServicePoints: a check-out or a
// check-in naming no service point of the tenant is refused naming
// servicePointId, and changes nothing.
func TestCheckOutsAndCheckInsAtTheTenantsServicePoints(t *testing.T) {
	t.Parallel()
	c, lib := lowCluster(t)
	patron, item := lib.Patrons[0], lib.Items[0][0]
	unknown := "0b8d1c2e-2f55-4b1e-9d3f-6d6f7f0a9a11"
	before := c.Snapshot(t)
	r := c.Do(c.Circulations[0], "POST", "/circulation/check-out-by-barcode", map[string]any{"itemBarcode": item,
		"userBarcode": patron, "servicePointId": unknown})
	if _, params := errorParams(t, r); r.Status != http.StatusUnprocessableEntity || params["servicePointId"] != unknown {
		t.Errorf("check-out at no service point: %d %s", r.Status, r.Body)
	}
	if after := c.Snapshot(t); after != before {
		t.Fatalf("a refused check-out changed the records:\n%s\nwas\n%s", after, before)
	}
	c.CheckOut(0, item, patron).Want(t, http.StatusCreated)
	lent := c.Snapshot(t)
	r = c.Do(c.Circulations[0], "POST", "/circulation/check-in-by-barcode", map[string]any{"itemBarcode": item, "servicePointId": unknown})
	if _, params := errorParams(t, r); r.Status != http.StatusUnprocessableEntity || params["servicePointId"] != unknown {
		t.Errorf("check-in at no service point: %d %s", r.Status, r.Body)
	}
	if after := c.Snapshot(t); after != lent {
		t.Fatalf("a refused check-in changed the records:\n%s\nwas\n%s", after, lent)
	}
	c.CheckIn(0, item).Want(t, http.StatusOK)
}

// TestUsernamesAreComparedNormalised: a username differing from another
// only by an invisible or a non-ASCII space character, or written other
// than in Unicode NFKC, is refused naming the field; a sign-in's username
// is read in NFKC, so full-width letters find the account.
func TestUsernamesAreComparedNormalised(t *testing.T) {
	t.Parallel()
	c := harness.NewCluster(t, harness.Options{FeatureOn: true})
	c.Account(t, "lee", "Lee", "Librarian", schemas.RoleLibrarian, "a long enough password")
	for _, name := range []string{"lee\u200b", "lee\u00a0", "lee\u3000", "\u2060lee", "ｌｅｅ", "le\u0301e", "lee lee"} {
		r := c.Do(c.Storage, "POST", "/sign-in-accounts", map[string]any{"username": name, "roles": []string{schemas.RoleLibrarian}})
		if r.Status != http.StatusUnprocessableEntity {
			t.Errorf("username %q: %d %s, want 422", name, r.Status, r.Body)
			continue
		}
		if _, params := errorParams(t, r); params["username"] != name {
			t.Errorf("username %q: the refusal names %v", name, params)
		}
	}
	if r := logIn(c, "ｌｅｅ", "a long enough password"); r.Status != http.StatusCreated {
		t.Errorf("signing in with full-width letters: %d %s, want 201", r.Status, r.Body)
	}
}

// TestTheOverrideHeaderOnce: X-Check-Out-Override sent twice is refused
// (400) like every other header of a check-out's write.
func TestTheOverrideHeaderOnce(t *testing.T) {
	t.Parallel()
	c, lib := lowCluster(t)
	before := c.Snapshot(t)
	body := fmt.Sprintf(`{"userId":%q,"itemId":%q,"loanDate":"2026-01-05T10:00:00Z","action":"checkedout","status":{"name":"Open"}}`,
		patronID(t, c, lib.Patrons[0]), itemID(t, c, lib.Items[0][0]))
	req, err := http.NewRequest(http.MethodPost, c.Storage.URL()+"/loan-storage/loans", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range c.HeadersWith(schemas.HeaderCheckOutOverride, "patronBlock", "X-Check-Out-Item-Version", "1") {
		req.Header.Set(k, v)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Add(schemas.HeaderCheckOutOverride, "itemLimitBlock")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusBadRequest {
		t.Errorf("%s twice: %d, want 400", schemas.HeaderCheckOutOverride, res.StatusCode)
	}
	if after := c.Snapshot(t); after != before {
		t.Fatalf("the refused write changed the records:\n%s\nwas\n%s", after, before)
	}
}

// TestARequestJoiningDuringACheckOut: a request joins an item's queue (at
// its end, naming no position) at the moment its first requester's
// check-out fills the first request and moves the queue up, round after
// round: whichever comes first, the joiner ends at position 1, never
// behind a gap.
func TestARequestJoiningDuringACheckOut(t *testing.T) {
	t.Parallel()
	c := harness.NewCluster(t, harness.Options{Circulations: 2, FeatureOn: true})
	rounds := scaled(10)
	lib := c.SetupLibrary(2*rounds, 1, 0)
	for round := range rounds {
		requester, joiner, item := lib.Patrons[2*round], lib.Patrons[2*round+1], lib.Items[2*round][0]
		c.Request(t, item, requester, 1)
		itemUUID, joinerID := itemID(t, c, item), patronID(t, c, joiner)
		var checkOut, join harness.Response
		var wg sync.WaitGroup
		start := make(chan struct{})
		wg.Add(2)
		go func() {
			defer wg.Done()
			<-start
			checkOut = c.CheckOut(round%2, item, requester)
		}()
		go func() {
			defer wg.Done()
			<-start
			join = c.Do(c.Storage, "POST", "/request-storage/requests", map[string]any{"requestType": "Hold",
				"requestDate": "2026-01-02T10:00:00Z", "requesterId": joinerID, "itemId": itemUUID,
				"status": "Open - Not yet filled", "fulfillmentPreference": "Hold Shelf"})
		}()
		close(start)
		wg.Wait()
		if checkOut.Status != http.StatusCreated || join.Status != http.StatusCreated {
			t.Fatalf("round %d: check-out %d %s, request %d %s", round, checkOut.Status, checkOut.Body, join.Status, join.Body)
		}
		var made struct{ ID string }
		join.Decode(t, &made)
		var stored map[string]any
		c.Do(c.Storage, "GET", "/request-storage/requests/"+made.ID, nil).Want(t, http.StatusOK).Decode(t, &stored)
		if stored["position"] != 1.0 {
			t.Fatalf("round %d: the request that joined is at position %v, want 1", round, stored["position"])
		}
	}
}
