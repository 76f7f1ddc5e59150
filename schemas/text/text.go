// Package text holds the one bound of what a service repeats of a
// client's text, and the cut that keeps text valid: a leaf every package
// of the module may import.
package text

import (
	"strings"
	"unicode/utf8"
)

// Cut is s, valid UTF-8, cut to at most n bytes, never inside a
// character.
func Cut(s string, n int) string {
	s = strings.ToValidUTF8(s, "")
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// MaxEchoed bounds what of a client's value an answer or a log line
// repeats (an error's parameter, an ignored member's name).
const MaxEchoed = 64

// Echoed is a client's value as an answer or a log line repeats it: cut
// to MaxEchoed bytes, with "…" when it was cut.
func Echoed(s string) string {
	if c := Cut(s, MaxEchoed); len(c) < len(s) {
		return c + "…"
	}
	return s
}
