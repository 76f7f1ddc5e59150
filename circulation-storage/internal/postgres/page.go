package postgres

import (
	"context"
	"maps"

	"github.com/jackc/pgx/v5"

	storage "github.com/checkoutlock/circulation-storage"
)

// Page runs a list query whose page is @offset and @limit and whose last
// column is count(*) OVER (), the number of all matches. where are the
// arguments of its WHERE clause, order those of its ORDER BY. The window
// count comes free with a non-empty page; only when the page is empty (an
// offset past the end, or limit 0) is countSQL, taking the where
// arguments alone, run to learn the total. scan reads one row and returns
// its count column.
func Page(ctx context.Context, q Querier, t storage.Tenant, pageSQL, countSQL string, where, order pgx.StrictNamedArgs, offset, limit int,
	scan func(rows pgx.Rows) (int, error)) (int, error) {
	args := pgx.StrictNamedArgs{"offset": offset, "limit": limit}
	maps.Copy(args, where)
	maps.Copy(args, order)
	rows, err := q.Query(ctx, pageSQL, args)
	if err != nil {
		return 0, Interpret(err, t)
	}
	defer rows.Close()
	total, n := 0, 0
	for rows.Next() {
		if total, err = scan(rows); err != nil {
			return 0, Interpret(err, t)
		}
		n++
	}
	if err := rows.Err(); err != nil {
		return 0, Interpret(err, t)
	}
	if n > 0 || (offset == 0 && limit > 0) {
		// A non-empty page carries the total; an empty first page means
		// there are no matches at all.
		return total, nil
	}
	if err := q.QueryRow(ctx, countSQL, where).Scan(&total); err != nil {
		return 0, Interpret(err, t)
	}
	return total, nil
}
