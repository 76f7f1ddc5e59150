package circulation_test

import (
	"net/http"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/checkoutlock/circulation-storage/storagetest"
	"github.com/checkoutlock/schemas"
	"github.com/checkoutlock/schemas/errs"
)

// A check-out whose tenant's settings are known (cached), with the lock on
// and acquired at storage, is asked of storage in one call
// (POST /check-out-storage/check-outs). These tests know the settings
// first, then check out: each call the check-out makes is after before.

// knowSettings has the stack's service learn its tenant's settings, as a
// check-out before would have: it returns how many calls storage has had.
func knowSettings(t *testing.T, s *stack) (before int) {
	t.Helper()
	if _, err := s.settings.Effective(okapi(t)); err != nil {
		t.Fatalf("settings: %v", err)
	}
	if _, ok := s.settings.Cached(okapi(t)); !ok {
		t.Fatal("the settings read are not cached")
	}
	return len(s.store.Calls())
}

// TestACheckOutInOneWritesTheLoanCirculationWould: the loan storage builds
// in one call is the loan the two-call check-out builds and writes, field
// for field (its borrower, dates, due by the policy's period counted where
// it was lent, action, status, policy, service point, patron group), but
// for its id and its item; each item is checked out at its next version.
func TestACheckOutInOneWritesTheLoanCirculationWould(t *testing.T) {
	t.Parallel()
	s := newStack(t, lockOn)
	s.store.AddItem(storagetest.Item{ID: "33333333-3333-4333-8333-00000000000b", Barcode: "second", Title: "Second",
		Status: schemas.ItemAvailable, MaterialTypeID: materialType, PermanentLoanTypeID: loanType})
	// A month's loan, lent at 01:00 on 1 February two hours east of UTC
	// (31 January in UTC): due a month on where it was lent, 1 March
	// there, by either way.
	const monthly = "66666666-6666-4666-8666-00000000000c"
	s.store.AddLoanPolicy(storagetest.LoanPolicy{ID: monthly, Name: "A month", Loanable: true, Duration: 1, Interval: "Months", ItemLimit: itemLimit})
	s.store.SetRules(monthly)
	lent := time.Date(2026, 2, 1, 1, 0, 0, 0, time.FixedZone("", 2*60*60))
	var docs []map[string]any
	for _, barcode := range []string{itemBarcode, "second"} {
		before := len(s.store.Calls())
		req := request()
		req.ItemBarcode, req.LoanDate = barcode, lent
		res, err := s.svc.CheckOut(okapi(t), req)
		if err != nil {
			t.Fatalf("check-out of %s: %v", barcode, err)
		}
		var doc map[string]any
		s.store.Send(http.MethodGet, "/loan-storage/loans/"+res.Loan.ID, nil, &doc, http.StatusOK)
		docs = append(docs, doc)
		if barcode == "second" {
			wantStrings(t, "the second check-out's calls", routes(s.store)[before:], []string{storagetest.RouteCheckOut})
			if !res.Loan.DueDate.Equal(lent.AddDate(0, 1, 0)) || res.Item.Status != schemas.ItemCheckedOut || res.Item.Version != 2 {
				t.Errorf("answered due %s, item %q at version %d; want due in a month, the item checked out at version 2",
					res.Loan.DueDate, res.Item.Status, res.Item.Version)
			}
		}
	}
	for _, doc := range docs {
		for _, field := range []string{"id", "itemId", "metadata"} {
			delete(doc, field)
		}
	}
	if !reflect.DeepEqual(docs[0], docs[1]) {
		t.Errorf("the loan written in two calls:\n%v\nin one:\n%v", docs[0], docs[1])
	}
	if docs[1]["dueDate"] != "2026-02-28T23:00:00.000Z" || docs[1]["action"] != schemas.LoanCheckedOut {
		t.Errorf("the loan written in one call is due %v with action %v, want 2026-02-28T23:00:00.000Z and %s",
			docs[1]["dueDate"], docs[1]["action"], schemas.LoanCheckedOut)
	}
	wantItem(t, s.store, schemas.ItemCheckedOut, 2)
	if len(s.obs.acquired) != 2 || len(s.obs.releases) != 2 || s.obs.releases[1] != nil {
		t.Errorf("observer: acquisitions %+v, releases %v; want two of each", s.obs.acquired, s.obs.releases)
	}
}

// TestACheckOutInOneSentAgainIsTheSameWrite: the check-out's answer is
// lost after storage wrote it; sent again with its write id, storage
// answers with the loan it wrote, once, and the check-out reads the
// patron and the item to answer with them.
func TestACheckOutInOneSentAgainIsTheSameWrite(t *testing.T) {
	t.Parallel()
	s := newStack(t, lockOn)
	before := knowSettings(t, s)
	s.store.Lose(storagetest.RouteCheckOut, 1, storagetest.LostCut)
	res := wantOneLoanAnswered(t, s, "a check-out in one call whose answer was lost")
	if res.Patron.ID != patronID || res.Item.ID != itemID || res.Item.Status != schemas.ItemCheckedOut || !res.Locked {
		t.Errorf("answered patron %+v, item %+v, locked %t", res.Patron, res.Item, res.Locked)
	}
	wantWrittenOnce(t, s.store, storagetest.RouteCheckOut, 2, 1)
	// The answer that said the lock went with the loan was lost; the one
	// sent again says so too, and no release of its own follows.
	wantStrings(t, "calls", routes(s.store)[before:], []string{storagetest.RouteCheckOut, storagetest.RouteCheckOut,
		storagetest.RouteValidation})
}

// TestACheckOutInOneSentAgainIsMadeWhateverItsReadFinds: the check-out's
// answer is lost after storage wrote it, and sent again it is answered
// from its write id; the read of the patron and the item for its answer
// then fails (storage's database out of reach): the check-out is still
// answered as made, its loan with the patron and the item the loan
// names, never as a failure that would say nothing happened.
func TestACheckOutInOneSentAgainIsMadeWhateverItsReadFinds(t *testing.T) {
	t.Parallel()
	s := newStack(t, lockOn)
	knowSettings(t, s)
	s.store.Lose(storagetest.RouteCheckOut, 1, storagetest.LostCut)
	s.store.Refuse(storagetest.RouteValidation, -1, http.StatusServiceUnavailable, "DATABASE_UNAVAILABLE")
	res := wantOneLoanAnswered(t, s, "a check-out whose write landed, its read refused")
	if res.Patron.ID != patronID || res.Item.ID != itemID || res.Item.Status != schemas.ItemCheckedOut || !res.Locked {
		t.Errorf("answered patron %+v, item %+v, locked %t; want the loan's, the item checked out", res.Patron, res.Item, res.Locked)
	}
	wantWrittenOnce(t, s.store, storagetest.RouteCheckOut, 2, 1)
}

// TestACheckOutInOneNeverAnsweredIsSettledByItsWriteID: storage wrote the
// check-out and every answer to it is lost; the check-out gives the lock
// back and learns from its write id that its loan was written.
func TestACheckOutInOneNeverAnsweredIsSettledByItsWriteID(t *testing.T) {
	t.Parallel()
	s := newStack(t, lockOn, withSettleTimeout(300*time.Millisecond))
	knowSettings(t, s)
	s.store.Lose(storagetest.RouteCheckOut, -1, storagetest.LostUnavailable)
	wantOneLoanAnswered(t, s, "a check-out in one call never answered")
	wantCount(t, s.store, storagetest.RoutePostLoan, 0)
	wantCount(t, s.store, storagetest.RouteRelease, 1)
	if n := s.store.Count(storagetest.RouteCheckOut); n < 2 {
		t.Errorf("the check-out was sent %d times, want it sent again with its id", n)
	}
}

// TestARefusedCheckOutInOneIsWordedAsValidationWordsIt: what storage
// refuses in one call (no such item; the item limit, judged by the write)
// the check-out reads and words as the two-call check-out does: every
// reason, in FOLIO's words, and nothing written.
func TestARefusedCheckOutInOneIsWordedAsValidationWordsIt(t *testing.T) {
	t.Parallel()
	t.Run("no such item", func(t *testing.T) {
		t.Parallel()
		s := newStack(t, lockOn)
		before := knowSettings(t, s)
		req := request()
		req.ItemBarcode = "nope"
		_, err := s.svc.CheckOut(okapi(t), req)
		wantStrings(t, "refusals", refusals(t, err), []string{
			"ITEM_BARCODE_NOT_FOUND: No item with barcode nope could be found [itemBarcode=nope]"})
		wantStrings(t, "calls", routes(s.store)[before:], []string{storagetest.RouteCheckOut, storagetest.RouteValidation})
		wantNoWrites(t, s.store)
	})
	t.Run("the item limit", func(t *testing.T) {
		t.Parallel()
		s := newStack(t, lockOn)
		before := knowSettings(t, s)
		// The patron reaches the limit just before the check-out arrives.
		s.store.Before(storagetest.RouteCheckOut, 1, func(storagetest.Call) { lendOthers(s, itemLimit) })
		_, err := s.checkOut(t)
		wantStrings(t, "refusals", refusals(t, err), []string{
			"ITEM_LIMIT: Patron has reached maximum limit of 3 items [itemBarcode=" + itemBarcode + "] [itemLimit=3]"})
		wantStrings(t, "calls", routes(s.store)[before:], []string{storagetest.RouteCheckOut, storagetest.RouteValidation})
		if c := s.store.Calls()[before]; c.StorageStatus != http.StatusUnprocessableEntity {
			t.Errorf("storage answered the check-out in one call %d %s, want its write's refusal, 422", c.StorageStatus, c.StorageAnswer)
		}
		wantNoWrites(t, s.store)
		wantItem(t, s.store, schemas.ItemAvailable, 1)
	})
}

// TestACheckOutInOneGivesUpWhenStorageWaitedInVain: storage waited the
// whole budget for the patron's lock, in vain: the check-out ends there,
// unable to acquire it, with no second wait; validation's read, which
// finds nothing to refuse, is the only call after it. A patron refused
// whoever holds the lock (blocked) is told why instead, as the two-call
// check-out tells it before the lock.
func TestACheckOutInOneGivesUpWhenStorageWaitedInVain(t *testing.T) {
	t.Parallel()
	t.Run("unable to acquire", func(t *testing.T) {
		t.Parallel()
		s := newStack(t, lockOn)
		before := knowSettings(t, s)
		holdLock(s, -1)
		snapshot := s.store.Snapshot()
		_, err := s.checkOut(t)
		wantError(t, err, errs.KindInvalid, schemas.CodeUnableToAcquireLock)
		wantStrings(t, "calls", routes(s.store)[before:], []string{storagetest.RouteCheckOut, storagetest.RouteValidation})
		if got := acquireWaits(s.store); !slices.Equal(got, []int{2000}) {
			t.Errorf("acquires with waitMs %v, want one of the whole budget, 2000", got)
		}
		wantWaits(t, s.clock, nil)
		s.store.WantUnchanged(snapshot)
		if len(s.obs.notAcquired) != 1 {
			t.Errorf("observer: not acquired %+v, want once", s.obs.notAcquired)
		}
	})
	t.Run("blocked", func(t *testing.T) {
		t.Parallel()
		s := newStack(t, lockOn)
		before := knowSettings(t, s)
		holdLock(s, -1)
		s.store.AddManualBlock(storagetest.ManualBlock{UserID: patronID, Desc: "Unpaid fines", Borrowing: true})
		_, err := s.checkOut(t)
		wantStrings(t, "refusals", refusals(t, err), []string{"USER_IS_BLOCKED_MANUALLY: Patron blocked from borrowing [reason=Unpaid fines]"})
		wantStrings(t, "calls", routes(s.store)[before:], []string{storagetest.RouteCheckOut, storagetest.RouteValidation})
		wantNoWrites(t, s.store)
	})
}

// TestACheckOutInOneFallsBackToTwoCalls: what ends a check-out in one call
// without a write (a storage that predates the call, a held lock
// answered at once, the item changed since storage read it) goes the
// two-call way, which reads, and writes under the lock.
func TestACheckOutInOneFallsBackToTwoCalls(t *testing.T) {
	t.Parallel()
	for name, refusal := range map[string]struct {
		status int
		code   string
	}{
		"a storage without the call":   {http.StatusNotFound, schemas.CodeNotFound},
		"a held lock answered at once": {http.StatusServiceUnavailable, schemas.CodeLockHeld},
		"the item changed":             {http.StatusConflict, schemas.CodeItemChanged},
		"its records not read":         {http.StatusServiceUnavailable, schemas.CodeCheckOutsBusy},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s := newStack(t, lockOn)
			before := knowSettings(t, s)
			s.store.Refuse(storagetest.RouteCheckOut, 1, refusal.status, refusal.code)
			res, err := s.checkOut(t)
			if err != nil {
				t.Fatalf("check-out: %v", err)
			}
			wantStrings(t, "calls", routes(s.store)[before:], []string{storagetest.RouteCheckOut, storagetest.RouteValidation, storagetest.RoutePostLoan})
			if loans := s.store.Loans(); len(loans) != 1 || loans[0].ID != res.Loan.ID {
				t.Errorf("loans %+v, want the one answered, %s", loans, res.Loan.ID)
			}
			wantItem(t, s.store, schemas.ItemCheckedOut, 2)
			wantWaits(t, s.clock, nil)
		})
	}
}

// TestACheckOutInOneLostThenRefusedIsSettledByItsWriteID: the first send
// wrote and its answer was lost; the send again is refused having written
// nothing itself. That says nothing of the first, so the check-out never
// writes the two-call way: refused busy (its records not read), it sends
// again until the first's answer comes from its write id; refused
// otherwise (a storage rolled back to one without the call), it learns
// its loan from its write id.
func TestACheckOutInOneLostThenRefusedIsSettledByItsWriteID(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		status int
		code   string
		sends  int
	}{
		"busy":                       {http.StatusServiceUnavailable, schemas.CodeCheckOutsBusy, 3},
		"a storage without the call": {http.StatusNotFound, schemas.CodeNotFound, 2},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s := newStack(t, lockOn)
			knowSettings(t, s)
			s.store.Lose(storagetest.RouteCheckOut, 1, storagetest.LostUnavailable)
			sent := 0
			s.store.Before(storagetest.RouteCheckOut, 2, func(storagetest.Call) {
				// Refused from the send again on (a refusal programmed
				// here meets the call that runs this).
				if sent++; sent == 2 {
					s.store.Refuse(storagetest.RouteCheckOut, 1, tc.status, tc.code)
				}
			})
			wantOneLoanAnswered(t, s, "a check-out in one call refused when sent again")
			wantCount(t, s.store, storagetest.RoutePostLoan, 0)
			if n := s.store.Count(storagetest.RouteCheckOut); n != tc.sends {
				t.Errorf("sent %d times, want %d", n, tc.sends)
			}
		})
	}
}
