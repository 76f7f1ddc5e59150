package harness

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// NATSServer is a NATS server with JetStream, the release the nats module
// pins (built beside the services' binaries, Build), run by the test on a free loopback port with its store in
// the test's directory; stopped when the test ends.
type NATSServer struct {
	t       testing.TB
	Addr    string
	dir     string
	logPath string
	cmd     *exec.Cmd
	exited  chan struct{}
	// Name is the server's name; cluster its arguments as a node of a
	// cluster (none for a server alone).
	Name    string
	cluster []string
}

// StartNATS starts a NATS server with JetStream.
func StartNATS(t testing.TB) *NATSServer {
	t.Helper()
	s := newNATS(t, "nats", nil)
	s.Start()
	return s
}

// StartNATSCluster starts n NATS servers with JetStream as one cluster
// (routes between every two), each with its own store.
func StartNATSCluster(t testing.TB, n int) []*NATSServer {
	t.Helper()
	routes := make([]string, n)
	for i := range routes {
		routes[i] = "nats://" + freeAddr(t)
	}
	nodes := make([]*NATSServer, n)
	for i := range nodes {
		name := fmt.Sprintf("nats-%d", i+1)
		nodes[i] = newNATS(t, name, []string{"-n", name, "--cluster_name", "checkout-events", "--cluster", routes[i],
			"--routes", strings.Join(routes, ",")})
	}
	for _, s := range nodes {
		s.Start()
	}
	return nodes
}

// NATSURLs are the servers' URLs, comma-separated, as NATS_URL takes them.
func NATSURLs(nodes []*NATSServer) string {
	urls := make([]string, len(nodes))
	for i, s := range nodes {
		urls[i] = s.URL()
	}
	return strings.Join(urls, ",")
}

// newNATS prepares a server named name; it is stopped when the test ends.
func newNATS(t testing.TB, name string, cluster []string) *NATSServer {
	s := &NATSServer{t: t, Addr: freeAddr(t), dir: t.TempDir(), Name: name, cluster: cluster,
		logPath: logPath(t, name)}
	t.Cleanup(func() {
		s.Stop()
		if t.Failed() {
			if b, err := os.ReadFile(s.logPath); err == nil {
				t.Logf("---- log of %s ----\n%s", name, tail(b, 50))
			}
		}
	})
	return s
}

// Freeze stops the server (SIGSTOP): its connections stay open and
// nothing is answered, as with a hung broker, until Thaw.
func (s *NATSServer) Freeze() {
	_ = s.cmd.Process.Signal(syscall.SIGSTOP)
	s.t.Cleanup(s.Thaw)
}

// Thaw lets a frozen server go on (SIGCONT).
func (s *NATSServer) Thaw() { _ = s.cmd.Process.Signal(syscall.SIGCONT) }

// Kill ends the server with SIGKILL, as a lost machine would.
func (s *NATSServer) Kill() {
	_ = s.cmd.Process.Kill()
	<-s.exited
}

// WipeStore deletes the server's JetStream store, as a lost disk would:
// started again, it has to be sent what it held.
func (s *NATSServer) WipeStore() {
	s.t.Helper()
	entries, err := os.ReadDir(s.dir)
	if err != nil {
		s.t.Fatal(err)
	}
	for _, e := range entries {
		if err := os.RemoveAll(filepath.Join(s.dir, e.Name())); err != nil {
			s.t.Fatal(err)
		}
	}
}

// PID is the running server's process id.
func (s *NATSServer) PID() int { return s.cmd.Process.Pid }

// PendingEvents counts the tenant's events committed and not yet marked
// published: those not numbered yet, and those numbered after the relay's
// published mark.
func (c *Cluster) PendingEvents(t testing.TB) int {
	t.Helper()
	var n int
	if err := c.DB.QueryRow(context.Background(), `SELECT coalesce((SELECT numbered - published FROM circulation_storage.outbox_tenant WHERE tenant_id = $1), 0)
		+ coalesce((SELECT sum(events) FROM circulation_storage.outbox_commit WHERE tenant_id = $1 AND seq IS NULL), 0)`,
		c.Tenant).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// StreamLastSeq returns a function that reads the stream's last message
// number from the broker (0 while the stream does not exist), for a test
// that waits for the relay without asking the database.
func (s *NATSServer) StreamLastSeq(t testing.TB, stream string) func() uint64 {
	t.Helper()
	info := StreamInfo(t, s.URL(), stream)
	return func() uint64 {
		if i := info(); i != nil {
			return i.State.LastSeq
		}
		return 0
	}
}

// StreamInfo returns a reader of the stream's state as the server or
// cluster at urls (comma-separated) reports it: nil while it cannot say.
func StreamInfo(t testing.TB, urls, stream string) func() *jetstream.StreamInfo {
	t.Helper()
	js := JetStream(t, urls)
	return func() *jetstream.StreamInfo {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		st, err := js.Stream(ctx, stream)
		if err != nil {
			return nil
		}
		return st.CachedInfo()
	}
}

// URL is the server's nats:// URL.
func (s *NATSServer) URL() string { return "nats://" + s.Addr }

// Start starts (or starts again) the server on its port and store, and
// waits until it answers.
func (s *NATSServer) Start() {
	s.t.Helper()
	log, err := os.OpenFile(s.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		s.t.Fatal(err)
	}
	host, port, _ := strings.Cut(s.Addr, ":")
	cmd := exec.Command(filepath.Join(BinDir(), NATSServerBinary), append([]string{"-js", "-a", host, "-p", port, "-sd", s.dir}, s.cluster...)...)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = diesWithTheTests()
	if err := cmd.Start(); err != nil {
		s.t.Fatalf("start nats-server: %v", err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		log.Close()
		close(exited)
	}()
	s.cmd, s.exited = cmd, exited
	deadline := time.Now().Add(15 * time.Second)
	for {
		nc, err := nats.Connect(s.URL(), nats.Timeout(time.Second))
		if err == nil {
			// Every test's broker is the release the project pins.
			got := "v" + nc.ConnectedServerVersion()
			nc.Close()
			if want := PinnedNATSVersion(s.t); got != want {
				s.t.Fatalf("the NATS server at %s is %s, %s/go.mod pins %s", s.Addr, got, NATSServerModule, want)
			}
			return
		}
		select {
		case <-exited:
			s.t.Fatalf("nats-server exited while starting; see %s", s.logPath)
		default:
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("nats-server not answering at %s after 15s: %v", s.Addr, err)
		}
		time.Sleep(20 * time.Millisecond) // polling the port, with a deadline
	}
}

// Stop stops the server (SIGTERM, then SIGKILL after 10 s).
func (s *NATSServer) Stop() {
	if s.cmd == nil {
		return
	}
	select {
	case <-s.exited:
		return
	default:
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	_ = s.cmd.Process.Signal(syscall.SIGCONT) // a frozen server acts on SIGTERM once it goes on
	select {
	case <-s.exited:
	case <-time.After(10 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.exited
	}
}

// Event is a domain event as a consumer receives it.
type Event struct {
	Subject string
	// Seq is the tenant's sequence number (header Outbox-Seq): commit order.
	Seq       int64
	ID        string `json:"id"`
	Type      string `json:"type"`
	Tenant    string `json:"tenant"`
	Timestamp int64  `json:"timestamp"`
	Data      struct {
		Old json.RawMessage `json:"old"`
		New json.RawMessage `json:"new"`
	} `json:"data"`
	// StreamSeq is the message's number in the stream.
	StreamSeq uint64
	// Raw is the message's body; Received when the consumer got it.
	Raw      []byte
	Received time.Time
}

// Events is a consumer of a stream from its first message: what it
// received so far, in order.
type Events struct {
	mu   sync.Mutex
	list []Event
	bad  []string
	// position is the number in the stream of the last message taken;
	// replayed counts those given again before it.
	position uint64
	replayed int
}

// WatchEvents consumes stream at url (an ordered consumer, from the
// start; the stream may not exist yet) until the test ends.
func WatchEvents(t testing.TB, url, stream string) *Events {
	t.Helper()
	nc, err := nats.Connect(url, nats.MaxReconnects(-1), nats.ReconnectWait(100*time.Millisecond), nats.RetryOnFailedConnect(true))
	if err != nil {
		t.Fatal(err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	e := &Events{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		var cc jetstream.ConsumeContext
		for ctx.Err() == nil {
			cons, err := js.OrderedConsumer(ctx, stream, jetstream.OrderedConsumerConfig{})
			if err == nil {
				cc, err = cons.Consume(func(m jetstream.Msg) {
					e.add(m)
				})
				if err == nil {
					break
				}
			}
			t := time.NewTimer(100 * time.Millisecond)
			select {
			case <-ctx.Done():
			case <-t.C:
			}
		}
		<-ctx.Done()
		if cc != nil {
			cc.Stop()
		}
	}()
	t.Cleanup(func() {
		cancel()
		<-done
		nc.Close()
	})
	return e
}

func (e *Events) add(m jetstream.Msg) {
	var ev Event
	err := json.Unmarshal(m.Data(), &ev)
	ev.Subject, ev.Raw, ev.Received = m.Subject(), m.Data(), time.Now()
	ev.Seq, _ = strconv.ParseInt(m.Headers().Get("Outbox-Seq"), 10, 64)
	if md, err := m.Metadata(); err == nil {
		ev.StreamSeq = md.Sequence.Stream
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if ev.StreamSeq != 0 && ev.StreamSeq <= e.position {
		// The ordered consumer, recreated after the server that served it
		// went away, can start again before where it was: a consumer keeps
		// its place in the stream and skips what it has had. A repeat the
		// stream stored twice has a number of its own, and is kept.
		e.replayed++
		return
	}
	e.position = max(e.position, ev.StreamSeq)
	if err != nil {
		e.bad = append(e.bad, fmt.Sprintf("%s: %v: %s", m.Subject(), err, m.Data()))
		return
	}
	e.list = append(e.list, ev)
}

// Replayed is how many messages the consumer was given again, before its
// place in the stream, and skipped.
func (e *Events) Replayed() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.replayed
}

// All is every event received so far, in order, and the messages that
// were not events.
func (e *Events) All() ([]Event, []string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.list), slices.Clone(e.bad)
}

// StreamIDs reads every message of the stream at urls and returns how many
// times each message id (Nats-Msg-Id: the event's id) of tenant's events is
// stored (the relays publish every tenant's of the database).
func StreamIDs(t testing.TB, urls, stream, tenant string) map[string]int {
	t.Helper()
	js := JetStream(t, urls)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st, err := js.Stream(ctx, stream)
	if err != nil {
		t.Fatal(err)
	}
	state := st.CachedInfo().State
	ids := map[string]int{}
	for seq := state.FirstSeq; seq <= state.LastSeq && seq > 0; seq++ {
		m, err := st.GetMsg(ctx, seq)
		if err != nil {
			continue // deleted
		}
		if strings.Contains(m.Subject, "."+tenant+".") {
			ids[m.Header.Get(jetstream.MsgIDHeader)]++
		}
	}
	return ids
}

// JetStream is a JetStream client of the server or cluster at urls
// (comma-separated), reconnecting by itself, closed when the test ends.
func JetStream(t testing.TB, urls string) jetstream.JetStream {
	t.Helper()
	nc, err := nats.Connect(urls, nats.MaxReconnects(-1), nats.ReconnectWait(100*time.Millisecond), nats.RetryOnFailedConnect(true))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return js
}
