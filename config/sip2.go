package config

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/checkoutlock/schemas"
)

// SIP2 configures the SIP2 door: where its listeners are is in the file
// SIP2_CONFIG names (reloaded on SIGHUP); how it behaves towards every
// kiosk is here.
type SIP2 struct {
	// ConfigFile is the listeners' file (JSON).
	ConfigFile string `env:"SIP2_CONFIG"`
	// CirculationURL is circulation's base URL (or a load balancer's).
	CirculationURL string `env:"CIRCULATION_URL" envDefault:"http://127.0.0.1:8080" log:"redact"`
	// CirculationCAFile (PEM) holds CA certificates to trust, besides the
	// system's, for an https:// CIRCULATION_URL.
	CirculationCAFile string `env:"CIRCULATION_CA_FILE"`
	// CallTimeout bounds each call to circulation; the timeout the status
	// reply (98) advertises is a second more.
	CallTimeout time.Duration `env:"SIP2_CALL_TIMEOUT" envDefault:"10s"`
	// HTTPAddr is where /admin/health (with the listeners' bound addresses)
	// and /metrics answer.
	HTTPAddr string `env:"HTTP_ADDR" envDefault:"127.0.0.1:8082"`
	// MaxLine is the longest message, in bytes; a longer line closes the
	// connection.
	MaxLine int `env:"SIP2_MAX_LINE" envDefault:"2048"`
	// MaxConnections bounds the connections of all listeners together, and
	// MaxConnectionsPerAddress those from one client address.
	MaxConnections           int `env:"SIP2_MAX_CONNECTIONS" envDefault:"2000"`
	MaxConnectionsPerAddress int `env:"SIP2_MAX_CONNECTIONS_PER_ADDRESS" envDefault:"64"`
	// LoginTimeout is how long a new connection has to log in (93).
	LoginTimeout time.Duration `env:"SIP2_LOGIN_TIMEOUT" envDefault:"30s"`
	// IdleTimeout closes a connection that sends nothing for that long.
	IdleTimeout time.Duration `env:"SIP2_IDLE_TIMEOUT" envDefault:"10m"`
	// LineTimeout closes a connection whose message, once begun, does not
	// end (CR) within it.
	LineTimeout time.Duration `env:"SIP2_LINE_TIMEOUT" envDefault:"10s"`
	// WriteTimeout closes a connection that does not take a reply within
	// it (a kiosk that stopped reading).
	WriteTimeout time.Duration `env:"SIP2_WRITE_TIMEOUT" envDefault:"10s"`
	// OfflineWithin bounds how old a transaction a kiosk made offline and
	// sends later (no block = Y) may be: an older one is refused, with a
	// screen message, for the desk to handle. At most
	// schemas.MaxOfflineBehind, the oldest circulation takes.
	OfflineWithin time.Duration `env:"SIP2_OFFLINE_WITHIN" envDefault:"72h"`
	// OfflineGrace is how near a time the door saw a kiosk cut off may a
	// transaction marked offline (no block = Y) be dated and still be
	// taken as made offline: before the kiosk's login on its connection,
	// or while the library system did not answer the door, each widened
	// by this (a kiosk's clock, and its noticing the cut-off, lag the
	// door's). One dated while the door saw the kiosk on line is judged
	// as a live transaction: every rule, and the patron's PIN.
	OfflineGrace time.Duration `env:"SIP2_OFFLINE_GRACE" envDefault:"1m"`
	// PresenceEvery is the least time between two records, in storage,
	// of a connection's kiosk on line (after a message it sent): a door
	// restarted, or another door, knows the kiosk was on line until at
	// most this before its last message.
	PresenceEvery time.Duration `env:"SIP2_PRESENCE_EVERY" envDefault:"15s"`
	// LogLevel is debug, info, warn or error.
	LogLevel slog.Level `env:"LOG_LEVEL" envDefault:"info"`
	// ShutdownTimeout bounds a stop (SIGTERM): every connection's message
	// being handled is answered, then the connection closes and its kiosk
	// is logged out. It is at least ShutdownNeeds, so that a logout waits
	// behind the slowest message and still fits.
	ShutdownTimeout time.Duration `env:"SHUTDOWN_TIMEOUT" envDefault:"40s"`
	// OTLPEndpoint is the OpenTelemetry collector traces are sent to, as
	// for the HTTP services: each message a span, which circulation's
	// request continues.
	OTLPEndpoint string `env:"OTEL_EXPORTER_OTLP_ENDPOINT"`
}

// LoadSIP2 reads and validates the SIP2 door's configuration from environ.
func LoadSIP2(environ map[string]string) (SIP2, error) {
	var c SIP2
	if err := parse(&c, environ); err != nil {
		return SIP2{}, err
	}
	if err := c.Validate(); err != nil {
		return SIP2{}, fmt.Errorf("configuration: %w", err)
	}
	return c, nil
}

// Validate reports every value that is out of range, naming its variable.
func (c SIP2) Validate() error {
	var errs []error
	if c.ConfigFile == "" {
		errs = append(errs, errors.New("SIP2_CONFIG must name the listeners' file (see docs/sip2.md)"))
	}
	if c.HTTPAddr == "" {
		errs = append(errs, errors.New("HTTP_ADDR must not be empty"))
	}
	if !strings.HasPrefix(c.CirculationURL, "http://") && !strings.HasPrefix(c.CirculationURL, "https://") {
		errs = append(errs, fmt.Errorf("CIRCULATION_URL must be an http:// or https:// URL, got %q", c.CirculationURL))
	}
	if _, err := CertPool(c.CirculationCAFile); err != nil {
		errs = append(errs, fmt.Errorf("CIRCULATION_CA_FILE: %v", err))
	}
	if c.CallTimeout < time.Second || c.CallTimeout > 90*time.Second {
		errs = append(errs, fmt.Errorf("SIP2_CALL_TIMEOUT must be from 1s to 90s (the status reply advertises it in tenths of a second, at most 99.9), got %s", c.CallTimeout))
	}
	if c.OfflineGrace < 0 || c.OfflineGrace > schemas.MaxOfflineGrace {
		errs = append(errs, fmt.Errorf("SIP2_OFFLINE_GRACE must be from 0 to %s (a longer grace takes transactions made on line as made offline), got %s",
			schemas.MaxOfflineGrace, c.OfflineGrace))
	}
	if c.PresenceEvery < 100*time.Millisecond || c.PresenceEvery > c.OfflineGrace+time.Minute {
		errs = append(errs, fmt.Errorf("SIP2_PRESENCE_EVERY must be from 100ms to SIP2_OFFLINE_GRACE plus a minute (%s; longer, a restarted door believes a kiosk offline for longer), got %s",
			c.OfflineGrace+time.Minute, c.PresenceEvery))
	}
	if c.MaxLine < 256 || c.MaxLine > 1<<20 {
		errs = append(errs, fmt.Errorf("SIP2_MAX_LINE must be 256..1048576 bytes, got %d", c.MaxLine))
	}
	if c.MaxConnections < 1 || c.MaxConnectionsPerAddress < 1 {
		errs = append(errs, fmt.Errorf("SIP2_MAX_CONNECTIONS (%d) and SIP2_MAX_CONNECTIONS_PER_ADDRESS (%d) must be at least 1",
			c.MaxConnections, c.MaxConnectionsPerAddress))
	}
	for name, d := range map[string]time.Duration{
		"SIP2_LOGIN_TIMEOUT": c.LoginTimeout, "SIP2_IDLE_TIMEOUT": c.IdleTimeout, "SIP2_LINE_TIMEOUT": c.LineTimeout,
		"SIP2_WRITE_TIMEOUT": c.WriteTimeout, "SHUTDOWN_TIMEOUT": c.ShutdownTimeout, "SIP2_OFFLINE_WITHIN": c.OfflineWithin, "SIP2_OFFLINE_GRACE": c.OfflineGrace,
		"SIP2_PRESENCE_EVERY": c.PresenceEvery,
	} {
		if d <= 0 {
			errs = append(errs, fmt.Errorf("%s must be a positive duration such as 10s, got %s", name, d))
		}
	}
	if c.OfflineWithin > schemas.MaxOfflineBehind {
		errs = append(errs, fmt.Errorf("SIP2_OFFLINE_WITHIN must be at most %s (circulation takes no offline check-out older), got %s",
			schemas.MaxOfflineBehind, c.OfflineWithin))
	}
	if need := c.ShutdownNeeds(); c.ShutdownTimeout > 0 && c.ShutdownTimeout < need {
		errs = append(errs, fmt.Errorf("SHUTDOWN_TIMEOUT (%s) must be at least %s (twice SIP2_CALL_TIMEOUT and SIP2_WRITE_TIMEOUT), so that a stop logs every kiosk out",
			c.ShutdownTimeout, need))
	}
	return errors.Join(errs...)
}

// ShutdownNeeds is the longest a connection can take to end on SIGTERM: a
// message being handled (its calls within SIP2_CALL_TIMEOUT, its reply
// taken within SIP2_WRITE_TIMEOUT), then its kiosk's logout (one more
// call).
func (c SIP2) ShutdownNeeds() time.Duration {
	return 2*c.CallTimeout + c.WriteTimeout
}

// LogValue lists the configuration for the start-up log.
func (c SIP2) LogValue() slog.Value { return logValue(c) }
