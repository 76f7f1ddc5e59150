package accounts

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/checkoutlock/circulation-storage/internal/dbtest"
	"github.com/checkoutlock/circulation-storage/internal/pgtest"
	"github.com/checkoutlock/circulation-storage/internal/postgres"
	"github.com/checkoutlock/circulation-storage/login"
	"github.com/checkoutlock/schemas"
	"github.com/checkoutlock/schemas/errs"
	"github.com/google/uuid"
)

// loginFixture is a tenant with the login over its real store, counting
// the secrets it checks.
type loginFixture struct {
	dbtest.Fixture
	svc     *login.Service
	checked atomic.Int64
	matched atomic.Int64
}

// The limits of the tests' login: five wrong passwords per account and
// address, twenty per address, and, unless a test says otherwise, three
// checks a minute of an account from addresses it has not signed in from.
const (
	testMaxFailures = 5
	testAccountRate = 3
	// testBusyWait is the login's wait for a turn: long enough for fifty
	// argon2 hashes, four at once, with the race detector on.
	testBusyWait = 10 * time.Second
)

func newLoginFixture(t *testing.T, accountRate int, change ...func(*login.Config)) *loginFixture {
	t.Helper()
	return loginFixtureOn(t, dbtest.Setup(t), accountRate, change...)
}

// loginFixtureOn is newLoginFixture on the tenant of fx; each change, if
// any, is made to the service's configuration before it is started.
func loginFixtureOn(t *testing.T, fx dbtest.Fixture, accountRate int, change ...func(*login.Config)) *loginFixture {
	t.Helper()
	f := &loginFixture{Fixture: fx}
	cfg := login.Config{Secret: "a secret of at least thirty-two characters",
		AccessTTL: time.Minute, RefreshTTL: time.Hour, MaxFailures: testMaxFailures, MaxAddressFailures: 20,
		FailureWindow: time.Hour, Lockout: time.Hour, AccountRate: accountRate, KnownFor: time.Hour, Hashes: 4, BusyWait: testBusyWait,
		Checked: func(_ string, matched bool) {
			f.checked.Add(1)
			if matched {
				f.matched.Add(1)
			}
		}}
	for _, c := range change {
		c(&cfg)
	}
	f.svc = login.New(NewAccounts(f.DB), cfg)
	return f
}

// account makes an account with password and returns its id.
func (f *loginFixture) account(t *testing.T, username, password string) string {
	t.Helper()
	id := uuid.NewString()
	f.Exec(t, `INSERT INTO `+dbtest.View(f.Tenant, postgres.TableAccount)+` (id, jsonb) VALUES ($1, jsonb_build_object('id', $2::text, 'username', $3::text, 'roles', '[]'::jsonb))`,
		id, id, username)
	if err := f.svc.SetPassword(context.Background(), string(f.Tenant), id, password); err != nil {
		t.Fatal(err)
	}
	return id
}

// newPatron makes an active patron of a group of its own (named by its id)
// and returns the patron's id, which is its barcode too.
func newPatron(t *testing.T, f dbtest.Fixture) string {
	t.Helper()
	group, patron := uuid.NewString(), uuid.NewString()
	f.Exec(t, `INSERT INTO `+dbtest.View(f.Tenant, postgres.TablePatronGroup)+` (id, jsonb) VALUES ($1, jsonb_build_object('group', $2::text))`, group, group)
	f.Exec(t, `INSERT INTO `+dbtest.View(f.Tenant, postgres.TablePatron)+` (id, jsonb)
VALUES ($1, jsonb_build_object('id', $2::text, 'barcode', $2::text, 'active', true, 'patronGroup', $3::text))`, patron, patron, group)
	return patron
}

// outcome names what a sign-in or PIN check answered: "ok", or its
// error's code.
func outcome(err error) string {
	if err == nil {
		return "ok"
	}
	if e, ok := errs.As(err); ok {
		return e.Code
	}
	return err.Error()
}

// atOnce runs call(i) for each of n goroutines released together, and
// returns the outcome of each, in order.
func atOnce(n int, call func(i int) error) []string {
	out := make([]string, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			out[i] = outcome(call(i))
		}()
	}
	close(start)
	wg.Wait()
	return out
}

// pinnedPatron makes a patron (fixture.patron) whose PIN is pin.
func (f *loginFixture) pinnedPatron(t *testing.T, pin string) string {
	t.Helper()
	patron := newPatron(t, f.Fixture)
	if err := f.svc.SetPin(context.Background(), string(f.Tenant), patron, pin); err != nil {
		t.Fatal(err)
	}
	return patron
}

// burst signs username in from address with each password at once, all
// released together, and returns what each was answered.
func (f *loginFixture) burst(username, address string, passwords []string) []string {
	return atOnce(len(passwords), func(i int) error {
		_, err := f.svc.Login(context.Background(), string(f.Tenant), username, passwords[i], address)
		return err
	})
}

// wrongAndRight is forty wrong passwords and the right one, first.
func wrongAndRight(right string) []string {
	out := []string{right}
	for i := range 40 {
		out = append(out, fmt.Sprintf("guess %d", i))
	}
	return out
}

// tally counts outcomes by name.
func tally(outcomes []string) map[string]int {
	n := map[string]int{}
	for _, o := range outcomes {
		n[o]++
	}
	return n
}

// crowdLetIn sends a crowd of n right secrets at once (send(n) answers
// each one's outcome) and sends those told busy again, as a client told
// to come back does, until every one is let in: any other answer, or some
// still told busy after a minute, fails the test. Busy is refused
// unchecked and counts nothing; on a machine that computes the hashes
// slowly (the race detector, other tests), some wait longer than the
// busy wait for their turn. It answers how many were told busy.
func crowdLetIn(t *testing.T, round, n int, busy string, send func(n int) []string) int {
	t.Helper()
	told := 0
	deadline := time.Now().Add(time.Minute)
	for pending := n; pending > 0; {
		got := tally(send(pending))
		if got["ok"]+got[busy] != pending {
			t.Fatalf("round %d: %v; want every one let in, or told %s to ask again", round, got, busy)
		}
		told += got[busy]
		pending = got[busy]
		if pending > 0 && time.Now().After(deadline) {
			t.Fatalf("round %d: %d of %d still told %s after a minute", round, pending, n, busy)
		}
	}
	return told
}

// checkBurst holds a burst of one right secret (outcomes[0]) and wrong
// ones: exactly the limit's wrong ones checked, the right one checked at
// most once; the wrong ones answered wrong, or refused unchecked; and the
// right one let in (when it was checked) or refused as some wrong one
// was, unchecked: nothing sets its answer apart but success.
func checkBurst(t *testing.T, round int, outcomes []string, mismatched, matched int, wrong string, unchecked ...string) {
	t.Helper()
	counts := tally(outcomes[1:])
	if mismatched != testMaxFailures || matched > 1 || counts[wrong] != mismatched {
		t.Fatalf("round %d: %d wrong checked, %d right checked, answers %v; want %d wrong checked (answered %s), the right one at most once",
			round, mismatched, matched, counts, testMaxFailures, wrong)
	}
	for o, n := range counts {
		if o != wrong && !slices.Contains(unchecked, o) {
			t.Fatalf("round %d: %d wrong secrets answered %s; want %s or refused unchecked (%v)", round, n, o, wrong, unchecked)
		}
	}
	right := outcomes[0]
	switch {
	case right == "ok" && matched == 1:
	case right != "ok" && matched == 0 && counts[right] > 0 && slices.Contains(unchecked, right):
	default:
		t.Fatalf("round %d: the right secret answered %s (checked %d times), wrong ones %v; want let in when checked, else refused as a wrong one was",
			round, right, matched, counts)
	}
}

// TestABurstOfGuessesGetsNoMoreChecksThanTheLimit: forty wrong passwords
// and the right one at once, ten rounds, each from an address of its own:
// exactly five wrong ones checked, the rest refused unchecked; the right
// one let in only if its turn came before the five wrong ones locked the
// pair, and otherwise answered as the wrong ones refused; the database
// counts the five wrong ones, and none being checked once the burst is
// done; and the right password after the burst is refused unchecked.
func TestABurstOfGuessesGetsNoMoreChecksThanTheLimit(t *testing.T) {
	t.Parallel()
	f := newLoginFixture(t, 0)
	const password = "correct horse battery staple"
	f.account(t, "ada", password)
	for round := range 10 {
		address := fmt.Sprintf("192.0.2.%d", round+1)
		before, matchedBefore := f.checked.Load(), f.matched.Load()
		outcomes := f.burst("ada", address, wrongAndRight(password))
		matched := int(f.matched.Load() - matchedBefore)
		checkBurst(t, round, outcomes, int(f.checked.Load()-before)-matched, matched,
			schemas.CodeLoginFailed, schemas.CodeLoginLocked, schemas.CodeLoginBusy)
		if n := f.Count(t, postgres.TableLoginFailure, "key = $1 AND failures = $2 AND checking = 0", "pair:"+address+"|ada", testMaxFailures); n != 1 {
			t.Errorf("round %d: the pair's count is not the %d wrong passwords, with none being checked", round, testMaxFailures)
		}
		before = f.checked.Load()
		if _, err := f.svc.Login(context.Background(), string(f.Tenant), "ada", password, address); !dbtest.IsCode(err, schemas.CodeLoginLocked) ||
			f.checked.Load() != before {
			t.Errorf("round %d: the right password after the burst: %v, want LOGIN_LOCKED unchecked", round, err)
		}
	}
}

// TestACrowdOfRightPasswordsAllGetIn: fifty sign-ins with the right
// password at once from one address (a branch's kiosks behind one
// address, starting together), three rounds: every one signed in (those
// told busy when they ask again), nothing
// counted against the pair, and the next sign-in from there let in too.
func TestACrowdOfRightPasswordsAllGetIn(t *testing.T) {
	t.Parallel()
	f := newLoginFixture(t, testAccountRate)
	const password = "correct horse battery staple"
	f.account(t, "kiosk", password)
	crowd := make([]string, 50)
	for i := range crowd {
		crowd[i] = password
	}
	for round := range 3 {
		busy := crowdLetIn(t, round, len(crowd), schemas.CodeLoginBusy, func(n int) []string { return f.burst("kiosk", "192.0.2.50", crowd[:n]) })
		t.Logf("round %d: all %d signed in, %d told busy first", round, len(crowd), busy)
		if n := f.Count(t, postgres.TableLoginFailure, "key = 'pair:192.0.2.50|kiosk' AND failures = 0 AND checking = 0"); n != 1 {
			t.Errorf("round %d: the pair's count is not empty after a crowd of right passwords", round)
		}
		if _, err := f.svc.Login(context.Background(), string(f.Tenant), "kiosk", password, "192.0.2.50"); err != nil {
			t.Errorf("round %d: a sign-in after the crowd: %v", round, err)
		}
	}
}

// TestGuessesLockTheAddressNotTheAccount: five wrong passwords lock
// (account, address A) hard; the owner signs in from address B at once,
// and from A is refused unchecked until the lock ends.
func TestGuessesLockTheAddressNotTheAccount(t *testing.T) {
	t.Parallel()
	f := newLoginFixture(t, 2*testMaxFailures)
	const password = "correct horse battery staple"
	f.account(t, "kiosk", password)
	for i := range testMaxFailures {
		if _, err := f.svc.Login(context.Background(), string(f.Tenant), "kiosk", fmt.Sprintf("guess %d", i), "198.51.100.1"); !dbtest.IsCode(err, schemas.CodeLoginFailed) {
			t.Fatalf("guess %d: %v", i, err)
		}
	}
	before := f.checked.Load()
	if _, err := f.svc.Login(context.Background(), string(f.Tenant), "kiosk", password, "198.51.100.1"); !dbtest.IsCode(err, schemas.CodeLoginLocked) {
		t.Errorf("the right password from the guessing address: %v, want LOGIN_LOCKED", err)
	}
	if f.checked.Load() != before {
		t.Error("a locked sign-in had its password checked")
	}
	if _, err := f.svc.Login(context.Background(), string(f.Tenant), "kiosk", password, "198.51.100.2"); err != nil {
		t.Errorf("the owner from another address: %v, want signed in", err)
	}
}

// TestGuessesFromManyAddressesSlowTheAccountOnlyWhereItIsNotKnown: an
// account signed in from A; guesses from more addresses than the account's
// rate allow fill its count of a minute: a new address is refused
// unchecked even with the right password, while A signs in at once.
func TestGuessesFromManyAddressesSlowTheAccountOnlyWhereItIsNotKnown(t *testing.T) {
	t.Parallel()
	f := newLoginFixture(t, testAccountRate)
	const password = "correct horse battery staple"
	f.account(t, "kiosk", password)
	if _, err := f.svc.Login(context.Background(), string(f.Tenant), "kiosk", password, "203.0.113.1"); err != nil {
		t.Fatal(err)
	}
	refused := 0
	for i := range 2 * testAccountRate {
		_, err := f.svc.Login(context.Background(), string(f.Tenant), "kiosk", "guess", fmt.Sprintf("203.0.113.%d", 10+i))
		if dbtest.IsCode(err, schemas.CodeLoginLocked) {
			refused++
		}
	}
	if refused != testAccountRate {
		t.Errorf("%d of %d guesses from new addresses refused unchecked; want %d past the account's rate", refused, 2*testAccountRate, testAccountRate)
	}
	var e *errs.Error
	if _, err := f.svc.Login(context.Background(), string(f.Tenant), "kiosk", password, "203.0.113.99"); !errors.As(err, &e) ||
		e.Code != schemas.CodeLoginLocked || e.RetryAfter <= 0 || e.RetryAfter > time.Minute {
		t.Errorf("the right password from a new address: %v, want LOGIN_LOCKED for at most a minute", err)
	}
	if _, err := f.svc.Login(context.Background(), string(f.Tenant), "kiosk", password, "203.0.113.1"); err != nil {
		t.Errorf("the owner from the address it signed in from: %v, want signed in", err)
	}
}

// TestCountIsAllOrNothing: an attempt refused by one full count is counted
// on none of the others, whatever the order of their keys.
func TestCountIsAllOrNothing(t *testing.T) {
	t.Parallel()
	f := dbtest.Setup(t)
	store := NewAccounts(f.DB)
	ctx := context.Background()
	full := login.Limit{Key: "b-full", Max: 1, Window: time.Hour, Lockout: time.Hour}
	if a, err := store.Count(ctx, string(f.Tenant), []login.Limit{full}); err != nil || a.Verdict != login.Admitted {
		t.Fatalf("first attempt: %+v, %v; want admitted", a, err)
	}
	other := login.Limit{Key: "a-other", Max: 10, Window: time.Hour}
	last := login.Limit{Key: "c-other", Max: 10, Window: time.Hour}
	a, err := store.Count(ctx, string(f.Tenant), []login.Limit{last, full, other})
	if err != nil || a.Verdict != login.Busy || a.Wait != login.BusyRetry || len(a.Locks) != 0 {
		t.Fatalf("an attempt beside one being checked at a limit of one: %+v, %v; want busy for %s", a, err, login.BusyRetry)
	}
	if n := f.Count(t, postgres.TableLoginFailure, "key IN ('a-other', 'c-other') AND checking > 0"); n != 0 {
		t.Errorf("%d other counts took the refused attempt", n)
	}
	if err := store.Settle(ctx, string(f.Tenant), []login.Limit{full}, login.Wrong, ""); err != nil {
		t.Fatal(err)
	}
	a, err = store.Count(ctx, string(f.Tenant), []login.Limit{other, full})
	if err != nil || a.Verdict != login.Locked || a.Wait <= time.Hour-time.Minute || len(a.Locks) != 1 || a.Locks[full.Key] != a.Wait {
		t.Fatalf("an attempt after the wrong secret that filled the limit: %+v, %v; want locked for the hour, naming the key", a, err)
	}
}

// pinBurst checks pins of patron at once from address, and returns what
// each was answered.
func (f *loginFixture) pinBurst(patron, address string, pins []string) []string {
	return atOnce(len(pins), func(i int) error {
		return f.svc.VerifyPin(context.Background(), string(f.Tenant), patron, pins[i], address)
	})
}

// TestPinGuessesAreCountedBeforeTheyAreChecked: forty wrong PINs and the
// right one at once, ten rounds: five wrong ones checked, the rest refused
// unchecked, and the right one let in only when its turn came before the
// five locked the PIN, otherwise refused as the wrong ones were.
func TestPinGuessesAreCountedBeforeTheyAreChecked(t *testing.T) {
	t.Parallel()
	f := newLoginFixture(t, 0)
	for round := range 10 {
		patron := f.pinnedPatron(t, "4711")
		pins := []string{"4711"}
		for i := range 40 {
			pins = append(pins, fmt.Sprintf("%04d", 1000+i))
		}
		before, matchedBefore := f.checked.Load(), f.matched.Load()
		outcomes := f.pinBurst(patron, fmt.Sprintf("192.0.2.%d", round+1), pins)
		matched := int(f.matched.Load() - matchedBefore)
		checkBurst(t, round, outcomes, int(f.checked.Load()-before)-matched, matched,
			schemas.CodePinInvalid, schemas.CodePinLocked, schemas.CodePinBusy)
	}
}

// TestACrowdOfRightPinsAllGetIn: a patron's right PIN fifty times at once
// from one kiosk's address, three rounds: every one let in (those told
// busy when they ask again), and nothing
// counted against the PIN or the address.
func TestACrowdOfRightPinsAllGetIn(t *testing.T) {
	t.Parallel()
	f := newLoginFixture(t, 0)
	patron := f.pinnedPatron(t, "4711")
	crowd := make([]string, 50)
	for i := range crowd {
		crowd[i] = "4711"
	}
	for round := range 3 {
		busy := crowdLetIn(t, round, len(crowd), schemas.CodePinBusy, func(n int) []string { return f.pinBurst(patron, "192.0.2.60", crowd[:n]) })
		t.Logf("round %d: all %d let in, %d told busy first", round, len(crowd), busy)
		if n := f.Count(t, postgres.TableLoginFailure, "key IN ($1, 'pin-address:192.0.2.60') AND failures = 0 AND checking = 0", "pin:"+patron); n != 2 {
			t.Errorf("round %d: %d of the PIN's and the address's counts are empty after a crowd of right PINs, want both", round, n)
		}
	}
}

// TestPinChecksAreCountedByAddress: PIN checks from one address at made-up
// patrons stop at the address's limit, counted before the check: the first
// MaxAddressFailures are checked (and wrong), the rest refused PIN_LOCKED
// unchecked, and no count is kept for the patrons beyond those checked;
// another address is not held by them. The address's limit is a small
// one, so that the checks it admits (a hash each, Hashes at a time) end
// within MaxCheck on a loaded machine too.
func TestPinChecksAreCountedByAddress(t *testing.T) {
	t.Parallel()
	const guesses, maxAddress = 30, 6
	f := newLoginFixture(t, 0, func(c *login.Config) { c.MaxAddressFailures = maxAddress })
	ctx := context.Background()
	patron := f.pinnedPatron(t, "4711")
	got := tally(atOnce(guesses, func(int) error {
		return f.svc.VerifyPin(ctx, string(f.Tenant), uuid.NewString(), "1234", "198.51.100.7")
	}))
	// The guesses past the address's limit are refused unchecked, and how
	// is a matter of timing: once the address is locked, PIN_LOCKED; while
	// its last wrong guesses are still being checked (the key is full of
	// guesses in flight), an attempt waits for a turn, and on a loaded
	// machine its BusyWait can pass first: PIN_BUSY. Either refusal checks
	// and counts nothing, which is what the test holds; only their sum is
	// fixed.
	refused := got[schemas.CodePinLocked] + got[schemas.CodePinBusy]
	if got[schemas.CodePinInvalid] != maxAddress || refused != guesses-maxAddress {
		t.Errorf("outcomes %v; want %d PIN_INVALID and the rest PIN_LOCKED or PIN_BUSY", got, maxAddress)
	}
	var perPatron int
	if err := f.DB.Pool.QueryRow(ctx, postgres.WithTables(`SELECT count(*) FROM %s WHERE tenant_id = $1 AND key LIKE 'pin:%%'`, postgres.TableLoginFailure),
		string(f.Tenant)).Scan(&perPatron); err != nil {
		t.Fatal(err)
	}
	if perPatron != maxAddress {
		t.Errorf("%d counts kept for patrons, want %d: one per PIN checked", perPatron, maxAddress)
	}
	if err := f.svc.VerifyPin(ctx, string(f.Tenant), patron, "4711", "203.0.113.9"); err != nil {
		t.Errorf("the right PIN from another address: %v", err)
	}
	if err := f.svc.VerifyPin(ctx, string(f.Tenant), patron, "4711", "198.51.100.7"); err == nil {
		t.Errorf("the right PIN from the locked address was accepted")
	}
}

// TestSessionsEnd: a session is alive until its refresh token is used a
// second time (which ends the whole session, the token rotated from it
// included), until logout, and until its account is disabled (enabling it
// again revives none) or deleted.
func TestSessionsEnd(t *testing.T) {
	t.Parallel()
	f := newLoginFixture(t, 0)
	ctx := context.Background()
	tenant := string(f.Tenant)
	const password = "correct horse battery staple"
	id := f.account(t, "ada", password)
	sessionOf := func(tok login.Tokens) string {
		t.Helper()
		var c struct {
			SessionID string `json:"session_id"`
		}
		decodeClaims(t, tok.Access, &c)
		if c.SessionID == "" {
			t.Fatal("an access token names no session")
		}
		return c.SessionID
	}
	alive := func(sid string) bool {
		t.Helper()
		ok, err := f.svc.SessionAlive(ctx, tenant, sid)
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}

	first, err := f.svc.Login(ctx, tenant, "ada", password, "192.0.2.1")
	if err != nil {
		t.Fatal(err)
	}
	sid := sessionOf(first)
	second, err := f.svc.Refresh(ctx, tenant, first.Refresh)
	if err != nil || sessionOf(second) != sid || !alive(sid) {
		t.Fatalf("a refresh: %v; want the same session, alive", err)
	}
	// The first refresh token again: the session ends, and the token
	// rotated from it stops working too.
	if _, err := f.svc.Refresh(ctx, tenant, first.Refresh); !dbtest.IsCode(err, schemas.CodeSessionEnded) {
		t.Errorf("a refresh token used twice: %v, want SESSION_ENDED", err)
	}
	if alive(sid) {
		t.Error("the session is alive after its refresh token was used twice")
	}
	if _, err := f.svc.Refresh(ctx, tenant, second.Refresh); !dbtest.IsCode(err, schemas.CodeSessionEnded) {
		t.Errorf("the rotated refresh token after the reuse: %v, want SESSION_ENDED", err)
	}

	// Logout by the access token's session.
	third, err := f.svc.Login(ctx, tenant, "ada", password, "192.0.2.1")
	if err != nil {
		t.Fatal(err)
	}
	if err := f.svc.Logout(ctx, tenant, sessionOf(third), ""); err != nil || alive(sessionOf(third)) {
		t.Errorf("logout: %v, alive %v", err, alive(sessionOf(third)))
	}

	// An account disabled, then deleted.
	fourth, err := f.svc.Login(ctx, tenant, "ada", password, "192.0.2.1")
	if err != nil {
		t.Fatal(err)
	}
	f.Exec(t, `UPDATE `+dbtest.View(f.Tenant, postgres.TableAccount)+` SET jsonb = jsonb || '{"active": false}' WHERE id = $1`, id)
	if alive(sessionOf(fourth)) {
		t.Error("a session of a disabled account is alive")
	}
	f.Exec(t, `UPDATE `+dbtest.View(f.Tenant, postgres.TableAccount)+` SET jsonb = jsonb || '{"active": true}' WHERE id = $1`, id)
	if alive(sessionOf(fourth)) {
		t.Error("a session of an account disabled and enabled again is alive again")
	}
	fifth, err := f.svc.Login(ctx, tenant, "ada", password, "192.0.2.1")
	if err != nil || !alive(sessionOf(fifth)) {
		t.Fatalf("a sign-in of the account enabled again: %v", err)
	}
	f.Exec(t, `DELETE FROM `+dbtest.View(f.Tenant, postgres.TableAccount)+` WHERE id = $1`, id)
	if alive(sessionOf(fifth)) {
		t.Error("a session of a deleted account is alive")
	}
	if alive("not a uuid") || alive(uuid.NewString()) {
		t.Error("an unknown session is alive")
	}
}

// TestARoleChangeEndsTheSessions: a write that changes an account's roles
// ends its sessions (login.EndRoles), as disabling it does; one that keeps
// the same roles, in another order or beside another name, ends none; an
// account disabled and given other roles in one write ends them as
// disabled.
func TestARoleChangeEndsTheSessions(t *testing.T) {
	t.Parallel()
	// A database of its own, migrated by this tree's migrations whatever
	// the shared one was migrated with.
	f := loginFixtureOn(t, dbtest.SetupTenant(t, dbtest.OpenDB(t, pgtest.Fresh(t))), 0)
	ctx := context.Background()
	tenant := string(f.Tenant)
	const password = "correct horse battery staple"
	id := f.account(t, "ada", password)
	account := dbtest.View(f.Tenant, postgres.TableAccount)
	f.Exec(t, `UPDATE `+account+` SET jsonb = jsonb || '{"roles": ["circulation.role.librarian", "circulation.role.operator"]}' WHERE id = $1`, id)
	// session signs in and returns the session's id.
	session := func() string {
		t.Helper()
		tok, err := f.svc.Login(ctx, tenant, "ada", password, "192.0.2.1")
		if err != nil {
			t.Fatal(err)
		}
		var c struct {
			SessionID string `json:"session_id"`
		}
		decodeClaims(t, tok.Access, &c)
		return c.SessionID
	}
	// ended is why the session ended, "" while it has not.
	ended := func(sid string) string {
		t.Helper()
		var reason *string
		if err := f.DB.Pool.QueryRow(ctx, `SELECT end_reason FROM `+dbtest.View(f.Tenant, postgres.TableLoginSession)+` WHERE id = $1`, sid).Scan(&reason); err != nil {
			t.Fatal(err)
		}
		if reason == nil {
			return ""
		}
		return *reason
	}

	sid := session()
	f.Exec(t, `UPDATE `+account+` SET jsonb = jsonb || '{"roles": ["circulation.role.operator", "circulation.role.librarian"],
		"personal": {"firstName": "Ada", "lastName": "King"}}' WHERE id = $1`, id)
	if why := ended(sid); why != "" {
		t.Errorf("a change of the name and of the roles' order ended the session (%s)", why)
	}
	f.Exec(t, `UPDATE `+account+` SET jsonb = jsonb || '{"roles": ["circulation.role.self-check"]}' WHERE id = $1`, id)
	if why := ended(sid); why != login.EndRoles {
		t.Errorf("the session of an account given other roles ended for %q, want %q", why, login.EndRoles)
	}
	if alive, err := f.svc.SessionAlive(ctx, tenant, sid); err != nil || alive {
		t.Errorf("the session of an account given other roles: alive %v, %v", alive, err)
	}

	sid = session()
	f.Exec(t, `UPDATE `+account+` SET jsonb = jsonb || '{"roles": ["circulation.role.self-check", "circulation.role.librarian"]}' WHERE id = $1`, id)
	if why := ended(sid); why != login.EndRoles {
		t.Errorf("the session of an account given a role more ended for %q, want %q", why, login.EndRoles)
	}

	sid = session()
	f.Exec(t, `UPDATE `+account+` SET jsonb = jsonb || '{"active": false, "roles": []}' WHERE id = $1`, id)
	if why := ended(sid); why != login.EndAccount {
		t.Errorf("the session of an account disabled and given other roles ended for %q, want %q", why, login.EndAccount)
	}
}

// decodeClaims reads a token's claims into v, unverified (the test made
// the token).
func decodeClaims(t *testing.T, token string, v any) {
	t.Helper()
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		t.Fatalf("not a JWT: %q", token)
	}
	b, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatal(err)
	}
}

// slowCounts is the real store with every Count after the first held
// back until release is closed: a database that counts a burst's other
// attempts late (a fault, not a rule). With key set, only the Counts of
// that key are: the others go through.
type slowCounts struct {
	*Accounts
	key     string
	first   sync.Once
	counted chan struct{}
	release chan struct{}
}

// burst runs right, and once it is counted forty guesses at once, whose
// counts are held back until right has its outcome, which it returns
// when the guesses are done.
func (s *slowCounts) burst(right func() error, guess func(i int)) error {
	outcome := make(chan error, 1)
	go func() { outcome <- right() }()
	<-s.counted
	var wg sync.WaitGroup
	for i := range 40 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			guess(i)
		}()
	}
	err := <-outcome
	close(s.release)
	wg.Wait()
	return err
}

func (s *slowCounts) Count(ctx context.Context, tenant string, limits []login.Limit) (login.Admission, error) {
	if s.key != "" && !slices.ContainsFunc(limits, func(l login.Limit) bool { return l.Key == s.key }) {
		return s.Accounts.Count(ctx, tenant, limits)
	}
	isFirst := false
	s.first.Do(func() { isFirst = true })
	if !isFirst {
		<-s.release
	}
	a, err := s.Accounts.Count(ctx, tenant, limits)
	if isFirst {
		close(s.counted)
	}
	return a, err
}

// TestTheRightPasswordCheckedInABurstIsLetIn: the right password, counted
// first and checked while forty wrong ones from the same place arrive, is
// let in: a burst around it is no reason to refuse a secret checked and
// right (the wrong ones are what the count holds to its limit).
func TestTheRightPasswordCheckedInABurstIsLetIn(t *testing.T) {
	t.Parallel()
	f := dbtest.Setup(t)
	store := &slowCounts{Accounts: NewAccounts(f.DB), counted: make(chan struct{}), release: make(chan struct{})}
	svc := login.New(store, login.Config{Secret: "a secret of at least thirty-two characters",
		AccessTTL: time.Minute, RefreshTTL: time.Hour, MaxFailures: testMaxFailures, MaxAddressFailures: 100,
		FailureWindow: time.Hour, Lockout: time.Hour, KnownFor: time.Hour, Hashes: 4, BusyWait: testBusyWait})
	lf := &loginFixture{Fixture: f, svc: svc}
	const password = "correct horse battery staple"
	lf.account(t, "ada", password)
	ctx := context.Background()
	err := store.burst(func() error {
		_, err := svc.Login(ctx, string(f.Tenant), "ada", password, "192.0.2.7")
		return err
	}, func(i int) {
		_, _ = svc.Login(ctx, string(f.Tenant), "ada", fmt.Sprintf("guess %d", i), "192.0.2.7")
	})
	if err != nil {
		t.Errorf("the right password checked in a burst of forty-one: %v, want signed in", err)
	}
}

// TestTheRightPinCheckedInABurstIsLetIn: the same with PINs; the guesses
// then lock the patron's PIN with their five wrong ones, no more.
func TestTheRightPinCheckedInABurstIsLetIn(t *testing.T) {
	t.Parallel()
	f := dbtest.Setup(t)
	patron := newPatron(t, f)
	store := &slowCounts{Accounts: NewAccounts(f.DB), key: "pin:" + patron, counted: make(chan struct{}), release: make(chan struct{})}
	svc := login.New(store, login.Config{Secret: "a secret of at least thirty-two characters",
		AccessTTL: time.Minute, RefreshTTL: time.Hour, MaxFailures: testMaxFailures, MaxAddressFailures: 100,
		FailureWindow: time.Hour, Lockout: time.Hour, KnownFor: time.Hour, Hashes: 4, BusyWait: testBusyWait})
	ctx := context.Background()
	if err := svc.SetPin(ctx, string(f.Tenant), patron, "4711"); err != nil {
		t.Fatal(err)
	}
	err := store.burst(func() error {
		return svc.VerifyPin(ctx, string(f.Tenant), patron, "4711", "192.0.2.7")
	}, func(i int) {
		_ = svc.VerifyPin(ctx, string(f.Tenant), patron, fmt.Sprintf("%04d", 1000+i), "192.0.2.7")
	})
	if err != nil {
		t.Errorf("the right PIN checked in a burst of forty-one: %v, want let in", err)
	}
	var failures, checking int
	if err := f.DB.Pool.QueryRow(ctx, `SELECT failures, checking FROM `+postgres.Table(postgres.TableLoginFailure)+` WHERE tenant_id = $1 AND key = $2`,
		string(f.Tenant), store.key).Scan(&failures, &checking); err != nil {
		t.Fatal(err)
	}
	if failures != testMaxFailures || checking != 0 {
		t.Errorf("the patron's PIN count is %d wrong, %d being checked after the burst; want %d, none", failures, checking, testMaxFailures)
	}
}

// TestARefusalUncheckedIsTheSameWhateverTheSecret: while as many attempts
// of a pair are being checked as its limit lets be (held by the test), a
// sign-in waits its turn for BusyWait, then is refused LOGIN_BUSY with
// Retry-After of a second, the same for the right password and a wrong
// one, with nothing checked and nothing counted; the PIN's likewise.
func TestARefusalUncheckedIsTheSameWhateverTheSecret(t *testing.T) {
	t.Parallel()
	f := dbtest.Setup(t)
	store := NewAccounts(f.DB)
	var checked atomic.Int64
	svc := login.New(store, login.Config{Secret: "a secret of at least thirty-two characters",
		AccessTTL: time.Minute, RefreshTTL: time.Hour, MaxFailures: testMaxFailures, MaxAddressFailures: 100,
		FailureWindow: time.Hour, Lockout: time.Hour, KnownFor: time.Hour, Hashes: 4, BusyWait: 300 * time.Millisecond,
		Checked: func(string, bool) { checked.Add(1) }})
	lf := &loginFixture{Fixture: f, svc: svc}
	const password = "correct horse battery staple"
	lf.account(t, "ada", password)
	patron := newPatron(t, f)
	ctx := context.Background()
	if err := svc.SetPin(ctx, string(f.Tenant), patron, "4711"); err != nil {
		t.Fatal(err)
	}
	tenant := string(f.Tenant)
	for _, tc := range []struct {
		key          string
		right, wrong func() error
		code         string
	}{
		{"pair:192.0.2.9|ada",
			func() error { _, err := svc.Login(ctx, tenant, "ada", password, "192.0.2.9"); return err },
			func() error { _, err := svc.Login(ctx, tenant, "ada", "guess", "192.0.2.9"); return err },
			schemas.CodeLoginBusy},
		{"pin:" + patron,
			func() error { return svc.VerifyPin(ctx, tenant, patron, "4711", "192.0.2.9") },
			func() error { return svc.VerifyPin(ctx, tenant, patron, "0000", "192.0.2.9") },
			schemas.CodePinBusy},
	} {
		held := []login.Limit{{Key: tc.key, Max: testMaxFailures, Window: time.Hour, Lockout: time.Hour}}
		for range testMaxFailures {
			if a, err := store.Count(ctx, tenant, held); err != nil || a.Verdict != login.Admitted {
				t.Fatalf("holding %s: %+v, %v", tc.key, a, err)
			}
		}
		var answers []*errs.Error
		for _, try := range []func() error{tc.right, tc.wrong} {
			e, ok := errs.As(try())
			if !ok {
				t.Fatalf("%s: an attempt beside %d being checked was not refused", tc.key, testMaxFailures)
			}
			answers = append(answers, e)
		}
		if answers[0].Code != tc.code || answers[0].RetryAfter != time.Second || answers[0].Kind != answers[1].Kind ||
			answers[0].Code != answers[1].Code || answers[0].Message != answers[1].Message || answers[0].RetryAfter != answers[1].RetryAfter {
			t.Errorf("%s: the right secret %+v, a wrong one %+v; want both %s with Retry-After 1 s", tc.key, answers[0], answers[1], tc.code)
		}
		if n := f.Count(t, postgres.TableLoginFailure, "key = $1 AND failures = 0 AND checking = $2", tc.key, testMaxFailures); n != 1 {
			t.Errorf("%s: the refused attempts were counted", tc.key)
		}
		if err := store.Settle(ctx, tenant, held, login.Right, ""); err != nil {
			t.Fatal(err)
		}
		if err := tc.right(); err != nil {
			t.Errorf("%s: the right secret once a turn is free: %v", tc.key, err)
		}
	}
	if checked.Load() != 2 {
		t.Errorf("%d secrets checked, want the two let in once a turn was free", checked.Load())
	}
}

// TestARotationRunAgainAnswersItsOwnOutcome: a refresh whose statement
// committed and is run again (its answer lost on a dead connection, as
// the pool retries it) answers the rotation it made, and does not take
// its own earlier run for a second use of the token.
func TestARotationRunAgainAnswersItsOwnOutcome(t *testing.T) {
	t.Parallel()
	f := newLoginFixture(t, 0)
	ctx := context.Background()
	tenant := string(f.Tenant)
	const password = "correct horse battery staple"
	id := f.account(t, "ada", password)
	tok, err := f.svc.Login(ctx, tenant, "ada", password, "192.0.2.1")
	if err != nil {
		t.Fatal(err)
	}
	store := NewAccounts(f.DB)
	old := sha256.Sum256([]byte(tok.Refresh))
	next := sha256.Sum256([]byte("the next refresh token"))
	expires := time.Now().Add(time.Hour)
	account, sid, found, err := store.Rotate(ctx, tenant, old[:], next[:], expires)
	if err != nil || !found || account != id {
		t.Fatalf("a rotation: %s %s %v %v", account, sid, found, err)
	}
	again, sidAgain, found, err := store.Rotate(ctx, tenant, old[:], next[:], expires)
	if err != nil || !found || again != id || sidAgain != sid {
		t.Fatalf("the rotation run again: %s %s %v %v; want the same outcome", again, sidAgain, found, err)
	}
	if alive, err := store.SessionAlive(ctx, tenant, sid); err != nil || !alive {
		t.Errorf("the session after a rotation run again: alive %v, %v", alive, err)
	}
	// Another caller with the taken token is a second use: the session ends.
	other := sha256.Sum256([]byte("a thief's next token"))
	if _, _, found, err := store.Rotate(ctx, tenant, old[:], other[:], expires); err != nil || found {
		t.Errorf("a second use: found %v, %v", found, err)
	}
	if alive, _ := store.SessionAlive(ctx, tenant, sid); alive {
		t.Error("the session is alive after its refresh token's second use")
	}
}

// countedStore is the real store, counting the Counts asked of it.
type countedStore struct {
	*Accounts
	counts atomic.Int64
}

func (s *countedStore) Count(ctx context.Context, tenant string, limits []login.Limit) (login.Admission, error) {
	s.counts.Add(1)
	return s.Accounts.Count(ctx, tenant, limits)
}

// TestALockIsRememberedUntilItEnds: once a count told the instance a
// pair is locked, sign-ins from it are refused LOGIN_LOCKED without
// asking the database, for as long as the lock lasts, and no longer: the
// right password is let in once the lock (five seconds here) has ended.
func TestALockIsRememberedUntilItEnds(t *testing.T) {
	t.Parallel()
	// The lock lasts long enough that a loaded machine's hashing does not
	// outlast it between the last guess and the next attempt.
	const lockout = 5 * time.Second
	f := dbtest.Setup(t)
	store := &countedStore{Accounts: NewAccounts(f.DB)}
	svc := login.New(store, login.Config{Secret: "a secret of at least thirty-two characters",
		AccessTTL: time.Minute, RefreshTTL: time.Hour, MaxFailures: testMaxFailures, MaxAddressFailures: 100,
		FailureWindow: time.Minute, Lockout: lockout, KnownFor: time.Hour, Hashes: 4, BusyWait: testBusyWait})
	lf := &loginFixture{Fixture: f, svc: svc}
	const password = "correct horse battery staple"
	lf.account(t, "ada", password)
	ctx, tenant := context.Background(), string(f.Tenant)
	for i := range testMaxFailures {
		if _, err := svc.Login(ctx, tenant, "ada", fmt.Sprintf("guess %d", i), "192.0.2.8"); !dbtest.IsCode(err, schemas.CodeLoginFailed) {
			t.Fatalf("guess %d: %v", i, err)
		}
	}
	if _, err := svc.Login(ctx, tenant, "ada", password, "192.0.2.8"); !dbtest.IsCode(err, schemas.CodeLoginLocked) {
		t.Fatalf("the right password once locked: %v, want LOGIN_LOCKED", err)
	}
	asked := store.counts.Load()
	for range 20 {
		_, err := svc.Login(ctx, tenant, "ada", "guess", "192.0.2.8")
		if e, ok := errs.As(err); !ok || e.Code != schemas.CodeLoginLocked || e.RetryAfter <= 0 || e.RetryAfter > lockout {
			t.Fatalf("a sign-in while the lock is remembered: %v, want LOGIN_LOCKED for at most the lockout", err)
		}
	}
	if n := store.counts.Load() - asked; n != 0 {
		t.Errorf("%d counts asked of the database while the lock was remembered, want none", n)
	}
	deadline := time.Now().Add(lockout + 10*time.Second)
	for {
		_, err := svc.Login(ctx, tenant, "ada", password, "192.0.2.8")
		if err == nil {
			break
		}
		if !dbtest.IsCode(err, schemas.CodeLoginLocked) || time.Now().After(deadline) {
			t.Fatalf("the right password after the lockout: %v", err)
		}
		e, _ := errs.As(err)
		<-time.After(e.RetryAfter)
	}
}

// TestARefreshWhoseAnswerIsLostAnswersItsTokens: a refresh's rotation
// commits and its answer is lost; the pool runs it again. The caller is
// answered the rotation it made, and the session lives on.
func TestARefreshWhoseAnswerIsLostAnswersItsTokens(t *testing.T) {
	t.Parallel()
	l, f := dbtest.LoserDB(t)
	ctx := context.Background()
	tenant := string(f.Tenant)
	svc := login.New(NewAccounts(f.DB), login.Config{Secret: "a secret of at least thirty-two characters",
		AccessTTL: time.Minute, RefreshTTL: time.Hour, MaxFailures: 5, MaxAddressFailures: 20,
		FailureWindow: time.Hour, Lockout: time.Hour, KnownFor: time.Hour, Hashes: 2})
	lf := &loginFixture{Fixture: f, svc: svc}
	const password = "correct horse battery staple"
	lf.account(t, "ada", password)
	first, err := svc.Login(ctx, tenant, "ada", password, "192.0.2.1")
	if err != nil {
		t.Fatal(err)
	}
	l.Arm("refresh_reused")
	next, err := svc.Refresh(ctx, tenant, first.Refresh)
	if l.Lost.Load() != 1 {
		t.Fatalf("%d answers lost, want 1", l.Lost.Load())
	}
	if err != nil || next.Refresh == "" {
		t.Fatalf("the refresh run again: %v; want its tokens", err)
	}
	var sid string
	h := sha256.Sum256([]byte(next.Refresh))
	if err := f.DB.Pool.QueryRow(ctx, `SELECT session_id::text FROM `+dbtest.View(f.Tenant, postgres.TableRefreshToken)+` WHERE hash = $1`, h[:]).Scan(&sid); err != nil {
		t.Fatal(err)
	}
	if alive, err := svc.SessionAlive(ctx, tenant, sid); err != nil || !alive {
		t.Errorf("the session after a refresh whose answer was lost: alive %v, %v", alive, err)
	}
}
