package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestParseList(t *testing.T) {
	list := "# a comment\n\nname: one\nwhy: a reason\nfile: a.go\npackages: ./x ./y\nrun: ^TestA$\n" +
		"from: x < y\nto: x <= y\n\n" +
		"name: two\nfile: b.go\npackages: .\ntimeout: 30s\nfrom:\n| \tif a {\n|\n| \t}\nto:\n| \tif !a {}\n"
	muts, err := parseList([]byte(list), "list", "/mod")
	if err != nil {
		t.Fatal(err)
	}
	if len(muts) != 2 {
		t.Fatalf("%d mutations, want 2", len(muts))
	}
	one, two := muts[0], muts[1]
	if one.Name != "one" || one.Why != "a reason" || one.File != "a.go" || strings.Join(one.Packages, ",") != "./x,./y" ||
		one.Run != "^TestA$" || one.From != "x < y" || one.To != "x <= y" || one.Timeout != defaultTimeout || one.Module != "/mod" {
		t.Errorf("first: %+v", one)
	}
	if two.From != "\tif a {\n\n\t}" || two.To != "\tif !a {}" || two.Timeout != 30*time.Second || two.Run != "" {
		t.Errorf("second: from %q to %q timeout %v", two.From, two.To, two.Timeout)
	}
}

func TestParseListRefuses(t *testing.T) {
	for _, list := range []string{
		"file: a.go\n", // before a name
		"name: a\nfile: a.go\npackages: .\nfrom: x\n",      // no to
		"name: a\nfile: a.go\npackages: .\nfrom: x\nto: x", // no change
		"name: a\nfile: ../a.go\npackages: .\nfrom: x\nto: y",
		"name: a\nfile: a.go\npackages: .\nfrom: x\nto: y\nbogus: 1",
		"name: a\nfile: a.go\npackages: .\nfrom: x\nfrom: z\nto: y",
		"name: a\nfile: a.go\npackages: .\ntimeout: soon\nfrom: x\nto: y",
	} {
		if _, err := parseList([]byte(list), "list", "/mod"); err == nil {
			t.Errorf("accepted %q", list)
		}
	}
}

// TestApplyAndRestore: the file is mutated in place and put back byte for
// byte; a mutation whose text is not there exactly once is stale; a file
// changed while mutated keeps the change and loses only the mutation.
func TestApplyAndRestore(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "a.go")
	orig := "package a\n\nconst x = 1 < 2\n"
	if err := os.WriteFile(path, []byte(orig), 0o640); err != nil {
		t.Fatal(err)
	}
	m := &mutation{Name: "m", File: "a.go", Module: dir, From: "1 < 2", To: "1 <= 2"}
	a, err := apply(m)
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(path); string(got) != "package a\n\nconst x = 1 <= 2\n" {
		t.Errorf("mutated: %q", got)
	}
	if err := a.restore(); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(path); string(got) != orig {
		t.Errorf("restored: %q", got)
	}
	if info, _ := os.Stat(path); info.Mode().Perm() != 0o640 {
		t.Errorf("mode %v, want 0640", info.Mode().Perm())
	}
	if err := a.restore(); err != nil {
		t.Errorf("a second restore: %v", err)
	}

	for _, from := range []string{"nowhere", "a"} { // absent; present twice
		if s, err := apply(&mutation{Name: "s", File: "a.go", Module: dir, From: from, To: "x"}); err == nil {
			t.Errorf("from %q applied", from)
			_ = s.restore()
		}
	}

	a, err = apply(m)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte("package a\n\n// edited\nconst x = 1 <= 2\n"), 0o640); err != nil {
		t.Fatal(err)
	}
	if err := a.restore(); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(path); string(got) != "package a\n\n// edited\nconst x = 1 < 2\n" {
		t.Errorf("restored after an edit: %q", got)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("files left beside the mutated one: %v", entries)
	}
}

// TestTheListsParse keeps the repository's own lists readable (whether
// each entry still applies is make mutate's to say: go run . -list).
func TestTheListsParse(t *testing.T) {
	muts, err := loadAll(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	if len(muts) < 12 {
		t.Errorf("%d mutations, want the lists' dozen or more", len(muts))
	}
}
