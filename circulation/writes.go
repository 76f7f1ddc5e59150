package circulation

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"time"

	"github.com/checkoutlock/schemas"
	"github.com/checkoutlock/schemas/errs"
	"github.com/google/uuid"
)

// Write is a call's write: the id every write it makes at storage carries
// (schemas.HeaderWriteID), which storage stores in the write's own
// transaction. So whether the write landed is asked of its id: sent again
// with it, the write is the same write, answered from its id when it
// landed, written now when it did not (Service.once).
type Write struct {
	// ID is a UUID: a random one per call, or one made from the client's
	// Idempotency-Key (Keyed).
	ID string
	// Digest is the digest of the client's request, when Keyed: the key
	// sent again with another request is refused.
	Digest string
	// Keyed says the id was made from the client's Idempotency-Key: the
	// client's call sent again with it is the same call, and a call
	// refused before it wrote answers the write that landed with the key,
	// if one did (Service.landed).
	Keyed bool
}

type writeKey struct{}

// WithWrite is ctx carrying the call's write w.
func WithWrite(ctx context.Context, w Write) context.Context {
	return context.WithValue(ctx, writeKey{}, w)
}

// WriteOf is the write ctx carries, if any.
func WriteOf(ctx context.Context) (Write, bool) {
	w, ok := ctx.Value(writeKey{}).(Write)
	return w, ok && w.ID != ""
}

// identified is ctx carrying a write: its own, or a new one for this call.
func identified(ctx context.Context) context.Context {
	if _, ok := WriteOf(ctx); ok {
		return ctx
	}
	return WithWrite(ctx, Write{ID: uuid.NewString()})
}

// Landed is a write that landed, as storage keeps it by its id, with what
// it answered, decoded for the kind of write it was.
type Landed struct {
	// Kind is the write's (schemas.WriteCheckOut and the like), Digest
	// the digest of the client's request it was made for.
	Kind, Digest string
	// Loan is a check-out's or a renewal's loan (never nil for those:
	// Storage.Landed answers them with it), or the loan a check-in closed,
	// as written.
	Loan *Loan
	// Returned is what a check-in left.
	Returned *Returned
	// Request is a request as written.
	Request json.RawMessage
	// FeeFine is an action on fees/fines' answer, as written.
	FeeFine json.RawMessage
}

// settleInterval is how long a write whose answer was lost waits before
// it is sent again.
const settleInterval = 100 * time.Millisecond

// settled is once for a call's one write: from the moment it is sent the
// caller cannot cancel it (a write once begun is settled), and it has
// WriteTimeout to settle.
func (s *Service) settled(request context.Context, send func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(request), WriteTimeout)
	defer cancel()
	return s.once(request, ctx, send)
}

// once runs send, a write at storage carrying the id of the write ctx
// carries, and answers whether it landed, exactly: a write whose answer
// was lost (ambiguous) is sent again with its id, every settleInterval for
// up to the service's settle timeout while request (the call that made it) waits, and
// storage answers it from its id when it landed, judges and writes it now
// when it did not, or, while the first is still running, waits for it.
// Only a write storage never answers within that time comes back
// ambiguous: its outcome is not known. A first send that never left
// (ErrNotSent) wrote nothing, and is answered so.
func (s *Service) once(request, ctx context.Context, send func(context.Context) error) error {
	err := send(ctx)
	if !ambiguous(err) {
		return err
	}
	sctx, cancel := context.WithTimeout(ctx, s.settleTimeout)
	defer cancel()
	for {
		timer := time.NewTimer(settleInterval)
		select {
		case <-sctx.Done():
			timer.Stop()
			w, _ := WriteOf(ctx)
			s.logger.WarnContext(ctx, "write outcome unknown: storage did not answer it again in time",
				slog.String("write_id", w.ID), slog.Any("error", err))
			return err
		case <-request.Done():
			// Nobody waits for the answer any more: the write stays as
			// it is, and its id answers a client that sends it again.
			timer.Stop()
			return err
		case <-timer.C:
		}
		again := send(sctx)
		if errors.Is(again, ErrNotSent) || errs.IsCode(again, schemas.CodeCheckOutsBusy) {
			// Storage not reached this time, or too busy to take this
			// send (it wrote nothing): the first send's outcome is still
			// not known.
			continue
		}
		if err = again; !ambiguous(err) {
			return err
		}
	}
}

// landed answers a call that failed (err) with the write that landed with
// its id, when one did: a call whose write's outcome is not known (sent
// again and never answered, its id read now), and a keyed call refused
// before it wrote (sent again after its answer was lost, or at once with
// another, the item lent by its own write): found, the call is the same
// call. A write of another kind, or for another request, refuses the call
// (schemas.CodeIdempotencyKeyReused). Storage not answering leaves err as
// it is.
func (s *Service) landed(ctx context.Context, kind string, err error) (Landed, bool, error) {
	w, ok := WriteOf(ctx)
	if !ok || err == nil || (!w.Keyed && !ambiguous(err)) {
		return Landed{}, false, err
	}
	l, found, lerr := s.landedAs(ctx, w, kind)
	switch {
	case found:
		return l, true, nil
	case errs.IsCode(lerr, schemas.CodeIdempotencyKeyReused):
		return Landed{}, false, lerr
	}
	return Landed{}, false, err
}

// landedAs is the write w, of kind, when it landed (found); not found,
// KeyReused when w's id is another request's write, or storage's error
// when it did not answer.
func (s *Service) landedAs(ctx context.Context, w Write, kind string) (Landed, bool, error) {
	l, found, err := s.storage.Landed(ctx, w.ID)
	switch {
	case err != nil || !found:
		return Landed{}, false, err
	case l.Kind != kind || (l.Digest != "" && l.Digest != w.Digest):
		return Landed{}, false, KeyReused(l.Kind)
	}
	return l, true, nil
}

// ofLoan is the item and the patron a loan whose write landed is answered
// with: those the call read (reads) where they are the loan's, else read
// again by the loan's ids (a call sent again with its Idempotency-Key
// after a barcode was removed or given to another record is answered its
// own loan's, never the records it read). Where they cannot be read
// (storage's database out of reach, say), they are as the loan names them
// (its policy too), the item checked out, never a failure that would tell
// the client nothing happened.
func (s *Service) ofLoan(ctx context.Context, loan Loan, reads CheckOutReads) CheckOutReads {
	if reads.Item != nil && reads.Patron != nil && loan.of(reads.Item.ID, reads.Patron.ID) {
		return reads
	}
	again, err := s.storage.ReadForCheckOutByID(ctx, loan.ItemID, loan.UserID)
	if err != nil {
		s.logger.WarnContext(ctx, "write landed: its loan's item and patron could not be read for its answer",
			slog.String("loan_id", loan.ID), slog.Any("error", err))
		again = CheckOutReads{Policy: LoanPolicy{ID: loan.LoanPolicyID}}
	}
	if again.Item == nil {
		again.Item = &Item{ID: loan.ItemID, Status: schemas.ItemCheckedOut}
	}
	if again.Patron == nil {
		again.Patron = &Patron{ID: loan.UserID}
	}
	return again
}

// KeyReused is the refusal of a call whose Idempotency-Key a write of
// kind, made for another request, landed with.
func KeyReused(kind string) *errs.Error {
	return errs.Errorf(errs.KindInvalid, schemas.CodeIdempotencyKeyReused,
		"The Idempotency-Key was sent before with another request (a %s); nothing was written", kind)
}

// unanswered is a write of what (a check-out, a check-in, ...) that was
// sent, and sent again with its id, and never answered (err): 503,
// naming the record it writes (key, id) and its write id (writeId), so
// that a client, an operator or a test can tell it from a call that
// failed before it wrote anything, and send it again with its
// Idempotency-Key, or look the record up.
func unanswered(ctx context.Context, err error, what, key, id string) error {
	e := errs.Errorf(errs.KindUnavailable, schemas.CodeStorageUnavailable,
		"circulation-storage did not answer the %s's write, sent again with its id; whether it was written is not known", what).
		With(key, id).Because(err)
	if w, ok := WriteOf(ctx); ok {
		e.With("writeId", w.ID)
	}
	e.RetryAfter = schemas.UnavailableRetryAfter
	return e
}
