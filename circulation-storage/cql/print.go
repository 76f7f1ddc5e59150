package cql

import (
	"strings"
	"unicode/utf8"
)

// String is q in canonical CQL, which Parse reads back to an equal Query.
//
// It is the shortest spelling of q: parentheses only around a boolean that
// is the right operand of another (booleans associate left to right), a
// space only between two tokens that would otherwise run together, and
// each term quoted or not, whichever is shorter in its place (on a tie,
// whichever has fewer backslashes and quotes). So it is never longer, and
// never nests deeper, than any text q can be parsed from, and parses back
// within the same limits: a query that a limit admits never prints as one
// it refuses. The price is an unusual look at times, as in title==a\ b for
// title=="a b", or title any"a b c".
func (q *Query) String() string {
	if q == nil {
		return ""
	}
	var w writer
	w.node(q.Root)
	if len(q.Sort) > 0 {
		w.word("sortBy")
		for _, k := range q.Sort {
			w.word(k.Index)
			w.modifiers(k.Modifiers)
		}
	}
	return w.render()
}

// spelling is one way to write a token.
type spelling struct {
	text string
	// isWord says whether the token begins and ends in word characters,
	// so that it needs a space next to another such token.
	isWord bool
	// clutter is how hard the spelling is to read, to choose between
	// equally short ones: 1 for quotes, 2 for each backslash.
	clutter int
}

// writer collects a query's tokens, each with its spellings (a term has
// two, quoted and unquoted, most other tokens one), for render to choose.
type writer struct {
	tokens [][]spelling
}

// word adds a token of word characters: an index, a name, a keyword.
func (w *writer) word(s string) { w.tokens = append(w.tokens, []spelling{{text: s, isWord: true}}) }

// punct adds a token that runs into no other: ( ) / = and relation symbols.
func (w *writer) punct(s string) { w.tokens = append(w.tokens, []spelling{{text: s}}) }

func (w *writer) node(n Node) {
	switch n := n.(type) {
	case *Bool:
		w.node(n.Left)
		w.word(n.Op.String())
		if _, ok := n.Right.(*Bool); ok {
			w.punct("(")
			w.node(n.Right)
			w.punct(")")
			return
		}
		w.node(n.Right)
	case *Clause:
		w.clause(n)
	}
}

func (w *writer) clause(c *Clause) {
	if c.Index != "" {
		w.word(c.Index)
		if isSymbol(c.Relation) {
			w.punct(c.Relation)
		} else {
			w.word(c.Relation)
		}
		w.modifiers(c.Modifiers)
	}
	if len(c.Terms) == 1 {
		w.term(c.Terms[0], true)
		return
	}
	w.punct("(")
	for i, t := range c.Terms {
		if i > 0 {
			w.word(c.TermsOp.String())
		}
		w.term(t, true)
	}
	w.punct(")")
}

func isSymbol(relation string) bool {
	for _, s := range symbols {
		if relation == s {
			return true
		}
	}
	return false
}

func (w *writer) modifiers(ms []Modifier) {
	for _, m := range ms {
		w.punct("/")
		w.word(m.Name)
		if m.Value != "" {
			w.punct("=")
			// A modifier's value is read as a term, but there a
			// reserved word is taken as it is.
			w.term(Term{Parts: []Part{{Literal: m.Value}}}, false)
		}
	}
}

// term adds t's spellings: quoted, and as a word unless it is empty. In a
// term's place a reserved word is escaped, so that it is not read as one.
func (w *writer) term(t Term, inTermPlace bool) {
	text := t.String()
	quoted := spelling{text: text, clutter: 1 + 2*strings.Count(text, `\`)}
	if len(t.Parts) == 0 {
		w.tokens = append(w.tokens, []spelling{quoted})
		return
	}
	var b strings.Builder
	if s, ok := t.Literal(); ok && inTermPlace && isReserved(s) {
		b.WriteByte('\\')
	}
	for _, p := range t.Parts {
		if p.Wildcard != 0 {
			b.WriteRune(p.Wildcard)
			continue
		}
		for _, r := range p.Literal {
			if wordEscape(r) {
				b.WriteByte('\\')
			}
			b.WriteRune(r)
		}
	}
	word := b.String()
	w.tokens = append(w.tokens, []spelling{quoted, {text: word, isWord: true, clutter: 2 * strings.Count(word, `\`)}})
}

// render writes the tokens in the spellings that make the query shortest
// and, among those, least cluttered: dynamic programming over whether the
// token before ends in a word character.
func (w *writer) render() string {
	n := len(w.tokens)
	// rest[i][a] is the best cost of tokens i.., when the token before i
	// is a word (a = 1) or not (a = 0).
	rest := make([][2]cost, n+1)
	for i := n - 1; i >= 0; i-- {
		for a := range 2 {
			best := cost{length: -1}
			for _, s := range w.tokens[i] {
				if c := s.cost(a).plus(rest[i+1][s.after()]); best.length < 0 || c.less(best) {
					best = c
				}
			}
			rest[i][a] = best
		}
	}
	var b strings.Builder
	b.Grow(rest[0][0].length)
	a := 0
	for i := range n {
		for _, s := range w.tokens[i] {
			if s.cost(a).plus(rest[i+1][s.after()]) == rest[i][a] {
				if s.isWord && a == 1 {
					b.WriteByte(' ')
				}
				b.WriteString(s.text)
				a = s.after()
				break
			}
		}
	}
	return b.String()
}

// cost is what a spelling costs: its length first, then its clutter.
type cost struct{ length, clutter int }

func (c cost) plus(d cost) cost { return cost{c.length + d.length, c.clutter + d.clutter} }

func (c cost) less(d cost) bool {
	return c.length < d.length || c.length == d.length && c.clutter < d.clutter
}

// cost is the spelling's cost after a word (afterWord = 1) or not.
func (s spelling) cost(afterWord int) cost {
	c := cost{len(s.text), s.clutter}
	if s.isWord && afterWord == 1 {
		c.length++ // the space between two words
	}
	return c
}

// after is the state the spelling leaves: 1 when it ends in a word.
func (s spelling) after() int {
	if s.isWord {
		return 1
	}
	return 0
}

// quotedEscape says whether r needs a backslash in a quoted term.
func quotedEscape(r rune) bool { return strings.ContainsRune(`"\*?^`, r) }

// wordEscape says whether r needs a backslash in an unquoted term.
func wordEscape(r rune) bool {
	return r < utf8.RuneSelf && isWordEnd(byte(r)) || strings.ContainsRune(`\*?^`, r)
}
