package lending

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/google/uuid"

	storage "github.com/checkoutlock/circulation-storage"
	"github.com/checkoutlock/circulation-storage/internal/dbtest"
	"github.com/checkoutlock/circulation-storage/internal/postgres"
	"github.com/checkoutlock/circulation-storage/internal/sample"
	"github.com/checkoutlock/schemas"
)

// The check-out writes circulation sends while it waits for the lock at
// storage: each takes the patron's lock in its own transaction
// (CheckOutWrite.AcquireInWrite), so a patron's scans at once queue for
// the lock's row in PostgreSQL, each write after the commit of the one
// before.

// acquiringWrite is a check-out write of item to user that takes the
// patron's lock itself.
func acquiringWrite(loanID, user, item string) storage.CheckOutWrite {
	return storage.CheckOutWrite{LoanID: loanID, UserID: user, Loan: loanDoc(user, item), LockID: uuid.NewString(),
		ItemVersion: 1, ReleaseLock: true, AcquireInWrite: &storage.LockTerms{TTL: dbtest.TTL}}
}

// acquiringPatron makes a patron of group in f's tenant.
func acquiringPatron(t *testing.T, lib library, f dbtest.Fixture, group, barcode string) string {
	t.Helper()
	user := uuid.NewString()
	if _, err := lib.Create(context.Background(), f.Tenant, storage.Patrons, user, json.RawMessage(fmt.Sprintf(
		`{"barcode":%q,"active":true,"patronGroup":%q,"personal":{"lastName":"Scanner"}}`, barcode, group))); err != nil {
		t.Fatal(err)
	}
	return user
}

// TestAPatronsAcquiringWritesAtOnceKeepTheLimit: twenty check-out writes
// of one patron at once, each taking the patron's lock in its write, five
// rounds, for an undergraduate with room for three loans, on the sample
// library (whose request makes its writes run in full) and on the same
// without it (lean writes): exactly three written, by three transactions,
// seventeen refused at the limit, no lock row left.
func TestAPatronsAcquiringWritesAtOnceKeepTheLimit(t *testing.T) {
	t.Parallel()
	for _, lib := range []struct {
		name string
		f    dbtest.Fixture
	}{{"full", dbtest.SetupLibrary(t, sample.LoadData)}, {"lean", setupLeanLibrary(t)}} {
		f := lib.f
		l := newLibrary(f.DB, testPolicy)
		const rounds, writers, room = 5, 20, 3
		for round := range rounds {
			user := acquiringPatron(t, l, f, sample.GroupUndergrad, fmt.Sprintf("scans-%d", round))
			errs := atOnce(writers, func(i int) error {
				// Books 21 on: book-020 is held for Bob.
				item := sample.ID(fmt.Sprintf("book-%03d", 21+round*writers+i))
				_, err := l.CreateCheckOutLoan(context.Background(), f.Tenant, acquiringWrite(uuid.NewString(), user, item))
				return err
			})
			wantRoomFilled(t, f, round, user, errs, room, schemas.CodeItemLimitReached)
			if n := f.Count(t, postgres.TableLock, "user_id = $1", user); n != 0 {
				t.Errorf("%s, round %d: %d lock rows left for the patron, want none", lib.name, round, n)
			}
			var commits int
			if err := f.DB.Pool.QueryRow(context.Background(), "SELECT count(DISTINCT xmin::text) FROM "+postgres.Table(postgres.TableLoan)+
				" WHERE tenant_id = $2 AND user_id = $1", user, string(f.Tenant)).Scan(&commits); err != nil {
				t.Fatal(err)
			}
			if commits != room {
				t.Errorf("%s, round %d: the %d loans were written by %d transactions, want one each", lib.name, round, room, commits)
			}
		}
		if lib.name == "lean" && f.DB.Gates.Has(f.Tenant) {
			t.Errorf("tenant %s without a gate row was written in full", f.Tenant)
		}
	}
}

// TestACheckOutWritePastItsDeadlineWritesNothing: a check-out write whose
// caller's deadline passes while it waits in PostgreSQL for its item's row
// is cut at the deadline on storage's side; the cancel request that cut
// sends is lost (as on a network failing at that moment), so its server
// process goes on waiting. Once the row is free, the write's statement,
// past the deadline on PostgreSQL's clock, writes nothing: no loan, the
// item on the shelf, no lock row. In full and lean.
func TestACheckOutWritePastItsDeadlineWritesNothing(t *testing.T) {
	t.Parallel()
	// In plain text, so that the dial can tell a cancel request.
	db, err := postgres.OpenWithDial(context.Background(), dbtest.PlainURL(t), postgres.PoolConfig{MaxConns: 4, LockCommit: "off"},
		dialLosingCancels)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(db.Close)
	for _, lib := range []struct {
		name string
		f    dbtest.Fixture
	}{{"full", dbtest.LibraryIn(t, db, sample.LoadData)}, {"lean", lean(t, dbtest.LibraryIn(t, db, sample.LoadData))}} {
		f := lib.f
		l := newLibrary(f.DB, testPolicy)
		// Room for the loan: a faculty member.
		user := acquiringPatron(t, l, f, sample.GroupFaculty, "late-"+lib.name)
		item, loanID := sample.ID("book-021"), uuid.NewString()
		held := dbtest.Hold(t, f, postgres.TableItem, item)
		const within = 2 * time.Second
		ctx, cancel := context.WithTimeout(context.Background(), within)
		answer := make(chan error, 1)
		go func() {
			_, err := l.CreateCheckOutLoan(ctx, f.Tenant, acquiringWrite(loanID, user, item))
			answer <- err
		}()
		var pid int
		dbtest.Eventually(t, "the write waiting for the held item", func() bool { pid = held.Blocked(t, f); return pid != 0 })
		// A pid alone does not name the process: the server reuses it.
		var started time.Time
		if err := f.DB.Pool.QueryRow(context.Background(), `SELECT backend_start FROM pg_stat_activity WHERE pid = $1`, pid).
			Scan(&started); err != nil {
			t.Fatal(err)
		}
		running := func() bool {
			var running bool
			if err := f.DB.Pool.QueryRow(context.Background(), `SELECT EXISTS (SELECT 1 FROM pg_stat_activity
				WHERE pid = $1 AND backend_start = $2)`, pid, started).Scan(&running); err != nil {
				t.Fatal(err)
			}
			return running
		}
		<-ctx.Done()
		cancel()
		// The deadline reaches PostgreSQL as the time left when the write
		// was sent, counted from when its transaction began: later, by the
		// time the write took to arrive. Past it on PostgreSQL's clock too
		// (the time left was at most the whole timeout):
		dbtest.Eventually(t, "the deadline past on PostgreSQL's clock", func() bool {
			var past bool
			if err := f.DB.Pool.QueryRow(context.Background(), `SELECT clock_timestamp() > xact_start + $2::bigint * interval '1 millisecond'
				FROM pg_stat_activity WHERE pid = $1`, pid, within.Milliseconds()).Scan(&past); err != nil {
				t.Fatal(err)
			}
			return past
		})
		if !running() {
			t.Fatalf("%s: the write's server process ended while the row it waits for is held: its cancel request was not lost", lib.name)
		}
		held.Let(t)
		select {
		case err := <-answer:
			if err == nil {
				t.Errorf("%s: the write past its deadline answered written", lib.name)
			}
		case <-time.After(15 * time.Second):
			t.Fatalf("%s: the write past its deadline never answered", lib.name)
		}
		// Its server process, free of the row, runs the write and ends on
		// the connection gone.
		dbtest.Eventually(t, "the write's server process ended", func() bool { return !running() })
		if n := f.Count(t, postgres.TableLoan, "id = $1", loanID); n != 0 {
			t.Errorf("%s: the write past its deadline stored its loan", lib.name)
		}
		var status string
		if err := f.DB.Pool.QueryRow(context.Background(), `SELECT status_name FROM `+postgres.Table(postgres.TableItem)+
			` WHERE tenant_id = $2 AND id = $1`, item, string(f.Tenant)).Scan(&status); err != nil {
			t.Fatal(err)
		}
		if status != "Available" {
			t.Errorf("%s: the item of the write past its deadline is %q, want Available", lib.name, status)
		}
		if n := f.Count(t, postgres.TableLock, "user_id = $1", user); n != 0 {
			t.Errorf("%s: %d lock rows left for the patron, want none", lib.name, n)
		}
	}
}

// dialLosingCancels dials connections whose cancel requests never arrive:
// pgx sends one as it closes a connection whose caller has left.
func dialLosingCancels(ctx context.Context, network, addr string) (net.Conn, error) {
	conn, err := (&net.Dialer{}).DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	return cancelsLost{Conn: conn}, nil
}

// cancelsLost is a connection that drops a cancel request (its length, 16,
// then its code, 80877102) instead of sending it.
type cancelsLost struct{ net.Conn }

func (c cancelsLost) Write(b []byte) (int, error) {
	if len(b) == 16 && binary.BigEndian.Uint32(b[4:8]) == 80877102 {
		_ = c.Conn.Close()
		return 0, net.ErrClosed
	}
	return c.Conn.Write(b)
}
