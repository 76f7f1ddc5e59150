package recordstore

import (
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode"

	"github.com/checkoutlock/schemas/text"

	"github.com/jackc/pgx/v5"

	"github.com/checkoutlock/schemas"
	"github.com/checkoutlock/schemas/errs"

	"github.com/google/uuid"

	"github.com/checkoutlock/circulation-storage/cql"
)

// A CQL query becomes a WHERE condition and an ORDER BY over the table's
// jsonb documents. Nothing the client sent is written into the SQL: every
// term and every field path is a parameter; only the names of generated
// columns, from the table's spec, are. A field with a generated column is
// read from the column, so its index serves the query; any other field is
// read from the document by its path.

// column is a generated column that holds a document field.
type column struct {
	name   string
	isUUID bool
}

// fieldPath is a field name: dot-separated JSON keys.
var fieldPath = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*){0,7}$`)

// cqlQuery is a query in translation: the arguments so far, named prefix
// and their number, and the query's text for errors.
type cqlQuery struct {
	spec   tableSpec
	prefix string
	args   pgx.StrictNamedArgs
	text   string
}

// param adds an argument and returns its placeholder.
func (q *cqlQuery) param(v any) string {
	name := q.prefix + strconv.Itoa(len(q.args)+1)
	q.args[name] = v
	return "@" + name
}

// translation is a query in SQL: the condition and its arguments (named
// cql_where_1, 2, ...), then the sort and its arguments (cql_sort_1, ...).
type translation struct {
	where     string
	whereArgs pgx.StrictNamedArgs
	orderBy   []string
	sortArgs  pgx.StrictNamedArgs
}

// Condition is a CQL query (text as the client wrote it, for errors) as a
// condition over rows with a jsonb column of documents, and the keys to
// sort them by: a field named in columns (uuids, columns holding UUIDs) is
// read from its column, any other from the document by its path. Its
// arguments are named cql_where_1, 2, ..., and cql_sort_1, ... for the
// sort. The lock history's query is this, over each event as a document.
func Condition(query *cql.Query, text string, columns map[string]string, uuids ...string) (where string, whereArgs pgx.StrictNamedArgs,
	orderBy []string, sortArgs pgx.StrictNamedArgs, err error) {
	sp := tableSpec{fields: map[string]column{}}
	for field, name := range columns {
		sp.fields[field] = column{name: name, isUUID: slices.Contains(uuids, field)}
	}
	tr, err := translateCQL(query, text, sp)
	return tr.where, tr.whereArgs, tr.orderBy, tr.sortArgs, err
}

// translateCQL translates a parsed query (text, as the client wrote it, for
// errors) over the table of sp.
func translateCQL(query *cql.Query, text string, sp tableSpec) (translation, error) {
	q := &cqlQuery{spec: sp, prefix: "cql_where_", args: pgx.StrictNamedArgs{}, text: text}
	var tr translation
	var err error
	if tr.where, err = q.node(query.Root); err != nil {
		return translation{}, err
	}
	tr.whereArgs = q.args
	q.prefix, q.args = "cql_sort_", pgx.StrictNamedArgs{}
	for _, key := range query.Sort {
		expr, err := q.sortKey(key)
		if err != nil {
			return translation{}, err
		}
		tr.orderBy = append(tr.orderBy, expr)
	}
	tr.sortArgs = q.args
	return tr, nil
}

// unsupported is the 422 for a query this service does not answer.
func (q *cqlQuery) unsupported(format string, args ...any) error {
	text := text.Echoed(q.text)
	return errs.Errorf(errs.KindInvalid, schemas.CodeInvalidParameter, "query: "+format, args...).With("query", text)
}

func (q *cqlQuery) node(n cql.Node) (string, error) {
	switch n := n.(type) {
	case *cql.Bool:
		left, err := q.node(n.Left)
		if err != nil {
			return "", err
		}
		right, err := q.node(n.Right)
		if err != nil {
			return "", err
		}
		switch n.Op {
		case cql.And:
			return "(" + left + " AND " + right + ")", nil
		case cql.Or:
			return "(" + left + " OR " + right + ")", nil
		case cql.Not:
			return "(" + left + " AND NOT " + right + ")", nil
		}
		return "", q.unsupported("boolean operator %d is not supported", n.Op)
	case *cql.Clause:
		return q.clause(n)
	}
	return "", q.unsupported("unexpected query structure")
}

// clause is one search clause; its truth is never NULL, so that "not"
// excludes exactly what the clause matches.
func (q *cqlQuery) clause(c *cql.Clause) (string, error) {
	if c.Index == "" {
		return "", q.unsupported("a search term needs a field, as in barcode==%q (cql.serverChoice is not supported)", termText(c.Terms[0]))
	}
	if strings.EqualFold(c.Index, "cql.allRecords") {
		return "true", nil
	}
	if strings.HasPrefix(strings.ToLower(c.Index), "cql.") {
		return "", q.unsupported("the index %q is not supported", c.Index)
	}
	if !fieldPath.MatchString(c.Index) {
		return "", q.unsupported("%q is not a field name (letters, digits and _, nested with dots)", c.Index)
	}
	if len(c.Modifiers) > 0 {
		return "", q.unsupported("the relation modifier %q is not supported", c.Modifiers[0].Name)
	}
	var parts []string
	for _, term := range c.Terms {
		p, err := q.compare(c.Index, c.Relation, term)
		if err != nil {
			return "", err
		}
		parts = append(parts, "coalesce("+p+", false)")
	}
	if len(parts) == 1 {
		return parts[0], nil
	}
	join := " OR "
	if c.TermsOp == cql.And {
		join = " AND "
	}
	return "(" + strings.Join(parts, join) + ")", nil
}

// termText is a term for a message.
func termText(t cql.Term) string {
	s := t.String()
	return strings.Trim(s, `"`)
}

// compare is the condition of one field, relation and term.
func (q *cqlQuery) compare(field, relation string, term cql.Term) (string, error) {
	col, hasColumn := q.spec.fields[field]
	// text is the field's value as text; called only where it is used, as
	// it may add a parameter.
	text := func() string {
		switch {
		case hasColumn && col.isUUID:
			return col.name + "::text"
		case hasColumn:
			return col.name
		}
		return "(jsonb #>> " + q.param(strings.Split(field, ".")) + "::text[])"
	}
	literal, isLiteral := term.Literal()
	switch relation {
	case "==", "<>":
		op := map[string]string{"==": "=", "<>": "<>"}[relation]
		if !isLiteral {
			not := map[string]string{"==": "", "<>": "NOT "}[relation]
			return text() + " " + not + "LIKE " + q.param(likePattern(term, false)), nil
		}
		if hasColumn && col.isUUID {
			// A UUID column compares as a UUID (case does not matter);
			// a term that is no UUID equals no value of it.
			id, err := uuid.Parse(literal)
			if err != nil {
				if relation == "==" {
					return "false", nil
				}
				return col.name + " IS NOT NULL", nil
			}
			return col.name + " " + op + " " + q.param(id.String()) + "::uuid", nil
		}
		return text() + " " + op + " " + q.param(literal), nil
	case "=":
		if hasColumn && col.isUUID && isLiteral {
			if id, err := uuid.Parse(strings.TrimSpace(literal)); err == nil {
				return col.name + " = " + q.param(id.String()) + "::uuid", nil
			}
		}
		if isLiteral && strings.TrimSpace(literal) == "" {
			// field="" : the record has the field.
			return text() + " IS NOT NULL", nil
		}
		words := termWords(term)
		if len(words) == 0 {
			// No word in it, punctuation only: the whole value, in any case.
			return "lower(" + text() + ") LIKE " + q.param(likePattern(term, true)), nil
		}
		return "NOT EXISTS (SELECT FROM unnest(" + q.param(words) + "::text[]) w WHERE NOT EXISTS (" +
			"SELECT FROM regexp_split_to_table(lower(" + text() + "), '[^[:alnum:]]+') v WHERE v LIKE w))", nil
	case "<", ">", "<=", ">=":
		if !isLiteral {
			return "", q.unsupported("wildcards are not supported with %s", relation)
		}
		// Compared as the field's values are: numbers as numbers,
		// strings (dates among them, as FOLIO writes them) as strings,
		// whatever the term looks like ("1003" is a string to a barcode,
		// a number to a _version).
		value := "(jsonb #> " + q.param(strings.Split(field, ".")) + "::text[])"
		asText := value + " " + relation + " to_jsonb(" + q.param(literal) + "::text)"
		if !jsonNumber.MatchString(literal) {
			return asText, nil
		}
		return "CASE jsonb_typeof(" + value + ") WHEN 'number' THEN " + value + " " + relation + " " + q.param(literal) + "::jsonb ELSE " +
			asText + " END", nil
	}
	return "", q.unsupported("the relation %q is not supported (==, =, <>, <, >, <=, >= are)", relation)
}

// jsonNumber matches a number as JSON writes it.
var jsonNumber = regexp.MustCompile(`^-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?$`)

// likePattern is term as a LIKE pattern: * is %, ? is _, and the rest
// literal (LIKE's own wildcards and escape character escaped).
func likePattern(term cql.Term, lower bool) string {
	var b strings.Builder
	for _, p := range term.Parts {
		switch p.Wildcard {
		case '*':
			b.WriteByte('%')
		case '?':
			b.WriteByte('_')
		default:
			lit := p.Literal
			if lower {
				lit = strings.ToLower(lit)
			}
			b.WriteString(escapeLike(lit))
		}
	}
	return b.String()
}

var likeEscaper = strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`)

func escapeLike(s string) string { return likeEscaper.Replace(s) }

// termWords splits a term into the lower-cased LIKE patterns of its words,
// as the field's value is split: at every character that is not a letter or
// a digit. A wildcard belongs to the word it touches.
func termWords(term cql.Term) []string {
	var words []string
	var cur strings.Builder
	flush := func() {
		if cur.Len() > 0 {
			words = append(words, cur.String())
			cur.Reset()
		}
	}
	for _, p := range term.Parts {
		switch p.Wildcard {
		case '*':
			cur.WriteByte('%')
			continue
		case '?':
			cur.WriteByte('_')
			continue
		}
		for _, r := range strings.ToLower(p.Literal) {
			if unicode.IsLetter(r) || unicode.IsDigit(r) {
				cur.WriteString(escapeLike(string(r)))
				continue
			}
			flush()
		}
	}
	flush()
	return words
}

// sortKey is one ORDER BY expression.
func (q *cqlQuery) sortKey(key cql.SortKey) (string, error) {
	if !fieldPath.MatchString(key.Index) {
		return "", q.unsupported("cannot sort by %q: not a field name", key.Index)
	}
	// One direction a key: a second, which could only contradict or
	// repeat the first, is refused rather than read as the last one.
	if len(key.Modifiers) > 1 {
		return "", q.unsupported("the sort key %q has %d modifiers: it takes one, sort.ascending or sort.descending", key.Index, len(key.Modifiers))
	}
	dir := ""
	for _, m := range key.Modifiers {
		if m.Value != "" {
			return "", q.unsupported("the sort modifier %q takes no value", m.Name)
		}
		switch strings.ToLower(m.Name) {
		case "sort.ascending":
			dir = ""
		case "sort.descending":
			dir = " DESC"
		default:
			return "", q.unsupported("the sort modifier %q is not supported (sort.ascending and sort.descending are)", m.Name)
		}
	}
	if col, ok := q.spec.fields[key.Index]; ok {
		return col.name + dir, nil
	}
	return "(jsonb #> " + q.param(strings.Split(key.Index, ".")) + "::text[])" + dir, nil
}
