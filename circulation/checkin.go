package circulation

import (
	"context"
	"time"
)

// CheckInRequest is a check-in by barcode.
type CheckInRequest struct {
	ItemBarcode    string
	ServicePointID string
	// CheckInDate defaults to now.
	CheckInDate time.Time
}

// CheckInResult is the item checked in and the loan it closed, if any.
type CheckInResult struct {
	Item Item
	Loan *Loan
}

// CheckIn makes an item available and closes its open loan. The item is
// updated first and put back if the loan cannot be closed, so an item is
// never left checked out without an open loan.
func (s *Service) CheckIn(ctx context.Context, req CheckInRequest) (CheckInResult, error) {
	if req.CheckInDate.IsZero() {
		req.CheckInDate = s.now().UTC().Truncate(time.Millisecond)
	}
	item, err := s.storage.ItemByBarcode(ctx, req.ItemBarcode)
	if IsKind(err, KindNotFound) {
		return CheckInResult{}, &Refusal{Errors: []*Error{Errorf(KindInvalid, CodeItemBarcodeNotFound,
			"No item with barcode %s could be found", req.ItemBarcode).With("itemBarcode", req.ItemBarcode)}}
	}
	if err != nil {
		return CheckInResult{}, err
	}
	loan, found, err := s.storage.OpenLoanForItem(ctx, item.ID)
	if err != nil {
		return CheckInResult{}, err
	}
	// From here on the request cannot cancel the work: the item and the
	// loan must end up agreeing.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), WriteTimeout)
	defer cancel()
	before := item.Status
	if item.Status != StatusAvailable {
		changed := item
		changed.Status = StatusAvailable
		if item, err = s.updateItem(ctx, changed); err != nil {
			return CheckInResult{}, err
		}
	}
	if !found {
		return CheckInResult{Item: item}, nil
	}
	loan.Status = "Closed"
	loan.Action = "checkedin"
	loan.ReturnDate = req.CheckInDate
	loan.CheckinServicePointID = req.ServicePointID
	if loan, err = s.storage.UpdateLoan(ctx, loan); err != nil {
		if before != item.Status {
			s.compensate(ctx, item, before)
		}
		return CheckInResult{}, err
	}
	return CheckInResult{Item: item, Loan: &loan}, nil
}
