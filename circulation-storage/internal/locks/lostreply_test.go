package locks

import (
	"context"
	"testing"
	"time"

	"github.com/checkoutlock/circulation-storage/internal/dbtest"
	"github.com/checkoutlock/circulation-storage/internal/postgres"
	"github.com/google/uuid"

	storage "github.com/checkoutlock/circulation-storage"
)

// TestAnAcquireWhoseAnswerIsLostAnswersItsLock: an acquisition that names
// no lock id commits, and its answer is lost; the pool runs the statement
// again on a fresh connection. The caller is answered the lock it took
// (renewed by its second run: the id was chosen before the first), not
// told that someone (itself) holds the patron's lock.
func TestAnAcquireWhoseAnswerIsLostAnswersItsLock(t *testing.T) {
	t.Parallel()
	l, f := dbtest.LoserDB(t)
	ctx := context.Background()
	user := uuid.NewString()
	holder := storage.Holder{AcquiredBy: "kiosk-1", AcquiredByModule: "circulation"}
	l.Arm("INSERT INTO")
	lock, outcome, err := NewLocks(f.DB).Acquire(ctx, f.Tenant, user, "", 30*time.Second, holder)
	if l.Lost.Load() != 1 {
		t.Fatalf("%d answers lost, want 1", l.Lost.Load())
	}
	if err != nil || lock.ID == "" || outcome != storage.Renewed {
		t.Fatalf("the acquisition run again: %+v, %v, %v; want its own lock, renewed", lock, outcome, err)
	}
	if n := f.Count(t, postgres.TableLock, "id = $1 AND user_id = $2", lock.ID, user); n != 1 {
		t.Errorf("%d locks with the id answered, want the one taken", n)
	}
}
