package postgres

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"net"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	storage "github.com/checkoutlock/circulation-storage"
	"github.com/checkoutlock/circulation-storage/internal/pgtest"
	"github.com/checkoutlock/circulation-storage/login"
)

// replyLoser makes a DB's connections and, once armed with a part of a
// statement's text, loses that statement's answer: when a connection sends
// the statement, it reads the server's messages and, at the next
// ReadyForQuery (the statement's implicit transaction is over: committed),
// closes the connection instead of handing the answer on. The server did
// the work; the client never hears of it, as when the network fails at
// that moment. One answer is lost per arming.
type replyLoser struct {
	mu     sync.Mutex
	marker []byte
	lost   atomic.Int64
}

// arm loses the answer of the next statement sent that holds marker.
func (l *replyLoser) arm(marker string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.marker = []byte(marker)
}

// sent says whether b sends the armed statement, and disarms if so.
func (l *replyLoser) sent(b []byte) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.marker == nil || !bytes.Contains(b, l.marker) {
		return false
	}
	l.marker = nil
	return true
}

func (l *replyLoser) dial(ctx context.Context, network, addr string) (net.Conn, error) {
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
	l       *replyLoser
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
				c.l.lost.Add(1)
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

// loserDB is a database reached through a replyLoser, with a tenant.
func loserDB(t *testing.T) (*replyLoser, fixture) {
	t.Helper()
	// In plain text, so that the messages can be read.
	u, err := url.Parse(pgtest.Shared(t))
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("sslmode", "disable")
	u.RawQuery = q.Encode()
	var l replyLoser
	db, err := open(context.Background(), u.String(), PoolConfig{MaxConns: 4, LockCommit: "off"}, l.dial)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(db.Close)
	return &l, setupTenant(t, db)
}

// TestAnAcquireWhoseAnswerIsLostAnswersItsLock: an acquisition that names
// no lock id commits, and its answer is lost; the pool runs the statement
// again on a fresh connection. The caller is answered the lock it took
// (renewed by its second run: the id was chosen before the first), not
// told that someone (itself) holds the patron's lock.
func TestAnAcquireWhoseAnswerIsLostAnswersItsLock(t *testing.T) {
	t.Parallel()
	l, f := loserDB(t)
	ctx := context.Background()
	user := uuid.NewString()
	holder := storage.Holder{AcquiredBy: "kiosk-1", AcquiredByModule: "circulation"}
	l.arm("INSERT INTO")
	lock, outcome, err := NewLocks(f.db).Acquire(ctx, f.tenant, user, "", 30*time.Second, holder)
	if l.lost.Load() != 1 {
		t.Fatalf("%d answers lost, want 1", l.lost.Load())
	}
	if err != nil || lock.ID == "" || outcome != storage.Renewed {
		t.Fatalf("the acquisition run again: %+v, %v, %v; want its own lock, renewed", lock, outcome, err)
	}
	if n := f.count(t, tableLock, "id = $1 AND user_id = $2", lock.ID, user); n != 1 {
		t.Errorf("%d locks with the id answered, want the one taken", n)
	}
}

// TestARefreshWhoseAnswerIsLostAnswersItsTokens: a refresh's rotation
// commits and its answer is lost; the pool runs it again. The caller is
// answered the rotation it made, and the session lives on.
func TestARefreshWhoseAnswerIsLostAnswersItsTokens(t *testing.T) {
	t.Parallel()
	l, f := loserDB(t)
	ctx := context.Background()
	tenant := string(f.tenant)
	svc := login.New(NewAccounts(f.db), login.Config{Secret: "a secret of at least thirty-two characters",
		AccessTTL: time.Minute, RefreshTTL: time.Hour, MaxFailures: 5, MaxAddressFailures: 20,
		FailureWindow: time.Hour, Lockout: time.Hour, KnownFor: time.Hour, Hashes: 2})
	lf := &loginFixture{fixture: f, svc: svc}
	const password = "correct horse battery staple"
	lf.account(t, "ada", password)
	first, err := svc.Login(ctx, tenant, "ada", password, "192.0.2.1")
	if err != nil {
		t.Fatal(err)
	}
	l.arm("refresh_reused")
	next, err := svc.Refresh(ctx, tenant, first.Refresh)
	if l.lost.Load() != 1 {
		t.Fatalf("%d answers lost, want 1", l.lost.Load())
	}
	if err != nil || next.Refresh == "" {
		t.Fatalf("the refresh run again: %v; want its tokens", err)
	}
	var sid string
	h := sha256.Sum256([]byte(next.Refresh))
	if err := f.db.pool.QueryRow(ctx, `SELECT session_id::text FROM `+view(f.tenant, tableRefreshToken)+` WHERE hash = $1`, h[:]).Scan(&sid); err != nil {
		t.Fatal(err)
	}
	if alive, err := svc.SessionAlive(ctx, tenant, sid); err != nil || !alive {
		t.Errorf("the session after a refresh whose answer was lost: alive %v, %v", alive, err)
	}
}
