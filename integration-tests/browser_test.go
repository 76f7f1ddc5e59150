package integration

import (
	"context"
	"encoding/json"
	"flag"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

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

// browser starts a headless Chromium and returns a context driving one tab.
func browser(t *testing.T) context.Context {
	t.Helper()
	path, err := chromium()
	if err != nil {
		t.Fatalf("chromium: %v", err)
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path), chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.WindowSize(1100, 900), chromedp.Flag("lang", "en-GB"))
	actx, cancel := chromedp.NewExecAllocator(t.Context(), opts...)
	t.Cleanup(cancel)
	ctx, cancelTab := chromedp.NewContext(actx)
	t.Cleanup(cancelTab)
	ctx, cancelTime := context.WithTimeout(ctx, 90*time.Second)
	t.Cleanup(cancelTime)
	if err := chromedp.Run(ctx); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	return ctx
}

// signIn opens page for the cluster's tenant and gives the token the
// page asks for (jwt mode answers its first call 401).
func signIn(t *testing.T, ctx context.Context, c *harness.Cluster, page, role string) {
	t.Helper()
	url := c.Circulations[0].URL() + page + "?tenant=" + c.Tenant
	if err := chromedp.Run(ctx,
		chromedp.Navigate(url),
		chromedp.WaitVisible("#token-dialog", chromedp.ByQuery),
		chromedp.SendKeys("#token-input", c.Token(role), chromedp.ByQuery),
		chromedp.Click(`#token-dialog button[value="ok"]`, chromedp.ByQuery),
	); err != nil {
		t.Fatalf("sign in to %s: %v", page, err)
	}
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

// TestSettingsPageInABrowser: a librarian switches the lock off on the
// page, and the next check-out runs without a lock call; changes the
// retry waits, and the settings in effect change; a value out of bounds is
// refused on the page, before anything is sent.
func TestSettingsPageInABrowser(t *testing.T) {
	t.Parallel()
	c := harness.NewCluster(t, harness.Options{Circulations: 1, FeatureOn: true})
	lib := c.SetupLibrary(1, 2, 5)
	ctx := browser(t)
	signIn(t, ctx, c, "/ui/settings.html", schemas.RoleLibrarian)

	var status, source string
	if err := chromedp.Run(ctx,
		chromedp.WaitVisible("#settings", chromedp.ByQuery),
		chromedp.Text("#enabled-source", &source, chromedp.ByQuery),
	); err != nil {
		t.Fatal(err)
	}
	if source != "from the environment" {
		t.Errorf("the toggle's source reads %q", source)
	}
	screenshot(t, ctx, "settings.png")

	// Off, through the page.
	if err := chromedp.Run(ctx,
		chromedp.Click("#enabled", chromedp.ByQuery),
		chromedp.Click("#save", chromedp.ByQuery),
		chromedp.WaitVisible(`#save-status.ok`, chromedp.ByQuery),
		chromedp.Text("#save-status", &status, chromedp.ByQuery),
	); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(status, "Saved: checkOutLockFeatureEnabled.") {
		t.Errorf("save status %q", status)
	}
	if enabled, _, sources := effectiveSettings(t, c); enabled || sources["checkOutLockFeatureEnabled"] != "settings" {
		t.Fatalf("after the page switched the lock off: enabled %v, sources %v", enabled, sources)
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
		chromedp.Text("#waits-error", &status, chromedp.ByQuery),
	); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(status, "Each wait must be from 1 to 60000 ms") {
		t.Errorf("the waits' error reads %q", status)
	}
	// The entry the page wrote leaves the waits out: FOLIO's default
	// applies, 30 waits of 250 ms, and the refused change left it so.
	if _, waits, _ := effectiveSettings(t, c); len(waits) != 30 || waits[0] != 250 {
		t.Errorf("waits after a refused change %v, want FOLIO's 30 of 250 ms", waits)
	}

	// The retry waits, changed.
	if err := chromedp.Run(ctx,
		chromedp.SetValue("#waits", "100, 200, 400", chromedp.ByQuery),
		chromedp.Click("#save", chromedp.ByQuery),
		chromedp.WaitVisible(`#save-status.ok`, chromedp.ByQuery),
		chromedp.Text("#waits-source", &source, chromedp.ByQuery),
	); err != nil {
		t.Fatal(err)
	}
	if _, waits, sources := effectiveSettings(t, c); !equalInts(waits, []int{100, 200, 400}) || sources["retryIntervalsMs"] != "settings" {
		t.Errorf("after the page changed the waits: %v from %s", waits, sources["retryIntervalsMs"])
	}
	if source != "set here" {
		t.Errorf("the waits' source reads %q", source)
	}
	// Only what changed was sent: the toggle stays off.
	if enabled, _, _ := effectiveSettings(t, c); enabled {
		t.Error("changing the waits switched the lock back on")
	}

	// FOLIO's own values (its settings fixture: a 500 ms lock, ten
	// retries 5 ms apart) are accepted on the page and take effect.
	if err := chromedp.Run(ctx,
		chromedp.SetValue("#lockTtl", "500", chromedp.ByQuery),
		chromedp.SetValue("#waits", "5, 5, 5, 5, 5, 5, 5, 5, 5, 5", chromedp.ByQuery),
		chromedp.Click("#save", chromedp.ByQuery),
		// The status of this save, not the one before it.
		chromedp.Poll(`(() => { const s = document.querySelector("#save-status");
			return s.classList.contains("ok") && s.textContent.startsWith("Saved:") && s.textContent.includes("lockTtl"); })()`, nil),
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

// TestLockConsoleInABrowser: a held lock appears in the console with its
// patron and its holder; the operator releases it from there, from the
// keyboard, after a confirmation, and the release appears in the history as
// made by someone other than the holder. The Release button keeps the
// focus while the countdowns are redrawn and while an older lock's row
// above it goes.
func TestLockConsoleInABrowser(t *testing.T) {
	t.Parallel()
	c := harness.NewCluster(t, harness.Options{Circulations: 1, FeatureOn: true})
	lib := c.SetupLibrary(2, 1, 5)
	patron := patronID(t, c, lib.Patrons[0])
	var older, lock struct {
		ID string `json:"id"`
	}
	// Listed first (oldest first); released below, while the page shows it.
	c.Do(c.Storage, "POST", "/check-out-lock-storage", map[string]any{"userId": patronID(t, c, lib.Patrons[1]), "id": uuid.NewString(),
		"ttlMs": 120000}).Want(t, http.StatusCreated).Decode(t, &older)
	c.Do(c.Storage, "POST", "/check-out-lock-storage", map[string]any{"userId": patron, "id": uuid.NewString(), "ttlMs": 120000,
		"holder": map[string]any{"instance": "circ-7:8080", "requestId": "req-77", "itemBarcode": lib.Items[0][0]}}).
		Want(t, http.StatusCreated).Decode(t, &lock)
	ctx := browser(t)
	signIn(t, ctx, c, "/ui/locks.html", schemas.RoleOperator)

	row := `#locks tr[data-lock="` + lock.ID + `"]`
	var text string
	if err := chromedp.Run(ctx,
		chromedp.WaitVisible(`#locks tr[data-lock="`+older.ID+`"]`, chromedp.ByQuery),
		chromedp.WaitVisible(row, chromedp.ByQuery),
		chromedp.Text(row, &text, chromedp.ByQuery),
	); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{lib.Patrons[0], "circ-7:8080", lib.Items[0][0], "req-77"} {
		if !strings.Contains(text, want) {
			t.Errorf("the lock's row %q does not show %q", text, want)
		}
	}
	screenshot(t, ctx, "locks.png")

	// Release, confirmed, from the keyboard. The countdowns are redrawn
	// four times a second and the older lock's row goes when it is
	// released elsewhere; the Release button keeps the focus through both
	// (a button replaced at each redraw would lose it, and swallow a click
	// whose press and release straddled one; a row moved would lose it
	// too).
	var focused string
	if err := chromedp.Run(ctx, chromedp.Focus(row+" button", chromedp.ByQuery)); err != nil {
		t.Fatal(err)
	}
	c.Do(c.Storage, "DELETE", "/check-out-lock-storage/"+older.ID, nil).Want(t, http.StatusNoContent)
	if err := chromedp.Run(ctx,
		chromedp.WaitNotPresent(`#locks tr[data-lock="`+older.ID+`"]`, chromedp.ByQuery),
		chromedp.Evaluate(`(document.activeElement && document.activeElement.dataset.lock) || ""`, &focused),
	); err != nil {
		t.Fatal(err)
	}
	if focused != lock.ID {
		t.Fatalf("after redraws and the older lock's row going, the focus is on %q, not on the lock's Release button", focused)
	}
	if err := chromedp.Run(ctx,
		chromedp.KeyEvent("\r"),
		chromedp.WaitVisible("#confirm-dialog", chromedp.ByQuery),
		chromedp.Click("#confirm-release", chromedp.ByQuery),
		chromedp.WaitNotPresent(row, chromedp.ByQuery),
		chromedp.WaitVisible(`#history tr[data-event="released_by_other"]`, chromedp.ByQuery),
	); err != nil {
		t.Fatal(err)
	}
	c.Do(c.Storage, "GET", "/check-out-lock-storage/"+lock.ID, nil).Want(t, http.StatusNotFound)
	var h struct {
		Events []struct {
			Type string            `json:"type"`
			By   map[string]string `json:"by"`
		} `json:"events"`
	}
	c.Do(c.Storage, "GET", "/check-out-lock-storage/history?userId="+patron, nil).Want(t, http.StatusOK).Decode(t, &h)
	if len(h.Events) != 1 || h.Events[0].Type != "released_by_other" || h.Events[0].By["acquiredBy"] == "" {
		raw, _ := json.Marshal(h)
		t.Errorf("history after the console's release: %s", raw)
	}
	screenshot(t, ctx, "locks-history.png")
}
