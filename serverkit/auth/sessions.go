package auth

import (
	"context"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"
	"golang.org/x/sync/singleflight"

	"github.com/checkoutlock/schemas"
	"github.com/checkoutlock/schemas/errs"
)

// Sessions says whether the sessions that tokens name (the "session_id" claim of
// storage's login) are still alive: a session ends on logout, when one of
// its refresh tokens is used twice, when its account's roles change, and
// when its account is disabled or deleted, and its access tokens stop
// working at both services within the time an answer is remembered (TTL),
// whatever their expiry.
//
// Each answer is remembered for TTL, at most Max of them, so that a
// kiosk's burst of scans asks once; concurrent asks for one session share
// one lookup.
type Sessions struct {
	lookup  func(ctx context.Context, tenant, id string) (bool, error)
	answers *lru.Cache[string, sessionAnswer]
	flight  singleflight.Group
	now     func() time.Time
}

// sessionAnswer is an answer remembered, until when it stands. An answer
// past it is asked again; it stays in the cache until the cache, full,
// lets it go: nothing wakes to sweep answers out (an expiring cache's
// sweeper, at 2 s, woke every process 50 times a second, idle or not).
type sessionAnswer struct {
	alive bool
	until time.Time
}

// Session answers are remembered for at most SessionTTL, at most
// sessionMax of them: a session ended at one instance is refused by every
// instance within SessionTTL.
const (
	SessionTTL = 2 * time.Second
	sessionMax = 10000
)

// NewSessions returns a session check that asks lookup.
func NewSessions(lookup func(ctx context.Context, tenant, id string) (bool, error)) *Sessions {
	answers, err := lru.New[string, sessionAnswer](sessionMax)
	if err != nil {
		panic(err) // only for a size below 1
	}
	return &Sessions{lookup: lookup, answers: answers, now: time.Now}
}

// Alive says whether tenant's session id is alive.
func (s *Sessions) Alive(ctx context.Context, tenant, id string) (bool, error) {
	key := tenant + "/" + id
	if a, ok := s.answers.Get(key); ok && s.now().Before(a.until) {
		return a.alive, nil
	}
	v, err, _ := s.flight.Do(key, func() (any, error) {
		// The lookup outlives a caller that goes away: others may share it.
		alive, err := s.lookup(context.WithoutCancel(ctx), tenant, id)
		if err != nil {
			return false, err
		}
		s.answers.Add(key, sessionAnswer{alive: alive, until: s.now().Add(SessionTTL)})
		return alive, nil
	})
	if err != nil {
		return false, err
	}
	return v.(bool), nil
}

// Forget drops what is remembered of a session, which this instance has
// just ended.
func (s *Sessions) Forget(tenant, id string) { s.answers.Remove(tenant + "/" + id) }

// sessionEnded is the refusal of a token whose session has ended.
func sessionEnded() *errs.Error {
	return unauthorized(schemas.CodeSessionEnded, "The session has ended: sign in again", nil)
}

// checkSession refuses claims whose session has ended.
func (g Guard) checkSession(ctx context.Context, claims *Claims) error {
	if g.Sessions == nil || claims == nil || claims.SessionID == "" {
		return nil
	}
	alive, err := g.Sessions.Alive(ctx, claims.Tenant, claims.SessionID)
	if err != nil {
		return err
	}
	if !alive {
		return sessionEnded()
	}
	return nil
}
