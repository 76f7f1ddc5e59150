package postgres

import (
	"context"
	"fmt"
	"unicode/utf8"

	"github.com/exaring/otelpgx"
	"github.com/jackc/pgx/v5"
	"go.opentelemetry.io/otel/metric/noop"
)

// StatementTextMax bounds the statement text a statement's span carries
// (db.query.text): the check-out's write is 11 to 15 KB of SQL, sent with
// every check-out traced, where its first kilobyte says which statement it
// is (the full text is in the source, and the statements take no literal
// values, only parameters).
const StatementTextMax = 1024

// StatementTracer is the tracer of a pool whose requests are traced: a
// span for each statement, in the trace of the request it serves, with its
// SQL cut to StatementTextMax bytes; none for taking a connection from the
// pool, and no connection details repeated in every span (the service's
// resource names it). otelpgx's metrics (a duration and an error count for
// every statement) go to a no-op meter: the services export no
// OpenTelemetry metrics, and recording them cost every statement a
// lookup through OpenTelemetry's global meter.
func StatementTracer() pgx.QueryTracer {
	return statementTracer{otelpgx.NewTracer(otelpgx.WithDisableAcquireTracer(), otelpgx.WithDisableConnectionDetailsInAttributes(),
		otelpgx.WithMeterProvider(noop.NewMeterProvider()))}
}

// statementTracer is otelpgx's tracer, the statements' text cut first.
type statementTracer struct{ *otelpgx.Tracer }

func (t statementTracer) TraceQueryStart(ctx context.Context, conn *pgx.Conn, data pgx.TraceQueryStartData) context.Context {
	data.SQL = cutStatement(data.SQL)
	return t.Tracer.TraceQueryStart(ctx, conn, data)
}

func (t statementTracer) TraceBatchQuery(ctx context.Context, conn *pgx.Conn, data pgx.TraceBatchQueryData) {
	data.SQL = cutStatement(data.SQL)
	t.Tracer.TraceBatchQuery(ctx, conn, data)
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
