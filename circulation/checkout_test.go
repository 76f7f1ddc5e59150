package circulation_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/checkoutlock/schemas"
	"github.com/checkoutlock/schemas/errs"

	"github.com/cenkalti/backoff/v4"
	"github.com/google/uuid"

	"github.com/checkoutlock/circulation"
	"github.com/checkoutlock/circulation-storage/storagetest"
	"github.com/checkoutlock/circulation/internal/storageclient"
	"github.com/checkoutlock/schemas/locksettings"
)

// The records every test starts from, in a tenant of its own on the real
// storage (storagetest): an active patron, an available item, and
// circulation rules that lend it for 3 weeks with an item limit of 3.
const (
	requestID    = "req-42/circulation"
	patronID     = "11111111-1111-4111-8111-111111111111"
	patronGroup  = "22222222-2222-4222-8222-222222222222"
	itemID       = "33333333-3333-4333-8333-333333333333"
	materialType = "44444444-4444-4444-8444-444444444444"
	loanType     = "55555555-5555-4555-8555-555555555555"
	policyID     = "66666666-6666-4666-8666-666666666666"
	servicePoint = "77777777-7777-4777-8777-777777777777"
	otherPatron  = "88888888-8888-4888-8888-888888888888"
	otherLoan    = "99999999-9999-4999-8999-999999999999"
	userBarcode  = "u-1001"
	itemBarcode  = "i-2001"
	itemTitle    = "The Name of the Rose"
	itemLimit    = 3
)

// start is the fake clock's time at the start of every test.
var start = time.Date(2025, 3, 1, 10, 0, 0, 0, time.UTC)

func ms(v ...int) []time.Duration {
	out := make([]time.Duration, len(v))
	for i, n := range v {
		out[i] = time.Duration(n) * time.Millisecond
	}
	return out
}

var (
	lockOn  = circulation.LockSettings{Enabled: true, LockTTL: 3 * time.Second, RetryIntervals: ms(500, 500, 1000)}
	lockOff = circulation.LockSettings{Enabled: false, LockTTL: 3 * time.Second, RetryIntervals: ms(500, 500, 1000)}
)

// clock is the service's clock: its timers fire at once, recording each
// wait asked for and moving the time on by it. With cancel set, the first
// wait cancels the request instead and never fires.
type clock struct {
	mu     sync.Mutex
	now    time.Time
	waits  []time.Duration
	cancel context.CancelFunc
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the time on, as if d had passed.
func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

func (c *clock) Waits() []time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.waits)
}

func (c *clock) NewTimer() backoff.Timer { return &timer{clock: c, c: make(chan time.Time, 1)} }

type timer struct {
	clock *clock
	c     chan time.Time
}

func (t *timer) Start(d time.Duration) {
	c := t.clock
	c.mu.Lock()
	c.waits = append(c.waits, d)
	c.now = c.now.Add(d)
	now, cancel := c.now, c.cancel
	c.mu.Unlock()
	if cancel != nil {
		cancel()
		return
	}
	t.c <- now
}

func (t *timer) Stop()               {}
func (t *timer) C() <-chan time.Time { return t.c }

// cancelOnWait makes the next wait call cancel instead of firing.
func (c *clock) cancelOnWait(cancel context.CancelFunc) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.cancel = cancel
}

// observer records what the service reports.
type observer struct {
	mu          sync.Mutex
	onAcquired  func() // called after recording an acquisition
	acquired    []attempt
	notAcquired []attempt
	releases    []error
}

type attempt struct {
	attempts int
	wait     time.Duration
}

func (o *observer) LockAcquired(n int, wait time.Duration) {
	o.mu.Lock()
	o.acquired = append(o.acquired, attempt{n, wait})
	hook := o.onAcquired
	o.mu.Unlock()
	if hook != nil {
		hook()
	}
}

func (o *observer) LockNotAcquired(n int, wait time.Duration) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.notAcquired = append(o.notAcquired, attempt{n, wait})
}

func (o *observer) LockReleased(err error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.releases = append(o.releases, err)
}

// stack is the real service and storage client over the real storage,
// behind the test's boundary.
type stack struct {
	store    *storagetest.Storage
	storage  *storageclient.Client
	settings *circulation.Settings
	svc      *circulation.Service
	clock    *clock
	obs      *observer
}

// newStack builds the stack over a storage holding the standard records.
func newStack(t *testing.T, env circulation.LockSettings, opts ...stackOption) *stack {
	t.Helper()
	var cfg stackConfig
	for _, o := range opts {
		o(&cfg, &clock{})
	}
	store := storagetest.Start(t, append([]string{storagetest.LockDefault(env.Enabled)}, cfg.storageEnv...)...)
	seed(store)
	return stackOver(t, store, env, opts...)
}

// stackConfig is how a stack's settings and service are built, and the
// environment its storage runs with.
type stackConfig struct {
	settings   circulation.SettingsConfig
	service    circulation.ServiceConfig
	storageEnv []string
}

// stackOption changes how a stack's settings and service are built; c is
// the stack's clock.
type stackOption func(cfg *stackConfig, c *clock)

// withBounds builds the settings with bounds b.
func withBounds(b locksettings.Bounds) stackOption {
	return func(cfg *stackConfig, _ *clock) { cfg.settings.Bounds = b }
}

// withMaxTenants builds the settings caching at most n tenants.
func withMaxTenants(n int) stackOption {
	return func(cfg *stackConfig, _ *clock) { cfg.settings.MaxTenants = n }
}

// withSettingsClock ages the settings cache on the stack's clock.
func withSettingsClock() stackOption {
	return func(cfg *stackConfig, c *clock) { cfg.settings.Now = c.Now }
}

// withInstance names the service's instance in the locks it takes.
func withInstance(name string) stackOption {
	return func(cfg *stackConfig, _ *clock) { cfg.service.Instance = name }
}

// withoutWaitAtStorage never asks storage to wait for a held lock, as
// against FOLIO's storage, which cannot: a held lock is retried on the
// retry intervals.
func withoutWaitAtStorage() stackOption {
	return func(cfg *stackConfig, _ *clock) { cfg.service.WaitAtStorage = false }
}

// withSettleTimeout sends a write whose answer was lost again for up to
// d, rather than the stack's half a second: for a test whose resent
// write must be answered, however loaded the machine.
func withSettleTimeout(d time.Duration) stackOption {
	return func(cfg *stackConfig, _ *clock) { cfg.service.SettleTimeout = d }
}

// withStorageEnv runs the stack's storage with env ("NAME=value").
func withStorageEnv(env ...string) stackOption {
	return func(cfg *stackConfig, _ *clock) { cfg.storageEnv = append(cfg.storageEnv, env...) }
}

// tenants is each test's tenant, for okapi.
var tenants sync.Map // testing.TB → string

func stackOver(t *testing.T, store *storagetest.Storage, env circulation.LockSettings, opts ...stackOption) *stack {
	t.Helper()
	tenants.Store(t, store.Tenant)
	t.Cleanup(func() { tenants.Delete(t) })
	client := storageclient.New(store.URL, 5*time.Second, nil)
	t.Cleanup(client.Close)
	logger := slog.New(slog.DiscardHandler)
	s := &stack{store: store, storage: client, clock: &clock{now: start}, obs: &observer{}}
	cfg := stackConfig{
		settings: circulation.SettingsConfig{Env: env, TTL: time.Minute},
		// A write whose answer was lost is sent again for half a second:
		// long enough for a few sends, short enough for a test.
		service: circulation.ServiceConfig{ReleaseTimeout: time.Second, WaitAtStorage: true,
			Now: s.clock.Now, NewTimer: s.clock.NewTimer, SettleTimeout: 500 * time.Millisecond},
	}
	for _, o := range opts {
		o(&cfg, s.clock)
	}
	s.settings = circulation.NewSettings(client, cfg.settings, logger)
	s.svc = circulation.NewService(client, s.settings, s.obs, logger, cfg.service)
	return s
}

// materialTypeName is the seeded material type's name, as validation
// reports it with the item.
const materialTypeName = "book"

func seed(f *storagetest.Storage) {
	seedTypes(f)
	f.AddUser(storagetest.User{ID: patronID, Barcode: userBarcode, Active: true, PatronGroup: patronGroup,
		FirstName: "Ada", LastName: "Lovelace"})
	f.AddUser(storagetest.User{ID: otherPatron, Barcode: "u-1002", Active: true, PatronGroup: patronGroup,
		FirstName: "Charles", LastName: "Babbage"})
	f.AddItem(storagetest.Item{ID: itemID, Barcode: itemBarcode, Title: itemTitle, Status: schemas.ItemAvailable,
		MaterialTypeID: materialType, PermanentLoanTypeID: loanType})
	f.AddLoanPolicy(storagetest.LoanPolicy{ID: policyID, Name: "Three weeks", Loanable: true, Duration: 3, Interval: "Weeks",
		ItemLimit: itemLimit})
	f.SetRules(policyID)
}

// seedTypes stores the patron group, material type and loan type the
// records name.
func seedTypes(f *storagetest.Storage) {
	f.AddPatronGroup(patronGroup, "undergrad")
	f.AddMaterialType(materialType, materialTypeName)
	f.AddLoanType(loanType, "Can circulate")
	f.AddServicePoint(servicePoint, "Circ Desk 1")
}

// reference is a loan policy that lends nothing, for the tests that need
// one.
const reference = "66666666-6666-4666-8666-00000000000b"

// holdLock has someone else (another check-out of the patron's) hold the
// patron's lock through the next n acquisitions, then let it go before the
// one after; n < 0 holds it through every one.
func holdLock(s *stack, n int) {
	lock := s.store.Hold(patronID, time.Minute)
	if n < 0 {
		return
	}
	var mu sync.Mutex
	seen := 0
	s.store.Before(storagetest.RouteAcquire, n+1, func(storagetest.Call) {
		mu.Lock()
		seen++
		last := seen == n+1
		mu.Unlock()
		if last {
			s.store.Release(lock)
		}
	})
}

// setRule has the circulation rules choose the seeded policy by a rule
// naming the seeded patron group, material type and loan type as said
// (none: the fallback), the item limit counted in that scope.
func setRule(s *stack, group, material, byLoanType bool) {
	r := storagetest.Rule{LoanPolicyID: policyID}
	if group {
		r.PatronGroupID = patronGroup
	}
	if material {
		r.MaterialTypeID = materialType
	}
	if byLoanType {
		r.LoanTypeID = loanType
	}
	if !group && !material && !byLoanType {
		s.store.SetRules(policyID)
		return
	}
	const otherwise = "66666666-6666-4666-8666-00000000000f"
	s.store.AddLoanPolicy(storagetest.LoanPolicy{ID: otherwise, Name: "Otherwise", Loanable: true, Duration: 1, Interval: "Weeks"})
	s.store.SetRules(otherwise, r)
}

// lendOthers gives the patron n more open loans, of other items of the
// seeded material and loan type (counted by every item limit the seeded
// policy sets).
func lendOthers(s *stack, n int) {
	for range n {
		id := uuid.NewString()
		s.store.AddItem(storagetest.Item{ID: id, Barcode: "other-" + id[:8], Title: "Other", Status: schemas.ItemCheckedOut,
			MaterialTypeID: materialType, PermanentLoanTypeID: loanType})
		s.store.AddLoan(storagetest.Loan{ID: uuid.NewString(), UserID: patronID, ItemID: id, Status: "Open", Action: "checkedout",
			LoanDate: "2025-02-01T10:00:00.000Z"})
	}
}

// lendOthersBeforeTheWrite gives the patron n more open loans between
// validation and the write: other check-outs of theirs, meanwhile.
func lendOthersBeforeTheWrite(s *stack, n int) {
	s.store.Before(storagetest.RoutePostLoan, 1, func(storagetest.Call) { lendOthers(s, n) })
}

// okapi is the context of a request of the test's tenant.
func okapi(t *testing.T) context.Context {
	return circulation.WithOkapi(t.Context(), circulation.Okapi{Tenant: tenantOf(t), RequestID: requestID})
}

// tenantOf is the test's tenant.
func tenantOf(t testing.TB) string {
	v, ok := tenants.Load(t)
	if !ok {
		t.Fatal("the test has no stack, so no tenant")
	}
	return v.(string)
}

func request() circulation.CheckOutRequest {
	return circulation.CheckOutRequest{ItemBarcode: itemBarcode, UserBarcode: userBarcode, ServicePointID: servicePoint}
}

func (s *stack) checkOut(t *testing.T) (circulation.CheckOutResult, error) {
	t.Helper()
	return s.svc.CheckOut(okapi(t), request())
}

// wantCount checks how many calls route got; RouteAcquire counts every
// acquisition, a write's that acquires its lock as one.
func wantCount(t *testing.T, f *storagetest.Storage, route string, want int) {
	t.Helper()
	got := f.Count(route)
	if route == storagetest.RouteAcquire {
		got = len(f.Acquisitions())
	}
	if got != want {
		t.Errorf("%s called %d times, want %d", route, got, want)
	}
}

// wantNoWrites checks that neither the item nor any loan was written: no
// call wrote them (a check-out's write that acquired no lock, or was
// refused, wrote nothing).
func wantNoWrites(t *testing.T, f *storagetest.Storage) {
	t.Helper()
	wantCount(t, f, storagetest.RoutePutItem, 0)
	wantCount(t, f, storagetest.RoutePutLoan, 0)
	for _, c := range f.Calls() {
		if (c.Route == storagetest.RoutePostLoan || c.Route == storagetest.RouteCheckOut) && c.StorageStatus == http.StatusCreated {
			t.Errorf("a loan was written: %s", c.StorageAnswer)
		}
	}
}

// wantOneLoanAnswered checks out on s (what, for the failure's words) and
// wants it done: one loan stored, the one answered, and the item checked
// out once. It answers the check-out's result; which calls wrote it is
// each test's to say.
func wantOneLoanAnswered(t *testing.T, s *stack, what string) circulation.CheckOutResult {
	t.Helper()
	res, err := s.checkOut(t)
	if err != nil {
		t.Fatalf("%s: %v, want the loan its write id wrote", what, err)
	}
	if loans := s.store.Loans(); len(loans) != 1 || loans[0].ID != res.Loan.ID {
		t.Errorf("loans %+v, want the one answered, %s", loans, res.Loan.ID)
	}
	wantItem(t, s.store, schemas.ItemCheckedOut, 2)
	return res
}

func wantItem(t *testing.T, f *storagetest.Storage, status string, version int) {
	t.Helper()
	item, ok := f.Item(itemID)
	if !ok || item.Status != status || item.Version != version {
		t.Errorf("stored item: status %q, _version %d (found %v); want %q, %d", item.Status, item.Version, ok, status, version)
	}
}

func wantWaits(t *testing.T, c *clock, want []time.Duration) {
	t.Helper()
	if got := c.Waits(); !slices.Equal(got, want) {
		t.Errorf("waits %v, want %v", got, want)
	}
}

// wantError checks err is an *circulation.Error of the kind and code.
func wantError(t *testing.T, err error, kind errs.Kind, code string) *errs.Error {
	t.Helper()
	e, ok := errs.As(err)
	if !ok || e.Kind != kind || e.Code != code {
		t.Fatalf("error %v (%T), want kind %d code %s", err, err, kind, code)
	}
	return e
}

// refusals returns the code, message and parameters of every refusal in err.
func refusals(t *testing.T, err error) []string {
	t.Helper()
	var r *errs.Refusal
	if !errors.As(err, &r) {
		t.Fatalf("error %v (%T), want a *errs.Refusal", err, err)
	}
	var out []string
	for _, e := range r.Errors {
		if e.Kind != errs.KindInvalid {
			t.Errorf("refusal %s has kind %d, want errs.KindInvalid", e.Code, e.Kind)
		}
		s := e.Code + ": " + e.Message
		for _, p := range e.Parameters {
			s += " [" + p.Key + "=" + p.Value + "]"
		}
		out = append(out, s)
	}
	return out
}

func wantStrings(t *testing.T, what string, got, want []string) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Errorf("%s:\n got %q\nwant %q", what, got, want)
	}
}

// routes lists the routes called, in order.
func routes(f *storagetest.Storage) []string { return f.Routes() }

func TestCheckOutWithFeatureOffMakesNoLockCalls(t *testing.T) {
	t.Parallel()
	s := newStack(t, lockOff)
	res, err := s.checkOut(t)
	if err != nil {
		t.Fatalf("check-out: %v", err)
	}
	for _, c := range s.store.Calls() {
		if strings.HasPrefix(c.Path, "/check-out-lock-storage") || c.LockID != "" {
			t.Errorf("lock call or header with the feature off: %+v", c)
		}
	}
	// Validation's one read (which carries the settings) and the one
	// write (item and loan together).
	wantStrings(t, "calls", routes(s.store), []string{storagetest.RouteValidation, storagetest.RoutePostLoan})

	loans := s.store.Loans()
	wantLoan := storagetest.Loan{ID: res.Loan.ID, UserID: patronID, ItemID: itemID, Status: "Open", Action: "checkedout",
		LoanDate: "2025-03-01T10:00:00.000Z", DueDate: "2025-03-22T10:00:00.000Z", LoanPolicyID: policyID,
		CheckoutServicePointID: servicePoint}
	if len(loans) != 1 || loans[0] != wantLoan {
		t.Errorf("stored loans %+v, want [%+v]", loans, wantLoan)
	}
	wantItem(t, s.store, schemas.ItemCheckedOut, 2)
	if res.Locked || res.Item.Status != schemas.ItemCheckedOut || res.Item.Version != 2 || res.Patron.ID != patronID {
		t.Errorf("result locked %v, item %q v%d, patron %s", res.Locked, res.Item.Status, res.Item.Version, res.Patron.ID)
	}
	if len(s.obs.acquired)+len(s.obs.notAcquired)+len(s.obs.releases) != 0 {
		t.Errorf("observer heard of locks with the feature off: %+v", s.obs)
	}
}

// TestCheckOutUnderAFreeLock: under the lock, the check-out's write
// acquires the patron's lock itself and releases it with the loan (no
// call of either of its own); against a storage that cannot wait for a
// lock, the acquisition is a call of its own before the write, which
// releases it.
func TestCheckOutUnderAFreeLock(t *testing.T) {
	t.Parallel()
	for _, path := range []struct {
		name  string
		opts  []stackOption
		order []string
	}{
		{"the write acquires", nil, []string{storagetest.RoutePostLoan}},
		{"an acquisition of its own", []stackOption{withoutWaitAtStorage()}, []string{storagetest.RouteAcquire, storagetest.RoutePostLoan}},
	} {
		t.Run(path.name, func(t *testing.T) {
			t.Parallel()
			s := newStack(t, lockOn, path.opts...)
			res, err := s.checkOut(t)
			if err != nil {
				t.Fatalf("check-out: %v", err)
			}
			checkOutUnderAFreeLock(t, s, res, path.order)
		})
	}
}

func checkOutUnderAFreeLock(t *testing.T, s *stack, res circulation.CheckOutResult, wantOrder []string) {
	t.Helper()
	wantCount(t, s.store, storagetest.RouteAcquire, 1)
	// The write released the lock with the loan: no call of its own.
	wantCount(t, s.store, storagetest.RouteRelease, 0)
	locks := s.store.Granted()
	if len(locks) != 1 || locks[0].UserID != patronID || locks[0].TTLMs != 3000 || s.store.Live(locks[0].ID) {
		t.Fatalf("locks %+v, want one 3000 ms lock of the patron, released", locks)
	}
	lockID := locks[0].ID

	// Acquire, then check the item out (item and loan in one write, fenced
	// by the lock, the item limit re-checked in it, the lock released in
	// it): in that order.
	var order []string
	for _, c := range s.store.Calls() {
		switch c.Route {
		case storagetest.RouteAcquire, storagetest.RoutePutItem, storagetest.RouteRelease:
			order = append(order, c.Route)
		case storagetest.RoutePostLoan:
			order = append(order, c.Route)
			if c.LockID != lockID || c.ReleaseLock != "true" || c.Status != http.StatusCreated {
				t.Errorf("loan created with X-Check-Out-Lock-Id %q, X-Check-Out-Release-Lock %q (status %d), want %q and true",
					c.LockID, c.ReleaseLock, c.Status, lockID)
			}
		}
		if c.Route == storagetest.RouteRelease && c.Path != "/check-out-lock-storage/"+lockID {
			t.Errorf("released %s, want the acquired lock %s", c.Path, lockID)
		}
	}
	wantStrings(t, "order under the lock", order, wantOrder)

	wantItem(t, s.store, schemas.ItemCheckedOut, 2)
	loans := s.store.Loans()
	if len(loans) != 1 || loans[0].ID != res.Loan.ID || loans[0].Status != "Open" {
		t.Errorf("stored loans %+v, want the one returned (%s), open", loans, res.Loan.ID)
	}
	if !res.Locked {
		t.Error("result not marked as locked")
	}
	if !reflect.DeepEqual(s.obs.acquired, []attempt{{1, 0}}) || !reflect.DeepEqual(s.obs.releases, []error{nil}) {
		t.Errorf("observer acquired %+v releases %v, want one attempt and one clean release", s.obs.acquired, s.obs.releases)
	}
	wantWaits(t, s.clock, nil)
}

// TestCheckOutReadsTheSettingsWithValidation: settings the cache does not
// hold come with validation's one read: no call of their own, and they
// apply (the tenant's stored "off" over the environment's "on": no lock
// calls) and are kept for the next check-out.
func TestCheckOutReadsTheSettingsWithValidation(t *testing.T) {
	t.Parallel()
	s := newStack(t, lockOn)
	s.store.AddSetting(locksettings.Scope, locksettings.Key, map[string]any{"checkOutLockFeatureEnabled": false})
	if _, err := s.checkOut(t); err != nil {
		t.Fatalf("check-out: %v", err)
	}
	wantStrings(t, "calls", routes(s.store), []string{storagetest.RouteValidation, storagetest.RoutePostLoan})
	if got, ok := s.settings.Cached(okapi(t)); !ok || got.Enabled || got.EnabledSource != circulation.FromSettings {
		t.Errorf("cached settings %+v (%t), want the stored off", got, ok)
	}
	wantItem(t, s.store, schemas.ItemCheckedOut, 2)
}

// TestCheckOutReadsTheSettingsApartFromAnOlderStorage: a storage whose
// validation does not carry the settings is asked for them in a call of
// their own, once, and they apply.
func TestCheckOutReadsTheSettingsApartFromAnOlderStorage(t *testing.T) {
	t.Parallel()
	s := newStack(t, lockOn)
	s.store.AsIfUnanswered(storagetest.RouteValidation, -1, "lockSettings")
	s.store.AddSetting(locksettings.Scope, locksettings.Key, map[string]any{"checkOutLockFeatureEnabled": false})
	if _, err := s.checkOut(t); err != nil {
		t.Fatalf("check-out: %v", err)
	}
	wantStrings(t, "calls", routes(s.store), []string{storagetest.RouteValidation, storagetest.RouteGetSettings, storagetest.RoutePostLoan})
	wantItem(t, s.store, schemas.ItemCheckedOut, 2)
}

// TestARefusedCheckOutStillCachesTheSettingsReadWithIt: validation's
// refusal is the answer; the settings its read carried are kept all the
// same, and nothing is written.
func TestARefusedCheckOutStillCachesTheSettingsReadWithIt(t *testing.T) {
	t.Parallel()
	s := newStack(t, lockOn)
	req := request()
	req.ItemBarcode = "nope"
	_, err := s.svc.CheckOut(okapi(t), req)
	wantStrings(t, "refusals", refusals(t, err), []string{
		"ITEM_BARCODE_NOT_FOUND: No item with barcode nope could be found [itemBarcode=nope]"})
	if n := s.settings.CachedTenants(); n != 1 {
		t.Errorf("%d tenants' settings cached, want the one read with the refused check-out", n)
	}
	wantStrings(t, "calls", routes(s.store), []string{storagetest.RouteValidation})
	if _, err := s.checkOut(t); err != nil {
		t.Fatalf("check-out: %v", err)
	}
	wantCount(t, s.store, storagetest.RouteGetSettings, 0)
}

// TestCheckOutIsOneCallOnceTheSettingsAreKnown: a check-out under the
// lock whose tenant's settings are not known makes two calls to storage:
// validation's one read (which carries the settings), and the write,
// which acquires the patron's lock, judges every rule again and releases
// the lock. Once they are known, it makes one: storage reads, builds the
// loan and writes it by the same write. Either way the lock is held inside
// one call.
func TestCheckOutIsOneCallOnceTheSettingsAreKnown(t *testing.T) {
	t.Parallel()
	s := newStack(t, lockOn)
	s.store.AddItem(storagetest.Item{ID: "33333333-3333-4333-8333-00000000000b", Barcode: "second", Title: "Second",
		Status: schemas.ItemAvailable, MaterialTypeID: materialType, PermanentLoanTypeID: loanType})
	if _, err := s.checkOut(t); err != nil {
		t.Fatalf("first check-out: %v", err)
	}
	wantStrings(t, "the first check-out's calls", routes(s.store), []string{storagetest.RouteValidation, storagetest.RoutePostLoan})
	wantAcquiredAndReleasedIn(t, s.store.Calls(), storagetest.RoutePostLoan)
	before := len(s.store.Calls())
	req := request()
	req.ItemBarcode = "second"
	res, err := s.svc.CheckOut(okapi(t), req)
	if err != nil {
		t.Fatalf("second check-out: %v", err)
	}
	wantStrings(t, "a check-out's calls once the settings are known", routes(s.store)[before:], []string{storagetest.RouteCheckOut})
	wantAcquiredAndReleasedIn(t, s.store.Calls()[before:], storagetest.RouteCheckOut)
	if res.Patron.ID != patronID || res.Patron.Barcode != userBarcode || res.Item.Barcode != "second" ||
		res.Item.Status != schemas.ItemCheckedOut || !res.Locked {
		t.Errorf("answered patron %+v, item %+v, locked %t; want the patron, the second item checked out, under the lock", res.Patron, res.Item, res.Locked)
	}
}

// wantAcquiredAndReleasedIn fails the test unless the write among calls
// (route) acquired the lock and released it with its loan.
func wantAcquiredAndReleasedIn(t *testing.T, calls []storagetest.Call, route string) {
	t.Helper()
	var write storagetest.Call
	for _, c := range calls {
		if c.Route == route {
			write = c
		}
	}
	if write.ReleaseLock != "true" || write.AcquireLock == "" || write.LockAcquired == "" || write.Status != http.StatusCreated {
		t.Errorf("the write carried release %q and acquisition %q (acquired %q, status %d), want the lock acquired and released with it",
			write.ReleaseLock, write.AcquireLock, write.LockAcquired, write.Status)
	}
}

func TestCheckOutRetriesAHeldLock(t *testing.T) {
	t.Parallel()
	s := newStack(t, lockOn, withoutWaitAtStorage())
	holdLock(s, 2)
	if _, err := s.checkOut(t); err != nil {
		t.Fatalf("check-out: %v", err)
	}
	wantCount(t, s.store, storagetest.RouteAcquire, 3)
	wantWaits(t, s.clock, ms(500, 500))
	wantCount(t, s.store, storagetest.RouteRelease, 0) // released by the write
	wantItem(t, s.store, schemas.ItemCheckedOut, 2)
	if n := len(s.store.Loans()); n != 1 {
		t.Errorf("%d loans, want 1", n)
	}
	if want := []attempt{{3, time.Second}}; !reflect.DeepEqual(s.obs.acquired, want) {
		t.Errorf("observer acquired %+v, want %+v", s.obs.acquired, want)
	}
}

func TestCheckOutGivesUpOnALockHeldForever(t *testing.T) {
	t.Parallel()
	s := newStack(t, lockOn, withoutWaitAtStorage())
	holdLock(s, -1)
	before := s.store.Snapshot()
	_, err := s.checkOut(t)
	e := wantError(t, err, errs.KindInvalid, schemas.CodeUnableToAcquireLock)
	if e.Message != "unable to acquire lock" {
		t.Errorf("message %q, want FOLIO's %q", e.Message, "unable to acquire lock")
	}
	want := []errs.Parameter{{Key: "userBarcode", Value: userBarcode}, {Key: "attempts", Value: "4"},
		{Key: "holderInstance", Value: "another"}}
	if !reflect.DeepEqual(e.Parameters, want) {
		t.Errorf("parameters %+v, want %+v", e.Parameters, want)
	}
	wantCount(t, s.store, storagetest.RouteAcquire, 4)
	wantWaits(t, s.clock, ms(500, 500, 1000))
	wantNoWrites(t, s.store)
	wantCount(t, s.store, storagetest.RouteRelease, 0)
	s.store.WantUnchanged(before)
	if want := []attempt{{4, 2 * time.Second}}; !reflect.DeepEqual(s.obs.notAcquired, want) {
		t.Errorf("observer notAcquired %+v, want %+v", s.obs.notAcquired, want)
	}
}

func TestCheckOutDoesNotRetryARefusedAcquire(t *testing.T) {
	t.Parallel()
	s := newStack(t, lockOn)
	s.store.Refuse(storagetest.RouteAcquire, -1, http.StatusUnprocessableEntity, schemas.CodeValidation)
	_, err := s.checkOut(t)
	// Storage's reason reaches the client as a refusal, not a 500.
	wantError(t, err, errs.KindInvalid, schemas.CodeValidation)
	wantCount(t, s.store, storagetest.RouteAcquire, 1)
	wantWaits(t, s.clock, nil)
	wantNoWrites(t, s.store)
	wantCount(t, s.store, storagetest.RouteRelease, 0)
}

// TestCheckOutRetriesAnUnavailableLockStore: an acquisition, a call of its
// own, that storage fails is retried on the intervals.
func TestCheckOutRetriesAnUnavailableLockStore(t *testing.T) {
	t.Parallel()
	s := newStack(t, lockOn, withoutWaitAtStorage())
	s.store.Refuse(storagetest.RouteAcquire, -1, http.StatusServiceUnavailable, schemas.CodeDatabaseUnavailable)
	_, err := s.checkOut(t)
	wantError(t, err, errs.KindUnavailable, schemas.CodeStorageUnavailable)
	wantCount(t, s.store, storagetest.RouteAcquire, 4)
	wantWaits(t, s.clock, ms(500, 500, 1000))
	wantNoWrites(t, s.store)
}

// TestCheckOutRechecksTheItemLimitUnderTheLock: the item limit is counted
// again in the write, under the lock: a check-out validated below the limit
// is refused when other check-outs reached it meanwhile.
func TestCheckOutRechecksTheItemLimitUnderTheLock(t *testing.T) {
	t.Parallel()
	s := newStack(t, lockOn)
	// Validation counts 2; by the write, another check-out has made it 3.
	lendOthers(s, itemLimit-1)
	lendOthersBeforeTheWrite(s, 1)
	_, err := s.checkOut(t)
	wantStrings(t, "refusals", refusals(t, err), []string{
		"ITEM_LIMIT: Patron has reached maximum limit of 3 items [itemBarcode=" + itemBarcode + "] [itemLimit=3]"})
	wantCount(t, s.store, storagetest.RouteAcquire, 1)
	// The write that acquired the lock released it, having written nothing.
	wantCount(t, s.store, storagetest.RouteRelease, 0)
	if locks := s.store.Granted(); len(locks) != 1 || s.store.Live(locks[0].ID) {
		t.Errorf("locks %+v, want one, released", locks)
	}
	// The write was refused by storage's count in it: nothing written.
	if n := len(s.store.Loans()); n != itemLimit {
		t.Errorf("%d loans, want the %d others", n, itemLimit)
	}
	wantItem(t, s.store, schemas.ItemAvailable, 1)
}

// TestAutomatedBlocks: a patron at their group's maximum items charged
// out is refused with the condition's message, FOLIO's code, before the
// item is looked at; and the limit is counted again in the write, under
// the lock: a check-out validated below it is refused when other
// check-outs reached it meanwhile, and writes nothing.
func TestAutomatedBlocks(t *testing.T) {
	t.Parallel()
	const refusal = "USER_IS_BLOCKED_AUTOMATICALLY: Maximum items charged out [patronBlockConditionId=" + schemas.ConditionItemsChargedOut + "]"
	t.Run("at validation", func(t *testing.T) {
		t.Parallel()
		s := newStack(t, lockOn)
		s.store.LimitChargedOut(patronGroup, 2, "Maximum items charged out")
		lendOthers(s, 2)
		before := s.store.Snapshot()
		_, err := s.checkOut(t)
		wantStrings(t, "refusals", refusals(t, err), []string{refusal})
		wantCount(t, s.store, storagetest.RouteAcquire, 0)
		s.store.WantUnchanged(before)
	})
	t.Run("in the write", func(t *testing.T) {
		t.Parallel()
		s := newStack(t, lockOn)
		s.store.LimitChargedOut(patronGroup, 2, "Maximum items charged out")
		// Validation counts 1; by the write, another check-out has made
		// it 2.
		lendOthers(s, 1)
		lendOthersBeforeTheWrite(s, 1)
		_, err := s.checkOut(t)
		wantStrings(t, "refusals", refusals(t, err), []string{refusal})
		wantCount(t, s.store, storagetest.RouteAcquire, 1)
		if n := len(s.store.Loans()); n != 2 {
			t.Errorf("%d loans, want the 2 others", n)
		}
		wantItem(t, s.store, schemas.ItemAvailable, 1)
		if locks := s.store.Granted(); len(locks) != 1 || s.store.Live(locks[0].ID) {
			t.Errorf("locks %+v, want one, released", locks)
		}
	})
	t.Run("below the limit", func(t *testing.T) {
		t.Parallel()
		s := newStack(t, lockOn)
		s.store.LimitChargedOut(patronGroup, 2, "Maximum items charged out")
		if _, err := s.checkOut(t); err != nil {
			t.Fatalf("the first check-out under a limit of 2: %v", err)
		}
	})
}

// TestCheckOutAndTheRequestQueue: an item whose first request is another
// patron's is refused with FOLIO's message and no request changes; the
// requester's own check-out fills the request in the write (Closed -
// Filled, no position) and moves the queue up; a request of another
// patron that came first since validation refuses the write.
func TestCheckOutAndTheRequestQueue(t *testing.T) {
	t.Parallel()
	const theirs, mine, later = "aaaaaaaa-0000-4000-8000-000000000001", "aaaaaaaa-0000-4000-8000-000000000002",
		"aaaaaaaa-0000-4000-8000-000000000003"
	refused := "ITEM_REQUESTED_BY_ANOTHER_PATRON: " + itemTitle + " (Barcode: " + itemBarcode +
		") cannot be checked out to user Lovelace, Ada because it has been requested by another patron [userBarcode=" + userBarcode + "]"
	t.Run("another patron's first", func(t *testing.T) {
		t.Parallel()
		s := newStack(t, lockOn)
		s.store.AddRequest(storagetest.Request{ID: theirs, ItemID: itemID, RequesterID: otherPatron, Status: "Open - Awaiting pickup", Position: 1})
		s.store.AddRequest(storagetest.Request{ID: mine, ItemID: itemID, RequesterID: patronID, Status: "Open - Not yet filled", Position: 2})
		before := s.store.Snapshot()
		_, err := s.checkOut(t)
		wantStrings(t, "refusals", refusals(t, err), []string{refused})
		wantCount(t, s.store, storagetest.RouteAcquire, 0)
		s.store.WantUnchanged(before)
	})
	t.Run("the borrower's first: filled", func(t *testing.T) {
		t.Parallel()
		s := newStack(t, lockOn)
		s.store.AddRequest(storagetest.Request{ID: mine, ItemID: itemID, RequesterID: patronID, Status: "Open - Awaiting pickup", Position: 1})
		s.store.AddRequest(storagetest.Request{ID: later, ItemID: itemID, RequesterID: otherPatron, Status: "Open - Not yet filled", Position: 2})
		if _, err := s.checkOut(t); err != nil {
			t.Fatalf("the requester's check-out: %v", err)
		}
		want := []storagetest.Request{
			{ID: mine, ItemID: itemID, RequesterID: patronID, Status: "Closed - Filled"},
			{ID: later, ItemID: itemID, RequesterID: otherPatron, Status: "Open - Not yet filled", Position: 1},
		}
		if got := s.store.Requests(); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("requests %+v, want %+v", got, want)
		}
	})
	t.Run("another patron's first since validation", func(t *testing.T) {
		t.Parallel()
		s := newStack(t, lockOn)
		s.store.Before(storagetest.RoutePostLoan, 1, func(storagetest.Call) {
			s.store.AddRequest(storagetest.Request{ID: theirs, ItemID: itemID, RequesterID: otherPatron, Status: "Open - Awaiting pickup", Position: 1})
		})
		_, err := s.checkOut(t)
		wantStrings(t, "refusals", refusals(t, err), []string{refused})
		if n := len(s.store.Loans()); n != 0 {
			t.Errorf("%d loans, want none", n)
		}
		wantItem(t, s.store, schemas.ItemAvailable, 1)
	})
}

// TestCheckOutOverrides: an override lifts exactly its block (FOLIO's
// OverridingLoanValidator): an item its policy does not lend is lent until
// the override's due date, the loan saying it was made through the
// override, with the comment; the item limit and the patron's blocks are
// lifted in the write too (storage is told), while a block not overridden
// still refuses.
func TestCheckOutOverrides(t *testing.T) {
	t.Parallel()
	due := time.Date(2026, 12, 24, 12, 0, 0, 0, time.UTC)
	t.Run("item not loanable", func(t *testing.T) {
		t.Parallel()
		s := newStack(t, lockOn)
		s.store.AddLoanPolicy(storagetest.LoanPolicy{ID: reference, Name: "Reference only", Loanable: false})
		s.store.SetRules(reference)
		req := request()
		req.Overrides = circulation.Overrides{ItemNotLoanable: true, DueDate: due, Comment: "For the weekend"}
		res, err := s.svc.CheckOut(okapi(t), req)
		if err != nil {
			t.Fatalf("the override: %v", err)
		}
		loans := s.store.Loans()
		if len(loans) != 1 || loans[0].Action != circulation.ActionOverride || loans[0].DueDate != "2026-12-24T12:00:00.000Z" ||
			res.Loan.ActionComment != "For the weekend" {
			t.Errorf("loan %+v (answered %+v), want due at the override's date, made through the override", loans, res.Loan)
		}
	})
	t.Run("a block not overridden still refuses", func(t *testing.T) {
		t.Parallel()
		s := newStack(t, lockOn)
		s.store.AddManualBlock(storagetest.ManualBlock{UserID: patronID, Desc: "Unpaid fines", Borrowing: true})
		req := request()
		req.Overrides = circulation.Overrides{ItemLimit: true, Comment: "x"}
		_, err := s.svc.CheckOut(okapi(t), req)
		wantStrings(t, "refusals", refusals(t, err), []string{"USER_IS_BLOCKED_MANUALLY: Patron blocked from borrowing [reason=Unpaid fines]"})
	})
	t.Run("the patron's blocks, at the write too", func(t *testing.T) {
		t.Parallel()
		s := newStack(t, lockOn)
		s.store.AddManualBlock(storagetest.ManualBlock{UserID: patronID, Desc: "Unpaid fines", Borrowing: true})
		s.store.LimitChargedOut(patronGroup, 0, "No more loans")
		req := request()
		req.Overrides = circulation.Overrides{PatronBlock: true, Comment: "Paid at the desk"}
		if _, err := s.svc.CheckOut(okapi(t), req); err != nil {
			t.Fatalf("the override of the patron's blocks: %v", err)
		}
		if loans := s.store.Loans(); len(loans) != 1 || loans[0].Action != circulation.ActionOverride {
			t.Errorf("loans %+v, want one made through the override", loans)
		}
	})
}

// TestCheckOutItemLimitNamesTheRuleScope walks every combination of the
// criteria the rule that chose the policy names: FOLIO's message and code,
// and the open loans counted in that scope.
func TestCheckOutItemLimitNamesTheRuleScope(t *testing.T) {
	t.Parallel()
	const limit3 = "Patron has reached maximum limit of 3 items"
	for _, tc := range []struct {
		name          string
		pg, mt, lt    bool
		code, message string
	}{
		{"no criterion", false, false, false, "ITEM_LIMIT", limit3},
		{"patron group only", true, false, false, "ITEM_LIMIT", limit3},
		{"material type", false, true, false, "ITEM_LIMIT_MATERIAL_TYPE", limit3 + " for material type"},
		{"loan type", false, false, true, "ITEM_LIMIT_LOAN_TYPE", limit3 + " for loan type"},
		{"material type and loan type", false, true, true, "ITEM_LIMIT_MATERIAL_TYPE_LOAN_TYPE",
			limit3 + " for combination of material type and loan type"},
		{"patron group and material type", true, true, false, "ITEM_LIMIT_PATRON_GROUP_MATERIAL_TYPE",
			limit3 + " for combination of patron group and material type"},
		{"patron group and loan type", true, false, true, "ITEM_LIMIT_PATRON_GROUP_LOAN_TYPE",
			limit3 + " for combination of patron group and loan type"},
		{"all three", true, true, true, "ITEM_LIMIT_PATRON_GROUP_MATERIAL_TYPE_LOAN_TYPE",
			limit3 + " for combination of patron group, material type and loan type"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := newStack(t, lockOn)
			setRule(s, tc.pg, tc.mt, tc.lt)
			lendOthers(s, itemLimit)
			_, err := s.checkOut(t)
			wantStrings(t, "refusals", refusals(t, err), []string{
				tc.code + ": " + tc.message + " [itemBarcode=" + itemBarcode + "] [itemLimit=3]"})
			// Refused at validation: no lock taken.
			wantCount(t, s.store, storagetest.RouteAcquire, 0)
			wantNoWrites(t, s.store)
		})
	}
}

// TestUnscopedItemLimitAsFOLIO: circulation enforces the limit storage
// says it enforces, and no other: with storage following FOLIO, a limit
// whose rule names neither a material type nor a loan type is not
// enforced and the check-out goes through, while a scoped limit still
// refuses.
func TestUnscopedItemLimitAsFOLIO(t *testing.T) {
	t.Parallel()
	asFOLIO := withStorageEnv("ITEM_LIMIT_WITHOUT_CRITERIA=ignore")
	for _, byGroup := range []bool{false, true} {
		s := newStack(t, lockOn, asFOLIO)
		setRule(s, byGroup, false, false)
		lendOthers(s, itemLimit)
		if _, err := s.checkOut(t); err != nil {
			t.Fatalf("a rule naming the patron group %v, and no type: check-out refused: %v", byGroup, err)
		}
	}
	s := newStack(t, lockOn, asFOLIO)
	setRule(s, true, false, true)
	lendOthers(s, itemLimit)
	_, err := s.checkOut(t)
	wantStrings(t, "refusals", refusals(t, err), []string{"ITEM_LIMIT_PATRON_GROUP_LOAN_TYPE: Patron has reached maximum limit of 3 items" +
		" for combination of patron group and loan type [itemBarcode=" + itemBarcode + "] [itemLimit=3]"})
}

func TestCheckOutCountsTheStoredOpenLoans(t *testing.T) {
	t.Parallel()
	s := newStack(t, lockOff)
	// Three loans of the patron's: two count, the one of an item claimed
	// returned does not.
	for i, status := range []string{"Checked out", "Checked out", "Claimed returned"} {
		id := fmt.Sprintf("33333333-3333-4333-8333-%012d", i+1)
		s.store.AddItem(storagetest.Item{ID: id, Barcode: fmt.Sprintf("other-%d", i), Title: "Other", Status: status,
			MaterialTypeID: materialType, PermanentLoanTypeID: loanType})
		s.store.AddLoan(storagetest.Loan{ID: fmt.Sprintf("99999999-9999-4999-8999-%012d", i+1),
			UserID: patronID, ItemID: id, Status: "Open", Action: "checkedout", LoanDate: "2025-02-01T10:00:00.000Z"})
	}
	if _, err := s.checkOut(t); err != nil {
		t.Fatalf("check-out with 2 of 3 counted: %v", err)
	}
	// Now the patron has three: the next check-out is refused.
	s.store.AddItem(storagetest.Item{ID: "33333333-3333-4333-8333-000000000009", Barcode: "i-9", Title: "Next",
		Status: schemas.ItemAvailable, MaterialTypeID: materialType, PermanentLoanTypeID: loanType})
	req := request()
	req.ItemBarcode = "i-9"
	_, err := s.svc.CheckOut(okapi(t), req)
	wantStrings(t, "refusals", refusals(t, err), []string{
		"ITEM_LIMIT: Patron has reached maximum limit of 3 items [itemBarcode=i-9] [itemLimit=3]"})
}

// TestARefusedCheckOutIsAnsweredWhenTheReleaseFails: a write that wrote
// nothing leaves the lock held, so a check-out that acquired it by a call
// of its own (against a storage that cannot wait for it) releases it by a
// call of its own; that call failing changes nothing in the answer.
func TestARefusedCheckOutIsAnsweredWhenTheReleaseFails(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		status   int
		code     string
		attempts int // a transient failure is retried twice
		kind     errs.Kind
	}{
		{"storage unavailable", http.StatusServiceUnavailable, schemas.CodeDatabaseUnavailable, 3, errs.KindUnavailable},
		{"storage failed", http.StatusInternalServerError, schemas.CodeInternal, 1, errs.KindInternal},
		{"lock gone", http.StatusNotFound, schemas.CodeNotFound, 1, errs.KindNotFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := newStack(t, lockOn, withoutWaitAtStorage())
			// The write never reaches storage, however often it is sent.
			s.store.Refuse(storagetest.RoutePostLoan, -1, http.StatusServiceUnavailable, schemas.CodeDatabaseUnavailable)
			s.store.Refuse(storagetest.RouteRelease, -1, tc.status, tc.code)
			_, err := s.checkOut(t)
			wantError(t, err, errs.KindUnavailable, schemas.CodeStorageUnavailable)
			if loans := s.store.Loans(); len(loans) != 0 {
				t.Errorf("stored loans %+v, want none", loans)
			}
			wantItem(t, s.store, schemas.ItemAvailable, 1)
			wantCount(t, s.store, storagetest.RouteRelease, tc.attempts)
			if len(s.obs.releases) != 1 || !errs.IsKind(s.obs.releases[0], tc.kind) {
				t.Errorf("observer releases %v, want one of kind %d", s.obs.releases, tc.kind)
			}
			if locks := s.store.Granted(); len(locks) != 1 || !s.store.Live(locks[0].ID) {
				t.Errorf("locks %+v, want one, not released (it expires by itself)", locks)
			}
		})
	}
}

// TestCheckOutLeavesTheItemWhenTheLoanFails: item and loan are one write,
// so a loan that fails leaves the item as it was: nothing to put back; the
// lock acquired by a call of its own is released by another. A write that
// storage never answers, however often it is sent again with its id,
// answers that its outcome is not known, naming its loan and its write id.
func TestCheckOutLeavesTheItemWhenTheLoanFails(t *testing.T) {
	t.Parallel()
	s := newStack(t, lockOn, withoutWaitAtStorage())
	s.store.Refuse(storagetest.RoutePostLoan, -1, http.StatusServiceUnavailable, schemas.CodeDatabaseUnavailable)
	_, err := s.checkOut(t)
	// The answer names the loan the unanswered write would have made.
	e := wantError(t, err, errs.KindUnavailable, schemas.CodeStorageUnavailable)
	params := map[string]string{}
	for _, p := range e.Parameters {
		params[p.Key] = p.Value
	}
	writes := map[string]bool{}
	for _, c := range s.store.Calls() {
		if c.Route == storagetest.RoutePostLoan {
			writes[c.WriteID] = true
		}
	}
	if len(params) != 2 || uuid.Validate(params["loanId"]) != nil || !writes[params["writeId"]] || len(writes) != 1 {
		t.Errorf("parameters %+v, want the loanId and the writeId of the write, sent with one id (%v)", e.Parameters, writes)
	}
	if n := s.store.Count(storagetest.RoutePostLoan); n < 2 {
		t.Errorf("the write was sent %d times, want it sent again", n)
	}
	if n := len(s.store.Loans()); n != 0 {
		t.Errorf("%d loans, want 0", n)
	}
	wantItem(t, s.store, schemas.ItemAvailable, 1)
	wantCount(t, s.store, storagetest.RoutePutItem, 0)
	wantCount(t, s.store, storagetest.RouteLoan, 0) // nothing read back
	wantCount(t, s.store, storagetest.RouteRelease, 1)
	if locks := s.store.Granted(); len(locks) != 1 || s.store.Live(locks[0].ID) {
		t.Errorf("locks %+v, want one, released", locks)
	}
}

// TestCheckOutReadsBackAnAmbiguousLoanCreation: the write's answer is
// lost after it committed; the check-out sends it again with its write id
// and is answered its loan from the id, written once. So whether the
// write acquired the lock itself or a call of its own did.
func TestCheckOutReadsBackAnAmbiguousLoanCreation(t *testing.T) {
	t.Parallel()
	t.Run("the write acquires", func(t *testing.T) { t.Parallel(); readsBackAnAmbiguousLoanCreation(t) })
	t.Run("an acquisition of its own", func(t *testing.T) { t.Parallel(); readsBackAnAmbiguousLoanCreation(t, withoutWaitAtStorage()) })
}

func readsBackAnAmbiguousLoanCreation(t *testing.T, opts ...stackOption) {
	// The lost write is sent again until it is answered: half a second
	// is not always enough on a loaded machine.
	s := newStack(t, lockOn, append(opts, withSettleTimeout(10*time.Second))...)
	s.store.Lose(storagetest.RoutePostLoan, 1, storagetest.LostUnavailable)
	res, err := s.checkOut(t)
	if err != nil {
		t.Fatalf("check-out: %v", err)
	}
	loans := s.store.Loans()
	if len(loans) != 1 || loans[0].ID != res.Loan.ID || loans[0].Status != "Open" {
		t.Errorf("stored loans %+v, want the returned %s, open", loans, res.Loan.ID)
	}
	wantItem(t, s.store, schemas.ItemCheckedOut, 2)
	wantCount(t, s.store, storagetest.RoutePutItem, 0)
	wantCount(t, s.store, storagetest.RouteLoan, 0)
	wantWrittenOnce(t, s.store, storagetest.RoutePostLoan, 2, 1)
	// The write that committed released the lock with the loan, and its
	// answer, which said so, was lost; the one sent again, answered from
	// the write's id, says so too: no release of its own follows.
	wantCount(t, s.store, storagetest.RouteRelease, 0)
	if locks := s.store.Granted(); len(locks) != 1 || s.store.Live(locks[0].ID) {
		t.Errorf("locks %+v, want one, released", locks)
	}
}

// TestCheckOutReleasesTheLockAStorageKeeps: against a storage that does
// not release the lock with the write (one that predates
// X-Check-Out-Release-Lock, during a rolling upgrade), the write's answer
// does not say the lock went with it, so the check-out releases it by a
// call of its own: the patron's next scan is not kept waiting for its TTL.
func TestCheckOutReleasesTheLockAStorageKeeps(t *testing.T) {
	t.Parallel()
	s := newStack(t, lockOn, withoutWaitAtStorage())
	s.store.AsIfUnknown(storagetest.RoutePostLoan, -1, schemas.HeaderReleaseLock)
	if _, err := s.checkOut(t); err != nil {
		t.Fatalf("check-out: %v", err)
	}
	wantCount(t, s.store, storagetest.RouteRelease, 1)
	locks := s.store.Granted()
	if len(locks) != 1 || s.store.Live(locks[0].ID) {
		t.Fatalf("locks %+v, want one, released", locks)
	}
	for _, c := range s.store.Calls() {
		if c.Route == storagetest.RouteRelease && (c.Status != http.StatusNoContent || c.Path != "/check-out-lock-storage/"+locks[0].ID) {
			t.Errorf("release %s answered %d, want 204 for lock %s", c.Path, c.Status, locks[0].ID)
		}
	}
	if len(s.obs.releases) != 1 || s.obs.releases[0] != nil {
		t.Errorf("observer releases %v, want one that succeeded", s.obs.releases)
	}
}

// TestCheckOutWritesNothingWhenTheLockIsLost: the lock acquired by a call
// of its own is gone by the write, which then writes nothing.
func TestCheckOutWritesNothingWhenTheLockIsLost(t *testing.T) {
	t.Parallel()
	s := newStack(t, lockOn, withoutWaitAtStorage())
	// The lock expires between the acquisition and the write.
	s.store.Before(storagetest.RoutePostLoan, 1, func(c storagetest.Call) { s.store.Release(c.LockID) })
	_, err := s.checkOut(t)
	wantError(t, err, errs.KindConflict, schemas.CodeLockLost)
	if n := len(s.store.Loans()); n != 0 {
		t.Errorf("%d loans, want 0", n)
	}
	wantItem(t, s.store, schemas.ItemAvailable, 1)
	wantCount(t, s.store, storagetest.RouteLoan, 0) // a refusal is not ambiguous
	if len(s.obs.releases) != 1 || !errs.IsKind(s.obs.releases[0], errs.KindNotFound) {
		t.Errorf("observer releases %v, want one not found (the lock had expired)", s.obs.releases)
	}
}

func TestCheckOutWithStorageDown(t *testing.T) {
	t.Parallel()
	s := newStack(t, lockOn)
	before := s.store.Snapshot()
	s.store.Down()
	_, err := s.checkOut(t)
	// Failed before any write: no loan to name.
	if e := wantError(t, err, errs.KindUnavailable, schemas.CodeStorageUnavailable); len(e.Parameters) != 0 {
		t.Errorf("parameters %+v, want none: nothing was written", e.Parameters)
	}
	s.store.WantUnchanged(before)
	if calls := s.store.Calls(); len(calls) != 0 {
		t.Errorf("a server that is down got calls: %+v", calls)
	}
	if len(s.obs.acquired)+len(s.obs.notAcquired) != 0 {
		t.Errorf("observer heard of lock attempts: %+v", s.obs)
	}
}

func TestCheckOutStopsWhenCancelledWhileWaitingForTheLock(t *testing.T) {
	t.Parallel()
	s := newStack(t, lockOn, withoutWaitAtStorage())
	holdLock(s, -1)
	before := s.store.Snapshot()
	ctx, cancel := context.WithCancel(okapi(t))
	defer cancel()
	s.clock.cancelOnWait(cancel)
	_, err := s.svc.CheckOut(ctx, request())
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("error %v, want context.Canceled", err)
	}
	wantCount(t, s.store, storagetest.RouteAcquire, 1)
	wantWaits(t, s.clock, ms(500))
	wantNoWrites(t, s.store)
	wantCount(t, s.store, storagetest.RouteRelease, 0)
	s.store.WantUnchanged(before)
	if want := []attempt{{1, 500 * time.Millisecond}}; !reflect.DeepEqual(s.obs.notAcquired, want) {
		t.Errorf("observer notAcquired %+v, want %+v", s.obs.notAcquired, want)
	}
}

// TestCheckOutReleasesTheLockOfACancelledRequest: the client goes away
// between the acquisition, a call of its own, and the write: nothing is
// written, and the lock is released.
func TestCheckOutReleasesTheLockOfACancelledRequest(t *testing.T) {
	t.Parallel()
	s := newStack(t, lockOn, withoutWaitAtStorage())
	ctx, cancel := context.WithCancel(okapi(t))
	defer cancel()
	s.obs.onAcquired = cancel // the client goes away once the lock is held
	_, err := s.svc.CheckOut(ctx, request())
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("error %v, want context.Canceled", err)
	}
	wantNoWrites(t, s.store)
	wantItem(t, s.store, schemas.ItemAvailable, 1)
	locks := s.store.Granted()
	if len(locks) != 1 || s.store.Live(locks[0].ID) {
		t.Errorf("locks %+v, want one, released", locks)
	}
	for _, c := range s.store.Calls() {
		if c.Route == storagetest.RouteRelease && (c.Status != http.StatusNoContent || c.Tenant != s.store.Tenant || c.RequestID != requestID) {
			t.Errorf("release %+v, want 204 with the request's tenant and id", c)
		}
	}
	wantCount(t, s.store, storagetest.RouteRelease, 1)
}

func TestCheckOutCollectsEveryRefusal(t *testing.T) {
	t.Parallel()
	fake := storagetest.Start(t, storagetest.LockDefault(lockOn.Enabled))
	seedTypes(fake)
	fake.AddUser(storagetest.User{ID: patronID, Barcode: userBarcode, Active: false, PatronGroup: patronGroup, LastName: "L"})
	fake.AddUser(storagetest.User{ID: otherPatron, Barcode: "u-1002", Active: true, PatronGroup: patronGroup, LastName: "O"})
	fake.AddItem(storagetest.Item{ID: itemID, Barcode: itemBarcode, Title: itemTitle, Status: schemas.ItemCheckedOut,
		MaterialTypeID: materialType, PermanentLoanTypeID: loanType})
	fake.AddLoanPolicy(storagetest.LoanPolicy{ID: policyID, Name: "Three weeks", Loanable: true, Duration: 3, Interval: "Weeks"})
	fake.SetRules(policyID)
	fake.AddLoan(storagetest.Loan{ID: otherLoan, UserID: otherPatron, ItemID: itemID, Status: "Open", Action: "checkedout",
		LoanDate: "2025-02-01T10:00:00.000Z"})
	s := stackOver(t, fake, lockOn)
	before := fake.Snapshot()
	_, err := s.checkOut(t)
	wantStrings(t, "refusals", refusals(t, err), []string{
		"USER_IS_INACTIVE: Cannot check out to inactive user [userBarcode=" + userBarcode + "]",
		"ITEM_ALREADY_CHECKED_OUT: Item is already checked out [itemBarcode=" + itemBarcode + "]",
		"ITEM_HAS_OPEN_LOAN: Cannot check out item that already has an open loan [itemBarcode=" + itemBarcode + "]",
	})
	wantCount(t, fake, storagetest.RouteAcquire, 0)
	if w := fake.Writes(); len(w) != 0 {
		t.Errorf("writes %+v, want none", w)
	}
	fake.WantUnchanged(before)
}

func TestCheckOutRefusals(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		setup func(f *storagetest.Storage) circulation.CheckOutRequest
		want  []string
	}{
		{"unknown barcodes", func(f *storagetest.Storage) circulation.CheckOutRequest {
			return circulation.CheckOutRequest{ItemBarcode: "no-item", UserBarcode: "no-user", ServicePointID: servicePoint}
		}, []string{
			"USER_BARCODE_NOT_FOUND: Could not find user with matching barcode [userBarcode=no-user]",
			"ITEM_BARCODE_NOT_FOUND: No item with barcode no-item could be found [itemBarcode=no-item]",
		}},
		{"not loanable", func(f *storagetest.Storage) circulation.CheckOutRequest {
			f.AddLoanPolicy(storagetest.LoanPolicy{ID: reference, Name: "Reference only", Loanable: false})
			f.SetRules(reference)
			return request()
		}, []string{
			"ITEM_NOT_LOANABLE: Item is not loanable [itemBarcode=" + itemBarcode + "] [loanPolicyName=Reference only]",
		}},
		{"at the item limit and not loanable: both, the limit first", func(f *storagetest.Storage) circulation.CheckOutRequest {
			f.AddLoanPolicy(storagetest.LoanPolicy{ID: reference, Name: "Reference only", Loanable: false, ItemLimit: 1})
			f.SetRules(policyID, storagetest.Rule{MaterialTypeID: materialType, LoanPolicyID: reference})
			lent := "33333333-3333-4333-8333-0000000000b1"
			f.AddItem(storagetest.Item{ID: lent, Barcode: "lent-1", Title: "Lent", Status: schemas.ItemCheckedOut,
				MaterialTypeID: materialType, PermanentLoanTypeID: loanType})
			f.AddLoan(storagetest.Loan{ID: otherLoan, UserID: patronID, ItemID: lent, Status: "Open", Action: "checkedout",
				LoanDate: "2025-02-01T10:00:00.000Z"})
			return request()
		}, []string{
			"ITEM_LIMIT_MATERIAL_TYPE: Patron has reached maximum limit of 1 items for material type [itemBarcode=" + itemBarcode + "] [itemLimit=1]",
			"ITEM_NOT_LOANABLE: Item is not loanable [itemBarcode=" + itemBarcode + "] [loanPolicyName=Reference only]",
		}},
		{"manual blocks in force for borrowing: one refusal naming them all", func(f *storagetest.Storage) circulation.CheckOutRequest {
			// In the order they were made (their ids too, should they be
			// made within one millisecond).
			f.AddManualBlock(storagetest.ManualBlock{ID: "77777777-7777-4777-8777-000000000001", UserID: patronID, Desc: "Unpaid fines",
				PatronMessage: "Please see the desk", Borrowing: true})
			f.AddManualBlock(storagetest.ManualBlock{ID: "77777777-7777-4777-8777-000000000002", UserID: patronID, Desc: "Damaged a book", Borrowing: true,
				ExpirationDate: time.Now().Add(time.Hour).UTC().Format(time.RFC3339)})
			// Not in force: expired, renewals only, someone else's.
			f.AddManualBlock(storagetest.ManualBlock{UserID: patronID, Desc: "Old", Borrowing: true, ExpirationDate: "2020-01-01T00:00:00Z"})
			f.AddManualBlock(storagetest.ManualBlock{UserID: patronID, Desc: "Renewals", Borrowing: false})
			f.AddManualBlock(storagetest.ManualBlock{UserID: otherPatron, Desc: "Other", Borrowing: true})
			return request()
		}, []string{
			"USER_IS_BLOCKED_MANUALLY: Patron blocked from borrowing [reason=Unpaid fines;Damaged a book] [patronMessage=Please see the desk]",
		}},
		{"blocked and inactive: the block first, as FOLIO", func(f *storagetest.Storage) circulation.CheckOutRequest {
			f.AddUser(storagetest.User{ID: "22222222-2222-4222-8222-00000000000b", Barcode: "blocked-inactive", Active: false,
				PatronGroup: patronGroup, LastName: "B"})
			f.AddManualBlock(storagetest.ManualBlock{UserID: "22222222-2222-4222-8222-00000000000b", Desc: "Lost card", Borrowing: true})
			return circulation.CheckOutRequest{ItemBarcode: itemBarcode, UserBarcode: "blocked-inactive", ServicePointID: servicePoint}
		}, []string{
			"USER_IS_BLOCKED_MANUALLY: Patron blocked from borrowing [reason=Lost card]",
			"USER_IS_INACTIVE: Cannot check out to inactive user [userBarcode=blocked-inactive]",
		}},
		{"expired patron", func(f *storagetest.Storage) circulation.CheckOutRequest {
			f.AddUser(storagetest.User{ID: "22222222-2222-4222-8222-00000000000e", Barcode: "expired", Active: true,
				PatronGroup: patronGroup, LastName: "E", ExpirationDate: "2020-01-01T00:00:00.000Z"})
			return circulation.CheckOutRequest{ItemBarcode: itemBarcode, UserBarcode: "expired", ServicePointID: servicePoint}
		}, []string{
			"USER_IS_INACTIVE: Cannot check out to inactive user [userBarcode=expired]",
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := newStack(t, lockOn)
			req := tc.setup(s.store)
			before := s.store.Snapshot()
			_, err := s.svc.CheckOut(okapi(t), req)
			wantStrings(t, "refusals", refusals(t, err), tc.want)
			wantCount(t, s.store, storagetest.RouteAcquire, 0)
			if w := s.store.Writes(); len(w) != 0 {
				t.Errorf("writes %+v, want none", w)
			}
			s.store.WantUnchanged(before)
		})
	}
}

// TestCheckOutItemStatuses: the item statuses FOLIO refuses are refused
// with FOLIO's message, naming title, material type, barcode and status;
// those FOLIO lends are lent (mod-circulation's ItemStatusValidatorTest
// lists both).
func TestCheckOutItemStatuses(t *testing.T) {
	t.Parallel()
	for i, status := range []string{"Declared lost", "Claimed returned", "Aged to lost", "Intellectual item"} {
		t.Run("refused/"+status, func(t *testing.T) {
			t.Parallel()
			s := newStack(t, lockOn)
			barcode := fmt.Sprintf("s-%d", i)
			s.store.AddItem(storagetest.Item{ID: fmt.Sprintf("33333333-3333-4333-8333-1000000000%02d", i), Barcode: barcode, Title: "Gone",
				Status: status, MaterialTypeID: materialType, PermanentLoanTypeID: loanType})
			before := s.store.Snapshot()
			_, err := s.svc.CheckOut(okapi(t), circulation.CheckOutRequest{ItemBarcode: barcode, UserBarcode: userBarcode, ServicePointID: servicePoint})
			wantStrings(t, "refusals", refusals(t, err), []string{"ITEM_STATUS_REFUSED: Gone (" + materialTypeName +
				") (Barcode: " + barcode + ") has the item status " + status + " and cannot be checked out [itemBarcode=" + barcode + "]"})
			s.store.WantUnchanged(before)
		})
	}
	for i, status := range []string{"Long missing", "In process (non-requestable)", "Restricted", "Unavailable", "Unknown"} {
		t.Run("lent/"+status, func(t *testing.T) {
			t.Parallel()
			s := newStack(t, lockOn)
			barcode := fmt.Sprintf("a-%d", i)
			id := fmt.Sprintf("33333333-3333-4333-8333-2000000000%02d", i)
			s.store.AddItem(storagetest.Item{ID: id, Barcode: barcode, Title: "Here", Status: status,
				MaterialTypeID: materialType, PermanentLoanTypeID: loanType})
			res, err := s.svc.CheckOut(okapi(t), circulation.CheckOutRequest{ItemBarcode: barcode, UserBarcode: userBarcode, ServicePointID: servicePoint})
			if err != nil || res.Item.Status != schemas.ItemCheckedOut {
				t.Fatalf("check-out of an item %s: %+v %v, want it lent", status, res.Item, err)
			}
			if item, _ := s.store.Item(id); item.Status != schemas.ItemCheckedOut {
				t.Errorf("stored item %+v, want Checked out", item)
			}
		})
	}
}

func TestCheckOutWithoutCirculationRules(t *testing.T) {
	t.Parallel()
	fake := storagetest.Start(t, storagetest.LockDefault(lockOn.Enabled))
	seedTypes(fake)
	fake.AddUser(storagetest.User{ID: patronID, Barcode: userBarcode, Active: true, PatronGroup: patronGroup, LastName: "L"})
	fake.AddItem(storagetest.Item{ID: itemID, Barcode: itemBarcode, Title: itemTitle, Status: schemas.ItemAvailable,
		MaterialTypeID: materialType, PermanentLoanTypeID: loanType})
	s := stackOver(t, fake, lockOn)
	_, err := s.checkOut(t)
	wantStrings(t, "refusals", refusals(t, err), []string{
		"NO_LOAN_POLICY: No loan policy applies: the circulation rules are not set [itemBarcode=" + itemBarcode + "]"})
	if w := fake.Writes(); len(w) != 0 {
		t.Errorf("writes %+v, want none", w)
	}
}

func TestOkapiHeadersReachStorageOnEveryCall(t *testing.T) {
	t.Parallel()
	s := newStack(t, lockOn, withoutWaitAtStorage())
	holdLock(s, 1)
	// A storage that does not carry the settings with validation: they
	// are read in a call of their own, which must carry the headers too.
	s.store.AsIfUnanswered(storagetest.RouteValidation, -1, "lockSettings")
	if _, err := s.checkOut(t); err != nil {
		t.Fatalf("check-out: %v", err)
	}
	if _, err := s.svc.CheckIn(okapi(t), circulation.CheckInRequest{ItemBarcode: itemBarcode, ServicePointID: servicePoint}); err != nil {
		t.Fatalf("check-in: %v", err)
	}
	calls := s.store.Calls()
	seen := map[string]bool{}
	for _, c := range calls {
		seen[c.Route] = true
		if c.Tenant != s.store.Tenant || c.RequestID != requestID {
			t.Errorf("%s %s got tenant %q request id %q, want %q %q", c.Method, c.Path, c.Tenant, c.RequestID, s.store.Tenant, requestID)
		}
	}
	for _, r := range []string{storagetest.RouteGetSettings, storagetest.RouteAcquire,
		storagetest.RoutePostLoan, storagetest.RoutePutLoan} {
		if !seen[r] {
			t.Errorf("no %s call among %d", r, len(calls))
		}
	}
}

func TestStoredSettingsOverrideTheEnvironment(t *testing.T) {
	t.Parallel()
	s := newStack(t, lockOff, withoutWaitAtStorage())
	s.store.AddSetting(locksettings.Scope, locksettings.Key,
		map[string]any{"checkOutLockFeatureEnabled": true, "lockTtl": 7000, "retryIntervalsMs": []int{100, 200}})
	got := effective(t, s.settings, okapi(t))
	if got.ChangedAt == "" {
		t.Errorf("effective %+v says nothing of when the entry changed", got)
	}
	got.ChangedAt = ""
	want := circulation.LockSettings{Enabled: true, LockTTL: 7 * time.Second, RetryIntervals: ms(100, 200),
		EnabledSource: circulation.FromSettings, LockTTLSource: circulation.FromSettings, RetrySource: circulation.FromSettings}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("effective %+v, want %+v", got, want)
	}
	holdLock(s, -1)
	_, err := s.checkOut(t)
	wantError(t, err, errs.KindInvalid, schemas.CodeUnableToAcquireLock)
	wantCount(t, s.store, storagetest.RouteAcquire, 3)
	wantWaits(t, s.clock, ms(100, 200))
	for _, c := range s.store.Calls() {
		if c.Route == storagetest.RouteAcquire && !strings.Contains(c.Body, `"ttlMs":7000`) {
			t.Errorf("acquire body %s, want ttlMs 7000", c.Body)
		}
	}
}

func TestFolioRetrySettings(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		stored map[string]any
		waits  []time.Duration
	}{
		{"attempts and interval", map[string]any{"noOfRetryAttempts": 2, "retryInterval": 250}, ms(250, 250)},
		{"attempts only: FOLIO's wait", map[string]any{"noOfRetryAttempts": 1}, ms(250)},
		{"interval only: FOLIO's count", map[string]any{"retryInterval": 50}, folioRetries(50 * time.Millisecond)},
		{"retryIntervalsMs wins", map[string]any{"noOfRetryAttempts": 5, "retryInterval": 50, "retryIntervalsMs": []int{60}}, ms(60)},
		{"no retries", map[string]any{"noOfRetryAttempts": 0}, ms()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := newStack(t, lockOn, withoutWaitAtStorage())
			s.store.AddSetting(locksettings.Scope, locksettings.Key, tc.stored)
			got := effective(t, s.settings, okapi(t))
			got.ChangedAt = "" // when storage wrote it
			want := circulation.LockSettings{Enabled: true, LockTTL: 3 * time.Second, RetryIntervals: tc.waits,
				EnabledSource: circulation.FromEnvironment, LockTTLSource: circulation.FromEnvironment, RetrySource: circulation.FromSettings}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("effective %+v, want %+v", got, want)
			}
			holdLock(s, -1)
			_, err := s.checkOut(t)
			wantError(t, err, errs.KindInvalid, schemas.CodeUnableToAcquireLock)
			wantCount(t, s.store, storagetest.RouteAcquire, len(tc.waits)+1)
			wantWaits(t, s.clock, tc.waits)
		})
	}
}

func TestUnreadableSettingsFallBackToTheEnvironment(t *testing.T) {
	t.Parallel()
	s := newStack(t, lockOn)
	// A storage that carries no settings with validation, and fails to
	// answer their own read.
	s.store.AsIfUnanswered(storagetest.RouteValidation, -1, "lockSettings")
	s.store.Refuse(storagetest.RouteGetSettings, -1, http.StatusInternalServerError, schemas.CodeInternal)
	// Storage has answered something (its lock default, on, with it)
	// before its settings could not be read.
	if _, err := s.storage.ItemByBarcode(okapi(t), itemBarcode); err != nil {
		t.Fatal(err)
	}
	got := effective(t, s.settings, okapi(t))
	if got.SettingsError == "" {
		t.Error("no settingsError reported")
	}
	got.SettingsError = ""
	want := lockOn
	want.EnabledSource, want.LockTTLSource, want.RetrySource = circulation.FromEnvironment, circulation.FromEnvironment, circulation.FromEnvironment
	if !reflect.DeepEqual(got, want) {
		t.Errorf("effective %+v, want the environment's %+v", got, want)
	}
	if _, err := s.checkOut(t); err != nil {
		t.Fatalf("check-out: %v", err)
	}
	wantCount(t, s.store, storagetest.RouteAcquire, 1)
	wantCount(t, s.store, storagetest.RouteRelease, 0) // released by the write
	wantItem(t, s.store, schemas.ItemCheckedOut, 2)
}

func TestPutSettingsIsEffectiveAtOnce(t *testing.T) {
	t.Parallel()
	s := newStack(t, lockOff)
	ctx := okapi(t)
	if got := effective(t, s.settings, ctx); got.Enabled { // cached now
		t.Fatalf("effective before put %+v, want off", got)
	}
	on, ttl := true, 4000
	put, err := s.settings.Put(ctx, locksettings.Stored{CheckOutLockFeatureEnabled: &on, LockTTL: &ttl})
	if err != nil {
		t.Fatalf("put: %v", err)
	}
	// What the entry leaves out takes the environment's values.
	want := circulation.LockSettings{Enabled: true, LockTTL: 4 * time.Second, RetryIntervals: lockOff.RetryIntervals,
		EnabledSource: circulation.FromSettings, LockTTLSource: circulation.FromSettings, RetrySource: circulation.FromEnvironment}
	if got := effective(t, s.settings, ctx); !reflect.DeepEqual(put, want) || !reflect.DeepEqual(got, want) {
		t.Errorf("put answered %+v, effective %+v; want %+v", put, got, want)
	}
	wantStored(t, s.store, `{"checkOutLockFeatureEnabled":true,"lockTtl":4000}`)
	wantCount(t, s.store, storagetest.RoutePostSetting, 1)
	if _, err := s.checkOut(t); err != nil {
		t.Fatalf("check-out: %v", err)
	}
	if locks := s.store.Granted(); len(locks) != 1 || locks[0].TTLMs != 4000 {
		t.Errorf("locks %+v, want one of 4000 ms", locks)
	}

	// A second put replaces the entry.
	off := false
	if _, err := s.settings.Put(ctx, locksettings.Stored{CheckOutLockFeatureEnabled: &off}); err != nil {
		t.Fatalf("second put: %v", err)
	}
	got := effective(t, s.settings, ctx)
	if got.Enabled || got.EnabledSource != circulation.FromSettings || got.LockTTL != lockOff.LockTTL || got.LockTTLSource != circulation.FromEnvironment {
		t.Errorf("effective after second put %+v", got)
	}
	wantStored(t, s.store, `{"checkOutLockFeatureEnabled":false}`)
	wantCount(t, s.store, storagetest.RoutePutSetting, 1)
}

func TestPutInvalidSettingsWritesNothing(t *testing.T) {
	t.Parallel()
	s := newStack(t, lockOff)
	zero, negative := 0, []int{100, -1}
	for _, stored := range []locksettings.Stored{{LockTTL: &zero}, {RetryIntervalsMs: &negative}} {
		_, err := s.settings.Put(okapi(t), stored)
		if r := refusals(t, err); len(r) != 1 || !strings.HasPrefix(r[0], "VALIDATION_FAILED: ") {
			t.Errorf("refusals %q, want one VALIDATION_FAILED", r)
		}
	}
	if calls := s.store.Calls(); len(calls) != 0 {
		t.Errorf("calls %+v, want none", calls)
	}
}

func wantStored(t *testing.T, f *storagetest.Storage, want string) {
	t.Helper()
	raw, ok := f.Setting(locksettings.Scope, locksettings.Key)
	// Stored as FOLIO stores it: a string holding the JSON object.
	var text string
	if err := json.Unmarshal(raw, &text); err != nil {
		t.Fatalf("stored setting %s (found %v) is not a string holding JSON", raw, ok)
	}
	var got, w any
	_ = json.Unmarshal([]byte(text), &got)
	_ = json.Unmarshal([]byte(want), &w)
	if !ok || !reflect.DeepEqual(got, w) {
		t.Errorf("stored setting %s (found %v), want %s", raw, ok, want)
	}
}

// TestInvalidStoredSettingsFallBackToTheEnvironment: a value that breaks
// the rules (stored before storage checked values) is not used; the
// environment's values apply and the reason is reported.
func TestInvalidStoredSettingsFallBackToTheEnvironment(t *testing.T) {
	t.Parallel()
	for _, value := range []any{
		map[string]any{"checkOutLockFeatureEnabled": true, "lockTtl": 0},
		map[string]any{"lockTtl": "abc"},
		map[string]any{"retryIntervalsMs": []int{-5}},
	} {
		s := newStack(t, lockOn)
		s.store.AddSettingUnchecked(locksettings.Scope, locksettings.Key, value)
		got := effective(t, s.settings, okapi(t))
		if got.LockTTL != lockOn.LockTTL || got.LockTTLSource != circulation.FromEnvironment ||
			!reflect.DeepEqual(got.RetryIntervals, lockOn.RetryIntervals) || got.RetrySource != circulation.FromEnvironment ||
			got.SettingsError == "" || !got.Enabled {
			t.Errorf("stored %v: effective %+v, want the lock on, the environment's values and a settings error", value, got)
		}
		if _, err := s.checkOut(t); err != nil {
			t.Errorf("stored %v: check-out failed: %v", value, err)
		}
	}
}

// TestUnreadableSettingsKeepTheLastRead: a tenant that turned the lock on in
// its settings keeps it on through a settings outage, even when the
// environment has it off: an outage must not open the way to the race.
func TestUnreadableSettingsKeepTheLastRead(t *testing.T) {
	t.Parallel()
	env := lockOn
	env.Enabled = false
	s := newStack(t, env, withSettingsClock())
	s.store.AddSetting(locksettings.Scope, locksettings.Key, map[string]any{"checkOutLockFeatureEnabled": true})
	if got := effective(t, s.settings, okapi(t)); !got.Enabled || got.EnabledSource != circulation.FromSettings {
		t.Fatalf("effective %+v, want enabled from settings", got)
	}
	// The outage: settings carried by no answer, their read failing.
	s.store.AsIfUnanswered(storagetest.RouteValidation, -1, "lockSettings")
	s.store.Refuse(storagetest.RouteGetSettings, -1, http.StatusServiceUnavailable, schemas.CodeDatabaseUnavailable)
	s.clock.Advance(2 * time.Minute) // past the cache period
	got := effective(t, s.settings, okapi(t))
	if !got.Enabled || got.SettingsError == "" {
		t.Errorf("effective during the outage %+v, want the last read (enabled) and a settings error", got)
	}
	if _, err := s.checkOut(t); err != nil {
		t.Fatalf("check-out during the outage: %v", err)
	}
	wantCount(t, s.store, storagetest.RouteAcquire, 1)
}

// TestOneInvalidStoredFieldKeepsTheOthers: a bad lockTtl (stored before
// storage checked values) does not throw away checkOutLockFeatureEnabled.
func TestOneInvalidStoredFieldKeepsTheOthers(t *testing.T) {
	t.Parallel()
	env := lockOn
	env.Enabled = false
	s := newStack(t, env)
	s.store.AddSettingUnchecked(locksettings.Scope, locksettings.Key,
		map[string]any{"checkOutLockFeatureEnabled": true, "lockTtl": 0, "retryIntervalsMs": []int{100, 200}})
	got := effective(t, s.settings, okapi(t))
	if !got.Enabled || got.EnabledSource != circulation.FromSettings || got.LockTTL != env.LockTTL ||
		got.LockTTLSource != circulation.FromEnvironment || got.RetrySource != circulation.FromSettings ||
		!strings.Contains(got.SettingsError, "lockTtl: must be from 100 to 600000 ms, got 0") {
		t.Errorf("effective %+v, want enabled and waits from settings, the environment's lockTtl, and the error named", got)
	}
}

// TestCancelledRequestStillFinishesItsWrites: the client goes away while the
// loan is being created under a lock acquired by a call of its own: the
// write phase runs on, and the lock is released.
func TestCancelledRequestStillFinishesItsWrites(t *testing.T) {
	t.Parallel()
	s := newStack(t, lockOn, withoutWaitAtStorage())
	ctx, cancel := context.WithCancel(okapi(t))
	s.store.Before(storagetest.RoutePostLoan, 1, func(storagetest.Call) { cancel() })
	res, err := s.svc.CheckOut(ctx, request())
	if err != nil {
		t.Fatalf("check-out cancelled during its writes: %v", err)
	}
	wantItem(t, s.store, schemas.ItemCheckedOut, 2)
	if loans := s.store.Loans(); len(loans) != 1 || loans[0].ID != res.Loan.ID {
		t.Errorf("loans %+v, want the one returned", loans)
	}
	if locks := s.store.Granted(); len(locks) != 1 || s.store.Live(locks[0].ID) {
		t.Errorf("locks %+v, want one, released", locks)
	}
}

// TestCheckOutRetriesAnUnheardGrantUnderTheSameLockID: storage grants the
// first acquire but its answer is lost (a 503 after the commit, or the
// connection cut). The retry names the same lock id, so storage renews the
// check-out's own lock instead of refusing it as another's (LOCK_HELD until
// the TTL runs out), and the loan is created under that lock.
func TestCheckOutRetriesAnUnheardGrantUnderTheSameLockID(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		how   storagetest.Loss
		first int // the status the unheard grant was recorded with
	}{
		{"503 after the grant", storagetest.LostUnavailable, http.StatusServiceUnavailable},
		{"connection cut after the grant", storagetest.LostCut, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := newStack(t, lockOn, withoutWaitAtStorage())
			s.store.Lose(storagetest.RouteAcquire, 1, tc.how)
			res, err := s.checkOut(t)
			if err != nil {
				t.Fatalf("check-out: %v", err)
			}
			var ids []string
			var statuses []int
			for _, c := range s.store.Calls() {
				if c.Route != storagetest.RouteAcquire {
					continue
				}
				var body struct {
					ID string `json:"id"`
				}
				if err := json.Unmarshal([]byte(c.Body), &body); err != nil || body.ID == "" {
					t.Fatalf("acquire body %s names no lock id (%v)", c.Body, err)
				}
				ids, statuses = append(ids, body.ID), append(statuses, c.Status)
			}
			if len(ids) != 2 || ids[0] != ids[1] {
				t.Fatalf("acquires named lock ids %q, want two naming the same one", ids)
			}
			if !slices.Equal(statuses, []int{tc.first, http.StatusCreated}) {
				t.Errorf("acquire statuses %v, want %d then 201", statuses, tc.first)
			}
			lockID := ids[0]
			wantWaits(t, s.clock, ms(500))
			if want := []attempt{{2, 500 * time.Millisecond}}; !reflect.DeepEqual(s.obs.acquired, want) {
				t.Errorf("observer acquired %+v, want %+v", s.obs.acquired, want)
			}
			// One lock, granted unheard, renewed, written under and
			// released by the write.
			if locks := s.store.Granted(); len(locks) != 1 || locks[0].ID != lockID || s.store.Live(locks[0].ID) {
				t.Errorf("locks %+v, want the one lock %s, released", locks, lockID)
			}
			for _, c := range s.store.Calls() {
				if c.Route == storagetest.RoutePostLoan && (c.LockID != lockID || c.Status != http.StatusCreated) {
					t.Errorf("loan created with X-Check-Out-Lock-Id %q (status %d), want %q and 201", c.LockID, c.Status, lockID)
				}
				if c.Route == storagetest.RouteRelease && c.Path != "/check-out-lock-storage/"+lockID {
					t.Errorf("released %s, want the lock %s", c.Path, lockID)
				}
			}
			wantCount(t, s.store, storagetest.RoutePostLoan, 1)
			wantCount(t, s.store, storagetest.RouteRelease, 0) // released by the write
			wantItem(t, s.store, schemas.ItemCheckedOut, 2)
			if loans := s.store.Loans(); len(loans) != 1 || loans[0].ID != res.Loan.ID || !res.Locked {
				t.Errorf("loans %+v (locked: %t), want the one returned (%s), under the lock", loans, res.Locked, res.Loan.ID)
			}
		})
	}
}

// TestTheLockDefaultIsStorages: the lock feature's default for a tenant
// that stored no setting has one home, storage's environment. Circulation
// built believing the opposite follows storage from its first check-out:
// with storage's default on, the check-out takes the lock and writes once
// (no write refused for want of it); with it off, no lock is taken.
func TestTheLockDefaultIsStorages(t *testing.T) {
	t.Parallel()
	for _, storageOn := range []bool{true, false} {
		t.Run(fmt.Sprintf("storage %t", storageOn), func(t *testing.T) {
			t.Parallel()
			store := storagetest.Start(t, storagetest.LockDefault(storageOn))
			seed(store)
			env := lockOn
			env.Enabled = !storageOn // what circulation's own variable said, before it had none
			s := stackOver(t, store, env)
			if _, err := s.checkOut(t); err != nil {
				t.Fatalf("check-out: %v", err)
			}
			acquisitions := 0
			if storageOn {
				acquisitions = 1
			}
			wantCount(t, store, storagetest.RouteAcquire, acquisitions)
			wantCount(t, store, storagetest.RoutePostLoan, 1)
			if got := effective(t, s.settings, okapi(t)); got.Enabled != storageOn || got.EnabledSource != circulation.FromEnvironment {
				t.Errorf("effective %+v, want enabled %t from the environment (storage's)", got, storageOn)
			}
		})
	}
}

// TestCheckOutStopsWhenItsClientLeavesWhileTheWriteWaits: the check-out's
// write waits at storage for the patron's lock; the client goes away
// meanwhile: the call ends, storage stops waiting, nothing is written, and
// no lock of the check-out's is left behind.
func TestCheckOutStopsWhenItsClientLeavesWhileTheWriteWaits(t *testing.T) {
	t.Parallel()
	s := newStack(t, lockOn)
	holder := s.store.Hold(patronID, time.Minute)
	before := s.store.Snapshot()
	ctx, cancel := context.WithCancel(okapi(t))
	defer cancel()
	// The client leaves a moment into the write's wait (or, on a slow
	// machine, before storage sees it: nothing is written either way).
	s.store.Before(storagetest.RouteAcquire, 1, func(storagetest.Call) { time.AfterFunc(100*time.Millisecond, cancel) })
	_, err := s.svc.CheckOut(ctx, request())
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("error %v, want context.Canceled", err)
	}
	for deadline := time.Now().Add(10 * time.Second); len(s.store.Locks()) != 1; {
		if time.Now().After(deadline) {
			t.Fatalf("locks %+v, want only the holder's", s.store.Locks())
		}
		time.Sleep(5 * time.Millisecond) // polling storage's release, which the gone client is not told of
	}
	if locks := s.store.Locks(); locks[0].ID != holder {
		t.Errorf("locks %+v, want only the holder's %s", locks, holder)
	}
	wantNoWrites(t, s.store)
	s.store.WantUnchanged(before)
}

// TestCheckOutSaysEveryRuleBrokenSinceValidation: between validation and
// the write, other check-outs bring the patron to the item limit and
// another patron's request takes the head of the item's queue; the write
// refuses for both, and the check-out says both, in FOLIO's words and
// order, nothing written.
func TestCheckOutSaysEveryRuleBrokenSinceValidation(t *testing.T) {
	t.Parallel()
	s := newStack(t, lockOn)
	lendOthers(s, itemLimit-1)
	s.store.Before(storagetest.RoutePostLoan, 1, func(storagetest.Call) {
		lendOthers(s, 1)
		s.store.AddRequest(storagetest.Request{ID: uuid.NewString(), ItemID: itemID, RequesterID: otherPatron,
			Status: "Open - Not yet filled", Position: 1})
	})
	_, err := s.checkOut(t)
	wantStrings(t, "refusals", refusals(t, err), []string{
		schemas.CodeItemRequestedByAnotherPatron + ": " + itemTitle + " (Barcode: " + itemBarcode +
			") cannot be checked out to user Lovelace, Ada because it has been requested by another patron [userBarcode=" + userBarcode + "]",
		"ITEM_LIMIT: Patron has reached maximum limit of 3 items [itemBarcode=" + itemBarcode + "] [itemLimit=3]"})
	if n := len(s.store.Loans()); n != itemLimit {
		t.Errorf("%d loans, want the %d others", n, itemLimit)
	}
	wantItem(t, s.store, schemas.ItemAvailable, 1)
}
