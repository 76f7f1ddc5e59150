package postgres_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/checkoutlock/circulation-storage/internal/pgtest"
	"github.com/checkoutlock/circulation-storage/internal/postgres"
)

// A batch is one span, "batch", whatever its statements: none of them has
// a span of its own. When one fails, the batch's span is an error and
// names that statement (the first to fail: the ones after it fail because
// it did). A statement sent alone is a span of its own.
func TestABatchIsOneSpan(t *testing.T) {
	spans := tracetest.NewInMemoryExporter()
	provider := sdktrace.NewTracerProvider(sdktrace.WithSyncer(spans))
	previous := otel.GetTracerProvider()
	otel.SetTracerProvider(provider)
	t.Cleanup(func() { otel.SetTracerProvider(previous) })

	ctx := context.Background()
	cfg, err := pgx.ParseConfig(pgtest.Shared(t))
	if err != nil {
		t.Fatal(err)
	}
	cfg.Tracer = postgres.StatementTracer()
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close(ctx) })

	run := func(statements ...string) error {
		ctx, request := provider.Tracer("test").Start(ctx, "request")
		defer request.End()
		b := &pgx.Batch{}
		for _, s := range statements {
			b.Queue(s)
		}
		return conn.SendBatch(ctx, b).Close()
	}
	if err := run("SELECT 1", "SELECT 2", "SELECT 3"); err != nil {
		t.Fatal(err)
	}
	got := spans.GetSpans()
	if len(got) != 2 || got[0].Name != "batch" || got[1].Name != "request" || got[0].Parent.SpanID() != got[1].SpanContext.SpanID() {
		t.Fatalf("a batch of three made the spans %v, want one span, batch, under the request's", names(got))
	}
	if got[0].Status.Code == codes.Error {
		t.Errorf("the batch that succeeded is an error: %+v", got[0].Status)
	}
	for _, a := range got[0].Attributes {
		if a.Key == "db.query.text" {
			t.Errorf("the batch that succeeded names a statement: %q", a.Value.AsString())
		}
	}

	spans.Reset()
	if err := run("SELECT 1", "SELECT 1/0", "SELECT 3"); err == nil {
		t.Fatal("a batch dividing by zero succeeded")
	}
	got = spans.GetSpans()
	if len(got) != 2 || got[0].Name != "batch" {
		t.Fatalf("a failed batch of three made the spans %v, want one span, batch, and the request's", names(got))
	}
	if got[0].Status.Code != codes.Error {
		t.Errorf("the failed batch's span has the status %+v, want an error", got[0].Status)
	}
	var text string
	for _, a := range got[0].Attributes {
		if a.Key == "db.query.text" {
			text = a.Value.AsString()
		}
	}
	if text != "SELECT 1/0" {
		t.Errorf("the failed batch's span names the statement %q, want the one that failed, SELECT 1/0", text)
	}

	spans.Reset()
	ctx2, request := provider.Tracer("test").Start(ctx, "request")
	if _, err := conn.Exec(ctx2, "SELECT 4"); err != nil {
		t.Fatal(err)
	}
	request.End()
	if got := spans.GetSpans(); len(got) != 2 || got[0].Name == "batch" || got[0].Parent.SpanID() != got[1].SpanContext.SpanID() {
		t.Errorf("a statement alone made the spans %v, want one of its own under the request's", names(got))
	}
}

func names(spans tracetest.SpanStubs) []string {
	var out []string
	for _, s := range spans {
		out = append(out, s.Name)
	}
	return out
}
