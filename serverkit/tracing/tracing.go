// Package tracing is the services' OpenTelemetry tracing: off unless
// OTEL_EXPORTER_OTLP_ENDPOINT names a collector, then spans exported over
// OTLP/HTTP and W3C trace context propagated. The SIP2 door uses it as the
// HTTP services do.
package tracing

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	sdkresource "go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// TracerName names the spans the services make themselves (the lock's
// wait, the servers' and the clients' spans); otelpgx names its own.
const TracerName = "github.com/checkoutlock"

// tracing is the process's tracer provider while tracing is on (nil when
// off): spans exported over OTLP/HTTP to OTEL_EXPORTER_OTLP_ENDPOINT.
var tracing atomic.Pointer[sdktrace.TracerProvider]

// ours is the services' own tracer while tracing is on: looked up once,
// not for every span (OpenTelemetry's global lookup takes a lock).
var ours atomic.Pointer[trace.Tracer]

// On says whether the process exports traces: whether the
// callers that wrap what they call (an HTTP client's transport, a
// database pool's tracer) should.
func On() bool { return tracing.Load() != nil }

// Start turns tracing on when endpoint (OTEL_EXPORTER_OTLP_ENDPOINT,
// the collector's base URL) is set: a span for each request the server
// answers (continuing the caller's trace from its traceparent header), and
// whatever the service and its libraries add, exported in batches over
// OTLP/HTTP to endpoint/v1/traces; W3C trace context is propagated to the
// services it calls. With endpoint empty nothing is set up and the spans
// the code makes are OpenTelemetry's no-op ones. The OTEL_BSP_* variables
// of OpenTelemetry's SDK tune the batches.
func Start(ctx context.Context, service, endpoint string) error {
	if endpoint == "" {
		return nil
	}
	exporter, err := otlptracehttp.New(ctx, otlptracehttp.WithEndpointURL(strings.TrimSuffix(endpoint, "/")+"/v1/traces"))
	if err != nil {
		return fmt.Errorf("OTEL_EXPORTER_OTLP_ENDPOINT: %w", err)
	}
	provider := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(newBatcher(exporter, batchOptionsFromEnv())),
		sdktrace.WithResource(sdkresource.NewSchemaless(attribute.String("service.name", service))))
	otel.SetTracerProvider(provider)
	otel.SetTextMapPropagator(traceContext)
	tracer := provider.Tracer(TracerName)
	ours.Store(&tracer)
	tracing.Store(provider)
	return nil
}

// Stop sends the spans not yet sent, within ctx, and stops
// tracing.
func Stop(ctx context.Context) error {
	provider := tracing.Swap(nil)
	ours.Store(nil)
	if provider == nil {
		return nil
	}
	return provider.Shutdown(ctx)
}

// Tracer is the services' own tracer, a no-op while tracing is off.
func Tracer() trace.Tracer {
	if t := ours.Load(); t != nil {
		return *t
	}
	return noop.Tracer{}
}

// Transport wraps base, while tracing is on, so that each call carries
// its caller's trace context (traceparent): the called service's span of
// the request continues the caller's span. A call has no span of its own.
// A client span would time the call from the caller's side, the wire
// included, but costs a span's start, end and export on every call, and
// tracing every check-out is to cost it no more than 5 % of its CPU
// (BENCHMARKS.md §15); the called service's span times its answer, and
// what the wire took is the gap around it. It is the services' own
// rather than otelhttp's transport, which clones every request and works
// out metrics' attributes the services do not record
// (docs/bench/history.md §6i).
func Transport(base http.RoundTripper) http.RoundTripper {
	if !On() {
		return base
	}
	return &transport{base: base}
}

type transport struct{ base http.RoundTripper }

func (t *transport) RoundTrip(r *http.Request) (*http.Response, error) {
	ctx := r.Context()
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return t.base.RoundTrip(r)
	}
	// A RoundTripper must not change its caller's request: the headers
	// are copied before traceparent is added.
	r = r.WithContext(ctx)
	r.Header = r.Header.Clone()
	if r.Header == nil {
		r.Header = http.Header{}
	}
	traceContext.Inject(ctx, propagation.HeaderCarrier(r.Header))
	return t.base.RoundTrip(r)
}

// traceContext is the propagator Start installs (W3C trace context), used
// directly rather than looked up through OpenTelemetry's global for every
// call.
var traceContext = propagation.TraceContext{}

// Extract is the caller's trace context from a request's headers
// (traceparent), in ctx.
func Extract(ctx context.Context, h http.Header) context.Context {
	return traceContext.Extract(ctx, propagation.HeaderCarrier(h))
}
