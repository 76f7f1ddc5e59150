package storage

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/google/uuid"

	"github.com/checkoutlock/schemas/errs"

	"github.com/checkoutlock/circulation-storage/cql"
	"github.com/checkoutlock/schemas"
)

// Resource describes one kind of FOLIO-shaped record that circulation-storage
// keeps: where it is served, how its collection is named on the wire and
// which query parameters filter it. Its JSON Schemas, the record's
// contract, are named once, by the permission table's routes
// (schemas.Routes); records travel as JSON documents and are validated
// against them before they reach a service.
type Resource struct {
	// Name is the record's name in messages ("Item not found").
	Name string
	// Path is the collection's URL path.
	Path string
	// Plural is the collection's key in list answers, as FOLIO names it.
	Plural string
	// Filters are the query parameters a list accepts.
	Filters []Filter
	// Versioned records use optimistic locking on "_version": a create sets
	// it to 1; an update must carry the stored value and increments it.
	// One without it, or at another, is refused (409 VERSION_CONFLICT,
	// FOLIO's optimistic-locking error) and writes nothing.
	Versioned bool
	// VersionOptional lets an update of a versioned record leave "_version"
	// out, replacing whatever is stored (FOLIO clients of mod-settings do);
	// one that names a version is still checked against it.
	VersionOptional bool
	// Fixed records are a set the service keeps (FOLIO's patron block
	// conditions): listed, read and changed, never created or deleted
	// through the API.
	Fixed bool
	// Kept are the ids of records the service keeps among those a client
	// writes (FOLIO's automatic fee/fine types): listed and read, never
	// created, changed or deleted through the API; such a write is
	// refused (422), in KeptWhy's words, and changes nothing.
	Kept    []string
	KeptWhy string
	// ReadOnly records are written only by the service's own writes
	// (FOLIO's fee/fine actions, by a charge and the actions on an
	// account): listed and read, never created, changed or deleted
	// through the API.
	ReadOnly bool
	// MaxBytes, when not 0, bounds a record as sent: a larger one is
	// refused (schemas.CodeRecordTooLarge).
	MaxBytes int
}

// FilterKind says what values a filter accepts.
type FilterKind int

// The kinds of filter.
const (
	FilterText FilterKind = iota + 1
	FilterUUID
)

// Filter is one query parameter of a list, matched exactly.
type Filter struct {
	Param string
	Kind  FilterKind
	// Values, when not empty, are the only values accepted.
	Values []string
}

// The records circulation-storage keeps, at FOLIO's paths.
var (
	PatronGroups = Resource{Name: "Patron group", Path: "/groups", Plural: "usergroups",
		Filters: []Filter{{Param: "group", Kind: FilterText}}}
	MaterialTypes = Resource{Name: "Material type", Path: "/material-types", Plural: "mtypes",
		Filters: []Filter{{Param: "name", Kind: FilterText}}}
	LoanTypes = Resource{Name: "Loan type", Path: "/loan-types", Plural: "loantypes",
		Filters: []Filter{{Param: "name", Kind: FilterText}}}
	Patrons = Resource{Name: "User", Path: "/users", Plural: "users",
		Filters: []Filter{{Param: "barcode", Kind: FilterText}, {Param: "patronGroup", Kind: FilterUUID}}}
	Items = Resource{Name: "Item", Path: "/item-storage/items", Plural: "items",
		Filters:   []Filter{{Param: "barcode", Kind: FilterText}, {Param: "status", Kind: FilterText, Values: schemas.ItemStatuses}},
		Versioned: true}
	LoanPolicies = Resource{Name: "Loan policy", Path: "/loan-policy-storage/loan-policies", Plural: "loanPolicies",
		Filters: []Filter{{Param: "name", Kind: FilterText}}}
	RequestPolicies = Resource{Name: "Request policy", Path: "/request-policy-storage/request-policies", Plural: "requestPolicies",
		Filters: []Filter{{Param: "name", Kind: FilterText}}}
	Loans = Resource{Name: "Loan", Path: "/loan-storage/loans", Plural: "loans",
		Filters: []Filter{{Param: "userId", Kind: FilterUUID}, {Param: "itemId", Kind: FilterUUID},
			{Param: "status", Kind: FilterText, Values: schemas.LoanStatuses}},
		// Every write of a loan (a check-in, a renewal, a loan action, a
		// replace) names the version it read.
		Versioned: true}
	ManualBlocks = Resource{Name: "Manual block", Path: "/manualblocks", Plural: "manualblocks",
		Filters: []Filter{{Param: "userId", Kind: FilterUUID}}}
	PatronBlockConditions = Resource{Name: "Patron block condition", Path: "/patron-block-conditions", Plural: "patronBlockConditions", Fixed: true}
	PatronBlockLimits     = Resource{Name: "Patron block limit", Path: "/patron-block-limits", Plural: "patronBlockLimits",
		Filters: []Filter{{Param: "patronGroupId", Kind: FilterUUID}, {Param: "conditionId", Kind: FilterUUID}}}
	Requests = Resource{Name: "Request", Path: "/request-storage/requests", Plural: "requests",
		Filters: []Filter{{Param: "itemId", Kind: FilterUUID}, {Param: "requesterId", Kind: FilterUUID},
			{Param: "status", Kind: FilterText, Values: schemas.RequestStatuses}},
		Versioned: true, MaxBytes: schemas.MaxRequestBytes}
	Accounts = Resource{Name: "Account", Path: "/sign-in-accounts", Plural: "accounts",
		Filters: []Filter{{Param: "username", Kind: FilterText}}}
	// Fees and fines, at mod-feesfines' paths.
	FeeFineOwners = Resource{Name: "Fee/fine owner", Path: "/owners", Plural: "owners",
		Filters: []Filter{{Param: "owner", Kind: FilterText}}}
	FeeFineTypes = Resource{Name: "Fee/fine type", Path: "/feefines", Plural: "feefines",
		Filters: []Filter{{Param: "ownerId", Kind: FilterUUID}, {Param: "feeFineType", Kind: FilterText}},
		Kept:    schemas.AutomaticFeeFineTypes, KeptWhy: schemas.AutomaticFeeFineTypeKept}
	PaymentMethods = Resource{Name: "Payment method", Path: "/payments", Plural: "payments",
		Filters: []Filter{{Param: "ownerId", Kind: FilterUUID}, {Param: "nameMethod", Kind: FilterText}}}
	OverdueFinePolicies = Resource{Name: "Overdue fine policy", Path: "/overdue-fines-policies", Plural: "overdueFinePolicies",
		Filters: []Filter{{Param: "name", Kind: FilterText}}}
	LostItemFeePolicies = Resource{Name: "Lost item fee policy", Path: "/lost-item-fees-policies", Plural: "lostItemFeePolicies",
		Filters: []Filter{{Param: "name", Kind: FilterText}}}
	// FeeFineAccounts are a patron's fees/fines (FOLIO's accounts). What
	// an account holds (its amount, remaining, status and payment status,
	// whose and what for) changes only by the actions on it: a
	// replacement changes the rest, at the version read when it names one
	// (FOLIO's clients name none).
	FeeFineAccounts = Resource{Name: "Fee/fine", Path: "/accounts", Plural: "accounts",
		Filters: []Filter{{Param: "userId", Kind: FilterUUID}, {Param: "loanId", Kind: FilterUUID},
			{Param: "status", Kind: FilterText, Values: []string{schemas.FeeFineOpen, schemas.FeeFineClosed}}},
		Versioned: true, VersionOptional: true}
	FeeFineActions = Resource{Name: "Fee/fine action", Path: "/feefineactions", Plural: "feefineactions",
		Filters:  []Filter{{Param: "accountId", Kind: FilterUUID}, {Param: "userId", Kind: FilterUUID}},
		ReadOnly: true}
	// Calendars are a service point's opening hours (mod-calendar's):
	// the check-out's, the renewal's and the hold shelf's dates move off
	// its closed days and hours.
	Calendars = Resource{Name: "Calendar", Path: "/calendar/calendars", Plural: "calendars",
		Filters: []Filter{{Param: "name", Kind: FilterText}}}
	// Patron notices: the policies the circulation rules choose (FOLIO's
	// n), the templates they name (mod-template-engine's), and the
	// notices scheduled from them, which only the notice sender writes.
	PatronNoticePolicies = Resource{Name: "Patron notice policy", Path: "/patron-notice-policy-storage/patron-notice-policies",
		Plural: "patronNoticePolicies", Filters: []Filter{{Param: "name", Kind: FilterText}}}
	NoticeTemplates = Resource{Name: "Template", Path: "/templates", Plural: "templates",
		Filters: []Filter{{Param: "name", Kind: FilterText}}}
	ScheduledNotices = Resource{Name: "Scheduled notice", Path: "/scheduled-notice-storage/scheduled-notices", Plural: "scheduledNotices",
		Filters: []Filter{{Param: "loanId", Kind: FilterUUID}, {Param: "requestId", Kind: FilterUUID}, {Param: "feeFineId", Kind: FilterUUID},
			{Param: "recipientUserId", Kind: FilterUUID}, {Param: "status", Kind: FilterText, Values: schemas.NoticeStatuses}},
		ReadOnly: true}
	ServicePoints = Resource{Name: "Service point", Path: "/service-points", Plural: "servicepoints",
		Filters: []Filter{{Param: "name", Kind: FilterText}}}
	Settings = Resource{Name: "Setting", Path: "/settings/entries", Plural: "items",
		Filters:   []Filter{{Param: "scope", Kind: FilterText}, {Param: "key", Kind: FilterText}},
		Versioned: true, VersionOptional: true}
)

// FOLIO's patron block conditions (mod-patron-blocks' ids): the ones
// this service computes from its own records.
const (
	ConditionItemsChargedOut = schemas.ConditionItemsChargedOut
	ConditionLostItems       = schemas.ConditionLostItems
	ConditionOverdueItems    = schemas.ConditionOverdueItems
)

// PatronBlockConditionSet is FOLIO's six conditions as a tenant is given
// them (mod-patron-blocks' populate-patron-block-conditions.sql): none
// blocks anything until a librarian says so. Recalls are not computed
// here: those conditions never block.
var PatronBlockConditionSet = []struct{ ID, Name, ValueType string }{
	{ConditionItemsChargedOut, "Maximum number of items charged out", "Integer"},
	{ConditionLostItems, "Maximum number of lost items", "Integer"},
	{ConditionOverdueItems, "Maximum number of overdue items", "Integer"},
	{"e5b45031-a202-4abb-917b-e1df9346fe2c", "Maximum number of overdue recalls", "Integer"},
	{"cf7a0d5f-a327-4ca1-aa9e-dc55ec006b8a", "Maximum outstanding fee/fine balance", "Double"},
	{"08530ac4-07f2-48e6-9dda-a97bc2bf7053", "Recall overdue by maximum number of days", "Integer"},
}

// Resources lists every record kind, in the order their references allow
// them to be created.
var Resources = []Resource{PatronGroups, MaterialTypes, LoanTypes, Patrons, Items, LoanPolicies, RequestPolicies, Loans, ManualBlocks,
	PatronBlockConditions, PatronBlockLimits, Requests, Accounts, ServicePoints, Settings,
	FeeFineOwners, FeeFineTypes, PaymentMethods, OverdueFinePolicies, LostItemFeePolicies, FeeFineAccounts, FeeFineActions, Calendars,
	PatronNoticePolicies, NoticeTemplates, ScheduledNotices}

// RecordFilter selects a page of records: Params maps filter parameters to
// the value to match.
type RecordFilter struct {
	Params map[string]string
	// Query, when set, is a CQL query the records must match too, and
	// their order (see package cql for what is supported), and QueryText
	// the query as the client wrote it.
	Query     *cql.Query
	QueryText string
	Offset    int
	Limit     int
	// Scopes, when not nil, are the only settings scopes listed (those the
	// caller may read).
	Scopes []string
	// MaxBytes, when positive, bounds the page's records in bytes: a page
	// that would be larger is an error (CodePageTooLarge) as soon as it
	// passes the bound, so it is never held in memory whole.
	MaxBytes int
}

// PageTooLarge is the error for a page of records over maxBytes.
func PageTooLarge(maxBytes, limit int) *errs.Error {
	return errs.Errorf(errs.KindInvalid, schemas.CodePageTooLarge,
		"The page of records (limit %d) would be larger than %d bytes; ask for fewer records (limit) and page with offset", limit, maxBytes).
		With("limit", fmt.Sprint(limit)).With("maxPageBytes", fmt.Sprint(maxBytes))
}

// RecordService keeps FOLIO-shaped records as JSON documents. Documents
// passed in have been validated against the resource's schema.
type RecordService interface {
	// Create stores a new record with the given id and returns it as stored.
	Create(ctx context.Context, t Tenant, r Resource, id string, doc json.RawMessage) (json.RawMessage, error)
	// Get returns a record, or a KindNotFound error.
	Get(ctx context.Context, t Tenant, r Resource, id string) (json.RawMessage, error)
	// List returns a page of records and the number of all matches.
	List(ctx context.Context, t Tenant, r Resource, f RecordFilter) ([]json.RawMessage, int, error)
	// Update replaces a record. For a versioned resource, version is the
	// version the client read; a mismatch is a KindConflict error.
	Update(ctx context.Context, t Tenant, r Resource, id string, version int, doc json.RawMessage) error
	// Delete removes a record; one that others refer to is a KindConflict error.
	Delete(ctx context.Context, t Tenant, r Resource, id string) error
}

// CheckOutWrite is a loan to create with the conditions of a check-out:
// the only way a loan becomes open, whoever calls. Storage itself decides
// what the write must respect: the lock when the tenant's lock feature is
// on (read from the tenant's setting in the write), and the item limit
// from the circulation rules (counted in the write); the caller names only
// the loan, the item version it read and, under the lock, the lock.
type CheckOutWrite struct {
	// LoanID and Loan are the loan to create (Loan validated by loan.json,
	// its status Open).
	LoanID string
	Loan   json.RawMessage
	// UserID is the borrower, as Loan names it (read once, with the
	// rest of the request's body).
	UserID string
	// LockID fences the write: it happens only while that lock is live,
	// the borrower's and held by the caller (else CodeLockLost). The lock
	// row is locked before anything is counted and stays locked until the
	// write commits, so a takeover, a release or another write under the
	// same lock waits for it, and the next one's count sees the loan. With
	// the tenant's lock feature on, a write without one is refused
	// (CodeLockRequired).
	LockID string
	// ItemVersion is the _version at which the check-out read the loan's
	// item: in the same transaction the item becomes "Checked out" at the
	// next version (else CodeVersionConflict). The item and its loan are
	// then never seen apart, whatever fails.
	ItemVersion int
	// ReleaseLock releases the lock LockID names in the same transaction,
	// when the loan is written; a write that writes nothing leaves it.
	ReleaseLock bool
	// OverrideItemLimit lifts the item limit from the write,
	// OverridePatronBlock the maximum items charged out and the manual
	// blocks of borrowing, OverrideItemNotLoanable a loan policy that does
	// not lend (overrides a librarian was allowed;
	// schemas.HeaderCheckOutOverride). The lock and its fence still hold
	// it.
	OverrideItemLimit, OverridePatronBlock, OverrideItemNotLoanable bool
	// Offline records a check-out a self-check machine made offline past
	// every rule a live one keeps but the lock, its fence and the item's
	// version (schemas.OfflineRules): it already happened. Its loan
	// carries offline; the rules it broke are recorded on it, in its
	// event and in the lock history. It needs PermissionCheckOutOverride.
	Offline bool
	// AcquireInWrite, with LockID and ReleaseLock, has the write take the
	// lock LockID names itself, inside its own transaction
	// (locksql.AcquireInWrite), and drop it before it commits, whatever it
	// wrote: the lock is never seen outside the write, and a patron's
	// writes queue for it in the database. A patron with a lock row
	// already (someone else's live lock, or a stale one) fails the write
	// with ErrLockTaken, nothing written: the caller takes the lock the
	// ordinary way. The lock's lifetime and holder are its terms.
	AcquireInWrite *LockTerms
}

// LockTerms are a lock's lifetime and holder, as acquired.
type LockTerms struct {
	TTL    time.Duration
	Holder Holder
}

// ErrLockTaken is a check-out's write that was to acquire its lock
// itself (CheckOutWrite.AcquireInWrite) and found the patron's lock row
// there already: nothing was written.
var ErrLockTaken = errors.New("the patron's lock row exists: acquire the lock first")

// ItemLimit is an item limit and the loans it counts: the patron's open
// loans, of the material type and of the loan type when set.
type ItemLimit struct {
	Limit                      int
	MaterialTypeID, LoanTypeID string
	// Reached says the patron's open loans it counts leave no room for
	// one more, compared as the check-out's write compares them
	// (lending's reached).
	Reached bool
}

// ItemLimitReached is storage's refusal of a write at the item limit.
func ItemLimitReached(limit, open int) *errs.Error {
	return errs.Errorf(errs.KindInvalid, schemas.CodeItemLimitReached, "Patron has reached maximum limit of %d items", limit).
		With("itemLimit", fmt.Sprint(limit)).With("openLoans", fmt.Sprint(open))
}

// ChargedOutLimitReached is storage's refusal of a write at the patron
// group's maximum items charged out (an automated patron block), with the
// condition's message, as FOLIO refuses it.
func ChargedOutLimitReached(message string, limit float64, open int) *errs.Error {
	return errs.Errorf(errs.KindInvalid, schemas.CodeUserBlockedAutomatically, "%s", message).
		With("patronBlockConditionId", ConditionItemsChargedOut).With("limit", strconv.FormatFloat(limit, 'f', -1, 64)).
		With("openLoans", fmt.Sprint(open))
}

// CheckInWrite is a loan to replace with the conditions of a check-in.
type CheckInWrite struct {
	// LoanID and Loan are the loan's new document (Loan validated by
	// loan.json).
	LoanID string
	Loan   json.RawMessage
	// ItemVersion is the _version at which the check-in read the loan's
	// item: in the same transaction the item takes the status its queue
	// gives it at the loan's checkinServicePointId ("Available" when no
	// request waits; see ItemCheckInWrite) at the next version (else
	// CodeVersionConflict), so a check-in whose answer is lost leaves the
	// item and its loan agreeing either way.
	ItemVersion int
	// LoanVersion is the loan's _version the check-in read: the loan is
	// closed only at it (else CodeLoanChanged), so a check-in and
	// another write of the loan at once never undo each other.
	LoanVersion int
}

// ItemCheckInWrite is the check-in of an item with no open loan (one in
// transit reaching its destination, one found again): the item, read at
// ItemVersion, checked in at ServicePointID. The item's status, and its
// queue's first request's, follow from its queue (a hold waiting here puts
// it on the hold shelf; one waiting elsewhere sends it in transit), in one
// transaction at the next version (else CodeVersionConflict).
type ItemCheckInWrite struct {
	ItemID, ServicePointID string
	ItemVersion            int
}

// CheckInWritten is what a check-in's write did (schemas/check-in-written.json):
// the item as stored, and, when its queue had a first request, that
// request as stored, its requester as a staff slip names them, and the
// request's pickup point and the point the item was checked in at (id,
// name and code).
type CheckInWritten struct {
	Item json.RawMessage `json:"item"`
	// Loan is the loan the check-in closed, as stored; absent for an
	// item's check-in without one.
	Loan                json.RawMessage `json:"loan,omitempty"`
	Request             json.RawMessage `json:"request,omitempty"`
	Requester           json.RawMessage `json:"requester,omitempty"`
	PickupServicePoint  json.RawMessage `json:"pickupServicePoint,omitempty"`
	CheckInServicePoint json.RawMessage `json:"checkInServicePoint,omitempty"`
	// ReturnedBeforeLoan is the item's open loan, left as it was, when the
	// check-in was dated before it was lent (schemas.ReturnedBeforeLent):
	// nothing was closed or changed, and the check-in was recorded for the
	// desk.
	ReturnedBeforeLoan json.RawMessage `json:"returnedBeforeLoan,omitempty"`
}

// CheckOutWritten is what a check-out's write did.
type CheckOutWritten struct {
	// Loan is the loan as stored.
	Loan json.RawMessage
	// LockReleased says that the write's transaction released its lock
	// (CheckOutWrite.ReleaseLock).
	LockReleased bool
}

// LoanWriter writes loans for check-outs and check-ins.
type LoanWriter interface {
	// CreateCheckOutLoan performs w in one transaction and returns the
	// stored loan, and whether the transaction released w's lock.
	CreateCheckOutLoan(ctx context.Context, t Tenant, w CheckOutWrite) (CheckOutWritten, error)
	// CheckInLoan performs w in one transaction and returns what it wrote.
	CheckInLoan(ctx context.Context, t Tenant, w CheckInWrite) (CheckInWritten, error)
	// CheckInItem performs w in one transaction and returns what it wrote.
	CheckInItem(ctx context.Context, t Tenant, w ItemCheckInWrite) (CheckInWritten, error)
	// ActOnLoan performs w in one transaction.
	ActOnLoan(ctx context.Context, t Tenant, w LoanActionWrite) error
	// RenewLoan performs w in one statement and returns the loan as
	// stored.
	RenewLoan(ctx context.Context, t Tenant, w RenewalWrite) (json.RawMessage, error)
}

// RenewalWrite is an open loan to replace with its renewal: written only
// while the loan is open, its borrower's and of its item, at the loan's
// version and the renewal count the renewal read (CodeLoanChanged when
// another write of the loan came first: two renewals of one loan at once
// renew it once, and a renewal never undoes a claim or a check-in), the new
// document's count one more and its action renewed, and while the item
// has no open recall (CodeRenewalBlockedByRecall); the renewal is
// announced (EventRenewed) in the same transaction.
type RenewalWrite struct {
	LoanID       string
	Loan         json.RawMessage
	LoanVersion  int
	RenewalCount int
	// OverrideRenewal and OverridePatronBlock are an override's
	// (schemas.HeaderRenewalOverride): the first lifts the loan policy's
	// refusals (it does not lend or renew, its renewal limit, a hold, a
	// recall), the second the patron's manual and automated blocks. The
	// loan's action is then renewedThroughOverride, its actionComment
	// the override's comment (not blank). Nothing lifts an inactive or
	// expired patron, the item's status, no circulation rules, or a due
	// date the renewal would not move.
	OverrideRenewal, OverridePatronBlock bool
}

// Overridden says w is an override's renewal.
func (w RenewalWrite) Overridden() bool { return w.OverrideRenewal || w.OverridePatronBlock }

// LoanActionWrite is an open loan to replace with one of the actions that
// keep it open and change its item's status (FOLIO's claim item returned
// and declare item lost; LoanActionItemStatus): in the same transaction
// the item takes the action's status at the version after ItemVersion
// (else CodeVersionConflict), and the loan, at the version LoanVersion the
// action read (else CodeLoanChanged), stays open, its borrower's and of
// its item. A change of due date (action schemas.LoanDueDateChanged)
// leaves the item as it is, at ItemVersion still (else
// CodeVersionConflict), and is refused when the item's status refuses it
// (schemas.LoanActionChangeDueDate).
type LoanActionWrite struct {
	LoanID      string
	Loan        json.RawMessage
	ItemVersion int
	LoanVersion int
	// ServicePointID is where the action is taken (a declaration of
	// loss's: the owner serving it is billed the lost item's fees).
	ServicePointID string
}

// LoanActionItemStatus is the item status each loan action that keeps its
// loan open gives the item: what the item limit then counts as FOLIO
// counts it (an item claimed returned is not counted; one declared lost
// is).
var LoanActionItemStatus = map[string]string{
	"claimedReturned": schemas.ItemClaimedReturned,
	"declaredLost":    schemas.ItemDeclaredLost,
}

// Caller is who a request acts for: the user, as X-Okapi-User-Id or the
// token names it, and the module calling on the user's behalf, when one
// does (circulation, with its module token). A lock is its acquirer's: only
// the same caller renews or releases it without the permission to release
// others' (see Holder).
type Caller struct {
	User   string
	Module string
	// Kiosk is the self-check machine the call is for, as circulation
	// names it (schemas.HeaderKiosk, believed of circulation's module
	// alone): a label of what the call causes, never an identity.
	// KioskNamed says circulation named a machine at all (Kiosk "" for
	// one that gave no location code).
	Kiosk      string
	KioskNamed bool
}

// Account is the caller's account when the call names it by id, "" when
// not: the account a machine signed in as, whose presence its door keeps
// and judges its check-outs made offline by.
func (c Caller) Account() string {
	if _, err := uuid.Parse(c.User); err != nil {
		return ""
	}
	return c.User
}

// NamesKiosk says the call names the machine it is for: its location
// code, or, for a machine that gave none, circulation's naming it empty.
func (c Caller) NamesKiosk() bool { return c.KioskNamed || c.Kiosk != "" }

type callerKey struct{}

// WithCaller returns ctx acting for caller: the user is recorded in the
// metadata of what the request writes, both in the lock it acquires.
func WithCaller(ctx context.Context, caller Caller) context.Context {
	return context.WithValue(ctx, callerKey{}, caller)
}

// CallerFrom is who ctx acts for, empty when nobody was named.
func CallerFrom(ctx context.Context) Caller {
	c, _ := ctx.Value(callerKey{}).(Caller)
	return c
}

type requestRulesKey struct{}

// WithRequestRules returns ctx whose writes of requests are judged by
// FOLIO's request rules (schemas.HeaderRequestRules).
func WithRequestRules(ctx context.Context) context.Context {
	return context.WithValue(ctx, requestRulesKey{}, true)
}

// RequestRulesFrom says whether ctx's writes of requests are judged by
// FOLIO's request rules.
func RequestRulesFrom(ctx context.Context) bool {
	on, _ := ctx.Value(requestRulesKey{}).(bool)
	return on
}

// UserFrom is the user ctx acts for, "" when none was named.
func UserFrom(ctx context.Context) string { return CallerFrom(ctx).User }

// QueuePlace is a request's new position in its item's queue (FOLIO's
// reorder of a queue: reorder-queue-request.json's reorderedQueue).
type QueuePlace struct {
	ID          string `json:"id"`
	NewPosition int    `json:"newPosition"`
}

// QueueReorderer gives an item's open requests new positions.
type QueueReorderer interface {
	// ReorderQueue gives the open requests of item the positions order
	// names, in one transaction under the queue's lock, judged there as
	// FOLIO's RequestQueueValidation judges it: the positions 1 to n,
	// each once; exactly the queue's requests; a page, and a request whose
	// fulfilment has begun, kept first. A queue with no open request is
	// KindNotFound.
	ReorderQueue(ctx context.Context, t Tenant, item string, order []QueuePlace) error
}
