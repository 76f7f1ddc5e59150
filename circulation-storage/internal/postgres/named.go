package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// namedSQL is a statement written with named arguments (@name, pgx's
// syntax), rewritten to positional ones once, when the package loads, by
// pgx's own rewriting, instead of at every run (parsing a long statement
// costs a check-out a tenth of a millisecond). A name the statement uses
// and the list does not give, or the reverse, stops the package loading;
// arguments that name other than the statement's fail the run.
type namedSQL struct {
	sql   string
	order []string // the names, in the order of the positional parameters
}

// named rewrites stmt, whose arguments are names.
func named(stmt string, names ...string) namedSQL {
	probe := pgx.StrictNamedArgs{}
	for _, n := range names {
		probe[n] = n
	}
	sql, args, err := probe.RewriteQuery(context.Background(), nil, stmt, nil)
	if err != nil {
		panic("postgres: a statement's named arguments: " + err.Error())
	}
	order := make([]string, len(args))
	for i, a := range args {
		order[i] = a.(string)
	}
	return namedSQL{sql: sql, order: order}
}

// bind is values as the statement's arguments: a pgx.QueryRewriter,
// passed as a query's only argument with the statement's sql, that gives
// them in the statement's order, and fails the run when they name other
// than the statement's (before anything reaches the database).
func (n namedSQL) bind(values pgx.StrictNamedArgs) pgx.QueryRewriter {
	return boundArgs{stmt: n, values: values}
}

type boundArgs struct {
	stmt   namedSQL
	values pgx.StrictNamedArgs
}

// RewriteQuery implements pgx.QueryRewriter.
func (b boundArgs) RewriteQuery(context.Context, *pgx.Conn, string, []any) (string, []any, error) {
	args, err := b.stmt.args(b.values)
	return b.stmt.sql, args, err
}

// args are the statement's positional arguments, taken from values by
// name: every name the statement uses, and no other.
func (n namedSQL) args(values pgx.StrictNamedArgs) ([]any, error) {
	if len(values) != len(n.order) {
		return nil, fmt.Errorf("postgres: %d named arguments given, the statement takes %d (%v)", len(values), len(n.order), n.order)
	}
	out := make([]any, len(n.order))
	for i, name := range n.order {
		v, ok := values[name]
		if !ok {
			return nil, fmt.Errorf("postgres: argument %s not given", name)
		}
		out[i] = v
	}
	return out, nil
}
