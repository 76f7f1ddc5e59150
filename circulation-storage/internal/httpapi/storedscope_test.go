package httpapi

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	storage "github.com/checkoutlock/circulation-storage"
	"github.com/checkoutlock/schemas"
	"github.com/checkoutlock/serverkit"
	"github.com/checkoutlock/serverkit/auth"
)

// storedSettings serves settings entries from memory and remembers the
// writes that reached it.
type storedSettings struct {
	storage.RecordService
	docs   map[string]string
	mu     sync.Mutex
	writes []string
}

func (s *storedSettings) Get(_ context.Context, _ storage.Tenant, _ storage.Resource, id string) (json.RawMessage, error) {
	return json.RawMessage(s.docs[id]), nil
}

func (s *storedSettings) Update(_ context.Context, _ storage.Tenant, _ storage.Resource, id string, _ int, _ json.RawMessage) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.writes = append(s.writes, "update "+id)
	return nil
}

func (s *storedSettings) Delete(_ context.Context, _ storage.Tenant, _ storage.Resource, id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.writes = append(s.writes, "delete "+id)
	return nil
}

// TestStoredSettingWithoutAReadableScopeIsRefused: in jwt mode, who may
// read, replace or delete a settings entry depends on its stored scope.
// An entry whose scope cannot be read (a number, written straight into
// the table) answers 500 and is left alone; it is never checked as the
// empty scope, whose permission this caller even holds. An entry with a
// scope is served, whatever else it holds.
func TestStoredSettingWithoutAReadableScopeIsRefused(t *testing.T) {
	t.Parallel()
	const (
		secret   = "0123456789abcdef0123456789abcdef-scope"
		broken   = "11111111-1111-4111-8111-111111111111"
		readable = "22222222-2222-4222-8222-222222222222"
	)
	records := &storedSettings{docs: map[string]string{
		broken:   `{"id":"` + broken + `","scope":5,"key":"k","value":1,"_version":1}`,
		readable: `{"id":"` + readable + `","scope":"x","key":"k","value":1,"_version":1,"status":"kept as written"}`,
	}}
	v, err := auth.NewVerifier(context.Background(), auth.KeyConfig{Secret: secret})
	if err != nil {
		t.Fatal(err)
	}
	metrics := NewMetrics()
	srv := New(Config{Config: serverkit.Config{MaxBodyBytes: 64 << 10, MaxHeaderBytes: 16 << 10, RequestTimeout: 5 * time.Second,
		Auth: auth.Guard{Mode: auth.JWT, Verifier: v}}, LockMaxWait: time.Second},
		Services{Tenants: everyTenant{}, Records: records}, sch, metrics, slog.New(slog.NewTextHandler(io.Discard, nil)))
	ts := httptest.NewServer(srv)
	t.Cleanup(ts.Close)
	claims, err := auth.RoleClaims(schemas.RoleTenantAdmin, "diku", testUser)
	if err != nil {
		t.Fatal(err)
	}
	claims.Permissions = append(claims.Permissions, schemas.SettingsScopeRead(""), schemas.SettingsScopeWrite(""),
		schemas.SettingsScopeRead("x"), schemas.SettingsScopeWrite("x"))
	tok, err := auth.Mint(secret, claims, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{t: t, url: ts.URL, tenant: "diku"}
	headers := map[string]string{TenantHeader: "diku", schemas.HeaderToken: tok}
	body := `{"scope":"x","key":"k","value":2}`
	for _, r := range []struct{ method, body string }{{"GET", ""}, {"PUT", body}, {"DELETE", ""}} {
		res := f.doWith(r.method, storage.Settings.Path+"/"+broken, r.body, headers)
		res.wantError(http.StatusInternalServerError, schemas.CodeInternal)
	}
	if len(records.writes) != 0 {
		t.Fatalf("writes %v to an entry whose scope could not be read, want none", records.writes)
	}
	got := f.doWith("GET", storage.Settings.Path+"/"+readable, "", headers).wantStatus(http.StatusOK)
	if !strings.Contains(string(got.body), `"kept as written"`) {
		t.Errorf("GET %s = %s", readable, got.body)
	}
	f.doWith("PUT", storage.Settings.Path+"/"+readable, body, headers).wantStatus(http.StatusNoContent)
	f.doWith("DELETE", storage.Settings.Path+"/"+readable, "", headers).wantStatus(http.StatusNoContent)
	if want := []string{"update " + readable, "delete " + readable}; strings.Join(records.writes, ",") != strings.Join(want, ",") {
		t.Errorf("writes %v, want %v", records.writes, want)
	}
}

// TestPermissionForPanicsOnAnUnknownRoute: a permission the code looks up
// once, at initialisation, is either known or stops the service from
// starting; never "" to check at run time.
func TestPermissionForPanicsOnAnUnknownRoute(t *testing.T) {
	t.Parallel()
	if releasePermission == "" {
		t.Fatal("releasePermission is empty")
	}
	defer func() {
		if recover() == nil {
			t.Error("permissionFor of a route that does not exist returned, want a panic")
		}
	}()
	permissionFor(http.MethodPatch, "/no-such-route")
}
