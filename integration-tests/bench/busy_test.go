package bench

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/checkoutlock/integration-tests/harness"
)

// Busy is scenario 10: one busy tenant whose statistics are as ANALYZE
// left them on empty tables (a fresh install; autovacuum off or behind, as
// it is here), against the same after ANALYZE, with 10^3 and 10^5 open
// loans.
type Busy struct {
	Rows []BusyRow `json:"rows"`
}

// BusyRow is one tenant size, statistics state and concurrency.
type BusyRow struct {
	OpenLoans   int     `json:"openLoans"`
	Statistics  string  `json:"statistics"`
	Concurrency int     `json:"concurrency"`
	Stats       Stats   `json:"stats"`
	PostgresCPU float64 `json:"postgresCpuMicrosPerCheckOut"`
}

// The statistics states of scenario 10.
const (
	statsEmpty    = "taken while empty"
	statsAnalyzed = "after ANALYZE"
)

// busyTables are the tables whose statistics scenario 10 sets: those a
// library's use grows.
const busyTables = `circulation_storage.loan, circulation_storage.item, circulation_storage.patron, circulation_storage.request`

// setStatistics puts the statistics of busyTables in state: after ANALYZE,
// or as ANALYZE leaves them on empty tables (no column statistics, no
// rows, no pages), which it makes by removing them. Either way the
// connections' plans are made again: both change the catalog rows the
// plans depend on.
func setStatistics(t *testing.T, c *harness.Cluster, state string) {
	t.Helper()
	stmts := []string{`ANALYZE ` + busyTables}
	if state == statsEmpty {
		list := `'{` + strings.ReplaceAll(busyTables, " ", "") + `}'::regclass[]`
		stmts = []string{
			`DELETE FROM pg_statistic WHERE starelid = ANY (` + list + `)`,
			`UPDATE pg_class SET reltuples = 0, relpages = 0 WHERE oid = ANY (` + list + `)`,
		}
	}
	for _, stmt := range stmts {
		if _, err := c.DB.Exec(context.Background(), stmt); err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
	}
}

// benchBusy runs scenario 10: a cluster for each size (one storage, one
// circulation, the lock on, autovacuum off for the tables a library
// grows), both up at once, the lent loans loaded and a checkpoint taken;
// then rounds that alternate the sizes and the statistics states, each
// slice after a second's warm-up (which makes the connections' prepared
// statements and their generic plans again) with check-outs at c = 1 and
// c = 8.
func benchBusy(t *testing.T, p plan, env []string) Busy {
	sizes := []int{1000, 100000}
	if *smoke {
		sizes = []int{300, 3000}
	}
	states := []string{statsEmpty, statsAnalyzed}
	type acc struct {
		h       *hdrhistogram.Histogram
		errs    int64
		elapsed time.Duration
		cpu     time.Duration
	}
	accs := map[string]*acc{}
	key := func(lent int, state string, conc int) string { return fmt.Sprint(lent, state, conc) }
	clusters := make([]*harness.Cluster, len(sizes))
	pops := make([]*population, len(sizes))
	for i, lent := range sizes {
		c := harness.NewCluster(t, harness.Options{Circulations: 1, FeatureOn: true,
			StorageEnv: append([]string{fmt.Sprintf("DB_MAX_CONNS=%d", benchDBConns/2)}, env...), CirculationEnv: env})
		c.SetupLibrary(0, 0, 0)
		for _, table := range strings.Split(busyTables, ", ") {
			if _, err := c.DB.Exec(context.Background(), `ALTER TABLE `+table+` SET (autovacuum_enabled = off)`); err != nil {
				t.Fatal(err)
			}
		}
		clusters[i], pops[i] = c, lend(t, c, p.population/2, 0, lent)
		for _, state := range states {
			for _, conc := range []int{1, 8} {
				accs[key(lent, state, conc)] = &acc{h: newHist()}
			}
		}
	}
	if _, err := clusters[0].DB.Exec(context.Background(), `CHECKPOINT`); err != nil {
		t.Fatal(err)
	}
	for range p.rounds {
		for i, c := range clusters {
			for _, state := range states {
				setStatistics(t, c, state)
				attack(t, checkOutTargeter(c, pops[i], 1), 8, min(time.Second, p.slice)) // warm-up
				for _, conc := range []int{1, 8} {
					a := accs[key(sizes[i], state, conc)]
					before := postgresCPU()
					hist, e, d := attack(t, checkOutTargeter(c, pops[i], 1), conc, p.slice)
					a.cpu += postgresCPU() - before
					a.h.Merge(hist)
					a.errs += e
					a.elapsed += d
				}
			}
		}
	}
	var out Busy
	for _, lent := range sizes {
		for _, state := range states {
			for _, conc := range []int{1, 8} {
				a := accs[key(lent, state, conc)]
				row := BusyRow{OpenLoans: lent, Statistics: state, Concurrency: conc, Stats: stats(a.h, a.errs, a.elapsed)}
				if n := a.h.TotalCount(); n > 0 {
					row.PostgresCPU = float64(a.cpu.Microseconds()) / float64(n)
				}
				t.Logf("busy tenant, %d open loans, statistics %s, c=%d: p50 %.2f ms, %.0f µs PostgreSQL CPU per check-out, %d errors",
					lent, state, conc, row.Stats.P50Ms, row.PostgresCPU, a.errs)
				out.Rows = append(out.Rows, row)
			}
		}
	}
	for _, c := range clusters {
		c.Circulations[0].Stop()
		c.Storage.Stop()
	}
	return out
}

// busyRatio is row a's p50 and PostgreSQL CPU over row b's.
func busyRatio(a, b BusyRow) (p50, cpu float64) {
	return ratio(a.Stats.P50Ms, b.Stats.P50Ms), ratio(a.PostgresCPU, b.PostgresCPU)
}

// printBusy prints scenario 10: each row, and the ratios the issue of a
// busy tenant asks for.
func printBusy(b Busy) {
	find := func(loans int, state string, conc int) (BusyRow, bool) {
		for _, r := range b.Rows {
			if r.OpenLoans == loans && r.Statistics == state && r.Concurrency == conc {
				return r, true
			}
		}
		return BusyRow{}, false
	}
	fmt.Println("\n10. One busy tenant: statistics taken while empty, against after ANALYZE")
	for _, r := range b.Rows {
		fmt.Printf("  %6d open loans, statistics %-17s c=%d: p50 %.2f ms, p99 %.2f ms, %.0f/s, PostgreSQL CPU %.0f µs per check-out\n",
			r.OpenLoans, r.Statistics, r.Concurrency, r.Stats.P50Ms, r.Stats.P99Ms, r.Stats.Throughput, r.PostgresCPU)
	}
	if len(b.Rows) == 0 {
		return
	}
	small, large := b.Rows[0].OpenLoans, b.Rows[len(b.Rows)-1].OpenLoans
	for _, conc := range []int{1, 8} {
		stale, ok1 := find(large, statsEmpty, conc)
		fresh, ok2 := find(large, statsAnalyzed, conc)
		few, ok3 := find(small, statsEmpty, conc)
		if ok1 && ok2 {
			p, c := busyRatio(stale, fresh)
			fmt.Printf("  c=%d, %d open loans, stale over analyzed: p50 ×%.2f, PostgreSQL CPU ×%.2f\n", conc, large, p, c)
		}
		if ok1 && ok3 {
			p, c := busyRatio(stale, few)
			fmt.Printf("  c=%d, stale statistics, %d over %d open loans: p50 ×%.2f, PostgreSQL CPU ×%.2f\n", conc, large, small, p, c)
		}
	}
}
