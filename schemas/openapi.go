package schemas

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io/fs"
	"net/http"
	"slices"
	"strconv"
	"strings"
)

// OpenAPIPath is where each service serves its OpenAPI description.
const OpenAPIPath = "/_/openapi.json"

// OpenAPI is service's OpenAPI 3.1 description, generated from the route
// table (Routes: every route, its parameters, the schemas of what it takes
// and answers, and the permission it needs) and the JSON Schemas of this
// package, which it carries as its components. Nothing of it is written by
// hand: go run ./schemas/cmd/descriptors writes it beside the module
// descriptor, and the service serves it at OpenAPIPath.
func OpenAPI(service string) []byte {
	paths := map[string]map[string]any{}
	used := map[string]bool{"errors.json": true}
	for _, r := range RoutesOf(service) {
		op := operation(r)
		if r.Request != "" {
			used[r.Request] = true
		}
		for _, a := range r.Answers {
			if a.Schema != "" {
				used[a.Schema] = true
			}
		}
		if paths[r.Path] == nil {
			paths[r.Path] = map[string]any{}
		}
		paths[r.Path][strings.ToLower(r.Method)] = op
	}
	doc := map[string]any{
		"openapi":           "3.1.0",
		"jsonSchemaDialect": "https://json-schema.org/draft/2020-12/schema",
		"info": map[string]any{
			"title":   service,
			"version": ModuleIDs[service][strings.LastIndex(ModuleIDs[service], "-")+1:],
			"description": "Generated from the route table and the JSON Schemas of package schemas; " +
				"x-okapi-permissions is the permission a route requires, x-module-permissions what its handler may do in the services it calls.",
		},
		"paths": paths,
		"components": map[string]any{
			"schemas": componentSchemas(used),
			"securitySchemes": map[string]any{
				"okapiToken": map[string]any{"type": "apiKey", "in": "header", "name": "X-Okapi-Token",
					"description": "A signed token (FOLIO's access token) naming the tenant, the user and their permissions."},
			},
			"responses": map[string]any{
				"Error": map[string]any{
					"description": "The error envelope, in FOLIO's shape, with a stable code.",
					"content":     map[string]any{"application/json": map[string]any{"schema": ref("errors.json")}},
				},
			},
		},
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(doc); err != nil {
		panic(err) // maps, strings and decoded JSON only
	}
	return b.Bytes()
}

// operation is one route's OpenAPI operation.
func operation(r Route) map[string]any {
	op := map[string]any{
		"operationId": operationID(r),
		"tags":        []string{r.Interface},
	}
	if r.Display != "" {
		op["summary"] = r.Display
	}
	var params []any
	for _, p := range strings.Split(r.Path, "/") {
		if strings.HasPrefix(p, "{") && strings.HasSuffix(p, "}") {
			params = append(params, map[string]any{"name": p[1 : len(p)-1], "in": "path", "required": true,
				"schema": map[string]any{"type": "string"}})
		}
	}
	for _, q := range r.Query {
		params = append(params, map[string]any{"name": q, "in": "query", "schema": map[string]any{"type": "string"}})
	}
	for _, h := range r.Headers {
		params = append(params, map[string]any{"name": h, "in": "header", "schema": map[string]any{"type": "string"}})
	}
	if r.Interface != InterfaceAdmin {
		params = append(params, map[string]any{"name": "X-Okapi-Tenant", "in": "header", "required": true,
			"schema": map[string]any{"type": "string", "pattern": TenantPattern}})
	}
	if len(params) > 0 {
		op["parameters"] = params
	}
	if r.Request != "" {
		content := map[string]any{"application/json": map[string]any{"schema": ref(r.Request)}}
		if r.Method == http.MethodPatch {
			content["application/merge-patch+json"] = map[string]any{"schema": ref(r.Request)}
		}
		body := map[string]any{"required": true, "content": content}
		if r.Lenient {
			body["description"] = "As FOLIO's mod-circulation takes it: members the schema does not name are ignored, not refused; " +
				"those it names are validated."
			body[LenientExtension] = true
		}
		op["requestBody"] = body
	}
	responses := map[string]any{
		"4XX": map[string]any{"$ref": "#/components/responses/Error"},
		"5XX": map[string]any{"$ref": "#/components/responses/Error"},
	}
	for i, a := range r.Answers {
		if slices.ContainsFunc(r.Answers[:i], func(b Answer) bool { return b.Status == a.Status }) {
			continue // folded into the first answer of its status
		}
		answer := map[string]any{"description": http.StatusText(a.Status)}
		var bodies []any
		for _, b := range r.Answers[i:] {
			if b.Status == a.Status && b.Schema != "" {
				bodies = append(bodies, ref(b.Schema))
			}
		}
		switch {
		case a.ContentType != "":
			answer["content"] = map[string]any{a.ContentType: map[string]any{"schema": map[string]any{"type": "string"}}}
		case len(bodies) == 1:
			answer["content"] = map[string]any{"application/json": map[string]any{"schema": bodies[0]}}
		case len(bodies) > 1: // one status, bodies the request's headers choose between
			answer["content"] = map[string]any{"application/json": map[string]any{"schema": map[string]any{"anyOf": bodies}}}
		case a.Status != http.StatusNoContent && a.Status != http.StatusCreated:
			answer["content"] = map[string]any{"application/json": map[string]any{}}
		}
		responses[strconv.Itoa(a.Status)] = answer
	}
	op["responses"] = responses
	if r.Permission != "" {
		op["security"] = []any{map[string]any{"okapiToken": []string{}}}
		op["x-okapi-permissions"] = []string{r.Permission}
	} else {
		op["security"] = []any{}
	}
	if len(r.ModulePermissions) > 0 {
		op["x-module-permissions"] = r.ModulePermissions
	}
	return op
}

// operationID names an operation by its method and path:
// "post_circulation_check-out-by-barcode".
func operationID(r Route) string {
	id := strings.ToLower(r.Method)
	for _, p := range strings.Split(r.Path, "/") {
		p = strings.Trim(p, "{}_.")
		if p != "" {
			id += "_" + p
		}
	}
	return id
}

// ref is the reference to the component of a schema file.
func ref(file string) map[string]any {
	return map[string]any{"$ref": "#/components/schemas/" + componentName(file)}
}

// componentName is a schema file's name as a component ("loan" for
// loan.json).
func componentName(file string) string { return strings.TrimSuffix(file, ".json") }

// componentSchemas are the schema files used, and every file they refer
// to, as components: each file's schema with its references made
// references to components ("uuid.json" to "#/components/schemas/uuid",
// "#/$defs/x" to the component's own "$defs").
func componentSchemas(used map[string]bool) map[string]any {
	out := map[string]any{}
	pending := make([]string, 0, len(used))
	for f := range used {
		pending = append(pending, f)
	}
	for len(pending) > 0 {
		file := pending[len(pending)-1]
		pending = pending[:len(pending)-1]
		if _, done := out[componentName(file)]; done {
			continue
		}
		data, err := fs.ReadFile(files, file)
		if err != nil {
			panic(fmt.Sprintf("schemas: the route table names %s, which is not a schema of this package", file))
		}
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.UseNumber()
		var doc map[string]any
		if err := dec.Decode(&doc); err != nil {
			panic(fmt.Sprintf("schemas: %s: %v", file, err))
		}
		delete(doc, "$schema")
		delete(doc, "$id")
		out[componentName(file)] = rewriteRefs(doc, file, func(f string) { pending = append(pending, f) })
	}
	return out
}

// rewriteRefs rewrites the references of a schema file's JSON (v) to
// components, calling refers with each other file referred to.
func rewriteRefs(v any, file string, refers func(string)) any {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			if s, ok := e.(string); ok && k == "$ref" {
				target, frag, _ := strings.Cut(s, "#")
				if target == "" {
					target = file
				} else {
					refers(target)
				}
				x[k] = "#/components/schemas/" + componentName(target) + frag
				continue
			}
			x[k] = rewriteRefs(e, file, refers)
		}
	case []any:
		for i, e := range x {
			x[i] = rewriteRefs(e, file, refers)
		}
	}
	return v
}

// LenientExtension marks, in a route's OpenAPI description, a request body
// taken as FOLIO's mod-circulation takes it (Route.Lenient).
const LenientExtension = "x-unknown-members-ignored"
