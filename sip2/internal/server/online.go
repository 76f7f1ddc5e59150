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
}

// online says whether circulation answered its readiness within the last
// readinessFresh, asking again (once, for every kiosk asking meanwhile)
// when the last answer is older. A kiosk whose message's context ends
// first is told off line.
func (r *readiness) online(ctx context.Context) bool {
	r.mu.Lock()
	if !r.at.IsZero() && time.Since(r.at) < readinessFresh {
		defer r.mu.Unlock()
		return r.ok
	}
	if r.asking == nil {
		done := make(chan struct{})
		r.asking = done
		go func() {
			ctx, cancel := context.WithTimeout(r.base, readinessTimeout)
			err := r.ask(ctx)
			cancel()
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
