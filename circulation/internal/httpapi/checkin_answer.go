package httpapi

import (
	"encoding/json"

	"github.com/checkoutlock/circulation"
	"github.com/checkoutlock/schemas"
)

// checkInAnswerJSON is schemas/check-in-response.json: FOLIO's answer to
// a check-in.
type checkInAnswerJSON struct {
	Item             checkedInItemJSON `json:"item"`
	Loan             json.RawMessage   `json:"loan,omitempty"` // as storage now holds it
	StaffSlipContext staffSlipJSON     `json:"staffSlipContext"`
}

// checkedInItemJSON is the item summary with where an item in transit
// goes, by name (FOLIO's inTransitDestinationServicePoint).
type checkedInItemJSON struct {
	itemSummaryJSON
	InTransitDestinationServicePoint *circulation.ServicePointRef `json:"inTransitDestinationServicePoint,omitempty"`
}

// staffSlipJSON is FOLIO's staffSlipContext of a check-in: what the
// transit or hold slip the desk prints says.
type staffSlipJSON struct {
	Item      slipItemJSON       `json:"item"`
	Request   *slipRequestJSON   `json:"request,omitempty"`
	Requester *slipRequesterJSON `json:"requester,omitempty"`
}

type slipItemJSON struct {
	Title            string `json:"title"`
	Barcode          string `json:"barcode,omitempty"`
	Status           string `json:"status"`
	FromServicePoint string `json:"fromServicePoint,omitempty"`
	ToServicePoint   string `json:"toServicePoint,omitempty"`
}

type slipRequestJSON struct {
	RequestID               string `json:"requestID"`
	ServicePointPickup      string `json:"servicePointPickup,omitempty"`
	HoldShelfExpirationDate string `json:"holdShelfExpirationDate,omitempty"`
	RequestExpirationDate   string `json:"requestExpirationDate,omitempty"`
	PatronComments          string `json:"patronComments,omitempty"`
}

type slipRequesterJSON struct {
	FirstName          string `json:"firstName,omitempty"`
	LastName           string `json:"lastName,omitempty"`
	MiddleName         string `json:"middleName,omitempty"`
	PreferredFirstName string `json:"preferredFirstName,omitempty"`
	Barcode            string `json:"barcode,omitempty"`
	PatronGroup        string `json:"patronGroup,omitempty"`
}

// checkInAnswer is FOLIO's answer to the check-in res.
func checkInAnswer(res circulation.CheckInResult) checkInAnswerJSON {
	r := res.Returned
	out := checkInAnswerJSON{Item: checkedInItemJSON{itemSummaryJSON: itemSummary(r.Item)}}
	if res.Loan != nil {
		out.Loan = res.Loan.Doc
	}
	out.StaffSlipContext.Item = slipItemJSON{Title: r.Item.Title, Barcode: r.Item.Barcode, Status: r.Item.Status,
		FromServicePoint: r.CheckedInAt.Name}
	if r.Item.Status == schemas.ItemInTransit && r.Pickup.ID != "" && r.Pickup.ID == r.Item.InTransitDestinationServicePointID {
		pickup := r.Pickup
		out.Item.InTransitDestinationServicePoint = &pickup
		out.StaffSlipContext.Item.ToServicePoint = pickup.Name
	}
	if r.Request == nil {
		return out
	}
	var request struct {
		ID                      string `json:"id"`
		HoldShelfExpirationDate string `json:"holdShelfExpirationDate"`
		RequestExpirationDate   string `json:"requestExpirationDate"`
		PatronComments          string `json:"patronComments"`
	}
	if json.Unmarshal(r.Request, &request) == nil {
		out.StaffSlipContext.Request = &slipRequestJSON{RequestID: request.ID, ServicePointPickup: r.Pickup.Name,
			HoldShelfExpirationDate: request.HoldShelfExpirationDate, RequestExpirationDate: request.RequestExpirationDate,
			PatronComments: request.PatronComments}
	}
	var requester slipRequesterJSON
	if r.Requester != nil && json.Unmarshal(r.Requester, &requester) == nil {
		out.StaffSlipContext.Requester = &requester
	}
	return out
}
