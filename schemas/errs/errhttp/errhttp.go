// Package errhttp is the errors' HTTP face: the one map from an error's
// kind to its HTTP status, and FOLIO's error envelope, which both
// services answer errors in and their clients (circulation's of storage,
// the SIP2 door's of circulation) read back with Decode. Only HTTP
// adapters import it; the domain packages never do.
package errhttp

import (
	"encoding/json"
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/checkoutlock/schemas/errs"
)

// statusOf is the one map from kind to HTTP status.
var statusOf = map[errs.Kind]int{
	errs.KindBadRequest:       http.StatusBadRequest,
	errs.KindInvalid:          http.StatusUnprocessableEntity,
	errs.KindNotFound:         http.StatusNotFound,
	errs.KindConflict:         http.StatusConflict,
	errs.KindLocked:           http.StatusServiceUnavailable,
	errs.KindUnauthorized:     http.StatusUnauthorized,
	errs.KindForbidden:        http.StatusForbidden,
	errs.KindUnavailable:      http.StatusServiceUnavailable,
	errs.KindInternal:         http.StatusInternalServerError,
	errs.KindTooManyRequests:  http.StatusTooManyRequests,
	errs.KindTooLarge:         http.StatusRequestEntityTooLarge,
	errs.KindHeadersTooLarge:  http.StatusRequestHeaderFieldsTooLarge,
	errs.KindTimeout:          http.StatusRequestTimeout,
	errs.KindUnsupportedMedia: http.StatusUnsupportedMediaType,
}

// Status is the HTTP status of kind; an unknown kind is a bug (500).
func Status(kind errs.Kind) int {
	if s, ok := statusOf[kind]; ok {
		return s
	}
	return http.StatusInternalServerError
}

// Envelope is FOLIO's error envelope (schemas/errors.json).
type Envelope struct {
	Errors []Entry `json:"errors"`
}

// Entry is one error of an Envelope.
type Entry struct {
	Message          string                 `json:"message"`
	Code             string                 `json:"code"`
	Parameters       []errs.Parameter       `json:"parameters,omitempty"`
	OverridableBlock *errs.OverridableBlock `json:"overridableBlock,omitempty"`
}

// EntryOf is e's entry.
func EntryOf(e *errs.Error) Entry {
	return Entry{Message: e.Message, Code: e.Code, Parameters: e.Parameters, OverridableBlock: e.Overridable}
}

// Single is an envelope of one entry.
func Single(message, code string, params ...errs.Parameter) Envelope {
	return Envelope{Errors: []Entry{{Message: message, Code: code, Parameters: params}}}
}

// Decode reads an answer's envelope: found is false when data holds none
// (not JSON, or no errors), as a proxy's or a crashed server's answer may.
func Decode(data []byte) (env Envelope, found bool) {
	if err := json.Unmarshal(data, &env); err != nil || len(env.Errors) == 0 {
		return Envelope{}, false
	}
	return env, true
}

// Param is the value of the entry's parameter key, "" when it has none.
func (e Entry) Param(key string) string {
	for _, p := range e.Parameters {
		if p.Key == key {
			return p.Value
		}
	}
	return ""
}

// SetRetryAfter says in h when trying again may work: Retry-After in whole
// seconds, rounded up so that a client never comes back early.
func SetRetryAfter(h http.Header, d time.Duration) {
	h.Set("Retry-After", strconv.Itoa(int(math.Ceil(d.Seconds()))))
}

// RetryAfter is the wait an answer's Retry-After (in seconds) asks for,
// zero when it asks none or says it otherwise.
func RetryAfter(h http.Header) time.Duration {
	n, err := strconv.Atoi(h.Get("Retry-After"))
	if err != nil || n < 0 {
		return 0
	}
	return time.Duration(n) * time.Second
}
