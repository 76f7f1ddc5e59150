// Package cql parses the subset of CQL (the Contextual Query Language) that
// FOLIO's modules send to storage modules, as FOLIO's CQL2PgJSON accepts it,
// into a tree that the storage service translates into parameterised SQL.
//
// The grammar accepted:
//
//	query       = scopedQuery [ "sortBy" sortKey { sortKey } ]
//	scopedQuery = clause { boolean clause }
//	boolean     = "and" | "or" | "not"
//	clause      = "(" scopedQuery ")"
//	            | index relation { modifier } value
//	            | term                             (a bare term: Index "")
//	value       = term | "(" term { joiner term } ")"
//	joiner      = "or" | "and"                     (one word throughout a list)
//	relation    = "==" | "=" | "<>" | "<" | ">" | "<=" | ">="
//	            | "adj" | "all" | "any" | "within" | "encloses"
//	modifier    = "/" name [ "=" term ]            (a term without wildcards)
//	sortKey     = index { modifier }
//	index, name = a run of letters, digits, "." "_" "-"
//	term        = word | quoted
//	word        = a run of characters other than space, tab, CR, LF ( ) " = < > /
//	              that is not a reserved word; \ takes the next one as it is
//	quoted      = '"' { any character but " and \ | "\" character } '"'
//	reserved    = "and" | "or" | "not" | "prox" | "sortBy"
//
// Reserved words and word relations are case-insensitive, and "prox" is
// refused. The booleans have equal precedence and associate left to right:
// "a or b and c" is "(a or b) and c"; parentheses group. "a not b" means a
// and not b, and is a Bool with Op Not. A parenthesised value list, as in
// id==("a" or "b") which mod-circulation sends, is the clause repeated over
// each term, joined by the list's word.
//
// In a term, an unescaped * stands for any run of characters and ? for one
// character; \* and \? are those characters themselves, \" and \\ a quote
// and a backslash, and \ before any other character that character. An
// unescaped ^ (anchoring) is refused.
//
// Parsing is bounded by Limits: the query's length, how deep parentheses
// nest (checked before the parser recurses, so no query can exhaust the
// stack) and how many clauses it has (each term of a value list counts as
// one), so no query builds an unbounded statement. A query must be valid
// UTF-8 without NUL characters.
//
// Query.String prints a query back as canonical CQL that parses to an equal
// Query within the same limits.
package cql

import (
	"fmt"
	"strings"
)

// Query is a parsed query: a condition and the keys to sort by.
type Query struct {
	Root Node
	Sort []SortKey
}

// Node is a condition: a *Bool or a *Clause.
type Node interface{ node() }

// BoolOp is a boolean operator.
type BoolOp int

// The boolean operators. Not is "and not": Bool{Op: Not, Left: a, Right:
// b} matches what a matches and b does not.
const (
	And BoolOp = iota + 1
	Or
	Not
)

// String is the operator's CQL word.
func (op BoolOp) String() string {
	switch op {
	case And:
		return "and"
	case Or:
		return "or"
	case Not:
		return "not"
	}
	return fmt.Sprintf("BoolOp(%d)", int(op))
}

// Bool joins two conditions: Left and Right, Left or Right, or Left and
// not Right.
type Bool struct {
	Op          BoolOp
	Left, Right Node
}

// Clause is one search clause: an index, a relation and one term, or
// several joined by TermsOp.
type Clause struct {
	// Index is the field searched, as written; "" for a bare term.
	Index string
	// Relation is the relation as written, word relations lower-cased;
	// "" for a bare term.
	Relation  string
	Modifiers []Modifier
	// Terms has one term, or several for a parenthesised value list.
	Terms []Term
	// TermsOp is Or or And when Terms has several, else 0.
	TermsOp BoolOp
}

func (*Bool) node()   {}
func (*Clause) node() {}

// Modifier is a relation's or a sort key's modifier, as in /respectCase or
// /sort.descending; Value is "" when none is given.
type Modifier struct {
	Name, Value string
}

// Term is a search term: a sequence of literal runs and wildcards. Parse
// never puts two literal runs next to each other or an empty one in it;
// the empty term has no parts.
type Term struct {
	Parts []Part
}

// Part is a literal run of a term, or a wildcard, never both: Wildcard is
// '*' (any run of characters) or '?' (one character) and Literal "", or
// Wildcard is 0 and Literal the text.
type Part struct {
	Literal  string
	Wildcard rune
}

// Literal is the term's text, and true, when it has no wildcard.
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

// String is the term as a quoted CQL string, its literal characters that
// CQL gives a meaning escaped, as in "a\*b*".
func (t Term) String() string {
	var b strings.Builder
	b.WriteByte('"')
	for _, p := range t.Parts {
		if p.Wildcard != 0 {
			b.WriteRune(p.Wildcard)
			continue
		}
		for _, r := range p.Literal {
			if quotedEscape(r) {
				b.WriteByte('\\')
			}
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// SortKey is one key of sortBy. Its modifiers are kept as written (such as
// sort.descending or sort.ignoreCase): the consumer decides which it
// supports.
type SortKey struct {
	Index     string
	Modifiers []Modifier
}

// Error is a query that cannot be parsed: what is wrong, at byte offset Pos
// of the query.
type Error struct {
	Pos int
	Msg string
}

// Error is the message and the position, counted from 1.
func (e *Error) Error() string { return fmt.Sprintf("%s (at character %d)", e.Msg, e.Pos+1) }

// Limits bound what ParseWithLimits accepts: the query's length in bytes,
// how deep its parentheses nest and how many clauses it has. A field that
// is zero (or negative) takes DefaultLimits' value.
type Limits struct {
	MaxLength, MaxDepth, MaxClauses int
}

// DefaultLimits are the limits of Parse.
var DefaultLimits = Limits{MaxLength: 8192, MaxDepth: 32, MaxClauses: 200}

// Parse parses s within DefaultLimits. Every error it returns is an *Error.
func Parse(s string) (*Query, error) { return ParseWithLimits(s, DefaultLimits) }

// ParseWithLimits parses s within l. Every error it returns is an *Error.
func ParseWithLimits(s string, l Limits) (*Query, error) {
	q, err := parse(s, l.withDefaults())
	if err != nil {
		// Returned as the interface only when there is one, so that a
		// caller's err != nil never sees a nil *Error.
		return nil, err
	}
	return q, nil
}

func (l Limits) withDefaults() Limits {
	if l.MaxLength <= 0 {
		l.MaxLength = DefaultLimits.MaxLength
	}
	if l.MaxDepth <= 0 {
		l.MaxDepth = DefaultLimits.MaxDepth
	}
	if l.MaxClauses <= 0 {
		l.MaxClauses = DefaultLimits.MaxClauses
	}
	return l
}
