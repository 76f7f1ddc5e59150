// Package bench measures the lock and the check-out across real processes on
// a real PostgreSQL, against the database's own limit (pgbench running the
// service's very SQL), side by side and interleaved, because absolute numbers
// on a shared machine drift. It is not part of `make test`: run `make bench`.
//
//	go test -count=1 -v -run TestBenchmarks ./integration-tests/bench -args -bench.out=bench-results
package bench

import (
	"flag"
	"os"
	"testing"
	"time"

	"github.com/checkoutlock/integration-tests/harness"
)

var (
	outDir   = flag.String("bench.out", "", "run the benchmarks and write results.json and the charts here")
	smoke    = flag.Bool("bench.smoke", false, "run every scenario briefly: a check that the benchmarks work, not a measurement")
	logLevel = flag.String("bench.loglevel", "warn", "LOG_LEVEL of the services the benchmarks start (info: one line per request, for reading where time goes; it costs time)")
	profile  = flag.Bool("bench.profile", false, "the services and the check-out floor serve Go's profiles on a loopback port of their own (PROFILE_ADDR), and scenario 14's probe saves a CPU profile and then a second's execution trace of each process of both sides for each slice in -bench.out")
	only     = flag.String("bench.only", "", "run this scenario alone (lock-cycle, burst, before-after, checkout-floor, …: an unknown name lists them all), to study one figure quickly; the targets of the others are not met")
)

func TestMain(m *testing.M) {
	flag.Parse()
	if *outDir == "" && !*smoke {
		os.Exit(m.Run()) // nothing to do: TestBenchmarks skips
	}
	os.Exit(harness.Main(m))
}

// plan is how long and how often each scenario runs.
type plan struct {
	slice  time.Duration // one interleaved measurement
	rounds int           // interleaved rounds per comparison
	// cycleRounds and cycleSlice are the lock cycle's: many short
	// slices, so that the servers compared meet the same conditions (a
	// checkpoint, an autovacuum, the machine's neighbours) in turn rather
	// than one of them meeting them in a slice of its own; pgbench (whose
	// runs are whole seconds) runs in every pgbenchEvery-th round.
	cycleRounds   int
	cycleSlice    time.Duration
	pgbenchEvery  int
	concurrencies []int // for the lock cycle
	bursts        int   // per retry configuration
	// population is the patrons (each with an item) made for the
	// uncontended check-outs: every check-out takes a new one, so a
	// faster machine needs more.
	population int
}

func currentPlan() plan {
	if *smoke {
		// Slices long enough for every scenario to check out, read and
		// compare something; a population that outlasts them on a quiet
		// machine too (the outbox scenario checks out some 3,000 on each of
		// its two services, each given half).
		return plan{slice: 300 * time.Millisecond, rounds: 1, cycleRounds: 1, cycleSlice: 300 * time.Millisecond, pgbenchEvery: 1, concurrencies: []int{1, 8}, bursts: 1, population: 16000}
	}
	return plan{slice: 3 * time.Second, rounds: 3, cycleRounds: 80, cycleSlice: 250 * time.Millisecond, pgbenchEvery: 10, concurrencies: []int{1, 8, 32}, bursts: 20, population: 250000}
}
