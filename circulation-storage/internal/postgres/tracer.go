package postgres

import (
	"context"
	"fmt"
	"unicode/utf8"

	"github.com/exaring/otelpgx"
	"github.com/jackc/pgx/v5"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/trace"
)

// failedStatement is the attribute of a batch's span naming the statement
// that failed (its text, cut as a statement's span cuts it).
const failedStatement = attribute.Key("db.query.text")

// StatementTextMax bounds the statement text a statement's span carries
// (db.query.text): the check-out's write is 11 to 15 KB of SQL, sent with
// every check-out traced, where its first kilobyte says which statement it
// is (the full text is in the source, and the statements take no literal
// values, only parameters).
const StatementTextMax = 1024

// StatementTracer is the tracer of a pool whose requests are traced: a
// span for each round trip to PostgreSQL, in the trace of the request it
// serves: a statement sent alone is a span with its SQL cut to
// StatementTextMax bytes; a batch (statements pipelined in one round
// trip, as the check-out's write sends them) is one span, "batch", with
// the number of its statements and, when one fails, that statement's text
// and error. A statement of a batch has no span of its own: its results
// arrive with the others', so a span of its own would time nothing, and
// the check-out's write is most of its statements (spans and their
// export are what tracing costs). None for taking a connection from the
// pool, and no connection details repeated in every span (the service's
// resource names it). otelpgx's metrics (a duration and an error count for
// every statement) go to a no-op meter: the services export no
// OpenTelemetry metrics, and recording them cost every statement a
// lookup through OpenTelemetry's global meter.
func StatementTracer() pgx.QueryTracer {
	return statementTracer{otelpgx.NewTracer(otelpgx.WithDisableAcquireTracer(), otelpgx.WithDisableConnectionDetailsInAttributes(),
		otelpgx.WithMeterProvider(noop.NewMeterProvider()))}
}

// statementTracer is otelpgx's tracer, the statements' text cut first,
// a batch's statements without spans of their own.
type statementTracer struct{ *otelpgx.Tracer }

func (t statementTracer) TraceQueryStart(ctx context.Context, conn *pgx.Conn, data pgx.TraceQueryStartData) context.Context {
	data.SQL = cutStatement(data.SQL)
	return t.Tracer.TraceQueryStart(ctx, conn, data)
}

// TraceBatchStart is otelpgx's span of the batch, named "batch".
func (t statementTracer) TraceBatchStart(ctx context.Context, conn *pgx.Conn, data pgx.TraceBatchStartData) context.Context {
	ctx = t.Tracer.TraceBatchStart(ctx, conn, data)
	if span := trace.SpanFromContext(ctx); span.IsRecording() {
		span.SetName("batch")
	}
	return ctx
}

// TraceBatchQuery makes no span: the batch's span names the statement
// that failed (pgx reports no statement after it).
func (t statementTracer) TraceBatchQuery(ctx context.Context, _ *pgx.Conn, data pgx.TraceBatchQueryData) {
	if data.Err == nil {
		return
	}
	trace.SpanFromContext(ctx).SetAttributes(failedStatement.String(cutStatement(data.SQL)))
}

func (t statementTracer) TracePrepareStart(ctx context.Context, conn *pgx.Conn, data pgx.TracePrepareStartData) context.Context {
	data.SQL = cutStatement(data.SQL)
	return t.Tracer.TracePrepareStart(ctx, conn, data)
}

// cutStatement is sql up to StatementTextMax bytes (at a character's
// start), saying how long the whole was.
func cutStatement(sql string) string {
	if len(sql) <= StatementTextMax {
		return sql
	}
	n := StatementTextMax
	for n > 0 && !utf8.RuneStart(sql[n]) {
		n--
	}
	return fmt.Sprintf("%s … (%d bytes in all)", sql[:n], len(sql))
}
