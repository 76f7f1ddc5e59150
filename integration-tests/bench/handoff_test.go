package bench

import (
	"context"
	"fmt"
	"net/http"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/checkoutlock/integration-tests/harness"
)

// Bursts is scenario 3: a patron's ten simultaneous check-outs over three
// circulation instances and one storage instance, with the seed's
// 500|500|1000, once with circulation polling the lock at those intervals
// (LOCK_WAIT_AT_STORAGE=false, what FOLIO does) and once with storage
// handing the lock to the next waiting check-out as it is released; each
// way in a phase of its own, in one run. Their time is set against a solo
// check-out's: a burst can go no faster than ten check-outs one after
// another, so total ÷ (10 × solo p50) near 1 means no time lost waiting.
// The hand-off between two storage instances is measured apart, on a
// cluster of two. Each cluster's tenant is a library's: it has a request
// and a manual block (libraryRecords), so its check-outs are read and
// written in full, as every tenant's are from its first request, manual
// block or block limit on (migration 18).
type Bursts struct {
	SoloP50Ms float64    `json:"soloCheckOutP50Ms"`
	Rows      []BurstRow `json:"rows"`
	HandOff   HandOff    `json:"handOff"`
	// SoloCPU and BurstCPU are the CPU one check-out costs, every process
	// of the machine's that serves it, solo and in a burst with hand-off.
	SoloCPU  CPUPerCheckOut `json:"soloCpu"`
	BurstCPU CPUPerCheckOut `json:"burstCpu"`
	// FloorRatio is the least a burst could take over ten solo check-outs
	// on this machine: ten check-outs' CPU spread over every core, with
	// none idle, against ten solo check-outs' p50. A burst near it is
	// bound by CPU, not by waiting.
	FloorRatio float64 `json:"floorBurstOverTenSolo"`
	Cores      int     `json:"cores"`
	// Gated says every cluster's tenant had its gate row (migration 18)
	// before the first burst: its check-outs ran the full statements.
	Gated bool `json:"tenantGated"`
}

// BurstRow is one way of waiting, over its bursts.
type BurstRow struct {
	Mode string `json:"mode"`
	// HandOff marks the rows of storage handing the lock over, Storages
	// says over how many storage instances the burst's check-outs went.
	HandOff     bool    `json:"handOff"`
	Storages    int     `json:"storages"`
	Bursts      int     `json:"bursts"`
	Succeeded   float64 `json:"meanSucceededOf10"`
	TotalTimeMs float64 `json:"meanBurstTimeMs"`
	Ratio       float64 `json:"burstOverTenSolo"`
	// MedianTimeMs is the median burst's time, MedianRatio it over ten
	// solo check-outs: one burst slowed by the machine moves the mean, not
	// the median.
	MedianTimeMs float64 `json:"medianBurstTimeMs"`
	MedianRatio  float64 `json:"medianBurstOverTenSolo"`
	LatencyStats Stats   `json:"latency"`
	// SoloP50Ms is the solo check-out's p50 the row is set against: on
	// the cluster of the row's own.
	SoloP50Ms float64 `json:"soloCheckOutP50Ms"`
}

// HandOff is how long a lock takes to pass from one holder to a waiter on
// another storage instance: from sending the release to receiving the
// waiter's 201.
type HandOff struct {
	HandOffs int     `json:"handOffs"`
	P50Ms    float64 `json:"p50Ms"`
	P99Ms    float64 `json:"p99Ms"`
	MaxMs    float64 `json:"maxMs"`
}

func benchBursts(t *testing.T, p plan, env []string) Bursts {
	c := harness.NewCluster(t, harness.Options{Circulations: 3, Storages: 1, FeatureOn: true, RetryIntervalMs: "500|500|1000",
		StorageEnv: env, CirculationEnv: env})
	polling := c.AddCirculations(3, "LOCK_WAIT_AT_STORAGE=false")
	// The same over two storage instances: circulation instance i calls
	// storage i mod 2, so a patron's ten check-outs reach both.
	spread := harness.NewCluster(t, harness.Options{Circulations: 3, Storages: 2, FeatureOn: true, RetryIntervalMs: "500|500|1000",
		StorageEnv: env, CirculationEnv: env})
	// Solo check-outs, one after another through the hand-off instances,
	// after each round's bursts: their p50 is what a burst is set against,
	// measured in the same conditions, on each cluster its own.
	solo, spreadSolo := newHist(), newHist()
	modes := []struct {
		name      string
		c         *harness.Cluster
		instances []*harness.Process
		handOff   bool
		// solo, when set, takes a solo round after each burst.
		solo *hdrhistogram.Histogram
	}{
		{"hand-off, budget 500|500|1000 ms", c, c.Circulations, true, solo},
		{"hand-off over 2 storage instances", spread, spread.Circulations, true, spreadSolo},
		{"polling 500|500|1000 ms (FOLIO's way)", c, polling, false, nil},
	}
	// One round first, not counted: the first burst through fresh
	// processes pays for their connections and caches.
	const solosPerRound = 10
	pops := map[*harness.Cluster]*population{}
	gated := true
	for _, m := range modes {
		if pops[m.c] == nil {
			pops[m.c] = populate(t, m.c, solosPerRound*(p.bursts+1), (p.bursts+1)*len(modes))
			gated = libraryRecords(t, m.c) && gated
			analyze(t, m.c)
		}
	}
	if !gated {
		t.Fatal("a tenant with a request and a manual block has no gate row: its check-outs would not run the full statements")
	}
	// The CPU of every party, summed over rounds: solo check-outs', and
	// the bursts' with hand-off, on one storage instance.
	var soloCPU, burstCPU cpuSpent
	soloRound := func(m int, count bool) {
		c, hist, pop := modes[m].c, modes[m].solo, pops[modes[m].c]
		sample := count && c == modes[0].c
		var before cpuSample
		if sample {
			before = sampleCPUOf(t, c.Circulations, c.Storages[0])
		}
		for range solosPerRound {
			n := pop.next.Add(1)
			start := time.Now()
			r := c.Do(c.Circulations[n%3], "POST", "/circulation/check-out-by-barcode",
				fmt.Sprintf(`{"itemBarcode":"BI%d","userBarcode":"B%d","servicePointId":%q}`, n, n, harness.ServicePoint))
			if r.Status != http.StatusCreated {
				t.Fatalf("solo check-out: %d %s", r.Status, r.Body)
			}
			if count {
				record(hist, time.Since(start))
			}
		}
		if sample {
			soloCPU.add(before, sampleCPUOf(t, c.Circulations, c.Storages[0]), solosPerRound)
		}
	}

	type acc struct {
		hist      *hdrhistogram.Histogram
		succeeded int
		total     time.Duration
		n         int
		times     []time.Duration // each counted burst's
	}
	accs := make([]acc, len(modes))
	for i := range accs {
		accs[i].hist = newHist()
	}
	patron := 0
	// Each way of waiting in a phase of its own, hand-off first, its
	// bursts alternating with the solo rounds: a polling burst's two
	// seconds of retries leave work behind (in the processes and in
	// PostgreSQL) that a burst after it would pay for.
	for i, m := range modes {
		for b := range p.bursts + 1 {
			patron++
			var wg sync.WaitGroup
			var mu sync.Mutex
			cpu := sampleCPUOf(t, m.instances, m.c.Storages[0])
			start := time.Now()
			for k := range 10 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					t0 := time.Now()
					r := m.c.Do(m.instances[k%len(m.instances)], "POST", "/circulation/check-out-by-barcode",
						fmt.Sprintf(`{"itemBarcode":"BURSTI%d","userBarcode":"BURST%d","servicePointId":%q}`,
							(patron-1)*10+k+1, patron, harness.ServicePoint))
					mu.Lock()
					defer mu.Unlock()
					record(accs[i].hist, time.Since(t0))
					if r.Status == http.StatusCreated {
						accs[i].succeeded++
					}
				}()
			}
			wg.Wait()
			took := time.Since(start)
			if i == 0 && b > 0 {
				burstCPU.add(cpu, sampleCPUOf(t, m.instances, m.c.Storages[0]), 10)
			}
			if b == 0 {
				accs[i] = acc{hist: newHist()} // the warm-up
			} else {
				accs[i].total += took
				accs[i].n++
				accs[i].times = append(accs[i].times, took)
			}
			if m.solo != nil {
				soloRound(i, b > 0)
			}
		}
	}
	soloP50 := float64(solo.ValueAtQuantile(50)) / 1000
	out := Bursts{SoloP50Ms: soloP50, SoloCPU: soloCPU.perCheckOut(), BurstCPU: burstCPU.perCheckOut(), Cores: runtime.NumCPU(), Gated: gated}
	out.FloorRatio = ratio(10*out.BurstCPU.Total/1000/float64(out.Cores), 10*soloP50)
	t.Logf("CPU a check-out: solo %.0f µs, in a burst %.0f µs; on %d cores a burst takes at least %.2f × 10 solo check-outs",
		out.SoloCPU.Total, out.BurstCPU.Total, out.Cores, out.FloorRatio)
	for _, c := range []struct {
		name string
		cpu  CPUPerCheckOut
	}{{"solo", out.SoloCPU}, {"in a burst", out.BurstCPU}} {
		t.Logf("CPU a check-out %s: client %.0f µs, circulation %.0f µs, storage %.0f µs, PostgreSQL %.0f µs",
			c.name, c.cpu.Client, c.cpu.Circulation, c.cpu.Storage, c.cpu.Postgres)
	}
	for i, m := range modes {
		a := accs[i]
		row := BurstRow{Mode: m.name, HandOff: m.handOff, Storages: len(m.c.Storages), Bursts: a.n, Succeeded: float64(a.succeeded) / float64(a.n),
			TotalTimeMs: float64(a.total.Milliseconds()) / float64(a.n), LatencyStats: stats(a.hist, 0, a.total), SoloP50Ms: soloP50}
		if m.solo == spreadSolo {
			row.SoloP50Ms = float64(spreadSolo.ValueAtQuantile(50)) / 1000
		}
		row.Ratio = ratio(row.TotalTimeMs, 10*row.SoloP50Ms)
		slices.Sort(a.times)
		row.MedianTimeMs = float64(a.times[len(a.times)/2].Microseconds()) / 1000
		row.MedianRatio = ratio(row.MedianTimeMs, 10*row.SoloP50Ms)
		out.Rows = append(out.Rows, row)
		t.Logf("burst, %s: %.1f of 10 succeed, burst takes %.0f ms = %.2f × 10 solo check-outs (median %.1f ms = %.2f; solo p50 %.2f ms)",
			m.name, row.Succeeded, row.TotalTimeMs, row.Ratio, row.MedianTimeMs, row.MedianRatio, row.SoloP50Ms)
	}
	handOffs := 200
	if p.bursts < 3 {
		handOffs = 20 // a smoke run
	}
	pair := harness.NewCluster(t, harness.Options{Circulations: 1, Storages: 2, FeatureOn: true, StorageEnv: env, CirculationEnv: env})
	out.HandOff = benchHandOff(t, pair, handOffs)
	return out
}

// libraryRecords gives c's tenant what a library has and populate does
// not make: an open request (patron L2's hold of item LI1, out on loan to
// L1) and a manual block of borrowing (patron L3's), neither of a patron or
// an item that the bursts or the solo check-outs touch. It says whether the
// tenant has its gate row after them, which their writes put there.
func libraryRecords(t *testing.T, c *harness.Cluster) bool {
	t.Helper()
	ctx := context.Background()
	s := pgx.Identifier{c.Schema}.Sanitize()
	// populate's lent patrons and items are not records its API would
	// answer whole (they have no names, no titles): their ids are read
	// here.
	var requester, item, blocked string
	if err := c.DB.QueryRow(ctx, `SELECT (SELECT id::text FROM `+s+`.patron WHERE jsonb->>'barcode' = 'L2'),
		(SELECT id::text FROM `+s+`.item WHERE jsonb->>'barcode' = 'LI1'), (SELECT id::text FROM `+s+`.patron WHERE jsonb->>'barcode' = 'L3')`).
		Scan(&requester, &item, &blocked); err != nil {
		t.Fatalf("reading the lent patrons and items: %v", err)
	}
	c.Do(c.Storage, "POST", "/request-storage/requests", map[string]any{"requestType": "Hold", "requestLevel": "Item",
		"requestDate": "2026-01-01T10:00:00.000Z", "requesterId": requester, "itemId": item, "status": "Open - Not yet filled",
		"position": 1, "fulfillmentPreference": "Hold Shelf"}).Want(t, http.StatusCreated)
	c.Do(c.Storage, "POST", "/manualblocks", map[string]any{"userId": blocked, "desc": "Card reported stolen", "borrowing": true}).
		Want(t, http.StatusCreated)
	var gated bool
	if err := c.DB.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM circulation_storage.tenant_gate WHERE tenant_id = $1)`,
		c.Tenant).Scan(&gated); err != nil {
		t.Fatalf("reading the tenant's gate row: %v", err)
	}
	t.Logf("tenant %s: a request and a manual block; gate row: %t", c.Tenant, gated)
	return gated
}

// benchHandOff passes one patron's lock back and forth between two clients
// on two storage instances: each waits on its instance while the other
// holds the lock, and is timed from the holder's release to its own 201.
func benchHandOff(t *testing.T, c *harness.Cluster, n int) HandOff {
	user := uuid.NewString()
	h := newHist()
	acquire := func(s *harness.Process, id string, waitMs int) harness.Response {
		return c.Do(s, "POST", "/check-out-lock-storage", map[string]any{"userId": user, "id": id, "ttlMs": 30000, "waitMs": waitMs})
	}
	waiting := func(s *harness.Process) bool {
		res := c.Do(s, "GET", "/metrics", nil)
		return strconv.Itoa(1) == metricText(res.Body, "checkout_lock_waiters")
	}
	storages := c.Storages
	holder := uuid.NewString()
	acquire(storages[0], holder, 0).Want(t, http.StatusCreated)
	for i := range n {
		from, to := storages[i%2], storages[(i+1)%2]
		next := uuid.NewString()
		result := make(chan harness.Response, 1)
		go func() { result <- acquire(to, next, 10000) }()
		deadline := time.Now().Add(10 * time.Second)
		for !waiting(to) {
			if time.Now().After(deadline) {
				t.Fatalf("hand-off %d: the waiter never waited", i)
			}
			time.Sleep(time.Millisecond) // polling another process's gauge, with a deadline
		}
		start := time.Now()
		c.Do(from, "DELETE", "/check-out-lock-storage/"+holder, nil).Want(t, http.StatusNoContent)
		(<-result).Want(t, http.StatusCreated)
		record(h, time.Since(start))
		holder = next
	}
	out := HandOff{HandOffs: n, P50Ms: float64(h.ValueAtQuantile(50)) / 1000, P99Ms: float64(h.ValueAtQuantile(99)) / 1000,
		MaxMs: float64(h.Max()) / 1000}
	t.Logf("hand-off across two storage instances, %d times: p50 %.2f ms, p99 %.2f ms, max %.2f ms", n, out.P50Ms, out.P99Ms, out.MaxMs)
	return out
}
