package circulation

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/checkoutlock/schemas"
)

// Patron is what check-out needs of a user record.
type Patron struct {
	ID            string
	Barcode       string
	Active        bool
	PatronGroupID string
	FirstName     string
	LastName      string
	// ExpirationDate is when the patron's registration ends; zero when it
	// does not. An expired patron is inactive, as FOLIO reads it.
	ExpirationDate time.Time
}

// ActiveAt says whether the patron may borrow at now: active and not
// expired (FOLIO's User.isActive).
func (p Patron) ActiveAt(now time.Time) bool {
	return p.Active && (p.ExpirationDate.IsZero() || !p.ExpirationDate.Before(now))
}

// PersonalName is the patron's name as FOLIO writes it in refusals:
// "Last, First".
func (p Patron) PersonalName() string {
	switch {
	case p.LastName == "":
		return p.FirstName
	case p.FirstName == "":
		return p.LastName
	}
	return p.LastName + ", " + p.FirstName
}

// Item is what check-out needs of an item record. Doc is the record as
// storage holds it, so that an update writes back every field, including
// those this service does not know.
type Item struct {
	ID             string
	Barcode        string
	Title          string
	Status         string
	MaterialTypeID string
	// MaterialTypeName is the material type's name, when the read gave it.
	MaterialTypeName    string
	PermanentLoanTypeID string
	TemporaryLoanTypeID string
	Version             int
	// InTransitDestinationServicePointID is the service point an item In
	// transit is going to ("" otherwise).
	InTransitDestinationServicePointID string
	Doc                                json.RawMessage
}

// LoanTypeID is the loan type that applies: the temporary one when set.
func (i Item) LoanTypeID() string {
	if i.TemporaryLoanTypeID != "" {
		return i.TemporaryLoanTypeID
	}
	return i.PermanentLoanTypeID
}

// CheckedOut is the item as storage holds it after a check-out of it: one
// version on, status Checked out.
func (i Item) CheckedOut() Item {
	i.Status = schemas.ItemCheckedOut
	i.Version++
	return i
}

// CheckedIn is the item as a check-in's write leaves it: Available, one
// version on.
func (i Item) CheckedIn() Item {
	i.Status = schemas.ItemAvailable
	i.Version++
	return i
}

// LoanPolicy is what check-out needs of a loan policy.
type LoanPolicy struct {
	ID       string
	Name     string
	Loanable bool
	// Period is the loan period; zero for a policy that is not loanable.
	Period Period
	// ItemLimit is the most items the patron may have on loan under the
	// rule that chose the policy; 0 means no limit.
	ItemLimit int
	// Renewable says a loan under the policy may be renewed, as Renewals
	// says; HoldsRenewable that a hold at the head of the item's queue
	// does not stop a renewal (FOLIO's
	// requestManagement.holds.renewItemsWithRequest).
	Renewable      bool
	Renewals       Renewals
	HoldsRenewable bool
}

// Renewals is how a policy renews loans (FOLIO's renewalsPolicy): how many
// times (NumberAllowed, unless Unlimited), from when (From: RenewFromDueDate
// or RenewFromNow; anything else is a policy FOLIO cannot renew by), for
// Period (the policy's different period when it names one, else the loan
// period).
type Renewals struct {
	Unlimited     bool
	NumberAllowed int
	// HoldPeriod, when set, is the period a renewal lends for while a
	// hold waits first in the item's queue (FOLIO's
	// requestManagement.holds.alternateRenewalLoanPeriod).
	HoldPeriod Period
	From       string
	Period     Period
}

// What a renewal's due date counts from (FOLIO's renewFromId).
const (
	RenewFromDueDate = "CURRENT_DUE_DATE"
	RenewFromNow     = "SYSTEM_DATE"
)

// Period is a loan period: Duration Intervals.
type Period struct {
	Duration int
	Interval string // Minutes, Hours, Days, Weeks, Months
}

// DueDate is the due date of a loan made at loanDate (schemas.DueDate).
func (p Period) DueDate(loanDate time.Time) time.Time {
	return schemas.DueDate(loanDate, p.Duration, p.Interval)
}

// PolicyMatch is the loan policy circulation rules chose and which criteria
// the chosen rule named: the item limit counts loans of the same material
// type and/or loan type when the rule named them.
type PolicyMatch struct {
	LoanPolicyID      string
	PatronGroupMatch  bool
	MaterialTypeMatch bool
	LoanTypeMatch     bool
}

// CheckOutReads is everything validating a check-out reads. A patron or
// item that does not exist is nil.
type CheckOutReads struct {
	Patron   *Patron
	Item     *Item
	OpenLoan bool
	// OpenLoanOf is the item's open loan, when it has one: whose it is and
	// when it is due (a check-out retried after its answer was lost finds
	// its own loan).
	OpenLoanOf *OpenLoan
	// ManualBlocks are the patron's manual blocks in force for borrowing
	// or renewals.
	ManualBlocks []ManualBlock
	// OpenRecall says the item has an open recall: its loan is not
	// renewed.
	OpenRecall bool
	// AutomatedBlocks are the patron's automated blocks.
	AutomatedBlocks []AutomatedBlock
	// QueueHead is the first request of the item's queue; nil when the
	// item has no open request.
	QueueHead *QueuedRequest
	// RulesSet says whether the circulation rules are set; when they are,
	// and the patron and item exist, Match and Policy are the loan policy
	// they choose and OpenLoans the patron's open loans counted as Match's
	// item limit counts them.
	RulesSet  bool
	Match     PolicyMatch
	Policy    LoanPolicy
	OpenLoans int
	// Limit is the item limit storage enforces on the check-out's write
	// (it decides it from the rules, and counts again in the write); nil
	// when none is.
	Limit *ItemLimit
	// LockSetting is the tenant's check-out lock settings entry, read with
	// the rest; nil when storage did not carry it (a storage that predates
	// doing so).
	LockSetting *SettingRead
}

// lentToPatron is whether the item read is on loan to the patron read:
// a renewal of anything else is refused (judgeRenewal).
func (r CheckOutReads) lentToPatron() bool {
	return r.Item != nil && r.OpenLoanOf != nil && r.Patron != nil && r.Patron.ID == r.OpenLoanOf.UserID
}

// ManualBlock is a manual patron block in force: why, for staff (Desc),
// what the patron is told, and whether it blocks borrowing and renewals.
type ManualBlock struct {
	Desc, PatronMessage string
	Borrowing, Renewals bool
}

// blocking is the blocks among blocks that stop what stops says.
func blocking(blocks []ManualBlock, stops func(ManualBlock) bool) []ManualBlock {
	var out []ManualBlock
	for _, b := range blocks {
		if stops(b) {
			out = append(out, b)
		}
	}
	return out
}

// stopsBorrowing and stopsRenewals say what a manual block stops.
func stopsBorrowing(b ManualBlock) bool { return b.Borrowing }
func stopsRenewals(b ManualBlock) bool  { return b.Renewals }

// AutomatedBlock is a condition of automated patron blocks the patron is
// over, as mod-patron-blocks reports it.
type AutomatedBlock struct {
	ConditionID                   string
	BlockBorrowing, BlockRenewals bool
	Message                       string
}

// QueuedRequest is a request in an item's queue: which, whose, and of
// what type (Hold, Recall, Page).
type QueuedRequest struct {
	ID, RequesterID, RequestType string
}

// SettingRead is a settings entry as read: the entry, and whether there
// is one.
type SettingRead struct {
	Entry SettingEntry
	Found bool
}

// ItemLimit is an item limit and what it counts: the patron's open loans,
// of the material type and of the loan type when set.
type ItemLimit struct {
	Limit                      int
	MaterialTypeID, LoanTypeID string
	// Reached says the patron is at it, as storage's write compares:
	// circulation refuses at it without comparing.
	Reached bool
}

// Loan is a loan record.
type Loan struct {
	ID         string
	UserID     string
	ItemID     string
	LoanDate   time.Time
	DueDate    time.Time
	ReturnDate time.Time
	Action     string
	// ActionComment is an override's comment.
	ActionComment          string
	Status                 string // Open or Closed
	LoanPolicyID           string
	CheckoutServicePointID string
	CheckinServicePointID  string
	// PatronGroupIDAtCheckout is the borrower's patron group when the
	// loan was made (FOLIO's patronGroupIdAtCheckout).
	PatronGroupIDAtCheckout string
	// RenewalCount is how many times the loan was renewed.
	RenewalCount int
	// ClaimedReturnedDate and DeclaredLostDate are when the patron said
	// they returned the item and when it was declared lost (zero when
	// neither happened).
	ClaimedReturnedDate, DeclaredLostDate time.Time
	// ActionServicePointID is where a loan action is taken (not stored
	// with the loan): a declaration of loss bills the lost item's fees
	// to the fee/fine owner serving it.
	ActionServicePointID string
	// Version is the loan's _version as read: each write of the loan is
	// made at it (storage refuses it with LOAN_CHANGED when another write
	// came first).
	Version int
	// Offline says the loan was made at a self-check machine while the
	// library system could not answer, and recorded later; nil for a loan
	// made live.
	Offline *OfflineRecord
	// Doc is the record as storage holds it, for updates.
	Doc json.RawMessage
}

// of says the loan is of the item itemID to the patron userID: the records
// a call read are the loan's.
func (l Loan) of(itemID, userID string) bool {
	return l.ItemID == itemID && l.UserID == userID
}

// OfflineRecord is what a loan made offline says of itself (loan.json's
// offline): when it was made, the account that sent it and the machine
// that lent it, and the rules it
// broke, as storage judged them in the write.
type OfflineRecord struct {
	TransactionDate time.Time
	RecordedBy      string
	Kiosk           string
	BrokenRules     []string
}

// OpenLoan is an item's open loan as a check-out's or a renewal's
// validation sees it.
type OpenLoan struct {
	ID, UserID   string
	DueDate      time.Time
	RenewalCount int
	// Doc is the loan as storage holds it, for a renewal's write.
	Doc json.RawMessage
}

// LockHolder says which check-out holds, or asks for, a patron's lock.
type LockHolder struct {
	Instance       string `json:"instance,omitempty"`
	RequestID      string `json:"requestId,omitempty"`
	ItemBarcode    string `json:"itemBarcode,omitempty"`
	ServicePointID string `json:"servicePointId,omitempty"`
}

// LockAcquisition is what a check-out's write asks of the lock it acquires
// itself: the lock's lifetime, the longest wait for it, and its holder.
type LockAcquisition struct {
	TTL, Wait time.Duration
	Holder    LockHolder
}

// ErrNotSent marks a call to storage that failed before its request left
// (the connection could not be made): nothing of it ran, and it may be
// sent again.
var ErrNotSent = errors.New("the request was not sent")

// Lock is a patron's check-out lock as storage granted it.
type Lock struct {
	ID        string
	UserID    string
	ExpiresAt time.Time
}

// LoanFilter selects loans to list.
type LoanFilter struct {
	UserID, ItemID, Status string
	// Query is a CQL query (with its sortBy) as FOLIO's clients send it,
	// translated by storage's one CQL translator; "" for none.
	Query         string
	Offset, Limit int
}

// RequestFilter selects requests: by item, requester and status, a page.
type RequestFilter struct {
	ItemID, RequesterID, Status string
	// Query is a CQL query, as LoanFilter's.
	Query         string
	Offset, Limit int
}

// QueuePlace is a request's new position in its item's queue (FOLIO's
// reorder of a queue).
type QueuePlace struct {
	ID          string `json:"id"`
	NewPosition int    `json:"newPosition"`
}

// CheckedOut is what a check-out's write stored.
type CheckedOut struct {
	Loan Loan
	Item Item
	// LockReleased says that storage released the check-out's lock in the
	// write's own transaction.
	LockReleased bool
	// LockWaited is how long a write that acquired its lock waited for it,
	// as storage measured it (schemas.HeaderLockAcquired).
	LockWaited time.Duration
	// Replayed says the write's id had landed before
	// (schemas.HeaderWriteReplayed): Loan is that write's loan as it was
	// answered then, and Item the item the call read, which may not be
	// its item.
	Replayed bool
}

// CheckedOutInOne is a check-out asked of storage in one call, as
// written: its loan, and the patron and the item as storage read them
// for it (the item checked out). A check-out whose write had landed
// before is answered with its loan alone: Patron is then nil and Item the
// zero Item.
type CheckedOutInOne struct {
	CheckedOut
	Patron *Patron
}

// Storage is what this service needs of circulation-storage. Every call acts
// for the tenant named in ctx (see WithOkapi). Errors are *Error values:
// KindNotFound for absent records, KindUnavailable for a storage that cannot
// be reached (worth retrying), KindInternal for a storage that failed,
// KindConflict for a stale item version, KindInvalid for a value storage
// refuses; an error with CodeLockHeld when another check-out holds the
// patron's lock.
type Storage interface {
	// LockFeatureDefault is the check-out lock feature for a tenant that
	// stored no setting, as storage last said it with an answer
	// (schemas.HeaderLockDefault): storage's environment is its one home.
	// Before storage has said, false, FOLIO's default; a write storage
	// would refuse without the lock is refused LOCK_REQUIRED, and goes
	// again under it.
	LockFeatureDefault() bool
	// ReadForCheckOut reads, in one call, everything validating a check-out
	// of itemBarcode to userBarcode needs.
	ReadForCheckOut(ctx context.Context, itemBarcode, userBarcode string) (CheckOutReads, error)
	// ReadForCheckOutByID is ReadForCheckOut's read of the item itemID and
	// the patron userID, named by their ids: either may have no barcode.
	ReadForCheckOutByID(ctx context.Context, itemID, userID string) (CheckOutReads, error)
	ItemByBarcode(ctx context.Context, barcode string) (Item, error)
	// LoanPolicy is the loan policy with id.
	LoanPolicy(ctx context.Context, id string) (LoanPolicy, error)
	// PatronSummary reads, in one call, what a self-check machine shows the
	// patron with barcode.
	PatronSummary(ctx context.Context, barcode string) (PatronRecords, error)
	// PatronIDByBarcode is the id of the patron with barcode; found is
	// false when there is none.
	PatronIDByBarcode(ctx context.Context, barcode string) (id string, found bool, err error)
	// VerifyPin checks a patron's PIN: nil when it matches, CodePinInvalid
	// when not, CodePinLocked after too many wrong ones.
	VerifyPin(ctx context.Context, patronID, pin string) error
	OpenLoanForItem(ctx context.Context, itemID string) (Loan, bool, error)

	// AcquireLock takes the patron's lock under the given lock id; asking
	// again with the id of a live lock one holds renews it. With a positive
	// wait, storage waits up to that long for a held lock to be released;
	// an error with CodeLockHeld then says, in its parameter waitedMs, that
	// storage did wait (one without it was answered at once).
	// The holder says which check-out asks, for operators and for the
	// check-outs that find the lock held.
	AcquireLock(ctx context.Context, userID, lockID string, ttl, wait time.Duration, holder LockHolder) (Lock, error)
	ReleaseLock(ctx context.Context, lockID string) error

	// UpdateItem writes item (its Doc with Status changed) under optimistic
	// locking on item.Version and returns the item as now stored.
	UpdateItem(ctx context.Context, item Item) (Item, error)
	// CheckOutItem is a check-out's writes, in one storage transaction: the
	// item (read at item.Version) becomes "Checked out" and the loan is
	// created, or neither happens (KindConflict for a changed item,
	// CodeItemHasOpenLoan for a second loan). Storage holds the write to
	// the item limit its rules set, counted in that transaction
	// (CodeItemLimitReached), and, with the tenant's lock feature on, to
	// the lock (CodeLockRequired without one). With a lockID, the writes
	// happen only while that lock is live, the borrower's and this
	// service's (CodeLockLost), and the lock is asked to be released with
	// them, in the same transaction. It returns the loan and the item as
	// stored, and whether storage said it released the lock (a storage
	// that does not release it with the write says nothing, and the caller
	// releases it).
	//
	// lifted names the blocks an override lifts from the write (the item
	// limit, the patron's blocks); the lock and its fence still hold it.
	//
	// With acquire set (and lockID), storage acquires the lock first, as
	// AcquireLock would, waiting up to acquire.Wait: a lock it cannot get
	// is a LOCK_HELD error and nothing is written, and a write that
	// writes nothing releases the lock it took (schemas.HeaderAcquireLock).
	CheckOutItem(ctx context.Context, loan Loan, item Item, lockID string, acquire *LockAcquisition, lifted Overrides) (CheckedOut, error)
	// CheckOutInOne is a check-out of req asked of storage in one call:
	// storage reads what validation reads, builds the loan loanID (due
	// by the policy's period, schemas.DueDate) and writes it as
	// CheckOutItem does, acquiring the lock lockID on acquire's terms.
	// What it cannot build a loan from it refuses in FOLIO's words, as
	// the write refuses a broken rule; a storage without the call answers
	// 404 or 405.
	CheckOutInOne(ctx context.Context, req CheckOutRequest, loanID, lockID string, acquire LockAcquisition) (CheckedOutInOne, error)
	// CheckInItem is a check-in's writes, in one storage transaction: the
	// item (read at item.Version) takes the status its request queue gives
	// it at the loan's check-in service point (Available when no request
	// waits, Awaiting pickup for a hold waiting there, In transit for one
	// waiting elsewhere) and the loan (its Doc with the fields check-in
	// changes, at loan.Version) is written, or neither happens
	// (KindConflict for a changed item or loan). It returns the loan and
	// the item as stored.
	CheckInItem(ctx context.Context, loan Loan, item Item) (Loan, Returned, error)
	// ReturnItem is the check-in of an item without an open loan, at
	// servicePointID: the item (read at item.Version) takes the status its
	// queue gives it, as CheckInItem's does. It returns the item as stored.
	//
	// A write sent again with the id of a check-in that landed closing a
	// loan answers that loan too (nil otherwise).
	ReturnItem(ctx context.Context, item Item, servicePointID string) (Returned, *Loan, error)
	// ActOnLoan is the writes of a loan action that keeps the loan open
	// (claimedReturned, declaredLost), in one storage transaction: the
	// item (read at item.Version) takes the action's status and the loan
	// (its Doc with the action's fields) is written, or neither happens
	// (KindConflict for a changed item).
	ActOnLoan(ctx context.Context, loan Loan, item Item) error
	// ReplaceLoan writes loan's Doc with its Action and ActionComment, at
	// the loan's version read (a note added to it: its item as it is).
	ReplaceLoan(ctx context.Context, loan Loan) error
	// ActOnFeeFines is an action on fees/fines (FeeFineAction), judged
	// and written by storage in one transaction with the write's id: its
	// answer (fee-fine-action-response.json), that write's own when the
	// id landed before.
	ActOnFeeFines(ctx context.Context, a FeeFineAction) (json.RawMessage, error)
	// CheckFeeFines is whether an action would be allowed now, judged by
	// the write's own rule (fee-fine-check-response.json).
	CheckFeeFines(ctx context.Context, a FeeFineAction) (json.RawMessage, error)
	// RenewLoan is a renewal's write: the loan (its Doc with the renewal's
	// fields: due date, policy, action, count) replaces the stored one
	// only while storage holds it open at the version read and renewal count count and its item
	// has no open recall (CodeRenewalBlockedByRecall), else nothing is
	// written (CodeLoanChanged when another write of the loan came first). It
	// returns the loan as stored. An override's renewal (lifted) is
	// written past the refusals it lifts, its action and comment the
	// loan's.
	RenewLoan(ctx context.Context, loan Loan, count int, lifted RenewalOverrides) (Loan, error)
	ItemByID(ctx context.Context, id string) (Item, error)
	LoanByID(ctx context.Context, id string) (Loan, error)
	Loan(ctx context.Context, id string) (json.RawMessage, error)
	Loans(ctx context.Context, f LoanFilter) (json.RawMessage, error)
	// AnonymizeLoans has storage anonymize those of the loans ids that are
	// closed (at most a page of them), judged under each loan's row lock.
	AnonymizeLoans(ctx context.Context, ids []string) (LoansAnonymized, error)

	// Landed is the write with id, as storage keeps it by its id, found
	// false when none with it has landed.
	Landed(ctx context.Context, id string) (Landed, bool, error)

	// PlaceRequest writes a new request, judged by FOLIO's request rules
	// in storage's write (schemas.HeaderRequestRules), with the writes its
	// type calls for; it returns the request as stored.
	PlaceRequest(ctx context.Context, id string, doc json.RawMessage) (json.RawMessage, error)
	// ReplaceRequest replaces request id, judged as PlaceRequest's when it
	// moves to another item or changes its type.
	ReplaceRequest(ctx context.Context, id string, doc json.RawMessage) error
	// ReorderQueue gives the open requests of item the positions order
	// names, judged and written by storage under the queue's lock.
	ReorderQueue(ctx context.Context, item string, order []QueuePlace) error
	Request(ctx context.Context, id string) (json.RawMessage, error)
	Requests(ctx context.Context, f RequestFilter) (json.RawMessage, error)
	// AllowedServicePoints reads, for each request type requesterID may
	// place for itemID, the pickup service points a request of it may
	// name (schemas/allowed-service-points-response.json): the set storage
	// judges a request placed by, asked of the item's status unless
	// ignoreItemStatus. A requester or an item that does not exist is a
	// KindInvalid error in FOLIO's words.
	AllowedServicePoints(ctx context.Context, requesterID, itemID string, ignoreItemStatus bool) (json.RawMessage, error)

	// Setting reads one settings entry; found is false when there is none.
	Setting(ctx context.Context, scope, key string) (entry SettingEntry, found bool, err error)
	// PutSetting writes one settings entry's value: it creates the entry
	// when prev is nil (CodeAlreadyExists if someone else did first), or
	// replaces prev at the version it was read (KindConflict if it has
	// changed since).
	PutSetting(ctx context.Context, scope, key string, value json.RawMessage, prev *SettingEntry) error
}

// SettingEntry is a settings entry as storage keeps it.
type SettingEntry struct {
	ID    string
	Value json.RawMessage
	// Version is the entry's _version; 0 when storage keeps none.
	Version int
	// UpdatedBy and UpdatedDate are the entry's last change, from its
	// metadata, when storage keeps it.
	UpdatedBy, UpdatedDate string
}

// Okapi is the request-scoped FOLIO context passed on to storage.
type Okapi struct {
	Tenant    string
	RequestID string
	// Token is what this service's calls to storage carry: its own module
	// token (jwt mode) or the gateway's for this module, never the
	// caller's.
	Token string
	// UserID is X-Okapi-User-Id, the user the request acts for, if known.
	UserID string
	// ClientAddress is the address of the client the request came from,
	// as the connection and the trusted proxies say: storage counts a PIN
	// check's failures by it (and by the patron), as a sign-in's.
	ClientAddress string
	// Kiosk is the self-check machine the request is for, as the SIP2
	// door that passed it on names it (schemas.HeaderKiosk): storage
	// records it in the locks, loans and history lines the request
	// causes. KioskNamed says a door named a machine at all (Kiosk ""
	// for one that gave no location code): storage judges a check-out
	// said made offline by that machine's presence, else by every
	// machine of the account's.
	Kiosk      string
	KioskNamed bool
}

type okapiKey struct{}

// WithOkapi returns ctx carrying the request's tenant and ids.
func WithOkapi(ctx context.Context, o Okapi) context.Context {
	return context.WithValue(ctx, okapiKey{}, o)
}

// OkapiFrom returns the Okapi context of ctx.
func OkapiFrom(ctx context.Context) Okapi {
	o, _ := ctx.Value(okapiKey{}).(Okapi)
	return o
}
