package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"

	"github.com/checkoutlock/integration-tests/harness"
)

// binaries are the commands the integration tests start (harness.Binaries),
// built once from the unmodified tree, and the files each is compiled
// from: a mutation rebuilds only the binaries that compile its file.
type binaries struct {
	// dir holds the binaries built from the unmodified tree, each named
	// after its package's directory, as the harness expects.
	dir string
	// pkgs are the binaries' packages, relative to the repository, and
	// files[i] the files pkgs[i] is compiled from (Go, cgo, assembly and
	// embedded files of it and every package it imports).
	pkgs  []string
	files []map[string]bool
}

// prepareBinaries builds harness.Binaries from the unmodified tree at
// root into dir and lists the files each is compiled from.
func prepareBinaries(ctx context.Context, root, dir string) (*binaries, error) {
	b := &binaries{dir: dir, pkgs: harness.Binaries, files: make([]map[string]bool, len(harness.Binaries))}
	errs := make([]error, len(b.pkgs)+3)
	var wg sync.WaitGroup
	wg.Go(func() {
		if out, err := goCommand(ctx, root, nil, append([]string{"build", "-o", dir + string(filepath.Separator)}, dotted(b.pkgs)...)...); err != nil {
			errs[0] = fmt.Errorf("go build (the unmodified tree): %v\n%s", err, out)
		}
	})
	// The broker the events tests start, and the SMTP server the notices
	// tests start, never mutated.
	wg.Go(func() { errs[len(errs)-1] = harness.BuildNATSServer(dir) })
	wg.Go(func() { errs[len(errs)-2] = harness.BuildMailpit(dir) })
	for i, pkg := range b.pkgs {
		wg.Go(func() { b.files[i], errs[i+1] = sourceFiles(ctx, root, pkg) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return b, nil
}

// dotted is pkgs, each as ./pkg: a directory, not an import path.
func dotted(pkgs []string) []string {
	out := make([]string, len(pkgs))
	for i, p := range pkgs {
		out[i] = "./" + p
	}
	return out
}

// sourceFiles is the set of files, by absolute path, that the package pkg
// (relative to root) is compiled from, its imports' included. The set
// must hold files under root: were go to name them otherwise (a path
// through a symbolic link), no mutation's file would be found in it, and
// every binary would silently run unmutated.
func sourceFiles(ctx context.Context, root, pkg string) (map[string]bool, error) {
	files, err := listFiles(ctx, root, "-json=Dir,GoFiles,CgoFiles,SFiles,CFiles,HFiles,EmbedFiles", "./"+pkg)
	if err != nil {
		return nil, err
	}
	for f := range files {
		if strings.HasPrefix(f, root+string(filepath.Separator)) {
			return files, nil
		}
	}
	return nil, fmt.Errorf("go list %s names no file under %s", pkg, root)
}

// listFiles is the set of files of go list -deps with args, run in dir.
func listFiles(ctx context.Context, dir string, args ...string) (map[string]bool, error) {
	cmd := exec.CommandContext(ctx, "go", append([]string{"list", "-deps"}, args...)...)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go list %s in %s: %v\n%s", strings.Join(args, " "), dir, err, stderr.Bytes())
	}
	files, err := parseSourceFiles(out)
	if err != nil {
		return nil, fmt.Errorf("go list %s in %s: %w", strings.Join(args, " "), dir, err)
	}
	return files, nil
}

// parseSourceFiles reads go list -json's stream of packages into the set
// of their files.
func parseSourceFiles(out []byte) (map[string]bool, error) {
	files := map[string]bool{}
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p struct {
			Dir                                                   string
			GoFiles, CgoFiles, SFiles, CFiles, HFiles, EmbedFiles []string
			// A test binary's (go list -test): its tests' files.
			TestGoFiles, XTestGoFiles, TestEmbedFiles, XTestEmbedFiles []string
		}
		if err := dec.Decode(&p); err == io.EOF {
			return files, nil
		} else if err != nil {
			return nil, err
		}
		for _, list := range [][]string{p.GoFiles, p.CgoFiles, p.SFiles, p.CFiles, p.HFiles, p.EmbedFiles,
			p.TestGoFiles, p.XTestGoFiles, p.TestEmbedFiles, p.XTestEmbedFiles} {
			for _, f := range list {
				files[filepath.Join(p.Dir, f)] = true
			}
		}
	}
}

// build builds, through overlay, the binaries compiled from path into
// dir, links the others there from b.dir, and returns the directory to
// run them from (b.dir itself when none compiles path) and the build's
// output.
func (b *binaries) build(ctx context.Context, root, dir, overlay, path string) (string, []byte, error) {
	var mutated, same []string
	for i, pkg := range b.pkgs {
		if b.files[i][path] {
			mutated = append(mutated, pkg)
		} else {
			same = append(same, pkg)
		}
	}
	if len(mutated) == 0 {
		return b.dir, nil, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", nil, err
	}
	args := append([]string{"build", "-overlay", overlay, "-o", dir + string(filepath.Separator)}, dotted(mutated)...)
	if out, err := goCommand(ctx, root, nil, args...); err != nil {
		return "", out, err
	}
	for _, name := range append(baseNames(same), harness.NATSServerBinary, harness.MailpitBinary) {
		if err := os.Symlink(filepath.Join(b.dir, name), filepath.Join(dir, name)); err != nil {
			return "", nil, err
		}
	}
	return dir, nil, nil
}

// baseNames are the binaries' names of pkgs.
func baseNames(pkgs []string) []string {
	out := make([]string, len(pkgs))
	for i, p := range pkgs {
		out[i] = filepath.Base(p)
	}
	return out
}
