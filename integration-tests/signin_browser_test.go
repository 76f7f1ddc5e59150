package integration

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/fetch"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/checkoutlock/integration-tests/harness"
	"github.com/checkoutlock/schemas"
	"github.com/checkoutlock/serverkit/auth"
)

// maxCookie is what a browser keeps of a cookie, its name and value
// together (RFC 6265 §6.1's minimum, and Chromium's limit): a larger one
// is dropped without a word.
const maxCookie = 4096

// accessCookie is the size of the page's sign-in cookie (name and value),
// 0 without one.
func accessCookie(t *testing.T, ctx context.Context) int {
	t.Helper()
	var cookies []*network.Cookie
	if err := chromedp.Run(ctx, chromedp.ActionFunc(func(ctx context.Context) error {
		var err error
		cookies, err = network.GetCookies().Do(ctx)
		return err
	})); err != nil {
		t.Fatal(err)
	}
	for _, k := range cookies {
		if k.Name == auth.AccessCookie {
			return len(k.Name) + len(k.Value)
		}
	}
	return 0
}

// TestEveryRoleSignsInOnThePages: each role's account, and one holding
// every role (every permission of both modules), signs in on both pages at
// a phone's width and a desktop's: its cookie is under what a browser
// keeps, the header names it, and each page shows what the account may see
// (the settings writable, read-only, or a sentence saying which role they
// need; the locks, or the same), with nothing wider than the screen. Signed
// out, the page shows the form and a neutral note alone.
func TestEveryRoleSignsInOnThePages(t *testing.T) {
	t.Parallel()
	c := harness.NewCluster(t, harness.Options{Circulations: 1, FeatureOn: true})
	lib := c.SetupLibrary(1, 1, 5)
	c.Do(c.Storage, "POST", "/check-out-lock-storage", map[string]any{"userId": patronID(t, c, lib.Patrons[0]), "ttlMs": 600000}).
		Want(t, http.StatusCreated)
	var every []string
	for _, s := range schemas.PermissionSets {
		every = append(every, s.Name)
	}
	c.Do(c.Storage, "POST", "/sign-in-accounts", map[string]any{"username": "all", "personal": map[string]any{"firstName": "Al", "lastName": "Everything"},
		"roles": every}).Want(t, http.StatusCreated)
	c.Do(c.Storage, "POST", "/authn/credentials", map[string]any{"username": "all", "password": "all-password"}).Want(t, http.StatusCreated)

	type account struct {
		username, name, role   string
		settings, write, locks bool
	}
	accounts := []account{
		{"kiosk", "Self-check Kiosk", schemas.RoleSelfCheck, false, false, false},
		{"lee", "Lee Librarian", schemas.RoleLibrarian, true, true, false},
		{"olga", "Olga Operator", schemas.RoleOperator, true, false, true},
		{"ada", "Ada Admin", schemas.RoleTenantAdmin, true, true, true},
		{"all", "Al Everything", "", true, true, true},
	}
	for _, a := range accounts {
		if a.role != "" {
			first, last, _ := strings.Cut(a.name, " ")
			c.Account(t, a.username, first, last, a.role, a.username+"-password")
		}
	}
	// Each account in a browser context of its own, side by side.
	for _, a := range accounts {
		t.Run(a.username, func(t *testing.T) {
			t.Parallel()
			ctx := browser(t)
			for _, width := range []int64{390, 1280} {
				for _, page := range []string{"/ui/settings.html", "/ui/locks.html", "/ui/loans.html"} {
					if err := chromedp.Run(ctx, chromedp.EmulateViewport(width, 900, chromedp.EmulateScale(1))); err != nil {
						t.Fatal(err)
					}
					signIn(t, ctx, c, page, a.username, a.username+"-password")
					where := fmt.Sprintf("%s at %s, %d px", a.username, page, width)
					size := accessCookie(t, ctx)
					if size == 0 || size >= maxCookie {
						t.Errorf("%s: the sign-in cookie is %d bytes, want 1 to %d", where, size, maxCookie-1)
					}
					if width == 1280 && page == "/ui/settings.html" {
						t.Logf("%s's sign-in cookie: %d bytes", a.username, size)
					}
					if got := textOf(t, ctx, "#who"); got != "Signed in as "+a.name {
						t.Errorf("%s: the header reads %q", where, got)
					}
					switch page {
					case "/ui/settings.html":
						if a.settings {
							waitUntil(t, ctx, where+": the settings", `!document.getElementById("settings").hidden && document.getElementById("lockTtl").value !== ""`)
							if ro := evaluate[bool](t, ctx, `!document.getElementById("readonly-note").hidden`); ro == a.write {
								t.Errorf("%s: the settings read-only: %v, want %v", where, ro, !a.write)
							}
						} else {
							want := a.name + " may not see the settings: that needs the librarian or the operator role."
							waitUntil(t, ctx, where+": why not", `document.getElementById("page-status").textContent === `+jsString(want))
						}
					case "/ui/loans.html":
						// The desk's page is the librarians' (who may change
						// the settings too).
						if a.write {
							waitUntil(t, ctx, where+": the search", `!document.getElementById("content").hidden`)
						} else {
							want := a.name + " may not see patrons' loans: that needs the librarian role."
							waitUntil(t, ctx, where+": why not", `document.getElementById("page-status").textContent === `+jsString(want))
						}
					case "/ui/locks.html":
						if a.locks {
							waitUntil(t, ctx, where+": the lock", `document.querySelectorAll("#locks tbody tr").length === 1`)
						} else {
							want := a.name + " may not see the locks: that needs the operator role."
							waitUntil(t, ctx, where+": why not", `document.getElementById("page-status").textContent === `+jsString(want))
						}
					}
					// No button the account may not use is there to press:
					// what the role cannot do is hidden or disabled, with why.
					want := []string{}
					switch {
					case page == "/ui/settings.html" && a.write:
						want = []string{"Save changes", "Undo changes"}
					case page == "/ui/locks.html" && a.locks:
						want = []string{"Release…", "Show", "Clear", "Export CSV"}
					case page == "/ui/loans.html" && a.write:
						want = []string{"Find"}
					}
					if got := activeButtons(t, ctx); !slices.Equal(got, want) {
						t.Errorf("%s: the buttons to press are %q, want %q", where, got, want)
					}
					if w := evaluate[int](t, ctx, `document.documentElement.scrollWidth`); w > int(width) {
						t.Errorf("%s: the page is %d px wide", where, w)
					}
					// The page speaks of roles, never of the API's
					// permissions: none named in its text or on a hover.
					if named := evaluate[[]string](t, ctx, `[document.body.innerText, ...[...document.querySelectorAll("[title]")].map(e => e.title)]
						.flatMap(s => s.match(/\bcirculation(-storage)?\.[a-z-]+(\.[a-z-]+)+/g) || [])`); len(named) > 0 {
						t.Errorf("%s: the page names permissions: %q", where, named)
					}
					if err := chromedp.Run(ctx, chromedp.Click("#sign-out", chromedp.ByQuery), chromedp.WaitVisible("#signin-panel", chromedp.ByQuery)); err != nil {
						t.Fatal(err)
					}
					// Signed out: the form and a neutral note, nothing else.
					left := evaluate[[]string](t, ctx, `[document.getElementById("signin-status").textContent, document.getElementById("signin-status").className,
						document.getElementById("page-status").textContent, document.getElementById("who").textContent, String(document.getElementById("content").hidden)]`)
					if strings.Join(left, "|") != "You have signed out.|status info|||true" {
						t.Errorf("%s: signed out, the page shows %q", where, left)
					}
				}
			}
		})
	}
}

// activeButtons is the text of every button on the page a person can
// press (shown and enabled), but the header's tenant and sign-out, and
// the "back to the environment's value" links.
func activeButtons(t *testing.T, ctx context.Context) []string {
	t.Helper()
	return evaluate[[]string](t, ctx, `[...document.querySelectorAll("button")]
		.filter((b) => b.getClientRects().length > 0 && !b.disabled && !b.closest("header") && !b.closest("#tenant-form") &&
			b.id !== "sign-out" && !b.id.endsWith("-default"))
		.map((b) => b.textContent.trim())`)
}

// TestASecondWordOfTheSameSignInKeepsThePage: a check of who is signed in
// that crosses the sign-in (the page asks every 5 s and on focus, and the
// sign-in asks once more) names the same person again: the page is not
// started again, and what the person has typed stays. Started again, the
// console emptied the history's filters under the operator's fingers,
// and Show then showed every event.
func TestASecondWordOfTheSameSignInKeepsThePage(t *testing.T) {
	t.Parallel()
	c := harness.NewCluster(t, harness.Options{Circulations: 1, FeatureOn: true})
	c.Account(t, "olga", "Olga", "Operator", schemas.RoleOperator, "olga-password")
	ctx := browser(t)
	signIn(t, ctx, c, "/ui/locks.html", "olga", "olga-password")
	waitUntil(t, ctx, "the console's first refresh", `document.getElementById("status").textContent !== ""`)
	if err := chromedp.Run(ctx, chromedp.SetValue("#f-patron", "alice", chromedp.ByQuery)); err != nil {
		t.Fatal(err)
	}
	var typed string
	if err := chromedp.Run(ctx, chromedp.Evaluate(`whoIsSignedIn("").then(() => document.getElementById("f-patron").value)`, &typed,
		func(p *runtime.EvaluateParams) *runtime.EvaluateParams { return p.WithAwaitPromise(true) })); err != nil {
		t.Fatal(err)
	}
	if typed != "alice" {
		t.Errorf("after a second word of the same sign-in the patron filter reads %q, want what was typed, %q", typed, "alice")
	}
	if got := textOf(t, ctx, "#who"); got != "Signed in as Olga Operator" {
		t.Errorf("the header reads %q", got)
	}
}

// TestPagesFollowTheSignInOfAnotherTab: two tabs share the browser's
// cookie. Another account signed in from the second tab, without a word
// to the first (a script calling the sign-in), makes the first show that
// account within a poll, with what it may see and nothing of the one
// before. A sign-out there leaves the first with the sign-in form and a
// neutral note alone. Unsaved edits of the settings are kept for their
// author: another account signed in from the second tab never sees them,
// and they come back when the author signs in again.
func TestPagesFollowTheSignInOfAnotherTab(t *testing.T) {
	t.Parallel()
	c := harness.NewCluster(t, harness.Options{Circulations: 1, FeatureOn: true})
	lib := c.SetupLibrary(1, 1, 5)
	c.Account(t, "olga", "Olga", "Operator", schemas.RoleOperator, "olga-password")
	c.Account(t, "lee", "Lee", "Librarian", schemas.RoleLibrarian, "lee-password")
	c.Do(c.Storage, "POST", "/check-out-lock-storage", map[string]any{"userId": patronID(t, c, lib.Patrons[0]), "ttlMs": 600000}).
		Want(t, http.StatusCreated)
	first := browser(t)
	second := anotherTab(t, first)
	// Within a poll: the console's is a second, the pages' own of who is
	// signed in five; a tab that signs in or out on the page tells the
	// others at once.
	within := func(ctx context.Context, what, script string) {
		t.Helper()
		if err := chromedp.Run(ctx, chromedp.Poll(script, nil, chromedp.WithPollingTimeout(7*time.Second))); err != nil {
			t.Fatalf("within 7 s, %s: %v", what, err)
		}
	}
	signOut := func(ctx context.Context) {
		t.Helper()
		if err := chromedp.Run(ctx, chromedp.Click("#sign-out", chromedp.ByQuery), chromedp.WaitVisible("#signin-panel", chromedp.ByQuery)); err != nil {
			t.Fatal(err)
		}
	}

	signIn(t, first, c, "/ui/locks.html", "olga", "olga-password")
	within(first, "the operator's console shows the lock", `document.querySelectorAll("#locks tbody tr").length === 1`)
	if err := chromedp.Run(second, chromedp.Navigate(pageURL(c, "/ui/settings.html")), chromedp.WaitVisible("#sign-out", chromedp.ByQuery)); err != nil {
		t.Fatal(err)
	}
	var status int
	if err := chromedp.Run(second, chromedp.Evaluate(`fetch("/authn/login-with-expiry", {method: "POST", credentials: "same-origin",
		headers: {"X-Okapi-Tenant": `+jsString(c.Tenant)+`, "Content-Type": "application/json"},
		body: JSON.stringify({username: "lee", password: "lee-password"})}).then((r) => r.status)`, &status,
		func(p *runtime.EvaluateParams) *runtime.EvaluateParams { return p.WithAwaitPromise(true) })); err != nil || status != http.StatusCreated {
		t.Fatalf("the second tab's sign-in answered %d, %v", status, err)
	}
	within(first, "the first tab names the librarian", `document.getElementById("who").textContent === "Signed in as Lee Librarian"`)
	want := "Lee Librarian may not see the locks: that needs the operator role."
	within(first, "the first tab says what the librarian may not see", `document.getElementById("page-status").textContent === `+jsString(want))
	if n := evaluate[int](t, first, `document.querySelectorAll("#locks tbody tr").length`); n != 0 {
		t.Errorf("%d locks stay on the first tab for the librarian", n)
	}

	// Signed out in the second tab: the first shows the form and a note.
	signOut(second)
	within(first, "the first tab shows the sign-in form", `!document.getElementById("signin-panel").hidden && document.getElementById("content").hidden`)
	state := evaluate[map[string]string](t, first, `({who: document.getElementById("who").textContent,
		page: document.getElementById("page-status").textContent,
		note: document.getElementById("signin-status").textContent,
		style: document.getElementById("signin-status").className})`)
	if state["who"] != "" || state["page"] != "" || state["note"] != "Your session has ended: sign in again." || state["style"] != "status info" {
		t.Errorf("the first tab, signed out in the second: %v", state)
	}
	if got := textOf(t, second, "#signin-status"); got != "You have signed out." {
		t.Errorf("the second tab's sign-out reads %q", got)
	}
	if style := evaluate[string](t, second, `document.getElementById("signin-status").className`); style != "status info" {
		t.Errorf("the sign-out note is styled %q, want neutral", style)
	}

	// Lee edits the lock's lifetime without saving; Olga signs in in the
	// other tab, and the first shows her the stored value, read-only; Lee
	// signs in again there, and the first shows the edit again.
	signIn(t, first, c, "/ui/settings.html", "lee", "lee-password")
	within(first, "the settings", `document.getElementById("lockTtl").value !== ""`)
	stored := evaluate[string](t, first, `document.getElementById("lockTtl").value`)
	if err := chromedp.Run(first, chromedp.SetValue("#lockTtl", "4321", chromedp.ByQuery)); err != nil {
		t.Fatal(err)
	}
	within(second, "the second tab follows the librarian's sign-in", `document.getElementById("who").textContent === "Signed in as Lee Librarian"`)
	signOut(second)
	within(first, "the first tab shows the sign-in form", `!document.getElementById("signin-panel").hidden`)
	signInHere(t, second, "olga", "olga-password")
	within(first, "the first tab names the operator", `document.getElementById("who").textContent === "Signed in as Olga Operator"`)
	within(first, "the operator sees the settings read-only", `!document.getElementById("readonly-note").hidden && document.getElementById("lockTtl").value !== ""`)
	if got := evaluate[string](t, first, `document.getElementById("lockTtl").value`); got != stored {
		t.Errorf("the operator sees the lock's lifetime %q, want the stored %q (not the librarian's unsaved edit)", got, stored)
	}
	signOut(second)
	signInHere(t, second, "lee", "lee-password")
	within(first, "the librarian's edit back", `document.getElementById("who").textContent === "Signed in as Lee Librarian" &&
		document.getElementById("lockTtl").value === "4321"`)
	if got := textOf(t, first, "#save-status"); got != "Your unsaved changes are back: save them, or undo them." {
		t.Errorf("the edit came back saying %q", got)
	}
}

// TestARefusedCookieIsSaid: a sign-in whose cookie the browser does not
// keep (here the sign-in is passed on by the test, which gives the page
// the answer without its Set-Cookie headers, as a browser refusing
// cookies, or one too large, would) is said on the page, not answered by
// the form again without a word.
func TestARefusedCookieIsSaid(t *testing.T) {
	t.Parallel()
	c := harness.NewCluster(t, harness.Options{Circulations: 1, FeatureOn: true})
	c.Account(t, "lee", "Lee", "Librarian", schemas.RoleLibrarian, "lee-password")
	ctx := browser(t)
	chromedp.ListenTarget(ctx, func(ev any) {
		e, ok := ev.(*fetch.EventRequestPaused)
		if !ok {
			return
		}
		go func() {
			exec := cdp.WithExecutor(ctx, chromedp.FromContext(ctx).Target)
			var body []byte
			for _, part := range e.Request.PostDataEntries {
				b, _ := base64.StdEncoding.DecodeString(part.Bytes)
				body = append(body, b...)
			}
			req, _ := http.NewRequest(e.Request.Method, e.Request.URL, bytes.NewReader(body))
			for k, v := range e.Request.Headers {
				req.Header.Set(k, fmt.Sprint(v))
			}
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Errorf("pass the sign-in on: %v", err)
				return
			}
			answer, _ := io.ReadAll(res.Body)
			res.Body.Close()
			var headers []*fetch.HeaderEntry
			for k, vs := range res.Header {
				for _, v := range vs {
					if !strings.EqualFold(k, "Set-Cookie") {
						headers = append(headers, &fetch.HeaderEntry{Name: k, Value: v})
					}
				}
			}
			if err := fetch.FulfillRequest(e.RequestID, int64(res.StatusCode)).WithResponseHeaders(headers).
				WithBody(base64.StdEncoding.EncodeToString(answer)).Do(exec); err != nil {
				t.Errorf("answer the sign-in without its cookies: %v", err)
			}
		}()
	})
	if err := chromedp.Run(ctx, fetch.Enable().WithPatterns([]*fetch.RequestPattern{
		{URLPattern: "*/authn/login-with-expiry*", RequestStage: fetch.RequestStageRequest}})); err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Run(ctx,
		chromedp.Navigate(pageURL(c, "/ui/settings.html")),
		submitSignIn("lee", "lee-password"),
	); err != nil {
		t.Fatal(err)
	}
	want := "The sign-in succeeded, but this browser did not keep its cookie: allow cookies for this site, then sign in again."
	waitUntil(t, ctx, "the page to say the cookie was not kept", `document.getElementById("signin-status").textContent === `+jsString(want)+
		` && document.getElementById("signin-status").classList.contains("error")`)
	if accessCookie(t, ctx) != 0 {
		t.Error("the browser kept a sign-in cookie")
	}
}
