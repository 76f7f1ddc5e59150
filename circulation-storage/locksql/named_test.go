package locksql

import (
	"testing"

	"github.com/jackc/pgx/v5"
)

func TestNamedArguments(t *testing.T) {
	t.Parallel()
	n := NewNamed(`SELECT @b::int + @a::int, @b::int, '@c' -- @d`, "a", "b")
	if n.SQL != `SELECT $1::int + $2::int, $1::int, '@c' -- @d` {
		t.Errorf("sql %q", n.SQL)
	}
	args, err := n.Args(pgx.StrictNamedArgs{"a": 1, "b": 2})
	if err != nil || len(args) != 2 || args[0] != 2 || args[1] != 1 {
		t.Errorf("args %v, %v; want [2 1]", args, err)
	}
	for _, values := range []pgx.StrictNamedArgs{{"a": 1}, {"a": 1, "c": 2}, {"a": 1, "b": 2, "c": 3}} {
		if args, err := n.Args(values); err == nil {
			t.Errorf("args(%v) = %v, want an error", values, args)
		}
	}
	for _, names := range [][]string{{"a"}, {"a", "b", "c"}} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("named with %v: no panic", names)
				}
			}()
			NewNamed(`SELECT @a, @b`, names...)
		}()
	}
}
