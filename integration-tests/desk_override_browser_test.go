package integration

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/checkoutlock/integration-tests/harness"
	"github.com/checkoutlock/schemas"
	"github.com/checkoutlock/serverkit/auth"
)

// TestTheDeskOverridesARefusedRenewal: on the desk's page, in Chromium at
// 390 px, a librarian overrides refused renewals as FOLIO's Users app
// does. The override is offered under a refused Renew exactly where every
// refusal is one an override lifts: a loan renewed to its policy's
// limit, a patron's manual block, a policy that does not renew; not an
// item declared lost, nor a renewal the page offers. Its question names
// the item, the patron and the refusal; cancelled, or confirmed without
// a reason, nothing is written; confirmed, the loan is renewed through
// the override with the librarian's words as its comment, due at the
// date the librarian chose where the policy gives none.
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

	ctx := browser(t)
	if err := chromedp.Run(ctx, chromedp.EmulateViewport(390, 844, chromedp.EmulateScale(1))); err != nil {
		t.Fatal(err)
	}
	signIn(t, ctx, c, "/ui/loans.html", "lee", "lee-password")
	find := func(barcode string, loans int) {
		t.Helper()
		if err := chromedp.Run(ctx, chromedp.SetValue("#patron", barcode, chromedp.ByQuery), chromedp.Click("#find-submit", chromedp.ByQuery)); err != nil {
			t.Fatal(err)
		}
		waitUntil(t, ctx, "the patron's loans", fmt.Sprintf(`document.querySelectorAll("#results tbody tr").length === %d &&
			document.querySelector("#results h2").textContent.endsWith("(%s)")`, loans, barcode))
	}
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
	dialog := `document.getElementById("override-dialog")`
	// ask presses item's Override and reads the question, the reason
	// field focused; due says whether the due date is asked.
	ask := func(item string, due bool) string {
		t.Helper()
		if err := chromedp.Run(ctx, chromedp.Evaluate(row(item)+`.querySelector("button[data-override]").click()`, nil)); err != nil {
			t.Fatal(err)
		}
		waitUntil(t, ctx, "the override's question", dialog+`.open`)
		if got := evaluate[string](t, ctx, `document.activeElement.id`); got != "override-comment" {
			t.Errorf("the override's question: the focus is on %q, want the reason", got)
		}
		if got := evaluate[bool](t, ctx, `!document.getElementById("override-due-field").hidden && !document.getElementById("override-due").disabled`); got != due {
			t.Errorf("the override of %s asks the due date: %v, want %v", item, got, due)
		}
		return textOf(t, ctx, "#override-text")
	}
	// override confirms the question open with a reason (and a due date,
	// a datetime-local value) and waits until the page says it is done;
	// it answers the instant the page sent as the due date.
	override := func(item, comment, due string) string {
		t.Helper()
		sent := ""
		if due != "" {
			sent = evaluate[string](t, ctx, `new Date(`+jsString(due)+`).toISOString()`)
		}
		if err := chromedp.Run(ctx, chromedp.SetValue("#override-comment", comment, chromedp.ByQuery),
			chromedp.SetValue("#override-due", due, chromedp.ByQuery), chromedp.Click("#override-ok", chromedp.ByQuery)); err != nil {
			t.Fatal(err)
		}
		waitUntil(t, ctx, "the override of "+item, `!`+dialog+`.open && document.getElementById("status").textContent.startsWith(`+
			jsString("Renewed Item "+item+" through an override: due ")+`) && !document.getElementById("results").hasAttribute("aria-busy")`)
		return sent
	}
	loan := func(item string) string {
		t.Helper()
		l := loanOf(t, c, item)
		comment, _ := l["actionComment"].(string)
		return fmt.Sprintf("%s %v %q", l["action"], l["renewalCount"], comment)
	}

	find(patron, 3)
	if got, want := offered(), map[string]bool{items[0]: true}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("overrides offered: %v, want %v (the loan at its limit alone: the lost item's refusal is not lifted, the third renews)", got, want)
	}
	who := "Alice Archer (barcode " + patron + ")"
	if got, want := ask(items[0], false), "Renewing “Item "+items[0]+"” (barcode "+items[0]+") for "+who+
		" is refused: loan at maximum renewal number. Renew it through an override?"; got != want {
		t.Errorf("the override asks %q, want %q", got, want)
	}
	// Cancelled, a reason typed: nothing written.
	if err := chromedp.Run(ctx, chromedp.SetValue("#override-comment", "Typed, then cancelled", chromedp.ByQuery),
		chromedp.Click("#override-cancel", chromedp.ByQuery)); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, ctx, "the question cancelled", `!`+dialog+`.open`)
	// Confirmed without a reason: the question stays, nothing is sent.
	ask(items[0], false)
	if err := chromedp.Run(ctx, chromedp.Click("#override-ok", chromedp.ByQuery)); err != nil {
		t.Fatal(err)
	}
	if !evaluate[bool](t, ctx, dialog+`.open && document.getElementById("override-comment").matches(":invalid")`) {
		t.Error("the override without a reason closed its question")
	}
	if got := loan(items[0]); got != `renewed 1 ""` {
		t.Errorf("before the override is confirmed the loan is %s", got)
	}
	override(items[0], "Patron travelling until May", "")
	if got, want := loan(items[0]), `renewedThroughOverride 2 "Patron travelling until May"`; got != want {
		t.Errorf("the loan overridden past its limit: %s, want %s", got, want)
	}
	if w := evaluate[int](t, ctx, `document.documentElement.scrollWidth`); w > 390 {
		t.Errorf("the desk's page with an override offered is %d px wide at 390 px", w)
	}

	// A patron's manual block.
	find(lib.Patrons[1], 1)
	if got, want := ask(blocked, false), "Renewing “Item "+blocked+"” (barcode "+blocked+") for Bruno Archibald (barcode "+lib.Patrons[1]+
		") is refused: Patron blocked from renewing. Renew it through an override?"; got != want {
		t.Errorf("the override asks %q, want %q", got, want)
	}
	override(blocked, "Block lifted by the head of circulation", "")
	if got, want := loan(blocked), `renewedThroughOverride 1 "Block lifted by the head of circulation"`; got != want {
		t.Errorf("the blocked patron's loan overridden: %s, want %s", got, want)
	}

	// A policy that does not renew: the due date is asked for, and the
	// loan is due then.
	changePolicy(t, c, lib, map[string]any{"renewable": false})
	find(patron, 3)
	waitUntil(t, ctx, "the override under a policy that does not renew", row(items[2])+`.querySelector("button[data-override]") !== null`)
	if got, want := ask(items[2], true), "Renewing “Item "+items[2]+"” (barcode "+items[2]+") for "+who+
		" is refused: loan is not renewable. Renew it through an override?"; got != want {
		t.Errorf("the override asks %q, want %q", got, want)
	}
	var before struct{ DueDate time.Time }
	c.Do(c.Storage, "GET", "/loan-storage/loans/"+loanOf(t, c, items[2])["id"].(string), nil).Want(t, http.StatusOK).Decode(t, &before)
	chosen := evaluate[string](t, ctx, `(() => { const d = new Date(`+jsString(before.DueDate.Add(72*time.Hour).Format(time.RFC3339))+`);
		d.setHours(17, 30, 0, 0); return localDateTime(d); })()`)
	sent := override(items[2], "Thesis deadline", chosen)
	if got, want := loan(items[2]), `renewedThroughOverride 1 "Thesis deadline"`; got != want {
		t.Errorf("the loan overridden under a policy that does not renew: %s, want %s", got, want)
	}
	var after struct{ DueDate time.Time }
	c.Do(c.Storage, "GET", "/loan-storage/loans/"+loanOf(t, c, items[2])["id"].(string), nil).Want(t, http.StatusOK).Decode(t, &after)
	if want, err := time.Parse(time.RFC3339, sent); err != nil || !after.DueDate.Equal(want) {
		t.Errorf("the loan overridden is due %s, want the date chosen, %s (%v)", after.DueDate, sent, err)
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
		return fmt.Sprintf("%v %q %+v", v.Allowed, v.Reason, *v.Override)
	}
	seeAndRenew := []string{"circulation.loans.collection.get", "circulation.renew-by-barcode.post"}
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
