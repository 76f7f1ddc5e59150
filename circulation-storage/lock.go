package storage

import (
	"context"
	"time"

	"github.com/checkoutlock/schemas"
)

// Lock is a patron's check-out lock. While it is live (ExpiresAt in the
// future) no other check-out for the patron can acquire it; once expired it is
// the same as no lock at all.
type Lock struct {
	ID           string
	UserID       string
	CreationDate time.Time
	ExpiresAt    time.Time
	TTL          time.Duration
}

// AcquireOutcome says how a lock was acquired.
type AcquireOutcome int

// The ways to acquire a lock.
const (
	// Acquired: there was no lock for the patron.
	Acquired AcquireOutcome = iota + 1
	// TookOverExpired: the patron's previous lock had expired and was replaced.
	TookOverExpired
	// Renewed: the request named the live lock's own id; its lifetime
	// starts again.
	Renewed
)

// String names the outcome for metrics.
func (o AcquireOutcome) String() string {
	switch o {
	case Acquired:
		return "acquired"
	case TookOverExpired:
		return "took_over_expired"
	case Renewed:
		return "renewed"
	}
	return "unknown"
}

// LockFilter selects a page of live locks.
type LockFilter struct {
	UserID string // empty: every patron
	Offset int
	Limit  int
}

// LockService keeps check-out locks. Implementations must make Acquire atomic:
// of any number of concurrent calls for one patron, at most one succeeds while
// a lock is live.
type LockService interface {
	// Acquire takes the patron's lock for ttl, under lockID when it is not
	// empty. If a live lock exists it returns an *Error of KindLocked whose
	// RetryAfter is the time the holder has left, unless that lock is lockID
	// itself: then it is renewed.
	Acquire(ctx context.Context, t Tenant, userID, lockID string, ttl time.Duration) (Lock, AcquireOutcome, error)
	// Get returns a live lock by id, or a KindNotFound error.
	Get(ctx context.Context, t Tenant, id string) (Lock, error)
	// List returns a page of live locks and the number of all matches.
	List(ctx context.Context, t Tenant, f LockFilter) ([]Lock, int, error)
	// Release deletes a live lock by id; an absent or expired lock is a
	// KindNotFound error. While someone watches the patron's lock, the
	// release is announced to every instance (see Waiters.Notify).
	Release(ctx context.Context, t Tenant, id string) error
	// Watch asks that the releases of a patron's lock be announced for at
	// least d from now: someone waits for it. Uncontended releases are not
	// announced, which keeps them cheap.
	Watch(ctx context.Context, t Tenant, userID string, d time.Duration) error
}

// LockHeld is the error for a patron whose lock someone else holds.
func LockHeld(userID string, expiresAt time.Time, remaining time.Duration) *Error {
	e := Errorf(KindLocked, CodeLockHeld, "Unable to acquire lock").
		With("userId", userID)
	if !expiresAt.IsZero() {
		e.With("expiresAt", expiresAt.UTC().Format(TimeFormat))
	}
	if remaining > 0 {
		e.RetryAfter = remaining
	}
	return e
}

// TimeFormat is how times go on the wire: RFC 3339, UTC, milliseconds.
const TimeFormat = schemas.TimeFormat
