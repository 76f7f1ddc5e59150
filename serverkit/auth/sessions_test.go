package auth

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/checkoutlock/schemas"
)

// TestSessionsRememberAnswersBriefly: a session's answer is asked once for
// many checks, concurrent ones included; Forget asks again; an error is
// not remembered.
func TestSessionsRememberAnswersBriefly(t *testing.T) {
	t.Parallel()
	var asked atomic.Int64
	alive := atomic.Bool{}
	alive.Store(true)
	fail := atomic.Bool{}
	release := make(chan struct{})
	s := NewSessions(func(_ context.Context, tenant, id string) (bool, error) {
		asked.Add(1)
		<-release
		if fail.Load() {
			return false, errors.New("storage away")
		}
		return alive.Load(), nil
	})
	var wg sync.WaitGroup
	for range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if ok, err := s.Alive(context.Background(), "diku", "s1"); !ok || err != nil {
				t.Errorf("Alive = %v, %v", ok, err)
			}
		}()
	}
	close(release)
	wg.Wait()
	if _, _ = s.Alive(context.Background(), "diku", "s1"); asked.Load() != 1 {
		t.Errorf("asked %d times for 21 checks, want once", asked.Load())
	}
	alive.Store(false)
	s.Forget("diku", "s1")
	if ok, _ := s.Alive(context.Background(), "diku", "s1"); ok || asked.Load() != 2 {
		t.Errorf("after Forget: alive %v, asked %d; want asked again and ended", ok, asked.Load())
	}
	fail.Store(true)
	if _, err := s.Alive(context.Background(), "diku", "s2"); err == nil {
		t.Error("a failed lookup answered")
	}
	fail.Store(false)
	if _, err := s.Alive(context.Background(), "diku", "s2"); err != nil || asked.Load() != 4 {
		t.Errorf("after a failed lookup: %v, asked %d; want asked again", err, asked.Load())
	}
}

// TestASessionsAnswerStandsForSessionTTL: an answer is remembered until
// SessionTTL has passed, then asked again.
func TestASessionsAnswerStandsForSessionTTL(t *testing.T) {
	t.Parallel()
	var asked atomic.Int64
	alive := atomic.Bool{}
	alive.Store(true)
	s := NewSessions(func(context.Context, string, string) (bool, error) {
		asked.Add(1)
		return alive.Load(), nil
	})
	start := time.Now()
	var clock atomic.Int64
	s.now = func() time.Time { return start.Add(time.Duration(clock.Load())) }
	for _, step := range []struct {
		at    time.Duration
		alive bool // the session's, at storage
		want  bool
		asked int64
	}{
		{0, true, true, 1},
		{SessionTTL - time.Millisecond, false, true, 1}, // remembered
		{SessionTTL, false, false, 2},                   // asked again
		{2*SessionTTL - time.Millisecond, true, false, 2},
	} {
		clock.Store(int64(step.at))
		alive.Store(step.alive)
		if got, err := s.Alive(context.Background(), "diku", "s1"); got != step.want || err != nil || asked.Load() != step.asked {
			t.Errorf("at %s: Alive = %v, %v after %d lookups; want %v after %d", step.at, got, err, asked.Load(), step.want, step.asked)
		}
	}
}

// TestGuardRefusesEndedSessions: a token naming an ended session is 401
// SESSION_ENDED at Check and Identify; one naming none is not asked about.
func TestGuardRefusesEndedSessions(t *testing.T) {
	t.Parallel()
	secret := "a secret of at least thirty-two characters"
	v, err := NewVerifier(context.Background(), KeyConfig{Secret: secret})
	if err != nil {
		t.Fatal(err)
	}
	var asked atomic.Int64
	g := Guard{Mode: JWT, Verifier: v, Sessions: NewSessions(func(_ context.Context, _, id string) (bool, error) {
		asked.Add(1)
		return id == "live", nil
	})}
	mint := func(sid string) http.Header {
		c, _ := RoleClaims(schemas.RoleTenantAdmin, "diku", "u1")
		c.SessionID = sid
		tok, err := Mint(secret, c, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		return http.Header{schemas.HeaderTenant: {"diku"}, schemas.HeaderToken: {tok}}
	}
	route := "/check-out-lock-storage"
	if _, _, err := g.Check(context.Background(), schemas.ServiceStorage, "GET", route, mint("live")); err != nil {
		t.Errorf("a live session: %v", err)
	}
	who, _, err := g.Check(context.Background(), schemas.ServiceStorage, "GET", route, mint("ended"))
	if f, ok := failure(err); !ok || f.Status != http.StatusUnauthorized || f.Code != schemas.CodeSessionEnded || who.User != "u1" || who.Unverified {
		t.Errorf("an ended session: %v, who %+v; want 401 SESSION_ENDED naming u1", err, who)
	}
	if f, ok := failure(func() error { _, err := g.Identify(context.Background(), mint("ended")); return err }()); !ok || f.Code != schemas.CodeSessionEnded {
		t.Errorf("Identify of an ended session: %v", err)
	}
	before := asked.Load()
	if _, _, err := g.Check(context.Background(), schemas.ServiceStorage, "GET", route, mint("")); err != nil || asked.Load() != before {
		t.Errorf("a token naming no session: %v, asked %d more", err, asked.Load()-before)
	}
}

// TestUnverifiedNamesWhatATokenClaims: a token that does not verify is
// logged as what it claims, cut to 64 characters; no token, nothing.
func TestUnverifiedNamesWhatATokenClaims(t *testing.T) {
	t.Parallel()
	tok, err := jwt.NewWithClaims(jwt.SigningMethodHS256, Claims{UserID: string(make([]byte, 100)) + "x",
		RegisteredClaims: jwt.RegisteredClaims{Issuer: "circulation"}}).SignedString([]byte("whatever"))
	if err != nil {
		t.Fatal(err)
	}
	who := Unverified(http.Header{schemas.HeaderToken: {tok}})
	if !who.Unverified || who.Module != "circulation" || len(who.User) > 64+len("…") {
		t.Errorf("Unverified = %+v", who)
	}
	if who := Unverified(http.Header{}); who != (Identity{}) {
		t.Errorf("no token: %+v", who)
	}
	if who := Unverified(http.Header{schemas.HeaderToken: {"not.a.jwt"}}); who != (Identity{}) {
		t.Errorf("garbage: %+v", who)
	}
}
