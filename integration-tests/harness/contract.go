package harness

import (
	"bytes"
	"encoding/json"
	"fmt"
	"mime"
	"net/http"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/checkoutlock/schemas"
)

// contract is one service's OpenAPI description as the tests hold every
// answer to: each operation's path as a pattern, the statuses it
// declares, and the compiled schema of each JSON body it declares.
type contract struct {
	ops []contractOp
}

type contractOp struct {
	method  string
	path    string // the template, "/circulation/loans/{id}"
	pattern *regexp.Regexp
	// request is the schema of the body it takes, nil for none.
	request *jsonschema.Schema
	// lenient, for a body whose members the schema does not name are
	// ignored (Route.Lenient), names that schema.
	lenient string
	// answers are the declared statuses ("201", "4XX"), each with the
	// schema of its JSON body (nil for no body or one not JSON).
	answers map[string]*jsonschema.Schema
}

// contracts are the services' descriptions, made once per test binary.
// lenientSchemas are the schemas a lenient body is held to.
var lenientSchemas = sync.OnceValue(schemas.MustLoad)

var contracts = sync.OnceValues(func() (map[string]*contract, error) {
	out := map[string]*contract{}
	for _, service := range []string{schemas.ServiceCirculation, schemas.ServiceStorage} {
		c, err := loadContract(service)
		if err != nil {
			return nil, fmt.Errorf("%s's OpenAPI description: %w", service, err)
		}
		out[service] = c
	}
	return out, nil
})

// loadContract compiles service's description (schemas.OpenAPI, what the
// service serves at schemas.OpenAPIPath): its component schemas by
// JSON Schema 2020-12, the dialect it declares.
func loadContract(service string) (*contract, error) {
	raw := schemas.OpenAPI(service)
	var doc struct {
		Paths map[string]map[string]struct {
			RequestBody *struct {
				Content map[string]struct {
					Schema map[string]any `json:"schema"`
				} `json:"content"`
			} `json:"requestBody"`
			Responses map[string]struct {
				Ref     string `json:"$ref"`
				Content map[string]struct {
					Schema map[string]any `json:"schema"`
				} `json:"content"`
			} `json:"responses"`
		} `json:"paths"`
		Components struct {
			Schemas map[string]any `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		return nil, err
	}
	// The components are one resource: every reference of the
	// description ("#/components/schemas/uuid") resolves inside it.
	const base = "https://checkoutlock.invalid/openapi.json"
	compiler := jsonschema.NewCompiler()
	compiler.DefaultDraft(jsonschema.Draft2020)
	compiler.AssertFormat()
	compiler.RegisterFormat(&jsonschema.Format{Name: "date-time", Validate: func(v any) error {
		s, ok := v.(string)
		if !ok {
			return nil
		}
		_, err := schemas.ParseDateTime(s)
		return err
	}})
	components, err := jsonschema.UnmarshalJSON(bytes.NewReader(mustJSON(map[string]any{
		"$schema": "https://json-schema.org/draft/2020-12/schema", "$defs": map[string]any{},
		"components": map[string]any{"schemas": doc.Components.Schemas}})))
	if err != nil {
		return nil, err
	}
	if err := compiler.AddResource(base, components); err != nil {
		return nil, err
	}
	compiled := map[string]*jsonschema.Schema{}
	compile := func(s map[string]any) (*jsonschema.Schema, error) {
		ref, _ := s["$ref"].(string)
		if ref == "" {
			return nil, nil
		}
		if sch, ok := compiled[ref]; ok {
			return sch, nil
		}
		sch, err := compiler.Compile(base + ref)
		if err != nil {
			return nil, err
		}
		compiled[ref] = sch
		return sch, nil
	}
	errorSchema, err := compile(map[string]any{"$ref": "#/components/schemas/errors"})
	if err != nil {
		return nil, err
	}
	c := &contract{}
	for path, ops := range doc.Paths {
		pattern := regexp.MustCompile("^" + regexp.MustCompile(`\\\{[^/]+\\\}`).ReplaceAllString(regexp.QuoteMeta(path), `[^/]+`) + "$")
		for method, op := range ops {
			o := contractOp{method: strings.ToUpper(method), path: path, pattern: pattern, answers: map[string]*jsonschema.Schema{}}
			if op.RequestBody != nil {
				body := op.RequestBody.Content["application/json"].Schema
				if o.request, err = compile(body); err != nil {
					return nil, err
				}
				if r, ok := schemas.RouteFor(service, o.method, path); ok && r.Lenient {
					// Members the schema does not name are ignored: the
					// body is held to the schema as the service holds it
					// (the description says so: schemas.LenientExtension).
					o.lenient = r.Request
				}
			}
			for status, r := range op.Responses {
				if r.Ref != "" {
					o.answers[status] = errorSchema
					continue
				}
				if o.answers[status], err = compile(r.Content["application/json"].Schema); err != nil {
					return nil, err
				}
			}
			c.ops = append(c.ops, o)
		}
	}
	return c, nil
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

// find is the operation a request is routed to: the one whose template
// matches the path, a path without parameters before one with them (as
// the services' router prefers "/check-out-lock-storage/history" to
// "/check-out-lock-storage/{id}").
func (c *contract) find(method, path string) *contractOp {
	var found *contractOp
	for i := range c.ops {
		o := &c.ops[i]
		if o.method != method || !o.pattern.MatchString(path) {
			continue
		}
		if found == nil || strings.Count(found.path, "{") > strings.Count(o.path, "{") {
			found = o
		}
	}
	return found
}

// CheckContract holds one exchange with a service to the service's OpenAPI
// description, saying what differs ("" when nothing does): a route not in
// it, a status it does not declare, a JSON request body (when the answer
// is a success) or answer body its schema refuses. Only this version's
// binaries are held to it (not a baseline's of the benchmarks), and only
// a route the description knows is checked for its body.
func CheckContract(p *Process, method, path string, reqBody []byte, status int, header http.Header, body []byte) string {
	service := filepath.Base(p.bin)
	if filepath.Dir(p.bin) != filepath.Clean(BinDir()) || service != schemas.ServiceCirculation && service != schemas.ServiceStorage {
		return ""
	}
	return CheckContractOf(service, method, path, reqBody, status, header, body)
}

// CheckContractOf is CheckContract for an exchange with service.
func CheckContractOf(service, method, path string, reqBody []byte, status int, header http.Header, body []byte) string {
	all, err := contracts()
	if err != nil {
		return err.Error()
	}
	path, _, _ = strings.Cut(path, "?")
	if len(path) > 1 {
		path = strings.TrimSuffix(path, "/") // as the services' router does
	}
	op := all[service].find(method, path)
	if op == nil {
		if status == http.StatusNotFound || status == http.StatusMethodNotAllowed {
			return "" // a route no one serves, refused as such
		}
		return fmt.Sprintf("%s %s answered %d: not a route of %s's description", method, path, status, service)
	}
	key := strconv.Itoa(status)
	sch, ok := op.answers[key]
	if !ok {
		key = key[:1] + "XX"
		sch, ok = op.answers[key]
	}
	if !ok {
		return fmt.Sprintf("%s %s (%s %s) answered %d, which its description does not declare", method, path, op.method, op.path, status)
	}
	if status < 300 && op.lenient != "" && len(reqBody) > 0 {
		doc, err := schemas.Decode(reqBody)
		if err == nil {
			_, err = lenientSchemas().ValidateTaking(op.lenient, doc)
		}
		if err != nil {
			return fmt.Sprintf("%s %s took a body its description refuses: %v", method, path, err)
		}
	} else if status < 300 && op.request != nil && len(reqBody) > 0 {
		if msg := validate(op.request, reqBody); msg != "" {
			return fmt.Sprintf("%s %s took a body its description refuses: %s", method, path, msg)
		}
	}
	if sch == nil || len(body) == 0 && status == http.StatusNoContent {
		return ""
	}
	if mt, _, _ := mime.ParseMediaType(header.Get("Content-Type")); mt != "application/json" {
		return fmt.Sprintf("%s %s answered %d with %q, its description says application/json", method, path, status, header.Get("Content-Type"))
	}
	if msg := validate(sch, body); msg != "" {
		return fmt.Sprintf("%s %s answered %d with a body its description refuses: %s\n%s", method, path, status, msg, truncateBody(body))
	}
	return ""
}

func validate(sch *jsonschema.Schema, body []byte) string {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(body))
	if err != nil {
		return "not JSON: " + err.Error()
	}
	if err := sch.Validate(doc); err != nil {
		return err.Error()
	}
	return ""
}

func truncateBody(b []byte) string {
	if len(b) > 600 {
		return string(b[:600]) + "…"
	}
	return string(b)
}
