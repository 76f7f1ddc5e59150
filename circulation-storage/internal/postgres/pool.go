package postgres

import (
	"context"
	"errors"
	"io"
	"net"
	"syscall"

	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Pool is a connection pool whose single-row statements survive the
// connections it holds having died: the database restarted, failed over,
// or an operator terminated its backends. pgxpool notices a dead connection
// only when a statement fails on it, so without this the first statement on
// each pooled connection that died would fail its request. Most dead
// connections are dropped before they are handed out (closedByServer, in
// openPool); this catches those that die between then and the statement.
//
// QueryRow runs a statement again, on a fresh connection, when it failed
// because its connection was dead (see DeadConnection): perhaps after it
// committed, its answer lost. So every statement this package sends
// through QueryRow must be one that may run twice, and is:
//
//   - the reads (validation's, the patron summary, a lock, a record, an
//     account, a session, whether a key signed in);
//   - acquiring a lock: the lock id is chosen before the statement
//     (Locks.Acquire), so a second run names the lock the first took, and
//     renews it as its owner's (TestAnAcquireWhoseAnswerIsLostAnswersItsLock);
//   - releasing a lock: a second run finds it gone and answers 404, which
//     circulation takes as released (the lock is gone either way);
//   - rotating a refresh token: a second run finds the next token it kept
//     and answers that rotation (rotateSQL;
//     TestARefreshWhoseAnswerIsLostAnswersItsTokens).
//
// Anything else that consumes or counts goes through Exec (never run
// again) or DB.write and DB.inTx, which run a transaction again only when
// its BEGIN met a dead connection, and otherwise settle an ambiguous
// outcome by reading back.
type Pool struct {
	*pgxpool.Pool
}

// maxDeadAttempts bounds the runs of one statement on dead connections. A
// retry resets the pool first (every idle connection is closed, every
// connection in use closes when it comes back), so a second dead one is
// rare: a connection in use at the reset, or a second restart.
const maxDeadAttempts = 3

// QueryRow is pgxpool's, run again on a fresh connection when its
// connection was dead.
func (p *Pool) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	return &retriedRow{p: p, ctx: ctx, sql: sql, args: args}
}

// retriedRow runs its statement when it is scanned.
type retriedRow struct {
	p    *Pool
	ctx  context.Context
	sql  string
	args []any
}

func (r *retriedRow) Scan(dest ...any) error {
	err := r.p.Pool.QueryRow(r.ctx, r.sql, r.args...).Scan(dest...)
	for attempt := 1; attempt < maxDeadAttempts && DeadConnection(err) && r.ctx.Err() == nil; attempt++ {
		r.p.Reset()
		err = r.p.Pool.QueryRow(r.ctx, r.sql, r.args...).Scan(dest...)
	}
	return err
}

// DeadConnection reports whether err says the connection a statement was
// sent on had been closed by the server, or by the network, rather than
// that the statement failed: the server ended the session (SQLSTATE class
// 57, operator intervention: pg_terminate_backend, a shutdown, a crash), the
// connection was reset or closed, or pgx sent nothing. A connection that
// could not be made is not one: the database is down, and trying again at
// once would only wait for it again.
func DeadConnection(err error) bool {
	if err == nil {
		return false
	}
	var ce *pgconn.ConnectError
	if errors.As(err, &ce) {
		return false
	}
	if pgconn.SafeToRetry(err) {
		return true
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.SeverityUnlocalized == "FATAL" && pgerrcode.IsOperatorIntervention(pe.Code)
	}
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, net.ErrClosed) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}

// DeadBeforeRun is a transaction whose BEGIN failed on a dead connection:
// nothing of it ran.
type DeadBeforeRun struct{ Err error }

func (d *DeadBeforeRun) Error() string {
	return "connection dead before the transaction began: " + d.Err.Error()
}
func (d *DeadBeforeRun) Unwrap() error { return d.Err }

// QueryOne runs a single-row read through p and reads its row into a T
// by column name (pgx.RowToStructByName): run again on a fresh connection
// when its connection was dead, as QueryRow is, so only a statement that
// may run twice goes through it.
func QueryOne[T any](ctx context.Context, p *Pool, sql string, args ...any) (T, error) {
	return onLiveConnection(ctx, p, func() (T, error) {
		rows, err := p.Pool.Query(ctx, sql, args...)
		if err != nil {
			var zero T
			return zero, err
		}
		return pgx.CollectExactlyOneRow(rows, pgx.RowToStructByName[T])
	})
}

// QueryOneGeneric is QueryOne with the statement run by its generic plan
// (GenericPlansSQL sent with it, in its transaction, in the same round
// trip).
func QueryOneGeneric[T any](ctx context.Context, p *Pool, sql string, args ...any) (T, error) {
	return onLiveConnection(ctx, p, func() (T, error) {
		b := &pgx.Batch{}
		b.Queue(GenericPlansSQL)
		var v T
		b.Queue(sql, args...).Query(func(rows pgx.Rows) error {
			var err error
			v, err = pgx.CollectExactlyOneRow(rows, pgx.RowToStructByName[T])
			return err
		})
		err := p.Pool.SendBatch(ctx, b).Close()
		return v, err
	})
}

// onLiveConnection runs a read, and runs it again on a fresh connection
// when its connection was dead.
func onLiveConnection[T any](ctx context.Context, p *Pool, run func() (T, error)) (T, error) {
	v, err := run()
	for attempt := 1; attempt < maxDeadAttempts && DeadConnection(err) && ctx.Err() == nil; attempt++ {
		p.Reset()
		v, err = run()
	}
	return v, err
}
