package circulation

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
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
	if s.LockTTL != nil && (*s.LockTTL < 1 || *s.LockTTL > maxLockTTLMs) {
		return fmt.Errorf("lockTtl must be 1..%d, got %d", maxLockTTLMs, *s.LockTTL)
	}
	if s.RetryInterval != nil && (*s.RetryInterval < 0 || *s.RetryInterval > maxRetryWaitMs) {
		return fmt.Errorf("retryInterval must be 0..%d, got %d", maxRetryWaitMs, *s.RetryInterval)
	}
	if s.NoOfRetryAttempts != nil && (*s.NoOfRetryAttempts < 0 || *s.NoOfRetryAttempts > maxRetryAttempt) {
		return fmt.Errorf("noOfRetryAttempts must be 0..%d, got %d", maxRetryAttempt, *s.NoOfRetryAttempts)
	}
	if s.RetryIntervalsMs != nil {
		if len(*s.RetryIntervalsMs) > maxRetryAttempt {
			return fmt.Errorf("retryIntervalsMs may hold at most %d waits, got %d", maxRetryAttempt, len(*s.RetryIntervalsMs))
		}
		for _, ms := range *s.RetryIntervalsMs {
			if ms < 0 || ms > maxRetryWaitMs {
				return fmt.Errorf("retryIntervalsMs waits must be 0..%d, got %d", maxRetryWaitMs, ms)
			}
		}
	}
	return nil
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
// environment's values apply and the failure is logged.
type Settings struct {
	storage Storage
	env     LockSettings
	ttl     time.Duration
	now     func() time.Time
	logger  *slog.Logger

	mu     sync.Mutex
	cache  map[string]cachedSettings
	flight singleflight.Group
}

type cachedSettings struct {
	settings LockSettings
	expires  time.Time
}

// failureCacheTTL is how long a failed read is remembered, so that a storage
// outage costs each check-out nothing more than the environment's values.
const failureCacheTTL = time.Second

// settingsFetchTimeout bounds one read of the stored settings.
const settingsFetchTimeout = 2 * time.Second

// NewSettings returns the settings service. env holds the environment's
// values; ttl is how long a tenant's stored settings are reused.
func NewSettings(storage Storage, env LockSettings, ttl time.Duration, logger *slog.Logger) *Settings {
	env.EnabledSource, env.LockTTLSource, env.RetrySource = FromEnvironment, FromEnvironment, FromEnvironment
	return &Settings{storage: storage, env: env, ttl: ttl, now: time.Now, logger: logger, cache: map[string]cachedSettings{}}
}

// Effective returns the tenant's settings in effect. It never fails.
func (s *Settings) Effective(ctx context.Context) LockSettings {
	tenant := OkapiFrom(ctx).Tenant
	s.mu.Lock()
	c, ok := s.cache[tenant]
	s.mu.Unlock()
	if ok && s.now().Before(c.expires) {
		return c.settings
	}
	v, _, _ := s.flight.Do(tenant, func() (any, error) {
		// The fetch serves every waiting request, so it must not die with
		// the one that happened to start it.
		fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), settingsFetchTimeout)
		defer cancel()
		settings, ttl := s.fetch(fctx)
		s.mu.Lock()
		s.cache[tenant] = cachedSettings{settings: settings, expires: s.now().Add(ttl)}
		s.mu.Unlock()
		return settings, nil
	})
	return v.(LockSettings)
}

// fetch reads and resolves the stored entry, and says how long to keep it.
func (s *Settings) fetch(ctx context.Context) (LockSettings, time.Duration) {
	raw, found, err := s.storage.Setting(ctx, SettingsScope, SettingsKey)
	if err != nil {
		s.logger.WarnContext(ctx, "check-out lock settings unreadable, using the environment's", slog.Any("error", err))
		out := s.env
		out.SettingsError = "settings could not be read from storage; the environment's values apply"
		return out, failureCacheTTL
	}
	if !found {
		return s.env, s.ttl
	}
	var stored StoredLockSettings
	err = json.Unmarshal(raw, &stored)
	if err == nil {
		err = stored.Validate()
	}
	if err != nil {
		s.logger.WarnContext(ctx, "check-out lock settings invalid, using the environment's", slog.Any("error", err))
		out := s.env
		out.SettingsError = fmt.Sprintf("the stored %s setting is invalid (%v); the environment's values apply", SettingsKey, err)
		return out, s.ttl
	}
	return Resolve(s.env, stored), s.ttl
}

// Put stores a tenant's settings and returns the new effective ones. The
// change is visible here at once and on other instances within the cache
// period.
func (s *Settings) Put(ctx context.Context, stored StoredLockSettings) (LockSettings, error) {
	if err := stored.Validate(); err != nil {
		return LockSettings{}, Errorf(KindInvalid, CodeValidation, "%v", err)
	}
	raw, err := json.Marshal(stored)
	if err != nil {
		return LockSettings{}, err
	}
	if err := s.storage.PutSetting(ctx, SettingsScope, SettingsKey, raw); err != nil {
		return LockSettings{}, err
	}
	tenant := OkapiFrom(ctx).Tenant
	s.mu.Lock()
	delete(s.cache, tenant)
	s.mu.Unlock()
	return s.Effective(ctx), nil
}
