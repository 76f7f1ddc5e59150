package httpapi

import (
	"context"
	"encoding/json"
	"github.com/checkoutlock/schemas/errs/errhttp"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	storage "github.com/checkoutlock/circulation-storage"
	"github.com/checkoutlock/circulation-storage/internal/lending"
	"github.com/checkoutlock/circulation-storage/internal/locks"
	"github.com/checkoutlock/circulation-storage/internal/pgtest"
	"github.com/checkoutlock/circulation-storage/internal/postgres"
	"github.com/checkoutlock/circulation-storage/internal/recordstore"
	"github.com/checkoutlock/circulation-storage/internal/sample"
	"github.com/checkoutlock/circulation-storage/internal/tenants"
	"github.com/checkoutlock/circulation-storage/internal/waiting"
	"github.com/checkoutlock/schemas"
	"github.com/checkoutlock/serverkit"
)

// These tests run the real handler over real HTTP against a real PostgreSQL.
// Each test has a tenant of its own in a shared database.

var sch = schemas.MustLoad()

var shared struct {
	once sync.Once
	db   *postgres.DB
	pool *pgxpool.Pool // for arranging and checking state directly
	err  error
}

type fixture struct {
	t       testing.TB
	url     string
	tenant  string
	pool    *pgxpool.Pool
	metrics *Metrics
	waiters *waiting.Waiters
}

func setup(t testing.TB) *fixture {
	t.Helper()
	url := pgtest.Shared(t)
	shared.once.Do(func() {
		ctx := context.Background()
		if shared.db, shared.err = postgres.Open(ctx, url, postgres.PoolConfig{MaxConns: 16, LockCommit: "off"}); shared.err != nil {
			return
		}
		shared.pool, shared.err = pgxpool.New(ctx, url)
	})
	if shared.err != nil {
		t.Fatalf("open database: %v", shared.err)
	}
	return serveOn(t, shared.db, shared.pool)
}

// serveOn starts the API on db and initialises a fresh tenant through it.
func serveOn(t testing.TB, db *postgres.DB, pool *pgxpool.Pool) *fixture {
	t.Helper()
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	metrics := NewMetrics()
	var waiters *waiting.Waiters
	released := postgres.OnRelease(func(t storage.Tenant, userID string) { waiters.Notify(t, userID) })
	locks := locks.NewLocks(db, postgres.LockHistory(true, metrics), released)
	waiters = waiting.NewWaiters(locks, metrics, waiting.WaitConfig{Poll: 50 * time.Millisecond,
		PollUnlistened: 20 * time.Millisecond, MaxWaiters: 1000, StatementTimeout: 5 * time.Second})
	recordService := recordstore.NewRecords(db)
	srv := New(Config{
		// A tenant's sample data loads in one request: 30 s leaves room
		// for a machine loaded by the tests beside it (10 s did not, once).
		Config:         serverkit.Config{MaxBodyBytes: 64 << 10, MaxHeaderBytes: 16 << 10, RequestTimeout: 30 * time.Second},
		LockDefaultTTL: 3 * time.Second,
		LockMaxTTL:     10 * time.Minute,
		LockMaxWait:    20 * time.Second,
		MaxPageBytes:   256 << 10,
	}, Services{
		Locks:      locks,
		Waiters:    waiters,
		Tenants:    tenants.NewTenants(db, logger, sample.LoadData),
		Records:    recordService,
		Loans:      lending.NewLoans(db, lending.Policy{EnforceUnscopedItemLimit: true}, released),
		Rules:      lending.NewRules(db, lending.Policy{EnforceUnscopedItemLimit: true}),
		Counter:    lending.NewRules(db, lending.Policy{EnforceUnscopedItemLimit: true}),
		CheckOuts:  lending.NewRules(db, lending.Policy{EnforceUnscopedItemLimit: true}),
		Writes:     db,
		Anonymizer: lending.NewAnonymizer(db),
		Ready:      db.Ping,
	}, sch, metrics, logger)
	ts := httptest.NewServer(srv)
	t.Cleanup(ts.Close)
	f := &fixture{t: t, url: ts.URL, tenant: pgtest.TenantID(), pool: pool, metrics: metrics, waiters: waiters}
	res := f.do("POST", "/_/tenant", `{"module_to":"mod-circulation-storage-1.0.0"}`)
	res.wantStatus(http.StatusCreated)
	t.Cleanup(func() {
		f.do("POST", "/_/tenant", `{"module_from":"mod-circulation-storage-1.0.0","purge":true}`).wantStatus(http.StatusNoContent)
	})
	return f
}

type response struct {
	t      testing.TB
	status int
	header http.Header
	body   []byte
}

// do sends a request as the fixture's tenant, with a JSON body if body is
// not empty.
func (f *fixture) do(method, path, body string) response {
	f.t.Helper()
	return f.doWith(method, path, body, map[string]string{TenantHeader: f.tenant, schemas.HeaderUserID: testUser})
}

// testUser is the user the fixture's requests act for (X-Okapi-User-Id),
// recorded in the metadata of what they write.
const testUser = "0ddba11a-0000-4000-8000-000000000001"

// doWith sends a request with exactly the given headers (plus a JSON
// Content-Type when body is not empty and none is given).
func (f *fixture) doWith(method, path, body string, headers map[string]string) response {
	f.t.Helper()
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, f.url+path, r)
	if err != nil {
		f.t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		f.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		f.t.Fatal(err)
	}
	return response{t: f.t, status: res.StatusCode, header: res.Header, body: b}
}

func (r response) wantStatus(status int) response {
	r.t.Helper()
	if r.status != status {
		r.t.Fatalf("status %d, want %d; body %s", r.status, status, r.body)
	}
	return r
}

// wantSchema checks the body against one of the contract's schemas.
func (r response) wantSchema(name string) response {
	r.t.Helper()
	if err := sch.ValidateJSON(name, r.body); err != nil {
		r.t.Fatalf("body does not match %s: %v\n%s", name, err, r.body)
	}
	return r
}

// wantError checks for an error envelope with the given status and first code.
func (r response) wantError(status int, code string) errhttp.Envelope {
	r.t.Helper()
	r.wantStatus(status).wantSchema("errors.json")
	var e errhttp.Envelope
	if err := json.Unmarshal(r.body, &e); err != nil {
		r.t.Fatal(err)
	}
	if e.Errors[0].Code != code {
		r.t.Fatalf("error code %q, want %q; body %s", e.Errors[0].Code, code, r.body)
	}
	return e
}

func (r response) decode(v any) {
	r.t.Helper()
	if err := json.Unmarshal(r.body, v); err != nil {
		r.t.Fatalf("decode %s: %v", r.body, err)
	}
}

// snapshot is every row of the tenant's lock table, for "nothing changed".
func (f *fixture) snapshot() string {
	f.t.Helper()
	var s string
	err := f.pool.QueryRow(context.Background(),
		`SELECT coalesce(json_agg(l ORDER BY id)::text, '[]') FROM `+
			pgx.Identifier{f.tenant + "_mod_circulation_storage", "check_out_lock"}.Sanitize()+` l`).Scan(&s)
	if err != nil {
		f.t.Fatalf("snapshot: %v", err)
	}
	return s
}

// rows counts the tenant's lock rows for a patron.
func (f *fixture) rows(userID string) int {
	f.t.Helper()
	var n int
	err := f.pool.QueryRow(context.Background(),
		`SELECT count(*) FROM `+pgx.Identifier{f.tenant + "_mod_circulation_storage", "check_out_lock"}.Sanitize()+` WHERE user_id = $1`,
		userID).Scan(&n)
	if err != nil {
		f.t.Fatalf("count rows: %v", err)
	}
	return n
}

// expire moves a lock's expiry into the past, as if its TTL had passed.
func (f *fixture) expire(lockID string) {
	f.t.Helper()
	_, err := f.pool.Exec(context.Background(),
		`UPDATE `+pgx.Identifier{f.tenant + "_mod_circulation_storage", "check_out_lock"}.Sanitize()+
			` SET creation_date = now() - interval '2 minutes', expires_at = now() - interval '1 minute' WHERE id = $1`, lockID)
	if err != nil {
		f.t.Fatalf("expire: %v", err)
	}
}
