// Package dbtest is what the tests of circulation-storage's storage
// packages share: a tenant of their own in the shared test database
// (Setup, SetupTenant, SetupLibrary), purged when the test ends; SQL to
// arrange state and check it through the tenant's views (Fixture.Exec,
// fixture.Count, View); a row held by another client (Hold); and faults
// at the database's connection (ReplyLoser loses a statement's answer
// after its commit).
package dbtest

import (
	"bytes"
	"context"
	"encoding/binary"
	"io"
	"log/slog"
	"net"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/checkoutlock/circulation-storage/internal/postgres"
	"github.com/checkoutlock/circulation-storage/internal/tenants"

	storage "github.com/checkoutlock/circulation-storage"
	"github.com/checkoutlock/circulation-storage/internal/pgtest"
	"github.com/checkoutlock/schemas/errs"
	"github.com/jackc/pgx/v5"
)

// Fixture is what a test needs: the shared database and a tenant of its own,
// initialised, and purged when the test ends.
type Fixture struct {
	DB      *postgres.DB
	Tenant  storage.Tenant
	Tenants *tenants.Tenants
}

var Discard = slog.New(slog.NewTextHandler(io.Discard, nil))

// OpenDB opens a pool on url, closed when the test ends.
func OpenDB(t *testing.T, url string) *postgres.DB {
	t.Helper()
	return open(t, url, postgres.PoolConfig{MaxConns: 8, LockCommit: "off"})
}

// OpenFresh opens a pool of cfg on a database of the test's own
// (pgtest.Fresh), closed when the test ends: for a test that looks at the
// whole database (its advisory locks, its statistics, all its rows of a
// table).
func OpenFresh(t *testing.T, cfg postgres.PoolConfig) *postgres.DB {
	t.Helper()
	return open(t, pgtest.Fresh(t), cfg)
}

func open(t *testing.T, url string, cfg postgres.PoolConfig) *postgres.DB {
	t.Helper()
	db, err := postgres.Open(context.Background(), url, cfg)
	if err != nil {
		t.Fatalf("open database: %v", err)
	}
	t.Cleanup(func() { CloseWithin(t, db, 10*time.Second) })
	return db
}

// CloseWithin closes db, and fails the test if that takes longer than d: a
// connection a test took and never gave back would have the close wait for
// it for ever, and the package hang until go test's timeout.
func CloseWithin(t *testing.T, db *postgres.DB, d time.Duration) {
	t.Helper()
	closed := make(chan struct{})
	go func() {
		defer close(closed)
		db.Close()
	}()
	select {
	case <-closed:
	case <-time.After(d):
		t.Errorf("closing the database took longer than %s: a connection taken was not given back", d)
	}
}

var shared struct {
	once sync.Once
	db   *postgres.DB
	err  error
}

// Setup gives the test a tenant of its own in the shared database, reached
// through one pool for the whole package (so parallel tests do not exhaust
// the server's connections).
func Setup(t testing.TB) Fixture {
	t.Helper()
	return SetupTenant(t, sharedDB(t))
}

// sharedDB is the package's pool of the shared database.
func sharedDB(t testing.TB) *postgres.DB {
	t.Helper()
	url := pgtest.Shared(t)
	shared.once.Do(func() {
		shared.db, shared.err = postgres.Open(context.Background(), url, postgres.PoolConfig{MaxConns: 16, LockCommit: "off"})
	})
	if shared.err != nil {
		t.Fatalf("open database: %v", shared.err)
	}
	return shared.db
}

func SetupTenant(t testing.TB, db *postgres.DB) Fixture {
	t.Helper()
	f := Fixture{DB: db, Tenant: storage.Tenant(pgtest.TenantID()), Tenants: tenants.NewTenants(db, Discard)}
	ctx := context.Background()
	if _, err := f.Tenants.Init(ctx, f.Tenant, storage.TenantAttributes{ModuleTo: "mod-circulation-storage-1.0.0"}); err != nil {
		t.Fatalf("init tenant: %v", err)
	}
	t.Cleanup(func() {
		// Within a bound: a test that failed holding connections must not
		// leave its purge waiting for one.
		pctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := f.Tenants.Purge(pctx, f.Tenant); err != nil {
			t.Errorf("purge tenant %s: %v", f.Tenant, err)
		}
	})
	return f
}

// Exec runs SQL directly (the tenant's tables through its views), for arranging state
// (an expired lock) and checking it.
func (f Fixture) Exec(t *testing.T, sql string, args ...any) {
	t.Helper()
	if _, err := f.DB.Pool.Exec(context.Background(), sql, args...); err != nil {
		t.Fatalf("exec %q: %v", sql, err)
	}
}

// Count returns the number of rows of the tenant's table matching where.
func (f Fixture) Count(t *testing.T, name postgres.TableName, where string, args ...any) int {
	t.Helper()
	var n int
	q := "SELECT count(*) FROM " + View(f.Tenant, name)
	if where != "" {
		q += " WHERE " + where
	}
	if err := f.DB.Pool.QueryRow(context.Background(), q, args...).Scan(&n); err != nil {
		t.Fatalf("count %s: %v", name, err)
	}
	return n
}

// View is the tenant's view of one of the shared tables, in its FOLIO
// schema (see createViews): the tenant's rows only, for arranging state
// and checking it.
func View(t storage.Tenant, name postgres.TableName) string {
	return pgx.Identifier{t.Schema(), string(name)}.Sanitize()
}

// SetupLibrary is a fixture whose tenant load (the sample library's
// loader) filled.
func SetupLibrary(t testing.TB, load tenants.Loader) Fixture {
	t.Helper()
	return LibraryIn(t, sharedDB(t), load)
}

// LibraryIn is SetupLibrary's tenant, in db.
func LibraryIn(t testing.TB, db *postgres.DB, load tenants.Loader) Fixture {
	t.Helper()
	f := SetupTenant(t, db)
	tenants := tenants.NewTenants(f.DB, Discard, load)
	if _, err := tenants.Init(context.Background(), f.Tenant, storage.TenantAttributes{ModuleTo: "m",
		Parameters: []errs.Parameter{{Key: "loadSample", Value: "true"}}}); err != nil {
		t.Fatalf("load sample: %v", err)
	}
	return f
}

// IsCode reports whether err is a storage error with code.
func IsCode(err error, code string) bool {
	e, ok := errs.As(err)
	return ok && e.Code == code
}

// TTL is a lock's time to live in the tests: long enough that none
// expires unless the test expires it (expire).
const TTL = 30 * time.Second

// Expire moves a lock's expiry into the past, as if its TTL had passed.
func Expire(t *testing.T, f Fixture, id string) {
	t.Helper()
	f.Exec(t, "UPDATE "+View(f.Tenant, "check_out_lock")+
		" SET creation_date = now() - interval '2 minutes', expires_at = now() - interval '1 minute' WHERE id = $1", id)
}

// Holder is another client's transaction holding a row: Tx, on a
// connection of its own.
type Holder struct {
	conn *pgx.Conn
	Tx   pgx.Tx
}

// Hold locks the row of table whose id is id, in a transaction of a
// client of its own, FOR UPDATE: every write of the row waits for it, and
// so does every insert of a row that refers to it (its foreign key's
// check).
func Hold(t *testing.T, f Fixture, table postgres.TableName, id string) *Holder {
	t.Helper()
	return hold(t, f, table, id, "FOR UPDATE")
}

// HoldAsAWrite locks the row of table whose id is id as a write that
// changes none of its keys does (FOR NO KEY UPDATE), in a transaction of
// a client of its own: the writes of the row, and the statements that
// lock it so, wait for it; an insert of a row that refers to it does not.
func HoldAsAWrite(t *testing.T, f Fixture, table postgres.TableName, id string) *Holder {
	t.Helper()
	return hold(t, f, table, id, "FOR NO KEY UPDATE")
}

// hold is Hold and HoldAsAWrite, the row locked in mode.
func hold(t *testing.T, f Fixture, table postgres.TableName, id, mode string) *Holder {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, pgtest.Shared(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, "SELECT 1 FROM "+View(f.Tenant, table)+" WHERE id = $1 "+mode, id); err != nil {
		t.Fatal(err)
	}
	return &Holder{conn: conn, Tx: tx}
}

// Let ends the holder's transaction, letting the row go.
func (h *Holder) Let(t *testing.T) {
	t.Helper()
	if err := h.Tx.Rollback(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// Blocked is the server process waiting for h's row, 0 when none is.
func (h *Holder) Blocked(t *testing.T, f Fixture) int {
	t.Helper()
	var pid int
	if err := f.DB.Pool.QueryRow(context.Background(), `SELECT coalesce(max(pid), 0) FROM pg_stat_activity
		WHERE $1 = ANY (pg_blocking_pids(pid))`, h.conn.PgConn().PID()).Scan(&pid); err != nil {
		t.Fatal(err)
	}
	return pid
}

// Behind starts write in a goroutine of its own and returns once it waits
// for h's row, or has answered: its answer comes on the channel returned.
// what names the write in the failure of a wait that does not end.
func (h *Holder) Behind(t *testing.T, f Fixture, what string, write func() error) <-chan error {
	t.Helper()
	answer := make(chan error, 1)
	go func() { answer <- write() }()
	Eventually(t, what+" waiting for the held row, or answered", func() bool {
		return h.Blocked(t, f) != 0 || len(answer) != 0
	})
	return answer
}

// ReplyLoser makes a DB's connections and, once armed with a part of a
// statement's text, loses that statement's answer: when a connection sends
// the statement, it reads the server's messages and, at the next
// ReadyForQuery (the statement's implicit transaction is over: committed),
// closes the connection instead of handing the answer on. The server did
// the work; the client never hears of it, as when the network fails at
// that moment. One answer is lost per arming.
type ReplyLoser struct {
	mu     sync.Mutex
	marker []byte
	Lost   atomic.Int64
}

// Arm loses the answer of the next statement sent that holds marker.
func (l *ReplyLoser) Arm(marker string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.marker = []byte(marker)
}

// sent says whether b sends the armed statement, and disarms if so.
func (l *ReplyLoser) sent(b []byte) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.marker == nil || !bytes.Contains(b, l.marker) {
		return false
	}
	l.marker = nil
	return true
}

func (l *ReplyLoser) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	conn, err := (&net.Dialer{}).DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	return &losingConn{Conn: conn, l: l}, nil
}

// losingConn reads the server's messages whole (a type byte, then a
// length that counts itself), so that it can stop before a ReadyForQuery.
type losingConn struct {
	net.Conn
	l       *ReplyLoser
	mu      sync.Mutex
	pending []byte // read from the server, not yet handed on
	// lose says the armed statement was sent on this connection: its
	// answer is lost, at the ReadyForQuery after its CommandComplete
	// (pgx may prepare it first: that answer goes through).
	lose     atomic.Bool
	complete bool
}

func (c *losingConn) Write(b []byte) (int, error) {
	if c.l.sent(b) {
		c.lose.Store(true)
	}
	return c.Conn.Write(b)
}

func (c *losingConn) Read(b []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for {
		// Hand on the whole messages read, up to one that completes a
		// statement while armed.
		n := 0
		for n+5 <= len(c.pending) {
			size := int(binary.BigEndian.Uint32(c.pending[n+1:n+5])) + 1
			if n+size > len(c.pending) {
				break
			}
			if c.pending[n] == 'C' && c.lose.Load() {
				c.complete = true
			}
			if c.pending[n] == 'Z' && c.complete && c.lose.CompareAndSwap(true, false) {
				c.l.Lost.Add(1)
				_ = c.Conn.Close()
				if n == 0 {
					return 0, net.ErrClosed
				}
				c.pending = c.pending[:n]
				break
			}
			n += size
		}
		if n > 0 {
			out := copy(b, c.pending[:n])
			c.pending = c.pending[out:]
			return out, nil
		}
		buf := make([]byte, 32<<10)
		m, err := c.Conn.Read(buf)
		c.pending = append(c.pending, buf[:m]...)
		if err != nil {
			if len(c.pending) > 0 {
				out := copy(b, c.pending)
				c.pending = c.pending[out:]
				return out, nil
			}
			return 0, err
		}
	}
}

// LoserDB is a database reached through a ReplyLoser, with a tenant.
func LoserDB(t *testing.T) (*ReplyLoser, Fixture) {
	t.Helper()
	// In plain text, so that the messages can be read.
	var l ReplyLoser
	db, err := postgres.OpenWithDial(context.Background(), PlainURL(t), postgres.PoolConfig{MaxConns: 4, LockCommit: "off"}, l.dial)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(db.Close)
	return &l, SetupTenant(t, db)
}

// PlainURL is the shared test database's URL without TLS, so that a test
// reading or cutting the connection (a dial of its own) can tell its
// messages.
func PlainURL(t *testing.T) string {
	t.Helper()
	u, err := url.Parse(pgtest.Shared(t))
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("sslmode", "disable")
	u.RawQuery = q.Encode()
	return u.String()
}

// Eventually waits until cond holds, failing the test after 10 s: for
// state a test cannot be told of (a write waiting in another goroutine, a
// lock held by another process), polled every millisecond.
func Eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 10 s", what)
		}
		time.Sleep(time.Millisecond) // polling, with a deadline
	}
}
