package lending

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"

	"github.com/checkoutlock/circulation-storage/internal/dbtest"
	"github.com/checkoutlock/circulation-storage/internal/postgres"
	"github.com/checkoutlock/circulation-storage/internal/sample"
	"github.com/checkoutlock/schemas"
	"github.com/checkoutlock/schemas/errs"
	"github.com/google/uuid"

	storage "github.com/checkoutlock/circulation-storage"
)

// writeIDs are the rows of the tenant's write log with id, and how many
// of them carry an answer.
func writeIDs(t *testing.T, f dbtest.Fixture, id string) (rows, answered int) {
	t.Helper()
	if err := f.DB.Pool.QueryRow(context.Background(), `SELECT count(*), count(answer) FROM `+postgres.Table(postgres.TableWriteLog)+
		` WHERE tenant_id = $1 AND id = $2`, string(f.Tenant), id).Scan(&rows, &answered); err != nil {
		t.Fatal(err)
	}
	return rows, answered
}

// replayOf is the answer of a write answered from its id; it fails the
// test for any other outcome.
func replayOf(t *testing.T, what string, err error) json.RawMessage {
	t.Helper()
	var replayed *storage.Replayed
	if !errors.As(err, &replayed) {
		t.Fatalf("%s sent again with its id: %v, want it answered from its id", what, err)
	}
	return replayed.Answer
}

// TestAWriteSentAgainWithItsIDIsTheSameWrite: each kind of write, sent a
// second time with its id, is answered the first one's answer and writes
// nothing; the id keeps that answer in its row. Sent with the id of a
// write of another kind, or with another request's digest, it is refused
// and writes nothing.
func TestAWriteSentAgainWithItsIDIsTheSameWrite(t *testing.T) {
	t.Parallel()
	f := dbtest.SetupLibrary(t, sample.LoadData)
	lib := newLibrary(f.DB, testPolicy)
	renewingPolicy(t, f, lib, 0)
	alice, item := sample.ID("1001"), sample.ID("book-053")
	checkOut := storage.Write{ID: uuid.NewString(), Digest: "a"}
	ctx := storage.WithWrite(context.Background(), checkOut)
	loanID := uuid.NewString()
	write := storage.CheckOutWrite{LoanID: loanID, UserID: alice, Loan: loanDoc(alice, item), ItemVersion: 1}
	first, err := lib.CreateCheckOutLoan(ctx, f.Tenant, write)
	if err != nil {
		t.Fatal(err)
	}
	// Sent again at once, as after a lost answer: the item is lent now,
	// at another version, and the loan stored; the id answers first.
	again := replayOf(t, "the check-out", errOf(lib.CreateCheckOutLoan(ctx, f.Tenant, write)))
	if string(again) != string(first.Loan) {
		t.Errorf("the check-out sent again answered\n%s\nwant the first answer\n%s", again, first.Loan)
	}
	if n := f.Count(t, "loan", "item_id = $1", item); n != 1 {
		t.Errorf("%d loans of the item, want 1", n)
	}
	if rows, answered := writeIDs(t, f, checkOut.ID); rows != 1 || answered != 1 {
		t.Errorf("the check-out's id: %d rows, %d answered; want 1, 1", rows, answered)
	}

	// The same id for another request (another digest), or for a write of
	// another kind: refused, nothing written.
	other := storage.WithWrite(context.Background(), storage.Write{ID: checkOut.ID, Digest: "b"})
	if _, err := lib.CreateCheckOutLoan(other, f.Tenant, storage.CheckOutWrite{LoanID: uuid.NewString(), UserID: alice,
		Loan: loanDoc(alice, sample.ID("book-054")), ItemVersion: 1}); !errs.IsCode(err, schemas.CodeIdempotencyKeyReused) {
		t.Errorf("the id with another digest: %v, want %s", err, schemas.CodeIdempotencyKeyReused)
	}
	renewed := json.RawMessage(fmt.Sprintf(`{"userId":%q,"itemId":%q,"loanDate":"2026-01-01T10:00:00.000Z","status":{"name":"Open"},"action":"renewed","renewalCount":1,"dueDate":"2026-03-01T10:00:00.000Z"}`,
		alice, item))
	if _, err := lib.RenewLoan(ctx, f.Tenant, storage.RenewalWrite{LoanID: loanID, Loan: renewed, LoanVersion: 1}); !errs.IsCode(err, schemas.CodeIdempotencyKeyReused) {
		t.Errorf("the check-out's id on a renewal: %v, want %s", err, schemas.CodeIdempotencyKeyReused)
	}
	if n := f.Count(t, "loan", "user_id = $1", alice); n != 1 {
		t.Errorf("%d loans of the patron, want 1", n)
	}

	// A renewal, a loan action and a check-in, each sent twice with its
	// own id: written once, the second answered the first's answer.
	renewal := storage.WithWrite(context.Background(), storage.Write{ID: uuid.NewString()})
	w := storage.RenewalWrite{LoanID: loanID, Loan: renewed, LoanVersion: 1}
	firstRenewal, err := lib.RenewLoan(renewal, f.Tenant, w)
	if err != nil {
		t.Fatal(err)
	}
	if again := replayOf(t, "the renewal", errOf(lib.RenewLoan(renewal, f.Tenant, w))); string(again) != string(firstRenewal) {
		t.Errorf("the renewal sent again answered\n%s\nwant\n%s", again, firstRenewal)
	}
	claimed := json.RawMessage(fmt.Sprintf(`{"userId":%q,"itemId":%q,"loanDate":"2026-01-01T10:00:00.000Z","status":{"name":"Open"},"action":"claimedReturned","claimedReturnedDate":"2026-01-02T10:00:00.000Z","renewalCount":1,"dueDate":"2026-03-01T10:00:00.000Z"}`,
		alice, item))
	claim := storage.WithWrite(context.Background(), storage.Write{ID: uuid.NewString()})
	action := storage.LoanActionWrite{LoanID: loanID, Loan: claimed, ItemVersion: 2, LoanVersion: 2}
	if err := lib.ActOnLoan(claim, f.Tenant, action); err != nil {
		t.Fatal(err)
	}
	if again := replayOf(t, "the claim", lib.ActOnLoan(claim, f.Tenant, action)); len(again) != 0 && string(again) != "null" {
		t.Errorf("the claim sent again answered %s, want no body", again)
	}
	closed := json.RawMessage(fmt.Sprintf(`{"id":%q,"userId":%q,"itemId":%q,"loanDate":"2026-01-01T10:00:00.000Z","status":{"name":"Closed"},"action":"checkedin","returnDate":"2026-01-03T10:00:00.000Z","checkinServicePointId":%q}`,
		loanID, alice, item, sample.ServicePointDesk1))
	checkIn := storage.WithWrite(context.Background(), storage.Write{ID: uuid.NewString()})
	in := storage.CheckInWrite{LoanID: loanID, Loan: closed, ItemVersion: 3, LoanVersion: 3}
	firstIn, err := lib.CheckInLoan(checkIn, f.Tenant, in)
	if err != nil {
		t.Fatal(err)
	}
	var answer storage.CheckInWritten
	var returned struct {
		Version int `json:"_version"`
	}
	err = json.Unmarshal(replayOf(t, "the check-in", errOf(lib.CheckInLoan(checkIn, f.Tenant, in))), &answer)
	if err == nil {
		err = json.Unmarshal(answer.Item, &returned)
	}
	if err != nil || string(answer.Loan) != string(firstIn.Loan) || returned.Version != 4 {
		t.Errorf("the check-in sent again answered loan %s, item %s (%v); want the first's loan %s and the item at version 4",
			answer.Loan, answer.Item, err, firstIn.Loan)
	}
	if v := f.Count(t, "loan", "id = $1 AND version = 4", loanID); v != 1 {
		t.Errorf("the loan is not at version 4 (check-out, renewal, claim, check-in, each once)")
	}
}

// TestAWriteThatWritesNothingTakesItsIDAway: a write refused (the item
// changed since it was read) leaves no row of its id: the same id, sent
// with the write made right, writes.
func TestAWriteThatWritesNothingTakesItsIDAway(t *testing.T) {
	t.Parallel()
	f := dbtest.SetupLibrary(t, sample.LoadData)
	lib := newLibrary(f.DB, testPolicy)
	alice, item := sample.ID("1001"), sample.ID("book-055")
	id := storage.Write{ID: uuid.NewString()}
	ctx := storage.WithWrite(context.Background(), id)
	write := storage.CheckOutWrite{LoanID: uuid.NewString(), UserID: alice, Loan: loanDoc(alice, item), ItemVersion: 7}
	if _, err := lib.CreateCheckOutLoan(ctx, f.Tenant, write); !errs.IsCode(err, schemas.CodeVersionConflict) {
		t.Fatalf("a check-out at a version the item never had: %v, want %s", err, schemas.CodeVersionConflict)
	}
	if rows, _ := writeIDs(t, f, id.ID); rows != 0 {
		t.Fatalf("%d rows of the refused write's id, want none", rows)
	}
	write.ItemVersion = 1
	if _, err := lib.CreateCheckOutLoan(ctx, f.Tenant, write); err != nil {
		t.Fatalf("the same id, the write made right: %v", err)
	}
	if rows, answered := writeIDs(t, f, id.ID); rows != 1 || answered != 1 {
		t.Errorf("the id after the write: %d rows, %d answered; want 1, 1", rows, answered)
	}
}

// TestTheSameWriteSentAtOnceIsWrittenOnce: one check-out, its id the
// same, sent twenty times at once: one loan; every send answered with it,
// the first as written, the others from the id (or refused before they
// meet the id, never written twice).
func TestTheSameWriteSentAtOnceIsWrittenOnce(t *testing.T) {
	t.Parallel()
	f := dbtest.SetupLibrary(t, sample.LoadData)
	lib := newLibrary(f.DB, testPolicy)
	alice, item := sample.ID("1001"), sample.ID("book-056")
	ctx := storage.WithWrite(context.Background(), storage.Write{ID: uuid.NewString()})
	write := storage.CheckOutWrite{LoanID: uuid.NewString(), UserID: alice, Loan: loanDoc(alice, item), ItemVersion: 1}
	loans := make([]json.RawMessage, 20)
	sendErrs := atOnce(20, func(i int) error {
		written, err := lib.CreateCheckOutLoan(ctx, f.Tenant, write)
		var replayed *storage.Replayed
		switch {
		case err == nil:
			loans[i] = written.Loan
			return nil
		case errors.As(err, &replayed):
			loans[i] = replayed.Answer
			return nil
		}
		return err
	})
	for i, err := range sendErrs {
		if err != nil {
			t.Fatalf("send %d: %v", i, err)
		}
		if string(loans[i]) != string(loans[0]) {
			t.Errorf("send %d answered\n%s\nwant\n%s", i, loans[i], loans[0])
		}
	}
	if n := f.Count(t, "loan", "item_id = $1", item); n != 1 {
		t.Errorf("%d loans, want 1", n)
	}
}
