package circulation

import (
	"context"
	"log/slog"
	"strings"
	"time"

	"github.com/checkoutlock/schemas"
	"github.com/checkoutlock/schemas/errs"
	"github.com/checkoutlock/schemas/selfcheck"
	"github.com/google/uuid"
)

// Offline is a check-out a self-check machine made while the library
// system could not answer, sent when it answers again (SIP2's no block):
// it already happened, the book is in the patron's bag. It is recorded
// with its transaction's date under the patron's lock, past every rule a
// live check-out keeps (schemas.OfflineRules: storage records the ones it
// broke on the loan, in its event and in the lock history), and exactly
// once however often it is sent: the same account, patron, item and
// transaction date name the same loan (OfflineLoanID), answered again.
type Offline struct {
	// TransactionDate is when the machine lent the item: the loan's date.
	TransactionDate time.Time
	// DueDate is the due date the machine gave the patron; zero, the loan
	// policy's from TransactionDate.
	DueDate time.Time
	// RecordedBy is the account that sent it (its username): with the
	// patron's and item's barcodes and the date, it names the check-out.
	RecordedBy string
	// Kiosk is the machine that lent it, as its SIP2 door names it
	// (Okapi.Kiosk); "" when not said.
	Kiosk string
	// Tenant is the tenant it is recorded in.
	Tenant string
}

// offlineNamespace is the UUID namespace of offline check-outs' loan ids.
var offlineNamespace = uuid.MustParse("6f0d6c1e-3a7b-5c55-9f3e-0c1c7e0ff11e")

// OfflineLoanID is the id of the loan an offline check-out records: the
// same for the same tenant, account, patron, item and transaction date
// (to the millisecond), so that a check-out sent again finds its loan.
func OfflineLoanID(tenant, account, userBarcode, itemBarcode string, at time.Time) string {
	name := strings.Join([]string{tenant, strings.ToLower(account), userBarcode, itemBarcode,
		schemas.FormatTime(at)}, "\x00")
	return uuid.NewSHA1(offlineNamespace, []byte(name)).String()
}

// offlineDefaultDays is how long an item lent offline whose loan policy
// does not lend is lent for, when the machine gave no due date: a day,
// for the desk to follow up.
const offlineDefaultDays = 1

// dueDate is when a check-out made offline is due: the machine's due date
// when it gave one, else the loan policy's from the transaction date, or
// a day after it for a policy that does not lend.
func (o *Offline) dueDate(co checkOut) time.Time {
	switch {
	case !o.DueDate.IsZero():
		return o.DueDate.UTC()
	case !co.policy.Loanable:
		return o.TransactionDate.AddDate(0, 0, offlineDefaultDays)
	}
	return co.policy.Period.DueDate(o.TransactionDate)
}

// loanID is the id of the check-out's loan: a new one for a check-out
// made live, the offline check-out's own for one made offline.
func (co checkOut) loanID() string {
	if o := co.req.Offline; o != nil {
		return OfflineLoanID(o.Tenant, o.RecordedBy, co.req.UserBarcode, co.req.ItemBarcode, o.TransactionDate)
	}
	return uuid.NewString()
}

// checkOutOffline records a check-out made offline: refused when the
// tenant takes none (CodeOfflineLendingOff) or it is older than
// schemas.MaxOfflineBehind (CodeOfflineTooOld); answered with its loan
// when it was recorded already; else checked out as a live one is, under
// the patron's lock, refused only for what cannot be lent past (an
// unknown patron or item, an item on loan to someone else) and, by
// storage's write, when a door saw its machine on line at its
// transaction date (schemas.CodeOfflineWhileOnLine). A send of the
// same check-out that came first meanwhile answers with its loan.
func (s *Service) checkOutOffline(ctx context.Context, req CheckOutRequest) (CheckOutResult, error) {
	off := req.Offline
	settings, err := s.selfCheck(ctx)
	if err != nil {
		return CheckOutResult{}, err
	}
	if !settings.OfflineTaken() {
		return CheckOutResult{}, errs.Errorf(errs.KindInvalid, schemas.CodeOfflineLendingOff,
			"This library does not take check-outs made offline: the desk lends it").
			With("itemBarcode", req.ItemBarcode).With("userBarcode", req.UserBarcode)
	}
	if age := s.now().Sub(off.TransactionDate); age > schemas.MaxOfflineBehind {
		return CheckOutResult{}, errs.Errorf(errs.KindInvalid, schemas.CodeOfflineTooOld,
			"The check-out was made offline more than %d days ago: the desk records it", int(schemas.MaxOfflineBehind.Hours()/24)).
			With("transactionDate", schemas.FormatTime(off.TransactionDate))
	}
	req.LoanDate = schemas.WireTime(off.TransactionDate)
	off.TransactionDate = req.LoanDate
	if res, found, err := s.offlineRecorded(ctx, req); found || err != nil {
		return res, err
	}
	res, err := s.checkOut(ctx, req)
	if err == nil {
		return res, nil
	}
	if again, found, rerr := s.offlineRecorded(ctx, req); found && rerr == nil {
		return again, nil
	}
	return CheckOutResult{}, err
}

// offlineRecorded finds the loan an offline check-out records, when it
// was recorded already, with its item and patron (checkedOutBefore), the
// PIN it was sent with, if any, checked against that loan's patron.
func (s *Service) offlineRecorded(ctx context.Context, req CheckOutRequest) (CheckOutResult, bool, error) {
	off := req.Offline
	id := OfflineLoanID(off.Tenant, off.RecordedBy, req.UserBarcode, req.ItemBarcode, off.TransactionDate)
	loan, err := s.storage.LoanByID(ctx, id)
	switch {
	case errs.IsKind(err, errs.KindNotFound):
		return CheckOutResult{}, false, nil
	case err != nil:
		return CheckOutResult{}, false, err
	}
	// Its PIN is checked against the patron it was recorded for.
	if err := s.pinOfLoan(ctx, req, loan); err != nil {
		return CheckOutResult{}, false, err
	}
	s.logger.InfoContext(ctx, "an offline check-out sent again: its loan answered", slog.String("loan_id", id),
		slog.String("recorded_by", off.RecordedBy))
	return s.checkedOutBefore(ctx, loan), true, nil
}

// selfCheck is the tenant's self-check settings (its selfCheck entry,
// read with the decoder storage checks its writes with), read on every
// call: a tenant that changes them holds the next request to them. No
// entry is selfcheck.Defaults; an entry that cannot be decoded requires
// PINs and takes no check-out made offline (it is logged): a value
// nobody can read must not let a kiosk act for a patron on the card
// alone, nor lend past the rules.
func (s *Service) selfCheck(ctx context.Context) (selfcheck.Settings, error) {
	entry, found, err := s.storage.Setting(ctx, selfcheck.Scope, selfcheck.Key)
	if err != nil {
		return selfcheck.Settings{}, err
	}
	if !found {
		return selfcheck.Defaults, nil
	}
	settings, ferr := selfcheck.Decode(entry.Value)
	if ferr != nil {
		s.logger.WarnContext(ctx, "self-check settings unreadable: requiring patrons' PINs, taking no check-out made offline",
			slog.String("error", ferr.Error()))
		return selfcheck.Settings{PatronPin: selfcheck.PinRequired, OfflineLending: selfcheck.OfflineOff}, nil
	}
	return settings, nil
}

// SelfCheckSettings is the tenant's self-check settings as they apply
// (selfCheck): what GET /circulation/settings/self-check answers.
func (s *Service) SelfCheckSettings(ctx context.Context) (selfcheck.Settings, error) {
	return s.selfCheck(ctx)
}
