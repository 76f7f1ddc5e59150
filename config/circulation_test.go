package config

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestCirculationDefaults(t *testing.T) {
	t.Parallel()
	c, err := LoadCirculation(map[string]string{"AUTH_MODE": "gateway"})
	if err != nil {
		t.Fatal(err)
	}
	if c.HTTPAddr != ":8080" || c.StorageURL != "http://127.0.0.1:8081" ||
		c.LockTTLMs != 3000 || c.RetryIntervalMs.String() != "500|500|1000" || c.ModuleTokenTTL != 2*time.Minute {
		t.Errorf("defaults = %+v", c)
	}
	want := []time.Duration{500 * time.Millisecond, 500 * time.Millisecond, time.Second}
	if got := c.RetryIntervalMs.Durations(); !reflect.DeepEqual(got, want) {
		t.Errorf("Durations() = %v, want %v", got, want)
	}
}

// TestTrustedProxiesParse: addresses and blocks, IPv4 and IPv6, an IPv4
// address in IPv6 form taken as IPv4.
func TestTrustedProxiesParse(t *testing.T) {
	t.Parallel()
	c, err := LoadCirculation(map[string]string{"AUTH_MODE": "gateway", "TRUSTED_PROXIES": " 10.0.0.0/8, 192.0.2.7 ,::ffff:198.51.100.1,2001:db8::/32"})
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Serving.TrustedProxies.String(); got != "10.0.0.0/8,192.0.2.7/32,198.51.100.1/32,2001:db8::/32" {
		t.Errorf("TRUSTED_PROXIES parsed as %s", got)
	}
}

func TestCirculationSeedVariables(t *testing.T) {
	t.Parallel()
	c, err := LoadCirculation(map[string]string{"AUTH_MODE": "gateway",
		"LOCK_TTL_MS": "2000", "RETRY_INTERVAL_MS": " 250 | 1|1000 ",
	})
	if err != nil {
		t.Fatal(err)
	}
	if c.LockTTLMs != 2000 || !reflect.DeepEqual(c.RetryIntervalMs, Intervals{250, 1, 1000}) {
		t.Errorf("parsed %+v", c)
	}
}

func TestTraceLinkPutsTheTraceIdInTheURL(t *testing.T) {
	t.Parallel()
	c, err := LoadCirculation(map[string]string{"AUTH_MODE": "gateway", "TRACE_URL": "http://jaeger:16686/trace/{traceId}?uiEmbed=v0"})
	if err != nil {
		t.Fatal(err)
	}
	if got := c.TraceLink()("4bf92f3577b34da6a3ce929d0e0e4736"); got != "http://jaeger:16686/trace/4bf92f3577b34da6a3ce929d0e0e4736?uiEmbed=v0" {
		t.Errorf("TraceLink = %q", got)
	}
	if c, _ := LoadCirculation(map[string]string{"AUTH_MODE": "gateway"}); c.TraceLink() != nil {
		t.Error("TraceLink without TRACE_URL is not nil")
	}
}

func TestCirculationInvalidValuesNameTheirVariable(t *testing.T) {
	t.Parallel()
	tests := []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{"RETRY_INTERVAL_MS": "500|x"}, `RETRY_INTERVAL_MS="500|x" is not waits in milliseconds separated by |`},
		{map[string]string{"RETRY_INTERVAL_MS": "500|-1"}, `RETRY_INTERVAL_MS="500|-1"`},
		{map[string]string{"RETRY_INTERVAL_MS": "60001"}, `RETRY_INTERVAL_MS="60001"`},
		{map[string]string{"RETRY_INTERVAL_MS": strings.Repeat("1|", 100) + "1"}, `RETRY_INTERVAL_MS=`},
		{map[string]string{"LOCK_TTL_MS": "0"}, "LOCK_TTL_MS must be from 100 to 600000 ms (the bounds a tenant's lockTtl keeps to), got 0"},
		{map[string]string{"LOCK_TTL_MS": "50"}, "LOCK_TTL_MS must be from 100 to 600000 ms"},
		{map[string]string{"RETRY_INTERVAL_MS": "500|0"}, `RETRY_INTERVAL_MS="500|0"`},
		{map[string]string{"LOCK_TTL_MS": "3s"}, `LOCK_TTL_MS="3s" is not an integer`},
		{map[string]string{"STORAGE_URL": "127.0.0.1:8081"}, "STORAGE_URL must be an http:// or https:// URL"},
		{map[string]string{"RELEASE_TIMEOUT": "0s"}, "RELEASE_TIMEOUT must be a positive duration"},
		{map[string]string{"AUTH_MODE": "jwt", "AUTH_JWT_SECRET": strings.Repeat("s", 32)}, "AUTH_MODE=jwt needs AUTH_MODULE_KEY_FILE"},
		{map[string]string{"AUTH_MODE": "gateway", "AUTH_MODULE_KEY_FILE": "dev-keys/circulation-module.pem"},
			"AUTH_MODULE_KEY_FILE applies to AUTH_MODE=jwt only"},
		{map[string]string{"AUTH_MODE": "jwt", "AUTH_JWT_SECRET": strings.Repeat("s", 32), "AUTH_MODULE_KEY_FILE": "no-such.pem"},
			"AUTH_MODULE_KEY_FILE no-such.pem"},
		{map[string]string{"AUTH_MODE": "jwt", "AUTH_JWT_SECRET": strings.Repeat("s", 32), "AUTH_MODULE_KEY_FILE": "dev-keys/circulation-module.pem",
			"AUTH_MODULE_TOKEN_TTL": "10m"}, "AUTH_MODULE_TOKEN_TTL must be from 10s to 5m"},
		{map[string]string{"SHUTDOWN_TIMEOUT": "5s", "REQUEST_TIMEOUT": "10s"}, "SHUTDOWN_TIMEOUT (5s) must be at least REQUEST_TIMEOUT (10s)"},
		{map[string]string{"TRUSTED_PROXIES": "10.0.0.0/8,door"}, `TRUSTED_PROXIES="10.0.0.0/8,door" is not IP addresses or CIDR blocks`},
		{map[string]string{"TLS_CERT_FILE": "cert.pem"}, "TLS_CERT_FILE and TLS_KEY_FILE go together"},
		{map[string]string{"TLS_CERT_FILE": "no-such.pem", "TLS_KEY_FILE": "no-such-key.pem"}, "TLS_CERT_FILE and TLS_KEY_FILE: open no-such.pem"},
		{map[string]string{"STORAGE_CA_FILE": "no-such.pem"}, "STORAGE_CA_FILE: open no-such.pem"},
		{map[string]string{"PATRON_SUMMARY_RATE": "-1"}, "PATRON_SUMMARY_RATE must be at least 0"},
		{map[string]string{"TRACE_URL": "http://jaeger:16686/trace/"}, `TRACE_URL must be an http:// or https:// URL holding {traceId}, got "http://jaeger:16686/trace/"`},
		{map[string]string{"TRACE_URL": "jaeger/{traceId}"}, `TRACE_URL must be an http:// or https:// URL holding {traceId}`},
	}
	for _, tt := range tests {
		_, err := LoadCirculation(tt.env)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("LoadCirculation(%v) = %v, want an error saying %q", tt.env, err, tt.want)
		}
	}
}
