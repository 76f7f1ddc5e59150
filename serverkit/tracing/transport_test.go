package tracing

import (
	"context"
	"net/http"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// headersSeen is a transport that keeps the headers of the request it
// was sent, and answers 204.
type headersSeen struct{ got http.Header }

func (h *headersSeen) RoundTrip(r *http.Request) (*http.Response, error) {
	h.got = r.Header
	return &http.Response{StatusCode: http.StatusNoContent, Body: http.NoBody, Request: r}, nil
}

// A call made within a span carries that span's trace context
// (traceparent) and makes no span of its own; the caller's request keeps
// its headers as they were; a call outside any span is sent as it is.
func TestACallCarriesItsCallersTraceAndNoSpanOfItsOwn(t *testing.T) {
	spans := tracetest.NewInMemoryExporter()
	tracer := sdktrace.NewTracerProvider(sdktrace.WithSyncer(spans)).Tracer(TracerName)
	ours.Store(&tracer)
	t.Cleanup(func() { ours.Store(nil) })

	ctx, caller := Tracer().Start(context.Background(), "the caller")
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://127.0.0.1:1/x", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-Okapi-Tenant", "diku")
	base := &headersSeen{}
	if _, err := (&transport{base: base}).RoundTrip(req); err != nil {
		t.Fatal(err)
	}
	caller.End()
	sc := caller.SpanContext()
	want := "00-" + sc.TraceID().String() + "-" + sc.SpanID().String() + "-01"
	if got := base.got.Get("traceparent"); got != want || base.got.Get("X-Okapi-Tenant") != "diku" {
		t.Errorf("the call was sent with traceparent %q and tenant %q, want %q and diku", got, base.got.Get("X-Okapi-Tenant"), want)
	}
	if _, ok := req.Header["Traceparent"]; ok || len(req.Header) != 1 {
		t.Errorf("the caller's request was changed: %v", req.Header)
	}
	if got := spans.GetSpans(); len(got) != 1 || got[0].Name != "the caller" {
		t.Errorf("spans %+v, want the caller's alone", got)
	}

	plain, err := http.NewRequest(http.MethodGet, "http://127.0.0.1:1/x", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := (&transport{base: base}).RoundTrip(plain); err != nil {
		t.Fatal(err)
	}
	if _, ok := base.got["Traceparent"]; ok {
		t.Errorf("a call outside any span was sent with traceparent %q", base.got.Get("traceparent"))
	}
}
