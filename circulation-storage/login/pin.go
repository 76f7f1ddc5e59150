// Patrons' PINs: set (hashed as passwords are), and checked for a kiosk,
// each check counted against the patron and the kiosk's address before
// it is made.

package login

import (
	"context"
	"slices"
	"time"

	"github.com/checkoutlock/schemas"
	"github.com/checkoutlock/schemas/errs"
)

// PIN lengths: a kiosk's keypad takes digits, and FOLIO's patron PINs are
// short; the upper bound keeps hashing bounded.
const (
	MinPin = 4
	MaxPin = 64
)

func pinKey(patronID string) string { return "pin:" + patronID }

// pinAddressKey counts the PIN checks from one address, whatever the
// patron.
func pinAddressKey(address string) string { return "pin-address:" + address }

// SetPin sets a patron's PIN (FOLIO's POST /patron-pin).
func (s *Service) SetPin(ctx context.Context, tenant, patronID, pin string) error {
	if n := len([]rune(pin)); n < MinPin || n > MaxPin {
		return errs.Errorf(errs.KindInvalid, schemas.CodeValidation, "A PIN has %d to %d characters", MinPin, MaxPin)
	}
	hash, err := s.hash(ctx, pin)
	if err != nil {
		return err
	}
	if err := s.store.SetPinHash(ctx, tenant, patronID, hash); err != nil {
		return err
	}
	return s.store.Forget(ctx, tenant, pinKey(patronID))
}

// VerifyPin checks a patron's PIN (FOLIO's POST /patron-pin/verify), tried
// from address: nil when it matches; PIN_INVALID when it does not or the
// patron has none; PIN_LOCKED (KindTooManyRequests) while MaxFailures
// wrong ones for the patron, or MaxAddressFailures from the address,
// within FailureWindow lock it, for Lockout; PIN_BUSY when no turn came
// within BusyWait. Like a sign-in, the attempt is counted before the PIN
// is checked, a wrong one ends its turn as a failure and a right one as
// nothing.
//
// The address is counted first, alone: guesses at made-up patrons from one
// address stop at its limit, without a count of their own for each beyond
// it (every count is a row until the sweeper removes it). An attempt the
// patron's count then refuses unchecked is given back to the address: what
// the address counts is the PINs checked from it.
func (s *Service) VerifyPin(ctx context.Context, tenant, patronID, pin, address string) error {
	key := pinKey(patronID)
	queue := tenant + "\x00" + key
	byAddress := []Limit{{Key: pinAddressKey(address), Max: s.cfg.MaxAddressFailures, Window: s.cfg.FailureWindow, Lockout: s.cfg.Lockout}}
	byPatron := []Limit{{Key: key, Max: s.cfg.MaxFailures, Window: s.cfg.FailureWindow, Lockout: s.cfg.Lockout}}
	if err := s.admit(ctx, tenant, queue, "pin", byAddress, byPatron); err != nil {
		return err
	}
	defer s.turns.wake(queue)
	limits := append(slices.Clone(byPatron), byAddress...)
	check, cancel := context.WithTimeout(ctx, MaxCheck)
	defer cancel()
	hash, found, err := s.store.PinHash(check, tenant, patronID)
	if err != nil {
		return s.settle(ctx, tenant, limits, Unchecked, "", err)
	}
	if !found {
		hash = s.dummy
	}
	ok, err := s.matches(check, pin, hash)
	if err != nil {
		return s.settle(ctx, tenant, limits, Unchecked, "", err)
	}
	ok = ok && found
	s.cfg.Checked("pin", ok)
	if !ok {
		return s.settle(ctx, tenant, limits, Wrong, "", errs.Errorf(errs.KindInvalid, schemas.CodePinInvalid, "Wrong PIN"))
	}
	return s.settle(ctx, tenant, limits, Right, "", nil)
}

// pinLocked is the answer while wrong PINs lock a patron's PIN.
func pinLocked(wait time.Duration) *errs.Error {
	e := errs.Errorf(errs.KindTooManyRequests, schemas.CodePinLocked, "Too many wrong PINs: try again in %d s", int(wait.Seconds())+1)
	e.RetryAfter = wait
	return e
}
