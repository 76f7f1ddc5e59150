package config

import (
	"errors"
	"fmt"
	"log/slog"
	"time"
)

// Storage configures circulation-storage. Every field is one environment
// variable; the README's configuration table lists them.
type Storage struct {
	// HTTPAddr is the address the API listens on.
	HTTPAddr string `env:"HTTP_ADDR" envDefault:":8081"`
	Database Database
	// LockDefaultTTLMs is a lock's lifetime when the request names none.
	LockDefaultTTLMs int `env:"LOCK_DEFAULT_TTL_MS" envDefault:"3000"`
	// LockMaxTTLMs is the longest lifetime a request may ask for.
	LockMaxTTLMs int `env:"LOCK_MAX_TTL_MS" envDefault:"600000"`
	// SweepInterval is how often expired locks are deleted, across tenants.
	SweepInterval time.Duration `env:"LOCK_SWEEP_INTERVAL" envDefault:"30s"`
	// SweepBatchSize bounds each DELETE of the sweeper.
	SweepBatchSize int `env:"LOCK_SWEEP_BATCH_SIZE" envDefault:"1000"`
	// MaxBodyBytes bounds request bodies; larger ones get 413.
	MaxBodyBytes int64 `env:"MAX_BODY_BYTES" envDefault:"1048576"`
	// MaxHeaderBytes bounds a request's headers; larger ones get 431.
	MaxHeaderBytes int `env:"MAX_HEADER_BYTES" envDefault:"65536"`
	// MaxPageBytes bounds the records of one list answer; a larger page
	// gets 422 PAGE_TOO_LARGE.
	MaxPageBytes int `env:"MAX_PAGE_BYTES" envDefault:"4194304"`
	// RequestTimeout bounds the work done for one request, the arrival of
	// its body included.
	RequestTimeout time.Duration `env:"REQUEST_TIMEOUT" envDefault:"10s"`
	// LogLevel is debug, info, warn or error.
	LogLevel slog.Level `env:"LOG_LEVEL" envDefault:"info"`
	// ShutdownTimeout bounds the wait for in-flight requests on SIGTERM.
	ShutdownTimeout time.Duration `env:"SHUTDOWN_TIMEOUT" envDefault:"10s"`
}

// LoadStorage reads and validates circulation-storage's configuration from
// environ (typically the process environment as a map).
func LoadStorage(environ map[string]string) (Storage, error) {
	var c Storage
	if err := parse(&c, environ); err != nil {
		return Storage{}, err
	}
	if err := c.Validate(); err != nil {
		return Storage{}, fmt.Errorf("configuration: %w", err)
	}
	return c, nil
}

// Validate reports every value that is out of range, naming its variable.
func (c Storage) Validate() error {
	var errs []error
	if c.HTTPAddr == "" {
		errs = append(errs, errors.New("HTTP_ADDR must not be empty"))
	}
	if err := c.Database.validate(); err != nil {
		errs = append(errs, err)
	}
	if c.LockMaxTTLMs < 1 {
		errs = append(errs, fmt.Errorf("LOCK_MAX_TTL_MS must be at least 1, got %d", c.LockMaxTTLMs))
	}
	if c.LockDefaultTTLMs < 1 || c.LockDefaultTTLMs > c.LockMaxTTLMs {
		errs = append(errs, fmt.Errorf("LOCK_DEFAULT_TTL_MS must be 1..LOCK_MAX_TTL_MS (%d), got %d", c.LockMaxTTLMs, c.LockDefaultTTLMs))
	}
	if c.SweepInterval <= 0 {
		errs = append(errs, fmt.Errorf("LOCK_SWEEP_INTERVAL must be a positive duration such as 30s, got %s", c.SweepInterval))
	}
	if c.SweepBatchSize < 1 || c.SweepBatchSize > 100000 {
		errs = append(errs, fmt.Errorf("LOCK_SWEEP_BATCH_SIZE must be 1..100000, got %d", c.SweepBatchSize))
	}
	if c.MaxBodyBytes < 1024 {
		errs = append(errs, fmt.Errorf("MAX_BODY_BYTES must be at least 1024, got %d", c.MaxBodyBytes))
	}
	errs = append(errs, validateLimits(c.MaxHeaderBytes)...)
	if c.MaxPageBytes < 65536 {
		errs = append(errs, fmt.Errorf("MAX_PAGE_BYTES must be at least 65536, got %d", c.MaxPageBytes))
	}
	if c.RequestTimeout <= 0 {
		errs = append(errs, fmt.Errorf("REQUEST_TIMEOUT must be a positive duration such as 10s, got %s", c.RequestTimeout))
	}
	if c.ShutdownTimeout <= 0 {
		errs = append(errs, fmt.Errorf("SHUTDOWN_TIMEOUT must be a positive duration such as 10s, got %s", c.ShutdownTimeout))
	}
	return errors.Join(errs...)
}

// LogValue lists the configuration for the start-up log, password masked.
func (c Storage) LogValue() slog.Value {
	return slog.GroupValue(
		slog.String("http_addr", c.HTTPAddr),
		slog.String("database", c.Database.Redacted()),
		slog.Int("db_max_conns", int(c.Database.MaxConns)),
		slog.Int("lock_default_ttl_ms", c.LockDefaultTTLMs),
		slog.Int("lock_max_ttl_ms", c.LockMaxTTLMs),
		slog.Duration("lock_sweep_interval", c.SweepInterval),
		slog.Int("lock_sweep_batch_size", c.SweepBatchSize),
		slog.Int64("max_body_bytes", c.MaxBodyBytes),
		slog.Int("max_header_bytes", c.MaxHeaderBytes),
		slog.Int("max_page_bytes", c.MaxPageBytes),
		slog.Duration("request_timeout", c.RequestTimeout),
		slog.String("log_level", c.LogLevel.String()),
		slog.Duration("shutdown_timeout", c.ShutdownTimeout),
	)
}
