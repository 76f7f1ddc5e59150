package migrations

import (
	"fmt"
	"io/fs"
	"regexp"
	"strings"
	"testing"
)

// TestFilesArePairedAndNumberedInOrder keeps the directory what golang-migrate
// expects: NNNNNN_name.up.sql with its .down.sql, versions 1, 2, 3… with no gaps.
func TestFilesArePairedAndNumberedInOrder(t *testing.T) {
	t.Parallel()
	for name, fsys := range map[string]fs.FS{"shared": FS, "tenant schema": TenantSchemaFS} {
		t.Run(name, func(t *testing.T) { pairedAndNumbered(t, fsys) })
	}
}

func pairedAndNumbered(t *testing.T, fsys fs.FS) {
	names, err := fs.Glob(fsys, "*.sql")
	if err != nil {
		t.Fatal(err)
	}
	if len(names) == 0 {
		t.Fatal("no migrations")
	}
	pattern := regexp.MustCompile(`^(\d{6})_([a-z0-9_]+)\.(up|down)\.sql$`)
	ups := map[int]string{}
	downs := map[int]string{}
	for _, n := range names {
		m := pattern.FindStringSubmatch(n)
		if m == nil {
			t.Errorf("%s does not match NNNNNN_name.up|down.sql", n)
			continue
		}
		var v int
		fmt.Sscanf(m[1], "%d", &v)
		if m[3] == "up" {
			ups[v] = m[2]
		} else {
			downs[v] = m[2]
		}
	}
	for v := 1; v <= len(ups); v++ {
		if ups[v] == "" {
			t.Errorf("no up migration %06d", v)
		}
		if downs[v] != ups[v] {
			t.Errorf("migration %06d: up %q, down %q", v, ups[v], downs[v])
		}
	}
	if len(downs) != len(ups) {
		t.Errorf("%d up and %d down migrations", len(ups), len(downs))
	}
}

// TestMigrationsHoldNoTransactionControl: circulation-storage applies each
// up migration as one statement, which PostgreSQL runs as one transaction
// together with the record of the migration's version. A file that ended
// that transaction itself (COMMIT, END), or held a statement that cannot
// run in one (CREATE INDEX CONCURRENTLY), would break that.
func TestMigrationsHoldNoTransactionControl(t *testing.T) {
	t.Parallel()
	for name, fsys := range map[string]fs.FS{"shared": FS, "tenant schema": TenantSchemaFS} {
		names, err := fs.Glob(fsys, "*.up.sql")
		if err != nil || len(names) == 0 {
			t.Fatalf("%s: %d migrations, %v", name, len(names), err)
		}
		for _, n := range names {
			b, err := fs.ReadFile(fsys, n)
			if err != nil {
				t.Fatal(err)
			}
			if m := transactionControl(string(b)); m != "" {
				t.Errorf("%s %s: %q outside a function's body", name, n, m)
			}
		}
	}
}

// transactionControl is the first transaction control in sql outside its
// comments, strings and functions' bodies, or "".
func transactionControl(sql string) string {
	return control.FindString(statements(sql))
}

var control = regexp.MustCompile(`(?i)\b(BEGIN|COMMIT|ROLLBACK|ABORT|START\s+TRANSACTION|SAVEPOINT|CONCURRENTLY|VACUUM|ALTER\s+SYSTEM|CREATE\s+DATABASE|CALL)\b|\bEND\s*(TRANSACTION|WORK)?\s*;`)

func TestTransactionControlIsFoundOutsideBodiesOnly(t *testing.T) {
	t.Parallel()
	for sql, want := range map[string]string{
		"CREATE FUNCTION f() RETURNS void AS $$ BEGIN NULL; END; $$ LANGUAGE plpgsql;":         "",
		"CREATE FUNCTION f() RETURNS void AS $body$ BEGIN NULL; END; $body$ LANGUAGE plpgsql;": "",
		"SELECT 'COMMIT; -- it''s';":                 "",
		"/* COMMIT; */ SELECT 1; -- ROLLBACK;":       "",
		"SELECT 'it''s'; COMMIT;":                    "COMMIT",
		"CREATE INDEX CONCURRENTLY i ON t (c);":      "CONCURRENTLY",
		"SELECT 1;\nEND;":                            "END;",
		"SELECT $t$ BEGIN $t$;\nbegin;":              "begin",
		"CREATE TABLE committed (committed_at int);": "",
	} {
		if got := transactionControl(sql); got != want {
			t.Errorf("transactionControl(%q) = %q, want %q", sql, got, want)
		}
	}
}

// dollarTag opens (and closes) a dollar-quoted string.
var dollarTag = regexp.MustCompile(`^\$([A-Za-z_][A-Za-z_0-9]*)?\$`)

// statements is sql without its comments, its string literals and its
// dollar-quoted strings (the bodies of functions, whose BEGIN and END are
// PL/pgSQL's blocks), each string left as a space.
func statements(sql string) string {
	var out strings.Builder
	for i := 0; i < len(sql); {
		rest := sql[i:]
		switch {
		case strings.HasPrefix(rest, "--"):
			end := strings.IndexByte(rest, '\n')
			if end < 0 {
				return out.String()
			}
			i += end
		case strings.HasPrefix(rest, "/*"):
			end := strings.Index(rest, "*/")
			if end < 0 {
				return out.String()
			}
			i += end + 2
		case rest[0] == '\'':
			end := 1
			for end < len(rest) && (rest[end] != '\'' || strings.HasPrefix(rest[end:], "''")) {
				if rest[end] == '\'' {
					end++ // the first of a doubled quote
				}
				end++
			}
			out.WriteByte(' ')
			i += end + 1
		case dollarTag.MatchString(rest):
			tag := dollarTag.FindString(rest)
			end := strings.Index(rest[len(tag):], tag)
			if end < 0 {
				return out.String()
			}
			out.WriteByte(' ')
			i += len(tag) + end + len(tag)
		default:
			out.WriteByte(rest[0])
			i++
		}
	}
	return out.String()
}
