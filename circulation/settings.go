package circulation

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/checkoutlock/schemas"
	"github.com/checkoutlock/schemas/errs"

	lru "github.com/hashicorp/golang-lru/v2"
	"golang.org/x/sync/singleflight"

	"github.com/checkoutlock/schemas/locksettings"
)

// Source says where an effective setting came from.
type Source string

// The sources of a setting.
const (
	FromEnvironment Source = "environment"
	FromSettings    Source = "settings"
	// FromDefault is FOLIO's default for a field the stored entry leaves
	// out (see Resolve).
	FromDefault Source = "default"
)

// LockSettings are the check-out lock settings in effect for a tenant.
type LockSettings struct {
	Enabled bool
	LockTTL time.Duration
	// RetryIntervals are the waits before each retry of a held lock: with
	// n intervals a check-out makes up to n+1 attempts.
	RetryIntervals []time.Duration
	// Sources names where each of the three came from.
	EnabledSource, LockTTLSource, RetrySource Source
	// SettingsError says why some or all of the stored settings are not in
	// effect, if so; the environment's values apply for those.
	SettingsError string
	// ChangedBy and ChangedAt are the stored settings' last change, when
	// known: the user (an id) and the time (RFC 3339).
	ChangedBy, ChangedAt string
}

// Resolve gives the settings in effect when a tenant's settings entry
// exists and holds stored. Fields the entry leaves out take FOLIO's
// defaults (DefaultNoOfRetryAttempts, DefaultRetryIntervalMs,
// DefaultLockTTLMs), as mod-circulation reading the same entry would,
// except the feature flag: an entry that does not say
// checkOutLockFeatureEnabled keeps the environment's (FOLIO reads it as
// false, and no field left out may switch the lock off). When no entry
// exists the environment's settings apply whole.
func Resolve(env LockSettings, stored locksettings.Stored) LockSettings {
	out := env
	out.EnabledSource = FromEnvironment
	if stored.CheckOutLockFeatureEnabled != nil {
		out.Enabled, out.EnabledSource = *stored.CheckOutLockFeatureEnabled, FromSettings
	}
	out.LockTTL, out.LockTTLSource = locksettings.DefaultLockTTLMs*time.Millisecond, FromDefault
	if stored.LockTTL != nil {
		out.LockTTL, out.LockTTLSource = time.Duration(*stored.LockTTL)*time.Millisecond, FromSettings
	}
	// The waits: the stored list, else FOLIO's shape, n retries each
	// after the same wait, a missing half taking FOLIO's default.
	out.RetryIntervals, out.RetrySource = stored.RetryIntervals(), FromDefault
	if stored.RetryIntervalsMs != nil || stored.NoOfRetryAttempts != nil || stored.RetryInterval != nil {
		out.RetrySource = FromSettings
	}
	return out
}

// Settings gives each tenant's effective lock settings, reading the stored
// entry at most once per cache period per tenant (concurrent readers share
// one fetch). A storage that cannot be read never blocks a check-out: the
// last settings read for the tenant stay in effect, or, if none were ever
// read, the environment's; the failure is logged. A tenant storage does not
// know is an error, and is never cached. The cache holds at most maxTenants
// tenants, the least recently used leaving first.
type Settings struct {
	storage Storage
	env     LockSettings
	bounds  locksettings.Bounds
	ttl     time.Duration
	now     func() time.Time
	logger  *slog.Logger

	// mu orders a fetch's caching against a write's, so that a fetch that
	// started before a write does not cache what it read over what was
	// written (see writes).
	mu    sync.Mutex
	cache *lru.Cache[string, cachedSettings]
	// writes counts every write; an entry cached by a write remembers the
	// count, and a fetch that began before it leaves it alone.
	writes atomic.Uint64
	flight singleflight.Group
}

type cachedSettings struct {
	settings LockSettings
	expires  time.Time
	// read says the settings came from storage (not a fallback), so they
	// may stand in for storage while it cannot be read.
	read bool
	// write is the write count when a write cached this entry; 0 for a
	// fetch's.
	write uint64
}

// failureCacheTTL is how long a failed read is remembered, so that a storage
// outage costs each check-out nothing more than the cached values.
const failureCacheTTL = time.Second

// settingsFetchTimeout bounds one read of the stored settings.
const settingsFetchTimeout = 2 * time.Second

// DefaultMaxTenants is how many tenants' settings are cached at most.
const DefaultMaxTenants = 10000

// NewSettings returns the settings service. env holds the environment's
// values; ttl is how long a tenant's stored settings are reused. The bounds
// are DefaultBounds(env, 0) until UseBounds says otherwise.
func NewSettings(storage Storage, env LockSettings, ttl time.Duration, logger *slog.Logger) *Settings {
	env.EnabledSource, env.LockTTLSource, env.RetrySource = FromEnvironment, FromEnvironment, FromEnvironment
	s := &Settings{storage: storage, env: env, bounds: locksettings.DefaultBounds(0), ttl: ttl, now: time.Now, logger: logger}
	s.UseCacheSize(DefaultMaxTenants)
	return s
}

// UseBounds sets the bounds runtime settings must keep to. Call it before
// the service is used.
func (s *Settings) UseBounds(b locksettings.Bounds) { s.bounds = b }

// UseCacheSize sets how many tenants' settings are cached at most. Call it
// before the service is used.
func (s *Settings) UseCacheSize(n int) {
	cache, err := lru.New[string, cachedSettings](max(n, 1))
	if err != nil {
		panic(err) // only for a size below 1
	}
	s.cache = cache
}

// Bounds returns the bounds runtime settings must keep to.
func (s *Settings) Bounds() locksettings.Bounds { return s.bounds }

// CachedTenants is how many tenants' settings are cached now.
func (s *Settings) CachedTenants() int { return s.cache.Len() }

// UseClock replaces the clock that ages the cache; tests use it.
func (s *Settings) UseClock(now func() time.Time) { s.now = now }

// Cached returns the tenant's settings in effect when they are cached and
// fresh, without a call to storage; ok false means Effective would read
// them.
func (s *Settings) Cached(ctx context.Context) (settings LockSettings, ok bool) {
	c, ok := s.cache.Get(OkapiFrom(ctx).Tenant)
	if ok && s.now().Before(c.expires) {
		return c.settings, true
	}
	return LockSettings{}, false
}

// Forget drops the tenant's cached settings: the next check-out reads
// them again (storage said they changed).
func (s *Settings) Forget(ctx context.Context) {
	tenant := OkapiFrom(ctx).Tenant
	s.mu.Lock()
	s.cache.Remove(tenant)
	s.mu.Unlock()
}

// Effective returns the tenant's settings in effect. It fails only for a
// tenant storage does not know (KindBadRequest, from storage).
func (s *Settings) Effective(ctx context.Context) (LockSettings, error) {
	if settings, ok := s.Cached(ctx); ok {
		return settings, nil
	}
	tenant := OkapiFrom(ctx).Tenant
	c, _ := s.cache.Peek(tenant)
	start := s.writes.Load()
	// Callers share a read only when they present the same token: one
	// whose token storage refuses must not fail another's check-out.
	v, err, _ := s.flight.Do(tenant+"\x00"+OkapiFrom(ctx).Token, func() (any, error) {
		// The fetch serves every waiting request, so it must not die with
		// the one that happened to start it.
		fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), settingsFetchTimeout)
		defer cancel()
		entry, err := s.fetch(fctx, c)
		if err != nil {
			return nil, err
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		if cur, ok := s.cache.Peek(tenant); ok && cur.write > start {
			// A write landed meanwhile; its value is the one to keep.
			return cur.settings, nil
		}
		s.cache.Add(tenant, entry)
		return entry.settings, nil
	})
	if err != nil {
		return LockSettings{}, err
	}
	return v.(LockSettings), nil
}

// fetch reads and resolves the stored entry; prev is what was cached.
func (s *Settings) fetch(ctx context.Context, prev cachedSettings) (cachedSettings, error) {
	entry, found, err := s.storage.Setting(ctx, locksettings.Scope, locksettings.Key)
	if errs.IsKind(err, errs.KindBadRequest) || errs.IsKind(err, errs.KindUnauthorized) || errs.IsKind(err, errs.KindForbidden) {
		// The tenant is unknown to storage, or the caller may not read
		// the settings: nothing to fall back on, and nothing to remember
		// (a client could otherwise fill the cache with invented tenants,
		// or lock a tenant out with a bad token).
		return cachedSettings{}, err
	}
	if err != nil {
		s.logger.WarnContext(ctx, "check-out lock settings unreadable, keeping the last known", slog.Any("error", err))
		if prev.read {
			out := prev.settings
			out.SettingsError = "settings could not be read from storage; the last settings read apply"
			return cachedSettings{settings: out, expires: s.now().Add(failureCacheTTL), read: true}, nil
		}
		out := s.env
		out.SettingsError = "settings could not be read from storage; the environment's values apply"
		return cachedSettings{settings: out, expires: s.now().Add(failureCacheTTL)}, nil
	}
	if !found {
		return cachedSettings{settings: s.env, expires: s.now().Add(s.ttl), read: true}, nil
	}
	stored, errs := s.readStored(entry.Value)
	out := Resolve(s.env, stored)
	out.ChangedBy, out.ChangedAt = entry.UpdatedBy, entry.UpdatedDate
	if len(errs) > 0 {
		msg := joinFieldErrors(errs)
		s.logger.WarnContext(ctx, "check-out lock settings partly invalid, using the defaults for those fields",
			slog.String("errors", msg))
		out.SettingsError = fmt.Sprintf("the stored %s setting is partly invalid (%s); those fields take their defaults",
			locksettings.Key, msg)
	}
	return cachedSettings{settings: out, expires: s.now().Add(s.ttl), read: true}, nil
}

// readStored decodes a stored value leniently: what is of the wrong type or
// out of bounds is left out and reported.
func (s *Settings) readStored(raw json.RawMessage) (locksettings.Stored, []locksettings.FieldError) {
	stored, errs := locksettings.Decode(raw)
	stored, rangeErrs := s.bounds.Check(stored)
	return stored, append(errs, rangeErrs...)
}

func joinFieldErrors(errs []locksettings.FieldError) string {
	msgs := make([]string, len(errs))
	for i, e := range errs {
		msgs[i] = e.String()
	}
	return strings.Join(msgs, "; ")
}

// Put replaces a tenant's stored settings with stored, the whole document:
// fields it leaves out fall back to the environment. It answers the new
// effective settings, in effect here at once and on other instances within
// the cache period. Values out of bounds are refused, every one named, and
// nothing is written.
func (s *Settings) Put(ctx context.Context, stored locksettings.Stored) (LockSettings, error) {
	if _, errs := s.bounds.Check(stored); len(errs) > 0 {
		return LockSettings{}, invalidSettings(errs)
	}
	return s.write(ctx, "replace", func(locksettings.Stored) (locksettings.Stored, error) { return stored, nil })
}

// Patch changes only the fields patch names, a JSON merge patch (RFC 7386)
// over the stored settings: a field set to null is removed, so the
// environment's value applies to it again. The result must keep to the
// bounds, or nothing is written. Fields already stored that are invalid
// (written straight into the settings entry) are dropped, as they were
// not in effect anyway.
func (s *Settings) Patch(ctx context.Context, patch json.RawMessage) (LockSettings, error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(patch, &fields); err != nil || fields == nil {
		return LockSettings{}, invalidSettings([]locksettings.FieldError{{Message: "a patch must be a JSON object", Value: string(patch)}})
	}
	return s.write(ctx, "patch", func(cur locksettings.Stored) (locksettings.Stored, error) {
		next := cur
		var errs []locksettings.FieldError
		for name, v := range fields {
			if bytes.Equal(bytes.TrimSpace(v), []byte("null")) {
				locksettings.ClearField(&next, name)
				continue
			}
			locksettings.ClearField(&next, name)
			if err := locksettings.DecodeField(&next, name, v); err != nil {
				errs = append(errs, *err)
			}
		}
		if len(errs) == 0 {
			_, errs = s.bounds.Check(next)
		}
		if len(errs) > 0 {
			return locksettings.Stored{}, invalidSettings(errs)
		}
		return next, nil
	})
}

// maxWriteAttempts bounds the read-merge-write rounds of one change when
// other writers keep changing the entry in between.
const maxWriteAttempts = 3

// write reads the stored settings, builds the new ones from them, and
// writes them at the version read, again from the start if another write
// came first. The change is logged with who made it.
func (s *Settings) write(ctx context.Context, op string, build func(cur locksettings.Stored) (locksettings.Stored, error)) (LockSettings, error) {
	for range maxWriteAttempts {
		entry, found, err := s.storage.Setting(ctx, locksettings.Scope, locksettings.Key)
		if err != nil {
			return LockSettings{}, err
		}
		var cur locksettings.Stored
		var prev *SettingEntry
		if found {
			cur, _ = s.readStored(entry.Value)
			prev = &entry
		}
		next, err := build(cur)
		if err != nil {
			return LockSettings{}, err
		}
		raw, err := locksettings.Value(next)
		if err != nil {
			return LockSettings{}, err
		}
		start := s.writes.Add(1)
		err = s.storage.PutSetting(ctx, locksettings.Scope, locksettings.Key, raw, prev)
		if errs.IsKind(err, errs.KindConflict) || errs.IsCode(err, schemas.CodeAlreadyExists) {
			continue // someone else wrote first: read theirs and build again
		}
		if err != nil {
			return LockSettings{}, err
		}
		// What was just written is what applies: a fetch started before
		// the write must not bring the old value back.
		effective := Resolve(s.env, next)
		if user := OkapiFrom(ctx).UserID; user != "" {
			effective.ChangedBy, effective.ChangedAt = user, FormatTime(s.now())
		}
		tenant := OkapiFrom(ctx).Tenant
		s.flight.Forget(tenant)
		s.mu.Lock()
		s.cache.Add(tenant, cachedSettings{settings: effective, expires: s.now().Add(s.ttl), read: true, write: start})
		s.mu.Unlock()
		old := json.RawMessage("null")
		if found {
			old = locksettings.Unwrap(entry.Value)
		}
		s.logger.InfoContext(ctx, "check-out lock settings changed", slog.String("change", op),
			slog.String("user_id", OkapiFrom(ctx).UserID), slog.Any("old", old), slog.Any("new", locksettings.Unwrap(raw)))
		return effective, nil
	}
	return LockSettings{}, errs.Errorf(errs.KindConflict, schemas.CodeConflict, "The settings were changed by someone else meanwhile; try again")
}

// invalidSettings is the refusal of settings out of bounds, one entry per
// field.
func invalidSettings(fields []locksettings.FieldError) error {
	r := &errs.Refusal{}
	for _, e := range fields {
		err := errs.Errorf(errs.KindInvalid, schemas.CodeValidation, "%s", e.String())
		if e.Field != "" {
			err.With(e.Field, e.Value)
		}
		r.Errors = append(r.Errors, err)
	}
	return r
}
