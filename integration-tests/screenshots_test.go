package integration

import (
	"crypto/sha256"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/checkoutlock/integration-tests/harness"
)

// TestTheScreenshotsAreOfThesePages: the pictures in docs/screenshots were
// taken of the pages as they are (make screenshots writes the digests of
// the pages' files beside them, pages.sha256), every picture a document
// shows is there, and every picture there is one a browser test takes: a
// change to a page without new pictures fails here, not in a reader's
// eyes.
func TestTheScreenshotsAreOfThesePages(t *testing.T) {
	t.Parallel()
	root := harness.RepoRoot()
	dir := filepath.Join(root, "docs", "screenshots")
	recorded, err := os.ReadFile(filepath.Join(dir, "pages.sha256"))
	if err != nil {
		t.Fatalf("%v: make screenshots writes it", err)
	}
	want := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(recorded)), "\n") {
		sum, name, ok := strings.Cut(line, "  ")
		if !ok {
			t.Fatalf("pages.sha256 has the line %q", line)
		}
		want[name] = sum
	}
	pages := filepath.Join(root, "circulation", "internal", "httpapi", "ui")
	files, err := os.ReadDir(pages)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, f := range files {
		b, err := os.ReadFile(filepath.Join(pages, f.Name()))
		if err != nil {
			t.Fatal(err)
		}
		got[f.Name()] = fmt.Sprintf("%x", sha256.Sum256(b))
	}
	for name, sum := range got {
		if want[name] != sum {
			t.Errorf("the page's file %s changed since the screenshots were taken: make screenshots", name)
		}
	}
	for name := range want {
		if _, ok := got[name]; !ok {
			t.Errorf("the screenshots were taken with a page's file %s that is gone: make screenshots", name)
		}
	}

	// The pictures the browser tests take, and those the documents show.
	taken := map[string]bool{}
	tests, _ := filepath.Glob(filepath.Join(root, "integration-tests", "*_test.go"))
	for _, path := range tests {
		src, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range regexp.MustCompile(`screenshot\(t, ctx, "([^"]+\.png)"\)`).FindAllStringSubmatch(string(src), -1) {
			taken[m[1]] = true
		}
	}
	pictures, _ := filepath.Glob(filepath.Join(dir, "*.png"))
	for _, p := range pictures {
		if !taken[filepath.Base(p)] {
			t.Errorf("docs/screenshots/%s is no browser test's picture: it would never be taken again", filepath.Base(p))
		}
	}
	docs, _ := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	for _, doc := range append(docs, filepath.Join(root, "README.md")) {
		src, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range regexp.MustCompile(`\]\(((?:docs/)?screenshots/([^)]+\.png))\)`).FindAllStringSubmatch(string(src), -1) {
			if !taken[m[2]] {
				t.Errorf("%s shows %s, which no browser test takes", filepath.Base(doc), m[1])
			}
			if _, err := os.Stat(filepath.Join(dir, m[2])); err != nil {
				t.Errorf("%s shows %s: %v", filepath.Base(doc), m[1], err)
			}
		}
	}
}
