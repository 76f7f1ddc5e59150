package circulation_test

import (
	"fmt"
	"testing"

	"github.com/checkoutlock/circulation"
	"github.com/checkoutlock/circulation/storagefake"
	"github.com/checkoutlock/schemas"
	"github.com/checkoutlock/schemas/errs"
)

// TestPatronSummarySaysWhyNot: a patron at the item limit with a manual
// block is told both reasons, in the check-out's words and order, with the
// library's message for them; once the block and a loan go, they may
// borrow.
func TestPatronSummarySaysWhyNot(t *testing.T) {
	s := newStack(t, lockOn)
	for i := range itemLimit {
		id := fmt.Sprintf("aaaaaaaa-aaaa-4aaa-8aaa-%012d", i)
		s.fake.AddItem(storagefake.Item{ID: id, Barcode: fmt.Sprintf("lent-%d", i), Title: "Lent", Status: circulation.StatusCheckedOut,
			MaterialTypeID: materialType, PermanentLoanTypeID: loanType})
		s.fake.AddLoan(storagefake.Loan{ID: fmt.Sprintf("bbbbbbbb-bbbb-4bbb-8bbb-%012d", i), UserID: patronID, ItemID: id, Status: "Open",
			Action: "checkedout", LoanDate: "2025-02-01T10:00:00.000Z", DueDate: fmt.Sprintf("2025-03-%02dT10:00:00.000Z", 20+i)})
	}
	s.fake.AddManualBlock(storagefake.ManualBlock{UserID: patronID, Desc: "Card reported stolen", PatronMessage: "Please see the desk", Borrowing: true})
	sum, err := s.svc.PatronSummary(okapi(t), userBarcode, circulation.SummaryAccess{Details: true})
	if err != nil {
		t.Fatal(err)
	}
	var codes []string
	for _, r := range sum.Reasons {
		codes = append(codes, r.Code)
	}
	if sum.CanBorrow || len(codes) != 2 || codes[0] != schemas.CodeUserBlockedManually || codes[1] != schemas.CodeItemLimit ||
		sum.OpenLoanCount != itemLimit || sum.ItemLimit != itemLimit || len(sum.OpenLoans) != itemLimit {
		t.Fatalf("summary %+v, reasons %v: want the block then the item limit, %d loans of %d", sum.PatronRecords, codes, itemLimit, itemLimit)
	}
	if sum.Reasons[1].Message != "Patron has reached maximum limit of 3 items" {
		t.Errorf("item limit reason %q", sum.Reasons[1].Message)
	}
	if got := sum.Reasons[0].Parameters; len(got) < 2 || got[1].Key != "patronMessage" || got[1].Value != "Please see the desk" {
		t.Errorf("block reason's parameters %v, want the patron message", got)
	}
	if sum.OpenLoans[0].ItemBarcode != "lent-0" {
		t.Errorf("loans listed %+v, want the one due first first", sum.OpenLoans)
	}
	if !sum.Full || sum.Patron.ID != patronID || sum.Patron.LastName == "" {
		t.Errorf("the details' view: full %v, patron %+v; want the patron named", sum.Full, sum.Patron)
	}
	// Without the details permission or the patron's PIN: the verdict and
	// the counts, the same reasons, and neither the patron's name nor
	// their loans.
	verdict, err := s.svc.PatronSummary(okapi(t), userBarcode, circulation.SummaryAccess{})
	if err != nil {
		t.Fatal(err)
	}
	if verdict.Full || verdict.Patron.ID != "" || verdict.Patron.FirstName != "" || verdict.Patron.LastName != "" ||
		verdict.Patron.Barcode != userBarcode || len(verdict.OpenLoans) != 0 || verdict.CanBorrow ||
		len(verdict.Reasons) != 2 || verdict.OpenLoanCount != itemLimit || verdict.ItemLimit != itemLimit {
		t.Errorf("the verdict's view: %+v, patron %+v, loans %v", verdict, verdict.Patron, verdict.OpenLoans)
	}
	if _, err := s.svc.PatronSummary(okapi(t), "no-such-patron", circulation.SummaryAccess{Details: true}); !isNotFound(err) {
		t.Errorf("unknown patron: %v, want not found", err)
	}
}

func isNotFound(err error) bool {
	e, ok := errs.As(err)
	return ok && e.Kind == errs.KindNotFound && e.Code == schemas.CodeUserBarcodeNotFound
}

// TestItemSummaryGivesTheDueDate: an item on loan has its loan's due date,
// an available one none.
func TestItemSummaryGivesTheDueDate(t *testing.T) {
	s := newStack(t, lockOn)
	sum, err := s.svc.ItemSummary(okapi(t), itemBarcode)
	if err != nil || sum.Item.Status != circulation.StatusAvailable || !sum.DueDate.IsZero() {
		t.Fatalf("available item: %+v, %v", sum, err)
	}
	res, err := s.checkOut(t)
	if err != nil {
		t.Fatal(err)
	}
	sum, err = s.svc.ItemSummary(okapi(t), itemBarcode)
	if err != nil || sum.Item.Status != circulation.StatusCheckedOut || !sum.DueDate.Equal(res.Loan.DueDate) {
		t.Fatalf("item on loan: %+v, %v; want due %s", sum, err, res.Loan.DueDate)
	}
}
