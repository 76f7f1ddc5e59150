package postgres_test

import (
	"context"
	"testing"

	"github.com/checkoutlock/circulation-storage/internal/dbtest"
	"github.com/checkoutlock/circulation-storage/internal/pgtest"
	"github.com/checkoutlock/circulation-storage/internal/postgres"
	"github.com/checkoutlock/schemas"
)

// TestTheDatabaseReadsDatesAsTheServicesDo: stored_time, the database's
// reading of a stored date, reads a date exactly when schemas.ParseDateTime
// does, and as the same instant: PostgreSQL's own input would also take
// "now", "epoch", dates without an offset and offsets such as +24:00.
// Sessions work in UTC whatever the server's TimeZone. The database is
// the test's own, migrated by it: the shared one keeps the function as
// the first test process to migrate it left it.
func TestTheDatabaseReadsDatesAsTheServicesDo(t *testing.T) {
	t.Parallel()
	f := dbtest.SetupTenant(t, dbtest.OpenDB(t, pgtest.Fresh(t)))
	ctx := context.Background()
	for _, s := range []string{
		"2026-01-31T17:00:00Z", "2026-01-31t17:00:00.123z", "2026-01-31T17:00:00+18:00", "2026-01-31T17:00:00-18:00",
		"2026-01-31T17:00:00+05:45", "1900-01-01T00:00:00Z", "9999-12-31T23:59:59.999Z",
		"2026-01-31T17:00:00+24:00", "2026-01-31T17:00:00-24:00", "2026-01-31T17:00:00+18:01", "2026-01-31T17:00:00+00:60",
		"now", "epoch", "today", "infinity", "2026-01-31T17:00:00", "2026-01-31 17:00:00Z", "2026-01-31", "",
		"1899-12-31T23:59:59Z", "2026-02-30T00:00:00Z",
	} {
		want, werr := schemas.ParseDateTime(s)
		var got *string
		err := f.DB.Pool.QueryRow(ctx, `SELECT to_char(`+postgres.StoredTime("$1::text", "test")+` AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')`, s).Scan(&got)
		if err != nil {
			t.Fatalf("%q: %v", s, err)
		}
		switch {
		case werr != nil && got != nil:
			t.Errorf("%q: the database reads %s, the services refuse it (%v)", s, *got, werr)
		case werr == nil && got == nil:
			t.Errorf("%q: the database reads no date, the services read %v", s, want)
		case werr == nil && *got != schemas.FormatTime(want):
			t.Errorf("%q: the database reads %s, the services %s", s, *got, schemas.FormatTime(want))
		}
	}
	var zone string
	if err := f.DB.Pool.QueryRow(ctx, `SHOW TimeZone`).Scan(&zone); err != nil || zone != "UTC" {
		t.Errorf("the session's TimeZone: %q, %v; want UTC", zone, err)
	}
}
