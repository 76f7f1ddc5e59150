package integration

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/checkoutlock/integration-tests/harness"
)

// TestTheDocsNameLiveTests: every test a document names (README.md,
// BENCHMARKS.md, docs/*.md) is a test of the repository, and
// docs/testing.md, where a reader looks tests up, lists it.
func TestTheDocsNameLiveTests(t *testing.T) {
	t.Parallel()
	root := harness.RepoRoot()
	defined := map[string]bool{}
	funcs := regexp.MustCompile(`(?m)^func (Test[A-Z]\w*)\(`)
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (strings.HasPrefix(d.Name(), ".") || d.Name() == "node_modules") && path != root {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range funcs.FindAllStringSubmatch(string(b), -1) {
			defined[m[1]] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	named := regexp.MustCompile(`\bTest[A-Z]\w*`)
	docs, _ := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	docs = append(docs, filepath.Join(root, "README.md"), filepath.Join(root, "BENCHMARKS.md"))
	listed := map[string]bool{}
	testing, err := os.ReadFile(filepath.Join(root, "docs", "testing.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range named.FindAllString(string(testing), -1) {
		listed[n] = true
	}
	for _, doc := range docs {
		b, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		var gone, unlisted []string
		for _, n := range named.FindAllString(string(b), -1) {
			if !defined[n] && !slices.Contains(gone, n) {
				gone = append(gone, n)
			}
			if defined[n] && !listed[n] && !slices.Contains(unlisted, n) {
				unlisted = append(unlisted, n)
			}
		}
		rel, _ := filepath.Rel(root, doc)
		if len(gone) > 0 {
			t.Errorf("%s names tests there are not: %v", rel, gone)
		}
		if len(unlisted) > 0 {
			t.Errorf("%s names tests docs/testing.md does not list: %v", rel, unlisted)
		}
	}
}
