package presence

import (
	"context"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	storage "github.com/checkoutlock/circulation-storage"
	"github.com/checkoutlock/circulation-storage/internal/dbtest"
	"github.com/checkoutlock/circulation-storage/internal/postgres"
	"github.com/checkoutlock/schemas"
)

// TestAMachinesPresenceIsBoundedAndForgotten: a sighting forgets the
// machine's spans older than the oldest offline transaction a door takes
// (schemas.MaxOfflineBehind), and keeps the rest; a kiosk account keeps at
// most schemas.MaxPresenceSpans spans: past it a new span is refused
// PRESENCE_REFUSED, nothing stored, while its spans go on being seen; a
// span id another machine holds is refused, the other's span unchanged.
func TestAMachinesPresenceIsBoundedAndForgotten(t *testing.T) {
	t.Parallel()
	f := dbtest.Setup(t)
	ctx := context.Background()
	s := New(f.DB)
	kiosk := storage.Caller{User: uuid.NewString(), Kiosk: "kiosk-1"}
	// The spans, in the shared table (no tenant view shows them).
	table := postgres.Table(postgres.TableKioskPresence)
	count := func(where string, args ...any) int {
		t.Helper()
		var n int
		if err := f.DB.Pool.QueryRow(ctx, `SELECT count(*) FROM `+table+` WHERE tenant_id = `+postgres.Lit(string(f.Tenant))+` AND `+where,
			args...).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	span := func(age string) string {
		t.Helper()
		id := uuid.NewString()
		f.Exec(t, `INSERT INTO `+table+` (tenant_id, id, account_id, location, on_from, on_to)
			VALUES (@tenant, @id, @account, @location, now() - @age::interval - interval '1 hour', now() - @age::interval)`,
			pgx.StrictNamedArgs{"tenant": string(f.Tenant), "id": id, "account": kiosk.User, "location": kiosk.Kiosk, "age": age})
		return id
	}
	old, recent := span("31 days"), span("29 days")
	if err := s.SeeOnLine(ctx, f.Tenant, kiosk, uuid.NewString()); err != nil {
		t.Fatal(err)
	}
	if n := count("id = $1", old); n != 0 {
		t.Errorf("a span ended 31 days ago is kept")
	}
	if n := count("id = $1", recent); n != 1 {
		t.Errorf("a span ended 29 days ago is forgotten")
	}

	// The account at its bound: its spans fill it, on two machines.
	f.Exec(t, `INSERT INTO `+table+` (tenant_id, id, account_id, location, on_from, on_to)
		SELECT $3, gen_random_uuid(), $1, 'kiosk-' || (i % 2 + 1), now() - interval '1 day', now() - interval '1 day'
		  FROM generate_series(1, $2::int - (SELECT count(*) FROM `+table+` WHERE tenant_id = $3 AND account_id = $1)::int) i`,
		kiosk.User, schemas.MaxPresenceSpans, string(f.Tenant))
	if n := count("account_id = $1", kiosk.User); n != schemas.MaxPresenceSpans {
		t.Fatalf("the account keeps %d spans, want %d", n, schemas.MaxPresenceSpans)
	}
	another := storage.Caller{User: kiosk.User, Kiosk: "kiosk-2"}
	if err := s.SeeOnLine(ctx, f.Tenant, another, uuid.NewString()); !dbtest.IsCode(err, schemas.CodePresenceRefused) {
		t.Errorf("a new span past the bound: %v, want %s", err, schemas.CodePresenceRefused)
	}
	if n := count("account_id = $1", kiosk.User); n != schemas.MaxPresenceSpans {
		t.Errorf("past the bound the account keeps %d spans", n)
	}
	if err := s.SeeOnLine(ctx, f.Tenant, kiosk, recent); err != nil {
		t.Errorf("a span the account keeps, seen at its bound: %v", err)
	}
	if n := count("id = $1 AND on_to > now() - interval '1 minute'", recent); n != 1 {
		t.Errorf("the span seen at the bound does not last until now")
	}

	// Another account's machine cannot take the span.
	other := storage.Caller{User: uuid.NewString(), Kiosk: "kiosk-1"}
	if err := s.SeeOnLine(ctx, f.Tenant, other, recent); !dbtest.IsCode(err, schemas.CodePresenceRefused) {
		t.Errorf("another machine's span: %v, want %s", err, schemas.CodePresenceRefused)
	}
	if n := count("id = $1 AND account_id = $2", recent, kiosk.User); n != 1 {
		t.Errorf("another machine's sighting changed the span's owner")
	}
}
