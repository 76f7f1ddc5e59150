package schemas

import (
	"encoding/json"
	"io/fs"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// validatorWords are the validator's vocabulary, which no message a
// person reads may hold.
var validatorWords = regexp.MustCompile(`(?i)\b(anyOf|oneOf|allOf|got|want|minimum|maximum|minLength|maxLength|minItems|maxItems|pattern|format|schema|\$ref|jsonschema|additionalProperties|validation failed)\b|'`)

// TestEveryRoutesSchemaSaysItsRefusalsInWords walks every route's request
// schema with invalid values in every property the schemas name (at the
// top and one level down) and finds no message in the validator's
// vocabulary, and none without the field it is about.
func TestEveryRoutesSchemaSaysItsRefusalsInWords(t *testing.T) {
	t.Parallel()
	set := MustLoad()
	bad := []any{true, false, "x", "", " ", "\x00", strings.Repeat("x", 5000), json.Number("-1"), json.Number("0"), json.Number("0.5"),
		json.Number("1e12"), json.Number("12345"), []any{}, []any{"x", "x"}, []any{json.Number("1")}, map[string]any{}, nil,
		"0000-01-01T00:00:00Z", "2026-13-45", "not-a-uuid"}
	checked := 0
	done := map[string]bool{}
	for _, r := range Routes {
		if r.Request == "" || done[r.Request] {
			continue
		}
		done[r.Request] = true
		names := propertyNames(t, r.Request)
		docs := []any{[]any{}, "x", json.Number("1"), nil, map[string]any{}}
		for _, n := range names {
			for _, v := range bad {
				docs = append(docs, map[string]any{n: v})
			}
			for _, m := range names {
				for _, v := range bad[:4] {
					docs = append(docs, map[string]any{n: map[string]any{m: v}}, map[string]any{n: []any{map[string]any{m: v}}})
				}
			}
		}
		for _, doc := range docs {
			err := set.Validate(r.Request, doc)
			verr, ok := err.(*ValidationError)
			if !ok {
				if err != nil {
					t.Fatalf("%s: %v", r.Request, err)
				}
				continue
			}
			for _, v := range verr.Violations {
				checked++
				if validatorWords.MatchString(v.Message) {
					b, _ := json.Marshal(doc)
					t.Fatalf("%s %s: %s refused %s saying %q, in the validator's words", r.Method, r.Path, r.Request, b, v.Message)
				}
				if !strings.HasPrefix(v.Message, "must ") && !strings.HasPrefix(v.Message, "is ") &&
					!strings.HasPrefix(v.Message, "needs ") && !strings.HasPrefix(v.Message, "has ") &&
					!strings.HasPrefix(v.Message, "does ") && !strings.HasPrefix(v.Message, "fits ") &&
					!strings.HasPrefix(v.Message, "lists ") && !strings.Contains(v.Message, " must ") && !strings.Contains(v.Message, " is required") {
					t.Fatalf("%s: %q does not read as what the field must be", r.Request, v.Message)
				}
			}
		}
	}
	if checked < 1000 {
		t.Fatalf("only %d refusals checked", checked)
	}
	t.Logf("%d refusals checked", checked)
}

// TestTheSettingsRefusalIsTheBound: a lock lifetime below its bound,
// where "a number in bounds, or null" belongs, is told the bound, not the
// null it is not.
func TestTheSettingsRefusalIsTheBound(t *testing.T) {
	t.Parallel()
	err := MustLoad().Validate("checkout-lock-settings-patch.json", map[string]any{"lockTtl": json.Number("1")})
	verr, ok := err.(*ValidationError)
	if !ok || len(verr.Violations) != 1 || verr.Violations[0] != (Violation{Field: "lockTtl", Message: "must be from 100 to 600000", Value: "1"}) {
		t.Fatalf("got %v, want lockTtl must be from 100 to 600000", err)
	}
	err = MustLoad().Validate("checkout-lock-settings-patch.json", map[string]any{"lockTtl": "long"})
	if verr, ok := err.(*ValidationError); !ok || len(verr.Violations) != 1 || verr.Violations[0].Message != "must be a whole number or null" {
		t.Fatalf("got %v, want lockTtl must be a whole number or null", err)
	}
}

// TestEveryPatternIsSaidInWords: each pattern the schemas use has its
// words (patternWords), so no refusal falls back to "not in the form".
func TestEveryPatternIsSaidInWords(t *testing.T) {
	t.Parallel()
	walkSchemas(t, func(m map[string]any) {
		if p, ok := m["pattern"].(string); ok {
			if _, said := patternWords[p]; !said {
				t.Errorf("the pattern %q has no words in patternWords", p)
			}
		}
	})
}

// propertyNames is every property name the schema file declares, and the
// files it refers to.
func propertyNames(t *testing.T, file string) []string {
	var names []string
	seen := map[string]bool{}
	var visitFile func(string)
	visitFile = func(f string) {
		if seen[f] {
			return
		}
		seen[f] = true
		walkSchema(t, f, func(m map[string]any) {
			if props, ok := m["properties"].(map[string]any); ok {
				for n := range props {
					if !slices.Contains(names, n) {
						names = append(names, n)
					}
				}
			}
			if ref, ok := m["$ref"].(string); ok {
				if target, _, _ := strings.Cut(ref, "#"); target != "" {
					visitFile(target)
				}
			}
		})
	}
	visitFile(file)
	slices.Sort(names)
	return names
}

// walkSchemas calls visit with every object in every schema file.
func walkSchemas(t *testing.T, visit func(map[string]any)) {
	t.Helper()
	err := fs.WalkDir(Files(), ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".json") {
			return err
		}
		walkSchema(t, path, visit)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// walkSchema calls visit with every object in the schema file.
func walkSchema(t *testing.T, file string, visit func(map[string]any)) {
	t.Helper()
	b, err := fs.ReadFile(Files(), file)
	if err != nil {
		t.Fatal(err)
	}
	var doc any
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	var walk func(v any)
	walk = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			visit(x)
			for _, e := range x {
				walk(e)
			}
		case []any:
			for _, e := range x {
				walk(e)
			}
		}
	}
	walk(doc)
}
