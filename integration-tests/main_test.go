// Package integration proves across real processes that the item limit
// holds: both services are built and run as OS processes against a real
// PostgreSQL, with faults injected by TCP proxies and signals. See
// harness for the machinery and README.md ("How we know it works").
package integration

import (
	"os"
	"testing"

	"github.com/checkoutlock/integration-tests/harness"
)

func TestMain(m *testing.M) { os.Exit(harness.Main(m)) }

// summary prints the one line each workload reports.
func summary(t *testing.T, requests, successes, refusals, violations int, extra string) {
	t.Helper()
	t.Logf("SUMMARY %s: requests=%d successes=%d refusals=%d invariant_violations=%d %s",
		t.Name(), requests, successes, refusals, violations, extra)
}
