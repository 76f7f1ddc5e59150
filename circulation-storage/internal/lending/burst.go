package lending

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	storage "github.com/checkoutlock/circulation-storage"
	"github.com/checkoutlock/circulation-storage/internal/postgres"
	"github.com/checkoutlock/circulation-storage/internal/records"
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
// of its patron's running runs at once, as before.
type bursts struct {
	mu sync.Mutex
	// running holds, for each patron with a write running here, the
	// writes waiting for it.
	running map[patronKey][]*burstWrite
}

type patronKey struct {
	tenant storage.Tenant
	user   string
}

// burstWrite is a waiting write: it is answered (done closed), or handed
// the writes to run (lead), itself first among them.
type burstWrite struct {
	ctx     context.Context
	w       storage.CheckOutWrite
	lead    chan []*burstWrite
	done    chan struct{}
	written storage.CheckOutWritten
	err     error
}

// MaxBurstWrites bounds the writes run in one transaction.
const MaxBurstWrites = 16

// burstCheckOut is CreateCheckOutLoan for a lean write that takes its
// lock itself.
func (s *Loans) burstCheckOut(ctx context.Context, t storage.Tenant, w storage.CheckOutWrite) (storage.CheckOutWritten, error) {
	key := patronKey{t, w.UserID}
	s.bursts.mu.Lock()
	if waiting, ok := s.bursts.running[key]; ok {
		me := &burstWrite{ctx: ctx, w: w, lead: make(chan []*burstWrite, 1), done: make(chan struct{})}
		s.bursts.running[key] = append(waiting, me)
		s.bursts.mu.Unlock()
		select {
		case <-me.done:
		case batch := <-me.lead:
			defer s.handOn(key)
			s.runBurst(t, batch)
		}
		return me.written, me.err
	}
	s.bursts.running[key] = nil
	s.bursts.mu.Unlock()
	defer s.handOn(key)
	return s.createCheckOutLoan(ctx, t, w, true)
}

// handOn gives the patron's waiting writes, up to MaxBurstWrites, to the
// first of them to run; with none waiting, the patron has none running.
func (s *Loans) handOn(key patronKey) {
	s.bursts.mu.Lock()
	defer s.bursts.mu.Unlock()
	waiting := s.bursts.running[key]
	if len(waiting) == 0 {
		delete(s.bursts.running, key)
		return
	}
	n := min(len(waiting), MaxBurstWrites)
	s.bursts.running[key] = slices.Clone(waiting[n:])
	waiting[0].lead <- waiting[:n:n]
}

// runBurst runs batch, a patron's writes in the order they arrived, in one
// transaction, and answers each (batch[0], the caller, reads its own).
func (s *Loans) runBurst(t storage.Tenant, batch []*burstWrite) {
	defer func() {
		for _, m := range batch[1:] {
			close(m.done)
		}
	}()
	if len(batch) == 1 {
		m := batch[0]
		m.written, m.err = s.createCheckOutLoan(m.ctx, t, m.w, true)
		return
	}
	ctx, cancel := burstContext(batch)
	defer cancel()
	var results []*checkOutResult
	err := s.db.Write(ctx, t, func(c *pgx.Conn) error {
		b := &pgx.Batch{}
		b.Queue(ownEventsSQL)
		results = results[:0]
		for _, m := range batch {
			results = append(results, s.queueCheckOut(m.ctx, b, t, m.w, true))
		}
		return c.SendBatch(ctx, b).Close()
	})
	if err == nil {
		for i, m := range batch {
			m.written, m.err = s.checkOutAnswer(m.ctx, t, m.w, results[i], true)
		}
		return
	}
	// The transaction failed: a statement's error rolled it back, or its
	// connection broke and its server process has ended (postgres.Settled)
	// or is not known to have. With none of the loans stored, it wrote
	// nothing that stays, and each write runs again on its own; a loan
	// stored says it committed, and that write's answer is not known (as
	// for one run alone).
	ids := make([]string, len(batch))
	for i, m := range batch {
		ids[i] = m.w.LoanID
	}
	var stored []string
	if rows, qerr := s.db.Pool.Query(ctx, loansStoredSQL, ids, string(t)); qerr == nil {
		stored, qerr = pgx.CollectRows(rows, pgx.RowTo[string])
		if qerr != nil {
			stored = ids
		}
	} else {
		stored = ids
	}
	for _, m := range batch {
		if slices.Contains(stored, m.w.LoanID) {
			m.err = records.InterpretWrite(err, t, storage.Loans, m.w.Loan)
			continue
		}
		m.written, m.err = s.createCheckOutLoan(m.ctx, t, m.w, true)
	}
}

// loansStoredSQL is which of some loans are stored. Parameters: $1 the
// loans' ids, $2 the tenant.
var loansStoredSQL = postgres.WithTables(`SELECT id::text FROM %s WHERE tenant_id = $2 AND id = ANY($1::uuid[])`, postgres.TableLoan)

// burstContext is the context a burst's transaction runs in: the first
// write's values (its trace), none's cancellation, and the earliest of the
// writes' deadlines.
func burstContext(batch []*burstWrite) (context.Context, context.CancelFunc) {
	var earliest time.Time
	for _, m := range batch {
		if d, ok := m.ctx.Deadline(); ok && (earliest.IsZero() || d.Before(earliest)) {
			earliest = d
		}
	}
	ctx := context.WithoutCancel(batch[0].ctx)
	if earliest.IsZero() {
		return context.WithCancel(ctx)
	}
	return context.WithDeadline(ctx, earliest)
}
