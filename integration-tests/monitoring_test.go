package integration

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/checkoutlock/integration-tests/harness"
)

// metricRef is a metric name as the shipped dashboard and alerts write it.
var metricRef = regexp.MustCompile(`\b(?:checkout|http)_[a-z0-9_]+\b`)

// TestMonitoringNamesExportedMetrics: every metric the Grafana dashboard
// and the alerting rules query is one the running services export (a
// histogram's _bucket, _count and _sum included), so a renamed metric
// cannot leave a dashboard panel or an alert silently empty.
func TestMonitoringNamesExportedMetrics(t *testing.T) {
	t.Parallel()
	c := harness.NewCluster(t, harness.Options{Circulations: 1, FeatureOn: true})
	exported := map[string]bool{}
	for _, p := range []*harness.Process{c.Storage, c.Circulations[0]} {
		for _, line := range strings.Split(string(c.DoWith(p, "GET", "/metrics", nil, nil).Body), "\n") {
			f := strings.Fields(line)
			if len(f) == 4 && f[0] == "#" && f[1] == "TYPE" {
				exported[f[2]] = true
				if f[3] == "histogram" {
					for _, s := range []string{"_bucket", "_count", "_sum"} {
						exported[f[2]+s] = true
					}
				}
			}
		}
	}
	if !exported["checkout_lock_events_total"] || !exported["checkout_duration_seconds_bucket"] {
		t.Fatalf("the services' metrics were not read: %v", exported)
	}
	for _, file := range []string{"../config/monitoring/checkout-lock-dashboard.json", "../config/monitoring/checkout-lock-alerts.yml"} {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasSuffix(file, ".json") && !json.Valid(data) {
			t.Errorf("%s is not valid JSON", file)
		}
		refs := metricRef.FindAllString(string(data), -1)
		if len(refs) < 5 {
			t.Errorf("%s names %d metrics; the pattern no longer finds them", file, len(refs))
		}
		for _, name := range refs {
			if !exported[name] {
				t.Errorf("%s queries %s, which neither service exports", file, name)
			}
		}
	}
}

// TestProfilesOnTheirOwnLoopbackAddress: with PROFILE_ADDR set, each
// service serves Go's profiles on it, as logged at start-up, and its API
// still serves none; the CPU profile comes as pprof's format sends it
// (gzipped).
func TestProfilesOnTheirOwnLoopbackAddress(t *testing.T) {
	t.Parallel()
	profiled := "PROFILE_ADDR=127.0.0.1:0"
	c := harness.NewCluster(t, harness.Options{Circulations: 1, StorageEnv: []string{profiled}, CirculationEnv: []string{profiled}})
	for _, p := range []*harness.Process{c.Storage, c.Circulations[0]} {
		addr := p.ProfileAddr()
		if !strings.HasPrefix(addr, "127.0.0.1:") {
			t.Fatalf("%s logged no loopback address for its profiles (%q)", p.Name, addr)
		}
		res, err := http.Get("http://" + addr + "/debug/pprof/profile?seconds=1")
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(res.Body)
		res.Body.Close()
		if err != nil || res.StatusCode != http.StatusOK {
			t.Fatalf("%s's CPU profile: %d %v", p.Name, res.StatusCode, err)
		}
		z, err := gzip.NewReader(bytes.NewReader(b))
		if err == nil {
			var n int64
			n, err = io.Copy(io.Discard, z)
			if err == nil && n == 0 {
				err = errors.New("empty")
			}
		}
		if err != nil {
			t.Errorf("%s's CPU profile (%d bytes) is not a gzipped profile: %v", p.Name, len(b), err)
		}
		if got := c.DoWith(p, "GET", "/debug/pprof/cmdline", nil, nil); got.Status != http.StatusNotFound {
			t.Errorf("%s's API answers GET /debug/pprof/cmdline %d %s, want 404: profiles are served on their own address only",
				p.Name, got.Status, got.Body)
		}
	}
}
