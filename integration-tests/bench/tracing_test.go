package bench

import (
	"fmt"
	"io"
	"slices"
	"testing"
	"time"

	"github.com/checkoutlock/integration-tests/harness"
)

// Tracing is scenario 15: uncontended check-outs with the lock on, through
// two clusters of this version, one tracing every check-out
// (OTEL_EXPORTER_OTLP_ENDPOINT naming a sink of the bench's own, which
// takes the spans and keeps none) and one not, one circulation and one
// storage instance each, same PostgreSQL, alternating slices: what tracing
// every check-out costs in CPU and latency.
type Tracing struct {
	Rows []TracingRow `json:"rows"`
}

// TracingRow is one concurrency's comparison.
type TracingRow struct {
	Concurrency int            `json:"concurrency"`
	Untraced    Stats          `json:"untraced"`
	Traced      Stats          `json:"traced"`
	CPUUntraced CPUPerCheckOut `json:"cpuUntraced"`
	CPUTraced   CPUPerCheckOut `json:"cpuTraced"`
	// P50Ratio and CPURatio are traced ÷ untraced over every slice;
	// RoundP50Ratio and RoundCPURatio the medians of the same ratios taken
	// round by round (a round's two slices side by side in time).
	P50Ratio      float64 `json:"p50TracedOverUntraced"`
	CPURatio      float64 `json:"cpuTracedOverUntraced"`
	RoundP50Ratio float64 `json:"roundMedianP50TracedOverUntraced"`
	RoundCPURatio float64 `json:"roundMedianCPUTracedOverUntraced"`
	Rounds        int     `json:"rounds"`
	SliceMs       float64 `json:"sliceMs"`
}

// tracingRounds and tracingSlice are scenario 15's shape unless
// -bench.rounds says otherwise: many short rounds, for a ratio of a few
// per cent. Forty of half a second spread a run's medians less than ten of
// two seconds (×1.018–1.029 in two runs against ×1.008–1.067 in six,
// BENCHMARKS.md §15): the machine's moods fall on both clusters alike.
const (
	tracingRounds = 40
	tracingSlice  = 500 * time.Millisecond
)

func benchTracing(t *testing.T, p plan, env []string) Tracing {
	t.Helper()
	traced := append(slices.Clone(env), "OTEL_EXPORTER_OTLP_ENDPOINT=http://"+otlpSink(t))
	untracedC := harness.NewCluster(t, harness.Options{Circulations: 1, FeatureOn: true, StorageEnv: env, CirculationEnv: env})
	tracedC := harness.NewCluster(t, harness.Options{Circulations: 1, FeatureOn: true, StorageEnv: traced, CirculationEnv: traced})
	rounds, slice := tracingRounds, tracingSlice
	switch {
	case *smoke:
		rounds, slice = p.rounds, p.slice
	case *baRounds > 0:
		rounds, slice = *baRounds, *baSlice
	}
	// Every check-out takes a patron of its own: enough for the rounds and
	// alternate's warm-up at both concurrencies, at up to 1,500
	// check-outs a second.
	n := p.population / 2
	if !*smoke {
		perConcurrency := time.Duration(rounds)*slice + alternateWarmUp(slice)
		n = max(n, int(perConcurrency.Seconds()*2*1500))
	}
	pops := [2]*population{populate(t, untracedC, n, 0), populate(t, tracedC, n, 0)}
	analyze(t, untracedC)
	analyze(t, tracedC)
	// PostgreSQL's CPU is that of the server both clusters use alone, not
	// every postgres process on the machine (the other servers a shared
	// machine runs move a ratio of a few per cent by more than itself).
	postmaster := postmasterOf(t, untracedC)
	var out Tracing
	for _, conc := range []int{1, 4} {
		a := alternate(t, [2]*harness.Cluster{untracedC, tracedC}, pops, conc, rounds, slice, postmaster)
		row := TracingRow{Concurrency: conc, Rounds: rounds, SliceMs: float64(slice.Milliseconds()), Untraced: a.stats[0], Traced: a.stats[1],
			CPUUntraced: a.cpu[0], CPUTraced: a.cpu[1], P50Ratio: a.p50Ratio, CPURatio: a.cpuRatio,
			RoundP50Ratio: a.roundP50Ratio, RoundCPURatio: a.roundCPURatio}
		out.Rows = append(out.Rows, row)
		t.Logf("tracing c=%d: round by round p50 ratios %.3f, CPU ratios %.3f", conc, a.p50Ratios, a.cpuRatios)
	}
	return out
}

// printTracing prints scenario 15.
func printTracing(w io.Writer, tr Tracing) {
	fmt.Fprintln(w, "\n15. Check-out traced (every check-out, spans to an OTLP sink) against untraced, this version both, alternating slices")
	for _, r := range tr.Rows {
		fmt.Fprintf(w, "c=%d: untraced p50 %.2f ms, %.0f µs CPU per check-out; traced p50 %.2f ms, %.0f µs CPU; traced/untraced p50 ×%.3f, CPU ×%.3f; median of %d rounds of %.0f ms: p50 ×%.3f, CPU ×%.3f\n",
			r.Concurrency, r.Untraced.P50Ms, r.CPUUntraced.Total, r.Traced.P50Ms, r.CPUTraced.Total, r.P50Ratio, r.CPURatio,
			r.Rounds, r.SliceMs, r.RoundP50Ratio, r.RoundCPURatio)
		for _, side := range []struct {
			name string
			cpu  CPUPerCheckOut
		}{{"untraced", r.CPUUntraced}, {"traced", r.CPUTraced}} {
			fmt.Fprintf(w, "    %s CPU µs: client %.0f, circulation %.0f, storage %.0f, PostgreSQL %.0f, total %.0f\n",
				side.name, side.cpu.Client, side.cpu.Circulation, side.cpu.Storage, side.cpu.Postgres, side.cpu.Total)
		}
	}
}
