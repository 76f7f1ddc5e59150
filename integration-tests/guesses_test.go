package integration

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/checkoutlock/integration-tests/harness"
	"github.com/checkoutlock/schemas"
)

// Guesses at the real services: every attempt (a password, a PIN, a
// kiosk's login) is counted before its secret is checked, so a burst gets
// no more wrong secrets checked than the limit, and a crowd of right ones
// all get in; guesses lock the place they come from, not the account.

// checked is how many secrets of kind (password, pin) storage has checked
// so far, by its metrics: those that matched and those that did not.
func checked(t *testing.T, c *harness.Cluster, kind string) (matched, mismatched int) {
	t.Helper()
	n := map[string]int{}
	for _, result := range []string{"match", "mismatch"} {
		v, found := c.Metric(t, c.Storage, fmt.Sprintf(`login_secrets_checked_total{kind=%q,result=%q}`, kind, result))
		if !found {
			t.Fatalf("storage exports no login_secrets_checked_total for %s", kind)
		}
		n[result] = int(v)
	}
	return n["match"], n["mismatch"]
}

// checkedSince is how many secrets of kind storage has checked since
// checked said matched and mismatched.
func checkedSince(t *testing.T, c *harness.Cluster, kind string, matched, mismatched int) (int, int) {
	t.Helper()
	m, mm := checked(t, c, kind)
	return m - matched, mm - mismatched
}

// answerOf is an HTTP answer as the burst tests compare them: its status,
// and its first error's code when it has one.
func answerOf(r harness.Response) string {
	if codes := r.ErrorCodes(); len(codes) > 0 {
		return fmt.Sprintf("%d %s", r.Status, codes[0])
	}
	return strconv.Itoa(r.Status)
}

// checkBurst holds a burst's answers (the right secret's first, the wrong
// ones' after): exactly maxFailures wrong secrets checked and answered
// wrong, the right one checked at most once; the other wrong ones refused
// unchecked (one of unchecked); and the right one answered ok when it was
// checked, and otherwise as some wrong one was refused unchecked: nothing
// sets its answer apart but success.
func checkBurst(t *testing.T, round int, answers []string, matched, mismatched int, ok, wrong string, unchecked ...string) {
	t.Helper()
	counts := map[string]int{}
	for _, a := range answers[1:] {
		counts[a]++
	}
	if mismatched != maxFailures || matched > 1 || counts[wrong] != mismatched {
		t.Fatalf("round %d: %d wrong and %d right secrets checked, the wrong ones answered %v; want %d wrong checked (answered %s), the right one at most once",
			round, mismatched, matched, counts, maxFailures, wrong)
	}
	for a, n := range counts {
		if a != wrong && !slices.Contains(unchecked, a) {
			t.Fatalf("round %d: %d wrong secrets answered %s; want %s or refused unchecked %v", round, n, a, wrong, unchecked)
		}
	}
	switch right := answers[0]; {
	case right == ok && matched == 1:
	case right != ok && matched == 0 && counts[right] > 0 && slices.Contains(unchecked, right):
	default:
		t.Fatalf("round %d: the right secret answered %s (checked %d times), the wrong ones %v; want %s when checked, else refused as a wrong one was",
			round, right, matched, counts, ok)
	}
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
// transaction of the test's own (heldWhile), and lets the count go once
// at least 2×maxFailures of the burst's attempts wait for it at storage:
// the burst is then at once where the limit is decided, whatever pace its
// requests kept on the way there (kiosks, the SIP2 door, circulation, a
// loaded machine). Held so, the right secret among them is one of the
// burst in any order: it may be let in first, or wait its turn behind the
// wrong ones until they lock the count. Without the hold, the right
// secret sent first could reach storage and be checked before the others
// had even arrived, which is what a lone attempt is owed, and tests
// nothing of a burst.
func heldAtStorage(t *testing.T, c *harness.Cluster, key string, burst func()) {
	t.Helper()
	heldWhile(t, c, 2*maxFailures, `INSERT INTO circulation_storage.login_failure AS f (tenant_id, key, failures, first_at)
VALUES ($1, $2, 0, now()) ON CONFLICT (tenant_id, key) DO UPDATE SET failures = f.failures`, []any{c.Tenant, key}, burst)
}

// TestPasswordBurstsGetNoMoreChecksThanTheLimit: forty wrong passwords
// and the right one at once, ten rounds, each from an address of its own,
// at storage's sign-in and at circulation's (the pages'): exactly five
// wrong ones checked, the rest refused unchecked (429 LOGIN_LOCKED, or
// LOGIN_BUSY); the right one signed in only when its turn came before the
// five wrong ones locked the pair, else refused as the wrong ones were;
// storage's count the five; the right password after the burst refused
// unchecked.
func TestPasswordBurstsGetNoMoreChecksThanTheLimit(t *testing.T) {
	t.Parallel()
	// The account's rate from new addresses is lifted: every round's
	// address is new, and this test is about the pair's count.
	c := harness.NewCluster(t, harness.Options{Circulations: 1, FeatureOn: true, StorageEnv: []string{"LOGIN_ACCOUNT_RATE=0"}, CirculationEnv: heldEnv})
	const password = "correct horse battery staple"
	c.Account(t, "ada", "Ada", "Lovelace", schemas.RoleLibrarian, password)
	headers := map[string]string{schemas.HeaderTenant: c.Tenant}
	for round := range 10 {
		at := c.Storage
		if round%2 == 1 {
			at = c.Circulations[0]
		}
		address := fmt.Sprintf("127.0.1.%d", round+1)
		matched, mismatched := checked(t, c, "password")
		var answers []string
		heldAtStorage(t, c, "pair:"+address+"|ada", func() {
			answers = atOnce(41, func(i int) string {
				p := password
				if i > 0 {
					p = fmt.Sprintf("guess %d", i)
				}
				return answerOf(c.DoFrom(address, at, "POST", "/authn/login-with-expiry", map[string]any{"username": "ada", "password": p}, headers))
			})
		})
		matched, mismatched = checkedSince(t, c, "password", matched, mismatched)
		checkBurst(t, round, answers, matched, mismatched, "201", "422 "+schemas.CodeLoginFailed,
			"429 "+schemas.CodeLoginLocked, "429 "+schemas.CodeLoginBusy)
		if got := guessCount(t, c, "pair:"+address+"|ada"); got != maxFailures {
			t.Errorf("round %d: storage counts %d wrong passwords of the pair, want %d", round, got, maxFailures)
		}
		before, _ := checked(t, c, "password")
		if r := c.DoFrom(address, at, "POST", "/authn/login-with-expiry", map[string]any{"username": "ada", "password": password}, headers); answerOf(r) != "429 "+schemas.CodeLoginLocked {
			t.Errorf("round %d: the right password after the burst: %d %s, want 429 LOGIN_LOCKED unchecked", round, r.Status, r.Body)
		} else if after, _ := checked(t, c, "password"); after != before {
			t.Errorf("round %d: the right password after the burst was checked", round)
		}
		t.Logf("round %d at %s: the right one %s, %d wrong checked", round, at.Name, answers[0], mismatched)
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
// POST /circulation/patron-pin/verify: exactly five wrong ones checked,
// the rest refused unchecked (429 PIN_LOCKED, or PIN_BUSY); the right one
// taken (204) only when its turn came before the five locked the PIN,
// else refused as the wrong ones were.
func TestPINBurstsGetNoMoreChecksThanTheLimit(t *testing.T) {
	t.Parallel()
	c := harness.NewCluster(t, harness.Options{Circulations: 1, FeatureOn: true, CirculationEnv: heldEnv})
	lib := c.SetupLibrary(1, 1, 0)
	patron := lib.Patrons[0]
	id := c.IDOf(t, "/users", "users", patron)
	kiosk := map[string]string{schemas.HeaderTenant: c.Tenant, schemas.HeaderToken: c.Token(schemas.RoleSelfCheck)}
	for round := range 10 {
		// Setting the PIN again starts its count again.
		c.Do(c.Storage, "POST", "/patron-pin", map[string]any{"id": id, "pin": "7319"}).Want(t, http.StatusCreated)
		matched, mismatched := checked(t, c, "pin")
		var answers []string
		heldAtStorage(t, c, "pin:"+id, func() {
			answers = atOnce(41, func(i int) string {
				pin := "7319"
				if i > 0 {
					pin = fmt.Sprintf("%04d", 1000+i)
				}
				// Each round from an address of its own: five wrong PINs
				// a round, ten rounds, would lock one address (twenty).
				return answerOf(c.DoFrom(fmt.Sprintf("127.0.4.%d", round+1), c.Circulations[0], "POST", "/circulation/patron-pin/verify",
					map[string]any{"userBarcode": patron, "pin": pin}, kiosk))
			})
		})
		matched, mismatched = checkedSince(t, c, "pin", matched, mismatched)
		checkBurst(t, round, answers, matched, mismatched, "204", "422 "+schemas.CodePinInvalid,
			"429 "+schemas.CodePinLocked, "429 "+schemas.CodePinBusy)
		if got := guessCount(t, c, "pin:"+id); got != maxFailures {
			t.Errorf("round %d: storage counts %d wrong PINs, want %d", round, got, maxFailures)
		}
	}
}

// TestSIP2PINBurstsGetNoMoreChecksThanTheLimit: forty wrong PINs and the
// right one, sent at once over ten kiosks' connections to a listener that
// requires PINs, each a check-out of the patron's item, ten rounds:
// exactly five wrong ones checked, none of their check-outs lent; the
// right one's check-out lent (121, one loan) only when its PIN's turn came
// before the five locked it, else refused (120) like the rest.
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
		matched, mismatched := checked(t, c, "pin")
		// Connection i sends the PINs i, i+10, i+20…: the right one is
		// the round's, so it comes early and late in turn.
		right := (round * 4) % 41
		var replies [][]string
		heldAtStorage(t, c, "pin:"+id, func() {
			replies = atOnce(len(kiosks), func(k int) []string {
				var out []string
				for p := k; p < 41; p += len(kiosks) {
					pin := fmt.Sprintf("%04d", 1000+p)
					if p == right {
						pin = "7319"
					}
					out = append(out, kiosks[k].Send(checkOutMsg(patron, item)+"AD"+pin+"|"))
				}
				return out
			})
		})
		matched, mismatched = checkedSince(t, c, "pin", matched, mismatched)
		lent := 0
		for k, rs := range replies {
			for i, r := range rs {
				switch {
				case strings.HasPrefix(r, "121") && k+i*len(kiosks) == right:
					lent++
				case !strings.HasPrefix(r, "120"):
					t.Fatalf("round %d: a check-out with a wrong PIN, or refused, answered %q", round, r)
				}
			}
		}
		if mismatched != maxFailures || matched != lent {
			t.Fatalf("round %d: %d wrong and %d right PINs checked, %d lent; want %d wrong, the right one lent exactly when checked",
				round, mismatched, matched, lent, maxFailures)
		}
		if l := openLoans(t, c, patron); l != lent {
			t.Fatalf("round %d: %d loans made, want %d", round, l, lent)
		}
		if lent > 0 {
			if r := kiosks[0].Send(checkInMsg(item)); !strings.HasPrefix(r, "101") {
				t.Fatalf("round %d: the check-in after the burst: %q", round, r)
			}
		}
		t.Logf("round %d: lent %d", round, lent)
	}
}

// TestSIP2LoginBurstsLockTheKioskNotTheAccount: ten rounds of sixty-four
// connections from one address each (SIP2_MAX_CONNECTIONS_PER_ADDRESS),
// logging in to the shared kiosk account at once with sixty-three wrong
// passwords and the right one: exactly five wrong ones checked, all of
// them refused (940), the right one logged in (941) only when its turn
// came before the five locked the kiosk's address. After every round the
// kiosks at other addresses log in at once: the guesses locked the
// guessing kiosk's address, not the account.
func TestSIP2LoginBurstsLockTheKioskNotTheAccount(t *testing.T) {
	t.Parallel()
	// The account's rate from new addresses is lifted: every round's
	// address is new, and this test is about the pair's count (the rate is
	// the next test's).
	c := harness.NewCluster(t, harness.Options{Circulations: 1, FeatureOn: true, StorageEnv: []string{"LOGIN_ACCOUNT_RATE=0"}, CirculationEnv: heldEnv})
	c.Account(t, "user_id", "Kiosk", "One", schemas.RoleSelfCheck, "passw0rd")
	door := c.StartSIP2(t, 0, nil)
	for round := range 10 {
		address := fmt.Sprintf("127.0.4.%d", round+1)
		conns := make([]*harness.SIP2Client, 64)
		for i := range conns {
			conns[i] = harness.DialSIP2From(t, address, door.SIP2Addr)
		}
		right := round * 6
		matched, mismatched := checked(t, c, "password")
		var replies []string
		heldAtStorage(t, c, "pair:"+address+"|user_id", func() {
			replies = atOnce(len(conns), func(i int) string {
				p := fmt.Sprintf("guess-%d", i)
				if i == right {
					p = "passw0rd"
				}
				return conns[i].Send("9300CNuser_id|CO" + p + "|CPkiosk|")[:3]
			})
		})
		matched, mismatched = checkedSince(t, c, "password", matched, mismatched)
		in := 0
		for i, r := range replies {
			switch {
			case r == "941" && i == right:
				in++
			case r != "940":
				t.Fatalf("round %d: a login with a wrong password, or refused, answered %q", round, r)
			}
		}
		if mismatched != maxFailures || matched != in {
			t.Fatalf("round %d: %d wrong and %d right passwords checked, %d logged in; want %d wrong, the right one in exactly when checked",
				round, mismatched, matched, in, maxFailures)
		}
		if got := guessCount(t, c, "pair:"+address+"|user_id"); got != maxFailures {
			t.Errorf("round %d: storage counts %d wrong logins of the guessing kiosk, want %d", round, got, maxFailures)
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
	matched, mismatched := checked(t, c, "password")
	r := c.DoFrom("127.0.5.9", c.Storage, "POST", "/authn/login-with-expiry", map[string]any{"username": "user_id", "password": "passw0rd"}, headers)
	if r.Status != http.StatusTooManyRequests || r.ErrorCodes()[0] != schemas.CodeLoginLocked || r.Header.Get("Retry-After") == "" {
		t.Errorf("the right password from a new address: %d %s, want 429 LOGIN_LOCKED", r.Status, r.Body)
	} else if wait := r.Header.Get("Retry-After"); len(wait) > 2 {
		t.Errorf("a new address waits %s s, want at most a minute", wait)
	}
	if got := harness.DialSIP2From(t, "127.0.5.10", door.SIP2Addr).Send("9300CNuser_id|COpassw0rd|CPkiosk|"); !strings.HasPrefix(got, "940") {
		t.Errorf("a kiosk at a new address: %q, want 940 while the account's rate is full", got)
	}
	if m, mm := checkedSince(t, c, "password", matched, mismatched); m+mm != 0 {
		t.Errorf("%d passwords checked past the account's rate", m+mm)
	}
	harness.DialSIP2From(t, "127.0.5.250", door.SIP2Addr).Login("user_id", "passw0rd")
}
