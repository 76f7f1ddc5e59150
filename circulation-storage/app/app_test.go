package app

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	storage "github.com/checkoutlock/circulation-storage"
	"github.com/checkoutlock/circulation-storage/internal/pgtest"
	"github.com/checkoutlock/circulation-storage/internal/postgres"
	"github.com/checkoutlock/circulation-storage/internal/tenants"
	"github.com/checkoutlock/serverkit/auth"
)

// syncBuffer is a bytes.Buffer safe for the service's logger and the test.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func TestRunServesAndShutsDownOnCancel(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out syncBuffer
	listening := make(chan string, 1)
	done := make(chan error, 1)
	// FOLIO's DB_* variables, with a password (which trust authentication
	// ignores) that must never reach the logs.
	u, err := url.Parse(pgtest.Shared(t))
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		done <- Run(ctx, nil, map[string]string{
			"HTTP_ADDR":   "127.0.0.1:0",
			"AUTH_MODE":   "gateway",
			"DB_HOST":     u.Hostname(),
			"DB_PORT":     u.Port(),
			"DB_USERNAME": u.User.Username(),
			"DB_PASSWORD": "never-logged",
			"DB_DATABASE": strings.TrimPrefix(u.Path, "/"),
		}, &out, listening)
	}()
	var addr string
	select {
	case addr = <-listening:
	case err := <-done:
		t.Fatalf("run returned before listening: %v\n%s", err, out.String())
	}
	for _, path := range []string{"/admin/health", "/admin/ready"} {
		res, err := http.Get("http://" + addr + path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		want := `{"status":"UP"}`
		if path == "/admin/health" {
			want = `{"authMode":"gateway","status":"UP","warnings":["` + auth.WarningGateway + `"]}`
		}
		if res.StatusCode != http.StatusOK || strings.TrimSpace(string(body)) != want {
			t.Errorf("GET %s = %d %s", path, res.StatusCode, body)
		}
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("run: %v", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("run did not return after its context was cancelled")
	}
	logs := out.String()
	if !strings.Contains(logs, `"msg":"stopped"`) {
		t.Errorf("no shutdown in the logs:\n%s", logs)
	}
	if strings.Contains(logs, "never-logged") {
		t.Errorf("a password reached the logs:\n%s", logs)
	}
}

// TestRunRefusesToStartWithoutAnAuthMode: there is no silent default.
func TestRunRefusesToStartWithoutAnAuthMode(t *testing.T) {
	t.Parallel()
	err := Run(context.Background(), nil, map[string]string{"HTTP_ADDR": "127.0.0.1:0"}, io.Discard, nil)
	if err == nil || !strings.Contains(err.Error(), "AUTH_MODE must be set: gateway") {
		t.Fatalf("run without AUTH_MODE: %v, want a refusal naming AUTH_MODE", err)
	}
}

func TestRunRefusesInvalidConfiguration(t *testing.T) {
	t.Parallel()
	err := Run(context.Background(), nil, map[string]string{"LOCK_DEFAULT_TTL_MS": "soon", "LOG_LEVEL": "loud"}, io.Discard, nil)
	if err == nil {
		t.Fatal("run accepted an invalid configuration")
	}
	for _, want := range []string{`LOCK_DEFAULT_TTL_MS="soon" is not an integer`, `LOG_LEVEL="loud" is not one of debug, info, warn, error`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
}

// TestThePublishedSecretNeedsSayingSo: storage refuses to start with the
// development secret config/auth.env publishes unless
// AUTH_ALLOW_DEVELOPMENT_KEYS=true, and then says so on /admin/health.
func TestThePublishedSecretNeedsSayingSo(t *testing.T) {
	t.Parallel()
	env := map[string]string{"HTTP_ADDR": "127.0.0.1:0", "AUTH_MODE": "jwt", "DATABASE_URL": pgtest.Shared(t),
		"AUTH_JWT_SECRET": "development-only-secret-replace-me-0123456789"}
	var out syncBuffer
	err := Run(context.Background(), nil, env, &out, nil)
	if err == nil || !strings.Contains(err.Error(), "AUTH_JWT_SECRET is a development key published in this repository") {
		t.Fatalf("run with the published secret: %v, want it refused", err)
	}
	env["AUTH_ALLOW_DEVELOPMENT_KEYS"] = "true"
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	listening := make(chan string, 1)
	done := make(chan error, 1)
	go func() { done <- Run(ctx, nil, env, &out, listening) }()
	var addr string
	select {
	case addr = <-listening:
	case err := <-done:
		t.Fatalf("run returned before listening: %v", err)
	}
	res, err := http.Get("http://" + addr + "/admin/health")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if !strings.Contains(string(body), "a development key published in this repository is in use") {
		t.Errorf("health %s, want the development warning", body)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("run: %v", err)
	}
}

// TestShutdownEndsWaitingAcquisitions: acquisitions waiting for a held
// lock (waitMs well beyond SHUTDOWN_TIMEOUT) do not hold the shutdown up:
// when run's context is cancelled (SIGTERM) they answer at once, 503
// SHUTTING_DOWN, and run returns nil well within SHUTDOWN_TIMEOUT.
func TestShutdownEndsWaitingAcquisitions(t *testing.T) {
	t.Parallel()
	dbURL := pgtest.Shared(t)
	tenant := pgtest.TenantID()
	t.Cleanup(func() {
		db, err := postgres.Open(context.Background(), dbURL, postgres.PoolConfig{MaxConns: 2})
		if err != nil {
			t.Error(err)
			return
		}
		defer db.Close()
		if err := tenants.NewTenants(db, slog.New(slog.DiscardHandler)).Purge(context.Background(), storage.Tenant(tenant)); err != nil {
			t.Error(err)
		}
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out syncBuffer
	listening := make(chan string, 1)
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, nil, map[string]string{"HTTP_ADDR": "127.0.0.1:0", "AUTH_MODE": "none", "DATABASE_URL": dbURL,
			"SHUTDOWN_TIMEOUT": "5s", "LOCK_MAX_WAIT_MS": "60000"}, &out, listening)
	}()
	var addr string
	select {
	case addr = <-listening:
	case err := <-done:
		t.Fatalf("run returned before listening: %v\n%s", err, out.String())
	}
	post := func(path, body string) (int, string, error) {
		req, _ := http.NewRequest("POST", "http://"+addr+path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Okapi-Tenant", tenant)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0, "", err
		}
		defer res.Body.Close()
		b, err := io.ReadAll(res.Body)
		return res.StatusCode, string(b), err
	}
	if status, body, err := post("/_/tenant", `{"module_to":"mod-circulation-storage-1.0.0"}`); err != nil || status != http.StatusCreated {
		t.Fatalf("tenant init: %d %s %v", status, body, err)
	}
	user := "5b0e5a1c-7a1e-4f67-9d4b-0c6f1e2a3b4c"
	if status, body, err := post("/check-out-lock-storage", `{"userId":"`+user+`","ttlMs":60000}`); err != nil || status != http.StatusCreated {
		t.Fatalf("acquire: %d %s %v", status, body, err)
	}
	const n = 3
	type answer struct {
		status int
		body   string
		err    error
	}
	answers := make(chan answer, n)
	for range n {
		go func() {
			status, body, err := post("/check-out-lock-storage", `{"userId":"`+user+`","ttlMs":60000,"waitMs":60000}`)
			answers <- answer{status, body, err}
		}()
	}
	// Wait until all of them wait.
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(metrics(t, addr), "checkout_lock_waiters 3\n") {
		if time.Now().After(deadline) {
			t.Fatalf("the waiters do not wait:\n%s", metrics(t, addr))
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	for range n {
		select {
		case a := <-answers:
			if a.err != nil || a.status != http.StatusServiceUnavailable || !strings.Contains(a.body, `"code":"SHUTTING_DOWN"`) {
				t.Errorf("a waiter answered %d %s %v, want 503 SHUTTING_DOWN", a.status, a.body, a.err)
			}
		case <-time.After(time.Second):
			t.Fatal("a waiter has not answered a second after the shutdown began")
		}
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("run: %v\n%s", err, out.String())
		}
	case <-time.After(5 * time.Second):
		t.Fatal("run did not return within SHUTDOWN_TIMEOUT")
	}
}

// metrics is the /metrics page of the service at addr.
func metrics(t *testing.T, addr string) string {
	t.Helper()
	res, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestShutdownPastItsTimeoutClosesConnections: a request still in flight
// when SHUTDOWN_TIMEOUT ends (a body that never finishes arriving, with
// REQUEST_TIMEOUT far longer) does not keep the process up: its connection
// is closed, and run says the shutdown cut requests off.
func TestShutdownPastItsTimeoutClosesConnections(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out syncBuffer
	listening := make(chan string, 1)
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, nil, map[string]string{"HTTP_ADDR": "127.0.0.1:0", "AUTH_MODE": "none", "DATABASE_URL": pgtest.Shared(t),
			"SHUTDOWN_TIMEOUT": "300ms", "REQUEST_TIMEOUT": "60s"}, &out, listening)
	}()
	var addr string
	select {
	case addr = <-listening:
	case err := <-done:
		t.Fatalf("run returned before listening: %v\n%s", err, out.String())
	}
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	// Headers and the start of a body that never ends.
	if _, err := io.WriteString(conn, "POST /check-out-lock-storage HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"+
		"X-Okapi-Tenant: diku\r\nContent-Length: 1000\r\n\r\n{"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond) // the request is being read: in flight
	cancel()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "SHUTDOWN_TIMEOUT") {
			t.Fatalf("run: %v, want the shutdown to say it cut requests off\n%s", err, out.String())
		}
	case <-time.After(5 * time.Second):
		t.Fatal("run did not return after SHUTDOWN_TIMEOUT with a request in flight")
	}
	_ = conn.SetReadDeadline(time.Now().Add(2 * time.Second))
	if _, err := io.ReadAll(conn); err != nil {
		t.Errorf("the in-flight request's connection was not closed: %v", err)
	}
	if !strings.Contains(out.String(), "closing their connections") {
		t.Errorf("no word of the cut-off requests in the log:\n%s", out.String())
	}
}
