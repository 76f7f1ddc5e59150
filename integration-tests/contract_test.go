package integration

import (
	"net/http"
	"strings"
	"testing"

	"github.com/checkoutlock/integration-tests/harness"
	"github.com/checkoutlock/schemas"
)

// TestTheContractRefusesWhatTheDescriptionDoesNot: the check every answer
// of the tests goes through (harness.CheckContract) passes a real check-out
// as circulation answered it, and refuses the same answer with a status,
// a field or a route its OpenAPI description does not have, and a request
// body its schema refuses.
func TestTheContractRefusesWhatTheDescriptionDoesNot(t *testing.T) {
	t.Parallel()
	c := harness.NewCluster(t, harness.Options{FeatureOn: true})
	lib := c.SetupLibrary(1, 1, 0)
	req := `{"itemBarcode":"` + lib.Items[0][0] + `","userBarcode":"` + lib.Patrons[0] + `","servicePointId":"` + harness.ServicePoint + `"}`
	res := c.Do(c.Circulations[0], "POST", "/circulation/check-out-by-barcode", req).Want(t, http.StatusCreated)
	check := func(method, path, sent string, status int, body string) string {
		return harness.CheckContractOf(schemas.ServiceCirculation, method, path, []byte(sent), status, res.Header, []byte(body))
	}
	const route = "/circulation/check-out-by-barcode"
	if msg := check("POST", route, req, http.StatusCreated, string(res.Body)); msg != "" {
		t.Fatalf("a check-out as circulation answered it: %s", msg)
	}
	for _, c := range []struct {
		what           string
		method, path   string
		sent           string
		status         int
		body, complain string
	}{
		{"a status not declared", "POST", route, req, http.StatusOK, string(res.Body), "does not declare"},
		{"a due date that is not a date", "POST", route, req, http.StatusCreated,
			strings.Replace(string(res.Body), `"dueDate":"`, `"dueDate":"soon`, 1), "refuses"},
		{"an error outside the envelope", "POST", route, req, http.StatusUnprocessableEntity, `{"message":"no"}`, "refuses"},
		{"a route not described", "POST", "/circulation/check-out-by-barcode/now", req, http.StatusCreated, string(res.Body), "not a route"},
		{"a request body its schema refuses", "POST", route, `{"itemBarcode":1}`, http.StatusCreated, string(res.Body), "took a body"},
	} {
		if msg := check(c.method, c.path, c.sent, c.status, c.body); !strings.Contains(msg, c.complain) {
			t.Errorf("%s: the contract check says %q, want it to say %q", c.what, msg, c.complain)
		}
	}
}
