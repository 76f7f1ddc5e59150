package bench

import (
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	vegeta "github.com/tsenart/vegeta/v12/lib"

	"github.com/checkoutlock/config"
	"github.com/checkoutlock/integration-tests/harness"
)

// CheckOutFloor is scenario 14: the product's check-out, through
// circulation and circulation-storage as the harness starts them, against
// the check-out's floor (bench/checkoutfloor): a minimal net/http + pgx
// server sending PostgreSQL the very statements of a check-out
// (circulation-storage/checkoutsql) in the same round trips, on the same
// library, in alternating slices. Beside them, the floor split in two
// processes as the services are, a front and a back with the product's
// HTTP hop between them and nothing else: asking the back twice (the
// read, then the write), as circulation asks storage, and once (the whole
// check-out).
type CheckOutFloor struct {
	Rows []CheckOutFloorRow `json:"rows"`
}

// CheckOutFloorRow is one concurrency's figures.
type CheckOutFloorRow struct {
	Concurrency int   `json:"concurrency"`
	Service     Stats `json:"service"`
	Floor       Stats `json:"floor"`
	// TwoCalls and OneCall are the floor in two processes, the front
	// asking the back twice and once.
	TwoCalls Stats `json:"floorTwoCalls"`
	OneCall  Stats `json:"floorOneCall"`
	// ServiceCPU and FloorCPU are the CPU per check-out of each side;
	// TwoCallsCPU and OneCallCPU the split floor's (its front counted as
	// circulation, its back as storage).
	ServiceCPU  CheckOutFloorCPU `json:"serviceCpuPerCheckOut"`
	FloorCPU    CheckOutFloorCPU `json:"floorCpuPerCheckOut"`
	TwoCallsCPU CheckOutFloorCPU `json:"floorTwoCallsCpuPerCheckOut"`
	OneCallCPU  CheckOutFloorCPU `json:"floorOneCallCpuPerCheckOut"`
	// Ratio is the service's throughput over the floor's, of the summed
	// slices; RoundRatio the median of the same ratio taken round by
	// round, each round's slices side by side. TwoCallsRatio and
	// OneCallRatio are the split floor's over the floor's, medians of the
	// rounds likewise.
	Ratio         float64 `json:"serviceOverFloorThroughput"`
	RoundRatio    float64 `json:"roundMedianServiceOverFloorThroughput"`
	TwoCallsRatio float64 `json:"roundMedianTwoCallsOverFloorThroughput"`
	OneCallRatio  float64 `json:"roundMedianOneCallOverFloorThroughput"`
	Rounds        int     `json:"rounds"`
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

// checkOutFloorSides is how many sides scenario 14 measures: the
// service, the floor, and the floor split asking twice and once.
const checkOutFloorSides = 4

// checkOutFloorPopulation is how many patrons scenario 14 needs: every
// side's warm-up and rounds at every concurrency, each check-out a patron
// of its own, at 2,000 check-outs a second (the fastest side's rate on a
// quick machine, 1,000 at c = 32, with a margin of half); a run that
// used them up would fail rather than measure repeat check-outs.
func checkOutFloorPopulation(rounds int, slice, warmUp time.Duration, concurrencies int) int {
	perSide := time.Duration(rounds)*slice + warmUp
	return int(2000 * perSide.Seconds() * float64(checkOutFloorSides*concurrencies))
}

// floorSide is one side scenario 14 measures: where its check-outs go,
// and the processes that answer them (the floor alone is both).
type floorSide struct {
	targeter          vegeta.Targeter
	front, back       *harness.Process
	oneProcess, split bool
}

// floorTouch is -bench.floor.touch: the split floor's front asked once
// made heavier in memory alone (TOUCH_KB), a control for what the memory
// a process runs through between PostgreSQL's statements does to them.
var floorTouch = flag.Int("bench.floor.touch", 0, "KiB of memory the split floor's front asked once allocates and writes before and after each check-out, in scenario 14 and its probe (0: none): a control, not a yardstick")

// touching says, for a scenario 14 table's title, what -bench.floor.touch
// made of the split floor's front asked once: nothing when it is 0.
func touching() string {
	if *floorTouch <= 0 {
		return ""
	}
	return fmt.Sprintf("; the split floor's front asked once touching %d KiB of new memory before and after each check-out (-bench.floor.touch): a control, not the yardstick", *floorTouch)
}

// startCheckOutFloor starts scenario 14's sides on a library of
// population patrons, each with an item to check out: a cluster of one
// circulation and one storage with the lock on, and the floor, alone and
// split in a back and two fronts. The sides are in the order of the row's
// figures: the service, the floor, the floor asking its back twice, and
// once.
func startCheckOutFloor(t *testing.T, env []string, population int) (*harness.Cluster, [checkOutFloorSides]floorSide) {
	t.Helper()
	c := harness.NewCluster(t, harness.Options{Circulations: 1, FeatureOn: true,
		StorageEnv:     append([]string{fmt.Sprintf("DB_MAX_CONNS=%d", benchDBConns)}, env...),
		CirculationEnv: append([]string{"SETTINGS_CACHE_TTL=" + productSettingsTTL()}, env...)})
	bin := buildCheckOutFloor(t)
	// The floor's processes serve profiles when the services do
	// (-bench.profile), so that the probe profiles both sides alike.
	profiled := slices.DeleteFunc(slices.Clone(env), func(e string) bool { return !strings.HasPrefix(e, "PROFILE_ADDR=") })
	floorEnv := append([]string{"DATABASE_URL=" + harness.DatabaseURL(), "TENANT=" + c.Tenant, fmt.Sprintf("POOL_SIZE=%d", benchDBConns)}, profiled...)
	floor := harness.StartBinary(t, "checkoutfloor", bin, floorEnv...)
	t.Cleanup(floor.Stop)
	back := harness.StartBinary(t, "checkoutfloor-back", bin, append(slices.Clip(floorEnv), "ROLE=back")...)
	t.Cleanup(back.Stop)
	frontTwo := harness.StartBinary(t, "checkoutfloor-front-two", bin, append([]string{"ROLE=front-two", "BACK_URL=" + back.URL()}, profiled...)...)
	t.Cleanup(frontTwo.Stop)
	frontOne := harness.StartBinary(t, "checkoutfloor-front-one", bin, append([]string{"ROLE=front-one", "BACK_URL=" + back.URL(), fmt.Sprintf("TOUCH_KB=%d", *floorTouch)}, profiled...)...)
	t.Cleanup(frontOne.Stop)
	pop := populate(t, c, population, 0)
	analyze(t, c)
	// Every side is sent the same check-outs, of the same population: the
	// patrons are handed out once, whichever side takes them.
	service := checkOutTargeter(c, pop, 1)
	to := func(p *harness.Process) vegeta.Targeter {
		return func(tgt *vegeta.Target) error {
			if err := service(tgt); err != nil {
				return err
			}
			tgt.URL = p.URL() + "/circulation/check-out-by-barcode"
			return nil
		}
	}
	return c, [checkOutFloorSides]floorSide{{targeter: service, front: c.Circulations[0], back: c.Storage},
		{targeter: to(floor), front: floor, back: floor, oneProcess: true},
		{targeter: to(frontTwo), front: frontTwo, back: back, split: true},
		{targeter: to(frontOne), front: frontOne, back: back, split: true}}
}

// benchCheckOutFloor is scenario 14.
func benchCheckOutFloor(t *testing.T, p plan, env []string) CheckOutFloor {
	t.Helper()
	rounds, slice, concurrencies := checkOutFloorShape(p)
	warmUp := 4 * slice
	if *smoke {
		warmUp = slice
	}
	_, sides := startCheckOutFloor(t, env, checkOutFloorPopulation(rounds, slice, warmUp, len(concurrencies)))
	var out CheckOutFloor
	for _, conc := range concurrencies {
		hists := make([]*histPair, len(sides))
		cpu := make([]cpuSpentFloor, len(sides))
		ratios := make([][]float64, len(sides))
		for i, side := range sides {
			hists[i] = &histPair{h: newHist()}
			// An unmeasured warm-up each at the new concurrency, four
			// slices long (one in a smoke run): the connections it
			// opens, and the statements their backends prepare and plan
			// (some 50 ms of PostgreSQL's CPU for each new connection
			// of storage's), are no slice's cost.
			attack(t, side.targeter, conc, warmUp)
		}
		for round := range rounds {
			throughput := make([]float64, len(sides))
			for k := range sides {
				i := (k + round) % len(sides) // each side first in turn
				side := sides[i]
				s0 := sampleCPU(t, side.front, side.back)
				h, errs, elapsed := attack(t, side.targeter, conc, slice)
				s1 := sampleCPU(t, side.front, side.back)
				hists[i].h.Merge(h)
				hists[i].errs += errs
				hists[i].elapsed += elapsed
				cpu[i].add(s0, s1, side.oneProcess)
				cpu[i].n += h.TotalCount()
				throughput[i] = float64(h.TotalCount()) / elapsed.Seconds()
			}
			for i := range sides {
				ratios[i] = append(ratios[i], ratio(throughput[i], throughput[1]))
			}
		}
		st := func(i int) Stats { return stats(hists[i].h, hists[i].errs, hists[i].elapsed) }
		row := CheckOutFloorRow{Concurrency: conc, Rounds: rounds, Service: st(0), Floor: st(1), TwoCalls: st(2), OneCall: st(3),
			ServiceCPU: cpu[0].perCheckOut(), FloorCPU: cpu[1].perCheckOut(), TwoCallsCPU: cpu[2].perCheckOut(), OneCallCPU: cpu[3].perCheckOut(),
			RoundRatio: median(ratios[0]), TwoCallsRatio: median(ratios[2]), OneCallRatio: median(ratios[3])}
		row.Ratio = ratio(row.Service.Throughput, row.Floor.Throughput)
		out.Rows = append(out.Rows, row)
		t.Logf("check-out floor c=%d: service %.0f/s p50 %.2f ms p99 %.2f ms, floor %.0f/s p50 %.2f ms p99 %.2f ms; service/floor %.2f, median of %d rounds %.2f; "+
			"the floor split, two calls %.0f/s p50 %.2f ms (%.2f of the floor), one call %.0f/s p50 %.2f ms (%.2f)",
			conc, row.Service.Throughput, row.Service.P50Ms, row.Service.P99Ms, row.Floor.Throughput, row.Floor.P50Ms, row.Floor.P99Ms,
			row.Ratio, rounds, row.RoundRatio, row.TwoCalls.Throughput, row.TwoCalls.P50Ms, row.TwoCallsRatio,
			row.OneCall.Throughput, row.OneCall.P50Ms, row.OneCallRatio)
	}
	return out
}

// cpuSpentFloor sums one side's CPU over its slices.
type cpuSpentFloor struct {
	sum   cpuSample
	n     int64
	floor bool // the floor's: one server, no circulation and storage apart
}

// add adds the CPU spent between two samples; for the floor in one
// process (floor), that process is sampled as both circulation and
// storage, and counted once.
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

// productSettingsTTL is how long circulation reuses a tenant's lock
// settings unless configured otherwise (SETTINGS_CACHE_TTL's default),
// which scenario 14 runs with: the harness's 200 ms, short for tests that
// switch the lock, sends a check-out of every fifth of a second the
// two-call way to read them again.
func productSettingsTTL() string {
	f, _ := reflect.TypeFor[config.Circulation]().FieldByName("SettingsCacheTTL")
	return f.Tag.Get("envDefault")
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
	fmt.Fprintln(w, "\n14. Check-out (distinct patrons, lock on) through circulation and storage against a minimal net/http + pgx server sending the same statements in the same round trips (the floor), and the floor split in a front and a back asking it twice and once, alternating slices; CPU in µs per check-out (the split floor's front as circulation, its back as storage)"+touching())
	fmt.Fprintln(w, "concurrency\tside\tcheck-outs/s\tp50 ms\tp99 ms\tservers CPU\tcirculation\tstorage\tclient\tPostgreSQL\terrors")
	for _, r := range f.Rows {
		for _, x := range []struct {
			name string
			s    Stats
			cpu  CheckOutFloorCPU
		}{{"service", r.Service, r.ServiceCPU}, {"floor", r.Floor, r.FloorCPU}, {"floor, two calls", r.TwoCalls, r.TwoCallsCPU},
			{"floor, one call", r.OneCall, r.OneCallCPU}} {
			fmt.Fprintf(w, "%d\t%s\t%.0f\t%.2f\t%.2f\t%.0f\t%.0f\t%.0f\t%.0f\t%.0f\t%d\n", r.Concurrency, x.name, x.s.Throughput, x.s.P50Ms, x.s.P99Ms,
				x.cpu.Server, x.cpu.Circulation, x.cpu.Storage, x.cpu.Client, x.cpu.Postgres, x.s.Errors)
		}
	}
	for _, r := range f.Rows {
		fmt.Fprintf(w, "c=%d: service / floor throughput %.2f; median of %d rounds %.2f; the floor split, two calls / floor %.2f, one call / floor %.2f\n",
			r.Concurrency, r.Ratio, r.Rounds, r.RoundRatio, r.TwoCallsRatio, r.OneCallRatio)
	}
}
