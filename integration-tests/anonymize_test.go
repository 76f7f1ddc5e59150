package integration

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/checkoutlock/integration-tests/harness"
	"github.com/jackc/pgx/v5"
)

// TestLoansAreAnonymizedAsTheLibrarySays: a library's loan history
// settings (FOLIO's loan_history entry) decide when a closed loan forgets
// its borrower, and storage's sweeper does it while kiosks check out and
// check in: immediately, every loan closed while the kiosks work is
// anonymized, once (one version on), and no open loan ever is; after an
// interval, a loan is anonymized once it was returned that long ago, not
// before; never, none is. A setting storage could not read is refused
// naming its field, nothing stored.
func TestLoansAreAnonymizedAsTheLibrarySays(t *testing.T) {
	t.Parallel()
	c := harness.NewCluster(t, harness.Options{Circulations: 2, FeatureOn: true, StorageEnv: []string{"LOCK_SWEEP_INTERVAL=200ms"}})
	lib := c.SetupLibrary(4, 3, 0)
	ctx := context.Background()
	loans := pgx.Identifier{c.Schema, "loan"}.Sanitize()
	count := func(where string, args ...any) int {
		t.Helper()
		var n int
		if err := c.DB.QueryRow(ctx, `SELECT count(*) FROM `+loans+` WHERE `+where, args...).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	setting := ""
	history := func(value string) {
		t.Helper()
		if setting == "" {
			var e struct{ ID string }
			c.Do(c.Storage, "POST", "/settings/entries", `{"scope":"mod-circulation","key":"loan_history","value":`+value+`}`).
				Want(t, http.StatusCreated).Decode(t, &e)
			setting = e.ID
			return
		}
		var e map[string]any
		c.Do(c.Storage, "GET", "/settings/entries/"+setting, nil).Want(t, http.StatusOK).Decode(t, &e)
		c.Do(c.Storage, "PUT", "/settings/entries/"+setting, fmt.Sprintf(`{"id":%q,"scope":"mod-circulation","key":"loan_history","value":%s,"_version":%v}`,
			setting, value, e["_version"])).Want(t, http.StatusNoContent)
	}
	passes := func() float64 {
		n, _ := c.Metric(t, c.Storage, `checkout_lock_sweeper_work_seconds_count{work="anonymize"}`)
		return n
	}
	// Two passes after now: whatever was due is done.
	twoPasses := func() {
		t.Helper()
		from := passes()
		if !harness.Poll(20*time.Second, 50*time.Millisecond, func() bool { return passes() >= from+2 }) {
			t.Fatalf("the sweeper did not anonymize twice in 20 s")
		}
	}
	// kiosks check out and check in every patron's items for a while,
	// over both circulation instances, and answer each loan checked in.
	kiosks := func() []string {
		t.Helper()
		var mu sync.Mutex
		var closed []string
		var wg sync.WaitGroup
		for p, patron := range lib.Patrons {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for round := range 3 {
					for _, item := range lib.Items[p] {
						var loan struct{ ID string }
						c.CheckOut(p+round, item, patron).Want(t, http.StatusCreated).Decode(t, &loan)
						c.CheckIn(p+round+1, item).Want(t, http.StatusOK)
						mu.Lock()
						closed = append(closed, loan.ID)
						mu.Unlock()
					}
				}
			}()
		}
		wg.Wait()
		return closed
	}

	// Never, FOLIO's default: nothing.
	c.Do(c.Storage, "POST", "/settings/entries", `{"scope":"mod-circulation","key":"loan_history","value":{"closingType":{"loan":"sometimes"}}}`).
		Want(t, http.StatusUnprocessableEntity)
	history(`{"closingType":{"loan":"never"}}`)
	first := kiosks()
	twoPasses()
	if n := count("status_name = 'Closed' AND user_id IS NULL"); n != 0 || len(first) != 36 {
		t.Fatalf("never: %d of %d loans anonymized", n, len(first))
	}

	// Immediately, while the kiosks work: every closed loan once, no open
	// one, and the patrons hold one loan each meanwhile.
	history(`{"closingType":{"loan":"immediately","feeFine":"immediately"},"treatEnabled":false}`)
	var open []string
	for p, patron := range lib.Patrons {
		var loan struct{ ID string }
		c.CheckOut(p, lib.Items[p][0], patron).Want(t, http.StatusCreated).Decode(t, &loan)
		open = append(open, loan.ID)
	}
	for p := range lib.Patrons {
		lib.Items[p] = lib.Items[p][1:]
	}
	second := kiosks()
	twoPasses()
	if n := count("status_name = 'Closed' AND (user_id IS NOT NULL OR jsonb ? 'userId')"); n != 0 {
		t.Fatalf("immediately: %d closed loans still name their borrower", n)
	}
	if n := count("status_name = 'Open' AND user_id IS NOT NULL AND id = ANY ($1::uuid[])", open); n != len(open) {
		t.Fatalf("immediately: %d of the %d open loans name their borrower", n, len(open))
	}
	var versions []int
	rows, _ := c.DB.Query(ctx, `SELECT DISTINCT version FROM `+loans+` WHERE id = ANY ($1::uuid[]) ORDER BY 1`, append(first, second...))
	versions, err := pgx.CollectRows(rows, pgx.RowTo[int])
	if err != nil || !slices.Equal(versions, []int{3}) {
		t.Fatalf("the loans checked in and anonymized are at versions %v (%v), want each one on from its check-in (3)", versions, err)
	}

	// After an interval: a loan returned less than the interval ago keeps
	// its borrower; back-dated past it, it is anonymized.
	history(`{"closingType":{"loan":"interval"},"loan":{"duration":1,"intervalId":"Hours"}}`)
	third := kiosks()
	twoPasses()
	if n := count("status_name = 'Closed' AND user_id IS NOT NULL AND id = ANY ($1::uuid[])", third); n != len(third) {
		t.Fatalf("an hour's interval: %d of the %d loans just returned still name their borrower", n, len(third))
	}
	if _, err := c.DB.Exec(ctx, `UPDATE `+loans+` SET jsonb = jsonb_set(jsonb, '{returnDate}', to_jsonb(to_char(now() AT TIME ZONE 'UTC' - interval '2 hours', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')))
		WHERE id = ANY ($1::uuid[])`, third[:5]); err != nil {
		t.Fatal(err)
	}
	twoPasses()
	if n := count("status_name = 'Closed' AND user_id IS NULL AND id = ANY ($1::uuid[])", third); n != 5 {
		t.Fatalf("an hour's interval: %d of the loans returned two hours ago anonymized, want the 5", n)
	}
	summary(t, 3*len(first), 3*len(first), 0, 0, fmt.Sprintf("anonymized=%d", count("user_id IS NULL")))
}
