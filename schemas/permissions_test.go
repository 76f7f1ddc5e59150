package schemas

import "testing"

// TestRolesHoldingSaysTheTable: the roles a page names for a permission
// are the roles whose sets hold it, in the librarian, operator,
// self-check order.
func TestRolesHoldingSaysTheTable(t *testing.T) {
	t.Parallel()
	for permission, want := range map[string]string{
		"circulation.loans.collection.get":           "the librarian role",
		"circulation.check-out-locks.collection.get": "the operator role",
		"circulation.settings.check-out-lock.get":    "the librarian or the operator role",
		"circulation.renew-by-barcode.post":          "the librarian or the self-check role",
		"circulation.renew-by-id.post":               "the librarian role",
		PermissionCheckOutOverride:                   "the tenant administrator's role",
	} {
		if got := RolesHolding(permission); got != want {
			t.Errorf("RolesHolding(%s) = %q, want %q", permission, got, want)
		}
	}
}
