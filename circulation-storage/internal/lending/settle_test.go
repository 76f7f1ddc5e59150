package lending

import (
	"context"
	"encoding/binary"
	"errors"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/checkoutlock/circulation-storage/internal/dbtest"
	"github.com/checkoutlock/circulation-storage/internal/locks"
	"github.com/checkoutlock/circulation-storage/internal/postgres"
	"github.com/checkoutlock/circulation-storage/internal/record"
	"github.com/checkoutlock/circulation-storage/internal/sample"
	"github.com/checkoutlock/circulation-storage/internal/tenants"
	"github.com/checkoutlock/schemas/errs"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	storage "github.com/checkoutlock/circulation-storage"
	"github.com/checkoutlock/circulation-storage/internal/pgtest"
)

// cutter makes a DB's connections and, on cut, closes every one made so
// far, as a network fault between storage and PostgreSQL does to the
// client. The server processes behind them go on until they next read
// from or write to their client. pgx asks the server to cancel what a
// broken connection was running (a cancel request, on a connection of its
// own); after the cut those requests are lost, as they are while the
// network is down, so a server process is left to finish on its own.
type cutter struct {
	mu    sync.Mutex
	conns []net.Conn
	down  bool
}

func (c *cutter) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	conn, err := (&net.Dialer{}).DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.conns = append(c.conns, conn)
	if c.down {
		return &losesCancels{Conn: conn}, nil
	}
	return conn, nil
}

func (c *cutter) cut() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, conn := range c.conns {
		_ = conn.Close()
	}
	c.conns, c.down = nil, true
}

// losesCancels is a connection whose cancel request never arrives.
type losesCancels struct{ net.Conn }

// cancelRequestCode opens a cancel request, after its length (16).
const cancelRequestCode = 80877102

func (c *losesCancels) Write(b []byte) (int, error) {
	if len(b) == 16 && binary.BigEndian.Uint32(b[4:8]) == cancelRequestCode {
		_ = c.Conn.Close()
		return 0, net.ErrClosed
	}
	return c.Conn.Write(b)
}

// cut is a check-out write whose connection was cut while its server
// process waited for a row held by another client's transaction.
type cut struct {
	f dbtest.Fixture
	// done carries the write's outcome.
	done <-chan error
	// blocker holds the item's row; writer is the waiting process.
	blocker pgx.Tx
	writer  int
	loanID  string
	writeID string
	// at is when the cut began.
	at time.Time
}

// cutWrite starts a check-out write whose statements reach the server and
// then wait for the item's row, held by a transaction of another client;
// once the server process is seen waiting, the write's connection is cut.
func cutWrite(t *testing.T, within time.Duration) cut {
	t.Helper()
	// In plain text, so that the cutter can tell a cancel request.
	var network cutter
	db, err := postgres.OpenWithDial(context.Background(), dbtest.PlainURL(t), postgres.PoolConfig{MaxConns: 4, LockCommit: "off"}, network.dial)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(db.Close)
	w := waitingWrite(t, db, within)
	w.at = time.Now()
	network.cut()
	return w
}

// waitingWrite starts, on db, a check-out write (released with its lock)
// whose statements reach the server and then wait for the item's row,
// held by a transaction of another client (blocker), and answers once the
// write's server process (writer) is seen waiting.
func waitingWrite(t *testing.T, db *postgres.DB, within time.Duration) cut {
	t.Helper()
	ctx := context.Background()
	f := dbtest.SetupTenant(t, db)
	if _, err := tenants.NewTenants(db, dbtest.Discard, sample.LoadData).Init(ctx, f.Tenant, storage.TenantAttributes{ModuleTo: "m",
		Parameters: []errs.Parameter{{Key: "loadSample", Value: "true"}}}); err != nil {
		t.Fatalf("load sample: %v", err)
	}
	user, item := sample.ID("1001"), sample.ID("book-150")
	lock, _, err := locks.NewLocks(f.DB).Acquire(ctx, f.Tenant, user, "", dbtest.TTL, storage.Holder{})
	if err != nil {
		t.Fatal(err)
	}

	other, err := pgx.Connect(ctx, pgtest.Shared(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = other.Close(context.Background()) })
	blocker, err := other.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = blocker.Rollback(context.Background()) })
	if _, err := blocker.Exec(ctx, `SELECT 1 FROM `+dbtest.View(f.Tenant, "item")+` WHERE id = $1 FOR UPDATE`, item); err != nil {
		t.Fatal(err)
	}

	loanID, writeID := uuid.NewString(), uuid.NewString()
	writeCtx := storage.WithWrite(ctx, storage.Write{ID: writeID})
	if within > 0 {
		var cancel context.CancelFunc
		writeCtx, cancel = context.WithTimeout(writeCtx, within)
		t.Cleanup(cancel)
	}
	result := make(chan error, 1)
	// The sample library has a request: its check-outs are written in
	// full, as an instance writes them once it has met the tenant's gate
	// row (a lean write would find the row and write nothing).
	db.Gates.Found(f.Tenant)
	go func() {
		_, err := newLibrary(db, testPolicy).CreateCheckOutLoan(writeCtx, f.Tenant, storage.CheckOutWrite{LoanID: loanID,
			UserID: user, Loan: loanDoc(user, item), LockID: lock.ID, ItemVersion: 1, ReleaseLock: true})
		result <- err
	}()
	var writer int
	deadline := time.Now().Add(10 * time.Second)
	for writer == 0 {
		err := blocker.QueryRow(ctx, `SELECT coalesce(max(pid), 0) FROM pg_stat_activity
			WHERE $1 = ANY (pg_blocking_pids(pid))`, other.PgConn().PID()).Scan(&writer)
		if err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-result:
			t.Fatalf("the write finished (%v) before it waited for the held item", err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("the write never waited for the held item")
		}
		time.Sleep(5 * time.Millisecond) // polling the database's view, with a deadline
	}
	return cut{f: f, done: result, blocker: blocker, writer: writer, loanID: loanID, writeID: writeID}
}

// running reports whether server process pid is there.
func running(t *testing.T, f dbtest.Fixture, pid int) bool {
	t.Helper()
	var n int
	if err := f.DB.Pool.QueryRow(context.Background(), `SELECT count(*) FROM pg_stat_activity WHERE pid = $1`, pid).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n == 1
}

// TestAWriteWhoseConnectionIsCutIsRunAgainAsTheSameWrite: a check-out
// write, with its id, whose connection is cut after the server received
// all of it. The server process goes on, and commits once the row it
// waits for is free. The write is run again at once on a fresh
// connection: its id, stored first by the process still running, makes
// the second run wait for that process's transaction, and then answer
// its loan, written once, without writing.
func TestAWriteWhoseConnectionIsCutIsRunAgainAsTheSameWrite(t *testing.T) {
	t.Parallel()
	w := cutWrite(t, 0)
	select {
	case err := <-w.done:
		t.Fatalf("the write answered (%v) while its first run's transaction was still open", err)
	case <-time.After(300 * time.Millisecond): // a window in which no answer may come
	}
	if err := w.blocker.Commit(context.Background()); err != nil {
		t.Fatal(err)
	}
	var err error
	select {
	case err = <-w.done:
	case <-time.After(10 * time.Second):
		t.Fatal("the write never answered")
	}
	var replayed *storage.Replayed
	if !errors.As(err, &replayed) || record.FieldValue(replayed.Answer, "id") != w.loanID {
		t.Fatalf("cut write: %v, want its loan %s answered from its id", err, w.loanID)
	}
	if n := w.f.Count(t, "loan", "id = $1", w.loanID); n != 1 {
		t.Errorf("%d loans after the write answered, want the one its first run committed", n)
	}
	var answered int
	if err := w.f.DB.Pool.QueryRow(context.Background(), `SELECT count(*) FROM `+postgres.Table(postgres.TableWriteLog)+
		` WHERE tenant_id = $1 AND id = $2 AND answer IS NOT NULL`, string(w.f.Tenant), w.writeID).Scan(&answered); err != nil || answered != 1 {
		t.Errorf("%d rows of the write's id with an answer (%v), want 1", answered, err)
	}
}

// TestACutWriteWaitsForItsFirstRunOnlyWhileItsCallerDoes: a cut write
// whose first run's process is still waiting for a row when the caller's
// deadline passes answers "unavailable", its outcome not known then, and
// writes nothing of its own. When the row is let go, that process's
// statement is past the caller's deadline and writes nothing either: no
// loan, and the write's id is free again.
func TestACutWriteWaitsForItsFirstRunOnlyWhileItsCallerDoes(t *testing.T) {
	t.Parallel()
	w := cutWrite(t, 2*time.Second)
	var err error
	select {
	case err = <-w.done:
	case <-time.After(15 * time.Second):
		t.Fatal("the write did not answer after its caller's deadline")
	}
	if e, ok := errs.As(err); !ok || e.Kind != errs.KindUnavailable {
		t.Fatalf("cut write: %v, want unavailable", err)
	}
	if !running(t, w.f, w.writer) {
		t.Errorf("server process %d ended while the row it waits for is held", w.writer)
	}
	// Each run's statement is due within the caller's 2 s of its own
	// transaction's start, by PostgreSQL's clock: the row is let go once
	// that has passed for every run waiting for it, however late a run's
	// batch reached the server on a loaded machine.
	deadline := time.Now().Add(10 * time.Second)
	for {
		var due int
		if err := w.f.DB.Pool.QueryRow(context.Background(), `SELECT count(*) FROM pg_stat_activity
			WHERE $1 = ANY (pg_blocking_pids(pid)) AND clock_timestamp() <= xact_start + interval '2 seconds'`,
			w.blocker.Conn().PgConn().PID()).Scan(&due); err != nil {
			t.Fatal(err)
		}
		if due == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d runs still before their deadline after 10 s", due)
		}
		time.Sleep(10 * time.Millisecond) // polling the database's view, with a deadline
	}
	if err := w.blocker.Commit(context.Background()); err != nil {
		t.Fatal(err)
	}
	deadline = time.Now().Add(10 * time.Second)
	for running(t, w.f, w.writer) && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond) // polling the database's view, with a deadline
	}
	if n := w.f.Count(t, "loan", "id = $1", w.loanID); n != 0 {
		t.Errorf("%d loans once the first run ended past its caller's deadline, want none", n)
	}
	var ids int
	if err := w.f.DB.Pool.QueryRow(context.Background(), `SELECT count(*) FROM `+postgres.Table(postgres.TableWriteLog)+
		` WHERE tenant_id = $1 AND id = $2`, string(w.f.Tenant), w.writeID).Scan(&ids); err != nil || ids != 0 {
		t.Errorf("%d rows of the write's id (%v) after it wrote nothing, want none", ids, err)
	}
}
