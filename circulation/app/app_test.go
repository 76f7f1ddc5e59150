package app

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

func TestRunServesAndShutsDownOnCancel(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	listening := make(chan string, 1)
	done := make(chan error, 1)
	go func() {
		// Storage is not running: liveness answers, readiness says so.
		done <- Run(ctx, nil, map[string]string{"HTTP_ADDR": "127.0.0.1:0", "STORAGE_URL": "http://127.0.0.1:1", "AUTH_MODE": "gateway"},
			io.Discard, listening)
	}()
	var addr string
	select {
	case addr = <-listening:
	case err := <-done:
		t.Fatalf("run returned before listening: %v", err)
	}
	for path, want := range map[string]int{"/admin/health": http.StatusOK, "/admin/ready": http.StatusServiceUnavailable} {
		res, err := http.Get("http://" + addr + path)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != want {
			t.Errorf("GET %s = %d, want %d", path, res.StatusCode, want)
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
	err := Run(context.Background(), nil, map[string]string{"RETRY_INTERVAL_MS": "500|soon", "LOCK_TTL_MS": "soon"}, io.Discard, nil)
	if err == nil {
		t.Fatal("run accepted an invalid configuration")
	}
	for _, want := range []string{`RETRY_INTERVAL_MS="500|soon" is not waits in milliseconds separated by |`, `LOCK_TTL_MS`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
}
