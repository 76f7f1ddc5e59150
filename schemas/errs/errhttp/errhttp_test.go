package errhttp

import (
	"testing"

	"github.com/checkoutlock/schemas/errs"
)

func TestStatus(t *testing.T) {
	t.Parallel()
	for kind, want := range map[errs.Kind]int{
		errs.KindBadRequest:       400,
		errs.KindInvalid:          422,
		errs.KindNotFound:         404,
		errs.KindConflict:         409,
		errs.KindLocked:           503,
		errs.KindUnauthorized:     401,
		errs.KindForbidden:        403,
		errs.KindUnavailable:      503,
		errs.KindInternal:         500,
		errs.KindTooManyRequests:  429,
		errs.KindTooLarge:         413,
		errs.KindHeadersTooLarge:  431,
		errs.KindTimeout:          408,
		errs.KindUnsupportedMedia: 415,
		errs.Kind(0):              500, // a kind nobody set is a bug
		errs.Kind(1000):           500,
	} {
		if got := Status(kind); got != want {
			t.Errorf("Status(%d) = %d, want %d", kind, got, want)
		}
	}
}

func TestDecode(t *testing.T) {
	t.Parallel()
	env, found := Decode([]byte(`{"errors":[{"message":"Item limit reached","code":"ITEM_LIMIT_REACHED",` +
		`"parameters":[{"key":"itemLimit","value":"3"},{"key":"loanTypeId","value":"x"}]},{"message":"b","code":"C"}]}`))
	if !found || len(env.Errors) != 2 || env.Errors[0].Code != "ITEM_LIMIT_REACHED" || env.Errors[1].Message != "b" {
		t.Fatalf("Decode = %+v, %v", env, found)
	}
	if got := env.Errors[0].Param("itemLimit"); got != "3" {
		t.Errorf("Param(itemLimit) = %q, want 3", got)
	}
	if got := env.Errors[0].Param("absent"); got != "" {
		t.Errorf("Param(absent) = %q, want empty", got)
	}
	for _, body := range []string{``, `<html>Bad Gateway</html>`, `{"errors":[]}`, `{"total":1}`, `[1]`} {
		if env, found := Decode([]byte(body)); found {
			t.Errorf("Decode(%q) = %+v, found; want none (a proxy's answer)", body, env)
		}
	}
	if s := Single("m", "C", errs.Parameter{Key: "k", Value: "v"}); len(s.Errors) != 1 || s.Errors[0].Param("k") != "v" {
		t.Errorf("Single = %+v", s)
	}
}
