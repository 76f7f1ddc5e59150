package lending

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/checkoutlock/circulation-storage/internal/dbtest"
	"github.com/checkoutlock/circulation-storage/internal/postgres"
	"github.com/checkoutlock/circulation-storage/internal/sample"
	"github.com/checkoutlock/schemas"
	"github.com/checkoutlock/schemas/loanhistory"
	"github.com/google/uuid"

	storage "github.com/checkoutlock/circulation-storage"
)

// TestClosedLoansAreAnonymizedAsTheSettingsSay: a tenant's closed loans
// forget their borrower (userId gone, the row's user_id NULL, one version
// on) as its loan history settings say: never, immediately, or once they
// were returned at least the interval ago; an open loan never, however
// asked; asked by id (FOLIO's anonymize-storage-loans), the closed ones
// among them, each once.
func TestClosedLoansAreAnonymizedAsTheSettingsSay(t *testing.T) {
	t.Parallel()
	f := dbtest.SetupLibrary(t, sample.LoadData)
	ctx := context.Background()
	lib := newLibrary(f.DB, testPolicy)
	user := sample.ID("1001")
	loan := func(item, status string, returned time.Duration) string {
		t.Helper()
		return aLoanOf(t, lib, f.Tenant, user, item, status, returned)
	}
	old, recent := loan("book-001", "Closed", 48*time.Hour), loan("book-002", "Closed", time.Hour)
	open := loan("book-003", "Open", 0)
	// A loan stored closed without a return date counts from when it was
	// last written: two days ago.
	undated := uuid.NewString()
	if _, err := lib.Create(ctx, f.Tenant, storage.Loans, undated, json.RawMessage(fmt.Sprintf(
		`{"userId":%q,"itemId":%q,"loanDate":"2026-01-01T10:00:00.000Z","action":"checkedin","status":{"name":"Closed"}}`,
		user, sample.ID("book-005")))); err != nil {
		t.Fatal(err)
	}
	f.Exec(t, `UPDATE `+dbtest.View(f.Tenant, "loan")+` SET jsonb = jsonb_set(jsonb, '{metadata,updatedDate}',
		to_jsonb(to_char(now() AT TIME ZONE 'UTC' - interval '2 days', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'))) WHERE id = $1`, undated)
	named := func(id string) bool {
		t.Helper()
		return f.Count(t, "loan", "id = $1 AND user_id IS NOT NULL AND jsonb ? 'userId'", id) == 1
	}
	a := NewAnonymizer(f.DB)
	history := loanHistory(t, f.DB, f.Tenant)
	due := func(value string) []string {
		t.Helper()
		ids, err := a.Due(ctx, f.Tenant, history(value), 100)
		if err != nil {
			t.Fatal(err)
		}
		slices.Sort(ids)
		return ids
	}
	if got := due(`{"closingType":{"loan":"never"}}`); len(got) != 0 {
		t.Fatalf("never: %v anonymized", got)
	}
	// The sample's Hana brought a book back twelve days ago.
	hanas := sample.ID("loan-" + sample.HanasBooks[1])
	if got := due(`{"closingType":{"loan":"interval"},"loan":{"duration":1,"intervalId":"Days"}}`); !slices.Equal(got, sorted(old, undated, hanas)) {
		t.Fatalf("a day after their return: %v anonymized, want the loan returned two days ago, %s, the one written then, %s, and Hana's, %s",
			got, old, undated, hanas)
	}
	if named(old) || !named(recent) || !named(open) {
		t.Fatalf("after a day's interval: the old loan named %v, the recent %v, the open %v", named(old), named(recent), named(open))
	}
	if n := f.Count(t, "loan", "id = $1 AND version = 2 AND NOT jsonb ? 'borrower'", old); n != 1 {
		t.Fatalf("the anonymized loan is not one version on")
	}
	if got := due(`{"closingType":{"loan":"immediately"}}`); !slices.Equal(got, []string{recent}) {
		t.Fatalf("immediately: %v anonymized, want the recent closed loan alone, %s", got, recent)
	}
	missing := uuid.NewString()
	got, err := a.AnonymizeLoans(ctx, f.Tenant, []string{old, recent, open, missing, strings.ToUpper(open)})
	want := storage.Anonymization{Anonymized: []string{}, NotAnonymized: []storage.NotAnonymized{
		{Reason: storage.NotAnonymizedOpen, LoanIDs: []string{open}},
		{Reason: storage.NotAnonymizedBefore, LoanIDs: sorted(old, recent)},
		{Reason: storage.NotAnonymizedNotFound, LoanIDs: []string{missing}},
	}}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("asked by id after: %+v %v, want %+v", got, err, want)
	}
	if !named(open) {
		t.Fatalf("the open loan was anonymized")
	}
	another := loan("book-004", "Closed", time.Minute)
	got, err = a.AnonymizeLoans(ctx, f.Tenant, []string{open, another, another})
	want = storage.Anonymization{Anonymized: []string{another},
		NotAnonymized: []storage.NotAnonymized{{Reason: storage.NotAnonymizedOpen, LoanIDs: []string{open}}}}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("asked by id: %+v %v, want %+v", got, err, want)
	}
	if named(another) || f.Count(t, "loan", "id = $1 AND version = 2", another) != 1 {
		t.Fatalf("the closed loan asked by id is not anonymized one version on")
	}
}

// loanHistory answers a function that stores value as t's loan history
// settings and answers them as a pass reads them (Anonymizer.Settings).
func loanHistory(t *testing.T, db *postgres.DB, tenant storage.Tenant) func(value string) ReadSettings {
	ctx := context.Background()
	id := uuid.NewString()
	lib := newLibrary(db, testPolicy)
	return func(value string) ReadSettings {
		t.Helper()
		doc := json.RawMessage(`{"scope":` + strconv.Quote(loanhistory.Scope) + `,"key":` + strconv.Quote(loanhistory.Key) + `,"value":` + value + `}`)
		if _, err := lib.Get(ctx, tenant, storage.Settings, id); err != nil {
			if _, err := lib.Create(ctx, tenant, storage.Settings, id, doc); err != nil {
				t.Fatal(err)
			}
		} else if err := lib.Update(ctx, tenant, storage.Settings, id, 0, doc); err != nil {
			t.Fatal(err)
		}
		read, err := NewAnonymizer(db).Settings(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return read[tenant]
	}
}

// TestNothingIsDoneBySettingsChangedSinceTheyWereRead: what a pass does by
// a tenant's loan history settings it does only while they are still the
// settings it read. Read as "immediately", then changed to an interval of
// a day before the pass acts: none of the loans closed an hour ago is
// anonymized and none of the lock history entries recorded an hour ago is
// deleted by what was read, though "immediately" would take them all;
// the settings read again, the loans and entries older than a day go,
// the recent ones stay. And read as an interval of a day, then changed to
// "never": nothing at all.
func TestNothingIsDoneBySettingsChangedSinceTheyWereRead(t *testing.T) {
	t.Parallel()
	f := dbtest.SetupLibrary(t, sample.LoadData)
	ctx := context.Background()
	lib := newLibrary(f.DB, testPolicy)
	user := sample.ID("1001")
	closed := func(item string, ago time.Duration) string {
		t.Helper()
		return aLoanOf(t, lib, f.Tenant, user, item, "Closed", ago)
	}
	old, recent := closed("book-001", 48*time.Hour), closed("book-002", time.Hour)
	for _, ago := range []string{"48 hours", "1 hour"} {
		f.Exec(t, `INSERT INTO `+dbtest.View(f.Tenant, "check_out_lock_event")+` (type, user_id, occurred_at) VALUES ('expired', $1, now() - $2::interval)`, user, ago)
	}
	named := func(id string) bool {
		t.Helper()
		return f.Count(t, "loan", "id = $1 AND user_id IS NOT NULL", id) == 1
	}
	entries := func() int {
		t.Helper()
		return f.Count(t, "check_out_lock_event", "user_id = $1", user)
	}
	a := NewAnonymizer(f.DB)
	pass := func(s ReadSettings) ([]string, int64) {
		t.Helper()
		ids, err := a.Due(ctx, f.Tenant, s, 100)
		if err != nil {
			t.Fatal(err)
		}
		n, err := a.ForgetHistory(ctx, f.Tenant, s, 100)
		if err != nil {
			t.Fatal(err)
		}
		return ids, n
	}
	history := loanHistory(t, f.DB, f.Tenant)
	day := `{"closingType":{"loan":"interval"},"loan":{"duration":1,"intervalId":"Days"}}`
	immediately := history(`{"closingType":{"loan":"immediately"}}`)
	history(day)
	if ids, n := pass(immediately); len(ids) != 0 || n != 0 || !named(old) || !named(recent) || entries() != 2 {
		t.Fatalf("by 'immediately', read before the change to a day: %v anonymized, %d entries deleted; the old loan named %v, the recent %v, %d entries left, want nothing done",
			ids, n, named(old), named(recent), entries())
	}
	byDay := history(day)
	if ids, n := pass(byDay); !slices.Contains(ids, old) || slices.Contains(ids, recent) || n != 1 || entries() != 1 {
		t.Fatalf("by a day, read after the change: %v anonymized, %d entries deleted, %d left, want the loan closed two days ago (%s) and the older entry",
			ids, n, entries(), old)
	}
	older := closed("book-003", 72*time.Hour)
	history(`{"closingType":{"loan":"never"}}`)
	if ids, n := pass(byDay); len(ids) != 0 || n != 0 || !named(older) {
		t.Fatalf("by a day, read before the change to never: %v anonymized, %d entries deleted, the loan closed three days ago named %v, want nothing done",
			ids, n, named(older))
	}
}

// aLoanOf stores a loan of the sample's item to user with the status
// given; a closed one was returned the duration returned ago.
func aLoanOf(t *testing.T, lib library, tenant storage.Tenant, user, item, status string, returned time.Duration) string {
	t.Helper()
	id := uuid.NewString()
	doc := fmt.Sprintf(`{"userId":%q,"itemId":%q,"loanDate":"2026-01-01T10:00:00.000Z","action":"checkedin","status":{"name":%q}`,
		user, sample.ID(item), status)
	if status == "Closed" {
		doc += fmt.Sprintf(`,"returnDate":%q`, schemas.FormatTime(time.Now().Add(-returned)))
	}
	if _, err := lib.Create(context.Background(), tenant, storage.Loans, id, json.RawMessage(doc+`}`)); err != nil {
		t.Fatal(err)
	}
	return id
}

// sorted is ids sorted.
func sorted(ids ...string) []string {
	slices.Sort(ids)
	return ids
}
