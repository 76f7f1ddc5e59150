package integration

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/checkoutlock/integration-tests/harness"
	"github.com/checkoutlock/schemas"
)

// TestKiosksBehindOneAddressAreNeverToldBusy: a branch's twenty kiosks
// share a kiosk account and, behind the branch's router, one address; each
// asks for patron status five times in a row (more than a kiosk asks in a
// minute on a library's busiest day: a patron at a kiosk every half minute,
// two summaries each), a hundred summaries from one address in seconds,
// ten times the allowance of one kiosk: none is told "busy", since each
// kiosk's sign-in has an allowance of its own. One kiosk asking for patron
// after patron, as one enumerating the patron list would, is still told
// "busy" past its own.
func TestKiosksBehindOneAddressAreNeverToldBusy(t *testing.T) {
	t.Parallel()
	const rate = 10
	c := harness.NewCluster(t, harness.Options{Circulations: 1, FeatureOn: true,
		CirculationEnv: []string{fmt.Sprintf("PATRON_SUMMARY_RATE=%d", rate)}})
	lib := c.SetupLibrary(3, 1, 0)
	c.Account(t, "user_id", "Kiosk", "Branch", schemas.RoleSelfCheck, "passw0rd")
	door := c.StartSIP2(t, 0, nil)
	const branch = "127.0.8.1"
	status := func(k *harness.SIP2Client, patron string) string {
		t.Helper()
		return k.Send("23001" + harness.SIP2Date() + "AOdiku|AA" + patron + "|")
	}
	busy := func(reply string) bool {
		return strings.Contains(strings.ToLower(harness.SIP2Field(reply, "AF")), "busy")
	}
	kiosks := make([]*harness.SIP2Client, 20)
	for i := range kiosks {
		kiosks[i] = harness.DialSIP2From(t, branch, door.SIP2Addr)
		kiosks[i].Login("user_id", "passw0rd")
	}
	told := 0
	start := time.Now()
	for round := range rate / 2 {
		for _, k := range kiosks {
			if r := status(k, lib.Patrons[round%len(lib.Patrons)]); !strings.HasPrefix(r, "24") || busy(r) {
				told++
				t.Errorf("an honest kiosk's patron status: %q", r)
			}
		}
	}
	// One kiosk, patron after patron: its allowance's other half, then busy.
	enumerator := kiosks[0]
	var answered, refused int
	for i := range rate {
		if busy(status(enumerator, lib.Patrons[i%len(lib.Patrons)]+"x")) {
			refused++
		} else {
			answered++
		}
	}
	// What its bucket held, and what it refilled meanwhile (one a sixth
	// of a minute, at ten a minute).
	refilled := int(time.Since(start)*rate/time.Minute) + 1
	if answered < rate/2 || answered > rate/2+refilled || refused == 0 {
		t.Errorf("a kiosk enumerating patrons: %d answered, %d told busy; want %d answered (%d more refilled at most), the rest busy",
			answered, refused, rate/2, refilled)
	}
	t.Logf("SUMMARY TestKiosksBehindOneAddressAreNeverToldBusy: 20 kiosks, %d summaries from one address, %d told busy; one kiosk past its %d a minute: %d of %d told busy",
		20*rate/2, told, rate, refused, rate)
}

// TestOneAccountsSessionsShareItsAllowance: one kiosk account opens twenty
// SIP2 sessions and asks, over each in turn, for patron after patron, as
// one enumerating the patron list through many sign-ins would: together
// its sessions are answered no more than PATRON_SUMMARY_ACCOUNT_SESSIONS
// (here 3) sessions' allowance (and what refilled meanwhile), the rest
// told busy; another kiosk account keeps its own.
func TestOneAccountsSessionsShareItsAllowance(t *testing.T) {
	t.Parallel()
	const rate, sessions = 5, 3
	c := harness.NewCluster(t, harness.Options{Circulations: 1, FeatureOn: true,
		CirculationEnv: []string{fmt.Sprintf("PATRON_SUMMARY_RATE=%d", rate), fmt.Sprintf("PATRON_SUMMARY_ACCOUNT_SESSIONS=%d", sessions)}})
	lib := c.SetupLibrary(3, 1, 0)
	c.Account(t, "user_id", "Kiosk", "Enumerator", schemas.RoleSelfCheck, "passw0rd")
	c.Account(t, "other_kiosk", "Kiosk", "Other", schemas.RoleSelfCheck, "passw0rd")
	door := c.StartSIP2(t, 0, nil)
	status := func(k *harness.SIP2Client, i int) bool {
		t.Helper()
		r := k.Send("23001" + harness.SIP2Date() + "AOdiku|AA" + lib.Patrons[i%len(lib.Patrons)] + "|")
		if !strings.HasPrefix(r, "24") {
			t.Fatalf("patron status: %q", r)
		}
		return !strings.Contains(strings.ToLower(harness.SIP2Field(r, "AF")), "busy")
	}
	kiosks := make([]*harness.SIP2Client, 20)
	for i := range kiosks {
		kiosks[i] = harness.DialSIP2From(t, fmt.Sprintf("127.0.9.%d", i+1), door.SIP2Addr)
		kiosks[i].Login("user_id", "passw0rd")
	}
	start := time.Now()
	answered := 0
	for round := range rate {
		for i, k := range kiosks {
			if status(k, round*len(kiosks)+i) {
				answered++
			}
		}
	}
	refilled := int(time.Since(start)*rate*sessions/time.Minute) + 1
	if answered < rate*sessions || answered > rate*sessions+refilled {
		t.Fatalf("one account's 20 sessions were answered %d patron statuses, want %d (and %d refilled at most): %d sessions' allowance",
			answered, rate*sessions, refilled, sessions)
	}
	other := harness.DialSIP2From(t, "127.0.9.100", door.SIP2Addr)
	other.Login("other_kiosk", "passw0rd")
	for i := range rate {
		if !status(other, i) {
			t.Fatalf("another kiosk account's patron status %d of its %d was told busy", i+1, rate)
		}
	}
	t.Logf("SUMMARY TestOneAccountsSessionsShareItsAllowance: 20 sessions of one account, %d of %d answered (%d sessions of %d a minute)",
		answered, 20*rate, sessions, rate)
}
