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
// that transaction itself (COMMIT), or held a statement that cannot run in
// one (CREATE INDEX CONCURRENTLY), would break that.
func TestMigrationsHoldNoTransactionControl(t *testing.T) {
	t.Parallel()
	control := regexp.MustCompile(`(?i)\b(BEGIN|COMMIT|ROLLBACK|START\s+TRANSACTION|SAVEPOINT|CONCURRENTLY|VACUUM)\b`)
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
			if m := control.FindString(outsideBodies(string(b))); m != "" {
				t.Errorf("%s %s: %q outside a function's body", name, n, m)
			}
		}
	}
}

// outsideBodies is sql without its comments and its dollar-quoted
// strings (the bodies of functions, whose BEGIN is PL/pgSQL's block).
func outsideBodies(sql string) string {
	sql = regexp.MustCompile(`--[^\n]*`).ReplaceAllString(sql, "")
	tag := regexp.MustCompile(`\$[A-Za-z_0-9]*\$`)
	var out strings.Builder
	for {
		loc := tag.FindStringIndex(sql)
		if loc == nil {
			out.WriteString(sql)
			return out.String()
		}
		out.WriteString(sql[:loc[0]])
		open := sql[loc[0]:loc[1]]
		rest := sql[loc[1]:]
		end := strings.Index(rest, open)
		if end < 0 {
			return out.String()
		}
		sql = rest[end+len(open):]
	}
}
