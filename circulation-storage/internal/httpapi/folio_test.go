package httpapi

import (
	"encoding/json"
	"net/http"
	"reflect"
	"testing"

	"github.com/google/uuid"

	"github.com/checkoutlock/schemas"
)

// folioLoan is a loan as mod-circulation posts it at check-out: the fields
// this service uses, FOLIO's others, and a metadata block of the client's.
func folioLoan(user, item string) map[string]any {
	return map[string]any{
		"id": uuid.NewString(), "userId": user, "itemId": item, "loanDate": "2024-03-01T10:00:00.000Z",
		"dueDate": "2024-03-22T10:00:00.000Z", "action": "checkedout", "status": map[string]any{"name": "Open"},
		"itemStatus":                        "Checked out",
		"itemEffectiveLocationIdAtCheckOut": "fcd64ce1-6995-48f0-840e-89ffa2288371",
		"patronGroupIdAtCheckout":           "3684a786-6671-4268-8ed0-9db82ebca60b",
		"overdueFinePolicyId":               "cd3f6cac-fa17-4079-9fae-2fb28e521412",
		"lostItemPolicyId":                  "ed892c0e-52e0-4cd9-8133-c0ef07b4a709",
		"renewalCount":                      0,
		"dueDateChangedByRecall":            false,
		"metadata": map[string]any{"createdDate": "2000-01-01T00:00:00.000Z",
			"createdByUserId": "11111111-1111-4111-8111-111111111111"},
	}
}

// TestRecordsKeepFOLIOsFields: a loan as mod-circulation posts it is
// accepted, stored and returned with every field it was sent with, by a
// check-out's fenced write (and, closed, by a plain create); storage's metadata
// replaces the client's.
func TestRecordsKeepFOLIOsFields(t *testing.T) {
	t.Parallel()
	f := setup(t)
	group := f.newGroup("staff")
	mt, lt := f.newMaterialType("book"), f.newLoanType("can circulate")
	patron := f.newPatron("u-1", group)
	for _, checkOutWrite := range []bool{false, true} {
		item := f.newItem(itemDoc(uuid.NewString(), mt, lt))
		loan := folioLoan(patron, item)
		headers := map[string]string{TenantHeader: f.tenant, schemas.HeaderUserID: testUser}
		if checkOutWrite {
			headers[ItemVersionHeader] = "1"
		} else {
			// A plain create keeps a loan's history: a closed one (an
			// open loan is made only by a check-out's write).
			loan["status"] = map[string]any{"name": "Closed"}
			loan["action"] = "checkedin"
		}
		res := f.doWith("POST", "/loan-storage/loans", jsonBody(loan), headers).wantStatus(http.StatusCreated).wantSchema("loan.json")
		got := f.do("GET", "/loan-storage/loans/"+loan["id"].(string), "").wantStatus(http.StatusOK).wantSchema("loan.json").doc()
		if posted := res.doc(); !reflect.DeepEqual(posted, got) {
			t.Errorf("POST answered %v, GET %v", posted, got)
		}
		wantMetadata(t, got, "", "")
		want := roundTrip(t, loan).(map[string]any)
		want["metadata"] = got["metadata"]
		want["_version"] = 1.0
		if !reflect.DeepEqual(got, want) {
			t.Errorf("check-out write %v: stored %v, want %v", checkOutWrite, got, want)
		}
		// In the database, too, as sent.
		var stored json.RawMessage
		if err := f.pool.QueryRow(t.Context(), "SELECT jsonb FROM "+f.table("loan")+" WHERE id = $1", loan["id"]).Scan(&stored); err != nil {
			t.Fatal(err)
		}
		if dbDoc := jsonValue(t, stored); !reflect.DeepEqual(dbDoc, got) {
			t.Errorf("row %v, want %v", dbDoc, got)
		}
		if checkOutWrite {
			it := f.do("GET", "/item-storage/items/"+item, "").wantStatus(http.StatusOK).doc()
			if it["status"].(map[string]any)["name"] != "Checked out" || it["_version"] != 2.0 {
				t.Errorf("item after the check-out write %v", it)
			}
			wantMetadata(t, it, "", "after")
		}
	}
}
