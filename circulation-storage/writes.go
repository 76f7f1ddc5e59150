package storage

import (
	"context"
	"encoding/json"
	"time"
)

// Write is a write's own identity. Its transaction stores ID first (a
// second transaction storing the same id waits for the first, then
// fails) and, before it commits, the answer it gave; a write that wrote
// nothing takes its id away again. So whether a write landed is asked of
// its id, never guessed from the records, and a write sent again with its
// id, after its answer was lost or by a client's retry, is the same write:
// it answers the stored answer and writes nothing.
type Write struct {
	// ID is a UUID: the caller's, one per call, or one made from a
	// client's Idempotency-Key.
	ID string
	// Digest is the digest of the client's request the key came with, ""
	// for none: the same id sent with another digest is refused
	// (schemas.CodeIdempotencyKeyReused).
	Digest string
}

// Landed is a write that landed, as its id's row keeps it.
type Landed struct {
	ID string `json:"id"`
	// Kind names what the write did (a WriteKind).
	Kind   string `json:"kind"`
	Digest string `json:"digest,omitempty"`
	// Answer is what the write answered (the record it wrote, as stored
	// then); absent for a write answered without a body.
	Answer    json.RawMessage `json:"answer,omitempty"`
	WrittenAt time.Time       `json:"writtenAt"`
}

// WriteKeptFor is how long a write's id, and its answer, is kept: a
// client's retry with the same Idempotency-Key within it answers the
// first call's answer; past it, the key is forgotten.
const WriteKeptFor = 24 * time.Hour

// WriteLog answers whether a write with an id landed.
type WriteLog interface {
	// Landed is the write with id that landed, found false when none
	// has (a transaction still writing it has not).
	Landed(ctx context.Context, t Tenant, id string) (Landed, bool, error)
}

type writeKey struct{}

// WithWrite is ctx carrying the write w: every write of a loan, an item
// or a request made with it stores w's id in its transaction.
func WithWrite(ctx context.Context, w Write) context.Context {
	return context.WithValue(ctx, writeKey{}, w)
}

// WriteFrom is the write ctx carries, if any.
func WriteFrom(ctx context.Context) (Write, bool) {
	w, ok := ctx.Value(writeKey{}).(Write)
	return w, ok && w.ID != ""
}

// Replayed is a write answered from its id's row: a write with its id
// landed before, and this one wrote nothing. Answer is that write's
// answer, which the route answers as it answered it then.
type Replayed struct{ Answer json.RawMessage }

func (r *Replayed) Error() string { return "the write had landed before: answered with its answer" }
