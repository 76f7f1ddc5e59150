package lending

import (
	"context"
	"encoding/json"
	"strings"

	"github.com/checkoutlock/circulation-storage/internal/postgres"
	"github.com/checkoutlock/circulation-storage/internal/record"
	"github.com/checkoutlock/schemas"
	"github.com/checkoutlock/schemas/loanhistory"
	"github.com/jackc/pgx/v5"

	storage "github.com/checkoutlock/circulation-storage"
)

// A closed loan forgets its borrower when the tenant's loan history
// settings say (loanhistory: immediately, some time after its return, or
// never), as FOLIO's closed loans are anonymized: its userId and borrower
// are removed, its version moves on, and its change is announced as every
// loan's is (the outbox). Only a closed loan is anonymized: the statement
// takes each loan's row lock and judges it closed under it, so a loan a
// check-in is closing is anonymized, if at all, after the check-in
// committed, and an open one never.

// anonymizeSQL anonymizes at most @batch of the closed loans of @tenant
// that still name their borrower, returned at least @after_ms ago
// (returnedAt; NULL: at once), while its loan history settings are still
// @settings (settingsStill). Rows another transaction holds are left for
// the next time. It answers the ids anonymized.
var anonymizeSQL = anonymizing(closedLoan)

// anonymizeLoansSQL anonymizes those of the loans @ids that are closed
// and still name their borrower, waiting for each loan's row lock (a
// check-in in flight is judged after it commits), and answers each id
// with what it did: "" anonymized, or why not (storage.NotAnonymized*).
var anonymizeLoansSQL = anonymizingLoans(closedLoan)

// returnedAt is when the closed loan l was returned: its returnDate, or,
// for a loan stored closed without one, when it was last written.
const returnedAt = `coalesce(l.jsonb ->> 'returnDate', l.jsonb -> 'metadata' ->> 'updatedDate')`

// closedLoan is SQL true of a closed loan l.
var closedLoan = `l.status_name = ` + postgres.Lit(schemas.LoanClosed)

// forgetBorrower is the loan row l's document without its borrower, one
// version on.
var forgetBorrower = record.WithMetadata(`jsonb_set(l.jsonb - 'userId' - 'borrower', '{_version}', to_jsonb(coalesce((l.jsonb ->> '_version')::integer, 1) + 1))`, "@metadata_user", true)

// anonymizing is anonymizeSQL of the loans closed (SQL on the row l)
// says are closed: judged when they are chosen and again under their row
// lock.
func anonymizing(closed string) string {
	return `
WITH chosen AS (
    SELECT l.id FROM ` + postgres.Table(postgres.TableLoan) + ` l
     WHERE l.tenant_id = @tenant AND ` + closed + ` AND l.user_id IS NOT NULL AND ` + settingsStill + `
       AND (@after_ms::bigint IS NULL
            OR ` + postgres.StoredTime(returnedAt, "loan returnDate") + ` < now() - @after_ms::bigint * interval '1 millisecond')
     ORDER BY l.id
     LIMIT @batch
       FOR UPDATE SKIP LOCKED
)
UPDATE ` + postgres.Table(postgres.TableLoan) + ` l
   SET jsonb = ` + forgetBorrower + `
  FROM chosen c
 WHERE l.tenant_id = @tenant AND l.id = c.id AND ` + closed + `
RETURNING l.id::text`
}

// anonymizingLoans is anonymizeLoansSQL of the loans closed says are
// closed, judged on each row as its lock gave it.
func anonymizingLoans(closed string) string {
	return `
WITH chosen AS (
    SELECT l.id, l.user_id IS NULL AS anonymous, ` + closed + ` AS closed
      FROM ` + postgres.Table(postgres.TableLoan) + ` l
     WHERE l.tenant_id = @tenant AND l.id = ANY (@ids::uuid[])
     ORDER BY l.id
       FOR UPDATE
), anonymized AS (
    UPDATE ` + postgres.Table(postgres.TableLoan) + ` l
       SET jsonb = ` + forgetBorrower + `
      FROM chosen c
     WHERE l.tenant_id = @tenant AND l.id = c.id AND c.closed AND NOT c.anonymous
    RETURNING l.id
)
SELECT i.id::text,
       CASE WHEN a.id IS NOT NULL THEN ''
            WHEN c.id IS NULL THEN ` + postgres.Lit(storage.NotAnonymizedNotFound) + `
            WHEN c.anonymous THEN ` + postgres.Lit(storage.NotAnonymizedBefore) + `
            ELSE ` + postgres.Lit(storage.NotAnonymizedOpen) + ` END
  FROM unnest(@ids::uuid[]) AS i (id)
  LEFT JOIN chosen c ON c.id = i.id
  LEFT JOIN anonymized a ON a.id = i.id
 ORDER BY i.id`
}

// settingsStill is SQL true while the loan history settings entry of
// @tenant still holds the value @settings (jsonb) a pass read: what the
// pass does by them is done only then, in the statement that does it, so
// a librarian's change made while the pass works is never overtaken by
// what the pass read before it (a statement begun before the change
// committed is ordered before it).
var settingsStill = `EXISTS (SELECT 1 FROM ` + postgres.Table(postgres.TableSetting) + ` s
              WHERE s.tenant_id = @tenant AND s.scope = ` + postgres.Lit(loanhistory.Scope) + `
                AND s.key = ` + postgres.Lit(loanhistory.Key) + ` AND s.jsonb -> 'value' = @settings::jsonb)`

// forgetHistorySQL deletes at most @batch of @tenant's lock history
// entries older than @kept_ms milliseconds, while its loan history
// settings are still @settings (settingsStill): a tenant whose closed
// loans forget their borrower keeps its patrons in the lock history no
// longer than in its loans (loanhistory.Settings.Kept).
var forgetHistorySQL = `
DELETE FROM ` + postgres.Table(postgres.TableLockEvent) + `
 WHERE tenant_id = @tenant
   AND id IN (SELECT id FROM ` + postgres.Table(postgres.TableLockEvent) + `
               WHERE tenant_id = @tenant AND occurred_at < now() - @kept_ms::bigint * interval '1 millisecond'
               ORDER BY occurred_at LIMIT @batch)
   AND ` + settingsStill

// ReadSettings are a tenant's loan history settings as a pass read them
// (Anonymizer.Settings): what they say, and the entry's value as read,
// which whatever is done by them names (settingsStill).
type ReadSettings struct {
	loanhistory.Settings
	value json.RawMessage
}

// Anonymizer anonymizes closed loans.
type Anonymizer struct{ db *postgres.DB }

// NewAnonymizer returns the anonymizer.
func NewAnonymizer(db *postgres.DB) *Anonymizer { return &Anonymizer{db: db} }

// Due anonymizes at most batch of t's closed loans that its settings s say
// are due (none when they never anonymize), while t's settings are still
// s, and answers their ids.
func (a *Anonymizer) Due(ctx context.Context, t storage.Tenant, s ReadSettings, batch int) ([]string, error) {
	if !s.Anonymizes() {
		return nil, nil
	}
	var after *int64
	if s.Closing == loanhistory.Interval {
		ms := s.Kept().Milliseconds()
		after = &ms
	}
	return a.anonymize(ctx, t, s.value, after, batch)
}

// ForgetHistory deletes at most batch of t's lock history entries older
// than its settings s keep its closed loans' borrowers (none when they
// never anonymize), while t's settings are still s, and answers how many
// it deleted.
func (a *Anonymizer) ForgetHistory(ctx context.Context, t storage.Tenant, s ReadSettings, batch int) (int64, error) {
	if !s.Anonymizes() {
		return 0, nil
	}
	tag, err := a.db.Pool.Exec(ctx, forgetHistorySQL, pgx.StrictNamedArgs{"tenant": string(t), "settings": string(s.value),
		"kept_ms": s.Kept().Milliseconds(), "batch": batch})
	if err != nil {
		return 0, postgres.Interpret(err, t)
	}
	return tag.RowsAffected(), nil
}

// AnonymizeLoans implements storage.LoanAnonymizer (FOLIO's
// anonymize-storage-loans): whatever the settings, an open loan never.
func (a *Anonymizer) AnonymizeLoans(ctx context.Context, t storage.Tenant, ids []string) (storage.Anonymization, error) {
	out := storage.Anonymization{Anonymized: []string{}, NotAnonymized: []storage.NotAnonymized{}}
	ids = distinct(ids)
	if len(ids) == 0 {
		return out, nil
	}
	why := map[string][]string{}
	err := a.db.InTx(ctx, t, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, anonymizeLoansSQL, pgx.StrictNamedArgs{"tenant": string(t), "ids": ids,
			"metadata_user": record.MetadataUser(ctx)})
		if err != nil {
			return err
		}
		clear(why)
		out.Anonymized = out.Anonymized[:0]
		var id, reason string
		_, err = pgx.ForEachRow(rows, []any{&id, &reason}, func() error {
			if reason == "" {
				out.Anonymized = append(out.Anonymized, id)
			} else {
				why[reason] = append(why[reason], id)
			}
			return nil
		})
		return err
	})
	if err != nil {
		return storage.Anonymization{}, postgres.Interpret(err, t)
	}
	for _, reason := range []string{storage.NotAnonymizedOpen, storage.NotAnonymizedBefore, storage.NotAnonymizedNotFound} {
		if len(why[reason]) > 0 {
			out.NotAnonymized = append(out.NotAnonymized, storage.NotAnonymized{Reason: reason, LoanIDs: why[reason]})
		}
	}
	return out, nil
}

// distinct is ids in lower case, each once, in their order.
func distinct(ids []string) []string {
	seen := make(map[string]bool, len(ids))
	out := make([]string, 0, len(ids))
	for _, id := range ids {
		if id = strings.ToLower(id); !seen[id] {
			seen[id] = true
			out = append(out, id)
		}
	}
	return out
}

func (a *Anonymizer) anonymize(ctx context.Context, t storage.Tenant, settings json.RawMessage, afterMs *int64, batch int) ([]string, error) {
	var out []string
	err := a.db.InTx(ctx, t, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, anonymizeSQL, pgx.StrictNamedArgs{"tenant": string(t), "settings": string(settings), "after_ms": afterMs,
			"batch": batch, "metadata_user": record.MetadataUser(ctx)})
		if err != nil {
			return err
		}
		out, err = pgx.CollectRows(rows, pgx.RowTo[string])
		return err
	})
	if err != nil {
		return nil, postgres.Interpret(err, t)
	}
	if out == nil {
		out = []string{}
	}
	return out, nil
}

// Settings reads every tenant's loan history settings that anonymize,
// decoded as storage checked them when they were written
// (loanhistory.Decode); an entry that cannot be read (written before the
// check) anonymizes nothing.
func (a *Anonymizer) Settings(ctx context.Context) (map[storage.Tenant]ReadSettings, error) {
	rows, err := a.db.Pool.Query(ctx, `SELECT tenant_id, jsonb -> 'value' FROM `+postgres.Table(postgres.TableSetting)+
		` WHERE scope = $1 AND key = $2`, loanhistory.Scope, loanhistory.Key)
	if err != nil {
		return nil, postgres.Interpret(err, "")
	}
	out := map[storage.Tenant]ReadSettings{}
	for rows.Next() {
		var t string
		var value json.RawMessage
		if err := rows.Scan(&t, &value); err != nil {
			rows.Close()
			return nil, postgres.Interpret(err, "")
		}
		if s, fe := loanhistory.Decode(value); fe == nil && s.Anonymizes() {
			out[storage.Tenant(t)] = ReadSettings{Settings: s, value: value}
		}
	}
	return out, postgres.Interpret(rows.Err(), "")
}
