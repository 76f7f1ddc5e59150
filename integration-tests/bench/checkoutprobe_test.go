package bench

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/checkoutlock/integration-tests/harness"
)

// CheckOutProbe is scenario 14's probe: the service and the floor split
// in two processes asked once, each in one long slice at a time, looked
// into where scenario 14 only counts: the CPU and the thread switches of
// each process a check-out, PostgreSQL's CPU and the sessions opened to
// it, and how storage answered the service's check-outs (in one call, or
// validation's read and a write). Each side's processes are logged when
// its slice begins, so that a profiler can be attached to them
// (BENCHMARKS.md §14 says how).
type CheckOutProbe struct {
	Rows []CheckOutProbeRow `json:"rows"`
}

// CheckOutProbeRow is one side's slice at one concurrency.
type CheckOutProbeRow struct {
	Concurrency int    `json:"concurrency"`
	Side        string `json:"side"`
	Stats       Stats  `json:"stats"`
	// FrontCPU, BackCPU and PostgresCPU are the CPU a check-out, in µs,
	// of circulation (the split floor's front), storage (its back) and
	// every postgres process on the machine.
	FrontCPU    float64 `json:"frontCpuUs"`
	BackCPU     float64 `json:"backCpuUs"`
	PostgresCPU float64 `json:"postgresCpuUs"`
	// FrontSwitches and BackSwitches are each process's thread switches
	// a check-out, voluntary and not, over all its threads.
	FrontSwitches float64 `json:"frontSwitches"`
	BackSwitches  float64 `json:"backSwitches"`
	// FrontAllocKB and BackAllocKB are the memory each process allocated
	// a check-out, in KiB (the services' go_memstats_alloc_bytes_total,
	// the floor's GET /admin/allocs).
	FrontAllocKB float64 `json:"frontAllocKiB"`
	BackAllocKB  float64 `json:"backAllocKiB"`
	// Sessions is how many sessions were opened to the database during
	// the slice (pg_stat_database.sessions).
	Sessions int64 `json:"sessionsOpened"`
	// Statements are the statements PostgreSQL spent most time in, in the
	// slice, with their calls and mean times, when pg_stat_statements is
	// loaded (BENCHMARKS.md §14 says how); nil otherwise.
	Statements []ProbedStatement `json:"statements,omitempty"`
	// OneCall and Validations are, for the service, how many check-outs
	// storage answered in one call, and how many validation reads it
	// answered (a check-out that went the two-call way).
	OneCall     int64 `json:"oneCall,omitempty"`
	Validations int64 `json:"validations,omitempty"`
	// PoolWaits and PoolOpened are, for the service, how many times
	// storage's main pool had no idle session for a caller, and how many
	// sessions it opened, in the slice (checkout_db_pool_*).
	PoolWaits  int64 `json:"poolWaits,omitempty"`
	PoolOpened int64 `json:"poolOpened,omitempty"`
}

// ProbedStatement is one statement's figures in a slice.
type ProbedStatement struct {
	Query  string  `json:"query"`
	Calls  int64   `json:"calls"`
	MeanMs float64 `json:"meanExecMs"`
	// Plans is how many times the statement was planned in the slice, and
	// PlanMs the time planning took in all (track_planning, when on).
	Plans  int64   `json:"plans"`
	PlanMs float64 `json:"totalPlanMs"`
	// BuffersHit is the shared buffers a call found in memory, and
	// WALBytes the WAL a call wrote, on average.
	BuffersHit float64 `json:"sharedBlocksHitPerCall"`
	WALBytes   float64 `json:"walBytesPerCall"`
}

// checkOutProbeShape is the probe's slice and concurrencies: one slice
// of six seconds a side (long enough for a profiler's five), after a
// warm-up of two.
func checkOutProbeShape() (slice, warmUp time.Duration, concurrencies []int) {
	if *smoke {
		return 300 * time.Millisecond, 300 * time.Millisecond, []int{1}
	}
	return 6 * time.Second, 2 * time.Second, []int{1, 8}
}

// benchCheckOutProbe is scenario 14's probe.
func benchCheckOutProbe(t *testing.T, env []string) CheckOutProbe {
	t.Helper()
	slice, warmUp, concurrencies := checkOutProbeShape()
	// A patron a check-out, at scenario 14's 2,000 a second, for both
	// sides' warm-ups and slices.
	perSide := time.Duration(len(concurrencies)) * (slice + warmUp)
	c, sides := startCheckOutFloor(t, env, int(2000*perSide.Seconds()*2))
	probed := []struct {
		name string
		side floorSide
	}{{"service", sides[0]}, {"floor split, one call", sides[3]}}
	counted := statementsCounted(t, c)
	var out CheckOutProbe
	for _, conc := range concurrencies {
		for _, p := range probed {
			attack(t, p.side.targeter, conc, warmUp)
			t.Logf("check-out probe c=%d, %s: front pid %d, back pid %d, for %s", conc, p.name, p.side.front.PID(), p.side.back.PID(), slice)
			cpu0, sw0, sess0 := sampleCPU(t, p.side.front, p.side.back), switchesOf(t, p.side.front, p.side.back), sessionsOpened(t, c)
			al0 := allocatedBy(t, c, p.side.front, p.side.back)
			one0, val0 := storageAnswers(t, c)
			waits0, opened0 := storagePool(t, c)
			if counted {
				resetStatements(t, c)
			}
			profiled := profileDuring(t, p.side, slice, fmt.Sprintf("checkout-probe-c%d", conc))
			h, errs, elapsed := attack(t, p.side.targeter, conc, slice)
			profiled()
			cpu1, sw1, sess1 := sampleCPU(t, p.side.front, p.side.back), switchesOf(t, p.side.front, p.side.back), sessionsOpened(t, c)
			al1 := allocatedBy(t, c, p.side.front, p.side.back)
			one1, val1 := storageAnswers(t, c)
			waits1, opened1 := storagePool(t, c)
			n := float64(max(h.TotalCount(), 1))
			us := func(d time.Duration) float64 { return float64(d.Microseconds()) / n }
			row := CheckOutProbeRow{Concurrency: conc, Side: p.name, Stats: stats(h, errs, elapsed),
				FrontCPU: us(cpu1.circulation - cpu0.circulation), BackCPU: us(cpu1.storage - cpu0.storage), PostgresCPU: us(cpu1.postgres - cpu0.postgres),
				FrontSwitches: float64(sw1[0]-sw0[0]) / n, BackSwitches: float64(sw1[1]-sw0[1]) / n, Sessions: sess1 - sess0,
				FrontAllocKB: (al1[0] - al0[0]) / 1024 / n, BackAllocKB: (al1[1] - al0[1]) / 1024 / n}
			if counted {
				row.Statements = topStatements(t, c)
			}
			if p.side.front == c.Circulations[0] {
				row.OneCall, row.Validations = one1-one0, val1-val0
				row.PoolWaits, row.PoolOpened = waits1-waits0, opened1-opened0
				// Each check-out asked storage once, in one call or by
				// validation's read first: the counts account for them
				// (storage counts an answer just after sending it, so the
				// slice's last few may not be counted yet).
				if asked := row.OneCall + row.Validations; asked > row.Stats.Requests || asked < row.Stats.Requests-int64(conc) {
					t.Errorf("c=%d: storage counted %d check-outs in one call and %d validation reads, want the %d check-outs made (within %d)",
						conc, row.OneCall, row.Validations, row.Stats.Requests, conc)
				}
			}
			out.Rows = append(out.Rows, row)
		}
	}
	return out
}

// switchesOf is the thread switches so far of each process, all its
// threads', voluntary and not.
func switchesOf(t *testing.T, ps ...*harness.Process) []int64 {
	t.Helper()
	out := make([]int64, len(ps))
	for i, p := range ps {
		tasks, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/status", p.PID()))
		if err != nil || len(tasks) == 0 {
			t.Fatalf("the threads of %s: %v", p.Name, err)
		}
		for _, task := range tasks {
			b, err := os.ReadFile(task)
			if err != nil {
				continue // a thread that ended meanwhile
			}
			for _, line := range strings.Split(string(b), "\n") {
				name, v, ok := strings.Cut(line, ":")
				if ok && (name == "voluntary_ctxt_switches" || name == "nonvoluntary_ctxt_switches") {
					n, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
					out[i] += n
				}
			}
		}
	}
	return out
}

// allocatedBy is the bytes each process has allocated so far: a
// service's by its metrics, the floor's by its GET /admin/allocs.
func allocatedBy(t *testing.T, c *harness.Cluster, ps ...*harness.Process) []float64 {
	t.Helper()
	out := make([]float64, len(ps))
	for i, p := range ps {
		if p == c.Storage || slices.Contains(c.Circulations, p) {
			v, found := c.Metric(t, p, "go_memstats_alloc_bytes_total")
			if !found {
				t.Fatalf("%s's metrics have no go_memstats_alloc_bytes_total", p.Name)
			}
			out[i] = v
			continue
		}
		res, err := http.Get(p.URL() + "/admin/allocs")
		if err != nil {
			t.Fatalf("the allocations of %s: %v", p.Name, err)
		}
		b, err := io.ReadAll(res.Body)
		res.Body.Close()
		if err != nil || res.StatusCode != http.StatusOK {
			t.Fatalf("the allocations of %s: %d %s %v", p.Name, res.StatusCode, b, err)
		}
		if out[i], err = strconv.ParseFloat(strings.TrimSpace(string(b)), 64); err != nil {
			t.Fatalf("the allocations of %s: %q", p.Name, b)
		}
	}
	return out
}

// sessionsOpened is how many sessions have been opened to the cluster's
// database so far.
func sessionsOpened(t *testing.T, c *harness.Cluster) int64 {
	t.Helper()
	var n int64
	if err := c.DB.QueryRow(context.Background(), `SELECT sessions FROM pg_stat_database WHERE datname = current_database()`).Scan(&n); err != nil {
		t.Fatalf("sessions opened: %v", err)
	}
	return n
}

// statementsCounted says whether the server loads pg_stat_statements,
// and makes its view in the cluster's database when it does.
func statementsCounted(t *testing.T, c *harness.Cluster) bool {
	t.Helper()
	var loaded bool
	ctx := context.Background()
	if err := c.DB.QueryRow(ctx, `SELECT 'pg_stat_statements' = ANY (string_to_array(replace(current_setting('shared_preload_libraries'), ' ', ''), ','))`).Scan(&loaded); err != nil {
		t.Fatalf("shared_preload_libraries: %v", err)
	}
	if loaded {
		if _, err := c.DB.Exec(ctx, `CREATE EXTENSION IF NOT EXISTS pg_stat_statements`); err != nil {
			t.Fatalf("pg_stat_statements: %v", err)
		}
	}
	return loaded
}

// resetStatements empties pg_stat_statements.
func resetStatements(t *testing.T, c *harness.Cluster) {
	t.Helper()
	if _, err := c.DB.Exec(context.Background(), `SELECT pg_stat_statements_reset()`); err != nil {
		t.Fatalf("pg_stat_statements_reset: %v", err)
	}
}

// topStatements is the statements PostgreSQL spent most time in since
// resetStatements (executing and planning), as pg_stat_statements counts
// them: the ten first, each with the buffers a call hit and the WAL it
// wrote.
func topStatements(t *testing.T, c *harness.Cluster) []ProbedStatement {
	t.Helper()
	rows, err := c.DB.Query(context.Background(), `SELECT left(regexp_replace(query, '\s+', ' ', 'g'), 60), calls, mean_exec_time, plans, total_plan_time,
		shared_blks_hit::float8 / greatest(calls, 1), wal_bytes::float8 / greatest(calls, 1)
		FROM pg_stat_statements WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
		ORDER BY total_exec_time + total_plan_time DESC LIMIT 10`)
	if err != nil {
		t.Fatalf("pg_stat_statements: %v", err)
	}
	defer rows.Close()
	var out []ProbedStatement
	for rows.Next() {
		var s ProbedStatement
		if err := rows.Scan(&s.Query, &s.Calls, &s.MeanMs, &s.Plans, &s.PlanMs, &s.BuffersHit, &s.WALBytes); err != nil {
			t.Fatalf("pg_stat_statements: %v", err)
		}
		out = append(out, s)
	}
	if err := rows.Err(); err != nil {
		t.Fatalf("pg_stat_statements: %v", err)
	}
	return out
}

// storageAnswers is how many check-outs storage has answered in one call
// (201s) and how many validation reads, so far.
func storageAnswers(t *testing.T, c *harness.Cluster) (oneCall, validations int64) {
	t.Helper()
	one, _ := c.Metric(t, c.Storage, `http_request_duration_seconds_count{method="POST",route="/check-out-storage/check-outs",status="201"}`)
	val, _ := c.Metric(t, c.Storage, `http_request_duration_seconds_count{method="GET",route="/check-out-storage/validation",status="200"}`)
	return int64(one), int64(val)
}

// storagePool is how many times storage's main pool has had no idle
// session for a caller, and how many sessions it has opened, so far.
func storagePool(t *testing.T, c *harness.Cluster) (waits, opened int64) {
	t.Helper()
	w, foundW := c.Metric(t, c.Storage, `checkout_db_pool_empty_acquires_total{pool="main"}`)
	o, foundO := c.Metric(t, c.Storage, `checkout_db_pool_connections_opened_total{pool="main"}`)
	if !foundW || !foundO {
		t.Fatal("storage's metrics have no checkout_db_pool_empty_acquires_total or checkout_db_pool_connections_opened_total of its main pool")
	}
	return int64(w), int64(o)
}

// printCheckOutProbe prints the probe's table.
func printCheckOutProbe(w io.Writer, p CheckOutProbe) {
	fmt.Fprintln(w, "\n14, probed. The service and the floor split asked once, one slice each: per check-out, each process's CPU (µs), thread switches and memory allocated (KiB), PostgreSQL's CPU; sessions opened in the slice; storage's answers to the service; its main pool's callers that found no idle session, and the sessions it opened"+touching())
	fmt.Fprintln(w, "concurrency\tside\tcheck-outs/s\tp50 ms\tfront CPU\tback CPU\tPostgreSQL\tfront switches\tback switches\tfront KiB\tback KiB\tsessions\tone call\tvalidations\tpool waits\tpool opened\terrors")
	for _, r := range p.Rows {
		fmt.Fprintf(w, "%d\t%s\t%.0f\t%.2f\t%.0f\t%.0f\t%.0f\t%.1f\t%.1f\t%.1f\t%.1f\t%d\t%d\t%d\t%d\t%d\t%d\n", r.Concurrency, r.Side, r.Stats.Throughput, r.Stats.P50Ms,
			r.FrontCPU, r.BackCPU, r.PostgresCPU, r.FrontSwitches, r.BackSwitches, r.FrontAllocKB, r.BackAllocKB, r.Sessions, r.OneCall, r.Validations,
			r.PoolWaits, r.PoolOpened, r.Stats.Errors)
	}
	for _, r := range p.Rows {
		for _, st := range r.Statements {
			fmt.Fprintf(w, "c=%d, %s: %d calls, mean %.3f ms, %.1f buffers hit and %.0f bytes of WAL a call, %d plans, %.1f ms planning: %s\n",
				r.Concurrency, r.Side, st.Calls, st.MeanMs, st.BuffersHit, st.WALBytes, st.Plans, st.PlanMs, st.Query)
		}
	}
}

// profileDuring takes a CPU profile of each of side's processes (with
// -bench.profile the services and the floor's processes all serve Go's
// profiles) for the slice's whole seconds but the last, as the slice
// begins, and then an execution trace of one second (go tool trace;
// -pprof=sync counts where goroutines waited); the returned function
// waits for them and saves each in -bench.out, as <name>-<process>.pprof
// and .trace. Without -bench.profile it takes none.
func profileDuring(t *testing.T, side floorSide, slice time.Duration, name string) (wait func()) {
	t.Helper()
	seconds := int(slice.Seconds()) - 1
	if !*profile || *outDir == "" || seconds < 1 {
		return func() {}
	}
	done := make(chan error, 2)
	taking := 0
	for _, p := range []*harness.Process{side.front, side.back} {
		addr := p.ProfileAddr()
		if addr == "" {
			continue
		}
		taking++
		base := filepath.Join(*outDir, name+"-"+p.Name)
		go func() {
			err := saveProfile(fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", addr, seconds), base+".pprof")
			if err == nil {
				t.Logf("%s's CPU profile of %d s: go tool pprof -top %s.pprof", p.Name, seconds, base)
				err = saveProfile(fmt.Sprintf("http://%s/debug/pprof/trace?seconds=1", addr), base+".trace")
			}
			if err == nil {
				t.Logf("%s's execution trace of 1 s: go tool trace -pprof=sync %s.trace > sync.pb", p.Name, base)
			}
			if err != nil {
				err = fmt.Errorf("%s: %w", p.Name, err)
			}
			done <- err
		}()
	}
	return func() {
		for range taking {
			if err := <-done; err != nil {
				t.Errorf("profiling the slice: %v", err)
			}
		}
	}
}

// saveProfile saves what url (one of net/http/pprof's) answers in path.
func saveProfile(url, path string) error {
	res, err := http.Get(url)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err == nil && res.StatusCode != http.StatusOK {
		err = fmt.Errorf("%s: %d %s", url, res.StatusCode, b)
	}
	if err == nil {
		err = os.WriteFile(path, b, 0o644)
	}
	return err
}
