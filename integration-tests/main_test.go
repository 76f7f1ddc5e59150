// Package integration proves across real processes that the item limit
// holds: both services are built and run as OS processes against a real
// PostgreSQL, with faults injected by TCP proxies and signals. See
// harness for the machinery and README.md ("How we know it works").
package integration

import (
	"flag"
	"os"
	"testing"

	"github.com/checkoutlock/integration-tests/harness"
)

var soak = flag.Bool("soak", false, "run the workloads five times larger (make soak)")

func TestMain(m *testing.M) {
	flag.Parse()
	code := harness.Main(m)
	stopBrowser()
	os.Exit(code)
}

// scaled is n, or five times n in a soak run.
func scaled(n int) int {
	if *soak {
		return 5 * n
	}
	return n
}

// summary prints the one line each workload reports.
func summary(t *testing.T, requests, successes, refusals, violations int, extra string) {
	t.Helper()
	t.Logf("SUMMARY %s: requests=%d successes=%d refusals=%d invariant_violations=%d %s",
		t.Name(), requests, successes, refusals, violations, extra)
}
