package postgres

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// A statement's span carries at most StatementTextMax bytes of its text,
// cut at a character's start, and says how long the whole was; a short
// statement is carried whole.
func TestAStatementsSpanCarriesItsTextCut(t *testing.T) {
	short := "SELECT 1"
	if got := cutStatement(short); got != short {
		t.Errorf("cutStatement(%q) = %q, want it whole", short, got)
	}
	exact := strings.Repeat("x", StatementTextMax)
	if got := cutStatement(exact); got != exact {
		t.Errorf("a statement of exactly %d bytes was cut", StatementTextMax)
	}
	// "é" is two bytes: a cut at StatementTextMax falls inside one.
	long := "WITH " + strings.Repeat("é", StatementTextMax)
	got := cutStatement(long)
	suffix := " … (" + "2053" + " bytes in all)"
	if !strings.HasSuffix(got, suffix) {
		t.Fatalf("cutStatement of %d bytes = …%q, want the suffix %q", len(long), got[max(0, len(got)-40):], suffix)
	}
	head := strings.TrimSuffix(got, suffix)
	if len(head) > StatementTextMax || len(head) < StatementTextMax-1 || !strings.HasPrefix(long, head) || !utf8.ValidString(head) {
		t.Errorf("the cut text is %d bytes, valid UTF-8 %v, a prefix %v; want %d bytes or one less, a valid prefix",
			len(head), utf8.ValidString(head), strings.HasPrefix(long, head), StatementTextMax)
	}
}
