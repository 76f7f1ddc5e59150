package integration

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/checkoutlock/integration-tests/harness"
	"github.com/checkoutlock/schemas"
	"github.com/checkoutlock/schemas/errs/errhttp"
)

// A crowd of right secrets is not an attack: a branch's kiosks behind one
// address signing in together (after the door or the network restarts),
// or a patron's right PIN at several kiosks at once, all get in, each in
// its turn, and the next from that address is let in too. Storage waits
// an attempt's turn for at most LOGIN_BUSY_WAIT (2 s), then answers it
// busy (LOGIN_BUSY, PIN_BUSY) with Retry-After: a client asks again after
// it, as the SIP2 door does. On a quiet machine no turn takes that long;
// on one too loaded to check fifty secrets in two seconds, some are told
// busy, and are let in when they ask again. Nothing else is an answer.

// crowdSizes are the crowds tried, each ten rounds: a branch's kiosks,
// and more than a door lets connect from one address in the default.
var crowdSizes = []int{12, 50}

// maxAsks bounds how often a crowd's client asks again after a busy
// answer: each ask waits its Retry-After, a second.
const maxAsks = 10

// askedUntilLetIn sends a request, and again after the Retry-After of a
// busy answer (LOGIN_BUSY, PIN_BUSY: refused unchecked while the others'
// turns came), as a client is asked to; it returns the last answer, how
// many busy answers came before it, and how long it all took.
func askedUntilLetIn(send func() harness.Response) (answer string, busy int, took time.Duration) {
	start := time.Now()
	for {
		r := send()
		answer = answerOf(r)
		if busy == maxAsks || (answer != "429 "+schemas.CodeLoginBusy && answer != "429 "+schemas.CodePinBusy) {
			return answer, busy, time.Since(start)
		}
		busy++
		<-time.After(errhttp.RetryAfter(r.Header))
	}
}

// slowest is the longest of ds.
func slowest(ds []time.Duration) time.Duration { return slices.Max(ds) }

// timed runs call and returns its result and how long it took.
func timed[T any](call func() T) (T, time.Duration) {
	start := time.Now()
	out := call()
	return out, time.Since(start)
}

// TestACrowdOfRightPasswordsAllSignIn: 12 and 50 sign-ins with the right
// password at once from one address, ten rounds each, at storage and at
// circulation (the pages') in turn: every one 201 (asking again after a
// busy answer), the pair's count empty after, and the next sign-in from
// the address 201 too.
func TestACrowdOfRightPasswordsAllSignIn(t *testing.T) {
	t.Parallel()
	c := harness.NewCluster(t, harness.Options{Circulations: 1, FeatureOn: true})
	const password = "a kiosk's password"
	c.Account(t, "branch", "Branch", "Kiosks", schemas.RoleSelfCheck, password)
	headers := map[string]string{schemas.HeaderTenant: c.Tenant}
	body := map[string]any{"username": "branch", "password": password}
	for n, size := range crowdSizes {
		address := fmt.Sprintf("127.0.6.%d", n+1)
		for round := range 10 {
			at := c.Storage
			if round%2 == 1 {
				at = c.Circulations[0]
			}
			took, busy := crowd(t, size, "201", func() harness.Response {
				return c.DoFrom(address, at, "POST", "/authn/login-with-expiry", body, headers)
			})
			if got := guessCount(t, c, "pair:"+address+"|branch"); got != 0 {
				t.Errorf("crowd of %d, round %d: storage counts %d wrong passwords of the pair, want none", size, round, got)
			}
			c.DoFrom(address, at, "POST", "/authn/login-with-expiry", body, headers).Want(t, http.StatusCreated)
			t.Logf("crowd of %d, round %d at %s: all signed in, the slowest in %s, %d told busy first", size, round, at.Name, took, busy)
		}
	}
}

// crowd sends size requests at once, each asked again while it is told
// busy (askedUntilLetIn), and fails the test unless every one is answered
// want in the end; it returns the slowest's time and how many were told
// busy first.
func crowd(t *testing.T, size int, want string, send func() harness.Response) (time.Duration, int) {
	t.Helper()
	type result struct {
		answer string
		busy   int
		took   time.Duration
	}
	results := atOnce(size, func(int) result {
		a, busy, took := askedUntilLetIn(send)
		return result{a, busy, took}
	})
	took, busy := make([]time.Duration, size), 0
	for i, r := range results {
		if r.answer != want {
			t.Fatalf("a crowd of %d: request %d answered %s (after %d busy answers), want every one %s", size, i, r.answer, r.busy, want)
		}
		took[i] = r.took
		if r.busy > 0 {
			busy++
		}
	}
	return slowest(took).Round(time.Millisecond), busy
}

// TestSIP2ACrowdOfKiosksAllLogIn: 12 and 50 kiosks behind one address
// logging in at once over SIP2 with the right password, ten rounds each:
// every one 941, and a kiosk from that address right after too.
func TestSIP2ACrowdOfKiosksAllLogIn(t *testing.T) {
	t.Parallel()
	_, _, door := sip2Cluster(t, 1, 1, 1, 0, nil)
	for n, size := range crowdSizes {
		for round := range 10 {
			// A round's address of its own: the last round's connections
			// may still be closing at the door, which lets no more than
			// SIP2_MAX_CONNECTIONS_PER_ADDRESS (64) from one address in.
			address := fmt.Sprintf("127.0.7.%d", 10*n+round+1)
			kiosks := make([]*harness.SIP2Client, size)
			for i := range kiosks {
				kiosks[i] = harness.DialSIP2From(t, address, door.SIP2Addr)
			}
			type reply struct {
				text string
				took time.Duration
			}
			replies := atOnce(size, func(i int) reply {
				r, took := timed(func() string { return kiosks[i].Send("9300CNuser_id|COpassw0rd|CPkiosk|") })
				return reply{r, took}
			})
			took := make([]time.Duration, size)
			for i, r := range replies {
				if !strings.HasPrefix(r.text, "941") {
					t.Fatalf("crowd of %d, round %d: kiosk %d answered %q, want every one 941", size, round, i, r.text)
				}
				took[i] = r.took
			}
			harness.DialSIP2From(t, address, door.SIP2Addr).Login("user_id", "passw0rd")
			t.Logf("crowd of %d, round %d: all logged in, the slowest in %s", size, round, slowest(took).Round(time.Millisecond))
			for _, k := range kiosks {
				k.Conn.Close()
			}
		}
	}
}

// TestACrowdOfRightPINsAllGetIn: a patron's right PIN 12 and 50 times at
// once from one kiosk address, ten rounds each, over HTTP (circulation's
// POST /circulation/patron-pin/verify, 204 each, asking again after a busy
// answer) and over SIP2 (patron
// information with AD on a listener requiring PINs, CQY each): every one
// taken, the PIN's count empty after.
func TestACrowdOfRightPINsAllGetIn(t *testing.T) {
	t.Parallel()
	// Patron summaries are not rated here: the crowd reads fifty at once
	// from one kiosk address (the rate is tested on its own).
	c := harness.NewCluster(t, harness.Options{Circulations: 1, FeatureOn: true, CirculationEnv: []string{"PATRON_SUMMARY_RATE=0"}})
	lib := c.SetupLibrary(1, 1, 0)
	c.Account(t, "user_id", "Kiosk", "One", schemas.RoleSelfCheck, "passw0rd")
	door := c.StartSIP2(t, 0, map[string]any{"patronPin": "required"})
	patron := lib.Patrons[0]
	id := c.IDOf(t, "/users", "users", patron)
	c.Do(c.Storage, "POST", "/patron-pin", map[string]any{"id": id, "pin": "7319"}).Want(t, http.StatusCreated)
	kiosk := map[string]string{schemas.HeaderTenant: c.Tenant, schemas.HeaderToken: c.Token(schemas.RoleSelfCheck)}
	for n, size := range crowdSizes {
		address := fmt.Sprintf("127.0.8.%d", n+1)
		kiosks := make([]*harness.SIP2Client, size)
		for i := range kiosks {
			kiosks[i] = harness.DialSIP2From(t, address, door.SIP2Addr)
			kiosks[i].Login("user_id", "passw0rd")
		}
		for round := range 10 {
			took, busy := crowd(t, size, "204", func() harness.Response {
				return c.DoFrom(address, c.Circulations[0], "POST", "/circulation/patron-pin/verify",
					map[string]any{"userBarcode": patron, "pin": "7319"}, kiosk)
			})
			t.Logf("crowd of %d, round %d over HTTP: all let in, the slowest in %s, %d told busy first", size, round, took, busy)
			replies := atOnce(size, func(i int) string {
				return kiosks[i].Send("63001" + harness.SIP2Date() + "  Y       AOdiku|AA" + patron + "|AD7319|")
			})
			for i, r := range replies {
				if !strings.HasPrefix(r, "64") || harness.SIP2Field(r, "CQ") != "Y" {
					t.Fatalf("crowd of %d, round %d over SIP2: kiosk %d answered %q, want the patron's information with CQY", size, round, i, r)
				}
			}
			if got := guessCount(t, c, "pin:"+id); got != 0 {
				t.Errorf("crowd of %d, round %d: storage counts %d wrong PINs, want none", size, round, got)
			}
		}
	}
}
