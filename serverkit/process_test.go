package serverkit

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"runtime/metrics"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/checkoutlock/config"
)

// startUpGarbage is what the test's start-up makes and drops.
var startUpGarbage []byte

// TestListenGivesBackWhatStartUpDropped: what start-up made and dropped is
// collected, and its memory given back, before Listen serves: not left for
// the collector's next cycle, whose goal start-up's peak set, nor for the
// runtime to give back a little at a time under the first requests.
func TestListenGivesBackWhatStartUpDropped(t *testing.T) {
	const dropped = 64 << 20
	startUpGarbage = make([]byte, dropped)
	for i := range startUpGarbage {
		startUpGarbage[i] = 1
	}
	startUpGarbage = nil
	stop := listen(t, config.Server{})
	held := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}, {Name: "/memory/classes/heap/free:bytes"}}
	metrics.Read(held)
	if kept := held[0].Value.Uint64() + held[1].Value.Uint64(); kept >= dropped/2 {
		t.Errorf("serving with %d MB of heap in objects or free and not given back, after start-up dropped %d MB", kept>>20, dropped>>20)
	}
	stop()
}

// listen runs Listen with the server section s on a server of its own on
// a free loopback port, and returns once it serves; stop ends it and
// fails the test if Listen failed.
func listen(t *testing.T, s config.Server) (stop func()) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	listening := make(chan string, 1)
	done := make(chan error, 1)
	srv := &http.Server{Handler: http.NotFoundHandler(), ReadHeaderTimeout: time.Second}
	go func() { done <- Listen(ctx, srv, ln, s, slog.New(slog.DiscardHandler), listening) }()
	select {
	case <-listening:
	case err := <-done:
		cancel()
		t.Fatalf("Listen returned before serving: %v", err)
	case <-time.After(10 * time.Second):
		cancel()
		t.Fatal("Listen did not serve within 10 s")
	}
	return func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Listen: %v", err)
		}
		_ = srv.Close()
	}
}

// TestProfilesAreServedUntilStopped: Profile serves Go's profiles on the
// address it is given, answers a profile's request as net/http/pprof
// does, and stops serving, its port closed, when stopped; an address
// taken already fails, naming it.
func TestProfilesAreServedUntilStopped(t *testing.T) {
	t.Parallel()
	addr, stop, err := Profile("127.0.0.1:0", slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	get := func(path string) (int, string, error) {
		res, err := http.Get("http://" + addr + path)
		if err != nil {
			return 0, "", err
		}
		defer res.Body.Close()
		b, err := io.ReadAll(res.Body)
		return res.StatusCode, string(b), err
	}
	code, body, err := get("/debug/pprof/cmdline")
	if err != nil || code != http.StatusOK || body != strings.Join(os.Args, "\x00") {
		t.Errorf("GET /debug/pprof/cmdline = %d %q %v, want 200 and the command line", code, body, err)
	}
	code, body, err = get("/debug/pprof/goroutine?debug=1")
	if err != nil || code != http.StatusOK || !strings.HasPrefix(body, "goroutine profile: total ") {
		t.Errorf("GET /debug/pprof/goroutine?debug=1 = %d %.40q %v, want 200 and the goroutines", code, body, err)
	}
	if code, _, err = get("/metrics"); err != nil || code != http.StatusNotFound {
		t.Errorf("GET /metrics on the profiles' address = %d %v, want 404: nothing but the profiles is served there", code, err)
	}
	if _, _, err := Profile(addr, slog.New(slog.DiscardHandler)); err == nil || !strings.Contains(err.Error(), "profiles: listen on "+addr) {
		t.Errorf("Profile on a taken address = %v, want an error naming it", err)
	}
	stop()
	if _, _, err = get("/debug/pprof/cmdline"); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("after stop, GET /debug/pprof/cmdline: %v, want the connection refused", err)
	}
}

// TestListenServesProfilesWhileItServes: with a profile address, Listen
// serves the profiles there while it serves the API, and closes their
// port when it returns.
func TestListenServesProfilesWhileItServes(t *testing.T) {
	t.Parallel()
	free, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	profiles := free.Addr().String()
	free.Close()
	stop := listen(t, config.Server{ProfileAddr: profiles})
	res, err := http.Get("http://" + profiles + "/debug/pprof/cmdline")
	if err != nil {
		stop()
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Errorf("GET /debug/pprof/cmdline while Listen serves = %d, want 200", res.StatusCode)
	}
	stop()
	if _, err := http.Get("http://" + profiles + "/debug/pprof/cmdline"); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("after Listen returned, GET /debug/pprof/cmdline: %v, want the connection refused", err)
	}
}
