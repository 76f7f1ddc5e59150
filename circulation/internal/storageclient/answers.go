package storageclient

import (
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/checkoutlock/circulation"
	"github.com/checkoutlock/schemas"
	"github.com/checkoutlock/schemas/errs"
	"github.com/checkoutlock/schemas/errs/errhttp"
)

// servicePointOf is the service point a refusal of a loan's write names,
// "" when it names none.
func servicePointOf(params []errs.Parameter) string {
	for _, p := range params {
		if p.Key == "checkoutServicePointId" || p.Key == "checkinServicePointId" {
			return p.Value
		}
	}
	return ""
}

// feeFineRefusals are storage's refusals of an action on fees/fines and
// of a loss it cannot bill, passed on as they are.
var feeFineRefusals = []string{schemas.CodeFeeFineClosed, schemas.CodeFeeFineAmountInvalid, schemas.CodeFeeFineAmountExceeded,
	schemas.CodePaymentMethodUnknown, schemas.CodeNoFeeFineOwner}

// fromAnswer is this service's map back from an answer of
// circulation-storage to an Error, by status and storage's error code,
// with the wait its Retry-After asks for (header); call names the request
// (method and path), for logs. A held lock is a errs.KindConflict here:
// the caller tries again.
func fromAnswer(status int, header http.Header, data []byte, call string) error {
	code, msg := "", fmt.Sprintf("status %d", status)
	var params []errs.Parameter
	env, found := errhttp.Decode(data)
	if found {
		code, msg, params = env.Errors[0].Code, env.Errors[0].Message, env.Errors[0].Parameters
	}
	cause := fmt.Errorf("%s: %d %s: %s", call, status, code, msg)
	withParams := func(e *errs.Error) error {
		e.Parameters = params
		return e
	}
	switch {
	case status == http.StatusServiceUnavailable && code == schemas.CodeLockHeld:
		return withParams(errs.Errorf(errs.KindConflict, schemas.CodeLockHeld, "%s", msg).Because(cause))
	case status == http.StatusServiceUnavailable && code == schemas.CodeCheckOutsBusy:
		// Too many check-out writes waited at storage: nothing was
		// written, and the caller hears when to try again.
		e := errs.Errorf(errs.KindUnavailable, schemas.CodeCheckOutsBusy, "%s", msg).Because(cause)
		e.Parameters, e.RetryAfter = params, errhttp.RetryAfter(header)
		return e
	case status == http.StatusServiceUnavailable, status == http.StatusBadGateway, status == http.StatusGatewayTimeout:
		return unavailable(cause)
	case status == http.StatusRequestHeaderFieldsTooLarge || status == http.StatusRequestURITooLong:
		// The call's query outgrew storage's MAX_HEADER_BYTES: a client's
		// value passed on (a name searched for, a CQL query), grown by
		// what this service adds to it. Nothing was read or written, and
		// the client hears it as it would had its own request been too
		// large here.
		return errs.Errorf(errs.KindHeadersTooLarge, schemas.CodeHeadersTooLarge,
			"The request's parameters are too long to pass on to circulation-storage; send shorter ones").Because(cause)
	case status >= 500:
		// A storage bug: not worth retrying, and the write may have happened.
		return errs.Errorf(errs.KindInternal, schemas.CodeInternal, "circulation-storage failed").Because(cause)
	case status == http.StatusUnauthorized:
		// Storage did not accept this service's credentials (its module
		// key not trusted there, say): a configuration problem.
		return withParams(errs.Errorf(errs.KindUnauthorized, code, "%s", msg).Because(cause))
	case status == http.StatusForbidden:
		// This service's module permissions do not cover the call (or,
		// behind a gateway, the caller's do not).
		return withParams(errs.Errorf(errs.KindForbidden, code, "%s", msg).Because(cause))
	case status == http.StatusNotFound:
		return errs.Errorf(errs.KindNotFound, schemas.CodeNotFound, "%s", msg).Because(cause)
	case status == http.StatusConflict && code == schemas.CodeLockLost:
		return errs.Errorf(errs.KindConflict, schemas.CodeLockLost,
			"The patron's check-out lock expired before the loan was created; nothing was changed, try again").Because(cause)
	case status == http.StatusConflict && code == schemas.CodeVersionConflict && strings.Contains(call, "/request-storage/"):
		// A request replaced at a version another write moved on: FOLIO's
		// optimistic-locking error, as storage words it.
		return withParams(errs.Errorf(errs.KindConflict, schemas.CodeVersionConflict, "%s", msg).Because(cause))
	case status == http.StatusConflict && code == schemas.CodeVersionConflict:
		return errs.Errorf(errs.KindConflict, schemas.CodeItemChanged, "%s", msg).Because(cause)
	case status == http.StatusConflict && code == schemas.CodeLoanChanged:
		return withParams(errs.Errorf(errs.KindConflict, schemas.CodeLoanChanged, "%s", msg).Because(cause))
	case status == http.StatusConflict:
		return withParams(errs.Errorf(errs.KindConflict, schemas.CodeConflict, "%s", msg).Because(cause))
	case status == http.StatusUnprocessableEntity && len(env.Errors) > 1 && slices.Contains(circulation.WriteRefusals, code):
		// A check-out's write that broke several rules, the first one of
		// those answered alone when broken alone: every one, in storage's
		// words.
		r := &errs.Refusal{}
		for _, e := range env.Errors {
			r.Errors = append(r.Errors, &errs.Error{Kind: errs.KindInvalid, Code: e.Code, Message: e.Message, Parameters: e.Parameters})
		}
		return r
	case status == http.StatusUnprocessableEntity && code == schemas.CodeItemHasOpenLoan:
		return errs.Errorf(errs.KindInvalid, schemas.CodeItemHasOpenLoan, "%s", msg).Because(cause)
	case status == http.StatusUnprocessableEntity && code == schemas.CodeItemLimitReached:
		return withParams(errs.Errorf(errs.KindInvalid, schemas.CodeItemLimitReached, "%s", msg).Because(cause))
	case status == http.StatusUnprocessableEntity && code == schemas.CodeItemRequestedByAnotherPatron:
		return withParams(errs.Errorf(errs.KindInvalid, schemas.CodeItemRequestedByAnotherPatron, "%s", msg).Because(cause))
	case status == http.StatusUnprocessableEntity && code == schemas.CodeUserBlockedAutomatically:
		return withParams(errs.Errorf(errs.KindInvalid, schemas.CodeUserBlockedAutomatically, "%s", msg).Because(cause))
	case status == http.StatusUnprocessableEntity && code == schemas.CodeRenewalBlockedByRecall:
		return withParams(errs.Errorf(errs.KindInvalid, schemas.CodeRenewalBlockedByRecall, "%s", msg).Because(cause))
	case status == http.StatusUnprocessableEntity && slices.Contains(requestRefusals, code):
		// A request or a check-out FOLIO's rules refuse: every reason, in
		// storage's words.
		r := &errs.Refusal{}
		for _, e := range env.Errors {
			r.Errors = append(r.Errors, &errs.Error{Kind: errs.KindInvalid, Code: e.Code, Message: e.Message, Parameters: e.Parameters})
		}
		return r
	case status == http.StatusUnprocessableEntity && code == schemas.CodeOfflineWhileOnLine:
		// A check-out said made offline that a door saw made on line:
		// the caller makes it a live one.
		return withParams(errs.Errorf(errs.KindInvalid, code, "%s", msg).Because(cause))
	case status == http.StatusUnprocessableEntity && code == schemas.CodeLockRequired:
		return errs.Errorf(errs.KindInvalid, schemas.CodeLockRequired, "%s", msg).Because(cause)
	case status == http.StatusUnprocessableEntity && code == schemas.CodeIdempotencyKeyReused:
		// A write sent with the id another request's write landed with
		// (postgres.Same): nothing was written.
		return withParams(errs.Errorf(errs.KindInvalid, schemas.CodeIdempotencyKeyReused, "%s", msg).Because(cause))
	case status == http.StatusUnprocessableEntity && code == schemas.CodePinInvalid:
		return errs.Errorf(errs.KindInvalid, schemas.CodePinInvalid, "%s", msg).Because(cause)
	case status == http.StatusTooManyRequests && (code == schemas.CodePinLocked || code == schemas.CodePinBusy):
		e := errs.Errorf(errs.KindTooManyRequests, code, "%s", msg).Because(cause)
		e.RetryAfter = errhttp.RetryAfter(header)
		return e
	case status == http.StatusUnprocessableEntity && (code == schemas.CodeAlreadyExists || code == schemas.CodeRecordTooLarge):
		return withParams(errs.Errorf(errs.KindInvalid, code, "%s", msg).Because(cause))
	case status == http.StatusUnprocessableEntity && slices.Contains(feeFineRefusals, code):
		// An action on fees/fines refused (mod-feesfines' words), or a
		// declaration of loss whose fees no owner takes: storage's own.
		return withParams(errs.Errorf(errs.KindInvalid, code, "%s", msg).Because(cause))
	case status == http.StatusUnprocessableEntity && code == schemas.CodePageTooLarge:
		// A page of records too large for storage to answer: the caller
		// asks for fewer.
		return withParams(errs.Errorf(errs.KindInvalid, code, "%s", msg).Because(cause))
	case status == http.StatusUnprocessableEntity && servicePointOf(params) != "":
		// A loan's service point that is not the tenant's: the request's
		// servicePointId.
		sp := servicePointOf(params)
		return errs.Errorf(errs.KindInvalid, schemas.CodeValidation, "servicePointId: service point %s does not exist", sp).
			With("servicePointId", sp).Because(cause)
	case status == http.StatusUnprocessableEntity:
		// A value storage refuses (a lock TTL above its maximum, a record
		// deleted meanwhile): the client hears storage's reason, as
		// VALIDATION_FAILED whatever storage's code: a check-in that met a
		// write that came first (the item lent meanwhile, the loan closed)
		// is one refusal to its client, whichever storage saw.
		return withParams(errs.Errorf(errs.KindInvalid, schemas.CodeValidation, "%s", msg).Because(cause))
	case status == http.StatusBadRequest && (code == schemas.CodeTenantNotInitialized || code == schemas.CodeInvalidTenant || code == schemas.CodeTenantMissing):
		// The caller's tenant is the problem: say so in storage's words.
		return withParams(errs.Errorf(errs.KindBadRequest, code, "%s", msg).Because(cause))
	}
	// Any other refusal means this service sent something storage's
	// contract does not allow: a bug here.
	return errs.Errorf(errs.KindInternal, schemas.CodeInternal,
		"circulation-storage refused a request").Because(cause)
}

// requestRefusals are the codes of storage's refusals of a request
// judged by FOLIO's rules (its package requests, judge.go), and of a check-out's
// or a renewal's write that broke a rule of the borrower, the item or the
// policy: FOLIO's, passed on as they are.
var requestRefusals = []string{schemas.CodeRequestingDisallowed, schemas.CodeRequestingDisallowedByPolicy,
	schemas.CodeItemAlreadyRequested, schemas.CodeItemAlreadyLoaned, schemas.CodeInvalidPickupServicePoint,
	schemas.CodeRequestPickupServicePointNotAllowed, schemas.CodeUserInactive, schemas.CodeUserBlockedManually, schemas.CodeItemStatusRefused, schemas.CodeItemNotLoanable,
	schemas.CodeUserIsInactiveOrExpired, schemas.CodeNoLoanPolicy, schemas.CodeItemDeclaredLostNotRenewable,
	schemas.CodeItemAgedToLostNotRenewable, schemas.CodeItemClaimedReturnedNotRenewable, schemas.CodeLoanNotRenewable,
	schemas.CodeLoanRenewalLimitReached, schemas.CodeRenewalBlockedByHoldRequest, schemas.CodeRenewalWouldNotChangeDueDate}

// unavailable is storage unreachable, or unable to serve right now (its
// database down or out of connections): 503 with Retry-After.
func unavailable(cause error) *errs.Error {
	e := errs.Errorf(errs.KindUnavailable, schemas.CodeStorageUnavailable, "circulation-storage is unavailable; try again").Because(cause)
	e.RetryAfter = schemas.UnavailableRetryAfter
	return e
}
