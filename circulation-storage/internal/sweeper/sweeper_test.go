package sweeper

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/checkoutlock/circulation-storage/internal/dbtest"
	"github.com/checkoutlock/circulation-storage/internal/locks"
	"github.com/checkoutlock/circulation-storage/internal/postgres"
	"github.com/checkoutlock/circulation-storage/internal/recordstore"
	"github.com/checkoutlock/circulation-storage/internal/sample"
	"github.com/checkoutlock/schemas"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	storage "github.com/checkoutlock/circulation-storage"
	"github.com/checkoutlock/circulation-storage/internal/pgtest"
)

// TestOneInstanceSweepsAtATime: while another instance's pass holds the
// sweeper's lock, a pass is skipped and deletes nothing; once it is free,
// the pass sweeps.
func TestOneInstanceSweepsAtATime(t *testing.T) {
	t.Parallel()
	// A database of its own: the sweeper's lock is the database's.
	url := pgtest.Fresh(t)
	db := dbtest.OpenDB(t, url)
	f := dbtest.SetupTenant(t, db)
	ctx := context.Background()
	anExpiredLock(t, ctx, f)
	other, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close(ctx)
	if _, err := other.Exec(ctx, `SELECT pg_advisory_lock($1)`, sweeperLock); err != nil {
		t.Fatal(err)
	}
	sweeper := NewSweeper(db, dbtest.Discard, SweeperConfig{BatchSize: 10})
	if n, swept, err := sweeper.TrySweepOnce(ctx); err != nil || swept || n != 0 {
		t.Errorf("a pass while another sweeps: deleted %d, swept %t, %v; want it skipped", n, swept, err)
	}
	if n := f.Count(t, postgres.TableLock, ""); n != 1 {
		t.Errorf("%d locks after the skipped pass, want the expired one still there", n)
	}
	if _, err := other.Exec(ctx, `SELECT pg_advisory_unlock($1)`, sweeperLock); err != nil {
		t.Fatal(err)
	}
	if n, swept, err := sweeper.TrySweepOnce(ctx); err != nil || !swept || n != 1 {
		t.Errorf("a pass with the lock free: deleted %d, swept %t, %v; want the one expired lock", n, swept, err)
	}
	// The pass let go of the lock: another instance can take it.
	var free bool
	if err := other.QueryRow(ctx, `SELECT pg_try_advisory_lock($1)`, sweeperLock).Scan(&free); err != nil || !free {
		t.Errorf("the sweeper's lock after a pass: free %t, %v", free, err)
	}
}

// TestRunReportsEveryPass: Run tells OnPass of each pass, swept, or
// skipped while another instance holds the sweeper's lock.
func TestRunReportsEveryPass(t *testing.T) {
	t.Parallel()
	url := pgtest.Fresh(t)
	db := dbtest.OpenDB(t, url)
	dbtest.SetupTenant(t, db)
	passes := make(chan string, 100)
	sweeper := NewSweeper(db, dbtest.Discard, SweeperConfig{BatchSize: 10,
		OnPass: func(d time.Duration, result string) {
			if d <= 0 {
				result = "no time"
			}
			select {
			case passes <- result:
			default:
			}
		}})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); sweeper.Run(ctx, 10*time.Millisecond) }()
	defer func() { cancel(); <-done }()
	next := func() string {
		select {
		case r := <-passes:
			return r
		case <-time.After(5 * time.Second):
			t.Fatal("no pass reported within 5 s")
			return ""
		}
	}
	if r := next(); r != "swept" {
		t.Fatalf("first pass %q, want swept", r)
	}
	other, err := pgx.Connect(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close(context.Background())
	if _, err := other.Exec(context.Background(), `SELECT pg_advisory_lock($1)`, sweeperLock); err != nil {
		t.Fatal(err)
	}
	// Passes reported before the lock was taken are dropped; one may
	// have been under way: one of the next two is skipped.
	for drained := false; !drained; {
		select {
		case <-passes:
		default:
			drained = true
		}
	}
	if a, b := next(), next(); a != "skipped" && b != "skipped" {
		t.Errorf("passes while another instance sweeps: %q, %q; want skipped", a, b)
	}
}

// TestSweepForgetsStaleSignIns: the sweeper deletes counts whose window
// has passed that lock nothing, have no attempt being checked (one
// admitted longer ago than a check can last counts as none) and mark no
// sign-in within KnownFor, sessions expired or ended a day ago with their
// refresh tokens, and expired refresh tokens; it keeps the rest, a live
// session's taken tokens included (a taken one used again must still end
// it): sign-ins with made-up names cannot grow the tables for longer than
// a window.
func TestSweepForgetsStaleSignIns(t *testing.T) {
	t.Parallel()
	db := dbtest.OpenDB(t, pgtest.Fresh(t))
	f := dbtest.SetupTenant(t, db)
	ctx := context.Background()
	account := uuid.NewString()
	f.Exec(t, `INSERT INTO `+dbtest.View(f.Tenant, postgres.TableAccount)+` (id, jsonb) VALUES ($1, '{"username":"ada","roles":[]}')`, account)
	f.Exec(t, `INSERT INTO `+dbtest.View(f.Tenant, postgres.TableLoginFailure)+` (key, failures, first_at, locked_until, succeeded_at, checking, checking_at) VALUES
		('account:stale', 3, now() - interval '16 minutes', NULL, NULL, 0, NULL),
		('account:locked', 5, now() - interval '2 days', now() + interval '1 hour', NULL, 0, NULL),
		('account:fresh', 1, now() - interval '14 minutes', NULL, NULL, 0, NULL),
		('pair:checking', 0, now() - interval '1 hour', NULL, NULL, 2, now()),
		('pair:checked-long-ago', 0, now() - interval '1 hour', NULL, NULL, 1, now() - interval '1 hour'),
		('pair:known', 0, now() - interval '2 days', NULL, now() - interval '1 day', 0, NULL),
		('pair:forgotten', 0, now() - interval '40 days', NULL, now() - interval '40 days', 0, NULL)`)
	live, ended, expired := uuid.NewString(), uuid.NewString(), uuid.NewString()
	f.Exec(t, `INSERT INTO `+dbtest.View(f.Tenant, postgres.TableLoginSession)+` (id, account_id, expires_at, ended_at) VALUES
		(@live, @account, now() + interval '1 day', NULL),
		(@ended, @account, now() + interval '1 day', now() - interval '2 days'),
		(@expired, @account, now() - interval '2 days', NULL)`,
		pgx.StrictNamedArgs{"live": live, "ended": ended, "expired": expired, "account": account})
	f.Exec(t, `INSERT INTO `+dbtest.View(f.Tenant, postgres.TableRefreshToken)+` (hash, account_id, session_id, expires_at, revoked_at) VALUES
		('\x01', @account, @live, now() - interval '1 minute', NULL),
		('\x02', @account, @live, now() + interval '1 day', now() - interval '2 days'),
		('\x03', @account, @live, now() + interval '1 day', now()),
		('\x04', @account, @live, now() + interval '1 day', NULL),
		('\x05', @account, @ended, now() + interval '1 day', NULL),
		('\x06', @account, @expired, now() + interval '1 day', NULL)`,
		pgx.StrictNamedArgs{"account": account, "live": live, "ended": ended, "expired": expired})
	if _, err := NewSweeper(db, dbtest.Discard, SweeperConfig{BatchSize: 10, KnownFor: 30 * 24 * time.Hour, LoginWindow: 15 * time.Minute}).SweepOnce(ctx); err != nil {
		t.Fatal(err)
	}
	var failures, sessions, tokens string
	f.DB.Pool.QueryRow(ctx, `SELECT string_agg(key, ',' ORDER BY key) FROM `+dbtest.View(f.Tenant, postgres.TableLoginFailure)).Scan(&failures)
	f.DB.Pool.QueryRow(ctx, `SELECT string_agg(id::text, ',') FROM `+dbtest.View(f.Tenant, postgres.TableLoginSession)).Scan(&sessions)
	f.DB.Pool.QueryRow(ctx, `SELECT string_agg(encode(hash, 'hex'), ',' ORDER BY hash) FROM `+dbtest.View(f.Tenant, postgres.TableRefreshToken)).Scan(&tokens)
	if failures != "account:fresh,account:locked,pair:checking,pair:known" || sessions != live || tokens != "02,03,04" {
		t.Errorf("after a sweep: counts %q, sessions %q, refresh tokens %q; want account:fresh,account:locked,pair:checking,pair:known, %s and 02,03,04",
			failures, sessions, tokens, live)
	}
}

// TestSweepForgetsWritesPastTheirDay: the writes' ids older than
// storage.WriteKeptFor are deleted, a batch at a time; younger ones are
// kept, each still answering its write.
func TestSweepForgetsWritesPastTheirDay(t *testing.T) {
	t.Parallel()
	db := dbtest.OpenDB(t, pgtest.Fresh(t))
	f := dbtest.SetupTenant(t, db)
	kept := uuid.NewString()
	f.Exec(t, `INSERT INTO `+postgres.Table(postgres.TableWriteLog)+` (tenant_id, id, kind, written_at)
		SELECT $1, gen_random_uuid(), 'check-out', now() - $2::double precision * interval '1 second' - interval '1 minute' FROM generate_series(1, 25)`,
		string(f.Tenant), storage.WriteKeptFor.Seconds())
	f.Exec(t, `INSERT INTO `+postgres.Table(postgres.TableWriteLog)+` (tenant_id, id, kind, written_at)
		VALUES ($1, $2, 'check-in', now() - $3::double precision * interval '1 second' + interval '1 minute')`,
		string(f.Tenant), kept, storage.WriteKeptFor.Seconds())
	if _, err := NewSweeper(db, dbtest.Discard, SweeperConfig{BatchSize: 10}).SweepOnce(context.Background()); err != nil {
		t.Fatal(err)
	}
	var left string
	if err := db.Pool.QueryRow(context.Background(), `SELECT string_agg(id::text, ',') FROM `+postgres.Table(postgres.TableWriteLog)+` WHERE tenant_id = $1`,
		string(f.Tenant)).Scan(&left); err != nil {
		t.Fatal(err)
	}
	if left != kept {
		t.Errorf("writes' ids left after a sweep: %q, want only the one within its day, %s", left, kept)
	}
}

// TestAFrozenPassLetsGoOfTheSweep: a pass that holds the sweeper's lock
// and then falls silent (its process frozen in the middle of the pass)
// loses it once its connection has been idle the pass timeout: another
// instance sweeps after it, and the frozen one, thawed, gives back what
// it holds.
func TestAFrozenPassLetsGoOfTheSweep(t *testing.T) {
	t.Parallel()
	url := pgtest.Fresh(t)
	db := dbtest.OpenDB(t, url)
	f := dbtest.SetupTenant(t, db)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	anExpiredLock(t, ctx, f)
	frozen := NewSweeper(db, dbtest.Discard, SweeperConfig{BatchSize: 10})
	frozen.passTimeout = 2 * time.Second
	release, swept, err := frozen.takeSweep(ctx)
	if err != nil || !swept {
		t.Fatalf("take the sweep: swept %t, %v", swept, err)
	}
	other := NewSweeper(db, dbtest.Discard, SweeperConfig{BatchSize: 10})
	if _, swept, err := other.TrySweepOnce(ctx); err != nil || swept {
		t.Fatalf("a pass while the frozen one holds the lock: swept %t, %v; want it skipped", swept, err)
	}
	start := time.Now()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		n, swept, err := other.TrySweepOnce(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if swept {
			if n != 1 {
				t.Errorf("the pass after the frozen one deleted %d locks, want the expired one", n)
			}
			break
		}
		if time.Since(start) > 10*time.Second {
			t.Fatal("the frozen pass still holds the sweeper's lock 10 s later")
		}
		<-tick.C
	}
	t.Logf("another instance swept %s after the frozen pass's last statement", time.Since(start).Round(time.Millisecond))
	release()
	if _, swept, err := other.TrySweepOnce(ctx); err != nil || !swept {
		t.Errorf("a pass after the frozen one gave back its connection: swept %t, %v", swept, err)
	}
}

func TestSweeperDeletesOnlyExpiredLocksOfEveryTenant(t *testing.T) {
	t.Parallel()
	// A database of its own: the sweeper looks at every tenant in it.
	db := dbtest.OpenDB(t, pgtest.Fresh(t))
	a, b := dbtest.SetupTenant(t, db), dbtest.SetupTenant(t, db)
	ctx := context.Background()
	var live []string
	for _, f := range []dbtest.Fixture{a, b} {
		for i := range 7 {
			l, _, err := locks.NewLocks(f.DB).Acquire(ctx, f.Tenant, uuid.NewString(), "", dbtest.TTL, storage.Holder{})
			if err != nil {
				t.Fatal(err)
			}
			if i < 5 {
				dbtest.Expire(t, f, l.ID)
			} else {
				live = append(live, l.ID)
			}
		}
	}
	var reported int
	sw := NewSweeper(db, dbtest.Discard, SweeperConfig{BatchSize: 2, OnDeleted: func(n int) { reported += n }, History: true})
	deleted, err := sw.SweepOnce(ctx)
	if err != nil {
		t.Fatalf("sweep: %v", err)
	}
	if deleted != 10 || reported != 10 {
		t.Errorf("deleted %d (reported %d), want 10 in batches of 2", deleted, reported)
	}
	for _, f := range []dbtest.Fixture{a, b} {
		if n := f.Count(t, "check_out_lock", ""); n != 2 {
			t.Errorf("tenant %s: %d rows left, want the 2 live locks", f.Tenant, n)
		}
	}
	// Each swept lock is in its tenant's history as expired while held.
	for _, f := range []dbtest.Fixture{a, b} {
		if n := f.Count(t, "check_out_lock_event", "type = 'expired' AND lock_id IS NOT NULL"); n != 5 {
			t.Errorf("tenant %s: %d expired events, want 5", f.Tenant, n)
		}
	}
	if deleted, err := sw.SweepOnce(ctx); err != nil || deleted != 0 {
		t.Errorf("second sweep deleted %d, %v; want 0", deleted, err)
	}
	// The history is trimmed to its bounds: the newest 3, then none older
	// than the retention.
	sw = NewSweeper(db, dbtest.Discard, SweeperConfig{BatchSize: 2, History: true, Retention: time.Hour, MaxEvents: 3})
	if _, err := sw.SweepOnce(ctx); err != nil {
		t.Fatal(err)
	}
	a.Exec(t, "UPDATE "+dbtest.View(a.Tenant, "check_out_lock_event")+" SET occurred_at = now() - interval '2 hours'")
	if _, err := sw.SweepOnce(ctx); err != nil {
		t.Fatal(err)
	}
	if na, nb := a.Count(t, "check_out_lock_event", ""), b.Count(t, "check_out_lock_event", ""); na != 0 || nb != 3 {
		t.Errorf("events after trimming: %d and %d, want 0 (all past retention) and 3 (the bound)", na, nb)
	}
	for i, id := range live {
		f := []dbtest.Fixture{a, a, b, b}[i]
		if _, err := locks.NewLocks(f.DB).Get(ctx, f.Tenant, id); err != nil {
			t.Errorf("live lock %s after the sweep: %v", id, err)
		}
	}
}

// TestRequestsPastTheirHoldShelfDateAreClosed: the sweeper closes a
// request left on the hold shelf past its holdShelfExpirationDate
// (Closed - Pickup expired, its position given up) and hands its item to
// the next request of the queue, waiting at the same pickup point: the
// item stays on the hold shelf for it, the request Open - Awaiting pickup
// with a date of its own (the desk's holdShelfExpiryPeriod from now); a
// request whose date has not come, and a queue's last request once past
// its date, are handled as such: the item then goes back on the shelf,
// Available. Each change is announced (FOLIO's hold shelf clearance).
func TestRequestsPastTheirHoldShelfDateAreClosed(t *testing.T) {
	t.Parallel()
	// A database of its own: the sweeper looks at every tenant in it.
	db := dbtest.OpenDB(t, pgtest.Fresh(t))
	f := dbtest.LibraryIn(t, db, sample.LoadData)
	ctx := context.Background()
	rec := recordstore.NewRecords(db)
	desk := sample.ServicePointDesk1
	var sp map[string]any
	if doc, err := rec.Get(ctx, f.Tenant, storage.ServicePoints, desk); err != nil || json.Unmarshal(doc, &sp) != nil {
		t.Fatalf("the desk: %v", err)
	}
	sp["holdShelfExpiryPeriod"] = map[string]any{"duration": 2, "intervalId": "Days"}
	delete(sp, "metadata")
	doc, _ := json.Marshal(sp)
	if err := rec.Update(ctx, f.Tenant, storage.ServicePoints, desk, 0, doc); err != nil {
		t.Fatal(err)
	}
	item := sample.ID("book-030")
	request := func(patron, status string, position int, expires string) string {
		t.Helper()
		d := map[string]any{"requestType": "Hold", "requestLevel": "Item", "requestDate": "2026-01-01T10:00:00.000Z",
			"requesterId": sample.ID(patron), "itemId": item, "status": status, "position": position,
			"fulfillmentPreference": "Hold Shelf", "pickupServicePointId": desk}
		if expires != "" {
			d["holdShelfExpirationDate"] = expires
		}
		doc, _ := json.Marshal(d)
		stored, err := rec.Create(ctx, f.Tenant, storage.Requests, uuid.NewString(), doc)
		if err != nil {
			t.Fatal(err)
		}
		var out struct{ ID string }
		_ = json.Unmarshal(stored, &out)
		return out.ID
	}
	f.Exec(t, "UPDATE "+dbtest.View(f.Tenant, "item")+` SET jsonb = jsonb_set(jsonb, '{status,name}', '"Awaiting pickup"') WHERE id = $1`, item)
	first := request("1002", "Open - Awaiting pickup", 1, schemas.FormatTime(time.Now().Add(-time.Hour)))
	second := request("1003", "Open - Not yet filled", 2, "")
	sw := NewSweeper(db, dbtest.Discard, SweeperConfig{BatchSize: 10})
	events := f.Count(t, postgres.TableOutbox, "")
	if _, err := sw.SweepOnce(ctx); err != nil {
		t.Fatal(err)
	}
	state := func(id string) (status, position, expires string) {
		t.Helper()
		err := db.Pool.QueryRow(ctx, "SELECT jsonb ->> 'status', coalesce(jsonb ->> 'position', ''), coalesce(jsonb ->> 'holdShelfExpirationDate', '') FROM "+
			dbtest.View(f.Tenant, "request")+" WHERE id = $1", id).Scan(&status, &position, &expires)
		if err != nil {
			t.Fatal(err)
		}
		return status, position, expires
	}
	if s, p, _ := state(first); s != "Closed - Pickup expired" || p != "" {
		t.Errorf("the request past its date: %q at %q, want Closed - Pickup expired, no position", s, p)
	}
	s, p, e := state(second)
	at, err := schemas.ParseDateTime(e)
	if s != "Open - Awaiting pickup" || p != "1" || err != nil || at.Before(time.Now().Add(47*time.Hour)) || at.After(time.Now().Add(49*time.Hour)) {
		t.Errorf("the next request: %q at %q until %q, want Open - Awaiting pickup at 1 for two days", s, p, e)
	}
	if n := f.Count(t, "item", "id = $1 AND status_name = 'Awaiting pickup'", item); n != 1 {
		t.Error("the item left the hold shelf, want it kept for the next request")
	}
	if n := f.Count(t, postgres.TableOutbox, "") - events; n < 2 {
		t.Errorf("%d events announced, want the two requests' changes at least", n)
	}
	// Not yet past its date: left alone.
	if _, err := sw.SweepOnce(ctx); err != nil {
		t.Fatal(err)
	}
	if s, _, _ := state(second); s != "Open - Awaiting pickup" {
		t.Errorf("a request before its date after a sweep: %q", s)
	}
	// The last request, once past its date: the item goes back on the shelf.
	f.Exec(t, "UPDATE "+dbtest.View(f.Tenant, "request")+` SET jsonb = jsonb_set(jsonb, '{holdShelfExpirationDate}', to_jsonb($2::text)) WHERE id = $1`,
		second, schemas.FormatTime(time.Now().Add(-time.Minute)))
	if _, err := sw.SweepOnce(ctx); err != nil {
		t.Fatal(err)
	}
	if s, _, _ := state(second); s != "Closed - Pickup expired" {
		t.Errorf("the last request past its date: %q, want Closed - Pickup expired", s)
	}
	if n := f.Count(t, "item", "id = $1 AND status_name = 'Available'", item); n != 1 {
		t.Error("the item with no request left: not Available")
	}
}

// TestEachWorkOfAPassIsDoneOnItsOwn: a pass whose lock sweep fails (its
// DELETE refused by a trigger, as a bug or a broken row would refuse it),
// and one of whose two requests past their hold shelf date cannot be
// closed (its write refused likewise), still closes the other request; each
// failure is told of (OnWork) and logged, the pass answers them, and the
// next pass tries them again, doing them once they can be done.
func TestEachWorkOfAPassIsDoneOnItsOwn(t *testing.T) {
	t.Parallel()
	// A database of its own: the sweeper looks at every tenant in it, and
	// the triggers are on its shared tables.
	db := dbtest.OpenDB(t, pgtest.Fresh(t))
	f := dbtest.LibraryIn(t, db, sample.LoadData)
	ctx := context.Background()
	rec := recordstore.NewRecords(db)
	past := schemas.FormatTime(time.Now().Add(-time.Hour))
	onShelf := func(item string) string {
		t.Helper()
		f.Exec(t, "UPDATE "+dbtest.View(f.Tenant, "item")+` SET jsonb = jsonb_set(jsonb, '{status,name}', '"Awaiting pickup"') WHERE id = $1`, item)
		doc, _ := json.Marshal(map[string]any{"requestType": "Hold", "requestLevel": "Item", "requestDate": "2026-01-01T10:00:00.000Z",
			"requesterId": sample.ID("1002"), "itemId": item, "status": "Open - Awaiting pickup", "position": 1,
			"fulfillmentPreference": "Hold Shelf", "pickupServicePointId": sample.ServicePointDesk1, "holdShelfExpirationDate": past})
		id := uuid.NewString()
		if _, err := rec.Create(ctx, f.Tenant, storage.Requests, id, doc); err != nil {
			t.Fatal(err)
		}
		return id
	}
	// The one that fails first: its date is the earlier.
	bad := onShelf(sample.ID("book-031"))
	past = schemas.FormatTime(time.Now().Add(-time.Minute))
	good := onShelf(sample.ID("book-032"))
	anExpiredLock(t, ctx, f)
	refuse := `CREATE FUNCTION refuse() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'refused on purpose'; END $$;
		CREATE TRIGGER refuse_lock_deletes BEFORE DELETE ON ` + postgres.Table(postgres.TableLock) + ` FOR EACH ROW EXECUTE FUNCTION refuse();
		CREATE TRIGGER refuse_bad_request BEFORE UPDATE ON ` + postgres.Table(postgres.TableRequest) + ` FOR EACH ROW
		    WHEN (OLD.id = '` + bad + `') EXECUTE FUNCTION refuse();`
	f.Exec(t, refuse)
	type told struct {
		work string
		err  bool
	}
	var works []told
	sw := NewSweeper(db, dbtest.Discard, SweeperConfig{BatchSize: 10, OnWork: func(work string, _ time.Duration, err error) {
		works = append(works, told{work, err != nil})
	}})
	status := func(id string) string {
		t.Helper()
		var s string
		if err := db.Pool.QueryRow(ctx, "SELECT status FROM "+dbtest.View(f.Tenant, "request")+" WHERE id = $1", id).Scan(&s); err != nil {
			t.Fatal(err)
		}
		return s
	}
	_, err := sw.SweepOnce(ctx)
	if err == nil || !strings.Contains(err.Error(), WorkLocks+":") || !strings.Contains(err.Error(), WorkHoldShelf+": 1 requests") {
		t.Errorf("the pass answered %v, want the lock sweep's failure and the request's", err)
	}
	want := []told{{WorkLocks, true}, {WorkWaiters, false}, {WorkLogin, false}, {WorkHistory, false}, {WorkWrites, false}, {WorkRequestExpiry, false},
		{WorkHoldShelfRequest, true}, {WorkHoldShelf, true}, {WorkAnonymize, false}, {WorkAgeToLost, false}, {WorkBillAgedToLost, false}}
	if !slices.Equal(works, want) {
		t.Errorf("told of %v, want %v", works, want)
	}
	if s := status(good); s != "Closed - Pickup expired" {
		t.Errorf("the request beside the one that failed: %q, want it closed", s)
	}
	if s := status(bad); s != "Open - Awaiting pickup" {
		t.Errorf("the request whose write failed: %q", s)
	}
	// Tried again at the next pass, and done once it can be.
	works = nil
	if _, err := sw.SweepOnce(ctx); err == nil || !slices.Contains(works, told{WorkHoldShelfRequest, true}) {
		t.Errorf("the second pass: %v, told of %v; want the request tried again", err, works)
	}
	f.Exec(t, `DROP TRIGGER refuse_lock_deletes ON `+postgres.Table(postgres.TableLock)+`; DROP TRIGGER refuse_bad_request ON `+
		postgres.Table(postgres.TableRequest))
	if deleted, err := sw.SweepOnce(ctx); err != nil || deleted != 1 {
		t.Errorf("the pass after the faults: deleted %d, %v; want the expired lock", deleted, err)
	}
	if s := status(bad); s != "Closed - Pickup expired" {
		t.Errorf("the request once it can be closed: %q", s)
	}
}

// TestRequestsPastTheirExpirationDateAreClosedEachOnItsOwn: a pass closes
// the requests past their requestExpirationDate "Closed - Unfilled"
// (FOLIO's scheduled request expiration, mod-circulation-storage's
// RequestExpirationApiTest), each on its own: one whose write fails (its
// UPDATE refused by a trigger) is told of (OnWork, expired_request, and
// the pass's request_expiry) and logged, the other is closed all the
// same, and the next pass closes it once it can be. The requests' expiry
// comes before the hold shelf's: a book left on its hold shelf past its
// date, with a request past its expiration date behind the one it waited
// for, goes to the request after that, not to the expired one.
func TestRequestsPastTheirExpirationDateAreClosedEachOnItsOwn(t *testing.T) {
	t.Parallel()
	// A database of its own: the sweeper looks at every tenant in it, and
	// the trigger is on its shared table.
	db := dbtest.OpenDB(t, pgtest.Fresh(t))
	f := dbtest.LibraryIn(t, db, sample.LoadData)
	ctx := context.Background()
	rec := recordstore.NewRecords(db)
	past := schemas.FormatTime(time.Now().Add(-time.Hour))
	request := func(patron, item, status string, position int, dates ...string) string {
		t.Helper()
		d := map[string]any{"requestType": "Hold", "requestLevel": "Item", "requestDate": "2026-01-01T10:00:00.000Z",
			"requesterId": sample.ID(patron), "itemId": item, "status": status, "position": position,
			"fulfillmentPreference": "Hold Shelf", "pickupServicePointId": sample.ServicePointDesk1}
		for i := 0; i+1 < len(dates); i += 2 {
			d[dates[i]] = dates[i+1]
		}
		doc, _ := json.Marshal(d)
		id := uuid.NewString()
		if _, err := rec.Create(ctx, f.Tenant, storage.Requests, id, doc); err != nil {
			t.Fatal(err)
		}
		return id
	}
	// The one that fails first: its date is the earlier.
	bad := request("1002", sample.ID("book-033"), "Open - Not yet filled", 1, "requestExpirationDate",
		schemas.FormatTime(time.Now().Add(-2*time.Hour)))
	good := request("1002", sample.ID("book-034"), "Open - Not yet filled", 1, "requestExpirationDate", past)
	shelf := sample.ID("book-035")
	f.Exec(t, "UPDATE "+dbtest.View(f.Tenant, "item")+` SET jsonb = jsonb_set(jsonb, '{status,name}', '"Awaiting pickup"') WHERE id = $1`, shelf)
	onShelf := request("1002", shelf, "Open - Awaiting pickup", 1, "holdShelfExpirationDate", past)
	expired := request("1003", shelf, "Open - Not yet filled", 2, "requestExpirationDate", past)
	next := request("1004", shelf, "Open - Not yet filled", 3)
	f.Exec(t, `CREATE FUNCTION refuse() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'refused on purpose'; END $$;
		CREATE TRIGGER refuse_bad_request BEFORE UPDATE ON `+postgres.Table(postgres.TableRequest)+` FOR EACH ROW
		    WHEN (OLD.id = '`+bad+`') EXECUTE FUNCTION refuse();`)
	type told struct {
		work string
		err  bool
	}
	var works []told
	sw := NewSweeper(db, dbtest.Discard, SweeperConfig{BatchSize: 10, OnWork: func(work string, _ time.Duration, err error) {
		works = append(works, told{work, err != nil})
	}})
	state := func(id string) string {
		t.Helper()
		var s string
		if err := db.Pool.QueryRow(ctx, "SELECT status || ' ' || coalesce(jsonb ->> 'position', '-') FROM "+dbtest.View(f.Tenant, "request")+
			" WHERE id = $1", id).Scan(&s); err != nil {
			t.Fatal(err)
		}
		return s
	}
	_, err := sw.SweepOnce(ctx)
	if err == nil || err.Error() != WorkRequestExpiry+": 1 requests past their expiration date could not be closed (2 were)" {
		t.Errorf("the pass answered %v, want the request's failure alone", err)
	}
	want := []told{{WorkLocks, false}, {WorkWaiters, false}, {WorkLogin, false}, {WorkHistory, false}, {WorkWrites, false}, {WorkExpiredRequest, true},
		{WorkRequestExpiry, true}, {WorkHoldShelf, false}, {WorkAnonymize, false}, {WorkAgeToLost, false}, {WorkBillAgedToLost, false}}
	if !slices.Equal(works, want) {
		t.Errorf("told of %v, want %v", works, want)
	}
	for id, want := range map[string]string{bad: "Open - Not yet filled 1", good: "Closed - Unfilled -",
		onShelf: "Closed - Pickup expired -", expired: "Closed - Unfilled -", next: "Open - Awaiting pickup 1"} {
		if got := state(id); got != want {
			t.Errorf("request %s after the pass: %q, want %q", id, got, want)
		}
	}
	if n := f.Count(t, "item", "id = $1 AND status_name = 'Awaiting pickup'", shelf); n != 1 {
		t.Error("the book on the hold shelf left it, want it kept for the next request")
	}
	// Tried again at the next pass, and closed once it can be.
	works = nil
	if _, err := sw.SweepOnce(ctx); err == nil || !slices.Contains(works, told{WorkExpiredRequest, true}) {
		t.Errorf("the second pass: %v, told of %v; want the request tried again", err, works)
	}
	f.Exec(t, `DROP TRIGGER refuse_bad_request ON `+postgres.Table(postgres.TableRequest))
	if _, err := sw.SweepOnce(ctx); err != nil {
		t.Errorf("the pass after the fault: %v", err)
	}
	if got := state(bad); got != "Closed - Unfilled -" {
		t.Errorf("the request once it can be closed: %q", got)
	}
}

// TestAPassLeadsOnASessionOfItsOwn: the sweeper's lead is held on a
// session of the lead's own pool, not on one of the pool its work runs
// on: with one connection for everything else (DB_MAX_CONNS=1, the lock
// statements on the main pool), a pass sweeps, rather than wait for ever
// for a second connection while its lead holds the only one.
func TestAPassLeadsOnASessionOfItsOwn(t *testing.T) {
	t.Parallel()
	// A database of its own: the sweeper's lock is the database's.
	url := pgtest.Fresh(t)
	db, err := postgres.Open(context.Background(), url, postgres.PoolConfig{MaxConns: 1, LockCommit: "on"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dbtest.CloseWithin(t, db, 10*time.Second) })
	f := dbtest.SetupTenant(t, db)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	anExpiredLock(t, ctx, f)
	sweeper := NewSweeper(db, dbtest.Discard, SweeperConfig{BatchSize: 10})
	if n, swept, err := sweeper.TrySweepOnce(ctx); err != nil || !swept || n != 1 {
		t.Errorf("a pass with one connection in the pool: deleted %d, swept %t, %v; want the one expired lock", n, swept, err)
	}
	if n := f.Count(t, postgres.TableLock, ""); n != 0 {
		t.Errorf("%d locks after the pass, want none", n)
	}
}

// anExpiredLock gives f's tenant one lock, expired: what a pass deletes.
func anExpiredLock(t *testing.T, ctx context.Context, f dbtest.Fixture) {
	t.Helper()
	l, _, err := locks.NewLocks(f.DB).Acquire(ctx, f.Tenant, uuid.NewString(), "", dbtest.TTL, storage.Holder{})
	if err != nil {
		t.Fatal(err)
	}
	dbtest.Expire(t, f, l.ID)
}
