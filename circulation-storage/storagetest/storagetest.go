// Package storagetest gives another module's tests the real
// circulation-storage: the service's own process (app.Run, in-process)
// on the test PostgreSQL, a tenant of its own for each test, and a
// boundary in front of it where the test watches every call and makes
// the faults a network or a failing storage makes (an answer refused,
// lost after the work was done, cut, held back, a storage that is down).
// The boundary implements no rule of storage's: every answer it gives on
// its own is a fault the test asked for; everything else is storage's.
//
// Circulation's tests run against it, so no second implementation of
// storage exists to drift from the first.
//
// Storage runs with AUTH_MODE=none (an operator's explicit choice: the
// tests exercise circulation's flow, not its credentials, which the
// end-to-end tests in integration-tests hold to account), the events'
// outbox and sign-in off. The server is TEST_DATABASE_URL (default
// postgres://postgres@127.0.0.1:5432/postgres); the tests share one
// database, created on first use.
package storagetest

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/checkoutlock/circulation-storage/app"
	"github.com/checkoutlock/schemas"
)

// Database is the database the tests of every module share, each test in
// tenants of its own.
const Database = "circulation_storagetest"

// Storage is one test's storage: its tenant on a running service, behind
// the test's Boundary.
type Storage struct {
	// URL is the boundary's address: what the code under test calls.
	URL string
	// Tenant is the test's tenant, initialised.
	Tenant string
	*Boundary

	t      testing.TB
	direct string // the service itself, for arranging and reading
	pool   *pgxpool.Pool
	client *http.Client
}

// instance is a running service, shared by the tests that ask for the
// same environment.
type instance struct {
	once sync.Once
	addr string
	pool *pgxpool.Pool
	err  error
}

var instances sync.Map // environment key → *instance

// LockDefault is the environment that starts storage with the check-out
// lock feature on or off for a tenant that stored no setting
// (CHECKOUT_LOCK_FEATURE_ENABLED): storage's is the one default, which
// circulation learns from its answers.
func LockDefault(on bool) string { return fmt.Sprintf("CHECKOUT_LOCK_FEATURE_ENABLED=%t", on) }

// Start gives the test a tenant of its own on a real storage started with
// env ("NAME=value", over the defaults; tests asking for the same
// environment share one service), and a boundary in front of it. The
// tenant is purged when the test ends.
func Start(t testing.TB, env ...string) *Storage {
	t.Helper()
	key := strings.Join(env, "\x00")
	v, _ := instances.LoadOrStore(key, &instance{})
	in := v.(*instance)
	in.once.Do(func() { in.addr, in.pool, in.err = launch(env) })
	if in.err != nil {
		t.Fatalf("storagetest: start circulation-storage: %v", in.err)
	}
	s := &Storage{t: t, direct: "http://" + in.addr, pool: in.pool, Tenant: tenantID(),
		// A transport of its own: closing its idle connections when the
		// test ends must not break another test's request in flight, as
		// closing http.DefaultTransport's would.
		client: &http.Client{Timeout: 30 * time.Second, Transport: http.DefaultTransport.(*http.Transport).Clone()}}
	s.send(http.MethodPost, "/_/tenant", map[string]any{"module_to": "mod-circulation-storage-1.0.0"}, nil, http.StatusCreated)
	t.Cleanup(func() {
		s.send(http.MethodPost, "/_/tenant", map[string]any{"module_from": "mod-circulation-storage-1.0.0", "purge": true}, nil,
			http.StatusNoContent)
		s.client.CloseIdleConnections()
	})
	s.Boundary = newBoundary(t, s.direct)
	s.URL = s.Boundary.url
	return s
}

// AnotherTenant initialises one more tenant on the same service, purged
// when the test ends, and answers its id: for tests that look across
// tenants.
func (s *Storage) AnotherTenant() string {
	s.t.Helper()
	other := &Storage{t: s.t, direct: s.direct, pool: s.pool, Tenant: tenantID(), client: s.client}
	other.send(http.MethodPost, "/_/tenant", map[string]any{"module_to": "mod-circulation-storage-1.0.0"}, nil, http.StatusCreated)
	s.t.Cleanup(func() {
		other.send(http.MethodPost, "/_/tenant", map[string]any{"module_from": "mod-circulation-storage-1.0.0", "purge": true}, nil,
			http.StatusNoContent)
	})
	return other.Tenant
}

// launch starts the service in this process, on the shared database, and
// answers once it serves.
func launch(env []string) (addr string, pool *pgxpool.Pool, err error) {
	dbURL, err := database()
	if err != nil {
		return "", nil, err
	}
	environ := map[string]string{
		"HTTP_ADDR":    "127.0.0.1:0",
		"DATABASE_URL": dbURL,
		"DB_MAX_CONNS": "6",
		"AUTH_MODE":    "none",
		"LOGIN":        "off",
		"OUTBOX":       "off",
		"LOG_LEVEL":    "error",
	}
	for _, kv := range env {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			return "", nil, fmt.Errorf("environment %q is not NAME=value", kv)
		}
		environ[k] = v
	}
	listening := make(chan string, 1)
	done := make(chan error, 1)
	go func() { done <- app.Run(context.Background(), nil, environ, io.Discard, listening) }()
	select {
	case addr = <-listening:
	case err := <-done:
		return "", nil, err
	case <-time.After(30 * time.Second):
		return "", nil, errors.New("not listening after 30 s")
	}
	pool, err = pgxpool.New(context.Background(), dbURL)
	return addr, pool, err
}

var shared struct {
	once sync.Once
	url  string
	err  error
}

// database is the shared database's URL, created on first use.
func database() (string, error) {
	shared.once.Do(func() {
		server := os.Getenv("TEST_DATABASE_URL")
		if server == "" {
			server = "postgres://postgres@127.0.0.1:5432/postgres"
		}
		u, err := url.Parse(server)
		if err != nil {
			shared.err = fmt.Errorf("TEST_DATABASE_URL: %w", err)
			return
		}
		ctx := context.Background()
		conn, err := pgx.Connect(ctx, server)
		if err != nil {
			shared.err = fmt.Errorf("connect to PostgreSQL at %s: %w", server, err)
			return
		}
		defer conn.Close(ctx)
		_, err = conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{Database}.Sanitize())
		var pgErr *pgconn.PgError
		if err != nil && !(errors.As(err, &pgErr) && (pgErr.Code == "42P04" || pgErr.Code == "23505")) {
			shared.err = fmt.Errorf("create %s: %w", Database, err)
			return
		}
		u.Path = "/" + Database
		shared.url = u.String()
	})
	return shared.url, shared.err
}

func tenantID() string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return "st" + hex.EncodeToString(b)
}

// Send makes a request of the service directly (not through the
// boundary), as the test's tenant, and fails the test unless it is
// answered want (0: any status). out, when not nil, receives the JSON
// answer. It answers the status.
func (s *Storage) Send(method, path string, body, out any, want int, headers ...string) int {
	s.t.Helper()
	return s.send(method, path, body, out, want, headers...)
}

func (s *Storage) send(method, path string, body, out any, want int, headers ...string) int {
	s.t.Helper()
	var r io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			s.t.Fatal(err)
		}
		r = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, s.direct+path, r)
	if err != nil {
		s.t.Fatal(err)
	}
	req.Header.Set(schemas.HeaderTenant, s.Tenant)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	res, err := s.client.Do(req)
	if err != nil {
		s.t.Fatalf("storagetest: %s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	data, err := io.ReadAll(res.Body)
	if err != nil {
		s.t.Fatal(err)
	}
	if want != 0 && res.StatusCode != want {
		s.t.Fatalf("storagetest: %s %s: %d %s, want %d", method, path, res.StatusCode, data, want)
	}
	if out != nil && len(data) > 0 && res.StatusCode < 300 {
		if err := json.Unmarshal(data, out); err != nil {
			s.t.Fatalf("storagetest: %s %s: decode %s: %v", method, path, data, err)
		}
	}
	return res.StatusCode
}

// Exec runs SQL on the shared database with the tenant's id as $1: for
// what no client of storage can write (a value stored before storage
// checked it, a record in a state only time makes). Tables are in schema
// circulation and carry tenant_id.
func (s *Storage) Exec(sql string, args ...any) {
	s.t.Helper()
	if _, err := s.pool.Exec(context.Background(), sql, append([]any{s.Tenant}, args...)...); err != nil {
		s.t.Fatalf("storagetest: %s: %v", sql, err)
	}
}

// Snapshot is every record of the tenant, as storage serves them (ids,
// versions and documents, metadata aside), in a stable order: two
// snapshots are equal when nothing was written between them.
func (s *Storage) Snapshot() string {
	s.t.Helper()
	var b strings.Builder
	for _, path := range []string{"/users", "/item-storage/items", "/loan-storage/loans", "/check-out-lock-storage",
		"/settings/entries", "/request-storage/requests", "/manualblocks"} {
		var page map[string]any
		s.send(http.MethodGet, path+"?limit="+strconv.Itoa(schemas.MaxPageSize), nil, &page, http.StatusOK)
		var docs []string
		for k, v := range page {
			list, ok := v.([]any)
			if !ok || k == "errors" {
				continue
			}
			for _, d := range list {
				if m, ok := d.(map[string]any); ok {
					delete(m, "metadata")
				}
				j, _ := json.Marshal(d)
				docs = append(docs, string(j))
			}
		}
		sort.Strings(docs)
		fmt.Fprintf(&b, "%s: %s\n", path, strings.Join(docs, "\n  "))
	}
	return b.String()
}

// WantUnchanged fails the test when the tenant's records differ from
// before (a Snapshot).
func (s *Storage) WantUnchanged(before string) {
	s.t.Helper()
	if after := s.Snapshot(); after != before {
		s.t.Errorf("storage changed:\nbefore %s\nafter  %s", before, after)
	}
}

// Routes, as Call.Route names them: storage's routes the code under test
// calls.
const (
	RouteUsers       = "GET /users"
	RouteItems       = "GET /item-storage/items"
	RoutePutItem     = "PUT /item-storage/items/{id}"
	RouteLoans       = "GET /loan-storage/loans"
	RouteLoanPolicy  = "GET /loan-policy-storage/loan-policies/{id}"
	RouteLoan        = "GET /loan-storage/loans/{id}"
	RoutePostLoan    = "POST /loan-storage/loans"
	RoutePutLoan     = "PUT /loan-storage/loans/{id}"
	RouteValidation  = "GET /check-out-storage/validation"
	RouteCheckOut    = "POST /check-out-storage/check-outs"
	RoutePatron      = "GET /check-out-storage/patron"
	RouteSetPin      = "POST /patron-pin"
	RouteVerifyPin   = "POST /patron-pin/verify"
	RouteAcquire     = "POST /check-out-lock-storage"
	RouteGetLock     = "GET /check-out-lock-storage/{id}"
	RouteRelease     = "DELETE /check-out-lock-storage/{id}"
	RouteGetSettings = "GET /settings/entries"
	RoutePostSetting = "POST /settings/entries"
	RoutePutSetting  = "PUT /settings/entries/{id}"
	RouteReady       = "GET /admin/ready"
	RouteUnknown     = "unknown"
)

// routeOf names a request's route.
func routeOf(method, path string) string {
	parts := strings.Split(strings.Trim(path, "/"), "/")
	with := func(n int) string {
		if len(parts) == n+1 {
			return method + " /" + strings.Join(parts[:n], "/") + "/{id}"
		}
		return method + " /" + strings.Join(parts, "/")
	}
	var r string
	switch {
	case len(parts) >= 2 && parts[0] == "check-out-lock-storage", len(parts) >= 2 && parts[0] == "settings",
		len(parts) >= 2 && parts[0] == "item-storage", len(parts) >= 2 && parts[0] == "loan-storage",
		len(parts) >= 2 && parts[0] == "loan-policy-storage":
		r = with(2)
		if parts[0] == "check-out-lock-storage" {
			r = with(1)
		}
	default:
		r = method + " " + path
	}
	if slices.Contains([]string{RouteUsers, RouteItems, RoutePutItem, RouteLoans, RouteLoan, RouteLoanPolicy, RoutePostLoan, RoutePutLoan,
		RouteValidation, RouteCheckOut, RoutePatron, RouteSetPin, RouteVerifyPin, RouteAcquire, RouteGetLock, RouteRelease,
		RouteGetSettings, RoutePostSetting, RoutePutSetting, RouteReady}, r) {
		return r
	}
	return RouteUnknown
}
