package schemas

import (
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/checkoutlock/schemas/locksettings"
)

// TestSchemaBoundsAreTheLocksBounds: every bound of the lock the JSON
// Schemas carry is the one locksettings defines, so that what the contract
// says is what every service checks.
func TestSchemaBoundsAreTheLocksBounds(t *testing.T) {
	t.Parallel()
	ms := func(d time.Duration) float64 { return float64(d.Milliseconds()) }
	for _, tc := range []struct {
		file, path string // the path: keys and anyOf/items steps, by "/"
		want       float64
	}{
		{"checkout-lock-request.json", "properties/ttlMs/minimum", ms(locksettings.MinLockTTL)},
		{"checkout-lock-request.json", "properties/ttlMs/maximum", ms(locksettings.MaxLockTTL)},
		{"checkout-lock-request.json", "properties/waitMs/minimum", 0},
		{"checkout-lock-request.json", "properties/waitMs/maximum", ms(locksettings.MaxWait)},
		{"checkout-lock-settings.json", "properties/lockTtl/minimum", ms(locksettings.MinLockTTL)},
		{"checkout-lock-settings.json", "properties/lockTtl/maximum", ms(locksettings.MaxLockTTL)},
		{"checkout-lock-settings.json", "properties/retryInterval/minimum", ms(locksettings.MinRetryWait)},
		{"checkout-lock-settings.json", "properties/retryInterval/maximum", ms(locksettings.MaxRetryWait)},
		{"checkout-lock-settings.json", "properties/noOfRetryAttempts/minimum", 0},
		{"checkout-lock-settings.json", "properties/noOfRetryAttempts/maximum", locksettings.MaxRetries},
		{"checkout-lock-settings.json", "properties/retryIntervalsMs/maxItems", locksettings.MaxRetries},
		{"checkout-lock-settings.json", "properties/retryIntervalsMs/items/minimum", ms(locksettings.MinRetryWait)},
		{"checkout-lock-settings.json", "properties/retryIntervalsMs/items/maximum", ms(locksettings.MaxRetryWait)},
		{"checkout-lock-settings-patch.json", "properties/lockTtl/anyOf/0/minimum", ms(locksettings.MinLockTTL)},
		{"checkout-lock-settings-patch.json", "properties/lockTtl/anyOf/0/maximum", ms(locksettings.MaxLockTTL)},
		{"checkout-lock-settings-patch.json", "properties/retryInterval/anyOf/0/minimum", ms(locksettings.MinRetryWait)},
		{"checkout-lock-settings-patch.json", "properties/retryInterval/anyOf/0/maximum", ms(locksettings.MaxRetryWait)},
		{"checkout-lock-settings-patch.json", "properties/noOfRetryAttempts/anyOf/0/maximum", locksettings.MaxRetries},
		{"checkout-lock-settings-patch.json", "properties/retryIntervalsMs/anyOf/0/maxItems", locksettings.MaxRetries},
		{"checkout-lock-settings-patch.json", "properties/retryIntervalsMs/anyOf/0/items/minimum", ms(locksettings.MinRetryWait)},
		{"checkout-lock-settings-patch.json", "properties/retryIntervalsMs/anyOf/0/items/maximum", ms(locksettings.MaxRetryWait)},
	} {
		b, err := os.ReadFile(tc.file)
		if err != nil {
			t.Fatal(err)
		}
		var node any
		if err := json.Unmarshal(b, &node); err != nil {
			t.Fatal(err)
		}
		for _, step := range strings.Split(tc.path, "/") {
			switch n := node.(type) {
			case map[string]any:
				node = n[step]
			case []any:
				node = n[0]
			}
		}
		if got, _ := node.(float64); got != tc.want {
			t.Errorf("%s %s is %v, want %v (locksettings)", tc.file, tc.path, node, tc.want)
		}
	}
}
