package integration

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/checkoutlock/integration-tests/harness"
)

// TestEventsThroughAJetStreamCluster: the relays publish to a JetStream
// cluster of three servers, the stream kept by all three
// (NATS_STREAM_REPLICAS=3). The server leading the stream is killed
// (SIGKILL) during a burst of check-outs, more check-outs and check-ins
// go on while it is down, and it is started again; then the same with its
// store deleted before the restart, as after the loss of its disk. Every
// time the restarted server catches up, and the consumer's events are the
// committed loans one for one: none lost, none twice, in order, numbered
// without a gap; the stream holds each event once.
func TestEventsThroughAJetStreamCluster(t *testing.T) {
	t.Parallel()
	nodes := harness.StartNATSCluster(t, 3)
	urls := harness.NATSURLs(nodes)
	c := harness.NewCluster(t, harness.Options{Circulations: 2, Storages: 2, FeatureOn: true, DatabaseURL: relayDatabase(t),
		StorageEnv: []string{"NATS_URL=" + urls, "NATS_STREAM_REPLICAS=3", "OUTBOX_POLL=200ms"}})
	events := harness.WatchEvents(t, urls, eventStream)
	info := harness.StreamInfo(t, urls, eventStream)
	lib := c.SetupLibrary(4, 6, 2)
	burstAtTheLimit(t, c, lib)
	published := func(what string) {
		t.Helper()
		if !harness.Poll(60*time.Second, 100*time.Millisecond, func() bool { return c.PendingEvents(t) == 0 }) {
			t.Fatalf("%d events still wait 60 s %s", c.PendingEvents(t), what)
		}
	}
	published("after the first burst")
	if i := info(); i == nil || i.Config.Replicas != 3 || i.Cluster == nil || len(i.Cluster.Replicas) != 2 {
		t.Fatalf("the stream: %+v, want three replicas", i)
	}
	lostBefore := map[string]int{}
	for _, s := range c.Storages {
		lostBefore[s.Name] = strings.Count(s.Log(), "outbox relay: lead lost")
	}
	for _, wipe := range []bool{false, true} {
		var leader *harness.NATSServer
		waitFor(t, "the stream to have a leader", func() bool {
			i := info()
			for _, n := range nodes {
				if i != nil && i.Cluster != nil && i.Cluster.Leader == n.Name {
					leader = n
				}
			}
			return leader != nil
		})
		checkInAll(t, c, lib)
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			burstAtTheLimit(t, c, lib)
		}()
		leader.Kill()
		wg.Wait()
		checkInAll(t, c, lib)
		burstAtTheLimit(t, c, lib)
		if wipe {
			leader.WipeStore()
		}
		leader.Start()
		published("after the stream's leader was killed and started again (store wiped: " + map[bool]string{false: "no", true: "yes"}[wipe] + ")")
		// A server whose store was wiped catches up from the others
		// (routes, then the stream's snapshot): on a loaded machine that
		// has taken longer than waitFor's 20 s, once.
		current := harness.Poll(60*time.Second, 25*time.Millisecond, func() bool {
			i := info()
			if i == nil || i.Cluster == nil || i.Cluster.Leader == "" || len(i.Cluster.Replicas) != 2 {
				return false
			}
			for _, r := range i.Cluster.Replicas {
				if !r.Current {
					return false
				}
			}
			return true
		})
		if !current {
			t.Fatalf("the stream's replicas are not current a minute after %s was started again (store wiped: %t)", leader.Name, wipe)
		}
		t.Logf("killed %s (store wiped: %t); the stream's leader is now %s", leader.Name, wipe, info().Cluster.Leader)
	}
	got := checkEvents(t, c, events)
	// The leading relay kept its lead while the stream chose a new leader
	// (its publishes waited for acknowledgements meanwhile).
	for _, s := range c.Storages {
		if n := strings.Count(s.Log(), "outbox relay: lead lost"); n != lostBefore[s.Name] {
			t.Errorf("%s lost the lead %d times while a broker was down", s.Name, n-lostBefore[s.Name])
		}
	}
	// The stream holds the tenant's events heard, each once.
	ids := harness.StreamIDs(t, urls, eventStream, c.Tenant)
	stored := 0
	for _, n := range ids {
		stored += n
	}
	if len(ids) != len(got) || stored != len(got) {
		t.Errorf("the stream holds %d messages of the tenant, %d distinct events; the consumer heard %d", stored, len(ids), len(got))
	}
	t.Logf("%d events through a three-server JetStream cluster, each once, in order, and stored once; the consumer was given %d "+
		"again after a server went away (skipped by its place in the stream)", len(got), events.Replayed())
}
