package httpapi

import (
	"bytes"
	"fmt"
	"html/template"
	"io/fs"
	"strings"
)

// The three pages (the librarian's settings, the operator's lock console,
// the circulation desk) share one layout (ui/layout.html): the head, the
// header with the tenant form and who is signed in, the sign-in panel and
// the page's status line; each page's own part is its body
// (ui/<page>.body.html). They are put together once, at start-up.

// page is one of the pages the layout makes: its file as served, its
// title, the words of a link to it, and its script.
type page struct {
	File, Title, Link, Script string
}

// layoutPages are the pages, in the order each links to the others.
var layoutPages = []page{
	{"settings.html", "Check-out lock settings", "Settings", "settings.js"},
	{"locks.html", "Check-out lock console", "Lock console", "locks.js"},
	{"loans.html", "Patron loans", "Patron loans", "loans.js"},
}

// pageWords are what a page's body may say of the server's own words.
var pageWords = struct {
	HistoryColumns []string
	HistoryKinds   []struct{ Type, Words string }
}{HistoryColumns, HistoryKinds}

// renderedPages are the pages put together, by file name.
var renderedPages = renderPages(uiPages)

// renderPages puts each of layoutPages together from the layout and its
// body in files. It panics on a template or a body that is not there: a
// programming error, found at start-up (and by the tests).
func renderPages(files fs.FS) map[string][]byte {
	layout := template.Must(template.ParseFS(files, "layout.html"))
	out := map[string][]byte{}
	for _, p := range layoutPages {
		body, err := fs.ReadFile(files, strings.TrimSuffix(p.File, ".html")+".body.html")
		if err != nil {
			panic(fmt.Sprintf("httpapi: the body of %s: %v", p.File, err))
		}
		var others []page
		for _, o := range layoutPages {
			if o.File != p.File {
				others = append(others, o)
			}
		}
		// The body is a template too, of the words the server keeps
		// once: the history's columns and kinds, as the CSV says them.
		var own bytes.Buffer
		err = template.Must(template.New(p.File).Parse(string(body))).Execute(&own, pageWords)
		if err != nil {
			panic(fmt.Sprintf("httpapi: the body of %s: %v", p.File, err))
		}
		var b bytes.Buffer
		err = layout.Execute(&b, struct {
			page
			Others []page
			// Body is the page's own part, embedded with the binary.
			Body template.HTML
		}{p, others, template.HTML(own.String())})
		if err != nil {
			panic(fmt.Sprintf("httpapi: %s: %v", p.File, err))
		}
		out[p.File] = b.Bytes()
	}
	return out
}

// notServed says whether an embedded file is a part the pages are made of,
// never served as it is.
func notServed(name string) bool {
	return name == "layout.html" || strings.HasSuffix(name, ".body.html")
}
