package integration

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/checkoutlock/integration-tests/harness"
	"github.com/checkoutlock/schemas"
	"github.com/checkoutlock/serverkit/auth"
)

// settingEntry is the checkoutLockFeature entry as storage holds it, found
// the way mod-circulation finds it: a CQL query, taking the first result.
func settingEntry(t *testing.T, c *harness.Cluster) (id string, value json.RawMessage, version int) {
	t.Helper()
	var page struct {
		Items []struct {
			ID      string          `json:"id"`
			Value   json.RawMessage `json:"value"`
			Version int             `json:"_version"`
		} `json:"items"`
		TotalRecords int `json:"totalRecords"`
	}
	q := url.QueryEscape(`scope=="mod-circulation" and key=="checkoutLockFeature"`)
	c.Do(c.Storage, "GET", "/settings/entries?query="+q, nil).Want(t, http.StatusOK).Decode(t, &page)
	if page.TotalRecords != 1 || len(page.Items) != 1 {
		t.Fatalf("checkoutLockFeature entries: %d", page.TotalRecords)
	}
	return page.Items[0].ID, page.Items[0].Value, page.Items[0].Version
}

// TestFOLIOShapedSettingIsHonoured: the lock switched off the way FOLIO's
// tools do it (the entry's value a string holding JSON, written straight to
// storage) is off for check-outs on every instance; switched back on through
// circulation, the entry is written in FOLIO's shape, so a real
// mod-circulation reading it would see the lock on too.
func TestFOLIOShapedSettingIsHonoured(t *testing.T) {
	t.Parallel()
	c := harness.NewCluster(t, harness.Options{Circulations: 2, FeatureOn: true})
	lib := c.SetupLibrary(1, 3, 3)
	patron, items := lib.Patrons[0], lib.Items[0]
	// A distractor: the same key in another scope, created first, by a
	// token allowed to write that scope.
	claims, err := auth.RoleClaims(schemas.RoleTenantAdmin, c.Tenant, "aaaaaaaa-aaaa-4aaa-8aaa-00000000000f")
	if err != nil {
		t.Fatal(err)
	}
	claims.Permissions = append(claims.Permissions, schemas.SettingsScopeWrite("ui-circulation"))
	token, err := auth.Mint(harness.Secret(), claims, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	c.DoWith(c.Storage, "POST", "/settings/entries", map[string]any{"scope": "ui-circulation", "key": "checkoutLockFeature",
		"value": `{"checkOutLockFeatureEnabled":true}`}, map[string]string{schemas.HeaderTenant: c.Tenant, schemas.HeaderToken: token}).
		Want(t, http.StatusCreated)
	c.Do(c.Storage, "POST", "/settings/entries", map[string]any{"scope": "mod-circulation", "key": "checkoutLockFeature",
		"value": `{"checkOutLockFeatureEnabled":false,"noOfRetryAttempts":5,"retryInterval":100,"lockTtl":4000}`}).
		Want(t, http.StatusCreated)

	type effective struct {
		Enabled bool           `json:"checkOutLockFeatureEnabled"`
		LockTTL int            `json:"lockTtl"`
		Waits   []int          `json:"retryIntervalsMs"`
		Sources map[string]any `json:"sources"`
		Error   string         `json:"settingsError"`
	}
	for i := range c.Circulations {
		waitFor(t, "the stored setting in effect", func() bool {
			var s effective
			c.Do(c.Circulations[i], "GET", "/circulation/settings/check-out-lock", nil).Want(t, http.StatusOK).Decode(t, &s)
			return !s.Enabled && s.LockTTL == 4000 && len(s.Waits) == 5 && s.Sources["checkOutLockFeatureEnabled"] == "settings" && s.Error == ""
		})
	}
	before := metricLine(c, `checkout_lock_acquisitions_total{outcome="acquired"}`)
	c.CheckOut(0, items[0], patron).Want(t, http.StatusCreated)
	c.CheckOut(1, items[1], patron).Want(t, http.StatusCreated)
	if after := metricLine(c, `checkout_lock_acquisitions_total{outcome="acquired"}`); after != before {
		t.Errorf("locks acquired with the feature off in the FOLIO-shaped entry: %q then %q", before, after)
	}

	// Back on through circulation: the same entry, FOLIO's shape, the
	// other fields kept.
	c.Do(c.Circulations[0], "PATCH", "/circulation/settings/check-out-lock", map[string]any{"checkOutLockFeatureEnabled": true}).
		Want(t, http.StatusOK)
	_, value, version := settingEntry(t, c)
	var text string
	if err := json.Unmarshal(value, &text); err != nil {
		t.Fatalf("value %s is not a string holding JSON", value)
	}
	var stored map[string]any
	if err := json.Unmarshal([]byte(text), &stored); err != nil || version != 2 ||
		stored["checkOutLockFeatureEnabled"] != true || stored["lockTtl"] != 4000.0 || stored["noOfRetryAttempts"] != 5.0 {
		t.Errorf("entry after PATCH: value %s, _version %d", value, version)
	}
	c.CheckOut(0, items[2], patron).Want(t, http.StatusCreated)
	if after := metricLine(c, `checkout_lock_acquisitions_total{outcome="acquired"}`); after == before {
		t.Errorf("no lock acquired with the feature back on: %q", after)
	}
	c.CheckInvariants(t, harness.Invariants{ItemLimit: 3})
}

// metricLine is storage's metric line that starts with prefix.
func metricLine(c *harness.Cluster, prefix string) string {
	m := string(c.DoWith(c.Storage, "GET", "/metrics", nil, nil).Body)
	for _, line := range strings.Split(m, "\n") {
		if strings.HasPrefix(line, prefix) {
			return line
		}
	}
	return ""
}
