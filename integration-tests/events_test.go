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
	"github.com/checkoutlock/schemas"
)

// eventStream is the stream the relay publishes to (NATS_STREAM's default).
const eventStream = "CHECKOUT_EVENTS"

// relayDatabase is a database of the test's own for a cluster whose
// storage relays events: a relay leads its database's outbox for every
// tenant, so relays of two tests in one database would take turns at one
// lead, each test waiting on the other's.
func relayDatabase(t *testing.T) string { return harness.FreshDatabase(t) }

// eventsRetries are the lock's retry intervals of the events tests: a
// patron's burst waits for the lock as long as a loaded machine may need
// (these tests hold the events to the loans; the burst's pace is
// TestWorkloadBurstHandOff's).
const eventsRetries = "500|1000|2000|4000"

// eventsCluster is a cluster whose storage instances (two: one relays at a
// time) publish their outbox to a NATS server of the test's own.
func eventsCluster(t *testing.T, env ...string) (*harness.Cluster, *harness.NATSServer, *harness.Events) {
	t.Helper()
	broker := harness.StartNATS(t)
	c := harness.NewCluster(t, harness.Options{Circulations: 2, Storages: 2, FeatureOn: true, DatabaseURL: relayDatabase(t),
		RetryIntervalMs: eventsRetries, StorageEnv: append([]string{"NATS_URL=" + broker.URL(), "OUTBOX_POLL=200ms"}, env...)})
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
	sch := schemas.MustLoad()
	ids := map[string]int{}
	for i, e := range got {
		ids[e.ID]++
		if err := sch.ValidateJSON("domain-event.json", e.Raw); err != nil {
			t.Fatalf("event %d is not a domain event: %v\n%s", i, err, e.Raw)
		}
		if want := int64(i + 1); e.Seq != want {
			t.Fatalf("event %d has seq %d (the stream's message %d, after the stream's %d), want %d: commit order with no gap and no repeat",
				i, e.Seq, e.StreamSeq, got[max(i-1, 0)].StreamSeq, want)
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
	checkCausalOrder(t, got)
	return got
}

// checkCausalOrder holds the events to the order of the writes that
// depend on one another: each item's status changes form one chain (each
// change starts from the status the one before it left), and each item's
// check-outs and check-ins alternate, a check-out first.
func checkCausalOrder(t *testing.T, got []harness.Event) {
	t.Helper()
	status := map[string]string{}
	lastMove := map[string]string{}
	for i, e := range got {
		switch {
		case kindOf(e) == "item" && e.Type == "UPDATED":
			var old, updated struct {
				ID     string `json:"id"`
				Status struct {
					Name string `json:"name"`
				} `json:"status"`
			}
			_ = json.Unmarshal(e.Data.Old, &old)
			_ = json.Unmarshal(e.Data.New, &updated)
			if prev, ok := status[old.ID]; ok && prev != old.Status.Name {
				t.Fatalf("event %d: item %s changes from %q, but the event before it left it %q: out of order", i, old.ID, old.Status.Name, prev)
			}
			status[old.ID] = updated.Status.Name
		case e.Type == "CHECKED_OUT" || e.Type == "CHECKED_IN":
			var doc struct {
				ItemID string `json:"itemId"`
			}
			_ = json.Unmarshal(e.Data.New, &doc)
			prev := lastMove[doc.ItemID]
			if e.Type == prev || (prev == "" && e.Type == "CHECKED_IN") {
				t.Fatalf("event %d: item %s %s after %q: out of order", i, doc.ItemID, e.Type, prev)
			}
			lastMove[doc.ItemID] = e.Type
		}
	}
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
	t.Parallel()
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

// TestEventsRelayKilledBetweenPublishingAndMarking: the relay publishes a
// batch and dies before marking it published; the next relay publishes
// it again, and the broker, knowing the event ids, drops the repeats: the
// consumer hears each event once.
func TestEventsRelayKilledBetweenPublishingAndMarking(t *testing.T) {
	t.Parallel()
	broker := harness.StartNATS(t)
	// The cluster's own storage instance relays nothing: the relays are
	// started below.
	c := harness.NewCluster(t, harness.Options{Circulations: 2, FeatureOn: true, RetryIntervalMs: eventsRetries, DatabaseURL: relayDatabase(t)})
	events := harness.WatchEvents(t, broker.URL(), eventStream)
	lib := c.SetupLibrary(3, 4, 2)
	// Check-outs, their items checked in, check-outs again: with no relay
	// running, the first one numbers all these commits at once, in the
	// order they committed (a check-in after the check-out it closes).
	burstAtTheLimit(t, c, lib)
	for p := range lib.Patrons {
		for _, item := range lib.Items[p] {
			if r := c.CheckIn(0, item); r.Status != http.StatusOK && r.Status != http.StatusUnprocessableEntity {
				t.Fatalf("check-in: %d %s", r.Status, r.Body)
			}
		}
	}
	burstAtTheLimit(t, c, lib)
	pending := c.PendingEvents(t)
	crashing := c.LaunchStorage("relay-crashes", "NATS_URL="+broker.URL(), "OUTBOX_FAULT=exit-after-publish")
	if code, exited := crashing.WaitExit(30 * time.Second); !exited || code != 3 {
		t.Fatalf("the relay with the fault did not exit 3 after publishing (exited %t, code %d)", exited, code)
	}
	// The batch reached the consumer, and is still unmarked.
	if !harness.Poll(10*time.Second, 50*time.Millisecond, func() bool { return len(tenantEvents(t, events, c.Tenant)) == pending }) {
		t.Fatalf("the consumer has %d events, want the %d the relay published before dying", len(tenantEvents(t, events, c.Tenant)), pending)
	}
	if n := c.PendingEvents(t); n != pending {
		t.Fatalf("%d events unmarked, want all %d: the relay died before marking", n, pending)
	}
	c.AddStorage("relay", "NATS_URL="+broker.URL(), "OUTBOX_POLL=200ms")
	if !harness.Poll(20*time.Second, 50*time.Millisecond, func() bool { return c.PendingEvents(t) == 0 }) {
		t.Fatal("the second relay did not publish the batch again")
	}
	burstAtTheLimit(t, c, lib)
	checkEvents(t, c, events)
}

// TestEventsWaitForTheBroker: the broker stopped in the middle of bursts
// and started again: every check-out is answered as if nothing happened,
// the events wait in the outbox (its depth and age in the metrics), and
// every one arrives afterwards, once, in order.
func TestEventsWaitForTheBroker(t *testing.T) {
	t.Parallel()
	c, broker, events := eventsCluster(t)
	lib := c.SetupLibrary(4, 6, 2)
	burstAtTheLimit(t, c, lib)
	if !harness.Poll(20*time.Second, 50*time.Millisecond, func() bool { return c.PendingEvents(t) == 0 }) {
		t.Fatal("the events were not published while the broker was up")
	}
	lostBefore := map[string]int{}
	for _, s := range c.Storages {
		lostBefore[s.Name] = strings.Count(s.Log(), "outbox relay: lead lost")
	}
	broker.Stop()
	for p := range lib.Patrons {
		for _, item := range lib.Items[p] {
			if r := c.CheckIn(0, item); r.Status != http.StatusOK && r.Status != http.StatusUnprocessableEntity {
				t.Fatalf("check-in while the broker is down: %d %s", r.Status, r.Body)
			}
		}
	}
	ok, _ := burstAtTheLimit(t, c, lib)
	if ok != 2*len(lib.Patrons) {
		t.Fatalf("%d check-outs while the broker is down, want %d", ok, 2*len(lib.Patrons))
	}
	waiting := c.PendingEvents(t)
	if waiting == 0 {
		t.Fatal("no event waits while the broker is down")
	}
	// The leading relay says how far behind delivery is.
	if !harness.Poll(10*time.Second, 100*time.Millisecond, func() bool {
		for _, s := range c.Storages {
			if v, _ := c.Metric(t, s, "checkout_outbox_depth"); v >= float64(waiting) {
				return true
			}
		}
		return false
	}) {
		t.Fatal("no storage instance's checkout_outbox_depth says the events wait")
	}
	// Down long enough for a publication to fail (the client holds
	// messages while it reconnects, and the broker's acknowledgement is
	// waited for 5 s): the events are then read again from the outbox, in
	// order.
	if !harness.Poll(20*time.Second, 100*time.Millisecond, func() bool {
		for _, s := range c.Storages {
			if v, _ := c.Metric(t, s, "checkout_outbox_publish_failures_total"); v > 0 {
				return true
			}
		}
		return false
	}) {
		t.Fatal("no publication failed while the broker was down")
	}
	broker.Start()
	if !harness.Poll(30*time.Second, 100*time.Millisecond, func() bool { return c.PendingEvents(t) == 0 }) {
		t.Fatalf("%d events still wait 30s after the broker came back", c.PendingEvents(t))
	}
	checkEvents(t, c, events)
	// The leader kept its lead all along: waiting for the broker's
	// acknowledgements and pausing between tries used its session.
	for _, s := range c.Storages {
		if n := strings.Count(s.Log(), "outbox relay: lead lost"); n != lostBefore[s.Name] {
			t.Errorf("%s lost the lead %d times while the broker was away", s.Name, n-lostBefore[s.Name])
		}
	}
}

// TestEventsIfAndOnlyIfLoans: storage's database connections cut again
// and again under bursts (some cuts land in a check-out's write, whose
// batch ends with its commit): afterwards the events are exactly the
// loans that exist, whatever each check-out was answered.
func TestEventsIfAndOnlyIfLoans(t *testing.T) {
	t.Parallel()
	broker := harness.StartNATS(t)
	c := harness.NewCluster(t, harness.Options{Circulations: 2, FeatureOn: true, DatabaseURL: relayDatabase(t), DBProxy: true, RetryIntervalMs: "50|100|200|400|800",
		StorageEnv: []string{"NATS_URL=" + broker.URL(), "OUTBOX_POLL=200ms"}})
	events := harness.WatchEvents(t, broker.URL(), eventStream)
	lib := c.SetupLibrary(8, 4, 2)
	var mu sync.Mutex
	statuses := map[int]int{}
	for round := range 3 {
		done := make(chan struct{})
		go func() {
			defer close(done)
			var wg sync.WaitGroup
			for p, patron := range lib.Patrons {
				for i, item := range lib.Items[p] {
					wg.Add(1)
					go func() {
						defer wg.Done()
						time.Sleep(time.Duration(p*len(lib.Items[p])+i) * 5 * time.Millisecond) // spread over the cuts
						r := c.CheckOut(i, item, patron)
						if r.Status >= 500 && r.Status != http.StatusServiceUnavailable {
							t.Errorf("round %d, check-out %s: %d %s", round, item, r.Status, r.Body)
						}
						mu.Lock()
						statuses[r.Status]++
						mu.Unlock()
					}()
				}
			}
			wg.Wait()
		}()
		for range 4 {
			time.Sleep(40 * time.Millisecond) // the fault schedule, not a wait for an event
			c.DBProxy.Cut()
		}
		<-done
		for p := range lib.Patrons {
			for _, item := range lib.Items[p] {
				c.CheckIn(0, item)
			}
		}
	}
	// The last check-ins may have met a cut: every item back on the
	// shelf before the count.
	for p := range lib.Patrons {
		for _, item := range lib.Items[p] {
			if r := c.CheckIn(0, item); r.Status != http.StatusOK && r.Status != http.StatusUnprocessableEntity {
				t.Fatalf("check-in %s: %d %s", item, r.Status, r.Body)
			}
		}
	}
	got := checkEvents(t, c, events)
	all, _ := loanIDs(t, c)
	t.Logf("check-outs answered %v; %d loans, %d events", statuses, len(all), len(got))
	if statuses[http.StatusServiceUnavailable] == 0 {
		t.Log("no check-out met a cut this time")
	}
}

// TestEventsOfACheckOutThatFillsARequest: a check-out records its events
// itself (not through the triggers): the item's status, the loan, the
// borrower's request filled and the next request moved up, its own
// CHECKED_OUT; consecutive numbers, each old state the one before the
// change. A request's creation, through the triggers, comes before.
func TestEventsOfACheckOutThatFillsARequest(t *testing.T) {
	t.Parallel()
	c, _, events := eventsCluster(t)
	lib := c.SetupLibrary(2, 1, 0)
	item, borrower, next := lib.Items[0][0], lib.Patrons[0], lib.Patrons[1]
	first := c.Request(t, item, borrower, 1)
	second := c.Request(t, item, next, 2)
	if r := c.CheckOut(0, item, borrower); r.Status != http.StatusCreated {
		t.Fatalf("check-out: %d %s", r.Status, r.Body)
	}
	var got []harness.Event
	if !harness.Poll(20*time.Second, 50*time.Millisecond, func() bool {
		got = tenantEvents(t, events, c.Tenant)
		return len(got) > 0 && got[len(got)-1].Type == "CHECKED_OUT"
	}) {
		t.Fatalf("no CHECKED_OUT event within 20s; got %d events", len(got))
	}
	tail := got[len(got)-5:]
	type doc struct {
		ID       string `json:"id"`
		Status   any    `json:"status"`
		Position *int   `json:"position"`
	}
	want := []struct{ kind, typ, id, oldStatus, newStatus string }{
		{"item", "UPDATED", "", "Available", "Checked out"},
		{"loan", "CREATED", "", "", "Open"},
		{"request", "UPDATED", first, "Open - Awaiting pickup", "Closed - Filled"},
		{"request", "UPDATED", second, "Open - Awaiting pickup", "Open - Awaiting pickup"},
		{"check-out", "CHECKED_OUT", "", "", ""},
	}
	statusOf := func(raw json.RawMessage) string {
		var d doc
		_ = json.Unmarshal(raw, &d)
		switch s := d.Status.(type) {
		case string:
			return s
		case map[string]any:
			name, _ := s["name"].(string)
			return name
		}
		return ""
	}
	for i, w := range want {
		e := tail[i]
		if kindOf(e) != w.kind || e.Type != w.typ {
			t.Fatalf("event %d of the check-out is %s %s, want %s %s", i, kindOf(e), e.Type, w.kind, w.typ)
		}
		if i > 0 && e.Seq != tail[i-1].Seq+1 {
			t.Fatalf("event %d of the check-out has seq %d after %d: not consecutive", i, e.Seq, tail[i-1].Seq)
		}
		var d doc
		_ = json.Unmarshal(e.Data.New, &d)
		if w.id != "" && d.ID != w.id {
			t.Fatalf("event %d names request %s, want %s", i, d.ID, w.id)
		}
		if w.newStatus != "" && (statusOf(e.Data.Old) != w.oldStatus || statusOf(e.Data.New) != w.newStatus) {
			t.Fatalf("event %d: status %q -> %q, want %q -> %q", i, statusOf(e.Data.Old), statusOf(e.Data.New), w.oldStatus, w.newStatus)
		}
	}
	var moved, before doc
	_ = json.Unmarshal(tail[3].Data.New, &moved)
	_ = json.Unmarshal(tail[3].Data.Old, &before)
	if moved.Position == nil || before.Position == nil || *moved.Position != 1 || *before.Position != 2 {
		t.Fatalf("the next request moved from position %s to %s, want 2 to 1", tail[3].Data.Old, tail[3].Data.New)
	}
	var filled doc
	_ = json.Unmarshal(tail[2].Data.New, &filled)
	if filled.Position != nil {
		t.Fatalf("the filled request keeps position %d", *filled.Position)
	}
	// The requests' creations came before, through the triggers.
	created := 0
	for _, e := range got[:len(got)-5] {
		if kindOf(e) == "request" && e.Type == "CREATED" {
			created++
		}
	}
	if created != 2 {
		t.Fatalf("%d request CREATED events before the check-out, want 2", created)
	}
}
