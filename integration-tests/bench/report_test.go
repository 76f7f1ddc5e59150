package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"text/tabwriter"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"

	"github.com/checkoutlock/integration-tests/harness"
)

// Results is everything one run measured; results.json holds it.
type Results struct {
	Date              string         `json:"date"`
	Machine           string         `json:"machine"`
	Smoke             bool           `json:"smoke"`
	LockCycle         []LockCycleRow `json:"lockCycle"`
	AcquireAtHalfPeak AcquireAtRate  `json:"acquireAtHalfPeak"`
	CheckOut          []CheckOutCost `json:"checkOut"`
	Bursts            Bursts         `json:"bursts"`
	Scale             []ScaleRow     `json:"scale"`
	Memory            []MemoryRow    `json:"memory"`
	BeforeAfter       *BeforeAfter   `json:"beforeAfter,omitempty"`
	Tenants           *Tenants       `json:"tenants,omitempty"`
	SIP2              *SIP2          `json:"sip2,omitempty"`
	Outbox            *Outbox        `json:"outbox,omitempty"`
	Busy              *Busy          `json:"busy,omitempty"`
	Flood             *Flood         `json:"flood,omitempty"`
	Kills             *Kills         `json:"kills,omitempty"`
	Tracing           *Tracing       `json:"tracing,omitempty"`
	CheckOutFloor     *CheckOutFloor `json:"checkOutFloor,omitempty"`
	CheckOutProbe     *CheckOutProbe `json:"checkOutProbe,omitempty"`
	Recovery          *Recovery      `json:"recovery,omitempty"`
	Targets           []Target       `json:"targets"`
}

// benchDBConns is the benchmark's storage pool size (DB_MAX_CONNS); its
// lock statements get half of it, and so does the floor. At c=32 pgbench
// opens 32 connections beside those of the service, the storage without
// history, the floor and the harness: all within PostgreSQL's default of
// 100 connections, with room to spare.
const benchDBConns = 28

// Target is one of the figures the project aims for, and whether this run
// met it.
type Target struct {
	What  string  `json:"what"`
	Value float64 `json:"value"`
	Goal  string  `json:"goal"`
	Met   bool    `json:"met"`
}

// scenario is a scenario that runs alone (-bench.only), by name: run
// runs it on clusters of its own, quiet the services' environment, and
// prints what it measured (and writes it, with -bench.out).
type scenario struct {
	name string
	run  func(t *testing.T, p plan, quiet []string)
}

// alone is every scenario that runs alone, in the order an unknown
// -bench.only lists them. The full run is not this list: it runs most of
// them on one cluster, in an order of its own, and reports them together.
var alone = []scenario{
	{"lock-cycle", func(t *testing.T, p plan, quiet []string) {
		_, res := lockCycleOnMain(t, p, quiet)
		tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
		printLockCycle(tw, res.LockCycle)
		tw.Flush()
	}},
	{"burst", func(t *testing.T, p plan, quiet []string) {
		b := benchBursts(t, p, quiet)
		for _, r := range b.Rows {
			fmt.Printf("%s: %.1f of 10, burst %.0f ms, %.2f x 10 solo; median burst %.1f ms, %.2f x 10 solo (solo p50 %.2f ms)\n",
				r.Mode, r.Succeeded, r.TotalTimeMs, r.Ratio, r.MedianTimeMs, r.MedianRatio, r.SoloP50Ms)
		}
		fmt.Printf("CPU a check-out: solo %.0f µs, in a burst %.0f µs; floor on %d cores %.2f x 10 solo\n",
			b.SoloCPU.Total, b.BurstCPU.Total, b.Cores, b.FloorRatio)
		fmt.Printf("hand-off p50 %.2f ms, p99 %.2f ms\n", b.HandOff.P50Ms, b.HandOff.P99Ms)
		fmt.Printf("tenants with a request and a manual block, gate row present: %t\n", b.Gated)
	}},
	{"before-after", func(t *testing.T, p plan, quiet []string) {
		ba := benchBeforeAfter(t, *baseline, p, quiet)
		for _, r := range ba.Rows {
			fmt.Printf("c=%d: %s p50 %.2f ms, %.0f µs CPU per check-out; this p50 %.2f ms, %.0f µs CPU; p50 ×%.3f, CPU ×%.3f; median of %d rounds: p50 ×%.3f, CPU ×%.3f\n",
				r.Concurrency, ba.Baseline, r.Before.P50Ms, r.CPUBefore.Total, r.After.P50Ms, r.CPUAfter.Total, r.P50Ratio, r.CPURatio,
				r.Rounds, r.RoundP50Ratio, r.RoundCPURatio)
			for _, side := range []struct {
				name string
				cpu  CPUPerCheckOut
			}{{ba.Baseline, r.CPUBefore}, {"this", r.CPUAfter}} {
				fmt.Printf("    %s CPU µs: client %.0f, circulation %.0f, storage %.0f, PostgreSQL %.0f\n",
					side.name, side.cpu.Client, side.cpu.Circulation, side.cpu.Storage, side.cpu.Postgres)
			}
		}
	}},
	{"tenants", func(t *testing.T, p plan, quiet []string) {
		tn := benchTenants(t, p, tenantsToBench(), quiet)
		printTenants(os.Stdout, tn)
		writeResults(t, Results{Date: time.Now().UTC().Format(time.RFC3339), Smoke: *smoke, Tenants: &tn})
	}},
	{"sip2", func(t *testing.T, p plan, quiet []string) {
		s := benchSIP2(t, p, quiet)
		r := Results{SIP2: &s}
		printSIP2(os.Stdout, s)
		for _, tg := range targets(r) {
			if !strings.HasPrefix(tg.What, "SIP2") {
				continue
			}
			fmt.Printf("%s: %.2f (%s) met=%t\n", tg.What, tg.Value, tg.Goal, tg.Met)
		}
		for _, e := range requestErrors(r) {
			t.Error(e)
		}
	}},
	{"outbox", func(t *testing.T, p plan, quiet []string) {
		o := benchOutbox(t, p, quiet)
		r := Results{Outbox: &o}
		tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
		printOutbox(tw, o)
		tw.Flush()
		for _, tg := range targets(r) {
			if strings.Contains(tg.What, "outbox") || strings.Contains(tg.What, "delivery") {
				fmt.Printf("%s: %.3f (%s) met=%t\n", tg.What, tg.Value, tg.Goal, tg.Met)
			}
		}
		for _, e := range requestErrors(r) {
			t.Error(e)
		}
	}},
	{"busy", func(t *testing.T, p plan, quiet []string) {
		b := benchBusy(t, p, quiet)
		printBusy(b)
		writeResults(t, Results{Date: time.Now().UTC().Format(time.RFC3339), Smoke: *smoke, Busy: &b})
		for _, e := range requestErrors(Results{Busy: &b}) {
			t.Error(e)
		}
	}},
	{"flood", func(t *testing.T, p plan, quiet []string) {
		f := benchFlood(t, quiet)
		printFlood(os.Stdout, f)
		writeResults(t, Results{Date: time.Now().UTC().Format(time.RFC3339), Smoke: *smoke, Flood: &f})
	}},
	{"kills", func(t *testing.T, p plan, quiet []string) {
		k := benchKills(t, quiet)
		printKills(os.Stdout, k)
		writeResults(t, Results{Date: time.Now().UTC().Format(time.RFC3339), Smoke: *smoke, Kills: &k})
		if k.FailedNotSent > 0 {
			t.Errorf("%d check-outs failed before their write was sent, want none: a write or a read a kill cut before it ran is sent again", k.FailedNotSent)
		}
	}},
	{"recovery", func(t *testing.T, p plan, quiet []string) {
		rc := benchRecovery(t, quiet)
		r := Results{Date: time.Now().UTC().Format(time.RFC3339), Smoke: *smoke, Recovery: &rc}
		printRecovery(os.Stdout, rc)
		r.Targets = targets(r)
		for _, tg := range r.Targets {
			if strings.Contains(tg.What, "backend kill") {
				fmt.Printf("%s: %.1f (%s) met=%t\n", tg.What, tg.Value, tg.Goal, tg.Met)
			}
		}
		writeResults(t, r)
		for _, e := range requestErrors(r) {
			t.Error(e)
		}
	}},
	{"checkout-floor", func(t *testing.T, p plan, quiet []string) {
		f := benchCheckOutFloor(t, p, quiet)
		tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
		printCheckOutFloor(tw, f)
		tw.Flush()
		res := Results{Date: time.Now().UTC().Format(time.RFC3339), Smoke: *smoke, CheckOutFloor: &f}
		res.Targets = targets(res)
		for _, tg := range res.Targets {
			if strings.Contains(tg.What, "service / floor") {
				fmt.Printf("%s: %.2f (%s) met=%t\n", tg.What, tg.Value, tg.Goal, tg.Met)
			}
		}
		writeResults(t, res)
		for _, e := range requestErrors(res) {
			t.Error(e)
		}
	}},
	{"checkout-probe", func(t *testing.T, p plan, quiet []string) {
		pr := benchCheckOutProbe(t, quiet)
		tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
		printCheckOutProbe(tw, pr)
		tw.Flush()
		writeResults(t, Results{Date: time.Now().UTC().Format(time.RFC3339), Smoke: *smoke, CheckOutProbe: &pr})
		for _, e := range requestErrors(Results{CheckOutProbe: &pr}) {
			t.Error(e)
		}
	}},
	{"tracing", func(t *testing.T, p plan, quiet []string) {
		tr := benchTracing(t, p, quiet)
		printTracing(os.Stdout, tr)
		r := Results{Date: time.Now().UTC().Format(time.RFC3339), Smoke: *smoke, Tracing: &tr}
		writeResults(t, r)
		for _, e := range requestErrors(r) {
			t.Error(e)
		}
	}},
}

// aloneNames lists the names of the scenarios that run alone, as an
// unknown -bench.only says them.
func aloneNames() string {
	names := make([]string, len(alone))
	for i, sc := range alone {
		names[i] = sc.name
	}
	return strings.Join(names[:len(names)-1], ", ") + " and " + names[len(names)-1]
}

// lockCycleOnMain starts the full run's cluster (one circulation-storage,
// four circulation instances) and runs scenario 1 on it, the first of the
// full run and, alone, the only: the cluster, for the scenarios that
// follow on it, and the results so far.
func lockCycleOnMain(t *testing.T, p plan, quiet []string) (*harness.Cluster, Results) {
	c := harness.NewCluster(t, harness.Options{Circulations: 4, FeatureOn: true,
		StorageEnv: append([]string{fmt.Sprintf("DB_MAX_CONNS=%d", benchDBConns)}, quiet...), CirculationEnv: append([]string{"SETTINGS_CACHE_TTL=100ms"}, quiet...)})
	res := Results{Date: time.Now().UTC().Format(time.RFC3339), Machine: machine(t, c), Smoke: *smoke}

	noHistory := c.AddStorage("storage-without-history", "LOCK_HISTORY=false")
	floor := harness.StartBinary(t, "floor", buildFloor(t), "DATABASE_URL="+harness.DatabaseURL(), "TENANT="+c.Tenant,
		"SYNCHRONOUS_COMMIT="+lockCommit, fmt.Sprintf("POOL_SIZE=%d", benchDBConns/2))
	res.LockCycle = benchLockCycle(t, c, noHistory, floor, harness.DatabaseURL(), p)
	// Their connections are needed by the scenarios that follow.
	floor.Stop()
	noHistory.Stop()
	return c, res
}

// TestBenchmarks runs every scenario on one cluster (one circulation-storage,
// four circulation instances, a tenant of its own) and reports.
func TestBenchmarks(t *testing.T) {
	if *outDir == "" && !*smoke {
		t.Skip("benchmarks run with -bench.out=DIR (make bench) or -bench.smoke")
	}
	if *outDir != "" {
		// Made once, here: results, charts and profiles all go into it.
		if err := os.MkdirAll(*outDir, 0o755); err != nil {
			t.Fatalf("-bench.out: %v", err)
		}
	}
	p := currentPlan()
	quiet := []string{"LOG_LEVEL=" + *logLevel}
	if *profile {
		quiet = append(quiet, "PROFILE_ADDR=127.0.0.1:0")
	}
	if *only != "" {
		i := slices.IndexFunc(alone, func(sc scenario) bool { return sc.name == *only })
		if i < 0 {
			t.Fatalf("-bench.only=%q: the scenarios that run alone are %s", *only, aloneNames())
		}
		alone[i].run(t, p, quiet)
		return
	}
	c, res := lockCycleOnMain(t, p, quiet)
	peak := 0.0
	for _, r := range res.LockCycle {
		peak = max(peak, r.Service.Throughput)
	}
	res.AcquireAtHalfPeak = benchAcquireAtHalfPeak(t, c, peak, p)

	pop := populate(t, c, p.population, p.bursts*2)
	analyze(t, c)
	for _, conc := range []int{1, 4} {
		res.CheckOut = append(res.CheckOut, benchCheckOutCost(t, c, pop, p, conc))
	}
	res.Scale = benchScale(t, c, pop, p)
	// The main cluster's work is done: its peak memory is read, and its
	// processes stop, so that their pooled connections are gone before the
	// scenarios that follow open theirs.
	res.Memory = append(res.Memory, MemoryRow{Process: "circulation-storage", PeakMB: peakRSS(t, c.Storage.PID())})
	for _, circ := range c.Circulations {
		res.Memory = append(res.Memory, MemoryRow{Process: circ.Name, PeakMB: peakRSS(t, circ.PID())})
	}
	for _, circ := range c.Circulations {
		circ.Stop()
	}
	c.Storage.Stop()
	res.Bursts = benchBursts(t, p, quiet)
	// In a subtest of its own, so that its cluster's processes and
	// database connections are gone before the scenarios that follow.
	var sip2 SIP2
	t.Run("sip2", func(t *testing.T) { sip2 = benchSIP2(t, p, quiet) })
	res.SIP2 = &sip2
	var outbox Outbox
	t.Run("outbox", func(t *testing.T) { outbox = benchOutbox(t, p, quiet) })
	res.Outbox = &outbox
	var busy Busy
	t.Run("busy", func(t *testing.T) { busy = benchBusy(t, p, quiet) })
	res.Busy = &busy
	var flood Flood
	t.Run("flood", func(t *testing.T) { flood = benchFlood(t, quiet) })
	res.Flood = &flood
	var tracing Tracing
	t.Run("tracing", func(t *testing.T) { tracing = benchTracing(t, p, quiet) })
	res.Tracing = &tracing
	var checkOutFloor CheckOutFloor
	t.Run("checkout-floor", func(t *testing.T) { checkOutFloor = benchCheckOutFloor(t, p, quiet) })
	res.CheckOutFloor = &checkOutFloor
	var checkOutProbe CheckOutProbe
	t.Run("checkout-probe", func(t *testing.T) { checkOutProbe = benchCheckOutProbe(t, quiet) })
	res.CheckOutProbe = &checkOutProbe
	var recovery Recovery
	t.Run("recovery", func(t *testing.T) { recovery = benchRecovery(t, quiet) })
	res.Recovery = &recovery
	if *baseline != "" {
		ba := benchBeforeAfter(t, *baseline, p, quiet)
		res.BeforeAfter = &ba
	}

	tn := benchTenants(t, p, tenantsToBench(), quiet)
	res.Tenants = &tn

	res.Targets = targets(res)
	// A request that failed makes the figures around it meaningless: the
	// run (and the smoke run in make test) fails rather than report them.
	for _, e := range requestErrors(res) {
		t.Error(e)
	}

	printTable(os.Stdout, res)
	printBusy(busy)
	printFlood(os.Stdout, flood)
	cf := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	printCheckOutFloor(cf, checkOutFloor)
	printCheckOutProbe(cf, checkOutProbe)
	cf.Flush()
	printRecovery(os.Stdout, recovery)
	printTenants(os.Stdout, tn)
	if *outDir != "" {
		writeResults(t, res)
		if err := charts(res, *outDir); err != nil {
			t.Fatal(err)
		}
		fmt.Printf("\nwrote %s/results.json, %s/lock-cycle.png, %s/check-out.png\n", *outDir, *outDir, *outDir)
	}
}

// printLockCycle prints scenario 1's table.
func printLockCycle(tw io.Writer, rows []LockCycleRow) {
	fmt.Fprintln(tw, "\n1. Lock cycle (acquire + release of a fresh patron's lock): the service over HTTP, a minimal net/http + pgx server (the floor) and pgbench, all running the same SQL, interleaved")
	fmt.Fprintln(tw, "concurrency\tservice/s\tp50 ms\tp95 ms\tp99 ms\tfloor/s\tp50 ms\tservice/floor\twithout history/s\twith/without\tpgbench/s\tp50 ms\tp95 ms\tp99 ms\tservice/raw\tfloor/raw\terrors")
	for _, row := range rows {
		fmt.Fprintf(tw, "%d\t%.0f\t%.2f\t%.2f\t%.2f\t%.0f\t%.2f\t%.2f\t%.0f\t%.2f\t%.0f\t%.2f\t%.2f\t%.2f\t%.2f\t%.2f\t%d\n", row.Concurrency,
			row.Service.Throughput, row.Service.P50Ms, row.Service.P95Ms, row.Service.P99Ms,
			row.Floor.Throughput, row.Floor.P50Ms, row.FloorRatio,
			row.NoHistory.Throughput, row.HistoryRatio,
			row.Raw.Throughput, row.Raw.P50Ms, row.Raw.P95Ms, row.Raw.P99Ms, row.Ratio, row.FloorRaw,
			row.Service.Errors+row.Floor.Errors+row.NoHistory.Errors+row.Raw.Errors)
	}
	for _, row := range rows {
		fmt.Fprintf(tw, "c=%d: pgbench with synchronous_commit=on (every commit flushed, as before LOCK_SYNCHRONOUS_COMMIT): %.0f/s, p50 %.2f ms; off / on %.2f\n",
			row.Concurrency, row.RawDurable.Throughput, row.RawDurable.P50Ms, row.DurableRatio)
	}
	for _, row := range rows {
		fmt.Fprintf(tw, "c=%d: CPU per cycle, server / load generator / PostgreSQL: service %.0f / %.0f / %.0f µs, floor %.0f / %.0f / %.0f µs\n",
			row.Concurrency, row.ServiceCPU.Server, row.ServiceCPU.Client, row.ServiceCPU.Postgres,
			row.FloorCPU.Server, row.FloorCPU.Client, row.FloorCPU.Postgres)
	}
}

// machine describes where the run happened.
func machine(t *testing.T, c *harness.Cluster) string {
	var pg string
	if err := c.DB.QueryRow(context.Background(), "SHOW server_version").Scan(&pg); err != nil {
		t.Fatal(err)
	}
	model := "unknown CPU"
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "model name"); ok {
				model = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(v), ":"))
				break
			}
		}
	}
	return fmt.Sprintf("%d CPUs (%s), %s, PostgreSQL %s; load generator, services and database share the machine",
		runtime.NumCPU(), model, runtime.Version(), pg)
}

// requestErrors names every scenario in which a request failed.
func requestErrors(r Results) []string {
	var out []string
	check := func(what string, s Stats) {
		if s.Errors > 0 {
			out = append(out, fmt.Sprintf("%s: %d of %d requests failed", what, s.Errors, s.Requests+s.Errors))
		}
	}
	for _, row := range r.LockCycle {
		check(fmt.Sprintf("lock cycle c=%d, service", row.Concurrency), row.Service)
		check(fmt.Sprintf("lock cycle c=%d, service without history", row.Concurrency), row.NoHistory)
		check(fmt.Sprintf("lock cycle c=%d, pgbench", row.Concurrency), row.Raw)
		check(fmt.Sprintf("lock cycle c=%d, floor", row.Concurrency), row.Floor)
		check(fmt.Sprintf("lock cycle c=%d, pgbench with synchronous_commit=on", row.Concurrency), row.RawDurable)
	}
	check("acquire at half the peak", r.AcquireAtHalfPeak.Acquire)
	for _, co := range r.CheckOut {
		check(fmt.Sprintf("check-out c=%d, lock on", co.Concurrency), co.On)
		check(fmt.Sprintf("check-out c=%d, lock off", co.Concurrency), co.Off)
	}
	for _, sc := range r.Scale {
		check(fmt.Sprintf("scale, %d instances", sc.Instances), sc.Stats)
	}
	if o := r.Outbox; o != nil {
		for _, row := range o.Rows {
			check(fmt.Sprintf("check-out c=%d without the outbox", row.Concurrency), row.Without)
			check(fmt.Sprintf("check-out c=%d with the outbox", row.Concurrency), row.With)
		}
	}
	if b := r.Busy; b != nil {
		for _, row := range b.Rows {
			check(fmt.Sprintf("busy tenant, %d open loans, statistics %s, c=%d", row.OpenLoans, row.Statistics, row.Concurrency), row.Stats)
		}
	}
	if s := r.SIP2; s != nil {
		check("SIP2 scenario, HTTP check-outs", s.HTTP)
		check("SIP2 scenario, SIP2 check-outs", s.SIP2)
		check("SIP2 scenario, HTTP renewals", s.RenewHTTP)
		check("SIP2 scenario, SIP2 renewals", s.RenewSIP2)
	}
	if rc := r.Recovery; rc != nil {
		for _, row := range rc.Rows {
			if row.Failed > 0 {
				out = append(out, fmt.Sprintf("recovery c=%d: %d of %d check-outs failed across %d backend kills", row.Concurrency, row.Failed, row.CheckOuts, row.Kills))
			}
		}
	}
	if f := r.CheckOutFloor; f != nil {
		for _, row := range f.Rows {
			check(fmt.Sprintf("check-out c=%d against its floor, service", row.Concurrency), row.Service)
			check(fmt.Sprintf("check-out c=%d against its floor, floor", row.Concurrency), row.Floor)
			check(fmt.Sprintf("check-out c=%d against its floor, the floor split, two calls", row.Concurrency), row.TwoCalls)
			check(fmt.Sprintf("check-out c=%d against its floor, the floor split, one call", row.Concurrency), row.OneCall)
		}
	}
	if pr := r.CheckOutProbe; pr != nil {
		for _, row := range pr.Rows {
			check(fmt.Sprintf("check-out c=%d probed, %s", row.Concurrency, row.Side), row.Stats)
		}
	}
	if tr := r.Tracing; tr != nil {
		for _, row := range tr.Rows {
			check(fmt.Sprintf("check-out c=%d untraced", row.Concurrency), row.Untraced)
			check(fmt.Sprintf("check-out c=%d traced", row.Concurrency), row.Traced)
		}
	}
	if r.BeforeAfter != nil {
		for _, row := range r.BeforeAfter.Rows {
			check(fmt.Sprintf("check-out c=%d, %s", row.Concurrency, r.BeforeAfter.Baseline), row.Before)
			check(fmt.Sprintf("check-out c=%d, this version", row.Concurrency), row.After)
		}
	}
	return out
}

func targets(r Results) []Target {
	var ts []Target
	add := func(what string, value float64, goal string, met bool) {
		ts = append(ts, Target{What: what, Value: value, Goal: goal, Met: met})
	}
	peakAcquireP99 := r.AcquireAtHalfPeak.Acquire.P99Ms
	for _, row := range r.LockCycle {
		if row.Concurrency >= 8 {
			add(fmt.Sprintf("lock cycle throughput, service / pgbench, c=%d", row.Concurrency), row.Ratio, ">= 0.8", row.Ratio >= 0.8)
		}
		add(fmt.Sprintf("lock cycle with history / without, c=%d", row.Concurrency), row.HistoryRatio, ">= 0.95", row.HistoryRatio >= 0.95)
		add(fmt.Sprintf("lock cycle throughput, service / floor (net/http + pgx), c=%d", row.Concurrency), row.FloorRatio, ">= 0.9", row.FloorRatio >= 0.9)
	}
	add("acquire p99 at half the peak rate (ms)", peakAcquireP99, "< 10", peakAcquireP99 < 10)
	for _, co := range r.CheckOut {
		add(fmt.Sprintf("check-out with the lock, p50 (ms), c=%d", co.Concurrency), co.On.P50Ms, "< 10", co.On.P50Ms < 10)
		add(fmt.Sprintf("check-out with the lock, p99 (ms), c=%d", co.Concurrency), co.On.P99Ms, "< 30", co.On.P99Ms < 30)
		add(fmt.Sprintf("lock overhead, median (ms), c=%d", co.Concurrency), co.MedianOverheadMs, "< 3", co.MedianOverheadMs < 3)
	}
	for _, b := range r.Bursts.Rows {
		if b.HandOff {
			add(fmt.Sprintf("burst with hand-off over %d storage instance(s), succeeded of 10", b.Storages), b.Succeeded, "10", b.Succeeded == 10)
			add(fmt.Sprintf("burst with hand-off over %d storage instance(s), median time / (10 x solo check-out p50)", b.Storages), b.MedianRatio, "<= 0.7", b.MedianRatio <= 0.7)
		}
	}
	if r.Bursts.HandOff.HandOffs > 0 {
		add("hand-off p50 across two storage instances (ms)", r.Bursts.HandOff.P50Ms, "< 3", r.Bursts.HandOff.P50Ms < 3)
	}
	if o := r.Outbox; o != nil {
		for _, row := range o.Rows {
			add(fmt.Sprintf("check-out p50 with the outbox / without, c=%d", row.Concurrency), row.P50Ratio, "<= 1.10", row.P50Ratio <= 1.10)
			add(fmt.Sprintf("CPU per check-out with the outbox / without, c=%d", row.Concurrency), row.CPURatio, "<= 1.10", row.CPURatio <= 1.10)
		}
	}
	if s := r.SIP2; s != nil {
		add("SIP2 check-out p50 - HTTP check-out p50 (ms)", s.P50DiffMs, "<= 1", s.P50DiffMs <= 1)
		add("SIP2 check-out p95 - HTTP check-out p95 (ms)", s.P95DiffMs, "<= 1", s.P95DiffMs <= 1)
		add("SIP2 renewal p50 - HTTP renewal p50 (ms)", s.RenewP50DiffMs, "within ±1", math.Abs(s.RenewP50DiffMs) <= 1)
		add("SIP2 10-scan burst, slowest scan (ms)", s.SlowestScanMs, "< 1000", s.SlowestScanMs < 1000)
		add("SIP2 10-scan burst, scans answered ok of 10", s.BurstSucceeded, "10", s.BurstSucceeded == 10)
	}
	if rc := r.Recovery; rc != nil {
		for _, row := range rc.Rows {
			if row.Concurrency == 1 {
				add("first successful check-out after a backend kill, median of kills (ms), c=1", row.MedianMs, "<= 50", row.MedianMs <= 50)
			}
		}
	}
	if f := r.CheckOutFloor; f != nil {
		for _, row := range f.Rows {
			if row.Concurrency <= 8 {
				add(fmt.Sprintf("check-out throughput, service / floor (net/http + pgx, same statements), median of rounds, c=%d", row.Concurrency),
					row.RoundRatio, ">= 0.8", row.RoundRatio >= 0.8)
			}
		}
	}
	for _, m := range r.Memory {
		add("peak RSS of "+m.Process+" (MB)", m.PeakMB, "< 60", m.PeakMB < 60)
	}
	if ba := r.BeforeAfter; ba != nil {
		for _, row := range ba.Rows {
			if row.Concurrency == 1 {
				add("check-out p50, c=1, this version / "+ba.Baseline, row.P50Ratio, "<= 0.75", row.P50Ratio <= 0.75)
				add("CPU per check-out, c=1, this version / "+ba.Baseline, row.CPURatio, "<= 0.7", row.CPURatio <= 0.7)
			}
		}
	}
	return ts
}

func printTable(w io.Writer, r Results) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	defer tw.Flush()
	fmt.Fprintf(tw, "\n%s\n%s\n", r.Date, r.Machine)
	if r.Smoke {
		fmt.Fprintln(tw, "SMOKE RUN: too short to be a measurement")
	}
	printLockCycle(tw, r.LockCycle)
	a := r.AcquireAtHalfPeak
	fmt.Fprintf(tw, "acquire alone at %d/s (half the peak): p50 %.2f ms, p95 %.2f ms, p99 %.2f ms, errors %d\n",
		a.RatePerSecond, a.Acquire.P50Ms, a.Acquire.P95Ms, a.Acquire.P99Ms, a.Acquire.Errors)

	fmt.Fprintln(tw, "\n2. Check-out, uncontended (distinct patrons), lock on vs off, interleaved")
	fmt.Fprintln(tw, "concurrency\tlock\tcheck-outs/s\tp50 ms\tp95 ms\tp99 ms\terrors\tmedian overhead ms\ton/off")
	for _, co := range r.CheckOut {
		for _, x := range []struct {
			name string
			s    Stats
		}{{"on", co.On}, {"off", co.Off}} {
			overhead, rel := "", ""
			if x.name == "on" {
				overhead, rel = fmt.Sprintf("%.2f", co.MedianOverheadMs), fmt.Sprintf("%.2f", co.MedianRatio)
			}
			fmt.Fprintf(tw, "%d\t%s\t%.0f\t%.2f\t%.2f\t%.2f\t%d\t%s\t%s\n", co.Concurrency, x.name, x.s.Throughput,
				x.s.P50Ms, x.s.P95Ms, x.s.P99Ms, x.s.Errors, overhead, rel)
		}
	}
	fmt.Fprintln(tw, "FOLIO publishes 400-600 ms per check-out with the lock")

	fmt.Fprintln(tw, "\n3. A patron's burst: 10 simultaneous check-outs over 3 circulation instances and 1 or 2 storage instances, no item limit, alternating")
	fmt.Fprintf(tw, "tenants with a request and a manual block, gate row present (full statements): %t\n", r.Bursts.Gated)
	fmt.Fprintln(tw, "waiting\tstorages\tsucceeded of 10\tmean burst ms\tmean / (10 x solo p50)\tmedian burst ms\tmedian / (10 x solo p50)\tsolo p50 ms\tp50 ms\tp99 ms\tbursts")
	for _, b := range r.Bursts.Rows {
		fmt.Fprintf(tw, "%s\t%d\t%.1f\t%.0f\t%.2f\t%.1f\t%.2f\t%.2f\t%.0f\t%.0f\t%d\n", b.Mode, b.Storages, b.Succeeded, b.TotalTimeMs, b.Ratio,
			b.MedianTimeMs, b.MedianRatio, b.SoloP50Ms, b.LatencyStats.P50Ms, b.LatencyStats.P99Ms, b.Bursts)
	}
	h := r.Bursts.HandOff
	fmt.Fprintf(tw, "solo check-out p50 %.2f ms; hand-off across two storage instances (release sent -> waiter's 201), %d times: p50 %.2f ms, p99 %.2f ms, max %.2f ms\n",
		r.Bursts.SoloP50Ms, h.HandOffs, h.P50Ms, h.P99Ms, h.MaxMs)
	fmt.Fprintf(tw, "CPU a check-out (every process): solo %.0f µs, in a burst with hand-off %.0f µs; ten check-outs' CPU over %d cores: a burst takes at least %.2f x 10 solo check-outs\n",
		r.Bursts.SoloCPU.Total, r.Bursts.BurstCPU.Total, r.Bursts.Cores, r.Bursts.FloorRatio)

	fmt.Fprintln(tw, "\n4. Scale: check-outs of distinct patrons, 16 concurrent clients, lock on, interleaved")
	fmt.Fprintln(tw, "instances\tcheck-outs/s\tp50 ms\tp95 ms\tp99 ms\terrors")
	for _, s := range r.Scale {
		fmt.Fprintf(tw, "%d\t%.0f\t%.2f\t%.2f\t%.2f\t%d\n", s.Instances, s.Stats.Throughput, s.Stats.P50Ms, s.Stats.P95Ms, s.Stats.P99Ms, s.Stats.Errors)
	}

	if ba := r.BeforeAfter; ba != nil {
		fmt.Fprintf(tw, "\n6. Check-out with the lock, uncontended: this version against %s, one circulation and one storage instance each, interleaved; CPU in µs per check-out\n", ba.Baseline)
		fmt.Fprintln(tw, "concurrency\tversion\tcheck-outs/s\tp50 ms\tp99 ms\tclient\tcirculation\tstorage\tPostgreSQL\tCPU total\terrors")
		for _, row := range ba.Rows {
			for _, v := range []struct {
				name string
				s    Stats
				cpu  CPUPerCheckOut
			}{{ba.Baseline, row.Before, row.CPUBefore}, {"this version", row.After, row.CPUAfter}} {
				fmt.Fprintf(tw, "%d\t%s\t%.0f\t%.2f\t%.2f\t%.0f\t%.0f\t%.0f\t%.0f\t%.0f\t%d\n", row.Concurrency, v.name, v.s.Throughput,
					v.s.P50Ms, v.s.P99Ms, v.cpu.Client, v.cpu.Circulation, v.cpu.Storage, v.cpu.Postgres, v.cpu.Total, v.s.Errors)
			}
			fmt.Fprintf(tw, "c=%d: p50 x%.2f, CPU per check-out x%.2f\n", row.Concurrency, row.P50Ratio, row.CPURatio)
		}
	}

	if r.SIP2 != nil {
		printSIP2(tw, *r.SIP2)
	}
	if r.Outbox != nil {
		printOutbox(tw, *r.Outbox)
	}

	fmt.Fprintln(tw, "\n5. Peak resident memory (VmHWM) over the whole run")
	for _, m := range r.Memory {
		fmt.Fprintf(tw, "%s\t%.1f MB\n", m.Process, m.PeakMB)
	}

	fmt.Fprintln(tw, "\nTargets")
	for _, tg := range r.Targets {
		mark := "met"
		if !tg.Met {
			mark = "MISSED"
		}
		fmt.Fprintf(tw, "%s\t%.2f\t%s\t%s\n", tg.What, tg.Value, tg.Goal, mark)
	}
}

// charts draws the lock cycle against pgbench, and the check-out latency with
// the lock on and off.
func charts(r Results, dir string) error {
	p := plot.New()
	p.Title.Text = "Lock cycle: circulation-storage vs pgbench (same SQL)"
	p.Y.Label.Text = "acquire + release per second"
	var svc, raw plotter.Values
	var names []string
	for _, row := range r.LockCycle {
		svc = append(svc, row.Service.Throughput)
		raw = append(raw, row.Raw.Throughput)
		names = append(names, fmt.Sprintf("c=%d", row.Concurrency))
	}
	if err := groupedBars(p, names, []string{"service (HTTP)", "pgbench"}, svc, raw); err != nil {
		return err
	}
	if err := p.Save(7*vg.Inch, 4*vg.Inch, filepath.Join(dir, "lock-cycle.png")); err != nil {
		return err
	}

	q := plot.New()
	q.Title.Text = "Check-out latency, uncontended: lock on vs off"
	q.Y.Label.Text = "ms"
	var on, off plotter.Values
	var groups []string
	for _, co := range r.CheckOut {
		on = append(on, co.On.P50Ms, co.On.P99Ms)
		off = append(off, co.Off.P50Ms, co.Off.P99Ms)
		groups = append(groups, fmt.Sprintf("p50, c=%d", co.Concurrency), fmt.Sprintf("p99, c=%d", co.Concurrency))
	}
	if err := groupedBars(q, groups, []string{"lock on", "lock off"}, on, off); err != nil {
		return err
	}
	return q.Save(7*vg.Inch, 4*vg.Inch, filepath.Join(dir, "check-out.png"))
}

func groupedBars(p *plot.Plot, names, series []string, values ...plotter.Values) error {
	w := vg.Points(24)
	for i, v := range values {
		bars, err := plotter.NewBarChart(v, w)
		if err != nil {
			return err
		}
		bars.LineStyle.Width = 0
		bars.Color = plotutil.Color(i)
		bars.Offset = w * vg.Length(2*i-len(values)+1) / 2
		p.Add(bars)
		p.Legend.Add(series[i], bars)
	}
	// Room for the legend above the bars, and for the outer bars at the sides.
	top := 0.0
	for _, v := range values {
		for _, x := range v {
			top = max(top, x)
		}
	}
	p.Y.Min, p.Y.Max = 0, top*1.3
	p.X.Min, p.X.Max = -0.6, float64(len(names))-0.4
	p.Legend.Top, p.Legend.Left = true, true
	p.NominalX(names...)
	return nil
}

// printTenants prints scenario 7's table.
func printTenants(w io.Writer, tn Tenants) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "\n7. %d tenants: traffic spread over all of them / on one\tone\tspread\tratio\n", tn.Tenants)
	fmt.Fprintf(tw, "check-out p50, c = 1 (ms)\t%.2f\t%.2f\t%.2f\n", tn.CheckOutOne.P50Ms, tn.CheckOutSpread.P50Ms, tn.P50Ratio)
	fmt.Fprintf(tw, "check-out throughput, c = 1 (/s)\t%.0f\t%.0f\t%.2f\n", tn.CheckOutOne.Throughput, tn.CheckOutSpread.Throughput, tn.ThroughputRatio)
	fmt.Fprintf(tw, "PostgreSQL CPU per check-out (µs)\t%.0f\t%.0f\t%.2f\n", tn.PostgresCPUOneUs, tn.PostgresCPUSpreadUs, tn.PostgresCPURatio)
	fmt.Fprintf(tw, "storage calls per check-out\t%.2f\t%.2f\t\n", tn.CallsOne, tn.CallsSpread)
	fmt.Fprintf(tw, "lock cycles, c = 8 (/s)\t%.0f\t%.0f\t%.2f\n", tn.LockCyclesOne, tn.LockCyclesSpread, tn.LockCycleRatio)
	fmt.Fprintf(tw, "PostgreSQL backends' private memory after (MiB)\t\t%.1f in %d (largest %.1f)\t\n", tn.BackendsMiB, tn.Backends, tn.LargestBackendMiB)
	fmt.Fprintf(tw, "initialising a tenant: first, last (ms); all (s)\t%.0f\t%.0f\t%.1f s\n", tn.InitFirstMs, tn.InitLastMs, tn.InitAllSeconds)
	fmt.Fprintf(tw, "a sweeper pass over every tenant (ms, mean of %.0f)\t\t%.0f\t\n", tn.SweeperPasses, tn.SweeperPassMs)
	tw.Flush()
}

// writeResults writes results.json into -bench.out, when set.
func writeResults(t *testing.T, res Results) {
	t.Helper()
	if *outDir == "" {
		return
	}
	b, _ := json.MarshalIndent(res, "", "  ")
	if err := os.WriteFile(filepath.Join(*outDir, "results.json"), append(b, '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
}

// printSIP2 prints scenario 8.
func printSIP2(w io.Writer, s SIP2) {
	fmt.Fprintln(w, "\n8. A kiosk's check-outs, then renewals, one at a time, through the SIP2 door and over HTTP, one circulation instance, alternating")
	table := func(unit string, http, sip2 Stats) {
		fmt.Fprintf(w, "way\t%s/s\tp50 ms\tp95 ms\tp99 ms\terrors\n", unit)
		for _, x := range []struct {
			name string
			s    Stats
		}{{"HTTP", http}, {"SIP2", sip2}} {
			fmt.Fprintf(w, "%s\t%.0f\t%.2f\t%.2f\t%.2f\t%d\n", x.name, x.s.Throughput, x.s.P50Ms, x.s.P95Ms, x.s.P99Ms, x.s.Errors)
		}
	}
	table("check-outs", s.HTTP, s.SIP2)
	fmt.Fprintf(w, "SIP2 - HTTP: p50 %+.2f ms, p95 %+.2f ms\n", s.P50DiffMs, s.P95DiffMs)
	fmt.Fprintln(w, "the same kiosk renewing those loans, one at a time, alternating")
	table("renewals", s.RenewHTTP, s.RenewSIP2)
	fmt.Fprintf(w, "SIP2 - HTTP: renewal p50 %+.2f ms, p95 %+.2f ms\n", s.RenewP50DiffMs, s.RenewP95DiffMs)
	fmt.Fprintf(w, "a patron's 10 scans at once over 10 kiosk connections, %d bursts: %.1f of 10 ok, slowest scan %.0f ms (median burst's slowest %.0f ms)\n",
		s.Bursts, s.BurstSucceeded, s.SlowestScanMs, s.BurstP50Ms)
}
