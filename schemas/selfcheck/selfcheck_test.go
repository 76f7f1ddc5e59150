package selfcheck_test

import (
	"encoding/json"
	"testing"

	"github.com/checkoutlock/schemas"
	"github.com/checkoutlock/schemas/selfcheck"
)

// TestDecodeIsTheSchema: the decoder reads what self-check-settings.json
// describes and refuses, naming the field, what it does not; a value
// refused is never read as PINs off.
func TestDecodeIsTheSchema(t *testing.T) {
	t.Parallel()
	set := schemas.MustLoad()
	for _, tc := range []struct {
		value    string
		required bool
		offline  bool   // check-outs made offline taken
		field    string // the field refused; "-" for none, "" for the value as a whole
	}{
		{`{}`, false, true, "-"},
		{`{"patronPin":"off"}`, false, true, "-"},
		{`{"patronPin":"required"}`, true, true, "-"},
		{`{"offlineLending":"off"}`, false, false, "-"},
		{`{"offlineLending":"on","patronPin":"required"}`, true, true, "-"},
		{`{"offlineLending":"Off"}`, false, false, "offlineLending"},
		{`{"offlineLending":false}`, false, false, "offlineLending"},
		{`{"patronPin":"Required"}`, false, false, "patronPin"},
		{`{"patronPin":null}`, false, false, "patronPin"},
		{`{"patronPin":true}`, false, false, "patronPin"},
		{`{"patronPin":"required","pinRequired":true}`, false, false, "pinRequired"},
		{`"{\"patronPin\":\"required\"}"`, false, false, ""},
		{`[]`, false, false, ""},
		{`null`, false, false, ""},
	} {
		s, ferr := selfcheck.Decode(json.RawMessage(tc.value))
		schemaErr := set.ValidateJSON("self-check-settings.json", []byte(tc.value))
		switch {
		case tc.field == "-" && (ferr != nil || s.PinRequired() != tc.required || s.OfflineTaken() != tc.offline):
			t.Errorf("Decode(%s) = %+v, %v; want PINs required %v, offline taken %v", tc.value, s, ferr, tc.required, tc.offline)
		case tc.field != "-" && (ferr == nil || ferr.Field != tc.field || s.PinRequired()):
			t.Errorf("Decode(%s) = %+v, %v; want %q refused", tc.value, s, ferr, tc.field)
		}
		if (ferr == nil) != (schemaErr == nil) {
			t.Errorf("%s: the decoder says %v, self-check-settings.json %v", tc.value, ferr, schemaErr)
		}
	}
}
