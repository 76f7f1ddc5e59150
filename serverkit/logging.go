package serverkit

import (
	"context"
	"log/slog"

	"go.opentelemetry.io/otel/trace"
)

// LogHandler wraps h so that every record logged with a request's context
// carries the request id and, once the service has validated it, the
// tenant, wherever in the service it is logged.
func LogHandler(h slog.Handler) slog.Handler { return requestLogHandler{h} }

type requestLogHandler struct{ slog.Handler }

func (h requestLogHandler) Handle(ctx context.Context, r slog.Record) error {
	if req := RequestOf(ctx); req != nil {
		r.AddAttrs(slog.String("request_id", req.ID))
		if req.Tenant != "" {
			r.AddAttrs(slog.String("tenant", req.Tenant))
		}
	}
	// The trace the line belongs to, while tracing is on: an operator goes
	// from the line to the trace.
	if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
		r.AddAttrs(slog.String("trace_id", sc.TraceID().String()))
	}
	return h.Handler.Handle(ctx, r)
}

func (h requestLogHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return requestLogHandler{h.Handler.WithAttrs(attrs)}
}

func (h requestLogHandler) WithGroup(name string) slog.Handler {
	return requestLogHandler{h.Handler.WithGroup(name)}
}
