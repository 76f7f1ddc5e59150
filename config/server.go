package config

import (
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"time"
)

// Server is what both services' HTTP servers read from the environment:
// where they listen, who may call them (Auth), how clients reach them
// (Serving), the bounds on one request, how long a shutdown may wait for
// the requests in flight, and the log level. Each service's configuration
// embeds it. The address and the two timeouts have each service's own
// defaults, which its Load function sets before the environment is read
// (circulationServer, storageServer); the rest have the defaults of their
// tags.
type Server struct {
	// HTTPAddr is the address the API listens on.
	HTTPAddr string `env:"HTTP_ADDR"`
	// RequestTimeout bounds the work done for one request, the arrival of
	// its body included (at circulation, retries included, up to its
	// writes, which then finish on a deadline of their own).
	RequestTimeout time.Duration `env:"REQUEST_TIMEOUT"`
	// ShutdownTimeout bounds the wait for in-flight requests on SIGTERM.
	ShutdownTimeout time.Duration `env:"SHUTDOWN_TIMEOUT"`
	Auth            Auth
	Serving         Serving
	// MaxBodyBytes bounds request bodies; larger ones get 413.
	MaxBodyBytes int64 `env:"MAX_BODY_BYTES" envDefault:"1048576"`
	// MaxHeaderBytes bounds a request's headers; larger ones get 431.
	MaxHeaderBytes int `env:"MAX_HEADER_BYTES" envDefault:"65536"`
	// LogLevel is debug, info, warn or error.
	LogLevel slog.Level `env:"LOG_LEVEL" envDefault:"info"`
	// OTLPEndpoint is the OpenTelemetry collector traces are sent to over
	// OTLP/HTTP (its base URL, "http://127.0.0.1:4318"); empty, no trace
	// is made or sent.
	OTLPEndpoint string `env:"OTEL_EXPORTER_OTLP_ENDPOINT"`
	// ProfileAddr is a loopback address ("127.0.0.1:6060") where Go's
	// profiles are served (/debug/pprof/), apart from the API; empty, the
	// default, none are.
	ProfileAddr string `env:"PROFILE_ADDR"`
}

// NetHTTPMaxHeaderBytes is net/http's own bound on a request's headers,
// beyond which it answers 431 in plain text before a service sees the
// request (the services' servers keep net/http's default). MAX_HEADER_BYTES
// must stay below it, so that the services answer oversized headers
// themselves, with the error envelope.
const NetHTTPMaxHeaderBytes = http.DefaultMaxHeaderBytes

// ServerConfig is the section, which every service's configuration has.
func (s Server) ServerConfig() Server { return s }

// The servers' own defaults: circulation's address, and its request and
// shutdown timeouts, long enough for a check-out's retries and writes;
// storage's.
var (
	circulationServer = Server{HTTPAddr: ":8080", RequestTimeout: 20 * time.Second, ShutdownTimeout: 30 * time.Second}
	storageServer     = Server{HTTPAddr: ":8081", RequestTimeout: 10 * time.Second, ShutdownTimeout: 10 * time.Second}
)

// validate reports every value of the section that is out of range,
// naming its variable.
func (s Server) validate() []error {
	var errs []error
	if s.HTTPAddr == "" {
		errs = append(errs, errors.New("HTTP_ADDR must not be empty"))
	}
	if err := s.Auth.validate(); err != nil {
		errs = append(errs, err)
	}
	if err := s.Serving.validate(); err != nil {
		errs = append(errs, err)
	}
	if s.MaxBodyBytes < 1024 {
		errs = append(errs, fmt.Errorf("MAX_BODY_BYTES must be at least 1024, got %d", s.MaxBodyBytes))
	}
	if s.MaxHeaderBytes < 4096 || s.MaxHeaderBytes >= NetHTTPMaxHeaderBytes {
		errs = append(errs, fmt.Errorf("MAX_HEADER_BYTES must be from 4096 to %d, got %d", NetHTTPMaxHeaderBytes-1, s.MaxHeaderBytes))
	}
	if err := validProfileAddr(s.ProfileAddr); err != nil {
		errs = append(errs, err)
	}
	for name, d := range map[string]time.Duration{"REQUEST_TIMEOUT": s.RequestTimeout, "SHUTDOWN_TIMEOUT": s.ShutdownTimeout} {
		if d <= 0 {
			errs = append(errs, fmt.Errorf("%s must be a positive duration such as 10s, got %s", name, d))
		}
	}
	return errs
}

// validProfileAddr accepts PROFILE_ADDR when it is empty (no profiles) or
// a loopback address with a port: a profile shows the service's code,
// its goroutines' stacks and its command line, and answers no
// authentication, so it is served to the machine's own users only.
func validProfileAddr(addr string) error {
	if addr == "" {
		return nil
	}
	host, port, err := net.SplitHostPort(addr)
	if err == nil && port == "" {
		err = errors.New("no port")
	}
	if err != nil {
		return fmt.Errorf("PROFILE_ADDR must be a loopback address with a port, such as 127.0.0.1:6060, got %q: %v", addr, err)
	}
	if host == "localhost" {
		return nil
	}
	if ip, err := netip.ParseAddr(host); err != nil || !ip.IsLoopback() {
		return fmt.Errorf("PROFILE_ADDR must be a loopback address (127.0.0.1:6060, [::1]:6060, localhost:6060), got %q: "+
			"profiles answer no authentication", addr)
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

// LogValue lists the serving configuration for the start-up log.
func (s Serving) LogValue() slog.Value {
	return slog.GroupValue(
		slog.String("tls_cert_file", s.TLSCertFile),
		slog.String("tls_key_file", s.TLSKeyFile),
		slog.String("trusted_proxies", s.TrustedProxies.String()),
	)
}
