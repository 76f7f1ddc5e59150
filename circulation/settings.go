package circulation

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"
	"golang.org/x/sync/singleflight"
)

// The settings entry that holds a tenant's check-out lock settings, where
// FOLIO keeps it.
const (
	SettingsScope = "mod-circulation"
	SettingsKey   = "checkoutLockFeature"
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

// StoredLockSettings is the value of the checkoutLockFeature entry: FOLIO's
// shape, plus retryIntervalsMs for the seed design's per-retry waits. Absent
// fields fall back to the environment. retryIntervalsMs, when present, wins
// over noOfRetryAttempts × retryInterval.
type StoredLockSettings struct {
	CheckOutLockFeatureEnabled *bool  `json:"checkOutLockFeatureEnabled,omitempty"`
	NoOfRetryAttempts          *int   `json:"noOfRetryAttempts,omitempty"`
	RetryInterval              *int   `json:"retryInterval,omitempty"`
	LockTTL                    *int   `json:"lockTtl,omitempty"`
	RetryIntervalsMs           *[]int `json:"retryIntervalsMs,omitempty"`
}

// The stored fields, by their JSON names.
const (
	fieldEnabled   = "checkOutLockFeatureEnabled"
	fieldAttempts  = "noOfRetryAttempts"
	fieldInterval  = "retryInterval"
	fieldTTL       = "lockTtl"
	fieldIntervals = "retryIntervalsMs"
)

// Bounds are the ranges a tenant's runtime settings must keep to, so that
// no value a librarian (or a client writing the settings entry directly)
// stores can stop check-outs from working: a lock that expires before a
// check-out can write makes every check-out fail LOCK_LOST; retries with no
// wait between them hammer storage; waits adding up past the request's
// deadline turn "unable to acquire lock" into a timeout.
type Bounds struct {
	MinLockTTL, MaxLockTTL     time.Duration
	MinRetryWait, MaxRetryWait time.Duration
	MaxRetries                 int
	// MaxTotalWait bounds the sum of the retry waits.
	MaxTotalWait time.Duration
}

// DefaultBounds are the bounds for the environment's settings env and the
// request timeout: a lock lives 1 s to 10 min, a retry waits 50 ms to 60 s,
// at most 50 retries, their waits adding up to at most a second less than
// the request timeout (no limit when it is 0). Where the environment itself
// goes beyond one of these (a shorter TTL, say), its value widens the bound:
// an operator's choice is never refused to a librarian.
func DefaultBounds(env LockSettings, requestTimeout time.Duration) Bounds {
	b := Bounds{
		MinLockTTL: time.Second, MaxLockTTL: 10 * time.Minute,
		MinRetryWait: 50 * time.Millisecond, MaxRetryWait: time.Minute,
		MaxRetries: 50, MaxTotalWait: time.Duration(math.MaxInt64),
	}
	if requestTimeout > 0 {
		b.MaxTotalWait = max(requestTimeout-time.Second, requestTimeout/2)
	}
	b.MinLockTTL = min(b.MinLockTTL, env.LockTTL)
	b.MaxLockTTL = max(b.MaxLockTTL, env.LockTTL)
	b.MaxRetries = max(b.MaxRetries, len(env.RetryIntervals))
	b.MaxTotalWait = max(b.MaxTotalWait, total(env.RetryIntervals))
	for _, w := range env.RetryIntervals {
		b.MinRetryWait = min(b.MinRetryWait, w)
		b.MaxRetryWait = max(b.MaxRetryWait, w)
	}
	return b
}

func total(waits []time.Duration) time.Duration {
	var sum time.Duration
	for _, w := range waits {
		sum += w
	}
	return sum
}

// FieldError is one settings field that cannot be used, and why.
type FieldError struct {
	Field   string
	Message string
	// Value is the offending value as JSON, cut to 100 characters.
	Value string
}

func (e FieldError) String() string {
	if e.Field == "" {
		return e.Message
	}
	return e.Field + ": " + e.Message
}

func fieldError(field string, value json.RawMessage, format string, args ...any) FieldError {
	v := string(value)
	if r := []rune(v); len(r) > 100 {
		v = string(r[:100]) + "…"
	}
	return FieldError{Field: field, Message: fmt.Sprintf(format, args...), Value: v}
}

// decodeStored reads a stored value field by field: each field of the wrong
// type (or null) is left out and reported, never decoded half-way, so one
// bad field can neither throw away the others nor stand in for its own
// value with a zero (a string "true" must not read as false).
//
// The value may be the object itself or, as FOLIO stores it, a string
// holding the object.
func decodeStored(raw json.RawMessage) (StoredLockSettings, []FieldError) {
	raw = unwrapString(raw)
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil || fields == nil {
		return StoredLockSettings{}, []FieldError{fieldError("", raw, "the value is neither a JSON object nor a string holding one")}
	}
	var s StoredLockSettings
	var errs []FieldError
	for _, name := range []string{fieldEnabled, fieldAttempts, fieldInterval, fieldTTL, fieldIntervals} {
		v, ok := fields[name]
		if !ok {
			continue
		}
		if err := decodeField(&s, name, v); err != nil {
			errs = append(errs, *err)
		}
	}
	return s, errs
}

// decodeField decodes one stored field into s, or says why it cannot.
func decodeField(s *StoredLockSettings, name string, v json.RawMessage) *FieldError {
	if bytes.Equal(bytes.TrimSpace(v), []byte("null")) {
		e := fieldError(name, v, "must not be null")
		return &e
	}
	switch name {
	case fieldEnabled:
		var b bool
		if err := json.Unmarshal(v, &b); err != nil {
			e := fieldError(name, v, "must be true or false, got %s", v)
			return &e
		}
		s.CheckOutLockFeatureEnabled = &b
	case fieldIntervals:
		var items []json.RawMessage
		if err := json.Unmarshal(v, &items); err != nil || items == nil {
			e := fieldError(name, v, "must be an array of integers, got %s", v)
			return &e
		}
		waits := make([]int, len(items))
		for i, item := range items {
			n, ok := integer(item)
			if !ok {
				e := fieldError(name, v, "must be an array of integers, got %s at index %d", item, i)
				return &e
			}
			waits[i] = n
		}
		s.RetryIntervalsMs = &waits
	default:
		n, ok := integer(v)
		if !ok {
			e := fieldError(name, v, "must be an integer, got %s", v)
			return &e
		}
		switch name {
		case fieldAttempts:
			s.NoOfRetryAttempts = &n
		case fieldInterval:
			s.RetryInterval = &n
		case fieldTTL:
			s.LockTTL = &n
		}
	}
	return nil
}

// integer reads a JSON number that is a whole number a 32-bit integer
// holds (3000 and 3000.0 and 3e3 alike); anything else, strings included,
// is not one.
func integer(v json.RawMessage) (int, bool) {
	d := json.NewDecoder(bytes.NewReader(v))
	d.UseNumber()
	var x any
	if err := d.Decode(&x); err != nil {
		return 0, false
	}
	n, ok := x.(json.Number)
	if !ok {
		return 0, false
	}
	f, err := n.Float64()
	if err != nil || f != math.Trunc(f) || f < math.MinInt32 || f > math.MaxInt32 {
		return 0, false
	}
	return int(f), true
}

// check applies the bounds to s: the fields out of range are reported and
// left out of the returned settings, which the environment then fills.
func (b Bounds) check(s StoredLockSettings, env LockSettings) (StoredLockSettings, []FieldError) {
	var errs []FieldError
	ms := func(d time.Duration) int64 { return d.Milliseconds() }
	if s.LockTTL != nil && (*s.LockTTL < int(ms(b.MinLockTTL)) || *s.LockTTL > int(ms(b.MaxLockTTL))) {
		errs = append(errs, fieldError(fieldTTL, jsonOf(*s.LockTTL), "must be from %d to %d ms, got %d",
			ms(b.MinLockTTL), ms(b.MaxLockTTL), *s.LockTTL))
		s.LockTTL = nil
	}
	if s.RetryInterval != nil && (*s.RetryInterval < int(ms(b.MinRetryWait)) || *s.RetryInterval > int(ms(b.MaxRetryWait))) {
		errs = append(errs, fieldError(fieldInterval, jsonOf(*s.RetryInterval), "must be from %d to %d ms, got %d",
			ms(b.MinRetryWait), ms(b.MaxRetryWait), *s.RetryInterval))
		s.RetryInterval = nil
	}
	if s.NoOfRetryAttempts != nil && (*s.NoOfRetryAttempts < 0 || *s.NoOfRetryAttempts > b.MaxRetries) {
		errs = append(errs, fieldError(fieldAttempts, jsonOf(*s.NoOfRetryAttempts), "must be from 0 to %d, got %d",
			b.MaxRetries, *s.NoOfRetryAttempts))
		s.NoOfRetryAttempts = nil
	}
	if s.RetryIntervalsMs != nil {
		waits := *s.RetryIntervalsMs
		if len(waits) > b.MaxRetries {
			errs = append(errs, fieldError(fieldIntervals, jsonOf(waits), "may hold at most %d waits, got %d", b.MaxRetries, len(waits)))
			s.RetryIntervalsMs = nil
		} else {
			for _, w := range waits {
				if w < int(ms(b.MinRetryWait)) || w > int(ms(b.MaxRetryWait)) {
					errs = append(errs, fieldError(fieldIntervals, jsonOf(waits), "waits must be from %d to %d ms, got %d",
						ms(b.MinRetryWait), ms(b.MaxRetryWait), w))
					s.RetryIntervalsMs = nil
					break
				}
			}
		}
	}
	// The retry schedule as a whole: drop the fields that make it too
	// long, the per-retry list first, then FOLIO's pair.
	for range 2 {
		sum := total(Resolve(env, s).RetryIntervals)
		if sum <= b.MaxTotalWait {
			break
		}
		tooLong := func(field string, v any) {
			errs = append(errs, fieldError(field, jsonOf(v), "makes the retry waits add up to %d ms, more than the %d ms a check-out may wait",
				sum.Milliseconds(), b.MaxTotalWait.Milliseconds()))
		}
		switch {
		case s.RetryIntervalsMs != nil:
			tooLong(fieldIntervals, *s.RetryIntervalsMs)
			s.RetryIntervalsMs = nil
		default:
			if s.NoOfRetryAttempts != nil {
				tooLong(fieldAttempts, *s.NoOfRetryAttempts)
			}
			if s.RetryInterval != nil {
				tooLong(fieldInterval, *s.RetryInterval)
			}
			s.NoOfRetryAttempts, s.RetryInterval = nil, nil
		}
	}
	return s, errs
}

func jsonOf(v any) json.RawMessage {
	b, _ := json.Marshal(v)
	return b
}

// FOLIO's values for fields a stored entry leaves out (mod-circulation's
// CheckoutLockConfiguration): 30 retries 250 ms apart, a 2 s lock.
const (
	DefaultNoOfRetryAttempts = 30
	DefaultRetryIntervalMs   = 250
	DefaultLockTTLMs         = 2000
)

// Resolve gives the settings in effect when a tenant's settings entry
// exists and holds stored. Fields the entry leaves out take FOLIO's
// defaults (DefaultNoOfRetryAttempts, DefaultRetryIntervalMs,
// DefaultLockTTLMs), as mod-circulation reading the same entry would,
// except the feature flag: an entry that does not say
// checkOutLockFeatureEnabled keeps the environment's (FOLIO reads it as
// false, and no field left out may switch the lock off). When no entry
// exists the environment's settings apply whole.
func Resolve(env LockSettings, stored StoredLockSettings) LockSettings {
	out := env
	out.EnabledSource = FromEnvironment
	if stored.CheckOutLockFeatureEnabled != nil {
		out.Enabled, out.EnabledSource = *stored.CheckOutLockFeatureEnabled, FromSettings
	}
	out.LockTTL, out.LockTTLSource = DefaultLockTTLMs*time.Millisecond, FromDefault
	if stored.LockTTL != nil {
		out.LockTTL, out.LockTTLSource = time.Duration(*stored.LockTTL)*time.Millisecond, FromSettings
	}
	if stored.RetryIntervalsMs != nil {
		out.RetryIntervals = make([]time.Duration, len(*stored.RetryIntervalsMs))
		for i, ms := range *stored.RetryIntervalsMs {
			out.RetryIntervals[i] = time.Duration(ms) * time.Millisecond
		}
		out.RetrySource = FromSettings
		return out
	}
	// FOLIO's shape: n retries, each after the same wait; a missing half
	// takes FOLIO's default.
	n, wait, source := DefaultNoOfRetryAttempts, DefaultRetryIntervalMs*time.Millisecond, FromDefault
	if stored.NoOfRetryAttempts != nil {
		n, source = *stored.NoOfRetryAttempts, FromSettings
	}
	if stored.RetryInterval != nil {
		wait, source = time.Duration(*stored.RetryInterval)*time.Millisecond, FromSettings
	}
	out.RetryIntervals = make([]time.Duration, n)
	for i := range out.RetryIntervals {
		out.RetryIntervals[i] = wait
	}
	out.RetrySource = source
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
	bounds  Bounds
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
	s := &Settings{storage: storage, env: env, bounds: DefaultBounds(env, 0), ttl: ttl, now: time.Now, logger: logger}
	s.UseCacheSize(DefaultMaxTenants)
	return s
}

// UseBounds sets the bounds runtime settings must keep to. Call it before
// the service is used.
func (s *Settings) UseBounds(b Bounds) { s.bounds = b }

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
func (s *Settings) Bounds() Bounds { return s.bounds }

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
	entry, found, err := s.storage.Setting(ctx, SettingsScope, SettingsKey)
	if IsKind(err, KindBadRequest) || IsKind(err, KindUnauthorized) || IsKind(err, KindForbidden) {
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
			SettingsKey, msg)
	}
	return cachedSettings{settings: out, expires: s.now().Add(s.ttl), read: true}, nil
}

// readStored decodes a stored value leniently: what is of the wrong type or
// out of bounds is left out and reported.
func (s *Settings) readStored(raw json.RawMessage) (StoredLockSettings, []FieldError) {
	stored, errs := decodeStored(raw)
	stored, rangeErrs := s.bounds.check(stored, s.env)
	return stored, append(errs, rangeErrs...)
}

func joinFieldErrors(errs []FieldError) string {
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
func (s *Settings) Put(ctx context.Context, stored StoredLockSettings) (LockSettings, error) {
	if _, errs := s.bounds.check(stored, s.env); len(errs) > 0 {
		return LockSettings{}, invalidSettings(errs)
	}
	return s.write(ctx, "replace", func(StoredLockSettings) (StoredLockSettings, error) { return stored, nil })
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
		return LockSettings{}, invalidSettings([]FieldError{fieldError("", patch, "a patch must be a JSON object")})
	}
	return s.write(ctx, "patch", func(cur StoredLockSettings) (StoredLockSettings, error) {
		next := cur
		var errs []FieldError
		for name, v := range fields {
			if bytes.Equal(bytes.TrimSpace(v), []byte("null")) {
				clearField(&next, name)
				continue
			}
			clearField(&next, name)
			if err := decodeField(&next, name, v); err != nil {
				errs = append(errs, *err)
			}
		}
		if len(errs) == 0 {
			_, errs = s.bounds.check(next, s.env)
		}
		if len(errs) > 0 {
			return StoredLockSettings{}, invalidSettings(errs)
		}
		return next, nil
	})
}

func clearField(s *StoredLockSettings, name string) {
	switch name {
	case fieldEnabled:
		s.CheckOutLockFeatureEnabled = nil
	case fieldAttempts:
		s.NoOfRetryAttempts = nil
	case fieldInterval:
		s.RetryInterval = nil
	case fieldTTL:
		s.LockTTL = nil
	case fieldIntervals:
		s.RetryIntervalsMs = nil
	}
}

// maxWriteAttempts bounds the read-merge-write rounds of one change when
// other writers keep changing the entry in between.
const maxWriteAttempts = 3

// write reads the stored settings, builds the new ones from them, and
// writes them at the version read, again from the start if another write
// came first. The change is logged with who made it.
func (s *Settings) write(ctx context.Context, op string, build func(cur StoredLockSettings) (StoredLockSettings, error)) (LockSettings, error) {
	for range maxWriteAttempts {
		entry, found, err := s.storage.Setting(ctx, SettingsScope, SettingsKey)
		if err != nil {
			return LockSettings{}, err
		}
		var cur StoredLockSettings
		var prev *SettingEntry
		if found {
			cur, _ = s.readStored(entry.Value)
			prev = &entry
		}
		next, err := build(cur)
		if err != nil {
			return LockSettings{}, err
		}
		raw, err := storedValue(next)
		if err != nil {
			return LockSettings{}, err
		}
		start := s.writes.Add(1)
		err = s.storage.PutSetting(ctx, SettingsScope, SettingsKey, raw, prev)
		if IsKind(err, KindConflict) || IsCode(err, CodeAlreadyExists) {
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
			old = unwrapString(entry.Value)
		}
		s.logger.InfoContext(ctx, "check-out lock settings changed", slog.String("change", op),
			slog.String("user_id", OkapiFrom(ctx).UserID), slog.Any("old", old), slog.Any("new", unwrapString(raw)))
		return effective, nil
	}
	return LockSettings{}, Errorf(KindConflict, CodeConflict, "The settings were changed by someone else meanwhile; try again")
}

// unwrapString is the JSON a string value holds, when it holds JSON, and
// raw itself otherwise.
func unwrapString(raw json.RawMessage) json.RawMessage {
	var text string
	if json.Unmarshal(raw, &text) == nil && json.Valid([]byte(text)) {
		return json.RawMessage(text)
	}
	return raw
}

// storedValue is the settings entry's value for s as FOLIO stores it: a
// JSON string holding the object, which mod-circulation parses.
func storedValue(s StoredLockSettings) (json.RawMessage, error) {
	object, err := json.Marshal(s)
	if err != nil {
		return nil, err
	}
	return json.Marshal(string(object))
}

// invalidSettings is the refusal of settings out of bounds, one entry per
// field.
func invalidSettings(errs []FieldError) error {
	r := &Refusal{}
	for _, e := range errs {
		err := Errorf(KindInvalid, CodeValidation, "%s", e.String())
		if e.Field != "" {
			err.With(e.Field, e.Value)
		}
		r.Errors = append(r.Errors, err)
	}
	return r
}
