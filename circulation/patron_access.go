package circulation

import (
	"context"

	"github.com/checkoutlock/schemas"
	"github.com/checkoutlock/schemas/errs"
)

// PatronAccess is what a caller may learn of a patron and do for them:
// Details, who any patron is and what they hold, and acting for them
// without their PIN (a librarian); otherwise those come with the PIN the
// patron typed (Pin, "" for none), right. A patron summary and a renewal
// ask it alike.
type PatronAccess struct {
	Details bool
	Pin     string
}

// PinRequired says whether the tenant requires a patron's PIN of a
// self-check machine acting for the patron (its selfCheck settings entry,
// read with the decoder storage checks its writes with). The entry is read
// on every call, not cached: a tenant that turns PINs on holds the next
// request to them. An entry that cannot be decoded requires PINs (it is
// logged): a value nobody can read must not let a kiosk act for a patron
// on the card alone.
func (s *Service) PinRequired(ctx context.Context) (bool, error) {
	settings, err := s.selfCheck(ctx)
	return settings.PinRequired(), err
}

// pinBeforeAnything refuses, before anything of the patron or the item is
// read, a caller without Details that gives no PIN where the tenant
// requires one (CodePinRequired): one answer whichever patron and item it
// names, so that it learns nothing of either, not even whether the
// patron holds the item.
func (s *Service) pinBeforeAnything(ctx context.Context, access PatronAccess) error {
	if access.Details || access.Pin != "" {
		return nil
	}
	required, err := s.PinRequired(ctx)
	if err != nil {
		return err
	}
	if required {
		return errs.Errorf(errs.KindInvalid, schemas.CodePinRequired, "The patron's PIN is required")
	}
	return nil
}

// named checks a PIN given for patron (nil for no such patron; counted at
// storage before it is checked, as every PIN guess) and says whether the
// caller may be told who the patron is: with Details, or with the
// patron's right PIN. A wrong PIN, or one for no patron, is
// CodePinInvalid, and a locked one CodePinLocked, with nothing told.
func (s *Service) named(ctx context.Context, patron *Patron, access PatronAccess) (bool, error) {
	if access.Pin == "" {
		return access.Details, nil
	}
	if patron == nil {
		return false, errs.Errorf(errs.KindInvalid, schemas.CodePinInvalid, "Wrong PIN")
	}
	if err := s.storage.VerifyPin(ctx, patron.ID, access.Pin); err != nil {
		return false, err
	}
	return true, nil
}

// Unnamed is the patron as a caller who may not be told who they are
// sees them: by the barcode it gave (barcode: the one read by, or the one
// a call sent again gave before the patron's was changed), and whether
// they are active; no id and no name.
func (p Patron) Unnamed(barcode string) Patron {
	return Patron{Barcode: barcode, Active: p.Active, ExpirationDate: p.ExpirationDate}
}
