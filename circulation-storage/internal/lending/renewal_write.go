package lending

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"

	"github.com/checkoutlock/circulation-storage/internal/postgres"
	"github.com/checkoutlock/circulation-storage/internal/records"
	"github.com/jackc/pgx/v5"

	storage "github.com/checkoutlock/circulation-storage"
	"github.com/checkoutlock/circulation-storage/locksql"
	"github.com/checkoutlock/schemas"
	"github.com/checkoutlock/schemas/errs"
)

// renewSQL is a renewal's write in one statement: the loan (@loan)
// replaces the stored one only while the stored one is open, the
// borrower's and of its item, at the version (@version) and the renewal
// count (@count; absent is 0) the renewal read and while the item has no
// open recall; the new document must be open, renewed, its count one
// more. The conditions are on the row being updated, so a renewal that
// waited for another write's commit is judged against the loan that one
// wrote: two renewals of one loan at once renew it once, and a renewal
// beside a claim, a declaration of loss or a check-in of the loan never
// undoes it, nor is undone. The renewal is announced in the same statement. It
// answers the loan as stored (NULL when nothing was written) and whether
// a recall stood in the way.
func renewSQL() string {
	loan, request, outbox := postgres.Table(postgres.TableLoan), postgres.Table(postgres.TableRequest), postgres.Table(postgres.TableOutbox)
	return `
WITH recall AS (
    SELECT ` + openRecallSQL(request, "(@loan::jsonb ->> 'itemId')::uuid", "@tenant") + ` AS open
), renewed AS (
    UPDATE ` + loan + ` AS rec
       SET jsonb = ` + records.WithMetadata(records.WithID(storage.Loans, "@loan_id", "@loan", `to_jsonb(rec.version + 1)`), "@metadata_user", true) + `
     WHERE rec.tenant_id = @tenant AND rec.id = @loan_id::uuid AND rec.status_name = 'Open' AND rec.version = @version::integer
       AND coalesce((rec.jsonb ->> 'renewalCount')::integer, 0) = @count::integer
       AND rec.user_id = (@loan::jsonb ->> 'userId')::uuid AND rec.item_id = (@loan::jsonb ->> 'itemId')::uuid
       AND (@loan::jsonb #>> '{status,name}') = 'Open' AND @loan::jsonb ->> 'action' = 'renewed'
       AND (@loan::jsonb ->> 'renewalCount')::integer = @count::integer + 1
       AND NOT (SELECT open FROM recall)
    RETURNING rec.jsonb
), announced AS (
    INSERT INTO ` + outbox + ` (tenant_id, kind, type, data)
    SELECT @tenant, '` + storage.EventKindRenewal + `', '` + storage.EventRenewed + `', jsonb_build_object('old', NULL, 'new',
           jsonb_strip_nulls(jsonb_build_object('loanId', r.jsonb -> 'id', 'userId', r.jsonb -> 'userId', 'itemId', r.jsonb -> 'itemId',
           'dueDate', r.jsonb -> 'dueDate', 'renewalCount', r.jsonb -> 'renewalCount')))
      FROM renewed r WHERE ` + postgres.OutboxOn + `
)
SELECT (SELECT jsonb FROM renewed), (SELECT open FROM recall)`
}

var renewWrite = locksql.NewNamed(renewSQL(), "tenant", "loan_id", "loan", "version", "count", "metadata_user")

// RenewLoan implements storage.LoanWriter.
func (s *Loans) RenewLoan(ctx context.Context, t storage.Tenant, w storage.RenewalWrite) (json.RawMessage, error) {
	if err := versionRead(w.LoanVersion); err != nil {
		return nil, err
	}
	var stored json.RawMessage
	var recalled bool
	err := s.db.Write(ctx, t, func(c *pgx.Conn) error {
		return c.QueryRow(ctx, renewWrite.SQL, renewWrite.Bind(map[string]any{"tenant": string(t), "loan_id": w.LoanID,
			"loan": w.Loan, "version": w.LoanVersion, "count": w.RenewalCount, "metadata_user": records.MetadataUser(ctx)})).Scan(&stored, &recalled)
	})
	switch {
	case err != nil:
		return nil, records.InterpretWrite(err, t, storage.Loans, w.Loan)
	case stored != nil:
		return stored, nil
	case recalled:
		return nil, errs.Errorf(errs.KindInvalid, schemas.CodeRenewalBlockedByRecall,
			"items cannot be renewed when there is an active recall request").With("loanId", w.LoanID)
	}
	// Nothing written: say why, as the loan stands now.
	var status string
	var count, version int
	err = s.db.Pool.QueryRow(ctx, postgres.WithTables(`SELECT status_name, coalesce((jsonb ->> 'renewalCount')::integer, 0), version
	    FROM %s WHERE tenant_id = $2 AND id = $1::uuid`, postgres.TableLoan), w.LoanID, string(t)).Scan(&status, &count, &version)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return nil, errs.NotFound(storage.Loans.Name, w.LoanID)
	case err != nil:
		return nil, postgres.Interpret(err, t)
	case status != "Open":
		return nil, errs.Errorf(errs.KindInvalid, schemas.CodeNoOpenLoan, "Loan %s is not open: there is nothing to renew", w.LoanID).
			With("loanId", w.LoanID)
	case count != w.RenewalCount:
		return nil, errs.Errorf(errs.KindConflict, schemas.CodeLoanChanged,
			"Loan %s was renewed meanwhile (renewalCount %d, the renewal read %d); nothing was written", w.LoanID, count, w.RenewalCount).
			With("renewalCount", strconv.Itoa(count))
	case version != w.LoanVersion:
		return nil, errs.Errorf(errs.KindConflict, schemas.CodeLoanChanged,
			"Loan %s was changed by another request since it was read (_version %d, the renewal read %d); it was not renewed, and nothing was written",
			w.LoanID, version, w.LoanVersion).With("_version", strconv.Itoa(version))
	}
	return nil, errs.Errorf(errs.KindInvalid, schemas.CodeValidation,
		"A renewal (%s) keeps the loan open, its userId and itemId, with action renewed and renewalCount %d", schemas.HeaderRenewalCount,
		w.RenewalCount+1)
}
