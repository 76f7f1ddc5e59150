package integration

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"reflect"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/checkoutlock/integration-tests/harness"
	"github.com/checkoutlock/schemas"
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
	count := func(where string, args ...any) int { return countLoans(t, c, where, args...) }
	// The loan history setting changed to value. A pass under way does
	// nothing more by the setting it read once it is changed, so the
	// entries recorded just after the change are judged by the new one.
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
		closed, _ := lendRounds(t, c, lib, func(int, int) bool { return false })
		return slices.Concat(slices.Collect(maps.Values(closed))...)
	}

	// The lock history keeps a patron no longer than the loans do: two
	// entries, two hours old and new, at each setting.
	events := pgx.Identifier{c.Schema, "check_out_lock_event"}.Sanitize()
	patron := c.IDOf(t, "/users", "users", lib.Patrons[0])
	entries := func() (old, recent int) {
		t.Helper()
		if err := c.DB.QueryRow(ctx, `SELECT count(*) FILTER (WHERE occurred_at < now() - interval '90 minutes'),
			count(*) FILTER (WHERE occurred_at > now() - interval '30 minutes') FROM `+events+` WHERE tenant_id = $1 AND user_id = $2`,
			c.Tenant, patron).Scan(&old, &recent); err != nil {
			t.Fatal(err)
		}
		return old, recent
	}
	record := func() {
		t.Helper()
		if _, err := c.DB.Exec(ctx, `INSERT INTO `+events+` (tenant_id, occurred_at, type, user_id)
			VALUES ($1, now() - interval '2 hours', 'expired', $2), ($1, now(), 'expired', $2)`, c.Tenant, patron); err != nil {
			t.Fatal(err)
		}
	}
	record()

	// Never, FOLIO's default: nothing.
	c.Do(c.Storage, "POST", "/settings/entries", `{"scope":"mod-circulation","key":"loan_history","value":{"closingType":{"loan":"sometimes"}}}`).
		Want(t, http.StatusUnprocessableEntity)
	history(`{"closingType":{"loan":"never"}}`)
	first := kiosks()
	twoPasses()
	if n := count("status_name = 'Closed' AND user_id IS NULL"); n != 0 || len(first) != 36 {
		t.Fatalf("never: %d of %d loans anonymized", n, len(first))
	}
	if old, recent := entries(); old != 1 || recent != 1 {
		t.Fatalf("never: the lock history keeps %d old and %d recent entries of the patron, want both", old, recent)
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
	if old, recent := entries(); old != 0 || recent != 0 {
		t.Fatalf("immediately: the lock history keeps %d old and %d recent entries of the patron, want none", old, recent)
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
	record()
	third := kiosks()
	twoPasses()
	if old, recent := entries(); old != 0 || recent != 1 {
		t.Fatalf("an hour's interval: the lock history keeps %d old and %d recent entries of the patron, want the recent one", old, recent)
	}
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

// TestAPatronsClosedLoansAreAnonymizedOnRequest: a librarian asks that a
// patron's closed loans forget them (FOLIO's POST
// /loan-anonymization/by-user/{userId}) again and again while kiosks check
// the patron's items out and in over two circulation instances: each
// closed loan is anonymized once, by one call that says so (one version on
// from its check-in), no open loan ever, no other patron's loan; the
// anonymization's event carries no borrower. Only the librarian may ask;
// storage's own route (anonymize-storage-loans) says why it left a loan.
func TestAPatronsClosedLoansAreAnonymizedOnRequest(t *testing.T) {
	t.Parallel()
	// Storage's pages hold fewer loans than circulation first asks for
	// (64 KiB).
	c := harness.NewCluster(t, harness.Options{Circulations: 2, FeatureOn: true, StorageEnv: []string{"MAX_PAGE_BYTES=65536"}, CirculationEnv: heldEnv})
	lib := c.SetupLibrary(2, 4, 0)
	ctx := context.Background()
	loans := pgx.Identifier{c.Schema, "loan"}.Sanitize()
	patron, other := c.IDOf(t, "/users", "users", lib.Patrons[0]), c.IDOf(t, "/users", "users", lib.Patrons[1])
	path := "/loan-anonymization/by-user/" + patron
	librarian := map[string]string{schemas.HeaderTenant: c.Tenant, schemas.HeaderToken: c.Token(schemas.RoleLibrarian)}
	for _, role := range []string{schemas.RoleSelfCheck, schemas.RoleOperator} {
		c.DoWith(c.Circulations[0], "POST", path, nil, map[string]string{schemas.HeaderTenant: c.Tenant, schemas.HeaderToken: c.Token(role)}).
			Want(t, http.StatusForbidden)
	}
	wantCode(t, c.DoWith(c.Circulations[0], "POST", "/loan-anonymization/by-user/not-a-patron", nil, librarian), http.StatusBadRequest, schemas.CodeInvalidID)

	type answer struct {
		Anonymized []string         `json:"anonymizedLoans"`
		Errors     []map[string]any `json:"errors"`
	}
	anonymize := func(i int) answer {
		t.Helper()
		var a answer
		c.DoWith(c.Circulations[i%2], "POST", path, nil, librarian).Want(t, http.StatusOK).Decode(t, &a)
		if len(a.Errors) != 0 {
			t.Errorf("errors answered: %v", a.Errors)
		}
		return a
	}
	if a := anonymize(0); len(a.Anonymized) != 0 {
		t.Fatalf("a patron without loans: %v anonymized", a.Anonymized)
	}

	// The kiosks lend each patron's items and take them back, three
	// rounds; the patron's last round leaves its first item out.
	var closed map[string][]string
	var open []string
	done := make(chan struct{})
	go func() {
		defer close(done)
		closed, open = lendRounds(t, c, lib, func(round, i int) bool { return round == 2 && i == 0 })
	}()
	var mu sync.Mutex
	// Two librarians ask at once, again and again, until the kiosks are
	// done, and once more after.
	said := map[string]int{}
	calls := 0
	var asking sync.WaitGroup
	for librarian := range 2 {
		asking.Add(1)
		go func() {
			defer asking.Done()
			for stop := false; !stop; {
				select {
				case <-done:
					stop = true
				default:
				}
				a := anonymize(librarian)
				mu.Lock()
				calls++
				for _, id := range a.Anonymized {
					said[id]++
				}
				mu.Unlock()
			}
		}()
	}
	asking.Wait()
	for id, n := range said {
		if n != 1 {
			t.Errorf("loan %s said anonymized by %d calls", id, n)
		}
	}
	mine := closed[lib.Patrons[0]]
	if len(said) != len(mine) {
		t.Errorf("%d loans said anonymized, the patron closed %d", len(said), len(mine))
	}
	for _, id := range mine {
		if said[id] != 1 {
			t.Errorf("closed loan %s not said anonymized", id)
		}
	}
	count := func(where string, args ...any) int { return countLoans(t, c, where, args...) }
	if n := count("id = ANY ($1::uuid[]) AND user_id IS NULL AND NOT jsonb ? 'userId' AND version = 3", mine); n != len(mine) {
		t.Errorf("%d of the patron's %d closed loans anonymized one version on from their check-in", n, len(mine))
	}
	if n := count("id = ANY ($1::uuid[]) AND user_id IS NOT NULL", open); n != len(open) || len(open) != 2 {
		t.Errorf("%d of the %d open loans name their borrower", n, len(open))
	}
	if n := count("user_id = $1 AND status_name = 'Closed'", other); n != len(closed[lib.Patrons[1]]) || n != 11 {
		t.Errorf("the other patron's closed loans: %d name them, want their %d", n, len(closed[lib.Patrons[1]]))
	}
	var events, named int
	if err := c.DB.QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE data -> 'old' ? 'userId' OR data -> 'old' ? 'borrower')
		  FROM `+pgx.Identifier{c.Schema, "outbox"}.Sanitize()+`
		 WHERE tenant_id = $1 AND kind = 'loan' AND type = 'UPDATED' AND data -> 'new' ->> 'id' = ANY ($2::text[])
		   AND NOT data -> 'new' ? 'userId'`, c.Tenant, mine).Scan(&events, &named); err != nil {
		t.Fatal(err)
	}
	if events != len(mine) || named != 0 {
		t.Errorf("anonymization events: %d for %d loans, %d naming the borrower", events, len(mine), named)
	}

	// Storage's route, asked by id: the open one, one anonymized, one not
	// there, one closed and named (the other patron's).
	theirs := closed[lib.Patrons[1]][0]
	missing := "3f0a6d2c-0b8e-4c1b-9d51-5b0f5c0e2a11"
	var got map[string]any
	c.Do(c.Storage, "POST", "/anonymize-storage-loans", map[string]any{"loanIds": []string{open[0], mine[0], missing, theirs}}).
		Want(t, http.StatusOK).Decode(t, &got)
	want := map[string]any{"anonymizedLoans": []any{theirs}, "notAnonymizedLoans": []any{
		map[string]any{"reason": "loanIsOpen", "loanIds": []any{open[0]}},
		map[string]any{"reason": "alreadyAnonymized", "loanIds": []any{mine[0]}},
		map[string]any{"reason": "loanNotFound", "loanIds": []any{missing}},
	}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("anonymize-storage-loans answered %v, want %v", got, want)
	}
	wantCode(t, c.Do(c.Storage, "POST", "/anonymize-storage-loans", `{"loanIds":"`+open[0]+`"}`), http.StatusUnprocessableEntity, schemas.CodeValidation)
	if n := count("id = ANY ($1::uuid[]) AND user_id IS NOT NULL", open); n != 2 {
		t.Errorf("after storage was asked: %d of the 2 open loans name their borrower", n)
	}

	// Two librarians' calls meet on the same closed loans: the test holds
	// the loans' row locks until both calls' statements wait for them at
	// storage, then lets go. Each loan is anonymized by one of the calls,
	// one version on from its check-in; the other call finds it done.
	var again []string
	for _, item := range lib.Items[0][1:] {
		var loan struct{ ID string }
		c.CheckOut(0, item, lib.Patrons[0]).Want(t, http.StatusCreated).Decode(t, &loan)
		c.CheckIn(1, item).Want(t, http.StatusOK)
		again = append(again, loan.ID)
	}
	var met [2]answer
	heldWhile(t, c, len(met), `SELECT FROM `+loans+` WHERE id = ANY ($1::uuid[]) FOR UPDATE`, []any{again}, func() {
		var meeting sync.WaitGroup
		for i := range met {
			meeting.Go(func() { met[i] = anonymize(i) })
		}
		meeting.Wait()
	})
	once := append(slices.Clone(met[0].Anonymized), met[1].Anonymized...)
	slices.Sort(once)
	slices.Sort(again)
	if !slices.Equal(once, again) {
		t.Errorf("two calls met on the loans %v: they said %v and %v anonymized", again, met[0].Anonymized, met[1].Anonymized)
	}
	if n := count("id = ANY ($1::uuid[]) AND user_id IS NULL AND version = 3", again); n != len(again) {
		t.Errorf("%d of the %d loans the calls met on anonymized one version on from their check-in", n, len(again))
	}

	// A patron with more closed loans than one call anonymizes (2,000):
	// 2,100 of them, loaded as an import would. The first call
	// anonymizes 2,000 and says more remain; the second the rest, each
	// once.
	if _, err := c.DB.Exec(ctx, `INSERT INTO `+loans+` (tenant_id, id, jsonb)
		SELECT l.tenant_id, x.id, jsonb_set(jsonb_set(l.jsonb, '{id}', to_jsonb(x.id::text)), '{userId}', to_jsonb($2::text))
		  FROM `+loans+` l, LATERAL (SELECT gen_random_uuid() AS id FROM generate_series(1, 2100)) x
		 WHERE l.tenant_id = $3 AND l.id = $1`, closed[lib.Patrons[1]][1], patron, c.Tenant); err != nil {
		t.Fatal(err)
	}
	var first, second answer
	c.DoWith(c.Circulations[0], "POST", path, nil, librarian).Want(t, http.StatusOK).Decode(t, &first)
	if len(first.Anonymized) != 2000 || len(first.Errors) != 1 || first.Errors[0]["code"] != schemas.CodeAnonymizationIncomplete {
		t.Errorf("2,100 closed loans, the first call: %d anonymized, errors %v", len(first.Anonymized), first.Errors)
	}
	c.DoWith(c.Circulations[1], "POST", path, nil, librarian).Want(t, http.StatusOK).Decode(t, &second)
	if len(second.Anonymized) != 100 || len(second.Errors) != 0 {
		t.Errorf("the second call: %d anonymized, errors %v", len(second.Anonymized), second.Errors)
	}
	both := append(slices.Clone(first.Anonymized), second.Anonymized...)
	slices.Sort(both)
	if len(slices.Compact(both)) != 2100 || count("user_id = $1", patron) != 1 {
		t.Errorf("the two calls anonymized %d loans once, the patron still named by %d", len(slices.Compact(both)), count("user_id = $1", patron))
	}
	summary(t, calls+4, calls+4, 0, 0, fmt.Sprintf("anonymized=%d closed=%d, %d by two calls held to meet, then 2100 in two calls", len(said), len(mine), len(again)))
}

// wantCode fails t unless r answered status with the one error code.
func wantCode(t *testing.T, r harness.Response, status int, code string) {
	t.Helper()
	r.Want(t, status)
	if got := r.ErrorCodes(); !slices.Equal(got, []string{code}) {
		t.Errorf("answered the codes %v, want %s", got, code)
	}
}

// lendRounds has kiosks check each patron's items out and in, three
// rounds, every patron at once, over the cluster's circulation instances
// in turn; a loan keep names (by round and item) stays open. It answers
// the loans checked in, by patron barcode, and those left open.
func lendRounds(t *testing.T, c *harness.Cluster, lib harness.Library, keep func(round, item int) bool) (closed map[string][]string, open []string) {
	t.Helper()
	var mu sync.Mutex
	closed = map[string][]string{}
	var wg sync.WaitGroup
	for p, barcode := range lib.Patrons {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for round := range 3 {
				for i, item := range lib.Items[p] {
					var loan struct{ ID string }
					c.CheckOut(p+round, item, barcode).Want(t, http.StatusCreated).Decode(t, &loan)
					if keep(round, i) {
						mu.Lock()
						open = append(open, loan.ID)
						mu.Unlock()
						continue
					}
					c.CheckIn(p+round+1, item).Want(t, http.StatusOK)
					mu.Lock()
					closed[barcode] = append(closed[barcode], loan.ID)
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	return closed, open
}

// countLoans is how many of the cluster's loans where (SQL on its loan
// table) holds of.
func countLoans(t *testing.T, c *harness.Cluster, where string, args ...any) int {
	t.Helper()
	var n int
	if err := c.DB.QueryRow(context.Background(), `SELECT count(*) FROM `+pgx.Identifier{c.Schema, "loan"}.Sanitize()+` WHERE `+where, args...).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}
