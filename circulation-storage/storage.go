// Package storage is the domain of circulation-storage: the records it keeps
// (check-out locks; patrons, items, loan policies, circulation rules, loans
// and settings; tenants), the services that keep them, the rule matching,
// and the closed set of errors they report. It imports neither the HTTP framework nor the
// database driver: package postgres implements the services, package httpapi
// serves them, and main wires the two.
package storage

import (
	"errors"
	"fmt"
	"time"

	"github.com/checkoutlock/schemas"
)

// Kind classifies an Error by what the client can do about it. Each kind maps
// to one HTTP status, in exactly one place (httpapi's error handler).
type Kind int

// The kinds of error.
const (
	// KindBadRequest: the request cannot be interpreted (bad tenant, bad id).
	KindBadRequest Kind = iota + 1
	// KindInvalid: the request was understood but a value is unacceptable.
	KindInvalid
	// KindNotFound: the record does not exist (or, for a lock, has expired).
	KindNotFound
	// KindConflict: the record changed or a uniqueness rule forbids the write.
	KindConflict
	// KindLocked: the patron's check-out lock is held by someone else.
	KindLocked
	// KindForbidden: the caller may not do this to this record (release
	// a lock it does not hold without the permission to).
	KindForbidden
	// KindUnavailable: the database cannot be reached; retrying may succeed.
	KindUnavailable
	// KindInternal: a bug.
	KindInternal
)

// Error codes: stable strings for programs, sent as "code" in the envelope,
// defined once in the contract (package schemas).
const (
	CodeTenantMissing        = schemas.CodeTenantMissing
	CodeInvalidTenant        = schemas.CodeInvalidTenant
	CodeTenantNotInitialized = schemas.CodeTenantNotInitialized
	CodeInvalidID            = schemas.CodeInvalidID
	CodeInvalidParameter     = schemas.CodeInvalidParameter
	CodeValidation           = schemas.CodeValidation
	CodePageTooLarge         = schemas.CodePageTooLarge
	CodeNotFound             = schemas.CodeNotFound
	CodeConflict             = schemas.CodeConflict
	CodeLockHeld             = schemas.CodeLockHeld
	CodeDatabaseUnavailable  = schemas.CodeDatabaseUnavailable
	CodeTimeout              = schemas.CodeTimeout
	CodeInternal             = schemas.CodeInternal
)

// Parameter is one key/value detail of an error, as FOLIO sends them.
type Parameter struct {
	Key   string `json:"key"`
	Value string `json:"value"`
}

// Error is the one error type the services return for anything a client
// should hear about. Anything else reaching the HTTP layer is a bug (500).
type Error struct {
	Kind       Kind
	Code       string
	Message    string
	Parameters []Parameter
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

// AsError returns err's *Error, if it has one.
func AsError(err error) (*Error, bool) {
	var e *Error
	ok := errors.As(err, &e)
	return e, ok
}

// IsKind reports whether err is an *Error of the given kind.
func IsKind(err error, kind Kind) bool {
	e, ok := AsError(err)
	return ok && e.Kind == kind
}

// NotFound is the error for a record that does not exist.
func NotFound(what, id string) *Error {
	return Errorf(KindNotFound, CodeNotFound, "%s not found", what).With("id", id)
}

// Unavailable is the error for a database that cannot be reached.
func Unavailable(cause error) *Error {
	e := Errorf(KindUnavailable, CodeDatabaseUnavailable, "Database unavailable, try again later")
	e.Err = cause
	return e
}
