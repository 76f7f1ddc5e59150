package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/checkoutlock/integration-tests/harness"
	"github.com/checkoutlock/schemas"
)

// deskButtons is what the desk's page shows of a loan's buttons: each
// action's button, enabled or not, and the reason it shows when not (its
// title, its description and the text below it, which must agree).
type deskButton struct {
	Action, Item, Reason, Title, Described string
	Enabled                                bool
}

// deskButtonsScript reads every loan's buttons off the page.
const deskButtonsScript = `[...document.querySelectorAll("#results tbody tr")].flatMap((r) =>
	[...r.querySelectorAll("button[data-action]")].map((b) => {
		const small = b.parentElement.querySelector(".desk-reason");
		const described = b.getAttribute("aria-describedby");
		const d = described && document.getElementById(described);
		return { action: b.dataset.action, item: r.cells[1].textContent, enabled: !b.disabled,
			reason: small ? small.textContent : "", title: b.title, described: d ? d.textContent : "" };
	}))`

// TestTheDeskOffersOnlyWhatTheServerDoes: on the desk's page, in Chromium
// at 1280 px and at 390 px, a librarian finds a patron by the beginning of
// her names and walks her loans through every state the desk makes:
// checked out, renewed to the policy's limit, claimed returned, declared
// lost, and under a policy that does not renew. In each state every
// button the page disables says why, and the reason is, word for word,
// what the route answers when called directly; every button it enables is
// pressed in some state and is done. Claim returned, declare lost and
// check in ask first, naming the item and the patron, with Cancel
// focused: cancelled, nothing is written. The check-in of an item claimed
// returned asks how the claim is resolved, and is not sent without it;
// found by the library, the loan says so. The table's columns keep their
// widths through every action; at 1280 px a barcode is on one line, and
// at neither width is the page wider than the screen.
func TestTheDeskOffersOnlyWhatTheServerDoes(t *testing.T) {
	t.Parallel()
	c := harness.NewCluster(t, harness.Options{Circulations: 1, FeatureOn: true})
	lib := c.SetupLibrary(2, 8, 20)
	c.Account(t, "lee", "Lee", "Librarian", schemas.RoleLibrarian, "lee-password")
	names := [][2]string{{"Alice", "Archer"}, {"Bruno", "Archibald"}}
	for i, p := range lib.Patrons {
		name(t, c, patronID(t, c, p), names[i][0], names[i][1])
	}
	// A second desk, first by name though made after the harness's.
	c.Do(c.Storage, "POST", "/service-points", map[string]any{"name": "Annex desk", "code": "annex",
		"discoveryDisplayName": "Annex"}).Want(t, http.StatusCreated)
	changePolicy(t, c, lib, map[string]any{"name": deskPolicyName})
	for i, width := range []int{1280, 390} {
		t.Run(fmt.Sprint(width), func(t *testing.T) {
			renewable(t, c, lib, map[string]any{"numberAllowed": 1, "renewFromId": "CURRENT_DUE_DATE"})
			// A barcode as long as a library's (fourteen digits and a copy
			// number), longer than its column at 1280 px: on one line still.
			items := append(slices.Clone(lib.Items[i]), fmt.Sprintf("3123400012345%d-COPY-0002", i))
			var doc map[string]any
			c.Do(c.Storage, "GET", "/item-storage/items/"+itemID(t, c, items[0]), nil).Want(t, http.StatusOK).Decode(t, &doc)
			for _, k := range []string{"id", "metadata", "_version", "hrid"} {
				delete(doc, k)
			}
			doc["barcode"], doc["title"], doc["status"] = items[8], "Item "+items[8], map[string]any{"name": schemas.ItemAvailable}
			c.Do(c.Storage, "POST", "/item-storage/items", doc).Want(t, http.StatusCreated)
			// A title that fills its column, on a loan checked in early: the
			// columns keep their widths when it goes.
			c.Do(c.Storage, "GET", "/item-storage/items/"+itemID(t, c, items[3]), nil).Want(t, http.StatusOK).Decode(t, &doc)
			delete(doc, "metadata")
			doc["title"] = "The Complete Annotated Catalogue of Everything Lent Across the Circulation Desk, Volume " + items[3]
			c.Do(c.Storage, "PUT", "/item-storage/items/"+itemID(t, c, items[3]), doc).Want(t, http.StatusNoContent)
			deskWalk(t, c, lib, lib.Patrons[i], names[i], items, width)
		})
	}
}

// deskPolicyName is the desk's loan policy's name, as long as a
// library's.
const deskPolicyName = "Graduates: three items, renewable once, no holds"

// name gives a patron a first and a last name, through storage.
func name(t *testing.T, c *harness.Cluster, id, first, last string) {
	t.Helper()
	var u map[string]any
	c.Do(c.Storage, "GET", "/users/"+id, nil).Want(t, http.StatusOK).Decode(t, &u)
	delete(u, "metadata")
	u["personal"] = map[string]any{"firstName": first, "lastName": last}
	c.Do(c.Storage, "PUT", "/users/"+id, u).Want(t, http.StatusNoContent)
}

// brokenWords are the words of the elements sel finds (each holding
// text alone) that are broken across lines: a word drawn in one box is
// whole. It fails t when sel finds nothing.
func brokenWords(t *testing.T, ctx context.Context, sel string) []string {
	t.Helper()
	got := evaluate[struct {
		Found  int
		Broken []string
	}](t, ctx, `(() => { const found = document.querySelectorAll(`+jsString(sel)+`);
		return { found: found.length, broken: [...found].flatMap((s) => {
			const text = s.firstChild, out = [], word = /\S+/g;
			for (let m; text && (m = word.exec(text.data));) {
				const r = document.createRange();
				r.setStart(text, m.index);
				r.setEnd(text, m.index + m[0].length);
				if (r.getClientRects().length !== 1) out.push(m[0]);
			}
			return out;
		}) }; })()`)
	if got.Found == 0 {
		t.Errorf("nothing found by %s to look for broken words in", sel)
	}
	return got.Broken
}

// deskLoanState is what storage holds of an item's loan: its action and
// status, and the item's status.
func deskLoanState(t *testing.T, c *harness.Cluster, item string) string {
	t.Helper()
	var page struct {
		Loans []struct {
			Action       string
			RenewalCount int
			Status       struct{ Name string }
		}
	}
	c.Do(c.Storage, "GET", "/loan-storage/loans?itemId="+itemID(t, c, item), nil).Want(t, http.StatusOK).Decode(t, &page)
	var it struct{ Status struct{ Name string } }
	c.Do(c.Storage, "GET", "/item-storage/items/"+itemID(t, c, item), nil).Want(t, http.StatusOK).Decode(t, &it)
	if len(page.Loans) != 1 {
		t.Fatalf("item %s has %d loans", item, len(page.Loans))
	}
	l := page.Loans[0]
	return fmt.Sprintf("%s %s %d, item %s", l.Status.Name, l.Action, l.RenewalCount, it.Status.Name)
}

func deskWalk(t *testing.T, c *harness.Cluster, lib harness.Library, patron string, person [2]string, items []string, width int) {
	for _, item := range items {
		c.CheckOut(0, item, patron).Want(t, http.StatusCreated)
	}
	ctx := browser(t)
	if err := chromedp.Run(ctx, chromedp.EmulateViewport(int64(width), 900, chromedp.EmulateScale(1))); err != nil {
		t.Fatal(err)
	}
	signIn(t, ctx, c, "/ui/loans.html", "lee", "lee-password")
	// Found by the beginning of her first name and the first letter of
	// her last: "Alice A".
	search := person[0] + " " + person[1][:1]
	if err := chromedp.Run(ctx, chromedp.SetValue("#patron", search, chromedp.ByQuery), chromedp.Click("#find-submit", chromedp.ByQuery)); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, ctx, "the patron's nine loans", `document.querySelectorAll("#results section").length === 1 &&
		document.querySelectorAll("#results tbody tr").length === 9`)
	if got, want := textOf(t, ctx, "#results h2"), person[0]+" "+person[1]+" ("+patron+")"; got != want {
		t.Errorf("the patron found for %q: %q, want %q", search, got, want)
	}
	// No service point remembered: the tenant's first by name, shown.
	chosen := `[...document.getElementById("service-point").selectedOptions].map((o) => o.textContent).join()`
	if got := evaluate[string](t, ctx, chosen); got != "Annex desk" {
		t.Errorf("the service point chosen: %q, want the tenant's first by name, Annex desk", got)
	}

	columns := `[...document.querySelectorAll("#results thead th")].map((th) => th.getBoundingClientRect().width)`
	widths := evaluate[[]float64](t, ctx, columns)
	row := func(item string) string {
		return fmt.Sprintf(`[...document.querySelectorAll("#results tbody tr")].find((r) => r.cells[1].textContent === %q)`, item)
	}
	press := func(item, action string) {
		t.Helper()
		if err := chromedp.Run(ctx, chromedp.Evaluate(row(item)+`.querySelector('button[data-action="`+action+`"]').click()`, nil)); err != nil {
			t.Fatal(err)
		}
	}
	ask := func(item, action string) string {
		t.Helper()
		return asked(t, ctx, action+" of "+item, func() { press(item, action) })
	}
	answer := func(button string) { t.Helper(); answered(t, ctx, button) }
	done := func(what, status string) { t.Helper(); deskSays(t, ctx, what, status) }
	// confirmed presses the action, confirms it and waits until the page
	// says it is done, in words.
	confirmed := func(item, action, what, status string) {
		t.Helper()
		ask(item, action)
		answer("confirm-ok")
		done(what, status)
	}
	// check holds what the page says against what the server does, in the
	// state the loans are in now.
	check := func(state string) {
		t.Helper()
		buttons := evaluate[[]deskButton](t, ctx, deskButtonsScript)
		if len(buttons) == 0 {
			t.Fatalf("%s: no button", state)
		}
		for _, b := range buttons {
			if b.Enabled {
				if b.Reason != "" || b.Title != "" {
					t.Errorf("%s: %s of %s is offered with a reason not to (%q, %q)", state, b.Action, b.Item, b.Reason, b.Title)
				}
				continue
			}
			if b.Reason == "" || b.Title != b.Reason || b.Described != b.Reason {
				t.Errorf("%s: %s of %s is disabled saying %q (title %q, description %q)", state, b.Action, b.Item, b.Reason, b.Title, b.Described)
			}
			if got := refusalOf(t, c, patron, b.Item, b.Action); got != b.Reason {
				t.Errorf("%s: %s of %s is disabled for %q; the route, called, answers %q", state, b.Action, b.Item, b.Reason, got)
			}
		}
		if width >= 1280 {
			if got := evaluate[[]float64](t, ctx, columns); !slices.Equal(got, widths) {
				t.Errorf("%s: the columns are %v wide, were %v", state, got, widths)
			}
			// Each barcode on one line; the harness's short ones inside
			// their cells too.
			if lines := evaluate[[]int](t, ctx, `[...document.querySelectorAll("#results td.barcode")].map((td) => {
				const r = document.createRange(); r.selectNodeContents(td);
				return td.textContent.length < 12 && td.scrollWidth > td.clientWidth ? -1 : r.getClientRects().length; })`); len(lines) == 0 ||
				slices.ContainsFunc(lines, func(n int) bool { return n != 1 }) {
				t.Errorf("%s: the barcodes' lines %v, want each on one line", state, lines)
			}
		}
		// A loan's policy named, and no word of it or of its renewals
		// broken across lines.
		names := evaluate[[]string](t, ctx, `[...document.querySelectorAll("#results td .policy")].map((s) => s.textContent)`)
		if len(names) == 0 || slices.Contains(names, "") {
			t.Errorf("%s: the loans' policies named %q", state, names)
		}
		if broken := brokenWords(t, ctx, "#results td .renewals, #results td .policy"); len(broken) > 0 {
			t.Errorf("%s: the words %q of the renewals broken across lines", state, broken)
		}
		if w := evaluate[int](t, ctx, `document.documentElement.scrollWidth`); w > width {
			t.Errorf("%s: the page is %d px wide at %d px", state, w, width)
		}
	}
	reason := func(item, action string) string {
		t.Helper()
		return evaluate[string](t, ctx, row(item)+`.querySelector('button[data-action="`+action+`"]').title`)
	}
	cell := func(item string, i int) string {
		t.Helper()
		return evaluate[string](t, ctx, row(item)+`.cells[`+fmt.Sprint(i)+`].innerText`)
	}
	check("all checked out")
	if got := strings.Fields(cell(items[0], 3)); strings.Join(got, " ") != "0 used · 1 left "+deskPolicyName {
		t.Errorf("the renewals of a loan not renewed: %q, want 0 used, 1 left, and the policy's name", got)
	}

	// Each question names the item and the patron; cancelled, nothing is
	// written.
	who := fmt.Sprintf("%s %s (barcode %s)", person[0], person[1], patron)
	for _, q := range []struct{ item, action, want string }{
		{items[1], "claim", "Record that " + who + " says they returned “Item " + items[1] + "” (barcode " + items[1] + ")? The item becomes Claimed returned; the loan stays open."},
		{items[2], "lost", "Declare “Item " + items[2] + "” (barcode " + items[2] + "), on loan to " + who + ", lost at Annex desk? The loan stays open."},
		{items[3], "checkin", "Check in “The Complete Annotated Catalogue of Everything Lent Across the Circulation Desk, Volume " + items[3] + "” (barcode " + items[3] + "), on loan to " + who + ", at Annex desk? The loan is closed."},
	} {
		if got := ask(q.item, q.action); got != q.want {
			t.Errorf("%s of %s asks %q, want %q", q.action, q.item, got, q.want)
		}
		answer("confirm-cancel")
	}
	// Renewed without a question; by the time its answer shows, a
	// cancelled action would have been written.
	press(items[0], "renew")
	waitUntil(t, ctx, "the renewal", `document.getElementById("status").textContent.startsWith("Renewed Item `+items[0]+`: due ") &&
		!document.getElementById("results").hasAttribute("aria-busy")`)
	for _, item := range items[1:4] {
		if got := deskLoanState(t, c, item); got != "Open checkedout 0, item Checked out" {
			t.Errorf("after the question was cancelled, %s's loan is %s", item, got)
		}
	}
	if got := deskLoanState(t, c, items[0]); got != "Open renewed 1, item Checked out" {
		t.Errorf("the loan renewed: %s", got)
	}
	check("one loan renewed to the limit")
	if got := reason(items[0], "renew"); got != "loan at maximum renewal number" {
		t.Errorf("the renewal past the limit is disabled for %q", got)
	}
	if got := strings.Join(strings.Fields(cell(items[0], 3)), " "); got != "1 used · 0 left "+deskPolicyName {
		t.Errorf("the renewals of a loan renewed to the limit: %q", got)
	}
	for _, item := range items[6:8] {
		press(item, "renew")
		waitUntil(t, ctx, "the renewal of "+item, `document.getElementById("status").textContent.startsWith("Renewed Item `+item+`: due ") &&
			!document.getElementById("results").hasAttribute("aria-busy")`)
	}

	// Confirmed: done.
	confirmed(items[1], "claim", "the claim", "Item "+items[1]+" is claimed returned.")
	confirmed(items[2], "lost", "the declaration", "Item "+items[2]+" is declared lost.")
	confirmed(items[3], "checkin", "the check-in", "The Complete Annotated Catalogue of Everything Lent Across the Circulation Desk, Volume "+items[3]+" is checked in.")
	waitUntil(t, ctx, "the loan checked in kept in its row, closed", `document.querySelectorAll("#results tbody tr").length === 9 &&
		document.querySelectorAll("#results tbody tr.closed").length === 1 && `+row(items[3])+`.classList.contains("closed")`)
	for item, want := range map[string]string{items[1]: "Open claimedReturned 0, item Claimed returned",
		items[2]: "Open declaredLost 0, item Declared lost", items[3]: "Closed checkedin 0, item Available"} {
		if got := deskLoanState(t, c, item); got != want {
			t.Errorf("%s's loan: %s, want %s", item, got, want)
		}
	}
	check("claimed returned, declared lost")
	for _, r := range []struct{ item, action, want string }{
		{items[1], "claim", "The item is already claimed returned"}, {items[1], "renew", "item is Claimed returned"},
		{items[2], "lost", "The item is already declared lost"}, {items[2], "renew", "item is Declared lost"},
	} {
		if got := reason(r.item, r.action); got != r.want {
			t.Errorf("%s of %s is disabled for %q, want %q", r.action, r.item, got, r.want)
		}
	}

	// What each state still offers is done: loans renewed to the limit
	// claimed returned, declared lost and checked in, a claimed one
	// declared lost, a lost one claimed.
	confirmed(items[0], "claim", "the claim of the loan renewed", "Item "+items[0]+" is claimed returned.")
	confirmed(items[6], "lost", "the declaration of the loan renewed", "Item "+items[6]+" is declared lost.")
	confirmed(items[7], "checkin", "the check-in of the loan renewed", "Item "+items[7]+" is checked in.")
	confirmed(items[1], "lost", "the declaration of the item claimed", "Item "+items[1]+" is declared lost.")
	confirmed(items[2], "claim", "the claim of the item lost", "Item "+items[2]+" is claimed returned.")
	check("claims and losses crossed")
	confirmed(items[1], "checkin", "the check-in of the item lost", "Item "+items[1]+" is checked in.")
	// The check-in of an item claimed returned asks how the claim is
	// resolved, the server's resolutions offered, none chosen, the
	// choice focused; confirmed without one, it is not sent.
	press(items[2], "checkin")
	waitUntil(t, ctx, "the check-in's question of the item claimed", confirmDialog+`.open`)
	if got, want := textOf(t, ctx, "#confirm-text"), "Check in “Item "+items[2]+"” (barcode "+items[2]+"), claimed returned by "+who+
		", at Annex desk? The loan is closed. Was it found by the library (no overdue fine) or returned by the patron?"; got != want {
		t.Errorf("the check-in of the item claimed asks %q, want %q", got, want)
	}
	if got := evaluate[[]string](t, ctx, `[document.activeElement.id, document.getElementById("confirm-choice").value,
		...[...document.getElementById("confirm-choice").options].map((o) => o.value)]`); !slices.Equal(got,
		[]string{"confirm-choice", "", "", "Found by library", "Returned by patron"}) {
		t.Errorf("the claim's resolution asked: focus, value and options %q", got)
	}
	if got := evaluate[bool](t, ctx, `document.getElementById("confirm-ok").click(), `+confirmDialog+`.open`); !got {
		t.Errorf("the check-in of the item claimed, confirmed with no resolution chosen, closed the question")
	}
	if err := chromedp.Run(ctx, chromedp.SetValue("#confirm-choice", "Found by library", chromedp.ByQuery)); err != nil {
		t.Fatal(err)
	}
	if width == 390 {
		screenshot(t, ctx, "desk-claim-390.png")
	}
	answer("confirm-ok")
	done("the check-in of the item claimed", "Item "+items[2]+" is checked in.")
	if got := deskLoanState(t, c, items[2]); got != "Closed checkedInFoundByLibrary 0, item Available" {
		t.Errorf("the item claimed, checked in as found by the library: %s", got)
	}
	waitUntil(t, ctx, "the loans checked in kept in their rows, closed", `document.querySelectorAll("#results tbody tr").length === 9 &&
		document.querySelectorAll("#results tbody tr.closed").length === 4`)

	// A policy that does not renew: the renewal is refused in its words.
	changePolicy(t, c, lib, map[string]any{"renewable": false})
	if err := chromedp.Run(ctx, chromedp.Click("#find-submit", chromedp.ByQuery)); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, ctx, "the loans under a policy that does not renew", row(items[4])+`.querySelector('button[data-action="renew"]').disabled`)
	check("a policy that does not renew")
	if got := reason(items[4], "renew"); got != "loan is not renewable" {
		t.Errorf("a renewal under a policy that does not renew is disabled for %q", got)
	}
	if got := strings.Join(strings.Fields(cell(items[4], 3)), " "); got != "0 used · not renewable "+deskPolicyName {
		t.Errorf("the renewals of a loan under a policy that does not renew: %q", got)
	}
	confirmed(items[4], "lost", "the declaration under a policy that does not renew", "Item "+items[4]+" is declared lost.")
	confirmed(items[5], "checkin", "the check-in under a policy that does not renew", "Item "+items[5]+" is checked in.")
	confirmed(items[8], "claim", "the claim under a policy that does not renew", "Item "+items[8]+" is claimed returned.")
	check("the last loans")

	// The desk chosen is remembered by the browser.
	if err := chromedp.Run(ctx, chromedp.SetValue("#service-point", harness.ServicePoint, chromedp.ByQuery),
		chromedp.Evaluate(`document.getElementById("service-point").dispatchEvent(new Event("change"))`, nil),
		chromedp.Reload()); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, ctx, "the loans again", `document.querySelectorAll("#results tbody tr").length === 4`)
	if got := evaluate[string](t, ctx, chosen); got != "Circ Desk 2" {
		t.Errorf("the service point after a reload: %q, want the one chosen, Circ Desk 2", got)
	}
}

// refusalOf is what the route of a desk's action answers, called directly
// for the patron's loan of item: the messages of its refusal, as the page
// joins them, or "done" when it does it.
func refusalOf(t *testing.T, c *harness.Cluster, patron, item, action string) string {
	t.Helper()
	var r harness.Response
	switch action {
	case "renew":
		// As the page renews: by the ids.
		r = c.Do(c.Circulations[0], "POST", "/circulation/renew-by-id", map[string]string{"itemId": itemID(t, c, item), "userId": patronID(t, c, patron)})
	case "claim", "lost", "due":
		var page struct{ Loans []struct{ ID string } }
		q := url.Values{"query": {"itemId==" + itemID(t, c, item) + ` and status.name=="Open"`}}
		c.Do(c.Circulations[0], "GET", "/circulation/loans?"+q.Encode(), nil).Want(t, http.StatusOK).Decode(t, &page)
		if len(page.Loans) != 1 {
			t.Fatalf("item %s has %d open loans", item, len(page.Loans))
		}
		switch action {
		case "claim":
			r = c.Do(c.Circulations[0], "POST", "/circulation/loans/"+page.Loans[0].ID+"/claim-item-returned",
				map[string]string{"itemClaimedReturnedDateTime": "2026-01-01T10:00:00.000Z"})
		case "due":
			r = c.Do(c.Circulations[0], "POST", "/circulation/loans/"+page.Loans[0].ID+"/change-due-date",
				map[string]string{"dueDate": "2036-01-01T10:00:00.000Z"})
		default:
			r = c.Do(c.Circulations[0], "POST", "/circulation/loans/"+page.Loans[0].ID+"/declare-item-lost",
				map[string]string{"servicePointId": harness.ServicePoint})
		}
	default:
		r = c.CheckIn(0, item)
	}
	if r.Status < 300 {
		return "done"
	}
	if r.Status != http.StatusUnprocessableEntity {
		t.Fatalf("%s of %s: %d %s", action, item, r.Status, r.Body)
	}
	var env struct{ Errors []struct{ Message string } }
	if err := json.Unmarshal(r.Body, &env); err != nil {
		t.Fatal(err)
	}
	var words []string
	for _, e := range env.Errors {
		words = append(words, e.Message)
	}
	return strings.Join(words, "; ")
}

// TestTheDeskFindsPatronsByTheBeginningsOfTheirNames: the desk's search
// matches a barcode, the beginning of a first or a last name, and every
// word typed, each the beginning of a name; never the middle of one.
func TestTheDeskFindsPatronsByTheBeginningsOfTheirNames(t *testing.T) {
	t.Parallel()
	c := harness.NewCluster(t, harness.Options{Circulations: 1, FeatureOn: true})
	lib := c.SetupLibrary(3, 0, 0)
	for i, n := range [][2]string{{"Alice", "Archer"}, {"Bruno", "Archibald"}, {"Malice", "Alicorn"}} {
		name(t, c, patronID(t, c, lib.Patrons[i]), n[0], n[1])
	}
	librarian := map[string]string{schemas.HeaderTenant: c.Tenant, schemas.HeaderToken: c.Token(schemas.RoleLibrarian)}
	for _, q := range []struct {
		text string
		want []string
	}{
		{"Alic", []string{"Alice Archer", "Malice Alicorn"}},
		{"arch", []string{"Alice Archer", "Bruno Archibald"}},
		{"Alice A", []string{"Alice Archer"}},
		{"Alice Archer", []string{"Alice Archer"}},
		{"Arch Bru", []string{"Bruno Archibald"}},
		{"lice", nil},
		{lib.Patrons[2], []string{"Malice Alicorn"}},
		{"A*", nil},
		{"-", nil},
	} {
		var out struct{ Patrons []struct{ Name string } }
		c.DoWith(c.Circulations[0], "GET", "/circulation/patron-loans?"+url.Values{"patron": {q.text}}.Encode(), nil, librarian).
			Want(t, http.StatusOK).Decode(t, &out)
		var got []string
		for _, p := range out.Patrons {
			got = append(got, p.Name)
		}
		slices.Sort(got)
		if !slices.Equal(got, q.want) {
			t.Errorf("%q finds %q, want %q", q.text, got, q.want)
		}
	}
}

// confirmDialog is the pages' question before an action.
const confirmDialog = `document.getElementById("confirm-dialog")`

// asked presses (press) what asks first, and reads the question it asks,
// with Cancel focused.
func asked(t *testing.T, ctx context.Context, what string, press func()) string {
	t.Helper()
	press()
	waitUntil(t, ctx, "the confirmation of "+what, confirmDialog+`.open`)
	if got := evaluate[string](t, ctx, `document.activeElement.id`); got != "confirm-cancel" {
		t.Errorf("%s: the focus is on %q, want Cancel", what, got)
	}
	return textOf(t, ctx, "#confirm-text")
}

// answered presses the question's button (confirm-ok, confirm-cancel)
// and waits until it closes.
func answered(t *testing.T, ctx context.Context, button string) {
	t.Helper()
	if err := chromedp.Run(ctx, chromedp.Click("#"+button, chromedp.ByQuery)); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, ctx, "the confirmation closed", `!`+confirmDialog+`.open`)
}

// deskSays waits until the desk's page says status and has drawn the
// patrons again.
func deskSays(t *testing.T, ctx context.Context, what, status string) {
	t.Helper()
	waitUntil(t, ctx, what, `document.getElementById("status").textContent === `+jsString(status)+
		` && !document.getElementById("results").hasAttribute("aria-busy")`)
}
