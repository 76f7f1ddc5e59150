package bench

import (
	"fmt"
	"io"
	"path/filepath"
	"testing"
	"time"

	vegeta "github.com/tsenart/vegeta/v12/lib"

	"github.com/checkoutlock/integration-tests/harness"
)

// CheckOutFloor is scenario 14: the product's check-out, through
// circulation and circulation-storage as the harness starts them, against
// the check-out's floor (bench/checkoutfloor): a minimal net/http + pgx
// server sending PostgreSQL the very statements of a check-out
// (circulation-storage/checkoutsql) in the same round trips, on the same
// library, in alternating slices.
type CheckOutFloor struct {
	Rows []CheckOutFloorRow `json:"rows"`
}

// CheckOutFloorRow is one concurrency's figures.
type CheckOutFloorRow struct {
	Concurrency int   `json:"concurrency"`
	Service     Stats `json:"service"`
	Floor       Stats `json:"floor"`
	// ServiceCPU and FloorCPU are the CPU per check-out of each side.
	ServiceCPU CheckOutFloorCPU `json:"serviceCpuPerCheckOut"`
	FloorCPU   CheckOutFloorCPU `json:"floorCpuPerCheckOut"`
	// Ratio is the service's throughput over the floor's, of the summed
	// slices; RoundRatio the median of the same ratio taken round by
	// round, each round's two slices side by side.
	Ratio      float64 `json:"serviceOverFloorThroughput"`
	RoundRatio float64 `json:"roundMedianServiceOverFloorThroughput"`
	Rounds     int     `json:"rounds"`
}

// CheckOutFloorCPU is the CPU time per check-out, in µs, of the servers
// (circulation and storage for the service, the floor alone for the
// floor: Server is their sum), the load generator and PostgreSQL.
type CheckOutFloorCPU struct {
	Server      float64 `json:"serverUs"`
	Circulation float64 `json:"circulationUs,omitempty"`
	Storage     float64 `json:"storageUs,omitempty"`
	Client      float64 `json:"clientUs"`
	Postgres    float64 `json:"postgresUs"`
}

// checkOutFloorShape is scenario 14's rounds and slice: many short
// slices, each side taking turns first, so that both meet the same
// neighbours; about a minute and a half in all, a few seconds smoke.
func checkOutFloorShape(p plan) (rounds int, slice time.Duration, concurrencies []int) {
	if *smoke {
		return 1, p.slice, p.concurrencies
	}
	return 20, 500 * time.Millisecond, []int{1, 8, 32}
}

// benchCheckOutFloor is scenario 14.
func benchCheckOutFloor(t *testing.T, p plan, env []string) CheckOutFloor {
	t.Helper()
	c := harness.NewCluster(t, harness.Options{Circulations: 1, FeatureOn: true,
		StorageEnv: append([]string{fmt.Sprintf("DB_MAX_CONNS=%d", benchDBConns)}, env...), CirculationEnv: env})
	floor := harness.StartBinary(t, "checkoutfloor", buildCheckOutFloor(t), "DATABASE_URL="+harness.DatabaseURL(), "TENANT="+c.Tenant,
		fmt.Sprintf("POOL_SIZE=%d", benchDBConns))
	defer floor.Stop()
	rounds, slice, concurrencies := checkOutFloorShape(p)
	// Enough for every slice on a quiet machine: both sides' 21 slices
	// of half a second at each of three concurrencies take some 60,000
	// at 1,000 check-outs a second.
	population := 100_000
	if *smoke {
		population = 5_000
	}
	pop := populate(t, c, population, 0)
	analyze(t, c)
	// The floor is sent the same check-outs, of the same population: the
	// patrons are handed out once, whichever side takes them.
	service := checkOutTargeter(c, pop, 1)
	floorTargeter := func(tgt *vegeta.Target) error {
		if err := service(tgt); err != nil {
			return err
		}
		tgt.URL = floor.URL() + "/circulation/check-out-by-barcode"
		return nil
	}
	var out CheckOutFloor
	for _, conc := range concurrencies {
		var hists = [2]*histPair{{h: newHist()}, {h: newHist()}}
		var cpu [2]cpuSpentFloor
		var ratios []float64
		// An unmeasured slice each at the new concurrency: the
		// connections it opens, and the statements its backends prepare,
		// are no slice's cost.
		attack(t, service, conc, slice)
		attack(t, floorTargeter, conc, slice)
		for round := range rounds {
			var throughput [2]float64
			for k := range 2 {
				i := (k + round) % 2 // 0 the service, 1 the floor; each goes first in every other round
				targeter, circ, stor := service, c.Circulations[0], c.Storage
				if i == 1 {
					targeter, circ, stor = floorTargeter, floor, floor
				}
				s0 := sampleCPU(t, circ, stor)
				h, errs, elapsed := attack(t, targeter, conc, slice)
				s1 := sampleCPU(t, circ, stor)
				hists[i].h.Merge(h)
				hists[i].errs += errs
				hists[i].elapsed += elapsed
				cpu[i].add(s0, s1, i == 1)
				cpu[i].n += h.TotalCount()
				throughput[i] = float64(h.TotalCount()) / elapsed.Seconds()
			}
			ratios = append(ratios, ratio(throughput[0], throughput[1]))
		}
		row := CheckOutFloorRow{Concurrency: conc, Rounds: rounds,
			Service: stats(hists[0].h, hists[0].errs, hists[0].elapsed), Floor: stats(hists[1].h, hists[1].errs, hists[1].elapsed),
			ServiceCPU: cpu[0].perCheckOut(), FloorCPU: cpu[1].perCheckOut()}
		row.Ratio = ratio(row.Service.Throughput, row.Floor.Throughput)
		row.RoundRatio = median(ratios)
		out.Rows = append(out.Rows, row)
		t.Logf("check-out floor c=%d: service %.0f/s p50 %.2f ms p99 %.2f ms, floor %.0f/s p50 %.2f ms p99 %.2f ms; service/floor %.2f, median of %d rounds %.2f",
			conc, row.Service.Throughput, row.Service.P50Ms, row.Service.P99Ms, row.Floor.Throughput, row.Floor.P50Ms, row.Floor.P99Ms,
			row.Ratio, rounds, row.RoundRatio)
	}
	return out
}

// cpuSpentFloor sums one side's CPU over its slices.
type cpuSpentFloor struct {
	sum   cpuSample
	n     int64
	floor bool // the floor's: one server, no circulation and storage apart
}

// add adds the CPU spent between two samples; for the floor, its one
// process is sampled as both circulation and storage, and counted once.
func (c *cpuSpentFloor) add(before, after cpuSample, floor bool) {
	c.floor = floor
	c.sum.client += after.client - before.client
	c.sum.circulation += after.circulation - before.circulation
	if !floor {
		c.sum.storage += after.storage - before.storage
	}
	c.sum.postgres += after.postgres - before.postgres
}

func (c *cpuSpentFloor) perCheckOut() CheckOutFloorCPU {
	if c.n == 0 {
		return CheckOutFloorCPU{}
	}
	us := func(d time.Duration) float64 { return float64(d.Microseconds()) / float64(c.n) }
	if c.floor {
		return CheckOutFloorCPU{Server: us(c.sum.circulation), Client: us(c.sum.client), Postgres: us(c.sum.postgres)}
	}
	return CheckOutFloorCPU{Server: us(c.sum.circulation + c.sum.storage), Circulation: us(c.sum.circulation), Storage: us(c.sum.storage),
		Client: us(c.sum.client), Postgres: us(c.sum.postgres)}
}

// buildCheckOutFloor builds the check-out's floor (bench/checkoutfloor)
// and returns its path.
func buildCheckOutFloor(t *testing.T) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "checkoutfloor")
	goBuild(t, repoRoot(), "./integration-tests/bench/checkoutfloor", out)
	return out
}

// printCheckOutFloor prints scenario 14's table.
func printCheckOutFloor(w io.Writer, f CheckOutFloor) {
	fmt.Fprintln(w, "\n14. Check-out (distinct patrons, lock on) through circulation and storage against a minimal net/http + pgx server sending the same statements in the same round trips (the floor), alternating slices; CPU in µs per check-out")
	fmt.Fprintln(w, "concurrency\tside\tcheck-outs/s\tp50 ms\tp99 ms\tservers CPU\tcirculation\tstorage\tclient\tPostgreSQL\terrors")
	for _, r := range f.Rows {
		for _, x := range []struct {
			name string
			s    Stats
			cpu  CheckOutFloorCPU
		}{{"service", r.Service, r.ServiceCPU}, {"floor", r.Floor, r.FloorCPU}} {
			fmt.Fprintf(w, "%d\t%s\t%.0f\t%.2f\t%.2f\t%.0f\t%.0f\t%.0f\t%.0f\t%.0f\t%d\n", r.Concurrency, x.name, x.s.Throughput, x.s.P50Ms, x.s.P99Ms,
				x.cpu.Server, x.cpu.Circulation, x.cpu.Storage, x.cpu.Client, x.cpu.Postgres, x.s.Errors)
		}
	}
	for _, r := range f.Rows {
		fmt.Fprintf(w, "c=%d: service / floor throughput %.2f; median of %d rounds %.2f\n", r.Concurrency, r.Ratio, r.Rounds, r.RoundRatio)
	}
}
