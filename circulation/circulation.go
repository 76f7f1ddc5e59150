// Package circulation is the domain of the circulation service: check-out by
// barcode under the patron's check-out lock, check-in, and the runtime
// settings of the lock feature. It knows circulation-storage only through the
// Storage interface (implemented over HTTP by package storageclient) and
// imports neither the HTTP framework nor a database driver.
package circulation

import (
	"errors"
	"fmt"
	"time"

	"github.com/checkoutlock/schemas"
)

// Kind classifies an Error by what the client can do about it; httpapi's
// error handler maps each kind to one HTTP status.
type Kind int

// The kinds of error.
const (
	// KindBadRequest: the request cannot be interpreted (bad tenant, bad id).
	KindBadRequest Kind = iota + 1
	// KindInvalid: the check-out (or check-in) is refused: FOLIO's 422.
	KindInvalid
	// KindNotFound: the record does not exist.
	KindNotFound
	// KindConflict: the record changed under the request; trying again may work.
	KindConflict
	// KindUnavailable: circulation-storage cannot be reached.
	KindUnavailable
	// KindUnauthorized: storage did not accept this service's credentials.
	KindUnauthorized
	// KindForbidden: this service's (module) permissions do not cover a
	// call to storage.
	KindForbidden
	// KindInternal: a bug, here or in what storage answered.
	KindInternal
)

// Error codes, sent as "code" in the envelope, defined once in the contract
// (package schemas). The check-out ones are FOLIO's.
const (
	CodeUserBarcodeNotFound              = schemas.CodeUserBarcodeNotFound
	CodeUserInactive                     = schemas.CodeUserInactive
	CodeItemBarcodeNotFound              = schemas.CodeItemBarcodeNotFound
	CodeItemAlreadyCheckedOut            = schemas.CodeItemAlreadyCheckedOut
	CodeItemHasOpenLoan                  = schemas.CodeItemHasOpenLoan
	CodeItemStatusRefused                = schemas.CodeItemStatusRefused
	CodeItemNotLoanable                  = schemas.CodeItemNotLoanable
	CodeItemLimit                        = schemas.CodeItemLimit
	CodeItemLimitReached                 = schemas.CodeItemLimitReached
	CodeItemLimitMaterialType            = schemas.CodeItemLimitMaterialType
	CodeItemLimitLoanType                = schemas.CodeItemLimitLoanType
	CodeItemLimitBoth                    = schemas.CodeItemLimitBoth
	CodeItemLimitPatronGroupMaterialType = schemas.CodeItemLimitPatronGroupMaterialType
	CodeItemLimitPatronGroupLoanType     = schemas.CodeItemLimitPatronGroupLoanType
	CodeItemLimitPatronGroupBoth         = schemas.CodeItemLimitPatronGroupBoth
	CodeNoLoanPolicy                     = schemas.CodeNoLoanPolicy
	CodeUnableToAcquireLock              = schemas.CodeUnableToAcquireLock
	CodeLockHeld                         = schemas.CodeLockHeld
	CodeLockLost                         = schemas.CodeLockLost
	CodeLockRequired                     = schemas.CodeLockRequired
	CodeItemChanged                      = schemas.CodeItemChanged
	CodeNoOpenLoan                       = schemas.CodeNoOpenLoan
	CodeStorageUnavailable               = schemas.CodeStorageUnavailable
	CodeTenantMissing                    = schemas.CodeTenantMissing
	CodeInvalidTenant                    = schemas.CodeInvalidTenant
	CodeTenantNotInitialized             = schemas.CodeTenantNotInitialized
	CodeAlreadyExists                    = schemas.CodeAlreadyExists
	CodeVersionConflict                  = schemas.CodeVersionConflict
	CodeTimeout                          = schemas.CodeTimeout
	CodeInvalidID                        = schemas.CodeInvalidID
	CodeInvalidParameter                 = schemas.CodeInvalidParameter
	CodeValidation                       = schemas.CodeValidation
	CodeNotFound                         = schemas.CodeNotFound
	CodeConflict                         = schemas.CodeConflict
	CodeInternal                         = schemas.CodeInternal
)

// Parameter is one key/value detail of an error, as FOLIO sends them.
type Parameter struct {
	Key   string `json:"key"`
	Value string `json:"value"`
}

// Error is a single error a client should hear about.
type Error struct {
	Kind       Kind
	Code       string
	Message    string
	Parameters []Parameter
	// RetryAfter, when positive, tells the client when trying again may work.
	RetryAfter time.Duration
	// Err is the cause, for logs; never sent.
	Err error
}

func (e *Error) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("%s: %s: %v", e.Code, e.Message, e.Err)
	}
	return e.Code + ": " + e.Message
}

func (e *Error) Unwrap() error { return e.Err }

// Errorf builds an Error.
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

// Refusal is a check-out or check-in refused for one or more reasons, all
// reported together as FOLIO does: one 422 envelope entry each.
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

// IsCode reports whether err is an *Error with the given code.
func IsCode(err error, code string) bool {
	e, ok := AsError(err)
	return ok && e.Code == code
}
