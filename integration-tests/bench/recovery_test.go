package bench

import (
	"fmt"
	"io"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/checkoutlock/integration-tests/harness"
)

// Recovery is scenario 13: how soon check-outs succeed again after every
// PostgreSQL backend of storage is terminated (pg_terminate_backend), in a
// closed loop of check-outs at c = 1 (and c = 8), several times each.
type Recovery struct {
	Rows []RecoveryRow `json:"rows"`
}

// RecoveryRow is one concurrency's kills.
type RecoveryRow struct {
	Concurrency int `json:"concurrency"`
	Kills       int `json:"kills"`
	// RecoveryMs is, for each kill, the time from pg_terminate_backend's
	// return to the end of the first check-out that started after it and
	// succeeded (201); MedianMs and MaxMs summarise them.
	RecoveryMs []float64 `json:"recoveryMs"`
	MedianMs   float64   `json:"medianMs"`
	MaxMs      float64   `json:"maxMs"`
	// CheckOutP50Ms is the check-out's p50 over the whole loop, kills
	// included: what a recovery compares with.
	CheckOutP50Ms float64 `json:"checkOutP50Ms"`
	CheckOuts     int     `json:"checkOuts"`
	// Failed is every check-out not answered 201, whenever it ran;
	// Failures describes each.
	Failed   int      `json:"failed"`
	Failures []string `json:"failures,omitempty"`
}

// benchRecovery runs scenario 13 on a cluster of its own (one storage, two
// circulation instances, a database of its own: the backends terminated
// are its storage's alone), at each concurrency in turn.
func benchRecovery(t *testing.T, env []string) Recovery {
	c := harness.NewCluster(t, harness.Options{Circulations: 2, FeatureOn: true, DatabaseURL: harness.FreshDatabase(t),
		StorageEnv: env, CirculationEnv: env})
	kills, between, concurrencies := 10, 15, []int{1, 8}
	if *smoke {
		kills, between, concurrencies = 3, 5, []int{1}
	}
	const perPatron = 4
	// Every check-out takes an item of its own: enough for every kill's
	// check-outs, those a worker starts while the others finish, and the
	// wait for the backends to go.
	need := 0
	for _, conc := range concurrencies {
		need += (kills+1)*(between+conc)*2 + 40*conc
	}
	patrons := (need + perPatron - 1) / perPatron
	lib := c.SetupLibrary(patrons, perPatron, perPatron)
	items := make(chan [2]string, patrons*perPatron)
	// Patron by patron, each patron's items in turn: the workers'
	// check-outs at once are distinct patrons', not waiting on each
	// other's lock.
	for i := range perPatron {
		for p, patron := range lib.Patrons {
			items <- [2]string{lib.Items[p][i], patron}
		}
	}
	close(items)
	var out Recovery
	for _, conc := range concurrencies {
		out.Rows = append(out.Rows, recoveryAt(t, c, items, conc, kills, between))
	}
	return out
}

// checkOutRun is one check-out of the loop.
type checkOutRun struct {
	start, end time.Time
	status     int
	what       string
}

// recoveryAt runs check-outs on conc workers in a closed loop and
// terminates storage's backends kills times, each once between
// check-outs have completed since the previous kill and one started
// after it has succeeded.
func recoveryAt(t *testing.T, c *harness.Cluster, items <-chan [2]string, conc, kills, between int) RecoveryRow {
	var (
		mu        sync.Mutex
		runs      []checkOutRun
		ran       = make(chan checkOutRun, 1024)
		stop      = make(chan struct{})
		exhausted = make(chan struct{})
		once      sync.Once
		wg        sync.WaitGroup
	)
	for w := range conc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				it, ok := <-items
				if !ok {
					once.Do(func() { close(exhausted) })
					return
				}
				start := time.Now()
				r := c.CheckOut(w, it[0], it[1])
				run := checkOutRun{start: start, end: time.Now(), status: r.Status}
				if r.Status != http.StatusCreated {
					run.what = fmt.Sprintf("%s: %d %s %v", it[0], r.Status, r.Body, r.Err)
				}
				mu.Lock()
				runs = append(runs, run)
				mu.Unlock()
				select {
				case ran <- run:
				case <-stop:
					return
				}
			}
		}()
	}
	// awaitRecovered waits for n check-outs to complete, and for one that
	// started at or after since to succeed.
	awaitRecovered := func(n int, since time.Time) {
		recovered := false
		for done := 0; done < n || !recovered; done++ {
			select {
			case r := <-ran:
				recovered = recovered || (r.status == http.StatusCreated && !r.start.Before(since))
			case <-exhausted:
				t.Fatalf("recovery c=%d: the library's items ran out", conc)
			case <-time.After(30 * time.Second):
				t.Fatalf("recovery c=%d: no check-out succeeded within 30 s", conc)
			}
		}
	}
	killedAt := make([]time.Time, kills)
	awaitRecovered(between, time.Time{})
	for k := range kills {
		killedAt[k] = c.TerminateStorageBackends(t)
		awaitRecovered(between, killedAt[k])
	}
	close(stop)
	wg.Wait()

	row := RecoveryRow{Concurrency: conc, Kills: kills, CheckOuts: len(runs)}
	h := newHist()
	for _, r := range runs {
		record(h, r.end.Sub(r.start))
		if r.status != http.StatusCreated {
			row.Failed++
			row.Failures = append(row.Failures, r.what)
			t.Logf("recovery c=%d: failed check-out (started %s after the first kill): %s", conc, r.start.Sub(killedAt[0]), r.what)
		}
	}
	row.CheckOutP50Ms = float64(h.ValueAtQuantile(50)) / 1000
	for _, at := range killedAt {
		first := time.Time{}
		for _, r := range runs {
			if r.status == http.StatusCreated && !r.start.Before(at) && (first.IsZero() || r.end.Before(first)) {
				first = r.end
			}
		}
		row.RecoveryMs = append(row.RecoveryMs, float64(first.Sub(at).Microseconds())/1000)
	}
	sorted := slices.Sorted(slices.Values(row.RecoveryMs))
	row.MaxMs = sorted[len(sorted)-1]
	if n := len(sorted); n%2 == 1 {
		row.MedianMs = sorted[n/2]
	} else {
		row.MedianMs = (sorted[n/2-1] + sorted[n/2]) / 2
	}
	return row
}

// printRecovery prints scenario 13.
func printRecovery(w io.Writer, r Recovery) {
	fmt.Fprintln(w, "\n13. First check-out to succeed after storage's PostgreSQL backends are terminated (from pg_terminate_backend's return to the end of the first 201 that started after it), closed loop")
	for _, row := range r.Rows {
		fmt.Fprintf(w, "c=%d, %d kills: median %.1f ms, max %.1f ms (check-out p50 %.2f ms); each %v; check-outs %d, failed %d\n",
			row.Concurrency, row.Kills, row.MedianMs, row.MaxMs, row.CheckOutP50Ms, row.RecoveryMs, row.CheckOuts, row.Failed)
	}
}
