package lending

import (
	"context"
	"encoding/json"

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
// that still name their borrower: of those @ids names (NULL: any), and,
// with @after_ms (NULL: at once), returned at least that long ago (by
// their returnDate). Rows another transaction holds are left for the next
// time. It answers the ids anonymized.
var anonymizeSQL = anonymizing(`l.status_name = ` + postgres.Lit(schemas.LoanClosed))

// anonymizing is anonymizeSQL of the loans closed (SQL on the row l)
// says are closed: judged when they are chosen and again under their row
// lock.
func anonymizing(closed string) string {
	return `
WITH chosen AS (
    SELECT l.id FROM ` + postgres.Table(postgres.TableLoan) + ` l
     WHERE l.tenant_id = @tenant AND ` + closed + ` AND l.user_id IS NOT NULL
       AND (@ids::uuid[] IS NULL OR l.id = ANY (@ids::uuid[]))
       AND (@after_ms::bigint IS NULL
            OR ` + postgres.StoredTime("l.jsonb ->> 'returnDate'", "loan returnDate") + ` < now() - @after_ms::bigint * interval '1 millisecond')
     ORDER BY l.id
     LIMIT @batch
       FOR UPDATE SKIP LOCKED
)
UPDATE ` + postgres.Table(postgres.TableLoan) + ` l
   SET jsonb = ` + record.WithMetadata(`jsonb_set(l.jsonb - 'userId' - 'borrower', '{_version}', to_jsonb(coalesce((l.jsonb ->> '_version')::integer, 1) + 1))`, "@metadata_user", true) + `
  FROM chosen c
 WHERE l.tenant_id = @tenant AND l.id = c.id AND ` + closed + `
RETURNING l.id::text`
}

// Anonymizer anonymizes closed loans.
type Anonymizer struct{ db *postgres.DB }

// NewAnonymizer returns the anonymizer.
func NewAnonymizer(db *postgres.DB) *Anonymizer { return &Anonymizer{db: db} }

// Due anonymizes at most batch of t's closed loans that its settings s say
// are due (none when they never anonymize), and answers their ids.
func (a *Anonymizer) Due(ctx context.Context, t storage.Tenant, s loanhistory.Settings, batch int) ([]string, error) {
	if !s.Anonymizes() {
		return nil, nil
	}
	var after *int64
	if s.Closing == loanhistory.Interval {
		ms := s.After.Milliseconds()
		after = &ms
	}
	return a.anonymize(ctx, t, nil, after, batch)
}

// Loans anonymizes those of the loans ids that are closed (FOLIO's
// anonymize-storage-loans), whatever the settings, and answers the ids
// anonymized; an open loan, one anonymized before and one that is not
// there are not.
func (a *Anonymizer) Loans(ctx context.Context, t storage.Tenant, ids []string) ([]string, error) {
	if len(ids) == 0 {
		return []string{}, nil
	}
	return a.anonymize(ctx, t, ids, nil, len(ids))
}

func (a *Anonymizer) anonymize(ctx context.Context, t storage.Tenant, ids []string, afterMs *int64, batch int) ([]string, error) {
	var out []string
	err := a.db.InTx(ctx, t, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, anonymizeSQL, pgx.StrictNamedArgs{"tenant": string(t), "ids": ids, "after_ms": afterMs,
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
func (a *Anonymizer) Settings(ctx context.Context) (map[storage.Tenant]loanhistory.Settings, error) {
	rows, err := a.db.Pool.Query(ctx, `SELECT tenant_id, jsonb -> 'value' FROM `+postgres.Table(postgres.TableSetting)+
		` WHERE scope = $1 AND key = $2`, loanhistory.Scope, loanhistory.Key)
	if err != nil {
		return nil, postgres.Interpret(err, "")
	}
	out := map[storage.Tenant]loanhistory.Settings{}
	for rows.Next() {
		var t string
		var value json.RawMessage
		if err := rows.Scan(&t, &value); err != nil {
			rows.Close()
			return nil, postgres.Interpret(err, "")
		}
		if s, fe := loanhistory.Decode(value); fe == nil && s.Anonymizes() {
			out[storage.Tenant(t)] = s
		}
	}
	return out, postgres.Interpret(rows.Err(), "")
}
