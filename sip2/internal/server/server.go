// Package server is the SIP2 door: listeners per tenant that accept kiosks'
// connections, read one message at a time, and answer each in order
// through circulation.
package server

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/checkoutlock/schemas"
	"github.com/checkoutlock/sip2/internal/circ"
)

// Options are the door's limits and timeouts (config.SIP2).
type Options struct {
	MaxLine                  int
	MaxConnections           int
	MaxConnectionsPerAddress int
	LoginTimeout             time.Duration
	IdleTimeout              time.Duration
	LineTimeout              time.Duration
	WriteTimeout             time.Duration
	CallTimeout              time.Duration
	// OfflineWithin bounds the age of a transaction made offline and
	// sent later (no block = Y): older, it is refused.
	OfflineWithin time.Duration
	// OfflineGrace is how near a time the door saw the kiosk cut off (its
	// login on this connection, the library system not answering) a
	// transaction marked offline may be dated and still be taken as made
	// offline; one dated while the door saw the kiosk on line is judged
	// as a live one.
	OfflineGrace time.Duration
	// PresenceEvery is the least time between two records of one
	// connection's kiosk on line (seen).
	PresenceEvery time.Duration
}

// Server is the door: its listeners, the connections they accepted, and
// the circulation it answers through.
type Server struct {
	opts    Options
	circ    *circ.Client
	logger  *slog.Logger
	metrics *Metrics

	// calls is the context every call to circulation is made in (a
	// message's and a logout's, each within its own timeout):
	// abandonCalls cancels it when a shutdown runs out of time.
	calls        context.Context
	abandonCalls context.CancelFunc

	mu        sync.Mutex
	listeners map[string]*listener // by configured address
	conns     map[*conn]struct{}
	perAddr   map[string]int
	// awaiting counts the connections of PROXY-protocol listeners held
	// before their header names the kiosk's address: within
	// MaxConnections with conns, so that connections that send nothing
	// are bounded as every other is.
	awaiting int
	closing  bool
	// serving counts the connections admitted whose serve has not
	// returned: their last message answered and their kiosk logged out.
	// It is added to under mu, never once closing is set, so Shutdown
	// may wait on it.
	serving sync.WaitGroup
	// ended is the sessions that ended within EndedSessionsFor, oldest
	// first, at most EndedSessionsKept of them: the kiosks' day, which
	// the lock console lists beside the kiosks connected now.
	ended []schemas.Kiosk
	// ready is circulation's readiness, which 98 tells the kiosks;
	// offline whether their libraries take check-outs made offline.
	ready   *readiness
	offline offlineLending
}

// The kiosks' day: ended sessions are listed for a day, and at most this
// many are kept, the oldest leaving first, whatever the door's traffic.
const (
	EndedSessionsFor  = 24 * time.Hour
	EndedSessionsKept = 1000
)

// New returns a door answering through c.
func New(opts Options, c *circ.Client, logger *slog.Logger, metrics *Metrics) *Server {
	calls, abandon := context.WithCancel(context.Background())
	return &Server{opts: opts, circ: c, logger: logger, metrics: metrics, calls: calls, abandonCalls: abandon,
		listeners: map[string]*listener{}, conns: map[*conn]struct{}{}, perAddr: map[string]int{},
		ready: &readiness{ask: c.Ready, base: calls, grace: opts.OfflineGrace}}
}

// listener is one configured address: its socket and its current
// settings, which a reload may change for the connections that come next.
type listener struct {
	ln    net.Listener
	bound string
	mu    sync.Mutex
	cfg   Listener
	tls   *tls.Config
}

func (l *listener) settings() (Listener, *tls.Config) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.cfg, l.tls
}

// Bound is a listener as it runs: its configured address, the address it
// is bound to (the port chosen when the configuration says 0), and its
// tenant.
type Bound struct {
	Address string `json:"address"`
	Bound   string `json:"bound"`
	Tenant  string `json:"tenant"`
	TLS     bool   `json:"tls"`
}

// Listeners lists the running listeners.
func (s *Server) Listeners() []Bound {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Bound, 0, len(s.listeners))
	for addr, l := range s.listeners {
		cfg, t := l.settings()
		out = append(out, Bound{Address: addr, Bound: l.bound, Tenant: cfg.Tenant, TLS: t != nil})
	}
	return out
}

// Apply starts the configuration's listeners: on a reload, a listener
// whose address stays keeps its socket and its connections and takes the
// new settings for connections to come; a new address starts listening; a
// removed one stops accepting (its connections go on until they end).
// Nothing changes when any listener of c cannot start.
func (s *Server) Apply(c Config) error {
	type prepared struct {
		cfg Listener
		tls *tls.Config
	}
	ready := make(map[string]prepared, len(c.Listeners))
	for _, l := range c.Listeners {
		t, err := tlsConfig(l)
		if err != nil {
			return fmt.Errorf("listener %s: %w", l.Address, err)
		}
		ready[l.Address] = prepared{l, t}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closing {
		return errors.New("the door is shutting down")
	}
	started := map[string]*listener{}
	for addr, p := range ready {
		if _, ok := s.listeners[addr]; ok {
			continue
		}
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			for _, l := range started {
				l.ln.Close()
			}
			return fmt.Errorf("listener %s: %w", addr, err)
		}
		started[addr] = &listener{ln: ln, bound: ln.Addr().String(), cfg: p.cfg, tls: p.tls}
	}
	for addr, l := range s.listeners {
		p, keep := ready[addr]
		if !keep {
			l.ln.Close()
			delete(s.listeners, addr)
			s.logger.Info("listener stopped", slog.String("address", addr))
			continue
		}
		l.mu.Lock()
		l.cfg, l.tls = p.cfg, p.tls
		l.mu.Unlock()
	}
	for addr, l := range started {
		s.listeners[addr] = l
		go s.accept(l)
		s.logger.Info("listening", slog.String("address", addr), slog.String("bound", l.bound),
			slog.String("tenant", l.cfg.Tenant), slog.Bool("tls", l.tls != nil))
	}
	return nil
}

// tlsConfig is a listener's TLS configuration, nil for plain TCP: TLS 1.2
// or later, and client certificates verified when it names their CAs.
func tlsConfig(l Listener) (*tls.Config, error) {
	if l.TLS == nil {
		return nil, nil
	}
	cert, err := tls.LoadX509KeyPair(l.TLS.CertFile, l.TLS.KeyFile)
	if err != nil {
		return nil, err
	}
	c := &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{cert}}
	if l.TLS.ClientCAFile != "" {
		pem, err := os.ReadFile(l.TLS.ClientCAFile)
		if err != nil {
			return nil, err
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("clientCaFile %s holds no PEM certificate", l.TLS.ClientCAFile)
		}
		c.ClientCAs, c.ClientAuth = pool, tls.RequireAndVerifyClientCert
	}
	return c, nil
}

// accept takes a listener's connections until it is closed.
func (s *Server) accept(l *listener) {
	var delay time.Duration
	for {
		nc, err := l.ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			// Out of file descriptors and the like: back off a little.
			delay = min(max(2*delay, 5*time.Millisecond), time.Second)
			s.logger.Warn("accept", slog.Any("error", err))
			t := time.NewTimer(delay)
			<-t.C
			continue
		}
		delay = 0
		cfg, tc := l.settings()
		c := &conn{s: s, nc: nc, cfg: cfg, tls: tc}
		c.at(hostOf(nc.RemoteAddr()))
		if !s.admitFirst(c) {
			nc.Close()
			continue
		}
		go c.serve()
	}
}

// admitFirst admits a connection as it is accepted: admit, or, for a
// PROXY-protocol listener, whose connections name the kiosk's address
// only in their header, a place among MaxConnections until the header
// comes (awaiting; admit then counts it for its address).
func (s *Server) admitFirst(c *conn) bool {
	if !c.cfg.ProxyProtocol {
		return s.admit(c)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closing || len(s.conns)+s.awaiting >= s.opts.MaxConnections {
		s.metrics.refused.WithLabelValues("total").Inc()
		return false
	}
	s.awaiting++
	c.awaiting = true
	return true
}

// admit counts a connection in, unless the door is at its cap in total
// or for the connection's address.
func (s *Server) admit(c *conn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if c.awaiting {
		s.awaiting--
		c.awaiting = false
	}
	switch {
	case s.closing:
		return false
	case len(s.conns)+s.awaiting >= s.opts.MaxConnections:
		s.metrics.refused.WithLabelValues("total").Inc()
		return false
	case s.perAddr[c.peer] >= s.opts.MaxConnectionsPerAddress:
		s.metrics.refused.WithLabelValues("address").Inc()
		return false
	}
	s.conns[c] = struct{}{}
	s.perAddr[c.peer]++
	s.serving.Add(1)
	c.admitted = true
	s.metrics.connections.Inc()
	return true
}

// release counts a connection out, once its kiosk is logged out.
func (s *Server) release(c *conn) {
	k := c.kiosk()
	now := time.Now()
	k.Ended = &now
	s.mu.Lock()
	defer s.mu.Unlock()
	if c.awaiting {
		s.awaiting--
		c.awaiting = false
	}
	if !c.admitted {
		return
	}
	s.ended = append(s.ended, k)
	drop := max(0, len(s.ended)-EndedSessionsKept)
	for drop < len(s.ended) && now.Sub(*s.ended[drop].Ended) > EndedSessionsFor {
		drop++
	}
	s.ended = slices.Delete(s.ended, 0, drop)
	delete(s.conns, c)
	if s.perAddr[c.peer]--; s.perAddr[c.peer] <= 0 {
		delete(s.perAddr, c.peer)
	}
	s.metrics.connections.Dec()
	s.serving.Done()
}

// Kiosks lists the kiosks of tenant ("" for all) connected now, then
// those whose sessions ended within EndedSessionsFor, the latest first.
func (s *Server) Kiosks(tenant string) []schemas.Kiosk {
	s.mu.Lock()
	conns := make([]*conn, 0, len(s.conns))
	for c := range s.conns {
		conns = append(conns, c)
	}
	var ended []schemas.Kiosk
	for i := len(s.ended) - 1; i >= 0; i-- {
		if k := s.ended[i]; (tenant == "" || k.Tenant == tenant) && time.Since(*k.Ended) <= EndedSessionsFor {
			ended = append(ended, k)
		}
	}
	s.mu.Unlock()
	out := []schemas.Kiosk{}
	for _, c := range conns {
		k := c.kiosk()
		if tenant == "" || k.Tenant == tenant {
			out = append(out, k)
		}
	}
	slices.SortFunc(out, func(a, b schemas.Kiosk) int { return b.Since.Compare(a.Since) })
	return append(out, ended...)
}

// Shutdown stops accepting and ends every connection: a message being
// handled is answered first, then the connection closes and its kiosk is
// logged out at circulation, each connection on its own goroutine, so the
// logouts of many kiosks run at once. It returns when every connection
// has ended, logout included. When ctx ends first, every call still
// running (a message's or a logout's) is abandoned and every connection
// closed: each then ends at once, logging a logout it could not do, and
// Shutdown returns ctx's error.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	s.closing = true
	for _, l := range s.listeners {
		l.ln.Close()
	}
	conns := make([]*conn, 0, len(s.conns))
	for c := range s.conns {
		conns = append(conns, c)
	}
	s.mu.Unlock()
	// A connection waiting for its next message is woken and ends; one
	// handling a message answers it first.
	for _, c := range conns {
		c.stopReading()
	}
	done := make(chan struct{})
	go func() {
		s.serving.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
	}
	// Nothing a connection waits on is left: its calls are cancelled and
	// its socket closed, so the wait below is short.
	s.abandonCalls()
	for _, c := range conns {
		c.nc.Close()
	}
	<-done
	return ctx.Err()
}

func hostOf(a net.Addr) string {
	host, _, err := net.SplitHostPort(a.String())
	if err != nil {
		return a.String()
	}
	return host
}
