package schemas

import "slices"

// Every item, loan and request status, named once: product code says a
// status only by its constant (TestNoStatusLiteralsOutsideSchemas), and
// TestStatusesAreTheSchemasWords holds the lists below to the enums of
// item.json, loan.json and request.json, FOLIO's words.
const (
	ItemAgedToLost              = "Aged to lost"
	ItemAvailable               = "Available"
	ItemAwaitingDelivery        = "Awaiting delivery"
	ItemAwaitingPickup          = "Awaiting pickup"
	ItemCheckedOut              = "Checked out"
	ItemClaimedReturned         = "Claimed returned"
	ItemDeclaredLost            = "Declared lost"
	ItemInProcess               = "In process"
	ItemInProcessNonRequestable = "In process (non-requestable)"
	ItemInTransit               = "In transit"
	ItemIntellectualItem        = "Intellectual item"
	ItemLongMissing             = "Long missing"
	ItemLostAndPaid             = "Lost and paid"
	ItemMissing                 = "Missing"
	ItemOnOrder                 = "On order"
	ItemOrderClosed             = "Order closed"
	ItemPaged                   = "Paged"
	ItemRestricted              = "Restricted"
	ItemUnavailable             = "Unavailable"
	ItemUnknown                 = "Unknown"
	ItemWithdrawn               = "Withdrawn"

	LoanOpen   = "Open"
	LoanClosed = "Closed"

	RequestNotYetFilled     = "Open - Not yet filled"
	RequestAwaitingPickup   = "Open - Awaiting pickup"
	RequestInTransit        = "Open - In transit"
	RequestAwaitingDelivery = "Open - Awaiting delivery"
	RequestFilled           = "Closed - Filled"
	RequestCancelled        = "Closed - Cancelled"
	RequestUnfilled         = "Closed - Unfilled"
	RequestPickupExpired    = "Closed - Pickup expired"

	RequestTypeHold   = "Hold"
	RequestTypePage   = "Page"
	RequestTypeRecall = "Recall"
)

// ItemStatuses, LoanStatuses and RequestStatuses are every status of each,
// in their schemas' order.
var (
	ItemStatuses = []string{ItemAgedToLost, ItemAvailable, ItemAwaitingDelivery, ItemAwaitingPickup, ItemCheckedOut,
		ItemClaimedReturned, ItemDeclaredLost, ItemInProcess, ItemInProcessNonRequestable, ItemInTransit, ItemIntellectualItem,
		ItemLongMissing, ItemLostAndPaid, ItemMissing, ItemOnOrder, ItemOrderClosed, ItemPaged, ItemRestricted, ItemUnavailable,
		ItemUnknown, ItemWithdrawn}
	LoanStatuses    = []string{LoanOpen, LoanClosed}
	RequestStatuses = []string{RequestNotYetFilled, RequestAwaitingPickup, RequestInTransit, RequestAwaitingDelivery,
		RequestFilled, RequestCancelled, RequestUnfilled, RequestPickupExpired}
)

// OpenRequestStatuses are a request's statuses while it is open: in its
// item's queue, with a position.
var OpenRequestStatuses = []string{RequestNotYetFilled, RequestAwaitingPickup, RequestInTransit, RequestAwaitingDelivery}

// RequestIsOpen says whether a request's status is open
// (OpenRequestStatuses): storage's SQL says it with requests.Open.
func RequestIsOpen(status string) bool { return slices.Contains(OpenRequestStatuses, status) }

// ItemStatusesLost are an item's statuses while it is lost: counted
// against a patron group's maximum lost items (automated blocks).
var ItemStatusesLost = []string{ItemDeclaredLost, ItemAgedToLost}

// ItemStatusesNoLongerDue are the statuses of an open loan's item under
// which its due date is no longer awaited: declared lost, aged to lost,
// claimed returned. No due date notice is sent for such a loan, before,
// at or after its due date (mod-circulation's scheduled notices find
// them irrelevant).
var ItemStatusesNoLongerDue = []string{ItemDeclaredLost, ItemAgedToLost, ItemClaimedReturned}

// RequestTypesByItemStatus is which request types an item's status allows
// (FOLIO's RequestTypeItemStatusWhiteList): a page only of an item on the
// shelf, a hold or a recall of one that is out, on its way or being
// processed, a hold only of one missing, nothing of one lost, claimed,
// withdrawn or not requestable. A status not listed allows none.
var RequestTypesByItemStatus = map[string][]string{
	ItemAvailable:        {RequestTypePage},
	ItemRestricted:       {RequestTypeHold, RequestTypePage, RequestTypeRecall},
	ItemCheckedOut:       {RequestTypeHold, RequestTypeRecall},
	ItemAwaitingPickup:   {RequestTypeHold, RequestTypeRecall},
	ItemAwaitingDelivery: {RequestTypeHold, RequestTypeRecall},
	ItemInTransit:        {RequestTypeHold, RequestTypeRecall},
	ItemPaged:            {RequestTypeHold, RequestTypeRecall},
	ItemOnOrder:          {RequestTypeHold, RequestTypeRecall},
	ItemInProcess:        {RequestTypeHold, RequestTypeRecall},
	ItemMissing:          {RequestTypeHold},
}

// ItemStatusesNotCheckedOut are the item statuses FOLIO does not check
// out, besides Checked out (mod-circulation's ItemStatusValidator): every
// other status is, Long missing, Restricted, Unavailable and Unknown among
// them. Storage's check-out write refuses them whoever calls
// (ITEM_STATUS_REFUSED), and circulation's validation names them first.
var ItemStatusesNotCheckedOut = []string{ItemDeclaredLost, ItemClaimedReturned, ItemIntellectualItem, ItemAgedToLost}
