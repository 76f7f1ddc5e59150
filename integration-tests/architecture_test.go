package integration

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/checkoutlock/schemas"
)

// TestArchitectureNamesLivePackages keeps docs/architecture.md true: every
// package it names in backticks (a path starting with one of the
// repository's modules) is a directory holding Go files, and every file it
// names (`outbox/listener.go`, under storage's internal packages, or
// `circulation/checkout.go`, under a module) exists.
func TestArchitectureNamesLivePackages(t *testing.T) {
	t.Parallel()
	root := filepath.Join("..")
	doc, err := os.ReadFile(filepath.Join(root, "docs", "architecture.md"))
	if err != nil {
		t.Fatal(err)
	}
	modules := []string{"circulation-storage", "circulation", "sip2", "schemas", "serverkit", "config", "migrations", "integration-tests"}
	named := regexp.MustCompile("`([a-z][a-z0-9./_-]*)`").FindAllStringSubmatch(string(doc), -1)
	checked := 0
	for _, m := range named {
		name := m[1]
		isModule := false
		for _, mod := range modules {
			if name == mod || strings.HasPrefix(name, mod+"/") {
				isModule = true
			}
		}
		switch {
		case strings.HasSuffix(name, ".go"):
			// A file: under a module, or under one of storage's internal
			// packages (postgres, locks, records, lending, ...).
			path := name
			if !isModule {
				path = filepath.Join("circulation-storage", "internal", name)
			}
			if _, err := os.Stat(filepath.Join(root, path)); err != nil {
				t.Errorf("docs/architecture.md names %s, which does not exist", name)
			}
			checked++
		case isModule:
			goFiles, _ := filepath.Glob(filepath.Join(root, name, "*.go"))
			if len(goFiles) == 0 {
				t.Errorf("docs/architecture.md names package %s, which has no Go files", name)
			}
			checked++
		}
	}
	if checked < 20 {
		t.Fatalf("only %d packages and files named: the pattern no longer matches the page", checked)
	}
}

// TestNoStatusLiteralsOutsideSchemas: product code names an item, loan or
// request status only by its constant in package schemas (statuses.go),
// never as a literal: not a Go string that is a status, nor a status
// quoted inside one (SQL's 'Checked out', JSON's "Open"). Tests, package
// schemas and the migrations (released SQL, never edited) are not
// product code here.
func TestNoStatusLiteralsOutsideSchemas(t *testing.T) {
	t.Parallel()
	statuses := slices.Concat(schemas.ItemStatuses, schemas.LoanStatuses, schemas.RequestStatuses)
	root := filepath.Join("..")
	checked := 0
	for _, module := range []string{"circulation-storage", "circulation", "sip2", "serverkit", "config"} {
		err := filepath.WalkDir(filepath.Join(root, module), func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return err
			}
			fset := token.NewFileSet()
			file, err := parser.ParseFile(fset, path, nil, 0)
			if err != nil {
				return err
			}
			checked++
			ast.Inspect(file, func(n ast.Node) bool {
				lit, ok := n.(*ast.BasicLit)
				if !ok || lit.Kind != token.STRING {
					return true
				}
				v, err := strconv.Unquote(lit.Value)
				if err != nil {
					return true
				}
				for _, s := range statuses {
					if v == s || strings.Contains(v, "'"+s+"'") || strings.Contains(v, `"`+s+`"`) {
						t.Errorf("%s: the status %q written as a literal: name it by its constant in schemas/statuses.go", fset.Position(lit.Pos()), s)
					}
				}
				return true
			})
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if checked < 100 {
		t.Fatalf("only %d product files read", checked)
	}
}

// layers is the intended direction of the repository's imports: a
// package imports only packages of a lower layer, never one of its own
// or above (a package not named here fails the test until it is given
// its place). Leaves first (the wire formats, the contract, the parsers),
// then each service's domain, its storage or its client, the writes by
// concern, the work that uses them, the HTTP layer, the wiring.
var layers = [][]string{
	// The one bound of what is repeated of a client's text.
	{"schemas/text"},
	// The leaves: wire formats, parsers, the migrations' SQL.
	{"schemas/locksettings", "schemas/selfcheck", "schemas/loanhistory", "sip2/wire", "serverkit/tracing", "circulation-storage/cql",
		"circulation-storage/relay", "circulation-storage/internal/pgtest", "migrations"},
	// The contract: routes, permissions, schemas, statuses.
	{"schemas"},
	{"schemas/errs", "schemas/cmd/descriptors", "sip2/msg", "circulation-storage/locksql", "config"},
	{"schemas/errs/errhttp", "serverkit/auth"},
	// Each service's domain; the shared server kit; storage's login.
	{"serverkit", "circulation-storage", "circulation", "circulation-storage/login", "serverkit/cmd/devtoken"},
	// Storage's database; circulation's client of storage; the door's of
	// circulation.
	{"circulation-storage/internal/postgres", "circulation/internal/storageclient", "sip2/internal/circ"},
	// A record's row as every write of it writes it: its document, its
	// insert and its guarded update, its constraints.
	{"circulation-storage/internal/record"},
	// What loans and requests are both judged by: the circulation rules,
	// a patron's standing, the loans counted against the limits.
	{"circulation-storage/internal/rules"},
	// Fees and fines: the charges the loans' writes make, the actions on
	// an account and the one rule they are judged by.
	{"circulation-storage/internal/feesfines"},
	// The writes of requests: their queues, their judging, the return
	// loop, the hold shelf, their expiry.
	{"circulation-storage/internal/requests"},
	// The generic record store and CQL; the sample library; the
	// calendars' openings read for FOLIO's calendar routes.
	{"circulation-storage/internal/recordstore", "circulation-storage/internal/sample", "circulation-storage/internal/calendars"},
	// The writes by concern: each its own room.
	{"circulation-storage/internal/lending", "circulation-storage/internal/locks", "circulation-storage/internal/outbox", "circulation-storage/internal/waiting",
		"circulation-storage/internal/tenants", "circulation-storage/internal/accounts", "circulation-storage/internal/presence",
		"circulation-storage/internal/notices"},
	// The work that uses them; the door; the check-out's statements as
	// lending runs them, handed to the benchmark's floor.
	{"circulation-storage/internal/sweeper", "circulation-storage/internal/dbtest", "sip2/internal/server",
		"circulation-storage/checkoutsql"},
	// The HTTP layers.
	{"circulation-storage/internal/httpapi", "circulation/internal/httpapi"},
	// The wiring.
	{"circulation-storage/app", "circulation/app"},
	{"circulation-storage/cmd/circulation-storage", "circulation-storage/cmd/events", "circulation/cmd/circulation", "sip2/cmd/sip2",
		"circulation-storage/storagetest"},
}

// TestImportsGoOneWay: every product package of the repository imports
// only packages of a layer below its own (layers), so that storage's
// rooms stay separate (lending and locks never import each other, records
// and requests never import what writes loans or locks) and nothing
// reaches back up.
func TestImportsGoOneWay(t *testing.T) {
	t.Parallel()
	const module = "github.com/checkoutlock/"
	layerOf := map[string]int{}
	for i, l := range layers {
		for _, p := range l {
			layerOf[p] = i
		}
	}
	root := filepath.Join("..")
	checked := 0
	for _, top := range []string{"circulation-storage", "circulation", "sip2", "serverkit", "schemas", "config", "migrations"} {
		err := filepath.WalkDir(filepath.Join(root, top), func(path string, d fs.DirEntry, err error) error {
			if err != nil || !d.IsDir() {
				return err
			}
			files, _ := filepath.Glob(filepath.Join(path, "*.go"))
			pkg := filepath.ToSlash(strings.TrimPrefix(path, root+string(filepath.Separator)))
			for _, f := range files {
				if strings.HasSuffix(f, "_test.go") {
					continue
				}
				parsed, err := parser.ParseFile(token.NewFileSet(), f, nil, parser.ImportsOnly)
				if err != nil {
					return err
				}
				mine, known := layerOf[pkg]
				if !known {
					t.Errorf("%s is in no layer of architecture_test.go: give it its place", pkg)
					return nil
				}
				checked++
				for _, imp := range parsed.Imports {
					p, _ := strconv.Unquote(imp.Path.Value)
					if !strings.HasPrefix(p, module) || strings.HasPrefix(p, module+"integration-tests") {
						continue
					}
					p = strings.TrimPrefix(p, module)
					theirs, known := layerOf[p]
					switch {
					case !known:
						t.Errorf("%s imports %s, which is in no layer", f, p)
					case theirs >= mine:
						t.Errorf("%s (layer %d) imports %s (layer %d): imports go down only", f, mine, p, theirs)
					}
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if checked < 100 {
		t.Fatalf("only %d files read", checked)
	}
}
