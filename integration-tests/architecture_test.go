package integration

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
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
