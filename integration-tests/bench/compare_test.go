package bench

import (
	"context"
	"flag"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/checkoutlock/integration-tests/harness"
)

// baRounds and baSlice shape scenario 6 run alone, for a small
// difference: many short rounds, each a slice of either version.
var (
	baTracing = flag.Bool("bench.tracing", false, "scenario 6 with this version's services tracing every check-out (OTEL_EXPORTER_OTLP_ENDPOINT naming a collector of the bench's own, which discards the spans)")
	baRounds  = flag.Int("bench.rounds", 0, "scenario 6's rounds (0: the plan's three); each round is one slice of either version, the first alternating")
	baSlice   = flag.Duration("bench.slice", 2*time.Second, "scenario 6's slice, with -bench.rounds")
)

var baseline = flag.String("bench.baseline", "",
	"a git revision of this repository whose services the check-out is compared with, built and run in the same run (scenario 6)")

// repoRoot is the repository's top directory.
func repoRoot() string { return harness.RepoRoot() }

// goBuild builds the package pkg of the module tree at dir into out.
func goBuild(t *testing.T, dir, pkg, out string) {
	t.Helper()
	cmd := exec.Command("go", "build", "-o", out, pkg)
	cmd.Dir = dir
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build %s: %v\n%s", pkg, err, b)
	}
}

// buildFloor builds the floor server (bench/floor) and returns its path.
func buildFloor(t *testing.T) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "floor")
	goBuild(t, repoRoot(), "./integration-tests/bench/floor", out)
	return out
}

// buildAt builds both services as they were at git revision rev, from a
// worktree of this repository, and returns the directory of the binaries.
//
// The revision of the working tree, unchanged (a clean clone: make test's
// smoke run compares HEAD with itself), is the binaries already built for
// the run.
func buildAt(t *testing.T, rev string) string {
	t.Helper()
	if sameAsWorkingTree(rev) {
		return harness.BinDir()
	}
	dir := t.TempDir()
	src := filepath.Join(dir, "src")
	git := func(args ...string) {
		t.Helper()
		if b, err := exec.Command("git", append([]string{"-C", repoRoot()}, args...)...).CombinedOutput(); err != nil {
			t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, b)
		}
	}
	git("worktree", "add", "--detach", src, rev)
	t.Cleanup(func() { git("worktree", "remove", "--force", src) })
	bin := filepath.Join(dir, "bin")
	for _, svc := range []string{"circulation-storage", "circulation"} {
		goBuild(t, src, "./"+svc+"/cmd/"+svc, filepath.Join(bin, svc))
	}
	return bin
}

// sameAsWorkingTree reports whether rev is the commit checked out, with no
// tracked file changed since.
func sameAsWorkingTree(rev string) bool {
	git := func(args ...string) string {
		out, err := exec.Command("git", append([]string{"-C", repoRoot()}, args...)...).Output()
		if err != nil {
			return "error"
		}
		return strings.TrimSpace(string(out))
	}
	return git("rev-parse", rev+"^{commit}") == git("rev-parse", "HEAD") && git("status", "--porcelain", "--untracked-files=no") == ""
}

// CPUPerCheckOut is the CPU time one check-out costs, in microseconds, by
// who spends it: the load generator (this process), the circulation and
// storage processes, and PostgreSQL (every postgres process).
type CPUPerCheckOut struct {
	Client      float64 `json:"clientUs"`
	Circulation float64 `json:"circulationUs"`
	Storage     float64 `json:"storageUs"`
	Postgres    float64 `json:"postgresUs"`
	Total       float64 `json:"totalUs"`
}

// BeforeAfterRow is scenario 6: uncontended check-outs with the lock on,
// through this version's services and through the baseline's, one
// circulation and one storage instance each, in alternating slices.
type BeforeAfterRow struct {
	Concurrency int            `json:"concurrency"`
	Before      Stats          `json:"before"`
	After       Stats          `json:"after"`
	CPUBefore   CPUPerCheckOut `json:"cpuBefore"`
	CPUAfter    CPUPerCheckOut `json:"cpuAfter"`
	// P50Ratio and CPURatio are after ÷ before.
	P50Ratio float64 `json:"p50AfterOverBefore"`
	CPURatio float64 `json:"cpuAfterOverBefore"`
	// RoundP50Ratio and RoundCPURatio are the medians of the same ratios
	// taken round by round, each round's two slices side by side: what
	// the machine does meanwhile moves both slices of a round, and the
	// median leaves out a round it moved one of.
	RoundP50Ratio float64 `json:"roundMedianP50AfterOverBefore"`
	RoundCPURatio float64 `json:"roundMedianCPUAfterOverBefore"`
	Rounds        int     `json:"rounds"`
}

// BeforeAfter is scenario 6's rows and the revision compared with.
type BeforeAfter struct {
	Baseline string           `json:"baseline"`
	Rows     []BeforeAfterRow `json:"rows"`
}

// cpuSample is the CPU time spent so far by each party.
type cpuSample struct{ client, circulation, storage, postgres time.Duration }

// sampleCPU samples the CPU spent so far by this process, circulation,
// storage and every postgres process on the machine.
func sampleCPU(t *testing.T, circulation, storage *harness.Process) cpuSample {
	t.Helper()
	return sampleServerCPU(t, circulation, storage, 0)
}

// sampleServerCPU is sampleCPU with PostgreSQL's CPU that of the server
// whose postmaster is postmaster alone (postgresCPUOf; 0: every postgres
// process on the machine).
func sampleServerCPU(t *testing.T, circulation, storage *harness.Process, postmaster int) cpuSample {
	t.Helper()
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		t.Fatal(err)
	}
	return cpuSample{
		client:      time.Duration(ru.Utime.Nano() + ru.Stime.Nano()),
		circulation: processCPU(circulation.PID()),
		storage:     processCPU(storage.PID()),
		postgres:    postgresCPUOf(postmaster),
	}
}

// sampleCPUOf is sampleCPU over several circulation instances, their CPU
// summed.
func sampleCPUOf(t *testing.T, circulations []*harness.Process, storage *harness.Process) cpuSample {
	t.Helper()
	s := sampleCPU(t, circulations[0], storage)
	for _, c := range circulations[1:] {
		s.circulation += processCPU(c.PID())
	}
	return s
}

// cpuSpent sums the CPU of check-outs between pairs of samples.
type cpuSpent struct {
	sum CPUPerCheckOut // the sum over check-outs, not yet divided
	n   int
}

func (c *cpuSpent) add(before, after cpuSample, checkOuts int) {
	c.sum = addCPU(c.sum, perCheckOut(before, after, int64(checkOuts)), float64(checkOuts))
	c.n += checkOuts
}

// perCheckOut is the CPU a check-out cost, on average.
func (c *cpuSpent) perCheckOut() CPUPerCheckOut {
	if c.n == 0 {
		return CPUPerCheckOut{}
	}
	return scaleCPU(c.sum, 1/float64(c.n))
}

// clockTick is the unit of /proc/<pid>/stat's CPU times (USER_HZ, 100 on
// Linux).
const clockTick = 10 * time.Millisecond

// processCPU is a process's user and system CPU time so far, all its
// threads', to the nanosecond: the process's CPU clock (clock_gettime of
// the clock id clock_getcpuclockid(3) would give). Where that clock cannot
// be read, /proc/<pid>/stat's figure, in clock ticks of 10 ms: a slice of
// a few seconds then carries an error of a percent or two.
func processCPU(pid int) time.Duration {
	// MAKE_PROCESS_CPUCLOCK(pid, CPUCLOCK_SCHED) of the kernel's
	// posix-timers.h.
	clock := ^int32(pid)<<3 | 2
	var ts syscall.Timespec
	if _, _, errno := syscall.Syscall(syscall.SYS_CLOCK_GETTIME, uintptr(clock), uintptr(unsafe.Pointer(&ts)), 0); errno == 0 {
		return time.Duration(ts.Nano())
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	// The fields after the command (which may hold spaces) in parentheses;
	// utime and stime are the 14th and 15th of the line.
	s := string(b)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	if len(fields) < 13 {
		return 0
	}
	u, _ := strconv.ParseInt(fields[11], 10, 64)
	st, _ := strconv.ParseInt(fields[12], 10, 64)
	return time.Duration(u+st) * clockTick
}

// postgresCPU is the CPU time of every postgres process so far, those that
// have ended included: a server process's ends with it, and the
// postmaster, which waits for it, counts it among its children's
// (cutime and cstime of /proc/<pid>/stat, in clock ticks). Without them a
// backend ending in a slice (a pool retiring a connection) took its whole
// life's CPU out of the sum.
func postgresCPU() time.Duration { return postgresCPUOf(0) }

// postgresCPUOf is postgresCPU for one PostgreSQL server, the one whose
// postmaster is postmaster (0: every server on the machine): its
// postmaster's CPU, its server processes' (the postmaster's children) and
// the ended ones'. A comparison of a few per cent counts its own server's
// alone: the other servers a shared machine runs move it by more than
// itself.
func postgresCPUOf(postmaster int) time.Duration {
	entries, _ := os.ReadDir("/proc")
	var total time.Duration
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		// The server's processes, and whether pid is a postmaster (a
		// postgres process whose parent is not one, or the one named).
		var fields []string
		var isPostmaster bool
		if postmaster == 0 {
			if !isPostgres(pid) {
				continue
			}
			if fields = statFields(pid); len(fields) > 1 {
				ppid, _ := strconv.Atoi(fields[1])
				isPostmaster = !isPostgres(ppid)
			}
		} else {
			fields = statFields(pid)
			isPostmaster = pid == postmaster
			if !isPostmaster && (len(fields) < 2 || fields[1] != strconv.Itoa(postmaster)) {
				continue
			}
		}
		total += processCPU(pid)
		if isPostmaster && len(fields) > 14 {
			cu, _ := strconv.ParseInt(fields[13], 10, 64)
			cs, _ := strconv.ParseInt(fields[14], 10, 64)
			total += time.Duration(cu+cs) * clockTick
		}
	}
	return total
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

// isPostgres says whether process pid is a PostgreSQL server process.
func isPostgres(pid int) bool {
	comm, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/comm")
	return err == nil && strings.TrimSpace(string(comm)) == "postgres"
}

// statFields are the fields of /proc/<pid>/stat after the command (which
// may hold spaces): the state first, then the parent's pid; nil when the
// process is gone.
func statFields(pid int) []string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return nil
	}
	s := string(b)
	return strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
}

// perCheckOut divides the CPU spent between two samples by n check-outs.
func perCheckOut(before, after cpuSample, n int64) CPUPerCheckOut {
	if n == 0 {
		return CPUPerCheckOut{}
	}
	us := func(d time.Duration) float64 { return float64(d.Microseconds()) / float64(n) }
	c := CPUPerCheckOut{Client: us(after.client - before.client), Circulation: us(after.circulation - before.circulation),
		Storage: us(after.storage - before.storage), Postgres: us(after.postgres - before.postgres)}
	c.Total = c.Client + c.Circulation + c.Storage + c.Postgres
	return c
}

// addCPU sums CPU figures weighted by check-outs, for averaging.
func addCPU(a CPUPerCheckOut, b CPUPerCheckOut, n float64) CPUPerCheckOut {
	return CPUPerCheckOut{Client: a.Client + b.Client*n, Circulation: a.Circulation + b.Circulation*n,
		Storage: a.Storage + b.Storage*n, Postgres: a.Postgres + b.Postgres*n, Total: a.Total + b.Total*n}
}

func scaleCPU(a CPUPerCheckOut, f float64) CPUPerCheckOut {
	return CPUPerCheckOut{Client: a.Client * f, Circulation: a.Circulation * f, Storage: a.Storage * f,
		Postgres: a.Postgres * f, Total: a.Total * f}
}

// benchBeforeAfter is scenario 6: this version's check-out against the
// baseline's, same topology, same PostgreSQL (the baseline in a database
// of its own, its schema being another release's), alternating slices;
// latency and CPU per check-out of each.
func benchBeforeAfter(t *testing.T, rev string, p plan, env []string) BeforeAfter {
	t.Helper()
	opts := harness.Options{Circulations: 1, FeatureOn: true, StorageEnv: env, CirculationEnv: env}
	if *baTracing {
		traced := append(slices.Clone(env), "OTEL_EXPORTER_OTLP_ENDPOINT=http://"+otlpSink(t))
		opts.StorageEnv, opts.CirculationEnv = traced, traced
	}
	after := harness.NewCluster(t, opts)
	opts.StorageEnv, opts.CirculationEnv = env, env
	opts.BinDir = buildAt(t, rev)
	opts.DatabaseURL = harness.FreshDatabase(t)
	before := harness.NewCluster(t, opts)
	pops := [2]*population{populate(t, before, p.population/2, 0), populate(t, after, p.population/2, 0)}
	analyze(t, before)
	analyze(t, after)
	out := BeforeAfter{Baseline: rev}
	rounds, slice := p.rounds, p.slice
	if *baRounds > 0 {
		rounds, slice = *baRounds, *baSlice
	}
	for _, conc := range []int{1, 4} {
		a := alternate(t, [2]*harness.Cluster{before, after}, pops, conc, rounds, slice, 0)
		row := BeforeAfterRow{Concurrency: conc, Before: a.stats[0], After: a.stats[1], CPUBefore: a.cpu[0], CPUAfter: a.cpu[1],
			P50Ratio: a.p50Ratio, CPURatio: a.cpuRatio, RoundP50Ratio: a.roundP50Ratio, RoundCPURatio: a.roundCPURatio, Rounds: rounds}
		out.Rows = append(out.Rows, row)
		t.Logf("check-out c=%d before (%s) p50 %.2f ms p99 %.2f ms, %.0f µs CPU; after p50 %.2f ms p99 %.2f ms, %.0f µs CPU; p50 ×%.2f, CPU ×%.2f; round by round, median of %d: p50 ×%.3f, CPU ×%.3f",
			conc, rev, row.Before.P50Ms, row.Before.P99Ms, row.CPUBefore.Total, row.After.P50Ms, row.After.P99Ms, row.CPUAfter.Total,
			row.P50Ratio, row.CPURatio, rounds, row.RoundP50Ratio, row.RoundCPURatio)
		for _, side := range []struct {
			name string
			cpu  CPUPerCheckOut
		}{{"before", row.CPUBefore}, {"after", row.CPUAfter}} {
			t.Logf("check-out c=%d %s: CPU of the client %.0f µs, circulation %.0f µs, storage %.0f µs, PostgreSQL %.0f µs",
				conc, side.name, side.cpu.Client, side.cpu.Circulation, side.cpu.Storage, side.cpu.Postgres)
		}
	}
	return out
}

// alternation is one concurrency's alternating slices of two clusters
// (alternate): each side's latencies and CPU per check-out over every
// slice, the second side's ratios to the first's over every slice, and
// the same ratios taken round by round (a round's two slices side by side
// in time) with their medians.
type alternation struct {
	stats                        [2]Stats
	cpu                          [2]CPUPerCheckOut
	p50Ratio, cpuRatio           float64
	p50Ratios, cpuRatios         []float64
	roundP50Ratio, roundCPURatio float64
}

// alternateWarmUp is how long alternate's unmeasured slice at each new
// concurrency lasts, each cluster's: at least 2 s, so that the
// connections it opens, and the statements their backends plan (some
// 50 ms of PostgreSQL's CPU for each new connection of storage's, §14),
// are no slice's cost.
func alternateWarmUp(slice time.Duration) time.Duration { return max(slice, 2*time.Second) }

// alternate runs uncontended check-outs at conc through each of two
// clusters in turn, a slice each, for rounds rounds, each cluster going
// first in every other round, each check-out taking a patron of its
// cluster's population, after an unmeasured slice each
// (alternateWarmUp); and samples the CPU each slice costs, PostgreSQL's
// that of the server whose postmaster is postmaster (sampleServerCPU; 0:
// every postgres process). Scenario 6 compares two versions so, and
// scenario 15 tracing against none.
func alternate(t *testing.T, clusters [2]*harness.Cluster, pops [2]*population, conc, rounds int, slice time.Duration, postmaster int) alternation {
	t.Helper()
	hists := [2]*histPair{{h: newHist()}, {h: newHist()}}
	var cpu [2]CPUPerCheckOut
	var a alternation
	if !*smoke {
		for i, c := range clusters {
			attack(t, checkOutTargeter(c, pops[i], 1), conc, alternateWarmUp(slice))
		}
	}
	for round := range rounds {
		var p50, perCO [2]float64
		for k := range clusters {
			i := (k + round) % 2 // each goes first in every other round
			c := clusters[i]
			s0 := sampleServerCPU(t, c.Circulations[0], c.Storage, postmaster)
			h, errs, elapsed := attack(t, checkOutTargeter(c, pops[i], 1), conc, slice)
			s1 := sampleServerCPU(t, c.Circulations[0], c.Storage, postmaster)
			hists[i].h.Merge(h)
			hists[i].errs += errs
			hists[i].elapsed += elapsed
			one := perCheckOut(s0, s1, h.TotalCount())
			cpu[i] = addCPU(cpu[i], one, float64(h.TotalCount()))
			p50[i], perCO[i] = float64(h.ValueAtQuantile(50)), one.Total
		}
		a.p50Ratios = append(a.p50Ratios, ratio(p50[1], p50[0]))
		a.cpuRatios = append(a.cpuRatios, ratio(perCO[1], perCO[0]))
	}
	for i, h := range hists {
		a.stats[i] = stats(h.h, h.errs, h.elapsed)
		a.cpu[i] = scaleCPU(cpu[i], 1/float64(max(1, h.h.TotalCount())))
	}
	a.p50Ratio = ratio(a.stats[1].P50Ms, a.stats[0].P50Ms)
	a.cpuRatio = ratio(a.cpu[1].Total, a.cpu[0].Total)
	a.roundP50Ratio, a.roundCPURatio = median(a.p50Ratios), median(a.cpuRatios)
	return a
}

// histPair is one side's latencies, failures and time.
type histPair struct {
	h       *hdrhistogram.Histogram
	errs    int64
	elapsed time.Duration
}

// otlpSink is an OTLP/HTTP endpoint on loopback that takes every span sent
// to it and keeps none (an empty answer is OTLP's success), for measuring
// what tracing costs the services; its address.
func otlpSink(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/x-protobuf")
	})}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return ln.Addr().String()
}
