package cql

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

type tokenKind int

const (
	tokEOF    tokenKind = iota
	tokWord             // an unquoted word, escapes kept
	tokQuoted           // a quoted string; text is its content, escapes kept
	tokSymbol           // a relation symbol: == = <> < > <= >=
	tokLParen
	tokRParen
	tokSlash
)

type token struct {
	kind tokenKind
	text string
	pos  int // byte offset of the token's first character
}

// String describes the token for a message.
func (t token) String() string {
	switch t.kind {
	case tokEOF:
		return "end of query"
	case tokQuoted:
		return "quoted term " + quoteForMessage(t.text)
	}
	return quoteForMessage(t.text)
}

// quoteForMessage quotes s, cut short so that a long term cannot make a
// message long.
func quoteForMessage(s string) string {
	const max = 40
	if len(s) > max {
		cut := max
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		return fmt.Sprintf("%q…", s[:cut])
	}
	return fmt.Sprintf("%q", s)
}

// lexer splits a query into tokens, one at a time, so that a refusal near
// the start of a long query costs nothing for the rest.
type lexer struct {
	src string
	pos int
}

// isSpace says whether c separates tokens.
func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// isWordEnd says whether c ends an unquoted word.
func isWordEnd(c byte) bool {
	return isSpace(c) || strings.IndexByte(`()"=<>/`, c) >= 0
}

// symbols are the relation symbols, longest first so that "<=" is not read
// as "<" then "=".
var symbols = []string{"==", "<>", "<=", ">=", "=", "<", ">"}

func (l *lexer) next() (token, *Error) {
	for l.pos < len(l.src) && isSpace(l.src[l.pos]) {
		l.pos++
	}
	start := l.pos
	if l.pos >= len(l.src) {
		return token{kind: tokEOF, pos: start}, nil
	}
	switch c := l.src[l.pos]; c {
	case '(', ')', '/':
		l.pos++
		kind := map[byte]tokenKind{'(': tokLParen, ')': tokRParen, '/': tokSlash}[c]
		return token{kind: kind, text: string(c), pos: start}, nil
	case '=', '<', '>':
		for _, sym := range symbols {
			if strings.HasPrefix(l.src[l.pos:], sym) {
				l.pos += len(sym)
				return token{kind: tokSymbol, text: sym, pos: start}, nil
			}
		}
	case '"':
		for l.pos++; l.pos < len(l.src); l.pos++ {
			switch l.src[l.pos] {
			case '\\':
				// The escaped byte cannot end the string; a multi-byte
				// character's other bytes never look like " or \.
				l.pos++
			case '"':
				l.pos++
				return token{kind: tokQuoted, text: l.src[start+1 : l.pos-1], pos: start}, nil
			}
		}
		return token{}, &Error{Pos: start, Msg: "unterminated quoted string"}
	}
	for l.pos < len(l.src) && !isWordEnd(l.src[l.pos]) {
		if l.src[l.pos] == '\\' && l.pos+1 < len(l.src) {
			// An escaped character, even one that ends a word, is part
			// of it.
			l.pos++
		}
		l.pos++
	}
	return token{kind: tokWord, text: l.src[start:l.pos], pos: start}, nil
}
