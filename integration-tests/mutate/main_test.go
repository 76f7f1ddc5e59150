package main

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestParseList(t *testing.T) {
	list := "# a comment\n\nname: one\nwhy: a reason\nfile: a.go\npackages: ./x ./y\nrun: ^TestA$\n" +
		"from: x < y\nto: x <= y\n\n" +
		"name: two\nfile: b.go\npackages: .\ntimeout: 30s\ntries: 3\nfrom:\n| \tif a {\n|\n| \t}\nto:\n| \tif !a {}\n"
	muts, err := parseList([]byte(list), "list", "/mod")
	if err != nil {
		t.Fatal(err)
	}
	if len(muts) != 2 {
		t.Fatalf("%d mutations, want 2", len(muts))
	}
	one, two := muts[0], muts[1]
	if one.Name != "one" || one.Why != "a reason" || one.File != "a.go" || strings.Join(one.Packages, ",") != "./x,./y" ||
		one.Run != "^TestA$" || one.From != "x < y" || one.To != "x <= y" || one.Timeout != defaultTimeout || one.Tries != 1 || one.Module != "/mod" {
		t.Errorf("first: %+v", one)
	}
	if two.From != "\tif a {\n\n\t}" || two.To != "\tif !a {}" || two.Timeout != 30*time.Second || two.Tries != 3 || two.Run != "" {
		t.Errorf("second: from %q to %q timeout %v tries %d", two.From, two.To, two.Timeout, two.Tries)
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
		"name: a\nfile: a.go\npackages: .\ntries: 0\nfrom: x\nto: y",
		"name: a\nfile: a.go\npackages: .\ntries: 6\nfrom: x\nto: y",
		"name: a\nfile: a.go\npackages: .\ntries: many\nfrom: x\nto: y",
	} {
		if _, err := parseList([]byte(list), "list", "/mod"); err == nil {
			t.Errorf("accepted %q", list)
		}
	}
}

// TestMutateAndOverlay: the mutated copy goes into the job's directory and
// the overlay puts it in the file's place; the file itself is untouched; a
// mutation whose text is not there exactly once is stale.
func TestMutateAndOverlay(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "a.go")
	orig := "package a\n\nconst x = 1 < 2\n"
	if err := os.WriteFile(path, []byte(orig), 0o640); err != nil {
		t.Fatal(err)
	}
	m := &mutation{Name: "m", File: "a.go", Module: dir, From: "1 < 2", To: "1 <= 2"}
	mutated, err := mutate(m)
	if err != nil {
		t.Fatal(err)
	}
	if string(mutated) != "package a\n\nconst x = 1 <= 2\n" {
		t.Errorf("mutated: %q", mutated)
	}
	job := t.TempDir()
	overlay, err := writeOverlay(job, path, mutated)
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(overlay)
	if err != nil {
		t.Fatal(err)
	}
	var o struct{ Replace map[string]string }
	if err := json.Unmarshal(data, &o); err != nil {
		t.Fatalf("overlay %s: %v", data, err)
	}
	if len(o.Replace) != 1 || o.Replace[path] == "" {
		t.Fatalf("overlay replaces %v, want only %s", o.Replace, path)
	}
	if !strings.HasPrefix(o.Replace[path], job+string(filepath.Separator)) {
		t.Errorf("the mutated copy %s is outside the job's directory %s", o.Replace[path], job)
	}
	if got, _ := os.ReadFile(o.Replace[path]); string(got) != string(mutated) {
		t.Errorf("the overlay's copy: %q", got)
	}
	if got, _ := os.ReadFile(path); string(got) != orig {
		t.Errorf("the file itself changed: %q", got)
	}

	for _, from := range []string{"nowhere", "a"} { // absent; present twice
		if _, err := mutate(&mutation{Name: "s", File: "a.go", Module: dir, From: from, To: "x"}); err == nil {
			t.Errorf("from %q applies", from)
		}
	}
	if _, err := mutate(&mutation{Name: "s", File: "gone.go", Module: dir, From: "a", To: "x"}); err == nil {
		t.Error("a mutation of a missing file applies")
	}
}

// TestRunAll runs mutations of a small module through the overlay, side by
// side: the one its test notices is killed, the one it does not survives,
// the stale one is stale, one that does not compile is broken, and the
// module's file is as it was.
func TestRunAll(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go test")
	}
	t.Parallel()
	files := lessModule()
	dir := writeModule(t, files)
	mut := func(name, from, to string) *mutation {
		return &mutation{Name: name, File: "m.go", Module: dir, Packages: []string{"."}, Timeout: time.Minute, From: from, To: to}
	}
	muts := []*mutation{
		mut("boundary", "a < b", "a <= b"),
		mut("comment", "comes first", "comes second"),
		mut("gone", "a > b", "a >= b"),
		mut("typo", "return a < b", "return a < c"),
	}
	r := &runner{root: dir, tmp: t.TempDir(), baseline: true, workers: 4}
	results, err := r.runAll(context.Background(), muts)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{killed, survived, stale, broken}
	for i, res := range results {
		if res.m != muts[i] || res.status != want[i] {
			t.Errorf("%s: %s (%s), want %s", res.m.Name, res.status, res.detail, want[i])
		}
	}
	if got, _ := os.ReadFile(filepath.Join(dir, "m.go")); string(got) != files["m.go"] {
		t.Errorf("the file changed: %q", got)
	}
	if left, _ := os.ReadDir(r.tmp); len(left) != 0 {
		t.Errorf("temporary directories left: %v", left)
	}
}

// TestAMutationFoundByChanceIsRunUpToItsTries: a mutation whose test
// finds it only on its third run is killed with three tries, on the third
// run, and survives two; a mutation with no tries runs once.
func TestAMutationFoundByChanceIsRunUpToItsTries(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go test")
	}
	t.Parallel()
	files := lessModule()
	runs := filepath.Join(t.TempDir(), "runs")
	// The test counts its runs in a file, and looks for the mutation only
	// from its third on.
	files["m_test.go"] = "package m\n\nimport (\n\t\"os\"\n\t\"testing\"\n)\n\n" +
		"func TestLess(t *testing.T) {\n\tb, _ := os.ReadFile(" + strconv.Quote(runs) + ")\n" +
		"\tif err := os.WriteFile(" + strconv.Quote(runs) + ", append(b, 'x'), 0o644); err != nil {\n\t\tt.Fatal(err)\n\t}\n" +
		"\tif len(b) >= 2 && Less(1, 1) {\n\t\tt.Fatal(\"1 < 1\")\n\t}\n}\n"
	dir := writeModule(t, files)
	for _, c := range []struct {
		tries      int
		want       string
		detail     string
		runsMarked int
	}{
		{3, killed, "run 3 of up to 3: ", 3},
		{2, survived, "2 runs of 2", 2},
		{0, survived, "the tests passed with the mutation in", 1},
	} {
		if err := os.RemoveAll(runs); err != nil {
			t.Fatal(err)
		}
		m := &mutation{Name: "boundary", File: "m.go", Module: dir, Packages: []string{"."}, Timeout: time.Minute,
			Tries: c.tries, From: "a < b", To: "a <= b"}
		r := &runner{root: dir, tmp: t.TempDir(), workers: 1}
		results, err := r.runAll(context.Background(), []*mutation{m})
		if err != nil {
			t.Fatal(err)
		}
		if res := results[0]; res.status != c.want || !strings.Contains(res.detail, c.detail) {
			t.Errorf("tries %d: %s (%s), want %s (%s)", c.tries, res.status, res.detail, c.want, c.detail)
		}
		if b, _ := os.ReadFile(runs); len(b) != c.runsMarked {
			t.Errorf("tries %d: the test ran %d times, want %d", c.tries, len(b), c.runsMarked)
		}
	}
}

// TestABaselineFailureConcernsOnlyItsTests: the package's baseline runs
// every mutation's tests at once; a test that fails without any mutation
// marks the mutations that run it, and no other.
func TestABaselineFailureConcernsOnlyItsTests(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go test")
	}
	t.Parallel()
	files := map[string]string{
		"go.mod": "module example.com/m\n\ngo 1.26\n",
		"m.go":   "package m\n\n// Less says whether a comes first.\nfunc Less(a, b int) bool { return a < b }\n\n// Zero is nothing.\nconst Zero = 0\n",
		"m_test.go": "package m\n\nimport \"testing\"\n\nfunc TestLess(t *testing.T) {\n\tif Less(1, 1) {\n\t\tt.Fatal(\"1 < 1\")\n\t}\n}\n\n" +
			"func TestBroken(t *testing.T) { t.Fatal(\"fails anyway\") }\n\nfunc TestZero(t *testing.T) {}\n",
	}
	dir := writeModule(t, files)
	mut := func(name, run, from, to string) *mutation {
		return &mutation{Name: name, File: "m.go", Module: dir, Packages: []string{"."}, Run: run, Timeout: time.Minute, From: from, To: to}
	}
	muts := []*mutation{
		mut("boundary", "^TestLess$", "a < b", "a <= b"),
		mut("on-the-broken-test", "^TestBroken$", "a < b", "a > b"),
		mut("unnoticed", "^TestZero$", "Zero = 0", "Zero = 1"),
	}
	r := &runner{root: dir, tmp: t.TempDir(), baseline: true, workers: 2}
	results, err := r.runAll(context.Background(), muts)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{killed, baselineBad, survived}
	for i, res := range results {
		if res.m != muts[i] || res.status != want[i] {
			t.Errorf("%s: %s (%s), want %s", res.m.Name, res.status, res.detail, want[i])
		}
	}
	if !strings.Contains(results[1].detail, "TestBroken") {
		t.Errorf("the baseline's failure is said as %q, want it to name TestBroken", results[1].detail)
	}
}

// TestAMutationWhoseTestsDoNotBuildUnmodifiedIsBroken: when the test
// binary of the unmodified tree does not build, the mutation's tests
// never ran: it is broken, never killed.
func TestAMutationWhoseTestsDoNotBuildUnmodifiedIsBroken(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go test")
	}
	t.Parallel()
	files := lessModule()
	files["m_test.go"] += "\nvar _ = Nope\n"
	dir := writeModule(t, files)
	m := &mutation{Name: "boundary", File: "m.go", Module: dir, Packages: []string{"."}, Timeout: time.Minute, From: "a < b", To: "a <= b"}
	r := &runner{root: dir, tmp: t.TempDir(), workers: 1}
	results, err := r.runAll(context.Background(), []*mutation{m})
	if err != nil {
		t.Fatal(err)
	}
	if res := results[0]; res.status != broken || !strings.Contains(res.detail, "the unmodified tests of") {
		t.Errorf("%s: %s (%s), want %s, its unmodified tests not building", res.m.Name, res.status, res.detail, broken)
	}
}

// writeModule writes each file of files, by name, into a temporary
// directory, and returns the directory.
// lessModule is a small module's files: Less, and a test that notices
// Less(1, 1) answering true.
func lessModule() map[string]string {
	return map[string]string{
		"go.mod":    "module example.com/m\n\ngo 1.26\n",
		"m.go":      "package m\n\n// Less says whether a comes first.\nfunc Less(a, b int) bool { return a < b }\n",
		"m_test.go": "package m\n\nimport \"testing\"\n\nfunc TestLess(t *testing.T) {\n\tif Less(1, 1) {\n\t\tt.Fatal(\"1 < 1\")\n\t}\n}\n",
	}
}

func writeModule(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// TestParseSourceFiles: a binary's files are its packages' Go, assembly
// and embedded files, by absolute path.
func TestParseSourceFiles(t *testing.T) {
	out := `{"Dir": "/r/a", "GoFiles": ["a.go"], "EmbedFiles": ["ui/app.js"]}
{"Dir": "/r/b", "GoFiles": ["b.go"], "SFiles": ["b_amd64.s"], "CgoFiles": ["c.go"]}
`
	files, err := parseSourceFiles([]byte(out))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"/r/a/a.go", "/r/a/ui/app.js", "/r/b/b.go", "/r/b/b_amd64.s", "/r/b/c.go"} {
		if !files[f] {
			t.Errorf("%s missing from %v", f, files)
		}
	}
	if len(files) != 5 {
		t.Errorf("%d files, want 5: %v", len(files), files)
	}
}

// TestStorageCompilesItsMigrations: go list names the files the storage
// binary is compiled from as the mutations name them, embedded SQL
// included, so a mutation of either rebuilds it.
func TestStorageCompilesItsMigrations(t *testing.T) {
	root, err := findRoot(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	files, err := sourceFiles(context.Background(), root, "circulation-storage/cmd/circulation-storage")
	if err != nil {
		t.Fatal(err)
	}
	muts, err := loadAll(root)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"circulation-storage", "migrations"} {
		found := false
		for _, m := range muts {
			if filepath.Base(m.Module) == name && files[m.path()] {
				found = true
				break
			}
		}
		if !found {
			t.Errorf("no mutation of %s names a file the storage binary is compiled from", name)
		}
	}
}

// TestStartsBinaries: the integration-tests packages start the binaries;
// a module's own packages do not.
func TestStartsBinaries(t *testing.T) {
	root := "/r"
	for _, tc := range []struct {
		module string
		pkgs   []string
		want   bool
	}{
		{"/r/circulation", []string{"."}, false},
		{"/r/circulation", []string{".", "../integration-tests"}, true},
		{"/r/integration-tests", []string{"./contract"}, true},
		{"/r/schemas", []string{"../integration-tests-other"}, false},
	} {
		if got := startsBinaries(root, &mutation{Module: tc.module, Packages: tc.pkgs}); got != tc.want {
			t.Errorf("%s %v: %v, want %v", tc.module, tc.pkgs, got, tc.want)
		}
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

// TestTheRecordSparesOnlyWhatHasNotChanged: a mutation killed is recorded
// with its digest and not run again while nothing it is made of changes;
// a change to a file its tests compile, or to a file that is not Go, runs
// it again, a change to a Go file they do not compile does not, and
// -fresh runs it whatever the record says. A mutation that survives is
// struck out of the record.
func TestTheRecordSparesOnlyWhatHasNotChanged(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go test")
	}
	t.Parallel()
	files := lessModule()
	files["README"] = "a module\n"
	dir := writeModule(t, files)
	if err := os.MkdirAll(filepath.Join(dir, "other"), 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("git", "-C", dir, "init", "-q").CombinedOutput(); err != nil {
		t.Fatalf("git init: %v\n%s", err, out)
	}
	muts := []*mutation{
		{Name: "boundary", File: "m.go", Module: dir, Packages: []string{"."}, Timeout: time.Minute, From: "a < b", To: "a <= b"},
		{Name: "comment", File: "m.go", Module: dir, Packages: []string{"."}, Timeout: time.Minute, From: "comes first", To: "comes second"},
	}
	// run runs the mutations with the record, and answers each one's
	// status and how many were spared.
	run := func(fresh bool) ([]string, int) {
		t.Helper()
		rec, err := readRecord(filepath.Join(dir, recordName))
		if err != nil {
			t.Fatal(err)
		}
		d, err := newDigester(context.Background(), dir)
		if err != nil {
			t.Fatal(err)
		}
		r := &runner{root: dir, tmp: t.TempDir(), baseline: true, workers: 2, record: rec, digests: d, reuse: !fresh}
		results, err := r.runAll(context.Background(), muts)
		if err != nil {
			t.Fatal(err)
		}
		rec.update(results, r.digest)
		if err := rec.write(); err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, res := range results {
			got = append(got, res.status)
		}
		return got, r.reused
	}
	want := func(what string, fresh bool, statuses []string, spared int) {
		t.Helper()
		got, n := run(fresh)
		if !slices.Equal(got, statuses) || n != spared {
			t.Errorf("%s: %v, %d spared; want %v, %d spared", what, got, n, statuses, spared)
		}
	}
	write := func(name, text string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want("the first run", false, []string{killed, survived}, 0)
	want("nothing changed", false, []string{killed, survived}, 1)
	write("other/other.go", "package other\n")
	want("a Go file the tests do not compile", false, []string{killed, survived}, 1)
	write("README", "a module, changed\n")
	want("a file that is not Go", false, []string{killed, survived}, 0)
	write("m_test.go", files["m_test.go"]+"\nfunc TestMore(t *testing.T) {}\n")
	want("a test file", false, []string{killed, survived}, 0)
	want("-fresh", true, []string{killed, survived}, 0)
	rec, err := readRecord(filepath.Join(dir, recordName))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := rec.killed["boundary"]; !ok || len(rec.killed) != 1 {
		t.Errorf("the record holds %v, want boundary alone", rec.killed)
	}
}
