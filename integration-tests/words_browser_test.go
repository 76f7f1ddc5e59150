package integration

import (
	"context"
	"encoding/csv"
	"encoding/json"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	"github.com/google/uuid"

	"github.com/checkoutlock/integration-tests/harness"
	"github.com/checkoutlock/schemas"
)

// atWidths runs check at a phone's 390 px and a desk's 1280 px, and says
// whether anything is wider than the phone's screen.
func atWidths(t *testing.T, ctx context.Context, check func(width int64)) {
	t.Helper()
	for _, width := range []int64{390, 1280} {
		if err := chromedp.Run(ctx, chromedp.EmulateViewport(width, 844, chromedp.EmulateScale(1))); err != nil {
			t.Fatal(err)
		}
		check(width)
		if w := evaluate[int](t, ctx, `document.documentElement.scrollWidth`); width == 390 && w > 390 {
			t.Errorf("the page is %d px wide at 390 px", w)
		}
	}
}

// awaited runs a script whose value is a promise, and decodes what it
// resolves to.
func awaited[T any](t *testing.T, ctx context.Context, script string) T {
	t.Helper()
	var out T
	if err := chromedp.Run(ctx, chromedp.Evaluate(script, &out, func(p *runtime.EvaluateParams) *runtime.EvaluateParams {
		return p.WithAwaitPromise(true)
	})); err != nil {
		t.Fatalf("evaluate %s: %v", script, err)
	}
	return out
}

// TestPagesSayDurationsAndTenantsInPeoplesWords: the pages' one way of
// saying a duration (app.js's duration), on known inputs; a tenant that
// does not exist is "No library called nosuch here" on a page, while the
// API keeps its code and its operator's words; a sign-in locked for
// failures says when to try again in minutes.
func TestPagesSayDurationsAndTenantsInPeoplesWords(t *testing.T) {
	t.Parallel()
	c := harness.NewCluster(t, harness.Options{Circulations: 1, FeatureOn: true,
		StorageEnv: []string{"LOGIN_MAX_FAILURES=2", "LOGIN_LOCKOUT=15m"}})
	c.Account(t, "lee", "Lee", "Librarian", schemas.RoleLibrarian, "lee-password")
	ctx := browser(t)
	if err := chromedp.Run(ctx, chromedp.Navigate(pageURL(c, "/ui/locks.html")), chromedp.WaitVisible("#signin-panel", chromedp.ByQuery)); err != nil {
		t.Fatal(err)
	}
	for ms, want := range map[int]string{269300: "4 min 29 s", 900000: "15 min", 45000: "45 s", 500: "0.5 s", 1: "0.001 s",
		60000: "1 min", 3900000: "1 h 5 min", 0: "0 s"} {
		if got := evaluate[string](t, ctx, `duration(`+strconv.Itoa(ms)+`)`); got != want {
			t.Errorf("duration(%d) = %q, want %q", ms, got, want)
		}
		if got := schemas.DurationWords(ms); got != want {
			t.Errorf("schemas.DurationWords(%d) = %q, want %q", ms, got, want)
		}
	}
	// The pages' words and the services' (the history's rows, the CSV)
	// are one: on the edges of each unit and on a spread between them.
	inputs := []int{999, 1000, 1009, 1500, 59499, 59500, 59999, 60000, 60499, 60500, 61000, 89999, 3599499, 3599500,
		3600000, 3660500, 86399999, 90061000}
	for ms := 7; ms < 5_000_000; ms = ms*3 + 11 {
		inputs = append(inputs, ms)
	}
	list, _ := json.Marshal(inputs)
	pages := evaluate[[]string](t, ctx, string(list)+`.map(duration)`)
	for i, ms := range inputs {
		if i >= len(pages) || pages[i] != schemas.DurationWords(ms) {
			t.Errorf("%d ms: the pages say %q, the services %q", ms, pages[min(i, len(pages)-1)], schemas.DurationWords(ms))
		}
	}

	// The API: the code and the operator's words stay.
	res := c.DoWith(c.Circulations[0], "POST", "/authn/login-with-expiry", map[string]any{"username": "lee", "password": "lee-password"},
		map[string]string{schemas.HeaderTenant: "nosuch"}).Want(t, http.StatusBadRequest)
	if body := string(res.Body); !strings.Contains(body, schemas.CodeTenantNotInitialized) || !strings.Contains(body, "POST /_/tenant") {
		t.Errorf("the API's answer for an unknown tenant: %s", body)
	}
	// The page: the librarian's words.
	if err := chromedp.Run(ctx, chromedp.Navigate(c.Circulations[0].URL()+"/ui/settings.html?tenant=nosuch")); err != nil {
		t.Fatal(err)
	}
	const nosuch = "No library called nosuch here."
	atWidths(t, ctx, func(width int64) {
		if err := chromedp.Run(ctx, chromedp.Reload(), submitSignIn("lee", "lee-password")); err != nil {
			t.Fatal(err)
		}
		waitUntil(t, ctx, "the unknown tenant's words", `document.getElementById("signin-status").textContent === `+jsString(nosuch))
	})

	// Two failures lock lee's sign-in for 15 minutes: the page says so
	// in minutes (a second or so may have gone by).
	if err := chromedp.Run(ctx, chromedp.Navigate(pageURL(c, "/ui/settings.html"))); err != nil {
		t.Fatal(err)
	}
	locked := regexp.MustCompile(`^Too many failed sign-ins: try again in (15 min|14 min 5\d s)\.$`)
	for i := 0; ; i++ {
		if err := chromedp.Run(ctx, submitSignIn("lee", "wrong"), chromedp.WaitVisible("#signin-status.error", chromedp.ByQuery)); err != nil {
			t.Fatal(err)
		}
		got := textOf(t, ctx, "#signin-status")
		if locked.MatchString(got) {
			break
		}
		if got != "Wrong username or password." || i == 3 {
			t.Fatalf("sign-in %d with a wrong password reads %q, want %s at the third", i+1, got, locked)
		}
		if err := chromedp.Run(ctx, chromedp.Evaluate(`say("signin-status", "", true)`, nil)); err != nil {
			t.Fatal(err)
		}
	}
}

// TestSettingsInSeconds: a librarian types the lock's lifetime and the
// waits in seconds; the API stores them as FOLIO's ms; the bounds the
// page says are the server's, in seconds and minutes.
func TestSettingsInSeconds(t *testing.T) {
	t.Parallel()
	c := harness.NewCluster(t, harness.Options{Circulations: 1, FeatureOn: true})
	c.Account(t, "lee", "Lee", "Librarian", schemas.RoleLibrarian, "lee-password")
	ctx := browser(t)
	signIn(t, ctx, c, "/ui/settings.html", "lee", "lee-password")
	if err := chromedp.Run(ctx, chromedp.WaitVisible("#settings", chromedp.ByQuery)); err != nil {
		t.Fatal(err)
	}
	var s struct {
		LockTTL int   `json:"lockTtl"`
		Waits   []int `json:"retryIntervalsMs"`
		Bounds  struct {
			LockTTL struct{ Minimum, Maximum int } `json:"lockTtl"`
		} `json:"bounds"`
	}
	c.Do(c.Circulations[0], "GET", "/circulation/settings/check-out-lock", nil).Want(t, http.StatusOK).Decode(t, &s)
	wantHint := "From " + evaluate[string](t, ctx, `duration(`+strconv.Itoa(s.Bounds.LockTTL.Minimum)+`)`) + " to " +
		evaluate[string](t, ctx, `duration(`+strconv.Itoa(s.Bounds.LockTTL.Maximum)+`)`) + "."
	if got := textOf(t, ctx, "#lockTtl-hint"); got != wantHint {
		t.Errorf("the lifetime's bounds read %q, want %q", got, wantHint)
	}
	if got := evaluate[string](t, ctx, `document.getElementById("lockTtl").value`); got != strconv.FormatFloat(float64(s.LockTTL)/1000, 'f', -1, 64) {
		t.Errorf("the lifetime of %d ms reads %q", s.LockTTL, got)
	}
	envTTL := s.LockTTL
	if err := chromedp.Run(ctx,
		chromedp.SetValue("#lockTtl", "2.5", chromedp.ByQuery),
		chromedp.SetValue("#waits", "0.25, 3 × 0.5", chromedp.ByQuery),
		chromedp.Click("#save", chromedp.ByQuery),
	); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, ctx, "the save's answer", `/ (ok|error)$/.test(document.getElementById("save-status").className)`)
	if got := textOf(t, ctx, "#save-status"); !strings.HasPrefix(got, "Saved: Lock lifetime (s), Waits before each retry (s).") {
		t.Errorf("saving 2.5 s and 0.25, 3 × 0.5 s reads %q", got)
	}
	c.Do(c.Circulations[0], "GET", "/circulation/settings/check-out-lock", nil).Want(t, http.StatusOK).Decode(t, &s)
	if s.LockTTL != 2500 || !equalInts(s.Waits, []int{250, 500, 500, 500}) {
		t.Errorf("typed 2.5 s and 0.25, 3 × 0.5 s: stored %d ms and %v", s.LockTTL, s.Waits)
	}
	if got := textOf(t, ctx, "#waits-summary"); got != "4 retries, waiting up to 1.75 s in all." {
		t.Errorf("the waits' summary reads %q", got)
	}
	// The way back names the default as a duration.
	if got, want := textOf(t, ctx, "#lockTtl-default"), "Back to the default: "+evaluate[string](t, ctx, `duration(`+strconv.Itoa(envTTL)+`)`); got != want || envTTL%1000 != 0 {
		t.Errorf("the lifetime's way back reads %q, want %q (the default %d ms)", got, want, envTTL)
	}
	// More than a millisecond's precision is refused on the page.
	if err := chromedp.Run(ctx, chromedp.SetValue("#lockTtl", "2.5004", chromedp.ByQuery), chromedp.Click("#save", chromedp.ByQuery),
		chromedp.WaitVisible("#save-status.error", chromedp.ByQuery)); err != nil {
		t.Fatal(err)
	}
	if got := textOf(t, ctx, "#lockTtl-error"); got != "Enter a number of seconds, such as 5 or 0.5 (to the thousandth at most)." {
		t.Errorf("2.5004 s reads %q", got)
	}
}

// TestUnusableSettingsInALibrariansWords: a stored setting out of bounds
// is said in a librarian's words, the operators' account on hover, and its
// field shows the default that applies.
func TestUnusableSettingsInALibrariansWords(t *testing.T) {
	t.Parallel()
	c := harness.NewCluster(t, harness.Options{Circulations: 1, FeatureOn: true})
	c.Account(t, "lee", "Lee", "Librarian", schemas.RoleLibrarian, "lee-password")
	// Storage refuses such a value: written as an older release, or a
	// hand, may have left it.
	c.Do(c.Storage, "POST", "/settings/entries", map[string]any{"scope": "mod-circulation", "key": "checkoutLockFeature",
		"value": `{"checkOutLockFeatureEnabled":true,"lockTtl":4000}`}).Want(t, http.StatusCreated)
	if _, err := c.DB.Exec(context.Background(), `UPDATE circulation_storage.setting SET jsonb = jsonb_set(jsonb, '{value}', to_jsonb($2::text))
		WHERE tenant_id = $1 AND key = 'checkoutLockFeature'`, c.Tenant, `{"checkOutLockFeatureEnabled":true,"lockTtl":1}`); err != nil {
		t.Fatal(err)
	}
	ctx := browser(t)
	signIn(t, ctx, c, "/ui/settings.html", "lee", "lee-password")
	waitUntil(t, ctx, "the settings", `document.getElementById("settings-error").textContent !== ""`)
	want := "Some of the library's settings could not be used just now: each field shows the value that applies instead."
	if got := textOf(t, ctx, "#settings-error"); got != want {
		t.Errorf("an unusable stored lifetime reads %q, want %q", got, want)
	}
	if title := evaluate[string](t, ctx, `document.getElementById("settings-error").title`); !strings.Contains(title, "lockTtl") {
		t.Errorf("the operators' account on hover reads %q", title)
	}
	if got := textOf(t, ctx, "#lockTtl-source"); got != "the default" {
		t.Errorf("the unusable lifetime's source reads %q", got)
	}
}

// TestTheConsolesHistoryInWords: in the lock console, a range whose From
// is after its Until says so; the export's confirmation stays through the
// refreshes until the person's next action; the CSV says who held a lock
// as the page does (the kiosk, the item, the service point, in columns of
// their own); a patron leads to the desk's page only for whom may open
// it.
func TestTheConsolesHistoryInWords(t *testing.T) {
	t.Parallel()
	c := harness.NewCluster(t, harness.Options{Circulations: 1, FeatureOn: true})
	lib := c.SetupLibrary(1, 1, 5)
	alice := patronID(t, c, lib.Patrons[0])
	kiosk := c.Account(t, "kiosk4", "Kiosk", "4", schemas.RoleSelfCheck, "kiosk-password")
	c.Account(t, "olga", "Olga", "Operator", schemas.RoleOperator, "olga-password")
	ada := c.Account(t, "ada", "Ada", "Admin", schemas.RoleTenantAdmin, "ada-password")
	desk := uuid.NewString()
	c.Do(c.Storage, "POST", "/service-points", map[string]any{"id": desk, "name": "Back office", "code": "bo",
		"discoveryDisplayName": "Back office"}).Want(t, http.StatusCreated)
	// A lock held for kiosk-3 by the administrator's call (the
	// walk-through's), and one whose holder only its account names.
	for _, e := range []struct{ typ, holder string }{
		{"expired", `{"acquiredBy":"` + ada + `","itemBarcode":"book-007","servicePointId":"` + desk + `","instance":"kiosk-3"}`},
		{"taken_over", `{"acquiredBy":"` + kiosk + `","itemBarcode":"book-008"}`},
	} {
		if _, err := c.DB.Exec(context.Background(), `INSERT INTO circulation_storage.check_out_lock_event
			(tenant_id, occurred_at, type, user_id, holder, by_whom) VALUES ($1, $2, $3, $4, $5, '{}')`,
			c.Tenant, time.Now().Add(-time.Hour), e.typ, alice, e.holder); err != nil {
			t.Fatal(err)
		}
	}
	const holder = "kiosk-3 · book-007 · Back office"

	ctx := browser(t)
	signIn(t, ctx, c, "/ui/locks.html", "olga", "olga-password")
	row := `#history tr[data-event="expired"]`
	if err := chromedp.Run(ctx, chromedp.WaitVisible(row, chromedp.ByQuery)); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, ctx, "both events", `document.querySelectorAll("#history tbody tr").length === 2`)
	if got := textOf(t, ctx, row+" td:nth-child(4)"); got != holder {
		t.Errorf("the history's holder reads %q, want %q", got, holder)
	}
	shown := evaluate[[][]string](t, ctx, `[...document.querySelectorAll("#history tbody tr")].map((tr) => [...tr.cells].map((td) => td.textContent))`)
	head := evaluate[[]string](t, ctx, `[...document.querySelectorAll("#history thead th")].map((th) => th.textContent)`)
	// An operator may not open the desk's page: the patron is plain text.
	patronText := textOf(t, ctx, row+" td:nth-child(3)")
	if n := evaluate[int](t, ctx, `document.querySelectorAll(`+jsString(row+" td:nth-child(3) a")+`).length`); n != 0 || patronText == "" {
		t.Errorf("an operator's history shows the patron %q with %d links to the desk's page", patronText, n)
	}

	// The CSV says what the page says: its first columns are the page's,
	// headed as the page heads them, each cell the page's text.
	exported := awaited[string](t, ctx, `fetch(exportURL(), { headers: { "X-Okapi-Tenant": session.tenant }, credentials: "same-origin" }).then((r) => r.text())`)
	rows, err := csv.NewReader(strings.NewReader(exported)).ReadAll()
	if err != nil || len(rows) != 3 {
		t.Fatalf("the export: %q (%v), want the header and two rows", rows, err)
	}
	if !slices.Equal(rows[0][:len(head)], head) {
		t.Errorf("the CSV is headed %q, the page %q", rows[0], head)
	}
	for i, r := range rows[1:] {
		if !slices.Equal(r[:len(head)], shown[i]) {
			t.Errorf("the CSV's row %d is %q, the page's %q", i+1, r[:len(head)], shown[i])
		}
	}
	if shown[0][3] != "Kiosk 4 · book-008" || shown[1][3] != holder || shown[0][1] != "expired and taken over" || shown[1][1] != "expired while held" {
		t.Errorf("the page's history reads %q", shown)
	}

	atWidths(t, ctx, func(width int64) {
		// The export's confirmation outlives two refreshes, and goes at the
		// person's next action.
		if err := chromedp.Run(ctx, press("#f-export")); err != nil {
			t.Fatal(err)
		}
		const exportedText = "Exported 2 events as lock-history.csv."
		waitUntil(t, ctx, "the export's confirmation", `document.getElementById("export-status").textContent === `+jsString(exportedText))
		if err := chromedp.Run(ctx, chromedp.Evaluate(`window.refreshes = 0;
			new MutationObserver(() => window.refreshes++).observe(document.getElementById("status"), { childList: true, characterData: true, subtree: true });`, nil)); err != nil {
			t.Fatal(err)
		}
		waitUntil(t, ctx, "two refreshes", `window.refreshes >= 2`)
		if got := textOf(t, ctx, "#export-status"); got != exportedText {
			t.Errorf("at %d px, after two refreshes the export's confirmation reads %q, want %q", width, got, exportedText)
		}

		// From after Until: the range is empty, and the page says so.
		if err := chromedp.Run(ctx,
			chromedp.SetValue("#f-from", "2026-11-28T10:00", chromedp.ByQuery),
			chromedp.SetValue("#f-to", "2026-11-27T10:00", chromedp.ByQuery),
			press("#f-show")); err != nil {
			t.Fatal(err)
		}
		waitUntil(t, ctx, "the empty range's words", `document.getElementById("history-status").textContent === "From is after Until: no event can match."`)
		if got := textOf(t, ctx, "#export-status"); got != "" {
			t.Errorf("at %d px, after the next action the export's confirmation still reads %q", width, got)
		}
		if err := chromedp.Run(ctx, press("#f-clear"), chromedp.WaitVisible(row, chromedp.ByQuery)); err != nil {
			t.Fatal(err)
		}
	})

	// The tenant's administrator may open the desk's page: the patron
	// leads there.
	if err := chromedp.Run(ctx, chromedp.Click("#sign-out", chromedp.ByQuery)); err != nil {
		t.Fatal(err)
	}
	signInHere(t, ctx, "ada", "ada-password")
	link := row + " td:nth-child(3) a"
	if err := chromedp.Run(ctx, chromedp.WaitVisible(link, chromedp.ByQuery)); err != nil {
		t.Fatal(err)
	}
	want := "/ui/loans.html?tenant=" + url.QueryEscape(c.Tenant) + "&patron=" + url.QueryEscape(lib.Patrons[0])
	if href := evaluate[string](t, ctx, `document.querySelector(`+jsString(link)+`).getAttribute("href")`); href != want {
		t.Errorf("the administrator's patron link %q, want %q", href, want)
	}
}
