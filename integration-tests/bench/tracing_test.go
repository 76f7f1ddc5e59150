package bench

import (
	"context"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
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
// per cent.
const (
	tracingRounds = 10
	tracingSlice  = 2 * time.Second
)

func benchTracing(t *testing.T, p plan, env []string) Tracing {
	t.Helper()
	traced := append(slices.Clone(env), "OTEL_EXPORTER_OTLP_ENDPOINT=http://"+otlpSink(t))
	untracedC := harness.NewCluster(t, harness.Options{Circulations: 1, FeatureOn: true, StorageEnv: env, CirculationEnv: env})
	tracedC := harness.NewCluster(t, harness.Options{Circulations: 1, FeatureOn: true, StorageEnv: traced, CirculationEnv: traced})
	clusters := []*harness.Cluster{untracedC, tracedC}
	rounds, slice := tracingRounds, tracingSlice
	switch {
	case *smoke:
		rounds, slice = p.rounds, p.slice
	case *baRounds > 0:
		rounds, slice = *baRounds, *baSlice
	}
	// Every check-out takes a patron of its own: enough for the rounds at
	// a few hundred check-outs a second.
	n := p.population / 2
	if !*smoke {
		n = max(n, int(float64(rounds)*slice.Seconds()*2*1500))
	}
	pops := []*population{populate(t, untracedC, n, 0), populate(t, tracedC, n, 0)}
	analyze(t, untracedC)
	analyze(t, tracedC)
	postmaster := postmasterOf(t, untracedC)
	var out Tracing
	for _, conc := range []int{1, 4} {
		hists := [2]*histPair{{h: newHist()}, {h: newHist()}}
		var cpu [2]CPUPerCheckOut
		var p50Ratios, cpuRatios []float64
		for round := range rounds {
			var p50, perCO [2]float64
			for k := range clusters {
				i := (k + round) % 2 // each goes first in every other round
				c := clusters[i]
				s0 := sampleServerCPU(t, c, postmaster)
				h, errs, elapsed := attack(t, checkOutTargeter(c, pops[i], 1), conc, slice)
				s1 := sampleServerCPU(t, c, postmaster)
				hists[i].h.Merge(h)
				hists[i].errs += errs
				hists[i].elapsed += elapsed
				one := perCheckOut(s0, s1, h.TotalCount())
				cpu[i] = addCPU(cpu[i], one, float64(h.TotalCount()))
				p50[i], perCO[i] = float64(h.ValueAtQuantile(50)), one.Total
			}
			p50Ratios = append(p50Ratios, ratio(p50[1], p50[0]))
			cpuRatios = append(cpuRatios, ratio(perCO[1], perCO[0]))
		}
		row := TracingRow{Concurrency: conc, Rounds: rounds, SliceMs: float64(slice.Milliseconds()),
			Untraced: stats(hists[0].h, hists[0].errs, hists[0].elapsed), Traced: stats(hists[1].h, hists[1].errs, hists[1].elapsed)}
		row.CPUUntraced = scaleCPU(cpu[0], 1/float64(max(1, hists[0].h.TotalCount())))
		row.CPUTraced = scaleCPU(cpu[1], 1/float64(max(1, hists[1].h.TotalCount())))
		row.P50Ratio = ratio(row.Traced.P50Ms, row.Untraced.P50Ms)
		row.CPURatio = ratio(row.CPUTraced.Total, row.CPUUntraced.Total)
		row.RoundP50Ratio, row.RoundCPURatio = median(p50Ratios), median(cpuRatios)
		out.Rows = append(out.Rows, row)
		t.Logf("tracing c=%d: round by round p50 ratios %.3f, CPU ratios %.3f", conc, p50Ratios, cpuRatios)
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

// postmasterOf is the pid of the postmaster of the PostgreSQL server c
// uses: the parent of a server process of its.
func postmasterOf(t *testing.T, c *harness.Cluster) int {
	t.Helper()
	var backend int
	if err := c.DB.QueryRow(context.Background(), "SELECT pg_backend_pid()").Scan(&backend); err != nil {
		t.Fatal(err)
	}
	fields := statFields(backend)
	if len(fields) < 2 {
		t.Fatalf("no /proc/%d/stat for the server process of the cluster's connection", backend)
	}
	ppid, err := strconv.Atoi(fields[1])
	if err != nil {
		t.Fatal(err)
	}
	return ppid
}

// sampleServerCPU is sampleCPU with PostgreSQL's CPU that of the server
// whose postmaster is postmaster alone, not every postgres process on the
// machine (the other servers a shared machine runs move a ratio of a few
// per cent by more than itself).
func sampleServerCPU(t *testing.T, c *harness.Cluster, postmaster int) cpuSample {
	t.Helper()
	s := sampleCPU(t, c.Circulations[0], c.Storage)
	s.postgres = serverCPU(postmaster)
	return s
}

// serverCPU is the CPU time of a PostgreSQL server so far: its postmaster's,
// its server processes' and the ended ones' (counted among the
// postmaster's children's).
func serverCPU(postmaster int) time.Duration {
	total := processCPU(postmaster)
	if fields := statFields(postmaster); len(fields) > 14 {
		cu, _ := strconv.ParseInt(fields[13], 10, 64)
		cs, _ := strconv.ParseInt(fields[14], 10, 64)
		total += time.Duration(cu+cs) * clockTick
	}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if fields := statFields(pid); len(fields) > 1 && fields[1] == strconv.Itoa(postmaster) {
			total += processCPU(pid)
		}
	}
	return total
}
