package serverkit

import (
	"bytes"
	"encoding/json"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestJSONIsTheEncodersWithItsLength: the answer is what encoding/json's
// Encoder writes, HTML escaped and indented as asked, with its length; a
// value that cannot be encoded writes nothing.
func TestJSONIsTheEncodersWithItsLength(t *testing.T) {
	big := map[string]any{"page": strings.Repeat("x", 2*maxPooled)}
	for _, c := range []struct {
		v      any
		indent string
	}{
		{map[string]any{"a": "<b>&", "n": 1.5}, ""},
		{[]int{1, 2}, "  "},
		{big, ""},
		{map[string]any{"after a large one": true}, ""},
	} {
		var want bytes.Buffer
		enc := json.NewEncoder(&want)
		enc.SetIndent("", c.indent)
		if err := enc.Encode(c.v); err != nil {
			t.Fatal(err)
		}
		w := httptest.NewRecorder()
		if err := writeJSON(w, c.v, c.indent); err != nil {
			t.Fatal(err)
		}
		if w.Body.String() != want.String() || w.Header().Get("Content-Length") != strconvItoa(want.Len()) {
			t.Errorf("wrote %q with Content-Length %q, want %q with %d", w.Body, w.Header().Get("Content-Length"), want.String(), want.Len())
		}
	}
	w := httptest.NewRecorder()
	if err := writeJSON(w, math.Inf(1), ""); err == nil || w.Body.Len() != 0 || w.Header().Get("Content-Length") != "" {
		t.Errorf("an unencodable value: error %v, wrote %q", err, w.Body)
	}
}

func strconvItoa(n int) string { b, _ := json.Marshal(n); return string(b) }

// TestSendSendsOnlyCompleteAnswers: an answer with its length, or without a
// body, is flushed at once; any other is left to net/http.
func TestSendSendsOnlyCompleteAnswers(t *testing.T) {
	for _, c := range []struct {
		length  string
		status  int
		flushed bool
	}{
		{"12", http.StatusOK, true},
		{"", http.StatusNoContent, true},
		{"", http.StatusNotModified, true},
		{"", http.StatusOK, false},
	} {
		w := httptest.NewRecorder()
		if c.length != "" {
			w.Header().Set("Content-Length", c.length)
		}
		w.WriteHeader(c.status)
		send(w, c.status)
		if w.Flushed != c.flushed {
			t.Errorf("%d with Content-Length %q: flushed %v, want %v", c.status, c.length, w.Flushed, c.flushed)
		}
	}
}

// TestJSONMediaTypes: JSON is recognised with parameters and in any case,
// as mime.ParseMediaType reads it, and nothing else is, but the media
// types a route takes besides.
func TestJSONMediaTypes(t *testing.T) {
	t.Parallel()
	for ct, want := range map[string]bool{
		"application/json": true, "application/json; charset=utf-8": true, "Application/JSON;charset=UTF-8": true,
		"application/json; charset": false, "application/jsonx": false, "text/json": false, "": false, " application/json": true,
		"application/merge-patch+json": false,
	} {
		if got := isJSON(ct, nil); got != want {
			t.Errorf("isJSON(%q) = %v, want %v", ct, got, want)
		}
	}
	if !isJSON("application/merge-patch+json; charset=utf-8", []string{"application/merge-patch+json"}) {
		t.Error("a media type the route takes besides JSON is refused")
	}
}
