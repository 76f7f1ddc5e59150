package postgres

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	storage "github.com/checkoutlock/circulation-storage"
	"github.com/checkoutlock/schemas"
	"github.com/checkoutlock/schemas/errs"
)

// A write's id (storage.Write) is stored by the write's own transaction,
// first (ClaimSQL): a second transaction storing the same id waits for the
// first to end, then stores it (the first wrote nothing and took it away)
// or fails (the first landed). Before it commits, the write keeps its
// answer with the id (AnswerSQL), or, having written nothing, takes the id
// away (UnclaimSQL). So the one question "did the write with this id
// land?" is answered by the row of its id (Landed), never by reading the
// records back; and a write run again with its id, by storage after its
// connection broke or by a caller whose answer was lost, is the same
// write: it answers the stored answer, or, when the first never landed,
// is judged and written now, once.
var (
	// ClaimSQL stores a write's id, with its arguments named (ClaimArgs):
	// the tenant, the id, its kind and the digest of the client's request
	// (NULL: none).
	ClaimSQL = WithTables(`INSERT INTO %s (tenant_id, id, kind, digest) VALUES (@tenant, @id, @kind, @digest)`, TableWriteLog)
	// AnswerSQL keeps the answer of the write that stored the id.
	// Parameters: $1 the tenant, $2 the id, $3 the answer (NULL: none).
	AnswerSQL = WithTables(`UPDATE %s SET answer = $3 WHERE tenant_id = $1 AND id = $2`, TableWriteLog)
	// landedSQL reads the row of a write's id. Parameters: $1 the tenant,
	// $2 the id.
	landedSQL = WithTables(`SELECT id::text, kind, coalesce(digest, ''), answer, written_at FROM %s WHERE tenant_id = $1 AND id = $2`, TableWriteLog)
)

// writeLogKey is the primary key of the write log, whose violation by
// ClaimSQL says the id is stored already.
const writeLogKey = "write_log_pkey"

// ClaimArgs are ClaimSQL's arguments for the write w of kind.
func ClaimArgs(t storage.Tenant, w storage.Write, kind string) pgx.StrictNamedArgs {
	return pgx.StrictNamedArgs{"tenant": string(t), "id": w.ID, "kind": kind, "digest": Nullable(w.Digest)}
}

// Claimed reports whether err is a write's failure to store its id
// because a write with that id landed first.
func Claimed(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == pgerrcode.UniqueViolation && pgErr.ConstraintName == writeLogKey
}

// Landed is the write with id that landed, found false when none has
// (none committed yet, or its row is past storage.WriteKeptFor).
func (db *DB) Landed(ctx context.Context, t storage.Tenant, id string) (storage.Landed, bool, error) {
	var l storage.Landed
	err := db.Pool.QueryRow(ctx, landedSQL, string(t), id).Scan(&l.ID, &l.Kind, &l.Digest, &l.Answer, &l.WrittenAt)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return storage.Landed{}, false, nil
	case err != nil:
		return storage.Landed{}, false, Interpret(err, t)
	}
	return l, true, nil
}

// Replay is the answer of the write w of kind, whose id a write that
// landed first stored (Claimed): that write's answer, or a refusal when
// it was another kind of write or made for another request (another
// digest). Found not to have landed after all (its row gone past
// storage.WriteKeptFor meanwhile), it is ErrNotLanded: the write may run
// again.
func (db *DB) Replay(ctx context.Context, t storage.Tenant, w storage.Write, kind string) (json.RawMessage, error) {
	l, found, err := db.Landed(ctx, t, w.ID)
	switch {
	case err != nil:
		return nil, err
	case !found:
		return nil, ErrNotLanded
	}
	if err := Same(l, w, kind); err != nil {
		return nil, err
	}
	return l.Answer, nil
}

// Same refuses the write w of kind sent again with the id of l, a write
// that landed, when it is not the same write: another kind, or another
// client's request (both digests known and different).
func Same(l storage.Landed, w storage.Write, kind string) error {
	if l.Kind != kind || (l.Digest != "" && w.Digest != "" && l.Digest != w.Digest) {
		return errs.Errorf(errs.KindInvalid, schemas.CodeIdempotencyKeyReused,
			"The write's id (its Idempotency-Key) was used by another request, a %s written at %s; nothing was written",
			l.Kind, schemas.FormatTime(l.WrittenAt)).With("writeId", w.ID)
	}
	return nil
}

// ErrNotLanded is a write whose id a transaction took and then gave up,
// found out while its retry looked for the answer: nothing of it landed.
var ErrNotLanded = errors.New("the write whose id was taken did not land")

// InTxOnce runs fn, a write of kind, in a transaction that stores the
// write's id (storage.WriteFrom) first and keeps fn's answer with it, and
// returns that answer (see Once). Without a write in ctx, fn runs in a
// plain transaction.
func (db *DB) InTxOnce(ctx context.Context, t storage.Tenant, kind string, fn func(tx pgx.Tx) (json.RawMessage, error)) (json.RawMessage, error) {
	var answer json.RawMessage
	err := db.Once(ctx, t, kind, func(c *pgx.Conn, id *storage.Write) error {
		return inTx(ctx, c, t, func(tx pgx.Tx) error {
			if id != nil {
				if _, err := tx.Exec(ctx, ClaimSQL, ClaimArgs(t, *id, kind)); err != nil {
					return err
				}
			}
			var err error
			if answer, err = fn(tx); err != nil {
				return err
			}
			if id != nil {
				if _, err := tx.Exec(ctx, AnswerSQL, string(t), id.ID, answer); err != nil {
					return Interpret(err, t)
				}
			}
			return nil
		})
	})
	return answer, err
}

// Once runs run, a write of kind, on a connection of its own. With a
// write in ctx (storage.WriteFrom), run is given it and must store its id
// first, in the write's transaction (ClaimSQL), and keep its answer
// (AnswerSQL) or take the id away (AnsweredSQL) before it commits; a run
// whose connection broke is run again on a fresh one while ctx lasts
// (WriteIdentified), and a write whose id landed before answers that
// write's answer, as a *storage.Replayed error, having written nothing.
// Without one, run is given nil and runs as Write runs it.
func (db *DB) Once(ctx context.Context, t storage.Tenant, kind string, run func(c *pgx.Conn, id *storage.Write) error) error {
	w, identified := storage.WriteFrom(ctx)
	if !identified {
		return db.Write(ctx, t, func(c *pgx.Conn) error { return run(c, nil) })
	}
	for attempt := 1; ; attempt++ {
		err := db.WriteIdentified(ctx, t, func(c *pgx.Conn) error { return run(c, &w) })
		if !Claimed(err) {
			return err
		}
		answer, err := db.Replay(ctx, t, w, kind)
		if errors.Is(err, ErrNotLanded) && attempt < maxDeadAttempts {
			continue
		}
		if err != nil {
			return err
		}
		return &storage.Replayed{Answer: answer}
	}
}

// AnsweredSQL is two common table expressions of a write's one statement
// that settle its id (claimed by the statement before): kept with the
// answer (answer, SQL of its JSON) when the statement wrote (written, an
// SQL condition), taken away when it did not. The statement's @tenant and
// @write_id (NULL: no id) name the write. The second's parenthesis is
// left for the statement to close.
func AnsweredSQL(answer, written string) string {
	log := Table(TableWriteLog)
	return `answered AS (
    UPDATE ` + log + ` SET answer = ` + answer + `
     WHERE tenant_id = @tenant AND id = @write_id::uuid AND ` + written + `
), unclaimed AS (
    DELETE FROM ` + log + `
     WHERE tenant_id = @tenant AND id = @write_id::uuid AND NOT ` + written
}

// WriteID is the id of the write ctx carries, as a statement's
// @write_id: nil without one.
func WriteID(ctx context.Context) *string {
	if w, ok := storage.WriteFrom(ctx); ok {
		return &w.ID
	}
	return nil
}

// WriteIdentified is Write for a write whose fn stores its id first
// (ClaimSQL): one whose connection broke while it ran (cut, its server
// process ended), whatever it had sent, is run again on a fresh
// connection while ctx lasts, up to maxDeadAttempts runs in all. The
// second run's id waits for the first's transaction, if it is still
// running, and lands only if the first did not.
func (db *DB) WriteIdentified(ctx context.Context, t storage.Tenant, fn func(c *pgx.Conn) error) error {
	err := db.writeOnce(ctx, t, fn)
	for attempt := 1; attempt < maxDeadAttempts && ctx.Err() == nil && brokenOrDead(err); attempt++ {
		db.Pool.Reset()
		err = db.writeOnce(ctx, t, fn)
	}
	var dead *DeadBeforeRun
	var broken *Broken
	switch {
	case errors.As(err, &dead):
		return dead.Err
	case errors.As(err, &broken):
		return broken.Err
	}
	return err
}

// brokenOrDead reports whether err is a write's whose connection was dead
// before it ran, or broke while it ran.
func brokenOrDead(err error) bool {
	var dead *DeadBeforeRun
	var broken *Broken
	return errors.As(err, &dead) || errors.As(err, &broken)
}

// inTx runs fn in a transaction on c that commits when fn returns nil,
// and answers fn's error as it is.
func inTx(ctx context.Context, c *pgx.Conn, t storage.Tenant, fn func(tx pgx.Tx) error) error {
	tx, err := c.Begin(ctx)
	if err != nil {
		if DeadConnection(err) {
			return &DeadBeforeRun{Err: err}
		}
		return Interpret(err, t)
	}
	// Rollback after Commit is a no-op; on error paths it ends the
	// transaction even if ctx was cancelled.
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	if err := fn(tx); err != nil {
		return err
	}
	if err := tx.Commit(ctx); err != nil {
		return Interpret(err, t)
	}
	return nil
}
