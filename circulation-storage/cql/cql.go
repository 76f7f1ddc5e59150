// Package cql parses the subset of CQL (the Contextual Query Language) that
// FOLIO's modules send to storage modules, into a tree that package postgres
// translates into parameterised SQL.
//
// The grammar accepted:
//
//	query       = scopedQuery [ "sortBy" sortKey { sortKey } ]
//	scopedQuery = clause { boolean clause }
//	boolean     = "and" | "or" | "not"
//	clause      = "(" scopedQuery ")"
//	            | index relation { "/" modifier } value
//	            | term
//	value       = term | "(" term { joiner term } ")"   (one joiner, "or" or "and", throughout)
//	relation    = "==" | "=" | "<>" | "<" | ">" | "<=" | ">="
//	            | "adj" | "all" | "any" | "within" | "encloses"
//	modifier    = name [ "=" term ]
//	sortKey     = index { "/" modifier }
//	index       = word
//	term        = word | quoted
//	word        = a run of characters other than white space, ( ) " = < > /
//	quoted      = '"' { character | "\" character } '"'
//
// Booleans, "sortBy" and word relations are case-insensitive. The booleans
// have equal precedence and apply left to right: "a or b and c" is
// "(a or b) and c". "a not b" means a and not b. A parenthesised value list
// is FOLIO's shorthand (mod-circulation sends id==("a" or "b")) for the
// clause repeated over each term.
//
// In a term, an unescaped * stands for any run of characters and ? for one
// character; \* and \? are the characters themselves, \" and \\ a quote
// and a backslash, and \ before any other character that character. An
// unescaped ^ (anchoring) and the "prox" boolean are refused.
//
// Parsing is bounded (Limits): the query's length, how deep parentheses
// nest, and how many clauses it has, so no query can exhaust the stack or
// build an unbounded statement.
package cql

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// Query is a parsed query: a condition and the sort keys.
type Query struct {
	Root Node
	Sort []SortKey
}

// Node is a *Bool or a *Clause.
type Node interface{ node() }

// BoolOp is a boolean operator.
type BoolOp int

// The boolean operators. Not is "and not".
const (
	And BoolOp = iota + 1
	Or
	Not
)

var boolNames = map[BoolOp]string{And: "and", Or: "or", Not: "not"}

// Bool joins two nodes: Left and Right, Left or Right, Left and not Right.
type Bool struct {
	Op          BoolOp
	Left, Right Node
}

// Clause is one search clause: a field, a relation and one term, or
// several joined by TermsOp. A bare term has Index and Relation "".
type Clause struct {
	Index     string
	Relation  string
	Modifiers []Modifier
	Terms     []Term
	TermsOp   BoolOp
}

func (*Bool) node()   {}
func (*Clause) node() {}

// Modifier is a relation's or a sort key's modifier, as in /sort.descending.
type Modifier struct {
	Name, Value string
}

// Term is a search term: literal runs and wildcards.
type Term struct {
	Parts []Part
}

// Part is a literal run of a term, or a wildcard ('*' or '?'), never both.
type Part struct {
	Literal  string
	Wildcard rune
}

// Literal is the term's text when it has no wildcard.
func (t Term) Literal() (string, bool) {
	var b strings.Builder
	for _, p := range t.Parts {
		if p.Wildcard != 0 {
			return "", false
		}
		b.WriteString(p.Literal)
	}
	return b.String(), true
}

// String is the term quoted and escaped, as Parse reads it back.
func (t Term) String() string {
	var b strings.Builder
	b.WriteByte('"')
	for _, p := range t.Parts {
		if p.Wildcard != 0 {
			b.WriteRune(p.Wildcard)
			continue
		}
		for _, r := range p.Literal {
			if strings.ContainsRune(`"\*?^`, r) {
				b.WriteByte('\\')
			}
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// SortKey is one key of sortBy.
type SortKey struct {
	Index     string
	Modifiers []Modifier
}

// Error is a query that cannot be parsed, at byte offset Pos.
type Error struct {
	Pos int
	Msg string
}

func (e *Error) Error() string { return fmt.Sprintf("%s (at character %d)", e.Msg, e.Pos+1) }

// Limits bound what Parse accepts; zero fields take DefaultLimits'.
type Limits struct {
	MaxLength, MaxDepth, MaxClauses int
}

// DefaultLimits are the limits of Parse.
var DefaultLimits = Limits{MaxLength: 8192, MaxDepth: 32, MaxClauses: 200}

// Parse parses s within DefaultLimits.
func Parse(s string) (*Query, error) { return ParseWithLimits(s, DefaultLimits) }

// ParseWithLimits parses s within l.
func ParseWithLimits(s string, l Limits) (*Query, error) {
	if l.MaxLength == 0 {
		l.MaxLength = DefaultLimits.MaxLength
	}
	if l.MaxDepth == 0 {
		l.MaxDepth = DefaultLimits.MaxDepth
	}
	if l.MaxClauses == 0 {
		l.MaxClauses = DefaultLimits.MaxClauses
	}
	if len(s) > l.MaxLength {
		return nil, &Error{Pos: l.MaxLength, Msg: fmt.Sprintf("the query is longer than %d bytes", l.MaxLength)}
	}
	if !utf8.ValidString(s) {
		return nil, &Error{Pos: 0, Msg: "the query is not valid UTF-8"}
	}
	p := &parser{lex: lexer{src: s}, limits: l}
	if err := p.advance(); err != nil {
		return nil, err
	}
	if p.tok.kind == tokEOF {
		return nil, &Error{Pos: 0, Msg: "empty query"}
	}
	root, err := p.scoped(0)
	if err != nil {
		return nil, err
	}
	q := &Query{Root: root}
	if p.tok.kind == tokWord && strings.EqualFold(p.tok.text, "sortBy") {
		if err := p.advance(); err != nil {
			return nil, err
		}
		if q.Sort, err = p.sortKeys(); err != nil {
			return nil, err
		}
	}
	switch {
	case p.tok.kind == tokRParen:
		return nil, &Error{Pos: p.tok.pos, Msg: "unbalanced parentheses: a ) without its ("}
	case p.tok.kind != tokEOF:
		return nil, &Error{Pos: p.tok.pos, Msg: fmt.Sprintf("unexpected %s: a boolean (and, or, not) or sortBy was expected", p.tok)}
	}
	return q, nil
}

// String is q in CQL that Parse reads back to an equal Query.
func (q *Query) String() string {
	var b strings.Builder
	writeNode(&b, q.Root)
	if len(q.Sort) > 0 {
		b.WriteString(" sortBy")
		for _, k := range q.Sort {
			b.WriteString(" " + k.Index)
			writeModifiers(&b, k.Modifiers)
		}
	}
	return b.String()
}

func writeNode(b *strings.Builder, n Node) {
	switch n := n.(type) {
	case *Bool:
		b.WriteByte('(')
		writeNode(b, n.Left)
		b.WriteString(" " + boolNames[n.Op] + " ")
		writeNode(b, n.Right)
		b.WriteByte(')')
	case *Clause:
		if n.Index != "" {
			b.WriteString(n.Index + " " + n.Relation)
			writeModifiers(b, n.Modifiers)
			b.WriteByte(' ')
		}
		if len(n.Terms) == 1 {
			b.WriteString(n.Terms[0].String())
			return
		}
		b.WriteByte('(')
		for i, t := range n.Terms {
			if i > 0 {
				b.WriteString(" " + boolNames[n.TermsOp] + " ")
			}
			b.WriteString(t.String())
		}
		b.WriteByte(')')
	}
}

func writeModifiers(b *strings.Builder, ms []Modifier) {
	for _, m := range ms {
		b.WriteString("/" + m.Name)
		if m.Value != "" {
			b.WriteString("=" + Term{Parts: []Part{{Literal: m.Value}}}.String())
		}
	}
}

// wordRelations are the relations written as words.
var wordRelations = map[string]bool{"adj": true, "all": true, "any": true, "within": true, "encloses": true}

type parser struct {
	lex     lexer
	tok     token
	limits  Limits
	clauses int
}

func (p *parser) advance() error {
	t, err := p.lex.next()
	if err != nil {
		return err
	}
	p.tok = t
	return nil
}

// boolOp is the current token as a boolean operator, if it is one.
func (p *parser) boolOp() (BoolOp, bool, error) {
	if p.tok.kind != tokWord {
		return 0, false, nil
	}
	switch strings.ToLower(p.tok.text) {
	case "and":
		return And, true, nil
	case "or":
		return Or, true, nil
	case "not":
		return Not, true, nil
	case "prox":
		return 0, false, &Error{Pos: p.tok.pos, Msg: `"prox" is not supported`}
	}
	return 0, false, nil
}

// scoped parses clauses joined by booleans, left to right.
func (p *parser) scoped(depth int) (Node, error) {
	left, err := p.clause(depth)
	if err != nil {
		return nil, err
	}
	for {
		op, ok, err := p.boolOp()
		if err != nil {
			return nil, err
		}
		if !ok {
			return left, nil
		}
		if err := p.advance(); err != nil {
			return nil, err
		}
		right, err := p.clause(depth)
		if err != nil {
			return nil, err
		}
		left = &Bool{Op: op, Left: left, Right: right}
	}
}

func (p *parser) clause(depth int) (Node, error) {
	switch p.tok.kind {
	case tokLParen:
		if depth+1 > p.limits.MaxDepth {
			return nil, &Error{Pos: p.tok.pos, Msg: fmt.Sprintf("the query nests deeper than %d levels", p.limits.MaxDepth)}
		}
		open := p.tok.pos
		if err := p.advance(); err != nil {
			return nil, err
		}
		if p.tok.kind == tokEOF {
			return nil, &Error{Pos: open, Msg: "unbalanced parentheses: a ( without its )"}
		}
		n, err := p.scoped(depth + 1)
		if err != nil {
			return nil, err
		}
		if p.tok.kind != tokRParen {
			if p.tok.kind == tokEOF {
				return nil, &Error{Pos: open, Msg: "unbalanced parentheses: a ( without its )"}
			}
			return nil, &Error{Pos: p.tok.pos, Msg: fmt.Sprintf("unexpected %s: a boolean or ) was expected", p.tok)}
		}
		return n, p.advance()
	case tokEOF:
		return nil, &Error{Pos: p.tok.pos, Msg: "unexpected end of query: a search clause is missing"}
	case tokWord, tokQuoted:
	default:
		return nil, &Error{Pos: p.tok.pos, Msg: fmt.Sprintf("unexpected %s: a search clause was expected", p.tok)}
	}
	p.clauses++
	if p.clauses > p.limits.MaxClauses {
		return nil, &Error{Pos: p.tok.pos, Msg: fmt.Sprintf("the query has more than %d clauses", p.limits.MaxClauses)}
	}
	first := p.tok
	if err := p.advance(); err != nil {
		return nil, err
	}
	relation, isRelation := "", false
	switch {
	case p.tok.kind == tokSymbol:
		relation, isRelation = p.tok.text, true
	case p.tok.kind == tokWord && wordRelations[strings.ToLower(p.tok.text)]:
		relation, isRelation = strings.ToLower(p.tok.text), true
	}
	if !isRelation || first.kind != tokWord {
		// A bare term.
		if first.kind == tokWord && isReserved(first.text) {
			return nil, &Error{Pos: first.pos, Msg: fmt.Sprintf("unexpected %q: a search clause was expected", first.text)}
		}
		term, err := parseTerm(first)
		if err != nil {
			return nil, err
		}
		return &Clause{Terms: []Term{term}}, nil
	}
	if isReserved(first.text) {
		return nil, &Error{Pos: first.pos, Msg: fmt.Sprintf("%q cannot be a field name", first.text)}
	}
	relPos := p.tok.pos
	if err := p.advance(); err != nil {
		return nil, err
	}
	c := &Clause{Index: first.text, Relation: relation}
	mods, err := p.modifiers()
	if err != nil {
		return nil, err
	}
	c.Modifiers = mods
	switch p.tok.kind {
	case tokWord, tokQuoted:
		if p.tok.kind == tokWord && isReserved(p.tok.text) {
			return nil, &Error{Pos: p.tok.pos, Msg: fmt.Sprintf("a term is missing after %q (quote %q to search for it)", relation, p.tok.text)}
		}
		term, err := parseTerm(p.tok)
		if err != nil {
			return nil, err
		}
		c.Terms = []Term{term}
		return c, p.advance()
	case tokLParen:
		return c, p.termList(c)
	case tokEOF:
		return nil, &Error{Pos: relPos, Msg: fmt.Sprintf("unexpected end of query: a term is missing after %q", relation)}
	}
	return nil, &Error{Pos: p.tok.pos, Msg: fmt.Sprintf("unexpected %s: a term was expected after %q", p.tok, relation)}
}

// termList parses "(" term { joiner term } ")" into c.
func (p *parser) termList(c *Clause) error {
	open := p.tok.pos
	if err := p.advance(); err != nil {
		return err
	}
	for {
		if p.tok.kind != tokWord && p.tok.kind != tokQuoted || p.tok.kind == tokWord && isReserved(p.tok.text) {
			if p.tok.kind == tokEOF {
				return &Error{Pos: open, Msg: "unbalanced parentheses: a ( without its )"}
			}
			return &Error{Pos: p.tok.pos, Msg: fmt.Sprintf("unexpected %s: a term was expected in the list", p.tok)}
		}
		p.clauses++
		if p.clauses > p.limits.MaxClauses {
			return &Error{Pos: p.tok.pos, Msg: fmt.Sprintf("the query has more than %d clauses", p.limits.MaxClauses)}
		}
		term, err := parseTerm(p.tok)
		if err != nil {
			return err
		}
		c.Terms = append(c.Terms, term)
		if err := p.advance(); err != nil {
			return err
		}
		if p.tok.kind == tokRParen {
			if len(c.Terms) == 1 {
				c.TermsOp = 0
			}
			return p.advance()
		}
		op, ok, err := p.boolOp()
		if err != nil {
			return err
		}
		if !ok || op == Not {
			if p.tok.kind == tokEOF {
				return &Error{Pos: open, Msg: "unbalanced parentheses: a ( without its )"}
			}
			return &Error{Pos: p.tok.pos, Msg: fmt.Sprintf("unexpected %s: or, and, or ) was expected in the list", p.tok)}
		}
		if c.TermsOp != 0 && c.TermsOp != op {
			return &Error{Pos: p.tok.pos, Msg: "a value list must join all its terms with the same word (or, or and)"}
		}
		c.TermsOp = op
		if err := p.advance(); err != nil {
			return err
		}
	}
}

// modifiers parses { "/" name [ "=" term ] }.
func (p *parser) modifiers() ([]Modifier, error) {
	var ms []Modifier
	for p.tok.kind == tokSlash {
		if err := p.advance(); err != nil {
			return nil, err
		}
		if p.tok.kind != tokWord {
			return nil, &Error{Pos: p.tok.pos, Msg: fmt.Sprintf("unexpected %s: a modifier name was expected after /", p.tok)}
		}
		m := Modifier{Name: p.tok.text}
		if err := p.advance(); err != nil {
			return nil, err
		}
		if p.tok.kind == tokSymbol && p.tok.text == "=" {
			if err := p.advance(); err != nil {
				return nil, err
			}
			if p.tok.kind != tokWord && p.tok.kind != tokQuoted {
				return nil, &Error{Pos: p.tok.pos, Msg: fmt.Sprintf("unexpected %s: a modifier value was expected", p.tok)}
			}
			term, err := parseTerm(p.tok)
			if err != nil {
				return nil, err
			}
			v, ok := term.Literal()
			if !ok {
				return nil, &Error{Pos: p.tok.pos, Msg: "a modifier value cannot hold wildcards"}
			}
			m.Value = v
			if err := p.advance(); err != nil {
				return nil, err
			}
		}
		ms = append(ms, m)
	}
	return ms, nil
}

func (p *parser) sortKeys() ([]SortKey, error) {
	var keys []SortKey
	for p.tok.kind == tokWord && !isReserved(p.tok.text) {
		if len(keys) >= p.limits.MaxClauses {
			return nil, &Error{Pos: p.tok.pos, Msg: fmt.Sprintf("the query has more than %d sort keys", p.limits.MaxClauses)}
		}
		k := SortKey{Index: p.tok.text}
		if err := p.advance(); err != nil {
			return nil, err
		}
		mods, err := p.modifiers()
		if err != nil {
			return nil, err
		}
		k.Modifiers = mods
		keys = append(keys, k)
	}
	if len(keys) == 0 {
		return nil, &Error{Pos: p.tok.pos, Msg: "sortBy needs at least one field"}
	}
	return keys, nil
}

// isReserved says whether a word is one of CQL's keywords.
func isReserved(w string) bool {
	switch strings.ToLower(w) {
	case "and", "or", "not", "prox", "sortby":
		return true
	}
	return false
}

// parseTerm reads a word or quoted token's text into literal runs and
// wildcards, resolving escapes.
func parseTerm(t token) (Term, error) {
	var term Term
	var lit strings.Builder
	flush := func() {
		if lit.Len() > 0 {
			term.Parts = append(term.Parts, Part{Literal: lit.String()})
			lit.Reset()
		}
	}
	text := t.text
	for i := 0; i < len(text); {
		r, size := utf8.DecodeRuneInString(text[i:])
		switch r {
		case '\\':
			if i+size >= len(text) {
				return Term{}, &Error{Pos: t.pos, Msg: "a term ends in a lone backslash"}
			}
			next, nsize := utf8.DecodeRuneInString(text[i+size:])
			lit.WriteRune(next)
			i += size + nsize
			continue
		case '*', '?':
			flush()
			term.Parts = append(term.Parts, Part{Wildcard: r})
		case '^':
			return Term{}, &Error{Pos: t.pos, Msg: `"^" (anchoring) is not supported`}
		default:
			lit.WriteRune(r)
		}
		i += size
	}
	flush()
	return term, nil
}

// Tokens.

type tokenKind int

const (
	tokEOF tokenKind = iota
	tokWord
	tokQuoted
	tokSymbol // a relation symbol: == = <> < > <= >=
	tokLParen
	tokRParen
	tokSlash
)

type token struct {
	kind tokenKind
	text string // for a quoted token, its content with escapes kept
	pos  int
}

func (t token) String() string {
	switch t.kind {
	case tokEOF:
		return "end of query"
	case tokQuoted:
		return fmt.Sprintf("%q", `"`+t.text+`"`)
	}
	return fmt.Sprintf("%q", t.text)
}

type lexer struct {
	src string
	pos int
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// isWordEnd says whether c ends an unquoted word.
func isWordEnd(c byte) bool {
	return isSpace(c) || strings.IndexByte(`()"=<>/`, c) >= 0
}

func (l *lexer) next() (token, error) {
	for l.pos < len(l.src) && isSpace(l.src[l.pos]) {
		l.pos++
	}
	start := l.pos
	if l.pos >= len(l.src) {
		return token{kind: tokEOF, pos: start}, nil
	}
	c := l.src[l.pos]
	switch c {
	case '(':
		l.pos++
		return token{kind: tokLParen, text: "(", pos: start}, nil
	case ')':
		l.pos++
		return token{kind: tokRParen, text: ")", pos: start}, nil
	case '/':
		l.pos++
		return token{kind: tokSlash, text: "/", pos: start}, nil
	case '=', '<', '>':
		for _, sym := range []string{"==", "<>", "<=", ">=", "=", "<", ">"} {
			if strings.HasPrefix(l.src[l.pos:], sym) {
				l.pos += len(sym)
				return token{kind: tokSymbol, text: sym, pos: start}, nil
			}
		}
	case '"':
		l.pos++
		for l.pos < len(l.src) {
			switch l.src[l.pos] {
			case '\\':
				l.pos += 2
				continue
			case '"':
				text := l.src[start+1 : l.pos]
				l.pos++
				return token{kind: tokQuoted, text: text, pos: start}, nil
			}
			l.pos++
		}
		return token{}, &Error{Pos: start, Msg: "unterminated quoted string"}
	}
	for l.pos < len(l.src) && !isWordEnd(l.src[l.pos]) {
		if l.src[l.pos] == '\\' && l.pos+1 < len(l.src) {
			l.pos++
		}
		l.pos++
	}
	return token{kind: tokWord, text: l.src[start:l.pos], pos: start}, nil
}
