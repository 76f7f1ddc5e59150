package main

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// The list's format, one file per module (<module>/mutations.txt), read
// line by line:
//
//	# A comment (a line starting with #, outside a value).
//	name: fence-lock-id
//	why: the loan write is fenced by this lock's id, not any lock of the patron
//	file: internal/lending/checkout_write.go
//	packages: ./internal/lending
//	run: ^TestFence
//	timeout: 2m
//	tries: 3
//	from: WHERE id = $3::uuid AND user_id = ...
//	to: WHERE user_id = ...
//
// An entry starts with name: and ends at a blank line. A value is the rest
// of its line after "key: ", exactly (no quoting, no escapes). A value of
// several lines is written as "key:" alone, followed by its lines, each
// after "| " ("|" alone for an empty line). file and packages are relative
// to the module's directory (packages separated by spaces); run (go test's
// -run), timeout (default defaultTimeout) and tries (default 1) are
// optional; from must occur exactly once in file. tries is for a mutation
// its tests find by chance (random histories, a race they provoke): it is
// run up to that many times, each run drawing anew, and is killed at the
// first run whose tests fail, survived only when every run passes; a
// guarantee its tests find every time needs none.

// defaultTimeout is a mutation's go test -timeout when its entry names none.
const defaultTimeout = 2 * time.Minute

// maxTries bounds an entry's tries: a guarantee its tests find less often
// than that needs a test that looks for it harder.
const maxTries = 5

// mutation is one entry of a list.
type mutation struct {
	Name     string
	Why      string
	File     string // relative to Module
	Packages []string
	Run      string
	Timeout  time.Duration
	// Tries is how many runs of its tests the mutation may survive before
	// it is survived (tries:, at least 1).
	Tries    int
	From, To string

	// Module is the directory of the module whose list holds the entry.
	Module string
	// Where is the entry's place, list:line, for messages.
	Where string
	// wide runs every test of the packages, not only run's, and all of
	// them (no -failfast): -wide.
	wide bool
}

// path is the mutated file's absolute path.
func (m *mutation) path() string { return filepath.Join(m.Module, m.File) }

// readList reads the mutations of the list at path, whose module is its
// directory.
func readList(path string) ([]*mutation, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return parseList(data, path, filepath.Dir(path))
}

// parseList parses a list's text (named name in messages) of the module
// in dir.
func parseList(data []byte, name, dir string) ([]*mutation, error) {
	var (
		out  []*mutation
		cur  *mutation
		seen map[string]bool
		// block is the key whose lines ("| ...") are being read.
		block string
		lines []string
		errs  []string
	)
	fail := func(line int, format string, args ...any) {
		errs = append(errs, fmt.Sprintf("%s:%d: %s", name, line, fmt.Sprintf(format, args...)))
	}
	endBlock := func(line int) {
		if block != "" {
			set(cur, block, strings.Join(lines, "\n"), seen, func(f string, a ...any) { fail(line, f, a...) })
			block, lines = "", nil
		}
	}
	endEntry := func(line int) {
		endBlock(line)
		if cur != nil {
			for _, k := range []string{"file", "packages", "from", "to"} {
				if !seen[k] {
					fail(line, "mutation %q has no %s:", cur.Name, k)
				}
			}
			if seen["from"] && seen["to"] && cur.From == cur.To {
				fail(line, "mutation %q: from and to are the same", cur.Name)
			}
			if cur.Timeout == 0 {
				cur.Timeout = defaultTimeout
			}
			if cur.Tries == 0 {
				cur.Tries = 1
			}
			out = append(out, cur)
		}
		cur, seen = nil, nil
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 64*1024), 1<<20)
	n := 0
	for sc.Scan() {
		n++
		text := strings.TrimSuffix(sc.Text(), "\r")
		switch {
		case block != "" && (text == "|" || strings.HasPrefix(text, "| ")):
			lines = append(lines, strings.TrimPrefix(strings.TrimPrefix(text, "|"), " "))
			continue
		case strings.TrimSpace(text) == "":
			endEntry(n)
			continue
		case strings.HasPrefix(text, "#"):
			endBlock(n)
			continue
		}
		endBlock(n)
		key, value, ok := strings.Cut(text, ":")
		if !ok || strings.ContainsAny(key, " \t") {
			fail(n, "want key: value, got %q", text)
			continue
		}
		if key == "name" {
			endEntry(n)
			cur, seen = &mutation{Module: dir, Where: fmt.Sprintf("%s:%d", name, n)}, map[string]bool{}
		} else if cur == nil {
			fail(n, "%s: before any name:", key)
			continue
		}
		if value == "" {
			block = key
			continue
		}
		if !strings.HasPrefix(value, " ") {
			fail(n, "want a space after %s:", key)
			continue
		}
		set(cur, key, value[1:], seen, func(f string, a ...any) { fail(n, f, a...) })
	}
	endEntry(n + 1)
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("%s", strings.Join(errs, "\n"))
	}
	return out, nil
}

// set sets an entry's field key to value.
func set(m *mutation, key, value string, seen map[string]bool, fail func(string, ...any)) {
	if seen[key] {
		fail("%s: given twice", key)
		return
	}
	seen[key] = true
	switch key {
	case "name":
		if value == "" || strings.ContainsAny(value, " \t") {
			fail("name: %q must be one word", value)
		}
		m.Name = value
	case "why":
		m.Why = value
	case "file":
		if filepath.IsAbs(value) || strings.HasPrefix(filepath.Clean(value), "..") {
			fail("file: %q must be inside the module", value)
		}
		m.File = value
	case "packages":
		m.Packages = strings.Fields(value)
		if len(m.Packages) == 0 {
			fail("packages: none given")
		}
	case "run":
		m.Run = value
	case "timeout":
		d, err := time.ParseDuration(value)
		if err != nil || d <= 0 {
			fail("timeout: %q is not a duration such as 90s", value)
		}
		m.Timeout = d
	case "tries":
		n, err := strconv.Atoi(value)
		if err != nil || n < 1 || n > maxTries {
			fail("tries: %q is not a whole number from 1 to %d", value, maxTries)
		}
		m.Tries = n
	case "from":
		m.From = value
	case "to":
		m.To = value
	default:
		fail("unknown key %q (name, why, file, packages, run, timeout, tries, from, to)", key)
	}
}
