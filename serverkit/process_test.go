package serverkit

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"runtime/metrics"
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
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	listening := make(chan string, 1)
	done := make(chan error, 1)
	srv := &http.Server{Handler: http.NotFoundHandler(), ReadHeaderTimeout: time.Second}
	go func() { done <- Listen(ctx, srv, ln, config.Serving{}, slog.New(slog.DiscardHandler), listening) }()
	select {
	case <-listening:
	case err := <-done:
		t.Fatalf("Listen returned before serving: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("Listen did not serve within 10 s")
	}
	held := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}, {Name: "/memory/classes/heap/free:bytes"}}
	metrics.Read(held)
	if kept := held[0].Value.Uint64() + held[1].Value.Uint64(); kept >= dropped/2 {
		t.Errorf("serving with %d MB of heap in objects or free and not given back, after start-up dropped %d MB", kept>>20, dropped>>20)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Listen: %v", err)
	}
	_ = srv.Close()
}
