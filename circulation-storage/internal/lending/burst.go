package lending

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	storage "github.com/checkoutlock/circulation-storage"
	"github.com/checkoutlock/circulation-storage/internal/postgres"
	"github.com/checkoutlock/circulation-storage/internal/record"
	"github.com/checkoutlock/schemas"
	"github.com/checkoutlock/schemas/errs"
)

// A patron's burst. Check-out writes that take the patron's lock in the
// write (CheckOutWrite.AcquireInWrite) queue for the lock row in
// PostgreSQL, each waiting for the commit of the one before. Here, the
// patron's writes that reach this instance while one of them runs wait
// in memory instead, and run next together: one transaction, each write's
// statements after the one before's, so that each is judged (the lock,
// the limits, the item) with the loans of those before it counted, in the
// order they arrived, and one commit for them all. A patron's ten scans at
// once are two or three commits rather than ten. A write that finds none
// of its patron's running runs at once, alone.
//
// The batch keeps every promise of the write run alone
// (createCheckOutLoan), write by write:
//
//   - A write is answered "refused" only when it is known not to have
//     committed. A failed batch is run again write by write only when its
//     outcome is final: the server answered an error on a connection that
//     is still open (the transaction was rolled back), or the connection
//     broke and its server process has ended since (postgres.Settled). Then
//     a write whose loan is not stored did not happen, and runs again
//     alone; one whose loan is stored committed, and is answered as a write
//     alone whose answer was lost. A failure whose outcome is not known (a
//     connection cut while its server process may still commit) answers
//     every write of the batch "unavailable", settled by reading its loan
//     back, as a write alone is answered.
//   - A write whose caller leaves while it waits here, or before its batch
//     starts, is dropped: it is never sent. One whose caller leaves while
//     its batch runs is answered as a write alone whose caller left in the
//     middle of its statements: "unavailable", its outcome settled by
//     reading the loan back.
//   - Each write keeps its own deadline: a write past it when its batch
//     starts is dropped, and one whose statement reaches PostgreSQL past it
//     writes nothing (checkOutSQL's in_time); the others go on. PostgreSQL
//     counts the time left from when the transaction began, so it sees
//     the deadline later than it is by the time the batch took to arrive;
//     a write that committed in that margin is answered as one whose
//     caller left mid-statement ("unavailable", settled by reading back).
//     The batch is cancelled only when every one of its callers has left.
//   - The waiting is bounded: at most MaxWaitingPerPatron writes of one
//     patron and MaxWaiting in all wait here; past either, a write is
//     answered 503 with Retry-After (storage.CheckOutsBusy), nothing
//     written.
//   - A panic while a batch runs answers every write of it 500, and the
//     process goes on serving.
type bursts struct {
	mu sync.Mutex
	// running holds, for each patron with a write running here, the
	// writes waiting for it, in the order they arrived.
	running map[patronKey][]*burstWrite
	// waiting is how many writes wait, every patron's.
	waiting int
	cfg     BurstConfig
	// took, when set (by tests), is called under mu with each batch as
	// handOn takes it from the queue, before it starts.
	took func(batch []*burstWrite)
}

// BurstConfig bounds and observes the patrons' bursts.
type BurstConfig struct {
	// MaxWaitingPerPatron bounds one patron's writes waiting here,
	// MaxWaiting every patron's (at least 1 each).
	MaxWaitingPerPatron, MaxWaiting int
	// Observer, when set, is told of the waiting writes, the batches,
	// the writes refused and the fallbacks.
	Observer storage.BurstObserver
	// Logger, when set, logs a batch that fell back write by write.
	Logger *slog.Logger
}

type patronKey struct {
	tenant storage.Tenant
	user   string
}

// burstWrite is a waiting write: it is answered (done closed), or handed
// the writes to run (lead), itself first among them. taken, guarded by
// bursts.mu, says it has left the queue for a batch.
type burstWrite struct {
	ctx     context.Context
	w       storage.CheckOutWrite
	lead    chan []*burstWrite
	done    chan struct{}
	taken   bool
	written storage.CheckOutWritten
	err     error
}

// MaxBurstWrites bounds the writes run in one transaction.
const MaxBurstWrites = 16

// burstCheckOut is CreateCheckOutLoan for a lean write that takes its
// lock itself.
func (s *Loans) burstCheckOut(ctx context.Context, t storage.Tenant, w storage.CheckOutWrite) (storage.CheckOutWritten, error) {
	key := patronKey{t, w.UserID}
	b := &s.bursts
	b.mu.Lock()
	waiting, ok := b.running[key]
	if !ok {
		b.running[key] = nil
		b.mu.Unlock()
		defer s.handOn(key)
		return s.createCheckOutLoan(ctx, t, w, true)
	}
	if len(waiting) >= b.cfg.MaxWaitingPerPatron || b.waiting >= b.cfg.MaxWaiting {
		perPatron := len(waiting) >= b.cfg.MaxWaitingPerPatron
		bound := b.cfg.MaxWaiting
		if perPatron {
			bound = b.cfg.MaxWaitingPerPatron
		}
		b.mu.Unlock()
		b.observer().BurstRefused()
		return storage.CheckOutWritten{}, storage.CheckOutsBusy(w.UserID, bound, perPatron)
	}
	me := &burstWrite{ctx: ctx, w: w, lead: make(chan []*burstWrite, 1), done: make(chan struct{})}
	b.running[key] = append(waiting, me)
	b.waiting++
	b.observer().BurstWaiting(b.waiting)
	b.mu.Unlock()
	select {
	case <-me.done:
		return me.written, me.err
	case batch := <-me.lead:
		defer s.handOn(key)
		s.runBurst(t, batch)
		return me.written, me.err
	case <-ctx.Done():
	}
	if b.withdraw(key, me) {
		// The caller left before the write's batch started: it is never
		// sent.
		return storage.CheckOutWritten{}, postgres.Interpret(ctx.Err(), t)
	}
	// Taken for a batch as the caller left: the batch answers it.
	select {
	case <-me.done:
	case batch := <-me.lead:
		defer s.handOn(key)
		s.runBurst(t, batch)
	}
	return me.written, me.err
}

// withdraw takes me, whose caller left, out of the patron's queue (key),
// unless a batch has taken it already; it says whether it did.
func (b *bursts) withdraw(key patronKey, me *burstWrite) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if me.taken {
		return false
	}
	q := b.running[key]
	if i := slices.Index(q, me); i >= 0 {
		b.running[key] = slices.Delete(q, i, i+1)
		b.waiting--
		b.observer().BurstWaiting(b.waiting)
	}
	return true
}

// handOn gives the patron's waiting writes, up to MaxBurstWrites, to the
// first of them to run; with none waiting, the patron has none running.
func (s *Loans) handOn(key patronKey) {
	b := &s.bursts
	b.mu.Lock()
	defer b.mu.Unlock()
	waiting := b.running[key]
	if len(waiting) == 0 {
		delete(b.running, key)
		return
	}
	n := min(len(waiting), MaxBurstWrites)
	batch := waiting[:n:n]
	for _, m := range batch {
		m.taken = true
	}
	b.running[key] = slices.Clone(waiting[n:])
	b.waiting -= n
	b.observer().BurstWaiting(b.waiting)
	if b.took != nil {
		b.took(batch)
	}
	batch[0].lead <- batch
}

// observer is the configured observer, or one that is told nothing.
func (b *bursts) observer() storage.BurstObserver {
	if b.cfg.Observer == nil {
		return noBurstObserver{}
	}
	return b.cfg.Observer
}

type noBurstObserver struct{}

func (noBurstObserver) BurstWaiting(int)     {}
func (noBurstObserver) BurstBatch(int)       {}
func (noBurstObserver) BurstRefused()        {}
func (noBurstObserver) BurstFellBack(string) {}

// runBurst runs batch, a patron's writes in the order they arrived, in one
// transaction, and answers each (batch[0], the caller, reads its own).
func (s *Loans) runBurst(t storage.Tenant, batch []*burstWrite) {
	defer func() {
		if p := recover(); p != nil {
			// A bug: every write of the batch is answered 500, which a
			// caller settles by reading its loan back, and this process
			// goes on serving the others.
			s.burstLogger().Error("a patron's batch of check-out writes panicked",
				slog.Int("writes", len(batch)), slog.Any("panic", p), slog.String("stack", string(debug.Stack())))
			for _, m := range batch {
				m.written, m.err = storage.CheckOutWritten{}, errs.Errorf(errs.KindInternal, schemas.CodeInternal,
					"The check-out's write failed on a bug; whether its loan was written is settled by reading it back").
					Because(fmt.Errorf("panic: %v", p))
			}
		}
		for _, m := range batch[1:] {
			close(m.done)
		}
	}()
	// The writes whose callers have left (or whose deadlines have passed)
	// are dropped: never sent.
	var live []*burstWrite
	for _, m := range batch {
		if err := m.ctx.Err(); err != nil {
			m.err = postgres.Interpret(err, t)
			continue
		}
		live = append(live, m)
	}
	if len(live) == 0 {
		return
	}
	s.bursts.observer().BurstBatch(len(live))
	if len(live) == 1 {
		m := live[0]
		m.written, m.err = s.createCheckOutLoan(m.ctx, t, m.w, true)
		return
	}
	ctx, end := burstContext(live)
	defer end()
	var results []*checkOutResult
	err := s.db.Write(ctx, t, func(c *pgx.Conn) error {
		b := &pgx.Batch{}
		b.Queue(ownEventsSQL)
		results = results[:0]
		for _, m := range live {
			results = append(results, s.queueCheckOut(m.ctx, b, t, m.w, true))
		}
		err := c.SendBatch(ctx, b).Close()
		var pgErr *pgconn.PgError
		if err != nil && !c.IsClosed() && errors.As(err, &pgErr) {
			// The server answered an error and the connection is open:
			// the batch's transaction was rolled back.
			return &rolledBack{err}
		}
		return err
	})
	if err != nil {
		s.fallBack(ctx, t, live, err)
		return
	}
	for i, m := range live {
		m.written, m.err = s.checkOutAnswer(m.ctx, t, m.w, results[i], true)
		if cause := m.ctx.Err(); cause != nil {
			// The caller left while the batch ran: answered as a write
			// alone whose caller left mid-statement is.
			m.written, m.err = storage.CheckOutWritten{}, postgres.Interpret(cause, t)
		}
	}
}

// rolledBack is a batch's failure that the server answered on an open
// connection: its transaction was rolled back, nothing written.
type rolledBack struct{ err error }

func (r *rolledBack) Error() string { return r.err.Error() }
func (r *rolledBack) Unwrap() error { return r.err }

// fallBack answers the writes of a batch whose transaction failed (err),
// each as it would be answered alone. Only when the outcome is final (the
// transaction rolled back, or its server process ended: Settled) is a
// write whose loan is not stored known not to have happened, and run
// again alone; a loan stored says its write committed, and its answer was
// lost. Otherwise nothing is known, and every write is answered
// "unavailable", to be settled by reading its loan back.
func (s *Loans) fallBack(ctx context.Context, t storage.Tenant, live []*burstWrite, err error) {
	var settled *postgres.Settled
	var rolled *rolledBack
	final := errors.As(err, &settled) || errors.As(err, &rolled)
	var stored []string
	if final && settled != nil {
		ids := make([]string, len(live))
		for i, m := range live {
			ids[i] = m.w.LoanID
		}
		rows, qerr := s.db.Pool.Query(ctx, loansStoredSQL, ids, string(t))
		if qerr == nil {
			stored, qerr = pgx.CollectRows(rows, pgx.RowTo[string])
		}
		final = qerr == nil
	}
	outcome := storage.FellBackUnknown
	if final {
		outcome = storage.FellBackFinal
	}
	s.bursts.observer().BurstFellBack(outcome)
	s.burstLogger().WarnContext(ctx, "a patron's batch of check-out writes failed: its writes are answered one by one",
		slog.String("tenant", string(t)), slog.String("user_id", live[0].w.UserID), slog.Int("writes", len(live)),
		slog.String("outcome", outcome), slog.Any("error", err))
	for _, m := range live {
		if !final || slices.Contains(stored, m.w.LoanID) || m.ctx.Err() != nil {
			m.err = record.InterpretWrite(err, t, storage.Loans, m.w.Loan)
			continue
		}
		m.written, m.err = s.createCheckOutLoan(m.ctx, t, m.w, true)
	}
}

// burstLogger is the configured logger, or one that logs nothing.
func (s *Loans) burstLogger() *slog.Logger {
	if s.bursts.cfg.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return s.bursts.cfg.Logger
}

// loansStoredSQL is which of some loans are stored. Parameters: $1 the
// loans' ids, $2 the tenant.
var loansStoredSQL = postgres.WithTables(`SELECT id::text FROM %s WHERE tenant_id = $2 AND id = ANY($1::uuid[])`, postgres.TableLoan)

// BurstSizeAttribute is the attribute of a batch's span that says how many
// writes it ran.
const BurstSizeAttribute = "checkout.burst.size"

// instrumentation names the spans this package makes.
const instrumentation = "github.com/checkoutlock/circulation-storage/internal/lending"

// burstContext is the context a batch's transaction runs in, and what
// ends it: the first write's values, cancelled only once every write's
// caller has left. While tracing, its span begins a trace of its own,
// carries the batch's size and links to each write's span, as each
// write's span links to it; the batch's statements are under it.
func burstContext(live []*burstWrite) (context.Context, func()) {
	ctx, cancel := context.WithCancel(context.WithoutCancel(live[0].ctx))
	var left atomic.Int32
	left.Store(int32(len(live)))
	stops := make([]func() bool, len(live))
	for i, m := range live {
		stops[i] = context.AfterFunc(m.ctx, func() {
			if left.Add(-1) == 0 {
				cancel()
			}
		})
	}
	end := func() {
		for _, stop := range stops {
			stop()
		}
		cancel()
	}
	lead := trace.SpanFromContext(live[0].ctx)
	if !lead.IsRecording() {
		return ctx, end
	}
	links := make([]trace.Link, len(live))
	for i, m := range live {
		links[i] = trace.Link{SpanContext: trace.SpanContextFromContext(m.ctx)}
	}
	ctx, span := lead.TracerProvider().Tracer(instrumentation).Start(ctx, "check-out burst", trace.WithNewRoot(),
		trace.WithSpanKind(trace.SpanKindInternal), trace.WithLinks(links...),
		trace.WithAttributes(attribute.Int(BurstSizeAttribute, len(live))))
	for _, m := range live {
		trace.SpanFromContext(m.ctx).AddLink(trace.Link{SpanContext: span.SpanContext()})
	}
	return ctx, func() {
		span.End()
		end()
	}
}
