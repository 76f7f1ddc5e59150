// Package locks keeps the check-out locks on PostgreSQL: acquiring
// (taking over an expired lock), reading, listing, releasing and watching
// a patron's lock, and the lock history. The statements that carry the
// lock's guarantees are package locksql's; the pool they run on, with its
// own synchronous_commit, is package postgres's (DB.LockPool).
package locks

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"strings"
	"time"

	"github.com/checkoutlock/circulation-storage/internal/postgres"
	"github.com/checkoutlock/schemas/errs"
	"github.com/google/uuid"
	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	storage "github.com/checkoutlock/circulation-storage"
	"github.com/checkoutlock/circulation-storage/internal/recordstore"
	"github.com/checkoutlock/circulation-storage/locksql"
	"github.com/checkoutlock/schemas"
)

// Locks implements storage.LockService.
type Locks struct {
	db     *postgres.DB
	events storage.EventObserver
	// History says whether events are recorded; off, Record does nothing.
	history bool
	// Released, when set, is told of a release that someone waits for, at
	// once (see OnRelease).
	released func(t storage.Tenant, userID string)
}

// locksql's statements on the shared tables: the same text for every
// tenant, so each connection prepares them once.
var (
	acquireSQL = locksql.NewNamed(postgres.WithTables(locksql.Acquire, postgres.TableLock), "user_id", "ttl_ms", "lock_id", "holder", "tenant")
	releaseSQL = locksql.NewNamed(postgres.WithTables(locksql.Release, postgres.TableLock, postgres.TableLockWaiter), "lock_id", "tenant", "by_user", "by_module", "others")
	watchSQL   = postgres.WithTables(locksql.Watch, postgres.TableLockWaiter)
)

var _ storage.LockService = (*Locks)(nil)

// NewLocks returns the lock service, configured by opts (LockHistory,
// OnRelease); without LockHistory it records the lock history and tells
// no one of its events.
func NewLocks(db *postgres.DB, opts ...postgres.Option) *Locks {
	o := postgres.ApplyOptions(opts)
	return &Locks{db: db, events: o.Events, history: o.History, released: o.Released}
}

// holderSQL reads the live lock that made an acquisition fail, for the
// answer's holder information, with the time it has left by the database's
// clock. Parameters: $1 user id, $2 the tenant.
var holderSQL = postgres.WithTables(`
SELECT expires_at, ceil(extract(epoch FROM expires_at - clock_timestamp()) * 1000)::bigint, holder
  FROM %[1]s
 WHERE tenant_id = $2 AND user_id = $1 AND expires_at > now()`, postgres.TableLock)

// Acquire implements storage.LockService.
func (s *Locks) Acquire(ctx context.Context, t storage.Tenant, userID, lockID string, ttl time.Duration, holder storage.Holder) (storage.Lock, storage.AcquireOutcome, error) {
	holderJSON := postgres.HolderValue(holder)
	// The id is chosen before the statement runs, never by it: the pool
	// runs the statement again when its connection died (its answer lost,
	// perhaps after it committed), and the second run must name the lock
	// the first may have taken, to find it the caller's own (renewed).
	if lockID == "" {
		lockID = uuid.NewString()
	}
	// The loop only repeats when the holder vanished between the failed insert
	// and the holder read: the lock is free, so try again. Three rounds are
	// plenty; after them the patron's lock is changing hands too fast to
	// report a holder, and "held" is the truthful answer.
	for range 3 {
		var l storage.Lock
		var inserted, fresh bool
		var previous *previousLock
		var ttlMs int64
		err := s.db.LockPool.QueryRow(ctx, acquireSQL.SQL, acquireSQL.Bind(pgx.StrictNamedArgs{
			"tenant": string(t), "user_id": userID, "lock_id": postgres.Nullable(lockID), "ttl_ms": ttl.Milliseconds(), "holder": holderJSON})).
			Scan(&l.ID, &l.UserID, &l.CreationDate, &l.ExpiresAt, &ttlMs, &inserted, &fresh, &previous)
		l.TTL, l.Holder = time.Duration(ttlMs)*time.Millisecond, holder
		switch {
		case err == nil && inserted:
			return l, storage.Acquired, nil
		case err == nil && fresh:
			if previous != nil {
				_ = s.Record(ctx, t, storage.LockEvent{Type: storage.EventTakenOver, UserID: userID,
					LockID: previous.LockID, Holder: previous.Holder, By: holder})
			}
			return l, storage.TookOverExpired, nil
		case err == nil:
			return l, storage.Renewed, nil
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return storage.Lock{}, 0, interpretAcquire(err, t)
		}
		var expiresAt time.Time
		var remainingMs int64
		var held storage.Holder
		err = s.db.Pool.QueryRow(ctx, holderSQL, userID, string(t)).Scan(&expiresAt, &remainingMs, holderScanner{&held})
		if errors.Is(err, pgx.ErrNoRows) {
			continue
		}
		if err != nil {
			return storage.Lock{}, 0, postgres.Interpret(err, t)
		}
		return storage.Lock{}, 0, storage.LockHeld(userID, expiresAt, time.Duration(remainingMs)*time.Millisecond, held)
	}
	return storage.Lock{}, 0, storage.LockHeld(userID, time.Time{}, 0, storage.Holder{})
}

// interpretAcquire is interpret, naming a lock id already used for another
// patron's lock.
func interpretAcquire(err error, t storage.Tenant) error {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == pgerrcode.UniqueViolation && pgErr.ConstraintName == "check_out_lock_pkey" {
		e := errs.Errorf(errs.KindConflict, schemas.CodeConflict, "Lock id is already used by another patron's lock")
		e.Err = err
		return e
	}
	return postgres.Interpret(err, t)
}

// Get implements storage.LockService.
func (s *Locks) Get(ctx context.Context, t storage.Tenant, id string) (storage.Lock, error) {
	q := postgres.WithTables(`SELECT `+locksql.Columns+` FROM %s WHERE tenant_id = $2 AND id = $1 AND expires_at > now()`, postgres.TableLock)
	var l storage.Lock
	err := scanLock(s.db.Pool.QueryRow(ctx, q, id, string(t)), &l)
	if errors.Is(err, pgx.ErrNoRows) {
		return storage.Lock{}, errs.NotFound("Lock", id)
	}
	if err != nil {
		return storage.Lock{}, postgres.Interpret(err, t)
	}
	return l, nil
}

// List implements storage.LockService. Expired locks are never listed.
func (s *Locks) List(ctx context.Context, t storage.Tenant, f storage.LockFilter) ([]storage.Lock, int, error) {
	var userID *string
	if f.UserID != "" {
		userID = &f.UserID
	}
	where := `tenant_id = @tenant AND expires_at > now() AND (@user::uuid IS NULL OR user_id = @user::uuid)`
	locks := []storage.Lock{}
	total, err := postgres.Page(ctx, s.db.Pool, t,
		postgres.WithTables(`SELECT `+locksql.Columns+`, count(*) OVER () FROM %s WHERE `+where+` ORDER BY creation_date, id OFFSET @offset LIMIT @limit`, postgres.TableLock),
		postgres.WithTables(`SELECT count(*) FROM %s WHERE `+where, postgres.TableLock),
		pgx.StrictNamedArgs{"tenant": string(t), "user": userID}, nil, f.Offset, f.Limit,
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
// released: for the client an expired lock is the same as none. A live
// lock by does not own is deleted only with others.
//
// The history learns of a lock its holder released too late (expired while
// held) and of a live lock released by someone other than its owner.
func (s *Locks) Release(ctx context.Context, t storage.Tenant, id string, by storage.Caller, others bool) error {
	var live, notified bool
	var holderJSON []byte
	var acquiredBy, acquiredByModule *string
	var userID string
	err := s.db.LockPool.QueryRow(ctx, releaseSQL.SQL, releaseSQL.Bind(pgx.StrictNamedArgs{
		"tenant": string(t), "lock_id": id, "by_user": postgres.Nullable(by.User), "by_module": postgres.Nullable(by.Module), "others": others})).
		Scan(&live, &holderJSON, &acquiredBy, &acquiredByModule, &notified, &userID)
	if errors.Is(err, pgx.ErrNoRows) {
		return s.notReleased(ctx, t, id)
	}
	if err != nil {
		return postgres.Interpret(err, t)
	}
	// The holder is decoded only for the history.
	holder := func() storage.Holder {
		var h storage.Holder
		if len(holderJSON) > 0 {
			_ = holderScanner{&h}.Scan(holderJSON)
		}
		return h
	}
	owner := storage.Holder{AcquiredBy: postgres.Deref(acquiredBy), AcquiredByModule: postgres.Deref(acquiredByModule)}
	switch {
	case !live:
		_ = s.Record(ctx, t, storage.LockEvent{Type: storage.EventExpired, UserID: userID, LockID: id, Holder: holder(),
			By: by.Holder()})
		return errs.NotFound("Lock", id)
	case !owner.OwnedBy(by):
		_ = s.Record(ctx, t, storage.LockEvent{Type: storage.EventReleasedByOther, UserID: userID, LockID: id, Holder: holder(),
			By: by.Holder()})
	}
	if notified && s.released != nil {
		s.released(t, userID)
	}
	return nil
}

// notReleased says why a release deleted nothing: no such lock (404), or a
// live lock the caller does not own and may not release (403).
func (s *Locks) notReleased(ctx context.Context, t storage.Tenant, id string) error {
	var live bool
	err := s.db.Pool.QueryRow(ctx, postgres.WithTables(`SELECT expires_at > now() FROM %s WHERE tenant_id = $2 AND id = $1`, postgres.TableLock), id, string(t)).Scan(&live)
	switch {
	case errors.Is(err, pgx.ErrNoRows) || (err == nil && !live):
		return errs.NotFound("Lock", id)
	case err != nil:
		return postgres.Interpret(err, t)
	}
	return errs.Errorf(errs.KindForbidden, schemas.CodeForbidden,
		"Lock %s is held by someone else: only its holder may release it, or a caller holding %s", id, schemas.PermissionReleaseOthers).
		With("lockId", id).With("permission", schemas.PermissionReleaseOthers)
}

// recordSQL adds an event to the history.
var recordSQL = locksql.NewNamed(postgres.WithTables(`INSERT INTO %s (tenant_id, type, user_id, lock_id, holder, by_whom, waited_ms)
	VALUES (@tenant, @type, @user_id, @lock_id, @holder::jsonb, @by_whom::jsonb, @waited_ms)`, postgres.TableLockEvent),
	"tenant", "type", "user_id", "lock_id", "holder", "by_whom", "waited_ms")

// Record implements storage.LockService. It is best effort: the request
// it explains goes on whatever happens to the record, and a lost record is
// reported to the observer.
func (s *Locks) Record(ctx context.Context, t storage.Tenant, e storage.LockEvent) error {
	if !s.history {
		return nil
	}
	var lockID any
	if e.LockID != "" {
		lockID = e.LockID
	}
	var waited any
	if e.WaitedMs > 0 {
		waited = e.WaitedMs
	}
	_, err := s.db.Pool.Exec(ctx, recordSQL.SQL, recordSQL.Bind(pgx.StrictNamedArgs{
		"tenant": string(t), "type": string(e.Type), "user_id": e.UserID, "lock_id": lockID,
		"holder": postgres.HolderValue(e.Holder), "by_whom": postgres.HolderValue(e.By), "waited_ms": waited}))
	if err != nil {
		err = postgres.Interpret(err, t)
		s.events.EventLost(err)
		return err
	}
	s.events.Event(e.Type)
	return nil
}

// History implements storage.LockService.
func (s *Locks) History(ctx context.Context, t storage.Tenant, f storage.HistoryFilter) ([]storage.LockEvent, int, error) {
	where := `tenant_id = @tenant AND (@user::uuid IS NULL OR user_id = @user::uuid)
	          AND (@from::timestamptz IS NULL OR occurred_at >= @from) AND (@to::timestamptz IS NULL OR occurred_at < @to)`
	args := pgx.StrictNamedArgs{"tenant": string(t), "user": postgres.Nullable(f.UserID), "from": nullableTime(f.From), "to": nullableTime(f.To)}
	order := "occurred_at DESC, id DESC"
	var sortArgs pgx.StrictNamedArgs
	if f.Query != nil {
		// The query reads each event as the history answers it, a
		// document; its type, patron and lock from their columns.
		cond, condArgs, orderBy, sArgs, err := recordstore.Condition(f.Query, f.QueryText,
			map[string]string{"type": "type", "userId": "user_id", "lockId": "lock_id"}, "userId", "lockId")
		if err != nil {
			return nil, 0, err
		}
		where += " AND " + cond
		maps.Copy(args, condArgs)
		if len(orderBy) > 0 {
			order, sortArgs = strings.Join(orderBy, ", ")+", id DESC", sArgs
		}
	}
	events := []storage.LockEvent{}
	total, err := postgres.Page(ctx, s.db.Pool, t,
		postgres.WithTables(`SELECT id, type, occurred_at, user_id, coalesce(lock_id::text, '') AS lock_id, holder, by_whom,
		                   coalesce(waited_ms, 0) AS waited_ms, coalesce(loan_id::text, '') AS loan_id, broken_rules, count(*) OVER () AS total
		               FROM (`+historyDocs+`) e WHERE `+where+` ORDER BY `+order+` OFFSET @offset LIMIT @limit`, postgres.TableLockEvent),
		postgres.WithTables(`SELECT count(*) FROM (`+historyDocs+`) e WHERE `+where, postgres.TableLockEvent),
		args, sortArgs, f.Offset, f.Limit,
		func(rows pgx.Rows) (int, error) {
			r, err := pgx.RowToStructByName[historyRow](rows)
			if err != nil {
				return 0, err
			}
			events = append(events, storage.LockEvent{ID: r.ID, Type: storage.EventType(r.Type), OccurredAt: r.OccurredAt,
				UserID: r.UserID, LockID: r.LockID, Holder: storage.Holder(r.Holder), By: storage.Holder(r.By), WaitedMs: r.WaitedMs,
				LoanID: r.LoanID, BrokenRules: r.BrokenRules})
			return r.Total, nil
		})
	if err != nil {
		return nil, 0, err
	}
	return events, total, nil
}

// historyDocs is the lock history's rows, each with the event as the
// history answers it (schemas/checkout-lock-history.json), the document a
// CQL query reads: its one table a %s.
const historyDocs = `SELECT *, jsonb_strip_nulls(jsonb_build_object('id', id, 'type', type,
    'occurredAt', to_char(occurred_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'), 'userId', user_id, 'lockId', lock_id,
    'holder', holder, 'by', by_whom, 'waitedMs', waited_ms, 'loanId', loan_id, 'brokenRules', to_jsonb(broken_rules))) AS jsonb FROM %s`

// historyRow is a row of History's page, read by column name.
type historyRow struct {
	ID         int64      `db:"id"`
	Type       string     `db:"type"`
	OccurredAt time.Time  `db:"occurred_at"`
	UserID     string     `db:"user_id"`
	LockID     string     `db:"lock_id"`
	Holder     jsonHolder `db:"holder"`
	By         jsonHolder `db:"by_whom"`
	WaitedMs   int        `db:"waited_ms"`
	// LoanID and BrokenRules: a loan lent offline, and what it broke.
	LoanID      string   `db:"loan_id"`
	BrokenRules []string `db:"broken_rules"`
	// Total is the number of all the events matching (page).
	Total int `db:"total"`
}

// jsonHolder is a storage.Holder read from its JSON column as
// holderScanner reads it.
type jsonHolder storage.Holder

// Scan implements sql.Scanner.
func (h *jsonHolder) Scan(src any) error { return holderScanner{(*storage.Holder)(h)}.Scan(src) }

// previousLock is what a takeover replaced (locksql.Acquire's previous).
type previousLock struct {
	LockID string         `json:"lockId"`
	Holder storage.Holder `json:"holder"`
}

// holderScanner scans a holder column, NULL as the zero holder.
type holderScanner struct{ h *storage.Holder }

func (s holderScanner) Scan(src any) error {
	*s.h = storage.Holder{}
	var b []byte
	switch v := src.(type) {
	case nil:
		return nil
	case string:
		b = []byte(v)
	case []byte:
		b = v
	default:
		return fmt.Errorf("holder: unexpected %T", src)
	}
	return json.Unmarshal(b, s.h)
}

func nullableTime(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t
}

// Watch implements storage.LockService.
func (s *Locks) Watch(ctx context.Context, t storage.Tenant, userID string, d time.Duration) error {
	_, err := s.db.LockPool.Exec(ctx, watchSQL, userID, d.Milliseconds(), string(t))
	return postgres.Interpret(err, t)
}

// scanLock scans locksql.Columns, then any extra columns into extra.
func scanLock(row pgx.Row, l *storage.Lock, extra ...any) error {
	var ttlMs int64
	dest := append([]any{&l.ID, &l.UserID, &l.CreationDate, &l.ExpiresAt, &ttlMs, holderScanner{&l.Holder}}, extra...)
	if err := row.Scan(dest...); err != nil {
		return err
	}
	l.TTL = time.Duration(ttlMs) * time.Millisecond
	return nil
}
