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
