package postgres

import (
	"context"
	neturl "net/url"
	"slices"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	storage "github.com/checkoutlock/circulation-storage"
	"github.com/checkoutlock/circulation-storage/internal/pgtest"
)

// TestSweeperGoesOnPastAFailingTenant: the sweeper connects as a role that
// may not read one tenant's schema. The pass still deletes every other
// tenant's expired locks, keeps their live ones, and reports the one tenant
// it could not sweep.
func TestSweeperGoesOnPastAFailingTenant(t *testing.T) {
	t.Parallel()
	// A database of its own: the sweeper looks at every tenant in it.
	url := pgtest.Fresh(t)
	db := openDB(t, url)
	fixtures := []fixture{setupTenant(t, db), setupTenant(t, db), setupTenant(t, db)}
	// The failing tenant is the first the pass comes to.
	slices.SortFunc(fixtures, func(a, b fixture) int { return strings.Compare(string(a.tenant), string(b.tenant)) })
	ctx := context.Background()
	for _, f := range fixtures {
		for i := range 4 {
			l, _, err := f.locks.Acquire(ctx, f.tenant, uuid.NewString(), "", ttl, storage.Holder{})
			if err != nil {
				t.Fatal(err)
			}
			if i < 3 {
				expire(t, f, l.ID)
			}
		}
	}
	broken := fixtures[0]
	role := "sweeper_" + strings.ReplaceAll(uuid.NewString()[:8], "-", "")
	broken.exec(t, "CREATE ROLE "+role+" LOGIN")
	t.Cleanup(func() { broken.exec(t, "DROP OWNED BY "+role+"; DROP ROLE "+role) })
	for _, f := range fixtures[1:] {
		schema := pgx.Identifier{f.tenant.Schema()}.Sanitize()
		f.exec(t, "GRANT USAGE ON SCHEMA "+schema+" TO "+role+"; GRANT ALL ON ALL TABLES IN SCHEMA "+schema+" TO "+role+
			"; GRANT ALL ON ALL SEQUENCES IN SCHEMA "+schema+" TO "+role)
	}
	asRole, err := neturl.Parse(url)
	if err != nil {
		t.Fatal(err)
	}
	asRole.User = neturl.User(role)

	deleted, err := NewSweeper(openDB(t, asRole.String()), discard, SweeperConfig{BatchSize: 2, History: true}).SweepOnce(ctx)
	if err == nil || !strings.Contains(err.Error(), "1 of 3 tenants not swept") || !strings.Contains(err.Error(), broken.tenant.Schema()) {
		t.Errorf("sweep: %v, want it to report the one tenant it could not sweep", err)
	}
	if deleted != 6 {
		t.Errorf("deleted %d, want the 6 expired locks of the two other tenants", deleted)
	}
	for _, f := range fixtures[1:] {
		if n := f.count(t, "check_out_lock", ""); n != 1 {
			t.Errorf("tenant %s: %d locks left, want its 1 live lock", f.tenant, n)
		}
	}
	if n := broken.count(t, "check_out_lock", ""); n != 4 {
		t.Errorf("the failing tenant has %d locks, want its 4 untouched", n)
	}
}
