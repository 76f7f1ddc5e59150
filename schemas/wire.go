package schemas

import (
	"strings"
	"time"

	"github.com/checkoutlock/schemas/text"
)

// The wire constants of the contract: header names, error codes, the time
// format and the tenant rule. Both services and the SIP2 door use these
// names, never their own copies, so they cannot drift apart.

// Headers. The X-Okapi ones are FOLIO's; the X-Check-Out ones make a loan
// creation a check-out's fenced write (see POST /loan-storage/loans).
const (
	HeaderTenant      = "X-Okapi-Tenant"
	HeaderToken       = "X-Okapi-Token"
	HeaderRequestID   = "X-Okapi-Request-Id"
	HeaderUserID      = "X-Okapi-User-Id"
	HeaderURL         = "X-Okapi-Url"
	HeaderPermissions = "X-Okapi-Permissions"
	// HeaderForwardedFor carries the address of the client a sign-in
	// came from when circulation passes it on (storage believes it only
	// from circulation's module token).
	HeaderForwardedFor = "X-Forwarded-For"
	// HeaderForwardedProto is the scheme the client used, as a reverse
	// proxy (or circulation, for a page's sign-in) says.
	HeaderForwardedProto = "X-Forwarded-Proto"
	// HeaderKiosk names the self-check machine a SIP2 door calls for: the
	// location code it gave at its login (SIP2's CP), at most
	// MaxKioskLocation bytes. Circulation believes it only from a proxy it
	// trusts (the door), storage only from circulation's module; it names
	// the machine in the locks, loans and history lines it causes.
	HeaderKiosk = "X-Kiosk-Location"
	// HeaderPatronPin carries the PIN a patron typed at a self-check
	// machine, with a patron summary (which then names the patron and
	// lists their loans), a renewal (which a tenant may require it of) or
	// a check-out (checked when given); never logged.
	HeaderPatronPin   = "X-Patron-Pin"
	HeaderLockID      = "X-Check-Out-Lock-Id"
	HeaderItemVersion = "X-Check-Out-Item-Version"
	// HeaderCheckInItemVersion on a loan's replacement makes it a
	// check-in's writes, in one transaction: the item becomes Available at
	// the version after the one named.
	HeaderCheckInItemVersion = "X-Check-In-Item-Version"
	// HeaderLoanActionItemVersion on an open loan's replacement whose
	// action keeps it open and changes its item (claimedReturned,
	// declaredLost) makes it that action's writes, in one transaction:
	// the item takes the action's status at the version after the one
	// named. With the action dueDateChanged (a librarian's change of the
	// due date) the item stays as it is, and must be at the version named.
	HeaderLoanActionItemVersion = "X-Loan-Action-Item-Version"
	// HeaderLoanActionServicePoint names where a loan action is taken: a
	// declaration of loss bills the lost item's fees to the fee/fine
	// owner serving it.
	HeaderLoanActionServicePoint = "X-Loan-Action-Service-Point"
	// HeaderRenewalCount on an open loan's replacement makes it a
	// renewal's write: the loan is replaced only while its renewalCount is
	// the one named (absent counts as 0), the new one one more.
	HeaderRenewalCount = "X-Renewal-Count"
	// HeaderRenewalOverride names, on a renewal's write (with
	// HeaderRenewalCount), the refusals an override lifts: renewalBlock
	// (the loan policy's: not loanable or renewable, its renewal limit, a
	// hold, a recall) and patronBlock (manual and automated blocks),
	// comma-separated. The loan's action is then renewedThroughOverride,
	// with the override's comment as its actionComment. It needs
	// PermissionRenewalOverride.
	HeaderRenewalOverride = "X-Renewal-Override"
	// HeaderCheckInServicePoint on an item's replacement makes it the
	// check-in of an item with no open loan, at the service point named:
	// storage gives the item the status its request queue calls for (on
	// the hold shelf, in transit, Available) at the version after the
	// body's _version; the body's other fields are not written.
	HeaderCheckInServicePoint = "X-Check-In-Service-Point"
	// HeaderRequestRules "circulation" on a request's creation, or on a
	// replacement that moves it to another item or changes its type,
	// makes storage judge it by FOLIO's request rules in the write's own
	// transaction (the item's status, the requester, the request policy)
	// and make the writes its type calls for (a page: the item Paged; a
	// recall: the loan's due date shortened). Without it, a request is
	// stored as sent, as FOLIO's request storage stores it.
	HeaderRequestRules = "X-Request-Rules"
	// RequestRulesCirculation is HeaderRequestRules' one value.
	RequestRulesCirculation = "circulation"
	// HeaderReleaseLock "true" on a check-out's write under a lock
	// (HeaderLockID) releases the lock in the write's own transaction when
	// the loan is written, waking the patron's waiters as a release does:
	// the check-out's last call is its write. A write that writes nothing
	// leaves the lock held.
	HeaderReleaseLock = "X-Check-Out-Release-Lock"
	// HeaderCheckOutOverride names, on a check-out's write, the blocks an
	// override lifts: itemLimitBlock, patronBlock, itemNotLoanableBlock
	// (comma-separated), or offline: a check-out a self-check machine made
	// offline (its loan carries offline, dated its loanDate), recorded past
	// every rule but the lock (OfflineRules). It needs
	// PermissionCheckOutOverride.
	HeaderCheckOutOverride = "X-Check-Out-Override"
	// HeaderLockReleased "true" on the 201 of such a write says that its
	// transaction released the lock; on a write answered from its id
	// (HeaderWriteReplayed), that the lock it names is gone, released then
	// if it was still held: a client that does not see it (a storage that
	// does not know HeaderReleaseLock) releases the lock itself.
	HeaderLockReleased = "X-Check-Out-Lock-Released"
	// HeaderAcquireLock, on a check-out's write that names its lock
	// (HeaderLockID) and releases it (HeaderReleaseLock), has storage
	// acquire that lock first, as POST /check-out-lock-storage would,
	// waiting for it and handed it on release: the lock is then held only
	// inside the one call, and a check-out under the lock is two calls
	// (validation's read and this write). Its value is a query string:
	// ttlMs and waitMs as the acquisition's body has them, and the
	// holder's instance and itemBarcode (the service point is the loan's,
	// the request id the request's). A lock it cannot get is answered as
	// an acquisition answers it (503 LOCK_HELD, with waitedMs after a
	// wait), and nothing is written; a write that writes nothing releases
	// the lock it acquired. It needs the permissions to acquire and to
	// release a lock.
	HeaderAcquireLock = "X-Check-Out-Acquire-Lock"
	// HeaderLockAcquired is on the answer of such a write once its lock
	// was acquired, whatever the write then did: how long the acquisition
	// waited for it, in milliseconds.
	HeaderLockAcquired = "X-Check-Out-Lock-Acquired"
	// HeaderLockDefault is on every answer of storage's tenant routes:
	// "true" or "false", the check-out lock feature for a tenant that
	// stored no checkoutLockFeature setting (storage's
	// CHECKOUT_LOCK_FEATURE_ENABLED). Circulation takes the default from
	// it, so the two services never disagree about it.
	HeaderLockDefault = "X-Check-Out-Lock-Default"
	// HeaderWriteID is a write's own id, a UUID, on every write of a
	// loan, an item or a request: storage stores it in the write's
	// transaction, first, with the answer the write gave. Sent again with
	// the id, the write is the same write: storage answers the stored
	// answer (HeaderWriteReplayed) and writes nothing, or writes it now if
	// it never landed. Circulation's writes always carry one; a write sent
	// without one is a write of its own, as FOLIO's storage writes it.
	HeaderWriteID = "X-Write-Id"
	// HeaderWriteDigest, beside HeaderWriteID, is the digest of the
	// client's request a write id made from an Idempotency-Key stands for:
	// the id sent again with another digest is refused
	// (CodeIdempotencyKeyReused).
	HeaderWriteDigest = "X-Write-Digest"
	// HeaderWriteReplayed "true" is on the answer of a write whose id had
	// landed already: the answer is the one the write gave then.
	HeaderWriteReplayed = "X-Write-Replayed"
	// HeaderIdempotencyKey is a client's key for one call of a write
	// route of circulation's (the IETF httpapi draft's header): the same
	// key with the same body, within storage.WriteKeptFor, answers the
	// first call's answer and writes once, whichever instance receives
	// it; with another body it is refused (CodeIdempotencyKeyReused).
	HeaderIdempotencyKey = "Idempotency-Key"
)

// MaxIdempotencyKey bounds an Idempotency-Key, in bytes.
const MaxIdempotencyKey = 255

// The kinds of write a write id is kept for at storage (write.json's
// kind): a write's kind is its route's, and an id sent again with a write
// of another kind is refused (CodeIdempotencyKeyReused).
const (
	WriteCheckOut      = "check-out"
	WriteCheckIn       = "check-in"
	WriteRenewal       = "renewal"
	WriteLoanAction    = "loan-action"
	WriteRequestCreate = "request-create"
	WriteRequestUpdate = "request-update"
	// WriteQueueReorder is an item's request queue given a new order.
	WriteQueueReorder  = "queue-reorder"
	WriteRecordCreate  = "record-create"
	WriteRecordUpdate  = "record-update"
	WriteFeeFineAction = "fee-fine-action"
)

// TimeFormat is how times go on the wire: RFC 3339, UTC, milliseconds.
const TimeFormat = "2006-01-02T15:04:05.000Z07:00"

// MaxLoanDateAhead is how far past a service's clock a check-out's
// loanDate may be: a clock a little ahead is tolerated, a loan dated in
// the future (out of a count by date, say) is refused.
const MaxLoanDateAhead = 5 * time.Minute

// MaxLoanDateBehind is how far before circulation's clock a check-out's
// loanDate may be without PermissionOverrideLoanDate: a kiosk's clock a
// little behind is tolerated, a backdated loan (due, and overdue, before
// the patron leaves) is the librarian's to make.
const MaxLoanDateBehind = 5 * time.Minute

// UnavailableRetryAfter is the Retry-After of a 503 that says a dependency
// (storage's database, circulation's storage) cannot be reached or has no
// connection to give right now: soon enough for a kiosk's scan to go
// through once it is back, late enough not to add to a crowd.
const UnavailableRetryAfter = time.Second

// TenantPattern is what a tenant id may look like; ids starting with "pg_"
// are refused as well (see ValidTenant). It keeps the tenant's schema name,
// <tenant>_mod_circulation_storage, a plain identifier within PostgreSQL's
// 63-byte limit.
const TenantPattern = `^[a-z][a-z0-9_]{0,30}$`

// TenantRule says in words what ValidTenant accepts, for error messages.
const TenantRule = "X-Okapi-Tenant must match " + TenantPattern + " and not start with pg_"

// ValidTenant reports whether s is an acceptable tenant id: it matches
// TenantPattern and does not start with "pg_", a prefix PostgreSQL reserves
// for its own schemas.
//
// It is checked on every request, so it reads the bytes itself rather than
// run the regular expression; FuzzValidTenantIsThePattern holds the two
// to the same answers.
func ValidTenant(s string) bool {
	if len(s) == 0 || len(s) > 31 || s[0] < 'a' || s[0] > 'z' || strings.HasPrefix(s, "pg_") {
		return false
	}
	for i := 1; i < len(s); i++ {
		if c := s[i]; (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '_' {
			return false
		}
	}
	return true
}

// Error codes, sent as "code" in the FOLIO error envelope. Codes a client
// can act on are stable; FOLIO's own are spelled as FOLIO spells them.
const (
	// Requests the services cannot interpret.
	CodeTenantMissing        = "TENANT_MISSING"
	CodeInvalidTenant        = "INVALID_TENANT"
	CodeTenantNotInitialized = "TENANT_NOT_INITIALIZED"
	// CodeSchemaBehind: the database's schema lacks migrations this
	// circulation-storage runs on (a tenant not upgraded yet); 503.
	CodeSchemaBehind     = "SCHEMA_BEHIND"
	CodeInvalidID        = "INVALID_ID"
	CodeInvalidHeader    = "INVALID_HEADER"
	CodeMalformedJSON    = "MALFORMED_JSON"
	CodeRouteNotFound    = "ROUTE_NOT_FOUND"
	CodeMethodNotAllowed = "METHOD_NOT_ALLOWED"
	CodeBodyTooLarge     = "BODY_TOO_LARGE"
	CodeHeadersTooLarge  = "HEADERS_TOO_LARGE"
	CodeUnsupportedMedia = "UNSUPPORTED_MEDIA_TYPE"
	CodeBodyTimeout      = "BODY_TIMEOUT"

	// Values refused.
	CodeInvalidParameter = "INVALID_PARAMETER"
	CodeValidation       = "VALIDATION_FAILED"
	CodePageTooLarge     = "PAGE_TOO_LARGE"
	// CodeRecordTooLarge refuses a record larger, as sent, than its kind
	// keeps (MaxRequestBytes): members no field describes are kept as
	// sent, within it.
	CodeRecordTooLarge  = "RECORD_TOO_LARGE"
	CodeNotFound        = "NOT_FOUND"
	CodeAlreadyExists   = "ALREADY_EXISTS"
	CodeInUse           = "RECORD_IN_USE"
	CodeConflict        = "CONFLICT"
	CodeVersionConflict = "VERSION_CONFLICT"
	// CodeAnonymizationIncomplete: a call anonymized as many of a
	// patron's closed loans as one call does, and more remain (an entry
	// of the answer's errors, not a refusal).
	CodeAnonymizationIncomplete = "ANONYMIZATION_INCOMPLETE"

	// The check-out lock.
	CodeLockHeld            = "LOCK_HELD"
	CodeLockLost            = "LOCK_LOST"
	CodeUnableToAcquireLock = "UNABLE_TO_ACQUIRE_LOCK"

	// Check-out and check-in refusals (FOLIO's codes where FOLIO has them).
	CodeUserBarcodeNotFound = "USER_BARCODE_NOT_FOUND"
	CodeUserInactive        = "USER_IS_INACTIVE"
	CodeUserBlockedManually = "USER_IS_BLOCKED_MANUALLY"
	// CodeUserBlockedAutomatically is an automated patron block; storage
	// refuses a check-out's write with it at the maximum items charged out.
	CodeUserBlockedAutomatically = "USER_IS_BLOCKED_AUTOMATICALLY"
	// CodeItemRequestedByAnotherPatron: the item's first request is
	// another patron's.
	CodeItemRequestedByAnotherPatron = "ITEM_REQUESTED_BY_ANOTHER_PATRON"
	// CodeInsufficientOverridePermissions: an override asked for without
	// its permission (FOLIO's code).
	CodeInsufficientOverridePermissions = "INSUFFICIENT_OVERRIDE_PERMISSIONS"

	// Signing in (FOLIO's login): a wrong name or password (one answer for
	// both), a sign-in locked by failures, one refused unchecked for a
	// moment while as many others from its place are being checked as
	// the limit lets be, a refresh token that no longer works, and a login
	// switched off (tokens come from an identity provider).
	CodeLoginFailed = "LOGIN_FAILED"
	CodeLoginLocked = "LOGIN_LOCKED"
	CodeLoginBusy   = "LOGIN_BUSY"
	// CodePinInvalid is a patron's PIN that does not match (or a patron
	// without one); CodePinLocked a patron's PIN locked after too many
	// wrong ones; CodePinBusy one refused unchecked for a moment while as
	// many others of the patron's are being checked as the limit lets be;
	// CodePinRequired a self-check machine's request without the patron's
	// PIN where the tenant requires it.
	CodePinInvalid  = "PIN_INVALID"
	CodePinLocked   = "PIN_LOCKED"
	CodePinBusy     = "PIN_BUSY"
	CodePinRequired = "PIN_REQUIRED"
	// CodeTooManyRequests is a caller over its rate (patron summaries per
	// kiosk account and address).
	CodeTooManyRequests       = "TOO_MANY_REQUESTS"
	CodeSessionEnded          = "SESSION_ENDED"
	CodeLoginOff              = "LOGIN_OFF"
	CodeItemBarcodeNotFound   = "ITEM_BARCODE_NOT_FOUND"
	CodeItemAlreadyCheckedOut = "ITEM_ALREADY_CHECKED_OUT"
	CodeItemHasOpenLoan       = "ITEM_HAS_OPEN_LOAN"
	CodeItemStatusRefused     = "ITEM_STATUS_REFUSED"
	CodeItemNotLoanable       = "ITEM_NOT_LOANABLE"
	CodeItemLimit             = "ITEM_LIMIT"
	CodeItemLimitMaterialType = "ITEM_LIMIT_MATERIAL_TYPE"
	CodeItemLimitLoanType     = "ITEM_LIMIT_LOAN_TYPE"
	CodeItemLimitBoth         = "ITEM_LIMIT_MATERIAL_TYPE_LOAN_TYPE"
	// With a patron group named by the rule too (FOLIO's codes).
	CodeItemLimitPatronGroupMaterialType = "ITEM_LIMIT_PATRON_GROUP_MATERIAL_TYPE"
	CodeItemLimitPatronGroupLoanType     = "ITEM_LIMIT_PATRON_GROUP_LOAN_TYPE"
	CodeItemLimitPatronGroupBoth         = "ITEM_LIMIT_PATRON_GROUP_MATERIAL_TYPE_LOAN_TYPE"
	CodeNoLoanPolicy                     = "NO_LOAN_POLICY"
	// An action on fees/fines refused, in mod-feesfines' words: the
	// fee/fine closed, the amount not a positive decimal of two places,
	// more than remains (or, for a refund, than was paid), a payment
	// method the fee/fine's owner does not take.
	CodeFeeFineClosed         = "FEE_FINE_CLOSED"
	CodeFeeFineAmountInvalid  = "FEE_FINE_AMOUNT_INVALID"
	CodeFeeFineAmountExceeded = "FEE_FINE_AMOUNT_EXCEEDED"
	CodePaymentMethodUnknown  = "PAYMENT_METHOD_UNKNOWN"
	// CodeNoFeeFineOwner refuses a declaration of loss that would charge
	// fees where no fee/fine owner serves the service point.
	CodeNoFeeFineOwner = "NO_FEE_FINE_OWNER"
	// CodeItemLimitReached is storage's refusal of a check-out's write at
	// the item limit it carried; circulation answers FOLIO's item-limit
	// refusal for it.
	CodeItemLimitReached = "ITEM_LIMIT_REACHED"
	CodeItemChanged      = "ITEM_CHANGED"
	CodeNoOpenLoan       = "NO_OPEN_LOAN"
	// CodeLoanChanged: a write of a loan (a check-in, a renewal, a claim
	// returned, a declaration of loss) found the loan changed by another
	// write since it read it (its _version moved on); nothing was written.
	CodeLoanChanged = "LOAN_CHANGED"
	// CodeIdempotencyKeyReused: a write sent with an Idempotency-Key (or,
	// at storage, a write id) that an earlier write landed with, for
	// another request (another body, or another kind of write); nothing
	// was written.
	CodeIdempotencyKeyReused = "IDEMPOTENCY_KEY_REUSED"

	// FOLIO's refusals of a request placed through circulation
	// (mod-circulation's CreateRequestService, its error types), beside
	// CodeUserInactive and CodeUserBlockedManually: the item's status does
	// not allow the request's type, the request policy does not, the
	// requester has an open request for the item already, or has it on
	// loan, or a hold shelf request names no pickup service point (or one
	// that is not one), or one its request policy does not allow for its
	// type (allowedServicePoints).
	CodeRequestingDisallowed                = "REQUESTING_DISALLOWED"
	CodeRequestingDisallowedByPolicy        = "REQUESTING_DISALLOWED_BY_POLICY"
	CodeItemAlreadyRequested                = "ITEM_ALREADY_REQUESTED_BY_SAME_USER"
	CodeItemAlreadyLoaned                   = "ITEM_ALREADY_LOANED_TO_SAME_USER"
	CodeInvalidPickupServicePoint           = "INVALID_PICKUP_SERVICE_POINT"
	CodeRequestPickupServicePointNotAllowed = "REQUEST_PICKUP_SERVICE_POINT_IS_NOT_ALLOWED"

	// FOLIO's renewal refusals (mod-circulation's RenewalValidator and
	// friends), in the order it checks them.
	CodeUserNotFound                     = "USER_NOT_FOUND"
	CodeItemNotFound                     = "ITEM_NOT_FOUND"
	CodeItemCheckedOutToDifferentUser    = "ITEM_CHECKED_OUT_TO_DIFFERENT_USER"
	CodeUserIsInactiveOrExpired          = "USER_IS_INACTIVE_OR_EXPIRED"
	CodeRenewalBlockedByRecall           = "RENEWAL_BLOCKED_BY_RECALL"
	CodeItemDeclaredLostNotRenewable     = "ITEM_DECLARED_LOST_NOT_RENEWABLE"
	CodeItemAgedToLostNotRenewable       = "ITEM_AGED_TO_LOST_NOT_RENEWABLE"
	CodeLoanRenewalLimitReached          = "LOAN_RENEWAL_LIMIT_REACHED"
	CodeLoanNotRenewable                 = "LOAN_NOT_RENEWABLE"
	CodeRenewalBlockedByHoldRequest      = "RENEWAL_BLOCKED_BY_HOLD_REQUEST"
	CodeItemClaimedReturnedNotRenewable  = "ITEM_CLAIMED_RETURNED_NOT_RENEWABLE"
	CodeRenewalWouldNotChangeDueDate     = "RENEWAL_WOULD_NOT_CHANGE_DUE_DATE"
	CodeLoanPolicyRenewFromNotRecognized = "LOAN_POLICY_RENEW_FROM_NOT_RECOGNIZED"
	// A renewal's override refused, in FOLIO's codes: no comment; no due
	// date where the policy gives none, or gives one no later than the
	// loan's; nothing an override lifts stands in the renewal's way.
	CodeOverrideRenewalCommentRequired                     = "OVERRIDE_RENEWAL_COMMENT_REQUIRED"
	CodeOverrideRenewalDueDateRequired                     = "OVERRIDE_RENEWAL_DUE_DATE_REQUIRED"
	CodeOverrideRenewalDueDateRequiredWhenDueDateUnchanged = "OVERRIDE_RENEWAL_DUE_DATE_REQUIRED_WHEN_DUE_DATE_UNCHANGED"
	CodeOverrideRenewalNotAllowedForCurrentLoan            = "OVERRIDE_RENEWAL_NOT_ALLOWED_FOR_CURRENT_LOAN"

	// What storage refuses whoever calls, so that a loan, an item's status
	// and the item limit change only as a check-out or a check-in changes
	// them. CodeLockRequired: the tenant's lock feature is on and a loan
	// was to be opened without the borrower's live lock.
	// CodeCheckOutRequired: a loan is opened only by a check-out's write.
	// CodeCheckInRequired: a loan is closed (or removed while open) only by
	// a check-in's write. CodeItemStatusByCirculation: an item's status
	// moves to Checked out only with a check-out's loan, and away from it
	// only while the item has no open loan.
	CodeLockRequired            = "LOCK_REQUIRED"
	CodeCheckOutRequired        = "CHECK_OUT_REQUIRED"
	CodeCheckInRequired         = "CHECK_IN_REQUIRED"
	CodeItemStatusByCirculation = "ITEM_STATUS_BY_CIRCULATION_ONLY"

	// Failures the client may retry.
	CodeDatabaseUnavailable = "DATABASE_UNAVAILABLE"
	CodeStorageUnavailable  = "STORAGE_UNAVAILABLE"
	CodeTimeout             = "REQUEST_TIMEOUT"
	// CodeShuttingDown: storage is shutting down; an acquisition waiting
	// for a held lock is answered at once with it.
	CodeShuttingDown = "SHUTTING_DOWN"
	// CodeCheckOutsBusy: too many check-out writes wait on the storage
	// instance (for the patron, or in all), or a check-out in one call
	// could not read its records; nothing was written.
	CodeCheckOutsBusy = "CHECK_OUTS_BUSY"

	// Who may do what (the envelope of a 403 names the permission).
	CodeForbidden = "FORBIDDEN"

	// A bug.
	CodeInternal = "INTERNAL_ERROR"
)

// A page of a list: limit's default and its most, on every list of both
// services (offset and limit, as FOLIO's lists take them).
const (
	DefaultPageSize = 10
	MaxPageSize     = 1000
)

// MaxRecordsLimit is the most limit storage's record collections and
// circulation's loans and requests take (FOLIO's pageable maximum,
// 2^31 - 1), as mod-circulation's fetchers and mod-patron send it when
// they mean "every match": their pages are bounded by MAX_PAGE_BYTES
// instead, read a record at a time.
const MaxRecordsLimit = 1<<31 - 1

// MostPageBytes is the most MAX_PAGE_BYTES may be set to: circulation
// reads a page of storage's records whole, within MaxStorageAnswerBytes,
// twice it, which leaves room for the envelope and the JSON's escapes.
const MostPageBytes = 16 << 20

// MaxStorageAnswerBytes bounds an answer of storage's circulation reads.
const MaxStorageAnswerBytes = 2 * MostPageBytes

// MaxViolations is the most schema violations one 422 answer lists; the
// answer's last entry says how many more there were.
const MaxViolations = 50

// FOLIO's patron block conditions (mod-patron-blocks' ids) that this
// project computes from its own records.
const (
	ConditionItemsChargedOut = "3d7c52dc-c732-4223-8bf8-e5917801386f"
	ConditionLostItems       = "72b67965-5b73-4840-bc0b-be8f3f6e047e"
	ConditionOverdueItems    = "584fbd4f-6a34-4730-a6ca-73a6a6a9d845"
)

// MaxRequestBytes bounds a request record as sent (FOLIO's clients send
// members no field of request.json describes, which are kept as sent):
// no request can make its item's queue too large to list
// (CodePageTooLarge): 128 of them fit a page of MAX_PAGE_BYTES' default,
// 4 MiB.
const MaxRequestBytes = 32 << 10

// MaxKioskLocation bounds the location code a kiosk is named by.
const MaxKioskLocation = 64

// KioskLocation is a kiosk's location code as it is kept: cut to
// MaxKioskLocation bytes, never inside a character.
func KioskLocation(code string) string { return text.Cut(code, MaxKioskLocation) }

// MachineName is how a self-check machine is named to people (the
// console's machines, a lock's holder, a history line, the CSV): the
// location code it gave at login, with the account it signed in as; the
// account alone when it gave none.
func MachineName(location, account string) string {
	switch {
	case location == "":
		return account
	case account == "":
		return location
	}
	return location + " (" + account + ")"
}

// Kiosk is a self-check machine connected to a SIP2 door: one entry of
// the door's /admin/kiosks, and of circulation's GET /circulation/kiosks
// (circulation-kiosks.json), which lists only its caller's tenant's and
// leaves Tenant out.
type Kiosk struct {
	Tenant   string `json:"tenant,omitempty"`
	Address  string `json:"address"`
	Username string `json:"username,omitempty"`
	// Location is the location code the machine gave at its login
	// (SIP2's CP), at most MaxKioskLocation bytes: the machine's name.
	Location string `json:"location,omitempty"`
	// Name is the machine as people are told of it (MachineName), given by
	// circulation's list.
	Name     string `json:"name,omitempty"`
	LoggedIn bool   `json:"loggedIn"`
	// Since is when it connected, LastMessage when it last sent one.
	Since       time.Time `json:"since"`
	LastMessage time.Time `json:"lastMessage"`
	Messages    int64     `json:"messages"`
	// Listener is the door's address the kiosk connected to.
	Listener string `json:"listener"`
	// Refusals counts the messages the library said no to (a refusal, a
	// PIN needed or locked, a rate reached), LastCode is the last
	// message's command code ("11"), and Ended when the session ended
	// (nil while connected).
	Refusals int64      `json:"refusals"`
	LastCode string     `json:"lastCode,omitempty"`
	Ended    *time.Time `json:"ended,omitempty"`
}
