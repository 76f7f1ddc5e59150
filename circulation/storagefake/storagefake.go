// Package storagefake is an in-memory fake of circulation-storage's HTTP API
// for the unit tests of the circulation service. It fakes only the network
// boundary: tests run the real storageclient against it (over real HTTP, on
// an httptest server), never a fake of circulation.Storage.
//
// It implements just what storageclient calls, with the contract's paths,
// statuses and error codes (see circulation-storage/internal/httpapi and
// schemas/*.json): request bodies are validated against the same schemas,
// items and settings use optimistic locking on _version, a loan is refused
// while its item has an open one, a loan created under X-Check-Out-Lock-Id is
// fenced by that lock, and a lock is taken under the client's id, renewed
// when that id asks again, refused to any other while live. Every valid
// tenant is initialised until a test names the initialised ones with
// AddTenant; the records are one set shared by them all. It records every
// call, and a test can program faults (a held lock, failing acquires, a
// granted acquire whose answer is lost, failing releases, loan creations or
// settings reads, a server that is down).
//
// The contract suite in integration-tests/contract runs the same cases
// against this fake and the real circulation-storage, so the two cannot
// drift apart unnoticed.
package storagefake

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/checkoutlock/schemas"
	"github.com/checkoutlock/schemas/locksettings"
)

// Routes, as Call.Route names them.
const (
	RouteUsers       = "GET /users"
	RouteItems       = "GET /item-storage/items"
	RoutePutItem     = "PUT /item-storage/items/{id}"
	RouteLoans       = "GET /loan-storage/loans"
	RouteLoan        = "GET /loan-storage/loans/{id}"
	RoutePostLoan    = "POST /loan-storage/loans"
	RoutePutLoan     = "PUT /loan-storage/loans/{id}"
	RouteOpenCount   = "GET /loan-storage/loans/open-count"
	RouteValidation  = "GET /check-out-storage/validation"
	RouteSetPin      = "POST /patron-pin"
	RouteVerifyPin   = "POST /patron-pin/verify"
	RouteMatchPolicy = "GET /circulation-rules-storage/loan-policy"
	RouteLoanPolicy  = "GET /loan-policy-storage/loan-policies/{id}"
	RouteAcquire     = "POST /check-out-lock-storage"
	RouteGetLock     = "GET /check-out-lock-storage/{id}"
	RouteRelease     = "DELETE /check-out-lock-storage/{id}"
	RouteGetSettings = "GET /settings/entries"
	RoutePostSetting = "POST /settings/entries"
	RoutePutSetting  = "PUT /settings/entries/{id}"
	RouteReady       = "GET /admin/ready"
	RouteUnknown     = "unknown"
)

// defaultLockTTLMs, maxLockTTLMs and maxWaitMs are storage's
// LOCK_DEFAULT_TTL_MS, LOCK_MAX_TTL_MS and LOCK_MAX_WAIT_MS defaults (the
// longest lock the lock's bound).
const (
	defaultLockTTLMs = 3000
	maxLockTTLMs     = float64(locksettings.MaxLockTTL / time.Millisecond)
	maxWaitMs        = 20000
)

// Call is one request the fake received.
type Call struct {
	Route     string // one of the Route constants
	Method    string
	Path      string
	Query     string
	Tenant    string // X-Okapi-Tenant
	RequestID string // X-Okapi-Request-Id
	LockID    string // X-Check-Out-Lock-Id
	// ReleaseLock is X-Check-Out-Release-Lock.
	ReleaseLock string
	Body        string
	Status      int // the status answered
	// WaitMs is the waitMs of an acquisition (0 when absent).
	WaitMs int
}

// Seeds and views of the records.

// User is a patron.
type User struct {
	ID, Barcode, PatronGroup, FirstName, LastName string
	Active                                        bool
	// ExpirationDate is as on the wire, "" for none.
	ExpirationDate string
}

// Item is an item; Version is its _version (1 when seeded).
type Item struct {
	ID, Barcode, Title, Status                               string
	MaterialTypeID, PermanentLoanTypeID, TemporaryLoanTypeID string
	Version                                                  int
}

// ManualBlock is a manual patron block. ExpirationDate is as on the wire,
// "" for none.
type ManualBlock struct {
	UserID, Desc, PatronMessage, ExpirationDate string
	Borrowing                                   bool
}

// MaterialTypeName is the name the fake gives every material type, as
// validation reports it with the item.
const MaterialTypeName = "book"

// Loan is a loan; times are as on the wire.
type Loan struct {
	ID, UserID, ItemID, Status, Action            string
	LoanDate, DueDate, ReturnDate                 string
	LoanPolicyID                                  string
	CheckoutServicePointID, CheckinServicePointID string
}

// LoanPolicy is a loan policy; ItemLimit 0 means none.
type LoanPolicy struct {
	ID, Name  string
	Loanable  bool
	Duration  int
	Interval  string
	ItemLimit int
}

// PolicyMatch is what the circulation rules answer for any item and patron.
type PolicyMatch struct {
	LoanPolicyID                                       string
	PatronGroupMatch, MaterialTypeMatch, LoanTypeMatch bool
}

// Lock is a lock the fake granted. A renewal updates it in place, as
// storage updates the lock's row.
type Lock struct {
	ID, UserID   string
	TTLMs        int
	CreationDate time.Time
	ExpiresAt    time.Time
	Released     bool
	// Holder is the lock's holder as storage answers it: what the
	// acquisition said, and acquiredBy, the user it acted for.
	Holder map[string]string

	// replaced: another lock of the patron's took this one over after it
	// expired (storage overwrote its row).
	replaced bool
}

// Fake is the fake storage. Use New; its methods are safe for concurrent use.
type Fake struct {
	// URL is the server's base URL, for storageclient.New.
	URL string

	srv     *httptest.Server
	schemas *schemas.Set

	mu       sync.Mutex
	calls    []Call
	users    []map[string]any
	items    []map[string]any
	loans    []map[string]any
	policies map[string]LoanPolicy
	blocks   []ManualBlock
	// charged is the maximum items charged out of every patron's group,
	// nil for none.
	charged *ChargedOutLimit
	// requests are request documents, every item's queue.
	requests []map[string]any
	match    *PolicyMatch
	settings []map[string]any
	// pins are patrons' PINs by patron id, and pinFailures the wrong ones
	// in a row (storage's LOGIN_MAX_FAILURES, 5, lock a PIN).
	pins        map[string]string
	pinFailures map[string]int
	locks       []*Lock
	tenants     map[string]bool // initialised tenants; nil: every valid one
	// released is closed, and replaced, whenever a lock is released: the
	// waiting acquisitions watch it.
	released chan struct{}

	// faults
	lockHeld      int // acquires left to answer LOCK_HELD; negative: all
	waitInVain    int // acquires with waitMs left to answer LOCK_HELD as if after waiting
	acquireStatus int
	acquireFails  int // acquires left to fail with acquireStatus; negative: all
	acquireCode   string
	lostGrants    int        // granted acquires left whose answer is lost
	grantLoss     AnswerLoss // how they are lost
	releaseStatus int
	loanFail      loanFault
	itemFails     []loanFault // one per coming item update, in order
	loseLock      bool
	// keepLocks: the write ignores X-Check-Out-Release-Lock, as a storage
	// that predates it does (see KeepLocksOnWrite).
	keepLocks bool
	onLoan    func()
	// onArrival is told of every request as it arrives, outside the
	// mutex (see OnArrival).
	onArrival   atomic.Pointer[func(route string)]
	loanUpdates bool // every loan update fails
	// loanUpdatesAfterCommit: every loan update is applied and answered
	// 503, as when the connection breaks during COMMIT.
	loanUpdatesAfterCommit bool
	settingsFail           int
	omitLockSettings       bool
	openCounts             []int
	// lockFeature is the lock feature for a tenant that stored no
	// setting (storage's CHECKOUT_LOCK_FEATURE_ENABLED); see
	// SetLockFeatureDefault.
	lockFeature bool
	// unscopedIgnored: a limit whose rule names neither a material nor a
	// loan type is not enforced (see IgnoreUnscopedItemLimits).
	unscopedIgnored bool
}

type loanFault int

const (
	loanCreated loanFault = iota
	loanFailsBefore
	loanFailsAfterCommit
)

// AnswerLoss is how the answer to an acquire that was granted gets lost.
type AnswerLoss int

// The ways to lose a granted acquire's answer.
const (
	// AnswerUnavailable answers 503 DATABASE_UNAVAILABLE, as storage does
	// when its connection to the database breaks during the COMMIT that
	// granted the lock.
	AnswerUnavailable AnswerLoss = iota + 1
	// AnswerCut closes the connection without a word, as when the network
	// or the storage process fails right after the commit.
	AnswerCut
)

// New starts a fake with no records and every tenant initialised; the
// test's cleanup closes it.
func New(t interface{ Cleanup(func()) }) *Fake {
	f := &Fake{schemas: contract(), policies: map[string]LoanPolicy{}, released: make(chan struct{})}
	mux := http.NewServeMux()
	handle := map[string]http.HandlerFunc{
		RouteUsers: f.listUsers, RouteItems: f.listItems, RoutePutItem: f.putItem,
		RouteLoans: f.listLoans, RouteLoan: f.getLoan, RoutePostLoan: f.postLoan, RoutePutLoan: f.putLoan,
		RouteOpenCount: f.openCount, RouteMatchPolicy: f.matchPolicy, RouteLoanPolicy: f.getPolicy, RouteValidation: f.validation,
		RouteSetPin: f.setPin, RouteVerifyPin: f.verifyPin,
		RouteAcquire: f.acquire, RouteGetLock: f.getLock, RouteRelease: f.release,
		RouteGetSettings: f.listSettings, RoutePostSetting: f.postSetting, RoutePutSetting: f.putSetting,
		RouteReady: func(w http.ResponseWriter, _ *http.Request) { writeJSON(w, 200, map[string]string{"status": "UP"}) },
	}
	for route, h := range handle {
		mux.HandleFunc(route, h)
	}
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, 404, schemas.CodeRouteNotFound, "No route for "+r.Method+" "+r.URL.Path)
	})
	f.srv = httptest.NewServer(f.record(mux))
	f.URL = f.srv.URL
	t.Cleanup(f.srv.Close)
	return f
}

// Down stops the server: every later call fails to connect. The records
// stay readable.
func (f *Fake) Down() { f.srv.Close() }

// record logs the call, echoes the request id and checks the tenant (as
// storage's middleware does) and serves it, all under the fake's mutex: one
// request at a time.
func (f *Fake) record(mux *http.ServeMux) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		if hook := f.onArrival.Load(); hook != nil {
			_, route := mux.Handler(r)
			(*hook)(route)
		}
		f.mu.Lock()
		defer f.mu.Unlock()
		requestID := r.Header.Get(schemas.HeaderRequestID)
		if requestID == "" {
			requestID = uuid.NewString()
		}
		w.Header().Set(schemas.HeaderRequestID, requestID)
		rec := &statusRecorder{ResponseWriter: w}
		tenant := r.Header.Get(schemas.HeaderTenant)
		_, route := mux.Handler(r)
		if route == "/" || route == "" {
			route = RouteUnknown
		}
		switch {
		case r.URL.Path == "/admin/ready", route == RouteUnknown:
			// Storage checks the tenant on its tenant-scoped routes only.
			mux.ServeHTTP(rec, r)
		case tenant == "":
			writeError(rec, 400, schemas.CodeTenantMissing, "X-Okapi-Tenant header is required")
		case !schemas.ValidTenant(tenant):
			writeError(rec, 400, schemas.CodeInvalidTenant, fmt.Sprintf("Invalid tenant %q: %s", tenant, schemas.TenantRule), "tenant", tenant)
		case f.tenants != nil && !f.tenants[tenant]:
			writeError(rec, 400, schemas.CodeTenantNotInitialized,
				"Tenant "+tenant+" is not initialised for circulation-storage: call POST /_/tenant first", "tenant", tenant)
		default:
			mux.ServeHTTP(rec, r)
		}
		f.calls = append(f.calls, Call{Route: route, Method: r.Method, Path: r.URL.Path, Query: r.URL.RawQuery,
			Tenant: tenant, RequestID: r.Header.Get(schemas.HeaderRequestID), LockID: r.Header.Get(schemas.HeaderLockID),
			ReleaseLock: r.Header.Get(schemas.HeaderReleaseLock),
			Body:        string(body), Status: rec.status, WaitMs: waitMsOf(body)})
	})
}

type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (s *statusRecorder) WriteHeader(code int) {
	s.status = code
	s.ResponseWriter.WriteHeader(code)
}

// Unwrap lets http.ResponseController reach the connection (to cut it).
func (s *statusRecorder) Unwrap() http.ResponseWriter { return s.ResponseWriter }

// AddTenant initialises a tenant, as POST /_/tenant does in storage. A
// fake starts with every valid tenant initialised, which is what most tests
// want; from the first AddTenant on, only the tenants added are, and calls
// for any other are refused with 400 TENANT_NOT_INITIALIZED.
func (f *Fake) AddTenant(tenant string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.tenants == nil {
		f.tenants = map[string]bool{}
	}
	f.tenants[tenant] = true
}

// Seeding.

// AddUser stores a patron.
func (f *Fake) AddUser(u User) {
	f.mu.Lock()
	defer f.mu.Unlock()
	doc := map[string]any{"id": u.ID, "barcode": u.Barcode, "active": u.Active,
		"patronGroup": u.PatronGroup, "personal": map[string]any{"firstName": u.FirstName, "lastName": u.LastName}}
	if u.ExpirationDate != "" {
		doc["expirationDate"] = u.ExpirationDate
	}
	f.users = append(f.users, doc)
}

// ChargedOutLimit is a patron group's limit of maximum items charged out,
// with its condition blocking borrowing, and the condition's message.
type ChargedOutLimit struct {
	Limit   int
	Message string
}

// SetChargedOutLimit gives every patron's group a limit of maximum items
// charged out: validation reports the automated block at it, and a
// check-out's write is refused at it.
func (f *Fake) SetChargedOutLimit(l ChargedOutLimit) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.charged = &l
}

// Request is a request for an item; Position 0 means none (a closed
// request).
type Request struct {
	ID, ItemID, RequesterID, Status string
	Position                        int
}

// AddRequest stores a request.
func (f *Fake) AddRequest(r Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	doc := map[string]any{"id": r.ID, "requestType": "Hold", "requestLevel": "Item", "requestDate": "2026-01-01T10:00:00.000Z",
		"requesterId": r.RequesterID, "itemId": r.ItemID, "status": r.Status, "fulfillmentPreference": "Hold Shelf"}
	if r.Position > 0 {
		doc["position"] = r.Position
	}
	f.requests = append(f.requests, doc)
}

// Requests returns the stored requests.
func (f *Fake) Requests() []Request {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []Request
	for _, d := range f.requests {
		p, _ := d["position"].(int)
		out = append(out, Request{ID: str(d["id"]), ItemID: str(d["itemId"]), RequesterID: str(d["requesterId"]),
			Status: str(d["status"]), Position: p})
	}
	return out
}

// queueHead is the first request of the item's queue, as storage finds
// it: the open request with the lowest position; nil when none.
func (f *Fake) queueHead(itemID string) map[string]any {
	var head map[string]any
	for _, d := range f.requests {
		p, ok := d["position"].(int)
		if d["itemId"] != itemID || !strings.HasPrefix(str(d["status"]), "Open ") || !ok {
			continue
		}
		if hp, _ := head["position"].(int); head == nil || p < hp {
			head = d
		}
	}
	return head
}

// fill closes the first request of the item's queue as filled and moves
// the queue up, as a check-out's write by its requester does.
func (f *Fake) fill(head map[string]any) {
	at, _ := head["position"].(int)
	for _, d := range f.requests {
		if p, ok := d["position"].(int); ok && d["itemId"] == head["itemId"] && strings.HasPrefix(str(d["status"]), "Open ") && p > at {
			d["position"] = p - 1
		}
	}
	head["status"] = "Closed - Filled"
	delete(head, "position")
}

// AddManualBlock stores a manual patron block.
func (f *Fake) AddManualBlock(b ManualBlock) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.blocks = append(f.blocks, b)
}

// borrowingBlocks are the user's manual blocks in force for borrowing, as
// validation answers them.
func (f *Fake) borrowingBlocks(userID string) []map[string]any {
	var out []map[string]any
	for _, b := range f.blocks {
		if b.UserID != userID || !b.Borrowing {
			continue
		}
		doc := map[string]any{"userId": b.UserID, "type": "Manual", "desc": b.Desc, "borrowing": true}
		if b.PatronMessage != "" {
			doc["patronMessage"] = b.PatronMessage
		}
		if b.ExpirationDate != "" {
			at, err := time.Parse(time.RFC3339, b.ExpirationDate)
			if err == nil && !at.After(time.Now()) {
				continue
			}
			doc["expirationDate"] = b.ExpirationDate
		}
		out = append(out, doc)
	}
	return out
}

// AddItem stores an item at _version 1.
func (f *Fake) AddItem(i Item) {
	f.mu.Lock()
	defer f.mu.Unlock()
	doc := map[string]any{"id": i.ID, "barcode": i.Barcode, "title": i.Title, "status": map[string]any{"name": i.Status},
		"materialTypeId": i.MaterialTypeID, "permanentLoanTypeId": i.PermanentLoanTypeID, "_version": 1}
	if i.TemporaryLoanTypeID != "" {
		doc["temporaryLoanTypeId"] = i.TemporaryLoanTypeID
	}
	f.items = append(f.items, doc)
}

// AddLoan stores a loan.
func (f *Fake) AddLoan(l Loan) {
	f.mu.Lock()
	defer f.mu.Unlock()
	doc := map[string]any{"id": l.ID, "userId": l.UserID, "itemId": l.ItemID, "status": map[string]any{"name": l.Status},
		"action": l.Action, "loanDate": l.LoanDate}
	for k, v := range map[string]string{"dueDate": l.DueDate, "returnDate": l.ReturnDate, "loanPolicyId": l.LoanPolicyID,
		"checkoutServicePointId": l.CheckoutServicePointID, "checkinServicePointId": l.CheckinServicePointID} {
		if v != "" {
			doc[k] = v
		}
	}
	f.loans = append(f.loans, doc)
}

// AddLoanPolicy stores a loan policy.
func (f *Fake) AddLoanPolicy(p LoanPolicy) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.policies[p.ID] = p
}

// SetPolicyMatch sets what the circulation rules answer; without it they
// answer 404 (no rules set).
func (f *Fake) SetPolicyMatch(m PolicyMatch) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.match = &m
}

// AddSetting stores a settings entry.
func (f *Fake) AddSetting(scope, key string, value any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.settings = append(f.settings, map[string]any{"id": uuid.NewString(), "scope": scope, "key": key, "value": value, "_version": 1})
}

// OmitLockSettings makes validation answer without the tenant's lock
// settings, as a storage that predates carrying them does.
func (f *Fake) OmitLockSettings() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.omitLockSettings = true
}

// lockSettings is validation's lockSettings: the tenant's check-out lock
// settings entry as stored, or none.
func (f *Fake) lockSettings() map[string]any {
	for _, st := range f.settings {
		if st["scope"] == locksettings.Scope && st["key"] == locksettings.Key {
			return map[string]any{"entry": st}
		}
	}
	return map[string]any{}
}

// Faults.

// HoldLock makes the next n acquire attempts answer that someone else holds
// the lock (503 LOCK_HELD); a negative n, every attempt.
func (f *Fake) HoldLock(n int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.lockHeld = n
}

// WaitInVain makes the next n acquires that carry waitMs answer 503
// LOCK_HELD at once, as storage does once it has waited waitMs in vain
// (with waitedMs), so a test need not wait.
func (f *Fake) WaitInVain(n int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.waitInVain = n
}

// FailAcquire makes every acquire answer status with code.
func (f *Fake) FailAcquire(status int, code string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.acquireStatus, f.acquireCode, f.acquireFails = status, code, -1
}

// FailAcquires makes the next n acquires answer status with code; later
// ones are served.
func (f *Fake) FailAcquires(n, status int, code string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.acquireStatus, f.acquireCode, f.acquireFails = status, code, n
}

// LoseAcquireAnswers makes the next n acquires that storage grants lose
// their answer: the lock is stored (under the client's id, as any grant)
// and the client hears how (503 DATABASE_UNAVAILABLE, or a cut connection)
// instead of 201. A client that asks again under the same id renews it.
func (f *Fake) LoseAcquireAnswers(n int, how AnswerLoss) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.lostGrants, f.grantLoss = n, how
}

// FailRelease makes every release answer status, releasing nothing.
func (f *Fake) FailRelease(status int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.releaseStatus = status
}

// FailLoanCreation makes every loan creation answer 500: without creating
// the loan, or (committed) after creating it, as when the answer is lost.
func (f *Fake) FailLoanCreation(committed bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.loanFail = loanFailsBefore
	if committed {
		f.loanFail = loanFailsAfterCommit
	}
}

// FailItemUpdates makes the coming item updates fail in turn: each fault
// answers 503, before writing (loanFailsBefore) or after (the write
// happened, as when the connection breaks during COMMIT). Later updates
// succeed.
func (f *Fake) FailItemUpdates(committed ...bool) { f.FailItemUpdatesAfter(0, committed...) }

// FailItemUpdatesAfter is FailItemUpdates after n updates that succeed.
func (f *Fake) FailItemUpdatesAfter(n int, committed ...bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for range n {
		f.itemFails = append(f.itemFails, loanCreated)
	}
	for _, c := range committed {
		if c {
			f.itemFails = append(f.itemFails, loanFailsAfterCommit)
		} else {
			f.itemFails = append(f.itemFails, loanFailsBefore)
		}
	}
}

// FailLoanUpdates makes every loan update answer 503 without writing.
func (f *Fake) FailLoanUpdates() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.loanUpdates = true
}

// LoseLoanUpdateAnswers makes every loan update happen, and answer 503 as
// if it had not (the answer lost after the commit).
func (f *Fake) LoseLoanUpdateAnswers() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.loanUpdatesAfterCommit = true
}

// OnLoanCreation runs hook when a loan creation arrives, before it is
// handled (a test cancels its request there).
func (f *Fake) OnLoanCreation(hook func()) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.onLoan = hook
}

// OnArrival runs hook with the route of every request as it arrives,
// before it waits for the requests ahead of it (the fake serves one at a
// time): a test sees there which calls a client has in flight at once. A
// hook that blocks holds its own request only.
func (f *Fake) OnArrival(hook func(route string)) { f.onArrival.Store(&hook) }

// KeepLocksOnWrite makes the fake a storage that predates releasing a lock
// with the check-out's write: X-Check-Out-Release-Lock is ignored, the lock
// stays held, and the answer does not say it was released.
func (f *Fake) KeepLocksOnWrite() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.keepLocks = true
}

// LoseLockBeforeLoan makes every lock expire just before a loan is created
// under it, so the fence refuses the loan (409 LOCK_LOST).
func (f *Fake) LoseLockBeforeLoan() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.loseLock = true
}

// FailSettingsGet makes every read of settings entries answer status.
func (f *Fake) FailSettingsGet(status int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.settingsFail = status
}

// OpenCounts makes the open-loan count answer these numbers in turn; after
// them it counts the stored loans again.
func (f *Fake) OpenCounts(n ...int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.openCounts = append([]int(nil), n...)
}

// Inspection.

// Calls returns every call received, in order.
func (f *Fake) Calls() []Call {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.calls)
}

// Count returns how many calls were made to route.
func (f *Fake) Count(route string) int {
	n := 0
	for _, c := range f.Calls() {
		if c.Route == route {
			n++
		}
	}
	return n
}

// Writes returns the calls that could change a record: every method but GET.
func (f *Fake) Writes() []Call {
	var out []Call
	for _, c := range f.Calls() {
		if c.Method != http.MethodGet {
			out = append(out, c)
		}
	}
	return out
}

// Item returns a stored item.
func (f *Fake) Item(id string) (Item, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	doc := find(f.items, id)
	if doc == nil {
		return Item{}, false
	}
	return Item{ID: str(doc["id"]), Barcode: str(doc["barcode"]), Title: str(doc["title"]), Status: statusName(doc),
		MaterialTypeID: str(doc["materialTypeId"]), PermanentLoanTypeID: str(doc["permanentLoanTypeId"]),
		TemporaryLoanTypeID: str(doc["temporaryLoanTypeId"]), Version: version(doc)}, true
}

// Loans returns every stored loan.
func (f *Fake) Loans() []Loan {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]Loan, len(f.loans))
	for i, d := range f.loans {
		out[i] = Loan{ID: str(d["id"]), UserID: str(d["userId"]), ItemID: str(d["itemId"]), Status: statusName(d),
			Action: str(d["action"]), LoanDate: str(d["loanDate"]), DueDate: str(d["dueDate"]), ReturnDate: str(d["returnDate"]),
			LoanPolicyID: str(d["loanPolicyId"]), CheckoutServicePointID: str(d["checkoutServicePointId"]),
			CheckinServicePointID: str(d["checkinServicePointId"])}
	}
	return out
}

// Locks returns every lock granted, released or not.
func (f *Fake) Locks() []Lock {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]Lock, len(f.locks))
	for i, l := range f.locks {
		out[i] = *l
	}
	return out
}

// Setting returns the value of a stored settings entry.
func (f *Fake) Setting(scope, key string) (json.RawMessage, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, s := range f.settings {
		if s["scope"] == scope && s["key"] == key {
			b, _ := json.Marshal(s["value"])
			return b, true
		}
	}
	return nil, false
}

// WantUnchanged fails t if the fake's state differs from before, a Dump
// taken earlier: a refused request must change nothing.
func (f *Fake) WantUnchanged(t testing.TB, before string) {
	t.Helper()
	if after := f.Dump(); after != before {
		t.Errorf("storage changed:\nbefore %s\nafter  %s", before, after)
	}
}

// Dump returns every record and live lock as JSON, for comparing the whole
// state before and after.
func (f *Fake) Dump() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var live []Lock
	for _, l := range f.locks {
		if f.live(l) {
			live = append(live, *l)
		}
	}
	b, err := json.Marshal(map[string]any{"users": f.users, "items": f.items, "loans": f.loans, "settings": f.settings,
		"locks": live})
	if err != nil {
		panic(err)
	}
	return string(b)
}

// Handlers. Each runs with f.mu held (see record).

func (f *Fake) listUsers(w http.ResponseWriter, r *http.Request) {
	writePage(w, r, "users", filter(f.users, r, "barcode"))
}

func (f *Fake) listItems(w http.ResponseWriter, r *http.Request) {
	writePage(w, r, "items", filter(f.items, r, "barcode"))
}

func (f *Fake) putItem(w http.ResponseWriter, r *http.Request) {
	doc, ok := f.bind(w, r, "item.json")
	if !ok {
		return
	}
	stored := find(f.items, r.PathValue("id"))
	switch {
	case doc["_version"] == nil:
		writeError(w, 422, schemas.CodeValidation, "_version: is required to update a Item (optimistic locking)", "_version", "")
	case stored == nil:
		writeError(w, 404, schemas.CodeNotFound, "Item not found", "id", r.PathValue("id"))
	case version(doc) != version(stored):
		writeError(w, 409, schemas.CodeVersionConflict, fmt.Sprintf("Cannot update record %s because it has been changed: stored _version is %d, request has %d",
			r.PathValue("id"), version(stored), version(doc)), "_version", strconv.Itoa(version(stored)))
	case statusName(doc) == "Checked out" && statusName(stored) != "Checked out":
		writeError(w, 422, schemas.CodeItemStatusByCirculation, "Item "+r.PathValue("id")+" becomes Checked out only with its loan, by a check-out",
			"status", "Checked out")
	case statusName(doc) != "Checked out" && statusName(stored) == "Checked out" && f.hasOpenLoan(r.PathValue("id")):
		writeError(w, 422, schemas.CodeItemStatusByCirculation, "Item "+r.PathValue("id")+" has an open loan: it leaves Checked out only by the check-in that closes the loan",
			"status", statusName(doc))
	default:
		fault := loanCreated
		if len(f.itemFails) > 0 {
			fault, f.itemFails = f.itemFails[0], f.itemFails[1:]
		}
		if fault == loanFailsBefore {
			writeError(w, 503, schemas.CodeDatabaseUnavailable, "Database unavailable, try again later")
			return
		}
		doc["id"], doc["_version"] = stored["id"], version(stored)+1
		replace(f.items, doc)
		if fault == loanFailsAfterCommit {
			writeError(w, 503, schemas.CodeDatabaseUnavailable, "Database unavailable, try again later")
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}
}

func (f *Fake) listLoans(w http.ResponseWriter, r *http.Request) {
	loans := filter(f.loans, r, "itemId", "userId")
	if s := r.URL.Query().Get("status"); s != "" {
		loans = slices.DeleteFunc(loans, func(l map[string]any) bool { return statusName(l) != s })
	}
	writePage(w, r, "loans", loans)
}

func (f *Fake) getLoan(w http.ResponseWriter, r *http.Request) {
	id, ok := pathID(w, r, "loan")
	if !ok {
		return
	}
	if doc := find(f.loans, id); doc != nil {
		writeJSON(w, 200, doc)
		return
	}
	writeError(w, 404, schemas.CodeNotFound, "Loan not found", "id", id)
}

func (f *Fake) postLoan(w http.ResponseWriter, r *http.Request) {
	if f.onLoan != nil {
		f.onLoan()
	}
	doc, ok := f.bind(w, r, "loan.json")
	if !ok {
		return
	}
	if doc["id"] == nil {
		doc["id"] = uuid.NewString()
	}
	// A loan opens only by a check-out's write; its headers are read
	// before anything is written, and refused as storage refuses them.
	if statusName(doc) != "Open" {
		for _, h := range []string{schemas.HeaderLockID, schemas.HeaderItemVersion, schemas.HeaderReleaseLock, schemas.HeaderCheckOutOverride} {
			if r.Header.Get(h) != "" {
				writeError(w, 422, schemas.CodeValidation, fmt.Sprintf("status: a check-out's write opens a loan: its status must be Open, got %q",
					statusName(doc)), "status", statusName(doc))
				return
			}
		}
		f.loans = append(f.loans, doc)
		w.Header().Set("Location", "/loan-storage/loans/"+str(doc["id"]))
		writeJSON(w, 201, doc)
		return
	}
	if r.Header.Get(schemas.HeaderItemVersion) == "" {
		writeError(w, 422, schemas.CodeCheckOutRequired, "A loan is opened only by a check-out's write, which checks its item out with it: name the _version of the item read in "+
			schemas.HeaderItemVersion+" (and the borrower's lock in "+schemas.HeaderLockID+" while the check-out lock is on)")
		return
	}
	itemVersion, ok := headerVersion(w, r, schemas.HeaderItemVersion)
	if !ok {
		return
	}
	if d, err := time.Parse(time.RFC3339Nano, str(doc["loanDate"])); err == nil && d.After(time.Now().Add(schemas.MaxLoanDateAhead)) {
		writeError(w, 422, schemas.CodeValidation, "loanDate: "+str(doc["loanDate"])+" is more than "+schemas.MaxLoanDateAhead.String()+" ahead of this server's clock",
			"loanDate", str(doc["loanDate"]))
		return
	}
	lockID := r.Header.Get(schemas.HeaderLockID)
	if lockID != "" && !validUUID(lockID) {
		writeError(w, 400, schemas.CodeInvalidID, "Invalid lock id in "+schemas.HeaderLockID, "lockId", lockID)
		return
	}
	// The blocks an override lifts (the fake holds no permissions).
	var overrideLimit, overrideBlock bool
	if v := r.Header.Get(schemas.HeaderCheckOutOverride); v != "" {
		for _, b := range strings.Split(v, ",") {
			switch strings.TrimSpace(b) {
			case "itemLimitBlock":
				overrideLimit = true
			case "patronBlock":
				overrideBlock = true
			default:
				writeError(w, 400, schemas.CodeInvalidHeader, schemas.HeaderCheckOutOverride+" lists the blocks an override lifts: itemLimitBlock, patronBlock",
					"override", v)
				return
			}
		}
	}
	lockID = strings.ToLower(lockID)
	release := false
	switch v := r.Header.Get(schemas.HeaderReleaseLock); {
	case f.keepLocks:
	case v == "true" && lockID != "":
		release = true
	case v == "true":
		writeError(w, 400, schemas.CodeInvalidHeader, schemas.HeaderReleaseLock+" needs the lock to release in "+schemas.HeaderLockID)
		return
	case v != "" && v != "false":
		writeError(w, 400, schemas.CodeInvalidHeader, schemas.HeaderReleaseLock+" must be true or false", "releaseLock", v)
		return
	}
	// Then the conditions, in storage's order: the lock required, the
	// fence (the lock live, the borrower's and the caller's), the item
	// limit the rules set, the item's version, and last the one open loan
	// per item.
	if lockID == "" && f.lockFeatureOn() {
		writeError(w, 422, schemas.CodeLockRequired, "The check-out lock is on for this tenant: a loan is opened only under the borrower's live lock ("+
			schemas.HeaderLockID+"); nothing was written")
		return
	}
	if lockID != "" {
		held := false
		caller := r.Header.Get(schemas.HeaderUserID)
		for _, l := range f.locks {
			if f.loseLock && l.ID == lockID {
				l.ExpiresAt = time.Now().Add(-time.Millisecond)
			}
			held = held || (l.ID == lockID && l.UserID == doc["userId"] && f.live(l) && l.Holder["acquiredBy"] == caller)
		}
		if !held {
			writeError(w, 409, schemas.CodeLockLost,
				"Check-out lock "+lockID+" is not held for this patron by this caller (it expired, was released, or is someone else's); nothing was written", "lockId", lockID)
			return
		}
	}
	if f.loanFail == loanFailsBefore {
		writeError(w, 503, schemas.CodeDatabaseUnavailable, "Database unavailable, try again later")
		return
	}
	head := f.queueHead(str(doc["itemId"]))
	if head != nil && head["requesterId"] != doc["userId"] {
		writeError(w, 422, schemas.CodeItemRequestedByAnotherPatron, "The item's first request is another patron's; nothing was written",
			"requestId", str(head["id"]))
		return
	}
	if item := find(f.items, str(doc["itemId"])); item != nil && !overrideLimit {
		if limit, mt, lt := f.itemLimit(item); limit > 0 {
			if open := f.countOpen(str(doc["userId"]), mt, lt); open >= limit {
				writeError(w, 422, schemas.CodeItemLimitReached, fmt.Sprintf("Patron has reached maximum limit of %d items", limit),
					"itemLimit", strconv.Itoa(limit), "openLoans", strconv.Itoa(open))
				return
			}
		}
	}
	if c := f.charged; c != nil && !overrideBlock {
		if open := f.countOpen(str(doc["userId"]), "", ""); open >= c.Limit {
			writeError(w, 422, schemas.CodeUserBlockedAutomatically, c.Message, "patronBlockConditionId", schemas.ConditionItemsChargedOut,
				"limit", strconv.Itoa(c.Limit), "openLoans", strconv.Itoa(open))
			return
		}
	}
	// A check-out's loan moves its item to Checked out in the same
	// transaction, at the version the check-out read.
	item := f.loanItemAt(w, doc, itemVersion, "check out")
	if item == nil {
		return
	}
	for _, l := range f.loans {
		if l["itemId"] == doc["itemId"] && statusName(l) == "Open" {
			writeError(w, 422, schemas.CodeItemHasOpenLoan, "Cannot have more than one open loan for the same item", "itemId", str(doc["itemId"]))
			return
		}
	}
	if find(f.loans, str(doc["id"])) != nil {
		writeError(w, 409, schemas.CodeConflict, "Loan "+str(doc["id"])+" already exists", "id", str(doc["id"]))
		return
	}
	item["status"] = map[string]any{"name": "Checked out", "date": time.Now().UTC().Format(schemas.TimeFormat)}
	item["_version"] = version(item) + 1
	f.loans = append(f.loans, doc)
	if head != nil {
		f.fill(head)
	}
	if release {
		// The lock goes with the loan, in the same transaction.
		f.releaseLocked(lockID)
	}
	if f.loanFail == loanFailsAfterCommit {
		// The commit happened; the answer says otherwise, as when the
		// connection breaks during COMMIT.
		writeError(w, 503, schemas.CodeDatabaseUnavailable, "Database unavailable, try again later")
		return
	}
	w.Header().Set("Location", "/loan-storage/loans/"+str(doc["id"]))
	if release {
		w.Header().Set(schemas.HeaderLockReleased, "true")
	}
	writeJSON(w, 201, doc)
}

func (f *Fake) putLoan(w http.ResponseWriter, r *http.Request) {
	doc, ok := f.bind(w, r, "loan.json")
	if !ok {
		return
	}
	// A check-in's replacement moves its item to Available in the same
	// transaction, at the version the check-in read.
	itemVersion, ok := headerVersion(w, r, schemas.HeaderCheckInItemVersion)
	if !ok {
		return
	}
	if f.loanUpdates {
		writeError(w, 503, schemas.CodeDatabaseUnavailable, "Database unavailable, try again later")
		return
	}
	var item map[string]any
	if itemVersion > 0 {
		if item = f.loanItemAt(w, doc, itemVersion, "check in"); item == nil {
			return
		}
	}
	stored := find(f.loans, r.PathValue("id"))
	if stored == nil {
		writeError(w, 404, schemas.CodeNotFound, "Loan not found", "id", r.PathValue("id"))
		return
	}
	id, was, is := r.PathValue("id"), statusName(stored), statusName(doc)
	same := stored["userId"] == doc["userId"] && stored["itemId"] == doc["itemId"]
	switch {
	case itemVersion > 0 && was != "Open":
		writeError(w, 422, schemas.CodeNoOpenLoan, "Loan "+id+" is not open: there is nothing to check in", "loanId", id)
		return
	case itemVersion > 0 && (is != "Closed" || !same):
		writeError(w, 422, schemas.CodeCheckInRequired, "A check-in closes the loan (status Closed) and changes neither its userId nor its itemId")
		return
	case itemVersion == 0 && was == "Open" && is != "Open":
		writeError(w, 422, schemas.CodeCheckInRequired, "Loan "+id+" is open: it is closed only by a check-in ("+schemas.HeaderCheckInItemVersion+
			"), which makes its item Available with it", "status", is)
		return
	case itemVersion == 0 && was != "Open" && is == "Open":
		writeError(w, 422, schemas.CodeCheckOutRequired, "Loan "+id+" is closed and stays closed: a loan is opened only by a check-out", "status", is)
		return
	case itemVersion == 0 && was == "Open" && !same:
		writeError(w, 422, schemas.CodeCheckInRequired, "Loan "+id+" is open: its userId and itemId do not change; check the item in, and out to the other patron")
		return
	}
	if item != nil {
		item["status"] = map[string]any{"name": "Available", "date": time.Now().UTC().Format(schemas.TimeFormat)}
		item["_version"] = version(item) + 1
	}
	doc["id"] = r.PathValue("id")
	replace(f.loans, doc)
	if f.loanUpdatesAfterCommit {
		// The commit happened; the answer says otherwise.
		writeError(w, 503, schemas.CodeDatabaseUnavailable, "Database unavailable, try again later")
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// loanItemAt is the loan's item if it is at the version a check-out or
// check-in (verb) read; otherwise it answers as storage does and is nil.
func (f *Fake) loanItemAt(w http.ResponseWriter, doc map[string]any, at int, verb string) map[string]any {
	item := find(f.items, str(doc["itemId"]))
	switch {
	case item == nil:
		writeError(w, 422, schemas.CodeValidation, "itemId: item "+str(doc["itemId"])+" does not exist", "itemId", str(doc["itemId"]))
		return nil
	case version(item) != at:
		writeError(w, 409, schemas.CodeVersionConflict, fmt.Sprintf("Cannot %s item %s because it has been changed: stored _version is %d, request has %d; nothing was written",
			verb, str(doc["itemId"]), version(item), at), "_version", strconv.Itoa(version(item)))
		return nil
	}
	return item
}

// headerVersion reads an item version header (0 when absent), refusing
// what storage refuses; ok is false when it answered.
func headerVersion(w http.ResponseWriter, r *http.Request, header string) (n int, ok bool) {
	v := r.Header.Get(header)
	if v == "" {
		return 0, true
	}
	parsed, err := strconv.ParseInt(v, 10, 32)
	if err != nil || parsed < 1 {
		writeError(w, 400, schemas.CodeInvalidHeader, header+" must be an integer from 1 to 2147483647", "itemVersion", v)
		return 0, false
	}
	return int(parsed), true
}

func (f *Fake) openCount(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	if q.Get("userId") == "" {
		writeError(w, 422, schemas.CodeInvalidParameter, "userId is required")
		return
	}
	writeJSON(w, 200, map[string]int{"totalRecords": f.countOpen(q.Get("userId"), q.Get("materialTypeId"), q.Get("loanTypeId"))})
}

// countOpen is the item limit's count of the patron's open loans (of the
// material type and loan type when given), or the next count a test
// programmed (OpenCounts).
func (f *Fake) countOpen(userID, materialTypeID, loanTypeID string) int {
	if len(f.openCounts) > 0 {
		n := f.openCounts[0]
		f.openCounts = f.openCounts[1:]
		return n
	}
	n := 0
	for _, l := range f.loans {
		item := find(f.items, str(l["itemId"]))
		if l["userId"] != userID || statusName(l) != "Open" || item == nil || statusName(item) == "Claimed returned" {
			continue
		}
		if materialTypeID != "" && materialTypeID != item["materialTypeId"] {
			continue
		}
		if loanTypeID != "" && loanTypeID != loanTypeOf(item) {
			continue
		}
		n++
	}
	return n
}

// loanTypeOf is an item's loan type: its temporary one when set.
func loanTypeOf(item map[string]any) string {
	if t := str(item["temporaryLoanTypeId"]); t != "" {
		return t
	}
	return str(item["permanentLoanTypeId"])
}

// validation answers everything a check-out's validation reads, as
// storage's one call does.
func (f *Fake) validation(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	for _, p := range []string{"itemBarcode", "userBarcode"} {
		if q.Get(p) == "" {
			writeError(w, 422, schemas.CodeInvalidParameter, p+" is required", p, "")
			return
		}
	}
	out := map[string]any{"circulationRulesSet": false}
	if !f.omitLockSettings {
		out["lockSettings"] = f.lockSettings()
	}
	user := firstWith(f.users, "barcode", q.Get("userBarcode"))
	item := firstWith(f.items, "barcode", q.Get("itemBarcode"))
	if user != nil {
		f.addPatron(out, user)
	}
	if item == nil {
		writeJSON(w, 200, out)
		return
	}
	out["item"] = item
	if head := f.queueHead(str(item["id"])); head != nil {
		out["requestQueueHead"] = head
	}
	out["materialType"] = map[string]any{"id": item["materialTypeId"], "name": MaterialTypeName}
	for _, l := range f.loans {
		if l["itemId"] == item["id"] && statusName(l) == "Open" {
			out["openLoan"] = l
			break
		}
	}
	if user != nil && f.match != nil {
		out["circulationRulesSet"] = true
		m := f.match
		out["loanPolicyMatch"] = map[string]any{"loanPolicyId": m.LoanPolicyID, "appliedRuleConditions": map[string]bool{
			"patronGroupMatch": m.PatronGroupMatch, "materialTypeMatch": m.MaterialTypeMatch, "loanTypeMatch": m.LoanTypeMatch}}
		policy, ok := f.policyDoc(m.LoanPolicyID)
		if !ok {
			writeError(w, 404, schemas.CodeNotFound, "Loan policy not found")
			return
		}
		out["loanPolicy"] = policy
		var mt, lt string
		if m.MaterialTypeMatch {
			mt = str(item["materialTypeId"])
		}
		if m.LoanTypeMatch {
			lt = loanTypeOf(item)
		}
		open := f.countOpen(str(user["id"]), mt, lt)
		out["openLoanCount"] = open
		if limit, mt, lt := f.itemLimit(item); limit > 0 {
			l := map[string]any{"limit": limit, "openLoans": open, "reached": open >= limit}
			if mt != "" {
				l["materialTypeId"] = mt
			}
			if lt != "" {
				l["loanTypeId"] = lt
			}
			out["itemLimit"] = l
		}
	}
	writeJSON(w, 200, out)
}

// addPatron adds to a validation's or a patron summary's answer the
// patron (what a check-out decides on, never contact details) and their
// blocks.
func (f *Fake) addPatron(out, user map[string]any) {
	personal, _ := user["personal"].(map[string]any)
	names := map[string]any{}
	for _, k := range []string{"firstName", "lastName"} {
		if v, ok := personal[k]; ok {
			names[k] = v
		}
	}
	u := map[string]any{"id": user["id"], "barcode": user["barcode"], "active": user["active"],
		"patronGroup": user["patronGroup"], "personal": names}
	if e, ok := user["expirationDate"]; ok {
		u["expirationDate"] = e
	}
	out["user"] = u
	if blocks := f.borrowingBlocks(str(user["id"])); len(blocks) > 0 {
		out["manualBlocks"] = blocks
	}
	if c := f.charged; c != nil && f.countOpen(str(user["id"]), "", "") >= c.Limit {
		out["automatedPatronBlocks"] = []map[string]any{{"patronBlockConditionId": schemas.ConditionItemsChargedOut,
			"blockBorrowing": true, "blockRenewals": false, "blockRequests": false, "message": c.Message}}
	}
}

// pinMaxFailures is storage's LOGIN_MAX_FAILURES default: that many wrong
// PINs in a row lock a patron's PIN.
const pinMaxFailures = 5

// setPin is POST /patron-pin: the patron's PIN, replaced.
func (f *Fake) setPin(w http.ResponseWriter, r *http.Request) {
	doc, ok := f.bind(w, r, "patron-pin.json")
	if !ok {
		return
	}
	id := strings.ToLower(str(doc["id"]))
	if find(f.users, id) == nil {
		writeError(w, 404, schemas.CodeNotFound, "User not found", "id", id)
		return
	}
	if f.pins == nil {
		f.pins, f.pinFailures = map[string]string{}, map[string]int{}
	}
	f.pins[id] = str(doc["pin"])
	delete(f.pinFailures, id)
	w.WriteHeader(http.StatusCreated)
}

// verifyPin is POST /patron-pin/verify: 200 for the patron's PIN, 422
// PIN_INVALID for another (or none), 429 PIN_LOCKED after pinMaxFailures
// wrong ones in a row.
func (f *Fake) verifyPin(w http.ResponseWriter, r *http.Request) {
	doc, ok := f.bind(w, r, "patron-pin.json")
	if !ok {
		return
	}
	id := strings.ToLower(str(doc["id"]))
	if f.pinFailures[id] >= pinMaxFailures {
		w.Header().Set("Retry-After", "900")
		writeError(w, 429, schemas.CodePinLocked, "Too many wrong PINs: try again in 900 s")
		return
	}
	if pin, ok := f.pins[id]; !ok || pin != str(doc["pin"]) {
		if f.pinFailures == nil {
			f.pins, f.pinFailures = map[string]string{}, map[string]int{}
		}
		f.pinFailures[id]++
		writeError(w, 422, schemas.CodePinInvalid, "Wrong PIN")
		return
	}
	delete(f.pinFailures, id)
	w.WriteHeader(http.StatusOK)
}

// itemLimit is the item limit the rules set for a check-out of item, as
// storage decides it: the matched policy's, when the rule names a
// material type or a loan type (an unscoped limit is enforced, storage's
// default), with what it counts; 0 when none.
func (f *Fake) itemLimit(item map[string]any) (limit int, materialTypeID, loanTypeID string) {
	if f.match == nil {
		return 0, "", ""
	}
	p, ok := f.policies[f.match.LoanPolicyID]
	if !ok || p.ItemLimit <= 0 || (f.unscopedIgnored && !f.match.MaterialTypeMatch && !f.match.LoanTypeMatch) {
		return 0, "", ""
	}
	if f.match.MaterialTypeMatch {
		materialTypeID = str(item["materialTypeId"])
	}
	if f.match.LoanTypeMatch {
		loanTypeID = loanTypeOf(item)
	}
	return p.ItemLimit, materialTypeID, loanTypeID
}

// hasOpenLoan reports whether the item has an open loan.
func (f *Fake) hasOpenLoan(itemID string) bool {
	for _, l := range f.loans {
		if l["itemId"] == itemID && statusName(l) == "Open" {
			return true
		}
	}
	return false
}

// lockFeatureOn is the tenant's lock feature as storage reads it in a
// write: the stored setting's checkOutLockFeatureEnabled when it says,
// else the default (SetLockFeatureDefault).
func (f *Fake) lockFeatureOn() bool {
	for _, st := range f.settings {
		if st["scope"] != locksettings.Scope || st["key"] != locksettings.Key {
			continue
		}
		raw, _ := json.Marshal(st["value"])
		v, _ := locksettings.Decode(raw)
		if v.CheckOutLockFeatureEnabled != nil {
			return *v.CheckOutLockFeatureEnabled
		}
	}
	return f.lockFeature
}

// IgnoreUnscopedItemLimits makes the fake a storage that follows FOLIO
// (ITEM_LIMIT_WITHOUT_CRITERIA=ignore): a limit whose rule names neither a
// material type nor a loan type is not enforced.
func (f *Fake) IgnoreUnscopedItemLimits() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.unscopedIgnored = true
}

// SetLockFeatureDefault sets the lock feature for a tenant that stored no
// setting, as storage's CHECKOUT_LOCK_FEATURE_ENABLED does: on, a loan is
// opened only under the borrower's lock.
func (f *Fake) SetLockFeatureDefault(on bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.lockFeature = on
}

// firstWith is the first doc whose field equals value, or nil.
func firstWith(docs []map[string]any, field, value string) map[string]any {
	for _, d := range docs {
		if str(d[field]) == value {
			return d
		}
	}
	return nil
}

func (f *Fake) matchPolicy(w http.ResponseWriter, _ *http.Request) {
	if f.match == nil {
		writeError(w, 404, schemas.CodeNotFound, "No circulation rules are set: PUT /circulation-rules-storage first")
		return
	}
	writeJSON(w, 200, map[string]any{"loanPolicyId": f.match.LoanPolicyID, "appliedRuleConditions": map[string]bool{
		"patronGroupMatch": f.match.PatronGroupMatch, "materialTypeMatch": f.match.MaterialTypeMatch, "loanTypeMatch": f.match.LoanTypeMatch}})
}

func (f *Fake) getPolicy(w http.ResponseWriter, r *http.Request) {
	doc, ok := f.policyDoc(r.PathValue("id"))
	if !ok {
		writeError(w, 404, schemas.CodeNotFound, "Loan policy not found")
		return
	}
	writeJSON(w, 200, doc)
}

// policyDoc is the loan policy with the id as storage holds it.
func (f *Fake) policyDoc(id string) (map[string]any, bool) {
	p, ok := f.policies[id]
	if !ok {
		return nil, false
	}
	doc := map[string]any{"id": p.ID, "name": p.Name, "loanable": p.Loanable}
	if p.Loanable {
		lp := map[string]any{"profileId": "Rolling", "period": map[string]any{"duration": p.Duration, "intervalId": p.Interval}}
		if p.ItemLimit > 0 {
			lp["itemLimit"] = p.ItemLimit
		}
		doc["loansPolicy"] = lp
	}
	return doc, true
}

// acquire takes the patron's lock as storage's one statement does: under
// the client's id (a new one when it names none); naming the id of the
// patron's own lock renews it, keeping id and creation date; another live
// lock of the patron refuses it with 503 LOCK_HELD; an id in use by another
// patron's lock is a 409 CONFLICT.
func (f *Fake) acquire(w http.ResponseWriter, r *http.Request) {
	doc, ok := f.bind(w, r, "checkout-lock-request.json")
	if !ok {
		return
	}
	userID := strings.ToLower(str(doc["userId"]))
	lockID := strings.ToLower(str(doc["id"]))
	holder := map[string]string{}
	if h, ok := doc["holder"].(map[string]any); ok {
		for k, v := range h {
			holder[k] = str(v)
		}
	}
	if sp, ok := holder["servicePointId"]; ok {
		holder["servicePointId"] = strings.ToLower(sp)
	}
	if user := r.Header.Get(schemas.HeaderUserID); user != "" {
		holder["acquiredBy"] = user
	}
	ttl := defaultLockTTLMs
	if v, ok := doc["ttlMs"].(float64); ok {
		if v > maxLockTTLMs {
			writeError(w, 422, schemas.CodeValidation, fmt.Sprintf("ttlMs: must be at most %.0f", maxLockTTLMs), "ttlMs", strconv.FormatFloat(v, 'f', -1, 64))
			return
		}
		ttl = int(v)
	}
	var wait time.Duration
	if v, ok := doc["waitMs"].(float64); ok {
		if v > maxWaitMs {
			writeError(w, 422, schemas.CodeValidation, fmt.Sprintf("waitMs: must be at most %d", maxWaitMs), "waitMs", strconv.FormatFloat(v, 'f', -1, 64))
			return
		}
		wait = time.Duration(v) * time.Millisecond
	}
	if f.acquireStatus != 0 && f.acquireFails != 0 {
		if f.acquireFails > 0 {
			f.acquireFails--
		}
		writeError(w, f.acquireStatus, f.acquireCode, "Acquire failed (programmed fault)")
		return
	}
	if f.lockHeld != 0 {
		if f.lockHeld > 0 {
			f.lockHeld--
		}
		// Someone else (not modelled) holds it, and storage answers at
		// once (as one that does not wait): no expiry to name.
		w.Header().Set("Retry-After", "1")
		writeError(w, 503, schemas.CodeLockHeld, "Unable to acquire lock", "userId", userID)
		return
	}
	if wait > 0 && f.waitInVain != 0 {
		if f.waitInVain > 0 {
			f.waitInVain--
		}
		w.Header().Set("Retry-After", "1")
		writeError(w, 503, schemas.CodeLockHeld, "Unable to acquire lock", "userId", userID,
			"waitedMs", strconv.FormatInt(wait.Milliseconds(), 10))
		return
	}
	start := time.Now()
	var row *Lock
	for {
		// row is the patron's lock as storage's one row per patron holds
		// it: released locks are deleted rows, replaced ones were taken
		// over.
		row = nil
		for _, l := range f.locks {
			if l.UserID == userID && !l.Released && !l.replaced {
				row = l
			}
		}
		if row == nil || (row.ID == lockID && row.Holder["acquiredBy"] == holder["acquiredBy"]) || !f.live(row) {
			break
		}
		// Held by someone else: wait for a release, the holder's expiry or
		// the end of the wait, as storage does; the client leaving ends it.
		left := wait - time.Since(start)
		if left <= 0 {
			remaining := time.Until(row.ExpiresAt)
			w.Header().Set("Retry-After", strconv.Itoa(max(1, int(math.Ceil(remaining.Seconds())))))
			params := []string{"userId", userID, "expiresAt", row.ExpiresAt.UTC().Format(schemas.TimeFormat)}
			for _, p := range [][2]string{{"holderInstance", "instance"}, {"holderRequestId", "requestId"},
				{"holderItemBarcode", "itemBarcode"}, {"holderServicePointId", "servicePointId"}} {
				if v := row.Holder[p[1]]; v != "" {
					params = append(params, p[0], v)
				}
			}
			if wait > 0 {
				params = append(params, "waitedMs", strconv.FormatInt(time.Since(start).Milliseconds(), 10))
			}
			writeError(w, 503, schemas.CodeLockHeld, "Unable to acquire lock", params...)
			return
		}
		released := f.released
		f.mu.Unlock()
		timer := time.NewTimer(min(left, time.Until(row.ExpiresAt)+time.Millisecond))
		select {
		case <-released:
		case <-timer.C:
		case <-r.Context().Done():
		}
		timer.Stop()
		f.mu.Lock()
		if r.Context().Err() != nil {
			return // the client has gone: nothing granted
		}
	}
	now := time.Now().UTC()
	switch {
	case row != nil && row.ID == lockID && f.live(row):
		// The holder asking again: renewed, id and creation date kept
		// (another caller naming its id waited above as for any lock).
	case lockID != "" && slices.ContainsFunc(f.locks, func(l *Lock) bool {
		return l.ID == lockID && l.UserID != userID && !l.Released && !l.replaced
	}):
		writeError(w, 409, schemas.CodeConflict, "Lock id is already used by another patron's lock")
		return
	default:
		// A new lock, or a takeover of the patron's expired one.
		if row != nil {
			row.replaced = true
		}
		if lockID == "" {
			lockID = uuid.NewString()
		}
		row = &Lock{ID: lockID, UserID: userID, CreationDate: now}
		f.locks = append(f.locks, row)
	}
	l := row
	l.TTLMs, l.ExpiresAt, l.Holder = ttl, now.Add(time.Duration(ttl)*time.Millisecond), holder
	if f.lostGrants > 0 {
		f.lostGrants--
		if f.grantLoss == AnswerCut {
			f.cut(w)
			return
		}
		writeError(w, 503, schemas.CodeDatabaseUnavailable, "Database unavailable, try again later")
		return
	}
	w.Header().Set("Location", "/check-out-lock-storage/"+l.ID)
	writeJSON(w, 201, lockJSON(l))
}

// waitMsOf is the waitMs of a request body, 0 when it has none.
func waitMsOf(body []byte) int {
	var doc struct {
		WaitMs float64 `json:"waitMs"`
	}
	_ = json.Unmarshal(body, &doc)
	return int(doc.WaitMs)
}

// cut closes the request's connection without answering.
func (f *Fake) cut(w http.ResponseWriter) {
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		panic(http.ErrAbortHandler) // net/http closes the connection
	}
	_ = conn.Close()
}

// lockJSON is a lock on the wire (checkout-lock.json).
func lockJSON(l *Lock) map[string]any {
	doc := map[string]any{"id": l.ID, "userId": l.UserID, "creationDate": l.CreationDate.UTC().Format(schemas.TimeFormat),
		"expiresAt": l.ExpiresAt.UTC().Format(schemas.TimeFormat), "ttlMs": l.TTLMs}
	if len(l.Holder) > 0 {
		doc["holder"] = l.Holder
	}
	return doc
}

func (f *Fake) getLock(w http.ResponseWriter, r *http.Request) {
	id, ok := pathID(w, r, "lock")
	if !ok {
		return
	}
	for _, l := range f.locks {
		if l.ID == id && f.live(l) {
			writeJSON(w, 200, lockJSON(l))
			return
		}
	}
	writeError(w, 404, schemas.CodeNotFound, "Lock not found", "id", id)
}

func (f *Fake) release(w http.ResponseWriter, r *http.Request) {
	id, ok := pathID(w, r, "lock")
	if !ok {
		return
	}
	if f.releaseStatus != 0 {
		writeError(w, f.releaseStatus, schemas.CodeInternal, "Release failed (programmed fault)")
		return
	}
	if f.releaseLocked(id) {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	writeError(w, 404, schemas.CodeNotFound, "Lock not found", "id", id)
}

// releaseLocked releases the live lock id and wakes the waiting
// acquisitions; false when there is none. f.mu is held.
func (f *Fake) releaseLocked(id string) bool {
	for _, l := range f.locks {
		if l.ID == id && f.live(l) {
			l.Released = true
			close(f.released)
			f.released = make(chan struct{})
			return true
		}
	}
	return false
}

func (f *Fake) live(l *Lock) bool { return !l.Released && time.Now().Before(l.ExpiresAt) }

func (f *Fake) listSettings(w http.ResponseWriter, r *http.Request) {
	if f.settingsFail != 0 {
		writeError(w, f.settingsFail, schemas.CodeInternal, "Settings read failed (programmed fault)")
		return
	}
	writePage(w, r, "items", filter(f.settings, r, "scope", "key"))
}

func (f *Fake) postSetting(w http.ResponseWriter, r *http.Request) {
	doc, ok := f.bind(w, r, "setting.json")
	if !ok || !checkSetting(w, doc) {
		return
	}
	for _, s := range f.settings {
		if s["scope"] == doc["scope"] && s["key"] == doc["key"] {
			v := str(doc["scope"]) + "/" + str(doc["key"])
			writeError(w, 422, schemas.CodeAlreadyExists, fmt.Sprintf("Setting with key %q already exists", v), "key", v)
			return
		}
	}
	if doc["id"] == nil {
		doc["id"] = uuid.NewString()
	}
	doc["_version"] = 1
	f.settings = append(f.settings, doc)
	w.Header().Set("Location", "/settings/entries/"+str(doc["id"]))
	writeJSON(w, 201, doc)
}

// putSetting replaces an entry; one naming a _version is refused when
// another write came first (409 VERSION_CONFLICT), one without replaces.
func (f *Fake) putSetting(w http.ResponseWriter, r *http.Request) {
	doc, ok := f.bind(w, r, "setting.json")
	if !ok || !checkSetting(w, doc) {
		return
	}
	stored := find(f.settings, r.PathValue("id"))
	switch {
	case stored == nil:
		writeError(w, 404, schemas.CodeNotFound, "Setting not found", "id", r.PathValue("id"))
	case doc["_version"] != nil && version(doc) != version(stored):
		writeError(w, 409, schemas.CodeVersionConflict, fmt.Sprintf("Cannot update record %s because it has been changed: stored _version is %d, request has %d",
			r.PathValue("id"), version(stored), version(doc)), "_version", strconv.Itoa(version(stored)))
	default:
		doc["id"], doc["_version"] = stored["id"], version(stored)+1
		replace(f.settings, doc)
		w.WriteHeader(http.StatusNoContent)
	}
}

// checkSetting refuses, as storage does, a check-out lock settings entry
// out of bounds: one 422 entry for each field; ok is false when it
// answered.
func checkSetting(w http.ResponseWriter, doc map[string]any) bool {
	if doc["scope"] != locksettings.Scope || doc["key"] != locksettings.Key {
		return true
	}
	raw, _ := json.Marshal(doc["value"])
	errs := locksettings.DefaultBounds(maxWaitMs * time.Millisecond).Validate(raw)
	if len(errs) == 0 {
		return true
	}
	var env struct {
		Errors []map[string]any `json:"errors"`
	}
	for _, e := range errs {
		field := "value"
		if e.Field != "" {
			field += "." + e.Field
		}
		env.Errors = append(env.Errors, map[string]any{"message": field + ": " + e.Message, "code": schemas.CodeValidation,
			"parameters": []map[string]string{{"key": field, "value": e.Value}}})
	}
	writeJSON(w, 422, env)
	return false
}

// Helpers.

// bind validates the body against the contract's schema and decodes it; on
// failure it answers as storage does.
func (f *Fake) bind(w http.ResponseWriter, r *http.Request, schema string) (map[string]any, bool) {
	body, _ := io.ReadAll(r.Body)
	if err := f.schemas.ValidateJSON(schema, body); err != nil {
		// As storage answers it: each violation's field and value.
		var params []string
		var v *schemas.ValidationError
		if errors.As(err, &v) {
			for _, vi := range v.Violations {
				params = append(params, vi.Field, vi.Value)
			}
		}
		writeError(w, 422, schemas.CodeValidation, err.Error(), params...)
		return nil, false
	}
	var doc map[string]any
	if err := json.Unmarshal(body, &doc); err != nil {
		writeError(w, 400, schemas.CodeMalformedJSON, err.Error())
		return nil, false
	}
	return doc, true
}

// filter returns the records whose fields equal the given query parameters
// (those the request has).
func filter(docs []map[string]any, r *http.Request, params ...string) []map[string]any {
	q := r.URL.Query()
	out := []map[string]any{}
	for _, d := range docs {
		match := true
		for _, p := range params {
			if v := q.Get(p); v != "" && str(d[p]) != v {
				match = false
			}
		}
		if match {
			out = append(out, d)
		}
	}
	return out
}

// writePage answers a page of docs (offset, limit: 10 by default) and the
// number of all of them.
func writePage(w http.ResponseWriter, r *http.Request, plural string, docs []map[string]any) {
	total := len(docs)
	offset, limit := 0, 10
	if v, err := strconv.Atoi(r.URL.Query().Get("offset")); err == nil && v >= 0 {
		offset = v
	}
	if v, err := strconv.Atoi(r.URL.Query().Get("limit")); err == nil && v >= 0 {
		limit = v
	}
	docs = docs[min(offset, total):min(offset+limit, total)]
	writeJSON(w, 200, map[string]any{plural: docs, "totalRecords": total})
}

func find(docs []map[string]any, id string) map[string]any {
	for _, d := range docs {
		if d["id"] == id {
			return d
		}
	}
	return nil
}

func replace(docs []map[string]any, doc map[string]any) {
	for i, d := range docs {
		if d["id"] == doc["id"] {
			docs[i] = doc
		}
	}
}

func str(v any) string {
	s, _ := v.(string)
	return s
}

func statusName(doc map[string]any) string {
	s, _ := doc["status"].(map[string]any)
	return str(s["name"])
}

func version(doc map[string]any) int {
	switch v := doc["_version"].(type) {
	case float64:
		return int(v)
	case int:
		return v
	}
	return 0
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// writeError answers with the FOLIO error envelope; params are its
// parameters as key, value pairs.
func writeError(w http.ResponseWriter, status int, code, message string, params ...string) {
	e := map[string]any{"message": message, "code": code}
	if len(params) > 0 {
		var ps []map[string]string
		for i := 0; i+1 < len(params); i += 2 {
			ps = append(ps, map[string]string{"key": params[i], "value": params[i+1]})
		}
		e["parameters"] = ps
	}
	writeJSON(w, status, map[string]any{"errors": []map[string]any{e}})
}

// pathID reads the {id} path value; what is not a UUID is answered 400
// INVALID_ID, as storage answers it.
func pathID(w http.ResponseWriter, r *http.Request, what string) (string, bool) {
	id := r.PathValue("id")
	if !validUUID(id) {
		writeError(w, 400, schemas.CodeInvalidID, "Invalid "+what+" id", "id", id)
		return "", false
	}
	return strings.ToLower(id), true
}

// validUUID reports whether s is a UUID as uuid.json accepts it.
func validUUID(s string) bool {
	b, err := json.Marshal(s)
	return err == nil && contract().ValidateJSON("uuid.json", b) == nil
}

// contract is the compiled schemas, shared by every fake: compiling them
// is the costliest part of New.
var contract = sync.OnceValue(schemas.MustLoad)
