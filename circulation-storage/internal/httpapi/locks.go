package httpapi

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/checkoutlock/schemas/errs"

	"github.com/labstack/echo/v4"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	storage "github.com/checkoutlock/circulation-storage"
	"github.com/checkoutlock/schemas"
	"github.com/checkoutlock/serverkit"
	"github.com/checkoutlock/serverkit/tracing"
)

// lockJSON is a lock on the wire (schemas/checkout-lock.json).
type lockJSON struct {
	ID           string         `json:"id"`
	UserID       string         `json:"userId"`
	CreationDate string         `json:"creationDate"`
	ExpiresAt    string         `json:"expiresAt"`
	TTLMs        int64          `json:"ttlMs"`
	Holder       storage.Holder `json:"holder,omitzero"`
}

func toLockJSON(l storage.Lock) lockJSON {
	out := lockJSON{
		ID:           l.ID,
		UserID:       l.UserID,
		CreationDate: schemas.FormatTime(l.CreationDate),
		ExpiresAt:    schemas.FormatTime(l.ExpiresAt),
		TTLMs:        l.TTL.Milliseconds(),
	}
	out.Holder = l.Holder
	return out
}

// locksJSON is a page of locks (schemas/checkout-locks.json), spelled as
// FOLIO spells it.
type locksJSON struct {
	CheckoutLocks []lockJSON `json:"checkoutLocks"`
	TotalRecords  int        `json:"totalRecords"`
}

// postLock acquires a patron's lock: 201 with the lock, or 503 with the
// holder's expiry and Retry-After when someone else holds it.
func (s *Server) postLock(c echo.Context) error {
	_, doc, err := s.Body(c)
	if err != nil {
		return err
	}
	req := lockRequestOf(doc)
	ttl, wait, holder, err := s.lockTerms(c, req)
	if err != nil {
		return err
	}
	// A request that names no lock id gets one now, before any statement
	// runs: a statement run again after its answer was lost (the pool
	// runs a single-row statement again on a fresh connection), or a
	// waiter's next try, then names the lock it may have taken, and finds
	// it its own (a renewal), instead of a lock it cannot tell from
	// someone else's.
	id := strings.ToLower(req.ID)
	if id == "" {
		id = uuid.NewString()
	}
	lock, err := s.acquire(c, strings.ToLower(req.UserID), id, ttl, wait, holder)
	if err != nil {
		return err
	}
	c.Response().Header().Set(echo.HeaderLocation, "/check-out-lock-storage/"+lock.ID)
	return c.JSON(http.StatusCreated, toLockJSON(lock))
}

// acquire takes the patron's lock (waiting up to wait for it), counts the
// acquisition's outcome and logs it: for POST /check-out-lock-storage and
// a check-out's write that takes its lock the ordinary way.
func (s *Server) acquire(c echo.Context, userID, lockID string, ttl, wait time.Duration, holder storage.Holder) (storage.Lock, error) {
	// The wait, and the hand-off that ends it, a span of the request's
	// trace (a no-op while tracing is off).
	// Its attributes are set once, with the outcome: the span's are then
	// allocated once, at their size.
	ctx, span := tracing.Tracer().Start(c.Request().Context(), "check-out lock wait")
	defer span.End()
	lock, outcome, err := s.svc.Waiters.Acquire(ctx, tenantOf(c), userID, lockID, ttl, wait, holder)
	if err != nil {
		if errs.IsKind(err, errs.KindLocked) {
			s.metrics.acquisition("held")
			if span.IsRecording() {
				span.SetAttributes(attribute.String("user.id", userID), attribute.Int64("lock.wait_max_ms", wait.Milliseconds()),
					attribute.String("lock.outcome", "held"))
			}
		} else if span.IsRecording() {
			span.SetAttributes(attribute.String("user.id", userID), attribute.Int64("lock.wait_max_ms", wait.Milliseconds()))
		}
		return storage.Lock{}, err
	}
	if span.IsRecording() {
		span.SetAttributes(attribute.String("user.id", userID), attribute.Int64("lock.wait_max_ms", wait.Milliseconds()),
			attribute.String("lock.outcome", outcome.String()))
	}
	s.metrics.acquisition(outcome.String())
	serverkit.Log(c, slog.String("user_id", lock.UserID), slog.String("lock_id", lock.ID), slog.String("outcome", outcome.String()))
	return lock, nil
}

// lockTerms are an acquisition's lifetime and wait, within this
// instance's bounds, and its holder: the one reading of them, for
// POST /check-out-lock-storage and a check-out's write that acquires its
// lock (schemas.HeaderAcquireLock).
func (s *Server) lockTerms(c echo.Context, req lockRequest) (ttl, wait time.Duration, holder storage.Holder, err error) {
	if ttl, err = atMost("ttlMs", req.TTLMs, s.cfg.LockDefaultTTL, s.cfg.LockMaxTTL); err != nil {
		return 0, 0, holder, err
	}
	if wait, err = atMost("waitMs", req.WaitMs, 0, s.cfg.LockMaxWait); err != nil {
		return 0, 0, holder, err
	}
	holder = req.Holder
	holder.ServicePointID = strings.ToLower(holder.ServicePointID)
	// The lock is its acquirer's: the caller, as its credentials say.
	owner := storage.CallerFrom(c.Request().Context())
	holder.AcquiredBy, holder.AcquiredByModule, holder.Kiosk = owner.User, owner.Module, owner.Kiosk
	if sc := trace.SpanContextFromContext(c.Request().Context()); sc.IsValid() {
		holder.TraceID = sc.TraceID().String()
	}
	return ttl, wait, holder, nil
}

// atMost is the milliseconds ms of field name as a duration, def when
// absent, refused above limit (this instance's bound, within the schema's).
func atMost(name string, ms *float64, def, limit time.Duration) (time.Duration, error) {
	if ms == nil {
		return def, nil
	}
	n := int64(*ms)
	if d := time.Duration(n) * time.Millisecond; d <= limit {
		return d, nil
	}
	return 0, errs.Errorf(errs.KindInvalid, schemas.CodeValidation, "%s: must be at most %d", name, limit.Milliseconds()).
		With(name, formatInt(n))
}

// lockRequest is the body of an acquisition.
type lockRequest struct {
	ID, UserID string
	// Floats: JSON Schema counts 1.0 and 1e3 as integers, and the schema
	// has bounded the values to what a float64 holds exactly.
	TTLMs, WaitMs *float64
	Holder        storage.Holder
}

// lockRequestOf reads an acquisition from its document, valid against
// checkout-lock-request.json: every member is known, of its type, and
// named exactly (no other may be present), so it is read directly rather
// than decoded a second time (this is the hottest route).
func lockRequestOf(doc any) lockRequest {
	m, _ := doc.(map[string]any)
	str := func(m map[string]any, k string) string { v, _ := m[k].(string); return v }
	num := func(k string) *float64 {
		n, ok := m[k].(json.Number)
		if !ok {
			return nil
		}
		f, err := n.Float64()
		if err != nil {
			return nil
		}
		return &f
	}
	req := lockRequest{ID: str(m, "id"), UserID: str(m, "userId"), TTLMs: num("ttlMs"), WaitMs: num("waitMs")}
	if h, ok := m["holder"].(map[string]any); ok {
		req.Holder = storage.Holder{Instance: str(h, "instance"), RequestID: str(h, "requestId"),
			ItemBarcode: str(h, "itemBarcode"), ServicePointID: str(h, "servicePointId")}
	}
	return req
}

func (s *Server) getLock(c echo.Context) error {
	id, err := s.pathID(c, "lock")
	if err != nil {
		return err
	}
	lock, err := s.svc.Locks.Get(c.Request().Context(), tenantOf(c), id)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, toLockJSON(lock))
}

func (s *Server) listLocks(c echo.Context) error {
	userID, err := s.queryUUID(c, "userId")
	if err != nil {
		return err
	}
	offset, limit, err := pageParams(c, schemas.MaxPageSize)
	if err != nil {
		return err
	}
	locks, total, err := s.svc.Locks.List(c.Request().Context(), tenantOf(c),
		storage.LockFilter{UserID: userID, Offset: offset, Limit: limit})
	if err != nil {
		return err
	}
	out := locksJSON{CheckoutLocks: make([]lockJSON, len(locks)), TotalRecords: total}
	for i, l := range locks {
		out.CheckoutLocks[i] = toLockJSON(l)
	}
	return c.JSON(http.StatusOK, out)
}

// deleteLock releases a lock: 204 when a live lock was deleted, 404 when it
// was absent or had expired (an expired lock is the same as none).
func (s *Server) deleteLock(c echo.Context) error {
	id, err := s.pathID(c, "lock")
	if err != nil {
		return err
	}
	by := storage.CallerFrom(c.Request().Context())
	// Any lock, not only the caller's own, with the permission to.
	others := s.cfg.Auth.Holds(serverkit.Claims(c.Request().Context()), schemas.PermissionReleaseOthers)
	if err := s.svc.Locks.Release(c.Request().Context(), tenantOf(c), id, by, others); err != nil {
		return err
	}
	s.Logger().InfoContext(c.Request().Context(), "check-out lock released", slog.String("lock_id", id),
		slog.String("caller", by.User), slog.String("module", by.Module))
	return c.NoContent(http.StatusNoContent)
}

// eventJSON is a lock history event (schemas/checkout-lock-history.json).
type eventJSON struct {
	ID         int64             `json:"id"`
	Type       storage.EventType `json:"type"`
	OccurredAt string            `json:"occurredAt"`
	UserID     string            `json:"userId"`
	LockID     string            `json:"lockId,omitempty"`
	Holder     storage.Holder    `json:"holder,omitzero"`
	By         storage.Holder    `json:"by,omitzero"`
	WaitedMs   int               `json:"waitedMs,omitempty"`
	// LoanID and BrokenRules: a loan lent offline, and what it broke.
	LoanID      string   `json:"loanId,omitempty"`
	BrokenRules []string `json:"brokenRules,omitempty"`
}

// lockHistory lists the tenant's lock history, newest first: userId, from
// and to (RFC 3339) narrow it.
func (s *Server) lockHistory(c echo.Context) error {
	userID, err := s.queryUUID(c, "userId")
	if err != nil {
		return err
	}
	f := storage.HistoryFilter{UserID: userID}
	if f.From, _, err = dateParam(c, "from"); err != nil {
		return err
	}
	if f.To, _, err = dateParam(c, "to"); err != nil {
		return err
	}
	if f.Query, f.QueryText, err = cqlParam(c); err != nil {
		return err
	}
	if f.Offset, f.Limit, err = pageParams(c, schemas.MaxPageSize); err != nil {
		return err
	}
	events, total, err := s.svc.Locks.History(c.Request().Context(), tenantOf(c), f)
	if err != nil {
		return err
	}
	out := struct {
		Events       []eventJSON `json:"events"`
		TotalRecords int         `json:"totalRecords"`
	}{Events: make([]eventJSON, len(events)), TotalRecords: total}
	for i, e := range events {
		out.Events[i] = eventJSON{ID: e.ID, Type: e.Type, OccurredAt: schemas.FormatTime(e.OccurredAt),
			UserID: e.UserID, LockID: e.LockID, Holder: e.Holder, By: e.By, WaitedMs: e.WaitedMs,
			LoanID: e.LoanID, BrokenRules: e.BrokenRules}
	}
	return c.JSON(http.StatusOK, out)
}

// dateParam is the query parameter name, a date-time; found false when
// absent.
func dateParam(c echo.Context, name string) (t time.Time, found bool, err error) {
	raw, ok, err := queryParam(c, name)
	if err != nil || !ok {
		return time.Time{}, false, err
	}
	if t, err = schemas.ParseDateTime(raw); err != nil {
		return time.Time{}, false, invalidParam(name, raw, "must be a date-time such as 2025-03-01T10:00:00Z: it "+err.Error())
	}
	return t, true, nil
}
