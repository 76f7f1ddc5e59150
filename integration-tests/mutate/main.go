// Command mutate runs the repository's mutation checks: for each mutation
// listed beside the code it mutates (<module>/mutations.txt), it builds the
// mutation's tests with the file changed (one exact-string replacement),
// runs them, and says whether the tests noticed (killed) or not (survived).
// A survivor is a guarantee the tests do not hold; a stale entry (its text
// no longer found exactly once) is a list to update. Either fails the run.
//
//	go run ./integration-tests/mutate            # every mutation (make mutate)
//	go run ./integration-tests/mutate -only fence
//	go run ./integration-tests/mutate -list
//	go run ./integration-tests/mutate -j 1       # one at a time
//	go run ./integration-tests/mutate -fresh     # even those the record spares
//
// A mutation killed before by exactly what it is made of now is not run
// again: the record (mutations-killed.txt, record.go) keeps each kill's
// digest, and every run writes back what it learnt. Nothing else of the
// working tree is written: the mutated copy of the file lives in
// a temporary directory and reaches the compiler through go's -overlay
// flag, so mutations run side by side (-j, one per CPU by default). A
// mutation whose tests start the real binaries (the integration-tests
// package) gets them built with the same overlay into its temporary
// directory, handed to the tests in CHECKOUT_LOCK_BIN_DIR.
// A binary, or a package's test binary, that does not compile the mutated
// file is the one built once from the unmodified tree: most mutations
// rebuild one service, and run the integration tests' binary as it is.
//
// Each package set also runs once without any mutation (the baseline,
// beside the mutations): every test any of its mutations runs, in one go
// test, several at a time. A test that fails anyway would make the
// mutations that run it look killed: those are reported as such.
//
// On SIGINT or SIGTERM the running tests are killed (their whole process
// groups), no further mutation starts, the kills finished so far are
// recorded, and the temporary directories are removed; a second signal
// exits at once.
package main

import (
	"bytes"
	"context"
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
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/checkoutlock/integration-tests/harness"
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
	baseline := flag.Bool("baseline", true, "run each package set's tests without any mutation too")
	root := flag.String("root", "", "the repository (default: the directory holding go.work, from the current one up)")
	verbose := flag.Bool("v", false, "print the tests' output of every run")
	wide := flag.Bool("wide", false, "ignore the entries' run: patterns and -failfast, to see every test that kills each mutation")
	// One per core: with more, or beside other work, tests timed against
	// real timeouts (bursts against a wait, MultiXacts of overlapping
	// check-outs) stop telling a mutation from the load.
	workers := flag.Int("j", runtime.NumCPU(), "how many mutations and baselines to run at once")
	fresh := flag.Bool("fresh", false, "run every mutation, even one the record ("+recordName+") says was killed by what it is made of now")
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
	if *wide {
		for _, m := range chosen {
			m.Run, m.wide = "", true
		}
	}

	tmp, err := os.MkdirTemp("", "mutate-*")
	if err != nil {
		fmt.Fprintln(os.Stderr, "mutate:", err)
		return 2
	}
	defer os.RemoveAll(tmp)

	// A signal cancels ctx: the running tests are killed, no further
	// mutation starts, and each job removes its temporary directory as it
	// returns. A second signal removes them all at once and exits.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	go func() {
		s := <-sigs
		fmt.Fprintf(os.Stderr, "\nmutate: %v: stopping the tests\n", s)
		cancel()
		<-sigs
		fmt.Fprintln(os.Stderr, "mutate: second signal: exiting now")
		os.RemoveAll(tmp)
		os.Exit(130)
	}()

	r := &runner{root: dir, tmp: tmp, baseline: *baseline, verbose: *verbose, workers: max(*workers, 1)}
	// -wide runs other tests than the entries name: its kills are not the
	// record's.
	if !*wide {
		if r.record, err = readRecord(filepath.Join(dir, recordName)); err != nil {
			fmt.Fprintln(os.Stderr, "mutate:", err)
			return 2
		}
		if r.digests, err = newDigester(ctx, dir); err != nil {
			fmt.Fprintln(os.Stderr, "mutate:", err)
			return 2
		}
		r.reuse = !*fresh
	}
	start := time.Now()
	results, err := r.runAll(ctx, chosen)
	if err != nil {
		fmt.Fprintln(os.Stderr, "mutate:", err)
		if ctx.Err() != nil {
			return 130
		}
		return 2
	}
	if r.record != nil {
		// Interrupted, the kills finished so far are recorded: each was
		// run whole (one cut short is interrupted, and left out).
		r.record.update(results, r.digest)
		if err := r.record.write(); err != nil {
			fmt.Fprintln(os.Stderr, "mutate: write the record:", err)
			return 2
		}
	}
	printTable(os.Stdout, dir, results)
	fmt.Printf("\n%d mutations in %.0fs on %d workers (baselines %.0fs of their time); %d killed as recorded, not run again (-fresh runs them)\n",
		len(results), time.Since(start).Seconds(), r.workers, r.baselineTime.Seconds(), r.reused)
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
		fmt.Println("A survivor is a guarantee no test holds: write the test that fails under it (see docs/testing.md, Mutation checks).")
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
// current directory or the nearest one above it. Symbolic links are
// resolved: go names files by the real path, and an overlay must too.
func findRoot(dir string) (string, error) {
	if dir != "" {
		abs, err := filepath.Abs(dir)
		if err != nil {
			return "", err
		}
		return filepath.EvalSymlinks(abs)
	}
	d, err := os.Getwd()
	if err != nil {
		return "", err
	}
	if d, err = filepath.EvalSymlinks(d); err != nil {
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

// mutate is the content of m's file with m in it. The file must hold
// m.From exactly once; otherwise the entry is stale and the error says so.
func mutate(m *mutation) ([]byte, error) {
	data, err := os.ReadFile(m.path())
	if err != nil {
		return nil, err
	}
	if n := bytes.Count(data, []byte(m.From)); n != 1 {
		return nil, fmt.Errorf("from: found %d times in the file, want once (%s)", n, m.Where)
	}
	return bytes.Replace(data, []byte(m.From), []byte(m.To), 1), nil
}

func listMutations(root string, muts []*mutation) int {
	w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "NAME\tFILE\tPACKAGES\tSTATE\tWHY")
	code := 0
	for _, m := range muts {
		state := "applies"
		if _, err := mutate(m); err != nil {
			state, code = "STALE ("+err.Error()+")", 1
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

// startsBinaries says whether one of m's test packages starts the real
// binaries: those of the integration-tests module, whose harness takes
// them from CHECKOUT_LOCK_BIN_DIR when set.
func startsBinaries(root string, m *mutation) bool {
	it := filepath.Join(root, "integration-tests")
	for _, p := range m.Packages {
		d := filepath.Join(m.Module, p)
		if d == it || strings.HasPrefix(d, it+string(filepath.Separator)) {
			return true
		}
	}
	return false
}

// job is one mutation to run.
type job struct {
	m        *mutation
	mutated  []byte // the file's content with m in
	binaries bool   // its tests start the real binaries
	base     *baseline
	res      result
}

// baseline is one package set run without mutations: the tests of every
// mutation of the set, in one go test.
type baseline struct {
	m        *mutation // the set's packages, and the union of its mutations' -run
	runs     []string  // its mutations' distinct -run patterns ("" is every test)
	binaries bool
	ran, ok  bool
	detail   string
	// failed names the top-level tests that failed; when the run failed
	// without naming any (a panic, a timeout, a build), every mutation of
	// the set is reported as its baseline failing.
	failed []string
}

// key names the baseline m shares with every mutation of the same
// packages, by their directories: a workspace's package is the same
// whichever module's directory go test runs in.
func key(m *mutation) string {
	dirs := make([]string, len(m.Packages))
	for i, p := range m.Packages {
		dirs[i] = filepath.Join(m.Module, p)
	}
	slices.Sort(dirs)
	return strings.Join(dirs, "\x00")
}

// add counts m's tests and time in the baseline.
func (b *baseline) add(m *mutation) {
	if !slices.Contains(b.runs, m.Run) {
		b.runs = append(b.runs, m.Run)
	}
	if slices.Contains(b.runs, "") {
		b.m.Run = ""
	} else {
		alts := make([]string, len(b.runs))
		for i, r := range b.runs {
			alts[i] = "(?:" + r + ")"
		}
		b.m.Run = strings.Join(alts, "|")
	}
	// The tests run several at a time, but a set's timeout is what its
	// mutations' would be one after another, at most baselineMaxTimeout.
	b.m.Timeout = min(b.m.Timeout+m.Timeout, baselineMaxTimeout)
}

// baselineMaxTimeout bounds a baseline's go test -timeout.
const baselineMaxTimeout = 15 * time.Minute

// failsFor says whether the baseline's failures concern m: a failure that
// names no test concerns all of them, a named one those whose -run
// pattern selects it.
func (b *baseline) failsFor(m *mutation) bool {
	if b.ok {
		return false
	}
	if len(b.failed) == 0 || m.Run == "" {
		return true
	}
	re, err := regexp.Compile(m.Run)
	if err != nil {
		return true
	}
	for _, name := range b.failed {
		if re.MatchString(name) {
			return true
		}
	}
	return false
}

type runner struct {
	root     string
	tmp      string // every job's temporary directory is inside it
	baseline bool
	verbose  bool
	workers  int
	bins     *binaries // set when a mutation starts the binaries
	tests    *testBinaries
	// record and digests, when set, say which mutations were killed by
	// what they are made of now (record.go): with reuse, those are not
	// run again.
	record  *record
	digests *digester
	reuse   bool
	digest  map[*mutation]string // each run's digest, for the record
	reused  int

	mu           sync.Mutex // guards what follows, and stderr
	done         int
	total        int
	baselineTime time.Duration
}

// runAll runs the mutations and their baselines on r.workers workers and
// returns the mutations' results in the order given. Baselines and the
// mutations that start the binaries go first: they take longest.
func (r *runner) runAll(ctx context.Context, muts []*mutation) ([]result, error) {
	var (
		jobs      []*job
		baselines = map[string]*baseline{}
		order     []*baseline
		needBins  bool
	)
	for _, m := range muts {
		j := &job{m: m, binaries: startsBinaries(r.root, m), res: result{m: m, status: interrupted}}
		jobs = append(jobs, j)
		var err error
		if j.mutated, err = mutate(m); err != nil {
			j.res.status, j.res.detail = stale, err.Error()
			continue
		}
		if r.digests != nil {
			d, err := r.digests.digest(ctx, m, j.binaries)
			if err != nil {
				return nil, err
			}
			if r.digest == nil {
				r.digest = map[*mutation]string{}
			}
			r.digest[m] = d
			if r.reuse && r.record.killed[m.Name] == d {
				j.res.status, j.res.detail = killed, "as recorded: nothing it is made of has changed since"
				j.mutated = nil
				r.reused++
				continue
			}
		}
		needBins = needBins || j.binaries
		r.total++
		if !r.baseline {
			continue
		}
		b := baselines[key(m)]
		if b == nil {
			first := *m
			first.Timeout, first.wide = 0, true
			b = &baseline{m: &first, binaries: j.binaries}
			baselines[key(m)] = b
			order = append(order, b)
		}
		b.add(m)
		j.base = b
	}
	r.tests = &testBinaries{dir: filepath.Join(r.tmp, "tests"), pkgs: map[string]*testBinary{}}
	if err := os.MkdirAll(r.tests.dir, 0o755); err != nil {
		return nil, err
	}
	defer os.RemoveAll(r.tests.dir)
	if needBins && ctx.Err() == nil {
		fmt.Fprintf(os.Stderr, "building the binaries from the unmodified tree ...\n")
		bins, err := prepareBinaries(ctx, r.root, filepath.Join(r.tmp, "bin"))
		if err != nil {
			return nil, err
		}
		r.bins = bins
	}

	var work []func()
	for _, first := range []bool{true, false} {
		for _, b := range order {
			if b.binaries == first {
				work = append(work, func() { r.runBaseline(ctx, b) })
			}
		}
		for _, j := range jobs {
			if j.binaries == first && j.mutated != nil {
				work = append(work, func() { r.runJob(ctx, j) })
			}
		}
	}
	queue := make(chan func())
	var wg sync.WaitGroup
	for range r.workers {
		wg.Go(func() {
			for f := range queue {
				if ctx.Err() == nil {
					f()
				}
			}
		})
	}
	for _, f := range work {
		queue <- f
	}
	close(queue)
	wg.Wait()

	results := make([]result, len(jobs))
	for i, j := range jobs {
		results[i] = j.res
		if b := j.base; b != nil && j.res.status != stale {
			switch {
			case !b.ran:
				results[i].status, results[i].detail = interrupted, ""
			case b.failsFor(j.m):
				results[i].status, results[i].detail = baselineBad, b.detail
			}
		}
	}
	return results, nil
}

// runBaseline runs b's tests without any mutation.
func (r *runner) runBaseline(ctx context.Context, b *baseline) {
	var env []string
	if b.binaries {
		env = []string{harness.BinDirVariable + "=" + r.bins.dir}
	}
	start := time.Now()
	// go test's default -parallel, as each mutation's own run has: the
	// tests are timed against the same load, the other workers' runs.
	out, err := r.tests.runTests(ctx, testRun{m: b.m, timeout: b.m.Timeout, env: env}, "")
	elapsed := time.Since(start)
	if ctx.Err() != nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.baselineTime += elapsed
	b.ran, b.ok = true, err == nil
	if err != nil {
		b.detail = "without the mutation: " + failureSummary(out, err, true)
		if !bytes.Contains(out, []byte("panic:")) {
			b.failed = failedTests(out)
		}
		fmt.Fprintf(os.Stderr, "\n--- baseline of %s (%d patterns) FAILED ---\n%s\n", pkgs(b.m), len(b.runs), failures(out, 60))
	} else {
		fmt.Fprintf(os.Stderr, "baseline of %s (%d patterns): ok (%.1fs)\n", pkgs(b.m), len(b.runs), elapsed.Seconds())
	}
}

// runJob runs one mutation: the binaries built with it, if its tests
// start them, then its tests built with it.
func (r *runner) runJob(ctx context.Context, j *job) {
	m := j.m
	start := time.Now()
	res := r.mutated(ctx, j)
	res.elapsed = time.Since(start)
	if ctx.Err() != nil {
		res.status, res.detail = interrupted, ""
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	j.res = res
	r.done++
	fmt.Fprintf(os.Stderr, "[%d/%d] %s: %s (%.1fs)%s\n", r.done, r.total, m.Name, res.status, res.elapsed.Seconds(), suffix(res.detail))
}

// mutated builds and runs j's tests with the mutation in, through an
// overlay in a temporary directory of its own.
func (r *runner) mutated(ctx context.Context, j *job) result {
	m := j.m
	res := result{m: m}
	dir, err := os.MkdirTemp(r.tmp, m.Name+"-*")
	if err != nil {
		res.status, res.detail = broken, err.Error()
		return res
	}
	defer os.RemoveAll(dir)
	overlay, err := writeOverlay(dir, m.path(), j.mutated)
	if err != nil {
		res.status, res.detail = broken, err.Error()
		return res
	}
	var env []string
	if j.binaries {
		binDir, out, err := r.bins.build(ctx, r.root, filepath.Join(dir, "bin"), overlay, m.path())
		if err != nil {
			if ctx.Err() == nil {
				res.status, res.detail = broken, "the mutated binaries do not build: "+firstLine(out)
				r.print(fmt.Sprintf("\n--- %s: the binaries do not build ---\n%s\n", m.Name, tail(out, 20)))
			}
			return res
		}
		env = []string{harness.BinDirVariable + "=" + binDir}
	}
	// A mutation its tests find by chance is run again while they pass,
	// up to its tries.
	var out []byte
	try := 0
	for {
		try++
		out, err = r.tests.runTests(ctx, testRun{m: m, timeout: m.Timeout, overlay: overlay, env: env}, dir)
		if r.verbose {
			r.print(fmt.Sprintf("\n--- %s: output of run %d ---\n%s\n", m.Name, try, out))
		}
		if err != nil || ctx.Err() != nil || try >= m.Tries {
			break
		}
	}
	switch {
	case ctx.Err() != nil:
		res.status = interrupted
	case err == nil:
		res.status, res.detail = survived, "the tests passed with the mutation in"
		if try > 1 {
			res.detail = fmt.Sprintf("the tests passed with the mutation in, %d runs of %d", try, try)
		}
		r.print(fmt.Sprintf("\n--- %s survived%s ---\n%s\n", m.Name, suffix(m.Why), tail(out, 15)))
	case errors.As(err, new(baseBuildError)):
		res.status, res.detail = broken, err.Error()
		r.print(fmt.Sprintf("\n--- %s: its tests do not build unmodified ---\n%s\n", m.Name, tail(out, 20)))
	case errors.As(err, new(buildError)):
		res.status, res.detail = broken, "the mutated code does not build: "+firstLine(out)
		r.print(fmt.Sprintf("\n--- %s does not build ---\n%s\n", m.Name, tail(out, 20)))
	default:
		res.status, res.detail = killed, failureSummary(out, err, m.wide)
		if try > 1 {
			res.detail = fmt.Sprintf("run %d of up to %d: %s", try, m.Tries, res.detail)
		}
	}
	return res
}

// print writes s to stderr whole, between other workers' lines.
func (r *runner) print(s string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	fmt.Fprint(os.Stderr, s)
}

// writeOverlay writes content, the mutated copy of the file at path, into
// dir with an overlay (go build -overlay) that puts it in path's place,
// and returns the overlay's path.
func writeOverlay(dir, path string, content []byte) (string, error) {
	mutated := filepath.Join(dir, filepath.Base(path))
	if err := os.WriteFile(mutated, content, 0o644); err != nil {
		return "", err
	}
	data, err := json.Marshal(struct{ Replace map[string]string }{map[string]string{path: mutated}})
	if err != nil {
		return "", err
	}
	overlay := filepath.Join(dir, "overlay.json")
	return overlay, os.WriteFile(overlay, data, 0o644)
}

// goCommand runs go with args in dir, its output combined, in a process
// group of its own that is killed when ctx ends.
func goCommand(ctx context.Context, dir string, env []string, args ...string) ([]byte, error) {
	return command(ctx, dir, env, "go", args...)
}

// command runs name with args in dir, with env added to this process's,
// its output combined, in a process group of its own that is killed when
// ctx ends.
func command(ctx context.Context, dir string, env []string, name string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	if env != nil {
		cmd.Env = append(cmd.Environ(), env...)
	}
	ownProcessGroup(cmd)
	cmd.WaitDelay = 10 * time.Second
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.Bytes(), err
}

var failLine = regexp.MustCompile(`(?m)^\s*--- FAIL: (\S+)`)

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

// failedTests names the top-level tests that failed, once each.
func failedTests(out []byte) []string {
	var names []string
	for _, mm := range failLine.FindAllSubmatch(out, -1) {
		name, _, _ := strings.Cut(string(mm[1]), "/")
		if !slices.Contains(names, name) {
			names = append(names, name)
		}
	}
	return names
}

func firstLine(out []byte) string {
	for _, l := range strings.Split(string(out), "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
			return l
		}
	}
	return ""
}

// testLine is a line a test wrote of itself (t.Log, t.Error) or go
// test's verdict on one: what says why a run failed, without the logs of
// the processes it started.
var testLine = regexp.MustCompile(`^\s*(--- FAIL|\S+_test\.go:\d+: |panic: )`)

// failures is the last n of out's testLine lines, or its tail when it has
// none.
func failures(out []byte, n int) string {
	var lines []string
	for _, l := range strings.Split(string(out), "\n") {
		if testLine.MatchString(l) {
			lines = append(lines, l)
		}
	}
	if len(lines) == 0 {
		return tail(out, n)
	}
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

func tail(out []byte, n int) string {
	lines := strings.Split(strings.TrimRight(string(out), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
