package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	storage "github.com/checkoutlock/circulation-storage"
	"github.com/checkoutlock/circulation-storage/locksql"
)

// Locks implements storage.LockService.
type Locks struct {
	db *DB
}

var _ storage.LockService = (*Locks)(nil)

// NewLocks returns the lock service.
func NewLocks(db *DB) *Locks { return &Locks{db: db} }

// holderSQL reads the live lock that made an acquisition fail, for the
// answer's holder information, with the time it has left by the database's
// clock.
const holderSQL = `
SELECT expires_at, ceil(extract(epoch FROM expires_at - clock_timestamp()) * 1000)::bigint
  FROM %[1]s
 WHERE user_id = $1 AND expires_at > now()`

// Acquire implements storage.LockService.
func (s *Locks) Acquire(ctx context.Context, t storage.Tenant, userID, lockID string, ttl time.Duration) (storage.Lock, storage.AcquireOutcome, error) {
	tbl := table(t, "check_out_lock")
	// The loop only repeats when the holder vanished between the failed insert
	// and the holder read: the lock is free, so try again. Three rounds are
	// plenty; after them the patron's lock is changing hands too fast to
	// report a holder, and "held" is the truthful answer.
	for range 3 {
		var l storage.Lock
		var inserted, fresh bool
		err := scanLock(s.db.pool.QueryRow(ctx, fmt.Sprintf(locksql.Acquire, tbl), userID, ttl.Milliseconds(), nullable(lockID)),
			&l, &inserted, &fresh)
		switch {
		case err == nil && inserted:
			return l, storage.Acquired, nil
		case err == nil && fresh:
			return l, storage.TookOverExpired, nil
		case err == nil:
			return l, storage.Renewed, nil
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return storage.Lock{}, 0, interpretAcquire(err, t)
		}
		var expiresAt time.Time
		var remainingMs int64
		err = s.db.pool.QueryRow(ctx, fmt.Sprintf(holderSQL, tbl), userID).Scan(&expiresAt, &remainingMs)
		if errors.Is(err, pgx.ErrNoRows) {
			continue
		}
		if err != nil {
			return storage.Lock{}, 0, interpret(err, t)
		}
		return storage.Lock{}, 0, storage.LockHeld(userID, expiresAt, time.Duration(remainingMs)*time.Millisecond)
	}
	return storage.Lock{}, 0, storage.LockHeld(userID, time.Time{}, 0)
}

// interpretAcquire is interpret, naming a lock id already used for another
// patron's lock.
func interpretAcquire(err error, t storage.Tenant) error {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == sqlstateUniqueViolation && pgErr.ConstraintName == "check_out_lock_pkey" {
		e := storage.Errorf(storage.KindConflict, storage.CodeConflict, "Lock id is already used by another patron's lock")
		e.Err = err
		return e
	}
	return interpret(err, t)
}

// Get implements storage.LockService.
func (s *Locks) Get(ctx context.Context, t storage.Tenant, id string) (storage.Lock, error) {
	q := fmt.Sprintf(`SELECT `+locksql.Columns+` FROM %s WHERE id = $1 AND expires_at > now()`, table(t, "check_out_lock"))
	var l storage.Lock
	err := scanLock(s.db.pool.QueryRow(ctx, q, id), &l)
	if errors.Is(err, pgx.ErrNoRows) {
		return storage.Lock{}, storage.NotFound("Lock", id)
	}
	if err != nil {
		return storage.Lock{}, interpret(err, t)
	}
	return l, nil
}

// List implements storage.LockService. Expired locks are never listed.
func (s *Locks) List(ctx context.Context, t storage.Tenant, f storage.LockFilter) ([]storage.Lock, int, error) {
	tbl := table(t, "check_out_lock")
	var userID *string
	if f.UserID != "" {
		userID = &f.UserID
	}
	where := `expires_at > now() AND ($1::uuid IS NULL OR user_id = $1::uuid)`
	locks := []storage.Lock{}
	total, err := page(ctx, s.db.pool, t,
		fmt.Sprintf(`SELECT `+locksql.Columns+`, count(*) OVER () FROM %s WHERE %s ORDER BY creation_date, id OFFSET $2 LIMIT $3`, tbl, where),
		fmt.Sprintf(`SELECT count(*) FROM %s WHERE %s`, tbl, where),
		[]any{userID}, 1, f.Offset, f.Limit,
		func(rows pgx.Rows) (int, error) {
			var l storage.Lock
			var total int
			if err := scanLock(rows, &l, &total); err != nil {
				return 0, err
			}
			locks = append(locks, l)
			return total, nil
		})
	if err != nil {
		return nil, 0, err
	}
	return locks, total, nil
}

// Release implements storage.LockService. It deletes the row whatever its
// expiry, so an expired lock is cleaned up, but only a live one counts as
// released: for the client an expired lock is the same as none.
func (s *Locks) Release(ctx context.Context, t storage.Tenant, id string) error {
	q := fmt.Sprintf(locksql.Release, table(t, "check_out_lock"), table(t, "check_out_lock_waiter"))
	var live, notified bool
	err := s.db.pool.QueryRow(ctx, q, id, string(t)).Scan(&live, &notified)
	if errors.Is(err, pgx.ErrNoRows) || (err == nil && !live) {
		return storage.NotFound("Lock", id)
	}
	return interpret(err, t)
}

// Watch implements storage.LockService.
func (s *Locks) Watch(ctx context.Context, t storage.Tenant, userID string, d time.Duration) error {
	_, err := s.db.pool.Exec(ctx, fmt.Sprintf(locksql.Watch, table(t, "check_out_lock_waiter")), userID, d.Milliseconds())
	return interpret(err, t)
}

// scanLock scans locksql.Columns, then any extra columns into extra.
func scanLock(row pgx.Row, l *storage.Lock, extra ...any) error {
	var ttlMs int64
	dest := append([]any{&l.ID, &l.UserID, &l.CreationDate, &l.ExpiresAt, &ttlMs}, extra...)
	if err := row.Scan(dest...); err != nil {
		return err
	}
	l.TTL = time.Duration(ttlMs) * time.Millisecond
	return nil
}
