package httpapi

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	storage "github.com/checkoutlock/circulation-storage"
	"github.com/checkoutlock/circulation-storage/internal/waiting"
	"github.com/checkoutlock/schemas"
	"github.com/checkoutlock/serverkit"
	"github.com/checkoutlock/serverkit/auth"
)

// memLocks grants every lock at once, in memory: the benchmark below
// measures the HTTP layer alone.
type memLocks struct{ storage.LockService }

func (memLocks) Acquire(_ context.Context, _ storage.Tenant, userID, lockID string, ttl time.Duration, h storage.Holder) (storage.Lock, storage.AcquireOutcome, error) {
	now := time.Now()
	return storage.Lock{ID: uuid.NewString(), UserID: userID, CreationDate: now, ExpiresAt: now.Add(ttl), TTL: ttl, Holder: h}, storage.Acquired, nil
}
func (memLocks) Release(context.Context, storage.Tenant, string, storage.Caller, bool) error {
	return nil
}

// memServer is the HTTP layer over locks alone, as the service configures
// it, with authentication g.
func memServer(locks storage.LockService, g auth.Guard, logger *slog.Logger) *Server {
	metrics := NewMetrics()
	return New(Config{Config: serverkit.Config{MaxBodyBytes: 64 << 10, MaxHeaderBytes: 16 << 10, RequestTimeout: 10 * time.Second, Auth: g},
		LockDefaultTTL: 3 * time.Second, LockMaxTTL: 10 * time.Minute, LockMaxWait: 20 * time.Second, MaxPageBytes: 256 << 10},
		Services{Tenants: everyTenant{}, Locks: locks, Waiters: waiting.NewWaiters(locks, metrics, waiting.WaitConfig{Poll: time.Second,
			PollUnlistened: time.Second, MaxWaiters: 10, StatementTimeout: time.Second})},
		schemas.MustLoad(), metrics, logger)
}

// BenchmarkHandlerOverhead is one acquire and release through the HTTP
// layer as make bench's lock cycle sends them (a holder, a token in jwt
// mode), served in memory, without a network or a database: what the
// service adds to the lock's SQL, per cycle, and the garbage it makes
// (go test -run X -bench HandlerOverhead -cpuprofile cpu.out
// ./circulation-storage/internal/httpapi).
func BenchmarkHandlerOverhead(b *testing.B) {
	const secret = "0123456789abcdef0123456789abcdef-bench"
	v, err := auth.NewVerifier(context.Background(), auth.KeyConfig{Secret: secret})
	if err != nil {
		b.Fatal(err)
	}
	claims, _ := auth.RoleClaims(schemas.RoleTenantAdmin, "diku", "aaaaaaaa-aaaa-4aaa-8aaa-000000000001")
	tok, _ := auth.Mint(secret, claims, time.Hour)
	logger := slog.New(slog.NewTextHandler(io.Discard, &slog.HandlerOptions{Level: slog.LevelWarn}))
	srv := memServer(memLocks{}, auth.Guard{Mode: auth.JWT, Verifier: v}, logger)
	body := `{"userId":"3a40852d-49fd-4df2-a1f9-6e2641a6e91f","holder":{"instance":"bench-circulation:8080","requestId":"123456/circulation","itemBarcode":"bench-item-0001","servicePointId":"3a40852d-49fd-4df2-a1f9-6e2641a6e91f"}}`
	b.ReportAllocs()
	for b.Loop() {
		req := httptest.NewRequest("POST", "/check-out-lock-storage", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set(schemas.HeaderTenant, "diku")
		req.Header.Set(schemas.HeaderToken, tok)
		w := httptest.NewRecorder()
		srv.ServeHTTP(w, req)
		if w.Code != 201 {
			b.Fatal(w.Code, w.Body.String())
		}
		req = httptest.NewRequest("DELETE", "/check-out-lock-storage/3a40852d-49fd-4df2-a1f9-6e2641a6e91f", nil)
		req.Header.Set(schemas.HeaderTenant, "diku")
		req.Header.Set(schemas.HeaderToken, tok)
		w = httptest.NewRecorder()
		srv.ServeHTTP(w, req)
		if w.Code != http.StatusNoContent {
			b.Fatal(w.Code, w.Body.String())
		}
	}
}

// everyTenant is the tenant service of servers made of in-memory
// services: every tenant is enabled; the rest is not served.
type everyTenant struct{ storage.TenantService }

func (everyTenant) Enabled(context.Context, storage.Tenant) (bool, error) { return true, nil }
