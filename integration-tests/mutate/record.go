package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
)

// The record of the mutations killed: for each, the digest of what its
// run was made of (recordName, at the repository's root, committed with
// the code). A mutation whose digest is the one recorded is not run
// again: its tests would be built from the same bytes and read the same
// files, and so fail as they did, as go test reuses a test's result when
// nothing it depends on has changed. What a mutation's run is made of:
//
//   - its entry (name, file, packages, run, timeout, tries, from, to) and the Go
//     release;
//   - for a mutation whose tests start the real binaries (the
//     integration-tests module's), every file of the repository, since
//     those tests run its scripts and read its documents;
//   - for any other, the repository's files its test binaries compile (Go
//     and embedded files, its imports' within the repository included)
//     and every file of the repository that is not Go (schemas,
//     migrations, documents, scripts, data a test may read).
//
// Files are those git tracks and the untracked ones it does not ignore,
// as they are in the working tree; the lists of mutations and the record
// itself are not part of any digest. A run with -fresh runs every
// mutation whatever the record says; every run writes back what it
// learnt: a mutation killed recorded with its digest, any other outcome
// (survived, stale, broken, a failing baseline) struck out.
const recordName = "mutations-killed.txt"

// recordHeader opens the record.
const recordHeader = `# Mutations killed, each with the digest of what its run was made of
# (integration-tests/mutate/record.go): make mutate runs again only those
# whose digest has changed. Written by make mutate; commit it with the code.
`

// record is the record read from, and written back to, path.
type record struct {
	path   string
	killed map[string]string // digest by mutation name
}

// readRecord reads the record at path; a missing one is empty.
func readRecord(path string) (*record, error) {
	r := &record{path: path, killed: map[string]string{}}
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return r, nil
	}
	if err != nil {
		return nil, err
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		name, digest, ok := strings.Cut(line, " ")
		if !ok || name == "" || len(digest) != 2*sha256.Size {
			return nil, fmt.Errorf("%s:%d: want a mutation's name and its digest, got %q", path, n, line)
		}
		r.killed[name] = digest
	}
	return r, sc.Err()
}

// update takes in what a run learnt.
func (r *record) update(results []result, digests map[*mutation]string) {
	for _, res := range results {
		switch res.status {
		case interrupted:
		case killed:
			if d := digests[res.m]; d != "" {
				r.killed[res.m.Name] = d
			}
		default:
			delete(r.killed, res.m.Name)
		}
	}
}

// write writes the record back, one mutation a line, in name order.
func (r *record) write() error {
	var b strings.Builder
	b.WriteString(recordHeader)
	for _, name := range slices.Sorted(maps.Keys(r.killed)) {
		fmt.Fprintf(&b, "%s %s\n", name, r.killed[name])
	}
	return os.WriteFile(r.path, []byte(b.String()), 0o644)
}

// digester makes mutations' digests, reading and hashing each file once.
type digester struct {
	root string
	// tree is every file of the repository but the lists and the record,
	// relative to root, in order.
	tree []string

	mu       sync.Mutex
	files    map[string]string          // file's hash by relative path
	compiled map[string]map[string]bool // a package directory's test binary's files
}

// newDigester lists the repository's files at root.
func newDigester(ctx context.Context, root string) (*digester, error) {
	cmd := exec.CommandContext(ctx, "git", "ls-files", "-z", "--cached", "--others", "--exclude-standard")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("git ls-files in %s: %w", root, err)
	}
	d := &digester{root: root, files: map[string]string{}, compiled: map[string]map[string]bool{}}
	for _, f := range strings.Split(string(out), "\x00") {
		if f == "" || f == recordName || filepath.Base(f) == listName {
			continue
		}
		if _, err := os.Lstat(filepath.Join(root, f)); err != nil {
			continue // deleted in the working tree, not yet in the index
		}
		d.tree = append(d.tree, f)
	}
	slices.Sort(d.tree)
	d.tree = slices.Compact(d.tree)
	return d, nil
}

// hashFile is the hash of the file at rel (relative to root).
func (d *digester) hashFile(rel string) (string, error) {
	d.mu.Lock()
	h, ok := d.files[rel]
	d.mu.Unlock()
	if ok {
		return h, nil
	}
	f, err := os.Open(filepath.Join(d.root, rel))
	if err != nil {
		return "", err
	}
	defer f.Close()
	s := sha256.New()
	if _, err := io.Copy(s, f); err != nil {
		return "", err
	}
	h = hex.EncodeToString(s.Sum(nil))
	d.mu.Lock()
	d.files[rel] = h
	d.mu.Unlock()
	return h, nil
}

// compiledFiles is the set of files, relative to root, that the test
// binary of the package in pkgDir compiles from the repository.
func (d *digester) compiledFiles(ctx context.Context, pkgDir string) (map[string]bool, error) {
	d.mu.Lock()
	set, ok := d.compiled[pkgDir]
	d.mu.Unlock()
	if ok {
		return set, nil
	}
	abs, err := testSourceFiles(ctx, pkgDir)
	if err != nil {
		return nil, err
	}
	set = map[string]bool{}
	for f := range abs {
		if rel, err := filepath.Rel(d.root, f); err == nil && !strings.HasPrefix(rel, "..") {
			set[filepath.ToSlash(rel)] = true
		}
	}
	d.mu.Lock()
	d.compiled[pkgDir] = set
	d.mu.Unlock()
	return set, nil
}

// digest is what m's run is made of (the record's comment says what).
func (d *digester) digest(ctx context.Context, m *mutation, binaries bool) (string, error) {
	s := sha256.New()
	fmt.Fprintf(s, "%s\x00%q\x00%q\x00%q\x00%q\x00%s\x00%d\x00%q\x00%q\x00%s\n", runtime.Version(), m.Name, rel(d.root, m.path()),
		strings.Join(m.Packages, " "), m.Run, m.Timeout, m.Tries, m.From, m.To, filepath.Base(m.Module))
	compiled := map[string]bool{}
	if !binaries {
		for _, p := range m.Packages {
			set, err := d.compiledFiles(ctx, filepath.Join(m.Module, p))
			if err != nil {
				return "", err
			}
			for f := range set {
				compiled[f] = true
			}
		}
	}
	for _, f := range d.tree {
		if !binaries && strings.HasSuffix(f, ".go") && !compiled[f] {
			continue
		}
		h, err := d.hashFile(f)
		if err != nil {
			return "", err
		}
		fmt.Fprintf(s, "%s %s\n", h, f)
	}
	return hex.EncodeToString(s.Sum(nil)), nil
}
