package bench

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/checkoutlock/integration-tests/harness"
)

// Busy is scenario 10: one busy tenant whose statistics were taken while
// its tables were empty (a fresh install; autovacuum off or behind, as it
// is here), against the same after ANALYZE, with 10^3 and 10^5 open loans.
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

// benchBusy runs scenario 10: for each size, a cluster of its own (one
// storage, one circulation, the lock on), its statistics gathered while
// its tables are empty and autovacuum off, then the lent loans loaded;
// check-outs at c = 1 and c = 8 (after a second's warm-up, which makes the
// connections' prepared statements and their generic plans), then the
// same after ANALYZE.
func benchBusy(t *testing.T, p plan, env []string) Busy {
	sizes := []int{1000, 100000}
	if *smoke {
		sizes = []int{1000, 10000}
	}
	var out Busy
	for _, lent := range sizes {
		c := harness.NewCluster(t, harness.Options{Circulations: 1, FeatureOn: true,
			StorageEnv: append([]string{fmt.Sprintf("DB_MAX_CONNS=%d", benchDBConns)}, env...), CirculationEnv: env})
		c.SetupLibrary(0, 0, 0)
		ctx := context.Background()
		for _, stmt := range []string{
			`ALTER TABLE circulation_storage.loan SET (autovacuum_enabled = off)`,
			`ALTER TABLE circulation_storage.item SET (autovacuum_enabled = off)`,
			`ALTER TABLE circulation_storage.patron SET (autovacuum_enabled = off)`,
			`ALTER TABLE circulation_storage.request SET (autovacuum_enabled = off)`,
			`ANALYZE`,
		} {
			if _, err := c.DB.Exec(ctx, stmt); err != nil {
				t.Fatalf("%s: %v", stmt, err)
			}
		}
		pop := lend(t, c, p.population/4, 0, lent)
		for _, state := range []string{statsEmpty, statsAnalyzed} {
			if state == statsAnalyzed {
				analyze(t, c)
			}
			attack(t, checkOutTargeter(c, pop, 1), 8, time.Second) // warm-up
			for _, conc := range []int{1, 8} {
				h := newHist()
				var errs int64
				var elapsed time.Duration
				before := sampleCPU(t, c.Circulations[0], c.Storage)
				for range p.rounds {
					hist, e, d := attack(t, checkOutTargeter(c, pop, 1), conc, p.slice)
					h.Merge(hist)
					errs += e
					elapsed += d
				}
				after := sampleCPU(t, c.Circulations[0], c.Storage)
				row := BusyRow{OpenLoans: lent, Statistics: state, Concurrency: conc, Stats: stats(h, errs, elapsed),
					PostgresCPU: perCheckOut(before, after, h.TotalCount()).Postgres}
				t.Logf("busy tenant, %d open loans, statistics %s, c=%d: p50 %.2f ms, %.0f µs PostgreSQL CPU per check-out, %d errors",
					lent, state, conc, row.Stats.P50Ms, row.PostgresCPU, errs)
				out.Rows = append(out.Rows, row)
			}
		}
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
