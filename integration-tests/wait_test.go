package integration

import (
	"testing"
	"time"

	"github.com/checkoutlock/integration-tests/harness"
)

// waitFor polls cond until it holds, failing the test after a deadline.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	if !harness.Poll(20*time.Second, 25*time.Millisecond, cond) {
		t.Fatalf("timed out waiting until %s", what)
	}
}
