package httpapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/checkoutlock/schemas/text"
	"github.com/checkoutlock/serverkit/auth"

	"github.com/checkoutlock/schemas/errs"
	"github.com/checkoutlock/schemas/errs/errhttp"

	"github.com/cenkalti/backoff/v4"

	"github.com/checkoutlock/circulation"
	"github.com/checkoutlock/circulation-storage/storagetest"
	"github.com/checkoutlock/circulation/internal/storageclient"
	"github.com/checkoutlock/schemas"
	"github.com/checkoutlock/schemas/locksettings"
	"github.com/checkoutlock/serverkit"
)

// The records every test starts from, in a tenant of its own on the real
// storage (storagetest): an active patron, an available item, and
// circulation rules that lend it for 3 weeks.
const (
	patronID     = "11111111-1111-4111-8111-111111111111"
	patronGroup  = "22222222-2222-4222-8222-222222222222"
	itemID       = "33333333-3333-4333-8333-333333333333"
	materialType = "44444444-4444-4444-8444-444444444444"
	loanType     = "55555555-5555-4555-8555-555555555555"
	policyID     = "66666666-6666-4666-8666-666666666666"
	servicePoint = "77777777-7777-4777-8777-777777777777"
	userBarcode  = "u-1001"
	itemBarcode  = "i-2001"
	maxBody      = 4096
)

var (
	sch          = schemas.MustLoad()
	checkOutBody = `{"itemBarcode":"` + itemBarcode + `","userBarcode":"` + userBarcode + `","servicePointId":"` + servicePoint + `"}`
)

// waits is a timer for the lock retries that fires at once and records
// each wait asked for.
type waits struct {
	mu sync.Mutex
	d  []time.Duration
}

func (w *waits) timer() backoff.Timer { return &immediate{w: w, c: make(chan time.Time, 1)} }

func (w *waits) list() []time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.d)
}

type immediate struct {
	w *waits
	c chan time.Time
}

func (t *immediate) Start(d time.Duration) {
	t.w.mu.Lock()
	t.w.d = append(t.w.d, d)
	t.w.mu.Unlock()
	t.c <- time.Now()
}
func (t *immediate) Stop()               {}
func (t *immediate) C() <-chan time.Time { return t.c }

// api is the real HTTP handler and service over the real storage, behind
// the test's boundary.
type api struct {
	url   string
	http  *http.Client
	store *storagetest.Storage
	// tenant is the test's tenant, the one its storage has initialised.
	tenant string
	waits  *waits
	logs   *logBuffer
}

// logBuffer collects log output, safe for concurrent writers.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func newAPI(t *testing.T, env circulation.LockSettings) *api {
	t.Helper()
	return newAPILogging(t, env, nil)
}

// newAPILogging is newAPI with the log handler wrapped by wrap.
func newAPILogging(t *testing.T, env circulation.LockSettings, wrap func(slog.Handler) slog.Handler) *api {
	t.Helper()
	return newAPIGuarded(t, env, wrap, auth.Guard{})
}

// newAPIGuarded is newAPILogging with the authentication guard.
func newAPIGuarded(t *testing.T, env circulation.LockSettings, wrap func(slog.Handler) slog.Handler, guard auth.Guard) *api {
	t.Helper()
	store := storagetest.Start(t, storagetest.LockDefault(env.Enabled))
	// The patron group, material type and loan type the records name
	// come first: storage refuses a record naming one it does not hold.
	store.AddPatronGroup(patronGroup, "undergrad")
	store.AddMaterialType(materialType, "book")
	store.AddServicePoint(servicePoint, "Circ Desk 1")
	store.AddLoanType(loanType, "Can circulate")
	store.AddUser(storagetest.User{ID: patronID, Barcode: userBarcode, Active: true, PatronGroup: patronGroup,
		FirstName: "Ada", LastName: "Lovelace"})
	store.AddItem(storagetest.Item{ID: itemID, Barcode: itemBarcode, Title: "The Name of the Rose", Status: "Available",
		MaterialTypeID: materialType, PermanentLoanTypeID: loanType})
	store.AddLoanPolicy(storagetest.LoanPolicy{ID: policyID, Name: "Three weeks", Loanable: true, Duration: 3, Interval: "Weeks"})
	store.SetRules(policyID)

	client := storageclient.New(store.URL, 5*time.Second, nil)
	t.Cleanup(client.Close)
	logs := &logBuffer{}
	var h slog.Handler = slog.NewJSONHandler(logs, nil)
	if wrap != nil {
		h = wrap(h)
	}
	logger := slog.New(serverkit.LogHandler(h))
	settings := circulation.NewSettings(client, circulation.SettingsConfig{Env: env, TTL: time.Minute}, logger)
	metrics := NewMetrics()
	w := &waits{}
	svc := circulation.NewService(client, settings, metrics, logger, circulation.ServiceConfig{ReleaseTimeout: time.Second,
		WaitAtStorage: true, Now: time.Now, NewTimer: w.timer})
	srv := New(Config{Config: serverkit.Config{Auth: guard, MaxBodyBytes: maxBody, MaxHeaderBytes: 16 << 10, RequestTimeout: 5 * time.Second}},
		Services{Circulation: svc, Settings: settings, Storage: client, Console: client, Ready: client.Ready}, sch, metrics, logger)
	ts := httptest.NewServer(srv)
	t.Cleanup(ts.Close)
	return &api{url: ts.URL, http: ts.Client(), store: store, tenant: store.Tenant, waits: w, logs: logs}
}

// holdLock has someone else (another check-out of the patron's) hold the
// patron's lock through every acquisition, and makes storage answer each
// at once that it is held, as FOLIO's storage, which never reads waitMs,
// does: the check-out retries on the retry intervals, which the test's
// timer fires at once.
func (a *api) holdLock() {
	a.store.Hold(patronID, time.Minute)
	a.store.AsIfUnread(storagetest.RouteAcquire, -1, "waitMs")
}

var lockOn = circulation.LockSettings{Enabled: true, LockTTL: 3 * time.Second,
	RetryIntervals: []time.Duration{500 * time.Millisecond, 500 * time.Millisecond, time.Second}}

type response struct {
	status int
	header http.Header
	body   []byte
}

// jsonHeaders are a well-formed request's headers, for the test's tenant.
func (a *api) jsonHeaders() map[string]string {
	return map[string]string{"Content-Type": "application/json", TenantHeader: a.tenant}
}

func (a *api) do(t *testing.T, method, path string, body io.Reader, headers map[string]string) response {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, a.url+path, body)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	res, err := a.http.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	data, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return response{status: res.StatusCode, header: res.Header, body: data}
}

func (a *api) send(t *testing.T, method, path, body string) response {
	t.Helper()
	return a.do(t, method, path, strings.NewReader(body), a.jsonHeaders())
}

// want checks the status and that the body is valid against schema (when
// one is named).
func (r response) want(t *testing.T, status int, schema string) response {
	t.Helper()
	if r.status != status {
		t.Fatalf("status %d, want %d; body %s", r.status, status, r.body)
	}
	if ct := r.header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		t.Errorf("Content-Type %q, want application/json", ct)
	}
	if schema == "" {
		return r
	}
	if err := sch.ValidateJSON(schema, r.body); err != nil {
		t.Errorf("body %s is not valid against %s: %v", r.body, schema, err)
	}
	return r
}

// codes returns the codes of an error envelope.
func (r response) codes(t *testing.T) []string {
	t.Helper()
	var env errhttp.Envelope
	if err := json.Unmarshal(r.body, &env); err != nil {
		t.Fatalf("error body %s: %v", r.body, err)
	}
	var out []string
	for _, e := range env.Errors {
		out = append(out, e.Code)
	}
	return out
}

func (r response) decode(t *testing.T, v any) {
	t.Helper()
	if err := json.Unmarshal(r.body, v); err != nil {
		t.Fatalf("body %s: %v", r.body, err)
	}
}

func TestCheckOutByBarcode(t *testing.T) {
	t.Parallel()
	a := newAPI(t, lockOn)
	h := a.jsonHeaders()
	h[RequestIDHeader] = "req-7/front-desk"
	res := a.do(t, "POST", "/circulation/check-out-by-barcode", strings.NewReader(checkOutBody), h).
		want(t, http.StatusCreated, "circulation-loan.json")
	var loan loanJSON
	res.decode(t, &loan)
	if loc := res.header.Get("Location"); loc != "/circulation/loans/"+loan.ID {
		t.Errorf("Location %q, want /circulation/loans/%s", loc, loan.ID)
	}
	if got := res.header.Get(RequestIDHeader); got != "req-7/front-desk" {
		t.Errorf("request id echoed as %q", got)
	}
	if loan.UserID != patronID || loan.ItemID != itemID || loan.Status.Name != "Open" || loan.Action != "checkedout" ||
		loan.LoanPolicyID != policyID || loan.CheckoutServicePointID != servicePoint || loan.Item.Status.Name != "Checked out" ||
		loan.Item.Barcode != itemBarcode || loan.Borrower.Barcode != userBarcode || loan.Borrower.LastName != "Lovelace" {
		t.Errorf("loan %+v", loan)
	}
	stored := a.store.Loans()
	if len(stored) != 1 || stored[0].ID != loan.ID || stored[0].LoanDate != loan.LoanDate || stored[0].DueDate != loan.DueDate {
		t.Errorf("stored loans %+v, want the one answered", stored)
	}
	if item, _ := a.store.Item(itemID); item.Status != "Checked out" || item.Version != 2 {
		t.Errorf("stored item %+v", item)
	}
	if locks := a.store.Granted(); len(locks) != 1 || a.store.Live(locks[0].ID) {
		t.Errorf("locks %+v, want one, released", locks)
	}
	for _, c := range a.store.Calls() {
		if c.Tenant != a.tenant || c.RequestID != "req-7/front-desk" {
			t.Errorf("storage call %s %s with tenant %q request id %q", c.Method, c.Path, c.Tenant, c.RequestID)
		}
	}

	// Location leads to the loan as storage holds it, with FOLIO's
	// summaries: the group the patron borrowed as kept by id, answered
	// by name.
	got := a.do(t, "GET", "/circulation/loans/"+loan.ID, nil, map[string]string{TenantHeader: a.tenant}).
		want(t, http.StatusOK, "circulation-loan.json")
	var l struct {
		ID, UserID string
		Item       struct{ Barcode, Title string }
		Borrower   struct{ Barcode, LastName, PatronGroup string }
		LoanPolicy struct{ Name string }
		Group      *struct{ ID, Name string } `json:"patronGroupAtCheckout"`
		GroupID    *string                    `json:"patronGroupIdAtCheckout"`
		Checkout   struct{ Name string }      `json:"checkoutServicePoint"`
	}
	got.decode(t, &l)
	if l.ID != loan.ID || l.UserID != patronID || l.Item.Barcode != itemBarcode || l.Item.Title != "The Name of the Rose" ||
		l.Borrower.Barcode != userBarcode || l.Borrower.LastName != "Lovelace" || l.Borrower.PatronGroup != patronGroup ||
		l.LoanPolicy.Name != "Three weeks" || l.Group == nil || l.Group.ID != patronGroup || l.Group.Name != "undergrad" ||
		l.GroupID != nil || l.Checkout.Name != "Circ Desk 1" {
		t.Errorf("GET Location answered %s", got.body)
	}
}

func TestCheckOutBadInput(t *testing.T) {
	t.Parallel()
	huge := `{"itemBarcode":"` + strings.Repeat("x", 2*maxBody) + `","userBarcode":"u","servicePointId":"` + servicePoint + `"}`
	// The headers of a case, for the test's api: a well-formed request's,
	// with the tenant header given v, which is no valid tenant id.
	withTenant := func(v string) func(*api) map[string]string {
		return func(a *api) map[string]string {
			h := a.jsonHeaders()
			h[TenantHeader] = v
			return h
		}
	}
	fixed := func(h map[string]string) func(*api) map[string]string {
		return func(*api) map[string]string { return h }
	}
	for _, tc := range []struct {
		name    string
		body    string
		chunked bool
		// headers are the request's headers (nil: a.jsonHeaders()).
		headers func(a *api) map[string]string
		status  int
		codes   []string
	}{
		{"malformed JSON", `{"itemBarcode":`, false, nil, 400, []string{schemas.CodeMalformedJSON}},
		{"empty body", ``, false, nil, 400, []string{schemas.CodeMalformedJSON}},
		{"trailing data", checkOutBody + `{}`, false, nil, 400, []string{schemas.CodeMalformedJSON}},
		{"not an object", `["i-2001"]`, false, nil, 422, []string{schemas.CodeValidation}},
		{"missing fields", `{"itemBarcode":"i-2001"}`, false, nil, 422, []string{schemas.CodeValidation}},
		{"a wrong-typed member beside one FOLIO's clients send", `{"id":"` + servicePoint + `","itemBarcode":"i","userBarcode":["u"],"servicePointId":"` + servicePoint + `"}`, false, nil,
			422, []string{schemas.CodeValidation}},
		{"invalid servicePointId", `{"itemBarcode":"i","userBarcode":"u","servicePointId":"desk-1"}`, false, nil,
			422, []string{schemas.CodeValidation}},
		{"wrong type", `{"itemBarcode":2001,"userBarcode":"u","servicePointId":"` + servicePoint + `"}`, false, nil,
			422, []string{schemas.CodeValidation}},
		{"empty barcode", `{"itemBarcode":"","userBarcode":"u","servicePointId":"` + servicePoint + `"}`, false, nil,
			422, []string{schemas.CodeValidation}},
		{"bad loanDate", `{"itemBarcode":"i","userBarcode":"u","servicePointId":"` + servicePoint + `","loanDate":"yesterday"}`, false, nil,
			422, []string{schemas.CodeValidation}},
		{"proxy", `{"itemBarcode":"i","userBarcode":"u","proxyUserBarcode":"p","servicePointId":"` + servicePoint + `"}`, false, nil,
			422, []string{schemas.CodeValidation}},
		// A check-out made offline: dated by its transaction, due within
		// a year of it, never in the future.
		{"offline with loanDate", `{"itemBarcode":"i","userBarcode":"u","servicePointId":"` + servicePoint + `","loanDate":"2026-01-01T10:00:00Z","offline":{"transactionDate":"2026-01-01T10:00:00Z"}}`, false, nil,
			422, []string{schemas.CodeValidation}},
		{"offline in the future", `{"itemBarcode":"i","userBarcode":"u","servicePointId":"` + servicePoint + `","offline":{"transactionDate":"2099-01-01T10:00:00Z"}}`, false, nil,
			422, []string{schemas.CodeValidation}},
		{"offline due before lent", `{"itemBarcode":"i","userBarcode":"u","servicePointId":"` + servicePoint + `","offline":{"transactionDate":"2026-01-02T10:00:00Z","dueDate":"2026-01-01T10:00:00Z"}}`, false, nil,
			422, []string{schemas.CodeValidation}},
		{"offline due past a year", `{"itemBarcode":"i","userBarcode":"u","servicePointId":"` + servicePoint + `","offline":{"transactionDate":"2026-01-02T10:00:00Z","dueDate":"2027-02-01T10:00:00Z"}}`, false, nil,
			422, []string{schemas.CodeValidation}},
		{"offline without a date", `{"itemBarcode":"i","userBarcode":"u","servicePointId":"` + servicePoint + `","offline":{}}`, false, nil,
			422, []string{schemas.CodeValidation}},
		{"no tenant", checkOutBody, false, fixed(map[string]string{"Content-Type": "application/json"}), 400,
			[]string{schemas.CodeTenantMissing}},
		{"SQL in tenant", checkOutBody, false, withTenant("diku; DROP SCHEMA public CASCADE"), 400, []string{schemas.CodeInvalidTenant}},
		{"path in tenant", checkOutBody, false, withTenant("../diku"), 400, []string{schemas.CodeInvalidTenant}},
		{"upper-case tenant", checkOutBody, false, withTenant("DIKU"), 400, []string{schemas.CodeInvalidTenant}},
		{"long tenant", checkOutBody, false, withTenant(strings.Repeat("a", 300)), 400, []string{schemas.CodeInvalidTenant}},
		{"text/plain", checkOutBody, false, func(a *api) map[string]string {
			return map[string]string{"Content-Type": "text/plain", TenantHeader: a.tenant}
		}, 415, []string{schemas.CodeUnsupportedMedia}},
		{"no Content-Type", checkOutBody, false, func(a *api) map[string]string { return map[string]string{TenantHeader: a.tenant} },
			415, []string{schemas.CodeUnsupportedMedia}},
		{"huge body", huge, false, nil, 413, []string{schemas.CodeBodyTooLarge}},
		{"huge chunked body", huge, true, nil, 413, []string{schemas.CodeBodyTooLarge}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			a := newAPI(t, lockOn)
			before := a.store.Snapshot()
			headers := a.jsonHeaders()
			if tc.headers != nil {
				headers = tc.headers(a)
			}
			var body io.Reader = strings.NewReader(tc.body)
			if tc.chunked {
				body = io.MultiReader(body) // hides the length
			}
			res := a.do(t, "POST", "/circulation/check-out-by-barcode", body, headers).want(t, tc.status, "errors.json")
			codes := slices.Compact(res.codes(t))
			if !slices.Equal(codes, tc.codes) {
				t.Errorf("codes %q, want %q; body %s", codes, tc.codes, res.body)
			}
			if calls := a.store.Calls(); len(calls) != 0 {
				t.Errorf("storage got calls: %+v", calls)
			}
			a.store.WantUnchanged(before)
		})
	}
}

func TestCheckOutFailures(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		setup  func(a *api)
		status int
		codes  []string
	}{
		{"lock held", func(a *api) { a.holdLock() }, 422, []string{schemas.CodeUnableToAcquireLock}},
		{"storage down", func(a *api) { a.store.Down() }, 503, []string{schemas.CodeStorageUnavailable}},
		{"refusals", func(a *api) {
			a.store.AddLoan(storagetest.Loan{ID: "99999999-9999-4999-8999-999999999999", UserID: patronID, ItemID: itemID,
				Status: "Open", Action: "checkedout", LoanDate: "2025-02-01T10:00:00.000Z"})
		}, 422, []string{schemas.CodeItemHasOpenLoan}},
		// Every loan creation is refused before storage writes anything.
		{"loan creation fails", func(a *api) {
			a.store.Refuse(storagetest.RoutePostLoan, -1, http.StatusServiceUnavailable, schemas.CodeDatabaseUnavailable)
		}, 503, []string{schemas.CodeStorageUnavailable}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			a := newAPI(t, lockOn)
			tc.setup(a)
			res := a.send(t, "POST", "/circulation/check-out-by-barcode", checkOutBody).want(t, tc.status, "errors.json")
			if codes := res.codes(t); !slices.Equal(codes, tc.codes) {
				t.Errorf("codes %q, want %q", codes, tc.codes)
			}
			if item, _ := a.store.Item(itemID); item.Status != "Available" {
				t.Errorf("item left %q", item.Status)
			}
		})
	}
}

// TestACheckOutNotAnsweredIsNotAnsweredByItsSendAgain: a check-out whose
// write storage did not answer, sent again with its id and refused then
// (here for barcodes nobody has), is answered that its outcome is not
// known (503, naming its write id), never the later send's refusal (here
// for two rules: the item declared lost, another patron's request first):
// the first send may still have written the loan.
func TestACheckOutNotAnsweredIsNotAnsweredByItsSendAgain(t *testing.T) {
	t.Parallel()
	a := newAPI(t, lockOn)
	// The settings known: the check-out goes to storage in one call.
	a.do(t, "GET", "/circulation/settings/check-out-lock", nil, map[string]string{TenantHeader: a.tenant}).want(t, http.StatusOK, "")
	other := "77777777-7777-4777-8777-777777777777"
	a.store.AddUser(storagetest.User{ID: other, Barcode: "other", Active: true, PatronGroup: patronGroup, LastName: "Other"})
	a.store.AddRequest(storagetest.Request{ID: "66666666-6666-4666-8666-666666666666", ItemID: itemID, RequesterID: other,
		Status: "Open - Not yet filled", Position: 1})
	a.store.SetItemStatus(itemID, schemas.ItemDeclaredLost)
	a.store.Refuse(storagetest.RouteCheckOut, 1, http.StatusServiceUnavailable, schemas.CodeDatabaseUnavailable)
	before := a.store.Snapshot()
	res := a.send(t, "POST", "/circulation/check-out-by-barcode", checkOutBody).want(t, http.StatusServiceUnavailable, "errors.json")
	var env errhttp.Envelope
	res.decode(t, &env)
	if len(env.Errors) != 1 || env.Errors[0].Code != schemas.CodeStorageUnavailable || !slices.ContainsFunc(env.Errors[0].Parameters,
		func(p errs.Parameter) bool { return p.Key == "writeId" && p.Value != "" }) {
		t.Errorf("body %s, want one %s naming its writeId", res.body, schemas.CodeStorageUnavailable)
	}
	if n := a.store.Count(storagetest.RouteCheckOut); n != 2 {
		t.Errorf("the one call sent %d times, want 2 (sent again after the 503)", n)
	}
	a.store.WantUnchanged(before)
}

func TestCheckOutLockHeldWaitsTheIntervals(t *testing.T) {
	t.Parallel()
	a := newAPI(t, lockOn)
	a.holdLock()
	res := a.send(t, "POST", "/circulation/check-out-by-barcode", checkOutBody).want(t, 422, "errors.json")
	var env errhttp.Envelope
	res.decode(t, &env)
	// The refusal names the patron, the attempts, and the instance that
	// held the lock (holdLock's, "another").
	want := errhttp.Envelope{Errors: []errhttp.Entry{{Message: "unable to acquire lock", Code: schemas.CodeUnableToAcquireLock,
		Parameters: []errs.Parameter{{Key: "userBarcode", Value: userBarcode}, {Key: "attempts", Value: "4"},
			{Key: "holderInstance", Value: "another"}}}}}
	if got, _ := json.Marshal(env); string(got) != mustJSON(t, want) {
		t.Errorf("body %s, want %s", got, mustJSON(t, want))
	}
	if got := a.waits.list(); !slices.Equal(got, lockOn.RetryIntervals) {
		t.Errorf("waits %v, want %v", got, lockOn.RetryIntervals)
	}
	if n := len(a.store.Acquisitions()); n != 4 {
		t.Errorf("%d acquire attempts, want 4", n)
	}
	// The four attempts only: writes that acquire their lock, refused it.
	for _, w := range a.store.Writes() {
		if !w.Acquires() || w.StorageStatus != http.StatusServiceUnavailable {
			t.Errorf("write %+v, want only acquisitions refused a held lock", w)
		}
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestSettingsRoundTrip(t *testing.T) {
	t.Parallel()
	a := newAPI(t, lockOn)
	var got settingsJSON
	a.do(t, "GET", "/circulation/settings/check-out-lock", nil, map[string]string{TenantHeader: a.tenant}).
		want(t, http.StatusOK, "checkout-lock-settings-effective.json").decode(t, &got)
	// What each field comes back to when the stored entry leaves it out.
	if e := got.Environment; !e.Enabled || e.LockTTL != 3000 || !slices.Equal(e.RetryIntervalsMs, []int{500, 500, 1000}) {
		t.Errorf("the environment's values %+v", e)
	}
	if got.LockTTL != 3000 || !got.Enabled || !slices.Equal(got.RetryIntervalsMs, []int{500, 500, 1000}) || got.NoOfRetryAttempts != 3 ||
		got.Sources.Enabled != circulation.FromEnvironment || got.Sources.LockTTL != circulation.FromEnvironment ||
		got.Sources.RetryIntervals != circulation.FromEnvironment {
		t.Errorf("environment's settings %+v", got)
	}

	var put settingsJSON
	a.send(t, "PUT", "/circulation/settings/check-out-lock", `{"checkOutLockFeatureEnabled":false,"lockTtl":5000,"retryIntervalsMs":[100,200]}`).
		want(t, http.StatusOK, "checkout-lock-settings-effective.json").decode(t, &put)
	if put.Enabled || put.LockTTL != 5000 || !slices.Equal(put.RetryIntervalsMs, []int{100, 200}) || put.NoOfRetryAttempts != 2 ||
		put.Sources.Enabled != circulation.FromSettings || put.Sources.LockTTL != circulation.FromSettings ||
		put.Sources.RetryIntervals != circulation.FromSettings || put.SettingsError != "" {
		t.Errorf("PUT answered %+v", put)
	}
	res := a.do(t, "GET", "/circulation/settings/check-out-lock", nil, map[string]string{TenantHeader: a.tenant}).
		want(t, http.StatusOK, "checkout-lock-settings-effective.json")
	if string(res.body) != mustJSON(t, put)+"\n" {
		t.Errorf("GET after PUT %s, want %s", res.body, mustJSON(t, put))
	}
	raw, ok := a.store.Setting(locksettings.Scope, locksettings.Key)
	if !ok || string(raw) != `"{\"checkOutLockFeatureEnabled\":false,\"lockTtl\":5000,\"retryIntervalsMs\":[100,200]}"` {
		t.Errorf("stored %s (found %v)", raw, ok)
	}

	// FOLIO's form: n retries of one interval.
	a.send(t, "PUT", "/circulation/settings/check-out-lock", `{"noOfRetryAttempts":2,"retryInterval":250}`).
		want(t, http.StatusOK, "checkout-lock-settings-effective.json").decode(t, &put)
	if !put.Enabled || put.Sources.Enabled != circulation.FromEnvironment || !slices.Equal(put.RetryIntervalsMs, []int{250, 250}) ||
		put.NoOfRetryAttempts != 2 || put.Sources.RetryIntervals != circulation.FromSettings || put.LockTTL != 3000 ||
		put.Sources.LockTTL != circulation.FromEnvironment {
		t.Errorf("PUT of FOLIO's form answered %+v", put)
	}
	if n := a.store.Count(storagetest.RoutePutSetting); n != 1 {
		t.Errorf("%d settings replaced, want 1", n)
	}
}

func TestSettingsInvalidPut(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, body string }{
		{"lockTtl 0", `{"lockTtl":0}`},
		{"negative retry interval", `{"retryIntervalsMs":[500,-1]}`},
		{"unknown field", `{"checkOutLockFeatureEnabled":true,"lockTTL":3000}`},
		{"lockTtl too long", `{"lockTtl":600001}`},
		{"too many retries", `{"noOfRetryAttempts":101}`},
		{"string", `{"checkOutLockFeatureEnabled":"yes"}`},
		{"fraction", `{"lockTtl":1.5}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			a := newAPI(t, lockOn)
			res := a.send(t, "PUT", "/circulation/settings/check-out-lock", tc.body).want(t, 422, "errors.json")
			if codes := slices.Compact(res.codes(t)); !slices.Equal(codes, []string{schemas.CodeValidation}) {
				t.Errorf("codes %q, want VALIDATION_FAILED", codes)
			}
			if calls := a.store.Calls(); len(calls) != 0 {
				t.Errorf("storage got calls: %+v", calls)
			}
		})
	}
}

func TestMetricsAfterACheckOut(t *testing.T) {
	t.Parallel()
	a := newAPI(t, lockOn)
	metrics := func() string {
		return string(a.do(t, "GET", "/metrics", nil, nil).body)
	}
	for _, line := range []string{`checkout_lock_releases_total{result="released"} 0`, `checkout_lock_releases_total{result="failed"} 0`} {
		if m := metrics(); !strings.Contains(m, line+"\n") {
			t.Errorf("metrics before a check-out lack %q", line)
		}
	}
	a.send(t, "POST", "/circulation/check-out-by-barcode", checkOutBody).want(t, http.StatusCreated, "circulation-loan.json")
	// A request's latency is recorded just after its answer is sent.
	var m string
	eventually(t, "the check-out's latency recorded", func() bool {
		m = metrics()
		return strings.Contains(m, `http_request_duration_seconds_count{method="POST",route="/circulation/check-out-by-barcode",status="201"} 1`+"\n")
	})
	for _, line := range []string{
		`checkout_lock_releases_total{result="released"} 1`,
		`checkout_lock_releases_total{result="failed"} 0`,
		`checkout_lock_releases_total{result="expired"} 0`,
		`checkout_lock_attempts_count 1`,
		`checkout_lock_attempts_sum 1`,
		`checkout_lock_acquire_failures_total 0`,
		`checkout_lock_wait_seconds_count{result="acquired"} 1`,
		`checkout_duration_seconds_count{outcome="checked_out"} 1`,
		`http_request_duration_seconds_count{method="POST",route="/circulation/check-out-by-barcode",status="201"} 1`,
	} {
		if !strings.Contains(m, line+"\n") {
			t.Errorf("metrics lack %q", line)
		}
	}
}

func TestReady(t *testing.T) {
	t.Parallel()
	a := newAPI(t, lockOn)
	if res := a.do(t, "GET", "/admin/ready", nil, nil).want(t, http.StatusOK, ""); string(res.body) != `{"status":"UP"}`+"\n" {
		t.Errorf("ready answered %s", res.body)
	}
	a.store.Down()
	res := a.do(t, "GET", "/admin/ready", nil, nil).want(t, http.StatusServiceUnavailable, "errors.json")
	if codes := res.codes(t); !slices.Equal(codes, []string{schemas.CodeStorageUnavailable}) {
		t.Errorf("codes %q", codes)
	}
}

// TestOneInfoLinePerRequest: every request is logged once at info with its
// method, route, status, duration, tenant and request id; a check-out adds
// the patron's, item's and loan's ids, a check-in the item's and loan's,
// never a name.
func TestOneInfoLinePerRequest(t *testing.T) {
	t.Parallel()
	a := newAPI(t, lockOn)
	a.send(t, "POST", "/circulation/check-out-by-barcode",
		`{"itemBarcode":"`+itemBarcode+`","userBarcode":"`+userBarcode+`","servicePointId":"`+servicePoint+`"}`).
		want(t, http.StatusCreated, "circulation-loan.json")
	a.send(t, "POST", "/circulation/check-in-by-barcode",
		`{"itemBarcode":"`+itemBarcode+`","servicePointId":"`+servicePoint+`","checkInDate":"`+time.Now().UTC().Format(time.RFC3339)+`"}`).
		want(t, http.StatusOK, "")
	a.do(t, "GET", "/circulation/loans/not-a-uuid", nil, map[string]string{TenantHeader: a.tenant})
	// A request is logged just after its answer is sent.
	var lines []map[string]any
	eventually(t, "both requests logged", func() bool {
		lines = nil
		for _, line := range strings.Split(strings.TrimSpace(a.logs.String()), "\n") {
			var m map[string]any
			if json.Unmarshal([]byte(line), &m) == nil && m["msg"] == "request" {
				lines = append(lines, m)
			}
		}
		return len(lines) >= 3
	})
	if len(lines) != 3 {
		t.Fatalf("%d request lines, want 3:\n%s", len(lines), a.logs)
	}
	co, ci, bad := lines[0], lines[1], lines[2]
	if co["level"] != "INFO" || co["method"] != "POST" || co["route"] != "/circulation/check-out-by-barcode" || co["status"] != 201.0 ||
		co["tenant"] != a.tenant || co["request_id"] == nil || co["duration"] == nil ||
		co["user_id"] != patronID || co["item_id"] != itemID || co["loan_id"] == nil {
		t.Errorf("check-out line %v", co)
	}
	if ci["route"] != "/circulation/check-in-by-barcode" || ci["status"] != 200.0 ||
		ci["item_id"] != itemID || ci["loan_id"] != co["loan_id"] || ci["user_id"] != nil {
		t.Errorf("check-in line %v", ci)
	}
	if bad["status"] != 400.0 || bad["route"] != "/circulation/loans/:id" || bad["user_id"] != nil {
		t.Errorf("refused request's line %v", bad)
	}
	if strings.Contains(a.logs.String(), "Lovelace") || strings.Contains(a.logs.String(), "Ada") {
		t.Errorf("the log names the patron:\n%s", a.logs)
	}
}

// eventually polls cond until it holds, failing t after 10 s: for what a
// request does just after its answer.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 10 s", what)
		}
		time.Sleep(time.Millisecond) // polling what this test cannot be told of, with a deadline
	}
}

// TestIgnoredMembersAreLoggedWithinBounds: a check-out body (a FOLIO route,
// which ignores members its schema does not name) with thirty unknown
// members, each named by a hundred bytes, is taken; its request's log
// line names at most ten of them, each cut to text.MaxEchoed bytes and an
// ellipsis, and counts all thirty.
func TestIgnoredMembersAreLoggedWithinBounds(t *testing.T) {
	t.Parallel()
	a := newAPI(t, lockOn)
	var extra strings.Builder
	for i := range 30 {
		fmt.Fprintf(&extra, `"unknown%02d%s":1,`, i, strings.Repeat("m", 100))
	}
	a.send(t, "POST", "/circulation/check-out-by-barcode",
		`{`+extra.String()+`"itemBarcode":"`+itemBarcode+`","userBarcode":"`+userBarcode+`","servicePointId":"`+servicePoint+`"}`).
		want(t, http.StatusCreated, "circulation-loan.json")
	var line map[string]any
	eventually(t, "the check-out logged", func() bool {
		for _, l := range strings.Split(strings.TrimSpace(a.logs.String()), "\n") {
			var m map[string]any
			if json.Unmarshal([]byte(l), &m) == nil && m["msg"] == "request" && m["route"] == "/circulation/check-out-by-barcode" {
				line = m
				return true
			}
		}
		return false
	})
	names, _ := line["ignored_members"].([]any)
	if len(names) != 10 || line["ignored_count"] != 30.0 {
		t.Fatalf("the log line names %d ignored members and counts %v, want 10 and 30: %v", len(names), line["ignored_count"], line)
	}
	for _, n := range names {
		if s, _ := n.(string); len(s) != text.MaxEchoed+len("…") || !strings.HasSuffix(s, "…") {
			t.Errorf("an ignored member logged as %q, want its first %d bytes and an ellipsis", s, text.MaxEchoed)
		}
	}
}

// TestSelfBehindAGatewayIsTheCallersOwn: behind a gateway, GET
// /bl-users/_self answers the user the gateway names and the permissions
// it granted of those the route desires, and each route allowed as they
// say: not every permission.
func TestSelfBehindAGatewayIsTheCallersOwn(t *testing.T) {
	t.Parallel()
	a := newAPIGuarded(t, lockOn, nil, auth.Guard{Mode: auth.Gateway})
	granted := `["circulation.check-out-by-barcode.post","circulation.patron-summary.get"]`
	res := a.do(t, "GET", "/bl-users/_self", nil, map[string]string{TenantHeader: a.tenant, schemas.HeaderUserID: patronID,
		schemas.HeaderPermissions: granted, schemas.HeaderToken: "gateway-token"}).want(t, http.StatusOK, "")
	var self struct {
		User        struct{ ID string }
		Permissions struct{ Permissions []string }
		Routes      map[string]struct{ Allowed bool }
	}
	if err := json.Unmarshal(res.body, &self); err != nil {
		t.Fatal(err)
	}
	if self.User.ID != patronID || !slices.Equal(self.Permissions.Permissions, []string{"circulation.check-out-by-barcode.post", "circulation.patron-summary.get"}) {
		t.Fatalf("_self behind a gateway: %s, want the user named and the two permissions granted", res.body)
	}
	if !self.Routes["POST /circulation/check-out-by-barcode"].Allowed || self.Routes["POST /circulation/renew-by-barcode"].Allowed ||
		self.Routes["PUT /circulation/settings/check-out-lock"].Allowed {
		t.Fatalf("_self's routes behind a gateway: %s, want check-out allowed, renewal and settings not", res.body)
	}
}
