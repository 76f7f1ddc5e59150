package circulation_test

import (
	"testing"
	"time"

	"github.com/checkoutlock/circulation"
	"github.com/checkoutlock/schemas"
	"github.com/checkoutlock/schemas/errs"
)

// TestAnOfflineCheckOutIsTakenOnceWithinItsBound: a check-out a kiosk made
// offline more than schemas.MaxOfflineBehind ago is refused
// (OFFLINE_TRANSACTION_TOO_OLD) and writes nothing; one within it is
// recorded dated when it happened, breaking nothing here; sent again, the
// same account, patron, item and date answer the same loan, and no
// second one is written.
func TestAnOfflineCheckOutIsTakenOnceWithinItsBound(t *testing.T) {
	t.Parallel()
	s := newStack(t, lockOn)
	now := s.clock.Now()
	req := request()
	req.Offline = &circulation.Offline{TransactionDate: now.Add(-schemas.MaxOfflineBehind - time.Minute), RecordedBy: "kiosk-1", Tenant: "diku"}
	if _, err := s.svc.CheckOut(okapi(t), req); !errs.IsCode(err, schemas.CodeOfflineTooOld) {
		t.Fatalf("an offline check-out past the bound: %v, want %s", err, schemas.CodeOfflineTooOld)
	}
	if loans := s.store.Loans(); len(loans) != 0 {
		t.Fatalf("loans after a refused offline check-out: %+v", loans)
	}
	at := now.Add(-schemas.MaxOfflineBehind + time.Hour).UTC().Truncate(time.Millisecond)
	req.Offline.TransactionDate = at
	first, err := s.svc.CheckOut(okapi(t), req)
	if err != nil {
		t.Fatalf("an offline check-out within the bound: %v", err)
	}
	if !first.Loan.LoanDate.Equal(at) || first.Loan.Offline == nil || len(first.Loan.Offline.BrokenRules) != 0 ||
		first.Loan.ID != circulation.OfflineLoanID("diku", "kiosk-1", userBarcode, itemBarcode, at) {
		t.Errorf("the loan recorded: %+v, want lent %s, breaking nothing, its offline id", first.Loan, at)
	}
	again, err := s.svc.CheckOut(okapi(t), req)
	if err != nil || again.Loan.ID != first.Loan.ID {
		t.Errorf("sent again: %v, loan %s, want the same loan %s", err, again.Loan.ID, first.Loan.ID)
	}
	if loans := s.store.Loans(); len(loans) != 1 {
		t.Errorf("loans after the same offline check-out twice: %d, want 1", len(loans))
	}
}
