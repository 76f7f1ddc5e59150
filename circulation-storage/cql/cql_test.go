package cql

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

func lit(s string) Term { return Term{Parts: []Part{{Literal: s}}} }

func eq(index, rel string, terms ...Term) *Clause {
	return &Clause{Index: index, Relation: rel, Terms: terms}
}

func TestParse(t *testing.T) {
	t.Parallel()
	cases := []struct {
		in   string
		want *Query
	}{
		{`barcode=="1001"`, &Query{Root: eq("barcode", "==", lit("1001"))}},
		{`barcode==1001`, &Query{Root: eq("barcode", "==", lit("1001"))}},
		{`status.name=="Open" and userId==abc`,
			&Query{Root: &Bool{Op: And, Left: eq("status.name", "==", lit("Open")), Right: eq("userId", "==", lit("abc"))}}},
		{`a=1 or b=2 and c=3`, &Query{Root: &Bool{Op: And,
			Left:  &Bool{Op: Or, Left: eq("a", "=", lit("1")), Right: eq("b", "=", lit("2"))},
			Right: eq("c", "=", lit("3"))}}},
		{`a=1 or (b=2 and c=3)`, &Query{Root: &Bool{Op: Or, Left: eq("a", "=", lit("1")),
			Right: &Bool{Op: And, Left: eq("b", "=", lit("2")), Right: eq("c", "=", lit("3"))}}}},
		{`a=1 NOT b=2`, &Query{Root: &Bool{Op: Not, Left: eq("a", "=", lit("1")), Right: eq("b", "=", lit("2"))}}},
		{`((a<>1))`, &Query{Root: eq("a", "<>", lit("1"))}},
		{`cql.allRecords=1 sortBy name/sort.descending barcode`, &Query{Root: eq("cql.allRecords", "=", lit("1")),
			Sort: []SortKey{{Index: "name", Modifiers: []Modifier{{Name: "sort.descending"}}}, {Index: "barcode"}}}},
		{`x=1 SORTBY y`, &Query{Root: eq("x", "=", lit("1")), Sort: []SortKey{{Index: "y"}}}},
		{`id==("a" or "b" or c)`, &Query{Root: &Clause{Index: "id", Relation: "==",
			Terms: []Term{lit("a"), lit("b"), lit("c")}, TermsOp: Or}}},
		{`id==("a")`, &Query{Root: eq("id", "==", lit("a"))}},
		{`title=="a \"quoted\" \\ word"`, &Query{Root: eq("title", "==", lit(`a "quoted" \ word`))}},
		{`barcode=="12\*3*"`, &Query{Root: eq("barcode", "==", Term{Parts: []Part{{Literal: "12*3"}, {Wildcard: '*'}}})}},
		{`barcode==?1`, &Query{Root: eq("barcode", "==", Term{Parts: []Part{{Wildcard: '?'}, {Literal: "1"}}})}},
		{`title==/respectCase "x"`, &Query{Root: &Clause{Index: "title", Relation: "==",
			Modifiers: []Modifier{{Name: "respectCase"}}, Terms: []Term{lit("x")}}}},
		{`title ANY "a b"`, &Query{Root: eq("title", "any", lit("a b"))}},
		{`abc`, &Query{Root: &Clause{Terms: []Term{lit("abc")}}}},
		{`"and"`, &Query{Root: &Clause{Terms: []Term{lit("and")}}}},
		{`barcode=""`, &Query{Root: &Clause{Index: "barcode", Relation: "=", Terms: []Term{{}}}}},
		{`d>="2024-01-01"`, &Query{Root: eq("d", ">=", lit("2024-01-01"))}},
		{`name==café`, &Query{Root: eq("name", "==", lit("café"))}},
	}
	for _, c := range cases {
		got, err := Parse(c.in)
		if err != nil {
			t.Errorf("Parse(%s): %v", c.in, err)
			continue
		}
		if !reflect.DeepEqual(got, c.want) {
			t.Errorf("Parse(%s) = %s, want %s", c.in, got, c.want)
		}
		again, err := Parse(got.String())
		if err != nil || !reflect.DeepEqual(again, got) {
			t.Errorf("Parse(%s).String() = %s does not parse back (%v)", c.in, got, err)
		}
	}
}

func TestParseRefuses(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		in, msg string
		pos     int
	}{
		{``, "empty query", 0},
		{`   `, "empty query", 0},
		{`barcode==`, `a term is missing after "=="`, 7},
		{`(a=1`, "unbalanced parentheses", 0},
		{`a=1)`, "unbalanced parentheses", 3},
		{`a="x`, "unterminated quoted string", 2},
		{`a=1 prox b=2`, `"prox" is not supported`, 4},
		{`a=^x`, `"^" (anchoring) is not supported`, 2},
		{`a=1 b=2`, "a boolean (and, or, not) or sortBy was expected", 4},
		{`a=1 and`, "a search clause is missing", 7},
		{`a=1 sortBy`, "sortBy needs at least one field", 10},
		{`id==(a or b and c)`, "same word", 12},
		{`id==(a not b)`, "or, and, or ) was expected", 7},
		{`and=1`, `"and" cannot be a field name`, 0},
		{`a==and`, `quote "and"`, 3},
		{`a=x\`, "lone backslash", 2},
		{"a=\xff", "not valid UTF-8", 0},
		{`a==/ "x"`, "a modifier name was expected", 5},
	} {
		_, err := Parse(c.in)
		e, ok := err.(*Error)
		if !ok || !strings.Contains(e.Msg, c.msg) || e.Pos != c.pos {
			t.Errorf("Parse(%q) = %v, want an *Error at %d saying %q", c.in, err, c.pos, c.msg)
		}
	}
}

// TestParseIsBounded: nesting, length and clauses are refused quickly,
// without deep recursion.
func TestParseIsBounded(t *testing.T) {
	t.Parallel()
	start := time.Now()
	deep := strings.Repeat("(", 100000) + "a=1" + strings.Repeat(")", 100000)
	if _, err := ParseWithLimits(deep, Limits{MaxLength: 1 << 20}); err == nil || !strings.Contains(err.Error(), "deeper than 32 levels") {
		t.Errorf("100000 nested: %v", err)
	}
	if _, err := Parse(strings.Repeat("a", 1<<20)); err == nil || !strings.Contains(err.Error(), "longer than 8192 bytes") {
		t.Errorf("1 MB: %v", err)
	}
	many := strings.Repeat("a=1 or ", 200) + "a=1"
	if _, err := Parse(many); err == nil || !strings.Contains(err.Error(), "more than 200 clauses") {
		t.Errorf("201 clauses: %v", err)
	}
	list := "id==(" + strings.Repeat("x or ", 200) + "x)"
	if _, err := Parse(list); err == nil || !strings.Contains(err.Error(), "more than 200 clauses") {
		t.Errorf("201 terms: %v", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("refusals took %s", d)
	}
}

// FuzzParse: no input panics; what parses prints as CQL that parses back
// to the same query, and prints the same again.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		`barcode=="1001"`, `a=1 or b=2 and c=3`, `a=1 not (b<>2 or c>=3) sortBy d/sort.descending e`,
		`id==("a" or "b")`, `t=="a \"q\" \\ \* *x?"`, `title==/respectCase/m="v" x`, `abc`, `x any "a b"`,
		`cql.allRecords=1`, `(((a=1)))`, `a=""`, `a=\"`, `"\\"`, `a=1 sortBy b/c=d`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		q, err := Parse(s)
		if err != nil {
			if _, ok := err.(*Error); !ok {
				t.Fatalf("Parse(%q): error %T, want *Error", s, err)
			}
			return
		}
		printed := q.String()
		again, err := Parse(printed)
		if err != nil {
			t.Fatalf("Parse(%q) printed %q, which does not parse: %v", s, printed, err)
		}
		if !reflect.DeepEqual(again, q) {
			t.Fatalf("Parse(%q) printed %q, which parses to %s", s, printed, again)
		}
		if again.String() != printed {
			t.Fatalf("printing is not stable: %q then %q", printed, again.String())
		}
	})
}
