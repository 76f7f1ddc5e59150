package bench

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	"github.com/jackc/pgx/v5"
	vegeta "github.com/tsenart/vegeta/v12/lib"

	"github.com/checkoutlock/integration-tests/harness"
)

// population is patrons B<n>, each with item BI<n>, created in bulk with
// SQL: the benchmark measures check-outs, not the loading of a library.
type population struct {
	next atomic.Int64 // the next patron/item number to hand out
	size int64
}

// populate creates the records check-outs need: a patron group, types, a
// loan policy without an item limit applied by the rules (through the API),
// then, through SQL, a tenth of n patrons with an item on loan each, n
// patrons and n items to check out, and burst patrons with 10 items each.
func populate(t *testing.T, c *harness.Cluster, n, bursts int) *population {
	t.Helper()
	c.SetupLibrary(0, 0, 0)
	return lend(t, c, n, bursts, max(10, n/10))
}

// lend is populate after the library's setup, with lent patrons each with
// an item on an open loan.
func lend(t *testing.T, c *harness.Cluster, n, bursts, lent int) *population {
	t.Helper()
	ctx := context.Background()
	s := pgx.Identifier{c.Schema}.Sanitize()
	var group, material, loanType string
	if err := c.DB.QueryRow(ctx, `SELECT (SELECT id::text FROM `+s+`.patron_group), (SELECT id::text FROM `+s+`.material_type),
		(SELECT id::text FROM `+s+`.loan_type)`).Scan(&group, &material, &loanType); err != nil {
		t.Fatal(err)
	}
	insertPatrons := `INSERT INTO ` + s + `.patron (id, jsonb)
		SELECT id, jsonb_build_object('id', id, 'barcode', $1 || n, 'active', true, 'patronGroup', $2::text,
		       'personal', jsonb_build_object('lastName', 'Bench ' || n))
		  FROM (SELECT gen_random_uuid() AS id, n FROM generate_series(1, $3) n) g`
	insertItems := `INSERT INTO ` + s + `.item (id, jsonb)
		SELECT id, jsonb_build_object('id', id, 'barcode', @prefix || n, 'title', 'Bench item ' || n,
		       'status', jsonb_build_object('name', 'Available'), 'materialTypeId', @material_type::text,
		       'permanentLoanTypeId', @loan_type::text, '_version', 1)
		  FROM (SELECT gen_random_uuid() AS id, n FROM generate_series(1, @n) n) g`
	// A library lends: a tenth as many patrons again (L<n>) each have an
	// item (LI<n>) out on an open loan, so that the loan table the
	// check-outs write to, and its statistics, are a library's.
	insertLent := `WITH g AS (SELECT gen_random_uuid() AS pid, gen_random_uuid() AS iid, gen_random_uuid() AS lid, n
		             FROM generate_series(1, @n) n),
		  p AS (INSERT INTO ` + s + `.patron (id, jsonb)
		        SELECT pid, jsonb_build_object('id', pid, 'barcode', 'L' || n, 'active', true, 'patronGroup', @group::text) FROM g),
		  i AS (INSERT INTO ` + s + `.item (id, jsonb)
		        SELECT iid, jsonb_build_object('id', iid, 'barcode', 'LI' || n, 'status', jsonb_build_object('name', 'Checked out'),
		               'materialTypeId', @material_type::text, 'permanentLoanTypeId', @loan_type::text, '_version', 2) FROM g)
		INSERT INTO ` + s + `.loan (id, jsonb)
		SELECT lid, jsonb_build_object('id', lid, 'userId', pid, 'itemId', iid, 'status', jsonb_build_object('name', 'Open'),
		       'loanDate', '2026-01-01T10:00:00.000Z', 'action', 'checkedout') FROM g`
	// A bulk load announces nothing: the outbox is off for it.
	tx, err := c.DB.Begin(ctx)
	if err != nil {
		t.Fatalf("populate: %v", err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.Exec(ctx, `SET LOCAL checkoutlock.outbox = 'off'`); err != nil {
		t.Fatalf("populate: %v", err)
	}
	for _, q := range []struct {
		sql  string
		args []any
	}{
		{insertLent, []any{pgx.StrictNamedArgs{"group": group, "material_type": material, "loan_type": loanType, "n": lent}}},
		{insertPatrons, []any{"B", group, n}},
		{insertItems, []any{pgx.StrictNamedArgs{"prefix": "BI", "material_type": material, "loan_type": loanType, "n": n}}},
		{insertPatrons, []any{"BURST", group, bursts}},
		{insertItems, []any{pgx.StrictNamedArgs{"prefix": "BURSTI", "material_type": material, "loan_type": loanType,
			"n": bursts * 10}}},
	} {
		if _, err := tx.Exec(ctx, q.sql, q.args...); err != nil {
			t.Fatalf("populate: %v", err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatalf("populate: %v", err)
	}
	return &population{size: int64(n)}
}

// analyze gathers the statistics of the cluster's database as they are
// after populate, as autovacuum does within a minute of a bulk load: a
// plan made before would be made for tables it last saw empty.
func analyze(t *testing.T, c *harness.Cluster) {
	t.Helper()
	if _, err := c.DB.Exec(context.Background(), `ANALYZE`); err != nil {
		t.Fatalf("analyze: %v", err)
	}
}

// checkOutTargeter hands out check-outs of distinct patrons' items, spread
// round-robin over the instances: no two requests contend for a lock.
func checkOutTargeter(c *harness.Cluster, pop *population, instances int) vegeta.Targeter {
	header := jsonHeader(c)
	return func(tgt *vegeta.Target) error {
		n := pop.next.Add(1)
		if n > pop.size {
			return fmt.Errorf("benchmark population of %d patrons used up", pop.size)
		}
		body := fmt.Sprintf(`{"itemBarcode":"BI%d","userBarcode":"B%d","servicePointId":%q}`, n, n, harness.ServicePoint)
		*tgt = vegeta.Target{Method: http.MethodPost,
			URL:  c.Circulations[int(n)%instances].URL() + "/circulation/check-out-by-barcode",
			Body: []byte(body), Header: header}
		return nil
	}
}

// attack runs check-outs with conc workers as fast as they answer for d,
// and returns the latencies of the 201s, the other answers, and the time.
// The first answer that is not a 201 is logged, so a run that fails says
// why.
func attack(t *testing.T, targeter vegeta.Targeter, conc int, d time.Duration) (*hdrhistogram.Histogram, int64, time.Duration) {
	atk := vegeta.NewAttacker(vegeta.KeepAlive(true), vegeta.Connections(conc*2), vegeta.Workers(uint64(conc)),
		vegeta.MaxWorkers(uint64(conc)), vegeta.Timeout(60*time.Second))
	h := newHist()
	var errs int64
	start := time.Now()
	for res := range atk.Attack(targeter, vegeta.Rate{Freq: 0}, d, "check-out") {
		if res.Code != http.StatusCreated {
			if errs == 0 {
				t.Logf("a check-out failed: %d %s %s", res.Code, res.Error, res.Body)
			}
			errs++
			continue
		}
		record(h, res.Latency)
	}
	return h, errs, time.Since(start)
}

// setLockSettings stores the tenant's lock settings through one instance
// and waits until every instance applies them.
func setLockSettings(t *testing.T, c *harness.Cluster, body string, check func(s lockSettings) bool) {
	t.Helper()
	c.Do(c.Circulations[0], "PUT", "/circulation/settings/check-out-lock", body).Want(t, http.StatusOK)
	deadline := time.Now().Add(10 * time.Second)
	for _, p := range c.Circulations {
		for {
			var s lockSettings
			c.Do(p, "GET", "/circulation/settings/check-out-lock", nil).Want(t, http.StatusOK).Decode(t, &s)
			if check(s) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s did not apply the settings %s", p.Name, body)
			}
			time.Sleep(20 * time.Millisecond) // polling another process's cache expiry
		}
	}
}

type lockSettings struct {
	Enabled   bool  `json:"checkOutLockFeatureEnabled"`
	Intervals []int `json:"retryIntervalsMs"`
}

// CheckOutCost is scenario 2: uncontended check-outs with the lock feature
// on and off, interleaved.
type CheckOutCost struct {
	Concurrency      int     `json:"concurrency"`
	On               Stats   `json:"featureOn"`
	Off              Stats   `json:"featureOff"`
	MedianOverheadMs float64 `json:"medianOverheadMs"`
	MedianRatio      float64 `json:"medianRatio"`
}

func benchCheckOutCost(t *testing.T, c *harness.Cluster, pop *population, p plan, conc int) CheckOutCost {
	on, off := newHist(), newHist()
	var onErr, offErr int64
	var onTime, offTime time.Duration
	for range p.rounds {
		for _, enabled := range []bool{true, false} {
			setLockSettings(t, c, fmt.Sprintf(`{"checkOutLockFeatureEnabled":%t}`, enabled), func(s lockSettings) bool { return s.Enabled == enabled })
			hist, errs, elapsed := attack(t, checkOutTargeter(c, pop, 1), conc, p.slice)
			if enabled {
				on.Merge(hist)
				onErr += errs
				onTime += elapsed
			} else {
				off.Merge(hist)
				offErr += errs
				offTime += elapsed
			}
		}
	}
	res := CheckOutCost{Concurrency: conc, On: stats(on, onErr, onTime), Off: stats(off, offErr, offTime)}
	res.MedianOverheadMs = res.On.P50Ms - res.Off.P50Ms
	res.MedianRatio = ratio(res.On.P50Ms, res.Off.P50Ms)
	t.Logf("check-out c=%d: lock on p50 %.2f ms p99 %.2f ms, off p50 %.2f ms p99 %.2f ms; overhead %.2f ms (x%.2f)",
		conc, res.On.P50Ms, res.On.P99Ms, res.Off.P50Ms, res.Off.P99Ms, res.MedianOverheadMs, res.MedianRatio)
	return res
}

// ScaleRow is scenario 4: check-out throughput with k instances.
type ScaleRow struct {
	Instances   int   `json:"instances"`
	Concurrency int   `json:"concurrency"`
	Stats       Stats `json:"stats"`
}

func benchScale(t *testing.T, c *harness.Cluster, pop *population, p plan) []ScaleRow {
	setLockSettings(t, c, `{"checkOutLockFeatureEnabled":true,"retryIntervalsMs":[500,500,1000]}`,
		func(s lockSettings) bool { return s.Enabled && len(s.Intervals) == 3 })
	const conc = 16
	ks := []int{1, 2, 4}
	hists := make([]*hdrhistogram.Histogram, len(ks))
	errs := make([]int64, len(ks))
	times := make([]time.Duration, len(ks))
	for i := range hists {
		hists[i] = newHist()
	}
	for range p.rounds {
		for i, k := range ks {
			h, e, d := attack(t, checkOutTargeter(c, pop, k), conc, p.slice)
			hists[i].Merge(h)
			errs[i] += e
			times[i] += d
		}
	}
	var rows []ScaleRow
	for i, k := range ks {
		row := ScaleRow{Instances: k, Concurrency: conc, Stats: stats(hists[i], errs[i], times[i])}
		rows = append(rows, row)
		t.Logf("scale %d instance(s): %.0f check-outs/s, p50 %.1f ms, p99 %.1f ms", k, row.Stats.Throughput, row.Stats.P50Ms, row.Stats.P99Ms)
	}
	return rows
}

// MemoryRow is scenario 5: a process's peak resident memory.
type MemoryRow struct {
	Process string  `json:"process"`
	PeakMB  float64 `json:"peakRssMB"`
}

// peakRSS reads VmHWM, the high-water mark of resident memory, from /proc.
func peakRSS(t *testing.T, pid int) float64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, _ := strconv.ParseFloat(strings.Fields(v)[0], 64)
			return kb / 1024
		}
	}
	t.Fatalf("no VmHWM for pid %d", pid)
	return 0
}
