// Package calendars reads service points' openings for FOLIO's calendar
// routes. Every rule of a calendar (what a day's openings are, the
// nearest open day, where a date on a closed day moves) is migration 35's
// SQL, which the loans' and hold shelves' writes ask in their own
// statements: this package asks the same functions and nothing else.
package calendars

import (
	"context"
	"encoding/json"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/checkoutlock/circulation-storage/internal/postgres"

	storage "github.com/checkoutlock/circulation-storage"
)

// Days reads openings from db (storage.CalendarDays).
type Days struct {
	db *postgres.DB
}

// New is the openings kept in db.
func New(db *postgres.DB) *Days { return &Days{db: db} }

var _ storage.CalendarDays = (*Days)(nil)

var surroundingSQL = `SELECT ` + postgres.Table("calendar_surrounding") + `($1::text, $2::uuid, $3::date)`

// Surrounding implements storage.CalendarDays.
func (d *Days) Surrounding(ctx context.Context, t storage.Tenant, servicePointID string, day time.Time) (json.RawMessage, error) {
	var out json.RawMessage
	if err := d.db.Pool.QueryRow(ctx, surroundingSQL, string(t), servicePointID, day.Format(time.DateOnly)).Scan(&out); err != nil {
		return nil, postgres.Interpret(err, t)
	}
	return out, nil
}

var daysSQL = `
WITH d AS (
    SELECT n, ` + postgres.Table("calendar_day") + `(@tenant::text, @sp::uuid, @from::date + n) AS day
      FROM generate_series(0, @to::date - @from::date) AS n
), kept AS (
    SELECT n, day FROM d WHERE @closed::boolean OR (day ->> 'open')::boolean OR (day ->> 'exceptional')::boolean
)
SELECT jsonb_build_object('dates', coalesce((SELECT jsonb_agg(day ORDER BY n) FROM (SELECT n, day FROM kept ORDER BY n OFFSET @offset LIMIT @limit) p), '[]'),
                          'totalRecords', (SELECT count(*) FROM kept))`

// Days implements storage.CalendarDays.
func (d *Days) Days(ctx context.Context, t storage.Tenant, servicePointID string, from, to time.Time, includeClosed bool, offset, limit int) (json.RawMessage, error) {
	var out json.RawMessage
	err := d.db.Pool.QueryRow(ctx, daysSQL, pgx.StrictNamedArgs{"tenant": string(t), "sp": servicePointID,
		"from": from.Format(time.DateOnly), "to": to.Format(time.DateOnly), "closed": includeClosed, "offset": offset, "limit": limit}).Scan(&out)
	if err != nil {
		return nil, postgres.Interpret(err, t)
	}
	return out, nil
}
