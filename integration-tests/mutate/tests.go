package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"path/filepath"
	"strconv"
	"sync"
	"time"
)

// testBinaries are the packages' test binaries built from the unmodified
// tree, each once, on first need, with the files it is compiled from: a
// mutation whose file a test binary does not compile runs that binary as
// it is, instead of a go test that would link it again (the integration
// tests' binary takes seconds to link, and most mutations are of the
// services it starts, not of it).
type testBinaries struct {
	dir string // where they are built

	mu   sync.Mutex
	pkgs map[string]*testBinary // by the package's directory
}

// testBinary is one package's test binary from the unmodified tree.
type testBinary struct {
	once  sync.Once
	path  string
	files map[string]bool
	out   []byte // go test -c's output when it failed
	err   error
}

// get is the test binary of the package in pkgDir, built on first call.
func (tb *testBinaries) get(ctx context.Context, pkgDir string) *testBinary {
	tb.mu.Lock()
	b := tb.pkgs[pkgDir]
	if b == nil {
		b = &testBinary{}
		tb.pkgs[pkgDir] = b
	}
	tb.mu.Unlock()
	b.once.Do(func() {
		sum := sha256.Sum256([]byte(pkgDir))
		b.path = filepath.Join(tb.dir, filepath.Base(pkgDir)+"-"+hex.EncodeToString(sum[:6])+".test")
		if b.out, b.err = goCommand(ctx, pkgDir, nil, "test", "-c", "-vet=off", "-o", b.path, "."); b.err != nil {
			return
		}
		b.files, b.err = testSourceFiles(ctx, pkgDir)
	})
	return b
}

// testSourceFiles is the set of files, by absolute path, that the test
// binary of the package in pkgDir is compiled from: its tests' files, the
// package's and every import's.
func testSourceFiles(ctx context.Context, pkgDir string) (map[string]bool, error) {
	return listFiles(ctx, pkgDir, "-test",
		"-json=Dir,GoFiles,CgoFiles,SFiles,CFiles,HFiles,EmbedFiles,TestGoFiles,XTestGoFiles,TestEmbedFiles,XTestEmbedFiles", ".")
}

// testRun is what runTests needs of one run: the mutation (or a baseline)
// whose packages and -run pattern it runs, and how.
type testRun struct {
	m       *mutation
	timeout time.Duration
	// overlay, when set, puts the mutated file in place of m's: every
	// package whose test binary compiles that file is built with it.
	overlay string
	env     []string
}

// runTests runs r's packages' tests, one package after another, each
// with the test binary built from the unmodified tree unless it compiles
// the mutated file (then built through the overlay into dir). Unless
// r.m.wide, the run stops at the first package that fails and each stops
// at its first failing test (-failfast). The output is each binary's, as
// go test would print it, and the error the first failure's.
func (tb *testBinaries) runTests(ctx context.Context, r testRun, dir string) ([]byte, error) {
	var all bytes.Buffer
	var first error
	for i, p := range r.m.Packages {
		pkgDir := filepath.Join(r.m.Module, p)
		base := tb.get(ctx, pkgDir)
		if base.err != nil {
			all.Write(base.out)
			return all.Bytes(), baseBuildError{pkgDir: pkgDir, err: base.err}
		}
		bin := base.path
		if r.overlay != "" && base.files[r.m.path()] {
			bin = filepath.Join(dir, strconv.Itoa(i)+".test")
			if out, err := goCommand(ctx, pkgDir, nil, "test", "-c", "-vet=off", "-overlay", r.overlay, "-o", bin, "."); err != nil {
				all.Write(out)
				return all.Bytes(), buildError{err}
			}
		}
		out, err := runTestBinary(ctx, pkgDir, bin, r)
		all.Write(out)
		if err != nil && first == nil {
			first = err
		}
		if err != nil && !r.m.wide {
			break
		}
	}
	return all.Bytes(), first
}

// baseBuildError is a test binary that did not build from the unmodified
// tree (its tests do not compile, or the build was killed): the mutation's
// tests never ran, so it is neither killed nor survived.
type baseBuildError struct {
	pkgDir string
	err    error
}

func (e baseBuildError) Error() string {
	return fmt.Sprintf("the unmodified tests of %s do not build: %v", e.pkgDir, e.err)
}
func (e baseBuildError) Unwrap() error { return e.err }

// buildError is a test binary that did not build with the mutation in.
type buildError struct{ err error }

func (e buildError) Error() string { return "go test -c: " + e.err.Error() }
func (e buildError) Unwrap() error { return e.err }

// runTestBinary runs one package's test binary in the package's
// directory, as go test would, killing it (its whole process group) if
// ctx ends or it outlives its timeout by a minute: before that, its own
// -test.timeout has said which test hangs.
func runTestBinary(ctx context.Context, pkgDir, bin string, r testRun) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, r.timeout+time.Minute)
	defer cancel()
	args := []string{"-test.count=1", "-test.timeout=" + r.timeout.String(), "-test.paniconexit0"}
	if !r.m.wide {
		args = append(args, "-test.failfast")
	}
	if r.m.Run != "" {
		args = append(args, "-test.run="+r.m.Run)
	}
	return command(ctx, pkgDir, r.env, bin, args...)
}
