// Package presence keeps the times SIP2 doors saw self-check machines on
// line (storage.Presence), in PostgreSQL (migration 31's kiosk_presence).
package presence

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	storage "github.com/checkoutlock/circulation-storage"
	"github.com/checkoutlock/circulation-storage/internal/postgres"
	"github.com/checkoutlock/schemas"
	"github.com/checkoutlock/schemas/errs"
)

// Store is storage.Presence over db.
type Store struct{ db *postgres.DB }

// New is the presence kept in db.
func New(db *postgres.DB) *Store { return &Store{db: db} }

var _ storage.Presence = (*Store)(nil)

// seeSQL records one sighting in one statement: the machine's spans past
// the oldest offline transaction a door takes go, the span id lasts until
// now, or begins now when it is new and the account is within its bound.
// It answers whether the span is kept, and whether the id is taken (by
// another machine's span).
var seeSQL = postgres.WithTables(`
WITH old AS (
    DELETE FROM %[1]s
     WHERE tenant_id = @tenant AND account_id = @account::uuid AND location = @location
       AND on_to < now() - @kept::double precision * interval '1 second'
), seen AS (
    UPDATE %[1]s SET on_to = greatest(on_to, now())
     WHERE tenant_id = @tenant AND id = @id::uuid AND account_id = @account::uuid AND location = @location
    RETURNING 1
), born AS (
    INSERT INTO %[1]s (tenant_id, id, account_id, location, on_from, on_to)
    SELECT @tenant, @id::uuid, @account::uuid, @location, now(), now()
     WHERE NOT EXISTS (SELECT 1 FROM seen)
       AND (SELECT count(*) FROM (SELECT 1 FROM %[1]s WHERE tenant_id = @tenant AND account_id = @account::uuid
                                  LIMIT @bound) x) < @bound
    ON CONFLICT (tenant_id, id) DO NOTHING
    RETURNING 1
)
SELECT EXISTS (SELECT 1 FROM seen) OR EXISTS (SELECT 1 FROM born),
       EXISTS (SELECT 1 FROM %[1]s WHERE tenant_id = @tenant AND id = @id::uuid)`, postgres.TableKioskPresence)

// onLineSQL is a machine's spans overlapping @from..@to.
var onLineSQL = postgres.WithTables(`
SELECT on_from, on_to FROM %s
 WHERE tenant_id = @tenant AND account_id = @account::uuid AND location = @location
   AND on_to >= @from AND on_from <= @to
 ORDER BY on_from LIMIT @limit`, postgres.TableKioskPresence)

// SeeOnLine implements storage.Presence.
func (s *Store) SeeOnLine(ctx context.Context, t storage.Tenant, caller storage.Caller, id string) error {
	if err := machine(caller); err != nil {
		return err
	}
	var kept, taken bool
	err := s.db.Pool.QueryRow(ctx, seeSQL, pgx.StrictNamedArgs{"tenant": string(t), "id": id, "account": caller.User,
		"location": caller.Kiosk, "kept": schemas.MaxOfflineBehind.Seconds(), "bound": schemas.MaxPresenceSpans}).Scan(&kept, &taken)
	switch {
	case err != nil:
		return postgres.Interpret(err, t)
	case kept:
		return nil
	case taken:
		return errs.Errorf(errs.KindInvalid, schemas.CodePresenceRefused, "span %s is another machine's", id).With("id", id)
	}
	return errs.Errorf(errs.KindInvalid, schemas.CodePresenceRefused,
		"the account's machines keep %d spans of presence already: no new one until the oldest go", schemas.MaxPresenceSpans).With("id", id)
}

// OnLine implements storage.Presence.
func (s *Store) OnLine(ctx context.Context, t storage.Tenant, caller storage.Caller, from, to time.Time) ([]storage.PresenceSpan, error) {
	if err := machine(caller); err != nil {
		return nil, err
	}
	rows, err := s.db.Pool.Query(ctx, onLineSQL, pgx.StrictNamedArgs{"tenant": string(t), "account": caller.User,
		"location": caller.Kiosk, "from": from, "to": to, "limit": schemas.MaxPresenceAnswered})
	if err != nil {
		return nil, postgres.Interpret(err, t)
	}
	spans, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (storage.PresenceSpan, error) {
		var p storage.PresenceSpan
		err := r.Scan(&p.From, &p.To)
		p.From, p.To = p.From.UTC(), p.To.UTC()
		return p, err
	})
	if err != nil {
		return nil, postgres.Interpret(err, t)
	}
	return spans, nil
}

// machine refuses a caller that names no account: a machine's presence is
// its sign-in's.
func machine(caller storage.Caller) error {
	if caller.Account() == "" {
		return errs.Errorf(errs.KindInvalid, schemas.CodeValidation,
			"a machine's presence is its sign-in's: the call names no user by id (%s)", schemas.HeaderUserID)
	}
	return nil
}
