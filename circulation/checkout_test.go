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

	"github.com/checkoutlock/circulation"
	"github.com/checkoutlock/circulation/internal/storageclient"
	"github.com/checkoutlock/circulation/storagefake"
	"github.com/checkoutlock/schemas/locksettings"
)

// The records every test starts from: an active patron, an available item,
// and circulation rules that lend it for 3 weeks with an item limit of 3.
const (
	tenant       = "diku"
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

// stack is the real service and storage client over the fake storage.
type stack struct {
	fake     *storagefake.Fake
	storage  *storageclient.Client
	settings *circulation.Settings
	svc      *circulation.Service
	clock    *clock
	obs      *observer
}

// newStack builds the stack over a fake holding the standard records.
func newStack(t *testing.T, env circulation.LockSettings, opts ...stackOption) *stack {
	t.Helper()
	fake := storagefake.New(t)
	seed(fake)
	return stackOver(t, fake, env, opts...)
}

// stackConfig is how a stack's settings and service are built.
type stackConfig struct {
	settings circulation.SettingsConfig
	service  circulation.ServiceConfig
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

// withoutWaitAtStorage never asks storage to wait for a held lock.
func withoutWaitAtStorage() stackOption {
	return func(cfg *stackConfig, _ *clock) { cfg.service.WaitAtStorage = false }
}

func stackOver(t *testing.T, fake *storagefake.Fake, env circulation.LockSettings, opts ...stackOption) *stack {
	t.Helper()
	client := storageclient.New(fake.URL, time.Second, nil)
	t.Cleanup(client.Close)
	logger := slog.New(slog.DiscardHandler)
	s := &stack{fake: fake, storage: client, clock: &clock{now: start}, obs: &observer{}}
	cfg := stackConfig{
		settings: circulation.SettingsConfig{Env: env, TTL: time.Minute},
		service: circulation.ServiceConfig{ReleaseTimeout: time.Second, WaitAtStorage: true,
			Now: s.clock.Now, NewTimer: s.clock.NewTimer},
	}
	for _, o := range opts {
		o(&cfg, s.clock)
	}
	s.settings = circulation.NewSettings(client, cfg.settings, logger)
	s.svc = circulation.NewService(client, s.settings, s.obs, logger, cfg.service)
	return s
}

func seed(f *storagefake.Fake) {
	f.AddUser(storagefake.User{ID: patronID, Barcode: userBarcode, Active: true, PatronGroup: patronGroup,
		FirstName: "Ada", LastName: "Lovelace"})
	f.AddItem(storagefake.Item{ID: itemID, Barcode: itemBarcode, Title: itemTitle, Status: circulation.StatusAvailable,
		MaterialTypeID: materialType, PermanentLoanTypeID: loanType})
	f.AddLoanPolicy(storagefake.LoanPolicy{ID: policyID, Name: "Three weeks", Loanable: true, Duration: 3, Interval: "Weeks",
		ItemLimit: itemLimit})
	f.SetPolicyMatch(storagefake.PolicyMatch{LoanPolicyID: policyID})
}

func okapi(t *testing.T) context.Context {
	return circulation.WithOkapi(t.Context(), circulation.Okapi{Tenant: tenant, RequestID: requestID})
}

func request() circulation.CheckOutRequest {
	return circulation.CheckOutRequest{ItemBarcode: itemBarcode, UserBarcode: userBarcode, ServicePointID: servicePoint}
}

func (s *stack) checkOut(t *testing.T) (circulation.CheckOutResult, error) {
	t.Helper()
	return s.svc.CheckOut(okapi(t), request())
}

// wantCount checks how many calls route got.
func wantCount(t *testing.T, f *storagefake.Fake, route string, want int) {
	t.Helper()
	if got := f.Count(route); got != want {
		t.Errorf("%s called %d times, want %d", route, got, want)
	}
}

// wantNoWrites checks that neither the item nor any loan was written.
func wantNoWrites(t *testing.T, f *storagefake.Fake) {
	t.Helper()
	wantCount(t, f, storagefake.RoutePutItem, 0)
	wantCount(t, f, storagefake.RoutePostLoan, 0)
	wantCount(t, f, storagefake.RoutePutLoan, 0)
}

func wantItem(t *testing.T, f *storagefake.Fake, status string, version int) {
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
func routes(f *storagefake.Fake) []string {
	var out []string
	for _, c := range f.Calls() {
		out = append(out, c.Route)
	}
	return out
}

func TestCheckOutWithFeatureOffMakesNoLockCalls(t *testing.T) {
	t.Parallel()
	s := newStack(t, lockOff)
	res, err := s.checkOut(t)
	if err != nil {
		t.Fatalf("check-out: %v", err)
	}
	for _, c := range s.fake.Calls() {
		if strings.HasPrefix(c.Path, "/check-out-lock-storage") || c.LockID != "" {
			t.Errorf("lock call or header with the feature off: %+v", c)
		}
	}
	// Validation's one read (which carries the settings) and the one
	// write (item and loan together).
	wantStrings(t, "calls", routes(s.fake), []string{storagefake.RouteValidation, storagefake.RoutePostLoan})

	loans := s.fake.Loans()
	wantLoan := storagefake.Loan{ID: res.Loan.ID, UserID: patronID, ItemID: itemID, Status: "Open", Action: "checkedout",
		LoanDate: "2025-03-01T10:00:00.000Z", DueDate: "2025-03-22T10:00:00.000Z", LoanPolicyID: policyID,
		CheckoutServicePointID: servicePoint}
	if len(loans) != 1 || loans[0] != wantLoan {
		t.Errorf("stored loans %+v, want [%+v]", loans, wantLoan)
	}
	wantItem(t, s.fake, circulation.StatusCheckedOut, 2)
	if res.Locked || res.Item.Status != circulation.StatusCheckedOut || res.Item.Version != 2 || res.Patron.ID != patronID {
		t.Errorf("result locked %v, item %q v%d, patron %s", res.Locked, res.Item.Status, res.Item.Version, res.Patron.ID)
	}
	if len(s.obs.acquired)+len(s.obs.notAcquired)+len(s.obs.releases) != 0 {
		t.Errorf("observer heard of locks with the feature off: %+v", s.obs)
	}
}

func TestCheckOutUnderAFreeLock(t *testing.T) {
	t.Parallel()
	s := newStack(t, lockOn)
	res, err := s.checkOut(t)
	if err != nil {
		t.Fatalf("check-out: %v", err)
	}
	wantCount(t, s.fake, storagefake.RouteAcquire, 1)
	// The write released the lock with the loan: no call of its own.
	wantCount(t, s.fake, storagefake.RouteRelease, 0)
	locks := s.fake.Locks()
	if len(locks) != 1 || locks[0].UserID != patronID || locks[0].TTLMs != 3000 || !locks[0].Released {
		t.Fatalf("locks %+v, want one 3000 ms lock of the patron, released", locks)
	}
	lockID := locks[0].ID

	// Acquire, then check the item out (item and loan in one write, fenced
	// by the lock, the item limit re-checked in it, the lock released in
	// it): in that order.
	var order []string
	for _, c := range s.fake.Calls() {
		switch c.Route {
		case storagefake.RouteAcquire, storagefake.RoutePutItem, storagefake.RouteRelease, storagefake.RouteOpenCount:
			order = append(order, c.Route)
		case storagefake.RoutePostLoan:
			order = append(order, c.Route)
			if c.LockID != lockID || c.ReleaseLock != "true" || c.Status != http.StatusCreated {
				t.Errorf("loan created with X-Check-Out-Lock-Id %q, X-Check-Out-Release-Lock %q (status %d), want %q and true",
					c.LockID, c.ReleaseLock, c.Status, lockID)
			}
		}
		if c.Route == storagefake.RouteRelease && c.Path != "/check-out-lock-storage/"+lockID {
			t.Errorf("released %s, want the acquired lock %s", c.Path, lockID)
		}
	}
	wantStrings(t, "order under the lock", order, []string{storagefake.RouteAcquire, storagefake.RoutePostLoan})

	wantItem(t, s.fake, circulation.StatusCheckedOut, 2)
	loans := s.fake.Loans()
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
	s.fake.AddSetting(locksettings.Scope, locksettings.Key, map[string]any{"checkOutLockFeatureEnabled": false})
	if _, err := s.checkOut(t); err != nil {
		t.Fatalf("check-out: %v", err)
	}
	wantStrings(t, "calls", routes(s.fake), []string{storagefake.RouteValidation, storagefake.RoutePostLoan})
	if got, ok := s.settings.Cached(okapi(t)); !ok || got.Enabled || got.EnabledSource != circulation.FromSettings {
		t.Errorf("cached settings %+v (%t), want the stored off", got, ok)
	}
	wantItem(t, s.fake, circulation.StatusCheckedOut, 2)
}

// TestCheckOutReadsTheSettingsApartFromAnOlderStorage: a storage whose
// validation does not carry the settings is asked for them in a call of
// their own, once, and they apply.
func TestCheckOutReadsTheSettingsApartFromAnOlderStorage(t *testing.T) {
	t.Parallel()
	s := newStack(t, lockOn)
	s.fake.OmitLockSettings()
	s.fake.AddSetting(locksettings.Scope, locksettings.Key, map[string]any{"checkOutLockFeatureEnabled": false})
	if _, err := s.checkOut(t); err != nil {
		t.Fatalf("check-out: %v", err)
	}
	wantStrings(t, "calls", routes(s.fake), []string{storagefake.RouteValidation, storagefake.RouteGetSettings, storagefake.RoutePostLoan})
	wantItem(t, s.fake, circulation.StatusCheckedOut, 2)
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
	wantStrings(t, "calls", routes(s.fake), []string{storagefake.RouteValidation})
	if _, err := s.checkOut(t); err != nil {
		t.Fatalf("check-out: %v", err)
	}
	wantCount(t, s.fake, storagefake.RouteGetSettings, 0)
}

// TestCheckOutIsThreeCalls: once the settings are cached, a check-out under
// the lock makes exactly three calls to storage: validation's one read, the
// acquisition, and the write (which re-checks the item limit and releases
// the lock).
func TestCheckOutIsThreeCalls(t *testing.T) {
	t.Parallel()
	s := newStack(t, lockOn)
	s.fake.AddItem(storagefake.Item{ID: "33333333-3333-4333-8333-00000000000b", Barcode: "second", Title: "Second",
		Status: circulation.StatusAvailable, MaterialTypeID: materialType, PermanentLoanTypeID: loanType})
	if _, err := s.checkOut(t); err != nil {
		t.Fatalf("first check-out: %v", err)
	}
	before := len(s.fake.Calls())
	req := request()
	req.ItemBarcode = "second"
	if _, err := s.svc.CheckOut(okapi(t), req); err != nil {
		t.Fatalf("second check-out: %v", err)
	}
	wantStrings(t, "a check-out's calls", routes(s.fake)[before:], []string{storagefake.RouteValidation, storagefake.RouteAcquire,
		storagefake.RoutePostLoan})
	var write storagefake.Call
	for _, c := range s.fake.Calls()[before:] {
		if c.Route == storagefake.RoutePostLoan {
			write = c
		}
	}
	if write.ReleaseLock != "true" || write.Status != http.StatusCreated {
		t.Errorf("the write carried release %q (status %d), want the lock released with it", write.ReleaseLock, write.Status)
	}
}

func TestCheckOutRetriesAHeldLock(t *testing.T) {
	t.Parallel()
	s := newStack(t, lockOn)
	s.fake.HoldLock(2)
	if _, err := s.checkOut(t); err != nil {
		t.Fatalf("check-out: %v", err)
	}
	wantCount(t, s.fake, storagefake.RouteAcquire, 3)
	wantWaits(t, s.clock, ms(500, 500))
	wantCount(t, s.fake, storagefake.RouteRelease, 0) // released by the write
	wantItem(t, s.fake, circulation.StatusCheckedOut, 2)
	if n := len(s.fake.Loans()); n != 1 {
		t.Errorf("%d loans, want 1", n)
	}
	if want := []attempt{{3, time.Second}}; !reflect.DeepEqual(s.obs.acquired, want) {
		t.Errorf("observer acquired %+v, want %+v", s.obs.acquired, want)
	}
}

func TestCheckOutGivesUpOnALockHeldForever(t *testing.T) {
	t.Parallel()
	s := newStack(t, lockOn)
	s.fake.HoldLock(-1)
	before := s.fake.Dump()
	_, err := s.checkOut(t)
	e := wantError(t, err, errs.KindInvalid, schemas.CodeUnableToAcquireLock)
	if e.Message != "unable to acquire lock" {
		t.Errorf("message %q, want FOLIO's %q", e.Message, "unable to acquire lock")
	}
	want := []errs.Parameter{{Key: "userBarcode", Value: userBarcode}, {Key: "attempts", Value: "4"}}
	if !reflect.DeepEqual(e.Parameters, want) {
		t.Errorf("parameters %+v, want %+v", e.Parameters, want)
	}
	wantCount(t, s.fake, storagefake.RouteAcquire, 4)
	wantWaits(t, s.clock, ms(500, 500, 1000))
	wantNoWrites(t, s.fake)
	wantCount(t, s.fake, storagefake.RouteRelease, 0)
	s.fake.WantUnchanged(t, before)
	if want := []attempt{{4, 2 * time.Second}}; !reflect.DeepEqual(s.obs.notAcquired, want) {
		t.Errorf("observer notAcquired %+v, want %+v", s.obs.notAcquired, want)
	}
}

func TestCheckOutDoesNotRetryARefusedAcquire(t *testing.T) {
	t.Parallel()
	s := newStack(t, lockOn)
	s.fake.FailAcquire(http.StatusUnprocessableEntity, "VALIDATION_FAILED")
	_, err := s.checkOut(t)
	// Storage's reason reaches the client as a refusal, not a 500.
	wantError(t, err, errs.KindInvalid, schemas.CodeValidation)
	wantCount(t, s.fake, storagefake.RouteAcquire, 1)
	wantWaits(t, s.clock, nil)
	wantNoWrites(t, s.fake)
	wantCount(t, s.fake, storagefake.RouteRelease, 0)
}

func TestCheckOutRetriesAnUnavailableLockStore(t *testing.T) {
	t.Parallel()
	s := newStack(t, lockOn)
	s.fake.FailAcquire(http.StatusServiceUnavailable, "DATABASE_UNAVAILABLE")
	_, err := s.checkOut(t)
	wantError(t, err, errs.KindUnavailable, schemas.CodeStorageUnavailable)
	wantCount(t, s.fake, storagefake.RouteAcquire, 4)
	wantWaits(t, s.clock, ms(500, 500, 1000))
	wantNoWrites(t, s.fake)
}

// TestCheckOutRechecksTheItemLimitUnderTheLock: the item limit is counted
// again in the write, under the lock: a check-out validated below the limit
// is refused when other check-outs reached it meanwhile.
func TestCheckOutRechecksTheItemLimitUnderTheLock(t *testing.T) {
	t.Parallel()
	s := newStack(t, lockOn)
	// Validation counts 2; by the write, another check-out has made it 3.
	s.fake.OpenCounts(itemLimit-1, itemLimit)
	_, err := s.checkOut(t)
	wantStrings(t, "refusals", refusals(t, err), []string{
		"ITEM_LIMIT: Patron has reached maximum limit of 3 items [itemBarcode=" + itemBarcode + "] [itemLimit=3]"})
	wantCount(t, s.fake, storagefake.RouteAcquire, 1)
	wantCount(t, s.fake, storagefake.RouteRelease, 1)
	if locks := s.fake.Locks(); len(locks) != 1 || !locks[0].Released {
		t.Errorf("locks %+v, want one, released", locks)
	}
	// The write was refused by storage's count in it: nothing written.
	if n := len(s.fake.Loans()); n != 0 {
		t.Errorf("%d loans, want none", n)
	}
	wantItem(t, s.fake, circulation.StatusAvailable, 1)
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
		s.fake.SetChargedOutLimit(storagefake.ChargedOutLimit{Limit: 2, Message: "Maximum items charged out"})
		// Validation counts the patron's loans for the charged-out limit,
		// then for the item limit.
		s.fake.OpenCounts(2, 0)
		before := s.fake.Dump()
		_, err := s.checkOut(t)
		wantStrings(t, "refusals", refusals(t, err), []string{refusal})
		wantCount(t, s.fake, storagefake.RouteAcquire, 0)
		s.fake.WantUnchanged(t, before)
	})
	t.Run("in the write", func(t *testing.T) {
		t.Parallel()
		s := newStack(t, lockOn)
		s.fake.SetChargedOutLimit(storagefake.ChargedOutLimit{Limit: 2, Message: "Maximum items charged out"})
		// Validation counts 1; by the write (which counts for the item
		// limit first), another check-out has made it 2.
		s.fake.OpenCounts(1, 0, 0, 2)
		_, err := s.checkOut(t)
		wantStrings(t, "refusals", refusals(t, err), []string{refusal})
		wantCount(t, s.fake, storagefake.RouteAcquire, 1)
		if n := len(s.fake.Loans()); n != 0 {
			t.Errorf("%d loans, want none", n)
		}
		wantItem(t, s.fake, circulation.StatusAvailable, 1)
		if locks := s.fake.Locks(); len(locks) != 1 || !locks[0].Released {
			t.Errorf("locks %+v, want one, released", locks)
		}
	})
	t.Run("below the limit", func(t *testing.T) {
		t.Parallel()
		s := newStack(t, lockOn)
		s.fake.SetChargedOutLimit(storagefake.ChargedOutLimit{Limit: 2, Message: "Maximum items charged out"})
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
		s.fake.AddRequest(storagefake.Request{ID: theirs, ItemID: itemID, RequesterID: otherPatron, Status: "Open - Awaiting pickup", Position: 1})
		s.fake.AddRequest(storagefake.Request{ID: mine, ItemID: itemID, RequesterID: patronID, Status: "Open - Not yet filled", Position: 2})
		before := s.fake.Dump()
		_, err := s.checkOut(t)
		wantStrings(t, "refusals", refusals(t, err), []string{refused})
		wantCount(t, s.fake, storagefake.RouteAcquire, 0)
		s.fake.WantUnchanged(t, before)
	})
	t.Run("the borrower's first: filled", func(t *testing.T) {
		t.Parallel()
		s := newStack(t, lockOn)
		s.fake.AddRequest(storagefake.Request{ID: mine, ItemID: itemID, RequesterID: patronID, Status: "Open - Awaiting pickup", Position: 1})
		s.fake.AddRequest(storagefake.Request{ID: later, ItemID: itemID, RequesterID: otherPatron, Status: "Open - Not yet filled", Position: 2})
		if _, err := s.checkOut(t); err != nil {
			t.Fatalf("the requester's check-out: %v", err)
		}
		want := []storagefake.Request{
			{ID: mine, ItemID: itemID, RequesterID: patronID, Status: "Closed - Filled"},
			{ID: later, ItemID: itemID, RequesterID: otherPatron, Status: "Open - Not yet filled", Position: 1},
		}
		if got := s.fake.Requests(); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("requests %+v, want %+v", got, want)
		}
	})
	t.Run("another patron's first since validation", func(t *testing.T) {
		t.Parallel()
		s := newStack(t, lockOn)
		s.fake.OnArrival(func(route string) {
			if route == storagefake.RoutePostLoan {
				s.fake.AddRequest(storagefake.Request{ID: theirs, ItemID: itemID, RequesterID: otherPatron, Status: "Open - Awaiting pickup", Position: 1})
			}
		})
		_, err := s.checkOut(t)
		wantStrings(t, "refusals", refusals(t, err), []string{refused})
		if n := len(s.fake.Loans()); n != 0 {
			t.Errorf("%d loans, want none", n)
		}
		wantItem(t, s.fake, circulation.StatusAvailable, 1)
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
		s.fake.AddLoanPolicy(storagefake.LoanPolicy{ID: policyID, Name: "Reference only", Loanable: false})
		req := request()
		req.Overrides = circulation.Overrides{ItemNotLoanable: true, DueDate: due, Comment: "For the weekend"}
		res, err := s.svc.CheckOut(okapi(t), req)
		if err != nil {
			t.Fatalf("the override: %v", err)
		}
		loans := s.fake.Loans()
		if len(loans) != 1 || loans[0].Action != circulation.ActionOverride || loans[0].DueDate != "2026-12-24T12:00:00.000Z" ||
			res.Loan.ActionComment != "For the weekend" {
			t.Errorf("loan %+v (answered %+v), want due at the override's date, made through the override", loans, res.Loan)
		}
	})
	t.Run("a block not overridden still refuses", func(t *testing.T) {
		t.Parallel()
		s := newStack(t, lockOn)
		s.fake.AddManualBlock(storagefake.ManualBlock{UserID: patronID, Desc: "Unpaid fines", Borrowing: true})
		req := request()
		req.Overrides = circulation.Overrides{ItemLimit: true, Comment: "x"}
		_, err := s.svc.CheckOut(okapi(t), req)
		wantStrings(t, "refusals", refusals(t, err), []string{"USER_IS_BLOCKED_MANUALLY: Patron blocked from borrowing [reason=Unpaid fines]"})
	})
	t.Run("the patron's blocks, at the write too", func(t *testing.T) {
		t.Parallel()
		s := newStack(t, lockOn)
		s.fake.AddManualBlock(storagefake.ManualBlock{UserID: patronID, Desc: "Unpaid fines", Borrowing: true})
		s.fake.SetChargedOutLimit(storagefake.ChargedOutLimit{Limit: 0, Message: "No more loans"})
		req := request()
		req.Overrides = circulation.Overrides{PatronBlock: true, Comment: "Paid at the desk"}
		if _, err := s.svc.CheckOut(okapi(t), req); err != nil {
			t.Fatalf("the override of the patron's blocks: %v", err)
		}
		if loans := s.fake.Loans(); len(loans) != 1 || loans[0].Action != circulation.ActionOverride {
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
	all := "userId=" + patronID
	byMT := "materialTypeId=" + materialType + "&userId=" + patronID
	byLT := "loanTypeId=" + loanType + "&userId=" + patronID
	byBoth := "loanTypeId=" + loanType + "&materialTypeId=" + materialType + "&userId=" + patronID
	for _, tc := range []struct {
		name          string
		pg, mt, lt    bool
		code, message string
		query         string
	}{
		{"no criterion", false, false, false, "ITEM_LIMIT", limit3, all},
		{"patron group only", true, false, false, "ITEM_LIMIT", limit3, all},
		{"material type", false, true, false, "ITEM_LIMIT_MATERIAL_TYPE", limit3 + " for material type", byMT},
		{"loan type", false, false, true, "ITEM_LIMIT_LOAN_TYPE", limit3 + " for loan type", byLT},
		{"material type and loan type", false, true, true, "ITEM_LIMIT_MATERIAL_TYPE_LOAN_TYPE",
			limit3 + " for combination of material type and loan type", byBoth},
		{"patron group and material type", true, true, false, "ITEM_LIMIT_PATRON_GROUP_MATERIAL_TYPE",
			limit3 + " for combination of patron group and material type", byMT},
		{"patron group and loan type", true, false, true, "ITEM_LIMIT_PATRON_GROUP_LOAN_TYPE",
			limit3 + " for combination of patron group and loan type", byLT},
		{"all three", true, true, true, "ITEM_LIMIT_PATRON_GROUP_MATERIAL_TYPE_LOAN_TYPE",
			limit3 + " for combination of patron group, material type and loan type", byBoth},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := newStack(t, lockOn)
			s.fake.SetPolicyMatch(storagefake.PolicyMatch{LoanPolicyID: policyID, PatronGroupMatch: tc.pg,
				MaterialTypeMatch: tc.mt, LoanTypeMatch: tc.lt})
			s.fake.OpenCounts(itemLimit)
			_, err := s.checkOut(t)
			wantStrings(t, "refusals", refusals(t, err), []string{
				tc.code + ": " + tc.message + " [itemBarcode=" + itemBarcode + "] [itemLimit=3]"})
			for _, c := range s.fake.Calls() {
				if c.Route == storagefake.RouteOpenCount && c.Query != tc.query {
					t.Errorf("open-count query %q, want %q", c.Query, tc.query)
				}
			}
			// Refused at validation: no lock taken.
			wantCount(t, s.fake, storagefake.RouteAcquire, 0)
			wantNoWrites(t, s.fake)
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
	for _, m := range []storagefake.PolicyMatch{{}, {PatronGroupMatch: true}} {
		s := newStack(t, lockOn)
		s.fake.IgnoreUnscopedItemLimits()
		m.LoanPolicyID = policyID
		s.fake.SetPolicyMatch(m)
		s.fake.OpenCounts(itemLimit, itemLimit)
		if _, err := s.checkOut(t); err != nil {
			t.Fatalf("match %+v: check-out refused: %v", m, err)
		}
	}
	s := newStack(t, lockOn)
	s.fake.IgnoreUnscopedItemLimits()
	s.fake.SetPolicyMatch(storagefake.PolicyMatch{LoanPolicyID: policyID, PatronGroupMatch: true, LoanTypeMatch: true})
	s.fake.OpenCounts(itemLimit)
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
		s.fake.AddItem(storagefake.Item{ID: id, Barcode: fmt.Sprintf("other-%d", i), Title: "Other", Status: status,
			MaterialTypeID: materialType, PermanentLoanTypeID: loanType})
		s.fake.AddLoan(storagefake.Loan{ID: fmt.Sprintf("99999999-9999-4999-8999-%012d", i+1),
			UserID: patronID, ItemID: id, Status: "Open", Action: "checkedout", LoanDate: "2025-02-01T10:00:00.000Z"})
	}
	if _, err := s.checkOut(t); err != nil {
		t.Fatalf("check-out with 2 of 3 counted: %v", err)
	}
	// Now the patron has three: the next check-out is refused.
	s.fake.AddItem(storagefake.Item{ID: "33333333-3333-4333-8333-000000000009", Barcode: "i-9", Title: "Next",
		Status: circulation.StatusAvailable, MaterialTypeID: materialType, PermanentLoanTypeID: loanType})
	req := request()
	req.ItemBarcode = "i-9"
	_, err := s.svc.CheckOut(okapi(t), req)
	wantStrings(t, "refusals", refusals(t, err), []string{
		"ITEM_LIMIT: Patron has reached maximum limit of 3 items [itemBarcode=i-9] [itemLimit=3]"})
}

// TestARefusedCheckOutIsAnsweredWhenTheReleaseFails: a write that wrote
// nothing leaves the lock held, so the check-out releases it by a call of
// its own; that call failing changes nothing in the answer.
func TestARefusedCheckOutIsAnsweredWhenTheReleaseFails(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		status   int
		attempts int // a transient failure is retried twice
		kind     errs.Kind
	}{
		{"storage unavailable", http.StatusServiceUnavailable, 3, errs.KindUnavailable},
		{"storage failed", http.StatusInternalServerError, 1, errs.KindInternal},
		{"lock gone", http.StatusNotFound, 1, errs.KindNotFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := newStack(t, lockOn)
			s.fake.FailLoanCreation(false)
			s.fake.FailRelease(tc.status)
			_, err := s.checkOut(t)
			wantError(t, err, errs.KindUnavailable, schemas.CodeStorageUnavailable)
			if loans := s.fake.Loans(); len(loans) != 0 {
				t.Errorf("stored loans %+v, want none", loans)
			}
			wantItem(t, s.fake, circulation.StatusAvailable, 1)
			wantCount(t, s.fake, storagefake.RouteRelease, tc.attempts)
			if len(s.obs.releases) != 1 || !errs.IsKind(s.obs.releases[0], tc.kind) {
				t.Errorf("observer releases %v, want one of kind %d", s.obs.releases, tc.kind)
			}
			if locks := s.fake.Locks(); len(locks) != 1 || locks[0].Released {
				t.Errorf("locks %+v, want one, not released (it expires by itself)", locks)
			}
		})
	}
}

// TestCheckOutLeavesTheItemWhenTheLoanFails: item and loan are one write,
// so a loan that fails leaves the item as it was: nothing to put back.
func TestCheckOutLeavesTheItemWhenTheLoanFails(t *testing.T) {
	t.Parallel()
	s := newStack(t, lockOn)
	s.fake.FailLoanCreation(false)
	_, err := s.checkOut(t)
	wantError(t, err, errs.KindUnavailable, schemas.CodeStorageUnavailable)
	if n := len(s.fake.Loans()); n != 0 {
		t.Errorf("%d loans, want 0", n)
	}
	wantItem(t, s.fake, circulation.StatusAvailable, 1)
	wantCount(t, s.fake, storagefake.RoutePutItem, 0)
	wantCount(t, s.fake, storagefake.RouteLoan, 1) // the read-back found nothing
	wantCount(t, s.fake, storagefake.RouteRelease, 1)
	if locks := s.fake.Locks(); len(locks) != 1 || !locks[0].Released {
		t.Errorf("locks %+v, want one, released", locks)
	}
}

func TestCheckOutReadsBackAnAmbiguousLoanCreation(t *testing.T) {
	t.Parallel()
	s := newStack(t, lockOn)
	s.fake.FailLoanCreation(true)
	res, err := s.checkOut(t)
	if err != nil {
		t.Fatalf("check-out: %v", err)
	}
	loans := s.fake.Loans()
	if len(loans) != 1 || loans[0].ID != res.Loan.ID || loans[0].Status != "Open" {
		t.Errorf("stored loans %+v, want the returned %s, open", loans, res.Loan.ID)
	}
	wantItem(t, s.fake, circulation.StatusCheckedOut, 2)
	wantCount(t, s.fake, storagefake.RoutePutItem, 0)
	wantCount(t, s.fake, storagefake.RouteLoan, 1)
	// The write that committed released the lock with the loan, but its
	// answer, which said so, was lost: the check-out releases the lock by
	// a call of its own, which finds it gone.
	wantCount(t, s.fake, storagefake.RouteRelease, 1)
	for _, c := range s.fake.Calls() {
		if c.Route == storagefake.RouteRelease && c.Status != http.StatusNotFound {
			t.Errorf("the release after the lost answer answered %d, want 404: the write had released the lock", c.Status)
		}
	}
	if locks := s.fake.Locks(); len(locks) != 1 || !locks[0].Released {
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
	s := newStack(t, lockOn)
	s.fake.KeepLocksOnWrite()
	if _, err := s.checkOut(t); err != nil {
		t.Fatalf("check-out: %v", err)
	}
	wantCount(t, s.fake, storagefake.RouteRelease, 1)
	locks := s.fake.Locks()
	if len(locks) != 1 || !locks[0].Released {
		t.Fatalf("locks %+v, want one, released", locks)
	}
	for _, c := range s.fake.Calls() {
		if c.Route == storagefake.RouteRelease && (c.Status != http.StatusNoContent || c.Path != "/check-out-lock-storage/"+locks[0].ID) {
			t.Errorf("release %s answered %d, want 204 for lock %s", c.Path, c.Status, locks[0].ID)
		}
	}
	if len(s.obs.releases) != 1 || s.obs.releases[0] != nil {
		t.Errorf("observer releases %v, want one that succeeded", s.obs.releases)
	}
}

func TestCheckOutWritesNothingWhenTheLockIsLost(t *testing.T) {
	t.Parallel()
	s := newStack(t, lockOn)
	s.fake.LoseLockBeforeLoan()
	_, err := s.checkOut(t)
	wantError(t, err, errs.KindConflict, schemas.CodeLockLost)
	if n := len(s.fake.Loans()); n != 0 {
		t.Errorf("%d loans, want 0", n)
	}
	wantItem(t, s.fake, circulation.StatusAvailable, 1)
	wantCount(t, s.fake, storagefake.RouteLoan, 0) // a refusal is not ambiguous
	if len(s.obs.releases) != 1 || !errs.IsKind(s.obs.releases[0], errs.KindNotFound) {
		t.Errorf("observer releases %v, want one not found (the lock had expired)", s.obs.releases)
	}
}

func TestCheckOutWithStorageDown(t *testing.T) {
	t.Parallel()
	s := newStack(t, lockOn)
	before := s.fake.Dump()
	s.fake.Down()
	_, err := s.checkOut(t)
	wantError(t, err, errs.KindUnavailable, schemas.CodeStorageUnavailable)
	s.fake.WantUnchanged(t, before)
	if calls := s.fake.Calls(); len(calls) != 0 {
		t.Errorf("a server that is down got calls: %+v", calls)
	}
	if len(s.obs.acquired)+len(s.obs.notAcquired) != 0 {
		t.Errorf("observer heard of lock attempts: %+v", s.obs)
	}
}

func TestCheckOutStopsWhenCancelledWhileWaitingForTheLock(t *testing.T) {
	t.Parallel()
	s := newStack(t, lockOn)
	s.fake.HoldLock(-1)
	before := s.fake.Dump()
	ctx, cancel := context.WithCancel(okapi(t))
	defer cancel()
	s.clock.cancelOnWait(cancel)
	_, err := s.svc.CheckOut(ctx, request())
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("error %v, want context.Canceled", err)
	}
	wantCount(t, s.fake, storagefake.RouteAcquire, 1)
	wantWaits(t, s.clock, ms(500))
	wantNoWrites(t, s.fake)
	wantCount(t, s.fake, storagefake.RouteRelease, 0)
	s.fake.WantUnchanged(t, before)
	if want := []attempt{{1, 500 * time.Millisecond}}; !reflect.DeepEqual(s.obs.notAcquired, want) {
		t.Errorf("observer notAcquired %+v, want %+v", s.obs.notAcquired, want)
	}
}

func TestCheckOutReleasesTheLockOfACancelledRequest(t *testing.T) {
	t.Parallel()
	s := newStack(t, lockOn)
	ctx, cancel := context.WithCancel(okapi(t))
	defer cancel()
	s.obs.onAcquired = cancel // the client goes away once the lock is held
	_, err := s.svc.CheckOut(ctx, request())
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("error %v, want context.Canceled", err)
	}
	wantNoWrites(t, s.fake)
	wantItem(t, s.fake, circulation.StatusAvailable, 1)
	locks := s.fake.Locks()
	if len(locks) != 1 || !locks[0].Released {
		t.Errorf("locks %+v, want one, released", locks)
	}
	for _, c := range s.fake.Calls() {
		if c.Route == storagefake.RouteRelease && (c.Status != http.StatusNoContent || c.Tenant != tenant || c.RequestID != requestID) {
			t.Errorf("release %+v, want 204 with the request's tenant and id", c)
		}
	}
	wantCount(t, s.fake, storagefake.RouteRelease, 1)
}

func TestCheckOutCollectsEveryRefusal(t *testing.T) {
	t.Parallel()
	fake := storagefake.New(t)
	fake.AddUser(storagefake.User{ID: patronID, Barcode: userBarcode, Active: false, PatronGroup: patronGroup, LastName: "L"})
	fake.AddItem(storagefake.Item{ID: itemID, Barcode: itemBarcode, Title: itemTitle, Status: circulation.StatusCheckedOut,
		MaterialTypeID: materialType, PermanentLoanTypeID: loanType})
	fake.AddLoanPolicy(storagefake.LoanPolicy{ID: policyID, Name: "Three weeks", Loanable: true, Duration: 3, Interval: "Weeks"})
	fake.SetPolicyMatch(storagefake.PolicyMatch{LoanPolicyID: policyID})
	fake.AddLoan(storagefake.Loan{ID: otherLoan, UserID: otherPatron, ItemID: itemID, Status: "Open", Action: "checkedout",
		LoanDate: "2025-02-01T10:00:00.000Z"})
	s := stackOver(t, fake, lockOn)
	before := fake.Dump()
	_, err := s.checkOut(t)
	wantStrings(t, "refusals", refusals(t, err), []string{
		"USER_IS_INACTIVE: Cannot check out to inactive user [userBarcode=" + userBarcode + "]",
		"ITEM_ALREADY_CHECKED_OUT: Item is already checked out [itemBarcode=" + itemBarcode + "]",
		"ITEM_HAS_OPEN_LOAN: Cannot check out item that already has an open loan [itemBarcode=" + itemBarcode + "]",
	})
	wantCount(t, fake, storagefake.RouteAcquire, 0)
	if w := fake.Writes(); len(w) != 0 {
		t.Errorf("writes %+v, want none", w)
	}
	fake.WantUnchanged(t, before)
}

func TestCheckOutRefusals(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		setup func(f *storagefake.Fake) circulation.CheckOutRequest
		want  []string
	}{
		{"unknown barcodes", func(f *storagefake.Fake) circulation.CheckOutRequest {
			return circulation.CheckOutRequest{ItemBarcode: "no-item", UserBarcode: "no-user", ServicePointID: servicePoint}
		}, []string{
			"USER_BARCODE_NOT_FOUND: Could not find user with matching barcode [userBarcode=no-user]",
			"ITEM_BARCODE_NOT_FOUND: No item with barcode no-item could be found [itemBarcode=no-item]",
		}},
		{"not loanable", func(f *storagefake.Fake) circulation.CheckOutRequest {
			f.AddLoanPolicy(storagefake.LoanPolicy{ID: policyID, Name: "Reference only", Loanable: false})
			return request()
		}, []string{
			"ITEM_NOT_LOANABLE: Item is not loanable [itemBarcode=" + itemBarcode + "] [loanPolicyName=Reference only]",
		}},
		{"at the item limit and not loanable: both, the limit first", func(f *storagefake.Fake) circulation.CheckOutRequest {
			f.AddLoanPolicy(storagefake.LoanPolicy{ID: policyID, Name: "Reference only", Loanable: false, ItemLimit: 1})
			f.SetPolicyMatch(storagefake.PolicyMatch{LoanPolicyID: policyID, MaterialTypeMatch: true})
			lent := "33333333-3333-4333-8333-0000000000b1"
			f.AddItem(storagefake.Item{ID: lent, Barcode: "lent-1", Title: "Lent", Status: circulation.StatusCheckedOut,
				MaterialTypeID: materialType, PermanentLoanTypeID: loanType})
			f.AddLoan(storagefake.Loan{ID: otherLoan, UserID: patronID, ItemID: lent, Status: "Open", Action: "checkedout",
				LoanDate: "2025-02-01T10:00:00.000Z"})
			return request()
		}, []string{
			"ITEM_LIMIT_MATERIAL_TYPE: Patron has reached maximum limit of 1 items for material type [itemBarcode=" + itemBarcode + "] [itemLimit=1]",
			"ITEM_NOT_LOANABLE: Item is not loanable [itemBarcode=" + itemBarcode + "] [loanPolicyName=Reference only]",
		}},
		{"manual blocks in force for borrowing: one refusal naming them all", func(f *storagefake.Fake) circulation.CheckOutRequest {
			f.AddManualBlock(storagefake.ManualBlock{UserID: patronID, Desc: "Unpaid fines", PatronMessage: "Please see the desk", Borrowing: true})
			f.AddManualBlock(storagefake.ManualBlock{UserID: patronID, Desc: "Damaged a book", Borrowing: true,
				ExpirationDate: time.Now().Add(time.Hour).UTC().Format(time.RFC3339)})
			// Not in force: expired, renewals only, someone else's.
			f.AddManualBlock(storagefake.ManualBlock{UserID: patronID, Desc: "Old", Borrowing: true, ExpirationDate: "2020-01-01T00:00:00Z"})
			f.AddManualBlock(storagefake.ManualBlock{UserID: patronID, Desc: "Renewals", Borrowing: false})
			f.AddManualBlock(storagefake.ManualBlock{UserID: otherPatron, Desc: "Other", Borrowing: true})
			return request()
		}, []string{
			"USER_IS_BLOCKED_MANUALLY: Patron blocked from borrowing [reason=Unpaid fines;Damaged a book] [patronMessage=Please see the desk]",
		}},
		{"blocked and inactive: the block first, as FOLIO", func(f *storagefake.Fake) circulation.CheckOutRequest {
			f.AddUser(storagefake.User{ID: "22222222-2222-4222-8222-00000000000b", Barcode: "blocked-inactive", Active: false,
				PatronGroup: patronGroup, LastName: "B"})
			f.AddManualBlock(storagefake.ManualBlock{UserID: "22222222-2222-4222-8222-00000000000b", Desc: "Lost card", Borrowing: true})
			return circulation.CheckOutRequest{ItemBarcode: itemBarcode, UserBarcode: "blocked-inactive", ServicePointID: servicePoint}
		}, []string{
			"USER_IS_BLOCKED_MANUALLY: Patron blocked from borrowing [reason=Lost card]",
			"USER_IS_INACTIVE: Cannot check out to inactive user [userBarcode=blocked-inactive]",
		}},
		{"expired patron", func(f *storagefake.Fake) circulation.CheckOutRequest {
			f.AddUser(storagefake.User{ID: "22222222-2222-4222-8222-00000000000e", Barcode: "expired", Active: true,
				PatronGroup: patronGroup, LastName: "E", ExpirationDate: "2020-01-01T00:00:00.000Z"})
			return circulation.CheckOutRequest{ItemBarcode: itemBarcode, UserBarcode: "expired", ServicePointID: servicePoint}
		}, []string{
			"USER_IS_INACTIVE: Cannot check out to inactive user [userBarcode=expired]",
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := newStack(t, lockOn)
			req := tc.setup(s.fake)
			before := s.fake.Dump()
			_, err := s.svc.CheckOut(okapi(t), req)
			wantStrings(t, "refusals", refusals(t, err), tc.want)
			wantCount(t, s.fake, storagefake.RouteAcquire, 0)
			if w := s.fake.Writes(); len(w) != 0 {
				t.Errorf("writes %+v, want none", w)
			}
			s.fake.WantUnchanged(t, before)
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
			s.fake.AddItem(storagefake.Item{ID: fmt.Sprintf("33333333-3333-4333-8333-1000000000%02d", i), Barcode: barcode, Title: "Gone",
				Status: status, MaterialTypeID: materialType, PermanentLoanTypeID: loanType})
			before := s.fake.Dump()
			_, err := s.svc.CheckOut(okapi(t), circulation.CheckOutRequest{ItemBarcode: barcode, UserBarcode: userBarcode, ServicePointID: servicePoint})
			wantStrings(t, "refusals", refusals(t, err), []string{"ITEM_STATUS_REFUSED: Gone (" + storagefake.MaterialTypeName +
				") (Barcode: " + barcode + ") has the item status " + status + " and cannot be checked out [itemBarcode=" + barcode + "]"})
			s.fake.WantUnchanged(t, before)
		})
	}
	for i, status := range []string{"Long missing", "In process (non-requestable)", "Restricted", "Unavailable", "Unknown"} {
		t.Run("lent/"+status, func(t *testing.T) {
			t.Parallel()
			s := newStack(t, lockOn)
			barcode := fmt.Sprintf("a-%d", i)
			id := fmt.Sprintf("33333333-3333-4333-8333-2000000000%02d", i)
			s.fake.AddItem(storagefake.Item{ID: id, Barcode: barcode, Title: "Here", Status: status,
				MaterialTypeID: materialType, PermanentLoanTypeID: loanType})
			res, err := s.svc.CheckOut(okapi(t), circulation.CheckOutRequest{ItemBarcode: barcode, UserBarcode: userBarcode, ServicePointID: servicePoint})
			if err != nil || res.Item.Status != circulation.StatusCheckedOut {
				t.Fatalf("check-out of an item %s: %+v %v, want it lent", status, res.Item, err)
			}
			if item, _ := s.fake.Item(id); item.Status != circulation.StatusCheckedOut {
				t.Errorf("stored item %+v, want Checked out", item)
			}
		})
	}
}

func TestCheckOutWithoutCirculationRules(t *testing.T) {
	t.Parallel()
	fake := storagefake.New(t)
	fake.AddUser(storagefake.User{ID: patronID, Barcode: userBarcode, Active: true, PatronGroup: patronGroup, LastName: "L"})
	fake.AddItem(storagefake.Item{ID: itemID, Barcode: itemBarcode, Title: itemTitle, Status: circulation.StatusAvailable,
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
	s := newStack(t, lockOn)
	s.fake.HoldLock(1)
	// A storage that does not carry the settings with validation: they
	// are read in a call of their own, which must carry the headers too.
	s.fake.OmitLockSettings()
	if _, err := s.checkOut(t); err != nil {
		t.Fatalf("check-out: %v", err)
	}
	if _, err := s.svc.CheckIn(okapi(t), circulation.CheckInRequest{ItemBarcode: itemBarcode, ServicePointID: servicePoint}); err != nil {
		t.Fatalf("check-in: %v", err)
	}
	calls := s.fake.Calls()
	seen := map[string]bool{}
	for _, c := range calls {
		seen[c.Route] = true
		if c.Tenant != tenant || c.RequestID != requestID {
			t.Errorf("%s %s got tenant %q request id %q, want %q %q", c.Method, c.Path, c.Tenant, c.RequestID, tenant, requestID)
		}
	}
	for _, r := range []string{storagefake.RouteGetSettings, storagefake.RouteAcquire,
		storagefake.RoutePostLoan, storagefake.RoutePutLoan} {
		if !seen[r] {
			t.Errorf("no %s call among %d", r, len(calls))
		}
	}
}

func TestStoredSettingsOverrideTheEnvironment(t *testing.T) {
	t.Parallel()
	s := newStack(t, lockOff)
	s.fake.AddSetting(locksettings.Scope, locksettings.Key,
		map[string]any{"checkOutLockFeatureEnabled": true, "lockTtl": 7000, "retryIntervalsMs": []int{100, 200}})
	got := effective(t, s.settings, okapi(t))
	want := circulation.LockSettings{Enabled: true, LockTTL: 7 * time.Second, RetryIntervals: ms(100, 200),
		EnabledSource: circulation.FromSettings, LockTTLSource: circulation.FromSettings, RetrySource: circulation.FromSettings}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("effective %+v, want %+v", got, want)
	}
	s.fake.HoldLock(-1)
	_, err := s.checkOut(t)
	wantError(t, err, errs.KindInvalid, schemas.CodeUnableToAcquireLock)
	wantCount(t, s.fake, storagefake.RouteAcquire, 3)
	wantWaits(t, s.clock, ms(100, 200))
	for _, c := range s.fake.Calls() {
		if c.Route == storagefake.RouteAcquire && !strings.Contains(c.Body, `"ttlMs":7000`) {
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
			s := newStack(t, lockOn)
			s.fake.AddSetting(locksettings.Scope, locksettings.Key, tc.stored)
			got := effective(t, s.settings, okapi(t))
			want := circulation.LockSettings{Enabled: true, LockTTL: 3 * time.Second, RetryIntervals: tc.waits,
				EnabledSource: circulation.FromEnvironment, LockTTLSource: circulation.FromEnvironment, RetrySource: circulation.FromSettings}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("effective %+v, want %+v", got, want)
			}
			s.fake.HoldLock(-1)
			_, err := s.checkOut(t)
			wantError(t, err, errs.KindInvalid, schemas.CodeUnableToAcquireLock)
			wantCount(t, s.fake, storagefake.RouteAcquire, len(tc.waits)+1)
			wantWaits(t, s.clock, tc.waits)
		})
	}
}

func TestUnreadableSettingsFallBackToTheEnvironment(t *testing.T) {
	t.Parallel()
	s := newStack(t, lockOn)
	s.fake.FailSettingsGet(http.StatusInternalServerError)
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
	wantCount(t, s.fake, storagefake.RouteAcquire, 1)
	wantCount(t, s.fake, storagefake.RouteRelease, 0) // released by the write
	wantItem(t, s.fake, circulation.StatusCheckedOut, 2)
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
	wantStored(t, s.fake, `{"checkOutLockFeatureEnabled":true,"lockTtl":4000}`)
	wantCount(t, s.fake, storagefake.RoutePostSetting, 1)
	if _, err := s.checkOut(t); err != nil {
		t.Fatalf("check-out: %v", err)
	}
	if locks := s.fake.Locks(); len(locks) != 1 || locks[0].TTLMs != 4000 {
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
	wantStored(t, s.fake, `{"checkOutLockFeatureEnabled":false}`)
	wantCount(t, s.fake, storagefake.RoutePutSetting, 1)
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
	if calls := s.fake.Calls(); len(calls) != 0 {
		t.Errorf("calls %+v, want none", calls)
	}
}

func wantStored(t *testing.T, f *storagefake.Fake, want string) {
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

// TestInvalidStoredSettingsFallBackToTheEnvironment: a value written past
// the API (straight to /settings/entries) that breaks the rules is not used;
// the environment's values apply and the reason is reported.
func TestInvalidStoredSettingsFallBackToTheEnvironment(t *testing.T) {
	t.Parallel()
	for _, value := range []any{
		map[string]any{"checkOutLockFeatureEnabled": true, "lockTtl": 0},
		map[string]any{"lockTtl": "abc"},
		map[string]any{"retryIntervalsMs": []int{-5}},
	} {
		s := newStack(t, lockOn)
		s.fake.AddSetting(locksettings.Scope, locksettings.Key, value)
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
	s.fake.AddSetting(locksettings.Scope, locksettings.Key, map[string]any{"checkOutLockFeatureEnabled": true})
	if got := effective(t, s.settings, okapi(t)); !got.Enabled || got.EnabledSource != circulation.FromSettings {
		t.Fatalf("effective %+v, want enabled from settings", got)
	}
	s.fake.FailSettingsGet(http.StatusServiceUnavailable)
	s.clock.Advance(2 * time.Minute) // past the cache period
	got := effective(t, s.settings, okapi(t))
	if !got.Enabled || got.SettingsError == "" {
		t.Errorf("effective during the outage %+v, want the last read (enabled) and a settings error", got)
	}
	if _, err := s.checkOut(t); err != nil {
		t.Fatalf("check-out during the outage: %v", err)
	}
	wantCount(t, s.fake, storagefake.RouteAcquire, 1)
}

// TestOneInvalidStoredFieldKeepsTheOthers: a bad lockTtl written straight to
// /settings/entries does not throw away checkOutLockFeatureEnabled.
func TestOneInvalidStoredFieldKeepsTheOthers(t *testing.T) {
	t.Parallel()
	env := lockOn
	env.Enabled = false
	s := newStack(t, env)
	s.fake.AddSetting(locksettings.Scope, locksettings.Key,
		map[string]any{"checkOutLockFeatureEnabled": true, "lockTtl": 0, "retryIntervalsMs": []int{100, 200}})
	got := effective(t, s.settings, okapi(t))
	if !got.Enabled || got.EnabledSource != circulation.FromSettings || got.LockTTL != env.LockTTL ||
		got.LockTTLSource != circulation.FromEnvironment || got.RetrySource != circulation.FromSettings ||
		!strings.Contains(got.SettingsError, "lockTtl: must be from 100 to 600000 ms, got 0") {
		t.Errorf("effective %+v, want enabled and waits from settings, the environment's lockTtl, and the error named", got)
	}
}

// TestCancelledRequestStillFinishesItsWrites: the client goes away while the
// loan is being created: the write phase runs on, so the loan and the item
// agree, and the lock is released.
func TestCancelledRequestStillFinishesItsWrites(t *testing.T) {
	t.Parallel()
	s := newStack(t, lockOn)
	ctx, cancel := context.WithCancel(okapi(t))
	s.fake.OnLoanCreation(cancel)
	res, err := s.svc.CheckOut(ctx, request())
	if err != nil {
		t.Fatalf("check-out cancelled during its writes: %v", err)
	}
	wantItem(t, s.fake, circulation.StatusCheckedOut, 2)
	if loans := s.fake.Loans(); len(loans) != 1 || loans[0].ID != res.Loan.ID {
		t.Errorf("loans %+v, want the one returned", loans)
	}
	if locks := s.fake.Locks(); len(locks) != 1 || !locks[0].Released {
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
		how   storagefake.AnswerLoss
		first int // the status the unheard grant was recorded with
	}{
		{"503 after the grant", storagefake.AnswerUnavailable, http.StatusServiceUnavailable},
		{"connection cut after the grant", storagefake.AnswerCut, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := newStack(t, lockOn)
			s.fake.LoseAcquireAnswers(1, tc.how)
			res, err := s.checkOut(t)
			if err != nil {
				t.Fatalf("check-out: %v", err)
			}
			var ids []string
			var statuses []int
			for _, c := range s.fake.Calls() {
				if c.Route != storagefake.RouteAcquire {
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
			if locks := s.fake.Locks(); len(locks) != 1 || locks[0].ID != lockID || !locks[0].Released {
				t.Errorf("locks %+v, want the one lock %s, released", locks, lockID)
			}
			for _, c := range s.fake.Calls() {
				if c.Route == storagefake.RoutePostLoan && (c.LockID != lockID || c.Status != http.StatusCreated) {
					t.Errorf("loan created with X-Check-Out-Lock-Id %q (status %d), want %q and 201", c.LockID, c.Status, lockID)
				}
				if c.Route == storagefake.RouteRelease && c.Path != "/check-out-lock-storage/"+lockID {
					t.Errorf("released %s, want the lock %s", c.Path, lockID)
				}
			}
			wantCount(t, s.fake, storagefake.RoutePostLoan, 1)
			wantCount(t, s.fake, storagefake.RouteRelease, 0) // released by the write
			wantItem(t, s.fake, circulation.StatusCheckedOut, 2)
			if loans := s.fake.Loans(); len(loans) != 1 || loans[0].ID != res.Loan.ID || !res.Locked {
				t.Errorf("loans %+v (locked: %t), want the one returned (%s), under the lock", loans, res.Locked, res.Loan.ID)
			}
		})
	}
}
