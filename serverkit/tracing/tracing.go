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
	"go.opentelemetry.io/otel/codes"
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

// Transport wraps base, while tracing is on, so that each call is a client
// span of its own, named prefix, method and path, in the caller's trace,
// which the called service continues (traceparent). The span ends when the
// answer's headers arrive. It is the services' own rather than otelhttp's
// transport, which clones every request and works out metrics' attributes
// the services do not record (docs/bench/history.md §6i).
func Transport(base http.RoundTripper, prefix string) http.RoundTripper {
	if !On() {
		return base
	}
	return &transport{base: base, prefix: prefix}
}

type transport struct {
	base   http.RoundTripper
	prefix string
}

func (t *transport) RoundTrip(r *http.Request) (*http.Response, error) {
	method, path := r.Method, r.URL.Path
	ctx, span := Tracer().Start(r.Context(), t.prefix+method+" "+path, clientSpan...)
	// A RoundTripper must not change its caller's request: the headers
	// are copied before traceparent is added.
	r = r.WithContext(ctx)
	r.Header = r.Header.Clone()
	traceContext.Inject(ctx, propagation.HeaderCarrier(r.Header))
	ended := false
	defer func() {
		// The base transport panicked: the span ends all the same, as an
		// error, and the panic goes on.
		if !ended {
			span.SetStatus(codes.Error, "the transport panicked")
			span.End()
		}
	}()
	res, err := t.base.RoundTrip(r)
	ended = true
	// The attributes in one call, once the status is known: the span's
	// attributes are allocated once, at their size.
	if err != nil {
		span.SetAttributes(attribute.String("http.request.method", method), attribute.String("url.path", path))
		span.SetStatus(codes.Error, err.Error())
		span.End()
		return res, err
	}
	span.SetAttributes(attribute.String("http.request.method", method), attribute.String("url.path", path),
		attribute.Int("http.response.status_code", res.StatusCode))
	if res.StatusCode >= 500 {
		span.SetStatus(codes.Error, http.StatusText(res.StatusCode))
	}
	span.End()
	return res, nil
}

// clientSpan are a client span's start options, made once.
var clientSpan = []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindClient)}

// traceContext is the propagator Start installs (W3C trace context), used
// directly rather than looked up through OpenTelemetry's global for every
// call.
var traceContext = propagation.TraceContext{}

// Extract is the caller's trace context from a request's headers
// (traceparent), in ctx.
func Extract(ctx context.Context, h http.Header) context.Context {
	return traceContext.Extract(ctx, propagation.HeaderCarrier(h))
}
