package schemas

// Patron notices: FOLIO's names for what a notice policy's notice is sent
// on (NoticeEventType), when (timing), and what became of a scheduled
// notice.
const (
	NoticeCheckOut            = "Check out"
	NoticeCheckIn             = "Check in"
	NoticeRenewed             = "Renewed"
	NoticeDueDate             = "Due date"
	NoticeItemRecalled        = "Item recalled"
	NoticeManualDueDateChange = "Manual due date change" // a librarian's change of a loan's due date
	NoticePagingRequest       = "Paging request"
	NoticeHoldRequest         = "Hold request"
	NoticeRecallRequest       = "Recall request"
	NoticeAvailable           = "Available"
	NoticeRequestCancellation = "Request cancellation"
	NoticeRequestExpiration   = "Request expiration"
	NoticeHoldExpiration      = "Hold expiration"
	// NoticeFeeFineCharged is a fee/fine charged: its charge notice
	// (the type's chargeNoticeId, else the owner's defaultChargeNoticeId).
	NoticeFeeFineCharged = "Fee/fine charged"

	NoticeUponAt = "Upon At"
	NoticeBefore = "Before"
	NoticeAfter  = "After"

	NoticeOneTime   = "One time"
	NoticeRecurring = "Recurring"

	NoticeEmail = "Email"

	NoticeScheduled = "Scheduled"
	NoticeSent      = "Sent"
	NoticeNoEmail   = "No email"
	NoticeFailed    = "Failed"
	NoticeObsolete  = "Obsolete"
)

// NoticeStatuses are what becomes of a scheduled notice: due and not yet
// sent (Scheduled); sent (Sent, a recurring one scheduled again); not
// sent because its patron has no email address (No email), or because
// every try failed (Failed: the dead letter an operator sees); or no
// longer due, its loan returned or its due date moved before it was sent
// (Obsolete).
var NoticeStatuses = []string{NoticeScheduled, NoticeSent, NoticeNoEmail, NoticeFailed, NoticeObsolete}

// LoanNoticeEvents and RequestNoticeEvents are the events a notice
// policy's loan and request notices are sent on here.
var (
	LoanNoticeEvents    = []string{NoticeCheckOut, NoticeCheckIn, NoticeRenewed, NoticeDueDate, NoticeItemRecalled, NoticeManualDueDateChange}
	RequestNoticeEvents = []string{NoticePagingRequest, NoticeHoldRequest, NoticeRecallRequest, NoticeAvailable,
		NoticeRequestCancellation, NoticeRequestExpiration, NoticeHoldExpiration}
)
