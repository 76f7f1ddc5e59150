package server

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/checkoutlock/schemas"
	"github.com/checkoutlock/sip2/internal/circ"
)

// conn is one kiosk's connection: read a message, answer it, read the
// next; never two at once, so replies come out in the order asked.
type conn struct {
	s    *Server
	nc   net.Conn
	rw   net.Conn // nc, or TLS over it
	cfg  Listener
	tls  *tls.Config
	peer string
	// log is the door's logger naming the connection's tenant and peer,
	// so that every line about the connection says both (at sets it).
	log      *slog.Logger
	admitted bool
	// awaiting is a PROXY-protocol connection counted in before its
	// header (Server.admitFirst).
	awaiting bool
	stop     atomic.Bool

	// The read buffer: at most MaxLine bytes of a message not yet ended,
	// and its CR.
	buf         []byte
	start, end  int
	lineStarted time.Time
	loginBy     time.Time

	// lastRaw and lastReply are the last message handled and its reply: a
	// message sent again with the same sequence number and checksum gets
	// the reply again (97 too), and nothing is done twice.
	lastRaw, lastReply []byte
	// bad counts bad messages in a row.
	bad int
	// msgCtx is the context of the message being handled: the door's
	// calls' context with the message's span, which the calls to
	// circulation continue (nil between messages).
	msgCtx context.Context

	mu      sync.Mutex // guards what the console reads
	session *circ.Session
	// location is the location code the kiosk gave at its login (CP),
	// cut to schemas.MaxKioskLocation: the machine's name.
	location string
	// loginAt is when the kiosk logged in on this connection: from then
	// on, while the library system answers, the door sees it on line.
	loginAt time.Time
	// presence is the record of the kiosk's presence (seen).
	presence presence
	since    time.Time
	last     time.Time
	messages int64
	// refusals counts the messages the library said no to (refusal), and
	// lastCode is the last message's command code.
	refusals int64
	lastCode string
}

// Errors that end a connection, with the reason the metrics give.
var (
	errTooLong     = errors.New("message longer than SIP2_MAX_LINE")
	errLineTimeout = errors.New("message not ended within SIP2_LINE_TIMEOUT")
	errIdle        = errors.New("nothing sent within SIP2_IDLE_TIMEOUT")
	errNoLogin     = errors.New("no login within SIP2_LOGIN_TIMEOUT")
	errStopping    = errors.New("the door is shutting down")
)

func (c *conn) serve() {
	defer c.s.release(c)
	defer c.logout()
	defer c.nc.Close()
	now := time.Now()
	c.since, c.last, c.loginBy = now, now, now.Add(c.s.opts.LoginTimeout)
	if c.cfg.ProxyProtocol {
		peer, err := readProxyHeader(c.nc, c.loginBy)
		if err != nil {
			c.closed("proxy_header", err)
			return
		}
		c.at(peer)
		if !c.s.admit(c) {
			return
		}
	}
	c.rw = c.nc
	if c.tls != nil {
		tc := tls.Server(c.nc, c.tls)
		_ = tc.SetDeadline(c.loginBy)
		if c.stop.Load() {
			// Woken by a shutdown before that deadline replaced its own.
			c.closed("shutdown", nil)
			return
		}
		if err := tc.Handshake(); err != nil {
			c.closed("tls", err)
			return
		}
		_ = tc.SetDeadline(time.Time{})
		c.rw = tc
	}
	c.buf = make([]byte, c.s.opts.MaxLine+1)
	for {
		line, err := c.readLine()
		if err != nil {
			c.closed(reasonOf(err), err)
			return
		}
		if c.stop.Load() || c.s.shuttingDown() {
			c.closed("shutdown", nil)
			return
		}
		if !c.handle(line) {
			c.closed("bad_messages", errors.New("three bad messages in a row"))
			return
		}
		if s := c.sessionOf(); s != nil && s.Ended() {
			// The kiosk's account was disabled or deleted, or its session
			// ended: it connects and logs in again, or cannot.
			c.closed("session_ended", circ.ErrSessionEnded)
			return
		}
		if c.stop.Load() {
			c.closed("shutdown", nil)
			return
		}
	}
}

// stopReading wakes a connection waiting for its next message, which then
// ends; one handling a message answers it first.
func (c *conn) stopReading() {
	c.stop.Store(true)
	_ = c.nc.SetReadDeadline(time.Now())
}

func (c *conn) loggedIn() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.session != nil
}

// readLine is the next message, without its CR: a CR or an LF ends a
// message, empty ones are skipped (so CR LF is one end). It reads at most
// MaxLine bytes of a message, and waits for one within the login, idle and
// partial-line timeouts.
func (c *conn) readLine() ([]byte, error) {
	for {
		for c.start < c.end && (c.buf[c.start] == '\r' || c.buf[c.start] == '\n') {
			c.start++
		}
		pending := c.buf[c.start:c.end]
		if i := bytes.IndexAny(pending, "\r\n"); i >= 0 {
			c.start += i + 1
			c.lineStarted = time.Time{}
			return pending[:i], nil
		}
		if len(pending) >= len(c.buf) {
			return nil, errTooLong
		}
		if c.start > 0 {
			c.end = copy(c.buf, pending)
			c.start = 0
		}
		var deadline time.Time
		var late error
		switch {
		case c.end > 0:
			if c.lineStarted.IsZero() {
				c.lineStarted = time.Now()
			}
			deadline, late = c.lineStarted.Add(c.s.opts.LineTimeout), errLineTimeout
		case c.loggedIn():
			deadline, late = time.Now().Add(c.s.opts.IdleTimeout), errIdle
		default:
			deadline, late = c.loginBy, errNoLogin
		}
		if !c.loggedIn() && c.loginBy.Before(deadline) {
			deadline, late = c.loginBy, errNoLogin
		}
		_ = c.rw.SetReadDeadline(deadline)
		// stopReading may have woken the connection just before that
		// deadline replaced its own: then its stop is seen here, rather
		// than waited out until the idle timeout.
		if c.stop.Load() {
			return nil, errStopping
		}
		n, err := c.rw.Read(c.buf[c.end:])
		c.end += n
		if err != nil {
			if errors.Is(err, os.ErrDeadlineExceeded) && !c.stop.Load() {
				return nil, late
			}
			return nil, err
		}
	}
}

func reasonOf(err error) string {
	switch {
	case errors.Is(err, errTooLong):
		return "too_long"
	case errors.Is(err, errLineTimeout):
		return "line_timeout"
	case errors.Is(err, errIdle):
		return "idle"
	case errors.Is(err, errNoLogin):
		return "no_login"
	case errors.Is(err, errStopping), errors.Is(err, os.ErrDeadlineExceeded):
		return "shutdown"
	}
	return "closed"
}

// at records the address the connection's kiosk is at: the peer the
// socket names, or the one a proxy's header names.
func (c *conn) at(peer string) {
	c.peer = peer
	c.log = c.s.logger.With(slog.String("tenant", c.cfg.Tenant), slog.String("peer", peer))
}

// closed logs and counts a connection's end.
func (c *conn) closed(reason string, err error) {
	c.s.metrics.closed.WithLabelValues(reason).Inc()
	attrs := []any{slog.String("reason", reason)}
	if s := c.sessionOf(); s != nil {
		attrs = append(attrs, slog.String("kiosk", s.Username))
	}
	if err != nil && reason != "closed" {
		attrs = append(attrs, slog.String("error", err.Error()))
	}
	c.log.Info("connection closed", attrs...)
}

// logout ends the kiosk's session when its connection ends: the next
// connection logs in again, and no session outlives the connection that
// started it. Best effort, within the call timeout; on a shutdown, also
// within the shutdown's deadline. A session not ended here lives on at
// storage until its refresh token expires, so each is logged.
func (c *conn) logout() { c.endSession(c.sessionOf()) }

// endSession ends session s at storage (logout's way), when there is one
// not ended yet.
func (c *conn) endSession(s *circ.Session) {
	if s == nil || s.Ended() {
		return
	}
	ctx, cancel := c.call()
	defer cancel()
	if err := c.s.circ.Logout(ctx, s); err != nil {
		c.log.Warn("logout not done: the kiosk's session lives on until it expires",
			slog.String("kiosk", s.Username), slog.Bool("shutdown_deadline", c.s.calls.Err() != nil),
			slog.Any("error", err))
	}
}

func (c *conn) sessionOf() *circ.Session {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.session
}

// write sends a reply within the write timeout.
func (c *conn) write(reply []byte) error {
	_ = c.rw.SetWriteDeadline(time.Now().Add(c.s.opts.WriteTimeout))
	_, err := c.rw.Write(reply)
	return err
}

// kiosk is the connection as the console lists it.
func (c *conn) kiosk() schemas.Kiosk {
	c.mu.Lock()
	defer c.mu.Unlock()
	k := schemas.Kiosk{Tenant: c.cfg.Tenant, Address: c.peer, Since: c.since, LastMessage: c.last, Messages: c.messages,
		Listener: c.cfg.Address, LoggedIn: c.session != nil, Refusals: c.refusals, LastCode: c.lastCode}
	if c.session != nil {
		k.Username, k.Location = c.session.Username, c.location
	}
	return k
}

// shuttingDown says whether Shutdown has begun: a message read after it
// is not handled.
func (s *Server) shuttingDown() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closing
}

// readProxyHeader reads a PROXY protocol v1 header ("PROXY TCP4 <src>
// <dst> <sport> <dport>\r\n", at most 107 bytes) byte by byte, so that
// nothing after it is taken, and returns the client's address it names.
func readProxyHeader(nc net.Conn, by time.Time) (string, error) {
	_ = nc.SetReadDeadline(by)
	defer func() { _ = nc.SetReadDeadline(time.Time{}) }()
	var line []byte
	b := make([]byte, 1)
	for len(line) < 107 {
		if _, err := nc.Read(b); err != nil {
			return "", err
		}
		line = append(line, b[0])
		if bytes.HasSuffix(line, []byte("\r\n")) {
			f := strings.Fields(string(line))
			switch {
			case len(f) == 2 && f[0] == "PROXY" && f[1] == "UNKNOWN":
				return hostOf(nc.RemoteAddr()), nil
			case len(f) == 6 && f[0] == "PROXY" && (f[1] == "TCP4" || f[1] == "TCP6") && net.ParseIP(f[2]) != nil:
				return f[2], nil
			}
			return "", fmt.Errorf("not a PROXY protocol v1 header: %q", line)
		}
	}
	return "", errors.New("PROXY protocol header longer than 107 bytes")
}
