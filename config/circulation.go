package config

import (
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"
)

// Circulation configures the circulation service. The check-out lock
// variables are the seed design's; each tenant's librarians can override
// them at runtime through the checkoutLockFeature setting.
type Circulation struct {
	// HTTPAddr is the address the API listens on.
	HTTPAddr string `env:"HTTP_ADDR" envDefault:":8080"`
	Auth     Auth
	// InstanceName names this instance in the locks it holds; default
	// host:port.
	InstanceName string `env:"INSTANCE_NAME"`
	// StorageURL is circulation-storage's base URL.
	StorageURL string `env:"STORAGE_URL" envDefault:"http://127.0.0.1:8081"`
	// CheckoutLockFeatureEnabled turns the patron lock around check-out on.
	// Off by default, as in FOLIO.
	CheckoutLockFeatureEnabled bool `env:"CHECKOUT_LOCK_FEATURE_ENABLED" envDefault:"false"`
	// LockTTLMs is the lifetime of a patron's lock.
	LockTTLMs int `env:"LOCK_TTL_MS" envDefault:"3000"`
	// RetryIntervalMs is one wait per retry of a held lock: "500|500|1000"
	// means up to four attempts.
	RetryIntervalMs Intervals `env:"RETRY_INTERVAL_MS" envDefault:"500|500|1000"`
	// LockWaitAtStorage asks storage to wait for a held lock, within the
	// retry budget, instead of polling it; off for a storage that does not
	// support waitMs (FOLIO's mod-circulation-storage).
	LockWaitAtStorage bool `env:"LOCK_WAIT_AT_STORAGE" envDefault:"true"`
	// ItemLimitWithoutCriteria says what to do with an item limit whose
	// circulation rule names neither a material type nor a loan type:
	// "enforce" counts all the patron's open loans; "ignore" lets the
	// check-out through, as FOLIO does.
	ItemLimitWithoutCriteria string `env:"ITEM_LIMIT_WITHOUT_CRITERIA" envDefault:"enforce"`
	// SettingsCacheTTL is how long a tenant's runtime settings are reused
	// before storage is asked again.
	SettingsCacheTTL time.Duration `env:"SETTINGS_CACHE_TTL" envDefault:"3s"`
	// StorageTimeout bounds each call to circulation-storage.
	StorageTimeout time.Duration `env:"STORAGE_TIMEOUT" envDefault:"5s"`
	// ReleaseTimeout bounds the release of a lock after a check-out.
	ReleaseTimeout time.Duration `env:"RELEASE_TIMEOUT" envDefault:"2s"`
	// MaxBodyBytes bounds request bodies; larger ones get 413.
	MaxBodyBytes int64 `env:"MAX_BODY_BYTES" envDefault:"1048576"`
	// MaxHeaderBytes bounds a request's headers; larger ones get 431.
	MaxHeaderBytes int `env:"MAX_HEADER_BYTES" envDefault:"65536"`
	// SettingsCacheTenants bounds how many tenants' settings are cached.
	SettingsCacheTenants int `env:"SETTINGS_CACHE_TENANTS" envDefault:"10000"`
	// RequestTimeout bounds the work done for one request, retries included,
	// up to its writes, which then finish on a deadline of their own.
	RequestTimeout time.Duration `env:"REQUEST_TIMEOUT" envDefault:"20s"`
	// LogLevel is debug, info, warn or error.
	LogLevel slog.Level `env:"LOG_LEVEL" envDefault:"info"`
	// ShutdownTimeout bounds the wait for in-flight requests on SIGTERM; it
	// must cover REQUEST_TIMEOUT so in-flight check-outs finish.
	ShutdownTimeout time.Duration `env:"SHUTDOWN_TIMEOUT" envDefault:"30s"`
}

// Intervals is a list of waits in milliseconds written "500|500|1000".
type Intervals []int

// MaxRetryInterval bounds one wait, and MaxRetries the number of waits.
const (
	MaxRetryInterval = 60000
	MaxRetries       = 100
)

// UnmarshalText parses "500|500|1000". An empty list means no retry.
func (iv *Intervals) UnmarshalText(text []byte) error {
	s := strings.TrimSpace(string(text))
	*iv = Intervals{}
	if s == "" {
		return nil
	}
	for _, part := range strings.Split(s, "|") {
		n, err := strconv.Atoi(strings.TrimSpace(part))
		if err != nil || n < 0 || n > MaxRetryInterval {
			return fmt.Errorf("%q is not a wait in milliseconds (0..%d)", part, MaxRetryInterval)
		}
		*iv = append(*iv, n)
	}
	if len(*iv) > MaxRetries {
		return fmt.Errorf("%d waits; at most %d", len(*iv), MaxRetries)
	}
	return nil
}

// String writes the list back as "500|500|1000".
func (iv Intervals) String() string {
	parts := make([]string, len(iv))
	for i, n := range iv {
		parts[i] = strconv.Itoa(n)
	}
	return strings.Join(parts, "|")
}

// Durations is the list as durations.
func (iv Intervals) Durations() []time.Duration {
	ds := make([]time.Duration, len(iv))
	for i, n := range iv {
		ds[i] = time.Duration(n) * time.Millisecond
	}
	return ds
}

// LoadCirculation reads and validates the circulation service's
// configuration from environ.
func LoadCirculation(environ map[string]string) (Circulation, error) {
	var c Circulation
	if err := parse(&c, environ); err != nil {
		return Circulation{}, err
	}
	if err := c.Validate(); err != nil {
		return Circulation{}, fmt.Errorf("configuration: %w", err)
	}
	return c, nil
}

// Validate reports every value that is out of range, naming its variable.
func (c Circulation) Validate() error {
	var errs []error
	if c.HTTPAddr == "" {
		errs = append(errs, errors.New("HTTP_ADDR must not be empty"))
	}
	if err := c.Auth.validate(); err != nil {
		errs = append(errs, err)
	}
	if !strings.HasPrefix(c.StorageURL, "http://") && !strings.HasPrefix(c.StorageURL, "https://") {
		errs = append(errs, fmt.Errorf("STORAGE_URL must be an http:// or https:// URL, got %q", c.StorageURL))
	}
	if c.LockTTLMs < 1 || c.LockTTLMs > 600000 {
		errs = append(errs, fmt.Errorf("LOCK_TTL_MS must be 1..600000, got %d", c.LockTTLMs))
	}
	for name, d := range map[string]time.Duration{
		"SETTINGS_CACHE_TTL": c.SettingsCacheTTL, "STORAGE_TIMEOUT": c.StorageTimeout, "RELEASE_TIMEOUT": c.ReleaseTimeout,
		"REQUEST_TIMEOUT": c.RequestTimeout, "SHUTDOWN_TIMEOUT": c.ShutdownTimeout,
	} {
		if d <= 0 {
			errs = append(errs, fmt.Errorf("%s must be a positive duration such as 5s, got %s", name, d))
		}
	}
	if c.ShutdownTimeout > 0 && c.ShutdownTimeout < c.RequestTimeout {
		errs = append(errs, fmt.Errorf("SHUTDOWN_TIMEOUT (%s) must be at least REQUEST_TIMEOUT (%s), so in-flight check-outs finish on SIGTERM",
			c.ShutdownTimeout, c.RequestTimeout))
	}
	if c.MaxBodyBytes < 1024 {
		errs = append(errs, fmt.Errorf("MAX_BODY_BYTES must be at least 1024, got %d", c.MaxBodyBytes))
	}
	if c.ItemLimitWithoutCriteria != "enforce" && c.ItemLimitWithoutCriteria != "ignore" {
		errs = append(errs, fmt.Errorf("ITEM_LIMIT_WITHOUT_CRITERIA must be enforce or ignore, got %q", c.ItemLimitWithoutCriteria))
	}
	errs = append(errs, validateLimits(c.MaxHeaderBytes)...)
	if c.SettingsCacheTenants < 1 {
		errs = append(errs, fmt.Errorf("SETTINGS_CACHE_TENANTS must be at least 1, got %d", c.SettingsCacheTenants))
	}
	return errors.Join(errs...)
}

// LogValue lists the configuration for the start-up log.
func (c Circulation) LogValue() slog.Value {
	return slog.GroupValue(
		slog.String("http_addr", c.HTTPAddr),
		slog.String("instance_name", c.InstanceName),
		slog.String("storage_url", c.StorageURL),
		slog.Any("auth", c.Auth.LogValue()),
		slog.Bool("checkout_lock_feature_enabled", c.CheckoutLockFeatureEnabled),
		slog.Int("lock_ttl_ms", c.LockTTLMs),
		slog.String("retry_interval_ms", c.RetryIntervalMs.String()),
		slog.Bool("lock_wait_at_storage", c.LockWaitAtStorage),
		slog.String("item_limit_without_criteria", c.ItemLimitWithoutCriteria),
		slog.Duration("settings_cache_ttl", c.SettingsCacheTTL),
		slog.Duration("storage_timeout", c.StorageTimeout),
		slog.Duration("release_timeout", c.ReleaseTimeout),
		slog.Int64("max_body_bytes", c.MaxBodyBytes),
		slog.Int("max_header_bytes", c.MaxHeaderBytes),
		slog.Int("settings_cache_tenants", c.SettingsCacheTenants),
		slog.Duration("request_timeout", c.RequestTimeout),
		slog.String("log_level", c.LogLevel.String()),
		slog.Duration("shutdown_timeout", c.ShutdownTimeout),
	)
}
