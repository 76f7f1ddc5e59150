package httpapi

import (
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/checkoutlock/circulation-storage/internal/dbtest"
	"github.com/checkoutlock/circulation-storage/internal/locks"
	"github.com/checkoutlock/circulation-storage/internal/postgres"
	"github.com/checkoutlock/circulation-storage/internal/tenants"
	"github.com/checkoutlock/circulation-storage/internal/waiting"
	"github.com/checkoutlock/serverkit"
)

func (f *fixture) acquire(userID string) lockJSON {
	f.t.Helper()
	res := f.do("POST", "/check-out-lock-storage", fmt.Sprintf(`{"userId":%q}`, userID)).
		wantStatus(http.StatusCreated).wantSchema("checkout-lock.json")
	var l lockJSON
	res.decode(&l)
	if got, want := res.header.Get("Location"), "/check-out-lock-storage/"+l.ID; got != want {
		f.t.Fatalf("Location %q, want %q", got, want)
	}
	return l
}

func TestLockLifecycle(t *testing.T) {
	t.Parallel()
	f := setup(t)
	user := uuid.NewString()
	lock := f.acquire(user)
	if lock.UserID != user || lock.TTLMs != 3000 {
		t.Errorf("lock = %+v, want user %s and the default TTL 3000", lock, user)
	}
	created, _ := time.Parse(time.RFC3339, lock.CreationDate)
	expires, _ := time.Parse(time.RFC3339, lock.ExpiresAt)
	if expires.Sub(created) != 3*time.Second {
		t.Errorf("expiresAt - creationDate = %s, want 3s", expires.Sub(created))
	}

	var got lockJSON
	f.do("GET", "/check-out-lock-storage/"+lock.ID, "").wantStatus(http.StatusOK).wantSchema("checkout-lock.json").decode(&got)
	if got != lock {
		t.Errorf("GET = %+v, want %+v", got, lock)
	}

	var list locksJSON
	f.do("GET", "/check-out-lock-storage?userId="+user, "").wantStatus(http.StatusOK).wantSchema("checkout-locks.json").decode(&list)
	if list.TotalRecords != 1 || len(list.CheckoutLocks) != 1 || list.CheckoutLocks[0] != lock {
		t.Errorf("list = %+v, want the one lock", list)
	}

	f.do("DELETE", "/check-out-lock-storage/"+lock.ID, "").wantStatus(http.StatusNoContent)
	f.do("DELETE", "/check-out-lock-storage/"+lock.ID, "").wantError(http.StatusNotFound, "NOT_FOUND")
	f.do("GET", "/check-out-lock-storage/"+lock.ID, "").wantError(http.StatusNotFound, "NOT_FOUND")
	if n := f.rows(user); n != 0 {
		t.Errorf("%d rows after release, want 0", n)
	}
	// DELETE then re-POST: the patron can be locked again.
	again := f.acquire(user)
	if again.ID == lock.ID {
		t.Errorf("re-acquired lock reuses id %s", lock.ID)
	}
}

func TestSecondAcquireIs503WithHolder(t *testing.T) {
	t.Parallel()
	f := setup(t)
	user := uuid.NewString()
	lock := f.acquire(user)
	before := f.snapshot()
	res := f.do("POST", "/check-out-lock-storage", fmt.Sprintf(`{"userId":%q,"ttlMs":1000}`, user))
	e := res.wantError(http.StatusServiceUnavailable, "LOCK_HELD")
	if e.Errors[0].Message != "Unable to acquire lock" {
		t.Errorf("message %q, want FOLIO's %q", e.Errors[0].Message, "Unable to acquire lock")
	}
	params := map[string]string{}
	for _, p := range e.Errors[0].Parameters {
		params[p.Key] = p.Value
	}
	if params["userId"] != user || params["expiresAt"] != lock.ExpiresAt {
		t.Errorf("parameters %v, want userId %s and the holder's expiresAt %s", params, user, lock.ExpiresAt)
	}
	if ra, err := strconv.Atoi(res.header.Get("Retry-After")); err != nil || ra < 1 || ra > 3 {
		t.Errorf("Retry-After %q, want 1..3 seconds", res.header.Get("Retry-After"))
	}
	if after := f.snapshot(); after != before {
		t.Errorf("a refused acquisition changed the table:\nbefore %s\nafter  %s", before, after)
	}
}

func TestExpiredLockIsTakenOver(t *testing.T) {
	t.Parallel()
	f := setup(t)
	user := uuid.NewString()
	old := f.acquire(user)
	f.expire(old.ID)
	f.do("GET", "/check-out-lock-storage/"+old.ID, "").wantError(http.StatusNotFound, "NOT_FOUND")
	lock := f.acquire(user)
	if lock.ID == old.ID {
		t.Errorf("takeover kept id %s", old.ID)
	}
	f.do("DELETE", "/check-out-lock-storage/"+old.ID, "").wantError(http.StatusNotFound, "NOT_FOUND")
	f.do("GET", "/check-out-lock-storage/"+lock.ID, "").wantStatus(http.StatusOK)
	if n := f.rows(user); n != 1 {
		t.Errorf("%d rows for the patron, want 1", n)
	}
	if got := counterValue(t, f, `checkout_lock_acquisitions_total{outcome="took_over_expired"}`); got != 1 {
		t.Errorf("took_over_expired counter = %v, want 1", got)
	}
}

func TestExplicitTTLIsStoredWithTheLock(t *testing.T) {
	t.Parallel()
	f := setup(t)
	var l lockJSON
	f.do("POST", "/check-out-lock-storage", fmt.Sprintf(`{"userId":%q,"ttlMs":600000}`, uuid.NewString())).
		wantStatus(http.StatusCreated).decode(&l)
	if l.TTLMs != 600000 {
		t.Errorf("ttlMs = %d, want 600000", l.TTLMs)
	}
	created, _ := time.Parse(time.RFC3339, l.CreationDate)
	expires, _ := time.Parse(time.RFC3339, l.ExpiresAt)
	if expires.Sub(created) != 10*time.Minute {
		t.Errorf("lifetime %s, want 10m", expires.Sub(created))
	}
}

func TestEmptyListAndPaging(t *testing.T) {
	t.Parallel()
	f := setup(t)
	res := f.do("GET", "/check-out-lock-storage", "").wantStatus(http.StatusOK).wantSchema("checkout-locks.json")
	if got := strings.TrimSpace(string(res.body)); got != `{"checkoutLocks":[],"totalRecords":0}` {
		t.Errorf("empty list = %s", got)
	}
	for range 12 {
		f.acquire(uuid.NewString())
	}
	var list locksJSON
	f.do("GET", "/check-out-lock-storage", "").wantStatus(http.StatusOK).decode(&list)
	if len(list.CheckoutLocks) != 10 || list.TotalRecords != 12 {
		t.Errorf("default page: %d locks, total %d; want 10 of 12", len(list.CheckoutLocks), list.TotalRecords)
	}
	f.do("GET", "/check-out-lock-storage?offset=10&limit=5", "").wantStatus(http.StatusOK).decode(&list)
	if len(list.CheckoutLocks) != 2 || list.TotalRecords != 12 {
		t.Errorf("last page: %d locks, total %d; want 2 of 12", len(list.CheckoutLocks), list.TotalRecords)
	}
	f.do("GET", "/check-out-lock-storage?offset=50", "").wantStatus(http.StatusOK).decode(&list)
	if len(list.CheckoutLocks) != 0 || list.TotalRecords != 12 {
		t.Errorf("past the end: %d locks, total %d; want 0 of 12", len(list.CheckoutLocks), list.TotalRecords)
	}
	f.do("GET", "/check-out-lock-storage?userId="+uuid.NewString(), "").wantStatus(http.StatusOK).decode(&list)
	if len(list.CheckoutLocks) != 0 || list.TotalRecords != 0 {
		t.Errorf("unknown user: %+v, want empty", list)
	}
}

// TestConcurrentPostsGrantOnce fires 50 simultaneous acquisitions for one
// patron through HTTP, round after round: exactly one 201, 49 503s, one row.
func TestConcurrentPostsGrantOnce(t *testing.T) {
	t.Parallel()
	f := setup(t)
	const rounds, racers = 20, 50
	for round := range rounds {
		user := uuid.NewString()
		body := fmt.Sprintf(`{"userId":%q}`, user)
		statuses := make([]int, racers)
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i := range racers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				req, _ := http.NewRequest("POST", f.url+"/check-out-lock-storage", strings.NewReader(body))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set(TenantHeader, f.tenant)
				res, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Errorf("round %d: %v", round, err)
					return
				}
				res.Body.Close()
				statuses[i] = res.StatusCode
			}()
		}
		close(start)
		wg.Wait()
		count := map[int]int{}
		for _, s := range statuses {
			count[s]++
		}
		if count[http.StatusCreated] != 1 || count[http.StatusServiceUnavailable] != racers-1 {
			t.Fatalf("round %d: statuses %v, want one 201 and %d 503", round, count, racers-1)
		}
		if n := f.rows(user); n != 1 {
			t.Fatalf("round %d: %d rows for the patron, want 1", round, n)
		}
	}
	t.Logf("%d rounds x %d concurrent POSTs: one 201 and %d 503s in every round, one row each", rounds, racers, racers-1)
	if got := counterValue(t, f, `checkout_lock_acquisitions_total{outcome="acquired"}`); got != rounds {
		t.Errorf("acquired counter = %v, want %d", got, rounds)
	}
	if got := counterValue(t, f, `checkout_lock_acquisitions_total{outcome="held"}`); got != rounds*(racers-1) {
		t.Errorf("held counter = %v, want %d", got, rounds*(racers-1))
	}
}

func TestTenantIsolationOverHTTP(t *testing.T) {
	t.Parallel()
	a, b := setup(t), setup(t)
	user := uuid.NewString()
	lockA := a.acquire(user)
	lockB := b.acquire(user) // same patron id, other tenant: its own lock
	b.do("GET", "/check-out-lock-storage/"+lockA.ID, "").wantError(http.StatusNotFound, "NOT_FOUND")
	b.do("DELETE", "/check-out-lock-storage/"+lockA.ID, "").wantError(http.StatusNotFound, "NOT_FOUND")
	var list locksJSON
	b.do("GET", "/check-out-lock-storage", "").wantStatus(http.StatusOK).decode(&list)
	if list.TotalRecords != 1 || list.CheckoutLocks[0].ID != lockB.ID {
		t.Errorf("tenant B lists %+v, want only its own lock", list)
	}
	a.do("GET", "/check-out-lock-storage/"+lockA.ID, "").wantStatus(http.StatusOK)
}

func TestUninitialisedTenantIs400NamingTheFix(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ghost := "ghost" + f.tenant[1:]
	res := f.doWith("POST", "/check-out-lock-storage", fmt.Sprintf(`{"userId":%q}`, uuid.NewString()),
		map[string]string{TenantHeader: ghost})
	e := res.wantError(http.StatusBadRequest, "TENANT_NOT_INITIALIZED")
	if msg := e.Errors[0].Message; !strings.Contains(msg, ghost) || !strings.Contains(msg, "POST /_/tenant") {
		t.Errorf("message %q should name the tenant and POST /_/tenant", msg)
	}
	f.doWith("GET", "/check-out-lock-storage", "", map[string]string{TenantHeader: ghost}).
		wantError(http.StatusBadRequest, "TENANT_NOT_INITIALIZED")
}

func TestTenantJobAPI(t *testing.T) {
	t.Parallel()
	f := setup(t)
	res := f.do("POST", "/_/tenant", `{"module_to":"mod-circulation-storage-1.0.1","module_from":"mod-circulation-storage-1.0.0"}`).
		wantStatus(http.StatusCreated).wantSchema("tenant-job.json")
	var job tenantJobJSON
	res.decode(&job)
	if res.header.Get("Location") != "/_/tenant/"+job.ID || job.Tenant != f.tenant || !job.Complete {
		t.Errorf("job %+v, Location %q", job, res.header.Get("Location"))
	}
	var got tenantJobJSON
	f.do("GET", "/_/tenant/"+job.ID, "").wantStatus(http.StatusOK).wantSchema("tenant-job.json").decode(&got)
	if got.ID != job.ID || got.TenantAttributes.ModuleTo != "mod-circulation-storage-1.0.1" {
		t.Errorf("GET job = %+v, want %+v", got, job)
	}
	f.do("DELETE", "/_/tenant/"+job.ID, "").wantStatus(http.StatusNoContent)
	f.do("GET", "/_/tenant/"+job.ID, "").wantError(http.StatusNotFound, "NOT_FOUND")
	f.do("GET", "/_/tenant/not-a-uuid", "").wantError(http.StatusBadRequest, "INVALID_ID")
	// Disabling without purge keeps the data.
	lock := f.acquire(uuid.NewString())
	f.do("POST", "/_/tenant", `{"module_from":"mod-circulation-storage-1.0.1"}`).wantStatus(http.StatusNoContent)
	f.do("GET", "/check-out-lock-storage/"+lock.ID, "").wantStatus(http.StatusOK)
}

func TestPurgeDropsTheTenant(t *testing.T) {
	t.Parallel()
	f := setup(t)
	f.acquire(uuid.NewString())
	f.do("POST", "/_/tenant", `{"module_from":"mod-circulation-storage-1.0.0","purge":true}`).wantStatus(http.StatusNoContent)
	var exists bool
	if err := f.pool.QueryRow(t.Context(), `SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1)`,
		f.tenant+"_mod_circulation_storage").Scan(&exists); err != nil {
		t.Fatal(err)
	}
	if exists {
		t.Error("schema still exists after purge")
	}
	f.do("GET", "/check-out-lock-storage", "").wantError(http.StatusBadRequest, "TENANT_NOT_INITIALIZED")
	f.do("POST", "/check-out-lock-storage", `{"userId":"`+uuid.NewString()+`"}`).wantError(http.StatusBadRequest, "TENANT_NOT_INITIALIZED")
	f.do("POST", "/groups", `{"group":"after purge"}`).wantError(http.StatusBadRequest, "TENANT_NOT_INITIALIZED")
	var rows int
	if err := f.pool.QueryRow(t.Context(), `SELECT (SELECT count(*) FROM circulation_storage.check_out_lock WHERE tenant_id = $1)
		+ (SELECT count(*) FROM circulation_storage.patron_group WHERE tenant_id = $1)`, f.tenant).Scan(&rows); err != nil || rows != 0 {
		t.Errorf("rows of the purged tenant: %d, %v", rows, err)
	}
	// Re-initialise so the fixture's cleanup (another purge) has a tenant.
	f.do("POST", "/_/tenant", `{"module_to":"mod-circulation-storage-1.0.0"}`).wantStatus(http.StatusCreated)
}

func TestHealthReadinessMetrics(t *testing.T) {
	t.Parallel()
	f := setup(t)
	f.doWith("GET", "/admin/health", "", nil).wantStatus(http.StatusOK)
	f.doWith("GET", "/admin/ready", "", nil).wantStatus(http.StatusOK)
	f.acquire(uuid.NewString())
	// A request's latency is recorded just after its answer is sent.
	const recorded = `http_request_duration_seconds_count{method="POST",route="/check-out-lock-storage",status="201"} 1`
	var res response
	dbtest.Eventually(t, "the acquisition's latency recorded", func() bool {
		res = f.doWith("GET", "/metrics", "", nil).wantStatus(http.StatusOK)
		return strings.Contains(string(res.body), recorded)
	})
	for _, want := range []string{
		`checkout_lock_acquisitions_total{outcome="acquired"} 1`,
		`checkout_lock_sweeper_deleted_total 0`,
	} {
		if !strings.Contains(string(res.body), want) {
			t.Errorf("metrics lack %q", want)
		}
	}
}

func TestRequestIDIsEchoedOrMade(t *testing.T) {
	t.Parallel()
	f := setup(t)
	res := f.doWith("GET", "/admin/health", "", map[string]string{RequestIDHeader: "123456/circulation"})
	if got := res.header.Get(RequestIDHeader); got != "123456/circulation" {
		t.Errorf("request id %q, want the caller's", got)
	}
	res = f.doWith("GET", "/admin/health", "", map[string]string{RequestIDHeader: "bad id with spaces"})
	if got := res.header.Get(RequestIDHeader); uuid.Validate(got) != nil {
		t.Errorf("request id %q, want a generated UUID in place of an unsafe one", got)
	}
}

// counterValue reads one sample from the fixture's /metrics.
func counterValue(t *testing.T, f *fixture, series string) float64 {
	t.Helper()
	res := f.doWith("GET", "/metrics", "", nil).wantStatus(http.StatusOK)
	for _, line := range strings.Split(string(res.body), "\n") {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			n, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatalf("metric %s: %v", series, err)
			}
			return n
		}
	}
	t.Fatalf("metric %s not found", series)
	return 0
}

// TestDatabaseDownIs503 points the service at a port where no database
// listens: every call that needs the database answers 503 with the
// envelope, never a 500 or a driver message, and readiness says not ready.
func TestDatabaseDownIs503(t *testing.T) {
	t.Parallel()
	db, err := postgres.Open(t.Context(), "postgres://postgres@127.0.0.1:1/nowhere?connect_timeout=2", postgres.PoolConfig{MaxConns: 2, LockCommit: "off"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(db.Close)
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	srv := New(Config{Config: serverkit.Config{MaxBodyBytes: 1 << 16, RequestTimeout: 5 * time.Second}, LockDefaultTTL: time.Second, LockMaxTTL: time.Minute},
		Services{Locks: locks.NewLocks(db), Waiters: waiting.NewWaiters(locks.NewLocks(db), NewMetrics(), waiting.WaitConfig{
			Poll: time.Second, PollUnlistened: time.Second, MaxWaiters: 1, StatementTimeout: time.Second}),
			Tenants: tenants.NewTenants(db, logger), Ready: db.Ping}, sch, NewMetrics(), logger)
	ts := httptest.NewServer(srv)
	t.Cleanup(ts.Close)
	f := &fixture{t: t, url: ts.URL, tenant: "diku"}
	for _, r := range []struct{ method, path, body string }{
		{"POST", "/check-out-lock-storage", fmt.Sprintf(`{"userId":%q}`, uuid.NewString())},
		{"GET", "/check-out-lock-storage", ""},
		{"GET", "/check-out-lock-storage/" + uuid.NewString(), ""},
		{"DELETE", "/check-out-lock-storage/" + uuid.NewString(), ""},
		{"POST", "/_/tenant", `{"module_to":"mod-circulation-storage-1.0.0"}`},
	} {
		e := f.do(r.method, r.path, r.body).wantError(http.StatusServiceUnavailable, "DATABASE_UNAVAILABLE")
		if msg := e.Errors[0].Message; msg != "Database unavailable, try again later" {
			t.Errorf("%s %s: message %q", r.method, r.path, msg)
		}
	}
	f.doWith("GET", "/admin/ready", "", nil).wantError(http.StatusServiceUnavailable, "DATABASE_UNAVAILABLE")
	f.doWith("GET", "/admin/health", "", nil).wantStatus(http.StatusOK)
}
