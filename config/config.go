// Package config holds each service's configuration: one struct per service,
// read from the environment with caarlos0/env, with the defaults documented on
// the struct tags and checked by Validate. The example .env files beside this
// package are what docker-compose passes to the containers.
package config

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"net/url"
	"os"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/caarlos0/env/v10"

	"github.com/checkoutlock/schemas/locksettings"
)

// parse fills cfg from environ (not from the process environment, so tests
// pass a map) and names every variable that could not be parsed.
func parse(cfg any, environ map[string]string) error {
	err := env.ParseWithOptions(cfg, env.Options{Environment: environ})
	if err == nil {
		return nil
	}
	var agg env.AggregateError
	if !errors.As(err, &agg) {
		return fmt.Errorf("configuration: %w", err)
	}
	// caarlos0/env names the Go field; operators know the variable.
	vars := envVars(reflect.TypeOf(cfg).Elem())
	errs := make([]error, 0, len(agg.Errors))
	for _, e := range agg.Errors {
		var pe env.ParseError
		if errors.As(e, &pe) {
			name := vars[pe.Name]
			errs = append(errs, fmt.Errorf("%s=%q is not %s", name, environ[name], describe(pe.Type)))
			continue
		}
		errs = append(errs, e)
	}
	return fmt.Errorf("configuration: %w", errors.Join(errs...))
}

// envVars maps each field name of a config struct (nested structs included)
// to its environment variable.
func envVars(t reflect.Type) map[string]string {
	vars := map[string]string{}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if name, ok := f.Tag.Lookup("env"); ok {
			vars[f.Name] = strings.Split(name, ",")[0]
			continue
		}
		if f.Type.Kind() == reflect.Struct {
			for k, v := range envVars(f.Type) {
				vars[k] = v
			}
		}
	}
	return vars
}

// describe says what a variable of type t accepts.
func describe(t reflect.Type) string {
	switch t {
	case reflect.TypeOf(time.Duration(0)):
		return "a duration such as 500ms, 10s or 1m"
	case reflect.TypeOf(slog.Level(0)):
		return "one of debug, info, warn, error"
	case reflect.TypeOf(Proxies(nil)):
		return "IP addresses or CIDR blocks separated by commas, such as 10.0.0.0/8,192.168.1.7"
	case reflect.TypeOf(Intervals(nil)):
		return fmt.Sprintf("waits in milliseconds separated by |, such as 500|500|1000 (each %d..%d, at most %d)",
			locksettings.MinRetryWait.Milliseconds(), locksettings.MaxRetryWait.Milliseconds(), locksettings.MaxRetries)
	}
	switch t.Kind() {
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return "an integer"
	}
	return "a valid " + t.String()
}

// Database says how to reach PostgreSQL: DATABASE_URL when set, otherwise
// FOLIO's DB_* variables.
type Database struct {
	URL      string `env:"DATABASE_URL"`
	Host     string `env:"DB_HOST" envDefault:"127.0.0.1"`
	Port     int    `env:"DB_PORT" envDefault:"5432"`
	Username string `env:"DB_USERNAME" envDefault:"postgres"`
	Password string `env:"DB_PASSWORD"`
	Database string `env:"DB_DATABASE" envDefault:"circulation"`
	MaxConns int32  `env:"DB_MAX_CONNS" envDefault:"16"`
	// MaxConnLifetime bounds how long a database connection lives: what
	// its server process keeps (catalog and plan caches) goes with it.
	MaxConnLifetime time.Duration `env:"DB_MAX_CONN_LIFETIME" envDefault:"1h"`
}

// ConnString is the connection string to use: DATABASE_URL, or one built from
// the DB_* variables.
func (d Database) ConnString() string {
	if d.URL != "" {
		return d.URL
	}
	u := url.URL{
		Scheme: "postgres",
		Host:   net.JoinHostPort(d.Host, strconv.Itoa(d.Port)),
		Path:   "/" + d.Database,
	}
	if d.Password != "" {
		u.User = url.UserPassword(d.Username, d.Password)
	} else {
		u.User = url.User(d.Username)
	}
	return u.String()
}

// Redacted is ConnString with any password masked, for logs.
func (d Database) Redacted() string {
	u, err := url.Parse(d.ConnString())
	if err != nil {
		// A key=value DSN: do not risk printing a password.
		return "(connection string not shown)"
	}
	return u.Redacted()
}

func (d Database) validate() error {
	var errs []error
	if d.URL == "" {
		if d.Host == "" {
			errs = append(errs, errors.New("DB_HOST must not be empty when DATABASE_URL is unset"))
		}
		if d.Port < 1 || d.Port > 65535 {
			errs = append(errs, fmt.Errorf("DB_PORT must be 1..65535, got %d", d.Port))
		}
		if d.Database == "" {
			errs = append(errs, errors.New("DB_DATABASE must not be empty when DATABASE_URL is unset"))
		}
	}
	if d.MaxConns < 1 || d.MaxConns > 1000 {
		errs = append(errs, fmt.Errorf("DB_MAX_CONNS must be 1..1000, got %d", d.MaxConns))
	}
	if d.MaxConnLifetime < time.Second || d.MaxConnLifetime > 24*time.Hour {
		errs = append(errs, fmt.Errorf("DB_MAX_CONN_LIFETIME must be 1s..24h, got %s", d.MaxConnLifetime))
	}
	return errors.Join(errs...)
}

// NetHTTPMaxHeaderBytes is net/http's own bound on a request's headers,
// beyond which it answers 431 in plain text before a service sees the
// request. MAX_HEADER_BYTES must stay below it, so that the services answer
// oversized headers themselves, with the error envelope.
const NetHTTPMaxHeaderBytes = 1 << 20

// validateLimits checks MAX_HEADER_BYTES.
func validateLimits(maxHeaderBytes int) []error {
	if maxHeaderBytes < 4096 || maxHeaderBytes >= NetHTTPMaxHeaderBytes {
		return []error{fmt.Errorf("MAX_HEADER_BYTES must be from 4096 to %d, got %d", NetHTTPMaxHeaderBytes-1, maxHeaderBytes)}
	}
	return nil
}

// Auth says how a service learns who calls it: AUTH_MODE, with no default
// (a service without it refuses to start), and for jwt mode where the keys
// come from (exactly one).
type Auth struct {
	// Mode is gateway, jwt or none.
	Mode string `env:"AUTH_MODE"`
	// JWTSecret is an HS256 shared secret (at least 32 characters).
	JWTSecret string `env:"AUTH_JWT_SECRET"`
	// JWTPublicKeyFile is a PEM file with an RSA or EC public key (RS256,
	// ES256).
	JWTPublicKeyFile string `env:"AUTH_JWT_PUBLIC_KEY_FILE"`
	// JWKSURL serves the keys as a JSON Web Key Set (RS256, ES256).
	JWKSURL string `env:"AUTH_JWKS_URL"`
	// AllowDevelopmentKeys lets the service start with a key this
	// repository publishes (config/auth.env's secret, config/dev-keys/),
	// warning on /admin/health: for docker-compose on a developer's
	// machine only.
	AllowDevelopmentKeys bool `env:"AUTH_ALLOW_DEVELOPMENT_KEYS" envDefault:"false"`
}

func (a Auth) validate() error {
	keys := 0
	for _, k := range []string{a.JWTSecret, a.JWTPublicKeyFile, a.JWKSURL} {
		if k != "" {
			keys++
		}
	}
	switch a.Mode {
	case "":
		return errors.New("AUTH_MODE must be set: gateway (behind Okapi or Kong, which verify callers; the service must be " +
			"reachable only through them), jwt (the service verifies tokens; also set AUTH_JWT_SECRET, AUTH_JWT_PUBLIC_KEY_FILE " +
			"or AUTH_JWKS_URL) or none (anyone may do anything)")
	case "jwt":
		if keys != 1 {
			return errors.New("AUTH_MODE=jwt needs exactly one of AUTH_JWT_SECRET, AUTH_JWT_PUBLIC_KEY_FILE and AUTH_JWKS_URL")
		}
		if a.JWTSecret != "" && len(a.JWTSecret) < 32 {
			return errors.New("AUTH_JWT_SECRET must be at least 32 characters")
		}
		if a.JWTSecret == publishedSecret && !a.AllowDevelopmentKeys {
			return errDevelopmentKey("AUTH_JWT_SECRET")
		}
	case "gateway", "none":
		if keys != 0 {
			return fmt.Errorf("AUTH_JWT_* and AUTH_JWKS_URL apply to AUTH_MODE=jwt only, not %s", a.Mode)
		}
	default:
		return fmt.Errorf("AUTH_MODE must be gateway, jwt or none, got %q", a.Mode)
	}
	return nil
}

// developmentKeys reports whether a published development key is in
// use: the secret, or one of files.
func (a Auth) developmentKeys(files ...string) bool {
	if a.Mode != "jwt" {
		return false
	}
	if a.JWTSecret == publishedSecret {
		return true
	}
	for _, f := range files {
		if f != "" && isDevelopmentModuleKey(f) {
			return true
		}
	}
	return false
}

// LogValue names the mode and the key source, never the secret.
func (a Auth) LogValue() slog.Value {
	attrs := []slog.Attr{slog.String("mode", a.Mode)}
	switch {
	case a.JWTSecret != "":
		attrs = append(attrs, slog.String("keys", "AUTH_JWT_SECRET (HS256)"))
	case a.JWTPublicKeyFile != "":
		attrs = append(attrs, slog.String("keys", a.JWTPublicKeyFile))
	case a.JWKSURL != "":
		attrs = append(attrs, slog.String("keys", a.JWKSURL))
	}
	return slog.GroupValue(attrs...)
}

// LogOptions are the log handler options of both services: level, and
// durations written as durations ("1.5ms", "30s"), not nanoseconds.
func LogOptions(level slog.Level) *slog.HandlerOptions {
	return &slog.HandlerOptions{Level: level, ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
		if a.Value.Kind() == slog.KindDuration {
			return slog.String(a.Key, a.Value.Duration().String())
		}
		return a
	}}
}

// Serving is how clients reach a service: over TLS of its own, when a
// certificate and its key are given, and through the reverse proxies it
// trusts to say who a client is and whether it came over TLS.
type Serving struct {
	// TLSCertFile and TLSKeyFile (PEM) make the service serve HTTPS
	// (TLS 1.2 or later) instead of plain HTTP: both or neither.
	TLSCertFile string `env:"TLS_CERT_FILE"`
	TLSKeyFile  string `env:"TLS_KEY_FILE"`
	// TrustedProxies are the addresses (an IP, or a CIDR block) of the
	// reverse proxies in front of the service, comma-separated: from them
	// alone X-Forwarded-For names the client (failed sign-ins are counted
	// by it) and X-Forwarded-Proto: https makes the sign-in's cookies
	// Secure. From any other address both headers are ignored.
	TrustedProxies Proxies `env:"TRUSTED_PROXIES"`
}

// TLS says whether the service serves HTTPS.
func (s Serving) TLS() bool { return s.TLSCertFile != "" }

func (s Serving) validate() error {
	if (s.TLSCertFile == "") != (s.TLSKeyFile == "") {
		return errors.New("TLS_CERT_FILE and TLS_KEY_FILE go together: set both to serve HTTPS, or neither")
	}
	if s.TLSCertFile == "" {
		return nil
	}
	if _, err := tls.LoadX509KeyPair(s.TLSCertFile, s.TLSKeyFile); err != nil {
		return fmt.Errorf("TLS_CERT_FILE and TLS_KEY_FILE: %v", err)
	}
	return nil
}

// Proxies are address blocks, written as IPs or CIDR blocks separated by
// commas: "10.0.0.0/8, 192.168.1.7".
type Proxies []netip.Prefix

// UnmarshalText parses a list of addresses and blocks.
func (p *Proxies) UnmarshalText(text []byte) error {
	*p = nil
	for _, f := range strings.Split(string(text), ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		if strings.Contains(f, "/") {
			prefix, err := netip.ParsePrefix(f)
			if err != nil {
				return err
			}
			*p = append(*p, prefix.Masked())
			continue
		}
		addr, err := netip.ParseAddr(f)
		if err != nil {
			return err
		}
		addr = addr.Unmap()
		*p = append(*p, netip.PrefixFrom(addr, addr.BitLen()))
	}
	return nil
}

// String lists the blocks, for the start-up log.
func (p Proxies) String() string {
	parts := make([]string, len(p))
	for i, prefix := range p {
		parts[i] = prefix.String()
	}
	return strings.Join(parts, ",")
}

// CertPool reads the CA certificates (PEM) a client trusts besides the
// system's: nil when file is "".
func CertPool(file string) (*x509.CertPool, error) {
	if file == "" {
		return nil, nil
	}
	pem, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	pool, err := x509.SystemCertPool()
	if err != nil {
		pool = x509.NewCertPool()
	}
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("%s holds no PEM certificate", file)
	}
	return pool, nil
}

// LogValue lists the serving configuration for the start-up log.
func (s Serving) LogValue() slog.Value {
	return slog.GroupValue(
		slog.String("tls_cert_file", s.TLSCertFile),
		slog.String("tls_key_file", s.TLSKeyFile),
		slog.String("trusted_proxies", s.TrustedProxies.String()),
	)
}
