// Package config holds each service's configuration: one struct per service,
// read from the environment with caarlos0/env, with the defaults documented on
// the struct tags and checked by Validate. The example .env files beside this
// package are what docker-compose passes to the containers.
package config

import (
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
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
	URL      string `env:"DATABASE_URL" log:"redact"`
	Host     string `env:"DB_HOST" envDefault:"127.0.0.1"`
	Port     int    `env:"DB_PORT" envDefault:"5432"`
	Username string `env:"DB_USERNAME" envDefault:"postgres"`
	Password string `env:"DB_PASSWORD" log:"-"`
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
func (d Database) Redacted() string { return redactURL(d.ConnString()) }

// redactURLs is redactURL of each of comma-separated URLs.
func redactURLs(urls string) string {
	parts := strings.Split(urls, ",")
	for i, u := range parts {
		parts[i] = redactURL(u)
	}
	return strings.Join(parts, ",")
}

// redactURL is u with a password in it masked. What is not a URL (a
// key=value connection string, which may name a password anywhere) is
// not shown at all.
func redactURL(u string) string {
	parsed, err := url.Parse(strings.TrimSpace(u))
	switch {
	case u == "":
		return ""
	case err != nil || parsed.Scheme == "":
		return "(not a URL: not shown)"
	}
	return parsed.Redacted()
}

// logValue lists a configuration for the start-up log: every variable
// under its own name in lower case, read from cfg's env tags, so that none
// is left out of the log or logged under another name. A section that
// says how it is logged (slog.LogValuer: Auth names its key source, never
// the secret) is logged as a group under its field's name; a variable
// tagged log:"redact" (URLs, connection strings) with its passwords
// masked; one tagged log:"-" (a password) not at all.
func logValue(cfg any) slog.Value {
	return slog.GroupValue(logAttrs(reflect.ValueOf(cfg))...)
}

var logValuer = reflect.TypeFor[slog.LogValuer]()

func logAttrs(v reflect.Value) []slog.Attr {
	var attrs []slog.Attr
	t := v.Type()
	for i := 0; i < t.NumField(); i++ {
		f, fv := t.Field(i), v.Field(i)
		name, isVar := f.Tag.Lookup("env")
		key := strings.ToLower(strings.Split(name, ",")[0])
		switch {
		case f.Tag.Get("log") == "-":
		case f.Tag.Get("log") == "redact":
			attrs = append(attrs, slog.String(key, redactURLs(fv.String())))
		case isVar:
			attrs = append(attrs, slog.Any(key, logged(fv.Interface())))
		case f.Type.Implements(logValuer):
			// Resolved here: a group's String, unlike a handler, would
			// print the section's fields as they are.
			attrs = append(attrs, slog.Attr{Key: strings.ToLower(f.Name), Value: fv.Interface().(slog.LogValuer).LogValue()})
		case f.Type.Kind() == reflect.Struct:
			attrs = append(attrs, logAttrs(fv)...)
		}
	}
	return attrs
}

// logged is a variable's value as the log shows it: a duration as a
// duration (LogOptions writes it "1.5s"), anything else that writes
// itself as it is written in the environment ("500|500|1000", a level's
// name) as that.
func logged(v any) any {
	switch v := v.(type) {
	case time.Duration:
		return v
	case fmt.Stringer:
		return v.String()
	}
	return v
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
