package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/checkoutlock/integration-tests/harness"
)

// heldPatron holds a patron's row in a transaction of the test's own, so
// that the patron's next check-out's write waits for it in PostgreSQL and
// the patron's check-outs after it wait at storage behind that one.
type heldPatron struct {
	tx pgx.Tx
}

// holdPatron locks the row of the patron whose id is userID.
func holdPatron(t *testing.T, c *harness.Cluster, userID string) *heldPatron {
	t.Helper()
	ctx := context.Background()
	tx, err := c.DB.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tx.Rollback(context.Background()) })
	if _, err := tx.Exec(ctx, `SELECT 1 FROM `+pgx.Identifier{c.Schema, "patron"}.Sanitize()+` WHERE id = $1 FOR UPDATE`, userID); err != nil {
		t.Fatal(err)
	}
	return &heldPatron{tx: tx}
}

// waited reports whether a server process waits for the held row.
func (h *heldPatron) waited(t *testing.T) bool {
	t.Helper()
	var n int
	if err := h.tx.QueryRow(context.Background(), `SELECT count(*) FROM pg_stat_activity
		WHERE pg_backend_pid() = ANY (pg_blocking_pids(pid))`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n > 0
}

func (h *heldPatron) let(t *testing.T) {
	t.Helper()
	if err := h.tx.Rollback(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// checkOutAs sends a check-out to circulation instance 0 under ctx, with
// the tenant administrator's headers and extra; a caller who leaves (ctx
// ended) gets the error.
func checkOutAs(ctx context.Context, c *harness.Cluster, item, patron string, extra map[string]string) (int, error) {
	body, _ := json.Marshal(map[string]any{"itemBarcode": item, "userBarcode": patron, "servicePointId": harness.ServicePoint})
	req, err := http.NewRequestWithContext(ctx, "POST", c.Circulations[0].URL()+"/circulation/check-out-by-barcode", bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	for k, v := range c.Headers() {
		req.Header.Set(k, v)
	}
	for k, v := range extra {
		req.Header.Set(k, v)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer res.Body.Close()
	return res.StatusCode, nil
}

// TestACheckOutWhoseCallerLeftWhileItWaitedIsNeverWritten: a patron's
// first check-out held in PostgreSQL, four more of the patron's waiting at
// storage behind it, whose callers (self-check machines giving up) hang
// up; five rounds. None of the four is written, then or later: their
// items stay on the shelf, and the patron has the first loan only.
func TestACheckOutWhoseCallerLeftWhileItWaitedIsNeverWritten(t *testing.T) {
	t.Parallel()
	c := harness.NewCluster(t, harness.Options{Circulations: 1, FeatureOn: true})
	const rounds, behind = 5, 4
	lib := c.SetupLibrary(rounds, behind+1, 10)
	for round, patron := range lib.Patrons {
		held := holdPatron(t, c, patronID(t, c, patron))
		first := make(chan int, 1)
		go func() {
			status, err := checkOutAs(context.Background(), c, lib.Items[round][0], patron, nil)
			if err != nil {
				t.Error(err)
			}
			first <- status
		}()
		waitFor(t, "the first check-out held in PostgreSQL", func() bool { return held.waited(t) })
		ctx, hangUp := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		for k := 1; k <= behind; k++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if status, err := checkOutAs(ctx, c, lib.Items[round][k], patron, nil); err == nil {
					t.Errorf("round %d: check-out %d answered %d to a caller who had left", round, k, status)
				}
			}()
		}
		waitFor(t, "four check-outs waiting at storage", func() bool {
			return metric(t, c, c.Storage, "checkout_burst_waiting") == behind
		})
		hangUp()
		wg.Wait()
		waitFor(t, "the four leaving storage's queue", func() bool { return metric(t, c, c.Storage, "checkout_burst_waiting") == 0 })
		held.let(t)
		if status := <-first; status != http.StatusCreated {
			t.Fatalf("round %d: the first check-out: %d", round, status)
		}
		for k := 1; k <= behind; k++ {
			var status string
			if err := c.DB.QueryRow(context.Background(), `SELECT status_name FROM `+pgx.Identifier{c.Schema, "item"}.Sanitize()+
				` WHERE barcode = $1`, lib.Items[round][k]).Scan(&status); err != nil {
				t.Fatal(err)
			}
			if status != "Available" {
				t.Errorf("round %d: the item of check-out %d, whose caller left, is %q", round, k, status)
			}
		}
		if n := c.OpenLoans(t, patron); n != 1 {
			t.Errorf("round %d: %d open loans, want the first check-out's alone", round, n)
		}
	}
	if n := metric(t, c, c.Storage, "checkout_burst_batch_size_count"); n != 0 {
		t.Errorf("%v batches ran, want none: every write behind the first had left", n)
	}
}

// TestABurstIsTracedAsOneBatchLinkedToEachWrite: with tracing on, four
// check-outs of a patron, each of a trace of its own, that wait behind
// the patron's first and then run together: the batch is a span of its
// own, carrying its size, linked to each write's request span at storage,
// each of which links back to it; the batch's statements are under it.
func TestABurstIsTracedAsOneBatchLinkedToEachWrite(t *testing.T) {
	t.Parallel()
	col := startCollector(t)
	env := []string{"OTEL_EXPORTER_OTLP_ENDPOINT=http://" + col.addr, "OTEL_BSP_SCHEDULE_DELAY=50"}
	c := harness.NewCluster(t, harness.Options{Circulations: 1, FeatureOn: true, StorageEnv: env, CirculationEnv: env})
	const behind = 4
	lib := c.SetupLibrary(1, behind+1, 10)
	patron := lib.Patrons[0]
	held := holdPatron(t, c, patronID(t, c, patron))
	statuses := make(chan int, behind+1)
	go func() {
		status, _ := checkOutAs(context.Background(), c, lib.Items[0][0], patron, nil)
		statuses <- status
	}()
	waitFor(t, "the first check-out held in PostgreSQL", func() bool { return held.waited(t) })
	traces := make([]string, behind)
	for k := range behind {
		traces[k] = fmt.Sprintf("%032x", 0xb0b0+k)
		go func() {
			status, _ := checkOutAs(context.Background(), c, lib.Items[0][k+1], patron,
				map[string]string{"traceparent": "00-" + traces[k] + "-00f067aa0ba902b7-01"})
			statuses <- status
		}()
	}
	waitFor(t, "four check-outs waiting at storage", func() bool { return metric(t, c, c.Storage, "checkout_burst_waiting") == behind })
	held.let(t)
	for range behind + 1 {
		if status := <-statuses; status != http.StatusCreated {
			t.Fatalf("a check-out of the burst: %d", status)
		}
	}

	var batch *span
	writes := map[string]span{} // storage's request span of each write, by trace
	var statements []span
	waitFor(t, "the batch's spans at the collector", func() bool {
		batch, statements = nil, nil
		clear(writes)
		spans := col.all()
		for i, s := range spans {
			if s.service == "circulation-storage" && s.name == "check-out burst" {
				batch = &spans[i]
			}
			if s.service == "circulation-storage" && s.name == "POST /loan-storage/loans" && slices.Contains(traces, s.trace) {
				writes[s.trace] = s
			}
		}
		if batch == nil {
			return false
		}
		for _, s := range spans {
			if s.parent == batch.id && s.trace == batch.trace {
				statements = append(statements, s)
			}
		}
		return len(writes) == behind && len(statements) > 0
	})
	if got := batch.ints["checkout.burst.size"]; got != behind {
		t.Errorf("the batch's span says %d writes, want %d", got, behind)
	}
	if slices.Contains(traces, batch.trace) {
		t.Errorf("the batch's span is in the trace of one of its writes (%s), want a trace of its own", batch.trace)
	}
	for trace, w := range writes {
		if !slices.Contains(batch.links, w.trace+"/"+w.id) {
			t.Errorf("the batch's span does not link to the write of trace %s", trace)
		}
		if !slices.Contains(w.links, batch.trace+"/"+batch.id) {
			t.Errorf("the write of trace %s does not link to the batch's span", trace)
		}
	}
	for _, s := range statements {
		if s.kind != "SPAN_KIND_CLIENT" {
			t.Errorf("a span under the batch's is %s %q, want its statements only", s.kind, s.name)
		}
	}
	t.Logf("SUMMARY TestABurstIsTracedAsOneBatchLinkedToEachWrite: batch of %d, %d statements under it", behind, len(statements))
}
