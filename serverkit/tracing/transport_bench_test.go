package tracing

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"syscall"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// withClientSpan is a call with a client span of its own, as the
// services' calls had before they carried their caller's trace alone:
// kept to measure what that span costs.
type withClientSpan struct{ base http.RoundTripper }

func (t withClientSpan) RoundTrip(r *http.Request) (*http.Response, error) {
	method, path := r.Method, r.URL.Path
	ctx, span := Tracer().Start(r.Context(), "storage "+method+" "+path, trace.WithSpanKind(trace.SpanKindClient))
	r = r.WithContext(ctx)
	r.Header = r.Header.Clone()
	traceContext.Inject(ctx, propagation.HeaderCarrier(r.Header))
	res, err := t.base.RoundTrip(r)
	if err == nil {
		span.SetAttributes(attribute.String("http.request.method", method), attribute.String("url.path", path),
			attribute.Int("http.response.status_code", res.StatusCode))
	}
	span.End()
	return res, err
}

// answered answers every call 200 at once.
type answered struct{}

func (answered) RoundTrip(r *http.Request) (*http.Response, error) {
	return &http.Response{StatusCode: http.StatusOK, Body: http.NoBody, Request: r}, nil
}

// BenchmarkACallsTracing is what tracing adds to one call within a
// request's span, spans exported over OTLP/HTTP to a sink that discards
// them: the call carrying its caller's trace (the services' transport)
// against one with a client span of its own. cpu-ns/op is the process's
// CPU, the exporter's included.
//
//	go test -run X -bench ACallsTracing -count 3 ./serverkit/tracing
func BenchmarkACallsTracing(b *testing.B) {
	sink := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.Copy(io.Discard, r.Body) }))
	defer sink.Close()
	if err := Start(context.Background(), "bench", sink.URL); err != nil {
		b.Fatal(err)
	}
	defer func() { _ = Stop(context.Background()) }()
	for _, bc := range []struct {
		name string
		rt   http.RoundTripper
	}{{"carrying the trace", &transport{base: answered{}}}, {"with a client span", withClientSpan{base: answered{}}}} {
		b.Run(bc.name, func(b *testing.B) {
			ctx, span := Tracer().Start(context.Background(), "the request")
			defer span.End()
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://127.0.0.1:1/check-out-storage/validation", nil)
			if err != nil {
				b.Fatal(err)
			}
			req.Header.Set("X-Okapi-Tenant", "diku")
			b.ReportAllocs()
			var before, after syscall.Rusage
			_ = syscall.Getrusage(syscall.RUSAGE_SELF, &before)
			n := 0
			for b.Loop() {
				if _, err := bc.rt.RoundTrip(req); err != nil {
					b.Fatal(err)
				}
				n++
			}
			_ = syscall.Getrusage(syscall.RUSAGE_SELF, &after)
			cpu := time.Duration(after.Utime.Nano() + after.Stime.Nano() - before.Utime.Nano() - before.Stime.Nano())
			b.ReportMetric(float64(cpu.Nanoseconds())/float64(n), "cpu-ns/op")
		})
	}
}
