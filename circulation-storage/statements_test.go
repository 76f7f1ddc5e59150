package storage_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// The limits TestStatementsAreCheckedByName holds: a statement takes at
// most maxPositional positional arguments, and a row is scanned into at
// most maxScanned destinations. Past them, one argument or destination
// misplaced among many compiles and runs silently; by name
// (pgx.StrictNamedArgs, locksql.NewNamed; pgx.RowToStructByName with db
// tags) a misplaced one fails the statement.
const (
	maxPositional = 3
	maxScanned    = 8
)

// positional is a statement's positional parameter numbered past
// maxPositional, in a string literal: the statement's own text or a
// fragment of it.
var positional = regexp.MustCompile(`\$([1-9][0-9]*)`)

// statementMethods are the methods that send a statement (pgx's, on a
// pool, a connection, a transaction or a batch), and the index of their
// SQL argument.
var statementMethods = map[string]int{"Exec": 1, "Query": 1, "QueryRow": 1, "Queue": 0}

// TestStatementsAreCheckedByName reads every Go file of the module, tests
// included, and fails on a positional parameter numbered past
// maxPositional in a string literal, on a placeholder put together at run
// time ("$" + a number), on a statement sent with more than maxPositional
// positional arguments, and on a Scan with more than maxScanned
// destinations.
func TestStatementsAreCheckedByName(t *testing.T) {
	t.Parallel()
	fset := token.NewFileSet()
	files := 0
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata") && path != "." {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		files++
		for _, problem := range statementProblems(f) {
			t.Errorf("%s: %s", fset.Position(problem.pos), problem.what)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 50 {
		t.Fatalf("read %d Go files: the walk missed the module's packages", files)
	}
}

type problem struct {
	pos  token.Pos
	what string
}

// statementProblems is what TestStatementsAreCheckedByName refuses in f.
func statementProblems(f *ast.File) []problem {
	var out []problem
	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.BasicLit:
			if n.Kind != token.STRING {
				return true
			}
			s, err := strconv.Unquote(n.Value)
			if err != nil {
				return true
			}
			for _, m := range positional.FindAllStringSubmatch(s, -1) {
				if k, _ := strconv.Atoi(m[1]); k > maxPositional {
					out = append(out, problem{n.Pos(), "positional parameter " + m[0] + ": a statement of more than " +
						strconv.Itoa(maxPositional) + " arguments names them (@name)"})
					break
				}
			}
		case *ast.BinaryExpr:
			if lit, ok := n.X.(*ast.BasicLit); ok && n.Op == token.ADD && lit.Kind == token.STRING {
				if s, err := strconv.Unquote(lit.Value); err == nil && strings.HasSuffix(s, "$") {
					out = append(out, problem{n.Pos(), `a placeholder put together at run time ("$" + n): name it (@name)`})
				}
			}
		case *ast.CallExpr:
			sel, ok := n.Fun.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			if sel.Sel.Name == "Scan" && len(n.Args) > maxScanned {
				out = append(out, problem{n.Pos(), "Scan into " + strconv.Itoa(len(n.Args)) + " destinations: more than " +
					strconv.Itoa(maxScanned) + " are scanned by name (pgx.RowToStructByName)"})
			}
			if at, ok := statementMethods[sel.Sel.Name]; ok && n.Ellipsis == token.NoPos && len(n.Args)-at-1 > maxPositional {
				out = append(out, problem{n.Pos(), sel.Sel.Name + " with " + strconv.Itoa(len(n.Args)-at-1) +
					" positional arguments: more than " + strconv.Itoa(maxPositional) + " are named (pgx.StrictNamedArgs)"})
			}
		}
		return true
	})
	return out
}
