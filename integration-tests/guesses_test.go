package integration

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/checkoutlock/integration-tests/harness"
	"github.com/checkoutlock/schemas"
)

// Guesses at the real services: every attempt (a password, a PIN, a
// kiosk's login) is counted before its secret is checked, so a burst gets
// no more checks than the limit; guesses lock the place they come from,
// not the account.

// checked is how many secrets of kind (password, pin) storage has checked
// so far, by its metrics.
func checked(t *testing.T, c *harness.Cluster, kind string) int {
	t.Helper()
	n := 0
	for _, result := range []string{"match", "mismatch"} {
		v, found := c.Metric(t, c.Storage, fmt.Sprintf(`login_secrets_checked_total{kind=%q,result=%q}`, kind, result))
		if !found {
			t.Fatalf("storage exports no login_secrets_checked_total for %s", kind)
		}
		n += int(v)
	}
	return n
}

// atOnce runs each of n calls in a goroutine of its own, released
// together, and returns their results in order.
func atOnce[T any](n int, call func(i int) T) []T {
	out := make([]T, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			out[i] = call(i)
		}()
	}
	close(start)
	wg.Wait()
	return out
}

// guessCount is the count storage keeps of key (a pair of account and
// address, "pair:<address>|<username>", or a patron's PIN, "pin:<id>").
func guessCount(t *testing.T, c *harness.Cluster, key string) int {
	t.Helper()
	var n int
	err := c.DB.QueryRow(context.Background(), fmt.Sprintf(`SELECT coalesce(max(failures), 0) FROM %s.login_failure WHERE key = $1`, c.Schema), key).Scan(&n)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

const maxFailures = 5 // LOGIN_MAX_FAILURES, the default

// heldAtStorage runs burst while storage's count of key is held by a
// transaction of the test's own, and lets the count go once at least
// 2×maxFailures of the burst's attempts wait for it at storage (for the
// held row, or behind another attempt waiting for it): the burst is then
// at once where the limit is decided, whatever pace its requests kept on
// the way there (kiosks, the SIP2 door, circulation, a loaded machine).
// Held so, no order of the burst can open anything: until the count is
// full, more than maxFailures attempts are in progress at storage, so the
// right secret among them is a guess among guesses (login.Service's
// others), and once it is full, the right one is refused unchecked.
// Without the hold, the right secret sent first could reach storage,
// be checked and be granted before the others had even arrived, which is
// what a lone attempt is owed.
func heldAtStorage(t *testing.T, c *harness.Cluster, key string, burst func()) {
	t.Helper()
	const want = 2 * maxFailures
	ctx := context.Background()
	tx, err := c.DB.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	var holder int
	if err := tx.QueryRow(ctx, `INSERT INTO circulation_storage.login_failure AS f (tenant_id, key, failures, first_at)
VALUES ($1, $2, 0, now()) ON CONFLICT (tenant_id, key) DO UPDATE SET failures = f.failures
RETURNING pg_backend_pid()`, c.Tenant, key).Scan(&holder); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		burst()
	}()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	// Circulation gives up on storage after STORAGE_TIMEOUT (3 s in the
	// harness): the burst must be let go well before.
	deadline := time.After(2 * time.Second)
	for waiting := 0; waiting < want; {
		// Not in tx: a transaction sees pg_stat_activity as it was at
		// its first look.
		if err := c.DB.QueryRow(ctx, `WITH RECURSIVE w(pid) AS (
    SELECT pid FROM pg_stat_activity WHERE $1 = ANY(pg_blocking_pids(pid))
    UNION
    SELECT a.pid FROM pg_stat_activity a JOIN w ON w.pid = ANY(pg_blocking_pids(a.pid))
) SELECT count(*) FROM w`, holder).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		select {
		case <-tick.C:
		case <-done:
			t.Fatalf("the burst ended with %d attempts waiting for the held count, want %d", waiting, want)
		case <-deadline:
			t.Fatalf("%d attempts of the burst waited for the held count within 2 s, want %d", waiting, want)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	<-done
}

// TestPasswordBurstsGetNoMoreChecksThanTheLimit: forty wrong passwords
// and the right one at once, ten rounds, each from an address of its own,
// at storage's sign-in and at circulation's (the pages'): five checked,
// the rest refused unchecked (429 LOGIN_LOCKED), the account never opened
// by the burst, storage's count the five; the right password after the
// burst is refused unchecked too.
func TestPasswordBurstsGetNoMoreChecksThanTheLimit(t *testing.T) {
	t.Parallel()
	// The account's rate from new addresses is lifted: every round's
	// address is new, and this test is about the pair's count.
	c := harness.NewCluster(t, harness.Options{Circulations: 1, FeatureOn: true, StorageEnv: []string{"LOGIN_ACCOUNT_RATE=0"}})
	const password = "correct horse battery staple"
	c.Account(t, "ada", "Ada", "Lovelace", schemas.RoleLibrarian, password)
	headers := map[string]string{schemas.HeaderTenant: c.Tenant}
	for round := range 10 {
		at := c.Storage
		if round%2 == 1 {
			at = c.Circulations[0]
		}
		address := fmt.Sprintf("127.0.1.%d", round+1)
		before := checked(t, c, "password")
		var statuses []int
		heldAtStorage(t, c, "pair:"+address+"|ada", func() {
			statuses = atOnce(41, func(i int) int {
				p := password
				if i > 0 {
					p = fmt.Sprintf("guess %d", i)
				}
				return c.DoFrom(address, at, "POST", "/authn/login-with-expiry", map[string]any{"username": "ada", "password": p}, headers).Status
			})
		})
		n := checked(t, c, "password") - before
		count := map[int]int{}
		for _, s := range statuses {
			count[s]++
		}
		if n != maxFailures || count[http.StatusCreated] != 0 || count[http.StatusUnprocessableEntity]+count[http.StatusTooManyRequests] != 41 {
			t.Fatalf("round %d at %s: %d passwords checked, answers %v; want %d checked, none signed in, the rest 422 or 429",
				round, at.Name, n, count, maxFailures)
		}
		if got := guessCount(t, c, "pair:"+address+"|ada"); got != maxFailures {
			t.Errorf("round %d: storage counts %d attempts of the pair, want %d", round, got, maxFailures)
		}
		before = checked(t, c, "password")
		if r := c.DoFrom(address, at, "POST", "/authn/login-with-expiry", map[string]any{"username": "ada", "password": password}, headers); r.Status != http.StatusTooManyRequests ||
			r.ErrorCodes()[0] != schemas.CodeLoginLocked || checked(t, c, "password") != before {
			t.Errorf("round %d: the right password after the burst: %d %s, want 429 LOGIN_LOCKED unchecked", round, r.Status, r.Body)
		}
		t.Logf("round %d at %s: %d checked, answers %v", round, at.Name, n, count)
	}
}

// TestGuessesLockThePlaceNotTheAccount: five wrong passwords from address
// A lock the account at A (the right password there too, unchecked); its
// owner signs in from address B at once, directly and through the pages'
// sign-in at circulation, which names the page's address to storage (from
// the same B: guesses from two new addresses have filled the account's
// rate from new ones, which B, having signed in, is not held to).
func TestGuessesLockThePlaceNotTheAccount(t *testing.T) {
	t.Parallel()
	c := harness.NewCluster(t, harness.Options{Circulations: 1, FeatureOn: true})
	const password = "correct horse battery staple"
	c.Account(t, "ada", "Ada", "Lovelace", schemas.RoleLibrarian, password)
	headers := map[string]string{schemas.HeaderTenant: c.Tenant}
	for _, at := range []*harness.Process{c.Storage, c.Circulations[0]} {
		a, b := "127.0.2.1", "127.0.2.2"
		if at != c.Storage {
			a = "127.0.2.3"
		}
		for i := range maxFailures {
			if r := c.DoFrom(a, at, "POST", "/authn/login-with-expiry", map[string]any{"username": "ada", "password": fmt.Sprintf("guess %d", i)}, headers); r.Status != http.StatusUnprocessableEntity {
				t.Fatalf("guess %d at %s: %d %s", i, at.Name, r.Status, r.Body)
			}
		}
		if r := c.DoFrom(a, at, "POST", "/authn/login-with-expiry", map[string]any{"username": "ada", "password": password}, headers); r.Status != http.StatusTooManyRequests || r.Header.Get("Retry-After") == "" {
			t.Errorf("the right password from the guessing address at %s: %d %s, want 429 with Retry-After", at.Name, r.Status, r.Body)
		}
		if r := c.DoFrom(b, at, "POST", "/authn/login-with-expiry", map[string]any{"username": "ada", "password": password}, headers); r.Status != http.StatusCreated {
			t.Errorf("the owner from another address at %s: %d %s, want 201", at.Name, r.Status, r.Body)
		}
	}
	// What the pages' sign-in was counted by: the page's address, not
	// circulation's.
	if got := guessCount(t, c, "pair:127.0.2.3|ada"); got != maxFailures {
		t.Errorf("storage counts %d attempts of the page's address, want %d", got, maxFailures)
	}
	// A header naming another address, from a client no service trusts as
	// a proxy, changes nothing: still locked.
	h := map[string]string{schemas.HeaderTenant: c.Tenant, schemas.HeaderForwardedFor: "203.0.113.9"}
	if r := c.DoFrom("127.0.2.3", c.Circulations[0], "POST", "/authn/login-with-expiry", map[string]any{"username": "ada", "password": password}, h); r.Status != http.StatusTooManyRequests {
		t.Errorf("a forged X-Forwarded-For from an untrusted address: %d, want 429", r.Status)
	}
}

// TestPINBurstsGetNoMoreChecksThanTheLimit: forty wrong PINs and the right
// one at once, ten rounds, from a self-check machine at circulation's
// POST /circulation/patron-pin/verify: five checked, the rest refused
// unchecked (429 PIN_LOCKED), the right one never taken (no 204).
func TestPINBurstsGetNoMoreChecksThanTheLimit(t *testing.T) {
	t.Parallel()
	c := harness.NewCluster(t, harness.Options{Circulations: 1, FeatureOn: true})
	lib := c.SetupLibrary(1, 1, 0)
	patron := lib.Patrons[0]
	id := c.IDOf(t, "/users", "users", patron)
	kiosk := map[string]string{schemas.HeaderTenant: c.Tenant, schemas.HeaderToken: c.Token(schemas.RoleSelfCheck)}
	for round := range 10 {
		// Setting the PIN again starts its count again.
		c.Do(c.Storage, "POST", "/patron-pin", map[string]any{"id": id, "pin": "7319"}).Want(t, http.StatusCreated)
		before := checked(t, c, "pin")
		var statuses []int
		heldAtStorage(t, c, "pin:"+id, func() {
			statuses = atOnce(41, func(i int) int {
				pin := "7319"
				if i > 0 {
					pin = fmt.Sprintf("%04d", 1000+i)
				}
				// Each round from an address of its own: five wrong PINs
				// a round, ten rounds, would lock one address (twenty).
				return c.DoFrom(fmt.Sprintf("127.0.4.%d", round+1), c.Circulations[0], "POST", "/circulation/patron-pin/verify",
					map[string]any{"userBarcode": patron, "pin": pin}, kiosk).Status
			})
		})
		n := checked(t, c, "pin") - before
		count := map[int]int{}
		for _, s := range statuses {
			count[s]++
		}
		if n != maxFailures || count[http.StatusNoContent] != 0 || count[http.StatusUnprocessableEntity]+count[http.StatusTooManyRequests] != 41 {
			t.Fatalf("round %d: %d PINs checked, answers %v; want %d checked, none right, the rest 422 or 429", round, n, count, maxFailures)
		}
		if got := guessCount(t, c, "pin:"+id); got != maxFailures {
			t.Errorf("round %d: storage counts %d PIN attempts, want %d", round, got, maxFailures)
		}
	}
}

// TestSIP2PINBurstsGetNoMoreChecksThanTheLimit: forty wrong PINs and the
// right one, sent at once over ten kiosks' connections to a listener that
// requires PINs, each a check-out of the patron's item, ten rounds: five
// checked, no check-out answered 121, no loan made.
func TestSIP2PINBurstsGetNoMoreChecksThanTheLimit(t *testing.T) {
	t.Parallel()
	c, lib, door := sip2Cluster(t, 1, 1, 1, 0, map[string]any{"patronPin": "required"})
	patron, item := lib.Patrons[0], lib.Items[0][0]
	id := c.IDOf(t, "/users", "users", patron)
	kiosks := make([]*harness.SIP2Client, 10)
	for i := range kiosks {
		kiosks[i] = harness.DialSIP2From(t, fmt.Sprintf("127.0.3.%d", i+1), door.SIP2Addr)
		kiosks[i].Login("user_id", "passw0rd")
	}
	for round := range 10 {
		c.Do(c.Storage, "POST", "/patron-pin", map[string]any{"id": id, "pin": "7319"}).Want(t, http.StatusCreated)
		before := checked(t, c, "pin")
		// Connection i sends the PINs i, i+10, i+20…: the right one is
		// the round's, so it comes early and late in turn.
		var replies [][]string
		heldAtStorage(t, c, "pin:"+id, func() {
			replies = atOnce(len(kiosks), func(k int) []string {
				var out []string
				for p := k; p < 41; p += len(kiosks) {
					pin := fmt.Sprintf("%04d", 1000+p)
					if p == (round*4)%41 {
						pin = "7319"
					}
					out = append(out, kiosks[k].Send(checkOutMsg(patron, item)+"AD"+pin+"|"))
				}
				return out
			})
		})
		n := checked(t, c, "pin") - before
		for _, rs := range replies {
			for _, r := range rs {
				if !strings.HasPrefix(r, "120") {
					t.Fatalf("round %d: a check-out in a burst of PINs answered %q", round, r)
				}
			}
		}
		if n != maxFailures {
			t.Fatalf("round %d: %d PINs checked, want %d", round, n, maxFailures)
		}
		if l := openLoans(t, c, patron); l != 0 {
			t.Fatalf("round %d: %d loans made", round, l)
		}
	}
}

// TestSIP2LoginBurstsLockTheKioskNotTheAccount: ten rounds of sixty-four
// connections from one address each (SIP2_MAX_CONNECTIONS_PER_ADDRESS),
// logging in to the shared kiosk account at once with sixty-three wrong
// passwords and the right one: five checked, none logged in (940 each).
// After every round the kiosks at other addresses log in at once: the
// guesses locked the guessing kiosk's address, not the account.
func TestSIP2LoginBurstsLockTheKioskNotTheAccount(t *testing.T) {
	t.Parallel()
	// The account's rate from new addresses is lifted: every round's
	// address is new, and this test is about the pair's count (the rate is
	// TestGuessesFromManyAddressesSlowOnlyNewOnes's).
	c := harness.NewCluster(t, harness.Options{Circulations: 1, FeatureOn: true, StorageEnv: []string{"LOGIN_ACCOUNT_RATE=0"}})
	c.Account(t, "user_id", "Kiosk", "One", schemas.RoleSelfCheck, "passw0rd")
	door := c.StartSIP2(t, 0, nil)
	for round := range 10 {
		address := fmt.Sprintf("127.0.4.%d", round+1)
		conns := make([]*harness.SIP2Client, 64)
		for i := range conns {
			conns[i] = harness.DialSIP2From(t, address, door.SIP2Addr)
		}
		before := checked(t, c, "password")
		var replies []string
		heldAtStorage(t, c, "pair:"+address+"|user_id", func() {
			replies = atOnce(len(conns), func(i int) string {
				p := fmt.Sprintf("guess-%d", i)
				if i == round*6 {
					p = "passw0rd"
				}
				return conns[i].Send("9300CNuser_id|CO" + p + "|CPkiosk|")
			})
		})
		n := checked(t, c, "password") - before
		for _, r := range replies {
			if !strings.HasPrefix(r, "940") {
				t.Fatalf("round %d: a login in a burst of guesses answered %q", round, r)
			}
		}
		if n != maxFailures {
			t.Fatalf("round %d: %d passwords checked, want %d", round, n, maxFailures)
		}
		if got := guessCount(t, c, "pair:"+address+"|user_id"); got != maxFailures {
			t.Errorf("round %d: storage counts %d logins of the guessing kiosk, want %d", round, got, maxFailures)
		}
		harness.DialSIP2From(t, fmt.Sprintf("127.0.4.%d", 100+round), door.SIP2Addr).Login("user_id", "passw0rd")
		for _, k := range conns {
			k.Conn.Close()
		}
	}
}

// TestGuessesFromManyAddressesSlowOnlyNewOnes: the kiosk account signed in
// at K; guesses from three new addresses, five each, fill the account's
// rate from new addresses (LOGIN_ACCOUNT_RATE, ten a minute): the right
// password from a fourth new address is refused unchecked for at most a
// minute, over HTTP and over SIP2, while K logs in at once.
func TestGuessesFromManyAddressesSlowOnlyNewOnes(t *testing.T) {
	t.Parallel()
	c, _, door := sip2Cluster(t, 1, 1, 1, 0, nil)
	harness.DialSIP2From(t, "127.0.5.250", door.SIP2Addr).Login("user_id", "passw0rd")
	headers := map[string]string{schemas.HeaderTenant: c.Tenant}
	for a := range 3 {
		for i := range maxFailures {
			c.DoFrom(fmt.Sprintf("127.0.5.%d", a+1), c.Storage, "POST", "/authn/login-with-expiry",
				map[string]any{"username": "user_id", "password": fmt.Sprintf("guess %d", i)}, headers)
		}
	}
	before := checked(t, c, "password")
	r := c.DoFrom("127.0.5.9", c.Storage, "POST", "/authn/login-with-expiry", map[string]any{"username": "user_id", "password": "passw0rd"}, headers)
	if r.Status != http.StatusTooManyRequests || r.ErrorCodes()[0] != schemas.CodeLoginLocked || r.Header.Get("Retry-After") == "" {
		t.Errorf("the right password from a new address: %d %s, want 429 LOGIN_LOCKED", r.Status, r.Body)
	} else if wait := r.Header.Get("Retry-After"); len(wait) > 2 {
		t.Errorf("a new address waits %s s, want at most a minute", wait)
	}
	if got := harness.DialSIP2From(t, "127.0.5.10", door.SIP2Addr).Send("9300CNuser_id|COpassw0rd|CPkiosk|"); !strings.HasPrefix(got, "940") {
		t.Errorf("a kiosk at a new address: %q, want 940 while the account's rate is full", got)
	}
	if n := checked(t, c, "password") - before; n != 0 {
		t.Errorf("%d passwords checked past the account's rate", n)
	}
	harness.DialSIP2From(t, "127.0.5.250", door.SIP2Addr).Login("user_id", "passw0rd")
}
