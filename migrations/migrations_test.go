package migrations

import (
	"fmt"
	"io/fs"
	"regexp"
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
