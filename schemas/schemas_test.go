package schemas

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/checkoutlock/schemas/text"

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
		{"checkout-lock-request.json", `{"userId":"` + id + `","extra":[1]}`, []Violation{{Field: "extra", Message: "is not a known property"}}},
		{"checkout-lock-request.json", `{"userId":"` + id + `","ttlMs":0}`, []Violation{{Field: "ttlMs", Message: "must be from 100 to 600000", Value: "0"}}},
		{"checkout-lock-request.json", `{"userId":5}`, []Violation{{Field: "userId", Message: "must be a string", Value: "5"}}},
		{"checkout-lock-request.json", `[]`, []Violation{{Message: "must be an object"}}},
		{"checkout-lock.json", `{"id":"` + id + `","userId":"` + id + `","creationDate":"2026-01-02T03:04:05.000Z","expiresAt":"2026-01-02T03:04:08.000Z","ttlMs":3000}`, nil},
		{"errors.json", `{"errors":[{"message":"m","code":"LOCK_HELD","parameters":[{"key":"k","value":"v"}]}]}`, nil},
		{"errors.json", `{"errors":[]}`, []Violation{{Field: "errors", Message: "must list at least one entry", Value: "[]"}}},
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

// TestSecretsAreNotQuoted: a violation names the field of a value the
// schema marks writeOnly (a password, a PIN) or does not describe (an
// unknown property, the members of a value of the wrong type), and quotes
// it in neither its message nor its value; a value it describes is quoted.
func TestSecretsAreNotQuoted(t *testing.T) {
	t.Parallel()
	s := MustLoad()
	const secret = "Tr0ub4dor-sekrit"
	const id = "0bab56e5-1ab6-4ac2-afdf-8b2df0434379"
	for _, tt := range []struct {
		schema, doc string
		fields      []string
	}{
		{"login-request.json", `{"username":"ada","password":"` + secret + strings.Repeat("x", 300) + `"}`, []string{"password"}},
		{"login-request.json", `{"username":"ada","password":["` + secret + `"]}`, []string{"password"}},
		{"login-request.json", `{"username":{"password":"` + secret + `"},"password":"` + secret + `"}`, []string{"username"}},
		{"credentials.json", `{"userId":"` + id + `","password":"` + secret[:5] + `"}`, []string{"password"}},
		{"credentials.json", `{"userId":"not-an-id","password":{"` + secret + `":1}}`, []string{"password", "userId"}},
		{"patron-pin.json", `{"id":"` + id + `","pin":"` + secret + strings.Repeat("9", 64) + `"}`, []string{"pin"}},
		{"patron-pin.json", `{"id":"` + id + `","pin":"1234","password":"` + secret + `"}`, []string{"password"}},
		{"circulation-patron-pin.json", `{"userBarcode":"b","pin":` + "12345678" + `,"newPin":"` + secret + `"}`, []string{"newPin", "pin"}},
		{"account.json", `{"username":"eve","roles":["circulation.role.self-check"],"password":"` + secret + `"}`, []string{"password"}},
		{"account.json", `{"username":"eve","roles":["circulation.role.self-check"],"personal":{"firstName":"Eve","pin":"` + secret + `"}}`,
			[]string{"personal.pin"}},
		{"account.json", `{"username":"eve","roles":["circulation.role.self-check"],"personal":["` + secret + `"]}`, []string{"personal"}},
	} {
		err := s.ValidateJSON(tt.schema, []byte(tt.doc))
		verr, ok := err.(*ValidationError)
		if !ok {
			t.Errorf("%s %s: %v, want a *ValidationError", tt.schema, tt.doc, err)
			continue
		}
		var fields []string
		for _, v := range verr.Violations {
			fields = append(fields, v.Field)
		}
		slices.Sort(fields)
		if !reflect.DeepEqual(fields, tt.fields) {
			t.Errorf("%s %s: violations of %q, want %q", tt.schema, tt.doc, fields, tt.fields)
		}
		if strings.Contains(verr.Error(), secret[:5]) || strings.Contains(fmt.Sprint(verr.Violations), secret[:5]) {
			t.Errorf("%s %s: the secret is quoted: %+v", tt.schema, tt.doc, verr.Violations)
		}
	}
	// What is described and no secret is quoted, as before.
	err := s.ValidateJSON("account.json", []byte(`{"username":"a b","roles":[],"personal":{"firstName":5}}`))
	verr, _ := err.(*ValidationError)
	if verr != nil {
		slices.SortFunc(verr.Violations, func(a, b Violation) int { return strings.Compare(b.Field, a.Field) })
	}
	want := []Violation{
		{Field: "username", Message: "must be one word, without spaces or control characters", Value: "a b"},
		{Field: "personal.firstName", Message: "must be a string", Value: "5"},
	}
	if verr == nil || !reflect.DeepEqual(verr.Violations, want) {
		t.Errorf("an account's described values: %+v, want %+v", err, want)
	}
}

// TestSecretsKeywordsThatQuoteTheValue: where a value may not be quoted, a
// violation of a keyword whose message once quoted it (a pattern's, a
// format's, a bound's) says what the value must be, and quotes nothing.
func TestSecretsKeywordsThatQuoteTheValue(t *testing.T) {
	t.Parallel()
	c := jsonschema.NewCompiler()
	c.AssertFormat()
	doc, err := jsonschema.UnmarshalJSON(strings.NewReader(`{"type":"object","properties":{
		"code":{"type":"string","writeOnly":true,"pattern":"^[0-9]+$"},
		"mail":{"type":"string","writeOnly":true,"format":"email"},
		"n":{"type":"integer","writeOnly":true,"minimum":1000000},
		"either":{"writeOnly":true,"anyOf":[{"type":"string","pattern":"^a"},{"type":"string","pattern":"^b"}]}}}`))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.AddResource("inline.json", doc); err != nil {
		t.Fatal(err)
	}
	sch := c.MustCompile("inline.json")
	instance := map[string]any{"code": "xyz-sekrit", "mail": "sekrit", "n": json.Number("424242"), "either": "c-sekrit"}
	verr := sch.Validate(instance).(*jsonschema.ValidationError)
	vs, _ := (&Set{}).violations(sch, verr, instance)
	got := map[string]string{}
	for _, v := range vs {
		if v.Value != "" || strings.Contains(v.Message, "sekrit") || strings.Contains(v.Message, "424242") {
			t.Errorf("a writeOnly value quoted: %+v", v)
		}
		got[v.Field] += v.Message + ";"
	}
	want := map[string]string{"code": "is not in the form this field takes;", "mail": "must be an email address;", "n": "must be at least 1000000;",
		"either": "is not in the form this field takes;"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("messages %q, want %q", got, want)
	}
}

// TestSecretPropertiesAreWriteOnly: every property whose name says it
// holds a password, a PIN or a secret is marked writeOnly, which is what
// keeps it out of every error (shown). A property whose values are a
// closed list (an enum, such as the self-check settings' patronPin: off
// or required) holds no secret, whatever its name.
func TestSecretPropertiesAreWriteOnly(t *testing.T) {
	t.Parallel()
	secretName := regexp.MustCompile(`(?i)(password|passwd|secret|^pin$|pin$|pincode)`)
	names, err := fs.Glob(files, "*.json")
	if err != nil {
		t.Fatal(err)
	}
	found := 0
	for _, name := range names {
		data, err := files.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		var doc any
		if err := json.Unmarshal(data, &doc); err != nil {
			t.Fatal(err)
		}
		var walk func(v any, path string)
		walk = func(v any, path string) {
			switch c := v.(type) {
			case map[string]any:
				if props, ok := c["properties"].(map[string]any); ok {
					for p, sub := range props {
						if m, ok := sub.(map[string]any); ok && secretName.MatchString(p) && m["enum"] == nil {
							found++
							if m["writeOnly"] != true {
								t.Errorf("%s: property %s%s is not writeOnly", name, path, p)
							}
						}
					}
				}
				for k, sub := range c {
					walk(sub, path+k+"/")
				}
			case []any:
				for _, sub := range c {
					walk(sub, path)
				}
			}
		}
		walk(doc, "")
	}
	if found < 4 {
		t.Errorf("%d secret properties found, want the 4 of credentials, login-request, patron-pin and circulation-patron-pin", found)
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
	// text.MaxEchoed bytes of two-byte characters, and an ellipsis.
	if got := verr.Violations[0].Value; got != strings.Repeat("é", text.MaxEchoed/2)+"…" {
		t.Errorf("value %q, want %d bytes of it and an ellipsis", got, text.MaxEchoed)
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
	for _, s := range []string{`{"a":1,"a":1}`, `[{"b":{"a":1,"\u0061":2}}]`, `{"a":{"a":1}}`, `{"userId":"3a40852d-49fd-4df2-a1f9-6e2641a6e91f","ttlMs":3000}`, `{} `, "{}\n\t\r ", `{}x`, `{} {}`,
		`[1,2.50,1e400]`, `"a"`, ``, ` `, `{"a":`, `{}]`, "{}\v", "{}\u00a0", `null`, `12 34`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		got, gotErr := Decode(data)
		want, wantErr := jsonschema.UnmarshalJSON(bytes.NewReader(data))
		if wantErr == nil && gotErr != nil && namesAMemberTwice(data) {
			return // refused for the name given twice, which the validator takes
		}
		if (gotErr == nil) != (wantErr == nil) {
			t.Fatalf("Decode(%q): error %v, the validator's: %v", data, gotErr, wantErr)
		}
		if gotErr == nil && !reflect.DeepEqual(got, want) {
			t.Fatalf("Decode(%q) = %#v, the validator's: %#v", data, got, want)
		}
	})
}

// TestDecodeBuiltIsDecode: what encoding/json writes (a loan as storage
// builds it, numbers, nesting, escapes) DecodeBuilt decodes as Decode
// does, numbers kept exact.
func TestDecodeBuiltIsDecode(t *testing.T) {
	t.Parallel()
	for _, v := range []any{
		map[string]any{"id": "5d4e6f7a-8b9c-4d0e-9f2a-3b4c5d6e7f8a", "status": map[string]any{"name": "Open"},
			"renewalCount": 3, "fee": json.Number("12.50"), "big": json.Number("1e400"), "note": "<a & \"b\">\u2028"},
		[]any{1, 2.5, nil, true, "x"},
		"a",
	} {
		data, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		want, err := Decode(data)
		if err != nil {
			t.Fatalf("Decode(%s): %v", data, err)
		}
		got, err := DecodeBuilt(data)
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("DecodeBuilt(%s) = %#v, %v; Decode gives %#v", data, got, err, want)
		}
	}
}

// namesAMemberTwice says, walking data's tokens with encoding/json, whether
// an object in it names a member twice: the oracle of Decode's refusal.
func namesAMemberTwice(data []byte) bool {
	dec := json.NewDecoder(bytes.NewReader(data))
	type frame struct {
		object bool
		names  map[string]bool
		key    bool // the next string is a name
	}
	var stack []*frame
	for {
		tok, err := dec.Token()
		if err != nil {
			return false
		}
		var top *frame
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		switch v := tok.(type) {
		case json.Delim:
			switch v {
			case '{', '[':
				if top != nil && top.object {
					top.key = true
				}
				stack = append(stack, &frame{object: v == '{', names: map[string]bool{}, key: v == '{'})
			default:
				stack = stack[:len(stack)-1]
			}
			continue
		case string:
			if top != nil && top.object && top.key {
				if top.names[v] {
					return true
				}
				top.names[v] = true
				top.key = false
				continue
			}
		}
		if top != nil && top.object {
			top.key = true
		}
	}
}

// TestDecodeRefusesANameGivenTwice: a body whose object names a member
// twice, at the top or deeper, escaped or not, is refused with the name
// and where it is; the same names in different objects are fine.
func TestDecodeRefusesANameGivenTwice(t *testing.T) {
	for _, c := range []struct{ body, want string }{
		{`{"itemBarcode":"a","userBarcode":"b","itemBarcode":"c"}`, `the member "itemBarcode" is named more than once in the body`},
		{`{"holder":{"kiosk":"1","k\u0069osk":"2"}}`, `the member "kiosk" is named more than once in the object at /holder`},
		{`[{"a":1},{"a":1,"a":2}]`, `the member "a" is named more than once in the object at /1`},
	} {
		_, err := Decode([]byte(c.body))
		if err == nil || err.Error() != c.want {
			t.Errorf("Decode(%s): %v, want %q", c.body, err, c.want)
		}
	}
	for _, ok := range []string{`{"a":{"a":1},"b":[{"a":2},{"a":3}]}`, "{\"a\":\"\xff\",\"b\":1}"} {
		if _, err := Decode([]byte(ok)); err != nil {
			t.Errorf("Decode(%s): %v, want no error", ok, err)
		}
	}
}

// TestOpenAPIIsGeneratedFromTheRouteTable: each service's committed OpenAPI
// description is what the route table generates (go run
// ./schemas/cmd/descriptors rewrites it), and it holds every route of the
// table, with the permission it requires and the schemas of what it takes
// and answers; every schema it refers to is among its components.
func TestOpenAPIIsGeneratedFromTheRouteTable(t *testing.T) {
	t.Parallel()
	for _, service := range []string{ServiceCirculation, ServiceStorage} {
		path := "../" + service + "/descriptors/openapi.json"
		got, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if want := OpenAPI(service); string(got) != string(want) {
			t.Errorf("%s is not what the route table generates: run make descriptors", path)
		}
		var doc struct {
			OpenAPI string `json:"openapi"`
			Paths   map[string]map[string]struct {
				Permissions []string `json:"x-okapi-permissions"`
				Body        *struct {
					Content map[string]struct {
						Schema struct {
							Ref string `json:"$ref"`
						} `json:"schema"`
					} `json:"content"`
				} `json:"requestBody"`
				Responses map[string]json.RawMessage `json:"responses"`
			} `json:"paths"`
			Components struct {
				Schemas map[string]json.RawMessage `json:"schemas"`
			} `json:"components"`
		}
		if err := json.Unmarshal(got, &doc); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if doc.OpenAPI != "3.1.0" {
			t.Errorf("%s is OpenAPI %q, want 3.1.0", path, doc.OpenAPI)
		}
		routes := RoutesOf(service)
		n := 0
		for _, r := range routes {
			op, ok := doc.Paths[r.Path][strings.ToLower(r.Method)]
			if !ok {
				t.Errorf("%s has no %s %s", path, r.Method, r.Path)
				continue
			}
			n++
			if r.Permission != "" && (len(op.Permissions) != 1 || op.Permissions[0] != r.Permission) {
				t.Errorf("%s: %s %s requires %v, the table says %q", path, r.Method, r.Path, op.Permissions, r.Permission)
			}
			if (op.Body != nil) != (r.Request != "") ||
				r.Request != "" && op.Body.Content["application/json"].Schema.Ref != "#/components/schemas/"+strings.TrimSuffix(r.Request, ".json") {
				t.Errorf("%s: %s %s takes %+v, the table says %q", path, r.Method, r.Path, op.Body, r.Request)
			}
			if len(r.Answers) == 0 {
				t.Errorf("the table says nothing of what %s %s answers", r.Method, r.Path)
			}
			for _, a := range r.Answers {
				if _, ok := op.Responses[strconv.Itoa(a.Status)]; !ok {
					t.Errorf("%s: %s %s does not answer %d", path, r.Method, r.Path, a.Status)
				}
			}
		}
		methods := 0
		for _, ops := range doc.Paths {
			methods += len(ops)
		}
		if methods != n {
			t.Errorf("%s has %d operations, the table %d routes of %s", path, methods, n, service)
		}
		for _, ref := range regexp.MustCompile(`"\$ref": "#/components/schemas/([^"/]+)`).FindAllSubmatch(got, -1) {
			if _, ok := doc.Components.Schemas[string(ref[1])]; !ok {
				t.Errorf("%s refers to the schema %s, which it does not hold", path, ref[1])
			}
		}
	}
}

// TestValidateTakingIgnoresWhatTheSchemaDoesNotName: a body as FOLIO's
// clients send it keeps what the schema names and loses what it does not,
// nested members too; a member it names of the wrong type is still a
// violation, listed alone.
func TestValidateTakingIgnoresWhatTheSchemaDoesNotName(t *testing.T) {
	t.Parallel()
	s := MustLoad()
	const sp = "c4c90014-c8c9-4ade-8f24-b5e313319f4b"
	doc, err := Decode([]byte(`{"id":"x","itemBarcode":"i","userBarcode":"u","servicePointId":"` + sp + `",
		"item":{"title":"t"},"overrideBlocks":{"comment":"c","itemLimitBlock":{"extra":1},"why":2}}`))
	if err != nil {
		t.Fatal(err)
	}
	removed, err := s.ValidateTaking("check-out-by-barcode-request.json", doc)
	if err != nil {
		t.Fatalf("taken: %v", err)
	}
	slices.Sort(removed)
	if want := []string{"id", "item", "overrideBlocks.itemLimitBlock.extra", "overrideBlocks.why"}; !slices.Equal(removed, want) {
		t.Errorf("removed %v, want %v", removed, want)
	}
	b, _ := json.Marshal(doc)
	if want := `{"itemBarcode":"i","overrideBlocks":{"comment":"c","itemLimitBlock":{}},"servicePointId":"` + sp + `","userBarcode":"u"}`; string(b) != want {
		t.Errorf("taken as %s, want %s", b, want)
	}
	doc, _ = Decode([]byte(`{"id":"x","itemBarcode":["i"],"userBarcode":"u","servicePointId":"` + sp + `"}`))
	_, err = s.ValidateTaking("check-out-by-barcode-request.json", doc)
	var verr *ValidationError
	if !errors.As(err, &verr) || len(verr.Violations) != 1 || verr.Violations[0].Field != "itemBarcode" {
		t.Errorf("a wrong-typed member: %v, want itemBarcode alone", err)
	}
}
