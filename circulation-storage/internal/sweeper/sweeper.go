// Package sweeper deletes what has outlived its use, on PostgreSQL, on
// one instance at a time: expired locks and their waiters, the lock
// history past its retention, stale sign-in counts, ended sessions and
// their refresh tokens, the writes' ids past the day they are kept; and
// it closes the requests past their request
// expiration date (requests.Expire) and those left on a hold shelf past
// their date (requests.ExpireHoldShelves).
package sweeper

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"

	storage "github.com/checkoutlock/circulation-storage"
	"github.com/checkoutlock/circulation-storage/internal/lending"
	"github.com/checkoutlock/circulation-storage/internal/postgres"
	"github.com/checkoutlock/circulation-storage/internal/requests"
	"github.com/checkoutlock/circulation-storage/login"
)

// Sweeper deletes expired check-out locks of every tenant in bounded
// batches, so the lock table stays small, and the expired registrations of
// waiters, and trims the lock history. Correctness never depends on it: an
// expired lock already counts as absent everywhere, and acquiring takes
// one over.
type Sweeper struct {
	db        *postgres.DB
	logger    *slog.Logger
	batchSize int
	// History says whether swept locks are recorded as expired while held;
	// retention and maxEvents bound each tenant's history.
	history   bool
	retention time.Duration
	maxEvents int
	// knownFor is how long the login's marks of sign-ins are kept, and
	// loginWindow how long its counts of wrong secrets.
	knownFor, loginWindow time.Duration
	// onDeleted is told how many expired locks each batch removed.
	onDeleted func(n int)
	// onPass is told of every pass Run makes, onWork of each kind of
	// work of a pass.
	onPass func(d time.Duration, result string)
	onWork func(work string, d time.Duration, err error)
	// trimmed is the newest event when the history was last trimmed.
	trimmed atomic.Int64
	// passTimeout is how long the connection holding the sweeper's lock
	// may stay idle before PostgreSQL ends its session, and the lock
	// with it (sweepPassTimeout; shorter in tests).
	passTimeout time.Duration
}

// sweepPassTimeout bounds how long a pass holds the sweeper's lock
// without using the connection that holds it: a process frozen in the
// middle of a pass (paused, hung) lets the other instances sweep again
// after it. A pass takes milliseconds; one that took longer would only
// let another instance sweep beside it, which is harmless.
const sweepPassTimeout = 30 * time.Second

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
	// OnWork, when set, is told of each kind of work of a pass (Work):
	// how long it took, and its failure (nil when it did all it found to
	// do). A request past its expiration date, or its hold shelf date,
	// that could not be closed is told of as WorkExpiredRequest, or
	// WorkHoldShelfRequest, with no time.
	OnWork func(work string, d time.Duration, err error)
	// History says whether swept locks are recorded in the lock history as
	// expired while held; Retention and MaxEvents bound each tenant's
	// history (defaults 7 days and 100000 events).
	History   bool
	Retention time.Duration
	MaxEvents int
	// KnownFor is how long the login remembers that an account signed in
	// from an address (login.Config.KnownFor): the sweeper keeps the
	// marks that long (default 30 days).
	KnownFor time.Duration
	// LoginWindow is the longest window the login counts wrong secrets in
	// (login.Config.FailureWindow): a count is kept until it has passed
	// (default 15 minutes).
	LoginWindow time.Duration
}

// NewSweeper returns a sweeper.
func NewSweeper(db *postgres.DB, logger *slog.Logger, cfg SweeperConfig) *Sweeper {
	if cfg.OnDeleted == nil {
		cfg.OnDeleted = func(int) {}
	}
	if cfg.OnPass == nil {
		cfg.OnPass = func(time.Duration, string) {}
	}
	if cfg.OnWork == nil {
		cfg.OnWork = func(string, time.Duration, error) {}
	}
	return &Sweeper{db: db, logger: logger, batchSize: max(1, cfg.BatchSize), onDeleted: cfg.OnDeleted, onPass: cfg.OnPass, onWork: cfg.OnWork,
		history: cfg.History, retention: cmp.Or(cfg.Retention, 7*24*time.Hour), maxEvents: cmp.Or(cfg.MaxEvents, 100000),
		knownFor: cmp.Or(cfg.KnownFor, 30*24*time.Hour), loginWindow: cmp.Or(cfg.LoginWindow, 15*time.Minute), passTimeout: sweepPassTimeout}
}

// The sweeper's statements work across tenants, each through an index
// that starts with the time it looks for: a pass with nothing expired is a
// handful of index probes, however many tenants there are.
var (
	// sweepWaitersSQL deletes the registrations of waiters that have
	// lapsed.
	sweepWaitersSQL = postgres.WithTables(`DELETE FROM %s WHERE expires_at <= now()`, postgres.TableLockWaiter)
	// sweepLoginSQL deletes what the login keeps past its use, a
	// statement for each table, sent together (sweepLogin): counts whose
	// window (@window, seconds) has passed that lock nothing, have no
	// attempt being checked and mark no sign-in within the sweeper's
	// KnownFor (@known_for); sessions expired or ended a day ago, with
	// their refresh tokens; and expired refresh tokens. A flood of wrong
	// passwords from many addresses leaves rows for its window at most
	// (two an address, the pair's and the address's), and the account's
	// rate count for its minute. A live session
	// keeps its refresh tokens, taken ones included, so that a taken one
	// used again still ends it. Each is a statement of its own: as one
	// statement, two of them its data-modifying WITH queries, they took
	// 120 to 700 ms to delete nothing in a database of 2000 tenants
	// (`make bench BENCH_ONLY=tenants`), where each alone takes about a
	// millisecond.
	sweepLoginSQL = []string{
		postgres.WithTables(`DELETE FROM %s WHERE first_at < now() - @window::double precision * interval '1 second'
   AND (locked_until IS NULL OR locked_until < now())
   AND (checking = 0 OR checking_at < now() - @stale::double precision * interval '1 second')
   AND (succeeded_at IS NULL OR succeeded_at < now() - @known_for::double precision * interval '1 second')`, postgres.TableLoginFailure),
		postgres.WithTables(`DELETE FROM %s WHERE expires_at < now() - interval '1 day' OR ended_at < now() - interval '1 day'`, postgres.TableLoginSession),
		postgres.WithTables(`DELETE FROM %s WHERE expires_at < now()`, postgres.TableRefreshToken),
	}

	// sweepSQL deletes one batch. SKIP LOCKED keeps a sweeper out of the
	// way of a check-out's write that holds a lock's row, and the outer
	// expiry test is re-checked on the newest row version, so a lock taken
	// over (renewed) while the batch was being chosen is never deleted.
	sweepSQL = postgres.WithTables(sweepBatch, postgres.TableLock)

	// sweepRecordSQL is sweepSQL recording each lock it deletes as expired
	// while held (no one released it) in its tenant's lock history, in one
	// statement.
	sweepRecordSQL = postgres.WithTables(`
WITH swept AS (`+sweepBatch+`
RETURNING tenant_id, id, user_id, holder, expires_at)
INSERT INTO %[2]s (tenant_id, type, occurred_at, user_id, lock_id, holder)
SELECT tenant_id, 'expired', expires_at, user_id, id, holder FROM swept`, postgres.TableLock, postgres.TableLockEvent)

	// retainSQL deletes the history older than the retention. Parameter:
	// $1 retention in seconds.
	retainSQL = postgres.WithTables(`DELETE FROM %s WHERE occurred_at < now() - $1::double precision * interval '1 second'`, postgres.TableLockEvent)

	// capSQL keeps each tenant's history within its size, looking only at
	// the tenants that recorded events since the last pass: newer than the
	// event $1. Parameters: $1 the newest event the last pass saw, $2 the
	// number of events a tenant keeps.
	capSQL = postgres.WithTables(`
DELETE FROM %[1]s e
 USING (SELECT t.tenant_id,
               (SELECT x.id FROM %[1]s x WHERE x.tenant_id = t.tenant_id ORDER BY x.id DESC OFFSET $2 LIMIT 1) AS cut
          FROM (SELECT DISTINCT tenant_id FROM %[1]s WHERE id > $1) t) c
 WHERE e.tenant_id = c.tenant_id AND e.id <= c.cut`, postgres.TableLockEvent)

	// forgetWritesSQL deletes a batch of the writes' ids past the time
	// they are kept for (storage.WriteKeptFor). Parameters: $1 that time,
	// in seconds, $2 the batch's size.
	forgetWritesSQL = postgres.WithTables(`
DELETE FROM %[1]s
 WHERE (tenant_id, id) IN (SELECT tenant_id, id FROM %[1]s WHERE written_at < now() - $1::double precision * interval '1 second'
                            ORDER BY written_at LIMIT $2)`, postgres.TableWriteLog)

	// newestEventSQL is the newest event recorded.
	newestEventSQL = postgres.WithTables(`SELECT coalesce(max(id), 0) FROM %s`, postgres.TableLockEvent)
)

// sweepBatch is one batch of expired locks, of any tenant, taking the lock
// table as its fmt argument. Parameter: $1 the batch's size.
const sweepBatch = `
DELETE FROM %[1]s
 WHERE (tenant_id, id) IN (SELECT tenant_id, id FROM %[1]s WHERE expires_at <= now()
                            ORDER BY expires_at LIMIT $1 FOR UPDATE SKIP LOCKED)
   AND expires_at <= now()`

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
				// Each work that failed has said so (SweepOnce).
				result = "failed"
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
	release, swept, err := s.takeSweep(ctx)
	if err != nil || !swept {
		return 0, false, err
	}
	defer release()
	deleted, err = s.SweepOnce(ctx)
	return deleted, true, err
}

// takeSweep takes the sweeper's lock when it is free (postgres.TryLead),
// for passTimeout idle.
func (s *Sweeper) takeSweep(ctx context.Context) (release func(), swept bool, err error) {
	return postgres.TryLead(ctx, s.db.LeadPool, sweeperLock, s.passTimeout)
}

// The kinds of work of a pass, each done on its own (SweepOnce).
const (
	WorkLocks            = "locks"
	WorkWaiters          = "waiters"
	WorkLogin            = "login"
	WorkHistory          = "history"
	WorkWrites           = "writes"
	WorkRequestExpiry    = "request_expiry"
	WorkExpiredRequest   = "expired_request"
	WorkHoldShelf        = "hold_shelf"
	WorkHoldShelfRequest = "hold_shelf_request"
	WorkAnonymize        = "anonymize"
	WorkAgeToLost        = "age_to_lost"
	WorkAgedLoan         = "aged_loan"
	WorkBillAgedToLost   = "bill_aged_to_lost"
	WorkBilledLoan       = "billed_loan"
)

// Works are the kinds of work of a pass, in the order it does them, and
// the failures of one record each: WorkExpiredRequest,
// WorkHoldShelfRequest, WorkAgedLoan, WorkBilledLoan.
var Works = []string{WorkLocks, WorkWaiters, WorkLogin, WorkHistory, WorkWrites, WorkRequestExpiry, WorkHoldShelf,
	WorkAnonymize, WorkAgeToLost, WorkBillAgedToLost, WorkExpiredRequest, WorkHoldShelfRequest, WorkAgedLoan, WorkBilledLoan}

// SweepOnce deletes every lock that has expired, of every tenant, and
// the waiters' registrations that have lapsed, sweeps the login's counts
// and sessions, trims the history, and closes the requests past their
// request expiration date, then those past their hold shelf date; it
// returns how many locks it deleted. Each kind of work runs on its own,
// and each request it closes: one that fails is logged and counted
// (OnWork), the rest is done all the same, and what failed is tried again
// at the next pass. The failures come back joined. The requests' expiry
// comes before the hold shelf's: a request past its date, waiting behind
// one past its hold shelf date, is closed, not handed the item.
func (s *Sweeper) SweepOnce(ctx context.Context) (int, error) {
	var failures []error
	run := func(work string, do func(context.Context) error) {
		start := time.Now()
		err := do(ctx)
		s.onWork(work, time.Since(start), err)
		if err != nil {
			s.logger.WarnContext(ctx, "sweeper: work failed; it is tried again at the next pass", slog.String("work", work), slog.Any("error", err))
			failures = append(failures, fmt.Errorf("%s: %w", work, err))
		}
	}
	total := 0
	run(WorkLocks, func(ctx context.Context) (err error) {
		total, err = s.sweepLocks(ctx)
		return err
	})
	run(WorkWaiters, func(ctx context.Context) error {
		_, err := s.db.Pool.Exec(ctx, sweepWaitersSQL)
		return postgres.Interpret(err, "")
	})
	run(WorkLogin, s.sweepLogin)
	run(WorkHistory, s.trim)
	run(WorkWrites, s.forgetWrites)
	run(WorkRequestExpiry, s.expireRequests)
	run(WorkHoldShelf, s.expireHoldShelves)
	run(WorkAnonymize, s.anonymize)
	run(WorkAgeToLost, func(ctx context.Context) error {
		return s.actOnEach(ctx, WorkAgedLoan, "loan", "overdue long enough to be aged to lost", "aged to lost", lending.AgeToLost)
	})
	run(WorkBillAgedToLost, func(ctx context.Context) error {
		return s.actOnEach(ctx, WorkBilledLoan, "loan", "aged to lost and due to be billed", "billed", lending.BillAgedToLost)
	})
	return total, errors.Join(failures...)
}

// sweepLocks deletes the expired locks, a batch at a time, and answers
// how many.
func (s *Sweeper) sweepLocks(ctx context.Context) (int, error) {
	q := sweepSQL
	if s.history {
		q = sweepRecordSQL
	}
	total := 0
	for {
		tag, err := s.db.Pool.Exec(ctx, q, s.batchSize)
		if err != nil {
			return total, postgres.Interpret(err, "")
		}
		n := int(tag.RowsAffected())
		total += n
		if n > 0 {
			s.onDeleted(n)
		}
		if n < s.batchSize {
			break
		}
	}
	if total > 0 {
		s.logger.DebugContext(ctx, "expired locks swept", slog.Int("deleted", total))
	}
	return total, nil
}

// expireHoldShelves closes the requests past their hold shelf date.
func (s *Sweeper) expireHoldShelves(ctx context.Context) error {
	return s.closeExpired(ctx, WorkHoldShelfRequest, "hold shelf date", requests.ExpireHoldShelves)
}

// expireRequests closes the requests past their request expiration date.
func (s *Sweeper) expireRequests(ctx context.Context) error {
	return s.closeExpired(ctx, WorkExpiredRequest, "expiration date", requests.Expire)
}

// closeExpired closes the requests past their date (what, in words),
// with close, a batch at a time (actOnEach).
func (s *Sweeper) closeExpired(ctx context.Context, work, what string, close requests.CloseExpired) error {
	return s.actOnEach(ctx, work, "request", "past their "+what, "closed", close)
}

// actOnEach acts on the records (kind, in words) found in the state what
// with act, a batch at a time, and says what was done (done, in words).
// A record that cannot be acted on is logged and counted (work), left
// out of the pass's next batches and found again at the next pass: it
// holds up no other.
func (s *Sweeper) actOnEach(ctx context.Context, work, kind, what, done string, act requests.CloseExpired) error {
	var failed []requests.Ref
	closed := 0
	for {
		found, n, failures, err := act(ctx, s.db, s.batchSize, failed)
		if err != nil {
			return err
		}
		closed += n
		for _, f := range failures {
			s.onWork(work, 0, f.Err)
			s.logger.WarnContext(ctx, "sweeper: "+kind+"s "+what+": one could not be "+done+"; it is tried again at the next pass",
				slog.String("tenant", string(f.Tenant)), slog.String(kind+"_id", f.ID), slog.Any("error", f.Err))
			failed = append(failed, f.Ref)
		}
		if found < s.batchSize {
			break
		}
	}
	if closed > 0 {
		s.logger.InfoContext(ctx, "sweeper: "+kind+"s "+done, slog.Int(done, closed), slog.String("found", what))
	}
	if len(failed) > 0 {
		return fmt.Errorf("%d %ss %s could not be %s (%d were)", len(failed), kind, what, done, closed)
	}
	return nil
}

// anonymizeBatches bounds a pass's anonymizing of one tenant: at most this
// many batches; what is left is anonymized at the next passes.
const anonymizeBatches = 10

// anonymize anonymizes the closed loans each tenant's loan history
// settings say are due, a batch at a time, at most anonymizeBatches a
// tenant each pass, and deletes as many of the tenant's lock history
// entries older than its closed loans keep their borrower: each batch
// only while the tenant's settings are still those read as the work
// began (lending.ReadSettings). Nothing is done by settings a librarian
// changed meanwhile; the next pass works by the new ones.
func (s *Sweeper) anonymize(ctx context.Context) error {
	a := lending.NewAnonymizer(s.db)
	settings, err := a.Settings(ctx)
	if err != nil {
		return err
	}
	total, forgotten := 0, int64(0)
	for t, set := range settings {
		for range anonymizeBatches {
			ids, err := a.Due(ctx, t, set, s.batchSize)
			if err != nil {
				return err
			}
			total += len(ids)
			if len(ids) < s.batchSize {
				break
			}
		}
		for range anonymizeBatches {
			n, err := a.ForgetHistory(ctx, t, set, s.batchSize)
			if err != nil {
				return err
			}
			forgotten += n
			if n < int64(s.batchSize) {
				break
			}
		}
	}
	if total > 0 || forgotten > 0 {
		s.logger.InfoContext(ctx, "closed loans anonymized", slog.Int("loans", total), slog.Int64("lock_history_entries", forgotten))
	}
	return nil
}

// forgetWrites deletes the writes' ids past the time they are kept for, a
// batch at a time.
func (s *Sweeper) forgetWrites(ctx context.Context) error {
	for {
		tag, err := s.db.Pool.Exec(ctx, forgetWritesSQL, storage.WriteKeptFor.Seconds(), s.batchSize)
		if err != nil {
			return postgres.Interpret(err, "")
		}
		if int(tag.RowsAffected()) < s.batchSize {
			return nil
		}
	}
}

// sweepLogin runs sweepLoginSQL's statements in one round trip, one
// transaction.
func (s *Sweeper) sweepLogin(ctx context.Context) error {
	b := &pgx.Batch{}
	b.Queue(sweepLoginSQL[0], pgx.StrictNamedArgs{"window": s.loginWindow.Seconds(), "stale": (2 * login.MaxCheck).Seconds(),
		"known_for": s.knownFor.Seconds()})
	for _, q := range sweepLoginSQL[1:] {
		b.Queue(q)
	}
	return postgres.Interpret(s.db.Pool.SendBatch(ctx, b).Close(), "")
}

// trim keeps the history within its retention and each tenant's within
// its size. Only the tenants that recorded events since the last pass are
// looked at: the events before were within the size then, and events are
// only ever added.
func (s *Sweeper) trim(ctx context.Context) error {
	if _, err := s.db.Pool.Exec(ctx, retainSQL, s.retention.Seconds()); err != nil {
		return postgres.Interpret(err, "")
	}
	var newest int64
	if err := s.db.Pool.QueryRow(ctx, newestEventSQL).Scan(&newest); err != nil {
		return postgres.Interpret(err, "")
	}
	if newest <= s.trimmed.Load() {
		return nil
	}
	if _, err := s.db.Pool.Exec(ctx, capSQL, s.trimmed.Load(), s.maxEvents); err != nil {
		return postgres.Interpret(err, "")
	}
	s.trimmed.Store(newest)
	return nil
}
