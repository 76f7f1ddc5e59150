package integration

import (
	"net/http"
	"strings"
	"testing"

	"github.com/checkoutlock/integration-tests/harness"
	"github.com/checkoutlock/schemas"
)

// logIn posts FOLIO's login and returns the answer with its cookies.
func logIn(c *harness.Cluster, username, password string) harness.Response {
	return c.DoWith(c.Storage, "POST", "/authn/login-with-expiry", map[string]any{"username": username, "password": password},
		map[string]string{schemas.HeaderTenant: c.Tenant})
}

// cookieOf is the named cookie a response set, "" when none.
func cookieOf(r harness.Response, name string) string {
	for _, k := range (&http.Response{Header: r.Header}).Cookies() {
		if k.Name == name {
			return k.Value
		}
	}
	return ""
}

// TestLogin: FOLIO's login across the real services. An administrator
// makes an account (a librarian) and sets its password; a wrong password
// and an unknown name get the same answer; the right one gets access and
// refresh tokens in HttpOnly cookies, and the access token works as a
// librarian's at both services (and no further); refresh rotates the
// refresh token (the old one no longer works); logout ends it; repeated
// failures lock the account for LOGIN_LOCKOUT, then it signs in again.
// The password is never in a log or an answer.
func TestLogin(t *testing.T) {
	t.Parallel()
	c := harness.NewCluster(t, harness.Options{Circulations: 1, FeatureOn: true,
		StorageEnv: []string{"LOGIN_MAX_FAILURES=3", "LOGIN_LOCKOUT=2s"}})
	const password = "correct horse battery staple"
	var account struct{ ID string }
	c.Do(c.Storage, "POST", "/sign-in-accounts", map[string]any{"username": "Ada", "personal": map[string]any{"firstName": "Ada", "lastName": "Lovelace"},
		"roles": []string{schemas.RoleLibrarian}}).Want(t, http.StatusCreated).Decode(t, &account)
	c.Do(c.Storage, "POST", "/authn/credentials", map[string]any{"username": "ada", "password": password}).Want(t, http.StatusCreated)

	wrong := logIn(c, "ada", "wrong password")
	unknown := logIn(c, "nobody", password)
	for _, r := range []harness.Response{wrong, unknown} {
		if r.Status != http.StatusUnprocessableEntity || len(r.ErrorCodes()) != 1 || r.ErrorCodes()[0] != schemas.CodeLoginFailed ||
			!strings.Contains(string(r.Body), "Wrong username or password") {
			t.Fatalf("a failed sign-in: %d %s, want 422 LOGIN_FAILED naming neither", r.Status, r.Body)
		}
	}

	ok := logIn(c, "ADA", password).Want(t, http.StatusCreated)
	access, refresh := cookieOf(ok, "folioAccessToken"), cookieOf(ok, "folioRefreshToken")
	if access == "" || refresh == "" || !strings.Contains(strings.Join(ok.Header.Values("Set-Cookie"), "\n"), "HttpOnly") {
		t.Fatalf("sign-in cookies %q", ok.Header.Values("Set-Cookie"))
	}
	as := func(token string) map[string]string {
		return map[string]string{schemas.HeaderTenant: c.Tenant, schemas.HeaderToken: token}
	}
	// A librarian's token: the settings at circulation, not storage's records.
	c.DoWith(c.Circulations[0], "GET", "/circulation/settings/check-out-lock", nil, as(access)).Want(t, http.StatusOK)
	c.DoWith(c.Circulations[0], "GET", "/circulation/check-out-locks", nil, as(access)).Want(t, http.StatusForbidden)
	c.DoWith(c.Storage, "GET", "/sign-in-accounts", nil, as(access)).Want(t, http.StatusForbidden)

	withRefresh := func(token string) map[string]string {
		return map[string]string{schemas.HeaderTenant: c.Tenant, "Cookie": "folioRefreshToken=" + token}
	}
	again := c.DoWith(c.Storage, "POST", "/authn/refresh", nil, withRefresh(refresh)).Want(t, http.StatusCreated)
	next := cookieOf(again, "folioRefreshToken")
	if next == "" || next == refresh {
		t.Fatalf("refresh gave %q", next)
	}
	if r := c.DoWith(c.Storage, "POST", "/authn/refresh", nil, withRefresh(refresh)); r.Status != http.StatusUnauthorized ||
		r.ErrorCodes()[0] != schemas.CodeSessionEnded {
		t.Errorf("the refresh token used twice: %d %s, want 401 SESSION_ENDED", r.Status, r.Body)
	}
	c.DoWith(c.Storage, "POST", "/authn/logout", nil, withRefresh(next)).Want(t, http.StatusNoContent)
	if r := c.DoWith(c.Storage, "POST", "/authn/refresh", nil, withRefresh(next)); r.Status != http.StatusUnauthorized {
		t.Errorf("refresh after logout: %d %s, want 401", r.Status, r.Body)
	}

	// Three more failures lock the account (the first failure above is
	// older than the window only if the test ran slower than 2 s: count
	// again from a fresh lock either way).
	var locked harness.Response
	waitFor(t, "the account locked by failures", func() bool {
		locked = logIn(c, "ada", "wrong again")
		return locked.Status == http.StatusTooManyRequests
	})
	if locked.ErrorCodes()[0] != schemas.CodeLoginLocked || locked.Header.Get("Retry-After") == "" {
		t.Errorf("a locked sign-in: %d %s %v", locked.Status, locked.Body, locked.Header)
	}
	if r := logIn(c, "ada", password); r.Status != http.StatusTooManyRequests {
		t.Errorf("the right password while locked: %d, want 429", r.Status)
	}
	waitFor(t, "the lock to pass", func() bool { return logIn(c, "ada", password).Status == http.StatusCreated })

	for _, p := range []*harness.Process{c.Storage, c.Circulations[0]} {
		if strings.Contains(p.Log(), password) || strings.Contains(p.Log(), "wrong again") {
			t.Errorf("a password is in %s's log", p.Name)
		}
	}
	if strings.Contains(string(c.Do(c.Storage, "GET", "/sign-in-accounts", nil).Want(t, http.StatusOK).Body), "argon2") {
		t.Error("the accounts list shows a password hash")
	}
}
