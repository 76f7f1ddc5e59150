package postgres_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/checkoutlock/circulation-storage/internal/dbtest"
	"github.com/checkoutlock/circulation-storage/internal/pgtest"
)

// TestJSONIsReadAsPostgreSQLSentIt reads json and jsonb values through the
// pool: into a json.RawMessage, the server's text as json.Unmarshal would
// give it (a json value's surrounding spaces trimmed, its inner ones kept
// as written; jsonb as the server writes it out), a copy that the next
// rows do not overwrite, and nil for NULL; into a map, decoded.
func TestJSONIsReadAsPostgreSQLSentIt(t *testing.T) {
	t.Parallel()
	db := dbtest.OpenDB(t, pgtest.Shared(t))
	ctx := context.Background()
	rows, err := db.Pool.Query(ctx, `SELECT j, j::jsonb FROM (VALUES (' {"a" : [1,2]} '::json), ('[true,  "x"]'), (NULL)) AS v(j)`)
	if err != nil {
		t.Fatal(err)
	}
	var got [][2]json.RawMessage
	for rows.Next() {
		var j, jb json.RawMessage
		if err := rows.Scan(&j, &jb); err != nil {
			t.Fatal(err)
		}
		got = append(got, [2]json.RawMessage{j, jb})
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	want := [][2]string{{`{"a" : [1,2]}`, `{"a": [1, 2]}`}, {`[true,  "x"]`, `[true, "x"]`}}
	if len(got) != 3 {
		t.Fatalf("got %d rows, want 3", len(got))
	}
	for i, w := range want {
		for k := range 2 {
			if string(got[i][k]) != w[k] {
				t.Errorf("row %d column %d: got %q, want %q", i, k, got[i][k], w[k])
			}
			var std json.RawMessage
			if err := json.Unmarshal([]byte(" "+w[k]+"\n"), &std); err != nil || string(std) != string(got[i][k]) {
				t.Errorf("row %d column %d: got %q, json.Unmarshal gives %q (%v)", i, k, got[i][k], std, err)
			}
		}
	}
	if got[2][0] != nil || got[2][1] != nil {
		t.Errorf("NULL: got %q and %q, want nil", got[2][0], got[2][1])
	}
	// Enough rows that the connection's read buffer is used again while
	// they are read: each value must be a copy of its own.
	rows, err = db.Pool.Query(ctx, `SELECT jsonb_build_object('i', i, 'pad', repeat('x', 1000)) FROM generate_series(1, 100) AS i`)
	if err != nil {
		t.Fatal(err)
	}
	var many []json.RawMessage
	for rows.Next() {
		var jb json.RawMessage
		if err := rows.Scan(&jb); err != nil {
			t.Fatal(err)
		}
		many = append(many, jb)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	for i, jb := range many {
		var v struct{ I int }
		if err := json.Unmarshal(jb, &v); err != nil || v.I != i+1 {
			t.Fatalf("row %d of %d: got i %d (%v), want %d: a value read was overwritten by a later row", i+1, len(many), v.I, err, i+1)
		}
	}
	var m map[string]any
	if err := db.Pool.QueryRow(ctx, `SELECT '{"n": 1.5, "s": "t"}'::jsonb`).Scan(&m); err != nil {
		t.Fatal(err)
	}
	if m["n"] != 1.5 || m["s"] != "t" || len(m) != 2 {
		t.Errorf("into a map: got %v", m)
	}
}
