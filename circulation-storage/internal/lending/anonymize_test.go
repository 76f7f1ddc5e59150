package lending

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/checkoutlock/circulation-storage/internal/dbtest"
	"github.com/checkoutlock/circulation-storage/internal/sample"
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
		id := uuid.NewString()
		doc := fmt.Sprintf(`{"userId":%q,"itemId":%q,"loanDate":"2026-01-01T10:00:00.000Z","action":"checkedin","status":{"name":%q}`,
			user, sample.ID(item), status)
		if status == "Closed" {
			doc += fmt.Sprintf(`,"returnDate":%q`, time.Now().Add(-returned).UTC().Format("2006-01-02T15:04:05.000Z"))
		}
		if _, err := lib.Create(ctx, f.Tenant, storage.Loans, id, json.RawMessage(doc+`}`)); err != nil {
			t.Fatal(err)
		}
		return id
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
	due := func(s loanhistory.Settings) []string {
		t.Helper()
		ids, err := a.Due(ctx, f.Tenant, s, 100)
		if err != nil {
			t.Fatal(err)
		}
		slices.Sort(ids)
		return ids
	}
	if got := due(loanhistory.Settings{Closing: loanhistory.Never}); len(got) != 0 {
		t.Fatalf("never: %v anonymized", got)
	}
	// The sample's Hana brought a book back twelve days ago.
	hanas := sample.ID("loan-" + sample.HanasBooks[1])
	if got := due(loanhistory.Settings{Closing: loanhistory.Interval, After: 24 * time.Hour}); !slices.Equal(got, sorted(old, undated, hanas)) {
		t.Fatalf("a day after their return: %v anonymized, want the loan returned two days ago, %s, the one written then, %s, and Hana's, %s",
			got, old, undated, hanas)
	}
	if named(old) || !named(recent) || !named(open) {
		t.Fatalf("after a day's interval: the old loan named %v, the recent %v, the open %v", named(old), named(recent), named(open))
	}
	if n := f.Count(t, "loan", "id = $1 AND version = 2 AND NOT jsonb ? 'borrower'", old); n != 1 {
		t.Fatalf("the anonymized loan is not one version on")
	}
	if got := due(loanhistory.Settings{Closing: loanhistory.Immediately}); !slices.Equal(got, []string{recent}) {
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

// sorted is ids sorted.
func sorted(ids ...string) []string {
	slices.Sort(ids)
	return ids
}
