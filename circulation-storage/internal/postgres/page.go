package postgres

import (
	"context"

	"github.com/jackc/pgx/v5"

	storage "github.com/checkoutlock/circulation-storage"
)

// page runs a list query whose last two parameters are OFFSET and LIMIT and
// whose last column is count(*) OVER (), the number of all matches. The
// window count comes free with a non-empty page; only when the page is empty
// (an offset past the end, or limit 0) is countSQL, taking the first
// countArgs of args (those of the WHERE clause), run to learn the total. scan reads one row and returns its count column.
func page(ctx context.Context, q querier, t storage.Tenant, pageSQL, countSQL string, args []any, countArgs, offset, limit int,
	scan func(rows pgx.Rows) (int, error)) (int, error) {
	rows, err := q.Query(ctx, pageSQL, append(args[:len(args):len(args)], offset, limit)...)
	if err != nil {
		return 0, interpret(err, t)
	}
	defer rows.Close()
	total, n := 0, 0
	for rows.Next() {
		if total, err = scan(rows); err != nil {
			return 0, interpret(err, t)
		}
		n++
	}
	if err := rows.Err(); err != nil {
		return 0, interpret(err, t)
	}
	if n > 0 || (offset == 0 && limit > 0) {
		// A non-empty page carries the total; an empty first page means
		// there are no matches at all.
		return total, nil
	}
	if err := q.QueryRow(ctx, countSQL, args[:countArgs]...).Scan(&total); err != nil {
		return 0, interpret(err, t)
	}
	return total, nil
}
