package integration

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/checkoutlock/integration-tests/harness"
)

// eventStream is the stream the relay publishes to (NATS_STREAM's default).
const eventStream = "CHECKOUT_EVENTS"

// eventsCluster is a cluster whose storage instances (two: one relays at a
// time) publish their outbox to a NATS server of the test's own.
func eventsCluster(t *testing.T, env ...string) (*harness.Cluster, *harness.NATSServer, *harness.Events) {
	t.Helper()
	broker := harness.StartNATS(t)
	c := harness.NewCluster(t, harness.Options{Circulations: 2, Storages: 2, FeatureOn: true,
		StorageEnv: append([]string{"NATS_URL=" + broker.URL(), "OUTBOX_POLL=200ms"}, env...)})
	return c, broker, harness.WatchEvents(t, broker.URL(), eventStream)
}

// loanIDs are the ids of every loan of the cluster's tenant, and of the
// closed ones.
func loanIDs(t *testing.T, c *harness.Cluster) (all, closed []string) {
	t.Helper()
	rows, err := c.DB.Query(t.Context(), fmt.Sprintf(`SELECT id::text, status_name FROM %s.loan`, c.Schema))
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var id, status string
		if err := rows.Scan(&id, &status); err != nil {
			t.Fatal(err)
		}
		all = append(all, id)
		if status == "Closed" {
			closed = append(closed, id)
		}
	}
	return all, closed
}

// tenantEvents are the events of tenant received so far.
func tenantEvents(t *testing.T, events *harness.Events, tenant string) []harness.Event {
	t.Helper()
	all, bad := events.All()
	if len(bad) > 0 {
		t.Fatalf("messages that are not events: %v", bad)
	}
	var out []harness.Event
	for _, e := range all {
		if e.Tenant == tenant {
			out = append(out, e)
		}
	}
	return out
}

// checkEvents holds the consumer's events of the cluster's tenant to the
// database: every event once, in commit order with no gap, one check-out
// event and one loan creation per loan, one check-in event per closed
// loan, and nothing else of loans.
func checkEvents(t *testing.T, c *harness.Cluster, events *harness.Events) []harness.Event {
	t.Helper()
	all, closed := loanIDs(t, c)
	var got []harness.Event
	if !harness.Poll(30*time.Second, 100*time.Millisecond, func() bool {
		got = tenantEvents(t, events, c.Tenant)
		n := 0
		for _, e := range got {
			if e.Type == "CHECKED_OUT" || e.Type == "CHECKED_IN" {
				n++
			}
		}
		return n >= len(all)+len(closed)
	}) {
		t.Fatalf("%d events of check-outs and check-ins arrived within 30s, want %d", len(got), len(all)+len(closed))
	}
	ids := map[string]int{}
	for i, e := range got {
		ids[e.ID]++
		if want := int64(i + 1); e.Seq != want {
			t.Fatalf("event %d has seq %d, want %d: commit order with no gap and no repeat", i, e.Seq, want)
		}
		if !strings.HasSuffix(e.Subject, "."+c.Tenant+"."+kindOf(e)) {
			t.Fatalf("event %s on subject %s", e.ID, e.Subject)
		}
	}
	for id, n := range ids {
		if n > 1 {
			t.Fatalf("event %s arrived %d times", id, n)
		}
	}
	checkedOut, created, checkedIn := map[string]int{}, map[string]int{}, map[string]int{}
	for _, e := range got {
		var doc struct {
			ID     string `json:"id"`
			LoanID string `json:"loanId"`
		}
		_ = json.Unmarshal(e.Data.New, &doc)
		switch {
		case e.Type == "CHECKED_OUT":
			checkedOut[doc.LoanID]++
		case e.Type == "CHECKED_IN":
			checkedIn[doc.LoanID]++
		case strings.HasSuffix(e.Subject, ".loan") && e.Type == "CREATED":
			created[doc.ID]++
		}
	}
	for name, m := range map[string]map[string]int{"CHECKED_OUT": checkedOut, "loan CREATED": created} {
		if len(m) != len(all) {
			t.Fatalf("%d loans have a %s event; the database holds %d loans", len(m), name, len(all))
		}
		for _, id := range all {
			if m[id] != 1 {
				t.Fatalf("loan %s has %d %s events, want 1", id, m[id], name)
			}
		}
	}
	if len(checkedIn) != len(closed) {
		t.Fatalf("%d CHECKED_IN events for %d closed loans", len(checkedIn), len(closed))
	}
	return got
}

// kindOf is the kind an event's subject names, from its type and data.
func kindOf(e harness.Event) string {
	return e.Subject[strings.LastIndexByte(e.Subject, '.')+1:]
}

// burstAtTheLimit has each patron scan all their items at once, over the
// circulation instances: most are refused at the limit.
func burstAtTheLimit(t *testing.T, c *harness.Cluster, lib harness.Library) (ok, refused int) {
	t.Helper()
	var mu sync.Mutex
	var wg sync.WaitGroup
	for p, patron := range lib.Patrons {
		for i, item := range lib.Items[p] {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r := c.CheckOut(i, item, patron)
				mu.Lock()
				defer mu.Unlock()
				switch r.Status {
				case http.StatusCreated:
					ok++
				case http.StatusUnprocessableEntity:
					refused++
				default:
					t.Errorf("check-out %s: %d %s", item, r.Status, r.Body)
				}
			}()
		}
	}
	wg.Wait()
	return ok, refused
}

// TestEventsEqualTheCommittedLoans: bursts of check-outs for patrons at
// their limit (most refused), and check-ins between them, through a real
// NATS JetStream: the consumer's events are the committed loans one for
// one, none for a refused check-out, none twice, in commit order.
func TestEventsEqualTheCommittedLoans(t *testing.T) {
	c, _, events := eventsCluster(t)
	lib := c.SetupLibrary(4, 6, 2)
	totalOK, totalRefused := 0, 0
	for round := range 3 {
		ok, refused := burstAtTheLimit(t, c, lib)
		totalOK, totalRefused = totalOK+ok, totalRefused+refused
		if ok != 2*len(lib.Patrons) {
			t.Fatalf("round %d: %d check-outs, want %d", round, ok, 2*len(lib.Patrons))
		}
		for p := range lib.Patrons {
			for _, item := range lib.Items[p] {
				if r := c.CheckIn(0, item); r.Status != http.StatusOK && r.Status != http.StatusUnprocessableEntity {
					t.Fatalf("check-in %s: %d %s", item, r.Status, r.Body)
				}
			}
		}
	}
	got := checkEvents(t, c, events)
	statuses := map[string]int{}
	for _, e := range got {
		if strings.HasSuffix(e.Subject, ".item") && e.Type == "UPDATED" {
			var item struct {
				Status struct{ Name string } `json:"status"`
			}
			_ = json.Unmarshal(e.Data.New, &item)
			statuses[item.Status.Name]++
		}
	}
	if statuses["Checked out"] != totalOK {
		t.Fatalf("%d item events to Checked out for %d check-outs", statuses["Checked out"], totalOK)
	}
	t.Logf("%d check-outs, %d refused, %d events in order", totalOK, totalRefused, len(got))
	if slices.ContainsFunc(got, func(e harness.Event) bool { return e.Timestamp == 0 || e.Tenant != c.Tenant }) {
		t.Fatal("an event without its timestamp or tenant")
	}
}
