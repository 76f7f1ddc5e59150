package schemas

import (
	"encoding/json"
	"fmt"
	"math"
	"math/big"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
)

// What a refused value should have been, in words a librarian, an
// operator or an integrator reads without knowing JSON Schema: each of the
// validator's error kinds said as a requirement ("must be at least 100"),
// never quoting the value (the violation's Value carries it, where it may
// be shown) nor the validator's vocabulary. The API's 422s, the pages and
// the SIP2 door's screen messages all say these words.

// describe is what the value e is about should have been: its kind's
// words, a bound with the schema's other bound beside it ("must be from
// 100 to 600000").
func (s *Set) describe(e *jsonschema.ValidationError) string {
	sch := s.at[e.SchemaURL]
	switch e.ErrorKind.(type) {
	case *kind.Minimum, *kind.Maximum:
		if sch != nil && sch.Minimum != nil && sch.Maximum != nil {
			return "must be from " + number(sch.Minimum) + " to " + number(sch.Maximum)
		}
	case *kind.MinLength, *kind.MaxLength:
		if sch != nil && sch.MinLength != nil && sch.MaxLength != nil && *sch.MinLength > 1 {
			return fmt.Sprintf("must be from %d to %d characters long", *sch.MinLength, *sch.MaxLength)
		}
	}
	return describe(e.ErrorKind)
}

// describe is what a value that broke k should have been.
func describe(k jsonschema.ErrorKind) string {
	switch k := k.(type) {
	case *kind.Type:
		return "must be " + typeWords(k.Want)
	case *kind.Enum:
		vals := make([]string, len(k.Want))
		for i, v := range k.Want {
			vals[i] = literal(v)
		}
		if len(vals) == 1 {
			return "must be " + vals[0]
		}
		return "must be one of " + strings.Join(vals, ", ")
	case *kind.Const:
		return "must be " + literal(k.Want)
	case *kind.Format:
		if k.Want == "date-time" && k.Err != nil {
			return k.Err.Error() // ParseDateTime's own words
		}
		return "must be " + formatWords(k.Want)
	case *kind.Pattern:
		if w, ok := patternWords[k.Want]; ok {
			return w
		}
		return "is not in the form this field takes"
	case *kind.Minimum:
		return "must be at least " + number(k.Want)
	case *kind.Maximum:
		return "must be at most " + number(k.Want)
	case *kind.ExclusiveMinimum:
		return "must be more than " + number(k.Want)
	case *kind.ExclusiveMaximum:
		return "must be less than " + number(k.Want)
	case *kind.MultipleOf:
		return "must be a multiple of " + number(k.Want)
	case *kind.MinLength:
		if k.Want == 1 {
			return "must not be empty"
		}
		return fmt.Sprintf("must be at least %d characters long", k.Want)
	case *kind.MaxLength:
		return fmt.Sprintf("must be at most %d characters long", k.Want)
	case *kind.MinItems:
		if k.Want == 1 {
			return "must list at least one entry"
		}
		return fmt.Sprintf("must list at least %d entries", k.Want)
	case *kind.MaxItems:
		return fmt.Sprintf("must list at most %d entries", k.Want)
	case *kind.UniqueItems:
		return "must not list the same entry twice"
	case *kind.MinProperties:
		return fmt.Sprintf("must have at least %d fields", k.Want)
	case *kind.MaxProperties:
		return fmt.Sprintf("must have at most %d fields", k.Want)
	case *kind.Required:
		return "is required"
	case *kind.AdditionalProperties:
		return "is not a known property"
	case *kind.AdditionalItems:
		return "lists more entries than allowed"
	case *kind.Dependency:
		return "needs " + strings.Join(k.Missing, " and ") + " as well"
	case *kind.DependentRequired:
		return "needs " + strings.Join(k.Missing, " and ") + " as well"
	case *kind.PropertyNames:
		return "has a field whose name is not allowed"
	case *kind.FalseSchema, *kind.Not:
		return "is not allowed here"
	case *kind.Contains, *kind.MinContains, *kind.MaxContains:
		return "does not list the entries it must"
	case *kind.OneOf:
		return "fits more than one of the forms it may take"
	}
	return "is not valid here"
}

// typeWords is JSON types said in words: "a string or null".
func typeWords(types []string) string {
	words := make([]string, 0, len(types))
	for _, t := range types {
		w := typeNames[t]
		if w == "" {
			w = t
		}
		if !slices.Contains(words, w) {
			words = append(words, w)
		}
	}
	return orList(words)
}

// typeNames are JSON's types in words.
var typeNames = map[string]string{"object": "an object", "array": "a list", "string": "a string", "integer": "a whole number",
	"number": "a number", "boolean": "true or false", "null": "null"}

// formatWords says what a value of a format looks like.
func formatWords(format string) string {
	switch format {
	case "uuid":
		return "a UUID (8-4-4-4-12 hexadecimal digits)"
	case "date-time":
		return "a date and time with its offset, such as 2026-11-27T10:14:00Z"
	case "date":
		return "a date such as 2026-11-27"
	case "email":
		return "an email address"
	case "uri":
		return "an absolute URL"
	}
	return "a " + format
}

// patternWords says, for each pattern the schemas use, what it asks;
// TestEveryPatternIsSaidInWords holds every pattern in the files to it.
var patternWords = map[string]string{
	`^[^\x00]*$`:                           "must not hold a NUL character",
	`^[^\s\p{Z}\p{C}]+$`:                   "must be one word, without spaces or control characters",
	`^[A-Z][A-Z0-9_]*$`:                    "must be capital letters, digits and _, beginning with a letter",
	`^[0-9]+\.[0-9]{2}$`:                   "must be an amount with two decimal places, such as 5.00",
	`^[0-9a-f]{32}$`:                       "must be 32 lowercase hexadecimal digits",
	`[^\s\p{Z}\p{C}]`:                      "must hold more than spaces",
	TenantPattern:                          "must be a tenant id: lowercase letters, digits and _, beginning with a letter",
	AmountPattern:                          "must be an amount of at most two decimal places, such as 5.00",
	`^\d{4}-\d{2}-\d{2}$`:                  "must be a date, YYYY-MM-DD",
	`^([01]\d|2[0-3]):[0-5]\d(:[0-5]\d)?$`: "must be a time of day, HH:MM or HH:MM:SS",
}

// literal is a JSON value as a message quotes it: a string as it is, in
// quotation marks, anything else as JSON.
func literal(v any) string {
	if s, ok := v.(string); ok {
		return `"` + s + `"`
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

// number is a bound as a person writes it: 100, 0.5.
func number(r *big.Rat) string {
	if r.IsInt() {
		return r.Num().String()
	}
	f, _ := r.Float64()
	return fmt.Sprint(f)
}

// orList joins words with commas and a last "or".
func orList(words []string) string {
	switch len(words) {
	case 0:
		return ""
	case 1:
		return words[0]
	}
	return strings.Join(words[:len(words)-1], ", ") + " or " + words[len(words)-1]
}

// leaves is the violations at the ends of e's tree.
func leaves(e *jsonschema.ValidationError) []*jsonschema.ValidationError {
	if len(e.Causes) == 0 {
		return []*jsonschema.ValidationError{e}
	}
	var out []*jsonschema.ValidationError
	for _, c := range e.Causes {
		out = append(out, leaves(c)...)
	}
	return out
}

// onlyType says whether every violation of a failed branch is of the
// value's type at the branch's own location: the branch is for another
// kind of value than the one sent (the null of "a number or null" when a
// number was sent), and says nothing about what is wrong with it.
func onlyType(branch *jsonschema.ValidationError, at []string) bool {
	for _, l := range leaves(branch) {
		if _, ok := l.ErrorKind.(*kind.Type); !ok || len(l.InstanceLocation) != len(at) {
			return false
		}
	}
	return true
}

// index adds sch and every schema under it to at, by location.
func index(at map[string]*jsonschema.Schema, sch *jsonschema.Schema) {
	if sch == nil || at[sch.Location] != nil {
		return
	}
	at[sch.Location] = sch
	var visit func(v reflect.Value)
	visit = func(v reflect.Value) {
		switch v.Kind() {
		case reflect.Pointer:
			if s, ok := v.Interface().(*jsonschema.Schema); ok {
				index(at, s)
			}
		case reflect.Interface:
			if !v.IsNil() {
				visit(v.Elem())
			}
		case reflect.Slice:
			for i := range v.Len() {
				visit(v.Index(i))
			}
		case reflect.Map:
			for it := v.MapRange(); it.Next(); {
				visit(it.Value())
			}
		}
	}
	v := reflect.ValueOf(sch).Elem()
	for i := range v.NumField() {
		if v.Type().Field(i).IsExported() {
			visit(v.Field(i))
		}
	}
}

// DurationWords is a duration of ms milliseconds as people read one, on
// the pages, in their CSV and in what the services say:
// under a minute in seconds to the millisecond ("1.009 s"), from a minute
// on in hours, minutes and seconds ("4 min 29 s"). The pages' own
// (app.js's duration, for what they work out as a person types) is held to
// it, value for value, by TestPagesSayDurationsAndTenantsInPeoplesWords.
func DurationWords(ms int) string {
	if ms < 60000 {
		return strconv.FormatFloat(float64(ms)/1000, 'f', -1, 64) + " s"
	}
	secs := int(math.Round(float64(ms) / 1000))
	var parts []string
	for _, u := range []struct {
		n    int
		unit string
	}{{secs / 3600, "h"}, {secs / 60 % 60, "min"}, {secs % 60, "s"}} {
		if u.n > 0 {
			parts = append(parts, strconv.Itoa(u.n)+" "+u.unit)
		}
	}
	return strings.Join(parts, " ")
}
