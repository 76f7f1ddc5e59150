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
)

// A crowd of right secrets is not an attack: a branch's kiosks behind one
// address signing in together (after the door or the network restarts),
// or a patron's right PIN at several kiosks at once, all get in, each in
// its turn, and the next from that address is let in too. Storage waits
// an attempt's turn for at most LOGIN_BUSY_WAIT (2 s): an HTTP sign-in
// answered 201 was let in within it.

// crowdSizes are the crowds tried, each ten rounds: a branch's kiosks,
// and more than a door lets connect from one address in the default.
var crowdSizes = []int{12, 50}

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
// circulation (the pages') in turn: every one 201, the pair's count
// empty after, and the next sign-in from the address 201 too.
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
			type answer struct {
				status string
				took   time.Duration
			}
			answers := atOnce(size, func(int) answer {
				r, took := timed(func() harness.Response {
					return c.DoFrom(address, at, "POST", "/authn/login-with-expiry", body, headers)
				})
				return answer{answerOf(r), took}
			})
			took := make([]time.Duration, size)
			for i, a := range answers {
				if a.status != "201" {
					t.Fatalf("crowd of %d, round %d at %s: sign-in %d answered %s, want every one 201", size, round, at.Name, i, a.status)
				}
				took[i] = a.took
			}
			if got := guessCount(t, c, "pair:"+address+"|branch"); got != 0 {
				t.Errorf("crowd of %d, round %d: storage counts %d wrong passwords of the pair, want none", size, round, got)
			}
			c.DoFrom(address, at, "POST", "/authn/login-with-expiry", body, headers).Want(t, http.StatusCreated)
			t.Logf("crowd of %d, round %d at %s: all signed in, the slowest in %s", size, round, at.Name, slowest(took).Round(time.Millisecond))
		}
	}
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
// POST /circulation/patron-pin/verify, 204 each) and over SIP2 (patron
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
			answers := atOnce(size, func(int) string {
				return answerOf(c.DoFrom(address, c.Circulations[0], "POST", "/circulation/patron-pin/verify",
					map[string]any{"userBarcode": patron, "pin": "7319"}, kiosk))
			})
			for i, a := range answers {
				if a != "204" {
					t.Fatalf("crowd of %d, round %d over HTTP: PIN %d answered %s, want every one 204", size, round, i, a)
				}
			}
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
