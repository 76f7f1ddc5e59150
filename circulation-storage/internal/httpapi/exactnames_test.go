package httpapi

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/checkoutlock/schemas"
)

// TestMemberNamesAreMatchedExactlyAtStorage: a loan whose body says its
// status twice, once as "status" and once as "ſtatus" (long s, which
// encoding/json folds to status), is refused 422 naming "ſtatus", and
// nothing is stored: the write never judges one status and stores
// another. The same loan without it is stored.
func TestMemberNamesAreMatchedExactlyAtStorage(t *testing.T) {
	t.Parallel()
	f := seedCQL(t)
	doc := loanDoc(f.id["grace"], f.id["i4"], "Closed")
	body, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	folded := strings.Replace(string(body), `{`, `{"ſtatus":{"name":"Open"},`, 1)
	before := f.snapshot()
	env := f.do("POST", "/loan-storage/loans", folded).wantError(http.StatusUnprocessableEntity, schemas.CodeValidation)
	if len(env.Errors) != 1 || !strings.Contains(env.Errors[0].Message, `"ſtatus" is not "status"`) {
		t.Fatalf("a loan naming its status folded: %+v, want one error naming ſtatus", env.Errors)
	}
	if after := f.snapshot(); after != before {
		t.Fatalf("the refused loan changed storage:\n%s\nwas\n%s", after, before)
	}
}
