package integration

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/checkoutlock/integration-tests/harness"
	"github.com/checkoutlock/schemas"
	"github.com/checkoutlock/serverkit/auth"
)

// sip2UTC is t as SIP2 writes a date in UTC.
func sip2UTC(t time.Time) string {
	t = t.UTC()
	return t.Format("20060102") + "   Z" + t.Format("150405")
}

// TestSIP2OfflineCheckInsAreDatedWhenTheyHappened: a kiosk that took
// books back while the library system was off line sends its check-ins
// later, marked no block (Y) with the transaction's own date: each loan
// is closed at that date, not when the message came, so that a book
// returned on time is not counted overdue; one the kiosk stored longer
// ago than the door takes (SIP2_OFFLINE_WITHIN, 72 hours) is refused with
// a screen message for the desk and changes nothing, as is one of an
// item the library does not know.
func TestSIP2OfflineCheckInsAreDatedWhenTheyHappened(t *testing.T) {
	t.Parallel()
	c, lib, door := sip2Cluster(t, 1, 1, 3, 0, nil)
	librarian := map[string]string{schemas.HeaderTenant: c.Tenant, schemas.HeaderToken: c.Token(schemas.RoleLibrarian)}
	patron, items := lib.Patrons[0], lib.Items[0]
	lent := time.Now().Add(-100 * time.Hour).UTC().Truncate(time.Second)
	for _, it := range items {
		c.DoWith(c.Circulations[0], "POST", "/circulation/check-out-by-barcode", map[string]any{"itemBarcode": it, "userBarcode": patron,
			"servicePointId": harness.ServicePoint, "loanDate": lent.Format(time.RFC3339)}, librarian).Want(t, http.StatusCreated)
	}
	k := harness.DialSIP2(t, door.SIP2Addr)
	k.Login("user_id", "passw0rd")
	offline := func(item string, at time.Time) string {
		return k.Send("09Y" + sip2UTC(at) + "                  APdesk|AOdiku|AB" + item + "|AC|")
	}
	returned := func(item string) (status, at string) {
		t.Helper()
		err := c.DB.QueryRow(context.Background(), fmt.Sprintf(`SELECT l.status_name, coalesce(l.jsonb ->> 'returnDate', '')
			FROM %[1]s.loan l JOIN %[1]s.item i ON i.id = l.item_id WHERE i.barcode = $1`, c.Schema), item).Scan(&status, &at)
		if err != nil {
			t.Fatal(err)
		}
		return status, at
	}
	// Taken back two hours ago, sent now: closed then.
	when := time.Now().Add(-2 * time.Hour).UTC().Truncate(time.Second)
	if r := offline(items[0], when); !strings.HasPrefix(r, "101") {
		t.Fatalf("an offline check-in: %q", r)
	}
	if status, at := returned(items[0]); status != "Closed" || at != schemas.FormatTime(when) {
		t.Errorf("the loan after an offline check-in of %s: %s returned %q, want Closed returned %s", when, status, at, when.Format(time.RFC3339))
	}
	// Sent again (the kiosk did not see the reply): refused, the loan
	// still returned when it was.
	offline(items[0], when)
	if status, at := returned(items[0]); status != "Closed" || at != schemas.FormatTime(when) {
		t.Errorf("the loan after the offline check-in sent again: %s returned %q", status, at)
	}
	// Taken back four days ago: too old for the door; nothing changes.
	r := offline(items[1], time.Now().Add(-96*time.Hour))
	if !strings.HasPrefix(r, "100") || !strings.Contains(harness.SIP2Field(r, "AF"), "too old") {
		t.Errorf("an offline check-in older than the door takes: %q", r)
	}
	if status, _ := returned(items[1]); status != "Open" {
		t.Errorf("the loan after a refused offline check-in: %s, want Open", status)
	}
	// An item the library does not know: refused, with a reason.
	if r := offline("no-such-item", when); !strings.HasPrefix(r, "100") || harness.SIP2Field(r, "AF") == "" {
		t.Errorf("an offline check-in of an unknown item: %q", r)
	}
	// A check-in that is not marked offline is dated now.
	k.Send(checkInMsg(items[2]))
	if status, at := returned(items[2]); status != "Closed" || at < time.Now().Add(-time.Minute).UTC().Format(time.RFC3339) {
		t.Errorf("a live check-in: %s returned %q, want now", status, at)
	}
}

// TestALateCheckInNeverClosesANewerLoan: a book on loan to P dropped in a
// sorter while the sorter was off line (T1), checked in at the desk (T2)
// and lent to Q (T3); the sorter reconnects and sends its check-in dated
// T1. Q's loan stays open and the item checked out; the desk sees the
// late return in the lock history (returned_before_loan, naming Q's loan,
// in the console's words) and an event announces it; the sorter is told
// it is done with it (ok 1), so it keeps nothing to send again, and sent
// again it is answered the same, writing nothing more. The same check-in
// over HTTP is 422 RETURNED_BEFORE_LOAN, nothing changed; one dated within
// a minute before its loan closes it, returned when it was lent. A
// kiosk's check-out made offline at T1 of the item lent to Q since is
// refused (ok 0, for the desk): Q's loan stays open, nothing is written.
func TestALateCheckInNeverClosesANewerLoan(t *testing.T) {
	t.Parallel()
	c, lib, door := sip2Cluster(t, 1, 2, 2, 0, nil)
	librarian := map[string]string{schemas.HeaderTenant: c.Tenant, schemas.HeaderToken: c.Token(schemas.RoleLibrarian)}
	p, q, book := lib.Patrons[0], lib.Patrons[1], lib.Items[0][0]
	c.CheckOut(0, book, p).Want(t, http.StatusCreated)
	dropped := time.Now().Add(-10 * time.Minute).UTC().Truncate(time.Second)
	c.CheckIn(0, book).Want(t, http.StatusOK)
	var lent struct{ ID, LoanDate string }
	c.CheckOut(0, book, q).Want(t, http.StatusCreated).Decode(t, &lent)
	state := func() string {
		t.Helper()
		var s string
		err := c.DB.QueryRow(context.Background(), fmt.Sprintf(`SELECT i.jsonb #>> '{status,name}' || ' ' || i.version || ' ' ||
			string_agg(l.status_name || ':' || coalesce(l.jsonb ->> 'returnDate', '-'), ',' ORDER BY l.jsonb ->> 'loanDate')
			FROM %[1]s.item i JOIN %[1]s.loan l ON l.item_id = i.id WHERE i.barcode = $1 GROUP BY i.id, i.jsonb, i.version`, c.Schema), book).Scan(&s)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	recorded := func() (lines, events int) {
		t.Helper()
		if err := c.DB.QueryRow(context.Background(), `SELECT
			(SELECT count(*) FROM circulation_storage.check_out_lock_event WHERE tenant_id = $1 AND type = 'returned_before_loan' AND loan_id = $2::uuid),
			(SELECT count(*) FROM circulation_storage.outbox WHERE tenant_id = $1 AND type = 'RETURNED_BEFORE_LOAN' AND data #>> '{new,loanId}' = $2::text)`,
			c.Tenant, lent.ID).Scan(&lines, &events); err != nil {
			t.Fatal(err)
		}
		return lines, events
	}
	before := state()
	if !strings.HasPrefix(before, "Checked out ") || !strings.HasSuffix(before, ",Open:-") {
		t.Fatalf("before the sorter's check-in: %s, want the item checked out on Q's open loan", before)
	}
	k := harness.DialSIP2(t, door.SIP2Addr)
	k.Login("user_id", "passw0rd")
	// Sent again as it was (its reply lost): the same transaction.
	sealed := k.Seal("09Y" + sip2UTC(dropped) + "                  APsorter|AOdiku|AB" + book + "|AC|")
	for range 2 {
		r := k.Raw(sealed)
		if !strings.HasPrefix(r, "101") || harness.SIP2Field(r, "AF") != "Returned while it was already back: recorded for the desk" {
			t.Fatalf("the sorter's late check-in: %q, want ok 1 saying it is recorded for the desk", r)
		}
		if after := state(); after != before {
			t.Fatalf("after the sorter's late check-in: %s, want %s (nothing changed)", after, before)
		}
		if lines, events := recorded(); lines != 1 || events != 1 {
			t.Fatalf("the late check-in recorded in %d lines of the history and %d events, want 1 and 1", lines, events)
		}
	}
	// P's check-out made offline at the sorter's time, sent now: the item
	// is Q's since.
	if r := k.Send("11NY" + sip2UTC(dropped) + strings.Repeat(" ", 18) + "AOdiku|AA" + p + "|AB" + book + "|AC|"); !strings.HasPrefix(r, "120") ||
		harness.SIP2Field(r, "AF") == "" {
		t.Fatalf("an offline check-out of the item lent to Q since: %q, want ok 0 with a screen message", r)
	}
	if after := state(); after != before {
		t.Fatalf("after an offline check-out of the item lent to Q since: %s, want %s (nothing changed)", after, before)
	}
	var page struct {
		Events []struct{ Type, LoanID, What string }
	}
	c.DoWith(c.Circulations[0], "GET", "/circulation/check-out-locks/history?type=returned_before_loan", nil,
		c.HeadersWith(schemas.HeaderToken, c.Token(schemas.RoleOperator))).Want(t, http.StatusOK).Decode(t, &page)
	if len(page.Events) != 1 || page.Events[0].LoanID != lent.ID || page.Events[0].What != schemas.ReturnedBeforeLoanWords {
		t.Fatalf("the console's history of late returns: %+v, want Q's loan %s, %q", page.Events, lent.ID, schemas.ReturnedBeforeLoanWords)
	}
	// The desk's own client, dated as the sorter was: refused, nothing changed.
	res := c.DoWith(c.Circulations[0], "POST", "/circulation/check-in-by-barcode", map[string]any{"itemBarcode": book,
		"servicePointId": harness.ServicePoint, "checkInDate": dropped.Format(time.RFC3339)}, librarian)
	res.Want(t, http.StatusUnprocessableEntity)
	if codes := res.ErrorCodes(); len(codes) != 1 || codes[0] != schemas.CodeReturnedBeforeLoan {
		t.Fatalf("a late check-in over HTTP: %v, want %s", codes, schemas.CodeReturnedBeforeLoan)
	}
	if after := state(); after != before {
		t.Fatalf("after the late check-in over HTTP: %s, want %s", after, before)
	}
	// Dated half a minute before Q's loan (a desk clock behind the
	// service's): the loan's own return, closed as returned when lent.
	loanDate, err := time.Parse(time.RFC3339Nano, lent.LoanDate)
	if err != nil {
		t.Fatal(err)
	}
	c.DoWith(c.Circulations[0], "POST", "/circulation/check-in-by-barcode", map[string]any{"itemBarcode": book,
		"servicePointId": harness.ServicePoint, "checkInDate": loanDate.Add(-30 * time.Second).Format(time.RFC3339Nano)}, librarian).
		Want(t, http.StatusOK)
	if after, want := state(), ",Closed:"+schemas.FormatTime(loanDate); !strings.HasPrefix(after, "Available ") || !strings.HasSuffix(after, want) {
		t.Fatalf("after a check-in dated half a minute before the loan: %s, want Available and the loan closed %s", after, want)
	}
}

// TestANoBlockCheckOutIsOfflineOnlyWhenItWas: where PINs are required, a
// check-out marked offline (no block) but dated while the door saw the
// kiosk on line (logged in here, the library system answering) is judged
// as a live one: without the patron's PIN or with a wrong one it is
// refused and writes nothing; with the right one it is a live loan, not
// one made offline, due as its policy says (the kiosk's nb due date told
// to the desk in the door's log). Dated before the kiosk's login here (it
// was cut off), it is recorded as made offline without a PIN, and refused
// with a wrong one. Made while the door saw the library system not answer (the kiosk
// still logged in), it is made offline. A door restarted in between still
// knows, from storage, when it saw the kiosk on line and when not: a
// check-out dated in the kiosk's time on line before the restart is
// judged live, one dated inside the outage is made offline. The machine's
// name (its location code) is on the loan made offline and on the spans
// of its presence. The door says offline ok in 98 only once it heard the
// library say so.
func TestANoBlockCheckOutIsOfflineOnlyWhenItWas(t *testing.T) {
	t.Parallel()
	// A second's grace, the door's and storage's: the kiosk is on line
	// from a second after its login.
	c := harness.NewCluster(t, harness.Options{Circulations: 1, FeatureOn: true, StorageEnv: []string{"KIOSK_OFFLINE_GRACE=1s"}})
	lib := c.SetupLibrary(1, 6, 0)
	kiosk := c.Account(t, "user_id", "Kiosk", "One", schemas.RoleSelfCheck, "passw0rd")
	door := c.StartSIP2(t, 0, map[string]any{"patronPin": "required"}, "SIP2_OFFLINE_GRACE=1s", "SIP2_PRESENCE_EVERY=100ms")
	patron, items := lib.Patrons[0], lib.Items[0]
	c.Do(c.Storage, "POST", "/patron-pin", map[string]any{"id": c.IDOf(t, "/users", "users", patron), "pin": "7319"}).
		Want(t, http.StatusCreated)
	k := harness.DialSIP2(t, door.SIP2Addr)
	// pastGrace waits until a transaction dated now (to the second) is
	// past the grace after what the door saw just before.
	pastGrace := func() {
		t.Helper()
		then := time.Now().Add(2100 * time.Millisecond)
		if !harness.Poll(5*time.Second, 50*time.Millisecond, func() bool { return time.Now().After(then) }) {
			t.Fatal("the clock did not move")
		}
	}
	login := func() {
		t.Helper()
		k.LoginAt("user_id", "passw0rd", "entrance-1")
		pastGrace()
	}
	login()
	noBlock := func(item string, at time.Time, pin string) string {
		ad := ""
		if pin != "" {
			ad = "AD" + pin + "|"
		}
		return k.Send("11NY" + sip2UTC(at) + strings.Repeat(" ", 18) + "AOdiku|AA" + patron + "|AB" + item + "|AC|" + ad)
	}
	loansAre := func(after string, live, offline int) {
		t.Helper()
		var gotLive, gotOffline int
		if err := c.DB.QueryRow(context.Background(), fmt.Sprintf(`SELECT count(*) FILTER (WHERE NOT jsonb ? 'offline'),
			count(*) FILTER (WHERE jsonb ? 'offline') FROM %s.loan`, c.Schema)).Scan(&gotLive, &gotOffline); err != nil {
			t.Fatal(err)
		}
		if gotLive != live || gotOffline != offline {
			t.Fatalf("after %q: %d live loans and %d made offline, want %d and %d", after, gotLive, gotOffline, live, offline)
		}
	}
	want := func(r, prefix, message string, live, offline int) {
		t.Helper()
		if !strings.HasPrefix(r, prefix) || harness.SIP2Field(r, "AF") != message {
			t.Fatalf("answered %q, want %s… with %q", r, prefix, message)
		}
		loansAre(r, live, offline)
	}
	now := time.Now()
	// Made now, while on line: live, and a live check-out needs the PIN.
	want(noBlock(items[0], now, ""), "120", "Please enter your PIN", 0, 0)
	want(noBlock(items[0], now, "0000"), "120", "Wrong PIN", 0, 0)
	// Lent live, it is due as its policy says: the nb due date the kiosk
	// gave is told to the desk, beside the loan's, on a line that names
	// the connection's tenant and address.
	nbDue := sip2UTC(now.Add(48 * time.Hour))
	r := k.Send("11NY" + sip2UTC(now) + nbDue + "AOdiku|AA" + patron + "|AB" + items[0] + "|AC|AD7319|")
	want(r, "121", harness.SIP2Field(r, "AF"), 1, 0)
	if !harness.Poll(10*time.Second, 20*time.Millisecond, func() bool {
		for _, line := range strings.Split(door.Log(), "\n") {
			if strings.Contains(line, `"msg":"a check-out marked offline was lent as a live one`) &&
				strings.Contains(line, `"item":"`+items[0]+`"`) && strings.Contains(line, `"nb_due_date":"`+nbDue+`"`) &&
				strings.Contains(line, `"due":"`) && strings.Contains(line, `"tenant":"`+c.Tenant+`"`) &&
				strings.Contains(line, `"peer":"127.0.0.1"`) {
				return true
			}
		}
		return false
	}) {
		t.Errorf("the door's log does not tell the desk of the nb due date a live loan did not take:\n%s", door.Log())
	}
	// Made ten minutes ago, before the kiosk logged in here: made offline,
	// without a PIN; a wrong PIN sent with it refuses it.
	before := now.Add(-10 * time.Minute)
	want(noBlock(items[1], before, "0000"), "120", "Wrong PIN", 1, 0)
	want(noBlock(items[1], before, ""), "121", "Recorded: lent while offline", 1, 1)
	// The library system stops answering while the kiosk stays logged
	// in: what the kiosk made while the door saw it down is made
	// offline; what it makes once the door sees it answer again is live.
	onLine := func(want byte) time.Time {
		t.Helper()
		var at time.Time
		if !harness.Poll(10*time.Second, 20*time.Millisecond, func() bool {
			at = time.Now()
			r := k.Send("9900302.00")
			return len(r) > 2 && r[2] == want
		}) {
			t.Fatalf("the door's status never said on line %c", want)
		}
		return at
	}
	c.Storage.Stop()
	down := onLine('N')
	// The kiosk polls on for two seconds, told off line each time: the
	// door sees the library system down throughout.
	for until := down.Add(2 * time.Second); time.Now().Before(until); {
		if r := k.Send("9900302.00"); len(r) < 3 || r[2] != 'N' {
			t.Fatalf("the status while storage is stopped: %q, want off line", r)
		}
	}
	c.Storage.Start()
	onLine('Y')
	want(noBlock(items[2], down.Add(time.Second), ""), "121", "Recorded: lent while offline", 1, 2)
	pastGrace()
	seenOnLine := time.Now()
	want(noBlock(items[3], seenOnLine, ""), "120", "Please enter your PIN", 1, 2)
	// Storage keeps the kiosk's presence past seenOnLine by more than the
	// grace once the kiosk is heard from again.
	pastGrace()
	if !harness.Poll(5*time.Second, 50*time.Millisecond, func() bool {
		k.Send("9900302.00")
		var last time.Time
		err := c.DB.QueryRow(context.Background(), `SELECT max(on_to) FROM circulation_storage.kiosk_presence
			WHERE tenant_id = $1 AND location = 'entrance-1'`, c.Tenant).Scan(&last)
		return err == nil && last.After(seenOnLine.Add(1500*time.Millisecond))
	}) {
		t.Fatal("storage never kept the kiosk's presence after the outage")
	}
	// The door restarted: the kiosk logs in again. What it made while the
	// door before saw it on line is live; what it made inside the outage
	// that door saw is made offline.
	door.Process.Restart()
	k = harness.DialSIP2(t, door.Bound(t)[c.SIP2Listener(map[string]any{"patronPin": "required"})["address"].(string)])
	// Offline ok (98's sixth flag) only once the door heard the library
	// take check-outs made offline: not before a kiosk's login.
	if r := k.Send("9900302.00"); !strings.HasPrefix(r, "98") || r[7] != 'N' {
		t.Fatalf("a restarted door's status before any login: %q, want offline ok N", r)
	}
	login()
	if r := k.Send("9900302.00"); !strings.HasPrefix(r, "98") || r[7] != 'Y' {
		t.Fatalf("the door's status after a login: %q, want offline ok Y", r)
	}
	want(noBlock(items[3], seenOnLine, ""), "120", "Please enter your PIN", 1, 2)
	want(noBlock(items[3], down.Add(1500*time.Millisecond), ""), "121", "Recorded: lent while offline", 1, 3)
	want(noBlock(items[4], time.Now(), ""), "120", "Please enter your PIN", 1, 3)
	// Storage, not the restarted door, saw the kiosk on line then: with
	// the right PIN it is a live loan; the same message sent again on a
	// new connection (its reply lost with the old one), judged again, is
	// answered ok with the loan's due date, one loan.
	sent := k.Seal("11NY" + sip2UTC(seenOnLine) + strings.Repeat(" ", 18) + "AOdiku|AA" + patron + "|AB" + items[5] + "|AC|AD7319|")
	r = k.Raw(sent)
	want(r, "121", harness.SIP2Field(r, "AF"), 2, 3)
	k2 := harness.DialSIP2(t, door.Bound(t)[c.SIP2Listener(map[string]any{"patronPin": "required"})["address"].(string)])
	k2.LoginAt("user_id", "passw0rd", "entrance-1")
	if again := k2.Raw(sent); !strings.HasPrefix(again, "121") || harness.SIP2Field(again, "AH") != harness.SIP2Field(r, "AH") {
		t.Fatalf("the live loan's message sent again: %q, want ok, due as %q says", again, r)
	}
	loansAre("the live loan's message sent again", 2, 3)
	// Each loan made offline names the machine that lent it.
	var machines []string
	if err := c.DB.QueryRow(context.Background(), fmt.Sprintf(`SELECT array_agg(DISTINCT coalesce(jsonb #>> '{offline,kiosk}', ''))
		FROM %s.loan WHERE jsonb ? 'offline'`, c.Schema)).Scan(&machines); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(machines, []string{"entrance-1"}) {
		t.Fatalf("the loans made offline name the machines %q, want entrance-1", machines)
	}
	// The kiosk's account sending a check-out made offline straight to
	// circulation, with no door naming its machine, is held to every
	// span of the account's machines: dated while entrance-1 was on
	// line, it is refused and writes nothing; dated in the outage, it is
	// recorded.
	checkOut, _ := schemas.PermissionFor(schemas.ServiceCirculation, "POST", "/circulation/check-out-by-barcode")
	tok, err := auth.Mint(harness.Secret(), auth.Claims{Tenant: c.Tenant, UserID: kiosk,
		Permissions: []string{checkOut, schemas.PermissionCheckOutOffline}}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	direct := func(item string, at time.Time) harness.Response {
		return c.DoWith(c.Circulations[0], "POST", "/circulation/check-out-by-barcode", map[string]any{"itemBarcode": item,
			"userBarcode": patron, "servicePointId": harness.ServicePoint,
			"offline": map[string]any{"transactionDate": schemas.FormatTime(at)}},
			map[string]string{schemas.HeaderTenant: c.Tenant, schemas.HeaderToken: tok})
	}
	if r := direct(items[4], seenOnLine); r.Status != http.StatusUnprocessableEntity {
		t.Fatalf("an offline check-out sent straight to circulation, dated while the kiosk was on line: %d %s, want 422", r.Status, r.Body)
	} else if code, params := envelopeError(t, r); code != schemas.CodeOfflineWhileOnLine ||
		params["transactionDate"] != schemas.FormatTime(seenOnLine) {
		t.Fatalf("an offline check-out sent straight to circulation, dated while the kiosk was on line: %s %v, want %s naming its date",
			code, params, schemas.CodeOfflineWhileOnLine)
	}
	loansAre("the refused one", 2, 3)
	direct(items[4], down.Add(1200*time.Millisecond)).Want(t, http.StatusCreated)
	loansAre("one dated in the outage", 2, 4)
}

// TestAKioskWithoutALocationIsJudgedByItsOwnPresence: two machines of
// one account, one at east-1 and one that gives no location code. A
// no-block check-out the second sends, dated while east-1 was on line
// (and before its own login), is recorded as made offline: the door
// names the machine, location code or none, and storage judges it by
// that machine's presence alone, not by every machine of the account's.
func TestAKioskWithoutALocationIsJudgedByItsOwnPresence(t *testing.T) {
	t.Parallel()
	c := harness.NewCluster(t, harness.Options{Circulations: 1, FeatureOn: true, StorageEnv: []string{"KIOSK_OFFLINE_GRACE=1s"}})
	lib := c.SetupLibrary(1, 1, 0)
	c.Account(t, "user_id", "Kiosk", "One", schemas.RoleSelfCheck, "passw0rd")
	door := c.StartSIP2(t, 0, nil, "SIP2_OFFLINE_GRACE=1s", "SIP2_PRESENCE_EVERY=100ms")
	east := harness.DialSIP2(t, door.SIP2Addr)
	east.LoginAt("user_id", "passw0rd", "east-1")
	// east-1 on line for a few seconds: at is inside the span of its
	// presence storage keeps, past the grace on either side.
	var at time.Time
	if !harness.Poll(10*time.Second, 50*time.Millisecond, func() bool {
		east.Send("9900302.00")
		var first, last *time.Time
		err := c.DB.QueryRow(context.Background(), `SELECT min(on_from), max(on_to) FROM circulation_storage.kiosk_presence
			WHERE tenant_id = $1 AND location = 'east-1'`, c.Tenant).Scan(&first, &last)
		if err != nil || first == nil {
			return false
		}
		at = first.Add(1500 * time.Millisecond).Truncate(time.Second).Add(time.Second)
		return last.After(at.Add(1500 * time.Millisecond))
	}) {
		t.Fatal("storage never kept east-1's presence")
	}
	bare := harness.DialSIP2(t, door.SIP2Addr)
	bare.LoginAt("user_id", "passw0rd", "")
	r := bare.Send("11NY" + sip2UTC(at) + strings.Repeat(" ", 18) + "AOdiku|AA" + lib.Patrons[0] + "|AB" + lib.Items[0][0] + "|AC|")
	if !strings.HasPrefix(r, "121") || harness.SIP2Field(r, "AF") != "Recorded: lent while offline" {
		t.Fatalf("the machine without a location code's no-block check-out, dated while east-1 was on line: %q, want recorded as made offline", r)
	}
	if offline, _ := loansMade(t, c); offline != 1 {
		t.Fatalf("%d loans made offline, want 1", offline)
	}
}

// TestALoginNotLetInIsNotTheLibrarySystemDown: a 93 answered 940 because
// its turn at storage did not come (LOGIN_BUSY: kiosks behind one address
// logging in together, one checked at a time here) is circulation
// answering, not the library system failing to. A no-block check-out made
// on line just after it, within the grace of it, is a live one, refused
// without the patron's PIN, not recorded as made offline past the rules:
// whoever can reach the door could otherwise open such a window for every
// kiosk without logging in.
func TestALoginNotLetInIsNotTheLibrarySystemDown(t *testing.T) {
	t.Parallel()
	// The door's call time is shorter than storage's Retry-After: a login
	// not let in is answered at once.
	c, lib, door, k := graceKiosk(t, 2*time.Second, 1, 1, "required", []string{"LOGIN_MAX_FAILURES=1", "LOGIN_BUSY_WAIT=0s"},
		"SIP2_CALL_TIMEOUT=1s")
	// crowd sends logins of the same account from the same address, eight
	// at once, and waits for the door's line of each it answered.
	crowd := func() {
		before := strings.Count(door.Log(), `"message":"93"`)
		var answered atomic.Int64
		var wg sync.WaitGroup
		for range 8 {
			wg.Go(func() {
				conn, err := net.DialTimeout("tcp", door.SIP2Addr, 5*time.Second)
				if err != nil {
					return
				}
				defer conn.Close()
				_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
				if _, err := conn.Write([]byte("9300CNuser_id|COpassw0rd|\r")); err != nil {
					return
				}
				if _, err := bufio.NewReader(conn).ReadString('\r'); err == nil {
					answered.Add(1)
				}
			})
		}
		wg.Wait()
		harness.Poll(5*time.Second, 10*time.Millisecond, func() bool {
			return strings.Count(door.Log(), `"message":"93"`) >= before+int(answered.Load())
		})
	}
	// Until a login is not let in, none of the crowd's unanswered by
	// circulation (on a machine so loaded that a password's check outlasts
	// the call, the library system did not answer: past the grace of it,
	// the crowd comes again).
	notLetIn, notAnswered := `"outcome":"login_busy"`, `"message":"93","outcome":"error"`
	if !harness.Poll(60*time.Second, 0, func() bool {
		log := door.Log()
		busy, failed := strings.Count(log, notLetIn), strings.Count(log, notAnswered)
		crowd()
		log = door.Log()
		if strings.Count(log, notAnswered) > failed {
			pastGrace(t, 2*time.Second)
			return false
		}
		return strings.Count(log, notLetIn) > busy
	}) {
		t.Fatalf("no login of the crowd was answered busy:\n%s", door.Log())
	}
	r := k.Send("11NY" + sip2UTC(time.Now()) + strings.Repeat(" ", 18) + "AOdiku|AA" + lib.Patrons[0] + "|AB" + lib.Items[0][0] + "|AC|")
	if !strings.HasPrefix(r, "120") || harness.SIP2Field(r, "AF") != "Please enter your PIN" {
		t.Fatalf("a no-block check-out made on line just after a login not let in: %q, want 120… with \"Please enter your PIN\"", r)
	}
	if _, loans := loansMade(t, c); loans != 0 {
		t.Fatalf("%d loans, want none", loans)
	}
}

// TestAPatronsLockHeldIsNotTheLibrarySystemDown: a kiosk told "System
// busy" because its patron's lock stayed held by another check-out past
// the wait (circulation's UNABLE_TO_ACQUIRE_LOCK) was answered by the
// library system (outcome patron_busy). A no-block check-out another
// patron makes on line just after it, within the grace of it, is a live
// one, not recorded as made offline past the rules: a patron scanning at
// two machines at once could otherwise open such a window for every
// kiosk of the door.
func TestAPatronsLockHeldIsNotTheLibrarySystemDown(t *testing.T) {
	t.Parallel()
	c, lib, door, k := graceKiosk(t, 2*time.Second, 2, 1, "", nil)
	c.Do(c.Storage, "POST", "/check-out-lock-storage", map[string]any{"userId": patronID(t, c, lib.Patrons[0]), "ttlMs": 60000}).
		Want(t, http.StatusCreated)
	r := k.Send("11NN" + sip2UTC(time.Now()) + strings.Repeat(" ", 18) + "AOdiku|AA" + lib.Patrons[0] + "|AB" + lib.Items[0][0] + "|AC|")
	if !strings.HasPrefix(r, "120") || harness.SIP2Field(r, "AF") != "System busy, please try again" {
		t.Fatalf("a check-out while the patron's lock is held: %q, want 120… with \"System busy, please try again\"", r)
	}
	if !harness.Poll(5*time.Second, 10*time.Millisecond, func() bool {
		return strings.Contains(door.Log(), `"message":"11","outcome":"patron_busy"`)
	}) {
		t.Fatalf("the door logged no patron_busy check-out:\n%s", door.Log())
	}
	r = k.Send("11NY" + sip2UTC(time.Now()) + strings.Repeat(" ", 18) + "AOdiku|AA" + lib.Patrons[1] + "|AB" + lib.Items[1][0] + "|AC|")
	if !strings.HasPrefix(r, "121") || harness.SIP2Field(r, "AF") == "Recorded: lent while offline" {
		t.Fatalf("a no-block check-out made on line just after a patron's lock held: %q, want lent as a live one", r)
	}
	if offline, loans := loansMade(t, c); loans != 1 || offline != 0 {
		t.Fatalf("%d loans, %d of them made offline; want one live loan", loans, offline)
	}
}

// TestACheckOutCirculationCannotServeIsTheLibrarySystemDown: a kiosk
// told "System busy" because circulation could not serve it (503:
// storage stopped) saw the library system not answer, the door too
// (outcome busy): a no-block check-out dated then, sent once storage is
// back, is recorded as made offline, where one dated while the door saw
// the kiosk on line would be a live one.
func TestACheckOutCirculationCannotServeIsTheLibrarySystemDown(t *testing.T) {
	t.Parallel()
	c, lib, door, k := graceKiosk(t, time.Second, 1, 2, "", nil)
	patron, items := lib.Patrons[0], lib.Items[0]
	c.Storage.Stop()
	at := time.Now()
	r := k.Send("11NN" + sip2UTC(at) + strings.Repeat(" ", 18) + "AOdiku|AA" + patron + "|AB" + items[0] + "|AC|")
	if !strings.HasPrefix(r, "120") || harness.SIP2Field(r, "AF") != "System busy, please try again" {
		t.Fatalf("a check-out while storage is stopped: %q, want 120… with \"System busy, please try again\"", r)
	}
	if !harness.Poll(5*time.Second, 10*time.Millisecond, func() bool {
		return strings.Contains(door.Log(), `"message":"11","outcome":"busy"`)
	}) {
		t.Fatalf("the door logged no busy check-out:\n%s", door.Log())
	}
	c.Storage.Start()
	r = k.Send("11NY" + sip2UTC(at) + strings.Repeat(" ", 18) + "AOdiku|AA" + patron + "|AB" + items[1] + "|AC|")
	if !strings.HasPrefix(r, "121") || harness.SIP2Field(r, "AF") != "Recorded: lent while offline" {
		t.Fatalf("a no-block check-out dated when circulation could not serve: %q, want recorded as made offline", r)
	}
	if offline, _ := loansMade(t, c); offline != 1 {
		t.Fatalf("%d loans made offline, want 1", offline)
	}
}

// TestAPINRefusedIsNotTheLibrarySystemDown: a check-out whose PIN
// circulation refuses to check (longer than any PIN kept: a 422 of its
// own) is refused with circulation's reason, outcome refused, and marks
// nothing: a no-block check-out made on line just after it is a live
// one, refused without the patron's PIN, not recorded as made offline.
func TestAPINRefusedIsNotTheLibrarySystemDown(t *testing.T) {
	t.Parallel()
	c, lib, door, k := graceKiosk(t, 2*time.Second, 1, 2, "required", nil)
	patron, items := lib.Patrons[0], lib.Items[0]
	r := k.Send("11NN" + sip2UTC(time.Now()) + strings.Repeat(" ", 18) + "AOdiku|AA" + patron + "|AB" + items[0] + "|AC|AD" +
		strings.Repeat("7", 65) + "|")
	if !strings.HasPrefix(r, "120") || harness.SIP2Field(r, "AF") == "System busy, please try again" {
		t.Fatalf("a check-out with a PIN of 65 digits: %q, want 120… with circulation's reason", r)
	}
	if !harness.Poll(5*time.Second, 10*time.Millisecond, func() bool {
		return strings.Contains(door.Log(), `"message":"11","outcome":"refused"`)
	}) {
		t.Fatalf("the door logged no refused check-out:\n%s", door.Log())
	}
	r = k.Send("11NY" + sip2UTC(time.Now()) + strings.Repeat(" ", 18) + "AOdiku|AA" + patron + "|AB" + items[1] + "|AC|")
	if !strings.HasPrefix(r, "120") || harness.SIP2Field(r, "AF") != "Please enter your PIN" {
		t.Fatalf("a no-block check-out made on line just after a PIN refused: %q, want 120… with \"Please enter your PIN\"", r)
	}
	if n := openLoans(t, c, patron); n != 0 {
		t.Fatalf("%d loans, want none", n)
	}
}

// graceKiosk is a kiosk logged in as user_id at a door of a cluster of its
// own, storage's KIOSK_OFFLINE_GRACE and the door's SIP2_OFFLINE_GRACE
// both grace, its library patrons patrons of items items each; pin is the
// listener's patronPin ("" for none), storageEnv more of storage's
// settings, doorEnv more of the door's. It returns once a transaction
// dated now is past the grace after the login (pastGrace): one the door
// saw the kiosk on line at.
func graceKiosk(t *testing.T, grace time.Duration, patrons, items int, pin string, storageEnv []string,
	doorEnv ...string) (*harness.Cluster, harness.Library, *harness.SIP2Door, *harness.SIP2Client) {
	t.Helper()
	c := harness.NewCluster(t, harness.Options{Circulations: 1, FeatureOn: true,
		StorageEnv: append([]string{"KIOSK_OFFLINE_GRACE=" + grace.String()}, storageEnv...)})
	lib := c.SetupLibrary(patrons, items, 0)
	c.Account(t, "user_id", "Kiosk", "One", schemas.RoleSelfCheck, "passw0rd")
	var listener map[string]any
	if pin != "" {
		listener = map[string]any{"patronPin": pin}
	}
	door := c.StartSIP2(t, 0, listener, append([]string{"SIP2_OFFLINE_GRACE=" + grace.String()}, doorEnv...)...)
	k := harness.DialSIP2(t, door.SIP2Addr)
	k.Login("user_id", "passw0rd")
	pastGrace(t, grace)
	return c, lib, door, k
}

// pastGrace waits until a transaction dated now (to the second) is past
// grace after what the door saw just before.
func pastGrace(t *testing.T, grace time.Duration) {
	t.Helper()
	then := time.Now().Add(grace + 1100*time.Millisecond)
	if !harness.Poll(10*time.Second, 50*time.Millisecond, func() bool { return time.Now().After(then) }) {
		t.Fatal("the clock did not move")
	}
}

// loansMade counts the tenant's loans made offline, and all its loans.
func loansMade(t *testing.T, c *harness.Cluster) (offline, all int) {
	t.Helper()
	if err := c.DB.QueryRow(context.Background(), fmt.Sprintf(`SELECT count(*) FILTER (WHERE jsonb ? 'offline'), count(*) FROM %s.loan`,
		c.Schema)).Scan(&offline, &all); err != nil {
		t.Fatal(err)
	}
	return offline, all
}
