package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/checkoutlock/circulation-storage/internal/pgtest"
	"github.com/checkoutlock/schemas/auth"
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
		done <- run(ctx, nil, map[string]string{
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
	err := run(context.Background(), nil, map[string]string{"HTTP_ADDR": "127.0.0.1:0"}, io.Discard, nil)
	if err == nil || !strings.Contains(err.Error(), "AUTH_MODE must be set: gateway") {
		t.Fatalf("run without AUTH_MODE: %v, want a refusal naming AUTH_MODE", err)
	}
}

func TestRunRefusesInvalidConfiguration(t *testing.T) {
	t.Parallel()
	err := run(context.Background(), nil, map[string]string{"LOCK_DEFAULT_TTL_MS": "soon", "LOG_LEVEL": "loud"}, io.Discard, nil)
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
	err := run(context.Background(), nil, env, &out, nil)
	if err == nil || !strings.Contains(err.Error(), "AUTH_JWT_SECRET is a development key published in this repository") {
		t.Fatalf("run with the published secret: %v, want it refused", err)
	}
	env["AUTH_ALLOW_DEVELOPMENT_KEYS"] = "true"
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	listening := make(chan string, 1)
	done := make(chan error, 1)
	go func() { done <- run(ctx, nil, env, &out, listening) }()
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
