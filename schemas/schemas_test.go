package schemas

import (
	"encoding/json"
	"os"
	"strings"
	"testing"
)

func TestEverySchemaCompiles(t *testing.T) {
	t.Parallel()
	s, err := Load()
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"uuid.json", "errors.json", "checkout-lock-request.json", "checkout-lock.json",
		"checkout-locks.json", "tenant-attributes.json", "tenant-job.json"} {
		found := false
		for _, n := range s.Names() {
			found = found || n == name
		}
		if !found {
			t.Errorf("schema %s missing from %v", name, s.Names())
		}
	}
}

func TestValidation(t *testing.T) {
	t.Parallel()
	s := MustLoad()
	const id = "0bab56e5-1ab6-4ac2-afdf-8b2df0434379"
	tests := []struct {
		schema, doc string
		want        []Violation // nil: valid
	}{
		{"checkout-lock-request.json", `{"userId":"` + id + `"}`, nil},
		{"checkout-lock-request.json", `{"userId":"` + id + `","ttlMs":2000}`, nil},
		{"checkout-lock-request.json", `{}`, []Violation{{Field: "userId", Message: "is required"}}},
		{"checkout-lock-request.json", `{"userId":"` + id + `","extra":[1]}`, []Violation{{Field: "extra", Message: "is not a known property", Value: "[1]"}}},
		{"checkout-lock-request.json", `{"userId":"` + id + `","ttlMs":0}`, []Violation{{Field: "ttlMs", Message: "minimum: got 0, want 1", Value: "0"}}},
		{"checkout-lock-request.json", `{"userId":5}`, []Violation{{Field: "userId", Message: "got number, want string", Value: "5"}}},
		{"checkout-lock-request.json", `[]`, []Violation{{Message: "got array, want object"}}},
		{"checkout-lock.json", `{"id":"` + id + `","userId":"` + id + `","creationDate":"2026-01-02T03:04:05.000Z","expiresAt":"2026-01-02T03:04:08.000Z","ttlMs":3000}`, nil},
		{"errors.json", `{"errors":[{"message":"m","code":"LOCK_HELD","parameters":[{"key":"k","value":"v"}]}]}`, nil},
		{"errors.json", `{"errors":[]}`, []Violation{{Field: "errors", Message: "minItems: got 0, want 1", Value: "[]"}}},
		{"tenant-attributes.json", `{"module_to":"mod-circulation-storage-1.0.0","parameters":[{"key":"loadSample","value":"true"}]}`, nil},
		{"tenant-attributes.json", `{"purge":true}`, nil},
	}
	for _, tt := range tests {
		err := s.ValidateJSON(tt.schema, []byte(tt.doc))
		if tt.want == nil {
			if err != nil {
				t.Errorf("%s %s: %v, want valid", tt.schema, tt.doc, err)
			}
			continue
		}
		verr, ok := err.(*ValidationError)
		if !ok {
			t.Errorf("%s %s: %v, want a *ValidationError", tt.schema, tt.doc, err)
			continue
		}
		if len(verr.Violations) != len(tt.want) {
			t.Errorf("%s %s: %+v, want %+v", tt.schema, tt.doc, verr.Violations, tt.want)
			continue
		}
		for i := range tt.want {
			if verr.Violations[i] != tt.want[i] {
				t.Errorf("%s %s: violation %d = %+v, want %+v", tt.schema, tt.doc, i, verr.Violations[i], tt.want[i])
			}
		}
	}
}

func TestLongValuesAreCut(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("é", 300)
	err := MustLoad().ValidateJSON("checkout-lock-request.json", []byte(`{"userId":"`+long+`"}`))
	verr, ok := err.(*ValidationError)
	if !ok || len(verr.Violations) != 1 {
		t.Fatalf("got %v", err)
	}
	if got := []rune(verr.Violations[0].Value); len(got) != 101 {
		t.Errorf("value has %d runes, want 100 and an ellipsis", len(got))
	}
}

func TestDecodeRejectsTrailingData(t *testing.T) {
	t.Parallel()
	if _, err := Decode([]byte(`{} {}`)); err == nil {
		t.Error("Decode accepted two documents")
	}
}

func TestValidTenant(t *testing.T) {
	t.Parallel()
	for tenant, want := range map[string]bool{
		"diku": true, "a": true, "t_1": true, "a234567890123456789012345678901": true,
		"": false, "A": false, "1a": false, "_a": false, "a-b": false, "a2345678901234567890123456789012": false,
		"pg_x": false, "pg_": false, "pgx": true, "apg_": true, "diku\n": false,
	} {
		if got := ValidTenant(tenant); got != want {
			t.Errorf("ValidTenant(%q) = %v, want %v", tenant, got, want)
		}
	}
}

// TestDescriptorsAreGeneratedFromThePermissionTable: the committed module
// descriptors are what the table generates (go run ./schemas/cmd/descriptors
// rewrites them), valid JSON with FOLIO's top-level fields.
func TestDescriptorsAreGeneratedFromThePermissionTable(t *testing.T) {
	t.Parallel()
	for _, service := range []string{ServiceCirculation, ServiceStorage} {
		path := "../" + service + "/descriptors/ModuleDescriptor-template.json"
		got, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if want := Descriptor(service); string(got) != string(want) {
			t.Errorf("%s is not what the permission table generates: run go run ./schemas/cmd/descriptors", path)
		}
		var d map[string]json.RawMessage
		if err := json.Unmarshal(got, &d); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		for _, field := range []string{"id", "name", "provides", "requires", "permissionSets", "launchDescriptor"} {
			if _, ok := d[field]; !ok {
				t.Errorf("%s has no %s", path, field)
			}
		}
	}
}

// TestEveryRoutePermissionIsDeclared: every permission a route requires is
// declared in its module's descriptor, and every role's permissions exist.
func TestEveryRoutePermissionIsDeclared(t *testing.T) {
	t.Parallel()
	declared := map[string]bool{}
	for _, service := range []string{ServiceCirculation, ServiceStorage} {
		var d struct {
			PermissionSets []struct {
				PermissionName string `json:"permissionName"`
			} `json:"permissionSets"`
		}
		if err := json.Unmarshal(Descriptor(service), &d); err != nil {
			t.Fatal(err)
		}
		for _, p := range d.PermissionSets {
			declared[p.PermissionName] = true
		}
	}
	for _, r := range Routes {
		if r.Permission != "" && !declared[r.Permission] {
			t.Errorf("%s %s requires %s, which no descriptor declares", r.Method, r.Path, r.Permission)
		}
	}
	for _, s := range PermissionSets {
		for _, p := range s.Permissions {
			if !declared[p] {
				t.Errorf("role %s holds %s, which no descriptor declares", s.Name, p)
			}
		}
	}
}

// TestREADMEPermissionTableIsGenerated: the README's permission table is
// what the table generates.
func TestREADMEPermissionTableIsGenerated(t *testing.T) {
	t.Parallel()
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	s := string(readme)
	begin, end := strings.Index(s, PermissionsBegin), strings.Index(s, PermissionsEnd)
	if begin < 0 || end < begin {
		t.Fatal("README.md has no permission table markers")
	}
	if got := s[begin+len(PermissionsBegin) : end]; strings.TrimSpace(got) != strings.TrimSpace(PermissionsMarkdown()) {
		t.Error("README.md's permission table is not what the permission table generates: run go run ./schemas/cmd/descriptors")
	}
}
