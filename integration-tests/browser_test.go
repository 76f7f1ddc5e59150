package integration

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/input"
	"github.com/chromedp/cdproto/target"
	"github.com/chromedp/chromedp"
	"github.com/google/uuid"

	"github.com/checkoutlock/integration-tests/harness"
	"github.com/checkoutlock/schemas"
)

// screenshots, when set, is where the browser tests save pictures of the
// pages (make screenshots).
var screenshots = flag.String("screenshots", "", "directory for screenshots of the pages")

// chromium is the path of Debian's Chromium, installed by the project's
// script when missing, once for all the tests that run in parallel.
var chromium = sync.OnceValues(func() (string, error) {
	out, err := exec.Command("../scripts/ensure-package.sh", "chromium", "chromium").Output()
	return strings.TrimSpace(string(out)), err
})

// shared is the one headless Chromium the browser tests share: started
// by the first that needs it, stopped when the package's tests end
// (stopBrowser). Each test drives it in a browser context of its own, with
// cookies and storage of its own, as a separate profile would.
var shared struct {
	once   sync.Once
	ctx    context.Context
	cancel context.CancelFunc
	err    error
}

// stopBrowser stops the shared Chromium, if a test started it.
func stopBrowser() {
	if shared.cancel != nil {
		shared.cancel()
	}
}

// browser returns a context driving one tab of a browser context of t's
// own in the shared Chromium, closed when t ends.
func browser(t *testing.T) context.Context {
	t.Helper()
	shared.once.Do(func() {
		path, err := chromium()
		if err != nil {
			shared.err = fmt.Errorf("chromium: %w", err)
			return
		}
		opts := append(chromedp.DefaultExecAllocatorOptions[:],
			chromedp.ExecPath(path), chromedp.NoSandbox, chromedp.DisableGPU,
			chromedp.WindowSize(1100, 900), chromedp.Flag("lang", "en-GB"))
		actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
		bctx, cancelBrowser := chromedp.NewContext(actx)
		shared.ctx, shared.cancel = bctx, func() { cancelBrowser(); cancelAlloc() }
		if err := chromedp.Run(bctx); err != nil {
			shared.err = fmt.Errorf("start chromium: %w", err)
		}
	})
	if shared.err != nil {
		t.Fatal(shared.err)
	}
	// A browser context of t's own, its first tab in a window of its own:
	// Chromium opens a tab of a new context only in a new window.
	b := cdp.WithExecutor(shared.ctx, chromedp.FromContext(shared.ctx).Browser)
	profile, err := target.CreateBrowserContext().WithDisposeOnDetach(true).Do(b)
	if err != nil {
		t.Fatalf("create a browser context: %v", err)
	}
	t.Cleanup(func() { _ = target.DisposeBrowserContext(profile).Do(b) })
	tab, err := target.CreateTarget("about:blank").WithBrowserContextID(profile).WithNewWindow(true).
		WithWidth(1100).WithHeight(900).Do(b)
	if err != nil {
		t.Fatalf("open a tab: %v", err)
	}
	ctx, cancelTab := chromedp.NewContext(context.WithValue(shared.ctx, profileKey{}, profile), chromedp.WithTargetID(tab))
	t.Cleanup(cancelTab)
	// A guard against a hang, for the whole test: each of its steps has a
	// bound of its own. A test of twenty steps, with seven other tests
	// beside it on one Chromium and two cores, took more than 90 s.
	ctx, cancelTime := context.WithTimeout(ctx, 4*time.Minute)
	t.Cleanup(cancelTime)
	if err := chromedp.Run(ctx); err != nil {
		t.Fatalf("open a browser context: %v", err)
	}
	return ctx
}

// profileKey keys the browser context of a test's tabs.
type profileKey struct{}

// anotherTab opens a second tab beside ctx's, in its browser context (its
// cookies and storage), closed when t ends.
func anotherTab(t *testing.T, ctx context.Context) context.Context {
	t.Helper()
	profile, _ := ctx.Value(profileKey{}).(cdp.BrowserContextID)
	b := cdp.WithExecutor(shared.ctx, chromedp.FromContext(shared.ctx).Browser)
	tab, err := target.CreateTarget("about:blank").WithBrowserContextID(profile).Do(b)
	if err != nil {
		t.Fatalf("open another tab: %v", err)
	}
	second, cancel := chromedp.NewContext(ctx, chromedp.WithTargetID(tab))
	t.Cleanup(cancel)
	if err := chromedp.Run(second); err != nil {
		t.Fatalf("open another tab: %v", err)
	}
	return second
}

// pageURL is the address of page for the cluster's tenant.
func pageURL(c *harness.Cluster, page string) string {
	return c.Circulations[0].URL() + page + "?tenant=" + c.Tenant
}

// signIn opens page for the cluster's tenant and signs in with a name
// and a password on the page's form.
func signIn(t *testing.T, ctx context.Context, c *harness.Cluster, page, username, password string) {
	t.Helper()
	if err := chromedp.Run(ctx, chromedp.Navigate(pageURL(c, page))); err != nil {
		t.Fatalf("open %s: %v", page, err)
	}
	signInHere(t, ctx, username, password)
}

// submitSignIn fills the sign-in form the page shows and submits it.
func submitSignIn(username, password string) chromedp.Tasks {
	return chromedp.Tasks{
		chromedp.WaitVisible("#signin-panel", chromedp.ByQuery),
		chromedp.SetValue("#signin-username", username, chromedp.ByQuery),
		chromedp.SetValue("#signin-password", password, chromedp.ByQuery),
		chromedp.Click("#signin-submit", chromedp.ByQuery),
	}
}

// signInHere signs in on the form the page shows.
func signInHere(t *testing.T, ctx context.Context, username, password string) {
	t.Helper()
	if err := chromedp.Run(ctx, submitSignIn(username, password), chromedp.WaitVisible("#sign-out", chromedp.ByQuery)); err != nil {
		t.Fatalf("sign in as %s: %v", username, err)
	}
}

// textOf is the text of the element sel finds.
func textOf(t *testing.T, ctx context.Context, sel string) string {
	t.Helper()
	// Found and read in one script: a page that redraws (the console's
	// refresh) may replace the node between a lookup and a read of it.
	var s string
	script := `(() => { const n = document.querySelector(` + strconv.Quote(sel) + `); return n ? n.innerText : ""; })()`
	if err := chromedp.Run(ctx, chromedp.WaitReady(sel, chromedp.ByQuery), chromedp.Evaluate(script, &s)); err != nil {
		t.Fatalf("text of %s: %v", sel, err)
	}
	return s
}

// evaluate runs a script on the page and decodes its value.
func evaluate[T any](t *testing.T, ctx context.Context, script string) T {
	t.Helper()
	var out T
	if err := chromedp.Run(ctx, chromedp.Evaluate(script, &out)); err != nil {
		t.Fatalf("evaluate %s: %v", script, err)
	}
	return out
}

// waitUntil polls a script on the page until it is true.
func waitUntil(t *testing.T, ctx context.Context, what, script string) {
	t.Helper()
	if err := chromedp.Run(ctx, chromedp.Poll(script, nil, chromedp.WithPollingTimeout(20*time.Second))); err != nil {
		t.Fatalf("waiting until %s: %v; the page at %s", what, err, pageState(ctx))
	}
}

// pageState is what a page shows where a wait would look: its address,
// what each status line says and each field holds, for a wait's failure
// to tell what the page did instead.
func pageState(ctx context.Context) string {
	var s string
	script := `(() => location.href + " " + JSON.stringify(Object.fromEntries([
		...[...document.querySelectorAll("[role=status][id]")].map((n) => [n.id, n.textContent]),
		...[...document.querySelectorAll("input[id], select[id]")].filter((n) => n.type !== "password").map((n) => [n.id, n.value]),
	])))()`
	if err := chromedp.Run(ctx, chromedp.Evaluate(script, &s)); err != nil {
		return "(not read: " + err.Error() + ")"
	}
	return s
}

// press activates the button selector names from the keyboard, focused
// and Enter pressed, as a keyboard user does. Unlike a click, which lands
// where the button was laid out a moment before, it cannot miss a button
// that a page refreshing itself (the lock console, every second) has just
// moved.
func press(selector string) chromedp.Action {
	return enter(selector)
}

// enter focuses the element selector names and presses Enter on it as a
// keyboard does: one key-down carrying the key's text, so a handler that
// takes the key-down (preventDefault) takes the key press with it, and a
// key-up. (chromedp's SendKeys sends the text as an event of its own,
// which reaches whatever the key-down's handler has moved the focus to.)
func enter(selector string) chromedp.Action {
	key := func(typ input.KeyType) *input.DispatchKeyEventParams {
		return input.DispatchKeyEvent(typ).WithKey("Enter").WithCode("Enter").
			WithWindowsVirtualKeyCode(13).WithNativeVirtualKeyCode(13)
	}
	return chromedp.Tasks{
		chromedp.Focus(selector, chromedp.ByQuery, chromedp.NodeVisible),
		key(input.KeyDown).WithText("\r").WithUnmodifiedText("\r"),
		key(input.KeyUp),
	}
}

// phoneWidth narrows the page to a phone's 390 px and says whether
// anything is wider than that: the document's scroll width.
func phoneWidth(t *testing.T, ctx context.Context) int {
	t.Helper()
	if err := chromedp.Run(ctx, chromedp.EmulateViewport(390, 844, chromedp.EmulateScale(1))); err != nil {
		t.Fatal(err)
	}
	return evaluate[int](t, ctx, `document.documentElement.scrollWidth`)
}

func screenshot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	if *screenshots == "" {
		return
	}
	var png []byte
	if err := chromedp.Run(ctx, chromedp.FullScreenshot(&png, 100)); err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	if err := os.WriteFile(filepath.Join(*screenshots, name), png, 0o644); err != nil {
		t.Fatal(err)
	}
}

// effectiveSettings reads the settings in effect through the API.
func effectiveSettings(t *testing.T, c *harness.Cluster) (enabled bool, waits []int, sources map[string]string) {
	t.Helper()
	var s struct {
		Enabled bool              `json:"checkOutLockFeatureEnabled"`
		Waits   []int             `json:"retryIntervalsMs"`
		Sources map[string]string `json:"sources"`
	}
	c.Do(c.Circulations[0], "GET", "/circulation/settings/check-out-lock", nil).Want(t, http.StatusOK).Decode(t, &s)
	return s.Enabled, s.Waits, s.Sources
}

// TestSettingsPageInABrowser: a librarian signs in with a name and a
// password (a wrong one is told so, without saying which of the two was
// wrong), sees who is signed in, switches the lock off on the page (the
// next check-out runs without a lock call, the page names who changed it),
// changes the retry waits (one out of bounds is refused on the page,
// before anything is sent; a long list reads "30 × 0.25", in seconds),
// gives the waits back to the default (the environment's value), and signs out: the settings leave the
// screen and the sign-in is over.
func TestSettingsPageInABrowser(t *testing.T) {
	t.Parallel()
	c := harness.NewCluster(t, harness.Options{Circulations: 1, FeatureOn: true})
	lib := c.SetupLibrary(1, 2, 5)
	librarian := c.Account(t, "lee", "Lee", "Librarian", schemas.RoleLibrarian, "lee-password")
	_, envWaits, _ := effectiveSettings(t, c)
	ctx := browser(t)

	if err := chromedp.Run(ctx,
		chromedp.Navigate(pageURL(c, "/ui/settings.html")),
		submitSignIn("lee", "not the password"),
		chromedp.WaitVisible("#signin-status.error", chromedp.ByQuery),
	); err != nil {
		t.Fatal(err)
	}
	if got := textOf(t, ctx, "#signin-status"); got != "Wrong username or password." {
		t.Errorf("a wrong password reads %q", got)
	}
	if evaluate[bool](t, ctx, `!document.getElementById("content").hidden`) {
		t.Error("the settings show before anyone signed in")
	}
	signInHere(t, ctx, "lee", "lee-password")
	if got := textOf(t, ctx, "#who"); got != "Signed in as Lee Librarian" {
		t.Errorf("who is signed in reads %q", got)
	}
	if err := chromedp.Run(ctx, chromedp.WaitVisible("#settings", chromedp.ByQuery)); err != nil {
		t.Fatal(err)
	}
	if source := textOf(t, ctx, "#enabled-source"); source != "the default" {
		t.Errorf("the toggle's source reads %q", source)
	}
	screenshot(t, ctx, "settings.png")

	// Off, through the page.
	if err := chromedp.Run(ctx,
		chromedp.Click("#enabled", chromedp.ByQuery),
		chromedp.Click("#save", chromedp.ByQuery),
		chromedp.WaitVisible(`#save-status.ok`, chromedp.ByQuery),
	); err != nil {
		t.Fatal(err)
	}
	if status := textOf(t, ctx, "#save-status"); !strings.HasPrefix(status, "Saved: Lock check-outs per patron.") {
		t.Errorf("save status %q", status)
	}
	if enabled, _, sources := effectiveSettings(t, c); enabled || sources["checkOutLockFeatureEnabled"] != "settings" {
		t.Fatalf("after the page switched the lock off: enabled %v, sources %v", enabled, sources)
	}
	// Who changed it, by name; the id on hover.
	if last := textOf(t, ctx, "#last-change"); !strings.HasSuffix(last, " by Lee Librarian.") {
		t.Errorf("the last change reads %q, want it to name Lee Librarian", last)
	}
	if title := evaluate[string](t, ctx, `document.getElementById("last-change").title`); title != librarian {
		t.Errorf("the last change's title %q, want the id %s", title, librarian)
	}
	before := metricLine(c, `checkout_lock_acquisitions_total{outcome="acquired"}`)
	c.CheckOut(0, lib.Items[0][0], lib.Patrons[0]).Want(t, http.StatusCreated)
	if after := metricLine(c, `checkout_lock_acquisitions_total{outcome="acquired"}`); after != before {
		t.Errorf("a lock was taken with the lock switched off on the page: %q then %q", before, after)
	}

	// A value out of bounds: refused on the page, nothing sent.
	if err := chromedp.Run(ctx,
		chromedp.SetValue("#waits", "0, 20", chromedp.ByQuery),
		chromedp.Click("#save", chromedp.ByQuery),
		chromedp.WaitVisible(`#save-status.error`, chromedp.ByQuery),
	); err != nil {
		t.Fatal(err)
	}
	if status := textOf(t, ctx, "#waits-error"); !strings.Contains(status, "Each wait must be from 0.001 s to 1 min.") {
		t.Errorf("the waits' error reads %q", status)
	}
	// The entry the page wrote leaves the waits out: the environment's
	// apply, and the refused change left them so.
	if _, waits, sources := effectiveSettings(t, c); !equalInts(waits, envWaits) || sources["retryIntervalsMs"] != "environment" {
		t.Errorf("waits after a refused change %v from %s, want the environment's %v", waits, sources["retryIntervalsMs"], envWaits)
	}

	// An empty field is not "no retries": refused on the page, saying how
	// to write that; "none" is, and the page says so before saving.
	if err := chromedp.Run(ctx,
		chromedp.Evaluate(`document.getElementById("waits").value = ""`, nil),
		chromedp.Click("#save", chromedp.ByQuery),
		chromedp.WaitVisible(`#save-status.error`, chromedp.ByQuery),
	); err != nil {
		t.Fatal(err)
	}
	if got := textOf(t, ctx, "#waits-error"); !strings.Contains(got, "“none” for no retries") {
		t.Errorf("an empty waits field reads %q", got)
	}
	if _, waits, sources := effectiveSettings(t, c); !equalInts(waits, envWaits) || sources["retryIntervalsMs"] != "environment" {
		t.Errorf("waits after an empty field was refused: %v from %s", waits, sources["retryIntervalsMs"])
	}
	if err := chromedp.Run(ctx, chromedp.SendKeys("#waits", "none", chromedp.ByQuery)); err != nil {
		t.Fatal(err)
	}
	if got := textOf(t, ctx, "#waits-summary"); got != "No retries: a check-out that finds the lock held is refused at once." {
		t.Errorf("with none typed, the waits' summary reads %q", got)
	}

	// The retry waits, changed.
	if err := chromedp.Run(ctx,
		chromedp.SetValue("#waits", "0.1, 0.2, 0.4", chromedp.ByQuery),
		chromedp.Click("#save", chromedp.ByQuery),
		chromedp.Poll(`document.querySelector("#save-status").textContent.startsWith("Saved: Waits before each retry (s)")`, nil),
	); err != nil {
		t.Fatal(err)
	}
	if _, waits, sources := effectiveSettings(t, c); !equalInts(waits, []int{100, 200, 400}) || sources["retryIntervalsMs"] != "settings" {
		t.Errorf("after the page changed the waits: %v from %s", waits, sources["retryIntervalsMs"])
	}
	if source := textOf(t, ctx, "#waits-source"); source != "set here" {
		t.Errorf("the waits' source reads %q", source)
	}
	// Only what changed was sent: the toggle stays off.
	if enabled, _, _ := effectiveSettings(t, c); enabled {
		t.Error("changing the waits switched the lock back on")
	}

	// FOLIO's own values (its settings fixture: a 500 ms lock, ten
	// retries 5 ms apart), written in seconds and as a run, are accepted,
	// stored as ms and take effect; the page shows them back as the run.
	if err := chromedp.Run(ctx,
		chromedp.SetValue("#lockTtl", "0.5", chromedp.ByQuery),
		chromedp.SetValue("#waits", "10 × 0.005", chromedp.ByQuery),
		chromedp.Click("#save", chromedp.ByQuery),
		chromedp.Poll(`(() => { const s = document.querySelector("#save-status");
			return s.classList.contains("ok") && s.textContent === "Saved: Lock lifetime (s), Waits before each retry (s). " +
				"It applies at every desk and self-check machine within a few seconds."; })()`, nil),
	); err != nil {
		t.Fatal(err)
	}
	var ttl struct {
		LockTTL int `json:"lockTtl"`
	}
	c.Do(c.Circulations[0], "GET", "/circulation/settings/check-out-lock", nil).Want(t, http.StatusOK).Decode(t, &ttl)
	if _, waits, _ := effectiveSettings(t, c); ttl.LockTTL != 500 || !equalInts(waits, []int{5, 5, 5, 5, 5, 5, 5, 5, 5, 5}) {
		t.Errorf("after the page set FOLIO's values: lockTtl %d, waits %v; want 500 and ten of 5 ms", ttl.LockTTL, waits)
	}
	if got := evaluate[string](t, ctx, `document.getElementById("waits").value + " | " + document.getElementById("lockTtl").value`); got != "10 × 0.005 | 0.5" {
		t.Errorf("ten waits of 5 ms read %q", got)
	}

	// Back to the default, from the page: the button says which value
	// that is.
	want := "Back to the default: " + formatWaits(envWaits) + " s"
	if got := textOf(t, ctx, "#waits-default"); got != want {
		t.Errorf("the waits' way back reads %q, want %q", got, want)
	}
	if err := chromedp.Run(ctx,
		chromedp.Click("#waits-default", chromedp.ByQuery),
		chromedp.Poll(`document.querySelector("#save-status").textContent.startsWith("Saved: Waits before each retry (s) back to the default, ")`, nil),
		chromedp.WaitNotVisible("#waits-default", chromedp.ByQuery),
	); err != nil {
		t.Fatal(err)
	}
	if _, waits, sources := effectiveSettings(t, c); !equalInts(waits, envWaits) || sources["retryIntervalsMs"] != "environment" {
		t.Errorf("after back to default: waits %v from %s, want the environment's %v", waits, sources["retryIntervalsMs"], envWaits)
	}
	if source := textOf(t, ctx, "#waits-source"); source != "the default" {
		t.Errorf("the waits' source reads %q after going back", source)
	}

	// Signing out: the settings leave the screen, the form says why, and
	// the sign-in is over (a new page load asks again).
	if err := chromedp.Run(ctx,
		chromedp.Click("#sign-out", chromedp.ByQuery),
		chromedp.WaitVisible("#signin-panel", chromedp.ByQuery),
	); err != nil {
		t.Fatal(err)
	}
	if got := textOf(t, ctx, "#signin-status"); got != "You have signed out." {
		t.Errorf("after signing out the form says %q", got)
	}
	if left := evaluate[string](t, ctx, `document.getElementById("lockTtl").value + document.getElementById("last-change").textContent +
		(document.getElementById("content").hidden ? "" : "content shown")`); left != "" {
		t.Errorf("after signing out the page still shows %q", left)
	}
	if err := chromedp.Run(ctx, chromedp.Reload(), chromedp.WaitVisible("#signin-panel", chromedp.ByQuery)); err != nil {
		t.Fatalf("after signing out, a new load does not ask to sign in: %v", err)
	}
}

// formatWaits is the page's way of writing a list of waits (ms) in
// seconds: a run of three or more as "n × wait".
func formatWaits(waits []int) string {
	secs := func(ms int) string { return strconv.FormatFloat(float64(ms)/1000, 'f', -1, 64) }
	var parts []string
	for i := 0; i < len(waits); {
		j := i
		for j < len(waits) && waits[j] == waits[i] {
			j++
		}
		if j-i >= 3 {
			parts = append(parts, fmt.Sprintf("%d × %s", j-i, secs(waits[i])))
		} else {
			for k := i; k < j; k++ {
				parts = append(parts, secs(waits[k]))
			}
		}
		i = j
	}
	return strings.Join(parts, ", ")
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestLockConsoleInABrowser: an operator signs in; a held lock appears
// with its patron, holder and service point by name; the operator releases
// it from the keyboard after a confirmation whose default is to keep it,
// and the release appears in the history under the operator's name. The
// Release button keeps the focus while the countdowns are redrawn and
// while an older lock's row above it goes; after the release the focus
// lands on the next lock's button. At a phone's width nothing scrolls
// sideways. Another tenant typed in the header takes the locks off the
// screen at once and puts the tenant in the address; the settings page
// shows the operator the settings read-only, saying why.
func TestLockConsoleInABrowser(t *testing.T) {
	t.Parallel()
	c := harness.NewCluster(t, harness.Options{Circulations: 1, FeatureOn: true})
	lib := c.SetupLibrary(3, 1, 5)
	operator := c.Account(t, "olga", "Olga", "Operator", schemas.RoleOperator, "olga-password")
	servicePoint := uuid.NewString()
	c.Do(c.Storage, "POST", "/service-points", map[string]any{"id": servicePoint, "name": "Front desk", "code": "fd",
		"discoveryDisplayName": "Front desk"}).Want(t, http.StatusCreated)
	patron := patronID(t, c, lib.Patrons[0])
	var older, lock, after struct {
		ID string `json:"id"`
	}
	// Listed oldest first: older, lock, after. older is released
	// elsewhere while the page shows it, lock from the page.
	c.Do(c.Storage, "POST", "/check-out-lock-storage", map[string]any{"userId": patronID(t, c, lib.Patrons[1]), "id": uuid.NewString(),
		"ttlMs": 120000}).Want(t, http.StatusCreated).Decode(t, &older)
	c.Do(c.Storage, "POST", "/check-out-lock-storage", map[string]any{"userId": patron, "id": uuid.NewString(), "ttlMs": 120000,
		"holder": map[string]any{"instance": "circ-7:8080", "requestId": "req-77", "itemBarcode": lib.Items[0][0],
			"servicePointId": servicePoint}}).
		Want(t, http.StatusCreated).Decode(t, &lock)
	c.Do(c.Storage, "POST", "/check-out-lock-storage", map[string]any{"userId": patronID(t, c, lib.Patrons[2]), "id": uuid.NewString(),
		"ttlMs": 120000}).Want(t, http.StatusCreated).Decode(t, &after)
	ctx := browser(t)
	signIn(t, ctx, c, "/ui/locks.html", "olga", "olga-password")

	row := `#locks tr[data-lock="` + lock.ID + `"]`
	if err := chromedp.Run(ctx,
		chromedp.WaitVisible(`#locks tr[data-lock="`+older.ID+`"]`, chromedp.ByQuery),
		chromedp.WaitVisible(row, chromedp.ByQuery),
	); err != nil {
		t.Fatal(err)
	}
	text := textOf(t, ctx, row)
	for _, want := range []string{"Patron " + lib.Patrons[0] + " (" + lib.Patrons[0] + ")", "circ-7:8080", lib.Items[0][0], "req-77", "Front desk"} {
		if !strings.Contains(text, want) {
			t.Errorf("the lock's row %q does not show %q", text, want)
		}
	}
	if strings.Contains(text, servicePoint) || strings.Contains(text, patron) {
		t.Errorf("the lock's row %q shows ids where names belong", text)
	}
	screenshot(t, ctx, "locks.png")

	// Release, confirmed, from the keyboard. The countdowns are redrawn
	// four times a second and the older lock's row goes when it is
	// released elsewhere; the Release button keeps the focus through both
	// (a button replaced at each redraw would lose it, and swallow a click
	// whose press and release straddled one; a row moved would lose it
	// too).
	if err := chromedp.Run(ctx, chromedp.Focus(row+" button", chromedp.ByQuery)); err != nil {
		t.Fatal(err)
	}
	c.Do(c.Storage, "DELETE", "/check-out-lock-storage/"+older.ID, nil).Want(t, http.StatusNoContent)
	if err := chromedp.Run(ctx, chromedp.WaitNotPresent(`#locks tr[data-lock="`+older.ID+`"]`, chromedp.ByQuery)); err != nil {
		t.Fatal(err)
	}
	if focused := evaluate[string](t, ctx, `(document.activeElement && document.activeElement.dataset.lock) || ""`); focused != lock.ID {
		t.Fatalf("after redraws and the older lock's row going, the focus is on %q, not on the lock's Release button", focused)
	}
	// The confirmation's default is to keep the lock: Enter keeps it.
	if err := chromedp.Run(ctx,
		chromedp.KeyEvent("\r"),
		chromedp.WaitVisible("#confirm-dialog", chromedp.ByQuery),
	); err != nil {
		t.Fatal(err)
	}
	if focused := evaluate[string](t, ctx, `document.activeElement.id`); focused != "confirm-cancel" {
		t.Errorf("the confirmation opens with the focus on %q, want the safe choice, Keep it (confirm-cancel)", focused)
	}
	if keep, release := textOf(t, ctx, "#confirm-cancel"), textOf(t, ctx, "#confirm-ok"); keep != "Keep it" || release != "Release the lock" {
		t.Errorf("the confirmation's buttons say %q and %q, want Keep it and Release the lock", keep, release)
	}
	if err := chromedp.Run(ctx,
		chromedp.KeyEvent("\r"),
		chromedp.WaitNotVisible("#confirm-dialog", chromedp.ByQuery),
	); err != nil {
		t.Fatal(err)
	}
	c.Do(c.Storage, "GET", "/check-out-lock-storage/"+lock.ID, nil).Want(t, http.StatusOK)
	if focused := evaluate[string](t, ctx, `(document.activeElement && document.activeElement.dataset.lock) || ""`); focused != lock.ID {
		t.Errorf("after keeping the lock the focus is on %q, not back on its Release button", focused)
	}
	if err := chromedp.Run(ctx,
		chromedp.KeyEvent("\r"),
		chromedp.WaitVisible("#confirm-dialog", chromedp.ByQuery),
		chromedp.Click("#confirm-ok", chromedp.ByQuery),
		chromedp.WaitNotPresent(row, chromedp.ByQuery),
		chromedp.WaitVisible(`#history tr[data-event="released_by_other"]`, chromedp.ByQuery),
	); err != nil {
		t.Fatal(err)
	}
	c.Do(c.Storage, "GET", "/check-out-lock-storage/"+lock.ID, nil).Want(t, http.StatusNotFound)
	// The focus went to the next lock's Release button.
	waitUntil(t, ctx, "the focus on the next lock", `(document.activeElement && document.activeElement.dataset.lock) === "`+after.ID+`"`)
	var h struct {
		Events []struct {
			Type string            `json:"type"`
			By   map[string]string `json:"by"`
		} `json:"events"`
	}
	c.Do(c.Storage, "GET", "/check-out-lock-storage/history?userId="+patron, nil).Want(t, http.StatusOK).Decode(t, &h)
	if len(h.Events) != 1 || h.Events[0].Type != "released_by_other" || h.Events[0].By["acquiredBy"] != operator {
		raw, _ := json.Marshal(h)
		t.Errorf("history after the console's release: %s, want it released by %s", raw, operator)
	}
	if by := textOf(t, ctx, `#history tr[data-event="released_by_other"] td:last-child`); by != "Olga Operator" {
		t.Errorf("the history's By reads %q, want Olga Operator", by)
	}
	screenshot(t, ctx, "locks-history.png")

	// A phone: nothing wider than the screen, the Release button on it.
	if w := phoneWidth(t, ctx); w > 390 {
		t.Errorf("the console is %d px wide at 390 px", w)
	}
	if right := evaluate[float64](t, ctx, `document.querySelector('#locks tr[data-lock="`+after.ID+`"] button').getBoundingClientRect().right`); right > 390 || right <= 0 {
		t.Errorf("the Release button ends at %v px on a 390 px screen", right)
	}
	screenshot(t, ctx, "locks-phone.png")
	if err := chromedp.Run(ctx, chromedp.EmulateViewport(1100, 900)); err != nil {
		t.Fatal(err)
	}

	// Another tenant: the locks go at once, the address says the tenant,
	// and the form asks to sign in to it.
	if err := chromedp.Run(ctx,
		chromedp.SetValue("#tenant", "elsewhere", chromedp.ByQuery),
		chromedp.Click(`#tenant-form button[type="submit"]`, chromedp.ByQuery),
		chromedp.WaitVisible("#signin-panel", chromedp.ByQuery),
	); err != nil {
		t.Fatal(err)
	}
	if n := evaluate[int](t, ctx, `document.querySelectorAll("#locks tbody tr, #history tbody tr").length`); n != 0 {
		t.Errorf("%d rows of tenant %s stay on screen after changing to another tenant", n, c.Tenant)
	}
	if search := evaluate[string](t, ctx, `location.search`); search != "?tenant=elsewhere" {
		t.Errorf("the address says %q after changing the tenant to elsewhere", search)
	}
	if got := textOf(t, ctx, "#signin-title"); got != "Sign in to tenant elsewhere" {
		t.Errorf("the form reads %q", got)
	}
	// Opened without a tenant in the address, the page puts the one it
	// uses there.
	if err := chromedp.Run(ctx, chromedp.Navigate(c.Circulations[0].URL()+"/ui/locks.html"),
		chromedp.WaitVisible("#signin-panel", chromedp.ByQuery)); err != nil {
		t.Fatal(err)
	}
	if got := evaluate[string](t, ctx, `location.search + " " + document.getElementById("tenant").value`); got != "?tenant=elsewhere elsewhere" {
		t.Errorf("address and tenant field %q, want both to say elsewhere", got)
	}

	// The settings, read-only for an operator, with the reason; and on a
	// phone's width.
	if err := chromedp.Run(ctx, chromedp.Navigate(pageURL(c, "/ui/settings.html")), chromedp.WaitVisible("#settings", chromedp.ByQuery)); err != nil {
		t.Fatal(err)
	}
	if got := textOf(t, ctx, "#readonly-note"); got != "Olga Operator may read these settings but not change them: that needs the librarian role." {
		t.Errorf("the read-only note reads %q", got)
	}
	if got := evaluate[string](t, ctx, `["enabled", "lockTtl", "waits"].map((id) => document.getElementById(id).disabled).join() +
		" " + document.getElementById("actions").hidden`); got != "true,true,true true" {
		t.Errorf("an operator's settings controls (disabled ×3, actions hidden): %s", got)
	}
	if w := phoneWidth(t, ctx); w > 390 {
		t.Errorf("the settings page is %d px wide at 390 px", w)
	}
}

// accountDoc reads an account as storage keeps it.
func accountDoc(t *testing.T, c *harness.Cluster, id string) map[string]any {
	t.Helper()
	var a map[string]any
	c.Do(c.Storage, "GET", "/sign-in-accounts/"+id, nil).Want(t, http.StatusOK).Decode(t, &a)
	return a
}

// TestSessionsInABrowser: with a two-second access token, the console
// keeps working as the page refreshes its sign-in behind the scenes. When
// an account is switched off, or an administrator takes the operator role
// away, its session ends: the page says so, the data gone; signed in
// again without the role, the console says what is missing (the 403).
func TestSessionsInABrowser(t *testing.T) {
	t.Parallel()
	c := harness.NewCluster(t, harness.Options{Circulations: 1, FeatureOn: true,
		StorageEnv: []string{"LOGIN_ACCESS_TTL=2s", "LOGIN_REFRESH_TTL=1h"}})
	lib := c.SetupLibrary(1, 1, 5)
	olga := c.Account(t, "olga", "Olga", "Operator", schemas.RoleOperator, "olga-password")
	otto := c.Account(t, "otto", "Otto", "Operator", schemas.RoleOperator, "otto-password")
	c.Do(c.Storage, "POST", "/check-out-lock-storage", map[string]any{"userId": patronID(t, c, lib.Patrons[0]), "ttlMs": 600000}).
		Want(t, http.StatusCreated)
	ctx := browser(t)
	signIn(t, ctx, c, "/ui/locks.html", "olga", "olga-password")
	if err := chromedp.Run(ctx, chromedp.WaitVisible("#locks tbody tr", chromedp.ByQuery)); err != nil {
		t.Fatal(err)
	}
	// The access token lives two seconds; the page goes on through
	// refreshes.
	waitFor(t, "the page to refresh its sign-in twice", func() bool {
		return strings.Count(c.Circulations[0].Log(), `"/authn/refresh"`) >= 2
	})
	if n := evaluate[int](t, ctx, `document.querySelectorAll("#locks tbody tr").length`); n != 1 {
		t.Errorf("%d locks on screen after the sign-in was refreshed, want 1", n)
	}

	// Switched off: the session ends.
	doc := accountDoc(t, c, olga)
	doc["active"] = false
	c.Do(c.Storage, "PUT", "/sign-in-accounts/"+olga, doc).Want(t, http.StatusNoContent)
	if err := chromedp.Run(ctx, chromedp.WaitVisible("#signin-panel", chromedp.ByQuery)); err != nil {
		t.Fatal(err)
	}
	if got := textOf(t, ctx, "#signin-status"); got != "Your session has ended: sign in again." {
		t.Errorf("a session that ended reads %q", got)
	}
	if n := evaluate[int](t, ctx, `document.querySelectorAll("#locks tbody tr").length`); n != 0 {
		t.Errorf("%d locks stay on screen after the session ended", n)
	}

	// The operator role taken away: a role change ends the account's
	// sessions, as switching it off does, and the locks go; signed in
	// again, the same person may no longer see the locks, and the page
	// says why.
	signInHere(t, ctx, "otto", "otto-password")
	if err := chromedp.Run(ctx, chromedp.WaitVisible("#locks tbody tr", chromedp.ByQuery)); err != nil {
		t.Fatal(err)
	}
	doc = accountDoc(t, c, otto)
	doc["roles"] = []string{schemas.RoleLibrarian}
	c.Do(c.Storage, "PUT", "/sign-in-accounts/"+otto, doc).Want(t, http.StatusNoContent)
	if err := chromedp.Run(ctx, chromedp.WaitVisible("#signin-panel", chromedp.ByQuery)); err != nil {
		t.Fatal(err)
	}
	if got := textOf(t, ctx, "#signin-status"); got != "Your session has ended: sign in again." {
		t.Errorf("a session its role change ended reads %q", got)
	}
	if n := evaluate[int](t, ctx, `document.querySelectorAll("#locks tbody tr").length`); n != 0 {
		t.Errorf("%d locks stay on screen after the role change ended the session", n)
	}
	signInHere(t, ctx, "otto", "otto-password")
	want := "Otto Operator may not see the locks: that needs the operator role."
	waitUntil(t, ctx, "the refusal on screen", `document.getElementById("page-status").textContent === `+jsString(want))
	if n := evaluate[int](t, ctx, `document.querySelectorAll("#locks tbody tr").length`); n != 0 {
		t.Errorf("%d locks stay on screen after a 403", n)
	}
	if got := textOf(t, ctx, "#who"); got != "Signed in as Otto Operator" {
		t.Errorf("after the refusal the header reads %q", got)
	}
}

// jsString is s as a JavaScript string literal.
func jsString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
