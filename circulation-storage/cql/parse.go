package cql

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// parser is a recursive-descent parser with one token of lookahead.
type parser struct {
	lex     lexer
	tok     token
	limits  Limits
	clauses int
}

func parse(s string, l Limits) (*Query, *Error) {
	// The length is checked first, before anything reads the query.
	if len(s) > l.MaxLength {
		return nil, &Error{Pos: l.MaxLength, Msg: fmt.Sprintf("the query is longer than %d bytes", l.MaxLength)}
	}
	for i, r := range s {
		switch {
		case r == utf8.RuneError:
			if _, size := utf8.DecodeRuneInString(s[i:]); size == 1 {
				return nil, &Error{Pos: i, Msg: "the query is not valid UTF-8"}
			}
		case r == 0:
			// No search needs one, and PostgreSQL's text cannot hold it.
			return nil, &Error{Pos: i, Msg: "the query contains a NUL character"}
		}
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
	sorted := p.tok.kind == tokWord && isKeyword(p.tok.text, "sortBy")
	if sorted {
		if err := p.advance(); err != nil {
			return nil, err
		}
		if q.Sort, err = p.sortKeys(); err != nil {
			return nil, err
		}
	}
	switch {
	case p.tok.kind == tokEOF:
		return q, nil
	case p.tok.kind == tokRParen:
		return nil, &Error{Pos: p.tok.pos, Msg: "unbalanced parentheses: a ) without its ("}
	case sorted:
		return nil, &Error{Pos: p.tok.pos, Msg: fmt.Sprintf("unexpected %s: only sort keys may follow sortBy", p.tok)}
	}
	return nil, &Error{Pos: p.tok.pos, Msg: fmt.Sprintf("unexpected %s: a boolean (and, or, not) or sortBy was expected", p.tok)}
}

func (p *parser) advance() *Error {
	t, err := p.lex.next()
	if err != nil {
		return err
	}
	p.tok = t
	return nil
}

// boolOp is the current token as a boolean operator, if it is one.
func (p *parser) boolOp() (BoolOp, bool, *Error) {
	if p.tok.kind != tokWord {
		return 0, false, nil
	}
	switch {
	case isKeyword(p.tok.text, "and"):
		return And, true, nil
	case isKeyword(p.tok.text, "or"):
		return Or, true, nil
	case isKeyword(p.tok.text, "not"):
		return Not, true, nil
	case isKeyword(p.tok.text, "prox"):
		return 0, false, &Error{Pos: p.tok.pos, Msg: `"prox" is not supported`}
	}
	return 0, false, nil
}

// scoped parses clauses joined by booleans: all of equal precedence,
// applied left to right, as CQL defines them.
func (p *parser) scoped(depth int) (Node, *Error) {
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

// clause parses a parenthesised query, a search clause or a bare term.
func (p *parser) clause(depth int) (Node, *Error) {
	switch p.tok.kind {
	case tokLParen:
		return p.group(depth)
	case tokEOF:
		return nil, &Error{Pos: p.tok.pos, Msg: "unexpected end of query: a search clause is missing"}
	case tokWord, tokQuoted:
	default:
		return nil, &Error{Pos: p.tok.pos, Msg: fmt.Sprintf("unexpected %s: a search clause was expected", p.tok)}
	}
	if err := p.countClause(); err != nil {
		return nil, err
	}
	first := p.tok
	if err := p.advance(); err != nil {
		return nil, err
	}
	relation, isRelation := p.relation()
	if !isRelation {
		if first.kind == tokWord && isReserved(first.text) {
			return nil, &Error{Pos: first.pos, Msg: fmt.Sprintf("unexpected %q: a search clause was expected", first.text)}
		}
		term, err := parseTerm(first)
		if err != nil {
			return nil, err
		}
		return &Clause{Terms: []Term{term}}, nil
	}
	if err := checkIndex(first, relation); err != nil {
		return nil, err
	}
	relPos := p.tok.pos
	if err := p.advance(); err != nil {
		return nil, err
	}
	c := &Clause{Index: first.text, Relation: relation}
	var err *Error
	if c.Modifiers, err = p.modifiers(); err != nil {
		return nil, err
	}
	switch p.tok.kind {
	case tokWord, tokQuoted:
		if p.tok.kind == tokWord && isReserved(p.tok.text) {
			return nil, &Error{Pos: p.tok.pos, Msg: fmt.Sprintf("a term is missing after %q (%q is a reserved word: quote it to search for it)", relation, p.tok.text)}
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

// group parses "(" scopedQuery ")", refusing to go deeper than the limit
// before it recurses.
func (p *parser) group(depth int) (Node, *Error) {
	if depth >= p.limits.MaxDepth {
		return nil, &Error{Pos: p.tok.pos, Msg: fmt.Sprintf("the query nests deeper than %d levels", p.limits.MaxDepth)}
	}
	open := p.tok.pos
	if err := p.advance(); err != nil {
		return nil, err
	}
	if p.tok.kind == tokEOF {
		return nil, unclosed(open)
	}
	n, err := p.scoped(depth + 1)
	if err != nil {
		return nil, err
	}
	switch p.tok.kind {
	case tokRParen:
		return n, p.advance()
	case tokEOF:
		return nil, unclosed(open)
	}
	return nil, &Error{Pos: p.tok.pos, Msg: fmt.Sprintf("unexpected %s: a boolean (and, or, not) or ) was expected", p.tok)}
}

func unclosed(open int) *Error {
	return &Error{Pos: open, Msg: "unbalanced parentheses: a ( without its )"}
}

func (p *parser) countClause() *Error {
	p.clauses++
	if p.clauses > p.limits.MaxClauses {
		return &Error{Pos: p.tok.pos, Msg: fmt.Sprintf("the query has more than %d clauses", p.limits.MaxClauses)}
	}
	return nil
}

// wordRelations are the relations written as words.
var wordRelations = []string{"adj", "all", "any", "within", "encloses"}

// relation is the current token as a relation, word relations lower-cased.
func (p *parser) relation() (string, bool) {
	switch p.tok.kind {
	case tokSymbol:
		return p.tok.text, true
	case tokWord:
		for _, r := range wordRelations {
			if isKeyword(p.tok.text, r) {
				return r, true
			}
		}
	}
	return "", false
}

// checkIndex checks that the token before a relation is an index.
func checkIndex(t token, relation string) *Error {
	switch {
	case t.kind == tokQuoted:
		return &Error{Pos: t.pos, Msg: fmt.Sprintf("an index cannot be quoted: %s", t)}
	case isReserved(t.text):
		return &Error{Pos: t.pos, Msg: fmt.Sprintf("%q cannot be an index: it is a reserved word", t.text)}
	case relation == "=" && strings.HasSuffix(t.text, "!") && isName(t.text[:len(t.text)-1]):
		// A common slip from other query languages.
		return &Error{Pos: t.pos + len(t.text) - 1, Msg: `"!=" is not a CQL relation: "<>" is "not equal"`}
	case !isName(t.text):
		return &Error{Pos: t.pos, Msg: fmt.Sprintf("%s is not a valid index: an index has only letters, digits, \".\", \"_\" and \"-\"", t)}
	}
	return nil
}

// isName says whether s is an index or a modifier name.
func isName(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if !unicode.IsLetter(r) && !unicode.IsDigit(r) && r != '.' && r != '_' && r != '-' {
			return false
		}
	}
	return true
}

// termList parses "(" term { joiner term } ")" into c.
func (p *parser) termList(c *Clause) *Error {
	open := p.tok.pos
	if err := p.advance(); err != nil {
		return err
	}
	for {
		switch {
		case p.tok.kind == tokEOF:
			return unclosed(open)
		case p.tok.kind == tokWord && isReserved(p.tok.text):
			return &Error{Pos: p.tok.pos, Msg: fmt.Sprintf("unexpected %q: a term was expected in the list (quote it to search for it)", p.tok.text)}
		case p.tok.kind != tokWord && p.tok.kind != tokQuoted:
			return &Error{Pos: p.tok.pos, Msg: fmt.Sprintf("unexpected %s: a term was expected in the list", p.tok)}
		}
		if len(c.Terms) > 0 {
			// The clause itself was counted: each further term is
			// another clause in the statement.
			if err := p.countClause(); err != nil {
				return err
			}
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
			return p.advance()
		}
		op, ok, err := p.boolOp()
		switch {
		case err != nil:
			return err
		case p.tok.kind == tokEOF:
			return unclosed(open)
		case !ok || op == Not:
			return &Error{Pos: p.tok.pos, Msg: fmt.Sprintf("unexpected %s: or, and or ) was expected in the list", p.tok)}
		case c.TermsOp != 0 && c.TermsOp != op:
			return &Error{Pos: p.tok.pos, Msg: fmt.Sprintf("a value list must join all its terms with the same word: %q after %q", strings.ToLower(p.tok.text), c.TermsOp)}
		}
		c.TermsOp = op
		if err := p.advance(); err != nil {
			return err
		}
	}
}

// modifiers parses { "/" name [ "=" term ] }.
func (p *parser) modifiers() ([]Modifier, *Error) {
	var ms []Modifier
	for p.tok.kind == tokSlash {
		if err := p.advance(); err != nil {
			return nil, err
		}
		if p.tok.kind != tokWord || !isName(p.tok.text) {
			return nil, &Error{Pos: p.tok.pos, Msg: fmt.Sprintf("unexpected %s: a modifier name (letters, digits, \".\", \"_\" and \"-\") was expected after /", p.tok)}
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
				return nil, &Error{Pos: p.tok.pos, Msg: fmt.Sprintf("unexpected %s: a value was expected for the modifier %q", p.tok, m.Name)}
			}
			term, err := parseTerm(p.tok)
			if err != nil {
				return nil, err
			}
			v, ok := term.Literal()
			if !ok {
				return nil, &Error{Pos: p.tok.pos, Msg: fmt.Sprintf("the value of the modifier %q cannot hold wildcards (escape * and ? as \\* and \\?)", m.Name)}
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

// sortKeys parses sortKey { sortKey }.
func (p *parser) sortKeys() ([]SortKey, *Error) {
	var keys []SortKey
	for p.tok.kind == tokWord && !isReserved(p.tok.text) {
		if !isName(p.tok.text) {
			return nil, &Error{Pos: p.tok.pos, Msg: fmt.Sprintf("cannot sort by %s: an index has only letters, digits, \".\", \"_\" and \"-\"", p.tok)}
		}
		if len(keys) >= p.limits.MaxClauses {
			return nil, &Error{Pos: p.tok.pos, Msg: fmt.Sprintf("the query has more than %d sort keys", p.limits.MaxClauses)}
		}
		k := SortKey{Index: p.tok.text}
		if err := p.advance(); err != nil {
			return nil, err
		}
		var err *Error
		if k.Modifiers, err = p.modifiers(); err != nil {
			return nil, err
		}
		keys = append(keys, k)
	}
	if len(keys) == 0 {
		return nil, &Error{Pos: p.tok.pos, Msg: "sortBy needs at least one index to sort by"}
	}
	return keys, nil
}

// isKeyword says whether w is the keyword kw, in any case. Only ASCII
// letters fold: with Unicode folding "ſortBy" (long s) would be sortBy.
func isKeyword(w, kw string) bool {
	if len(w) != len(kw) {
		return false
	}
	for i := 0; i < len(w); i++ {
		if lowerASCII(w[i]) != lowerASCII(kw[i]) {
			return false
		}
	}
	return true
}

func lowerASCII(c byte) byte {
	if 'A' <= c && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

// reserved are the words that cannot be an unquoted term or an index.
var reserved = []string{"and", "or", "not", "prox", "sortBy"}

func isReserved(w string) bool {
	for _, kw := range reserved {
		if isKeyword(w, kw) {
			return true
		}
	}
	return false
}

// parseTerm reads a word or quoted token's text into literal runs and
// wildcards, resolving escapes.
func parseTerm(t token) (Term, *Error) {
	base := t.pos // the byte offset of the text in the query
	if t.kind == tokQuoted {
		base++
	}
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
				return Term{}, &Error{Pos: base + i, Msg: `a term ends in a lone backslash (write \\ for a backslash)`}
			}
			next, nsize := utf8.DecodeRuneInString(text[i+size:])
			lit.WriteRune(next)
			i += size + nsize
			continue
		case '*', '?':
			flush()
			term.Parts = append(term.Parts, Part{Wildcard: r})
		case '^':
			return Term{}, &Error{Pos: base + i, Msg: `"^" (anchoring) is not supported (write \^ for the character itself)`}
		default:
			lit.WriteRune(r)
		}
		i += size
	}
	flush()
	return term, nil
}
