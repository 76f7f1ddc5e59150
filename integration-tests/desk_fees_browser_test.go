package integration

import (
	"fmt"
	"net/http"
	"sort"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/checkoutlock/integration-tests/harness"
	"github.com/checkoutlock/schemas"
)

// TestTheDeskTakesPaymentsAndWaives: on the desk's page, in Chromium at
// 1280 px and at 390 px, a librarian finds a patron who owes an overdue
// fine and a lost item's fees, shown with the balance in the library's
// currency. A payment and a waiver each ask first, naming the amount,
// the fee/fine and the patron, with Cancel focused: cancelled, nothing is
// written; confirmed, the fee/fine holds what remains, and the page says
// so. A payment of more than remains is refused in the server's words,
// and moves nothing. At neither width is the page wider than the screen.
func TestTheDeskTakesPaymentsAndWaives(t *testing.T) {
	t.Parallel()
	c := harness.NewCluster(t, harness.Options{Circulations: 1, FeatureOn: true})
	lib := setUpFees(t, c, 2, 2, facultyStandard(), lostPolicy(10, 5))
	c.Account(t, "lee", "Lee", "Librarian", schemas.RoleLibrarian, "lee-password")
	for i, width := range []int{1280, 390} {
		t.Run(fmt.Sprint(width), func(t *testing.T) {
			patron, items := lib.Patrons[i], lib.Items[i]
			checkOutOn(t, c, items[0], patron, "2020-01-01T12:00:00.000Z")
			checkInOn(t, c, items[0], harness.ServicePoint, "2020-01-25T12:00:00.000Z")
			loan := checkOutOn(t, c, items[1], patron, "2026-01-01T12:00:00.000Z")
			c.Do(c.Circulations[0], "POST", fmt.Sprintf("/circulation/loans/%s/declare-item-lost", loan["id"]),
				map[string]any{"servicePointId": harness.ServicePoint}).Want(t, http.StatusNoContent)
			deskFees(t, c, patron, items, width)
		})
	}
}

func deskFees(t *testing.T, c *harness.Cluster, patron string, items []string, width int) {
	userID := c.IDOf(t, "/users", "users", patron)
	fees := func() map[string]account {
		out := map[string]account{}
		for _, a := range accountsOf(t, c, userID) {
			out[a.FeeFineType] = a
		}
		return out
	}
	moved := func() int {
		n := 0
		for _, a := range accountsOf(t, c, userID) {
			n += len(actionsOf(t, c, a.ID))
		}
		return n
	}
	ctx := browser(t)
	if err := chromedp.Run(ctx, chromedp.EmulateViewport(int64(width), 900, chromedp.EmulateScale(1))); err != nil {
		t.Fatal(err)
	}
	signIn(t, ctx, c, "/ui/loans.html", "lee", "lee-password")
	if err := chromedp.Run(ctx, chromedp.SetValue("#patron", patron, chromedp.ByQuery), chromedp.Click("#find-submit", chromedp.ByQuery)); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, ctx, "the patron's three fees/fines", `document.querySelectorAll("#results tr[data-fee]").length === 3`)
	if got := textOf(t, ctx, "#results .fees-head"); got != "Fees/fines: $30.00 owed" {
		t.Errorf("the balance: %q, want $30.00 owed", got)
	}
	row := func(feeType string) string {
		return fmt.Sprintf(`[...document.querySelectorAll("#results tr[data-fee]")].find((r) => r.cells[0].textContent === %q)`, feeType)
	}
	// ask types the amount, presses the action and reads the question.
	ask := func(feeType, action, amount string) string {
		t.Helper()
		return asked(t, ctx, action+" of the "+feeType, func() {
			script := row(feeType) + `.querySelector(".fee-amount").value = ` + jsString(amount) + `; ` +
				row(feeType) + `.querySelector('button[data-fee-action="` + action + `"]').click()`
			if err := chromedp.Run(ctx, chromedp.Evaluate(script, nil)); err != nil {
				t.Fatal(err)
			}
		})
	}
	answer := func(button string) { t.Helper(); answered(t, ctx, button) }
	done := func(what, status string) { t.Helper(); deskSays(t, ctx, what, status) }
	before := moved()

	// A payment, cancelled first.
	if q, want := ask(schemas.FeeFineOverdueFine, "pay", "5.00"), "Take $5.00 from Patron "+patron+" (barcode "+patron+
		") for the Overdue fine for “Item "+items[0]+"”, paid by Cash?"; q != want {
		t.Errorf("the payment's question: %q, want %q", q, want)
	}
	answer("confirm-cancel")
	if n := moved(); n != before || fees()[schemas.FeeFineOverdueFine].Remaining.String() != "15.00" {
		t.Fatalf("a payment cancelled: %d actions (want %d), %+v", n, before, fees()[schemas.FeeFineOverdueFine])
	}
	ask(schemas.FeeFineOverdueFine, "pay", "5.00")
	answer("confirm-ok")
	done("the payment", "Paid $5.00 of the Overdue fine for “Item "+items[0]+"”: $10.00 remains.")
	if f := fees()[schemas.FeeFineOverdueFine]; f.Remaining.String() != "10.00" || f.PaymentStatus.Name != "Paid partially" {
		t.Fatalf("after the payment: %+v", f)
	}

	// A waiver, cancelled first.
	if q, want := ask(schemas.FeeFineLostItemFee, "waive", "2.50"), "Waive $2.50 of the Lost item fee for “Item "+items[1]+
		"”, owed by Patron "+patron+" (barcode "+patron+")?"; q != want {
		t.Errorf("the waiver's question: %q, want %q", q, want)
	}
	answer("confirm-cancel")
	if f := fees()[schemas.FeeFineLostItemFee]; f.Remaining.String() != "10.00" {
		t.Fatalf("a waiver cancelled: %+v", f)
	}
	ask(schemas.FeeFineLostItemFee, "waive", "2.50")
	answer("confirm-ok")
	done("the waiver", "Waived $2.50 of the Lost item fee for “Item "+items[1]+"”: $7.50 remains.")
	if f := fees()[schemas.FeeFineLostItemFee]; f.Remaining.String() != "7.50" || f.PaymentStatus.Name != "Waived partially" {
		t.Fatalf("after the waiver: %+v", f)
	}
	waitUntil(t, ctx, "the balance after both", `document.querySelector("#results .fees-head").textContent === "Fees/fines: $22.50 owed"`)

	// More than remains: refused in the server's words, nothing moved.
	after := moved()
	ask(schemas.FeeFineLostItemProcessing, "pay", "99")
	answer("confirm-ok")
	waitUntil(t, ctx, "the refusal", `document.getElementById("status").textContent.endsWith("Requested amount exceeds remaining amount") &&
		document.getElementById("status").classList.contains("error")`)
	if n := moved(); n != after {
		t.Fatalf("a refused payment moved money: %d actions, want %d", n, after)
	}
	var got []string
	for _, a := range accountsOf(t, c, userID) {
		got = append(got, a.FeeFineType+" "+a.Remaining.String())
	}
	sort.Strings(got)
	if want := "[Lost item fee 7.50 Lost item processing fee 5.00 Overdue fine 10.00]"; fmt.Sprint(got) != want {
		t.Fatalf("what the patron owes: %v, want %s", got, want)
	}
	if width == 1280 {
		screenshot(t, ctx, "desk-fees-1280.png")
	} else {
		screenshot(t, ctx, "desk-fees-390.png")
	}
	if w := evaluate[int](t, ctx, `document.documentElement.scrollWidth`); w > width {
		t.Errorf("the page is %d px wide at %d", w, width)
	}
	moneyHolds(t, c)
}
