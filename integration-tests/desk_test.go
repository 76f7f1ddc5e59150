package integration

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/checkoutlock/integration-tests/harness"
	"github.com/checkoutlock/schemas"
)

// TestTheDeskActsOnAPatronsLoans: a librarian finds a patron by name on
// the desk's page, in Chromium, and renews one loan, claims one returned,
// declares one lost and checks one in (the last three once confirmed),
// each written as circulation writes it; a second renewal and a second
// declaration of the lost item are not offered, for FOLIO's reasons; at
// 390 px nothing is wider than the screen. An operator is told the page
// needs the librarian role.
func TestTheDeskActsOnAPatronsLoans(t *testing.T) {
	t.Parallel()
	c := harness.NewCluster(t, harness.Options{Circulations: 1, FeatureOn: true})
	lib := c.SetupLibrary(1, 4, 10)
	patron, items := lib.Patrons[0], lib.Items[0]
	renewable(t, c, lib, map[string]any{"numberAllowed": 1, "renewFromId": "CURRENT_DUE_DATE"})
	for _, item := range items {
		c.CheckOut(0, item, patron).Want(t, http.StatusCreated)
	}
	c.Account(t, "lee", "Lee", "Librarian", schemas.RoleLibrarian, "lee-password")
	c.Account(t, "olga", "Olga", "Operator", schemas.RoleOperator, "olga-password")
	id := patronID(t, c, patron)
	_, last, _ := strings.Cut(patronName(t, c, id), " ")

	ctx := browser(t)
	signIn(t, ctx, c, "/ui/loans.html", "lee", "lee-password")
	if err := chromedp.Run(ctx,
		chromedp.SetValue("#patron", last, chromedp.ByQuery),
		chromedp.Click("#find-submit", chromedp.ByQuery)); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, ctx, "the patron's four loans", `document.querySelectorAll("#results tbody tr").length === 4`)
	if got := activeButtons(t, ctx); len(got) != 1+5*4 {
		t.Errorf("a librarian's buttons: %q, want Find and five actions on each of four loans", got)
	}
	// The rows stay where the pointer left them: after every action the
	// same loans in the same places, one checked in keeping its row.
	rowsNow := `[...document.querySelectorAll("#results tbody tr")].map((r) => r.dataset.loan)`
	order := evaluate[[]string](t, ctx, rowsNow)
	inPlace := func(after string) {
		t.Helper()
		if got := evaluate[[]string](t, ctx, rowsNow); !slices.Equal(got, order) {
			t.Errorf("after %s the rows are the loans %q, want %q where they were", after, got, order)
		}
	}
	row := func(item string) string {
		return fmt.Sprintf(`[...document.querySelectorAll("#results tbody tr")].find((r) => r.cells[1].textContent === %q)`, item)
	}
	press := func(item, action, status string) {
		t.Helper()
		if err := chromedp.Run(ctx, chromedp.Evaluate(row(item)+`.querySelector('button[data-action="`+action+`"]').click()`, nil)); err != nil {
			t.Fatal(err)
		}
		if action != "renew" {
			waitUntil(t, ctx, "the question", `document.getElementById("confirm-dialog").open`)
			if err := chromedp.Run(ctx, chromedp.Click("#confirm-ok", chromedp.ByQuery)); err != nil {
				t.Fatal(err)
			}
		}
		if err := chromedp.Run(ctx, chromedp.Poll(`document.getElementById("status").textContent.startsWith(`+jsString(status)+`)`, nil,
			chromedp.WithPollingTimeout(20*time.Second))); err != nil {
			t.Fatalf("%s of %s: the status reads %q, want %q…", action, item, textOf(t, ctx, "#status"), status)
		}
	}
	loan := func(item string) map[string]any { t.Helper(); return loanOf(t, c, item) }
	press(items[0], "renew", "Renewed ")
	if l := loan(items[0]); l["renewalCount"] != float64(1) || l["action"] != "renewed" {
		t.Errorf("the renewed loan: %v", l)
	}
	inPlace("a renewal")
	// Renewed to the policy's one renewal: not offered again, for FOLIO's
	// reason.
	disabledFor := func(item, action, reason string) {
		t.Helper()
		waitUntil(t, ctx, action+" of "+item+" not offered", row(item)+`.querySelector('button[data-action="`+action+`"]').disabled`)
		if got := evaluate[string](t, ctx, row(item)+`.querySelector('button[data-action="`+action+`"]').title`); got != reason {
			t.Errorf("%s of %s is disabled for %q, want %q", action, item, got, reason)
		}
	}
	disabledFor(items[0], "renew", "loan at maximum renewal number")
	press(items[1], "claim", "")
	waitUntil(t, ctx, "the claim", `document.getElementById("status").textContent.endsWith("is claimed returned.")`)
	if l := loan(items[1]); l["action"] != "claimedReturned" {
		t.Errorf("the loan claimed returned: %v", l)
	}
	inPlace("a claim")
	// Refused: the first loan checked in elsewhere since the page drew
	// it. The refusal is said in red; the next question clears it.
	c.CheckIn(0, items[0]).Want(t, http.StatusOK)
	press(items[0], "claim", "Not done (claim returned ")
	inPlace("a refused claim")
	waitUntil(t, ctx, "the loan checked in elsewhere kept in its row", row(items[0])+`.classList.contains("closed") &&
		`+row(items[0])+`.textContent.includes("Checked in: no longer on loan") && !`+row(items[0])+`.querySelector("button")`)
	if err := chromedp.Run(ctx, chromedp.Evaluate(row(items[2])+`.querySelector('button[data-action="lost"]').click()`, nil)); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, ctx, "the next question", `document.getElementById("confirm-dialog").open`)
	if got := textOf(t, ctx, "#status"); got != "" {
		t.Errorf("with the next question open, the last refusal still reads %q", got)
	}
	if err := chromedp.Run(ctx, chromedp.Click("#confirm-cancel", chromedp.ByQuery)); err != nil {
		t.Fatal(err)
	}
	press(items[2], "lost", "")
	waitUntil(t, ctx, "the declaration", `document.getElementById("status").textContent.endsWith("is declared lost.")`)
	if l := loan(items[2]); l["action"] != "declaredLost" {
		t.Errorf("the loan declared lost: %v", l)
	}
	// Not declared again: FOLIO's refusal, said as FOLIO says it.
	disabledFor(items[2], "lost", "The item is already declared lost")
	press(items[3], "checkin", "")
	waitUntil(t, ctx, "the check-in, its loan's row kept, closed", `document.getElementById("status").textContent.endsWith("is checked in.") &&
		`+row(items[3])+`.classList.contains("closed")`)
	inPlace("a check-in")
	if l := loan(items[3]); l["status"].(map[string]any)["name"] != "Closed" {
		t.Errorf("the loan checked in: %v", l)
	}
	if w := phoneWidth(t, ctx); w > 390 {
		t.Errorf("the desk's page is %d px wide at 390 px", w)
	}

	// An operator is told what the page needs.
	if err := chromedp.Run(ctx, chromedp.Click("#sign-out", chromedp.ByQuery), chromedp.WaitVisible("#signin-panel", chromedp.ByQuery)); err != nil {
		t.Fatal(err)
	}
	signInHere(t, ctx, "olga", "olga-password")
	waitUntil(t, ctx, "the operator's refusal", `document.getElementById("page-status").textContent ===
		"Olga Operator may not see patrons' loans: that needs the librarian role."`)
	if got := activeButtons(t, ctx); len(got) != 0 {
		t.Errorf("an operator's buttons on the desk's page: %q", got)
	}
}
