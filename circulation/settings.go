package circulation

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

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
	// SettingsError says why the stored settings could not be used, if so;
	// the environment's values are then in effect.
	SettingsError string
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

// Bounds of stored values, the same as the environment's.
const (
	maxLockTTLMs    = 600000
	maxRetryWaitMs  = 60000
	maxRetryAttempt = 100
)

// Validate checks a stored value's ranges (its shape is the JSON Schema's
// job, but a value written through /settings/entries was never checked).
func (s StoredLockSettings) Validate() error {
	var errs []error
	for _, check := range s.checks() {
		if err := check.err(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// fieldCheck validates one field and can drop it.
type fieldCheck struct {
	err  func() error
	drop func()
}

func (s *StoredLockSettings) checks() []fieldCheck {
	return []fieldCheck{
		{func() error {
			if s.LockTTL != nil && (*s.LockTTL < 1 || *s.LockTTL > maxLockTTLMs) {
				return fmt.Errorf("lockTtl must be 1..%d, got %d", maxLockTTLMs, *s.LockTTL)
			}
			return nil
		}, func() { s.LockTTL = nil }},
		{func() error {
			if s.RetryInterval != nil && (*s.RetryInterval < 0 || *s.RetryInterval > maxRetryWaitMs) {
				return fmt.Errorf("retryInterval must be 0..%d, got %d", maxRetryWaitMs, *s.RetryInterval)
			}
			return nil
		}, func() { s.RetryInterval = nil }},
		{func() error {
			if s.NoOfRetryAttempts != nil && (*s.NoOfRetryAttempts < 0 || *s.NoOfRetryAttempts > maxRetryAttempt) {
				return fmt.Errorf("noOfRetryAttempts must be 0..%d, got %d", maxRetryAttempt, *s.NoOfRetryAttempts)
			}
			return nil
		}, func() { s.NoOfRetryAttempts = nil }},
		{func() error {
			if s.RetryIntervalsMs == nil {
				return nil
			}
			if len(*s.RetryIntervalsMs) > maxRetryAttempt {
				return fmt.Errorf("retryIntervalsMs may hold at most %d waits, got %d", maxRetryAttempt, len(*s.RetryIntervalsMs))
			}
			for _, ms := range *s.RetryIntervalsMs {
				if ms < 0 || ms > maxRetryWaitMs {
					return fmt.Errorf("retryIntervalsMs waits must be 0..%d, got %d", maxRetryWaitMs, ms)
				}
			}
			return nil
		}, func() { s.RetryIntervalsMs = nil }},
	}
}

// decodeStored reads a stored value field by field, keeping every field
// that is valid and reporting the others: one bad field must not throw away
// the rest (least of all checkOutLockFeatureEnabled).
func decodeStored(raw json.RawMessage) (StoredLockSettings, error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil {
		return StoredLockSettings{}, fmt.Errorf("the value is not a JSON object")
	}
	var stored StoredLockSettings
	var errs []error
	for name, dst := range map[string]any{
		"checkOutLockFeatureEnabled": &stored.CheckOutLockFeatureEnabled, "noOfRetryAttempts": &stored.NoOfRetryAttempts,
		"retryInterval": &stored.RetryInterval, "lockTtl": &stored.LockTTL, "retryIntervalsMs": &stored.RetryIntervalsMs,
	} {
		if v, ok := fields[name]; ok {
			if err := json.Unmarshal(v, dst); err != nil {
				errs = append(errs, fmt.Errorf("%s has the wrong type", name))
			}
		}
	}
	for _, check := range stored.checks() {
		if err := check.err(); err != nil {
			errs = append(errs, err)
			check.drop()
		}
	}
	return stored, errors.Join(errs...)
}

// Resolve overlays a tenant's stored settings on the environment's.
func Resolve(env LockSettings, stored StoredLockSettings) LockSettings {
	out := env
	out.EnabledSource, out.LockTTLSource, out.RetrySource = FromEnvironment, FromEnvironment, FromEnvironment
	if stored.CheckOutLockFeatureEnabled != nil {
		out.Enabled, out.EnabledSource = *stored.CheckOutLockFeatureEnabled, FromSettings
	}
	if stored.LockTTL != nil {
		out.LockTTL, out.LockTTLSource = time.Duration(*stored.LockTTL)*time.Millisecond, FromSettings
	}
	switch {
	case stored.RetryIntervalsMs != nil:
		out.RetryIntervals = make([]time.Duration, len(*stored.RetryIntervalsMs))
		for i, ms := range *stored.RetryIntervalsMs {
			out.RetryIntervals[i] = time.Duration(ms) * time.Millisecond
		}
		out.RetrySource = FromSettings
	case stored.NoOfRetryAttempts != nil || stored.RetryInterval != nil:
		// FOLIO's shape: n retries, each after the same wait. A missing half
		// comes from the environment (its retry count, its first wait).
		n := len(env.RetryIntervals)
		if stored.NoOfRetryAttempts != nil {
			n = *stored.NoOfRetryAttempts
		}
		wait := time.Duration(0)
		if len(env.RetryIntervals) > 0 {
			wait = env.RetryIntervals[0]
		}
		if stored.RetryInterval != nil {
			wait = time.Duration(*stored.RetryInterval) * time.Millisecond
		}
		out.RetryIntervals = make([]time.Duration, n)
		for i := range out.RetryIntervals {
			out.RetryIntervals[i] = wait
		}
		out.RetrySource = FromSettings
	}
	return out
}

// Settings gives each tenant's effective lock settings, reading the stored
// entry at most once per cache period per tenant (concurrent readers share
// one fetch). A storage that cannot be read never blocks a check-out: the
// last settings read for the tenant stay in effect, or, if none were ever
// read, the environment's; the failure is logged.
type Settings struct {
	storage Storage
	env     LockSettings
	ttl     time.Duration
	now     func() time.Time
	logger  *slog.Logger

	mu    sync.Mutex
	cache map[string]cachedSettings
	// puts counts each tenant's writes, so that a fetch that started before
	// a write does not cache what it read over what was written.
	puts   map[string]uint64
	flight singleflight.Group
}

type cachedSettings struct {
	settings LockSettings
	expires  time.Time
	// read says the settings came from storage (not a fallback), so they
	// may stand in for storage while it cannot be read.
	read bool
}

// failureCacheTTL is how long a failed read is remembered, so that a storage
// outage costs each check-out nothing more than the cached values.
const failureCacheTTL = time.Second

// settingsFetchTimeout bounds one read of the stored settings.
const settingsFetchTimeout = 2 * time.Second

// NewSettings returns the settings service. env holds the environment's
// values; ttl is how long a tenant's stored settings are reused.
func NewSettings(storage Storage, env LockSettings, ttl time.Duration, logger *slog.Logger) *Settings {
	env.EnabledSource, env.LockTTLSource, env.RetrySource = FromEnvironment, FromEnvironment, FromEnvironment
	return &Settings{storage: storage, env: env, ttl: ttl, now: time.Now, logger: logger,
		cache: map[string]cachedSettings{}, puts: map[string]uint64{}}
}

// UseClock replaces the clock that ages the cache; tests use it.
func (s *Settings) UseClock(now func() time.Time) { s.now = now }

// Effective returns the tenant's settings in effect. It never fails.
func (s *Settings) Effective(ctx context.Context) LockSettings {
	tenant := OkapiFrom(ctx).Tenant
	s.mu.Lock()
	c, ok := s.cache[tenant]
	gen := s.puts[tenant]
	s.mu.Unlock()
	if ok && s.now().Before(c.expires) {
		return c.settings
	}
	v, _, _ := s.flight.Do(tenant, func() (any, error) {
		// The fetch serves every waiting request, so it must not die with
		// the one that happened to start it.
		fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), settingsFetchTimeout)
		defer cancel()
		entry := s.fetch(fctx, c)
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.puts[tenant] != gen {
			// A Put landed meanwhile; its value is the one to keep.
			return s.cache[tenant].settings, nil
		}
		s.cache[tenant] = entry
		return entry.settings, nil
	})
	return v.(LockSettings)
}

// fetch reads and resolves the stored entry; prev is what was cached.
func (s *Settings) fetch(ctx context.Context, prev cachedSettings) cachedSettings {
	raw, found, err := s.storage.Setting(ctx, SettingsScope, SettingsKey)
	if err != nil {
		s.logger.WarnContext(ctx, "check-out lock settings unreadable, keeping the last known", slog.Any("error", err))
		if prev.read {
			out := prev.settings
			out.SettingsError = "settings could not be read from storage; the last settings read apply"
			return cachedSettings{settings: out, expires: s.now().Add(failureCacheTTL), read: true}
		}
		out := s.env
		out.SettingsError = "settings could not be read from storage; the environment's values apply"
		return cachedSettings{settings: out, expires: s.now().Add(failureCacheTTL)}
	}
	if !found {
		return cachedSettings{settings: s.env, expires: s.now().Add(s.ttl), read: true}
	}
	stored, err := decodeStored(raw)
	out := Resolve(s.env, stored)
	if err != nil {
		s.logger.WarnContext(ctx, "check-out lock settings partly invalid, using the environment's for those fields", slog.Any("error", err))
		out.SettingsError = fmt.Sprintf("the stored %s setting is partly invalid (%v); the environment's values apply to those fields",
			SettingsKey, strings.ReplaceAll(err.Error(), "\n", "; "))
	}
	return cachedSettings{settings: out, expires: s.now().Add(s.ttl), read: true}
}

// Put stores a tenant's settings and returns the new effective ones. The
// change is in effect here at once and on other instances within the cache
// period.
func (s *Settings) Put(ctx context.Context, stored StoredLockSettings) (LockSettings, error) {
	if err := stored.Validate(); err != nil {
		return LockSettings{}, Errorf(KindInvalid, CodeValidation, "%v", strings.ReplaceAll(err.Error(), "\n", "; "))
	}
	raw, err := json.Marshal(stored)
	if err != nil {
		return LockSettings{}, err
	}
	if err := s.storage.PutSetting(ctx, SettingsScope, SettingsKey, raw); err != nil {
		return LockSettings{}, err
	}
	// What was just written is what applies: a fetch started before the
	// write must not bring the old value back.
	tenant := OkapiFrom(ctx).Tenant
	effective := Resolve(s.env, stored)
	s.flight.Forget(tenant)
	s.mu.Lock()
	s.puts[tenant]++
	s.cache[tenant] = cachedSettings{settings: effective, expires: s.now().Add(s.ttl), read: true}
	s.mu.Unlock()
	return effective, nil
}
