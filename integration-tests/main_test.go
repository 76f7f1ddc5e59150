// Package integration proves across real processes that the item limit
// holds: both services are built and run as OS processes against a real
// PostgreSQL, with faults injected by TCP proxies and signals. See
// harness for the machinery and README.md ("How we know it works").
package integration

import (
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/checkoutlock/integration-tests/harness"
)

var soak = flag.Bool("soak", false, "run the workloads five times larger (make soak)")

// suite is the part of the package a run holds: make test runs the short
// suite, make test-long the long one; a run that names none (go test -run
// ..., the mutation checks) runs every test its -run names.
var suite = flag.String("suite", "all", "short (make test: every test but longTests), long (make test-long: longTests) or all")

// longTests are the tests make test leaves to make test-long, each with
// why: they pass at a person's pace or time what they prove against real
// timeouts, or load the machine for long, and so run long or only beside
// little else.
var longTests = map[string]struct {
	why string
}{
	"TestReadmeAndWalkthrough":                             {why: "pastes the walk-through's lock API at a person's pace, 3.5 s a command, past the lock's TTL"},
	"TestWorkloadBurstHandOff":                             {why: "every scan of a burst served within the lock's retry budget, timed"},
	"TestSIP2BurstHoldsTheLimit":                           {why: "bursts over SIP2 served within the lock's retry budget, timed"},
	"TestSIP2IdleConnectionsDoNotSlowALogin":               {why: "compares the medians of logins with and without 500 idle connections"},
	"TestEventsFrozenLeaderIsReplaced":                     {why: "times a relay's takeover against OUTBOX_LEAD_TIMEOUT"},
	"TestEventsLeaderFrozenBetweenPublishingAndMarking":    {why: "times a relay's takeover against OUTBOX_LEAD_TIMEOUT"},
	"TestEventsLeaderKeepsItsLeadWhileTheBrokerHangs":      {why: "a broker hung for three lead timeouts"},
	"TestEventsThroughAJetStreamCluster":                   {why: "a three-server broker killed and caught up, twice"},
	"TestEventsWaitForTheBroker":                           {why: "the broker stopped and started again under bursts"},
	"TestEventsEqualTheCommittedLoans":                     {why: "bursts of 96 check-outs over two storages; beside other workloads their reads outlast STORAGE_TIMEOUT"},
	"TestEventsIfAndOnlyIfLoans":                           {why: "bursts of check-outs over two storages with faults; beside other workloads their reads outlast STORAGE_TIMEOUT"},
	"TestEventsRelayKilledBetweenPublishingAndMarking":     {why: "bursts of 96 check-outs over two storages, a relay killed; beside other workloads their reads outlast STORAGE_TIMEOUT"},
	"TestCrashLosesOnlyLocksAndTheFenceRefusesTheirWrites": {why: "a PostgreSQL of its own crashed and recovered two to four times"},
	"TestDatabaseOutOfConnections":                         {why: "a PostgreSQL of its own with every connection taken, timed against the request deadline"},
	"TestLargePagesToClientsThatDoNotRead":                 {why: "measures storage's peak memory while eight clients never read sixteen megabytes"},
	"TestHistoriesAreLinearizable":                         {why: "the history checker, -history long (make test-long: HISTORY, three minutes), on a PostgreSQL of its own it restarts"},
	"TestACrowdOfRightPINsAllGetIn":                        {why: "crowds of 50 at once hashing argon2, each answered within the door's call timeout, timed"},
	"TestACrowdOfRightPasswordsAllSignIn":                  {why: "crowds of 50 sign-ins at once hashing argon2, timed against the busy answer's wait"},
	"TestSIP2ACrowdOfKiosksAllLogIn":                       {why: "crowds of 50 kiosk logins at once hashing argon2, timed against the door's call timeout"},
	"TestPasswordBurstsGetNoMoreChecksThanTheLimit":        {why: "bursts of wrong passwords, each costing an argon2 hash, timed against the busy answer's wait"},
	"TestPINBurstsGetNoMoreChecksThanTheLimit":             {why: "bursts of wrong PINs, each costing an argon2 hash, timed against the busy answer's wait"},
	"TestSIP2PINBurstsGetNoMoreChecksThanTheLimit":         {why: "bursts of wrong PINs over SIP2, each costing an argon2 hash, timed against the door's call timeout"},
	"TestSIP2LoginBurstsLockTheKioskNotTheAccount":         {why: "bursts of wrong kiosk logins, each costing an argon2 hash, timed against the door's call timeout"},
}

// chooseSuite sets go test's -run (the long suite) or -skip (the short one)
// from suite.
func chooseSuite() error {
	long := slices.Sorted(maps.Keys(longTests))
	exactly := func(names []string) string { return "^(" + strings.Join(names, "|") + ")$" }
	switch *suite {
	case "all":
		return nil
	case "short":
		if skip := flag.Lookup("test.skip").Value.String(); skip != "" {
			return fmt.Errorf("-suite=short sets -skip itself; it was given %q", skip)
		}
		return flag.Set("test.skip", exactly(long))
	case "long":
		if run := flag.Lookup("test.run").Value.String(); run != "" {
			return fmt.Errorf("-suite=long sets -run itself; it was given %q", run)
		}
		return flag.Set("test.run", exactly(long))
	}
	return fmt.Errorf("-suite is short, long or all, not %q", *suite)
}

func TestMain(m *testing.M) {
	flag.Parse()
	if err := chooseSuite(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
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

// TestEveryLongTestIsOne: each name in longTests is a test of this package,
// so that a test renamed does not leave make test-long running nothing in
// its place.
func TestEveryLongTestIsOne(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("*_test.go")
	if err != nil {
		t.Fatal(err)
	}
	tests := map[string]bool{}
	fset := token.NewFileSet()
	for _, f := range files {
		file, err := parser.ParseFile(fset, f, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range file.Decls {
			if fn, ok := d.(*ast.FuncDecl); ok && fn.Recv == nil && strings.HasPrefix(fn.Name.Name, "Test") {
				tests[fn.Name.Name] = true
			}
		}
	}
	for name := range longTests {
		if !tests[name] {
			t.Errorf("longTests names %s, which is no test of this package", name)
		}
	}
}
