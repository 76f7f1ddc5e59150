package config

import (
	"log/slog"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestStorageDefaults(t *testing.T) {
	t.Parallel()
	c, err := LoadStorage(map[string]string{"AUTH_MODE": "gateway"})
	if err != nil {
		t.Fatal(err)
	}
	if c.HTTPAddr != ":8081" || c.LockDefaultTTLMs != 3000 || c.LockMaxTTLMs != 600000 ||
		c.ShutdownTimeout != 10*time.Second || c.Database.MaxConns != 16 {
		t.Errorf("defaults = %+v", c)
	}
	if got, want := c.Database.ConnString(), "postgres://postgres@127.0.0.1:5432/circulation"; got != want {
		t.Errorf("ConnString = %q, want %q", got, want)
	}
}

func TestDatabaseURLWinsOverFOLIOVariables(t *testing.T) {
	t.Parallel()
	c, err := LoadStorage(map[string]string{"AUTH_MODE": "gateway", "DATABASE_URL": "postgres://u@db:6543/x", "DB_HOST": "ignored"})
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Database.ConnString(); got != "postgres://u@db:6543/x" {
		t.Errorf("ConnString = %q", got)
	}
}

func TestFOLIOVariablesBuildTheURLAndThePasswordIsMasked(t *testing.T) {
	t.Parallel()
	c, err := LoadStorage(map[string]string{"AUTH_MODE": "gateway",
		"DB_HOST": "db.example", "DB_PORT": "6432", "DB_USERNAME": "folio", "DB_PASSWORD": "p@ss word", "DB_DATABASE": "okapi_modules",
	})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := c.Database.ConnString(), "postgres://folio:p%40ss%20word@db.example:6432/okapi_modules"; got != want {
		t.Errorf("ConnString = %q, want %q", got, want)
	}
	if got := c.Database.Redacted(); strings.Contains(got, "p%40ss") || !strings.Contains(got, "xxxxx") {
		t.Errorf("Redacted = %q still shows the password", got)
	}
}

func TestStorageInvalidValuesNameTheirVariable(t *testing.T) {
	t.Parallel()
	tests := []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{"DB_PORT": "abc"}, `DB_PORT="abc" is not an integer`},
		{map[string]string{"DB_PORT": "70000"}, "DB_PORT must be 1..65535"},
		{map[string]string{"DB_MAX_CONNS": "0"}, "DB_MAX_CONNS must be 1..1000"},
		{map[string]string{"DB_MAX_CONN_LIFETIME": "500ms"}, "DB_MAX_CONN_LIFETIME must be 1s..24h"},
		{map[string]string{"DB_MAX_CONN_LIFETIME": "48h"}, "DB_MAX_CONN_LIFETIME must be 1s..24h"},
		{map[string]string{"LOCK_DEFAULT_TTL_MS": "0"}, "LOCK_DEFAULT_TTL_MS must be from 100 to 600000 ms"},
		{map[string]string{"LOCK_DEFAULT_TTL_MS": "5000", "LOCK_MAX_TTL_MS": "4000"}, "LOCK_DEFAULT_TTL_MS must be from 100 to 4000 ms (from the shortest lock's lifetime to LOCK_MAX_TTL_MS), got 5000"},
		{map[string]string{"LOCK_MAX_TTL_MS": "-1"}, "LOCK_MAX_TTL_MS must be from 100 to 600000 ms"},
		{map[string]string{"LOCK_MAX_TTL_MS": "700000"}, "LOCK_MAX_TTL_MS must be from 100 to 600000 ms (the bounds of a lock's lifetime), got 700000"},
		{map[string]string{"LOCK_MAX_WAIT_MS": "600001"}, "LOCK_MAX_WAIT_MS must be from 0 to 600000 ms"},
		{map[string]string{"SHUTDOWN_TIMEOUT": "10"}, `SHUTDOWN_TIMEOUT="10" is not a duration such as 500ms, 10s or 1m`},
		{map[string]string{"SHUTDOWN_TIMEOUT": "-1s"}, "SHUTDOWN_TIMEOUT must be a positive duration"},
		{map[string]string{"LOG_LEVEL": "verbose"}, `LOG_LEVEL="verbose" is not one of debug, info, warn, error`},
		{map[string]string{"LOCK_SWEEP_INTERVAL": "0s"}, "LOCK_SWEEP_INTERVAL must be a positive duration"},
		{map[string]string{"NOTICE_INTERVAL": "0s"}, "NOTICE_INTERVAL must be a positive duration"},
		{map[string]string{"NOTICE_MAX_ATTEMPTS": "0"}, "NOTICE_MAX_ATTEMPTS must be at least 1"},
		{map[string]string{"NOTICE_FIRST_RETRY": "0s"}, "NOTICE_FIRST_RETRY must be a positive duration"},
		{map[string]string{"NOTICE_SMTP_ADDR": "mail.example.org"}, "NOTICE_SMTP_ADDR must be host:port"},
		{map[string]string{"NOTICE_FROM": "the library"}, "NOTICE_FROM must be an email address"},
		{map[string]string{"LOGIN_BUSY_WAIT": "-1s"}, "LOGIN_BUSY_WAIT must be from 0 to REQUEST_TIMEOUT (10s), got -1s"},
		{map[string]string{"LOGIN_BUSY_WAIT": "3s", "REQUEST_TIMEOUT": "2s"}, "LOGIN_BUSY_WAIT must be from 0 to REQUEST_TIMEOUT (2s), got 3s"},
		{map[string]string{"MAX_BODY_BYTES": "10"}, "MAX_BODY_BYTES must be at least 1024"},
		{map[string]string{"MAX_PAGE_BYTES": "1000"}, "MAX_PAGE_BYTES must be from 65536 to 16777216 (what circulation reads of a page), got 1000"},
		{map[string]string{"MAX_PAGE_BYTES": "16777217"}, "MAX_PAGE_BYTES must be from 65536 to 16777216"},
		{map[string]string{"ITEM_LIMIT_WITHOUT_CRITERIA": "folio"}, `ITEM_LIMIT_WITHOUT_CRITERIA must be enforce or ignore, got "folio"`},
		{map[string]string{"AUTH_MODE": "gateway", "AUTH_TRUSTED_MODULES": "circulation=dev-keys/circulation-module.pub.pem"},
			"AUTH_TRUSTED_MODULES applies to AUTH_MODE=jwt only"},
		{map[string]string{"AUTH_MODE": "jwt", "AUTH_JWT_SECRET": strings.Repeat("s", 32), "AUTH_TRUSTED_MODULES": "circulation"},
			`AUTH_TRUSTED_MODULES: "circulation" is not module=public-key-file`},
		{map[string]string{"AUTH_MODE": "jwt", "AUTH_JWT_SECRET": strings.Repeat("s", 32), "AUTH_TRUSTED_MODULES": "circulation=nope.pem"},
			"AUTH_TRUSTED_MODULES: nope.pem"},
		{map[string]string{"OUTBOX_LEAD_TIMEOUT": "500ms"}, "OUTBOX_LEAD_TIMEOUT must be from 1s to 1m, got 500ms"},
		{map[string]string{"OUTBOX_LEAD_TIMEOUT": "2m"}, "OUTBOX_LEAD_TIMEOUT must be from 1s to 1m, got 2m0s"},
		{map[string]string{"OUTBOX_LEAD_TIMEOUT": "10s", "NATS_DUPLICATE_WINDOW": "15s"},
			"NATS_DUPLICATE_WINDOW must be at least twice OUTBOX_LEAD_TIMEOUT (20s) and NATS_MAX_AGE at least it, got 15s"},
		{map[string]string{"NATS_URL": "nats://a:4222,http://b:4222"}, "NATS_URL must be nats:// or tls:// URLs, comma-separated"},
		{map[string]string{"NATS_STREAM_REPLICAS": "0"}, "NATS_STREAM_REPLICAS must be 1..5"},
		{map[string]string{"NATS_STREAM_REPLICAS": "7"}, "NATS_STREAM_REPLICAS must be 1..5"},
		{map[string]string{"OUTBOX_FAULT": "crash"}, "OUTBOX_FAULT is for the fault tests: exit-after-publish, stop-after-publish or empty"},
		{map[string]string{"PROFILE_ADDR": ":6060"}, `PROFILE_ADDR must be a loopback address (127.0.0.1:6060, [::1]:6060, localhost:6060), got ":6060"`},
		{map[string]string{"PROFILE_ADDR": "0.0.0.0:6060"}, `PROFILE_ADDR must be a loopback address`},
		{map[string]string{"PROFILE_ADDR": "10.1.2.3:6060"}, `PROFILE_ADDR must be a loopback address`},
		{map[string]string{"PROFILE_ADDR": "127.0.0.1"}, `PROFILE_ADDR must be a loopback address with a port, such as 127.0.0.1:6060, got "127.0.0.1"`},
		{map[string]string{"PROFILE_ADDR": "127.0.0.1:"}, `PROFILE_ADDR must be a loopback address with a port`},
	}
	for _, tt := range tests {
		_, err := LoadStorage(tt.env)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("LoadStorage(%v) = %v, want an error saying %q", tt.env, err, tt.want)
		}
	}
}

// TestOutboxSettingsThatFitTogether: a cluster's servers with spaces after
// the commas, a poll longer than the lead timeout's third, and a duplicate
// window exactly twice the lead timeout are all accepted.
func TestOutboxSettingsThatFitTogether(t *testing.T) {
	t.Parallel()
	env := map[string]string{"AUTH_MODE": "none", "NATS_URL": "nats://a:4222, nats://b:4222,tls://c:4222", "NATS_STREAM_REPLICAS": "3",
		"OUTBOX_POLL": "4s", "OUTBOX_LINGER": "5ms", "OUTBOX_LEAD_TIMEOUT": "5s", "NATS_DUPLICATE_WINDOW": "10s"}
	c, err := LoadStorage(env)
	if err != nil {
		t.Fatalf("LoadStorage(%v): %v", env, err)
	}
	if c.NATSStreamReplicas != 3 || c.OutboxLeadTimeout != 5*time.Second {
		t.Errorf("replicas %d, lead timeout %s", c.NATSStreamReplicas, c.OutboxLeadTimeout)
	}
}

// TestAuthModeHasNoDefault: a service with no mode configured refuses to
// start and names the variables to set; jwt mode needs exactly one key
// source; the secret never reaches the start-up log.
func TestAuthModeHasNoDefault(t *testing.T) {
	t.Parallel()
	secret := strings.Repeat("s", 32)
	for _, tt := range []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{}, "AUTH_MODE must be set: gateway"},
		{map[string]string{"AUTH_MODE": "open"}, `AUTH_MODE must be gateway, jwt or none, got "open"`},
		{map[string]string{"AUTH_MODE": "jwt"}, "AUTH_MODE=jwt needs exactly one of AUTH_JWT_SECRET"},
		{map[string]string{"AUTH_MODE": "jwt", "AUTH_JWT_SECRET": secret, "AUTH_JWKS_URL": "http://x"}, "needs exactly one"},
		{map[string]string{"AUTH_MODE": "jwt", "AUTH_JWT_SECRET": "short"}, "AUTH_JWT_SECRET must be at least 32 characters"},
		{map[string]string{"AUTH_MODE": "gateway", "AUTH_JWT_SECRET": secret}, "apply to AUTH_MODE=jwt only"},
	} {
		for name, load := range map[string]func(map[string]string) error{
			"storage":     func(e map[string]string) error { _, err := LoadStorage(e); return err },
			"circulation": func(e map[string]string) error { _, err := LoadCirculation(e); return err },
		} {
			if err := load(tt.env); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("%s %v: %v, want an error saying %q", name, tt.env, err, tt.want)
			}
		}
	}
	c, err := LoadStorage(map[string]string{"AUTH_MODE": "jwt", "AUTH_JWT_SECRET": secret})
	if err != nil {
		t.Fatal(err)
	}
	if logged := c.LogValue().String(); strings.Contains(logged, secret) || !strings.Contains(logged, "jwt") {
		t.Errorf("start-up log %s shows the secret or not the mode", logged)
	}
}

// TestTheStartUpLogNamesEveryVariableAndNoPassword: the start-up log lists
// every variable of each service under its own name, and no password:
// neither DB_PASSWORD nor one inside a URL or a key=value connection
// string.
func TestTheStartUpLogNamesEveryVariableAndNoPassword(t *testing.T) {
	t.Parallel()
	for _, dsn := range []string{"postgres://u:pw-in-url@db:5432/x", "host=db user=u password=pw-in-dsn dbname=x"} {
		c, err := LoadStorage(map[string]string{"AUTH_MODE": "gateway", "DATABASE_URL": dsn, "DB_PASSWORD": "pw-of-db",
			"LISTEN_DATABASE_URL": "postgres://u:pw-of-listener@db/x", "NATS_URL": "nats://a:pw-of-nats@n1:4222,nats://n2:4222"})
		if err != nil {
			t.Fatal(err)
		}
		var log strings.Builder
		slog.New(slog.NewJSONHandler(&log, LogOptions(slog.LevelInfo))).Info("starting", slog.Any("config", c))
		if strings.Contains(log.String(), "pw-") {
			t.Errorf("the start-up log shows a password: %s", log.String())
		}
	}
	for name, cfg := range map[string]any{"circulation": Circulation{}, "storage": Storage{}, "sip2": SIP2{}} {
		logged := logValue(cfg).String()
		for _, v := range envVars(reflect.TypeOf(cfg)) {
			// Auth and Serving log themselves, their secrets left out.
			if !strings.HasPrefix(v, "AUTH_JWT") && v != "AUTH_JWKS_URL" && v != "AUTH_ALLOW_DEVELOPMENT_KEYS" && v != "AUTH_MODE" &&
				!strings.HasPrefix(v, "TLS_") && v != "TRUSTED_PROXIES" && v != "DB_PASSWORD" &&
				!strings.Contains(logged, strings.ToLower(v)+"=") {
				t.Errorf("%s's start-up log does not name %s: %s", name, v, logged)
			}
		}
	}
}

// TestProfilesAreServedOnLoopbackOnly: PROFILE_ADDR takes the machine's
// own addresses, IPv4, IPv6 and by name, and is off by default.
func TestProfilesAreServedOnLoopbackOnly(t *testing.T) {
	t.Parallel()
	cfg, err := LoadStorage(map[string]string{"AUTH_MODE": "none"})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.ProfileAddr != "" {
		t.Errorf("PROFILE_ADDR defaults to %q, want none", cfg.ProfileAddr)
	}
	for _, addr := range []string{"127.0.0.1:6060", "127.0.0.2:0", "[::1]:6060", "localhost:6061"} {
		cfg, err := LoadStorage(map[string]string{"AUTH_MODE": "none", "PROFILE_ADDR": addr})
		if err != nil {
			t.Errorf("PROFILE_ADDR=%s: %v", addr, err)
		} else if cfg.ProfileAddr != addr {
			t.Errorf("PROFILE_ADDR=%s read as %q", addr, cfg.ProfileAddr)
		}
	}
}
