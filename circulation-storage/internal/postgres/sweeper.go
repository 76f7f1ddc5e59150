package postgres

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/checkoutlock/schemas/errs"

	"github.com/jackc/pgx/v5"

	storage "github.com/checkoutlock/circulation-storage"
)

// Sweeper deletes expired check-out locks of every tenant in bounded batches,
// so the lock table stays small, and the expired registrations of waiters. Correctness never depends on it: an expired
// lock already counts as absent everywhere, and acquiring takes one over.
type Sweeper struct {
	db        *DB
	logger    *slog.Logger
	batchSize int
	// history says whether swept locks are recorded as expired while held;
	// retention and maxEvents bound each tenant's history.
	history   bool
	retention time.Duration
	maxEvents int
	// onDeleted is told how many expired locks each batch removed.
	onDeleted func(n int)
	// onPass is told of every pass Run makes.
	onPass func(d time.Duration, result string)
}

// SweeperConfig is how a Sweeper sweeps.
type SweeperConfig struct {
	// BatchSize is how many expired locks one statement deletes.
	BatchSize int
	// OnDeleted, when set, is told how many expired locks each batch
	// removed.
	OnDeleted func(n int)
	// OnPass, when set, is told of every pass Run makes: how long it took
	// and its result (swept, skipped: another instance was sweeping, or
	// failed).
	OnPass func(d time.Duration, result string)
	// History says whether swept locks are recorded in the lock history as
	// expired while held; Retention and MaxEvents bound each tenant's
	// history (defaults 7 days and 100000 events).
	History   bool
	Retention time.Duration
	MaxEvents int
}

// NewSweeper returns a sweeper.
func NewSweeper(db *DB, logger *slog.Logger, cfg SweeperConfig) *Sweeper {
	if cfg.OnDeleted == nil {
		cfg.OnDeleted = func(int) {}
	}
	if cfg.OnPass == nil {
		cfg.OnPass = func(time.Duration, string) {}
	}
	return &Sweeper{db: db, logger: logger, batchSize: max(1, cfg.BatchSize), onDeleted: cfg.OnDeleted, onPass: cfg.OnPass,
		history: cfg.History, retention: cmp.Or(cfg.Retention, 7*24*time.Hour), maxEvents: cmp.Or(cfg.MaxEvents, 100000)}
}

// tenantSchemasSQL finds every tenant schema that has a lock table.
const tenantSchemasSQL = `
SELECT n.nspname
  FROM pg_namespace n
  JOIN pg_class c ON c.relnamespace = n.oid
 WHERE c.relname = 'check_out_lock' AND c.relkind = 'r'
   AND n.nspname LIKE '%\_mod\_circulation\_storage'
 ORDER BY n.nspname`

// sweepWaitersSQL deletes the registrations of waiters that have lapsed.
const sweepWaitersSQL = `DELETE FROM %s WHERE expires_at <= now()`

// sweepSQL deletes one batch. SKIP LOCKED keeps concurrent sweepers (one per
// instance) out of each other's way, and the outer expiry test is re-checked
// on the newest row version, so a lock taken over (renewed) while the batch
// was being chosen is never deleted.
const sweepSQL = `
DELETE FROM %[1]s
 WHERE id IN (SELECT id FROM %[1]s WHERE expires_at <= now() ORDER BY expires_at LIMIT $1 FOR UPDATE SKIP LOCKED)
   AND expires_at <= now()`

// sweepRecordSQL is sweepSQL recording each lock it deletes as expired
// while held (no one released it) in the lock history, in one statement.
const sweepRecordSQL = `
WITH swept AS (` + sweepSQL + `
RETURNING id, user_id, holder, expires_at)
INSERT INTO %[2]s (type, occurred_at, user_id, lock_id, holder)
SELECT 'expired', expires_at, user_id, id, holder FROM swept`

// trimSQL keeps a tenant's history within its retention and size. Parameters:
// $1 retention in seconds, $2 the number of events kept.
const trimSQL = `
DELETE FROM %[1]s
 WHERE occurred_at < now() - $1::double precision * interval '1 second'
    OR id <= (SELECT id FROM %[1]s ORDER BY id DESC OFFSET $2 LIMIT 1)`

// Run sweeps every interval until ctx is done.
func (s *Sweeper) Run(ctx context.Context, interval time.Duration) {
	ticker := time.NewTicker(interval)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
			start := time.Now()
			_, swept, err := s.TrySweepOnce(ctx)
			result := "swept"
			switch {
			case err != nil && ctx.Err() == nil:
				result = "failed"
				s.logger.WarnContext(ctx, "lock sweep failed", slog.Any("error", err))
			case !swept:
				result = "skipped"
			}
			if ctx.Err() == nil {
				s.onPass(time.Since(start), result)
			}
		}
	}
}

// sweeperLock is the advisory lock a pass holds, so that of several
// instances on one database one sweeps at a time: the others' passes in
// the meantime are skipped, not queued.
const sweeperLock int64 = 0x636f6c5f73776565 // "col_swee"

// TrySweepOnce is SweepOnce unless another instance is sweeping this
// database right now: then it skips the pass (swept false) and touches no
// tenant.
func (s *Sweeper) TrySweepOnce(ctx context.Context) (deleted int, swept bool, err error) {
	c, err := s.db.pool.Acquire(ctx)
	if err != nil {
		return 0, false, interpret(err, "")
	}
	defer c.Release()
	if err := c.QueryRow(ctx, `SELECT pg_try_advisory_lock($1)`, sweeperLock).Scan(&swept); err != nil {
		return 0, false, interpret(err, "")
	}
	if !swept {
		return 0, false, nil
	}
	defer func() {
		// The lock is the session's: unlocked here, or with the
		// connection if it is gone.
		if _, err := c.Exec(context.WithoutCancel(ctx), `SELECT pg_advisory_unlock($1)`, sweeperLock); err != nil {
			_ = c.Conn().Close(context.WithoutCancel(ctx)) // closing ends the session, and the lock with it
		}
	}()
	deleted, err = s.SweepOnce(ctx)
	return deleted, true, err
}

// SweepOnce deletes every lock that has expired, in every tenant, and returns
// how many it deleted.
func (s *Sweeper) SweepOnce(ctx context.Context) (int, error) {
	rows, err := s.db.pool.Query(ctx, tenantSchemasSQL)
	if err != nil {
		return 0, interpret(err, "")
	}
	schemas, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return 0, interpret(err, "")
	}
	total := 0
	var failed []error
	for _, schema := range schemas {
		n, err := s.sweepTenant(ctx, schema)
		total += n
		if err != nil {
			if ctx.Err() != nil {
				return total, ctx.Err()
			}
			// One tenant's failure (a table made unreadable, a lock
			// timeout) does not keep the others' locks from expiring.
			s.logger.WarnContext(ctx, "lock sweep of a tenant failed; going on with the others",
				slog.String("schema", schema), slog.Any("error", err))
			failed = append(failed, err)
		}
	}
	if total > 0 {
		s.logger.DebugContext(ctx, "expired locks swept", slog.Int("deleted", total))
	}
	if len(failed) > 0 {
		return total, fmt.Errorf("%d of %d tenants not swept: %w", len(failed), len(schemas), errors.Join(failed...))
	}
	return total, nil
}

// sweepTenant deletes the expired waiters and locks of the tenant whose
// schema is schema and trims its history; it returns how many locks it
// deleted. A tenant purged since the listing is not an error.
func (s *Sweeper) sweepTenant(ctx context.Context, schema string) (int, error) {
	t := storage.Tenant(strings.TrimSuffix(schema, storage.Tenant("").Schema()))
	gone := func(err error) bool { return errs.IsKind(interpret(err, t), errs.KindBadRequest) }
	if _, err := s.db.pool.Exec(ctx, withTables(sweepWaitersSQL, t, tableLockWaiter)); err != nil && !gone(err) {
		return 0, fmt.Errorf("sweep %s waiters: %w", schema, interpret(err, ""))
	}
	q := withTables(sweepSQL, t, tableLock)
	if s.history {
		q = withTables(sweepRecordSQL, t, tableLock, tableLockEvent)
	}
	if _, err := s.db.pool.Exec(ctx, withTables(trimSQL, t, tableLockEvent), s.retention.Seconds(), s.maxEvents); err != nil && !gone(err) {
		return 0, fmt.Errorf("trim %s history: %w", schema, interpret(err, ""))
	}
	total := 0
	for {
		tag, err := s.db.pool.Exec(ctx, q, s.batchSize)
		if err != nil {
			if gone(err) {
				return total, nil
			}
			return total, fmt.Errorf("sweep %s: %w", schema, interpret(err, ""))
		}
		n := int(tag.RowsAffected())
		total += n
		if n > 0 {
			s.onDeleted(n)
		}
		if n < s.batchSize {
			return total, nil
		}
	}
}
