package integration

import (
	"net/http"
	"strings"
	"testing"

	"github.com/checkoutlock/integration-tests/harness"
	"github.com/checkoutlock/schemas"
)

// TestOverridesNeedTheirPermission: FOLIO's overrideBlocks, across the
// real services in jwt mode. A self-check machine asking to override any
// block is refused INSUFFICIENT_OVERRIDE_PERMISSIONS and nothing is
// written; a librarian must give a comment; with one, the librarian lends
// past the item limit (still under the patron's lock, which is left
// released) and past a manual block, and each loan records the override.
func TestOverridesNeedTheirPermission(t *testing.T) {
	t.Parallel()
	c := harness.NewCluster(t, harness.Options{Circulations: 1, FeatureOn: true})
	lib := c.SetupLibrary(2, 3, 1)
	c.CheckOut(0, lib.Items[0][0], lib.Patrons[0]).Want(t, http.StatusCreated)
	checkOut := func(role, item, patron string, overrides map[string]any) harness.Response {
		t.Helper()
		body := map[string]any{"itemBarcode": item, "userBarcode": patron, "servicePointId": "c4c90014-c8c9-4ade-8f24-b5e313319f4b"}
		if overrides != nil {
			body["overrideBlocks"] = overrides
		}
		return c.DoWith(c.Circulations[0], "POST", "/circulation/check-out-by-barcode", body,
			map[string]string{schemas.HeaderTenant: c.Tenant, schemas.HeaderToken: c.Token(role)})
	}
	wantRefusal := func(r harness.Response, code, message string) {
		t.Helper()
		var env struct {
			Errors []struct{ Message, Code string }
		}
		r.Want(t, http.StatusUnprocessableEntity).Decode(t, &env)
		if len(env.Errors) != 1 || env.Errors[0].Code != code || env.Errors[0].Message != message {
			t.Errorf("answer %s, want one %s: %s", r.Body, code, message)
		}
	}
	overLimit := map[string]any{"itemLimitBlock": map[string]any{}, "comment": "Reading for the exam"}

	before := c.Snapshot(t)
	wantRefusal(checkOut(schemas.RoleSelfCheck, lib.Items[0][1], lib.Patrons[0], overLimit),
		schemas.CodeInsufficientOverridePermissions, "Insufficient override permissions")
	for _, o := range []map[string]any{{"patronBlock": map[string]any{}, "comment": "x"},
		{"itemNotLoanableBlock": map[string]any{"dueDate": "2030-01-01T00:00:00Z"}, "comment": "x"}} {
		wantRefusal(checkOut(schemas.RoleSelfCheck, lib.Items[0][1], lib.Patrons[0], o),
			schemas.CodeInsufficientOverridePermissions, "Insufficient override permissions")
	}
	wantRefusal(checkOut(schemas.RoleLibrarian, lib.Items[0][1], lib.Patrons[0], map[string]any{"itemLimitBlock": map[string]any{}}),
		schemas.CodeValidation, "Override should be performed with the comment specified")
	wantRefusal(checkOut(schemas.RoleLibrarian, lib.Items[0][1], lib.Patrons[0], nil), "ITEM_LIMIT_LOAN_TYPE",
		"Patron has reached maximum limit of 1 items for loan type")
	if c.Snapshot(t) != before {
		t.Fatal("a refused override changed the tenant's data")
	}

	var loan struct{ Action, ActionComment, ID string }
	checkOut(schemas.RoleLibrarian, lib.Items[0][1], lib.Patrons[0], overLimit).Want(t, http.StatusCreated)
	if n := c.OpenLoans(t, lib.Patrons[0]); n != 2 {
		t.Errorf("%d open loans after the override, want 2", n)
	}
	var page struct {
		Loans []struct{ Action, ActionComment string } `json:"loans"`
	}
	c.Do(c.Storage, "GET", "/loan-storage/loans?userId="+c.IDOf(t, "/users", "users", lib.Patrons[0])+"&status=Open", nil).
		Want(t, http.StatusOK).Decode(t, &page)
	overridden := 0
	for _, l := range page.Loans {
		if l.Action == "checkedOutThroughOverride" && l.ActionComment == "Reading for the exam" {
			overridden++
		}
	}
	if overridden != 1 {
		t.Errorf("loans %+v, want one made through the override, with its comment", page.Loans)
	}

	// A manual block: refused, then overridden by the librarian.
	c.Do(c.Storage, "POST", "/manualblocks", map[string]any{"userId": c.IDOf(t, "/users", "users", lib.Patrons[1]),
		"desc": "Card reported stolen", "borrowing": true}).Want(t, http.StatusCreated)
	wantRefusal(checkOut(schemas.RoleLibrarian, lib.Items[1][0], lib.Patrons[1], nil), schemas.CodeUserBlockedManually,
		"Patron blocked from borrowing")
	checkOut(schemas.RoleLibrarian, lib.Items[1][0], lib.Patrons[1],
		map[string]any{"patronBlock": map[string]any{}, "comment": "Card found"}).Want(t, http.StatusCreated).Decode(t, &loan)
	if loan.Action != "checkedOutThroughOverride" {
		t.Errorf("the loan past the block: %+v", loan)
	}
	c.CheckInvariants(t, harness.Invariants{})
}

// TestLoanActionsNeedTheirPermission: FOLIO's claim item returned and
// declare item lost across the real services in jwt mode. A self-check
// machine holds neither permission: 403 naming it, nothing written. A
// librarian claims a loan's item returned (204) and the patron, at a
// limit of 1, borrows again; declares the new loan's item lost (204),
// which still counts: the next check-out is refused.
func TestLoanActionsNeedTheirPermission(t *testing.T) {
	t.Parallel()
	c := harness.NewCluster(t, harness.Options{Circulations: 1, FeatureOn: true})
	lib := c.SetupLibrary(1, 3, 1)
	patron, items := lib.Patrons[0], lib.Items[0]
	c.CheckOut(0, items[0], patron).Want(t, http.StatusCreated)
	act := func(role, loan, action string, body map[string]any) harness.Response {
		t.Helper()
		return c.DoWith(c.Circulations[0], "POST", "/circulation/loans/"+loan+"/"+action, body,
			map[string]string{schemas.HeaderTenant: c.Tenant, schemas.HeaderToken: c.Token(role)})
	}
	claim := map[string]any{"itemClaimedReturnedDateTime": "2026-03-05T12:00:00.000Z", "comment": "In the book drop"}
	lost := map[string]any{"servicePointId": "c4c90014-c8c9-4ade-8f24-b5e313319f4b", "comment": "Not seen since March"}

	first := openLoanID(t, c, items[0])
	before := c.Snapshot(t)
	for action, body := range map[string]map[string]any{"claim-item-returned": claim, "declare-item-lost": lost} {
		r := act(schemas.RoleSelfCheck, first, action, body).Want(t, http.StatusForbidden)
		if want := map[string]string{"claim-item-returned": schemas.PermissionClaimItemReturned,
			"declare-item-lost": schemas.PermissionDeclareItemLost}[action]; !strings.Contains(string(r.Body), want) {
			t.Errorf("%s as a kiosk: %s, want the permission %s named", action, r.Body, want)
		}
	}
	if c.Snapshot(t) != before {
		t.Fatal("a refused loan action changed the tenant's data")
	}
	c.CheckOut(0, items[1], patron).Want(t, http.StatusUnprocessableEntity)

	act(schemas.RoleLibrarian, first, "claim-item-returned", claim).Want(t, http.StatusNoContent)
	c.CheckOut(0, items[1], patron).Want(t, http.StatusCreated)
	act(schemas.RoleLibrarian, openLoanID(t, c, items[1]), "declare-item-lost", lost).Want(t, http.StatusNoContent)
	r := c.CheckOut(0, items[2], patron).Want(t, http.StatusUnprocessableEntity)
	if !strings.Contains(string(r.Body), "ITEM_LIMIT_LOAN_TYPE") {
		t.Errorf("check-out past a loan declared lost: %s, want the item limit", r.Body)
	}
	// A loan that does not exist: 404.
	act(schemas.RoleLibrarian, "00000000-0000-4000-8000-000000000000", "claim-item-returned", claim).Want(t, http.StatusNotFound)
}
