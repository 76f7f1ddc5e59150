package integration

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/checkoutlock/integration-tests/harness"
	"github.com/checkoutlock/schemas"
	"github.com/checkoutlock/schemas/selfcheck"
)

// What a self-check machine may read and bend, and how long a session
// speaks for its account, at the real services.

// TestPatronSummaryIsTheVerdictWithoutThePIN: a self-check machine reads a
// patron's summary as the verdict and the counts, with neither the
// patron's name, id nor titles; with the patron's PIN, all of it; a wrong
// PIN is 422 and shows nothing; a librarian sees all without a PIN. More
// summaries than PATRON_SUMMARY_RATE a minute from one kiosk account at
// one address are 429 with Retry-After; another address has its own. A
// kiosk's check-out answer names the borrower no more than the summary
// without the PIN.
func TestPatronSummaryIsTheVerdictWithoutThePIN(t *testing.T) {
	t.Parallel()
	c := harness.NewCluster(t, harness.Options{Circulations: 1, FeatureOn: true, CirculationEnv: []string{"PATRON_SUMMARY_RATE=6"}})
	lib := c.SetupLibrary(1, 2, 0)
	patron := lib.Patrons[0]
	c.CheckOut(0, lib.Items[0][0], patron).Want(t, http.StatusCreated)
	id := c.IDOf(t, "/users", "users", patron)
	c.Do(c.Storage, "POST", "/patron-pin", map[string]any{"id": id, "pin": "7319"}).Want(t, http.StatusCreated)
	var title string
	{
		var item struct {
			Items []struct {
				Title string `json:"title"`
			} `json:"items"`
		}
		c.Do(c.Storage, "GET", "/item-storage/items?query=barcode=="+lib.Items[0][0], nil).Want(t, http.StatusOK).Decode(t, &item)
		title = item.Items[0].Title
	}
	path := "/circulation/patron-summary?userBarcode=" + patron
	kiosk := func(kv ...string) map[string]string {
		h := map[string]string{schemas.HeaderTenant: c.Tenant, schemas.HeaderToken: c.Token(schemas.RoleSelfCheck)}
		for i := 0; i+1 < len(kv); i += 2 {
			h[kv[i]] = kv[i+1]
		}
		return h
	}
	type summary struct {
		View   string `json:"view"`
		Patron struct {
			ID, Barcode, FirstName, LastName string
		} `json:"patron"`
		OpenLoanCount int `json:"openLoanCount"`
		OpenLoans     []struct {
			Title string `json:"title"`
		} `json:"openLoans"`
	}
	from := "127.0.6.1"

	r := c.DoFrom(from, c.Circulations[0], "GET", path, nil, kiosk()).Want(t, http.StatusOK)
	var v summary
	r.Decode(t, &v)
	if v.View != "verdict" || v.OpenLoanCount != 1 || v.Patron.Barcode != patron || len(v.OpenLoans) != 0 ||
		bytes.Contains(r.Body, []byte(title)) || bytes.Contains(r.Body, []byte(id)) || bytes.Contains(r.Body, []byte("Patron "+patron)) {
		t.Errorf("a kiosk's summary without the PIN: %s; want the verdict and the counts alone", r.Body)
	}
	r = c.DoFrom(from, c.Circulations[0], "GET", path, nil, kiosk(schemas.HeaderPatronPin, "7319")).Want(t, http.StatusOK)
	var full summary
	r.Decode(t, &full)
	if full.View != "full" || full.Patron.ID != id || len(full.OpenLoans) != 1 || full.OpenLoans[0].Title != title {
		t.Errorf("a kiosk's summary with the PIN: %s; want the patron and the loans", r.Body)
	}
	r = c.DoFrom(from, c.Circulations[0], "GET", path, nil, kiosk(schemas.HeaderPatronPin, "0000"))
	if r.Status != http.StatusUnprocessableEntity || r.ErrorCodes()[0] != schemas.CodePinInvalid || bytes.Contains(r.Body, []byte(title)) {
		t.Errorf("a kiosk's summary with a wrong PIN: %d %s; want 422 PIN_INVALID", r.Status, r.Body)
	}
	lib2 := map[string]string{schemas.HeaderTenant: c.Tenant, schemas.HeaderToken: c.Token(schemas.RoleLibrarian)}
	r = c.DoFrom(from, c.Circulations[0], "GET", path, nil, lib2).Want(t, http.StatusOK)
	var librarian summary
	r.Decode(t, &librarian)
	if librarian.View != "full" || librarian.Patron.ID != id || len(librarian.OpenLoans) != 1 {
		t.Errorf("a librarian's summary: %s; want the patron and the loans", r.Body)
	}

	// Three summaries from this address so far; three more, then 429.
	for i := range 3 {
		c.DoFrom(from, c.Circulations[0], "GET", path, nil, kiosk()).Want(t, http.StatusOK)
		_ = i
	}
	r = c.DoFrom(from, c.Circulations[0], "GET", path, nil, kiosk())
	if r.Status != http.StatusTooManyRequests || r.ErrorCodes()[0] != schemas.CodeTooManyRequests || r.Header.Get("Retry-After") == "" {
		t.Errorf("a seventh summary in a minute: %d %s; want 429 TOO_MANY_REQUESTS with Retry-After", r.Status, r.Body)
	}
	c.DoFrom("127.0.6.2", c.Circulations[0], "GET", path, nil, kiosk()).Want(t, http.StatusOK)
	for range 8 {
		c.DoFrom(from, c.Circulations[0], "GET", path, nil, lib2).Want(t, http.StatusOK)
	}
	// A kiosk's check-out tells of the borrower what the summary without
	// the PIN does: the barcode it gave, no id, no name; a librarian's,
	// all of it.
	type lent struct {
		UserID   string `json:"userId"`
		Borrower struct {
			ID, Barcode, FirstName, LastName string
		} `json:"borrower"`
	}
	r = c.DoWith(c.Circulations[0], "POST", "/circulation/check-out-by-barcode", map[string]any{"itemBarcode": lib.Items[0][1],
		"userBarcode": patron, "servicePointId": harness.ServicePoint}, kiosk()).Want(t, http.StatusCreated)
	var byKiosk lent
	r.Decode(t, &byKiosk)
	if byKiosk.UserID != "" || byKiosk.Borrower.ID != "" || byKiosk.Borrower.FirstName != "" || byKiosk.Borrower.LastName != "" ||
		byKiosk.Borrower.Barcode != patron || bytes.Contains(r.Body, []byte(id)) {
		t.Errorf("a kiosk's check-out answer: %s; want the borrower's barcode alone", r.Body)
	}
	c.CheckIn(0, lib.Items[0][1]).Want(t, http.StatusOK)
	r = c.DoWith(c.Circulations[0], "POST", "/circulation/check-out-by-barcode", map[string]any{"itemBarcode": lib.Items[0][1],
		"userBarcode": patron, "servicePointId": harness.ServicePoint}, lib2).Want(t, http.StatusCreated)
	var byLibrarian lent
	r.Decode(t, &byLibrarian)
	if byLibrarian.UserID != id || byLibrarian.Borrower.ID != id || byLibrarian.Borrower.LastName == "" {
		t.Errorf("a librarian's check-out answer: %s; want the borrower named", r.Body)
	}
}

// selfCheckSettings writes the tenant's self-check settings entry with
// patronPin, as its administrator does at storage.
func selfCheckSettings(t *testing.T, c *harness.Cluster, patronPin string) {
	t.Helper()
	const id = "5e1fc4ec-7a11-4c0d-9e55-00000000c0de"
	entry := map[string]any{"id": id, "scope": selfcheck.Scope, "key": selfcheck.Key, "value": map[string]any{"patronPin": patronPin}}
	if r := c.Do(c.Storage, "PUT", "/settings/entries/"+id, entry); r.Status != http.StatusNotFound {
		r.Want(t, http.StatusNoContent)
		return
	}
	c.Do(c.Storage, "POST", "/settings/entries", entry).Want(t, http.StatusCreated)
}

// TestKioskRenewalNeedsThePatronWherePinsAreRequired: at a tenant that
// requires PINs, a self-check machine's renewal without the patron's PIN
// is refused alike for the patron's own loan, another patron's and an
// item of nobody's (the same status, code and body, naming neither
// patron), and renews nothing; a wrong PIN is PIN_INVALID and renews
// nothing; the right one renews. A librarian renews without a PIN, told
// of the borrower as FOLIO tells. Where PINs are not required, a kiosk
// renews on the card alone and is told of the borrower only the barcode
// it gave. A value circulation could not read as a self-check setting is
// refused at storage.
func TestKioskRenewalNeedsThePatronWherePinsAreRequired(t *testing.T) {
	t.Parallel()
	c := harness.NewCluster(t, harness.Options{Circulations: 1, FeatureOn: true})
	lib := c.SetupLibrary(2, 1, 0)
	renewable(t, c, lib, map[string]any{"unlimited": true, "renewFromId": "CURRENT_DUE_DATE"})
	patron, other := lib.Patrons[0], lib.Patrons[1]
	own, others := lib.Items[0][0], lib.Items[1][0]
	c.CheckOut(0, own, patron).Want(t, http.StatusCreated)
	c.CheckOut(0, others, other).Want(t, http.StatusCreated)
	patronID, otherID := c.IDOf(t, "/users", "users", patron), c.IDOf(t, "/users", "users", other)
	c.Do(c.Storage, "POST", "/patron-pin", map[string]any{"id": patronID, "pin": "7319"}).Want(t, http.StatusCreated)

	r := c.Do(c.Storage, "POST", "/settings/entries", map[string]any{"scope": selfcheck.Scope, "key": selfcheck.Key,
		"value": map[string]any{"patronPin": "sometimes"}})
	if r.Status != http.StatusUnprocessableEntity || !strings.Contains(string(r.Body), "value.patronPin") {
		t.Fatalf("a self-check setting of patronPin sometimes: %d %s; want 422 naming value.patronPin", r.Status, r.Body)
	}
	selfCheckSettings(t, c, selfcheck.PinRequired)

	renew := func(role, item string, kv ...string) harness.Response {
		h := map[string]string{schemas.HeaderTenant: c.Tenant, schemas.HeaderToken: c.Token(role)}
		for i := 0; i+1 < len(kv); i += 2 {
			h[kv[i]] = kv[i+1]
		}
		return c.DoWith(c.Circulations[0], "POST", "/circulation/renew-by-barcode",
			map[string]string{"itemBarcode": item, "userBarcode": patron, "servicePointId": harness.ServicePoint}, h)
	}
	// Who the patrons are: neither may be named to a kiosk without the PIN.
	names := []string{patronID, otherID, other, "Patron " + patron}
	namesNone := func(what string, r harness.Response) {
		t.Helper()
		for _, n := range names {
			if strings.Contains(string(r.Body), n) {
				t.Errorf("%s: %s names %q", what, r.Body, n)
			}
		}
	}
	unrenewed := func(what string) {
		t.Helper()
		if a, b := renewalCount(t, c, own), renewalCount(t, c, others); a != 0 || b != 0 {
			t.Fatalf("%s: renewal counts %d and %d, want nothing renewed", what, a, b)
		}
	}

	ownLoan, othersLoan := renew(schemas.RoleSelfCheck, own), renew(schemas.RoleSelfCheck, others)
	if ownLoan.Status != http.StatusUnprocessableEntity || !slices.Equal(ownLoan.ErrorCodes(), []string{schemas.CodePinRequired}) {
		t.Errorf("a kiosk's renewal of the patron's loan without the PIN: %d %s; want 422 %s", ownLoan.Status, ownLoan.Body,
			schemas.CodePinRequired)
	}
	for what, r := range map[string]harness.Response{"another patron's loan": othersLoan,
		"an item of nobody's": renew(schemas.RoleSelfCheck, "no-such-item")} {
		if r.Status != ownLoan.Status || !bytes.Equal(r.Body, ownLoan.Body) {
			t.Errorf("without the PIN, %s: %d %s; the patron's own loan: %d %s; want one answer",
				what, r.Status, r.Body, ownLoan.Status, ownLoan.Body)
		}
	}
	namesNone("the patron's loan without the PIN", ownLoan)
	namesNone("another patron's loan without the PIN", othersLoan)
	unrenewed("without the PIN")

	ownLoan = renew(schemas.RoleSelfCheck, own, schemas.HeaderPatronPin, "0000")
	othersLoan = renew(schemas.RoleSelfCheck, others, schemas.HeaderPatronPin, "0000")
	for _, r := range []harness.Response{ownLoan, othersLoan} {
		if r.Status != http.StatusUnprocessableEntity || !slices.Equal(r.ErrorCodes(), []string{schemas.CodePinInvalid}) {
			t.Errorf("a kiosk's renewal with a wrong PIN: %d %s; want 422 %s", r.Status, r.Body, schemas.CodePinInvalid)
		}
		namesNone("a wrong PIN", r)
	}
	unrenewed("with a wrong PIN")

	// The right PIN: the patron's loan renews; another's is not theirs,
	// and is still not named.
	type renewed struct {
		UserID       string `json:"userId"`
		RenewalCount int    `json:"renewalCount"`
		Borrower     struct {
			ID, Barcode, LastName string
		} `json:"borrower"`
	}
	var loan renewed
	renew(schemas.RoleSelfCheck, own, schemas.HeaderPatronPin, "7319").Want(t, http.StatusOK).Decode(t, &loan)
	if loan.RenewalCount != 1 || renewalCount(t, c, own) != 1 || loan.UserID != patronID {
		t.Errorf("a kiosk's renewal with the PIN: %+v (stored count %d), want renewed once, as a summary with the PIN naming the patron",
			loan, renewalCount(t, c, own))
	}
	r = renew(schemas.RoleSelfCheck, others, schemas.HeaderPatronPin, "7319")
	if r.Status != http.StatusUnprocessableEntity || r.ErrorCodes()[0] != schemas.CodeItemCheckedOutToDifferentUser {
		t.Errorf("another patron's loan with the patron's PIN: %d %s", r.Status, r.Body)
	}
	namesNone("another patron's loan with the patron's PIN", r)
	if renewalCount(t, c, others) != 0 {
		t.Errorf("another patron's loan renewed with the patron's PIN")
	}

	// A librarian: no PIN, FOLIO's answer naming the borrower.
	renew(schemas.RoleLibrarian, own).Want(t, http.StatusOK).Decode(t, &loan)
	if loan.RenewalCount != 2 || loan.UserID != patronID || loan.Borrower.ID != patronID || loan.Borrower.LastName != "Patron "+patron {
		t.Errorf("a librarian's renewal: %+v, want renewed and the borrower named", loan)
	}

	// PINs not required: the card alone renews, and the answer names the
	// borrower by the barcode the kiosk gave alone.
	selfCheckSettings(t, c, selfcheck.PinOff)
	r = renew(schemas.RoleSelfCheck, own).Want(t, http.StatusOK)
	loan = renewed{}
	r.Decode(t, &loan)
	if loan.RenewalCount != 3 || loan.Borrower.Barcode != patron {
		t.Errorf("a kiosk's renewal where PINs are not required: %s, want renewed", r.Body)
	}
	namesNone("a kiosk's renewal without the PIN where PINs are not required", r)
}

// TestLoanDatesAKioskCannotBend: a self-check machine's check-out dated
// years ago is refused 422 naming the permission, and makes no loan; one
// dated a minute ago is lent; a librarian (who holds
// circulation.override-loan-date.post) records the late loan as dated.
func TestLoanDatesAKioskCannotBend(t *testing.T) {
	t.Parallel()
	c := harness.NewCluster(t, harness.Options{Circulations: 1, FeatureOn: true})
	lib := c.SetupLibrary(1, 3, 0)
	patron, items := lib.Patrons[0], lib.Items[0]
	checkOut := func(role, item, loanDate string) harness.Response {
		return c.DoWith(c.Circulations[0], "POST", "/circulation/check-out-by-barcode",
			map[string]any{"itemBarcode": item, "userBarcode": patron, "servicePointId": harness.ServicePoint, "loanDate": loanDate},
			map[string]string{schemas.HeaderTenant: c.Tenant, schemas.HeaderToken: c.Token(role)})
	}
	r := checkOut(schemas.RoleSelfCheck, items[0], "2001-01-01T00:00:00.000Z")
	if r.Status != http.StatusUnprocessableEntity || r.ErrorCodes()[0] != schemas.CodeInsufficientOverridePermissions ||
		!strings.Contains(string(r.Body), schemas.PermissionOverrideLoanDate) {
		t.Errorf("a kiosk's backdated check-out: %d %s; want 422 naming %s", r.Status, r.Body, schemas.PermissionOverrideLoanDate)
	}
	if n := openLoans(t, c, patron); n != 0 {
		t.Fatalf("a refused backdated check-out made %d loans", n)
	}
	checkOut(schemas.RoleSelfCheck, items[0], schemas.FormatTime(time.Now().Add(-time.Minute))).Want(t, http.StatusCreated)
	var loan struct {
		LoanDate string `json:"loanDate"`
		DueDate  string `json:"dueDate"`
	}
	checkOut(schemas.RoleLibrarian, items[1], "2001-01-01T00:00:00.000Z").Want(t, http.StatusCreated).Decode(t, &loan)
	if loan.LoanDate != "2001-01-01T00:00:00.000Z" {
		t.Errorf("the librarian's late loan is dated %s", loan.LoanDate)
	}
	for _, role := range []string{schemas.RoleSelfCheck, schemas.RoleLibrarian} {
		if r := checkOut(role, items[2], schemas.FormatTime(time.Now().Add(time.Hour))); r.Status != http.StatusUnprocessableEntity {
			t.Errorf("a check-out dated an hour ahead by %s: %d, want 422", role, r.Status)
		}
	}
	if n := openLoans(t, c, patron); n != 2 {
		t.Errorf("open loans %d, want 2", n)
	}
}

// TestAccountsRefuseFieldsTheyDoNotDescribe: an account sent with a
// password (or any field account.json does not describe) is refused 422
// and nothing is stored; the password goes only through
// /authn/credentials.
func TestAccountsRefuseFieldsTheyDoNotDescribe(t *testing.T) {
	t.Parallel()
	c := harness.NewCluster(t, harness.Options{Circulations: 1})
	for _, body := range []map[string]any{
		{"username": "eve", "roles": []string{schemas.RoleSelfCheck}, "password": "in clear"},
		{"username": "eve", "roles": []string{schemas.RoleSelfCheck}, "personal": map[string]any{"firstName": "Eve", "pin": "1234"}},
	} {
		r := c.Do(c.Storage, "POST", "/sign-in-accounts", body)
		if r.Status != http.StatusUnprocessableEntity || len(r.ErrorCodes()) == 0 {
			t.Errorf("an account with a field it does not describe: %d %s, want 422", r.Status, r.Body)
		}
	}
	id := c.Account(t, "ada", "Ada", "Lovelace", schemas.RoleLibrarian, "correct horse battery staple")
	r := c.Do(c.Storage, "PUT", "/sign-in-accounts/"+id, map[string]any{"id": id, "username": "ada", "roles": []string{schemas.RoleLibrarian}, "password": "x"})
	if r.Status != http.StatusUnprocessableEntity {
		t.Errorf("an account replaced with a password: %d %s, want 422", r.Status, r.Body)
	}
	var n int
	if err := c.DB.QueryRow(context.Background(), fmt.Sprintf(`SELECT count(*) FROM %s.account WHERE jsonb ? 'password' OR jsonb->>'username' = 'eve'`, c.Schema)).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Errorf("%d refused accounts or passwords stored", n)
	}
	if body := string(c.Do(c.Storage, "GET", "/sign-in-accounts/"+id, nil).Want(t, http.StatusOK).Body); strings.Contains(body, "password") {
		t.Errorf("an account reads %s", body)
	}
}

// sessionIDOf is the session an access token names.
func sessionIDOf(t *testing.T, token string) string {
	t.Helper()
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		t.Fatalf("not a JWT: %q", token)
	}
	b, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		t.Fatal(err)
	}
	var c struct {
		SessionID string `json:"session_id"`
	}
	if err := json.Unmarshal(b, &c); err != nil {
		t.Fatal(err)
	}
	return c.SessionID
}

// sessionBound is how long a session ended at one service may still be
// honoured at either: what an answer is remembered (auth.SessionTTL, 2 s)
// and a second for asking again on a busy machine.
const sessionBound = 3 * time.Second

// TestSessionsEndAtBothServices: a tenant administrator's access token
// works at both services until its session ends, then is refused at both
// (401 SESSION_ENDED) within sessionBound: after logout; after its refresh
// token is used a second time (which ends the token rotated from it too);
// after the account is disabled (enabling it again revives none); after
// the account is deleted.
func TestSessionsEndAtBothServices(t *testing.T) {
	t.Parallel()
	c := harness.NewCluster(t, harness.Options{Circulations: 1})
	const password = "correct horse battery staple"
	id := c.Account(t, "root", "Rita", "Root", schemas.RoleTenantAdmin, password)
	signIn := func() (access, refresh string) {
		t.Helper()
		r := logIn(c, "root", password).Want(t, http.StatusCreated)
		return cookieOf(r, "folioAccessToken"), cookieOf(r, "folioRefreshToken")
	}
	as := func(token string) map[string]string {
		return map[string]string{schemas.HeaderTenant: c.Tenant, schemas.HeaderToken: token}
	}
	works := func(token string) {
		t.Helper()
		c.DoWith(c.Storage, "GET", "/sign-in-accounts/"+id, nil, as(token)).Want(t, http.StatusOK)
		c.DoWith(c.Circulations[0], "GET", "/circulation/check-out-locks", nil, as(token)).Want(t, http.StatusOK)
	}
	endedWithin := func(what, token string, ended time.Time) {
		t.Helper()
		sessionEndedWithin(t, c, what, token, ended, probe{c.Storage, "/sign-in-accounts/" + id}, probe{c.Circulations[0], "/circulation/check-out-locks"})
	}
	withRefresh := func(token string) map[string]string {
		return map[string]string{schemas.HeaderTenant: c.Tenant, "Cookie": "folioRefreshToken=" + token}
	}

	access, _ := signIn()
	works(access)
	c.DoWith(c.Storage, "POST", "/authn/logout", nil, as(access)).Want(t, http.StatusNoContent)
	endedWithin("logout", access, time.Now())

	access, refresh := signIn()
	again := c.DoWith(c.Storage, "POST", "/authn/refresh", nil, withRefresh(refresh)).Want(t, http.StatusCreated)
	next, nextAccess := cookieOf(again, "folioRefreshToken"), cookieOf(again, "folioAccessToken")
	if sessionIDOf(t, nextAccess) != sessionIDOf(t, access) {
		t.Error("a refresh started another session")
	}
	works(nextAccess)
	if r := c.DoWith(c.Storage, "POST", "/authn/refresh", nil, withRefresh(refresh)); r.Status != http.StatusUnauthorized {
		t.Fatalf("a refresh token used twice: %d %s", r.Status, r.Body)
	}
	reused := time.Now()
	if r := c.DoWith(c.Storage, "POST", "/authn/refresh", nil, withRefresh(next)); r.Status != http.StatusUnauthorized ||
		r.ErrorCodes()[0] != schemas.CodeSessionEnded {
		t.Errorf("the refresh token rotated from a reused one: %d %s, want 401 SESSION_ENDED", r.Status, r.Body)
	}
	endedWithin("a refresh token used twice", nextAccess, reused)

	access, _ = signIn()
	works(access)
	account := map[string]any{"id": id, "username": "root", "roles": []string{schemas.RoleTenantAdmin},
		"personal": map[string]any{"firstName": "Rita", "lastName": "Root"}}
	account["active"] = false
	c.Do(c.Storage, "PUT", "/sign-in-accounts/"+id, account).Want(t, http.StatusNoContent)
	endedWithin("the account disabled", access, time.Now())
	account["active"] = true
	c.Do(c.Storage, "PUT", "/sign-in-accounts/"+id, account).Want(t, http.StatusNoContent)
	if r := c.DoWith(c.Storage, "GET", "/sign-in-accounts/"+id, nil, as(access)); r.Status != http.StatusUnauthorized {
		t.Errorf("a token of a disabled account enabled again: %d, want 401", r.Status)
	}

	access, _ = signIn()
	works(access)
	c.Do(c.Storage, "DELETE", "/sign-in-accounts/"+id, nil).Want(t, http.StatusNoContent)
	deleted := time.Now()
	var r harness.Response
	var honoured time.Time
	harness.Poll(sessionBound+5*time.Second, 20*time.Millisecond, func() bool {
		sent := time.Now()
		r = c.DoWith(c.Circulations[0], "GET", "/circulation/check-out-locks", nil, as(access))
		if r.Status != http.StatusUnauthorized {
			honoured = sent
		}
		return r.Status == http.StatusUnauthorized
	})
	if r.Status != http.StatusUnauthorized || honoured.Sub(deleted) > sessionBound {
		t.Errorf("a token of a deleted account at circulation: %d, last honoured when asked %s after", r.Status, honoured.Sub(deleted))
	}
	if r := c.DoWith(c.Storage, "GET", "/check-out-lock-storage", nil, as(access)); r.Status != http.StatusUnauthorized {
		t.Errorf("a token of a deleted account at storage: %d, want 401", r.Status)
	}
}

// probe is a route of one service that a token is tried on.
type probe struct {
	p    *harness.Process
	path string
}

// sessionEndedWithin waits until token is refused at every probe, asking
// them all at once, and fails the test if any honoured it when asked more
// than sessionBound after ended (when the call that ended the session was
// answered): the last request answered 200 was sent no later than that. A
// slow answer on a busy machine proves nothing, so it is the sending that
// counts.
func sessionEndedWithin(t *testing.T, c *harness.Cluster, what, token string, ended time.Time, probes ...probe) {
	t.Helper()
	type outcome struct {
		r            harness.Response
		lastHonoured time.Time
		firstRefusal time.Time
	}
	as := map[string]string{schemas.HeaderTenant: c.Tenant, schemas.HeaderToken: token}
	out := atOnce(len(probes), func(i int) outcome {
		var o outcome
		harness.Poll(sessionBound+5*time.Second, 20*time.Millisecond, func() bool {
			sent := time.Now()
			o.r = c.DoWith(probes[i].p, "GET", probes[i].path, nil, as)
			if o.r.Status == http.StatusUnauthorized {
				o.firstRefusal = sent
				return true
			}
			o.lastHonoured = sent
			return false
		})
		return o
	})
	var honoured, refused time.Duration
	for i, o := range out {
		if o.r.Status != http.StatusUnauthorized || o.r.ErrorCodes()[0] != schemas.CodeSessionEnded {
			t.Fatalf("%s: the token at %s %s answers %d %s, want 401 SESSION_ENDED", what, probes[i].p.Name, probes[i].path, o.r.Status, o.r.Body)
		}
		if !o.lastHonoured.IsZero() {
			honoured = max(honoured, o.lastHonoured.Sub(ended))
		}
		refused = max(refused, o.firstRefusal.Sub(ended))
	}
	if honoured > sessionBound {
		t.Errorf("%s: the token was honoured when asked %s after, want at most %s", what, honoured, sessionBound)
	}
	t.Logf("%s: last honoured when asked %s after, refused at every service asked when asked %s after", what,
		honoured.Round(time.Millisecond), refused.Round(time.Millisecond))
}

// TestARoleChangeEndsItsSessionsAtBothServices: an access token names the
// roles its account had at sign-in, so a write that changes the roles
// (through the accounts API) ends the account's sessions. A librarian made
// a self-check machine has its old token refused the librarian's loans at
// circulation within sessionBound (401 SESSION_ENDED), and its refresh
// token at storage; signed in again, it holds the kiosk's role only. A
// tenant administrator made a self-check machine has its old token refused
// at storage's accounts and circulation's loans alike, within sessionBound.
// A change that leaves the roles as they were (the name, the roles in
// another order) ends nothing: the tokens are honoured at both services
// throughout sessionBound after it.
func TestARoleChangeEndsItsSessionsAtBothServices(t *testing.T) {
	t.Parallel()
	c := harness.NewCluster(t, harness.Options{Circulations: 1})
	const password = "correct horse battery staple"
	librarian := c.Account(t, "ada", "Ada", "Lovelace", schemas.RoleLibrarian, password)
	admin := c.Account(t, "root", "Rita", "Root", schemas.RoleTenantAdmin, password)
	put := func(id, username string, roles []string, lastName string) {
		t.Helper()
		c.Do(c.Storage, "PUT", "/sign-in-accounts/"+id, map[string]any{"id": id, "username": username, "roles": roles,
			"personal": map[string]any{"firstName": "Someone", "lastName": lastName}}).Want(t, http.StatusNoContent)
	}
	put(admin, "root", []string{schemas.RoleLibrarian, schemas.RoleTenantAdmin}, "Root")
	signIn := func(username string) (access, refresh string) {
		t.Helper()
		r := logIn(c, username, password).Want(t, http.StatusCreated)
		return cookieOf(r, "folioAccessToken"), cookieOf(r, "folioRefreshToken")
	}
	as := func(token string) map[string]string {
		return map[string]string{schemas.HeaderTenant: c.Tenant, schemas.HeaderToken: token}
	}
	loans := probe{c.Circulations[0], "/circulation/loans"}
	accounts := probe{c.Storage, "/sign-in-accounts/" + admin}
	libAccess, libRefresh := signIn("ada")
	adminAccess, _ := signIn("root")
	type use struct {
		token string
		at    probe
	}
	uses := []use{{libAccess, loans}, {adminAccess, loans}, {adminAccess, accounts}}
	for _, u := range uses {
		c.DoWith(u.at.p, "GET", u.at.path, nil, as(u.token)).Want(t, http.StatusOK)
	}

	// The same roles, in another order, under another name: every token
	// is honoured at both services for as long as an ended session could
	// still be.
	put(librarian, "ada", []string{schemas.RoleLibrarian}, "King")
	put(admin, "root", []string{schemas.RoleTenantAdmin, schemas.RoleLibrarian}, "Rooted")
	var r harness.Response
	var refused use
	if harness.Poll(sessionBound, 50*time.Millisecond, func() bool {
		for _, u := range uses {
			if r = c.DoWith(u.at.p, "GET", u.at.path, nil, as(u.token)); r.Status != http.StatusOK {
				refused = u
				return true
			}
		}
		return false
	}) {
		t.Fatalf("after a change that kept the roles, a token at %s %s: %d %s, want 200", refused.at.p.Name, refused.at.path, r.Status, r.Body)
	}

	// A librarian made a self-check machine.
	put(librarian, "ada", []string{schemas.RoleSelfCheck}, "King")
	sessionEndedWithin(t, c, "a librarian made a self-check machine", libAccess, time.Now(), loans)
	if r := c.DoWith(c.Storage, "POST", "/authn/refresh", nil, map[string]string{schemas.HeaderTenant: c.Tenant,
		"Cookie": "folioRefreshToken=" + libRefresh}); r.Status != http.StatusUnauthorized || r.ErrorCodes()[0] != schemas.CodeSessionEnded {
		t.Errorf("the refresh token of a librarian made a self-check machine: %d %s, want 401 SESSION_ENDED", r.Status, r.Body)
	}
	var reason string
	if err := c.DB.QueryRow(context.Background(), fmt.Sprintf(`SELECT end_reason FROM %s.login_session WHERE id = $1`, c.Schema),
		sessionIDOf(t, libAccess)).Scan(&reason); err != nil || reason != "roles_changed" {
		t.Errorf("the librarian's session ended for %q (%v), want roles_changed", reason, err)
	}
	kioskAccess, _ := signIn("ada")
	c.DoWith(loans.p, "GET", loans.path, nil, as(kioskAccess)).Want(t, http.StatusForbidden)
	c.DoWith(c.Circulations[0], "GET", "/circulation/item-summary?itemBarcode=none", nil, as(kioskAccess)).Want(t, http.StatusNotFound)

	// A tenant administrator made a self-check machine, refused at both
	// services.
	put(admin, "root", []string{schemas.RoleSelfCheck}, "Rooted")
	sessionEndedWithin(t, c, "a tenant administrator made a self-check machine", adminAccess, time.Now(), accounts, loans)
}

// secureCookies says whether every cookie an answer sets is Secure, and
// whether it sets any.
func secureCookies(r harness.Response) (secure, any bool) {
	secure = true
	for _, k := range (&http.Response{Header: r.Header}).Cookies() {
		any = true
		secure = secure && k.Secure
	}
	return secure, any
}

// TestCookiesAreSecureOverTLSAndBehindATrustedProxyOnly: storage serving
// HTTPS itself sets Secure cookies; a sign-in through circulation is
// Secure when a proxy circulation trusts (127.0.0.1 here) says the client
// came over https, and not when a client at another address says so;
// storage reached over plain HTTP sets none Secure, whatever the header
// says.
func TestCookiesAreSecureOverTLSAndBehindATrustedProxyOnly(t *testing.T) {
	t.Parallel()
	c := harness.NewCluster(t, harness.Options{Circulations: 1})
	const password = "correct horse battery staple"
	c.Account(t, "ada", "Ada", "Lovelace", schemas.RoleLibrarian, password)
	ca := newTestCA(t)
	certFile, keyFile, _ := ca.issue(t, "storage", true)
	tlsStorage := c.AddStorageTLS("storage-tls", ca.pool, certFile, keyFile)
	login := map[string]any{"username": "ada", "password": password}
	plain := map[string]string{schemas.HeaderTenant: c.Tenant}
	https := map[string]string{schemas.HeaderTenant: c.Tenant, schemas.HeaderForwardedProto: "https"}

	for _, tc := range []struct {
		what   string
		resp   harness.Response
		secure bool
	}{
		{"storage over HTTPS", c.DoWith(tlsStorage, "POST", "/authn/login-with-expiry", login, plain), true},
		{"storage over HTTP", c.DoWith(c.Storage, "POST", "/authn/login-with-expiry", login, plain), false},
		{"storage over HTTP, a client saying https", c.DoWith(c.Storage, "POST", "/authn/login-with-expiry", login, https), false},
		{"circulation behind its trusted proxy saying https", c.DoWith(c.Circulations[0], "POST", "/authn/login-with-expiry", login, https), true},
		{"circulation behind its trusted proxy saying nothing", c.DoWith(c.Circulations[0], "POST", "/authn/login-with-expiry", login, plain), false},
		{"circulation, an untrusted client saying https", c.DoFrom("127.0.7.1", c.Circulations[0], "POST", "/authn/login-with-expiry", login, https), false},
	} {
		secure, anyCookie := secureCookies(tc.resp)
		if tc.resp.Status != http.StatusCreated || !anyCookie || secure != tc.secure {
			t.Errorf("%s: %d, cookies %q; want 201 with cookies Secure %v", tc.what, tc.resp.Status, tc.resp.Header.Values("Set-Cookie"), tc.secure)
		}
	}
	if !strings.Contains(tlsStorage.Log(), `"tls":true`) {
		t.Error("storage over HTTPS does not say so at start-up")
	}
}

// TestRefusedRequestsAreLoggedWithTheirCaller: storage's log line of a
// request refused 403 names the caller and the module; one refused 401
// for a token that does not verify names who it claims to be, as claimed.
func TestRefusedRequestsAreLoggedWithTheirCaller(t *testing.T) {
	t.Parallel()
	c := harness.NewCluster(t, harness.Options{Circulations: 1})
	user := harness.RoleUser(schemas.RoleSelfCheck)
	r := c.DoWith(c.Storage, "GET", "/sign-in-accounts", nil, map[string]string{schemas.HeaderTenant: c.Tenant,
		schemas.HeaderToken: c.Token(schemas.RoleSelfCheck), schemas.HeaderRequestID: "refused-403"})
	if r.Status != http.StatusForbidden {
		t.Fatalf("a kiosk's token at storage's accounts: %d", r.Status)
	}
	forged := c.Token(schemas.RoleTenantAdmin)
	forged = forged[:len(forged)-4] + "AAAA"
	if r := c.DoWith(c.Storage, "GET", "/sign-in-accounts", nil, map[string]string{schemas.HeaderTenant: c.Tenant,
		schemas.HeaderToken: forged, schemas.HeaderRequestID: "refused-401"}); r.Status != http.StatusUnauthorized {
		t.Fatalf("a forged token: %d", r.Status)
	}
	var line403, line401 map[string]any
	harness.Poll(5*time.Second, 20*time.Millisecond, func() bool {
		for _, l := range strings.Split(c.Storage.Log(), "\n") {
			var m map[string]any
			if json.Unmarshal([]byte(l), &m) != nil || m["msg"] != "request" {
				continue
			}
			switch m["request_id"] {
			case "refused-403":
				line403 = m
			case "refused-401":
				line401 = m
			}
		}
		return line403 != nil && line401 != nil
	})
	if line403 == nil || line403["caller"] != user || line403["status"] != float64(http.StatusForbidden) {
		t.Errorf("the log line of a 403: %v, want caller %s", line403, user)
	}
	if line401 == nil || line401["claimed_caller"] != harness.RoleUser(schemas.RoleTenantAdmin) || line401["caller"] != nil {
		t.Errorf("the log line of a 401: %v, want claimed_caller and no caller", line401)
	}
	// A module's token refused for a permission it does not hold names
	// the module and the user it acts for.
	token, err := moduleSigner(t, harness.ModuleKey()).Token(c.Tenant, user, "check-out",
		schemas.ModulePermissionsFor(schemas.ServiceCirculation, "POST", "/circulation/check-out-by-barcode"))
	if err != nil {
		t.Fatal(err)
	}
	c.DoWith(c.Storage, "GET", "/sign-in-accounts", nil, map[string]string{schemas.HeaderTenant: c.Tenant, schemas.HeaderToken: token,
		schemas.HeaderRequestID: "refused-module"})
	var lineModule map[string]any
	harness.Poll(5*time.Second, 20*time.Millisecond, func() bool {
		for _, l := range strings.Split(c.Storage.Log(), "\n") {
			var m map[string]any
			if json.Unmarshal([]byte(l), &m) == nil && m["msg"] == "request" && m["request_id"] == "refused-module" {
				lineModule = m
			}
		}
		return lineModule != nil
	})
	if lineModule == nil || lineModule["status"] != float64(http.StatusForbidden) || lineModule["module"] != schemas.ServiceCirculation ||
		lineModule["caller"] != user {
		t.Errorf("the log line of a module's refused request: %v, want 403 naming module circulation", lineModule)
	}
}

// TestSIP2ConnectionEndsItsSession: a kiosk's login over SIP2 is a
// session of its account, ended when the connection closes.
func TestSIP2ConnectionEndsItsSession(t *testing.T) {
	t.Parallel()
	c, _, door := sip2Cluster(t, 1, 1, 1, 0, nil)
	alive := func() int {
		t.Helper()
		var n int
		err := c.DB.QueryRow(context.Background(), fmt.Sprintf(`SELECT count(*) FROM %[1]s.login_session s JOIN %[1]s.account a ON a.id = s.account_id
			WHERE a.jsonb->>'username' = 'user_id' AND s.ended_at IS NULL`, c.Schema)).Scan(&n)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	k := harness.DialSIP2(t, door.SIP2Addr)
	k.Login("user_id", "passw0rd")
	if n := alive(); n != 1 {
		t.Fatalf("%d sessions alive after a kiosk's login, want 1", n)
	}
	k.Conn.Close()
	waitFor(t, "the kiosk's session to end with its connection", func() bool { return alive() == 0 })
}
