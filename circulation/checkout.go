package circulation

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/checkoutlock/schemas"
	"github.com/checkoutlock/schemas/errs"

	"github.com/cenkalti/backoff/v4"
	"github.com/google/uuid"

	"github.com/checkoutlock/schemas/locksettings"
)

// Observer is told what check-outs do, for metrics. Implementations must be
// safe for concurrent use.
type Observer interface {
	// LockAcquired: the lock was acquired after attempts tries and wait.
	LockAcquired(attempts int, wait time.Duration)
	// LockNotAcquired: every attempt failed, or the request ended first.
	LockNotAcquired(attempts int, wait time.Duration)
	// LockReleased reports a release: nil, or why it failed.
	LockReleased(err error)
}

// Service checks items out and in.
type Service struct {
	storage  Storage
	settings *Settings
	observer Observer
	logger   *slog.Logger
	// releaseTimeout bounds the release of a lock, which runs even when the
	// request has been cancelled.
	releaseTimeout time.Duration
	// now and newTimer are the clock; tests replace them.
	now      func() time.Time
	newTimer func() backoff.Timer
	// waitAtStorage says whether acquisitions ask storage to wait for a
	// held lock (waitMs); see ServiceConfig.WaitAtStorage.
	waitAtStorage bool
	// instance names this instance in the locks it takes.
	instance string
	// settleTimeout bounds how long a write whose answer was lost is sent
	// again (once).
	settleTimeout time.Duration
}

// ServiceConfig is the check-out service's configuration, all of it given
// to NewService.
type ServiceConfig struct {
	// ReleaseTimeout bounds the release of a lock, which runs even when the
	// request has been cancelled.
	ReleaseTimeout time.Duration
	// WaitAtStorage says whether to ask storage to wait for a held lock
	// (LOCK_WAIT_AT_STORAGE, on by default there). Off, acquisitions retry
	// at the configured intervals only, as FOLIO's mod-circulation does:
	// for a storage that does not know waitMs.
	WaitAtStorage bool
	// Instance names this instance in the locks it takes (a lock's
	// holder), so operators and waiting check-outs can tell which instance
	// holds one.
	Instance string
	// Now is the clock for timestamps and waits; nil means time.Now.
	Now func() time.Time
	// NewTimer makes the timers for the waits between lock attempts; nil
	// means real timers. Tests use it, with Now, to record the waits
	// instead of sleeping through them.
	NewTimer func() backoff.Timer
	// SettleTimeout bounds how long a write whose answer was lost is sent
	// again with its id before its outcome is answered unknown; 0 means
	// DefaultSettleTimeout.
	SettleTimeout time.Duration
}

// DefaultSettleTimeout is how long a write whose answer was lost is sent
// again with its id, by default: long enough for a storage instance to
// be replaced behind its load balancer, or its database connection made
// again; short enough to answer a kiosk within its own timeout.
const DefaultSettleTimeout = 5 * time.Second

// NewService returns the check-out service, configured by cfg.
func NewService(storage Storage, settings *Settings, observer Observer, logger *slog.Logger, cfg ServiceConfig) *Service {
	now, newTimer := cfg.Now, cfg.NewTimer
	if now == nil {
		now = time.Now
	}
	if newTimer == nil {
		newTimer = func() backoff.Timer { return nil }
	}
	return &Service{
		storage: storage, settings: settings, observer: observer, logger: logger, releaseTimeout: cfg.ReleaseTimeout,
		now: now, newTimer: newTimer, waitAtStorage: cfg.WaitAtStorage, instance: cfg.Instance,
		settleTimeout: cmp.Or(cfg.SettleTimeout, DefaultSettleTimeout),
	}
}

// CheckOutRequest is a check-out by barcode.
type CheckOutRequest struct {
	ItemBarcode    string
	UserBarcode    string
	ServicePointID string
	// LoanDate defaults to now.
	LoanDate time.Time
	// Overrides are the blocks a librarian overrides, already allowed
	// (the caller holds their permissions).
	Overrides Overrides
	// Offline, when set, is a check-out a self-check machine made
	// offline, already allowed (the caller holds its permission):
	// recorded past the rules a live one keeps (offline.go).
	Offline *Offline
	// Pin is the PIN the patron typed at a self-check machine ("" for
	// none), checked against the patron before any refusal is told or
	// anything written (landedByKey, pinOfRead).
	Pin string
	// pinRight is, once the call's PIN was checked right, the patron it
	// was checked against: a write that landed for them is answered
	// without checking it again (landedWithPin).
	pinRight *string
}

// Overrides are FOLIO's overrideBlocks of a check-out: which blocks to
// lift, the due date for an item its loan policy does not lend, and the
// comment every override needs.
type Overrides struct {
	PatronBlock, ItemLimit, ItemNotLoanable bool
	DueDate                                 time.Time
	Comment                                 string
	// Offline lifts, at storage, every rule a check-out made offline is
	// recorded past (set by the write of one, never by a caller).
	Offline bool
}

// Any says whether any block is overridden.
func (o Overrides) Any() bool { return o.PatronBlock || o.ItemLimit || o.ItemNotLoanable }

// ActionOverride is the action of a loan made through an override.
const ActionOverride = schemas.LoanCheckedOutThroughOverride

// CheckOutResult is the loan made, with the item and patron it joins.
type CheckOutResult struct {
	Loan   Loan
	Item   Item
	Patron Patron
	// Locked says whether the check-out ran under the patron's lock.
	Locked bool
}

// checkOut is what validation found and the rest of the check-out uses. The
// loan policy is kept so the re-check in the write uses the same limit
// (FOLIO: the policy does not change during one check-out).
type checkOut struct {
	req    CheckOutRequest
	patron Patron
	item   Item
	policy LoanPolicy
	match  PolicyMatch
	// limit is the item limit storage enforces, nil when none is.
	limit *ItemLimit
	// lockSetting is the tenant's lock settings entry as validation read
	// it, nil when storage did not carry it.
	lockSetting *SettingRead
}

// CheckOut checks an item out to a patron in two calls to storage:
// validation reads everything it needs in one, without the lock, and
// reports every reason to refuse at once; the write, which judges every
// rule again where nothing can change under it, is the other. With the
// lock feature on, the block that must never run concurrently for one
// patron (the rules' re-check, item update, loan creation) is that one
// write, which acquires the patron's lock itself (waiting for it within
// the retry budget, handed it on release), writes, and releases it with
// the loan: the lock is held inside one call. Against a storage that
// cannot wait for a lock (WaitAtStorage off: FOLIO's), the lock is
// acquired by a call of its own, FOLIO's way, and released by the write,
// or by a call of its own on every other path.
//
// The check-out's write carries the call's write id (WriteOf, else one of
// its own): a call sent again with its Idempotency-Key answers the loan
// its write made, whether the write meets the key at storage or the call
// is refused before it writes (the item lent already, by that write).
//
// A PIN sent with it (req.Pin) is checked against the patron it lends to:
// a keyed call's write is looked up by its id first (landedByKey), and
// where it landed the call is that write, its PIN checked against the
// patron it lent to (landedWithPin), never the one the barcode names now
// (given to another since, say); storage not answering the lookup, or the
// key being another request's (KeyReused), is the answer, no PIN checked.
// Any other call has its PIN checked against the patron validation reads,
// before any refusal is told (pinOfRead).
func (s *Service) CheckOut(ctx context.Context, req CheckOutRequest) (CheckOutResult, error) {
	ctx = identified(ctx)
	if req.Pin != "" {
		req.pinRight = new(string)
		if l, found, err := s.landedByKey(ctx); err != nil || found {
			return s.landedWithPin(ctx, req, l, err)
		}
	}
	var res CheckOutResult
	var err error
	if req.Offline != nil {
		res, err = s.checkOutOffline(ctx, req)
	} else {
		res, err = s.checkOut(ctx, req)
	}
	l, ok, err := s.landed(ctx, schemas.WriteCheckOut, err)
	if ok {
		return s.landedWithPin(ctx, req, l, nil)
	}
	return res, err
}

// landedByKey is the check-out's write, looked up by its id, when the call
// came with an Idempotency-Key and the write landed (found); an unkeyed
// call's write is new.
func (s *Service) landedByKey(ctx context.Context) (l Landed, found bool, err error) {
	if w, ok := WriteOf(ctx); ok && w.Keyed {
		return s.landedAs(ctx, w, schemas.WriteCheckOut)
	}
	return Landed{}, false, nil
}

// landedWithPin answers a check-out with its write that landed (l), once
// the PIN it was sent with is checked against the patron that write lent
// to (pinOfLoan); err, when the lookup failed, is the answer.
func (s *Service) landedWithPin(ctx context.Context, req CheckOutRequest, l Landed, err error) (CheckOutResult, error) {
	if err != nil {
		return CheckOutResult{}, err
	}
	if err := s.pinOfLoan(ctx, req, *l.Loan); err != nil {
		return CheckOutResult{}, err
	}
	return s.checkedOutBefore(ctx, *l.Loan), nil
}

// pinOfLoan checks the PIN a check-out was sent with (none: nil) against
// the patron of a loan it is answered with, a wrong one counted there as
// every PIN guess, unless this call checked it right against that patron
// already (a write of its own, found after its answer was lost).
func (s *Service) pinOfLoan(ctx context.Context, req CheckOutRequest, loan Loan) error {
	if req.Pin == "" || (req.pinRight != nil && *req.pinRight == loan.UserID) {
		return nil
	}
	return s.storage.VerifyPin(ctx, loan.UserID, req.Pin)
}

// pinOfRead checks a check-out's PIN against the patron validation read
// (co.patron; none is a wrong PIN, as VerifyPatronPin answers it), a wrong
// one counted at storage before it is checked, before validation's
// refusals or failure (read) are told: the answer to a wrong PIN tells
// nothing of the patron or the item. A read that failed before it read
// the patron is its own answer, no PIN checked. The write then lends to
// that patron, by id, whoever the barcode names by then.
func (s *Service) pinOfRead(ctx context.Context, co checkOut, req CheckOutRequest, read error) error {
	if co.patron.ID == "" {
		var refused *errs.Refusal
		if read != nil && !errors.As(read, &refused) {
			return read
		}
		return errs.Errorf(errs.KindInvalid, schemas.CodePinInvalid, "Wrong PIN")
	}
	if err := s.storage.VerifyPin(ctx, co.patron.ID, req.Pin); err != nil {
		return err
	}
	if req.pinRight != nil {
		*req.pinRight = co.patron.ID
	}
	return read
}

// checkedOutBefore is the check-out answered by its write that landed
// before: its loan as written, with the loan's item and patron as they
// are now (ofLoan).
func (s *Service) checkedOutBefore(ctx context.Context, loan Loan) CheckOutResult {
	reads := s.ofLoan(ctx, loan, CheckOutReads{})
	return CheckOutResult{Loan: loan, Item: *reads.Item, Patron: *reads.Patron}
}

// checkOut is CheckOut's check-out, made live or offline.
func (s *Service) checkOut(ctx context.Context, req CheckOutRequest) (CheckOutResult, error) {
	if req.LoanDate.IsZero() {
		req.LoanDate = schemas.WireTime(s.now())
	}
	// A check-out sent with a PIN goes the two-call way: its PIN is
	// checked against the patron validation reads (pinOfRead), to whom
	// the write lends.
	if settings, cached := s.settings.Cached(ctx); cached && settings.Enabled && s.waitAtStorage && !req.Overrides.Any() && req.Offline == nil && req.Pin == "" {
		if res, done, err := s.checkOutInOne(ctx, req, settings); done {
			return res, err
		}
	}
	co, settings, err := s.validateWithSettings(ctx, req)
	if req.Pin != "" {
		err = s.pinOfRead(ctx, co, req, err)
	}
	if err != nil {
		return CheckOutResult{}, err
	}
	if !settings.Enabled {
		// Exactly as before the feature existed: no lock calls at all,
		// unless storage says the tenant's lock is on (switched on since
		// the settings were read, or on in storage's environment alone):
		// then the check-out goes again, under the lock.
		res, err := s.write(ctx, co, "", nil)
		if !errs.IsCode(err, schemas.CodeLockRequired) {
			return res.CheckOutResult, err
		}
		s.settings.Forget(ctx)
		s.logger.InfoContext(ctx, "storage requires the check-out lock; checking out under it", slog.String("user_id", co.patron.ID))
	}
	if s.waitAtStorage {
		return s.checkOutAcquiring(ctx, co, settings)
	}
	return s.checkOutLocked(ctx, co, settings)
}

// checkOutAcquiring is the check-out's write under the patron's lock in
// one call: storage acquires the lock, waiting for it up to the retry
// budget (never past the request's deadline), writes, and releases it
// with the loan, or, having written nothing, releases it all the same.
// The retry intervals keep their schedule for what storage's wait cannot
// cover: a held lock answered at once (storage's waiters full), and a
// call that never left (storage not reachable); each retry asks for the
// budget that is left. A held lock after storage waited out the budget
// ends it, as does every other answer. Every attempt names the same lock
// id, chosen here: a lock taken by an attempt whose answer was lost can
// still be given back.
func (s *Service) checkOutAcquiring(ctx context.Context, co checkOut, settings LockSettings) (CheckOutResult, error) {
	start := s.now()
	giveUp := start.Add(locksettings.Total(settings.RetryIntervals))
	lockID := uuid.NewString()
	holder := LockHolder{Instance: s.instance, RequestID: OkapiFrom(ctx).RequestID,
		ItemBarcode: co.req.ItemBarcode, ServicePointID: co.req.ServicePointID}
	attempts := 0
	var res written
	err := backoff.RetryNotifyWithTimer(func() error {
		attempts++
		var err error
		res, err = s.write(ctx, co, lockID, &LockAcquisition{TTL: settings.LockTTL, Wait: waitWithin(ctx, giveUp.Sub(s.now())), Holder: holder})
		switch {
		case err == nil:
			return nil
		case errs.IsCode(err, schemas.CodeLockHeld) && !storageWaited(err), errors.Is(err, ErrNotSent):
			return err
		}
		return backoff.Permanent(err)
	}, backoff.WithContext(&intervals{waits: settings.RetryIntervals}, ctx), nil, s.newTimer())
	wait := s.now().Sub(start)
	switch {
	case err == nil:
		// The wait is storage's, the write's own time left out; a write
		// settled by reading its loan back did not say it, and the call's
		// time stands in.
		if res.lockReleased {
			wait = res.lockWaited
		}
		s.observer.LockAcquired(attempts, wait)
		if res.lockReleased {
			s.observer.LockReleased(nil)
		} else {
			// A write settled by reading its loan back: whether its lock
			// went with it is not known.
			s.release(ctx, Lock{ID: lockID})
		}
		res.Locked = true
		return res.CheckOutResult, nil
	case errs.IsCode(err, schemas.CodeLockHeld):
		s.observer.LockNotAcquired(attempts, wait)
		return CheckOutResult{}, unableToAcquire(err, co.patron, attempts)
	case ambiguous(err):
		// The write may have taken the lock and not written: give it back.
		s.giveBack(ctx, lockID)
	}
	return CheckOutResult{}, err
}

// checkOutInOne is the check-out asked of storage in one call, taken when
// the tenant's settings are known (cached), its lock is on and acquired at
// storage, and nothing is overridden: storage reads what validation
// reads, builds the loan, and writes it by the check-out's own write,
// which judges every rule and acquires the patron's lock (waiting for it
// up to the retry budget), releasing it with the loan. The write is sent
// again with its id when its answer is lost, as write sends it
// (Service.once).
//
// done is false when nothing was written and the check-out goes the
// two-call way, which reads, words every refusal as FOLIO does, and keeps
// the retry intervals' schedule: a refusal (a rule broken, a patron or
// item not found), a held lock answered at once, an item changed since
// storage read it, a call that never left, a storage without the call.
// A held lock after storage waited out the budget ends the check-out,
// as it ends checkOutAcquiring's, with validation's refusal when it has
// one; a write whose outcome is not known
// gives its lock back and is settled by its write id (CheckOut).
func (s *Service) checkOutInOne(ctx context.Context, req CheckOutRequest, settings LockSettings) (res CheckOutResult, done bool, err error) {
	request := ctx
	start := s.now()
	acquire := LockAcquisition{TTL: settings.LockTTL, Wait: waitWithin(ctx, locksettings.Total(settings.RetryIntervals)),
		Holder: LockHolder{Instance: s.instance, RequestID: OkapiFrom(ctx).RequestID, ItemBarcode: req.ItemBarcode, ServicePointID: req.ServicePointID}}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), WriteTimeout+acquire.Wait)
	defer cancel()
	lockID, loanID := uuid.NewString(), uuid.NewString()
	var stored CheckedOutInOne
	// lost says a send's answer was lost: whatever a later send answers,
	// that one may have written.
	lost := false
	err = s.once(request, ctx, func(ctx context.Context) error {
		// The request's leaving ends the wait for the lock: storage then
		// writes nothing, unless it had begun the write.
		call, leave := context.WithCancel(ctx)
		defer context.AfterFunc(request, leave)()
		defer leave()
		var err error
		stored, err = s.storage.CheckOutInOne(call, req, loanID, lockID, acquire)
		lost = lost || ambiguous(err)
		return err
	})
	switch {
	case err == nil:
	case errs.IsCode(err, schemas.CodeLockHeld) && storageWaited(err):
		s.observer.LockNotAcquired(1, s.now().Sub(start))
		// A patron refused whoever holds the lock (blocked, say) is told
		// why, as the two-call check-out's validation, before the lock,
		// tells it.
		var refused *errs.Refusal
		if _, verr := s.validate(ctx, req); errors.As(verr, &refused) {
			return CheckOutResult{}, true, refused
		}
		return CheckOutResult{}, true, unableToAcquire(err, Patron{Barcode: req.UserBarcode}, 1)
	case ambiguous(err), lost:
		// Unknown, or known only of a later send: the first may have
		// written, so no other way is taken.
		s.logger.ErrorContext(ctx, "check-out outcome unknown: storage did not answer whether the loan was created",
			slog.String("loan_id", loanID), slog.String("item_barcode", req.ItemBarcode), slog.Any("error", err))
		// The write may have taken the lock and not written: give it back.
		s.giveBack(ctx, lockID)
		return CheckOutResult{}, true, unanswered(ctx, err, "check-out", "loanId", loanID)
	default:
		return CheckOutResult{}, false, nil
	}
	s.observer.LockAcquired(1, stored.LockWaited)
	if stored.LockReleased {
		s.observer.LockReleased(nil)
	} else {
		s.release(ctx, Lock{ID: lockID})
	}
	if stored.Patron == nil {
		// Its write had landed before (sent again after its answer was
		// lost): storage answered with its loan alone.
		res := s.checkedOutBefore(ctx, stored.Loan)
		res.Locked = true
		return res, true, nil
	}
	return CheckOutResult{Loan: stored.Loan, Item: stored.Item, Patron: *stored.Patron, Locked: true}, true, nil
}

// checkOutLocked is the check-out's write under the patron's lock:
// acquire, write (which releases the lock with the loan), and release on
// every other path.
func (s *Service) checkOutLocked(ctx context.Context, co checkOut, settings LockSettings) (CheckOutResult, error) {
	lock, err := s.acquire(ctx, co.patron, settings, LockHolder{Instance: s.instance, RequestID: OkapiFrom(ctx).RequestID,
		ItemBarcode: co.req.ItemBarcode, ServicePointID: co.req.ServicePointID})
	if err != nil {
		return CheckOutResult{}, err
	}
	released := false
	defer func() {
		if !released {
			s.release(ctx, lock)
		}
	}()
	if err := ctx.Err(); err != nil {
		// The client left while the lock was being acquired: nothing has
		// been written, and nothing will be.
		return CheckOutResult{}, fmt.Errorf("check out: %w", err)
	}
	res, err := s.write(ctx, co, lock.ID, nil)
	if err == nil && res.lockReleased {
		// Storage said the loan's transaction released the lock. A
		// storage that does not say so (one that predates releasing with
		// the write) has the lock released by a call of its own.
		released = true
		s.observer.LockReleased(nil)
	}
	res.Locked = err == nil
	return res.CheckOutResult, err
}

// itemLimitOf is the limit a refusal at the item limit names.
func itemLimitOf(err error) int {
	if e, ok := errs.As(err); ok {
		for _, p := range e.Parameters {
			if p.Key == "itemLimit" {
				n, _ := strconv.Atoi(p.Value)
				return n
			}
		}
	}
	return 0
}

// validate reads the records and gathers every reason to refuse, with
// FOLIO's messages and codes, in FOLIO's order (mod-circulation's
// CheckOutByBarcodeResource): the patron, then the item, then the loan
// policy's item limit and whether it lends at all. Storage failures are
// returned as they are; refusals together as one *Refusal.
func (s *Service) validate(ctx context.Context, req CheckOutRequest) (checkOut, error) {
	co := checkOut{req: req}
	reads, err := s.storage.ReadForCheckOut(ctx, req.ItemBarcode, req.UserBarcode)
	if err != nil {
		return co, err
	}
	co.lockSetting = reads.LockSetting
	var refusals []*errs.Error
	if reads.Patron == nil {
		refusals = append(refusals, errs.Errorf(errs.KindInvalid, schemas.CodeUserBarcodeNotFound, "Could not find user with matching barcode").
			With("userBarcode", req.UserBarcode))
	} else {
		co.patron = *reads.Patron
		refusals = append(refusals, refusalsOf(schemas.RuleOfPatron, &co, reads, s.now())...)
	}
	if reads.Item == nil {
		refusals = append(refusals, errs.Errorf(errs.KindInvalid, schemas.CodeItemBarcodeNotFound, "No item with barcode %s could be found", req.ItemBarcode).
			With("itemBarcode", req.ItemBarcode))
		return co, &errs.Refusal{Errors: refusals}
	}
	co.item = *reads.Item
	if co.item.Status == schemas.ItemCheckedOut {
		e := errs.Errorf(errs.KindInvalid, schemas.CodeItemAlreadyCheckedOut, "Item is already checked out").
			With("itemBarcode", req.ItemBarcode)
		if l := reads.OpenLoanOf; l != nil && reads.Patron != nil && l.UserID == reads.Patron.ID {
			// The item is on loan to this very patron: a check-out retried
			// after its answer was lost learns its loan (a kiosk must not
			// tell the patron "no" for a book they hold).
			e = e.With("loanId", l.ID)
			if !l.DueDate.IsZero() {
				e = e.With("dueDate", schemas.FormatTime(l.DueDate))
			}
		}
		refusals = append(refusals, e)
	}
	if reads.OpenLoan {
		refusals = append(refusals, errs.Errorf(errs.KindInvalid, schemas.CodeItemHasOpenLoan, "Cannot check out item that already has an open loan").
			With("itemBarcode", req.ItemBarcode))
	}
	refusals = append(refusals, refusalsOf(schemas.RuleOfItem, &co, reads, s.now())...)
	if reads.Patron != nil {
		refusals = append(refusals, s.checkPolicy(&co, reads)...)
	}
	if req.Offline != nil {
		// It already happened: refused only for what cannot be lent past.
		refusals = slices.DeleteFunc(refusals, func(e *errs.Error) bool { return schemas.OfflineLifts(e.Code) })
	}
	if len(refusals) > 0 {
		return co, &errs.Refusal{Errors: refusals}
	}
	return co, nil
}

// manuallyBlocked is FOLIO's refusal for a patron with manual blocks in
// force for borrowing (mod-circulation's UserManualBlocksValidator): its
// reason is the blocks' descriptions joined by ";", as FOLIO gives it;
// patronMessage their messages for the patron, likewise.
func manuallyBlocked(blocks []ManualBlock) *errs.Error {
	var reasons, messages []string
	for _, b := range blocks {
		reasons = append(reasons, b.Desc)
		if b.PatronMessage != "" {
			messages = append(messages, b.PatronMessage)
		}
	}
	e := errs.Errorf(errs.KindInvalid, schemas.CodeUserBlockedManually, "Patron blocked from borrowing").
		With("reason", strings.Join(reasons, ";"))
	if len(messages) > 0 {
		e.With("patronMessage", strings.Join(messages, ";"))
	}
	return e
}

// requestedByAnotherPatron is FOLIO's refusal of an item whose first
// request is another patron's (mod-circulation's
// RequestedByAnotherPatronValidator).
func requestedByAnotherPatron(co checkOut) *errs.Error {
	return errs.Errorf(errs.KindInvalid, schemas.CodeItemRequestedByAnotherPatron,
		"%s (Barcode: %s) cannot be checked out to user %s because it has been requested by another patron",
		co.item.Title, co.item.Barcode, co.patron.PersonalName()).With("userBarcode", co.req.UserBarcode)
}

// automaticallyBlocked is FOLIO's refusal for an automated patron block.
func automaticallyBlocked(conditionID, message string) *errs.Error {
	return errs.Errorf(errs.KindInvalid, schemas.CodeUserBlockedAutomatically, "%s", message).
		With("patronBlockConditionId", conditionID)
}

// checkPolicy applies the loan policy the rules chose, as FOLIO does:
// its rules (the item limit, then whether the policy lends at all), every
// one reported that applies.
func (s *Service) checkPolicy(co *checkOut, reads CheckOutReads) []*errs.Error {
	if !reads.RulesSet {
		return []*errs.Error{errs.Errorf(errs.KindInvalid, schemas.CodeNoLoanPolicy, "No loan policy applies: the circulation rules are not set").
			With("itemBarcode", co.req.ItemBarcode)}
	}
	co.match, co.policy = reads.Match, reads.Policy
	co.limit = reads.Limit
	return refusalsOf(schemas.RuleOfPolicy, co, reads, s.now())
}

// ItemLimitReached is FOLIO's refusal for a patron at the item limit; its
// wording and code name the criteria of the rule that gave the limit: the
// patron group, when the rule names one, with the material type and the
// loan type it counts by. ITEM_LIMIT, a code FOLIO does not have, is for a
// limit whose rule names neither.
func ItemLimitReached(limit int, m PolicyMatch, itemBarcode string) *errs.Error {
	type scope struct{ group, material, loan bool }
	known := map[scope]struct{ code, cause string }{
		{false, true, true}:  {schemas.CodeItemLimitBoth, " for combination of material type and loan type"},
		{false, true, false}: {schemas.CodeItemLimitMaterialType, " for material type"},
		{false, false, true}: {schemas.CodeItemLimitLoanType, " for loan type"},
		{true, true, true}:   {schemas.CodeItemLimitPatronGroupBoth, " for combination of patron group, material type and loan type"},
		{true, true, false}:  {schemas.CodeItemLimitPatronGroupMaterialType, " for combination of patron group and material type"},
		{true, false, true}:  {schemas.CodeItemLimitPatronGroupLoanType, " for combination of patron group and loan type"},
	}
	answer, ok := known[scope{m.PatronGroupMatch, m.MaterialTypeMatch, m.LoanTypeMatch}]
	if !ok {
		answer.code = schemas.CodeItemLimit
	}
	return errs.Errorf(errs.KindInvalid, answer.code, "Patron has reached maximum limit of %d items%s", limit, answer.cause).
		With("itemBarcode", itemBarcode).With("itemLimit", strconv.Itoa(limit))
}

// intervals is a backoff.BackOff that waits the configured intervals in
// turn, then stops: the seed's "500|500|1000" is three retries.
type intervals struct {
	waits []time.Duration
	next  int
}

func (b *intervals) NextBackOff() time.Duration {
	if b.next >= len(b.waits) {
		return backoff.Stop
	}
	d := b.waits[b.next]
	b.next++
	return d
}

func (b *intervals) Reset() { b.next = 0 }

// acquire takes the patron's lock. The configured retry intervals are a
// budget, not a schedule of sleeps: the first attempt asks storage to wait
// up to their sum (never past the request's deadline) and is answered the
// moment the holder releases the lock, so a patron's burst of scans goes
// through at once. The intervals keep their schedule for what waiting
// cannot cover: storage failing transiently (5xx, no answer), and a held
// lock answered at once (a storage that does not wait, such as FOLIO's);
// each retry then asks for the budget that is left. A held lock after
// storage waited out the budget, or a 4xx, ends it. Every attempt names the
// same lock id, chosen here: if an attempt's answer is lost after storage
// granted the lock, the next attempt gets the same lock back instead of
// finding itself in the way, and a lock whose grant was never heard of can
// still be released.
func (s *Service) acquire(ctx context.Context, patron Patron, settings LockSettings, holder LockHolder) (Lock, error) {
	start := s.now()
	giveUp := start.Add(locksettings.Total(settings.RetryIntervals))
	attempts := 0
	lockID := uuid.NewString()
	var lock Lock
	var last error // the last attempt's own answer
	err := backoff.RetryNotifyWithTimer(func() error {
		attempts++
		wait := waitWithin(ctx, giveUp.Sub(s.now()))
		if !s.waitAtStorage {
			wait = 0
		}
		lock, last = s.storage.AcquireLock(ctx, patron.ID, lockID, settings.LockTTL, wait, holder)
		switch {
		case last == nil || errs.IsKind(last, errs.KindUnavailable):
			return last
		case errs.IsCode(last, schemas.CodeLockHeld) && !storageWaited(last):
			return last
		}
		return backoff.Permanent(last)
	}, backoff.WithContext(&intervals{waits: settings.RetryIntervals}, ctx), nil, s.newTimer())
	wait := s.now().Sub(start)
	if err == nil {
		s.observer.LockAcquired(attempts, wait)
		return lock, nil
	}
	s.observer.LockNotAcquired(attempts, wait)
	if last != nil && ambiguous(last) {
		// The last attempt may have been granted unheard: give it back.
		s.giveBack(ctx, lockID)
	}
	switch {
	case errs.IsCode(err, schemas.CodeLockHeld):
		return Lock{}, unableToAcquire(err, patron, attempts)
	case ctx.Err() != nil:
		return Lock{}, fmt.Errorf("acquire lock: %w", ctx.Err())
	}
	return Lock{}, err
}

// unableToAcquire is FOLIO's refusal of a check-out whose patron's lock
// stayed held (held, storage's answer) through attempts tries, naming the
// check-out that held it, as storage named it.
func unableToAcquire(held error, patron Patron, attempts int) *errs.Error {
	refusal := errs.Errorf(errs.KindInvalid, schemas.CodeUnableToAcquireLock, "unable to acquire lock").
		With("userBarcode", patron.Barcode).With("attempts", strconv.Itoa(attempts))
	if e, ok := errs.As(held); ok {
		for _, p := range e.Parameters {
			if strings.HasPrefix(p.Key, "holder") {
				refusal.With(p.Key, p.Value)
			}
		}
	}
	return refusal.Because(held)
}

// deadlineMargin is kept free at the end of a request's deadline, so that a
// wait for the lock ends in time for the check-out to answer.
const deadlineMargin = time.Second

// waitWithin is d, cut so that it ends deadlineMargin before ctx's deadline,
// and never negative.
func waitWithin(ctx context.Context, d time.Duration) time.Duration {
	if dl, ok := ctx.Deadline(); ok {
		d = min(d, time.Until(dl)-deadlineMargin)
	}
	return max(d, 0)
}

// storageWaited reports whether a held-lock answer came after storage
// waited for the lock (it then names waitedMs), rather than at once.
func storageWaited(err error) bool {
	e, ok := errs.As(err)
	if !ok {
		return false
	}
	for _, p := range e.Parameters {
		if p.Key == "waitedMs" {
			return true
		}
	}
	return false
}

// release gives the lock back on every path of a check-out, including a
// cancelled request (it runs on a context of its own, bounded by
// releaseTimeout). A failed release is logged and counted, and never changes
// the answer: the lock expires by itself within its TTL.
func (s *Service) release(ctx context.Context, lock Lock) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.releaseTimeout)
	defer cancel()
	// A transient failure is retried twice, quickly: a lock left behind
	// makes the patron's next check-out wait for its TTL, but the patron at
	// the desk should not wait long for this one's answer either.
	err := s.retryAmbiguous(rctx, 2, func() error { return s.storage.ReleaseLock(rctx, lock.ID) })
	s.observer.LockReleased(err)
	if err != nil && !errs.IsKind(err, errs.KindNotFound) {
		s.logger.WarnContext(ctx, "lock release failed; it expires by itself",
			slog.String("lock_id", lock.ID), slog.Time("expires_at", lock.ExpiresAt), slog.Any("error", err))
	}
}

// giveBack releases a lock whose grant may have gone unheard (the last
// attempt had no answer): usually there is nothing to release.
func (s *Service) giveBack(ctx context.Context, lockID string) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.releaseTimeout)
	defer cancel()
	if err := s.storage.ReleaseLock(rctx, lockID); err != nil && !errs.IsKind(err, errs.KindNotFound) {
		s.logger.DebugContext(ctx, "giving back an unheard lock failed; it expires by itself",
			slog.String("lock_id", lockID), slog.Any("error", err))
	}
}

// WriteTimeout bounds the write phase of a check-out or check-in, which runs
// to the end even when the request is cancelled: once the item is changed,
// leaving before the loan is settled could leave them disagreeing. A request
// may therefore take up to its own timeout plus this (plus the release of
// its lock).
const WriteTimeout = 15 * time.Second

// written is a check-out's write as done: its result, and whether storage
// released the lock in the write's transaction.
type written struct {
	CheckOutResult
	lockReleased bool
	// lockWaited is how long a write that acquired its lock waited for it.
	lockWaited time.Duration
}

// validateWithSettings validates the check-out and returns the settings in
// effect. Settings the cache does not hold come with the validation's one
// read (storage carries the tenant's entry in it), so a check-out makes
// three calls to storage whether or not its tenant's settings were cached;
// a storage that does not carry them is asked in a call of its own.
// validate's error comes first; settings read with a refused check-out are
// kept all the same.
func (s *Service) validateWithSettings(ctx context.Context, req CheckOutRequest) (checkOut, LockSettings, error) {
	settings, cached := s.settings.Cached(ctx)
	mark := s.settings.Mark()
	co, err := s.validate(ctx, req)
	if cached {
		return co, settings, err
	}
	if read := co.lockSetting; read != nil {
		return co, s.settings.FromRead(ctx, *read, mark), err
	}
	if err != nil {
		return co, LockSettings{}, err
	}
	settings, err = s.settings.Effective(ctx)
	return co, settings, err
}
