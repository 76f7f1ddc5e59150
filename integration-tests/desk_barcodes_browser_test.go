package integration

import (
	"net/http"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/checkoutlock/integration-tests/harness"
	"github.com/checkoutlock/schemas"
)

// TestTheDeskRenewsWithoutBarcodes: a patron and their loan's item without
// barcodes (FOLIO's barcodes are optional), the patron found by name on
// the desk's page in Chromium. The loan's Renew is offered and, pressed,
// renews it once by the ids; Check in, which goes by the item's barcode,
// is disabled saying so. The other actions are offered as for any loan.
func TestTheDeskRenewsWithoutBarcodes(t *testing.T) {
	t.Parallel()
	c := harness.NewCluster(t, harness.Options{Circulations: 1, FeatureOn: true})
	lib := c.SetupLibrary(1, 1, 10)
	c.Account(t, "lee", "Lee", "Librarian", schemas.RoleLibrarian, "lee-password")
	patron, item := lib.Patrons[0], lib.Items[0][0]
	name(t, c, patronID(t, c, patron), "Nadia", "Nobarcode")
	renewable(t, c, lib, map[string]any{"numberAllowed": 2, "renewFromId": "CURRENT_DUE_DATE"})
	c.CheckOut(0, item, patron).Want(t, http.StatusCreated)
	loanID := loanOf(t, c, item)["id"].(string)
	setBarcode(t, c, "/item-storage/items/"+itemID(t, c, item), "")
	setBarcode(t, c, "/users/"+patronID(t, c, patron), "")

	ctx := deskBrowser(t)
	signIn(t, ctx, c, "/ui/loans.html", "lee", "lee-password")
	countRenewals(t, ctx)
	if err := chromedp.Run(ctx, chromedp.SetValue("#patron", "Nadia", chromedp.ByQuery), chromedp.Click("#find-submit", chromedp.ByQuery)); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, ctx, "Nadia's loan", `document.querySelectorAll("#results tbody tr").length === 1 &&
		!document.getElementById("results").hasAttribute("aria-busy")`)
	button := func(action string) string {
		return `document.querySelector('#results tbody tr button[data-action="` + action + `"]')`
	}
	offered := evaluate[map[string]string](t, ctx, `Object.fromEntries([...document.querySelectorAll("#results tbody tr button[data-action]")]
		.map((b) => [b.dataset.action, b.disabled ? b.title : "offered"]))`)
	want := map[string]string{"renew": "offered", "due": "offered", "claim": "offered", "lost": "offered",
		"checkin": "a check-in needs the item's barcode"}
	for action, w := range want {
		if offered[action] != w {
			t.Errorf("%s of a loan without barcodes: %q, want %q", action, offered[action], w)
		}
	}
	if len(offered) != len(want) {
		t.Errorf("the loan's actions %v, want %v", offered, want)
	}
	if err := chromedp.Run(ctx, chromedp.Evaluate(button("renew")+`.click()`, nil)); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, ctx, "the renewal", `document.getElementById("status").textContent.startsWith("Renewed Item `+item+`: due ") &&
		!document.getElementById("results").hasAttribute("aria-busy")`)
	var loan struct {
		RenewalCount int
		Action       string
	}
	c.Do(c.Storage, "GET", "/loan-storage/loans/"+loanID, nil).Want(t, http.StatusOK).Decode(t, &loan)
	if loan.RenewalCount != 1 || loan.Action != "renewed" || evaluate[int](t, ctx, `window.renewalsSent`) != 1 {
		t.Errorf("the loan renewed at the desk: %+v, %d renewals sent; want renewed once", loan, evaluate[int](t, ctx, `window.renewalsSent`))
	}
}
