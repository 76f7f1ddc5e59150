package httpapi

import (
	"bytes"
	"html/template"
	"io/fs"
	"regexp"
	"strings"
	"testing"

	"github.com/checkoutlock/schemas"
)

// TestThePagesNameNoPermission: the pages ask /bl-users/_self's routes
// whether the person may call a route, and say what it takes in the
// server's words: no page names a permission or a role's set, and every
// route a page asks of is one the answer has (a route of the table that
// takes a permission).
func TestThePagesNameNoPermission(t *testing.T) {
	t.Parallel()
	var names []string
	for _, r := range schemas.Routes {
		if r.Permission != "" {
			names = append(names, r.Permission)
		}
	}
	for _, s := range schemas.PermissionSets {
		names = append(names, s.Name)
		names = append(names, s.Permissions...)
	}
	routes := routesFor(nil, false)
	asked := regexp.MustCompile(`"((?:GET|POST|PUT|PATCH|DELETE) /circulation/[^"]*)"`)
	pages := 0
	err := fs.WalkDir(uiFiles, "ui", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !(strings.HasSuffix(path, ".js") || strings.HasSuffix(path, ".html")) {
			return err
		}
		pages++
		data, err := uiFiles.ReadFile(path)
		if err != nil {
			return err
		}
		for _, n := range names {
			if strings.Contains(string(data), n) {
				t.Errorf("%s names the permission %s: ask may(route) and needs(route) instead", path, n)
			}
		}
		for _, m := range asked.FindAllStringSubmatch(string(data), -1) {
			if _, ok := routes[m[1]]; !ok {
				t.Errorf("%s asks of %q, which is no route of circulation that takes a permission", path, m[1])
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if pages < 6 {
		t.Fatalf("only %d page files read", pages)
	}
	librarian, _ := schemas.PermissionSetNamed(schemas.RoleLibrarian)
	got := routesFor(librarian.Permissions, false)
	if r := got["GET /circulation/patron-loans"]; !r.Allowed || r.Roles != "the librarian role" || r.Permission != "circulation.loans.collection.get" {
		t.Errorf("a librarian's desk: %+v", r)
	}
	if r := got["GET /circulation/check-out-locks"]; r.Allowed || r.Roles != "the operator role" {
		t.Errorf("a librarian's lock list: %+v", r)
	}
}

// TestThePagesAreMadeFromOneLayout: each page is the layout with its
// title, its script, a link to each other page and its own body; the
// layout and the bodies are never served as they are.
func TestThePagesAreMadeFromOneLayout(t *testing.T) {
	t.Parallel()
	for _, p := range layoutPages {
		html := string(renderedPages[p.File])
		raw, err := fs.ReadFile(uiPages, strings.TrimSuffix(p.File, ".html")+".body.html")
		if err != nil {
			t.Fatal(err)
		}
		// The body as the server's words fill it in.
		var body bytes.Buffer
		if err := template.Must(template.New(p.File).Parse(string(raw))).Execute(&body, pageWords); err != nil {
			t.Fatal(err)
		}
		if p.File == "locks.html" {
			for _, c := range HistoryColumns {
				if !strings.Contains(body.String(), `<th scope="col">`+c+`</th>`) {
					t.Errorf("locks.html's history does not head its column %s", c)
				}
			}
			for _, k := range HistoryKinds {
				if !strings.Contains(body.String(), `<option value="`+k.Type+`">`+k.Words+`</option>`) {
					t.Errorf("locks.html's history filter does not offer %s", k.Type)
				}
			}
		}
		for _, want := range []string{"<title>" + p.Title + "</title>", "<h1>" + p.Title + "</h1>", `<script src="/ui/` + p.Script + `" defer>`,
			`id="signin-panel"`, `id="tenant-form"`, `id="page-status"`, body.String()} {
			if !strings.Contains(html, want) {
				t.Errorf("%s lacks %q", p.File, want)
			}
		}
		for _, o := range layoutPages {
			link := `<a href="/ui/` + o.File + `">` + o.Link + `</a>`
			if strings.Contains(html, link) != (o.File != p.File) {
				t.Errorf("%s: the link to %s is there %v, want %v", p.File, o.File, strings.Contains(html, link), o.File != p.File)
			}
		}
	}
	for _, part := range []string{"layout.html", "loans.body.html"} {
		if !notServed(part) {
			t.Errorf("%s is served as it is", part)
		}
	}
}
