package schemas

// The item and request statuses the return loop writes (a check-in, the
// hold shelf's expiry), named once: TestStatusesAreTheSchemasWords holds
// each to the enum of item.json or request.json, FOLIO's words.
const (
	ItemAvailable        = "Available"
	ItemAwaitingPickup   = "Awaiting pickup"
	ItemAwaitingDelivery = "Awaiting delivery"
	ItemInTransit        = "In transit"

	RequestAwaitingPickup   = "Open - Awaiting pickup"
	RequestAwaitingDelivery = "Open - Awaiting delivery"
	RequestInTransit        = "Open - In transit"
	RequestPickupExpired    = "Closed - Pickup expired"
)
