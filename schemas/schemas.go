// Package schemas holds the wire contract of the check-out lock services as JSON
// Schema files. The files document the API and are the very files the services
// validate requests against, so the documentation cannot drift from the behaviour.
// Tests validate responses against them too.
package schemas

import (
	"bytes"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/checkoutlock/schemas/text"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/google/uuid"
	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
)

//go:embed *.json
var files embed.FS

// baseURL names the embedded files for the compiler, so that relative "$ref"s
// between them ("uuid.json") resolve the same way they do for a reader browsing
// the directory.
const baseURL = "https://schemas.checkoutlock.invalid/"

// Files returns the schema files, for serving or documenting them.
func Files() fs.FS { return files }

// Set is every embedded schema, compiled once. It is safe for concurrent use.
type Set struct {
	byName map[string]*jsonschema.Schema
	// at is every compiled schema and subschema by its location, the
	// SchemaURL of a violation: what a refusal says reads the bounds
	// beside the one broken.
	at map[string]*jsonschema.Schema
}

// Load compiles every embedded schema. Formats such as "date-time" are asserted,
// not merely annotated; "date-time" is ParseDateTime's.
func Load() (*Set, error) {
	names, err := fs.Glob(files, "*.json")
	if err != nil {
		return nil, err
	}
	c := jsonschema.NewCompiler()
	c.AssertFormat()
	c.RegisterFormat(&jsonschema.Format{Name: "date-time", Validate: dateTimeFormat})
	for _, name := range names {
		data, err := files.ReadFile(name)
		if err != nil {
			return nil, err
		}
		doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(data))
		if err != nil {
			return nil, fmt.Errorf("schema %s: %w", name, err)
		}
		if err := c.AddResource(baseURL+name, doc); err != nil {
			return nil, fmt.Errorf("schema %s: %w", name, err)
		}
	}
	s := &Set{byName: make(map[string]*jsonschema.Schema, len(names)), at: map[string]*jsonschema.Schema{}}
	for _, name := range names {
		sch, err := c.Compile(baseURL + name)
		if err != nil {
			return nil, fmt.Errorf("compile schema %s: %w", name, err)
		}
		s.byName[name] = sch
		index(s.at, sch)
	}
	return s, nil
}

// MustLoad is Load for program start-up and tests, where a broken embedded
// schema is a programming error.
func MustLoad() *Set {
	s, err := Load()
	if err != nil {
		panic(err)
	}
	return s
}

// Names lists the schemas in the set.
func (s *Set) Names() []string {
	names := make([]string, 0, len(s.byName))
	for n := range s.byName {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Violation is one way a document breaks its schema.
type Violation struct {
	// Field is the dotted path of the offending value ("personal.lastName",
	// "rules.0.loanPolicyId"); empty for the document itself.
	Field string
	// Message says what the value must be, in words (describe: "must be
	// from 100 to 600000"); it never quotes the value.
	Message string
	// Value is the offending value as text (JSON for objects and arrays),
	// cut to 100 characters; empty when the document itself is at fault,
	// and when the value may not be shown (a secret, or what the schema
	// does not describe).
	Value string
}

// ValidationError lists the violations of one document against one schema:
// at most MaxViolations of them, and how many more there were.
type ValidationError struct {
	Schema     string
	Violations []Violation
	// More is how many violations there were beyond those listed.
	More int
}

func (e *ValidationError) Error() string {
	msgs := make([]string, len(e.Violations))
	for i, v := range e.Violations {
		if v.Field == "" {
			msgs[i] = v.Message
		} else {
			msgs[i] = v.Field + " " + v.Message
		}
	}
	if e.More > 0 {
		msgs = append(msgs, fmt.Sprintf("and %d more", e.More))
	}
	return fmt.Sprintf("%s: %s", e.Schema, strings.Join(msgs, "; "))
}

// Decode parses JSON the way the validator needs it (numbers kept exact) and
// rejects trailing data after the top-level value, as the validator's own
// jsonschema.UnmarshalJSON does. That asks the decoder for one more token to
// find the trailing data, which costs as much again as decoding a small
// body; a body is in memory, so Decode looks at the bytes after the value
// instead (FuzzDecodeIsTheValidators holds the two to the same answers).
func Decode(data []byte) (any, error) {
	doc, end, err := decodeValue(data)
	if err != nil {
		return nil, err
	}
	if len(bytes.TrimLeft(data[end:], " \t\r\n")) > 0 {
		return nil, errors.New("invalid character after top-level value")
	}
	if err := uniqueNames(data); err != nil {
		return nil, err
	}
	return doc, nil
}

// DecodeBuilt is Decode for a document the service built and encoded
// itself with encoding/json (a loan it is about to write, held to its
// schema before the write): encoding/json writes each member once and
// nothing after the value, so Decode's look for trailing data and its
// pass for names given twice are left out (TestDecodeBuiltIsDecode).
func DecodeBuilt(data []byte) (any, error) {
	doc, _, err := decodeValue(data)
	return doc, err
}

// decodeValue decodes the first JSON value in data with its numbers kept
// exact, and says where the value ends.
func decodeValue(data []byte) (doc any, end int64, err error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if err := dec.Decode(&doc); err != nil {
		return nil, 0, err
	}
	return doc, dec.InputOffset(), nil
}

// uniqueNames refuses an object that names a member twice: RFC 8259
// leaves such a document's meaning to the reader (encoding/json takes the
// last), so a body that says "itemBarcode" twice would be judged on one
// barcode by one reader and another by the next. jsontext refuses
// duplicate names by default; its error names the member and where it is.
// Strings that are not UTF-8 are left to the rules that read them, as
// encoding/json leaves them.
func uniqueNames(data []byte) error {
	err := jsontext.NewDecoder(bytes.NewReader(data), jsontext.AllowInvalidUTF8(true)).SkipValue()
	var se *jsontext.SyntacticError
	if errors.As(err, &se) && se.Err == jsontext.ErrDuplicateName {
		where := "the body"
		if parent := se.JSONPointer.Parent(); parent != "" {
			where = "the object at " + string(parent)
		}
		return fmt.Errorf("the member %q is named more than once in %s", se.JSONPointer.LastToken(), where)
	}
	return err
}

// Validate checks a decoded document (see Decode) against the named schema.
// It returns a *ValidationError when the document is invalid.
func (s *Set) Validate(name string, doc any) error {
	sch, ok := s.byName[name]
	if !ok {
		return fmt.Errorf("schemas: no schema named %q", name)
	}
	err := sch.Validate(doc)
	if err == nil {
		return nil
	}
	var verr *jsonschema.ValidationError
	if !errors.As(err, &verr) {
		return fmt.Errorf("validate against %s: %w", name, err)
	}
	vs, more := s.violations(sch, verr, doc)
	return &ValidationError{Schema: name, Violations: vs, More: more}
}

// ValidUUID reports whether v is what uuid.json accepts: a UUID in
// canonical form. Services check ids in paths and headers on every
// request, so the canonical form is recognised without the validator, and
// anything else is judged by it (FuzzValidUUIDIsTheSchema holds the two to
// the same answers).
func (s *Set) ValidUUID(v string) bool {
	return len(v) == 36 && uuid.Validate(v) == nil || s.Validate("uuid.json", v) == nil
}

// ValidateJSON decodes data and validates it against the named schema.
func (s *Set) ValidateJSON(name string, data []byte) error {
	doc, err := Decode(data)
	if err != nil {
		return fmt.Errorf("decode json for %s: %w", name, err)
	}
	return s.Validate(name, doc)
}

// violations flattens the validator's error tree to what a client can act on:
// its leaves, each said in words (describe), except that an anyOf or oneOf
// that failed is said as what the value was meant to be: the branch for
// the kind of value sent, when one is (a number sent where "a number from
// 100 to 600000, or null" belongs is told the number's bounds), else the
// kinds of value allowed. Wrappers such as "validation failed" or "$ref"
// add nothing and are skipped. It keeps the first MaxViolations and counts
// the rest, so that a document of a hundred thousand unknown keys costs an
// answer of fifty lines. A value is quoted, in Value, only where shown
// allows; messages never quote it.
func (s *Set) violations(sch *jsonschema.Schema, root *jsonschema.ValidationError, doc any) ([]Violation, int) {
	var vs []Violation
	more := 0
	seen := map[Violation]bool{}
	add := func(v Violation) {
		if len(vs) >= MaxViolations {
			more++
			return
		}
		if !seen[v] {
			seen[v] = true
			vs = append(vs, v)
		}
	}
	// at is the violation by the value at loc, saying message.
	at := func(loc []string, message string) Violation {
		v := Violation{Field: field(loc), Message: message}
		if shown(sch, doc, loc) {
			v.Value = valueAt(doc, loc)
		}
		return v
	}
	var walk func(e *jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		switch e.ErrorKind.(type) {
		case *kind.AnyOf, *kind.OneOf:
			if len(e.Causes) == 0 { // a oneOf the value fits more than once
				add(at(e.InstanceLocation, s.describe(e)))
				return
			}
			var meant []*jsonschema.ValidationError
			var types []string
			for _, c := range e.Causes {
				if !onlyType(c, e.InstanceLocation) {
					meant = append(meant, c)
					continue
				}
				for _, l := range leaves(c) {
					types = append(types, l.ErrorKind.(*kind.Type).Want...)
				}
			}
			switch len(meant) {
			case 0:
				add(at(e.InstanceLocation, describe(&kind.Type{Want: types})))
			case 1:
				walk(meant[0])
			default:
				var says []string
				for _, c := range meant {
					for _, l := range leaves(c) {
						w := s.describe(l)
						if k, ok := l.ErrorKind.(*kind.Required); ok {
							w = strings.Join(k.Missing, " and ") + " " + w
						}
						if rel := l.InstanceLocation[min(len(e.InstanceLocation), len(l.InstanceLocation)):]; len(rel) > 0 {
							w = field(rel) + " " + w
						}
						if !slices.Contains(says, w) {
							says = append(says, w)
						}
					}
				}
				add(at(e.InstanceLocation, orList(says)))
			}
			return
		}
		if len(e.Causes) == 0 {
			// A missing or unknown property is reported against the
			// property itself, so the client sees which field to fix.
			switch k := e.ErrorKind.(type) {
			case *kind.Required:
				for _, p := range k.Missing {
					add(Violation{Field: field(append(e.InstanceLocation[:len(e.InstanceLocation):len(e.InstanceLocation)], p)), Message: describe(k)})
				}
				return
			case *kind.AdditionalProperties:
				for i, p := range k.Properties {
					if len(vs) >= MaxViolations {
						more += len(k.Properties) - i
						return
					}
					// An unknown property is named, never quoted: the
					// schema does not describe it, so shown refuses it.
					add(at(append(e.InstanceLocation[:len(e.InstanceLocation):len(e.InstanceLocation)], p), describe(k)))
				}
				return
			}
			add(at(e.InstanceLocation, s.describe(e)))
			return
		}
		for _, c := range e.Causes {
			walk(c)
		}
	}
	walk(root)
	if len(vs) == 0 {
		vs = append(vs, Violation{Message: "does not fit what this request takes"})
	}
	return vs, more
}

// shown says whether the value at location in doc may be quoted back in
// an error. A value the schema marks writeOnly (a password, a PIN: JSON
// Schema's word for what is sent and never returned) is not, nor anything
// inside one; nor is a value the schema does not describe (an unknown
// property, the members of an array sent where a string belongs), which
// could be anything, a secret sent under another name among them: it is
// named by its field and not quoted. An object or an array is shown only
// when everything in it would be. The document itself is never quoted.
func shown(sch *jsonschema.Schema, doc any, location []string) bool {
	if len(location) == 0 {
		return false
	}
	set := expand(nil, sch)
	v := doc
	for _, step := range location {
		if writeOnly(set) {
			return false
		}
		var ok bool
		if set, v, ok = member(set, v, step); !ok {
			return false
		}
	}
	return shownValue(set, v)
}

// shownValue says whether v, described by set, may be quoted: nothing in
// it writeOnly, and every member of it described.
func shownValue(set []*jsonschema.Schema, v any) bool {
	if len(set) == 0 || writeOnly(set) {
		return false
	}
	switch c := v.(type) {
	case map[string]any:
		for k := range c {
			if sub, w, ok := member(set, c, k); !ok || !shownValue(sub, w) {
				return false
			}
		}
	case []any:
		for i := range c {
			if sub, w, ok := member(set, c, strconv.Itoa(i)); !ok || !shownValue(sub, w) {
				return false
			}
		}
	}
	return true
}

// member is the schemas that describe v's member step (a property of an
// object, an index of an array) and the member itself; ok is false when
// there is no such member or no schema of set describes it.
func member(set []*jsonschema.Schema, v any, step string) ([]*jsonschema.Schema, any, bool) {
	var out []*jsonschema.Schema
	var w any
	switch c := v.(type) {
	case map[string]any:
		var found bool
		if w, found = c[step]; !found {
			return nil, nil, false
		}
		for _, s := range set {
			sub, matched := s.Properties[step]
			if matched {
				out = expand(out, sub)
			}
			for re, sub := range s.PatternProperties {
				if re.MatchString(step) {
					matched = true
					out = expand(out, sub)
				}
			}
			if additional, isSchema := s.AdditionalProperties.(*jsonschema.Schema); !matched && isSchema {
				out = expand(out, additional)
			}
		}
	case []any:
		i, err := strconv.Atoi(step)
		if err != nil || i < 0 || i >= len(c) {
			return nil, nil, false
		}
		w = c[i]
		for _, s := range set {
			switch items := s.Items.(type) {
			case *jsonschema.Schema:
				out = expand(out, items)
			case []*jsonschema.Schema:
				if i < len(items) {
					out = expand(out, items[i])
				} else if additional, isSchema := s.AdditionalItems.(*jsonschema.Schema); isSchema {
					out = expand(out, additional)
				}
			}
			if i < len(s.PrefixItems) {
				out = expand(out, s.PrefixItems[i])
			} else if s.Items2020 != nil {
				out = expand(out, s.Items2020)
			}
		}
	default:
		return nil, nil, false
	}
	return out, w, len(out) > 0
}

// expand adds to set the schema s and those it applies to the same value:
// what it refers to and the branches of its allOf, anyOf, oneOf and
// if/then/else. A boolean schema describes nothing.
func expand(set []*jsonschema.Schema, s *jsonschema.Schema) []*jsonschema.Schema {
	if s == nil || s.Bool != nil || slices.Contains(set, s) {
		return set
	}
	set = append(set, s)
	set = expand(set, s.Ref)
	for _, group := range [][]*jsonschema.Schema{s.AllOf, s.AnyOf, s.OneOf, {s.If, s.Then, s.Else}} {
		for _, sub := range group {
			set = expand(set, sub)
		}
	}
	return set
}

// writeOnly says whether any schema of set marks its value writeOnly.
func writeOnly(set []*jsonschema.Schema) bool {
	return slices.ContainsFunc(set, func(s *jsonschema.Schema) bool { return s.WriteOnly })
}

// valueAt renders the value at location in doc as text for an error
// parameter: strings as they are, anything else as JSON, cut to 100
// characters. The document itself renders as empty.
func valueAt(doc any, location []string) string {
	if len(location) == 0 {
		return ""
	}
	v, ok := at(doc, location)
	if !ok {
		return ""
	}
	var shown string
	if str, ok := v.(string); ok {
		shown = str
	} else {
		b, err := json.Marshal(v)
		if err != nil {
			return ""
		}
		shown = string(b)
	}
	return text.Echoed(shown)
}

// field turns the validator's instance location (["personal", "lastName"])
// into the dotted form FOLIO uses in error parameters ("personal.lastName").
func field(location []string) string {
	return strings.Join(location, ".")
}

// ValidateTaking checks a decoded document against the named schema as
// FOLIO's business modules take a body: the members the schema does not
// name are not refused but removed from doc (in place), wherever an
// object of the schema closes its members (additionalProperties false)
// outside an anyOf or oneOf, whose branches the members choose between;
// everything the schema does name is validated as Validate does. It
// returns the names of the members removed, dotted as Violation.Field is.
func (s *Set) ValidateTaking(name string, doc any) ([]string, error) {
	sch, ok := s.byName[name]
	if !ok {
		return nil, fmt.Errorf("schemas: no schema named %q", name)
	}
	var removed []string
	// Each pass removes what one validation found; a member's removal may
	// reveal no other, so two passes suffice, and a bound keeps it so. A
	// document the first pass finds valid (the common case: a client
	// sending only what the schema names) is validated once.
	for range 2 {
		err := sch.Validate(doc)
		if err == nil {
			return removed, nil
		}
		var verr *jsonschema.ValidationError
		if !errors.As(err, &verr) {
			break
		}
		unknown := unknownMembers(verr, false)
		if len(unknown) == 0 {
			break
		}
		for _, u := range unknown {
			v, _ := at(doc, u.location)
			obj, _ := v.(map[string]any)
			for _, p := range u.properties {
				if _, ok := obj[p]; ok {
					delete(obj, p)
					removed = append(removed, field(append(slices.Clone(u.location), p)))
				}
			}
		}
	}
	return removed, s.Validate(name, doc)
}

// unknownMember is an object's members its schema does not name.
type unknownMember struct {
	location   []string
	properties []string
}

// unknownMembers lists the members e's document has that its schema does
// not name, but within an anyOf or oneOf (chosen, here).
func unknownMembers(e *jsonschema.ValidationError, chosen bool) []unknownMember {
	var out []unknownMember
	switch k := e.ErrorKind.(type) {
	case *kind.AnyOf, *kind.OneOf:
		chosen = true
	case *kind.AdditionalProperties:
		if !chosen {
			out = append(out, unknownMember{e.InstanceLocation, k.Properties})
		}
	}
	for _, c := range e.Causes {
		out = append(out, unknownMembers(c, chosen)...)
	}
	return out
}

// at is the value at location in doc, and whether the location is in
// it (a member absent from an object is, as null).
func at(doc any, location []string) (any, bool) {
	for _, step := range location {
		switch v := doc.(type) {
		case map[string]any:
			doc = v[step]
		case []any:
			i, err := strconv.Atoi(step)
			if err != nil || i < 0 || i >= len(v) {
				return nil, false
			}
			doc = v[i]
		default:
			return nil, false
		}
	}
	return doc, true
}
