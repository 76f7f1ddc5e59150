package integration

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/checkoutlock/integration-tests/harness"
	"github.com/checkoutlock/schemas"
	"github.com/checkoutlock/schemas/selfcheck"
	"github.com/checkoutlock/serverkit/auth"
)

// offlineTx is one transaction a kiosk stored while the library system
// could not answer: a check-out (11) or a check-in (09), no block.
type offlineTx struct {
	checkIn       bool
	patron, item  string
	at, due       time.Time // due: the nb due date, zero for none
	broken        []string  // the rules a check-out breaks, in schemas.OfflineRules' order
	wantOpenAfter bool
}

// message is the transaction as the kiosk sends it.
func (tx offlineTx) message() string {
	if tx.checkIn {
		return "09Y" + sip2UTC(tx.at) + strings.Repeat(" ", 18) + "APdesk|AOdiku|AB" + tx.item + "|AC|"
	}
	due := strings.Repeat(" ", 18)
	if !tx.due.IsZero() {
		due = sip2UTC(tx.due)
	}
	return "11NY" + sip2UTC(tx.at) + due + "AOdiku|AA" + tx.patron + "|AB" + tx.item + "|AC|"
}

// TestSIP2OfflineBatchIsRecordedOnce: a kiosk stored 30 transactions
// for 10 patrons while the library system could not answer: check-outs
// past the item limit, for a blocked patron, of an item another patron
// requested, and check-ins of what was lent. Sent while storage is still
// down, every one is answered "not done" (ok 0, the kiosk keeps it) and
// nothing is written. Sent when storage is back, twice over: every one is
// answered ok, every loan is written once, dated when it happened and
// due when the kiosk said, every broken rule is recorded on its loan,
// announced once in the check-out's event and written once in the lock
// history, and nothing is refused for a rule. A library that turns
// offline lending off tells its kiosks so in 98 and refuses what they
// send, writing nothing.
func TestSIP2OfflineBatchIsRecordedOnce(t *testing.T) {
	t.Parallel()
	c, lib, door := sip2Cluster(t, 1, 10, 3, 2, nil)
	ctx := context.Background()
	// Patron 1 is blocked from borrowing; patron 6 requested patron 5's
	// second item.
	c.Do(c.Storage, "POST", "/manualblocks", map[string]any{"userId": c.IDOf(t, "/users", "users", lib.Patrons[1]),
		"desc": "Card reported stolen", "borrowing": true}).Want(t, http.StatusCreated)
	requested := c.Request(t, lib.Items[5][1], lib.Patrons[6], 1)

	// The batch, in the order it happened, a minute apart, two hours ago.
	start := time.Now().Add(-2 * time.Hour).UTC().Truncate(time.Second)
	var batch []offlineTx
	at := func() time.Time { return start.Add(time.Duration(len(batch)) * time.Minute) }
	for p := range 10 {
		patron, items := lib.Patrons[p], lib.Items[p]
		var blocked []string
		if p == 1 {
			blocked = []string{schemas.CodeUserBlockedManually}
		}
		if p < 5 {
			// Three check-outs at a limit of two: the third past it.
			for i, item := range items {
				tx := offlineTx{patron: patron, item: item, at: at(), broken: blocked, wantOpenAfter: true}
				if p == 0 {
					tx.due = tx.at.Add(14 * 24 * time.Hour)
				}
				if i == 2 {
					tx.broken = append(slices.Clone(blocked), schemas.CodeItemLimitReached)
				}
				batch = append(batch, tx)
			}
			continue
		}
		// Two check-outs, then the first book back.
		first := offlineTx{patron: patron, item: items[0], at: at()}
		batch = append(batch, first)
		second := offlineTx{patron: patron, item: items[1], at: at(), wantOpenAfter: true}
		if p == 5 {
			second.broken = []string{schemas.CodeItemRequestedByAnotherPatron}
		}
		batch = append(batch, second, offlineTx{checkIn: true, item: items[0], at: at()})
	}
	if len(batch) != 30 {
		t.Fatalf("the batch has %d transactions, want 30", len(batch))
	}

	k := harness.DialSIP2(t, door.SIP2Addr)
	k.Login("user_id", "passw0rd")
	send := func(pass string, wantOK bool) {
		t.Helper()
		for _, tx := range batch {
			r := k.Send(tx.message())
			code := "12"
			if tx.checkIn {
				code = "10"
			}
			ok := strings.HasPrefix(r, code+"1")
			if !strings.HasPrefix(r, code) || ok != wantOK {
				t.Fatalf("%s: %s answered %q, want ok %v", pass, tx.message(), r, wantOK)
			}
		}
	}
	loans := func() int { return loanCount(t, c) }

	// Storage down: every transaction answered "not done", nothing written.
	c.Storage.Stop()
	send("storage down", false)
	c.Storage.Start()
	if n := loans(); n != 0 {
		t.Fatalf("%d loans written while storage was down, want none", n)
	}

	// Storage back: the batch, twice; the second time with other sequence
	// numbers (a status between), as a kiosk sending its store again in
	// a later session numbers it: not the same messages, the same
	// transactions, recorded once by what they are.
	send("first send", true)
	k.Send("9900302.00")
	send("sent again", true)

	checkOuts := 0
	for _, tx := range batch {
		if tx.checkIn {
			continue
		}
		checkOuts++
		var n int
		var loanDate, dueDate, status string
		var broken []string
		err := c.DB.QueryRow(ctx, fmt.Sprintf(`SELECT count(*) OVER (), l.jsonb ->> 'loanDate', l.jsonb ->> 'dueDate', l.status_name,
			ARRAY(SELECT jsonb_array_elements_text(coalesce(l.jsonb #> '{offline,brokenRules}', '[]')))
			FROM %[1]s.loan l JOIN %[1]s.item i ON i.id = l.item_id WHERE i.barcode = $1`, c.Schema), tx.item).
			Scan(&n, &loanDate, &dueDate, &status, &broken)
		if err != nil {
			t.Fatalf("the loan of %s: %v", tx.item, err)
		}
		if n != 1 {
			t.Errorf("%s: %d loans, want one", tx.item, n)
		}
		if want := schemas.FormatTime(tx.at); loanDate != want {
			t.Errorf("%s: lent %s, want %s (when the kiosk lent it)", tx.item, loanDate, want)
		}
		if !tx.due.IsZero() && dueDate != schemas.FormatTime(tx.due) {
			t.Errorf("%s: due %s, want %s (the kiosk's nb due date)", tx.item, dueDate, tx.due.Format(time.RFC3339))
		}
		if want := map[bool]string{true: "Open", false: "Closed"}[tx.wantOpenAfter]; status != want {
			t.Errorf("%s: the loan is %s, want %s", tx.item, status, want)
		}
		if !slices.Equal(broken, tx.broken) && !(len(broken) == 0 && len(tx.broken) == 0) {
			t.Errorf("%s: brokenRules %v, want %v", tx.item, broken, tx.broken)
		}
	}
	if n := loans(); n != checkOuts {
		t.Errorf("%d loans, want %d: one for each check-out, however often sent", n, checkOuts)
	}
	// The check-ins closed their loans when they happened.
	for _, tx := range batch {
		if !tx.checkIn {
			continue
		}
		var returned string
		if err := c.DB.QueryRow(ctx, fmt.Sprintf(`SELECT l.jsonb ->> 'returnDate' FROM %[1]s.loan l JOIN %[1]s.item i ON i.id = l.item_id
			WHERE i.barcode = $1`, c.Schema), tx.item).Scan(&returned); err != nil {
			t.Fatal(err)
		}
		if want := schemas.FormatTime(tx.at); returned != want {
			t.Errorf("%s: returned %s, want %s", tx.item, returned, want)
		}
	}
	// Announced once each: the check-out's event carries what it broke.
	var events, eventsBroken int
	if err := c.DB.QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE jsonb_array_length(e.new #> '{offline,brokenRules}') > 0)
		FROM circulation_storage.outbox_commit oc, unnest(oc.payload) e
		WHERE oc.tenant_id = $1 AND e.kind = 'check-out' AND e.new ? 'offline'`, c.Tenant).Scan(&events, &eventsBroken); err != nil {
		t.Fatal(err)
	}
	brokenLoans := 0
	for _, tx := range batch {
		if len(tx.broken) > 0 {
			brokenLoans++
		}
	}
	if events != checkOuts || eventsBroken != brokenLoans {
		t.Errorf("%d check-out events of loans made offline, %d of them naming broken rules; want %d and %d", events, eventsBroken,
			checkOuts, brokenLoans)
	}
	// The operator's history: one line for each loan that broke a rule,
	// in the console's words.
	var page struct {
		Events []struct {
			Type, LoanID, What, ByName string
			BrokenRules                []string
		}
	}
	console := map[string]string{schemas.HeaderTenant: c.Tenant, schemas.HeaderToken: c.Token(schemas.RoleOperator)}
	c.DoWith(c.Circulations[0], "GET", "/circulation/check-out-locks/history?type=lent_offline&limit=100", nil, console).
		Want(t, http.StatusOK).Decode(t, &page)
	if len(page.Events) != brokenLoans {
		t.Errorf("the history has %d lent_offline lines, want %d", len(page.Events), brokenLoans)
	}
	for _, e := range page.Events {
		if e.LoanID == "" || e.What != schemas.OfflineWords(e.BrokenRules) || !strings.HasPrefix(e.What, "lent offline ") ||
			e.ByName != "kiosk (user_id)" {
			t.Errorf("a history line %+v", e)
		}
	}
	// The desk finds the loans made offline (docs/operations.md), each
	// with what it broke.
	var lent struct {
		Loans []struct {
			Offline struct{ BrokenRules []string }
		}
		TotalRecords int
	}
	librarian := map[string]string{schemas.HeaderTenant: c.Tenant, schemas.HeaderToken: c.Token(schemas.RoleLibrarian)}
	c.DoWith(c.Circulations[0], "GET", `/circulation/loans?limit=100&query=offline.transactionDate=""`, nil, librarian).
		Want(t, http.StatusOK).Decode(t, &lent)
	pastARule := 0
	for _, l := range lent.Loans {
		if len(l.Offline.BrokenRules) > 0 {
			pastARule++
		}
	}
	if lent.TotalRecords != checkOuts || pastARule != brokenLoans {
		t.Errorf("the loans made offline: %d, %d past a rule; want %d and %d", lent.TotalRecords, pastARule, checkOuts, brokenLoans)
	}
	// The desk's page shows each, in words.
	var desk struct {
		Patrons []struct {
			Loans []struct{ ItemBarcode, Offline string }
		}
	}
	c.DoWith(c.Circulations[0], "GET", "/circulation/patron-loans?patron="+lib.Patrons[1], nil, librarian).
		Want(t, http.StatusOK).Decode(t, &desk)
	shown := map[string]string{}
	for _, p := range desk.Patrons {
		for _, l := range p.Loans {
			shown[l.ItemBarcode] = l.Offline
		}
	}
	for i, want := range []string{"lent offline to a patron blocked from borrowing", "lent offline to a patron blocked from borrowing",
		"lent offline to a patron blocked from borrowing, past the item limit"} {
		if got := shown[lib.Items[1][i]]; got != want {
			t.Errorf("the desk shows %s as %q, want %q", lib.Items[1][i], got, want)
		}
	}
	// Patron 6's request still waits; the lock is no one's.
	var reqStatus string
	if err := c.DB.QueryRow(ctx, fmt.Sprintf(`SELECT status FROM %s.request WHERE id = $1`, c.Schema), requested).Scan(&reqStatus); err != nil {
		t.Fatal(err)
	}
	if reqStatus != "Open - Awaiting pickup" {
		t.Errorf("patron 6's request is %q after the offline loan to patron 5, want it still open", reqStatus)
	}
	c.CheckInvariants(t, harness.Invariants{})

	// Offline lending off: 98 says so within a second, and a check-out
	// the kiosk made offline is refused for the desk, writing nothing.
	c.Do(c.Storage, "POST", "/settings/entries", map[string]any{"scope": selfcheck.Scope, "key": selfcheck.Key,
		"value": map[string]any{"offlineLending": selfcheck.OfflineOff}}).Want(t, http.StatusCreated)
	harness.Poll(time.Second, 50*time.Millisecond, func() bool {
		s := k.Send("9900302.00")
		return len(s) > 7 && s[7] == 'N'
	})
	if s := k.Send("9900302.00"); len(s) < 8 || s[2:8] != "YYYYNN" {
		t.Errorf("98 with offline lending off: %q, want on line, offline ok N", s)
	}
	tx := offlineTx{patron: lib.Patrons[9], item: lib.Items[9][2], at: time.Now().Add(-time.Hour)}
	r := k.Send(tx.message())
	if !strings.HasPrefix(r, "120") || !strings.Contains(harness.SIP2Field(r, "AF"), "offline") {
		t.Errorf("an offline check-out where the library takes none: %q", r)
	}
	if n := loans(); n != checkOuts {
		t.Errorf("%d loans after a refused offline check-out, want %d", n, checkOuts)
	}
}

// TestSIP2OfflineThirdPartyStrings: other projects' check-outs marked no
// block, sent to the real door. A PHP SIP2 tester's 11 (no block Y, a
// transaction date of 2018 and an nb due date of 2019) is a stored
// check-out older than the door takes: refused with a screen message,
// nothing written. JSIP2's (NatLibFi's Java SIP2 client) 11 with no block
// Y, fee acknowledged and cancel, as its test writes it, cancels a
// check-in (SIP2's undoing of one that did not complete): refused for the
// desk, nothing lent; its layout with this library's
// barcodes, two hours ago, no cancel, is recorded, dated then and due when
// the kiosk said, once its PIN is the patron's (refused while it is not);
// stored again with another date, it finds the patron's loan and answers
// ok, lending nothing twice. One whose nb due date is before its
// transaction is recorded due as the loan policy says, and the door's log
// tells the desk the date the patron was shown; refused (a wrong PIN), it
// has no such line.
func TestSIP2OfflineThirdPartyStrings(t *testing.T) {
	t.Parallel()
	c, lib, door := sip2Cluster(t, 1, 1, 2, 0, nil)
	k := harness.DialSIP2(t, door.SIP2Addr)
	k.Login("user_id", "passw0rd")
	loans := func() int { return loanCount(t, c) }
	// The PHP tester's, as it is (no error detection).
	r := k.Raw("11NY20180208    16200020190208    162000AOqut|AAmatty|AB123|ACsecret|BIN")
	if !strings.HasPrefix(r, "120") || !strings.Contains(harness.SIP2Field(r, "AF"), "too old") {
		t.Errorf("a 2018 offline check-out: %q, want refused as too old", r)
	}
	// JSIP2's, as it is, checksum and all.
	r = k.Raw("11NY20210814    08345520210814    083455AOinstitutionId|AApatronId|ABitemId|ACterminalPassword|ADpatronPassword|BOY|BIY|AY0AZD782")
	if !strings.HasPrefix(r, "120") || !strings.Contains(harness.SIP2Field(r, "AF"), "cancel") {
		t.Errorf("JSIP2's check-out with cancel: %q, want refused", r)
	}
	// JSIP2's layout, with this library's barcodes and dates.
	at := time.Now().Add(-2 * time.Hour).UTC().Truncate(time.Second)
	due := at.Add(7 * 24 * time.Hour)
	jsip2 := func(item, cancel string) string {
		return "11NY" + sip2UTC(at) + sip2UTC(due) + "AOinstitutionId|AA" + lib.Patrons[0] + "|AB" + item +
			"|ACterminalPassword|ADpatronPassword|BOY|BI" + cancel + "|"
	}
	// Its PIN is checked: wrong while the patron has none, and right once
	// it is theirs. Refused, an nb due date before the loan is no loan's:
	// the desk is not told of it (below).
	if r := k.Send(jsip2(lib.Items[0][0], "N")); !strings.HasPrefix(r, "120") || harness.SIP2Field(r, "AF") != "Wrong PIN" {
		t.Fatalf("JSIP2's layout with a PIN the patron does not have: %q, want refused, Wrong PIN", r)
	}
	refusedEarly := sip2UTC(at.Add(-48 * time.Hour))
	if r := k.Send("11NY" + sip2UTC(at) + refusedEarly + "AOinstitutionId|AA" + lib.Patrons[0] + "|AB" + lib.Items[0][1] +
		"|ACterminalPassword|ADpatronPassword|BON|BIN|"); !strings.HasPrefix(r, "120") || harness.SIP2Field(r, "AF") != "Wrong PIN" {
		t.Fatalf("an offline check-out due before it was lent, with a PIN the patron does not have: %q, want refused, Wrong PIN", r)
	}
	c.Do(c.Storage, "POST", "/patron-pin", map[string]any{"id": c.IDOf(t, "/users", "users", lib.Patrons[0]), "pin": "patronPassword"}).
		Want(t, http.StatusCreated)
	if r := k.Send(jsip2(lib.Items[0][1], "Y")); !strings.HasPrefix(r, "120") {
		t.Errorf("JSIP2's layout with cancel: %q, want refused", r)
	}
	if n := loans(); n != 0 {
		t.Fatalf("%d loans after refused check-outs, want none", n)
	}
	if r := k.Send(jsip2(lib.Items[0][0], "N")); !strings.HasPrefix(r, "121") {
		t.Fatalf("JSIP2's layout, no block: %q, want recorded", r)
	}
	var loanDate, dueDate string
	if err := c.DB.QueryRow(context.Background(), fmt.Sprintf(`SELECT l.jsonb ->> 'loanDate', l.jsonb ->> 'dueDate'
		FROM %[1]s.loan l JOIN %[1]s.item i ON i.id = l.item_id WHERE i.barcode = $1`, c.Schema), lib.Items[0][0]).Scan(&loanDate, &dueDate); err != nil {
		t.Fatal(err)
	}
	if loanDate != schemas.FormatTime(at) || dueDate != schemas.FormatTime(due) {
		t.Errorf("the loan: lent %s due %s, want %s and %s", loanDate, dueDate, at.Format(time.RFC3339), due.Format(time.RFC3339))
	}
	// The same book stored again with another date (the kiosk did not
	// see the first reply): the patron holds it, ok, no second loan.
	at = at.Add(time.Minute)
	if r := k.Send(jsip2(lib.Items[0][0], "N")); !strings.HasPrefix(r, "121") {
		t.Errorf("an offline check-out of a book already on loan to the patron: %q, want ok", r)
	}
	if n := loans(); n != 1 {
		t.Errorf("%d loans, want 1", n)
	}
	// An nb due date before the book was lent (a kiosk's clock or
	// arithmetic gone wrong): the loan is recorded due as its policy
	// says, and the desk is told the date the patron saw is not kept.
	early := sip2UTC(at.Add(-24 * time.Hour))
	if r := k.Send("11NY" + sip2UTC(at) + early + "AOinstitutionId|AA" + lib.Patrons[0] + "|AB" + lib.Items[0][1] +
		"|ACterminalPassword|ADpatronPassword|BON|BIN|"); !strings.HasPrefix(r, "121") {
		t.Fatalf("an offline check-out due before it was lent: %q, want recorded", r)
	}
	if err := c.DB.QueryRow(context.Background(), fmt.Sprintf(`SELECT l.jsonb ->> 'dueDate'
		FROM %[1]s.loan l JOIN %[1]s.item i ON i.id = l.item_id WHERE i.barcode = $1`, c.Schema), lib.Items[0][1]).Scan(&dueDate); err != nil {
		t.Fatal(err)
	}
	if policyDue := schemas.FormatTime(at.AddDate(0, 0, 21)); dueDate != policyDue {
		t.Errorf("due %s after an nb due date before the loan, want %s (the loan policy's three weeks)", dueDate, policyDue)
	}
	if !harness.Poll(10*time.Second, 20*time.Millisecond, func() bool {
		return strings.Contains(door.Log(), `"msg":"an offline check-out's nb due date is not taken`) &&
			strings.Contains(door.Log(), `"nb_due_date":"`+early+`"`)
	}) {
		t.Errorf("the door's log does not tell the desk of the nb due date it did not take:\n%s", door.Log())
	}
	// The log is in the order it was written: the refused check-out's
	// line would be there by now.
	if strings.Contains(door.Log(), `"nb_due_date":"`+refusedEarly+`"`) {
		t.Errorf("the door's log tells the desk of an nb due date not taken for a check-out it refused:\n%s", door.Log())
	}
}

// TestAnOfflineCheckOutNeedsItsPermission: over HTTP, a check-out that
// says it was made offline takes circulation.check-out-by-barcode.offline.post
// beside the check-out's own permission: without it, 422 naming it and
// nothing written; at storage, the offline override writes only a loan
// that says it was made offline, dated then; a self-check machine's
// account holds the permission, and its check-out is dated when it
// happened, recording that it broke nothing.
func TestAnOfflineCheckOutNeedsItsPermission(t *testing.T) {
	t.Parallel()
	c := harness.NewCluster(t, harness.Options{Circulations: 1, FeatureOn: true})
	lib := c.SetupLibrary(1, 1, 0)
	at := time.Now().Add(-3 * time.Hour).UTC().Truncate(time.Millisecond)
	body := map[string]any{"itemBarcode": lib.Items[0][0], "userBarcode": lib.Patrons[0], "servicePointId": harness.ServicePoint,
		"offline": map[string]any{"transactionDate": schemas.FormatTime(at)}}
	checkOut, _ := schemas.PermissionFor(schemas.ServiceCirculation, "POST", "/circulation/check-out-by-barcode")
	tok, err := auth.Mint(harness.Secret(), auth.Claims{Tenant: c.Tenant, UserID: uuid.NewString(), Permissions: []string{checkOut}}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	r := c.DoWith(c.Circulations[0], "POST", "/circulation/check-out-by-barcode", body,
		map[string]string{schemas.HeaderTenant: c.Tenant, schemas.HeaderToken: tok})
	if code, params := envelopeError(t, r); r.Status != http.StatusUnprocessableEntity || code != schemas.CodeInsufficientOverridePermissions ||
		params["missingPermissions"] != schemas.PermissionCheckOutOffline {
		t.Errorf("an offline check-out without its permission: %d %s %v, want 422 naming %s", r.Status, code, params, schemas.PermissionCheckOutOffline)
	}
	if n := openLoans(t, c, lib.Patrons[0]); n != 0 {
		t.Fatalf("%d loans after a refused offline check-out", n)
	}
	// At storage, the override that lifts every rule writes only a loan
	// that says it was made offline, dated then: one that does not is
	// refused, whoever calls, and nothing is written.
	for name, offline := range map[string]any{"no offline": nil, "another date": map[string]any{"transactionDate": schemas.FormatTime(at.Add(-time.Hour))}} {
		loan := map[string]any{"userId": patronID(t, c, lib.Patrons[0]), "itemId": itemID(t, c, lib.Items[0][0]), "action": "checkedout",
			"status": map[string]any{"name": schemas.LoanOpen}, "loanDate": schemas.FormatTime(at),
			"dueDate": schemas.FormatTime(at.Add(time.Hour))}
		if offline != nil {
			loan["offline"] = offline
		}
		r := c.DoWith(c.Storage, "POST", "/loan-storage/loans", loan, c.HeadersWith(schemas.HeaderItemVersion, "1",
			schemas.HeaderCheckOutOverride, "offline"))
		if code, _ := envelopeError(t, r); r.Status != http.StatusUnprocessableEntity || code != schemas.CodeValidation {
			t.Errorf("%s: a write past every rule of a loan not made offline: %d %s, want 422 %s", name, r.Status, code, schemas.CodeValidation)
		}
	}
	if n := openLoans(t, c, lib.Patrons[0]); n != 0 {
		t.Fatalf("%d loans after refused writes at storage", n)
	}
	var loan struct {
		LoanDate string
		Offline  struct {
			TransactionDate string
			BrokenRules     []string
		}
	}
	c.DoWith(c.Circulations[0], "POST", "/circulation/check-out-by-barcode", body,
		map[string]string{schemas.HeaderTenant: c.Tenant, schemas.HeaderToken: c.Token(schemas.RoleSelfCheck)}).
		Want(t, http.StatusCreated).Decode(t, &loan)
	if want := schemas.FormatTime(at); loan.LoanDate != want || loan.Offline.TransactionDate != want ||
		loan.Offline.BrokenRules == nil || len(loan.Offline.BrokenRules) != 0 {
		t.Errorf("a self-check machine's offline check-out: %+v, want lent %s, breaking nothing", loan, want)
	}
}

// loanCount counts the tenant's loans, open or closed, in the database.
func loanCount(t *testing.T, c *harness.Cluster) int {
	t.Helper()
	var n int
	if err := c.DB.QueryRow(context.Background(), fmt.Sprintf(`SELECT count(*) FROM %s.loan`, c.Schema)).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}
