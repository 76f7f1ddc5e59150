// Command mutate runs the repository's mutation checks: for each mutation
// listed beside the code it mutates (<module>/mutations.txt), it changes the
// working tree's file in place (one exact-string replacement), runs the
// mutation's tests, puts the file back byte for byte, and says whether the
// tests noticed (killed) or not (survived). A survivor is a guarantee the
// tests do not hold; a stale entry (its text no longer found exactly once)
// is a list to update. Either fails the run.
//
//	go run ./integration-tests/mutate            # every mutation (make mutate)
//	go run ./integration-tests/mutate -only fence
//	go run ./integration-tests/mutate -list
//
// Before a mutation's tests, the same tests run without it (once per
// package set and -run pattern): a test that fails anyway would make every
// mutation look killed.
//
// The file is restored on every path: after the tests, on a panic, and on
// SIGINT or SIGTERM (the tests are killed first; a second signal restores
// at once and exits). The restore is checked by hash. If someone else
// changed the file while it was mutated, only the mutation is undone.
package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"text/tabwriter"
	"time"
)

// listName is the name of a module's mutation list.
const listName = "mutations.txt"

// Results of a mutation.
const (
	killed      = "killed"
	survived    = "SURVIVED"
	stale       = "STALE"
	broken      = "BROKEN"          // the mutated code did not build
	baselineBad = "BASELINE-FAILED" // the tests fail without the mutation
	interrupted = "interrupted"
)

type result struct {
	m       *mutation
	status  string
	detail  string
	elapsed time.Duration
}

func main() { os.Exit(run()) }

func run() int {
	only := flag.String("only", "", "run only the mutations whose name contains this")
	list := flag.Bool("list", false, "list the mutations, and whether each still applies, without running any")
	baseline := flag.Bool("baseline", true, "run each mutation's tests without it first")
	root := flag.String("root", "", "the repository (default: the directory holding go.work, from the current one up)")
	verbose := flag.Bool("v", false, "print the tests' output of every run")
	wide := flag.Bool("wide", false, "ignore the entries' run: patterns and -failfast, to see every test that kills each mutation")
	flag.Parse()

	dir, err := findRoot(*root)
	if err != nil {
		fmt.Fprintln(os.Stderr, "mutate:", err)
		return 2
	}
	muts, err := loadAll(dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, "mutate:", err)
		return 2
	}
	var chosen []*mutation
	for _, m := range muts {
		if strings.Contains(m.Name, *only) {
			chosen = append(chosen, m)
		}
	}
	if len(chosen) == 0 {
		fmt.Fprintf(os.Stderr, "mutate: no mutation's name contains %q\n", *only)
		return 2
	}
	if *list {
		return listMutations(dir, chosen)
	}

	// A signal cancels ctx: the running tests are killed, the file is
	// restored by the deferred restore, and no further mutation starts. A
	// second signal restores at once and exits.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	go func() {
		s := <-sigs
		fmt.Fprintf(os.Stderr, "\nmutate: %v: stopping the tests and restoring the file\n", s)
		cancel()
		<-sigs
		fmt.Fprintln(os.Stderr, "mutate: second signal: restoring now and exiting")
		if err := restoreCurrent(); err != nil {
			fmt.Fprintln(os.Stderr, "mutate:", err)
		}
		os.Exit(130)
	}()

	if *wide {
		for _, m := range chosen {
			m.Run, m.wide = "", true
		}
	}
	r := &runner{root: dir, baseline: *baseline, verbose: *verbose, baselines: map[string]baselineResult{}}
	var results []result
	start := time.Now()
	for i, m := range chosen {
		if ctx.Err() != nil {
			results = append(results, result{m: m, status: interrupted})
			continue
		}
		fmt.Fprintf(os.Stderr, "[%d/%d] %s: %s in %s ... ", i+1, len(chosen), m.Name, rel(dir, m.path()), pkgText(m))
		res := r.one(ctx, m)
		fmt.Fprintf(os.Stderr, "%s (%.1fs)%s\n", res.status, res.elapsed.Seconds(), suffix(res.detail))
		results = append(results, res)
		if fatalRestore != nil {
			break
		}
	}
	printTable(os.Stdout, dir, results)
	fmt.Printf("\n%d mutations in %.0fs (baselines %.0fs of it)\n", len(results), time.Since(start).Seconds(), r.baselineTime.Seconds())
	if fatalRestore != nil {
		fmt.Fprintln(os.Stderr, "mutate: RESTORE FAILED:", fatalRestore)
		return 3
	}
	code := 0
	counts := map[string]int{}
	for _, res := range results {
		counts[res.status]++
		if res.status != killed {
			code = 1
		}
	}
	fmt.Printf("killed %d, survived %d, stale %d, broken %d, baseline failed %d, interrupted %d\n",
		counts[killed], counts[survived], counts[stale], counts[broken], counts[baselineBad], counts[interrupted])
	if counts[survived] > 0 {
		fmt.Println("A survivor is a guarantee no test holds: write the test that fails under it (see README, Mutation checks).")
	}
	if counts[stale] > 0 {
		fmt.Println("A stale entry's text is no longer in its file exactly once: update the entry in its mutations.txt.")
	}
	if ctx.Err() != nil {
		return 130
	}
	return code
}

func suffix(s string) string {
	if s == "" {
		return ""
	}
	return ": " + s
}

// findRoot is the directory holding go.work: dir if given, else the
// current directory or the nearest one above it.
func findRoot(dir string) (string, error) {
	if dir != "" {
		return filepath.Abs(dir)
	}
	d, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(d, "go.work")); err == nil {
			return d, nil
		}
		up := filepath.Dir(d)
		if up == d {
			return "", errors.New("no go.work here or above: run from the repository, or give -root")
		}
		d = up
	}
}

// loadAll reads the list of every module of the workspace that has one.
func loadAll(root string) ([]*mutation, error) {
	cmd := exec.Command("go", "work", "edit", "-json")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go work edit -json: %w", err)
	}
	var work struct{ Use []struct{ DiskPath string } }
	if err := json.Unmarshal(out, &work); err != nil {
		return nil, fmt.Errorf("go work edit -json: %w", err)
	}
	var all []*mutation
	names := map[string]string{}
	for _, u := range work.Use {
		path := filepath.Join(root, u.DiskPath, listName)
		if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
			continue
		}
		muts, err := readList(path)
		if err != nil {
			return nil, err
		}
		for _, m := range muts {
			if where, dup := names[m.Name]; dup {
				return nil, fmt.Errorf("%s: the name %q is taken (%s)", m.Where, m.Name, where)
			}
			names[m.Name] = m.Where
		}
		all = append(all, muts...)
	}
	if len(all) == 0 {
		return nil, fmt.Errorf("no %s in any module of %s", listName, root)
	}
	return all, nil
}

// occurrences is how often m's text occurs in its file now.
func occurrences(m *mutation) (int, error) {
	data, err := os.ReadFile(m.path())
	if err != nil {
		return 0, err
	}
	return bytes.Count(data, []byte(m.From)), nil
}

func listMutations(root string, muts []*mutation) int {
	w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "NAME\tFILE\tPACKAGES\tSTATE\tWHY")
	code := 0
	for _, m := range muts {
		state := "applies"
		switch n, err := occurrences(m); {
		case err != nil:
			state, code = "STALE (file unreadable)", 1
		case n != 1:
			state, code = fmt.Sprintf("STALE (%d occurrences)", n), 1
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\n", m.Name, rel(root, m.path()), pkgText(m), state, m.Why)
	}
	w.Flush()
	return code
}

func printTable(out io.Writer, root string, results []result) {
	w := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "\nNAME\tFILE\tPACKAGES\tRESULT\tSECONDS\tKILLED BY (or why not)")
	for _, r := range results {
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%.1f\t%s\n", r.m.Name, rel(root, r.m.path()), pkgs(r.m), r.status, r.elapsed.Seconds(), r.detail)
	}
	w.Flush()
}

func rel(root, path string) string {
	if r, err := filepath.Rel(root, path); err == nil {
		return r
	}
	return path
}

// pkgs is a mutation's packages, as the module's directory joined to each.
func pkgs(m *mutation) string {
	mod := filepath.Base(m.Module)
	var ps []string
	for _, p := range m.Packages {
		ps = append(ps, filepath.ToSlash(filepath.Join(mod, p)))
	}
	return strings.Join(ps, " ")
}

// pkgText is pkgs with the mutation's -run pattern.
func pkgText(m *mutation) string {
	if m.Run != "" {
		return pkgs(m) + " -run " + m.Run
	}
	return pkgs(m)
}

type baselineResult struct {
	ok     bool
	detail string
}

type runner struct {
	root         string
	baseline     bool
	verbose      bool
	baselines    map[string]baselineResult
	baselineTime time.Duration
}

// one runs a mutation: the baseline (once per test set), then the tests
// with the mutation in.
func (r *runner) one(ctx context.Context, m *mutation) result {
	if n, err := occurrences(m); err != nil || n != 1 {
		detail := fmt.Sprintf("from: found %d times in the file, want once (%s)", n, m.Where)
		if err != nil {
			detail = err.Error()
		}
		return result{m: m, status: stale, detail: detail}
	}
	if r.baseline {
		key := m.Module + "\x00" + strings.Join(m.Packages, " ") + "\x00" + m.Run
		b, done := r.baselines[key]
		if !done {
			start := time.Now()
			out, err := goTest(ctx, m)
			r.baselineTime += time.Since(start)
			if ctx.Err() != nil {
				return result{m: m, status: interrupted}
			}
			b = baselineResult{ok: err == nil}
			if err != nil {
				b.detail = "without the mutation: " + failureSummary(out, err, m.wide)
				fmt.Fprintf(os.Stderr, "\n--- baseline output (%s) ---\n%s\n", pkgText(m), tail(out, 40))
			}
			r.baselines[key] = b
		}
		if !b.ok {
			return result{m: m, status: baselineBad, detail: b.detail}
		}
	}
	return r.mutated(ctx, m)
}

// mutated applies m, runs its tests and restores the file.
func (r *runner) mutated(ctx context.Context, m *mutation) (res result) {
	res.m = m
	a, err := apply(m)
	if err != nil {
		return result{m: m, status: stale, detail: err.Error()}
	}
	defer func() {
		if err := a.restore(); err != nil {
			fatalRestore = err
			res.detail += " RESTORE FAILED: " + err.Error()
		}
	}()
	start := time.Now()
	out, err := goTest(ctx, m)
	res.elapsed = time.Since(start)
	if r.verbose {
		fmt.Fprintf(os.Stderr, "\n--- output ---\n%s\n", out)
	}
	switch {
	case ctx.Err() != nil:
		res.status = interrupted
	case err == nil:
		res.status, res.detail = survived, "the tests passed with the mutation in"
		fmt.Fprintf(os.Stderr, "\n--- %s survived%s ---\n%s\n", m.Name, suffix(m.Why), tail(out, 15))
	case buildFailed(out):
		res.status, res.detail = broken, "the mutated code does not build: "+firstLine(out)
		fmt.Fprintf(os.Stderr, "\n--- %s does not build ---\n%s\n", m.Name, tail(out, 20))
	default:
		res.status, res.detail = killed, failureSummary(out, err, m.wide)
	}
	return res
}

// goTest runs m's tests in its module, killing them (their whole process
// group) if ctx ends or they outlive the timeout by a minute.
func goTest(ctx context.Context, m *mutation) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, m.Timeout+time.Minute)
	defer cancel()
	args := []string{"test", "-count=1", "-vet=off", "-timeout", m.Timeout.String()}
	if !m.wide {
		args = append(args, "-failfast")
	}
	if m.Run != "" {
		args = append(args, "-run", m.Run)
	}
	args = append(args, m.Packages...)
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = m.Module
	ownProcessGroup(cmd)
	cmd.WaitDelay = 10 * time.Second
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.Bytes(), err
}

var (
	failLine  = regexp.MustCompile(`(?m)^\s*--- FAIL: (\S+)`)
	buildFail = regexp.MustCompile(`(?m)\[(build|setup) failed\]|^# \S+$`)
)

func buildFailed(out []byte) bool { return buildFail.Match(out) }

// failureSummary names the tests that failed (the first few), or says the
// tests timed out.
func failureSummary(out []byte, err error, full bool) string {
	if bytes.Contains(out, []byte("panic: test timed out")) {
		return "timed out"
	}
	var names []string
	seen := map[string]bool{}
	for _, mm := range failLine.FindAllSubmatch(out, -1) {
		name := string(mm[1])
		if top, _, ok := strings.Cut(name, "/"); ok && seen[top] {
			continue
		}
		if !seen[name] {
			seen[name] = true
			names = append(names, name)
		}
	}
	switch {
	case len(names) > 3 && !full:
		return strings.Join(names[:3], ", ") + fmt.Sprintf(" (+%d)", len(names)-3)
	case len(names) > 0:
		return strings.Join(names, ", ")
	case bytes.Contains(out, []byte("panic:")):
		return "panic"
	}
	return fmt.Sprintf("go test: %v", err)
}

func firstLine(out []byte) string {
	for _, l := range strings.Split(string(out), "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
			return l
		}
	}
	return ""
}

func tail(out []byte, n int) string {
	lines := strings.Split(strings.TrimRight(string(out), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// applied is a mutation in a file, and what restores the file.
type applied struct {
	m       *mutation
	path    string
	mode    os.FileMode
	orig    []byte
	sum     [sha256.Size]byte
	mutated []byte
	done    bool
}

var (
	// mu guards current and restores: the main goroutine and the signal
	// handler may both restore.
	mu      sync.Mutex
	current *applied
	// fatalRestore is a restore that failed: the run stops.
	fatalRestore error
)

// apply makes m's replacement in its file, which must hold m.From exactly
// once.
func apply(m *mutation) (*applied, error) {
	path := m.path()
	info, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	orig, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	if n := bytes.Count(orig, []byte(m.From)); n != 1 {
		return nil, fmt.Errorf("from: found %d times in the file, want once (%s)", n, m.Where)
	}
	a := &applied{m: m, path: path, mode: info.Mode().Perm(), orig: orig, sum: sha256.Sum256(orig),
		mutated: bytes.Replace(orig, []byte(m.From), []byte(m.To), 1)}
	mu.Lock()
	defer mu.Unlock()
	current = a
	if err := writeFile(path, a.mutated, a.mode); err != nil {
		current = nil
		return nil, err
	}
	return a, nil
}

// restoreCurrent restores the mutation in place, if any.
func restoreCurrent() error {
	mu.Lock()
	a := current
	mu.Unlock()
	if a == nil {
		return nil
	}
	return a.restore()
}

// restore puts the file back as it was and checks it by hash. If the file
// changed otherwise while mutated (someone editing it), only the mutation
// is undone, and the original is kept beside the system's temporary files.
func (a *applied) restore() error {
	mu.Lock()
	defer mu.Unlock()
	if a.done {
		return nil
	}
	a.done = true
	if current == a {
		current = nil
	}
	now, err := os.ReadFile(a.path)
	if err != nil {
		return fmt.Errorf("%s: %w", a.path, err)
	}
	if bytes.Equal(now, a.orig) {
		return nil
	}
	if !bytes.Equal(now, a.mutated) {
		backup := filepath.Join(os.TempDir(), fmt.Sprintf("mutate-%s-%s.orig", a.m.Name, filepath.Base(a.path)))
		_ = os.WriteFile(backup, a.orig, 0o644)
		if bytes.Count(now, []byte(a.m.To)) != 1 {
			return fmt.Errorf("%s changed while mutated and the mutation (%s) cannot be found in it to undo: "+
				"undo it by hand (the original is in %s)", a.path, a.m.Name, backup)
		}
		fmt.Fprintf(os.Stderr, "mutate: %s changed while mutated: undoing only the mutation (the original is in %s)\n", a.path, backup)
		return writeFile(a.path, bytes.Replace(now, []byte(a.m.To), []byte(a.m.From), 1), a.mode)
	}
	if err := writeFile(a.path, a.orig, a.mode); err != nil {
		return fmt.Errorf("restore %s: %w", a.path, err)
	}
	back, err := os.ReadFile(a.path)
	if err != nil {
		return fmt.Errorf("restore %s: %w", a.path, err)
	}
	if sha256.Sum256(back) != a.sum {
		return fmt.Errorf("restore %s: its hash differs from the original's", a.path)
	}
	return nil
}

// writeFile replaces path's content at once (a new file renamed over it),
// so that a build reading it meanwhile sees one version or the other.
func writeFile(path string, data []byte, mode os.FileMode) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".mutate-*")
	if err != nil {
		return err
	}
	_, err = tmp.Write(data)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(tmp.Name(), mode)
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		os.Remove(tmp.Name())
	}
	return err
}
