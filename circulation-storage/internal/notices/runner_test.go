package notices

import (
	"context"
	"testing"
	"time"

	"github.com/checkoutlock/circulation-storage/internal/dbtest"
	"github.com/checkoutlock/circulation-storage/internal/postgres"
)

// TestARoundLeadsOnASessionOfItsOwn: a round's lead is held on a session
// of the lead's own pool, not on one of the pool it schedules on: with one
// connection for everything else (DB_MAX_CONNS=1, the lock statements on
// the main pool), a round runs to its end, rather than wait for ever for
// a second connection while its lead holds the only one.
func TestARoundLeadsOnASessionOfItsOwn(t *testing.T) {
	t.Parallel()
	// A database of its own: the notices' lock is the database's.
	db := dbtest.OpenFresh(t, postgres.PoolConfig{MaxConns: 1, LockCommit: "on"})
	dbtest.SetupTenant(t, db)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	r := &Runner{DB: db, Logger: dbtest.Discard, Config: SendConfig{Batch: 10}}
	if scheduled, sent, led, err := r.Round(ctx); err != nil || !led || scheduled != 0 || sent != 0 {
		t.Errorf("a round with one connection in the pool: scheduled %d, sent %d, led %t, %v; want it led, with nothing to do", scheduled, sent, led, err)
	}
}
