package integration

import (
	"net/http"
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
