package storage

import (
	"context"
	"time"

	"github.com/checkoutlock/schemas/errs"

	"github.com/checkoutlock/schemas"

	"github.com/checkoutlock/circulation-storage/cql"
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
	Holder       Holder
}

// Holder says which check-out holds a lock, as the acquirer told it, and
// who it acted for. Every field is optional: FOLIO's clients send none.
type Holder struct {
	Instance       string `json:"instance,omitempty"`
	RequestID      string `json:"requestId,omitempty"`
	ItemBarcode    string `json:"itemBarcode,omitempty"`
	ServicePointID string `json:"servicePointId,omitempty"`
	// AcquiredBy is the user the acquiring request acted for, and
	// AcquiredByModule the module that acquired it for them, set by storage
	// from its credentials, never by the body: together they are the lock's
	// owner (see OwnedBy).
	AcquiredBy       string `json:"acquiredBy,omitempty"`
	AcquiredByModule string `json:"acquiredByModule,omitempty"`
	// TraceID is the trace of the acquiring request while tracing is on
	// (W3C, 32 hex digits), set by storage: the lock list and the history
	// link a lock and a wait to the trace that explains them.
	TraceID string `json:"traceId,omitempty"`
	// Kiosk is the self-check machine the acquiring request was for
	// (Caller.Kiosk), set by storage: the console names the lock by it.
	Kiosk string `json:"kiosk,omitempty"`
}

// OwnedBy reports whether caller is the holder's owner, the identity that
// acquired the lock: only it renews the lock, or releases it without the
// permission to release others' locks.
func (h Holder) OwnedBy(c Caller) bool {
	return h.AcquiredBy == c.User && h.AcquiredByModule == c.Module
}

// Holder is what a lock records of who acquired it: caller.
func (c Caller) Holder() Holder {
	return Holder{AcquiredBy: c.User, AcquiredByModule: c.Module, Kiosk: c.Kiosk}
}

// IsZero says whether nothing is known of the holder.
func (h Holder) IsZero() bool { return h == Holder{} }

// EventType is the kind of a lock history event.
type EventType string

// The events that explain a wait or a refusal.
const (
	// EventExpired: a lock expired while held (its holder too slow or
	// gone): found by the sweeper, or released by its holder too late.
	EventExpired EventType = "expired"
	// EventTakenOver: a lock that had expired while held was taken over
	// by a new acquisition (By).
	EventTakenOver EventType = "taken_over"
	// EventReleasedByOther: a live lock was released by a user (By) other
	// than the one it was acquired for.
	EventReleasedByOther EventType = "released_by_other"
	// EventWaiterGaveUp: a waiting acquisition (By) ended without the lock,
	// after WaitedMs, while the lock was held.
	EventWaiterGaveUp EventType = "waiter_gave_up"
	// EventLentOffline: a check-out a self-check machine made offline was
	// recorded past a rule a live one keeps (LoanID, BrokenRules; By, the
	// account that sent it), in the write that recorded it.
	EventLentOffline EventType = "lent_offline"
	// EventReturnedBeforeLoan: a check-in dated before the item's open
	// loan was lent (schemas.ReturnedBeforeLent) closed nothing, for the
	// desk to see (LoanID, the loan left open; UserID, its borrower; By,
	// who sent the check-in), in the write that refused it.
	EventReturnedBeforeLoan EventType = schemas.HistoryReturnedBeforeLoan
)

// EventTypes lists every event type.
var EventTypes = []EventType{EventExpired, EventTakenOver, EventReleasedByOther, EventWaiterGaveUp, EventLentOffline,
	EventReturnedBeforeLoan}

// LockEvent is one event of a tenant's lock history.
type LockEvent struct {
	ID         int64
	Type       EventType
	OccurredAt time.Time
	UserID     string
	// LockID and Holder are the lock the event is about, when known.
	LockID string
	Holder Holder
	// By is who caused the event: the new acquirer, the releasing user
	// (AcquiredBy), the waiter.
	By       Holder
	WaitedMs int
	// LoanID and BrokenRules are a loan lent offline and the rules it
	// broke (EventLentOffline).
	LoanID      string
	BrokenRules []string
}

// EventObserver is told of the lock history's events as they are written,
// and of those that could not be.
type EventObserver interface {
	Event(t EventType)
	EventLost(err error)
}

// HistoryFilter selects a page of events, newest first.
type HistoryFilter struct {
	UserID   string    // empty: every patron
	From, To time.Time // zero: unbounded
	// Query, when not nil, is a CQL query (QueryText as the client wrote
	// it) over the events as the history answers them: type, userId,
	// lockId, occurredAt, waitedMs, holder.* and by.* (acquiredBy, instance,
	// itemBarcode, servicePointId, requestId, traceId, kiosk); sortBy any
	// of them.
	Query     *cql.Query
	QueryText string
	Offset    int
	Limit     int
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
	// itself and holder names its owner: then it is renewed (a lock id
	// alone renews nothing).
	// The holder is stored with the lock; taking over an expired lock
	// records EventTakenOver.
	Acquire(ctx context.Context, t Tenant, userID, lockID string, ttl time.Duration, holder Holder) (Lock, AcquireOutcome, error)
	// Get returns a live lock by id, or a KindNotFound error.
	Get(ctx context.Context, t Tenant, id string) (Lock, error)
	// List returns a page of live locks and the number of all matches.
	List(ctx context.Context, t Tenant, f LockFilter) ([]Lock, int, error)
	// Release deletes a live lock by id for the caller by; an absent or
	// expired lock is a KindNotFound error (an expired one is recorded as
	// EventExpired). A live lock by does not own (see Holder.OwnedBy) is
	// released only with others true (the permission to release others'
	// locks), and recorded as EventReleasedByOther; without it, the release
	// is a KindForbidden error and the lock stays. While someone watches
	// the patron's lock, the release is announced to every instance (see
	// Waiters.Notify).
	Release(ctx context.Context, t Tenant, id string, by Caller, others bool) error
	// Watch asks that the releases of a patron's lock be announced for at
	// least d from now: someone waits for it. Uncontended releases are not
	// announced, which keeps them cheap.
	Watch(ctx context.Context, t Tenant, userID string, d time.Duration) error
	// Record adds an event to the tenant's lock history.
	Record(ctx context.Context, t Tenant, e LockEvent) error
	// History returns a page of the tenant's lock history, newest first,
	// and the number of all matches.
	History(ctx context.Context, t Tenant, f HistoryFilter) ([]LockEvent, int, error)
}

// LockHeld is the error for a patron whose lock someone else holds.
// The holder, when known, is named in the parameters (holderInstance,
// holderRequestId, holderItemBarcode, holderServicePointId), so the refused
// check-out can say which check-out it waited for.
func LockHeld(userID string, expiresAt time.Time, remaining time.Duration, holder Holder) *errs.Error {
	e := errs.Errorf(errs.KindLocked, schemas.CodeLockHeld, "Unable to acquire lock").
		With("userId", userID)
	if !expiresAt.IsZero() {
		e.With("expiresAt", schemas.FormatTime(expiresAt))
	}
	for _, p := range []struct{ key, value string }{
		{"holderInstance", holder.Instance}, {"holderRequestId", holder.RequestID},
		{"holderItemBarcode", holder.ItemBarcode}, {"holderServicePointId", holder.ServicePointID},
		{"holderTraceId", holder.TraceID},
	} {
		if p.value != "" {
			e.With(p.key, p.value)
		}
	}
	if remaining > 0 {
		e.RetryAfter = remaining
	}
	return e
}

// HolderOf reads the holder a LockHeld error names.
func HolderOf(e *errs.Error) Holder {
	var h Holder
	for _, p := range e.Parameters {
		switch p.Key {
		case "holderInstance":
			h.Instance = p.Value
		case "holderRequestId":
			h.RequestID = p.Value
		case "holderItemBarcode":
			h.ItemBarcode = p.Value
		case "holderServicePointId":
			h.ServicePointID = p.Value
		case "holderTraceId":
			h.TraceID = p.Value
		}
	}
	return h
}
