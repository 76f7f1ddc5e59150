package schemas

// The item and request statuses the return loop writes (a check-in, the
// hold shelf's expiry, a request's expiry), named once:
// TestStatusesAreTheSchemasWords holds each to the enum of item.json or
// request.json, FOLIO's words.
const (
	ItemAvailable        = "Available"
	ItemCheckedOut       = "Checked out"
	ItemAwaitingPickup   = "Awaiting pickup"
	ItemAwaitingDelivery = "Awaiting delivery"
	ItemInTransit        = "In transit"

	RequestAwaitingPickup   = "Open - Awaiting pickup"
	RequestAwaitingDelivery = "Open - Awaiting delivery"
	RequestInTransit        = "Open - In transit"
	RequestPickupExpired    = "Closed - Pickup expired"
	RequestUnfilled         = "Closed - Unfilled"
)

// The request statuses and types a request placed through circulation
// starts with or is judged by.
const (
	ItemPaged           = "Paged"
	ItemDeclaredLost    = "Declared lost"
	ItemAgedToLost      = "Aged to lost"
	ItemClaimedReturned = "Claimed returned"

	RequestNotYetFilled = "Open - Not yet filled"
	RequestCancelled    = "Closed - Cancelled"

	RequestTypeHold   = "Hold"
	RequestTypePage   = "Page"
	RequestTypeRecall = "Recall"
)

// RequestTypesByItemStatus is which request types an item's status allows
// (FOLIO's RequestTypeItemStatusWhiteList): a page only of an item on the
// shelf, a hold or a recall of one that is out, on its way or being
// processed, a hold only of one missing, nothing of one lost, claimed,
// withdrawn or not requestable. A status not listed allows none.
var RequestTypesByItemStatus = map[string][]string{
	"Available":         {RequestTypePage},
	"Restricted":        {RequestTypeHold, RequestTypePage, RequestTypeRecall},
	"Checked out":       {RequestTypeHold, RequestTypeRecall},
	"Awaiting pickup":   {RequestTypeHold, RequestTypeRecall},
	"Awaiting delivery": {RequestTypeHold, RequestTypeRecall},
	"In transit":        {RequestTypeHold, RequestTypeRecall},
	"Paged":             {RequestTypeHold, RequestTypeRecall},
	"On order":          {RequestTypeHold, RequestTypeRecall},
	"In process":        {RequestTypeHold, RequestTypeRecall},
	"Missing":           {RequestTypeHold},
}

// ItemStatusesNotCheckedOut are the item statuses FOLIO does not check
// out, besides Checked out (mod-circulation's ItemStatusValidator): every
// other status is, Long missing, Restricted, Unavailable and Unknown among
// them. Storage's check-out write refuses them whoever calls
// (ITEM_STATUS_REFUSED), and circulation's validation names them first.
var ItemStatusesNotCheckedOut = []string{ItemDeclaredLost, ItemClaimedReturned, "Intellectual item", ItemAgedToLost}
