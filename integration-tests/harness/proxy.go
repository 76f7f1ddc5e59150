package harness

import (
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Proxy is a TCP proxy between two real processes (circulation and storage,
// or storage and PostgreSQL) that injects faults on command: latency on
// every chunk forwarded, cutting every open connection, and refusing new
// ones.
type Proxy struct {
	ln     net.Listener
	target string

	mu      sync.Mutex
	latency time.Duration
	refuse  bool
	drop    []string
	// dropNext, lose and hold are the requests lost on their way, those
	// whose answers are lost, and those held back, each for its count of
	// them.
	dropNext, lose, hold []*matched
	conns                map[net.Conn]struct{}
	closed               bool
	// open is closed while the proxy forwards; while it blackholes, open
	// is a channel nobody closes until Blackhole(false).
	open        chan struct{}
	blackholing bool
}

// NewProxy listens on a free loopback port and forwards to target. It is
// closed when the test ends.
func NewProxy(t testing.TB, target string) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("proxy listen: %v", err)
	}
	open := make(chan struct{})
	close(open)
	p := &Proxy{ln: ln, target: target, conns: map[net.Conn]struct{}{}, open: open}
	go p.serve()
	t.Cleanup(p.Close)
	return p
}

// Addr is the proxy's host:port.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// SetLatency delays every chunk forwarded in either direction.
func (p *Proxy) SetLatency(d time.Duration) {
	p.mu.Lock()
	p.latency = d
	p.mu.Unlock()
}

// Refuse makes the proxy close new connections at once (on) or forward
// them again (off).
func (p *Proxy) Refuse(on bool) {
	p.mu.Lock()
	p.refuse = on
	p.mu.Unlock()
}

// DropRequests makes the proxy cut any connection on which the client sends
// a chunk starting with one of prefixes ("DELETE /check-out-lock-storage/"),
// so those kinds of HTTP request fail in transit. None stops dropping.
func (p *Proxy) DropRequests(prefixes ...string) {
	p.mu.Lock()
	p.drop = slices.DeleteFunc(slices.Clone(prefixes), func(s string) bool { return s == "" })
	p.mu.Unlock()
}

// CheckOutWrite is how a check-out's write to storage starts, whichever
// way circulation sends it: the loan's POST after validation's read, or
// the one call that reads and writes once the tenant's settings are
// cached (they are for SETTINGS_CACHE_TTL after each read).
var CheckOutWrite = []string{"POST /loan-storage/loans", "POST /check-out-storage/check-outs"}

// matched is a fault for the next n requests starting with one of
// prefixes; held requests wait until release is closed.
type matched struct {
	prefixes []string
	n        int
	release  chan struct{}
	// arrived is closed when the first request held arrives.
	arrived chan struct{}
}

// take is the first of faults that applies to a request starting with
// chunk, its count taken down; nil for none.
func take(faults []*matched, chunk []byte) *matched {
	for _, f := range faults {
		if f.n > 0 && slices.ContainsFunc(f.prefixes, func(p string) bool { return strings.HasPrefix(string(chunk), p) }) {
			f.n--
			return f
		}
	}
	return nil
}

// DropNext makes the proxy cut the connections of the next n requests
// that start with one of prefixes, before they are forwarded: the server
// never sees them.
func (p *Proxy) DropNext(n int, prefixes ...string) {
	p.mu.Lock()
	p.dropNext = append(p.dropNext, &matched{prefixes: prefixes, n: n})
	p.mu.Unlock()
}

// LoseAnswers makes the proxy forward the next n requests that start
// with one of prefixes ("PUT /loan-storage/loans/") and cut their connections
// when the answer arrives, the answer not forwarded: the server did the
// work, and its client never hears of it.
func (p *Proxy) LoseAnswers(n int, prefixes ...string) {
	p.mu.Lock()
	p.lose = append(p.lose, &matched{prefixes: prefixes, n: n})
	p.mu.Unlock()
}

// Hold makes the proxy hold back the next request that starts with one
// of prefixes until release is called; arrived is closed when it has arrived.
func (p *Proxy) Hold(prefixes ...string) (arrived <-chan struct{}, release func()) {
	f := &matched{prefixes: prefixes, n: 1, release: make(chan struct{}), arrived: make(chan struct{})}
	p.mu.Lock()
	p.hold = append(p.hold, f)
	p.mu.Unlock()
	var once sync.Once
	return f.arrived, func() { once.Do(func() { close(f.release) }) }
}

// Blackhole makes the network between the two sides silent (on), as a
// partition does: connections are still accepted, but nothing is forwarded
// in either direction, and neither side learns that the other closed its
// end, until Blackhole(false) lets everything held through.
func (p *Proxy) Blackhole(on bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case on && !p.blackholing:
		p.open = make(chan struct{})
	case !on && p.blackholing:
		close(p.open)
	}
	p.blackholing = on
}

// passable is a channel that is closed when traffic may pass.
func (p *Proxy) passable() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.open
}

// Cut closes every open connection, as a network failure or a database
// restart would.
func (p *Proxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.conns {
		c.Close()
	}
	p.conns = map[net.Conn]struct{}{}
}

// Close stops the proxy and cuts everything.
func (p *Proxy) Close() {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	p.Blackhole(false)
	p.ln.Close()
	p.Cut()
}

func (p *Proxy) serve() {
	for {
		client, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		refuse, closed := p.refuse, p.closed
		p.mu.Unlock()
		if refuse || closed {
			client.Close()
			continue
		}
		go p.forward(client)
	}
}

func (p *Proxy) forward(client net.Conn) {
	server, err := net.DialTimeout("tcp", p.target, 5*time.Second)
	if err != nil {
		client.Close()
		return
	}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		client.Close()
		server.Close()
		return
	}
	p.conns[client] = struct{}{}
	p.conns[server] = struct{}{}
	p.mu.Unlock()
	var wg sync.WaitGroup
	wg.Add(2)
	// losing says the request in flight on this connection has its
	// answer lost.
	var losing atomic.Bool
	go func() { defer wg.Done(); p.pipe(server, client, true, &losing) }()
	go func() { defer wg.Done(); p.pipe(client, server, false, &losing) }()
	wg.Wait()
	p.mu.Lock()
	delete(p.conns, client)
	delete(p.conns, server)
	p.mu.Unlock()
}

// pipe copies src to dst chunk by chunk, delaying each by the latency, and
// closes both ends when either side ends. fromClient marks the direction in
// which requests travel.
func (p *Proxy) pipe(dst, src net.Conn, fromClient bool, losing *atomic.Bool) {
	// A reader passes chunks, stamped with when they arrived, to a writer
	// that delivers each once the latency has passed since: latency delays
	// the data without limiting how much is in flight, as a long network
	// does.
	type chunk struct {
		data []byte
		at   time.Time
	}
	chunks := make(chan chunk, 1024)
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer func() {
			<-p.passable() // a partition does not carry the news of a close either
			dst.Close()
			src.Close()
		}()
		for c := range chunks {
			p.mu.Lock()
			d := p.latency
			p.mu.Unlock()
			if wait := time.Until(c.at.Add(d)); wait > 0 {
				time.Sleep(wait) // the injected latency itself, not a wait for an event
			}
			<-p.passable()
			if _, err := dst.Write(c.data); err != nil {
				src.Close() // the reader stops
				for range chunks {
				}
				return
			}
		}
	}()
	defer func() {
		close(chunks)
		<-done
	}()
	for {
		buf := make([]byte, 32<<10)
		n, err := src.Read(buf)
		if n > 0 {
			p.mu.Lock()
			drop := p.drop
			var dropped, lost, held *matched
			if fromClient {
				dropped, lost, held = take(p.dropNext, buf[:n]), take(p.lose, buf[:n]), take(p.hold, buf[:n])
			}
			p.mu.Unlock()
			if dropped != nil || fromClient && slices.ContainsFunc(drop, func(prefix string) bool { return strings.HasPrefix(string(buf[:n]), prefix) }) {
				src.Close()
				dst.Close()
				return
			}
			if lost != nil {
				losing.Store(true)
			}
			if held != nil {
				close(held.arrived)
				<-held.release
			}
			if !fromClient && losing.Load() {
				// The answer of a request whose answer is lost: the
				// server sent it, the client never gets it.
				src.Close()
				dst.Close()
				return
			}
			chunks <- chunk{data: buf[:n], at: time.Now()}
		}
		if err != nil {
			return
		}
	}
}
