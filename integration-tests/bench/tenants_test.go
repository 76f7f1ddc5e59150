package bench

import (
	"context"
	"flag"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	vegeta "github.com/tsenart/vegeta/v12/lib"

	"github.com/checkoutlock/integration-tests/harness"
)

var (
	tenantCount    = flag.Int("bench.tenants", 2000, "scenario 7: how many tenants to initialise (5 in a smoke run)")
	tenantSteady   = flag.Duration("bench.tenants.steady", 0, "scenario 7: after the phases, keep check-outs spread over every tenant this long, sampling the backends' memory")
	tenantLifetime = flag.Duration("bench.tenants.lifetime", 0, "scenario 7: storage's DB_MAX_CONN_LIFETIME (0: its default)")
)

// Tenants is scenario 7: what a request costs when the traffic is spread
// over many initialised tenants, against the same traffic on one, phases
// alternated in one run.
type Tenants struct {
	Tenants int `json:"tenants"`
	// InitFirstMs and InitLastMs are the first and the last tenant's
	// POST /_/tenant; InitAllSeconds all of them.
	InitFirstMs    float64 `json:"initFirstMs"`
	InitLastMs     float64 `json:"initLastMs"`
	InitAllSeconds float64 `json:"initAllSeconds"`
	// CheckOutOne and CheckOutSpread are check-outs at c = 1, on one
	// tenant and round-robin over all of them.
	CheckOutOne    Stats `json:"checkOutOne"`
	CheckOutSpread Stats `json:"checkOutSpread"`
	// PostgresCPUOneUs and PostgresCPUSpreadUs are PostgreSQL's CPU per
	// check-out, µs.
	PostgresCPUOneUs    float64 `json:"postgresCpuOneUs"`
	PostgresCPUSpreadUs float64 `json:"postgresCpuSpreadUs"`
	// CheckOutOne8, CheckOutSpread8 and their CPU are the same at c = 8,
	// where check-outs of one tenant meet each other.
	CheckOutOne8         Stats   `json:"checkOutOneC8"`
	CheckOutSpread8      Stats   `json:"checkOutSpreadC8"`
	PostgresCPUOne8Us    float64 `json:"postgresCpuOneC8Us"`
	PostgresCPUSpread8Us float64 `json:"postgresCpuSpreadC8Us"`
	// MultiXactsOne8 and MultiXactsSpread8 are the MultiXacts PostgreSQL
	// created during the c = 8 check-outs: rows every check-out locks.
	MultiXactsOne8    int64 `json:"multiXactsOneC8"`
	MultiXactsSpread8 int64 `json:"multiXactsSpreadC8"`
	// CallsOne and CallsSpread are storage's requests per check-out.
	CallsOne    float64 `json:"callsOne"`
	CallsSpread float64 `json:"callsSpread"`
	// LockCyclesOne and LockCyclesSpread are acquire-and-release cycles
	// per second straight at storage, c = 8.
	LockCyclesOne    float64 `json:"lockCyclesOne"`
	LockCyclesSpread float64 `json:"lockCyclesSpread"`
	// Backends, BackendsMiB and LargestBackendMiB are PostgreSQL's
	// processes serving the benchmark's database after the spread traffic,
	// and their private memory.
	Backends          int     `json:"backends"`
	BackendsMiB       float64 `json:"backendsMiB"`
	LargestBackendMiB float64 `json:"largestBackendMiB"`
	// SweeperPasses and SweeperPassMs are the sweeper's passes over every
	// tenant during the run and their mean duration
	// (checkout_lock_sweeper_pass_seconds{result="swept"}).
	SweeperPasses float64 `json:"sweeperPasses"`
	SweeperPassMs float64 `json:"sweeperPassMs"`
	// Steady is the backends' private memory sampled while check-outs
	// stay spread over every tenant (-bench.tenants.steady).
	Steady []MemorySample `json:"steady,omitempty"`
	// ConnLifetime is storage's DB_MAX_CONN_LIFETIME in the run ("" for
	// its default).
	ConnLifetime string `json:"connLifetime,omitempty"`
	// The ratios, spread / one.
	P50Ratio         float64 `json:"p50Ratio"`
	ThroughputRatio  float64 `json:"throughputRatio"`
	PostgresCPURatio float64 `json:"postgresCpuRatio"`
	LockCycleRatio   float64 `json:"lockCycleRatio"`
}

// MemorySample is the backends' private memory at a moment of the steady
// traffic.
type MemorySample struct {
	Seconds    float64 `json:"seconds"`
	CheckOuts  int64   `json:"checkOuts"`
	Backends   int     `json:"backends"`
	MiB        float64 `json:"mib"`
	LargestMiB float64 `json:"largestMib"`
}

// tenantLibrary is one tenant's check-out population: patrons B<n> with
// items BI<n>, handed out in turn.
type tenantLibrary struct {
	view   *harness.Cluster
	header http.Header
	pop    *population
}

// benchTenants initialises n tenants beside the cluster's own, gives each a
// library, and alternates phases of check-outs (c = 1) and lock cycles
// (c = 8) on the cluster's tenant alone and spread over all of them.
func benchTenants(t *testing.T, p plan, n int, env []string) Tenants {
	// The sweeper passes over every tenant every 10 s (1 s in a smoke run):
	// often enough to be measured over the phases, seldom enough to weigh
	// little in them.
	sweep := "LOCK_SWEEP_INTERVAL=10s"
	if *smoke {
		sweep = "LOCK_SWEEP_INTERVAL=1s"
	}
	storageEnv := []string{fmt.Sprintf("DB_MAX_CONNS=%d", benchDBConns), sweep}
	res := Tenants{Tenants: n}
	if *tenantLifetime > 0 {
		storageEnv = append(storageEnv, "DB_MAX_CONN_LIFETIME="+tenantLifetime.String())
		res.ConnLifetime = tenantLifetime.String()
	}
	c := harness.NewCluster(t, harness.Options{Circulations: 1, FeatureOn: true,
		StorageEnv: append(storageEnv, env...), CirculationEnv: env})
	// Enough patrons for every tenant's share of the spread check-outs at
	// up to a thousand a second.
	perTenant := 10 + int((float64(p.rounds)*p.slice.Seconds()*2+tenantSteady.Seconds())*1000)/n
	one := &tenantLibrary{view: c, header: jsonHeader(c), pop: populate(t, c, p.population, 0)}

	// Initialise the others, four at a time, timing each.
	views := make([]*harness.Cluster, n)
	initMs := make([]float64, n)
	start := time.Now()
	var wg sync.WaitGroup
	sem := make(chan struct{}, 4)
	var failed atomic.Value
	for i := range n {
		v := *c
		v.Tenant = fmt.Sprintf("%s_%05d", c.Tenant, i)
		v.Schema = v.Tenant + "_mod_circulation_storage"
		views[i] = &v
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			began := time.Now()
			r := v.Do(c.Storage, "POST", "/_/tenant", map[string]any{"module_to": "mod-circulation-storage-1.0.0"})
			initMs[i] = float64(time.Since(began).Microseconds()) / 1000
			if r.Status != http.StatusCreated {
				failed.Store(fmt.Sprintf("init tenant %s: %d %s", v.Tenant, r.Status, r.Body))
			}
		}()
	}
	wg.Wait()
	if f := failed.Load(); f != nil {
		t.Fatal(f)
	}
	res.InitAllSeconds = time.Since(start).Seconds()
	res.InitFirstMs, res.InitLastMs = initMs[0], initMs[n-1]
	libs := make([]*tenantLibrary, n)
	for i, v := range views {
		libs[i] = &tenantLibrary{view: v, header: jsonHeader(v), pop: populate(t, v, perTenant, 0)}
	}
	analyze(t, c)
	t.Logf("tenants: %d initialised in %.1f s (first %.0f ms, last %.0f ms), each with %d patrons",
		n, res.InitAllSeconds, res.InitFirstMs, res.InitLastMs, perTenant)

	var next atomic.Int64
	spread := func() *tenantLibrary { return libs[int(next.Add(1))%n] }
	single := func() *tenantLibrary { return one }
	checkOuts := func(pick func() *tenantLibrary) vegeta.Targeter {
		return func(tgt *vegeta.Target) error {
			lib := pick()
			k := lib.pop.next.Add(1)
			if k > lib.pop.size {
				return fmt.Errorf("tenant %s: population of %d patrons used up", lib.view.Tenant, lib.pop.size)
			}
			*tgt = vegeta.Target{Method: http.MethodPost, URL: c.Circulations[0].URL() + "/circulation/check-out-by-barcode",
				Body:   fmt.Appendf(nil, `{"itemBarcode":"BI%d","userBarcode":"B%d","servicePointId":%q}`, k, k, harness.ServicePoint),
				Header: lib.header}
			return nil
		}
	}
	oneHist, spreadHist := newHist(), newHist()
	oneHist8, spreadHist8 := newHist(), newHist()
	var oneErr, spreadErr, oneErr8, spreadErr8 int64
	var oneTime, spreadTime, oneCPU, spreadCPU time.Duration
	var oneTime8, spreadTime8, oneCPU8, spreadCPU8 time.Duration
	var oneCalls, spreadCalls float64
	var oneCycles, spreadCycles, oneCycleTime, spreadCycleTime float64
	for range p.rounds {
		for _, isSpread := range []bool{false, true} {
			pick := single
			if isSpread {
				pick = spread
			}
			calls, cpu := storageRequests(t, c), postgresCPU()
			h, errs, elapsed := attack(t, checkOuts(pick), 1, p.slice)
			cpu, calls = postgresCPU()-cpu, storageRequests(t, c)-calls
			cycles, cycleTime := lockCycles(t, c, pick, 8, p.slice)
			cpu8, mx := postgresCPU(), multiXacts(t, c)
			h8, errs8, elapsed8 := attack(t, checkOuts(pick), 8, p.slice)
			cpu8, mx = postgresCPU()-cpu8, multiXacts(t, c)-mx
			if isSpread {
				spreadHist8.Merge(h8)
				spreadErr8, spreadTime8, spreadCPU8 = spreadErr8+errs8, spreadTime8+elapsed8, spreadCPU8+cpu8
				res.MultiXactsSpread8 += mx
			} else {
				oneHist8.Merge(h8)
				oneErr8, oneTime8, oneCPU8 = oneErr8+errs8, oneTime8+elapsed8, oneCPU8+cpu8
				res.MultiXactsOne8 += mx
			}
			if isSpread {
				spreadHist.Merge(h)
				spreadErr, spreadTime, spreadCPU, spreadCalls = spreadErr+errs, spreadTime+elapsed, spreadCPU+cpu, spreadCalls+calls
				spreadCycles, spreadCycleTime = spreadCycles+cycles, spreadCycleTime+cycleTime
			} else {
				oneHist.Merge(h)
				oneErr, oneTime, oneCPU, oneCalls = oneErr+errs, oneTime+elapsed, oneCPU+cpu, oneCalls+calls
				oneCycles, oneCycleTime = oneCycles+cycles, oneCycleTime+cycleTime
			}
		}
	}
	res.CheckOutOne, res.CheckOutSpread = stats(oneHist, oneErr, oneTime), stats(spreadHist, spreadErr, spreadTime)
	perOp := func(cpu time.Duration, h Stats, elapsed time.Duration) float64 {
		ops := h.Throughput * elapsed.Seconds()
		return ratio(float64(cpu.Microseconds()), ops)
	}
	res.PostgresCPUOneUs = perOp(oneCPU, res.CheckOutOne, oneTime)
	res.PostgresCPUSpreadUs = perOp(spreadCPU, res.CheckOutSpread, spreadTime)
	res.CheckOutOne8, res.CheckOutSpread8 = stats(oneHist8, oneErr8, oneTime8), stats(spreadHist8, spreadErr8, spreadTime8)
	res.PostgresCPUOne8Us = perOp(oneCPU8, res.CheckOutOne8, oneTime8)
	res.PostgresCPUSpread8Us = perOp(spreadCPU8, res.CheckOutSpread8, spreadTime8)
	res.CallsOne = ratio(oneCalls, res.CheckOutOne.Throughput*oneTime.Seconds())
	res.CallsSpread = ratio(spreadCalls, res.CheckOutSpread.Throughput*spreadTime.Seconds())
	res.LockCyclesOne, res.LockCyclesSpread = ratio(oneCycles, oneCycleTime), ratio(spreadCycles, spreadCycleTime)
	res.P50Ratio = ratio(res.CheckOutSpread.P50Ms, res.CheckOutOne.P50Ms)
	res.ThroughputRatio = ratio(res.CheckOutSpread.Throughput, res.CheckOutOne.Throughput)
	res.PostgresCPURatio = ratio(res.PostgresCPUSpreadUs, res.PostgresCPUOneUs)
	res.LockCycleRatio = ratio(res.LockCyclesSpread, res.LockCyclesOne)
	res.Backends, res.BackendsMiB, res.LargestBackendMiB = backendMemory(t, c)
	res.SweeperPasses, res.SweeperPassMs = sweeperPasses(t, c)
	if *tenantSteady > 0 {
		res.Steady = steadyMemory(t, c, checkOuts(spread), *tenantSteady)
	}
	t.Logf("tenants=%d: check-out p50 ×%.2f, throughput ×%.2f, PostgreSQL CPU/check-out ×%.2f (%.0f → %.0f µs), "+
		"lock cycles ×%.2f, storage calls/check-out %.2f → %.2f, %d backends %.1f MiB (largest %.1f MiB), "+
		"sweeper %.0f passes of %.0f ms",
		n, res.P50Ratio, res.ThroughputRatio, res.PostgresCPURatio, res.PostgresCPUOneUs, res.PostgresCPUSpreadUs,
		res.LockCycleRatio, res.CallsOne, res.CallsSpread, res.Backends, res.BackendsMiB, res.LargestBackendMiB,
		res.SweeperPasses, res.SweeperPassMs)
	t.Logf("tenants=%d, c = 8: check-out p50 %.2f ms one, %.2f ms spread; throughput %.0f/s, %.0f/s; PostgreSQL CPU/check-out %.0f µs, %.0f µs; "+
		"MultiXacts %d, %d", n, res.CheckOutOne8.P50Ms, res.CheckOutSpread8.P50Ms, res.CheckOutOne8.Throughput, res.CheckOutSpread8.Throughput,
		res.PostgresCPUOne8Us, res.PostgresCPUSpread8Us, res.MultiXactsOne8, res.MultiXactsSpread8)
	return res
}

// lockCycles runs conc clients acquiring and releasing locks straight at
// storage, each cycle on the tenant pick chooses, for d; it returns the
// cycles completed and the seconds they took. A failed cycle fails the
// benchmark.
func lockCycles(t *testing.T, c *harness.Cluster, pick func() *tenantLibrary, conc int, d time.Duration) (float64, float64) {
	t.Helper()
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: conc * 2}}
	defer client.CloseIdleConnections()
	base := c.Storage.URL() + "/check-out-lock-storage"
	var done, failed atomic.Int64
	deadline := time.Now().Add(d)
	start := time.Now()
	var wg sync.WaitGroup
	for range conc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(deadline) {
				lib := pick()
				headers := map[string]string{}
				for k := range lib.header {
					headers[k] = lib.header.Get(k)
				}
				id, ok := post(client, base, headers, `{"userId":"`+uuid.NewString()+`","ttlMs":10000}`)
				if !ok || !del(client, base+"/"+id, headers) {
					failed.Add(1)
					continue
				}
				done.Add(1)
			}
		}()
	}
	wg.Wait()
	if n := failed.Load(); n > 0 {
		t.Errorf("%d lock cycles failed", n)
	}
	return float64(done.Load()), time.Since(start).Seconds()
}

// storageRequests is how many requests storage has answered, from its
// request histogram's counts.
func storageRequests(t *testing.T, c *harness.Cluster) float64 {
	t.Helper()
	r := c.DoWith(c.Storage, "GET", "/metrics", nil, nil)
	if r.Status != http.StatusOK {
		t.Fatalf("storage metrics: %d", r.Status)
	}
	total := 0.0
	for _, line := range strings.Split(string(r.Body), "\n") {
		if !strings.HasPrefix(line, "http_request_duration_seconds_count{") || strings.Contains(line, `route="/metrics"`) {
			continue
		}
		v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
		if err == nil {
			total += v
		}
	}
	return total
}

// backendMemory is the benchmark database's PostgreSQL processes and their
// private memory (Private_Clean + Private_Dirty of /proc/<pid>/smaps_rollup):
// how many, the sum and the largest, in MiB.
func backendMemory(t *testing.T, c *harness.Cluster) (int, float64, float64) {
	t.Helper()
	rows, err := c.DB.Query(context.Background(), `SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()`)
	if err != nil {
		t.Fatal(err)
	}
	var pids []int
	for rows.Next() {
		var pid int
		if err := rows.Scan(&pid); err != nil {
			t.Fatal(err)
		}
		pids = append(pids, pid)
	}
	rows.Close()
	var sizes []float64
	for _, pid := range pids {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/smaps_rollup")
		if err != nil {
			continue // ended meanwhile, or not readable
		}
		kib := 0.0
		for _, line := range strings.Split(string(b), "\n") {
			for _, field := range []string{"Private_Clean:", "Private_Dirty:"} {
				if v, ok := strings.CutPrefix(line, field); ok {
					n, _ := strconv.ParseFloat(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 64)
					kib += n
				}
			}
		}
		sizes = append(sizes, kib/1024)
	}
	total := 0.0
	for _, s := range sizes {
		total += s
	}
	largest := 0.0
	if len(sizes) > 0 {
		largest = slices.Max(sizes)
	}
	return len(sizes), total, largest
}

// tenantsToBench is scenario 7's tenant count: -bench.tenants, or a few in a
// smoke run.
func tenantsToBench() int {
	if *smoke {
		return 5
	}
	return max(1, *tenantCount)
}

// sweeperPasses is how many passes storage's sweeper made and their mean
// duration in ms, from checkout_lock_sweeper_pass_seconds{result="swept"}.
func sweeperPasses(t *testing.T, c *harness.Cluster) (float64, float64) {
	t.Helper()
	r := c.DoWith(c.Storage, "GET", "/metrics", nil, nil)
	if r.Status != http.StatusOK {
		t.Fatalf("storage metrics: %d", r.Status)
	}
	value := func(name string) float64 {
		v, _ := strconv.ParseFloat(metricText(r.Body, name+`{result="swept"}`), 64)
		return v
	}
	n := value("checkout_lock_sweeper_pass_seconds_count")
	return n, ratio(value("checkout_lock_sweeper_pass_seconds_sum")*1000, n)
}

// steadyMemory keeps check-outs spread at c = 1 for d, sampling the
// backends' private memory every 30 s (and at the end).
func steadyMemory(t *testing.T, c *harness.Cluster, targeter vegeta.Targeter, d time.Duration) []MemorySample {
	t.Helper()
	var samples []MemorySample
	start := time.Now()
	var done int64
	for time.Since(start) < d {
		slice := min(30*time.Second, d-time.Since(start))
		h, errs, _ := attack(t, targeter, 1, slice)
		if errs > 0 {
			t.Errorf("%d check-outs failed in the steady traffic", errs)
		}
		done += h.TotalCount()
		n, mib, largest := backendMemory(t, c)
		samples = append(samples, MemorySample{Seconds: time.Since(start).Seconds(), CheckOuts: done, Backends: n, MiB: mib, LargestMiB: largest})
		t.Logf("steady traffic, %.0f s: %d check-outs, %d backends %.1f MiB (largest %.1f MiB)",
			time.Since(start).Seconds(), done, n, mib, largest)
	}
	return samples
}

// multiXacts is how many MultiXacts the server has created: the age of the
// oldest the benchmark's database may hold, which grows by one with each
// new one.
func multiXacts(t *testing.T, c *harness.Cluster) int64 {
	t.Helper()
	var n int64
	if err := c.DB.QueryRow(context.Background(),
		"SELECT mxid_age(datminmxid) FROM pg_database WHERE datname = current_database()").Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}
