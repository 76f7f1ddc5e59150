package serverkit

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"

	"github.com/checkoutlock/schemas"
	"github.com/checkoutlock/schemas/errs"
)

// TestAnErrorIsAnsweredNotItsCause: the answer is the outermost error the
// services know, however it is wrapped; its cause, a refusal or a body's
// violations among them, stays in the log.
func TestAnErrorIsAnsweredNotItsCause(t *testing.T) {
	t.Parallel()
	refusal := &errs.Refusal{Errors: []*errs.Error{
		errs.Errorf(errs.KindInvalid, schemas.CodeItemLimitReached, "at the limit"),
		errs.Errorf(errs.KindInvalid, schemas.CodeItemRequestedByAnotherPatron, "another's request"),
	}}
	unknown := func(cause error) error {
		return errs.Errorf(errs.KindUnavailable, schemas.CodeStorageUnavailable, "not known").Because(cause)
	}
	violations := &schemas.ValidationError{Schema: "loan.json", Violations: []schemas.Violation{{Message: "missing"}}}
	for _, c := range []struct {
		name   string
		err    error
		status int
		codes  []string
	}{
		{"a refusal", refusal, http.StatusUnprocessableEntity, []string{schemas.CodeItemLimitReached, schemas.CodeItemRequestedByAnotherPatron}},
		{"a refusal wrapped", fmt.Errorf("check out: %w", refusal), http.StatusUnprocessableEntity,
			[]string{schemas.CodeItemLimitReached, schemas.CodeItemRequestedByAnotherPatron}},
		{"an error caused by a refusal", unknown(refusal), http.StatusServiceUnavailable, []string{schemas.CodeStorageUnavailable}},
		{"joined, wrapped", errors.Join(errors.New("plain"), fmt.Errorf("x: %w", unknown(refusal))), http.StatusServiceUnavailable,
			[]string{schemas.CodeStorageUnavailable}},
		{"an error caused by violations", unknown(violations), http.StatusServiceUnavailable, []string{schemas.CodeStorageUnavailable}},
		{"violations", violations, http.StatusUnprocessableEntity, []string{schemas.CodeValidation}},
		{"none known", errors.New("plain"), http.StatusInternalServerError, []string{schemas.CodeInternal}},
	} {
		status, body, _ := response(c.err, httptest.NewRequest(http.MethodPost, "/x", nil), 1<<20)
		var codes []string
		for _, e := range body.Errors {
			codes = append(codes, e.Code)
		}
		if status != c.status || !slices.Equal(codes, c.codes) {
			t.Errorf("%s: %d %v, want %d %v", c.name, status, codes, c.status, c.codes)
		}
	}
}
