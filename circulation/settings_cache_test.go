package circulation_test

import (
	"fmt"
	"testing"

	"github.com/checkoutlock/circulation"
	"github.com/checkoutlock/schemas"
	"github.com/checkoutlock/schemas/errs"
)

// TestSettingsCacheIsBounded: however many tenants ask, at most the
// configured number are cached.
func TestSettingsCacheIsBounded(t *testing.T) {
	t.Parallel()
	s := newStack(t, tableEnv, withMaxTenants(3))
	for range 8 {
		ctx := circulation.WithOkapi(t.Context(), circulation.Okapi{Tenant: s.store.AnotherTenant()})
		effective(t, s.settings, ctx)
	}
	if n := s.settings.CachedTenants(); n != 3 {
		t.Errorf("%d tenants cached, want 3", n)
	}
}

// TestUnknownTenantSettingsAreRefusedAndNotCached: settings of a tenant
// storage does not know are an error, as every other call for it is, and
// are never cached: invented tenant names cannot fill the cache.
func TestUnknownTenantSettingsAreRefusedAndNotCached(t *testing.T) {
	t.Parallel()
	s := newStack(t, tableEnv)
	effective(t, s.settings, okapi(t))
	for i := range 20 {
		ctx := circulation.WithOkapi(t.Context(), circulation.Okapi{Tenant: fmt.Sprintf("nobody%d", i)})
		_, err := s.settings.Effective(ctx)
		wantError(t, err, errs.KindBadRequest, schemas.CodeTenantNotInitialized)
	}
	if n := s.settings.CachedTenants(); n != 1 {
		t.Errorf("%d tenants cached, want only the known one", n)
	}
}
