package config

import (
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/checkoutlock/schemas/locksettings"
)

// Circulation configures the circulation service. The check-out lock
// variables are the seed design's; each tenant's librarians can override
// them at runtime through the checkoutLockFeature setting.
type Circulation struct {
	// Server is what the HTTP server reads (the address, the request and
	// shutdown timeouts, the serving and authentication sections, the
	// bounds on a request, the log level), the same for both services.
	Server
	// ModuleKeyFile is circulation's own P-256 private key (PEM), with
	// which it signs the module tokens it calls storage with in jwt mode;
	// storage trusts its public half (AUTH_TRUSTED_MODULES).
	ModuleKeyFile string `env:"AUTH_MODULE_KEY_FILE"`
	// ModuleTokenTTL is how long a module token lives (10s to 5m); one is
	// reused for half of it.
	ModuleTokenTTL time.Duration `env:"AUTH_MODULE_TOKEN_TTL" envDefault:"2m"`
	// InstanceName names this instance in the locks it holds; default
	// host:port.
	InstanceName string `env:"INSTANCE_NAME"`
	// StorageURL is circulation-storage's base URL.
	StorageURL string `env:"STORAGE_URL" envDefault:"http://127.0.0.1:8081" log:"redact"`
	// StorageCAFile (PEM) holds CA certificates to trust, besides the
	// system's, for an https:// STORAGE_URL.
	StorageCAFile string `env:"STORAGE_CA_FILE"`
	// LockTTLMs is the lifetime of a patron's lock.
	LockTTLMs int `env:"LOCK_TTL_MS"`
	// RetryIntervalMs is one wait per retry of a held lock: "500|500|1000"
	// means up to four attempts.
	RetryIntervalMs Intervals `env:"RETRY_INTERVAL_MS"`
	// LockWaitAtStorage asks storage to wait for a held lock, within the
	// retry budget, instead of polling it; off for a storage that does not
	// support waitMs (FOLIO's mod-circulation-storage).
	LockWaitAtStorage bool `env:"LOCK_WAIT_AT_STORAGE" envDefault:"true"`
	// SettingsCacheTTL is how long a tenant's runtime settings are reused
	// before storage is asked again.
	SettingsCacheTTL time.Duration `env:"SETTINGS_CACHE_TTL" envDefault:"3s"`
	// StorageTimeout bounds each call to circulation-storage.
	StorageTimeout time.Duration `env:"STORAGE_TIMEOUT" envDefault:"5s"`
	// ReleaseTimeout bounds the release of a lock after a check-out.
	ReleaseTimeout time.Duration `env:"RELEASE_TIMEOUT" envDefault:"2s"`
	// SettleTimeout bounds how long a write whose answer was lost is sent
	// again with its id before its outcome is answered unknown (503).
	SettleTimeout time.Duration `env:"WRITE_SETTLE_TIMEOUT" envDefault:"5s"`
	// SettingsCacheTenants bounds how many tenants' settings are cached.
	SettingsCacheTenants int `env:"SETTINGS_CACHE_TENANTS" envDefault:"10000"`
	// PatronSummaryRate is how many patron summaries a minute a
	// self-check machine (a caller without
	// circulation.patron-summary.details.get) may read, per account and
	// client address, on each instance (0: no bound).
	PatronSummaryRate int `env:"PATRON_SUMMARY_RATE" envDefault:"30"`
	// PatronSummaryAccountSessions bounds one kiosk account's sign-ins
	// together to this many sign-ins' PATRON_SUMMARY_RATE, on each
	// instance: opening sessions buys an account nothing past it, while a
	// branch's kiosks sharing the account each keep their own allowance.
	PatronSummaryAccountSessions int `env:"PATRON_SUMMARY_ACCOUNT_SESSIONS" envDefault:"20"`
	// SIP2AdminURLs are the SIP2 doors' admin addresses (their HTTP_ADDR),
	// comma-separated: the lock console lists the kiosks connected to them.
	SIP2AdminURLs []string `env:"SIP2_ADMIN_URLS" envSeparator:","`
	// TraceURL is where the operators' trace viewer shows one trace,
	// {traceId} standing for its id ("http://jaeger:16686/trace/{traceId}"):
	// the lock console links each lock and history entry storage traced
	// to it. Empty, the console shows the trace id without a link.
	TraceURL string `env:"TRACE_URL"`
}

// TraceIDPlaceholder is what TRACE_URL writes for a trace's id.
const TraceIDPlaceholder = "{traceId}"

// TraceLink is the trace viewer's address of the trace traceID, or nil
// when TRACE_URL is not set.
func (c Circulation) TraceLink() func(traceID string) string {
	if c.TraceURL == "" {
		return nil
	}
	return func(traceID string) string {
		return strings.ReplaceAll(c.TraceURL, TraceIDPlaceholder, url.PathEscape(traceID))
	}
}

// Intervals is a list of waits in milliseconds written "500|500|1000".
type Intervals []int

// UnmarshalText parses "500|500|1000". An empty list means no retry.
func (iv *Intervals) UnmarshalText(text []byte) error {
	s := strings.TrimSpace(string(text))
	*iv = Intervals{}
	if s == "" {
		return nil
	}
	// A tenant's retryIntervalsMs keeps to the same bounds
	// (locksettings): the environment sets nothing a tenant could not.
	for _, part := range strings.Split(s, "|") {
		n, err := strconv.Atoi(strings.TrimSpace(part))
		if d := time.Duration(n) * time.Millisecond; err != nil || d < locksettings.MinRetryWait || d > locksettings.MaxRetryWait {
			return fmt.Errorf("%q is not a wait in milliseconds (%d..%d)", part,
				locksettings.MinRetryWait.Milliseconds(), locksettings.MaxRetryWait.Milliseconds())
		}
		*iv = append(*iv, n)
	}
	if len(*iv) > locksettings.MaxRetries {
		return fmt.Errorf("%d waits; at most %d", len(*iv), locksettings.MaxRetries)
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
	c := Circulation{Server: circulationServer, LockTTLMs: locksettings.DefaultTTLMs}
	// The lock's defaults are locksettings'; the environment overrides them.
	if err := c.RetryIntervalMs.UnmarshalText([]byte(locksettings.DefaultRetryIntervalsMs)); err != nil {
		return Circulation{}, err
	}
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
	errs := c.Server.validate()
	errs = append(errs, c.validateModuleKey()...)
	if !strings.HasPrefix(c.StorageURL, "http://") && !strings.HasPrefix(c.StorageURL, "https://") {
		errs = append(errs, fmt.Errorf("STORAGE_URL must be an http:// or https:// URL, got %q", c.StorageURL))
	}
	if _, err := CertPool(c.StorageCAFile); err != nil {
		errs = append(errs, fmt.Errorf("STORAGE_CA_FILE: %v", err))
	}
	for _, u := range c.SIP2AdminURLs {
		if !strings.HasPrefix(u, "http://") && !strings.HasPrefix(u, "https://") {
			errs = append(errs, fmt.Errorf("SIP2_ADMIN_URLS must list http:// or https:// URLs, got %q", u))
		}
	}
	if c.TraceURL != "" && (!strings.HasPrefix(c.TraceURL, "http://") && !strings.HasPrefix(c.TraceURL, "https://") ||
		!strings.Contains(c.TraceURL, TraceIDPlaceholder)) {
		errs = append(errs, fmt.Errorf("TRACE_URL must be an http:// or https:// URL holding %s, got %q", TraceIDPlaceholder, c.TraceURL))
	}
	if len(c.SIP2AdminURLs) > 16 {
		errs = append(errs, fmt.Errorf("SIP2_ADMIN_URLS lists %d doors; at most 16", len(c.SIP2AdminURLs)))
	}
	if err := locksettings.InBounds("LOCK_TTL_MS", time.Duration(c.LockTTLMs)*time.Millisecond, locksettings.MinLockTTL, locksettings.MaxLockTTL,
		"the bounds a tenant's lockTtl keeps to"); err != nil {
		errs = append(errs, err)
	}
	for name, d := range map[string]time.Duration{
		"SETTINGS_CACHE_TTL": c.SettingsCacheTTL, "STORAGE_TIMEOUT": c.StorageTimeout, "RELEASE_TIMEOUT": c.ReleaseTimeout,
		"WRITE_SETTLE_TIMEOUT": c.SettleTimeout,
	} {
		if d <= 0 {
			errs = append(errs, fmt.Errorf("%s must be a positive duration such as 5s, got %s", name, d))
		}
	}
	if c.ShutdownTimeout > 0 && c.ShutdownTimeout < c.RequestTimeout {
		errs = append(errs, fmt.Errorf("SHUTDOWN_TIMEOUT (%s) must be at least REQUEST_TIMEOUT (%s), so in-flight check-outs finish on SIGTERM",
			c.ShutdownTimeout, c.RequestTimeout))
	}
	if c.PatronSummaryAccountSessions < 1 {
		errs = append(errs, fmt.Errorf("PATRON_SUMMARY_ACCOUNT_SESSIONS must be at least 1, got %d", c.PatronSummaryAccountSessions))
	}
	if c.PatronSummaryRate < 0 {
		errs = append(errs, fmt.Errorf("PATRON_SUMMARY_RATE must be at least 0, got %d", c.PatronSummaryRate))
	}
	if c.SettingsCacheTenants < 1 {
		errs = append(errs, fmt.Errorf("SETTINGS_CACHE_TENANTS must be at least 1, got %d", c.SettingsCacheTenants))
	}
	return errors.Join(errs...)
}

// validateModuleKey checks circulation's module key: required in jwt mode
// (circulation calls storage as itself, never with its caller's token),
// readable, and not the published development key unless allowed.
func (c Circulation) validateModuleKey() []error {
	if c.Auth.Mode != "jwt" {
		if c.ModuleKeyFile != "" {
			return []error{fmt.Errorf("AUTH_MODULE_KEY_FILE applies to AUTH_MODE=jwt only, not %s", c.Auth.Mode)}
		}
		return nil
	}
	var errs []error
	if c.ModuleTokenTTL < 10*time.Second || c.ModuleTokenTTL > 5*time.Minute {
		errs = append(errs, fmt.Errorf("AUTH_MODULE_TOKEN_TTL must be from 10s to 5m, got %s", c.ModuleTokenTTL))
	}
	switch {
	case c.ModuleKeyFile == "":
		errs = append(errs, errors.New("AUTH_MODE=jwt needs AUTH_MODULE_KEY_FILE: circulation's own P-256 private key (PEM), "+
			"with which it calls storage as itself (make one with: openssl ecparam -name prime256v1 -genkey -noout | openssl pkcs8 -topk8 -nocrypt)"))
	default:
		if _, err := publicKeyOfFile(c.ModuleKeyFile); err != nil {
			errs = append(errs, fmt.Errorf("AUTH_MODULE_KEY_FILE %s: %v", c.ModuleKeyFile, err))
		} else if isDevelopmentModuleKey(c.ModuleKeyFile) && !c.Auth.AllowDevelopmentKeys {
			errs = append(errs, errDevelopmentKey("AUTH_MODULE_KEY_FILE"))
		}
	}
	return errs
}

// Warnings are what the configuration itself must tell an operator, on
// /admin/health too: a published development key in use.
func (c Circulation) Warnings() []string {
	if c.Auth.developmentKeys(c.ModuleKeyFile) {
		return []string{DevelopmentWarning}
	}
	return nil
}

// LogValue lists the configuration for the start-up log.
func (c Circulation) LogValue() slog.Value { return logValue(c) }
