package cql

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"
)

func lit(s string) Term { return Term{Parts: []Part{{Literal: s}}} }

func eq(index, rel string, terms ...Term) *Clause {
	return &Clause{Index: index, Relation: rel, Terms: terms}
}

func bare(t Term) *Clause { return &Clause{Terms: []Term{t}} }

// dump is a compact, unambiguous form of a query for failure messages.
func dump(q *Query) string {
	var b strings.Builder
	var node func(Node)
	node = func(n Node) {
		switch n := n.(type) {
		case *Bool:
			fmt.Fprintf(&b, "%s(", n.Op)
			node(n.Left)
			b.WriteString(", ")
			node(n.Right)
			b.WriteString(")")
		case *Clause:
			fmt.Fprintf(&b, "[%q %q %v", n.Index, n.Relation, n.Modifiers)
			for _, t := range n.Terms {
				fmt.Fprintf(&b, " %v", t.Parts)
			}
			if n.TermsOp != 0 {
				fmt.Fprintf(&b, " joined by %s", n.TermsOp)
			}
			b.WriteString("]")
		default:
			fmt.Fprintf(&b, "%#v", n)
		}
	}
	node(q.Root)
	if q.Sort != nil {
		fmt.Fprintf(&b, " sort %v", q.Sort)
	}
	return b.String()
}

func TestParse(t *testing.T) {
	t.Parallel()
	cases := []struct {
		in   string
		want *Query
		// canonical is what String gives.
		canonical string
	}{
		{`barcode=="1001"`, &Query{Root: eq("barcode", "==", lit("1001"))}, `barcode==1001`},
		{`barcode == 1001`, &Query{Root: eq("barcode", "==", lit("1001"))}, `barcode==1001`},
		{`status.name=="Open" and userId==abc`,
			&Query{Root: &Bool{Op: And, Left: eq("status.name", "==", lit("Open")), Right: eq("userId", "==", lit("abc"))}},
			`status.name==Open and userId==abc`},
		{`a=1 or b=2 and c=3`, &Query{Root: &Bool{Op: And,
			Left:  &Bool{Op: Or, Left: eq("a", "=", lit("1")), Right: eq("b", "=", lit("2"))},
			Right: eq("c", "=", lit("3"))}},
			`a=1 or b=2 and c=3`},
		{`a=1 or (b=2 and c=3)`, &Query{Root: &Bool{Op: Or, Left: eq("a", "=", lit("1")),
			Right: &Bool{Op: And, Left: eq("b", "=", lit("2")), Right: eq("c", "=", lit("3"))}}},
			`a=1 or(b=2 and c=3)`},
		{`(a=1 or b=2) and c=3`, &Query{Root: &Bool{Op: And,
			Left:  &Bool{Op: Or, Left: eq("a", "=", lit("1")), Right: eq("b", "=", lit("2"))},
			Right: eq("c", "=", lit("3"))}},
			`a=1 or b=2 and c=3`},
		{`a=1 not b=2`, &Query{Root: &Bool{Op: Not, Left: eq("a", "=", lit("1")), Right: eq("b", "=", lit("2"))}}, `a=1 not b=2`},
		{`((a<>1))`, &Query{Root: eq("a", "<>", lit("1"))}, `a<>1`},
		{`cql.allRecords=1 sortBy name/sort.descending barcode`, &Query{Root: eq("cql.allRecords", "=", lit("1")),
			Sort: []SortKey{{Index: "name", Modifiers: []Modifier{{Name: "sort.descending"}}}, {Index: "barcode"}}},
			`cql.allRecords=1 sortBy name/sort.descending barcode`},
		{`x=1 SORTBY y/sort.ascending/sort.ignoreCase`, &Query{Root: eq("x", "=", lit("1")),
			Sort: []SortKey{{Index: "y", Modifiers: []Modifier{{Name: "sort.ascending"}, {Name: "sort.ignoreCase"}}}}},
			`x=1 sortBy y/sort.ascending/sort.ignoreCase`},
		{`a=1 AND b=2 Or c=3 NOT d=4`, &Query{Root: &Bool{Op: Not,
			Left: &Bool{Op: Or, Left: &Bool{Op: And, Left: eq("a", "=", lit("1")), Right: eq("b", "=", lit("2"))},
				Right: eq("c", "=", lit("3"))},
			Right: eq("d", "=", lit("4"))}},
			`a=1 and b=2 or c=3 not d=4`},
		{`id==("a" or "b" or "c")`, &Query{Root: &Clause{Index: "id", Relation: "==",
			Terms: []Term{lit("a"), lit("b"), lit("c")}, TermsOp: Or}}, `id==(a or b or c)`},
		{`id==(a AND "b c")`, &Query{Root: &Clause{Index: "id", Relation: "==",
			Terms: []Term{lit("a"), lit("b c")}, TermsOp: And}}, `id==(a and"b c")`},
		{`id==("a")`, &Query{Root: eq("id", "==", lit("a"))}, `id==a`},
		{`title=="a \"quoted\" \\ word"`, &Query{Root: eq("title", "==", lit(`a "quoted" \ word`))}, `title=="a \"quoted\" \\ word"`},
		{`barcode=="12\*3*"`, &Query{Root: eq("barcode", "==", Term{Parts: []Part{{Literal: "12*3"}, {Wildcard: '*'}}})}, `barcode==12\*3*`},
		{`barcode==?1\?\^\x`, &Query{Root: eq("barcode", "==", Term{Parts: []Part{{Wildcard: '?'}, {Literal: "1?^x"}}})}, `barcode==?1\?\^x`},
		{`a=x\ y\(z\)`, &Query{Root: eq("a", "=", lit("x y(z)"))}, `a="x y(z)"`},
		{`title==/respectCase "x"`, &Query{Root: &Clause{Index: "title", Relation: "==",
			Modifiers: []Modifier{{Name: "respectCase"}}, Terms: []Term{lit("x")}}}, `title==/respectCase x`},
		{`title =/m1=v/m2="a b" x`, &Query{Root: &Clause{Index: "title", Relation: "=",
			Modifiers: []Modifier{{Name: "m1", Value: "v"}, {Name: "m2", Value: "a b"}}, Terms: []Term{lit("x")}}},
			`title=/m1=v/m2="a b"x`},
		{`title any "a b"`, &Query{Root: eq("title", "any", lit("a b"))}, `title any"a b"`},
		{`title ALL x`, &Query{Root: eq("title", "all", lit("x"))}, `title all x`},
		{`d>="2024-01-01" and d<2025 and e<=1 and f>0`, &Query{Root: &Bool{Op: And,
			Left: &Bool{Op: And, Left: &Bool{Op: And, Left: eq("d", ">=", lit("2024-01-01")), Right: eq("d", "<", lit("2025"))},
				Right: eq("e", "<=", lit("1"))},
			Right: eq("f", ">", lit("0"))}},
			`d>=2024-01-01 and d<2025 and e<=1 and f>0`},
		{`abc`, &Query{Root: bare(lit("abc"))}, `abc`},
		{`"and"`, &Query{Root: bare(lit("and"))}, `\and`},
		{`a=1 or "x y"`, &Query{Root: &Bool{Op: Or, Left: eq("a", "=", lit("1")), Right: bare(lit("x y"))}}, `a=1 or"x y"`},
		{`barcode=""`, &Query{Root: &Clause{Index: "barcode", Relation: "=", Terms: []Term{{}}}}, `barcode=""`},
		{`_version==3 and item-id==x`, &Query{Root: &Bool{Op: And, Left: eq("_version", "==", lit("3")), Right: eq("item-id", "==", lit("x"))}},
			`_version==3 and item-id==x`},
		{`name==café`, &Query{Root: eq("name", "==", lit("café"))}, `name==café`},
		{"a=1\tor\nb=2\r\n", &Query{Root: &Bool{Op: Or, Left: eq("a", "=", lit("1")), Right: eq("b", "=", lit("2"))}}, `a=1 or b=2`},
	}
	for _, c := range cases {
		got, err := Parse(c.in)
		if err != nil {
			t.Errorf("Parse(%s): %v", c.in, err)
			continue
		}
		if !reflect.DeepEqual(got, c.want) {
			t.Errorf("Parse(%s) =\n%s, want\n%s", c.in, dump(got), dump(c.want))
		}
		if s := got.String(); s != c.canonical {
			t.Errorf("Parse(%s).String() = %s, want %s", c.in, s, c.canonical)
		}
		again, err := Parse(got.String())
		if err != nil || !reflect.DeepEqual(again, got) {
			t.Errorf("Parse(%s).String() = %s does not parse back (%v)", c.in, got, err)
		}
	}
}

func TestTerm(t *testing.T) {
	t.Parallel()
	term := Term{Parts: []Part{{Literal: `a*"\`}, {Wildcard: '*'}, {Literal: "?^"}, {Wildcard: '?'}}}
	if s := term.String(); s != `"a\*\"\\*\?\^?"` {
		t.Errorf("String() = %s", s)
	}
	if _, ok := term.Literal(); ok {
		t.Error("a term with wildcards is a literal")
	}
	if s, ok := (Term{Parts: []Part{{Literal: "a"}, {Literal: "b"}}}).Literal(); !ok || s != "ab" {
		t.Errorf("Literal() = %q, %v", s, ok)
	}
	if s, ok := (Term{}).Literal(); !ok || s != "" {
		t.Errorf("empty Literal() = %q, %v", s, ok)
	}
}

func TestParseRefuses(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		in, msg string
		pos     int
	}{
		{``, "empty query", 0},
		{" \t\n", "empty query", 0},
		{`barcode==`, `unexpected end of query: a term is missing after "=="`, 7},
		{`(a=1`, "unbalanced parentheses", 0},
		{`a=1)`, "unbalanced parentheses", 3},
		{`(a=1 or (b=2)`, "unbalanced parentheses", 0},
		{`()`, `unexpected ")": a search clause was expected`, 1},
		{`(`, "unbalanced parentheses", 0},
		{`a="x`, "unterminated quoted string", 2},
		{`a="x\"`, "unterminated quoted string", 2},
		{`a=1 prox b=2`, `"prox" is not supported`, 4},
		{`a=1 PROX b=2`, `"prox" is not supported`, 4},
		{`a=x^`, `"^" (anchoring) is not supported`, 3},
		{`a="ab^"`, `"^" (anchoring) is not supported`, 5},
		{`a=1 b=2`, "a boolean (and, or, not) or sortBy was expected", 4},
		{`a=1 "b"`, `unexpected quoted term "b"`, 4},
		{`a=1 and`, "unexpected end of query: a search clause is missing", 7},
		{`and a=1`, `unexpected "and": a search clause was expected`, 0},
		{`a=1 sortBy`, "sortBy needs at least one index", 10},
		{`a=1 sortBy x and y=1`, "only sort keys may follow sortBy", 13},
		{`a=1 sortBy x*`, `cannot sort by "x*"`, 11},
		{`sortBy x`, `unexpected "sortBy"`, 0},
		{`id==(a or b and c)`, "same word", 12},
		{`id==(a not b)`, "or, and or ) was expected in the list", 7},
		{`id==(a b)`, "or, and or ) was expected in the list", 7},
		{`id==()`, `unexpected ")": a term was expected in the list`, 5},
		{`id==(a or)`, `unexpected ")": a term was expected in the list`, 9},
		{`id==(a or or)`, `unexpected "or": a term was expected in the list`, 10},
		{`id==(a or b`, "unbalanced parentheses", 4},
		{`and=1`, `"and" cannot be an index`, 0},
		{`"a b"=1`, "an index cannot be quoted", 0},
		{`a*=1`, `"a*" is not a valid index`, 0},
		{`barcode;DROP==1`, `"barcode;DROP" is not a valid index`, 0},
		{`a!=1`, `"!=" is not a CQL relation`, 1},
		{`a==and`, `"and" is a reserved word: quote it`, 3},
		{`a==OR`, `"OR" is a reserved word`, 3},
		{`a==(x`, "unbalanced parentheses", 3},
		{`a==)`, `unexpected ")": a term was expected after "=="`, 3},
		{`a any`, `a term is missing after "any"`, 2},
		{`a=x\`, "lone backslash", 3},
		{`a="x\\\"`, "unterminated quoted string", 2},
		{"a=\xff", "not valid UTF-8", 2},
		{"a=b\x00", "NUL character", 3},
		{`a==/ "x"`, "a modifier name", 5},
		{`a==/x* "x"`, "a modifier name", 4},
		{`a==/m=/x`, `a value was expected for the modifier "m"`, 6},
		{`a==/m=v*`, `the value of the modifier "m" cannot hold wildcards`, 6},
		{`a==/m`, `a term is missing after "=="`, 1},
		{`a=1/m`, `unexpected "/"`, 3},
		{`a==<1`, `unexpected "<": a term was expected after "=="`, 3},
	} {
		q, err := Parse(c.in)
		var e *Error
		if !errors.As(err, &e) || !strings.Contains(e.Msg, c.msg) || e.Pos != c.pos {
			t.Errorf("Parse(%q) = %v, %v; want an *Error at %d saying %q", c.in, q, err, c.pos, c.msg)
		}
		if e != nil && e.Error() != fmt.Sprintf("%s (at character %d)", e.Msg, e.Pos+1) {
			t.Errorf("Parse(%q): Error() = %q", c.in, e.Error())
		}
	}
}

// TestParseIsBounded: deep nesting, a long query and too many clauses are
// refused quickly, without deep recursion.
func TestParseIsBounded(t *testing.T) {
	t.Parallel()
	start := time.Now()
	deep := strings.Repeat("(", 100000) + "a=1" + strings.Repeat(")", 100000)
	if _, err := ParseWithLimits(deep, Limits{MaxLength: 1 << 20}); err == nil || !strings.Contains(err.Error(), "the query nests deeper than 32 levels") {
		t.Errorf("100000 nested: %v", err)
	}
	if _, err := Parse(strings.Repeat("a", 1<<20)); err == nil || err.(*Error).Msg != "the query is longer than 8192 bytes" {
		t.Errorf("1 MB: %v", err)
	}
	many := strings.Repeat("a=1 or ", 200) + "a=1"
	if _, err := Parse(many); err == nil || !strings.Contains(err.Error(), "the query has more than 200 clauses") {
		t.Errorf("201 clauses: %v", err)
	}
	list := "id==(" + strings.Repeat("x or ", 200) + "x)"
	if _, err := Parse(list); err == nil || !strings.Contains(err.Error(), "the query has more than 200 clauses") {
		t.Errorf("201 terms: %v", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("refusals took %s", d)
	}

	// At the limits, accepted; and what is accepted prints within them.
	nested := strings.Repeat("(", 32) + "a=1" + strings.Repeat(")", 32)
	chain := strings.Repeat("a=1 or ", 199) + "a=1"
	rightNested := strings.Repeat("a=1 or (", 32) + "a=1" + strings.Repeat(")", 32)
	for _, s := range []string{nested, chain, rightNested, "id==(" + strings.Repeat("x or ", 199) + "x)"} {
		q, err := Parse(s)
		if err != nil {
			t.Errorf("Parse(%.40s…): %v", s, err)
			continue
		}
		if _, err := Parse(q.String()); err != nil {
			t.Errorf("Parse(%.40s…).String() does not parse: %v", s, err)
		}
	}

	// Limits' zero fields take the defaults; others are kept.
	if _, err := ParseWithLimits(strings.Repeat("(", 33)+"a=1"+strings.Repeat(")", 33), Limits{}); err == nil {
		t.Error("Limits{} allows 33 levels")
	}
	if _, err := ParseWithLimits("a=1 or b=1", Limits{MaxClauses: 1}); err == nil || !strings.Contains(err.Error(), "more than 1 clauses") {
		t.Errorf("MaxClauses 1: %v", err)
	}
	if _, err := ParseWithLimits("(a=1)", Limits{MaxDepth: 1}); err != nil {
		t.Errorf("MaxDepth 1: %v", err)
	}
	if _, err := ParseWithLimits("((a=1))", Limits{MaxDepth: 1}); err == nil || !strings.Contains(err.Error(), "deeper than 1 levels") {
		t.Errorf("MaxDepth 1: %v", err)
	}
	if _, err := ParseWithLimits("a=12", Limits{MaxLength: 3}); err == nil || err.Error() != "the query is longer than 3 bytes (at character 4)" {
		t.Errorf("MaxLength 3: %v", err)
	}
}

// seeds are the fuzz target's seed corpus: the accepted and refused
// queries of the tests, and some edge cases.
var seeds = []string{
	`barcode=="1001"`, `status.name=="Open" and userId==abc`, `a=1 or b=2 and c=3`, `a=1 not b=2`,
	`a=1 not (b<>2 or c>=3) sortBy d/sort.descending e`, `cql.allRecords=1 sortBy name/sort.descending barcode`,
	`id==("a" or "b" or "c")`, `id==(a and b)`, `title=="a \"quoted\" \\ word"`, `barcode=="12\*3*"`, `x=1 SORTBY y`,
	`a=1 AND b=2`, `title==/respectCase "x"`, `title==/m="v" x`, `title any "a b"`, `abc`, `"and"`, `barcode=""`,
	`(((a=1)))`, `a=\"`, `"\\"`, `a=1 sortBy b/c=d`, `a=x\ y`, `a=\and`, `a="\^"`, `x=1 or "x y"and y=2`,
	`a==?`, `a=1 or (b=1 or (c=1))`, `a==/m=and x`, `x=1 sortBy a/m="" b`, `name==café`,
	`barcode==`, `(a=1`, `a=1)`, `a="x`, `a=1 prox b=2`, `a=^x`, `a!=1`, `a==/m=v*`, "a=\xff", "a=b\x00",
}

// FuzzParse: no input panics and every error is an *Error at a position in
// the query; what parses prints as canonical CQL, no longer than the input,
// that parses back to the same query and prints the same again.
func FuzzParse(f *testing.F) {
	for _, s := range seeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		q, err := Parse(s)
		if err != nil {
			e, ok := err.(*Error)
			if !ok {
				t.Fatalf("Parse(%q): error %T, want *Error", s, err)
			}
			if e.Pos < 0 || e.Pos > len(s) {
				t.Fatalf("Parse(%q): error at %d, outside the query: %v", s, e.Pos, e)
			}
			return
		}
		printed := q.String()
		if len(printed) > len(s) {
			t.Fatalf("Parse(%q) printed %q, which is longer", s, printed)
		}
		again, err := Parse(printed)
		if err != nil {
			t.Fatalf("Parse(%q) printed %q, which does not parse: %v", s, printed, err)
		}
		if !reflect.DeepEqual(again, q) {
			t.Fatalf("Parse(%q) printed %q, which parses to\n%s, not\n%s", s, printed, dump(again), dump(q))
		}
		if again.String() != printed {
			t.Fatalf("printing is not stable: %q then %q", printed, again.String())
		}
	})
}

// TestStringIsShortest parses random queries, spelt in random ways (quoted
// or not, needless escapes, parentheses and spaces), and checks that each
// prints no longer than it was written and parses back to itself.
func TestStringIsShortest(t *testing.T) {
	t.Parallel()
	g := &gen{r: rand.New(rand.NewPCG(1, 2))}
	for range 20000 {
		g.b.Reset()
		g.afterWord = false
		g.clauses = 0
		g.query()
		s := g.b.String()
		q, err := Parse(s)
		if err != nil {
			t.Fatalf("Parse(%s): %v", s, err)
		}
		printed := q.String()
		if len(printed) > len(s) {
			t.Fatalf("Parse(%s) printed %s, which is longer", s, printed)
		}
		again, err := Parse(printed)
		if err != nil || !reflect.DeepEqual(again, q) {
			t.Fatalf("Parse(%s) printed %s, which parses to %v (%v)", s, printed, again, err)
		}
	}
}

// gen writes a random valid query.
type gen struct {
	r         *rand.Rand
	b         strings.Builder
	afterWord bool
	clauses   int
}

// tok writes a token, with a space before it when it needs one and, at
// random, when it does not.
func (g *gen) tok(s string, isWord bool) {
	if isWord && g.afterWord || g.r.IntN(4) == 0 {
		g.b.WriteString(" ")
	}
	g.b.WriteString(s)
	g.afterWord = isWord
}

func (g *gen) pick(s ...string) string { return s[g.r.IntN(len(s))] }

func (g *gen) query() {
	g.scoped(0)
	if g.r.IntN(4) == 0 {
		g.tok(g.pick("sortBy", "SORTBY"), true)
		for range 1 + g.r.IntN(3) {
			g.tok(g.pick("a", "b.c", "_v"), true)
			g.modifiers()
		}
	}
}

func (g *gen) scoped(depth int) {
	g.clause(depth)
	for g.clauses < 20 && g.r.IntN(2) == 0 {
		g.tok(g.pick("and", "or", "not", "AND", "Or"), true)
		g.clause(depth)
	}
}

func (g *gen) clause(depth int) {
	g.clauses++
	switch n := g.r.IntN(6); {
	case n == 0 && depth < 5:
		g.tok("(", false)
		g.scoped(depth + 1)
		g.tok(")", false)
	case n == 1:
		g.term(true)
	default:
		g.tok(g.pick("a", "b.c", "_v", "x-y", "é"), true)
		if rel := g.pick("==", "=", "<>", "<", ">", "<=", ">=", "any", "ADJ"); rel[0] >= 'A' {
			g.tok(rel, true)
		} else {
			g.tok(rel, false)
		}
		g.modifiers()
		if g.r.IntN(4) > 0 {
			g.term(true)
			return
		}
		g.tok("(", false)
		joiner := g.pick("or", "and", "OR")
		g.term(true)
		for range g.r.IntN(3) {
			g.tok(joiner, true)
			g.term(true)
		}
		g.tok(")", false)
	}
}

func (g *gen) modifiers() {
	for range g.r.IntN(3) {
		g.tok("/", false)
		g.tok(g.pick("m", "sort.descending", "respectCase"), true)
		if g.r.IntN(2) == 0 {
			g.tok("=", false)
			g.term(false)
		}
	}
}

// term writes a random term, quoted or not, in a term's place or as a
// modifier's value (no wildcards).
func (g *gen) term(inTermPlace bool) {
	var parts []string // each a literal character or a wildcard "*" or "?"
	for range g.r.IntN(5) {
		parts = append(parts, g.pick("a", "1", "é", " ", `"`, `\`, "*", "?", "^", "(", ")", "=", "<", "/", "and", "OR"))
	}
	wildcard := func(i int) bool { return inTermPlace && (parts[i] == "*" || parts[i] == "?") && g.r.IntN(2) == 0 }
	var b strings.Builder
	if len(parts) == 0 || g.r.IntN(2) == 0 {
		b.WriteString(`"`)
		for i, p := range parts {
			switch {
			case wildcard(i):
				b.WriteString(p)
			case strings.Contains(`"\*?^`, p) || g.r.IntN(10) == 0:
				b.WriteString(`\` + p)
			default:
				b.WriteString(p)
			}
		}
		b.WriteString(`"`)
		g.tok(b.String(), false)
		return
	}
	escaped := false
	for i, p := range parts {
		switch {
		case wildcard(i):
			b.WriteString(p)
		case wordEscape([]rune(p)[0]) || g.r.IntN(10) == 0:
			b.WriteString(`\` + p)
			escaped = true
		default:
			b.WriteString(p)
		}
	}
	if !escaped && isReserved(b.String()) {
		b.Reset()
		b.WriteString(`\` + strings.Join(parts, ""))
	}
	g.tok(b.String(), true)
}
