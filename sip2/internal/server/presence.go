package server

import (
	"context"
	"log/slog"
	"time"

	"github.com/google/uuid"

	"github.com/checkoutlock/sip2/internal/circ"
)

// A kiosk's no-block check-out is taken as made offline only for a time
// no door saw the kiosk on line. The door sees it on line from its login
// on a connection while the library system answers, and keeps those times
// in storage, as spans of the kiosk's presence (its account and the
// location code it gave at login), by which storage's write judges every
// check-out sent as made offline: a door restarted since, or another door
// the kiosk moved to, is held to them too. A span is recorded at
// the kiosk's login and again, after a message it sent, at most every
// SIP2_PRESENCE_EVERY (Options.PresenceEvery); one recorded after the
// door saw the library system not answer, or after a record failed, is a
// new span. Storage stamps each
// record with its own clock; a span ends at the last record, so a
// kiosk's last SIP2_PRESENCE_EVERY on a connection is not in storage.

// presence is one connection's record of its kiosk's presence.
type presence struct {
	// span is the span being recorded, "" before the first and after the
	// library system did not answer; recorded when it was last asked to
	// be recorded; busy while a record is in flight.
	span     string
	recorded time.Time
	busy     bool
}

// seen records, without waiting, that the kiosk of session s is on line
// now, when Options.PresenceEvery has passed since the last record or force is
// set (its login). One record of a connection is in flight at a time.
func (c *conn) seen(s *circ.Session, force bool) {
	c.mu.Lock()
	p := &c.presence
	if p.busy || (!force && time.Since(p.recorded) < c.s.opts.PresenceEvery) {
		c.mu.Unlock()
		return
	}
	asked := time.Now()
	id := p.span
	if id == "" || c.s.ready.downSince(p.recorded) {
		id = uuid.NewString()
	}
	p.busy = true
	c.mu.Unlock()
	go func() {
		ctx, cancel := context.WithTimeout(c.s.calls, c.s.opts.CallTimeout)
		err := c.s.circ.SeeOnLine(ctx, s, id)
		cancel()
		c.mu.Lock()
		defer c.mu.Unlock()
		p.busy = false
		if err != nil {
			// Not asked again before its time: a kiosk polling while the
			// library system is down costs no call each message.
			p.span, p.recorded = "", asked
			c.log.Warn("a kiosk's presence not recorded: the next record begins a new span",
				slog.String("kiosk", s.Username), slog.String("location", s.Location), slog.Any("error", err))
			return
		}
		p.span, p.recorded = id, asked
	}()
}

// onLineAt says whether this door saw this kiosk on line at at: the
// library system answering the door then, and the kiosk logged in on this
// connection before it, each by more than the grace (SIP2_OFFLINE_GRACE).
// A transaction marked offline (no block) it saw made on line is a live
// one; any other is sent as made offline, and storage's write judges it
// by the spans of the kiosk's presence every door recorded
// (schemas.CodeOfflineWhileOnLine), which this door's own view of its
// connection's last SIP2_PRESENCE_EVERY is ahead of.
func (c *conn) onLineAt(at time.Time) bool {
	if c.s.ready.downNear(at) {
		return false
	}
	c.mu.Lock()
	since := c.loginAt
	c.mu.Unlock()
	return !since.IsZero() && at.After(since.Add(c.s.opts.OfflineGrace))
}
