package integration

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"

	"github.com/checkoutlock/integration-tests/harness"
	"github.com/checkoutlock/schemas"
	"github.com/checkoutlock/serverkit/auth"
)

// deskZone is the time zone the desk's browser tests run Chromium in: not
// the machine's, so a date typed on the page is read as the person's.
const deskZone = "America/New_York"

// TestTheDeskOverridesARefusedRenewal: on the desk's page, in Chromium at
// 390 px in New York's time, a librarian overrides refused renewals as
// FOLIO's Users app does. The override is offered under a refused Renew
// exactly where every refusal is one an override lifts: a loan renewed to
// its policy's limit, a patron's manual block, a policy that does not
// renew; not an item declared lost, nor a renewal the page offers. Its
// question names the item, the patron and the refusal; cancelled with a
// reason typed, or confirmed without one (or with spaces alone), nothing
// is sent; confirmed, the loan is renewed through the override with the
// librarian's words as its comment, due at the date the librarian chose
// (typed in New York's time) where the policy gives none, a date later
// than the loan's the earliest the field takes.
func TestTheDeskOverridesARefusedRenewal(t *testing.T) {
	t.Parallel()
	c := harness.NewCluster(t, harness.Options{Circulations: 1, FeatureOn: true})
	lib := c.SetupLibrary(2, 3, 10)
	c.Account(t, "lee", "Lee", "Librarian", schemas.RoleLibrarian, "lee-password")
	patron, items := lib.Patrons[0], lib.Items[0]
	name(t, c, patronID(t, c, patron), "Alice", "Archer")
	name(t, c, patronID(t, c, lib.Patrons[1]), "Bruno", "Archibald")
	renewable(t, c, lib, map[string]any{"numberAllowed": 1, "renewFromId": "CURRENT_DUE_DATE"})
	for _, item := range items {
		c.CheckOut(0, item, patron).Want(t, http.StatusCreated)
	}
	blocked := lib.Items[1][0]
	c.CheckOut(0, blocked, lib.Patrons[1]).Want(t, http.StatusCreated)
	// Renewed to the limit; declared lost.
	c.Do(c.Circulations[0], "POST", "/circulation/renew-by-barcode", map[string]string{"itemBarcode": items[0], "userBarcode": patron}).
		Want(t, http.StatusOK)
	lostLoan := loanOf(t, c, items[1])
	c.Do(c.Circulations[0], "POST", "/circulation/loans/"+lostLoan["id"].(string)+"/declare-item-lost",
		map[string]string{"servicePointId": harness.ServicePoint}).Want(t, http.StatusNoContent)
	c.Do(c.Storage, "POST", "/manualblocks", map[string]any{"userId": patronID(t, c, lib.Patrons[1]),
		"desc": "Overdue books", "renewals": true}).Want(t, http.StatusCreated)

	ctx := deskBrowser(t)
	signIn(t, ctx, c, "/ui/loans.html", "lee", "lee-password")
	// Every renewal the page sends, counted in the page.
	countRenewals(t, ctx)
	row := func(item string) string {
		return fmt.Sprintf(`[...document.querySelectorAll("#results tbody tr")].find((r) => r.cells[1].textContent === %q)`, item)
	}
	// offered is which loans the page offers an override, and which of
	// those it lets the librarian press.
	offered := func() map[string]bool {
		t.Helper()
		return evaluate[map[string]bool](t, ctx, `Object.fromEntries([...document.querySelectorAll("#results tbody tr")]
			.flatMap((r) => [...r.querySelectorAll("button[data-override]")].map((b) => [r.cells[1].textContent, !b.disabled])))`)
	}
	// ask presses item's Override and reads the question, the reason
	// field focused; due says whether the due date is asked.
	ask := func(item string, due bool) string {
		t.Helper()
		if err := chromedp.Run(ctx, chromedp.Evaluate(row(item)+`.querySelector("button[data-override]").click()`, nil)); err != nil {
			t.Fatal(err)
		}
		waitUntil(t, ctx, "the override's question", confirmDialog+`.open`)
		if got := evaluate[string](t, ctx, `document.activeElement.id`); got != "confirm-comment" {
			t.Errorf("the override's question: the focus is on %q, want the reason", got)
		}
		if got := evaluate[bool](t, ctx, `!document.getElementById("confirm-due-field").hidden && !document.getElementById("confirm-due").disabled`); got != due {
			t.Errorf("the override of %s asks the due date: %v, want %v", item, got, due)
		}
		if right := evaluate[float64](t, ctx, confirmDialog+`.getBoundingClientRect().right`); right > 390 {
			t.Errorf("the override's question reaches %.0f px at 390 px", right)
		}
		return textOf(t, ctx, "#confirm-text")
	}
	// override confirms the question open with a reason (and a due date,
	// as a datetime-local field holds it) and waits until the page says
	// what became of it: want, or a refusal.
	override := func(item, comment, due, want string) {
		t.Helper()
		if err := chromedp.Run(ctx, chromedp.SetValue("#confirm-comment", comment, chromedp.ByQuery),
			chromedp.Evaluate(`document.getElementById("confirm-comment").dispatchEvent(new Event("input"))`, nil),
			chromedp.SetValue("#confirm-due", due, chromedp.ByQuery), chromedp.Click("#confirm-ok", chromedp.ByQuery)); err != nil {
			t.Fatal(err)
		}
		waitUntil(t, ctx, "the override of "+item, `!`+confirmDialog+`.open && /^(Renewed|Not done)/.test(document.getElementById("status").textContent) &&
			!document.getElementById("results").hasAttribute("aria-busy")`)
		if got := textOf(t, ctx, "#status"); !strings.HasPrefix(got, want) {
			t.Fatalf("the override of %s: the page says %q, want %q…", item, got, want)
		}
	}
	loan := func(item string) string {
		t.Helper()
		l := loanOf(t, c, item)
		comment, _ := l["actionComment"].(string)
		return fmt.Sprintf("%s %v %q", l["action"], l["renewalCount"], comment)
	}
	sent := func() int { t.Helper(); return evaluate[int](t, ctx, `window.renewalsSent`) }

	find(t, ctx, patron, 3)
	if got, want := offered(), map[string]bool{items[0]: true}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("overrides offered: %v, want %v (the loan at its limit alone: the lost item's refusal is not lifted, the third renews)", got, want)
	}
	who := "Alice Archer (barcode " + patron + ")"
	if got, want := ask(items[0], false), "Renewing “Item "+items[0]+"” (barcode "+items[0]+") for "+who+
		" is refused: loan at maximum renewal number. Renew it through an override?"; got != want {
		t.Errorf("the override asks %q, want %q", got, want)
	}
	// Cancelled, a reason typed: nothing sent, the focus back on Override.
	if err := chromedp.Run(ctx, chromedp.SetValue("#confirm-comment", "Typed, then cancelled", chromedp.ByQuery),
		chromedp.Click("#confirm-cancel", chromedp.ByQuery)); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, ctx, "the question cancelled, the focus back on Override", `!`+confirmDialog+`.open &&
		document.activeElement === `+row(items[0])+`.querySelector("button[data-override]")`)
	// Confirmed without a reason, or with spaces alone: the question
	// stays, nothing is sent.
	for _, reason := range []string{"", "   "} {
		ask(items[0], false)
		if err := chromedp.Run(ctx, chromedp.SendKeys("#confirm-comment", reason, chromedp.ByQuery), chromedp.Click("#confirm-ok", chromedp.ByQuery)); err != nil {
			t.Fatal(err)
		}
		if !evaluate[bool](t, ctx, confirmDialog+`.open`) {
			t.Fatalf("the override with the reason %q closed its question", reason)
		}
		if err := chromedp.Run(ctx, chromedp.Click("#confirm-cancel", chromedp.ByQuery)); err != nil {
			t.Fatal(err)
		}
		waitUntil(t, ctx, "the question cancelled", `!`+confirmDialog+`.open`)
	}
	if n := sent(); n != 0 {
		t.Errorf("before an override was confirmed with a reason, the page sent %d renewals", n)
	}
	if got := loan(items[0]); got != `renewed 1 ""` {
		t.Errorf("before the override is confirmed the loan is %s", got)
	}
	ask(items[0], false)
	override(items[0], "Patron travelling until May", "", "Renewed Item "+items[0]+" through an override: due ")
	if got, want := loan(items[0]), `renewedThroughOverride 2 "Patron travelling until May"`; got != want {
		t.Errorf("the loan overridden past its limit: %s, want %s", got, want)
	}
	if n := sent(); n != 1 {
		t.Errorf("one override confirmed, the page sent %d renewals", n)
	}

	// A patron's manual block.
	find(t, ctx, lib.Patrons[1], 1)
	if got, want := ask(blocked, false), "Renewing “Item "+blocked+"” (barcode "+blocked+") for Bruno Archibald (barcode "+lib.Patrons[1]+
		") is refused: Patron blocked from renewing. Renew it through an override?"; got != want {
		t.Errorf("the override asks %q, want %q", got, want)
	}
	override(blocked, "Block lifted by the head of circulation", "", "Renewed Item "+blocked+" through an override: due ")
	if got, want := loan(blocked), `renewedThroughOverride 1 "Block lifted by the head of circulation"`; got != want {
		t.Errorf("the blocked patron's loan overridden: %s, want %s", got, want)
	}

	// A policy that does not renew: the due date is asked for, later
	// than the loan's, and the loan is due then.
	changePolicy(t, c, lib, map[string]any{"renewable": false})
	find(t, ctx, patron, 3)
	if got, want := ask(items[2], true), "Renewing “Item "+items[2]+"” (barcode "+items[2]+") for "+who+
		" is refused: loan is not renewable. Renew it through an override?"; got != want {
		t.Errorf("the override asks %q, want %q", got, want)
	}
	zone, err := time.LoadLocation(deskZone)
	if err != nil {
		t.Fatal(err)
	}
	var before struct{ DueDate time.Time }
	c.Do(c.Storage, "GET", "/loan-storage/loans/"+loanOf(t, c, items[2])["id"].(string), nil).Want(t, http.StatusOK).Decode(t, &before)
	// The earliest the field takes: the first minute after the loan's due
	// date, in New York's time.
	if got, want := evaluate[string](t, ctx, `document.getElementById("confirm-due").min`),
		before.DueDate.In(zone).Truncate(time.Minute).Add(time.Minute).Format("2006-01-02T15:04"); got != want {
		t.Errorf("the earliest due date the override takes: %s, want %s (the loan is due %s)", got, want, before.DueDate)
	}
	d := before.DueDate.In(zone).AddDate(0, 0, 3)
	chosen := time.Date(d.Year(), d.Month(), d.Day(), 17, 30, 0, 0, zone)
	screenshot(t, ctx, "desk-override-390.png")
	// A short policy's name beside a long count of renewals, at 390 px:
	// no word of either broken across lines.
	if broken := brokenWords(t, ctx, "#results td .renewals, #results td .policy"); len(broken) > 0 {
		t.Errorf("the words %q of the renewals broken across lines", broken)
	}
	override(items[2], "Thesis deadline", chosen.Format("2006-01-02T15:04"), "Renewed Item "+items[2]+" through an override: due ")
	if got, want := loan(items[2]), `renewedThroughOverride 1 "Thesis deadline"`; got != want {
		t.Errorf("the loan overridden under a policy that does not renew: %s, want %s", got, want)
	}
	var after struct{ DueDate time.Time }
	c.Do(c.Storage, "GET", "/loan-storage/loans/"+loanOf(t, c, items[2])["id"].(string), nil).Want(t, http.StatusOK).Decode(t, &after)
	if !after.DueDate.Equal(chosen) {
		t.Errorf("the loan overridden is due %s, want the date chosen, %s (17:30 in New York)", after.DueDate, chosen.UTC())
	}

	// The server answering that the librarian may not override (as it
	// answers a caller who may renew but not override, which no role is:
	// TestTheDeskSaysWhoMayOverride), here its answers rewritten in the
	// page: each Override is drawn disabled, saying why beside it, and
	// pressed opens no question and sends nothing.
	const why = "Overriding this needs the librarian role"
	if err := chromedp.Run(ctx, chromedp.Evaluate(`(() => { const f = window.fetch;
		window.fetch = async (url, ...rest) => {
			const r = await f(url, ...rest);
			if (!String(url).includes("/circulation/patron-loans") || !r.ok) return r;
			const body = await r.json();
			for (const p of body.patrons) for (const l of p.loans) {
				const o = l.actions.renew && l.actions.renew.override;
				if (o) { o.allowed = false; o.reason = `+jsString(why)+`; }
			}
			return new Response(JSON.stringify(body), { status: r.status, headers: r.headers });
		}; })()`, nil)); err != nil {
		t.Fatal(err)
	}
	find(t, ctx, patron, 3)
	// The rows found before stand until the answer is drawn.
	waitUntil(t, ctx, "the loans found again", `document.querySelectorAll("#results button[data-override]:disabled").length > 0 &&
		!document.getElementById("results").hasAttribute("aria-busy")`)
	if got, want := offered(), map[string]bool{items[0]: false, items[2]: false}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("overrides offered to a librarian who may not override: %v, want %v (drawn, disabled)", got, want)
	}
	for _, item := range []string{items[0], items[2]} {
		b := row(item) + `.querySelector("button[data-override]")`
		if got := evaluate[string](t, ctx, `[`+b+`.title, document.getElementById(`+b+`.getAttribute("aria-describedby")).textContent,
			document.getElementById(`+b+`.getAttribute("aria-describedby")).getClientRects().length > 0].join(" | ")`); got != why+" | "+why+" | true" {
			t.Errorf("the disabled Override of %s says %q, want %q as its title and beside it", item, got, why)
		}
		if err := chromedp.Run(ctx, chromedp.Evaluate(b+`.click()`, nil)); err != nil {
			t.Fatal(err)
		}
	}
	if evaluate[bool](t, ctx, confirmDialog+`.open`) || sent() != 3 {
		t.Errorf("a disabled Override pressed: the question open %v, %d renewals sent (want none more than the 3 overrides)",
			evaluate[bool](t, ctx, confirmDialog+`.open`), sent())
	}
}

// TestTheDeskChangesADueDate: on the desk's page, in Chromium in New
// York's time, a librarian changes a loan's due date as FOLIO's Users app
// does: the question names the item, the patron and the date it is due,
// the date field holding it; cancelled, or confirmed with Enter as it
// stands, nothing is written; confirmed, the loan is due at the date
// typed (read as New York's time), its action dueDateChanged, even when
// the button is pressed again before the browser reports the question
// closed (and the question is not asked again of the loan as it was). An
// item declared lost keeps its date: the change is not offered, for the
// route's reason.
func TestTheDeskChangesADueDate(t *testing.T) {
	t.Parallel()
	c := harness.NewCluster(t, harness.Options{Circulations: 1, FeatureOn: true})
	lib := c.SetupLibrary(1, 2, 10)
	c.Account(t, "lee", "Lee", "Librarian", schemas.RoleLibrarian, "lee-password")
	patron, items := lib.Patrons[0], lib.Items[0]
	name(t, c, patronID(t, c, patron), "Alice", "Archer")
	for _, item := range items {
		c.CheckOut(0, item, patron).Want(t, http.StatusCreated)
	}
	lost := loanOf(t, c, items[1])
	c.Do(c.Circulations[0], "POST", "/circulation/loans/"+lost["id"].(string)+"/declare-item-lost",
		map[string]string{"servicePointId": harness.ServicePoint}).Want(t, http.StatusNoContent)
	zone, err := time.LoadLocation(deskZone)
	if err != nil {
		t.Fatal(err)
	}
	due := func(item string) (time.Time, string) {
		t.Helper()
		var l struct {
			DueDate time.Time
			Action  string
		}
		c.Do(c.Storage, "GET", "/loan-storage/loans/"+loanOf(t, c, item)["id"].(string), nil).Want(t, http.StatusOK).Decode(t, &l)
		return l.DueDate, l.Action
	}
	was, _ := due(items[0])

	ctx := deskBrowser(t)
	signIn(t, ctx, c, "/ui/loans.html", "lee", "lee-password")
	find(t, ctx, patron, 2)
	row := func(item string) string {
		return fmt.Sprintf(`[...document.querySelectorAll("#results tbody tr")].find((r) => r.cells[1].textContent === %q)`, item)
	}
	button := func(item string) string { return row(item) + `.querySelector('button[data-action="due"]')` }
	if got, want := evaluate[string](t, ctx, button(items[1])+`.disabled ? `+button(items[1])+`.title : "offered"`), "item is Declared lost"; got != want {
		t.Errorf("the change of the lost item's due date: %q, want it not offered for %q", got, want)
	}
	press := func() string {
		t.Helper()
		if err := chromedp.Run(ctx, chromedp.Evaluate(button(items[0])+`.click()`, nil)); err != nil {
			t.Fatal(err)
		}
		waitUntil(t, ctx, "the change's question", confirmDialog+`.open`)
		if got := evaluate[string](t, ctx, `document.activeElement.id`); got != "confirm-due" {
			t.Errorf("the change's question: the focus is on %q, want the date", got)
		}
		if evaluate[bool](t, ctx, `!document.getElementById("confirm-comment-field").hidden`) {
			t.Error("the change of a due date asks a reason")
		}
		return textOf(t, ctx, "#confirm-text")
	}
	local := was.In(zone)
	if got, want := press(), "Change the due date of “Item "+items[0]+"” (barcode "+items[0]+"), on loan to Alice Archer (barcode "+patron+
		") and due "+evaluate[string](t, ctx, `new Date(`+jsString(was.Format(time.RFC3339Nano))+`).toLocaleString()`)+"?"; got != want {
		t.Errorf("the change asks %q, want %q", got, want)
	}
	if got, want := evaluate[string](t, ctx, `document.getElementById("confirm-due").value`), local.Format("2006-01-02T15:04"); got != want {
		t.Errorf("the change's date field holds %q, want the loan's due date in New York's time, %q", got, want)
	}
	if err := chromedp.Run(ctx, chromedp.Click("#confirm-cancel", chromedp.ByQuery)); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, ctx, "the question cancelled, the focus back on the button", `!`+confirmDialog+`.open && document.activeElement === `+button(items[0]))
	if now, action := due(items[0]); !now.Equal(was) || action != "checkedout" {
		t.Errorf("after the change was cancelled the loan is due %s, %s", now, action)
	}

	// Confirmed as it stands, with Enter in the date: the date the loan
	// has (to the millisecond, though the field shows minutes), so nothing
	// is written.
	press()
	if err := chromedp.Run(ctx, enter("#confirm-due")); err != nil {
		t.Fatal(err)
	}
	deskSays(t, ctx, "the change confirmed unchanged", "Item "+items[0]+" is now due "+
		evaluate[string](t, ctx, `new Date(`+jsString(was.Format(time.RFC3339Nano))+`).toLocaleString()`)+".")
	if now, action := due(items[0]); !now.Equal(was) || action != "checkedout" {
		t.Errorf("after the change was confirmed unchanged the loan is due %s, %s; want %s, checkedout", now, action, was)
	}

	// Two days earlier, at 9:15 in New York, confirmed and the button
	// pressed again in the same moment, before the browser reports the
	// question closed: the question is answered all the same, and not
	// asked again of the loan as it was drawn before the change.
	d := local.AddDate(0, 0, -2)
	chosen := time.Date(d.Year(), d.Month(), d.Day(), 9, 15, 0, 0, zone)
	press()
	if err := chromedp.Run(ctx, chromedp.SetValue("#confirm-due", chosen.Format("2006-01-02T15:04"), chromedp.ByQuery),
		chromedp.Evaluate(`document.getElementById("confirm-ok").click(), `+button(items[0])+`.click()`, nil)); err != nil {
		t.Fatal(err)
	}
	deskSays(t, ctx, "the change", "Item "+items[0]+" is now due "+
		evaluate[string](t, ctx, `new Date(`+jsString(chosen.Format(time.RFC3339))+`).toLocaleString()`)+".")
	if now, action := due(items[0]); !now.Equal(chosen) || action != "dueDateChanged" {
		t.Errorf("the loan changed is due %s, %s; want %s (9:15 in New York), dueDateChanged", now, action, chosen.UTC())
	}
	if evaluate[bool](t, ctx, confirmDialog+`.open`) {
		t.Error("the question is asked again of the loan as it was drawn before the change")
	}
}

// deskBrowser is a browser at 390 px in deskZone's time.
func deskBrowser(t *testing.T) context.Context {
	t.Helper()
	ctx := browser(t)
	if err := chromedp.Run(ctx, chromedp.EmulateViewport(390, 844, chromedp.EmulateScale(1)), emulation.SetTimezoneOverride(deskZone)); err != nil {
		t.Fatal(err)
	}
	return ctx
}

// find searches the desk's page for barcode's patron and waits for their
// loans.
func find(t *testing.T, ctx context.Context, barcode string, loans int) {
	t.Helper()
	if err := chromedp.Run(ctx, chromedp.SetValue("#patron", barcode, chromedp.ByQuery), chromedp.Click("#find-submit", chromedp.ByQuery)); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, ctx, "the patron's loans", fmt.Sprintf(`document.querySelectorAll("#results tbody tr").length === %d &&
		document.querySelector("#results h2").textContent.endsWith("(%s)") && !document.getElementById("results").hasAttribute("aria-busy")`, loans, barcode))
}

// countRenewals makes the page count the renewals it sends
// (window.renewalsSent).
func countRenewals(t *testing.T, ctx context.Context) {
	t.Helper()
	if err := chromedp.Run(ctx, chromedp.Evaluate(`window.renewalsSent = 0; (() => { const f = window.fetch;
		window.fetch = (url, ...rest) => { if (String(url).includes("/circulation/renew-by-id")) window.renewalsSent++; return f(url, ...rest); }; })()`, nil)); err != nil {
		t.Fatal(err)
	}
}

// TestTheDeskSaysWhoMayOverride: the desk's answer offers an override of a
// refused renewal with the blocks its refusals name, the due date asked
// where FOLIO names renewalDueDateRequiredBlock; to a caller who may see
// the loans and renew but not override, it says who may.
func TestTheDeskSaysWhoMayOverride(t *testing.T) {
	t.Parallel()
	c := harness.NewCluster(t, harness.Options{Circulations: 1, FeatureOn: true})
	lib := c.SetupLibrary(1, 2, 10)
	patron, items := lib.Patrons[0], lib.Items[0]
	changePolicy(t, c, lib, map[string]any{"renewable": false})
	for _, item := range items {
		c.CheckOut(0, item, patron).Want(t, http.StatusCreated)
	}
	c.Do(c.Storage, "POST", "/manualblocks", map[string]any{"userId": patronID(t, c, patron),
		"desc": "Overdue books", "renewals": true}).Want(t, http.StatusCreated)
	type verdict struct {
		Allowed  bool
		Reason   string
		Override *struct {
			Blocks          []string
			DueDateRequired bool
			Allowed         bool
			Reason          string
		}
	}
	renewals := func(permissions []string) string {
		t.Helper()
		token, err := auth.Mint(harness.Secret(), auth.Claims{Tenant: c.Tenant, UserID: harness.RoleUser(schemas.RoleLibrarian),
			Permissions: permissions}, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		var out struct {
			Patrons []struct {
				Loans []struct{ Actions map[string]verdict }
			}
		}
		c.DoWith(c.Circulations[0], "GET", "/circulation/patron-loans?patron="+patron, nil,
			map[string]string{schemas.HeaderTenant: c.Tenant, schemas.HeaderToken: token}).Want(t, http.StatusOK).Decode(t, &out)
		if len(out.Patrons) != 1 || len(out.Patrons[0].Loans) != 2 {
			t.Fatalf("the desk found %+v", out.Patrons)
		}
		v := out.Patrons[0].Loans[0].Actions[schemas.LoanActionRenew]
		if v.Override == nil {
			return fmt.Sprintf("%v %q, no override", v.Allowed, v.Reason)
		}
		return fmt.Sprintf("%v %q %+v", v.Allowed, v.Reason, *v.Override)
	}
	seeAndRenew := []string{"circulation.loans.collection.get", "circulation.renew-by-id.post"}
	both := `false "Patron blocked from renewing; loan is not renewable" `
	if got, want := renewals(append(seeAndRenew, schemas.PermissionOverridePatronBlock, schemas.PermissionOverrideRenewalBlock)),
		both+`{Blocks:[patronBlock renewalDueDateRequiredBlock] DueDateRequired:true Allowed:true Reason:}`; got != want {
		t.Errorf("a librarian's renewal:\n got %s\nwant %s", got, want)
	}
	if got, want := renewals(append(seeAndRenew, schemas.PermissionOverridePatronBlock)),
		both+`{Blocks:[patronBlock renewalDueDateRequiredBlock] DueDateRequired:true Allowed:false Reason:Overriding this needs the librarian role}`; got != want {
		t.Errorf("the renewal to a caller who may not override the policy:\n got %s\nwant %s", got, want)
	}
}

// loanOf is storage's loan of item (its only one).
func loanOf(t *testing.T, c *harness.Cluster, item string) map[string]any {
	t.Helper()
	var page struct{ Loans []map[string]any }
	c.Do(c.Storage, "GET", "/loan-storage/loans?itemId="+itemID(t, c, item), nil).Want(t, http.StatusOK).Decode(t, &page)
	if len(page.Loans) != 1 {
		t.Fatalf("item %s has %d loans", item, len(page.Loans))
	}
	return page.Loans[0]
}
