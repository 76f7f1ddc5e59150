package schemas

import (
	"errors"
	"testing"
)

// TestMemberNamesAreMatchedExactly: a member whose name matches a field's
// JSON name only when folded (case, long s), at any depth, is refused
// naming it, and one matching a field without a JSON name (Go's own)
// only by a Unicode fold (Kelvin sign) too; exact names, Go's names in
// ASCII case, and members no field names, decode as encoding/json
// decodes them.
func TestMemberNamesAreMatchedExactly(t *testing.T) {
	t.Parallel()
	type status struct {
		Name string `json:"name"`
	}
	type record struct {
		ID     string            `json:"id"`
		Status status            `json:"status"`
		Tags   []status          `json:"tags"`
		By     map[string]status `json:"by"`
		Kind   string
	}
	for _, c := range []struct{ body, name, field string }{
		{`{"ſtatus":{"name":"Closed"}}`, "ſtatus", "status"},
		{`{"Status":{"name":"Closed"}}`, "Status", "status"},
		{`{"ID":"x"}`, "ID", "id"},
		{`{"status":{"NAME":"Closed"}}`, "NAME", "name"},
		{`{"tags":[{"name":"a"},{"Name":"b"}]}`, "Name", "name"},
		{`{"by":{"k":{"nAme":"b"}}}`, "nAme", "name"},
		{`{"\u212Aind":"x"}`, "\u212Aind", "Kind"},
		{`{"kind":"x","KIND":"y"}`, "", ""},
		{`{"\u212Aey":"x","id":"k"}`, "", ""},
	} {
		var r record
		err := UnmarshalExact([]byte(c.body), &r)
		var fe *FoldedNameError
		if c.name == "" {
			if err != nil {
				t.Errorf("%s: %v, want it taken", c.body, err)
			}
			continue
		}
		if !errors.As(err, &fe) || fe.Name != c.name || fe.Field != c.field {
			t.Errorf("%s: %v, want %q refused as not %q", c.body, err, c.name, c.field)
		}
	}
	var r record
	if err := UnmarshalExact([]byte(`{"id":"a","status":{"name":"Open"},"unknown":1,"kind":"p"}`), &r); err != nil ||
		r.ID != "a" || r.Status.Name != "Open" || r.Kind != "p" {
		t.Errorf("exact names: %+v, %v", r, err)
	}
}
