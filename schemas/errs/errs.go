// Package errs is the one error type of both services' domains: the kinds
// of error, FOLIO's codes and parameters, and a refusal of several reasons
// at once. It knows nothing of HTTP: the HTTP adapter (errs/errhttp) gives
// each kind its status and writes the envelope; the servers' request path
// (serverkit) answers errors with it. Error codes themselves are wire
// constants in package schemas.
package errs

import (
	"errors"
	"fmt"
	"time"

	"github.com/checkoutlock/schemas"
)

// Kind classifies an Error by what the client can do about it. The HTTP
// adapter (errs/errhttp) gives each kind its one status; the domain knows
// kinds and FOLIO's codes, never HTTP.
type Kind int

// The kinds of error.
const (
	// KindBadRequest: the request cannot be interpreted (bad tenant, bad id).
	KindBadRequest Kind = iota + 1
	// KindInvalid: the request was understood but is refused (FOLIO's 422):
	// a value is unacceptable, or a check-out or check-in may not happen.
	KindInvalid
	// KindNotFound: the record does not exist (or, for a lock, has expired).
	KindNotFound
	// KindConflict: the record changed or a uniqueness rule forbids the
	// write; trying again may work.
	KindConflict
	// KindLocked: the patron's check-out lock is held by someone else: 503
	// with Retry-After, as FOLIO answers it.
	KindLocked
	// KindUnauthorized: the credentials were not accepted.
	KindUnauthorized
	// KindForbidden: the caller may not do this (the envelope names the
	// permission it lacks).
	KindForbidden
	// KindUnavailable: a dependency (the database, circulation-storage)
	// cannot be reached; retrying may succeed.
	KindUnavailable
	// KindInternal: a bug.
	KindInternal
	// KindTooManyRequests: the caller must wait before trying again (a
	// sign-in locked by failures): 429 with Retry-After.
	KindTooManyRequests
	// KindTooLarge: a request's body is larger than the service takes.
	KindTooLarge
	// KindHeadersTooLarge: a request's headers are larger than the service
	// takes.
	KindHeadersTooLarge
	// KindTimeout: a request's body did not arrive in time.
	KindTimeout
	// KindUnsupportedMedia: a request's body is not JSON.
	KindUnsupportedMedia
)

// Parameter is one key/value detail of an error, as FOLIO sends them.
type Parameter struct {
	Key   string `json:"key"`
	Value string `json:"value"`
}

// OverridableBlock names, on a refusal an override lifts, the block of
// overrideBlocks that lifts it and the permissions the caller lacks to
// send it (none: it may), as FOLIO's clients read it to offer the
// override.
type OverridableBlock struct {
	Name               string   `json:"name"`
	MissingPermissions []string `json:"missingPermissions"`
}

// Error is the one error type the services return for anything a client
// should hear about. Anything else reaching the HTTP layer is a bug (500).
type Error struct {
	Kind       Kind
	Code       string
	Message    string
	Parameters []Parameter
	// Overridable is the override that lifts this refusal, when one does.
	Overridable *OverridableBlock
	// RetryAfter, when positive, tells the client when trying again may work.
	RetryAfter time.Duration
	// Err is the cause, for logs; it is never sent to the client.
	Err error
}

func (e *Error) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("%s: %s: %v", e.Code, e.Message, e.Err)
	}
	return e.Code + ": " + e.Message
}

func (e *Error) Unwrap() error { return e.Err }

// Errorf builds an Error of the given kind and code.
func Errorf(kind Kind, code, format string, args ...any) *Error {
	return &Error{Kind: kind, Code: code, Message: fmt.Sprintf(format, args...)}
}

// With returns e with one more parameter.
func (e *Error) With(key, value string) *Error {
	e.Parameters = append(e.Parameters, Parameter{Key: key, Value: value})
	return e
}

// Because returns e with its cause set.
func (e *Error) Because(err error) *Error {
	e.Err = err
	return e
}

// As returns err's *Error, if it has one.
func As(err error) (*Error, bool) {
	var e *Error
	ok := errors.As(err, &e)
	return e, ok
}

// Outermost is what err answers its caller with: the first *Error,
// *Refusal or *schemas.ValidationError in err's tree, in errors.As's
// order; nil when it holds none. An Error's cause is for the logs: a write
// whose outcome is not known, caused by a refusal of its send again, is
// not that refusal.
func Outermost(err error) error {
	switch e := err.(type) {
	case nil:
		return nil
	case *Error, *Refusal, *schemas.ValidationError:
		return e
	case interface{ Unwrap() error }:
		return Outermost(e.Unwrap())
	case interface{ Unwrap() []error }:
		for _, inner := range e.Unwrap() {
			if found := Outermost(inner); found != nil {
				return found
			}
		}
	}
	return nil
}

// IsKind reports whether err is an *Error of the given kind.
func IsKind(err error, kind Kind) bool {
	e, ok := As(err)
	return ok && e.Kind == kind
}

// IsCode reports whether err is an *Error with the given code.
func IsCode(err error, code string) bool {
	e, ok := As(err)
	return ok && e.Code == code
}

// NotFound is the error for a record that does not exist.
func NotFound(what, id string) *Error {
	return Errorf(KindNotFound, schemas.CodeNotFound, "%s not found", what).With("id", id)
}

// Refusal is a request refused for one or more reasons, all reported
// together as FOLIO does: one 422 envelope entry each.
type Refusal struct {
	Errors []*Error
}

func (r *Refusal) Error() string {
	msg := "refused:"
	for _, e := range r.Errors {
		msg += " " + e.Message + ";"
	}
	return msg
}
