package config

import (
	"encoding/json"
	"strconv"
	"testing"

	"github.com/checkoutlock/schemas"
	"github.com/checkoutlock/schemas/locksettings"
)

// TestTheLockDefaultsAreOne: the check-out lock's defaults are written
// once, in locksettings: circulation's lock lifetime and retry intervals
// and storage's default lock lifetime, with nothing in the environment,
// are them; the module descriptors' launch environments name them; and a
// variable set still overrides them.
func TestTheLockDefaultsAreOne(t *testing.T) {
	t.Parallel()
	c, err := LoadCirculation(map[string]string{"AUTH_MODE": "gateway"})
	if err != nil {
		t.Fatal(err)
	}
	s, err := LoadStorage(map[string]string{"AUTH_MODE": "gateway"})
	if err != nil {
		t.Fatal(err)
	}
	if c.LockTTLMs != locksettings.DefaultTTLMs || c.RetryIntervalMs.String() != locksettings.DefaultRetryIntervalsMs ||
		s.LockDefaultTTLMs != locksettings.DefaultTTLMs {
		t.Errorf("the environment's defaults: LOCK_TTL_MS %d, RETRY_INTERVAL_MS %s, LOCK_DEFAULT_TTL_MS %d; locksettings' %d and %s",
			c.LockTTLMs, c.RetryIntervalMs, s.LockDefaultTTLMs, locksettings.DefaultTTLMs, locksettings.DefaultRetryIntervalsMs)
	}
	var d struct {
		LaunchDescriptor struct {
			Env []struct{ Name, Value string } `json:"env"`
		} `json:"launchDescriptor"`
	}
	if err := json.Unmarshal(schemas.Descriptor(schemas.ServiceCirculation), &d); err != nil {
		t.Fatal(err)
	}
	launch := map[string]string{}
	for _, e := range d.LaunchDescriptor.Env {
		launch[e.Name] = e.Value
	}
	if launch["LOCK_TTL_MS"] != strconv.Itoa(c.LockTTLMs) || launch["RETRY_INTERVAL_MS"] != c.RetryIntervalMs.String() {
		t.Errorf("circulation's descriptor launches with LOCK_TTL_MS=%s RETRY_INTERVAL_MS=%s; the defaults are %d and %s",
			launch["LOCK_TTL_MS"], launch["RETRY_INTERVAL_MS"], c.LockTTLMs, c.RetryIntervalMs)
	}
	set, err := LoadCirculation(map[string]string{"AUTH_MODE": "gateway", "LOCK_TTL_MS": "4000", "RETRY_INTERVAL_MS": "100"})
	if err != nil || set.LockTTLMs != 4000 || set.RetryIntervalMs.String() != "100" {
		t.Errorf("set in the environment: %d %s %v, want 4000 and 100", set.LockTTLMs, set.RetryIntervalMs, err)
	}
}
