package integration

import (
	"context"
	"encoding/json"
	"maps"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/checkoutlock/integration-tests/harness"
	"github.com/checkoutlock/schemas"
)

// TestChangeDueDateAsFOLIOChangesIt: a librarian changes an open loan's
// due date as FOLIO's Users app does (POST
// /circulation/loans/{id}/change-due-date, mod-circulation's
// ChangeDueDateAPITests): refused, nothing changed, without a due date,
// with one that is not a date, for a loan that does not exist, to a
// self-check machine, for a closed loan and for an item claimed returned
// or declared lost, each in FOLIO's words; done (204) with a date in
// another offset, sent twice with its Idempotency-Key and written once:
// the loan due then, its action dueDateChanged, its notice before the due
// date scheduled again from the new date (the first Obsolete), and the
// patron told of the change once (the policy's Manual due date change
// notice). Then as FOLIO's Users app changes a due date (PUT
// /circulation/loans/{id}, the loan sent back as read): a body read before
// the change, naming another action, a closed status or another borrower,
// or without a due date, refused, nothing changed; the due date changed,
// nothing else of the body stored, the patron told again; a change to the
// date the loan has, nothing written and nobody told; the first change sent
// again with its key after the second, answered done, the second's date
// kept.
func TestChangeDueDateAsFOLIOChangesIt(t *testing.T) {
	t.Parallel()
	mail, c := noticeCluster(t, 1)
	lib := c.SetupLibrary(1, 4, 0)
	patron, books := lib.Patrons[0], lib.Items[0]
	giveEmail(t, c, patron)
	told := noticeTemplate(t, c, "Due date changed", "Due date changed: {{item.barcode}}", "Now due {{loan.dueDate}}.")
	useNoticePolicy(t, c, lib.PolicyID, []map[string]any{dueSoon(t, c),
		noticeOn(told, schemas.NoticeManualDueDateChange, schemas.NoticeUponAt, nil)}, nil)
	librarian := c.HeadersWith(schemas.HeaderToken, c.Token(schemas.RoleLibrarian))
	change := func(loanID string, body any, headers map[string]string) harness.Response {
		return c.DoWith(c.Circulations[0], "POST", "/circulation/loans/"+loanID+"/change-due-date", body, headers)
	}
	// refused holds r to FOLIO's one error: status, message and parameter.
	refused := func(what string, r harness.Response, status int, code, message, key, value string) {
		t.Helper()
		var env struct {
			Errors []struct {
				Message, Code string
				Parameters    []struct{ Key, Value string }
			}
		}
		r.Want(t, status).Decode(t, &env)
		if len(env.Errors) != 1 || env.Errors[0].Code != code || message != "" && env.Errors[0].Message != message ||
			len(env.Errors[0].Parameters) == 0 || env.Errors[0].Parameters[0].Key != key || env.Errors[0].Parameters[0].Value != value {
			t.Errorf("%s: %s, want %d %s %q naming %s %q", what, r.Body, status, code, message, key, value)
		}
	}
	loans := make([]struct{ ID, DueDate string }, len(books))
	for i, b := range books {
		c.CheckOut(i, b, patron).Want(t, http.StatusCreated).Decode(t, &loans[i])
	}
	loan := loans[0]
	waitFor(t, "the loan's notice before its due date scheduled", func() bool {
		n := noticesOf(t, c, "loanId="+loan.ID+"&status=Scheduled")
		return len(n) == 1 && n[0].BasisDate == loan.DueDate
	})
	first := noticesOf(t, c, "loanId="+loan.ID+"&status=Scheduled")[0]

	refused("no due date", change(loan.ID, map[string]any{}, librarian), http.StatusUnprocessableEntity, schemas.CodeValidation,
		"A new due date is required in order to change the due date", "dueDate", "")
	refused("not a date", change(loan.ID, map[string]any{"dueDate": "next week"}, librarian), http.StatusUnprocessableEntity,
		schemas.CodeValidation, "", "dueDate", "next week")
	missing := uuid.NewString()
	refused("no such loan", change(missing, map[string]any{"dueDate": loan.DueDate}, librarian), http.StatusNotFound,
		schemas.CodeNotFound, "", "id", missing)
	change(loan.ID, map[string]any{"dueDate": loan.DueDate}, c.HeadersWith(schemas.HeaderToken, c.Token(schemas.RoleSelfCheck))).
		Want(t, http.StatusForbidden)
	if got := storedDoc(t, c, "loan", loan.ID); got["_version"] != float64(1) || got["dueDate"] != loan.DueDate {
		t.Fatalf("after the refusals: %v, want the loan as checked out", got)
	}

	was, err := schemas.ParseDateTime(loan.DueDate)
	if err != nil {
		t.Fatal(err)
	}
	due := was.AddDate(0, 0, 7)
	key := c.HeadersWith(schemas.HeaderToken, c.Token(schemas.RoleLibrarian), schemas.HeaderIdempotencyKey, uuid.NewString())
	body := map[string]any{"dueDate": due.In(time.FixedZone("", 3600)).Format("2006-01-02T15:04:05.000-07:00"), "loanId": loan.ID}
	change(loan.ID, body, key).Want(t, http.StatusNoContent)
	change(loan.ID, body, key).Want(t, http.StatusNoContent)
	got := storedDoc(t, c, "loan", loan.ID)
	if got["_version"] != float64(2) || got["dueDate"] != schemas.FormatTime(due) || got["action"] != schemas.LoanDueDateChanged {
		t.Fatalf("the changed loan: %v, want version 2 due %s, action %s", got, schemas.FormatTime(due), schemas.LoanDueDateChanged)
	}
	waitFor(t, "the notice before the due date scheduled again from the new one", func() bool {
		n := noticesOf(t, c, "loanId="+loan.ID+"&status=Scheduled")
		return len(n) == 1 && n[0].BasisDate == schemas.FormatTime(due)
	})
	if n := noticesOf(t, c, "loanId="+loan.ID+"&status=Obsolete"); len(n) != 1 || n[0].ID != first.ID {
		t.Errorf("obsolete: %+v, want the first notice before the due date", n)
	}
	mails := mail.WaitMessages(1, 30*time.Second)
	m, err := mail.Message(context.Background(), mails[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	if m.Subject != "Due date changed: "+books[0] || strings.TrimSpace(m.Text) != "Now due "+due.UTC().Format("2006-01-02 15:04 MST")+"." {
		t.Errorf("the change's mail: %q, %q", m.Subject, m.Text)
	}
	waitFor(t, "the change's notice settled after its mail", func() bool {
		sent := noticesOf(t, c, "loanId="+loan.ID+"&status=Sent")
		return len(sent) == 1 && sent[0].TriggeringEvent == schemas.NoticeManualDueDateChange
	})

	// As FOLIO's Users app changes a due date: the loan as read, summaries
	// and all, sent back with its due date changed and action
	// dueDateChanged. A body read before the last change, one naming
	// another action, a closed status or another borrower, or one without
	// a due date: refused, nothing changed.
	var read map[string]any
	c.DoWith(c.Circulations[0], "GET", "/circulation/loans/"+loan.ID, nil, librarian).Want(t, http.StatusOK).Decode(t, &read)
	later := due.AddDate(0, 0, 7).Truncate(time.Second) // the app's dates are to the second
	put := func(changes map[string]any) harness.Response {
		body := maps.Clone(read)
		body["dueDate"], body["action"], body["actionComment"] = later.Format("2006-01-02T15:04:05Z07:00"), schemas.LoanDueDateChanged, ""
		for k, v := range changes {
			body[k] = v
			if v == nil {
				delete(body, k)
			}
		}
		return c.DoWith(c.Circulations[0], "PUT", "/circulation/loans/"+loan.ID, body, librarian)
	}
	other := uuid.NewString()
	refused("a loan read before the change", put(map[string]any{"_version": 1}), http.StatusConflict, schemas.CodeLoanChanged, "", "_version", "2")
	refused("another action", put(map[string]any{"action": "checkedin"}), http.StatusUnprocessableEntity, schemas.CodeValidation, "", "action", "checkedin")
	refused("closed", put(map[string]any{"status": map[string]any{"name": "Closed"}}), http.StatusUnprocessableEntity, schemas.CodeValidation, "",
		"status", "Closed")
	refused("another borrower", put(map[string]any{"userId": other}), http.StatusUnprocessableEntity, schemas.CodeValidation, "", "userId", other)
	refused("no due date", put(map[string]any{"dueDate": nil}), http.StatusUnprocessableEntity, schemas.CodeValidation,
		"A new due date is required in order to change the due date", "dueDate", "")
	if got := storedDoc(t, c, "loan", loan.ID); got["_version"] != float64(2) || got["dueDate"] != schemas.FormatTime(due) {
		t.Fatalf("after the refused replacements: %v, want the loan as changed", got)
	}
	put(nil).Want(t, http.StatusNoContent)
	if got := storedDoc(t, c, "loan", loan.ID); got["_version"] != float64(3) || got["dueDate"] != schemas.FormatTime(later) ||
		got["action"] != schemas.LoanDueDateChanged || got["item"] != nil || got["borrower"] != nil {
		t.Fatalf("the loan replaced: %v, want version 3 due %s, no summaries stored", got, schemas.FormatTime(later))
	}
	waitFor(t, "the second change told", func() bool {
		return len(noticesOf(t, c, "loanId="+loan.ID+"&status=Sent")) == 2
	})
	// The date it has already: done, nothing written, nobody told.
	change(loan.ID, map[string]any{"dueDate": schemas.FormatTime(later)}, librarian).Want(t, http.StatusNoContent)
	if got := storedDoc(t, c, "loan", loan.ID); got["_version"] != float64(3) {
		t.Errorf("a change to the date the loan has: %v, want it unwritten", got)
	}
	// The first change sent again with its key, late: the same write,
	// answered done; it does not put back the date it changed to.
	change(loan.ID, body, key).Want(t, http.StatusNoContent)
	if got := storedDoc(t, c, "loan", loan.ID); got["_version"] != float64(3) || got["dueDate"] != schemas.FormatTime(later) {
		t.Errorf("the first change sent again after the second: %v, want the loan as the second left it", got)
	}

	// A loan whose item is claimed returned or declared lost keeps its
	// date; a closed loan has none to change.
	c.DoWith(c.Circulations[0], "POST", "/circulation/loans/"+loans[1].ID+"/claim-item-returned",
		map[string]any{"itemClaimedReturnedDateTime": loans[1].DueDate}, librarian).Want(t, http.StatusNoContent)
	c.DoWith(c.Circulations[0], "POST", "/circulation/loans/"+loans[2].ID+"/declare-item-lost",
		map[string]any{"servicePointId": harness.ServicePoint}, librarian).Want(t, http.StatusNoContent)
	c.CheckIn(0, books[3]).Want(t, http.StatusOK)
	for i, w := range []struct{ message, key, value string }{
		{"item is " + schemas.ItemClaimedReturned, "itemId", c.IDOf(t, "/item-storage/items", "items", books[1])},
		{"item is " + schemas.ItemDeclaredLost, "itemId", c.IDOf(t, "/item-storage/items", "items", books[2])},
		{"Loan is closed", "loanId", loans[3].ID},
	} {
		l := loans[i+1]
		before := storedDoc(t, c, "loan", l.ID)
		refused(w.message, change(l.ID, body, librarian), http.StatusUnprocessableEntity, schemas.CodeValidation, w.message, w.key, w.value)
		if after := storedDoc(t, c, "loan", l.ID); after["_version"] != before["_version"] || after["dueDate"] != l.DueDate {
			t.Errorf("%s: the loan %v after the refusal, was %v", w.message, after, before)
		}
	}
	if got, err := mail.Messages(context.Background()); err != nil || len(got) != 2 {
		raw, _ := json.Marshal(got)
		t.Errorf("%d mails (%v): %s, want the two changes', each once", len(got), err, raw)
	}
}

// TestNotesAreAddedToLoansAsFOLIOAddsThem: the patron's or the staff's
// note added to a loan (POST /circulation/loans/{id}/add-info,
// mod-circulation's AddInfoAPITests): kept as the loan's action and
// actionComment, its item as it was; sent twice with its Idempotency-Key,
// written once; added to a closed loan too, which stays closed. Another
// action, a blank comment, no such loan: refused in FOLIO's words,
// nothing changed; a self-check machine: 403.
func TestNotesAreAddedToLoansAsFOLIOAddsThem(t *testing.T) {
	t.Parallel()
	c := harness.NewCluster(t, harness.Options{Circulations: 1, FeatureOn: true})
	lib := c.SetupLibrary(1, 2, 0)
	patron, books := lib.Patrons[0], lib.Items[0]
	librarian := c.HeadersWith(schemas.HeaderToken, c.Token(schemas.RoleLibrarian))
	var open, closed struct{ ID string }
	c.CheckOut(0, books[0], patron).Want(t, http.StatusCreated).Decode(t, &open)
	c.CheckOut(0, books[1], patron).Want(t, http.StatusCreated).Decode(t, &closed)
	c.CheckIn(0, books[1]).Want(t, http.StatusOK)
	add := func(loanID string, body map[string]any, headers map[string]string) harness.Response {
		return c.DoWith(c.Circulations[0], "POST", "/circulation/loans/"+loanID+"/add-info", body, headers)
	}
	const folios = "An action of type patronInfoAdded or staffInfoAdded, with associated actionComment, required in order to add info"
	for _, bad := range []map[string]any{{"action": "renewed", "actionComment": "a note"}, {"action": "patronInfoAdded", "actionComment": "  "},
		{"actionComment": "a note"}} {
		r := add(open.ID, bad, librarian).Want(t, http.StatusUnprocessableEntity)
		if !strings.Contains(string(r.Body), folios) {
			t.Errorf("%v: %s, want FOLIO's refusal", bad, r.Body)
		}
	}
	add(uuid.NewString(), map[string]any{"action": "patronInfoAdded", "actionComment": "a note"}, librarian).Want(t, http.StatusNotFound)
	add(open.ID, map[string]any{"action": "patronInfoAdded", "actionComment": "a note"},
		c.HeadersWith(schemas.HeaderToken, c.Token(schemas.RoleSelfCheck))).Want(t, http.StatusForbidden)
	if got := storedDoc(t, c, "loan", open.ID); got["_version"] != float64(1) || got["action"] != schemas.LoanCheckedOut {
		t.Fatalf("after the refusals: %v", got)
	}
	add(open.ID, map[string]any{"action": "patronInfoAdded", "actionComment": "Says the book came with a torn page"}, librarian).
		Want(t, http.StatusNoContent)
	keyed := c.HeadersWith(schemas.HeaderToken, c.Token(schemas.RoleLibrarian), schemas.HeaderIdempotencyKey, uuid.NewString())
	staff := map[string]any{"action": "staffInfoAdded", "actionComment": "Torn page seen at the desk"}
	add(open.ID, staff, keyed).Want(t, http.StatusNoContent)
	add(open.ID, staff, keyed).Want(t, http.StatusNoContent)
	got := storedDoc(t, c, "loan", open.ID)
	if got["_version"] != float64(3) || got["action"] != "staffInfoAdded" || got["actionComment"] != "Torn page seen at the desk" ||
		got["status"].(map[string]any)["name"] != schemas.LoanOpen {
		t.Errorf("the noted loan: %v, want version 3 (two notes, the second sent twice), the staff's note, open", got)
	}
	if status, _ := itemState(t, c, books[0]); status != schemas.ItemCheckedOut {
		t.Errorf("the noted loan's item is %q, want Checked out still", status)
	}
	add(closed.ID, map[string]any{"action": "staffInfoAdded", "actionComment": "Returned wet"}, librarian).Want(t, http.StatusNoContent)
	if got := storedDoc(t, c, "loan", closed.ID); got["action"] != "staffInfoAdded" || got["status"].(map[string]any)["name"] != schemas.LoanClosed {
		t.Errorf("the noted closed loan: %v, want closed with the note", got)
	}
}
