package tracing

import (
	"net/http"
	"testing"

	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

type panickingTransport struct{}

func (panickingTransport) RoundTrip(*http.Request) (*http.Response, error) {
	panic("the transport broke")
}

// A call whose transport panics still ends its span, as an error, and the
// panic reaches the caller.
func TestAClientSpanEndsWhenTheTransportPanics(t *testing.T) {
	spans := tracetest.NewInMemoryExporter()
	tracer := sdktrace.NewTracerProvider(sdktrace.WithSyncer(spans)).Tracer(TracerName)
	ours.Store(&tracer)
	t.Cleanup(func() { ours.Store(nil) })

	req, err := http.NewRequest(http.MethodGet, "http://127.0.0.1:1/x", nil)
	if err != nil {
		t.Fatal(err)
	}
	func() {
		defer func() {
			if p := recover(); p != "the transport broke" {
				t.Errorf("the caller recovered %v, want the transport's panic", p)
			}
		}()
		_, _ = (&transport{base: panickingTransport{}, prefix: "storage "}).RoundTrip(req)
	}()
	got := spans.GetSpans()
	if len(got) != 1 || got[0].Name != "storage GET /x" || got[0].Status.Code != codes.Error {
		t.Fatalf("spans %+v, want one, storage GET /x, ended as an error", got)
	}
}
