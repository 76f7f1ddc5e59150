package circulation

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/checkoutlock/schemas/errs"

	lru "github.com/hashicorp/golang-lru/v2"
	"golang.org/x/sync/singleflight"

	"github.com/checkoutlock/schemas/locksettings"
)

// Settings gives each tenant's effective lock settings, reading the stored
// entry at most once per cache period per tenant (concurrent readers share
// one fetch). A storage that cannot be read never blocks a check-out: the
// last settings read for the tenant stay in effect, or, if none were ever
// read, the environment's; the failure is logged. A tenant storage does not
// know is an error, and is never cached. The cache holds at most MaxTenants
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

// SettingsConfig is the settings service's configuration, all of it given
// to NewSettings: Env and TTL say what applies, the rest has defaults.
type SettingsConfig struct {
	// Env holds the environment's values, which apply where the tenant
	// stores none: its lockTtl and waits. Its Enabled is not read: the
	// lock feature's default is storage's (Storage.LockFeatureDefault).
	Env LockSettings
	// TTL is how long a tenant's stored settings are reused.
	TTL time.Duration
	// Bounds are the bounds runtime settings must keep to; the zero value
	// means locksettings.DefaultBounds(0).
	Bounds locksettings.Bounds
	// MaxTenants is how many tenants' settings are cached at most: 0 means
	// DefaultMaxTenants, and any other value below 1 means 1.
	MaxTenants int
	// Now is the clock that ages the cache; nil means time.Now. Tests
	// replace it.
	Now func() time.Time
}

// NewSettings returns the settings service, configured by cfg.
func NewSettings(storage Storage, cfg SettingsConfig, logger *slog.Logger) *Settings {
	env := cfg.Env
	env.EnabledSource, env.LockTTLSource, env.RetrySource = FromEnvironment, FromEnvironment, FromEnvironment
	bounds := cfg.Bounds
	if bounds == (locksettings.Bounds{}) {
		bounds = locksettings.DefaultBounds(0)
	}
	size := cfg.MaxTenants
	if size == 0 {
		size = DefaultMaxTenants
	}
	cache, err := lru.New[string, cachedSettings](max(size, 1))
	if err != nil {
		panic(err) // only for a size below 1
	}
	now := cfg.Now
	if now == nil {
		now = time.Now
	}
	return &Settings{storage: storage, env: env, bounds: bounds, ttl: cfg.TTL, now: now, logger: logger, cache: cache}
}

// CachedTenants is how many tenants' settings are cached now.
func (s *Settings) CachedTenants() int { return s.cache.Len() }

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

// Mark is where the settings' writes stand: FromRead keeps a read taken
// after it only when no write has landed since.
func (s *Settings) Mark() uint64 { return s.writes.Load() }

// FromRead returns the settings in effect given the tenant's entry as read
// with a check-out's validation, and keeps them as a read from storage
// would be kept, unless a write landed after mark (taken before the read):
// then the written ones are kept and returned.
func (s *Settings) FromRead(ctx context.Context, read SettingRead, mark uint64) LockSettings {
	c := s.resolve(ctx, read.Entry, read.Found)
	tenant := OkapiFrom(ctx).Tenant
	s.mu.Lock()
	defer s.mu.Unlock()
	if cur, ok := s.cache.Peek(tenant); ok && cur.write > mark {
		return cur.settings
	}
	s.cache.Add(tenant, c)
	return c.settings
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
		out := s.environment()
		out.SettingsError = "settings could not be read from storage; the environment's values apply"
		return cachedSettings{settings: out, expires: s.now().Add(failureCacheTTL)}, nil
	}
	return s.resolve(ctx, entry, found), nil
}

// resolve is the settings in effect with entry stored (found), as kept.
func (s *Settings) resolve(ctx context.Context, entry SettingEntry, found bool) cachedSettings {
	if !found {
		return cachedSettings{settings: s.environment(), expires: s.now().Add(s.ttl), read: true}
	}
	stored, errs := s.readStored(entry.Value)
	out := Resolve(s.environment(), stored)
	out.ChangedBy, out.ChangedAt = entry.UpdatedBy, entry.UpdatedDate
	if len(errs) > 0 {
		msg := joinFieldErrors(errs)
		s.logger.WarnContext(ctx, "check-out lock settings partly invalid, using the defaults for those fields",
			slog.String("errors", msg))
		out.SettingsError = fmt.Sprintf("the stored %s setting is partly invalid (%s); those fields take their defaults",
			locksettings.Key, msg)
	}
	return cachedSettings{settings: out, expires: s.now().Add(s.ttl), read: true}
}
