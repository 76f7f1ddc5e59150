package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	vegeta "github.com/tsenart/vegeta/v12/lib"

	"github.com/checkoutlock/circulation-storage/locksql"
	"github.com/checkoutlock/integration-tests/harness"
)

// LockCycleRow compares acquire + release through circulation-storage's HTTP
// API with pgbench running the same two statements at the same concurrency.
//
// NoHistory is the same service cycle against a storage instance with the
// lock history off (LOCK_HISTORY=false), in slices alternating with the
// others: the uncontended cycle must not pay for the history.
//
// Floor is the same cycle through a minimal net/http + pgx server running
// the same SQL (bench/floor): what a framework cannot beat.
type LockCycleRow struct {
	Concurrency int   `json:"concurrency"`
	Service     Stats `json:"service"`
	Acquire     Stats `json:"serviceAcquire"`
	NoHistory   Stats `json:"serviceWithoutHistory"`
	Floor       Stats `json:"floor"`
	Raw         Stats `json:"pgbench"`
	// RawDurable is pgbench with the statements waiting for the WAL flush
	// (synchronous_commit=on): what LOCK_SYNCHRONOUS_COMMIT=off saves.
	RawDurable   Stats   `json:"pgbenchSynchronousCommit"`
	DurableRatio float64 `json:"pgbenchOverSynchronousCommitThroughput"`
	Ratio        float64 `json:"serviceOverRawThroughput"`
	HistoryRatio float64 `json:"withOverWithoutHistoryThroughput"`
	FloorRatio   float64 `json:"serviceOverFloorThroughput"`
	FloorRaw     float64 `json:"floorOverRawThroughput"`
	// ServiceCPU and FloorCPU are the CPU per cycle of each party: where
	// the service's and the floor's throughputs part.
	ServiceCPU CycleCPU `json:"serviceCpuPerCycle"`
	FloorCPU   CycleCPU `json:"floorCpuPerCycle"`
}

// CycleCPU is the CPU time per lock cycle, in µs, of the server (the service
// or the floor), the load generator and PostgreSQL.
type CycleCPU struct {
	Server   float64 `json:"serverMicroseconds"`
	Client   float64 `json:"clientMicroseconds"`
	Postgres float64 `json:"postgresMicroseconds"`
}

// cpuUse is the CPU a server, the load generator and PostgreSQL have used
// so far.
type cpuUse struct{ server, client, postgres time.Duration }

func cpuNow(server int) cpuUse {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return cpuUse{server: processCPU(server), client: time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), postgres: postgresCPU()}
}

func (u cpuUse) add(from, to cpuUse) cpuUse {
	return cpuUse{u.server + to.server - from.server, u.client + to.client - from.client, u.postgres + to.postgres - from.postgres}
}

// perCycle is u over n cycles, in µs.
func (u cpuUse) perCycle(n int64) CycleCPU {
	if n == 0 {
		return CycleCPU{}
	}
	us := func(d time.Duration) float64 { return float64(d.Microseconds()) / float64(n) }
	return CycleCPU{Server: us(u.server), Client: us(u.client), Postgres: us(u.postgres)}
}

// lockCommit is the synchronous_commit the service's lock statements run
// with (LOCK_SYNCHRONOUS_COMMIT's default), and so the floor's and
// pgbench's.
const lockCommit = "off"

// benchHolder is the holder a circulation instance names in its locks.
const benchHolder = `{"instance":"bench-circulation:8080","requestId":"123456/circulation","itemBarcode":"bench-item-0001",` +
	`"servicePointId":"3a40852d-49fd-4df2-a1f9-6e2641a6e91f"}`

// serviceCycles runs conc closed-loop clients, each acquiring a fresh
// patron's lock and releasing it, for d. Each client's histograms are its
// own and merged at the end.
func serviceCycles(t *testing.T, c *harness.Cluster, base string, client *http.Client, conc int, d time.Duration) (cycle, acquire *hdrhistogram.Histogram, errs int64) {
	t.Helper()
	cycle, acquire = newHist(), newHist()
	headers := c.Headers()
	var mu sync.Mutex
	var wg sync.WaitGroup
	deadline := time.Now().Add(d)
	for range conc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			hc, ha := newHist(), newHist()
			var e int64
			for time.Now().Before(deadline) {
				start := time.Now()
				lockID, ok := post(client, base+"/check-out-lock-storage", headers,
					`{"userId":"`+uuid.NewString()+`","holder":`+benchHolder+`}`)
				acquired := time.Now()
				if !ok || !del(client, base+"/check-out-lock-storage/"+lockID, headers) {
					e++
					continue
				}
				record(ha, acquired.Sub(start))
				record(hc, time.Since(start))
			}
			mu.Lock()
			cycle.Merge(hc)
			acquire.Merge(ha)
			errs += e
			mu.Unlock()
		}()
	}
	wg.Wait()
	return cycle, acquire, errs
}

func post(client *http.Client, url string, headers map[string]string, body string) (string, bool) {
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	res, err := client.Do(req)
	if err != nil {
		return "", false
	}
	defer res.Body.Close()
	var lock struct{ ID string }
	if res.StatusCode != http.StatusCreated || json.NewDecoder(res.Body).Decode(&lock) != nil {
		return "", false
	}
	return lock.ID, true
}

func del(client *http.Client, url string, headers map[string]string) bool {
	req, _ := http.NewRequest(http.MethodDelete, url, nil)
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	res, err := client.Do(req)
	if err != nil {
		return false
	}
	res.Body.Close()
	return res.StatusCode == http.StatusNoContent
}

// pgbenchScript is the service's acquire and release statements, as a
// pgbench transaction for the tenant: a fresh patron id each time, the lock
// id carried from one statement to the next with \gset.
func pgbenchScript(tenant string) string {
	tbl := pgx.Identifier{locksql.Schema, "check_out_lock"}.Sanitize()
	literal := "'" + tenant + "'" // a tenant id is letters, digits and underscores
	acquire := fmt.Sprintf(locksql.Acquire, tbl)
	acquire = strings.ReplaceAll(acquire, "@tenant", literal)
	acquire = strings.ReplaceAll(acquire, "@user_id", "md5(:uid::text)::uuid")
	acquire = strings.ReplaceAll(acquire, "@ttl_ms", "3000")
	acquire = strings.ReplaceAll(acquire, "@lock_id", "NULL")
	acquire = strings.ReplaceAll(acquire, "@holder", "'"+strings.TrimSuffix(benchHolder, "}")+`,"acquiredBy":"bench"}'`)
	release := strings.ReplaceAll(fmt.Sprintf(locksql.Release, tbl, pgx.Identifier{locksql.Schema, "check_out_lock_waiter"}.Sanitize()), "@lock_id", ":lk_id")
	release = strings.ReplaceAll(release, "@tenant", literal)
	// The releasing caller: the owner, as the holder names it.
	release = strings.ReplaceAll(release, "@by_user", "'bench'")
	release = strings.ReplaceAll(release, "@by_module", "NULL")
	release = strings.ReplaceAll(release, "@others", "false")
	return "\\set uid random(1, 9000000000000)\n" + strings.TrimSpace(acquire) + " \\gset lk_\n" + release + ";\n"
}

// pgbenchCycles runs the script at concurrency conc for d (whole seconds),
// in prepared mode as pgx runs statements, and reads each transaction's
// latency from pgbench's log.
func pgbenchCycles(t *testing.T, dbURL, tenant string, conc int, d time.Duration, commit string) (*hdrhistogram.Histogram, time.Duration, int64) {
	t.Helper()
	dir := t.TempDir()
	script := filepath.Join(dir, "cycle.sql")
	if err := os.WriteFile(script, []byte(pgbenchScript(tenant)), 0o644); err != nil {
		t.Fatal(err)
	}
	secs := max(1, int(d.Seconds()))
	cmd := exec.Command("pgbench", "-n", "-M", "prepared", "-c", strconv.Itoa(conc), "-j", strconv.Itoa(min(conc, 2)),
		"-T", strconv.Itoa(secs), "-f", script, "-l", "--log-prefix", filepath.Join(dir, "pg"), dbURL)
	// The statements' durability: as the service runs them
	// (LOCK_SYNCHRONOUS_COMMIT), or another for comparison.
	cmd.Env = append(os.Environ(), "PGOPTIONS=-c synchronous_commit="+commit)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("pgbench: %v\n%s", err, out.String())
	}
	failed := int64(0)
	if m := failedRe(out.String()); m > 0 {
		failed = m
	}
	h := newHist()
	logs, _ := filepath.Glob(filepath.Join(dir, "pg.*"))
	for _, name := range logs {
		f, err := os.Open(name)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			// client_id transaction_no time script_no time_epoch time_us
			fields := strings.Fields(sc.Text())
			if len(fields) < 3 {
				continue
			}
			us, err := strconv.ParseInt(fields[2], 10, 64)
			if err != nil {
				continue
			}
			_ = h.RecordValue(max(us, 1))
		}
		f.Close()
	}
	return h, time.Duration(secs) * time.Second, failed
}

// failedRe reads "number of failed transactions: N" from pgbench's summary.
func failedRe(out string) int64 {
	for _, line := range strings.Split(out, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "number of failed transactions: "); ok {
			n, _ := strconv.ParseInt(strings.Fields(v)[0], 10, 64)
			return n
		}
	}
	return 0
}

// benchLockCycle is scenario 1: for each concurrency, service and pgbench
// slices alternate, and the ratio is of their summed throughputs.
func benchLockCycle(t *testing.T, c *harness.Cluster, noHistory, floor *harness.Process, dbURL string, p plan) []LockCycleRow {
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 256, MaxIdleConns: 256}}
	var rows []LockCycleRow
	for _, conc := range p.concurrencies {
		svcCycle, svcAcquire, raw, bare, flr, durable := newHist(), newHist(), newHist(), newHist(), newHist(), newHist()
		var svcErrs, rawErrs, bareErrs, floorErrs, durableErrs int64
		var svcTime, rawTime, bareTime, floorTime, durableTime time.Duration
		var svcCPU, floorCPU cpuUse
		// Every server first runs an unmeasured slice at the new
		// concurrency: the connections it opens (the client's to it, its
		// own to PostgreSQL, whose backends prepare the statements anew)
		// are no slice's cost.
		for _, url := range []string{c.Storage.URL(), floor.URL(), noHistory.URL()} {
			serviceCycles(t, c, url, client, conc, p.cycleSlice)
		}
		for round := range p.cycleRounds {
			service := func() {
				start, cpu := time.Now(), cpuNow(c.Storage.PID())
				hc, ha, e := serviceCycles(t, c, c.Storage.URL(), client, conc, p.cycleSlice)
				svcTime += time.Since(start)
				svcCPU = svcCPU.add(cpu, cpuNow(c.Storage.PID()))
				svcCycle.Merge(hc)
				svcAcquire.Merge(ha)
				svcErrs += e
			}
			withoutHistory := func() {
				start := time.Now()
				hb, _, eb := serviceCycles(t, c, noHistory.URL(), client, conc, p.cycleSlice)
				bareTime += time.Since(start)
				bare.Merge(hb)
				bareErrs += eb
			}
			floorSlice := func() {
				start, cpu := time.Now(), cpuNow(floor.PID())
				hf, _, ef := serviceCycles(t, c, floor.URL(), client, conc, p.cycleSlice)
				floorTime += time.Since(start)
				floorCPU = floorCPU.add(cpu, cpuNow(floor.PID()))
				flr.Merge(hf)
				floorErrs += ef
			}
			// The three HTTP servers take turns at each place in the
			// round: the one right after pgbench meets the vacuuming of
			// the rows pgbench churned, and none may always be spared it.
			// And each starts from the same lock table: vacuumed of the
			// dead rows the slice before it left (every cycle leaves one,
			// pgbench's tens of thousands), which the next slice's inserts
			// would otherwise meet in the unique index, and autovacuum
			// would clean up in the middle of whichever slice came next.
			slices := []func(){service, floorSlice, withoutHistory}
			for i := range slices {
				vacuumLocks(t, c)
				slices[(i+round)%len(slices)]()
			}
			// pgbench, in whole seconds, runs in every pgbenchEvery-th
			// round, each way.
			if round%p.pgbenchEvery != 0 {
				continue
			}
			h, d, e2 := pgbenchCycles(t, dbURL, c.Tenant, conc, time.Second, lockCommit)
			rawTime += d
			raw.Merge(h)
			rawErrs += e2
			h, d, e2 = pgbenchCycles(t, dbURL, c.Tenant, conc, time.Second, "on")
			durableTime += d
			durable.Merge(h)
			durableErrs += e2
		}
		row := LockCycleRow{Concurrency: conc, Service: stats(svcCycle, svcErrs, svcTime),
			Acquire: stats(svcAcquire, 0, svcTime), NoHistory: stats(bare, bareErrs, bareTime),
			Floor: stats(flr, floorErrs, floorTime), Raw: stats(raw, rawErrs, rawTime), RawDurable: stats(durable, durableErrs, durableTime)}
		row.DurableRatio = ratio(row.Raw.Throughput, row.RawDurable.Throughput)
		row.Ratio = ratio(row.Service.Throughput, row.Raw.Throughput)
		row.HistoryRatio = ratio(row.Service.Throughput, row.NoHistory.Throughput)
		row.FloorRatio = ratio(row.Service.Throughput, row.Floor.Throughput)
		row.FloorRaw = ratio(row.Floor.Throughput, row.Raw.Throughput)
		row.ServiceCPU = svcCPU.perCycle(svcCycle.TotalCount())
		row.FloorCPU = floorCPU.perCycle(flr.TotalCount())
		rows = append(rows, row)
		t.Logf("lock cycle c=%d: service %.0f/s (p99 %.2f ms), floor %.0f/s (service/floor %.2f), without history %.0f/s (ratio %.2f), pgbench %.0f/s (p99 %.2f ms), service/pgbench %.2f, floor/pgbench %.2f; pgbench with synchronous_commit=on %.0f/s (off/on %.2f)",
			conc, row.Service.Throughput, row.Service.P99Ms, row.Floor.Throughput, row.FloorRatio, row.NoHistory.Throughput, row.HistoryRatio,
			row.Raw.Throughput, row.Raw.P99Ms, row.Ratio, row.FloorRaw, row.RawDurable.Throughput, row.DurableRatio)
		t.Logf("lock cycle c=%d: CPU per cycle, server / load generator / PostgreSQL: service %.0f / %.0f / %.0f µs, floor %.0f / %.0f / %.0f µs",
			conc, row.ServiceCPU.Server, row.ServiceCPU.Client, row.ServiceCPU.Postgres, row.FloorCPU.Server, row.FloorCPU.Client, row.FloorCPU.Postgres)
	}
	return rows
}

// vacuumLocks vacuums the cluster's lock table.
func vacuumLocks(t *testing.T, c *harness.Cluster) {
	t.Helper()
	if _, err := c.DB.Exec(context.Background(), "VACUUM "+pgx.Identifier{locksql.Schema, "check_out_lock"}.Sanitize()); err != nil {
		t.Fatal(err)
	}
}

// AcquireAtRate is the acquire latency at a fixed rate (half the peak).
type AcquireAtRate struct {
	RatePerSecond int   `json:"ratePerSecond"`
	Acquire       Stats `json:"acquire"`
}

// benchAcquireAtHalfPeak paces acquisitions of fresh patrons' locks with
// vegeta at half the peak cycle rate and reports their latency. The locks
// are left to expire (and be swept), as a crashed client's would.
func benchAcquireAtHalfPeak(t *testing.T, c *harness.Cluster, peak float64, p plan) AcquireAtRate {
	// Scenario 1 churned hundreds of thousands of lock rows through the
	// table in a minute, far beyond any library's day: its dead rows are
	// vacuumed first, so that this tail is the service's and not the
	// clean-up of the scenario before.
	vacuumLocks(t, c)
	rate := max(1, int(peak/2))
	header := jsonHeader(c)
	targeter := func(tgt *vegeta.Target) error {
		*tgt = vegeta.Target{Method: http.MethodPost, URL: c.Storage.URL() + "/check-out-lock-storage",
			Body: []byte(`{"userId":"` + uuid.NewString() + `","ttlMs":1000}`), Header: header}
		return nil
	}
	atk := vegeta.NewAttacker(vegeta.KeepAlive(true), vegeta.Connections(256), vegeta.Workers(8), vegeta.MaxWorkers(256))
	h := newHist()
	var errs int64
	d := time.Duration(p.rounds) * p.slice
	for res := range atk.Attack(targeter, vegeta.Rate{Freq: rate, Per: time.Second}, d, "acquire") {
		if res.Code != http.StatusCreated {
			errs++
			continue
		}
		record(h, res.Latency)
	}
	s := stats(h, errs, d)
	t.Logf("acquire at %d/s (half of the peak %.0f/s): p50 %.2f ms, p99 %.2f ms", rate, peak, s.P50Ms, s.P99Ms)
	// Leave nothing for the next scenario.
	_, err := c.DB.Exec(context.Background(), "DELETE FROM "+pgx.Identifier{c.Schema, "check_out_lock"}.Sanitize())
	if err != nil {
		t.Fatal(err)
	}
	return AcquireAtRate{RatePerSecond: rate, Acquire: s}
}
