package schemas

import (
	"bytes"
	"encoding/json"
	"os"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
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
		{"checkout-lock-request.json", `{"userId":"` + id + `","ttlMs":0}`, []Violation{{Field: "ttlMs", Message: "minimum: got 0, want 100", Value: "0"}}},
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

// FuzzValidTenantIsThePattern: ValidTenant, which reads the bytes itself,
// answers as TenantPattern and the pg_ rule do, on every string fuzzing
// finds (go test -fuzz FuzzValidTenantIsThePattern ./schemas).
func FuzzValidTenantIsThePattern(f *testing.F) {
	pattern := regexp.MustCompile(TenantPattern)
	for _, s := range []string{"diku", "", "pg_x", "a_", "Z", "a2345678901234567890123456789012", "diku\n", "é", "a\x00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if got, want := ValidTenant(s), pattern.MatchString(s) && !strings.HasPrefix(s, "pg_"); got != want {
			t.Errorf("ValidTenant(%q) = %v, the pattern says %v", s, got, want)
		}
	})
}

// TestDescriptorsAreGeneratedFromThePermissionTable: the committed module
// descriptors are what the table generates (go run ./schemas/cmd/descriptors
// rewrites them), valid JSON with FOLIO's top-level fields.
func TestDescriptorsAreGeneratedFromThePermissionTable(t *testing.T) {
	t.Parallel()
	for _, service := range []string{ServiceCirculation, ServiceStorage, ServiceSIP2} {
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
	readme, err := os.ReadFile("../docs/security.md")
	if err != nil {
		t.Fatal(err)
	}
	s := string(readme)
	begin, end := strings.Index(s, PermissionsBegin), strings.Index(s, PermissionsEnd)
	if begin < 0 || end < begin {
		t.Fatal("docs/security.md has no permission table markers")
	}
	if got := s[begin+len(PermissionsBegin) : end]; strings.TrimSpace(got) != strings.TrimSpace(PermissionsMarkdown()) {
		t.Error("docs/security.md's permission table is not what the permission table generates: run go run ./schemas/cmd/descriptors")
	}
}

// TestPermissionForEitherNotation: a route's permission is found by its
// path in FOLIO's notation and in the router's, which the services ask with.
func TestPermissionForEitherNotation(t *testing.T) {
	t.Parallel()
	router := strings.NewReplacer("{", ":", "}", "")
	for _, r := range Routes {
		for _, path := range []string{r.Path, router.Replace(r.Path)} {
			if got, ok := PermissionFor(r.Service, r.Method, path); !ok || got != r.Permission {
				t.Errorf("PermissionFor(%s, %s, %s) = %q, %v; want %q", r.Service, r.Method, path, got, ok, r.Permission)
			}
		}
	}
	if _, ok := PermissionFor(ServiceStorage, "GET", "/check-out-lock-storage/{id}/more"); ok {
		t.Error("a path not in the table was found")
	}
}

// FuzzValidUUIDIsTheSchema: ValidUUID, which recognises the canonical form
// without the validator, answers as uuid.json does, on every string
// fuzzing finds (go test -fuzz FuzzValidUUIDIsTheSchema ./schemas).
func FuzzValidUUIDIsTheSchema(f *testing.F) {
	s := MustLoad()
	for _, v := range []string{"3a40852d-49fd-4df2-a1f9-6e2641a6e91f", "3A40852D-49FD-4DF2-A1F9-6E2641A6E91F", "",
		"3a40852d49fd4df2a1f96e2641a6e91f", "{3a40852d-49fd-4df2-a1f9-6e2641a6e91f}", "urn:uuid:3a40852d-49fd-4df2-a1f9-6e2641a6e91f",
		"3a40852d-49fd-4df2-a1f9-6e2641a6e91g", "3a40852d+49fd-4df2-a1f9-6e2641a6e91f"} {
		f.Add(v)
	}
	f.Fuzz(func(t *testing.T, v string) {
		if got, want := s.ValidUUID(v), s.Validate("uuid.json", v) == nil; got != want {
			t.Errorf("ValidUUID(%q) = %v, uuid.json says %v", v, got, want)
		}
	})
}

// FuzzDecodeIsTheValidators: Decode, which looks at the bytes after the
// value itself, accepts what the validator's jsonschema.UnmarshalJSON
// accepts and decodes it to the same document, on every input fuzzing
// finds (go test -fuzz FuzzDecodeIsTheValidators ./schemas).
func FuzzDecodeIsTheValidators(f *testing.F) {
	for _, s := range []string{`{"userId":"3a40852d-49fd-4df2-a1f9-6e2641a6e91f","ttlMs":3000}`, `{} `, "{}\n\t\r ", `{}x`, `{} {}`,
		`[1,2.50,1e400]`, `"a"`, ``, ` `, `{"a":`, `{}]`, "{}\v", "{}\u00a0", `null`, `12 34`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		got, gotErr := Decode(data)
		want, wantErr := jsonschema.UnmarshalJSON(bytes.NewReader(data))
		if (gotErr == nil) != (wantErr == nil) {
			t.Fatalf("Decode(%q): error %v, the validator's: %v", data, gotErr, wantErr)
		}
		if gotErr == nil && !reflect.DeepEqual(got, want) {
			t.Fatalf("Decode(%q) = %#v, the validator's: %#v", data, got, want)
		}
	})
}
