package server

import (
	"context"
	"sync"
	"time"
)

// A kiosk polls the door with 99 (SC status) and reads, in 98, whether
// the library system is on line and lends and takes back: when it is not,
// the kiosk switches to its offline mode at once, rather than learning it
// from a check-out that times out. The door asks, rather than guesses:
// circulation's readiness, which asks storage's, which asks PostgreSQL's.
// One answer serves every kiosk of the door for readinessFresh, so that a
// hundred kiosks polling every few seconds cost one question a
// half-second; an answer not given within readinessTimeout is "off line".

// readinessFresh is how long one answer of circulation's readiness is
// told to kiosks: a kiosk polling while storage is down is told so at
// its next poll, and on line again within this of storage answering.
const readinessFresh = 500 * time.Millisecond

// readinessTimeout bounds a question of circulation's readiness: a
// system that does not answer within it is off line.
const readinessTimeout = time.Second

// readiness is circulation's readiness as the door last asked it, and
// the question in flight.
type readiness struct {
	ask func(context.Context) error
	// base is the context questions are asked in: the door's calls'.
	base context.Context

	mu     sync.Mutex
	at     time.Time // when the last answer came; zero before the first
	ok     bool
	asking chan struct{} // closed when the question in flight is answered
	// downs are the times the door saw the library system not answer
	// (its readiness, a kiosk's call), as spans of such times no more
	// than grace (SIP2_OFFLINE_GRACE) apart, the newest last; at most
	// maxDowns.
	downs []span
	grace time.Duration
	// lastDown is when the door last saw the library system not answer:
	// a kiosk's span of presence after it is a new one.
	lastDown time.Time
}

// span is a time from..to.
type span struct{ from, to time.Time }

// maxDowns bounds the spans of not answering the door remembers: the
// oldest go first (past SIP2_OFFLINE_WITHIN they judge nothing).
const maxDowns = 1024

// down records that the library system did not answer at at: the last
// span grows to it when it ended within the grace before, else a span
// begins.
func (r *readiness) down(at time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if at.After(r.lastDown) {
		r.lastDown = at
	}
	if n := len(r.downs); n > 0 && !at.After(r.downs[n-1].to.Add(r.grace)) {
		if at.After(r.downs[n-1].to) {
			r.downs[n-1].to = at
		}
		return
	}
	if len(r.downs) == maxDowns {
		r.downs = append(r.downs[:0], r.downs[1:]...)
	}
	r.downs = append(r.downs, span{at, at})
}

// downNear says whether the door saw the library system not answer
// within the grace of at.
func (r *readiness) downNear(at time.Time) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, d := range r.downs {
		if !at.Before(d.from.Add(-r.grace)) && !at.After(d.to.Add(r.grace)) {
			return true
		}
	}
	return false
}

// online says whether circulation answered its readiness within the last
// readinessFresh, asking again (once, for every kiosk asking meanwhile)
// when the last answer is older. A kiosk whose message's context ends
// first is told off line.
func (r *readiness) online(ctx context.Context) bool {
	ok := r.answer(ctx)
	if !ok {
		// A kiosk told "off line" now may lend offline now.
		r.down(time.Now())
	}
	return ok
}

// answer is online's answer, before it is recorded.
func (r *readiness) answer(ctx context.Context) bool {
	r.mu.Lock()
	if !r.at.IsZero() && time.Since(r.at) < readinessFresh {
		defer r.mu.Unlock()
		return r.ok
	}
	if r.asking == nil {
		done := make(chan struct{})
		r.asking = done
		go func() {
			asked := time.Now()
			ctx, cancel := context.WithTimeout(r.base, readinessTimeout)
			err := r.ask(ctx)
			cancel()
			if err != nil {
				r.down(asked)
			}
			r.mu.Lock()
			r.ok, r.at, r.asking = err == nil, time.Now(), nil
			r.mu.Unlock()
			close(done)
		}()
	}
	asking := r.asking
	r.mu.Unlock()
	select {
	case <-asking:
	case <-ctx.Done():
		return false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.ok
}

// A kiosk reads in 98 whether it may lend offline (offline ok): whether
// its library takes the check-outs its machines made offline (the
// tenant's selfCheck settings, offlineLending, on unless a library turns
// it off). The door asks circulation with a kiosk's session, at most once
// per readinessFresh for each tenant; while it cannot ask (no kiosk of
// the tenant signed in, the library system not answering: when a kiosk
// most needs to know), the last answer stands; before any, the door has
// not heard the library say so, and it is off.
type offlineLending struct {
	mu      sync.Mutex
	tenants map[string]*offlineAnswer
}

// offlineAnswer is one tenant's last answer and whether it is being
// asked.
type offlineAnswer struct {
	at       time.Time
	taken    bool
	answered bool
	asking   bool
}

// taken says whether the tenant takes check-outs made offline, asking
// with ask (a kiosk's session; nil when none is signed in) when the last
// answer is older than readinessFresh and nobody is asking already.
func (o *offlineLending) taken(ctx context.Context, tenant string, ask func(context.Context) (bool, error)) bool {
	o.mu.Lock()
	if o.tenants == nil {
		o.tenants = map[string]*offlineAnswer{}
	}
	a, ok := o.tenants[tenant]
	if !ok {
		a = &offlineAnswer{}
		o.tenants[tenant] = a
	}
	fresh := a.answered && time.Since(a.at) < readinessFresh
	if fresh || a.asking || ask == nil {
		defer o.mu.Unlock()
		return a.answered && a.taken
	}
	a.asking = true
	o.mu.Unlock()
	taken, err := ask(ctx)
	o.mu.Lock()
	defer o.mu.Unlock()
	a.asking = false
	if err == nil {
		a.taken, a.answered, a.at = taken, true, time.Now()
	}
	return a.answered && a.taken
}

// downSince says whether the door saw the library system not answer at
// or after t.
func (r *readiness) downSince(t time.Time) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return !r.lastDown.Before(t)
}
