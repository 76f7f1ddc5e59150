package integration

import (
	"context"
	"encoding/csv"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/checkoutlock/integration-tests/harness"
	"github.com/checkoutlock/schemas"
)

// TestTheOperatorSearchesTheHistory: the console's history is filtered by
// storage, by patron (barcode or name), by kiosk or account, by kind of
// event and by time, paged, and exported as CSV whose rows are the
// filtered rows; in Chromium the filters and the page live in the address,
// so a reload shows the same rows, and the export the page makes is those
// rows.
func TestTheOperatorSearchesTheHistory(t *testing.T) {
	t.Parallel()
	c := harness.NewCluster(t, harness.Options{Circulations: 1, FeatureOn: true})
	lib := c.SetupLibrary(3, 1, 5)
	alice, bob := patronID(t, c, lib.Patrons[0]), patronID(t, c, lib.Patrons[1])
	kiosk3 := c.Account(t, "kiosk3", "Kiosk", "Three", schemas.RoleSelfCheck, "kiosk3-password")
	kiosk4 := c.Account(t, "kiosk4", "Kiosk", "Four", schemas.RoleSelfCheck, "kiosk4-password")
	olga := c.Account(t, "olga", "Olga", "Operator", schemas.RoleOperator, "olga-password")

	// Yesterday's events, oldest first: 60 waits in vain at kiosk 3 for
	// Alice, from 09:00 a minute apart; at 10:14 one at kiosk 4 for Bob;
	// at 10:20 Olga releasing kiosk 3's lock of Bob. Yesterday, not a
	// fixed day: storage's sweeper deletes the history older than its
	// retention (a week) while the test runs.
	day := time.Now().UTC().Truncate(24*time.Hour).AddDate(0, 0, -1).Add(9 * time.Hour)
	at := func(minutes int) string { return day.Add(time.Duration(minutes) * time.Minute).Format(time.RFC3339) }
	insert := func(when time.Time, typ, user, holder, by string, waited int) {
		t.Helper()
		_, err := c.DB.Exec(context.Background(), `INSERT INTO circulation_storage.check_out_lock_event
			(tenant_id, occurred_at, type, user_id, holder, by_whom, waited_ms) VALUES ($1, $2, $3, $4, $5, $6, nullif($7, 0))`,
			c.Tenant, when, typ, user, `{"acquiredBy":"`+holder+`","itemBarcode":"book"}`, `{"acquiredBy":"`+by+`"}`, waited)
		if err != nil {
			t.Fatal(err)
		}
	}
	for i := range 60 {
		insert(day.Add(time.Duration(i)*time.Minute), "waiter_gave_up", alice, kiosk3, kiosk3, 1000+i)
	}
	insert(day.Add(74*time.Minute), "waiter_gave_up", bob, kiosk3, kiosk4, 2001)
	insert(day.Add(80*time.Minute), "released_by_other", bob, kiosk3, olga, 0)

	type event struct {
		Type, OccurredAt, UserID string
		WaitedMs                 int
		Patron                   struct{ Barcode, Name string }
		ByName                   string
		Row                      struct{ When, What, Patron, Holder, By string }
	}
	history := func(q url.Values) ([]event, int) {
		t.Helper()
		var page struct {
			Events       []event
			TotalRecords int
		}
		c.DoWith(c.Circulations[0], "GET", "/circulation/check-out-locks/history?"+q.Encode(), nil,
			c.HeadersWith(schemas.HeaderToken, c.Token(schemas.RoleOperator))).Want(t, http.StatusOK).Decode(t, &page)
		return page.Events, page.TotalRecords
	}
	// "Why was Bob refused at 10:14 at kiosk 4?"
	events, total := history(url.Values{"patron": {lib.Patrons[1]}, "account": {"kiosk4"}})
	if total != 1 || len(events) != 1 || events[0].WaitedMs != 2001 || events[0].ByName != "Kiosk Four" {
		t.Fatalf("Bob at kiosk 4: %d events %+v, want the one wait of 2001 ms by Kiosk Four", total, events)
	}
	first, last, _ := strings.Cut(patronName(t, c, bob), " ")
	for _, q := range []url.Values{
		{"patron": {last}}, {"patron": {first + " " + last}}, {"patron": {lib.Patrons[1]}}, {"account": {"olga"}, "type": {"released_by_other"}},
	} {
		if _, n := history(q); n != map[bool]int{true: 2, false: 1}[q.Get("account") == ""] {
			t.Errorf("history %v: %d events", q, n)
		}
	}
	if _, n := history(url.Values{"account": {"kiosk3"}, "from": {at(30)}, "to": {at(60)}}); n != 30 {
		t.Errorf("kiosk 3 from 09:30 until 10:00: %d events, want 30", n)
	}
	if _, n := history(url.Values{"patron": {"nobody-has-this"}}); n != 0 {
		t.Errorf("a patron no one is: %d events", n)
	}
	events, total = history(url.Values{"patron": {lib.Patrons[0]}, "offset": {"50"}, "limit": {"20"}})
	if total != 60 || len(events) != 10 || events[0].WaitedMs != 1009 || events[9].WaitedMs != 1000 {
		t.Errorf("Alice's last page: %d of %d, want the 10 oldest", len(events), total)
	}
	c.DoWith(c.Circulations[0], "GET", "/circulation/check-out-locks/history?from=yesterday", nil,
		c.HeadersWith(schemas.HeaderToken, c.Token(schemas.RoleOperator))).Want(t, http.StatusUnprocessableEntity)

	// The export is the filtered rows, every one.
	csvOf := func(q url.Values) [][]string {
		t.Helper()
		res := c.DoWith(c.Circulations[0], "GET", "/circulation/check-out-locks/history.csv?"+q.Encode(), nil,
			c.HeadersWith(schemas.HeaderToken, c.Token(schemas.RoleOperator))).Want(t, http.StatusOK)
		rows, err := csv.NewReader(strings.NewReader(string(res.Body))).ReadAll()
		if err != nil {
			t.Fatal(err)
		}
		return rows
	}
	// Its columns are the page's, in words, its times in the reader's
	// zone, then the ids behind them.
	rows := csvOf(url.Values{"patron": {lib.Patrons[0]}, "from": {at(50)}, "tz": {"Europe/Berlin"}})
	if len(rows) != 11 || !slices.Equal(rows[0], []string{"When", "What", "Patron", "Holder", "By",
		"Kind", "Patron's user id", "Lock id", "Loan id", "Holder's trace id", "By's trace id"}) {
		t.Fatalf("Alice since 09:50 as CSV: %d rows headed %q, want the page's columns and 10 rows", len(rows), rows[0])
	}
	want, _ := history(url.Values{"patron": {lib.Patrons[0]}, "from": {at(50)}, "tz": {"Europe/Berlin"}})
	for i, e := range want {
		r := rows[i+1]
		if !slices.Equal(r[:5], []string{e.Row.When, e.Row.What, e.Row.Patron, e.Row.Holder, e.Row.By}) || r[5] != e.Type || r[6] != e.UserID {
			t.Errorf("CSV row %d %q, want the event %+v", i+1, r, e)
		}
	}
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	if e := want[len(want)-1]; e.Row.When != day.Add(50*time.Minute).In(berlin).Format("2006-01-02 15:04:05 MST") || e.Row.What != "a waiting check-out gave up after 1.05 s" ||
		e.Row.Patron != e.Patron.Name+" ("+e.Patron.Barcode+")" {
		t.Errorf("the oldest line since 09:50 reads %+v, want it at 09:50 UTC in Berlin's time, its wait in seconds", e.Row)
	}
	c.DoWith(c.Circulations[0], "GET", "/circulation/check-out-locks/history.csv?tz=Mars/Olympus", nil,
		c.HeadersWith(schemas.HeaderToken, c.Token(schemas.RoleOperator))).Want(t, http.StatusUnprocessableEntity)

	// In the console: filter, page, reload, export.
	ctx := browser(t)
	signIn(t, ctx, c, "/ui/locks.html", "olga", "olga-password")
	// The first refresh lays the page out and shows the filters.
	waitUntil(t, ctx, "the console's first refresh", `document.getElementById("status").textContent !== ""`)
	if err := chromedp.Run(ctx,
		chromedp.SetValue("#f-patron", lib.Patrons[0], chromedp.ByQuery),
		chromedp.SetValue("#f-account", "kiosk3", chromedp.ByQuery),
		press("#f-show")); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, ctx, "Alice's first page", `document.getElementById("history-status").textContent === "Events 1–50 of 60 matching the filters, newest first."`)
	if err := chromedp.Run(ctx, press("#f-older")); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, ctx, "Alice's second page", `document.getElementById("history-status").textContent === "Events 51–60 of 60 matching the filters, newest first."`)
	if err := chromedp.Run(ctx, chromedp.Reload()); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, ctx, "the same page after a reload", `document.getElementById("history-status").textContent === "Events 51–60 of 60 matching the filters, newest first." &&
		document.querySelectorAll("#history tbody tr").length === 10 && document.getElementById("f-patron").value === `+jsString(lib.Patrons[0]))
	// An operator may not open the desk's page: a row's patron is plain
	// text (TestTheConsolesHistoryInWords: a link for whom may).
	if n := evaluate[int](t, ctx, `document.querySelectorAll("#history tbody tr td:nth-child(3) a").length`); n != 0 {
		t.Errorf("an operator's history has %d patron links to the desk's page", n)
	}
	if got := evaluate[[]bool](t, ctx, `[document.getElementById("f-older").disabled, document.getElementById("f-newer").disabled]`); !slices.Equal(got, []bool{true, false}) {
		t.Errorf("on the last page, older and newer disabled: %v", got)
	}
	var exported string
	if err := chromedp.Run(ctx, chromedp.Evaluate(`fetch(exportURL(), { headers: { "X-Okapi-Tenant": session.tenant }, credentials: "same-origin" }).then((r) => r.text())`,
		&exported, func(p *runtime.EvaluateParams) *runtime.EvaluateParams { return p.WithAwaitPromise(true) })); err != nil {
		t.Fatal(err)
	}
	rows, err = csv.NewReader(strings.NewReader(exported)).ReadAll()
	if err != nil || len(rows) != 61 {
		t.Fatalf("the console's export: %d rows (%v), want the header and Alice's 60 at kiosk 3", len(rows), err)
	}
	if w := phoneWidth(t, ctx); w > 390 {
		t.Errorf("the console with its history filters is %d px wide at 390 px", w)
	}
}

// patronName is a patron's first and last name.
func patronName(t *testing.T, c *harness.Cluster, id string) string {
	t.Helper()
	var u struct {
		Personal struct{ FirstName, LastName string }
	}
	c.Do(c.Storage, "GET", "/users/"+id, nil).Want(t, http.StatusOK).Decode(t, &u)
	return u.Personal.FirstName + " " + u.Personal.LastName
}
