package config

import (
	"strings"
	"testing"
	"time"
)

// TestSIP2ShutdownLeavesRoomForTheLogouts: the default SHUTDOWN_TIMEOUT
// covers a message being handled and its kiosk's logout after it, and one
// too short for them is refused, naming the variables it depends on.
func TestSIP2ShutdownLeavesRoomForTheLogouts(t *testing.T) {
	t.Parallel()
	c, err := LoadSIP2(map[string]string{"SIP2_CONFIG": "sip2.json"})
	if err != nil {
		t.Fatal(err)
	}
	if c.ShutdownTimeout != 40*time.Second || c.ShutdownNeeds() != 30*time.Second {
		t.Errorf("SHUTDOWN_TIMEOUT %s for a stop that needs up to %s, want 40s for 30s", c.ShutdownTimeout, c.ShutdownNeeds())
	}
	tests := []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{"SHUTDOWN_TIMEOUT": "29s"}, "SHUTDOWN_TIMEOUT (29s) must be at least 30s (twice SIP2_CALL_TIMEOUT and SIP2_WRITE_TIMEOUT)"},
		{map[string]string{"SIP2_CALL_TIMEOUT": "20s"}, "SHUTDOWN_TIMEOUT (40s) must be at least 50s"},
		{map[string]string{"SHUTDOWN_TIMEOUT": "0s"}, "SHUTDOWN_TIMEOUT must be a positive duration"},
		{map[string]string{"SIP2_OFFLINE_WITHIN": "721h"}, "SIP2_OFFLINE_WITHIN must be at most 720h0m0s"},
	}
	for _, tt := range tests {
		tt.env["SIP2_CONFIG"] = "sip2.json"
		_, err := LoadSIP2(tt.env)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("LoadSIP2(%v) = %v, want an error saying %q", tt.env, err, tt.want)
		}
	}
	if _, err := LoadSIP2(map[string]string{"SIP2_CONFIG": "sip2.json", "SIP2_CALL_TIMEOUT": "5s", "SIP2_WRITE_TIMEOUT": "5s",
		"SHUTDOWN_TIMEOUT": "15s"}); err != nil {
		t.Errorf("a SHUTDOWN_TIMEOUT of exactly what a stop needs: %v", err)
	}
}
