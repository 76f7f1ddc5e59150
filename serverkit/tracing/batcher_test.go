package tracing

import (
	"context"
	"sync"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// gated is an in-memory exporter whose exports wait, while held, until
// released.
type gated struct {
	*tracetest.InMemoryExporter
	mu      sync.Mutex
	hold    chan struct{}
	calls   int
	sent    int // spans exported, whatever Shutdown clears
	shut    bool
	started chan struct{}
}

func (g *gated) Shutdown(ctx context.Context) error {
	g.mu.Lock()
	g.shut = true
	g.mu.Unlock()
	return g.InMemoryExporter.Shutdown(ctx)
}

func newGated() *gated {
	return &gated{InMemoryExporter: tracetest.NewInMemoryExporter(), started: make(chan struct{}, 100)}
}

func (g *gated) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	g.mu.Lock()
	g.calls++
	g.sent += len(spans)
	hold := g.hold
	g.mu.Unlock()
	g.started <- struct{}{}
	if hold != nil {
		<-hold
	}
	return g.InMemoryExporter.ExportSpans(ctx, spans)
}

func (g *gated) exports() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.calls
}

// spans ends n spans of p's.
func spans(p *sdktrace.TracerProvider, n int) {
	for range n {
		_, s := p.Tracer("test").Start(context.Background(), "span")
		s.End()
	}
}

func waitFor(t *testing.T, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("waited 10 s for %s", what)
		}
		time.Sleep(time.Millisecond) // polling, with a deadline
	}
}

// A batch's worth is exported at once, without waiting for the schedule;
// fewer wait for it, or for ForceFlush.
func TestTheBatcherExportsAFullBatchAtOnce(t *testing.T) {
	exp := newGated()
	b := newBatcher(exp, batchOptions{ScheduleDelay: time.Hour, ExportTimeout: time.Second, MaxQueueSize: 100, MaxExportBatch: 3})
	p := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(b))
	defer func() { _ = p.Shutdown(context.Background()) }()

	spans(p, 2)
	spans(p, 1)
	waitFor(t, "the full batch exported", func() bool { return len(exp.GetSpans()) == 3 })
	spans(p, 2)
	if got := len(exp.GetSpans()); got != 3 {
		t.Fatalf("two spans more, short of a batch: %d exported, want 3 until the schedule or a flush", got)
	}
	if err := p.ForceFlush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got, calls := len(exp.GetSpans()), exp.exports(); got != 5 || calls != 2 {
		t.Errorf("after ForceFlush: %d spans in %d exports, want 5 in 2", got, calls)
	}
}

// The schedule exports what has gathered.
func TestTheBatcherExportsOnItsSchedule(t *testing.T) {
	exp := newGated()
	b := newBatcher(exp, batchOptions{ScheduleDelay: 20 * time.Millisecond, ExportTimeout: time.Second, MaxQueueSize: 100, MaxExportBatch: 50})
	p := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(b))
	defer func() { _ = p.Shutdown(context.Background()) }()
	spans(p, 4)
	waitFor(t, "the four spans exported on the schedule", func() bool { return len(exp.GetSpans()) == 4 })
}

// At most MaxQueueSize spans wait while an export is under way: the rest
// are dropped, not held; Shutdown exports those waiting and shuts the
// exporter down.
func TestTheBatcherIsBoundedAndShutsDown(t *testing.T) {
	exp := newGated()
	exp.hold = make(chan struct{})
	b := newBatcher(exp, batchOptions{ScheduleDelay: time.Hour, ExportTimeout: time.Second, MaxQueueSize: 4, MaxExportBatch: 4})
	p := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(b))

	spans(p, 4) // a full batch: its export starts, and waits
	<-exp.started
	spans(p, 7) // four wait, three are dropped
	exp.mu.Lock()
	close(exp.hold)
	exp.hold = nil
	exp.mu.Unlock()
	if err := p.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if exp.sent != 8 || !exp.shut {
		t.Errorf("%d spans exported, exporter shut down %v; want 8 (4, then 4 of the 7 ended meanwhile), shut down", exp.sent, exp.shut)
	}
	if err := b.ForceFlush(context.Background()); err != nil {
		t.Errorf("ForceFlush after Shutdown: %v", err)
	}
}

// The OTEL_BSP_* variables are read as the SDK reads them.
func TestTheBatchOptionsAreOpenTelemetrysVariables(t *testing.T) {
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "50")
	t.Setenv("OTEL_BSP_EXPORT_TIMEOUT", "nonsense")
	t.Setenv("OTEL_BSP_MAX_QUEUE_SIZE", "100")
	t.Setenv("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", "512")
	want := batchOptions{ScheduleDelay: 50 * time.Millisecond, ExportTimeout: 30 * time.Second, MaxQueueSize: 100, MaxExportBatch: 100}
	if got := batchOptionsFromEnv(); got != want {
		t.Errorf("batchOptionsFromEnv() = %+v, want %+v", got, want)
	}
}
