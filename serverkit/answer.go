package serverkit

// Answers leave before a request's bookkeeping is done: a JSON answer is
// encoded whole before any of it is written, so it carries its
// Content-Length (and an encoding error can still become a 500 rather than
// half an answer), and send sends a complete answer at once rather than
// when the handler returns.

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strconv"
	"sync"
)

// encoder is an encoding buffer and its encoder.
type encoder struct {
	buf bytes.Buffer
	enc *json.Encoder
}

// encoders are the encoders; one whose buffer grew past maxPooled (a large
// page) is left to the garbage collector rather than kept.
var encoders = sync.Pool{New: func() any {
	e := new(encoder)
	e.enc = json.NewEncoder(&e.buf)
	return e
}}

const maxPooled = 64 << 10

// writeJSON writes v to w as JSON, as encoding/json's Encoder writes it (indented
// by indent when it is not empty), with its Content-Length. Nothing is
// written when v cannot be encoded.
func writeJSON(w http.ResponseWriter, v any, indent string) error {
	e := encoders.Get().(*encoder)
	e.buf.Reset()
	e.enc.SetIndent("", indent)
	defer func() {
		if e.buf.Cap() <= maxPooled {
			encoders.Put(e)
		}
	}()
	if err := e.enc.Encode(v); err != nil {
		return err
	}
	w.Header().Set("Content-Length", strconv.Itoa(e.buf.Len()))
	_, err := w.Write(e.buf.Bytes())
	return err
}

// send sends the answer written to w so far now, if it is complete: one
// with its Content-Length, or one that has no body (204, 304). Anything
// else (an answer to HEAD among them, whose Content-Length net/http works
// out when the handler returns) is left to net/http. status is the
// answer's status; call send only once the answer's header has been
// written.
func send(w http.ResponseWriter, status int) {
	if w.Header().Get("Content-Length") == "" && status != http.StatusNoContent && status != http.StatusNotModified {
		return
	}
	if f, ok := w.(http.Flusher); ok {
		f.Flush()
		return
	}
	_ = http.NewResponseController(w).Flush()
}
