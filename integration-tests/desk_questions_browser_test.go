package integration

import (
	"net/http"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/checkoutlock/integration-tests/harness"
	"github.com/checkoutlock/schemas"
)

// TestADeskQuestionLeavesNothingBehind: a question the desk's page asks
// before an action goes without a trace. Escape closes it as Cancel does:
// nothing is sent, and the focus is back on the button that asked, so
// the librarian goes on from there. A sign-out in another tab while a
// question is open takes the question with the page's data: the page
// shows the sign-in form, no question of the session that ended is left
// to confirm, and the loan is as it was.
func TestADeskQuestionLeavesNothingBehind(t *testing.T) {
	t.Parallel()
	c := harness.NewCluster(t, harness.Options{Circulations: 1, FeatureOn: true})
	lib := c.SetupLibrary(1, 1, 5)
	c.Account(t, "lee", "Lee", "Librarian", schemas.RoleLibrarian, "lee-password")
	patron, item := lib.Patrons[0], lib.Items[0][0]
	c.CheckOut(0, item, patron).Want(t, http.StatusCreated)
	const lent = "Open checkedout 0, item Checked out"
	if got := deskLoanState(t, c, item); got != lent {
		t.Fatalf("the loan lent: %s, want %s", got, lent)
	}

	first := browser(t)
	signIn(t, first, c, "/ui/loans.html", "lee", "lee-password")
	if err := chromedp.Run(first, chromedp.SetValue("#patron", patron, chromedp.ByQuery), chromedp.Click("#find-submit", chromedp.ByQuery)); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, first, "the patron's loan", `document.querySelectorAll("#results tbody tr").length === 1`)
	checkIn := `document.querySelector('#results tbody tr button[data-action="checkin"]')`
	ask := func(what string) {
		t.Helper()
		if err := chromedp.Run(first, chromedp.Evaluate(checkIn+`.click()`, nil)); err != nil {
			t.Fatal(err)
		}
		waitUntil(t, first, what, confirmDialog+`.open`)
	}

	// Escape: closed, nothing sent, the focus on the check-in again.
	ask("the check-in's question")
	if err := chromedp.Run(first, chromedp.KeyEvent(kb.Escape)); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, first, "the question closed by Escape", `!`+confirmDialog+`.open`)
	waitUntil(t, first, "the focus back on the check-in", `document.activeElement === `+checkIn)
	// A check-in sent would be under way: its button disabled and the
	// loans busy from the moment it is sent.
	if sent := evaluate[bool](t, first, checkIn+`.disabled || document.getElementById("results").hasAttribute("aria-busy")`); sent {
		t.Errorf("the check-in escaped is under way")
	}
	if got := textOf(t, first, "#status"); got != "" {
		t.Errorf("the page, the question escaped, says %q", got)
	}
	if got := deskLoanState(t, c, item); got != lent {
		t.Errorf("the loan after Escape: %s, want %s", got, lent)
	}

	// Asked again, then signed out in a second tab: the first shows the
	// sign-in form, its question gone.
	ask("the check-in's question asked again")
	second := anotherTab(t, first)
	if err := chromedp.Run(second, chromedp.Navigate(pageURL(c, "/ui/loans.html")), chromedp.WaitVisible("#sign-out", chromedp.ByQuery),
		chromedp.Click("#sign-out", chromedp.ByQuery), chromedp.WaitVisible("#signin-panel", chromedp.ByQuery)); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, first, "the first tab signed out, its question gone", `!document.getElementById("signin-panel").hidden &&
		document.getElementById("content").hidden && !`+confirmDialog+`.open`)
	if got := deskLoanState(t, c, item); got != lent {
		t.Errorf("the loan after the sign-out: %s, want %s", got, lent)
	}
}
