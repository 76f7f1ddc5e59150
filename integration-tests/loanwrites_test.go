package integration

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"testing"

	"github.com/checkoutlock/integration-tests/harness"
	"github.com/checkoutlock/schemas"
)

// loanState is what a round of loan writes left: the loan, its item and
// the events announced for them.
type loanState struct {
	status, action string
	renewalCount   int
	itemStatus     string
	// renewed, acted and checkedIn count the loan's RENEWED events, its
	// updates that gave it the round's action and its CHECKED_IN events.
	renewed, acted, checkedIn int
}

func readLoanState(t *testing.T, c *harness.Cluster, loanID, action string) loanState {
	t.Helper()
	var s loanState
	err := c.DB.QueryRow(context.Background(), fmt.Sprintf(`
SELECT l.status_name, l.jsonb ->> 'action', coalesce((l.jsonb ->> 'renewalCount')::int, 0), i.status_name,
       (SELECT count(*) FROM circulation_storage.outbox o WHERE o.tenant_id = $2 AND o.kind = 'renewal' AND o.data #>> '{new,loanId}' = $1),
       (SELECT count(*) FROM circulation_storage.outbox o WHERE o.tenant_id = $2 AND o.kind = 'loan' AND o.type = 'UPDATED'
           AND o.data #>> '{new,id}' = $1 AND o.data #>> '{new,action}' = $3 AND o.data #>> '{old,action}' IS DISTINCT FROM $3),
       (SELECT count(*) FROM circulation_storage.outbox o WHERE o.tenant_id = $2 AND o.kind = 'check-in' AND o.data #>> '{new,loanId}' = $1)
  FROM %[1]s.loan l JOIN %[1]s.item i ON i.id = l.item_id WHERE l.id = $1::uuid`, c.Schema), loanID, c.Tenant, action).
		Scan(&s.status, &s.action, &s.renewalCount, &s.itemStatus, &s.renewed, &s.acted, &s.checkedIn)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestLoanWritesAtOnceNeverUndoEachOther: a claim returned, a declaration
// of loss, a check-in or a change of due date of a loan sent together with
// three renewals of it, over two circulation instances, twenty-four
// rounds. Every round the loan, its item and the events agree: each
// renewal answered 200 is in the loan's count and announced once, each
// refusal changed nothing, the item's status is the one the loan's last
// write gave it, and the loan's action is that write's, a changed due
// date the one asked (issue: a claim that read the loan before a renewal
// replaced it with its unrenewed copy).
func TestLoanWritesAtOnceNeverUndoEachOther(t *testing.T) {
	t.Parallel()
	const rounds, renewals = 24, 3
	const changedDue = "2027-06-15T23:59:59.000Z"
	c := harness.NewCluster(t, harness.Options{Circulations: 2, FeatureOn: true})
	lib := c.SetupLibrary(1, rounds, 0)
	renewable(t, c, lib, map[string]any{"unlimited": true, "renewFromId": "CURRENT_DUE_DATE"})
	patron := lib.Patrons[0]
	librarian := map[string]string{schemas.HeaderTenant: c.Tenant, schemas.HeaderToken: c.Token(schemas.RoleLibrarian)}
	writes := []struct {
		name, action, itemStatus string
		ok                       int
		send                     func(c *harness.Cluster, loanID, item string) int
	}{
		{"claim returned", "claimedReturned", "Claimed returned", http.StatusNoContent, func(c *harness.Cluster, loanID, _ string) int {
			return c.DoWith(c.Circulations[0], "POST", "/circulation/loans/"+loanID+"/claim-item-returned",
				map[string]any{"itemClaimedReturnedDateTime": "2026-03-05T12:00:00.000Z"}, librarian).Status
		}},
		{"declare lost", "declaredLost", "Declared lost", http.StatusNoContent, func(c *harness.Cluster, loanID, _ string) int {
			return c.DoWith(c.Circulations[0], "POST", "/circulation/loans/"+loanID+"/declare-item-lost",
				map[string]any{"servicePointId": harness.ServicePoint}, librarian).Status
		}},
		{"check in", "checkedin", "Available", http.StatusOK, func(c *harness.Cluster, _, item string) int {
			return c.CheckIn(0, item).Status
		}},
		{"change due date", schemas.LoanDueDateChanged, "Checked out", http.StatusNoContent, func(c *harness.Cluster, loanID, _ string) int {
			return c.DoWith(c.Circulations[1], "POST", "/circulation/loans/"+loanID+"/change-due-date",
				map[string]any{"dueDate": changedDue}, librarian).Status
		}},
	}
	tally := map[string][3]int{} // rounds, done, renewals done
	for round := range rounds {
		w := writes[round%len(writes)]
		item := lib.Items[0][round]
		c.CheckOut(round, item, patron).Want(t, http.StatusCreated)
		loanID := openLoanID(t, c, item)
		var wg sync.WaitGroup
		answers := make([]int, renewals+1)
		start := make(chan struct{})
		for i := range answers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				if i == 0 {
					answers[i] = w.send(c, loanID, item)
					return
				}
				answers[i] = c.Do(c.Circulations[i%2], "POST", "/circulation/renew-by-barcode",
					map[string]string{"itemBarcode": item, "userBarcode": patron}).Status
			}()
		}
		close(start)
		wg.Wait()
		renewedOK := 0
		for _, a := range answers[1:] {
			switch a {
			case http.StatusOK:
				renewedOK++
			case http.StatusConflict, http.StatusUnprocessableEntity:
			default:
				t.Fatalf("round %d (%s): answers %v, a renewal answered %d", round, w.name, answers, a)
			}
		}
		acted := answers[0] == w.ok
		if !acted && answers[0] != http.StatusConflict {
			t.Fatalf("round %d (%s): answers %v, the %s answered %d", round, w.name, answers, w.name, answers[0])
		}
		s := readLoanState(t, c, loanID, w.action)
		want := loanState{status: "Open", action: "checkedout", renewalCount: renewedOK, itemStatus: "Checked out", renewed: renewedOK}
		switch {
		case acted && w.action == "checkedin":
			want.status, want.action, want.itemStatus, want.acted, want.checkedIn = "Closed", w.action, w.itemStatus, 1, 1
		case acted && w.action == schemas.LoanDueDateChanged:
			// The item stays on loan: a renewal that read the changed
			// loan comes after the change, and is the loan's last write.
			// Renewed from its current due date, the changed loan is due
			// later; one renewed from a copy read before the change (the
			// change undone) would be due months sooner.
			want.action, want.acted = w.action, 1
			if renewedOK > 0 && s.action == "renewed" {
				want.action = "renewed"
			}
			due := loanDue(t, c, loanID)
			if want.action == w.action && due != changedDue || due < changedDue {
				t.Fatalf("round %d (%s): answers %v; the loan due %s (%s), want %s or, renewed after it, later", round, w.name, answers,
					due, s.action, changedDue)
			}
		case acted:
			want.action, want.itemStatus, want.acted = w.action, w.itemStatus, 1
		case renewedOK > 0:
			want.action = "renewed"
		}
		if s != want {
			t.Fatalf("round %d (%s): answers %v; the loan, item and events %+v, want %+v", round, w.name, answers, s, want)
		}
		n := tally[w.name]
		n[0]++
		if acted {
			n[1]++
		}
		n[2] += renewedOK
		tally[w.name] = n
	}
	for _, w := range writes {
		n := tally[w.name]
		t.Logf("%s beside %d renewals: %d of %d done, %d renewals done", w.name, renewals, n[1], n[0], n[2])
	}
}

// loanDue is the loan's dueDate as stored.
func loanDue(t *testing.T, c *harness.Cluster, loanID string) string {
	t.Helper()
	var due string
	if err := c.DB.QueryRow(context.Background(), fmt.Sprintf(`SELECT jsonb ->> 'dueDate' FROM %s.loan WHERE id = $1::uuid`, c.Schema),
		loanID).Scan(&due); err != nil {
		t.Fatal(err)
	}
	return due
}

// openLoanID is the id of the item's open loan.
func openLoanID(t *testing.T, c *harness.Cluster, item string) string {
	t.Helper()
	var page struct {
		Loans []struct{ ID string } `json:"loans"`
	}
	c.Do(c.Storage, "GET", "/loan-storage/loans?itemId="+c.IDOf(t, "/item-storage/items", "items", item)+"&status=Open", nil).
		Want(t, http.StatusOK).Decode(t, &page)
	if len(page.Loans) != 1 {
		t.Fatalf("%d open loans of %s, want 1", len(page.Loans), item)
	}
	return page.Loans[0].ID
}
