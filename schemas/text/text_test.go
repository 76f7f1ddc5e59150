package text

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// TestEchoedIsBoundedAndValid: a value repeated is at most MaxEchoed bytes
// and "…", never cut inside a character, and as it was when short.
func TestEchoedIsBoundedAndValid(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"short", "short"},
		{strings.Repeat("a", MaxEchoed), strings.Repeat("a", MaxEchoed)},
		{strings.Repeat("a", MaxEchoed+1), strings.Repeat("a", MaxEchoed) + "…"},
		{strings.Repeat("a", MaxEchoed-1) + "é", strings.Repeat("a", MaxEchoed-1) + "…"},
	} {
		got := Echoed(c.in)
		if got != c.want || !utf8.ValidString(got) {
			t.Errorf("Echoed(%q) = %q, want %q", c.in, got, c.want)
		}
	}
	if got := Cut("a\xffb", 8); got != "ab" {
		t.Errorf("Cut of invalid UTF-8 = %q, want %q", got, "ab")
	}
}
