package circulation_test

import (
	"testing"

	"github.com/checkoutlock/schemas"
)

// TestItemSummaryGivesTheDueDate: an item on loan has its loan's due date,
// an available one none.
func TestItemSummaryGivesTheDueDate(t *testing.T) {
	s := newStack(t, lockOn)
	sum, err := s.svc.ItemSummary(okapi(t), itemBarcode)
	if err != nil || sum.Item.Status != schemas.ItemAvailable || !sum.DueDate.IsZero() {
		t.Fatalf("available item: %+v, %v", sum, err)
	}
	res, err := s.checkOut(t)
	if err != nil {
		t.Fatal(err)
	}
	sum, err = s.svc.ItemSummary(okapi(t), itemBarcode)
	if err != nil || sum.Item.Status != schemas.ItemCheckedOut || !sum.DueDate.Equal(res.Loan.DueDate) {
		t.Fatalf("item on loan: %+v, %v; want due %s", sum, err, res.Loan.DueDate)
	}
}
