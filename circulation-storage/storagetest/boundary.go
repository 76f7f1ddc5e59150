package storagetest

import (
	"bytes"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/checkoutlock/schemas"
)

// Boundary is the network between the code under test and storage: it
// forwards every request to storage and its answer back, records each
// call, and makes the faults the test programs, each for the next calls of
// one route. It answers nothing of its own but those faults.
type Boundary struct {
	url    string
	srv    *httptest.Server
	target string
	client *http.Client

	mu      sync.Mutex
	calls   []Call
	faults  []*fault
	arrival func(route string)
}

// Call is one request that crossed the boundary.
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
	// AcquireLock is X-Check-Out-Acquire-Lock: a check-out's write that
	// acquires its lock; LockAcquired is storage's answer's
	// X-Check-Out-Lock-Acquired: it did.
	AcquireLock, LockAcquired string
	// WriteID is X-Write-Id: the write's own id; Replayed says storage
	// answered it from the id, a write with it having landed before
	// (X-Write-Replayed).
	WriteID  string
	Replayed bool
	Body     string
	// Status is the status the caller got (0 when the connection was cut).
	Status int
	// Answer is the body the caller got.
	Answer string
	// StorageStatus and StorageAnswer are what storage answered (0 and ""
	// when the call never reached it): the same as the caller's but where
	// the answer was lost.
	StorageStatus int
	StorageAnswer string
}

// WaitMs is the waitMs of an acquisition (0 when absent): its body's, or
// a write's that acquires its lock.
func (c Call) WaitMs() int {
	if c.AcquireLock != "" {
		return c.acquireTerm("waitMs")
	}
	var b struct {
		WaitMs int `json:"waitMs"`
	}
	_ = json.Unmarshal([]byte(c.Body), &b)
	return b.WaitMs
}

// Acquires says the call acquires a lock: an acquisition, or a write that
// acquires its lock.
func (c Call) Acquires() bool { return c.Route == RouteAcquire || c.AcquireLock != "" }

// acquireTerm is a number of a write's X-Check-Out-Acquire-Lock, 0 when
// absent.
func (c Call) acquireTerm(name string) int {
	q, _ := url.ParseQuery(c.AcquireLock)
	n, _ := strconv.Atoi(q.Get(name))
	return n
}

// BodyField is a top-level field of the request's JSON body, "" when
// absent.
func (c Call) BodyField(name string) string {
	var b map[string]any
	if json.Unmarshal([]byte(c.Body), &b) != nil || b[name] == nil {
		return ""
	}
	if s, ok := b[name].(string); ok {
		return s
	}
	j, _ := json.Marshal(b[name])
	return string(j)
}

// Loss is what happens to an answer the boundary loses.
type Loss int

// The ways an answer is lost, after storage did the work.
const (
	// LostUnavailable answers 503 DATABASE_UNAVAILABLE, as storage does
	// when its database connection breaks during the COMMIT that did the
	// work.
	LostUnavailable Loss = iota + 1
	// LostCut closes the connection without a word, as when the network
	// or the storage process fails right after the commit.
	LostCut
)

// fault is one programmed fault: for the next n calls of route (all when
// n < 0; RouteAcquire's faults meet a write that acquires its lock too), refuse with status and code before storage sees the call, or
// lose storage's answer, or run before first.
type fault struct {
	route  string
	n      int
	status int
	code   string
	lose   Loss
	before func(Call)
	// header is a request header taken off, field a top-level field taken
	// off a 2xx answer's JSON body: what an earlier release of storage
	// neither reads nor writes.
	header, field string
	// unread is a top-level field taken off the request's JSON body.
	unread string
	// when, if not nil, picks the calls the fault applies to.
	when func(Call) bool
}

func newBoundary(t testing.TB, target string) *Boundary {
	b := &Boundary{target: target, client: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}}
	b.srv = httptest.NewServer(http.HandlerFunc(b.serve))
	b.url = b.srv.URL
	t.Cleanup(func() {
		b.srv.Close()
		b.client.CloseIdleConnections()
	})
	return b
}

// Down closes the boundary: storage unreachable, every call refused a
// connection.
func (b *Boundary) Down() { b.srv.Close() }

// Refuse answers the next n calls of route (all of them when n < 0) with
// status and FOLIO's envelope of code, before storage sees them.
func (b *Boundary) Refuse(route string, n, status int, code string) {
	b.add(&fault{route: route, n: n, status: status, code: code})
}

// RefuseWhen is Refuse for the calls when picks.
func (b *Boundary) RefuseWhen(route string, n, status int, code string, when func(Call) bool) {
	b.add(&fault{route: route, n: n, status: status, code: code, when: when})
}

// Lose lets storage do the next n calls of route (all when n < 0) and
// loses their answers, as loss says.
func (b *Boundary) Lose(route string, n int, loss Loss) {
	b.add(&fault{route: route, n: n, lose: loss})
}

// LoseWhen is Lose for the calls when picks, its answer lost only when
// storage answered 2xx.
func (b *Boundary) LoseWhen(route string, n int, loss Loss, when func(Call) bool) {
	b.add(&fault{route: route, n: n, lose: loss, when: when})
}

// Before runs hook before the next n calls of route (all when n < 0)
// reach storage: whatever happens meanwhile (another patron's request,
// another check-out's loans, the lock expiring) happens between the
// caller's last look and its call.
func (b *Boundary) Before(route string, n int, hook func(Call)) {
	b.add(&fault{route: route, n: n, before: hook})
}

// AsIfUnknown makes storage see the next n calls of route (all when n <
// 0) without header, as a storage that predates the header would ignore
// it.
func (b *Boundary) AsIfUnknown(route string, n int, header string) {
	b.add(&fault{route: route, n: n, header: header})
}

// AsIfUnread takes field off the JSON body of the next n calls of route
// (all when n < 0) before storage sees it, as a storage that predates the
// field (FOLIO's, say) would ignore it, and off the terms of a write's
// X-Check-Out-Acquire-Lock. The call records the body as sent.
func (b *Boundary) AsIfUnread(route string, n int, field string) {
	b.add(&fault{route: route, n: n, unread: field})
}

// AsIfUnanswered takes field off the answers of the next n calls of route
// (all when n < 0), as a storage that predates the field answers.
func (b *Boundary) AsIfUnanswered(route string, n int, field string) {
	b.add(&fault{route: route, n: n, field: field})
}

// OnArrival calls hook with the route of every call as it arrives, before
// anything else (nil: no hook).
func (b *Boundary) OnArrival(hook func(route string)) {
	b.mu.Lock()
	b.arrival = hook
	b.mu.Unlock()
}

// Clear removes every programmed fault.
func (b *Boundary) Clear() {
	b.mu.Lock()
	b.faults = nil
	b.mu.Unlock()
}

func (b *Boundary) add(f *fault) {
	b.mu.Lock()
	b.faults = append(b.faults, f)
	b.mu.Unlock()
}

// take is the fault for call, if any, counted.
func (b *Boundary) take(c Call, kind func(*fault) bool) *fault {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, f := range b.faults {
		if (f.route == c.Route || f.route == RouteAcquire && c.Acquires()) && f.n != 0 && kind(f) && (f.when == nil || f.when(c)) {
			if f.n > 0 {
				f.n--
			}
			return f
		}
	}
	return nil
}

// Calls are the calls so far, in the order answered.
func (b *Boundary) Calls() []Call {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]Call(nil), b.calls...)
}

// Count is how many calls route got.
func (b *Boundary) Count(route string) int {
	n := 0
	for _, c := range b.Calls() {
		if c.Route == route {
			n++
		}
	}
	return n
}

// Routes are the routes of the calls so far, in order.
func (b *Boundary) Routes() []string {
	var out []string
	for _, c := range b.Calls() {
		out = append(out, c.Route)
	}
	return out
}

// Acquisitions are the calls that acquire a lock (Call.Acquires).
func (b *Boundary) Acquisitions() []Call {
	var out []Call
	for _, c := range b.Calls() {
		if c.Acquires() {
			out = append(out, c)
		}
	}
	return out
}

// Granted are the locks storage granted through the boundary, as its
// answers said, whether or not the caller heard them; a renewal's answer
// replaces the grant of the same id. A write that acquired its lock
// stands for the lock its request named.
func (b *Boundary) Granted() []Lock {
	var out []Lock
	at := map[string]int{}
	for _, c := range b.Calls() {
		var l Lock
		switch {
		case c.Route == RouteAcquire && c.StorageStatus == http.StatusCreated:
			if err := json.Unmarshal([]byte(c.StorageAnswer), &l); err != nil {
				continue
			}
		case c.AcquireLock != "" && c.LockAcquired != "":
			l = Lock{ID: c.LockID, UserID: c.BodyField("userId"), TTLMs: c.acquireTerm("ttlMs")}
		default:
			continue
		}
		if i, ok := at[l.ID]; ok {
			out[i] = l
			continue
		}
		at[l.ID] = len(out)
		out = append(out, l)
	}
	return out
}

// Writes are the calls that change something (not GET).
func (b *Boundary) Writes() []Call {
	var out []Call
	for _, c := range b.Calls() {
		if c.Method != http.MethodGet {
			out = append(out, c)
		}
	}
	return out
}

func (b *Boundary) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	c := Call{Route: routeOf(r.Method, r.URL.Path), Method: r.Method, Path: r.URL.Path, Query: r.URL.RawQuery,
		Tenant: r.Header.Get(schemas.HeaderTenant), RequestID: r.Header.Get(schemas.HeaderRequestID),
		LockID: r.Header.Get(schemas.HeaderLockID), ReleaseLock: r.Header.Get(schemas.HeaderReleaseLock),
		AcquireLock: r.Header.Get(schemas.HeaderAcquireLock), WriteID: r.Header.Get(schemas.HeaderWriteID), Body: string(body)}
	b.mu.Lock()
	arrival := b.arrival
	b.mu.Unlock()
	if arrival != nil {
		arrival(c.Route)
	}
	defer func() {
		b.mu.Lock()
		b.calls = append(b.calls, c)
		b.mu.Unlock()
	}()
	if f := b.take(c, func(f *fault) bool { return f.before != nil }); f != nil {
		f.before(c)
	}
	if f := b.take(c, func(f *fault) bool { return f.status != 0 }); f != nil {
		answer, _ := json.Marshal(map[string]any{"errors": []map[string]any{{"message": "fault at the boundary", "code": f.code}}})
		c.Status, c.Answer = f.status, string(answer)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(f.status)
		_, _ = w.Write(answer)
		return
	}
	sent, acquire := body, c.AcquireLock
	if f := b.take(c, func(f *fault) bool { return f.unread != "" }); f != nil {
		var doc map[string]json.RawMessage
		if json.Unmarshal(body, &doc) == nil {
			delete(doc, f.unread)
			sent, _ = json.Marshal(doc)
		}
		if q, err := url.ParseQuery(acquire); err == nil {
			q.Del(f.unread)
			acquire = q.Encode()
		}
	}
	req, err := http.NewRequestWithContext(r.Context(), r.Method, b.target+r.URL.RequestURI(), bytes.NewReader(sent))
	if err != nil {
		panic(err)
	}
	req.Header = r.Header.Clone()
	if acquire != "" {
		req.Header.Set(schemas.HeaderAcquireLock, acquire)
	}
	if f := b.take(c, func(f *fault) bool { return f.header != "" }); f != nil {
		req.Header.Del(f.header)
	}
	res, err := b.client.Do(req)
	if err != nil {
		// The caller left, or storage is gone: the caller hears nothing.
		cut(w)
		return
	}
	answer, _ := io.ReadAll(res.Body)
	res.Body.Close()
	c.StorageStatus, c.StorageAnswer = res.StatusCode, string(answer)
	c.LockAcquired = res.Header.Get(schemas.HeaderLockAcquired)
	c.Replayed = res.Header.Get(schemas.HeaderWriteReplayed) == "true"
	if res.StatusCode < 300 {
		if f := b.take(c, func(f *fault) bool { return f.lose != 0 }); f != nil {
			switch f.lose {
			case LostCut:
				cut(w)
			default:
				lost, _ := json.Marshal(map[string]any{"errors": []map[string]any{{
					"message": "Database unavailable, try again later", "code": schemas.CodeDatabaseUnavailable}}})
				c.Status, c.Answer = http.StatusServiceUnavailable, string(lost)
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusServiceUnavailable)
				_, _ = w.Write(lost)
			}
			return
		}
	}
	if res.StatusCode < 300 {
		if f := b.take(c, func(f *fault) bool { return f.field != "" }); f != nil {
			var doc map[string]json.RawMessage
			if json.Unmarshal(answer, &doc) == nil {
				delete(doc, f.field)
				answer, _ = json.Marshal(doc)
			}
		}
	}
	for k, vs := range res.Header {
		if strings.EqualFold(k, "Content-Length") {
			continue
		}
		for _, v := range vs {
			w.Header().Add(k, v)
		}
	}
	c.Status, c.Answer = res.StatusCode, string(answer)
	w.WriteHeader(res.StatusCode)
	_, _ = w.Write(answer)
}

// cut closes the caller's connection without an answer.
func cut(w http.ResponseWriter) {
	hj, ok := w.(http.Hijacker)
	if !ok {
		panic("storagetest: the boundary's server cannot hijack")
	}
	conn, _, err := hj.Hijack()
	if err == nil {
		if tc, ok := conn.(*net.TCPConn); ok {
			_ = tc.SetLinger(0)
		}
		conn.Close()
	}
}
