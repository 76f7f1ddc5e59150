package lending

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	storage "github.com/checkoutlock/circulation-storage"
	"github.com/checkoutlock/circulation-storage/internal/dbtest"
	"github.com/checkoutlock/circulation-storage/internal/postgres"
	"github.com/checkoutlock/circulation-storage/internal/records"
	"github.com/checkoutlock/circulation-storage/internal/sample"
	"github.com/checkoutlock/schemas"
	"github.com/checkoutlock/schemas/errs"
)

// The burst's faults: a patron's first check-out write held in PostgreSQL
// (the patron's row locked by another client) while four more of the
// patron's wait behind it here; released, the four run as one batch,
// which a second client may hold in its turn (the first batch write's
// item locked) while the fault is made. Each test runs burstRounds rounds
// at once, each its own patron. Whatever the fault, every answer is the
// truth (wantTruthful): a write answered written is stored, one answered
// refused is not, and only "unavailable" or a bug (500) leaves it open.

// burstRounds is how many rounds each fault test runs.
const burstRounds = 20

// burstWrites is how many writes a round makes: the first, held, and
// the batch behind it.
const burstWrites = 5

// burstFixture is a lean sample library whose check-out writes go through
// lib; items hands out books no round has used.
type burstFixture struct {
	f     dbtest.Fixture
	lib   library
	books atomic.Int32
	// checks is where the test reads the database: f, or another pool
	// when f's connections are cut.
	checks dbtest.Fixture
}

// newBurstFixture is a lean sample library on db (the shared pool when
// nil), its loans written with cfg (testBursts when zero).
func newBurstFixture(t *testing.T, db *postgres.DB, cfg BurstConfig) *burstFixture {
	t.Helper()
	var f dbtest.Fixture
	if db == nil {
		f = setupLeanLibrary(t)
	} else {
		f = lean(t, dbtest.LibraryIn(t, db, sample.LoadData))
	}
	if cfg.MaxWaiting == 0 {
		cfg.MaxWaitingPerPatron, cfg.MaxWaiting = testBursts.MaxWaitingPerPatron, testBursts.MaxWaiting
	}
	bf := &burstFixture{f: f, checks: f, lib: library{Records: records.NewRecords(f.DB), Loans: NewLoans(f.DB, testPolicy, cfg)}}
	bf.books.Store(20) // book-020 is held for Bob
	return bf
}

// patron makes a patron of group.
func (bf *burstFixture) patron(t *testing.T, group string) string {
	t.Helper()
	user := uuid.NewString()
	if _, err := bf.lib.Create(context.Background(), bf.f.Tenant, storage.Patrons, user, json.RawMessage(fmt.Sprintf(
		`{"barcode":"b-%s","active":true,"patronGroup":%q,"personal":{"lastName":"Burst"}}`, user, group))); err != nil {
		t.Fatal(err)
	}
	return user
}

// waiting is how many of user's writes wait here: -1 with none running.
func (bf *burstFixture) waiting(user string) int {
	b := &bf.lib.bursts
	b.mu.Lock()
	defer b.mu.Unlock()
	if w, ok := b.running[patronKey{bf.f.Tenant, user}]; ok {
		return len(w)
	}
	return -1
}

// blockedBy reports whether some server process waits for one that pid
// holds.
func blockedBy(t *testing.T, f dbtest.Fixture, pid int) bool {
	t.Helper()
	var n int
	if err := f.DB.Pool.QueryRow(context.Background(), `SELECT count(*) FROM pg_stat_activity
		WHERE $1 = ANY (pg_blocking_pids(pid))`, pid).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n > 0
}

// round is one round of a patron's writes: the first held in
// PostgreSQL, the others waiting here behind it.
type round struct {
	bf      *burstFixture
	user    string
	loanIDs []string
	items   []string
	answers []chan error
	// patronRow holds the patron's row, holding the first write.
	patronRow *dbtest.Holder
}

// startRound makes user's first write and has it wait in PostgreSQL for
// the patron's row, then the others (each under its context, ctxs[i] for
// write i, Background when nil) waiting here behind it.
func (bf *burstFixture) startRound(t *testing.T, user string, ctxs []context.Context) *round {
	t.Helper()
	r := &round{bf: bf, user: user, patronRow: dbtest.Hold(t, bf.checks, postgres.TablePatron, user)}
	for range burstWrites {
		r.loanIDs = append(r.loanIDs, uuid.NewString())
		r.items = append(r.items, sample.ID(fmt.Sprintf("book-%03d", bf.books.Add(1))))
		r.answers = append(r.answers, make(chan error, 1))
	}
	r.start(0, context.Background())
	dbtest.Eventually(t, "the first write running", func() bool { return r.patronRow.Blocked(t, bf.checks) != 0 })
	// One after another, so that they wait in the order of their numbers.
	for i := 1; i < burstWrites; i++ {
		ctx := context.Background()
		if i < len(ctxs) && ctxs[i] != nil {
			ctx = ctxs[i]
		}
		r.start(i, ctx)
		dbtest.Eventually(t, fmt.Sprintf("write %d waiting behind the first", i), func() bool { return bf.waiting(user) == i })
	}
	return r
}

// start makes write i under ctx.
func (r *round) start(i int, ctx context.Context) {
	go func() {
		_, err := r.bf.lib.CreateCheckOutLoan(ctx, r.bf.f.Tenant, storage.CheckOutWrite{LoanID: r.loanIDs[i], UserID: r.user,
			Loan: loanDoc(r.user, r.items[i]), LockID: uuid.NewString(), ItemVersion: 1, ReleaseLock: true,
			AcquireInWrite: &storage.LockTerms{TTL: dbtest.TTL}})
		r.answers[i] <- err
	}()
}

// answer is write i's answer, failing the test after 15 s.
func (r *round) answer(t *testing.T, i int) error {
	t.Helper()
	return r.answerWithin(t, i, 15*time.Second)
}

// answerWithin is write i's answer, failing the test after d.
func (r *round) answerWithin(t *testing.T, i int, d time.Duration) error {
	t.Helper()
	select {
	case err := <-r.answers[i]:
		r.answers[i] <- err // for the next reader
		return err
	case <-time.After(d):
		t.Fatalf("write %d did not answer within %s", i, d)
		return nil
	}
}

// answered reports whether write i has answered.
func (r *round) answered(i int) bool {
	select {
	case err := <-r.answers[i]:
		r.answers[i] <- err
		return true
	default:
		return false
	}
}

// stored reports whether write i's loan is stored.
func (r *round) stored(t *testing.T, i int) bool {
	t.Helper()
	return r.bf.checks.Count(t, postgres.TableLoan, "id = $1", r.loanIDs[i]) == 1
}

// wantTruthful checks every write's answer against the database: one
// answered written has its loan stored, and its item checked out; one
// answered refused, neither. Only an answer that does not claim to know
// (unavailable, or a bug's 500) leaves either open. The patron holds no
// lock row afterwards, and at most room open loans.
func (r *round) wantTruthful(t *testing.T, room int) {
	t.Helper()
	for i := range burstWrites {
		err := r.answer(t, i)
		stored := r.stored(t, i)
		var status string
		if err := r.bf.checks.DB.Pool.QueryRow(context.Background(), `SELECT status_name FROM `+postgres.Table(postgres.TableItem)+
			` WHERE tenant_id = $2 AND id = $1`, r.items[i], string(r.bf.checks.Tenant)).Scan(&status); err != nil {
			t.Fatal(err)
		}
		switch {
		case err == nil && (!stored || status != "Checked out"):
			t.Errorf("write %d answered written; its loan stored: %v, its item %q", i, stored, status)
		case err != nil && definite(err) && (stored || status != "Available"):
			t.Errorf("write %d answered refused (%v); its loan stored: %v, its item %q", i, err, stored, status)
		}
	}
	if n := r.bf.checks.Count(t, postgres.TableLoan, "user_id = $1 AND status_name = 'Open'", r.user); n > room {
		t.Errorf("%d open loans, room for %d", n, room)
	}
	if n := r.bf.checks.Count(t, postgres.TableLock, "user_id = $1", r.user); n != 0 {
		t.Errorf("%d lock rows left for the patron, want none", n)
	}
}

// definite reports whether err claims to know the write did not happen:
// anything but unavailable and a bug.
func definite(err error) bool {
	var r *errs.Refusal
	if errors.As(err, &r) {
		return true
	}
	e, ok := errs.As(err)
	return ok && e.Kind != errs.KindUnavailable && e.Kind != errs.KindInternal
}

// inRounds runs fn burstRounds times at once, each round a subtest.
func inRounds(t *testing.T, fn func(t *testing.T)) {
	t.Helper()
	for i := range burstRounds {
		t.Run(fmt.Sprintf("round %d", i), func(t *testing.T) {
			t.Parallel()
			fn(t)
		})
	}
}

// TestABatchCutWhileItsProcessLivesAnswersUnknownNeverRefused: a batch
// whose connection is cut (between storage and PostgreSQL) while its
// server process waits for a row, and goes on waiting past the wait for
// it to settle, has an outcome nobody knows yet: that process commits
// once the row is free. Its writes are answered "unavailable", to be
// settled by reading their loans back, never run again: run again, each
// would wait for the batch's own commit and then be refused for a loan
// that was written.
func TestABatchCutWhileItsProcessLivesAnswersUnknownNeverRefused(t *testing.T) {
	t.Parallel()
	setup := newBurstFixture(t, nil, BurstConfig{})
	inRounds(t, func(t *testing.T) {
		var network cutter
		db, err := postgres.OpenWithDial(context.Background(), dbtest.PlainURL(t), postgres.PoolConfig{MaxConns: 4, LockCommit: "off"}, network.dial)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(db.Close)
		bf := &burstFixture{f: dbtest.Fixture{DB: db, Tenant: setup.f.Tenant}, checks: setup.f,
			lib: library{Records: records.NewRecords(db), Loans: NewLoans(db, testPolicy, testBursts)}}
		bf.books.Store(setup.books.Add(burstWrites) - burstWrites)
		r := bf.startRound(t, bf.patron(t, sample.GroupUndergrad), nil)
		batch := dbtest.Hold(t, bf.checks, postgres.TableItem, r.items[1])
		r.patronRow.Let(t)
		var pid int
		dbtest.Eventually(t, "the batch waiting for the held item", func() bool { pid = batch.Blocked(t, bf.checks); return pid != 0 })
		network.cut()
		// The batch's outcome stays unknown while its process waits: each
		// write is answered so, or (were it run again) waits behind it.
		dbtest.Eventually(t, "the batch's writes answered, or waiting behind its process", func() bool {
			all := true
			for i := 1; i < burstWrites; i++ {
				all = all && r.answered(i)
			}
			return all || blockedBy(t, bf.checks, pid)
		})
		batch.Let(t)
		r.wantTruthful(t, 3)
		// The process commits the batch once the item is free, or ends on
		// its first answer that finds the connection gone: either way, no
		// write knew.
		for i := 1; i < burstWrites; i++ {
			if err := r.answer(t, i); err == nil || definite(err) {
				t.Errorf("write %d: %v, want unavailable: its batch's outcome was not known", i, err)
			}
		}
	})
}

// TestABatchWhoseProcessEndedRunsItsWritesAgainAlone: a batch whose
// server process is ended (as an operator or a failover ends it) while it
// waits for a row rolled back: none of its loans is stored, its outcome is
// final, and each write runs again alone, answered as if it had been alone
// from the first: room filled, the rest refused at the limit.
func TestABatchWhoseProcessEndedRunsItsWritesAgainAlone(t *testing.T) {
	t.Parallel()
	bf := newBurstFixture(t, nil, BurstConfig{})
	inRounds(t, func(t *testing.T) {
		r := bf.startRound(t, bf.patron(t, sample.GroupUndergrad), nil)
		batch := dbtest.Hold(t, bf.f, postgres.TableItem, r.items[1])
		r.patronRow.Let(t)
		var pid int
		dbtest.Eventually(t, "the batch waiting for the held item", func() bool { pid = batch.Blocked(t, bf.f); return pid != 0 })
		if _, err := bf.f.DB.Pool.Exec(context.Background(), `SELECT pg_terminate_backend($1)`, pid); err != nil {
			t.Fatal(err)
		}
		// Run again alone, the batch's first write waits for the item once
		// more.
		dbtest.Eventually(t, "the first write run again", func() bool { p := batch.Blocked(t, bf.f); return p != 0 && p != pid })
		batch.Let(t)
		r.wantTruthful(t, 3)
		var written []int
		for i := range burstWrites {
			err := r.answer(t, i)
			switch {
			case err == nil:
				written = append(written, i)
			case !dbtest.IsCode(err, schemas.CodeItemLimitReached):
				t.Errorf("write %d: %v, want written or refused at the limit", i, err)
			}
		}
		if fmt.Sprint(written) != "[0 1 2]" {
			t.Errorf("written: %v, want the first three in the order they arrived", written)
		}
	})
}

// TestABatchDropsTheWritesWhoseCallersLeft: a write whose caller leaves
// while it waits here is answered at once and never sent; one whose caller
// leaves after its batch took it, before the batch starts, is dropped
// from it; the others are written as if the two had never come.
func TestABatchDropsTheWritesWhoseCallersLeft(t *testing.T) {
	t.Parallel()
	bf := newBurstFixture(t, nil, BurstConfig{})
	var mu sync.Mutex
	leaving := map[string]func(){}
	bf.lib.bursts.took = func(batch []*burstWrite) {
		mu.Lock()
		defer mu.Unlock()
		if leave, ok := leaving[batch[0].w.UserID]; ok {
			leave()
		}
	}
	inRounds(t, func(t *testing.T) {
		user := bf.patron(t, sample.GroupUndergrad)
		waitingCtx, leaveWaiting := context.WithCancel(context.Background())
		defer leaveWaiting()
		takenCtx, leaveTaken := context.WithCancel(context.Background())
		defer leaveTaken()
		r := bf.startRound(t, user, []context.Context{nil, nil, waitingCtx, takenCtx})
		leaveWaiting()
		// At once: the write before it is still held.
		if err := r.answerWithin(t, 2, 5*time.Second); !dbtest.IsCode(err, schemas.CodeTimeout) {
			t.Fatalf("the write whose caller left while it waited: %v, want %s at once", err, schemas.CodeTimeout)
		}
		if n := bf.waiting(user); n != burstWrites-2 {
			t.Fatalf("%d writes waiting after one left, want %d", n, burstWrites-2)
		}
		// Write 3's caller leaves as its batch takes it.
		mu.Lock()
		leaving[user] = leaveTaken
		mu.Unlock()
		r.patronRow.Let(t)
		r.wantTruthful(t, 3)
		for i, want := range []string{"", "", schemas.CodeTimeout, schemas.CodeTimeout, ""} {
			err := r.answer(t, i)
			if (want == "" && err != nil) || (want != "" && !dbtest.IsCode(err, want)) {
				t.Errorf("write %d: %v, want %q", i, err, want)
			}
			if left := want != ""; left == r.stored(t, i) {
				t.Errorf("write %d stored: %v", i, !left)
			}
		}
	})
}

// TestABatchKeepsEachWritesDeadline: a write whose deadline passes while
// its batch waits in PostgreSQL writes nothing; the others of the batch
// are written, and the batch is not cut short at that deadline.
func TestABatchKeepsEachWritesDeadline(t *testing.T) {
	t.Parallel()
	bf := newBurstFixture(t, nil, BurstConfig{})
	inRounds(t, func(t *testing.T) {
		// Room for every loan: a faculty member.
		user := bf.patron(t, sample.GroupFaculty)
		late, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		r := bf.startRound(t, user, []context.Context{nil, nil, nil, late})
		batch := dbtest.Hold(t, bf.f, postgres.TableItem, r.items[1])
		r.patronRow.Let(t)
		var pid int
		dbtest.Eventually(t, "the batch waiting for the held item", func() bool { pid = batch.Blocked(t, bf.f); return pid != 0 })
		<-late.Done()
		// The deadline reaches PostgreSQL as the time left when the batch
		// was sent, counted from when its transaction began: later, by the
		// time the batch took to arrive. Past it on PostgreSQL's clock too
		// (the time left was at most the whole timeout):
		dbtest.Eventually(t, "the deadline past on PostgreSQL's clock", func() bool {
			var past bool
			if err := bf.f.DB.Pool.QueryRow(context.Background(), `SELECT clock_timestamp() > xact_start + interval '3 seconds'
				FROM pg_stat_activity WHERE pid = $1`, pid).Scan(&past); err != nil {
				t.Fatal(err)
			}
			return past
		})
		batch.Let(t)
		r.wantTruthful(t, burstWrites)
		for i := range burstWrites {
			err := r.answer(t, i)
			if i == 3 {
				if !dbtest.IsCode(err, schemas.CodeTimeout) || r.stored(t, i) {
					t.Errorf("the write past its deadline: %v, stored %v; want %s and nothing written", err, r.stored(t, i), schemas.CodeTimeout)
				}
				continue
			}
			if err != nil {
				t.Errorf("write %d: %v, want written", i, err)
			}
		}
	})
}

// TestAPanickingBatchAnswersEveryWrite500: a batch that panics (its
// observer does, here) answers each of its writes 500 with nothing
// written, and the patron's next write runs as if nothing had happened.
func TestAPanickingBatchAnswersEveryWrite500(t *testing.T) {
	t.Parallel()
	bf := newBurstFixture(t, nil, BurstConfig{Observer: panicking{}})
	inRounds(t, func(t *testing.T) {
		user := bf.patron(t, sample.GroupFaculty)
		r := bf.startRound(t, user, nil)
		r.patronRow.Let(t)
		r.wantTruthful(t, burstWrites)
		if err := r.answer(t, 0); err != nil {
			t.Fatalf("the first write: %v", err)
		}
		for i := 1; i < burstWrites; i++ {
			if e, ok := errs.As(r.answer(t, i)); !ok || e.Kind != errs.KindInternal || r.stored(t, i) {
				t.Errorf("write %d of the batch that panicked: %v, stored %v; want a 500 and nothing written", i, r.answer(t, i), r.stored(t, i))
			}
		}
		if n := bf.waiting(user); n != -1 {
			t.Fatalf("after the panic, the patron has %d writes waiting (-1: none running)", n)
		}
		item := sample.ID(fmt.Sprintf("book-%03d", bf.books.Add(1)))
		if _, err := bf.lib.CreateCheckOutLoan(context.Background(), bf.f.Tenant, storage.CheckOutWrite{LoanID: uuid.NewString(), UserID: user,
			Loan: loanDoc(user, item), LockID: uuid.NewString(), ItemVersion: 1, ReleaseLock: true,
			AcquireInWrite: &storage.LockTerms{TTL: dbtest.TTL}}); err != nil {
			t.Errorf("the patron's next write: %v", err)
		}
	})
}

// TestTooManyWaitingWritesAreRefusedUnwritten: past MaxWaitingPerPatron
// of one patron's writes, or MaxWaiting of every patron's, waiting here, a
// write is answered 503 CHECK_OUTS_BUSY with Retry-After, nothing written;
// the writes that waited are written once the first is.
func TestTooManyWaitingWritesAreRefusedUnwritten(t *testing.T) {
	t.Parallel()
	bf := newBurstFixture(t, nil, BurstConfig{MaxWaitingPerPatron: burstWrites - 1, MaxWaiting: burstWrites})
	one := bf.startRound(t, bf.patron(t, sample.GroupFaculty), nil)
	refused := func(user string, perPatron bool) {
		t.Helper()
		loanID, item := uuid.NewString(), sample.ID(fmt.Sprintf("book-%03d", bf.books.Add(1)))
		_, err := bf.lib.CreateCheckOutLoan(context.Background(), bf.f.Tenant, storage.CheckOutWrite{LoanID: loanID, UserID: user,
			Loan: loanDoc(user, item), LockID: uuid.NewString(), ItemVersion: 1, ReleaseLock: true,
			AcquireInWrite: &storage.LockTerms{TTL: dbtest.TTL}})
		e, ok := errs.As(err)
		want := storage.CheckOutsBusy(user, burstWrites-1, true)
		if !perPatron {
			want = storage.CheckOutsBusy(user, burstWrites, false)
		}
		if !ok || e.Kind != errs.KindUnavailable || e.Code != schemas.CodeCheckOutsBusy || e.RetryAfter <= 0 || e.Message != want.Message {
			t.Errorf("a write past the bound: %v, want %q with Retry-After", err, want.Message)
		}
		if n := bf.f.Count(t, postgres.TableLoan, "id = $1", loanID); n != 0 {
			t.Errorf("the write refused past the bound stored its loan")
		}
	}
	refused(one.user, true)
	// Another patron: one write waits, the next finds every place taken.
	two := &round{bf: bf, user: bf.patron(t, sample.GroupFaculty)}
	two.patronRow = dbtest.Hold(t, bf.f, postgres.TablePatron, two.user)
	for range 2 {
		two.loanIDs = append(two.loanIDs, uuid.NewString())
		two.items = append(two.items, sample.ID(fmt.Sprintf("book-%03d", bf.books.Add(1))))
		two.answers = append(two.answers, make(chan error, 1))
	}
	two.start(0, context.Background())
	dbtest.Eventually(t, "the other patron's first write running", func() bool { return two.patronRow.Blocked(t, bf.f) != 0 })
	two.start(1, context.Background())
	dbtest.Eventually(t, "the other patron's second write waiting", func() bool { return bf.waiting(two.user) == 1 })
	refused(two.user, false)
	one.patronRow.Let(t)
	two.patronRow.Let(t)
	for _, r := range []*round{one, two} {
		for i := range r.answers {
			if err := r.answer(t, i); err != nil {
				t.Errorf("a write that waited within the bounds: %v", err)
			}
		}
	}
}

// panicking is a BurstObserver whose batches of at least two writes
// panic as they start.
type panicking struct{}

func (panicking) BurstWaiting(int) {}
func (panicking) BurstBatch(size int) {
	if size >= 2 {
		panic(fmt.Sprintf("a batch of %d writes", size))
	}
}
func (panicking) BurstRefused()        {}
func (panicking) BurstFellBack(string) {}
