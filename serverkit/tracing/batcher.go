package tracing

import (
	"context"
	"os"
	"slices"
	"strconv"
	"sync"
	"time"

	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// batcher gathers ended spans and hands them to the exporter in batches:
// when the schedule's delay has passed since the last batch, or as soon as
// a batch's worth has gathered. It is what the SDK's batch span processor
// does, without that one's cost to a request: it sends every ended span
// over a channel to its goroutine, waking it (and, with a core idle, a
// thread) for each span. Here a span's end is an append under a mutex,
// and the goroutine is woken once a batch (docs/bench/history.md §6i).
type batcher struct {
	exporter sdktrace.SpanExporter
	o        batchOptions

	mu     sync.Mutex
	spans  []sdktrace.ReadOnlySpan
	closed bool

	full   chan struct{}      // a batch's worth gathered (1-buffered)
	flush  chan chan struct{} // ForceFlush's, answered once exported
	done   chan struct{}      // closed by Shutdown
	exited chan struct{}      // closed when the goroutine has exported the rest
	once   sync.Once
}

// batchOptions are the OTEL_BSP_* variables of OpenTelemetry's SDK, read
// as the SDK reads them: a value that is not a positive whole number
// leaves its default.
type batchOptions struct {
	ScheduleDelay  time.Duration // OTEL_BSP_SCHEDULE_DELAY, in ms
	ExportTimeout  time.Duration // OTEL_BSP_EXPORT_TIMEOUT, in ms
	MaxQueueSize   int           // OTEL_BSP_MAX_QUEUE_SIZE: spans beyond it are dropped
	MaxExportBatch int           // OTEL_BSP_MAX_EXPORT_BATCH_SIZE
}

func batchOptionsFromEnv() batchOptions {
	positive := func(name string, def int) int {
		if n, err := strconv.Atoi(os.Getenv(name)); err == nil && n > 0 {
			return n
		}
		return def
	}
	o := batchOptions{
		ScheduleDelay:  time.Duration(positive("OTEL_BSP_SCHEDULE_DELAY", 5000)) * time.Millisecond,
		ExportTimeout:  time.Duration(positive("OTEL_BSP_EXPORT_TIMEOUT", 30000)) * time.Millisecond,
		MaxQueueSize:   positive("OTEL_BSP_MAX_QUEUE_SIZE", 2048),
		MaxExportBatch: positive("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", 512),
	}
	o.MaxExportBatch = min(o.MaxExportBatch, o.MaxQueueSize)
	return o
}

func newBatcher(exporter sdktrace.SpanExporter, o batchOptions) *batcher {
	b := &batcher{exporter: exporter, o: o, full: make(chan struct{}, 1), flush: make(chan chan struct{}),
		done: make(chan struct{}), exited: make(chan struct{})}
	go b.run()
	return b
}

// OnStart implements sdktrace.SpanProcessor.
func (b *batcher) OnStart(context.Context, sdktrace.ReadWriteSpan) {}

// OnEnd implements sdktrace.SpanProcessor: the span joins the next batch,
// unless MaxQueueSize spans wait already (then it is dropped) or the
// batcher has shut down.
func (b *batcher) OnEnd(s sdktrace.ReadOnlySpan) {
	if !s.SpanContext().IsSampled() {
		return
	}
	b.mu.Lock()
	if b.closed || len(b.spans) >= b.o.MaxQueueSize {
		b.mu.Unlock()
		return
	}
	b.spans = append(b.spans, s)
	n := len(b.spans)
	b.mu.Unlock()
	if n == b.o.MaxExportBatch {
		select {
		case b.full <- struct{}{}:
		default:
		}
	}
}

// run exports, one batch after another (an exporter is never called
// concurrently), on the schedule, on a full batch, on ForceFlush, and the
// rest on Shutdown.
func (b *batcher) run() {
	defer close(b.exited)
	t := time.NewTimer(b.o.ScheduleDelay)
	defer t.Stop()
	for {
		select {
		case <-b.done:
			b.export()
			return
		case ack := <-b.flush:
			b.export()
			close(ack)
		case <-b.full:
			b.export()
		case <-t.C:
			b.export()
		}
		t.Reset(b.o.ScheduleDelay)
	}
}

// export hands every span gathered to the exporter, MaxExportBatch at a
// time.
func (b *batcher) export() {
	for {
		b.mu.Lock()
		var batch []sdktrace.ReadOnlySpan
		if n := len(b.spans); n <= b.o.MaxExportBatch {
			batch, b.spans = b.spans, nil
		} else {
			batch = slices.Clone(b.spans[:b.o.MaxExportBatch])
			b.spans = slices.Delete(b.spans, 0, b.o.MaxExportBatch)
		}
		b.mu.Unlock()
		if len(batch) == 0 {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), b.o.ExportTimeout)
		if err := b.exporter.ExportSpans(ctx, batch); err != nil {
			otel.Handle(err)
		}
		cancel()
	}
}

// ForceFlush implements sdktrace.SpanProcessor: every span ended before
// it is exported when it returns, or ctx is done.
func (b *batcher) ForceFlush(ctx context.Context) error {
	ack := make(chan struct{})
	select {
	case b.flush <- ack:
	case <-b.exited:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case <-ack:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Shutdown implements sdktrace.SpanProcessor: spans ended after it are
// dropped, those before it exported, within ctx, and the exporter shut
// down.
func (b *batcher) Shutdown(ctx context.Context) error {
	b.once.Do(func() {
		b.mu.Lock()
		b.closed = true
		b.mu.Unlock()
		close(b.done)
	})
	select {
	case <-b.exited:
	case <-ctx.Done():
		return ctx.Err()
	}
	return b.exporter.Shutdown(ctx)
}
