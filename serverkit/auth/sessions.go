package auth

import (
	"context"
	"time"

	"github.com/hashicorp/golang-lru/v2/expirable"
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
	answers *expirable.LRU[string, bool]
	flight  singleflight.Group
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
	return &Sessions{lookup: lookup, answers: expirable.NewLRU[string, bool](sessionMax, nil, SessionTTL)}
}

// Alive says whether tenant's session id is alive.
func (s *Sessions) Alive(ctx context.Context, tenant, id string) (bool, error) {
	key := tenant + "/" + id
	if alive, ok := s.answers.Get(key); ok {
		return alive, nil
	}
	v, err, _ := s.flight.Do(key, func() (any, error) {
		// The lookup outlives a caller that goes away: others may share it.
		alive, err := s.lookup(context.WithoutCancel(ctx), tenant, id)
		if err != nil {
			return false, err
		}
		s.answers.Add(key, alive)
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
