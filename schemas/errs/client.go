package errs

import (
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/checkoutlock/schemas"
)

// FromAnswer is the client's map back from an answer of circulation-storage
// to an Error, by status and storage's error code; call names the request
// (method and path), for logs. A held lock is a KindConflict here: the
// caller tries again.
func FromAnswer(status int, data []byte, call string) error {
	var env Envelope
	_ = json.Unmarshal(data, &env)
	code, msg := "", fmt.Sprintf("status %d", status)
	var params []Parameter
	if len(env.Errors) > 0 {
		code, msg, params = env.Errors[0].Code, env.Errors[0].Message, env.Errors[0].Parameters
	}
	cause := fmt.Errorf("%s: %d %s: %s", call, status, code, msg)
	withParams := func(e *Error) error {
		e.Parameters = params
		return e
	}
	switch {
	case status == http.StatusServiceUnavailable && code == schemas.CodeLockHeld:
		return withParams(Errorf(KindConflict, schemas.CodeLockHeld, "%s", msg).Because(cause))
	case status == http.StatusServiceUnavailable, status == http.StatusBadGateway, status == http.StatusGatewayTimeout:
		return Errorf(KindUnavailable, schemas.CodeStorageUnavailable,
			"circulation-storage is unavailable; try again").Because(cause)
	case status >= 500:
		// A storage bug: not worth retrying, and the write may have happened.
		return Errorf(KindInternal, schemas.CodeInternal, "circulation-storage failed").Because(cause)
	case status == http.StatusUnauthorized:
		// Storage did not accept this service's credentials (its module
		// key not trusted there, say): a configuration problem.
		return withParams(Errorf(KindUnauthorized, code, "%s", msg).Because(cause))
	case status == http.StatusForbidden:
		// This service's module permissions do not cover the call (or,
		// behind a gateway, the caller's do not).
		return withParams(Errorf(KindForbidden, code, "%s", msg).Because(cause))
	case status == http.StatusNotFound:
		return Errorf(KindNotFound, schemas.CodeNotFound, "%s", msg).Because(cause)
	case status == http.StatusConflict && code == schemas.CodeLockLost:
		return Errorf(KindConflict, schemas.CodeLockLost,
			"The patron's check-out lock expired before the loan was created; nothing was changed, try again").Because(cause)
	case status == http.StatusConflict && code == schemas.CodeVersionConflict:
		return Errorf(KindConflict, schemas.CodeItemChanged, "%s", msg).Because(cause)
	case status == http.StatusConflict:
		return withParams(Errorf(KindConflict, schemas.CodeConflict, "%s", msg).Because(cause))
	case status == http.StatusUnprocessableEntity && code == schemas.CodeItemHasOpenLoan:
		return Errorf(KindInvalid, schemas.CodeItemHasOpenLoan, "%s", msg).Because(cause)
	case status == http.StatusUnprocessableEntity && code == schemas.CodeItemLimitReached:
		return withParams(Errorf(KindInvalid, schemas.CodeItemLimitReached, "%s", msg).Because(cause))
	case status == http.StatusUnprocessableEntity && code == schemas.CodeItemRequestedByAnotherPatron:
		return withParams(Errorf(KindInvalid, schemas.CodeItemRequestedByAnotherPatron, "%s", msg).Because(cause))
	case status == http.StatusUnprocessableEntity && code == schemas.CodeUserBlockedAutomatically:
		return withParams(Errorf(KindInvalid, schemas.CodeUserBlockedAutomatically, "%s", msg).Because(cause))
	case status == http.StatusUnprocessableEntity && code == schemas.CodeLockRequired:
		return Errorf(KindInvalid, schemas.CodeLockRequired, "%s", msg).Because(cause)
	case status == http.StatusUnprocessableEntity && code == schemas.CodePinInvalid:
		return Errorf(KindInvalid, schemas.CodePinInvalid, "%s", msg).Because(cause)
	case status == http.StatusTooManyRequests && code == schemas.CodePinLocked:
		return Errorf(KindTooManyRequests, schemas.CodePinLocked, "%s", msg).Because(cause)
	case status == http.StatusUnprocessableEntity && code == schemas.CodeAlreadyExists:
		return withParams(Errorf(KindInvalid, schemas.CodeAlreadyExists, "%s", msg).Because(cause))
	case status == http.StatusUnprocessableEntity:
		// A value storage refuses (a lock TTL above its maximum, a record
		// deleted meanwhile): the client hears storage's reason.
		return withParams(Errorf(KindInvalid, schemas.CodeValidation, "%s", msg).Because(cause))
	case status == http.StatusBadRequest && (code == schemas.CodeTenantNotInitialized || code == schemas.CodeInvalidTenant || code == schemas.CodeTenantMissing):
		// The caller's tenant is the problem: say so in storage's words.
		return withParams(Errorf(KindBadRequest, code, "%s", msg).Because(cause))
	}
	// Any other refusal means this service sent something storage's
	// contract does not allow: a bug here.
	return Errorf(KindInternal, schemas.CodeInternal,
		"circulation-storage refused a request").Because(cause)
}
