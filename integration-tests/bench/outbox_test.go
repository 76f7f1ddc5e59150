package bench

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	"github.com/jackc/pgx/v5"

	"github.com/checkoutlock/integration-tests/harness"
)

// Outbox is scenario 9: uncontended check-outs with the lock on, with the
// outbox and its relay publishing to a NATS JetStream server, and with the
// outbox off (OUTBOX=off), one circulation and one storage instance each,
// same PostgreSQL, alternating slices, every setting at its default; and
// how long an event takes from its check-out's write to a consumer.
type Outbox struct {
	Rows []OutboxRow `json:"rows"`
	// Lag is from an event's recording (in the check-out's transaction) to
	// a consumer of the stream receiving it, over the check-out events of
	// a slice of check-outs at c=1.
	Lag struct {
		Events int     `json:"events"`
		P50Ms  float64 `json:"p50Ms"`
		P99Ms  float64 `json:"p99Ms"`
	} `json:"deliveryLag"`
}

// OutboxRow is one concurrency's comparison.
type OutboxRow struct {
	Concurrency int            `json:"concurrency"`
	Without     Stats          `json:"without"`
	With        Stats          `json:"with"`
	CPUWithout  CPUPerCheckOut `json:"cpuWithout"`
	CPUWith     CPUPerCheckOut `json:"cpuWith"`
	// BrokerUs is the broker's CPU per check-out with the outbox, not in
	// CPUWith (in production it runs elsewhere).
	BrokerUs float64 `json:"brokerUs"`
	// P50Ratio and CPURatio are with ÷ without: the median over the
	// rounds of each round's ratio (a round's two slices are next to each
	// other in time; the median is not moved by one slice that met, say,
	// an autovacuum). Pooled ratios are of all the rounds' figures.
	P50Ratio       float64 `json:"p50WithOverWithout"`
	CPURatio       float64 `json:"cpuWithOverWithout"`
	PooledP50Ratio float64 `json:"pooledP50WithOverWithout"`
	PooledCPURatio float64 `json:"pooledCpuWithOverWithout"`
}

// eventsPerCheckOut is what each of the scenario's check-outs announces:
// the item's status, the loan and CHECKED_OUT (its patrons have no
// requests).
const eventsPerCheckOut = 3

func benchOutbox(t *testing.T, p plan, env []string) Outbox {
	t.Helper()
	nats := harness.StartNATS(t)
	without := harness.NewCluster(t, harness.Options{Circulations: 1, FeatureOn: true,
		StorageEnv: append([]string{"OUTBOX=off"}, env...), CirculationEnv: env})
	with := harness.NewCluster(t, harness.Options{Circulations: 1, FeatureOn: true,
		StorageEnv: append([]string{"NATS_URL=" + nats.URL()}, env...), CirculationEnv: env})
	clusters := []*harness.Cluster{without, with}
	pops := []*population{populate(t, without, p.population/2, 0), populate(t, with, p.population/2, 0)}
	// The bulk load's aftermath (visibility maps, statistics, dirty
	// pages) is dealt with now, not in whichever slice it would fall.
	for _, stmt := range []string{`VACUUM (ANALYZE)`, `CHECKPOINT`} {
		if _, err := without.DB.Exec(context.Background(), stmt); err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
	}
	// Eight times the rounds of the other scenarios, in slices two thirds
	// as long, each round's order the other way about: the two stay close
	// in time, neither always follows the other, and the median of the
	// rounds' ratios is not one slice's luck (a slice's CPU per check-out
	// varies by a tenth and more on a shared machine).
	rounds, slice := 8*p.rounds, p.slice*2/3
	// Each slice with the outbox starts with every event before it
	// published, and ends when its own are.
	lastSeq := nats.StreamLastSeq(t, "CHECKOUT_EVENTS")
	if !harness.Poll(60*time.Second, 10*time.Millisecond, func() bool { return with.PendingEvents(t) == 0 }) {
		t.Fatalf("the relay did not publish the events of the set-up within 60s: %d wait", with.PendingEvents(t))
	}
	var out Outbox
	checkOuts := int64(0)
	for _, conc := range []int{1, 4} {
		hists := [2]*histPair{{h: newHist()}, {h: newHist()}}
		// byKind is PostgreSQL's CPU by the kind of process, to tell the
		// check-outs' own sessions from the relay's and the server's.
		byKind := [2]map[string]time.Duration{{}, {}}
		var cpu [2]CPUPerCheckOut
		var broker time.Duration
		var p50Ratios, cpuRatios []float64
		for round := range rounds + 1 {
			var p50, cpuTotal [2]float64
			for k := range clusters {
				i := k
				if round%2 == 1 {
					i = len(clusters) - 1 - k
				}
				c := clusters[i]
				var published uint64
				if i == 1 {
					published = lastSeq()
				}
				k0 := postgresCPUByKind(t, c)
				s0, b0 := sampleCPU(t, c.Circulations[0], c.Storage), processCPU(nats.PID())
				h, errs, elapsed := attack(t, checkOutTargeter(c, pops[i], 1), conc, slice)
				if i == 1 {
					// The slice's CPU includes the relay's publishing of
					// all its events, and none of it falls in the next;
					// the wait asks the broker, so that it adds no work
					// to the database measured.
					want := published + eventsPerCheckOut*uint64(h.TotalCount())
					if !harness.Poll(30*time.Second, 5*time.Millisecond, func() bool { return lastSeq() >= want }) {
						t.Fatalf("the relay did not publish a slice's events within 30s: %d of %d", lastSeq()-published, want-published)
					}
				}
				s1, b1 := sampleCPU(t, c.Circulations[0], c.Storage), processCPU(nats.PID())
				if round > 0 {
					for kind, d := range postgresCPUByKind(t, c) {
						byKind[i][kind] += d - k0[kind]
					}
				}
				if i == 1 {
					checkOuts += h.TotalCount()
				}
				if round == 0 {
					continue // the first round warms both up
				}
				if i == 1 {
					broker += b1 - b0
				}
				hists[i].h.Merge(h)
				hists[i].errs += errs
				hists[i].elapsed += elapsed
				c1 := perCheckOut(s0, s1, h.TotalCount())
				cpu[i] = addCPU(cpu[i], c1, float64(h.TotalCount()))
				p50[i], cpuTotal[i] = float64(h.ValueAtQuantile(50)), c1.Total
			}
			if round > 0 {
				p50Ratios = append(p50Ratios, ratio(p50[1], p50[0]))
				cpuRatios = append(cpuRatios, ratio(cpuTotal[1], cpuTotal[0]))
			}
		}
		row := OutboxRow{Concurrency: conc,
			Without: stats(hists[0].h, hists[0].errs, hists[0].elapsed), With: stats(hists[1].h, hists[1].errs, hists[1].elapsed)}
		row.CPUWithout = scaleCPU(cpu[0], 1/float64(max(1, hists[0].h.TotalCount())))
		row.CPUWith = scaleCPU(cpu[1], 1/float64(max(1, hists[1].h.TotalCount())))
		t.Logf("outbox c=%d, each round's ratios: p50 %.3f; CPU %.3f", conc, p50Ratios, cpuRatios)
		row.BrokerUs = float64(broker.Microseconds()) / float64(max(1, hists[1].h.TotalCount()))
		row.P50Ratio, row.CPURatio = median(p50Ratios), median(cpuRatios)
		row.PooledP50Ratio = ratio(row.With.P50Ms, row.Without.P50Ms)
		row.PooledCPURatio = ratio(row.CPUWith.Total, row.CPUWithout.Total)
		out.Rows = append(out.Rows, row)
		t.Logf("outbox c=%d, PostgreSQL's CPU per check-out by process, µs without → with: %s", conc,
			cpuByKind(byKind, [2]int64{hists[0].h.TotalCount(), hists[1].h.TotalCount()}))
		t.Logf("outbox c=%d: without p50 %.2f ms, %.0f µs CPU; with p50 %.2f ms, %.0f µs CPU (and the broker's %.0f); p50 ×%.3f, CPU ×%.3f",
			conc, row.Without.P50Ms, row.CPUWithout.Total, row.With.P50Ms, row.CPUWith.Total, row.BrokerUs, row.P50Ratio, row.CPURatio)
	}
	// A consumer of the stream (in production, elsewhere: here it would
	// share the two cores with what is measured above) reads every event
	// so far, then the lag is taken over a slice of check-outs at c=1.
	events := harness.WatchEvents(t, nats.URL(), "CHECKOUT_EVENTS")
	checkedOut := func() []harness.Event {
		all, _ := events.All()
		return slices.DeleteFunc(all, func(e harness.Event) bool { return e.Type != "CHECKED_OUT" || e.Tenant != with.Tenant })
	}
	if !harness.Poll(60*time.Second, 100*time.Millisecond, func() bool { return int64(len(checkedOut())) >= checkOuts }) {
		t.Fatalf("%d check-out events delivered, want %d", len(checkedOut()), checkOuts)
	}
	start := time.Now()
	h, _, _ := attack(t, checkOutTargeter(with, pops[1], 1), 1, slice)
	checkOuts += h.TotalCount()
	var got []harness.Event
	if !harness.Poll(60*time.Second, 100*time.Millisecond, func() bool {
		got = checkedOut()
		return int64(len(got)) >= checkOuts
	}) {
		t.Fatalf("%d check-out events delivered, want %d", len(got), checkOuts)
	}
	if int64(len(got)) != checkOuts {
		t.Errorf("%d check-out events delivered for %d check-outs", len(got), checkOuts)
	}
	lag := hdrhistogram.New(1, 60_000_000, 3)
	for _, e := range got {
		if at := time.UnixMilli(e.Timestamp); !at.Before(start.Truncate(time.Millisecond)) {
			record(lag, e.Received.Sub(at))
		}
	}
	out.Lag.Events = int(lag.TotalCount())
	out.Lag.P50Ms, out.Lag.P99Ms = float64(lag.ValueAtQuantile(50))/1000, float64(lag.ValueAtQuantile(99))/1000
	t.Logf("delivery lag of %d check-out events: p50 %.2f ms, p99 %.2f ms", out.Lag.Events, out.Lag.P50Ms, out.Lag.P99Ms)
	return out
}

// postgresCPUByKind is the CPU time so far of the database server's
// processes, by kind: a session's application name and backend type (the
// storage's pools, the relay's session, the WAL writer, …). The server is
// both pairs', and pg_stat_activity lists every database's sessions: the
// idle pair's, named alike, spend next to nothing in the other's slice.
func postgresCPUByKind(t *testing.T, c *harness.Cluster) map[string]time.Duration {
	t.Helper()
	rows, err := c.DB.Query(context.Background(), `SELECT pid, concat_ws(' ', nullif(application_name, ''), backend_type) FROM pg_stat_activity`)
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[int]string{}
	var pid int
	var kind string
	if _, err := pgx.ForEachRow(rows, []any{&pid, &kind}, func() error { kinds[pid] = kind; return nil }); err != nil {
		t.Fatal(err)
	}
	out := map[string]time.Duration{}
	for pid, kind := range kinds {
		out[kind] += processCPU(pid)
	}
	return out
}

// cpuByKind lists the kinds of process that spent at least half a
// microsecond per check-out in either, as "kind a → b".
func cpuByKind(byKind [2]map[string]time.Duration, checkOuts [2]int64) string {
	per := func(i int, kind string) float64 {
		if checkOuts[i] == 0 {
			return 0
		}
		return float64(byKind[i][kind].Microseconds()) / float64(checkOuts[i])
	}
	var kinds []string
	for _, m := range byKind {
		for kind := range m {
			if !slices.Contains(kinds, kind) && (per(0, kind) >= 0.5 || per(1, kind) >= 0.5) {
				kinds = append(kinds, kind)
			}
		}
	}
	slices.Sort(kinds)
	parts := make([]string, len(kinds))
	for i, kind := range kinds {
		parts[i] = fmt.Sprintf("%s %.1f → %.1f", kind, per(0, kind), per(1, kind))
	}
	return strings.Join(parts, "; ")
}

// median is the median of xs (0 for none).
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Sorted(slices.Values(xs))
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// printOutbox prints scenario 9.
func printOutbox(w io.Writer, o Outbox) {
	fmt.Fprintln(w, "\n9. Check-out with the lock, uncontended: with the outbox (relay publishing to NATS JetStream) and without (OUTBOX=off), interleaved; CPU in µs per check-out")
	fmt.Fprintln(w, "concurrency\toutbox\tcheck-outs/s\tp50 ms\tp99 ms\tcirculation\tstorage\tPostgreSQL\tCPU total\terrors")
	for _, r := range o.Rows {
		for _, v := range []struct {
			name string
			s    Stats
			cpu  CPUPerCheckOut
		}{{"off", r.Without, r.CPUWithout}, {"on", r.With, r.CPUWith}} {
			fmt.Fprintf(w, "%d\t%s\t%.0f\t%.2f\t%.2f\t%.0f\t%.0f\t%.0f\t%.0f\t%d\n", r.Concurrency, v.name, v.s.Throughput, v.s.P50Ms, v.s.P99Ms,
				v.cpu.Circulation, v.cpu.Storage, v.cpu.Postgres, v.cpu.Total, v.s.Errors)
		}
		fmt.Fprintf(w, "c=%d: p50 x%.3f, CPU per check-out x%.3f (medians of the rounds' ratios; pooled x%.3f, x%.3f); the broker besides: %.0f µs per check-out\n",
			r.Concurrency, r.P50Ratio, r.CPURatio, r.PooledP50Ratio, r.PooledCPURatio, r.BrokerUs)
	}
	fmt.Fprintf(w, "delivery lag, event recorded -> consumer, %d check-out events at c=1: p50 %.2f ms, p99 %.2f ms\n", o.Lag.Events, o.Lag.P50Ms, o.Lag.P99Ms)
}
