package integration

import (
	"strings"
	"testing"
	"time"

	"github.com/checkoutlock/integration-tests/harness"
)

// TestSIP2StatusFollowsTheLibrarySystem: a kiosk polling the door with 99
// reads in 98 whether the library system answers (on-line status, and
// with it check-in, check-out and renewals), as the door asks
// circulation, which asks storage: told "off line" within a second of
// storage stopping, so that it switches to its offline mode at its next
// poll, and "on line" again within a second of storage answering.
func TestSIP2StatusFollowsTheLibrarySystem(t *testing.T) {
	t.Parallel()
	c, _, door := sip2Cluster(t, 1, 1, 1, 0, nil)
	k := harness.DialSIP2(t, door.SIP2Addr)
	k.Login("user_id", "passw0rd")
	status := func() string {
		t.Helper()
		s := k.Send("9900302.00")
		if len(s) < 8 || !strings.HasPrefix(s, "98") {
			t.Fatalf("status: %q", s)
		}
		return s[2:6]
	}
	if got := status(); got != "YYYY" {
		t.Fatalf("on line, check-in, check-out, renewals with everything up: %q, want YYYY", got)
	}
	// Until told, within a second of asking: off line.
	until := func(want string, within time.Duration) time.Duration {
		t.Helper()
		start := time.Now()
		for {
			got := status()
			if got == want {
				return time.Since(start)
			}
			if time.Since(start) > within {
				t.Fatalf("status %q after %v, want %q", got, time.Since(start), want)
			}
		}
	}
	c.Storage.Stop()
	off := until("NNNN", time.Second)
	c.Storage.Start()
	on := until("YYYY", time.Second)
	t.Logf("SUMMARY TestSIP2StatusFollowsTheLibrarySystem: off line %v after storage stopped, on line %v after it answered", off.Round(time.Millisecond), on.Round(time.Millisecond))
}
