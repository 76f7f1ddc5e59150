package schemas

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
)

// encoding/json matches a member's name to a field case-insensitively,
// folding Unicode too: "Status", "STATUS" and "ſtatus" (long s) all fill
// a field named status, while storage's SQL, reading the stored JSON,
// knows only "status". A body whose member names one thing to the
// service's Go and another to its SQL would be judged as one record and
// stored as another. Names are matched exactly: one that matches a field
// only when folded is refused.

// FoldedNameError is a member whose name matches a field's only when
// folded: Name as sent, Field the field's.
type FoldedNameError struct {
	Name, Field string
}

func (e *FoldedNameError) Error() string {
	return fmt.Sprintf("%s: member names are matched exactly, and %q is not %q", e.Name, e.Name, e.Field)
}

// UnmarshalExact is json.Unmarshal of data into v, refusing a member whose
// name matches a field of v's type only when folded (FoldedNameError).
func UnmarshalExact(data []byte, v any) error {
	var doc any
	if err := json.Unmarshal(data, &doc); err != nil {
		return err
	}
	if err := ExactNames(doc, v); err != nil {
		return err
	}
	return json.Unmarshal(data, v)
}

// ExactNames says whether doc, a document already decoded (encoding/json's
// maps and slices), may be decoded into v with every member name matched
// exactly: nil, or the FoldedNameError of the first that matches a field
// only when folded. A caller that parsed the document already asks this
// rather than UnmarshalExact, which parses it again.
func ExactNames(doc, v any) error { return exactNames(doc, reflect.TypeOf(v)) }

var (
	rawMessage  = reflect.TypeFor[json.RawMessage]()
	unmarshaler = reflect.TypeFor[json.Unmarshaler]()
)

// exactNames walks doc beside t, the Go type it is decoded into.
func exactNames(doc any, t reflect.Type) error {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil || t == rawMessage || reflect.PointerTo(t).Implements(unmarshaler) {
		return nil
	}
	switch t.Kind() {
	case reflect.Struct:
		obj, ok := doc.(map[string]any)
		if !ok {
			return nil
		}
		fields := map[string]goField{}
		fieldsOf(t, fields)
		for name, value := range obj {
			if f, ok := fields[name]; ok {
				if err := exactNames(value, f.t); err != nil {
					return err
				}
				continue
			}
			for field, f := range fields {
				if !strings.EqualFold(name, field) {
					continue
				}
				// A field without a JSON name is Go's name for it, which
				// a client writes in its own case (ID as "id"): matched
				// in ASCII case, never by a Unicode fold.
				if !f.tagged && isASCII(name) {
					if err := exactNames(value, f.t); err != nil {
						return err
					}
					break
				}
				return &FoldedNameError{Name: name, Field: field}
			}
		}
	case reflect.Slice, reflect.Array:
		if list, ok := doc.([]any); ok {
			for _, value := range list {
				if err := exactNames(value, t.Elem()); err != nil {
					return err
				}
			}
		}
	case reflect.Map:
		if obj, ok := doc.(map[string]any); ok {
			for _, value := range obj {
				if err := exactNames(value, t.Elem()); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// goField is a struct field as a member names it: its type, and whether
// its JSON name is given (a tag) or Go's own.
type goField struct {
	t      reflect.Type
	tagged bool
}

func isASCII(s string) bool {
	for i := range len(s) {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}

// fieldsOf adds struct type t's JSON member names and their types to
// fields, with those of its untagged embedded structs, as encoding/json
// names them.
func fieldsOf(t reflect.Type, fields map[string]goField) {
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		ft := f.Type
		if f.Anonymous && name == "" {
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				fieldsOf(ft, fields)
				continue
			}
		}
		if !f.IsExported() {
			continue
		}
		tagged := name != ""
		if !tagged {
			name = f.Name
		}
		fields[name] = goField{t: f.Type, tagged: tagged}
	}
}
