package locksql

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// Named is a statement written with named arguments (@name, pgx's
// syntax), rewritten to positional ones once, when it is made (at package
// load, for the service's statements), by pgx's own rewriting, instead of
// at every run (parsing a long statement costs a check-out a tenth of a
// millisecond). A name the statement uses and the list does not give, or
// the reverse, panics where it is made; arguments that name other than
// the statement's fail the run.
type Named struct {
	// SQL is the statement with positional parameters.
	SQL   string
	order []string // the names, in the order of the positional parameters
}

// NewNamed rewrites stmt, whose arguments are names.
func NewNamed(stmt string, names ...string) Named {
	probe := pgx.StrictNamedArgs{}
	for _, n := range names {
		probe[n] = n
	}
	sql, args, err := probe.RewriteQuery(context.Background(), nil, stmt, nil)
	if err != nil {
		panic("locksql: a statement's named arguments: " + err.Error())
	}
	order := make([]string, len(args))
	for i, a := range args {
		order[i] = a.(string)
	}
	return Named{SQL: sql, order: order}
}

// Bind is values as the statement's arguments: a pgx.QueryRewriter,
// passed as a query's only argument with the statement's SQL, that gives
// them in the statement's order, and fails the run when they name other
// than the statement's (before anything reaches the database).
func (n Named) Bind(values pgx.StrictNamedArgs) pgx.QueryRewriter {
	return boundArgs{stmt: n, values: values}
}

type boundArgs struct {
	stmt   Named
	values pgx.StrictNamedArgs
}

// RewriteQuery implements pgx.QueryRewriter.
func (b boundArgs) RewriteQuery(context.Context, *pgx.Conn, string, []any) (string, []any, error) {
	args, err := b.stmt.Args(b.values)
	return b.stmt.SQL, args, err
}

// Args are the statement's positional arguments, taken from values by
// name: every name the statement uses, and no other.
func (n Named) Args(values map[string]any) ([]any, error) {
	if len(values) != len(n.order) {
		return nil, fmt.Errorf("locksql: %d named arguments given, the statement takes %d (%v)", len(values), len(n.order), n.order)
	}
	out := make([]any, len(n.order))
	for i, name := range n.order {
		v, ok := values[name]
		if !ok {
			return nil, fmt.Errorf("locksql: argument %s not given", name)
		}
		out[i] = v
	}
	return out, nil
}
