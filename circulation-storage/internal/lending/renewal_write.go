package lending

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strconv"

	"github.com/checkoutlock/circulation-storage/internal/feesfines"
	"github.com/checkoutlock/circulation-storage/internal/postgres"
	"github.com/checkoutlock/circulation-storage/internal/record"
	"github.com/checkoutlock/circulation-storage/internal/requests"
	"github.com/checkoutlock/circulation-storage/internal/rules"
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
// a recall stood in the way. An override's renewal (@override_renewal,
// @override_patron) is renewedThroughOverride with a comment, and passes
// the refusals it lifts.
func renewSQL() string {
	loan, request, outbox := postgres.Table(postgres.TableLoan), postgres.Table(postgres.TableRequest), postgres.Table(postgres.TableOutbox)
	item, patron := postgres.Table(postgres.TableItem), postgres.Table(postgres.TablePatron)
	policy := postgres.Table(postgres.TableLoanPolicy)
	user, itemID := "(@loan::jsonb ->> 'userId')::uuid", "(@loan::jsonb ->> 'itemId')::uuid"
	return `
WITH recall AS (
    SELECT ` + openRecallSQL(request, itemID, "@tenant") + ` AS open
), u AS (
    SELECT p.patron_group_id, ` + rules.PatronActiveSQL("p") + ` AS active
      FROM ` + patron + ` p WHERE p.tenant_id = @tenant AND p.id = ` + user + `
), i AS (
    SELECT status_name, material_type_id, coalesce(temporary_loan_type_id, permanent_loan_type_id) AS loan_type_id
      FROM ` + item + ` WHERE tenant_id = @tenant AND id = ` + itemID + `
), m AS (` + rules.PolicyMatchSQL(postgres.Table(postgres.TableCirculationRule), postgres.Table(postgres.TableCirculationRules), "@tenant",
		"(SELECT patron_group_id FROM u)", "(SELECT material_type_id FROM i)", "(SELECT loan_type_id FROM i)") + `
), lp AS (
    SELECT lp.jsonb FROM m JOIN ` + policy + ` lp ON lp.tenant_id = @tenant AND lp.id = m.loan_policy_id
), moved AS (
    SELECT ` + movedDueSQL("@loan::jsonb", "(SELECT jsonb FROM lp)", "NOT @override_renewal::boolean AND NOT @loan::jsonb ? 'offline'") + ` AS doc
), head AS (` + requests.QueueHeadSQL(request, itemID, "@tenant") + `
), judged AS (
    SELECT NOT coalesce((SELECT active FROM u), true) AS inactive,
           ` + rules.ManuallyBlockedSQL(user, "renewals") + ` AS blocked,
           (SELECT jsonb_agg(jsonb_build_object('condition', b ->> 'patronBlockConditionId', 'message', b ->> 'message')
                             ORDER BY b ->> 'patronBlockConditionId')
              FROM jsonb_array_elements(coalesce(` + rules.AutomatedBlocksSQL("@tenant", user, "(SELECT patron_group_id FROM u)") + `, '[]'::jsonb)) b
             WHERE (b ->> 'blockRenewals')::boolean) AS automated,
           NOT EXISTS (SELECT 1 FROM lp) AS no_policy,
           NOT coalesce((SELECT (jsonb ->> 'loanable')::boolean FROM lp), true) AS not_loanable,
           (SELECT status_name FROM i) AS item_status,
           NOT coalesce((SELECT (jsonb ->> 'renewable')::boolean FROM lp), false) AS not_renewable,
           coalesce((SELECT NOT coalesce((jsonb #>> '{renewalsPolicy,unlimited}')::boolean, false)
                            AND @count::integer >= coalesce((jsonb #>> '{renewalsPolicy,numberAllowed}')::numeric, 0) FROM lp), false) AS at_limit,
           coalesce((SELECT r.jsonb ->> 'requestType' = 'Hold' FROM head r), false)
             AND NOT coalesce((SELECT (jsonb #>> '{requestManagement,holds,renewItemsWithRequest}')::boolean FROM lp), false) AS held,
           coalesce(` + postgres.StoredTime("(SELECT doc FROM moved) ->> 'dueDate'", "renewal dueDate") + ` <=
             (SELECT ` + postgres.StoredTime("l.jsonb ->> 'dueDate'", "loan dueDate") + ` FROM ` + loan + ` l
               WHERE l.tenant_id = @tenant AND l.id = @loan_id::uuid), false) AS due_unchanged
), verdict AS (
    SELECT NOT (inactive OR (NOT @override_patron::boolean AND (blocked OR automated IS NOT NULL)) OR no_policy
                OR item_status = ANY(@not_renewed::text[])
                OR (NOT @override_renewal::boolean AND (not_loanable OR not_renewable OR at_limit OR held))
                OR due_unchanged) AS ok
      FROM judged
), renewed AS (
    UPDATE ` + loan + ` AS rec
       SET jsonb = ` + record.WithMetadata(record.WithID(storage.Loans, "@loan_id", "(SELECT doc FROM moved)", `to_jsonb(rec.version + 1)`), "@metadata_user", true) + `
     WHERE rec.tenant_id = @tenant AND rec.id = @loan_id::uuid AND rec.status_name = ` + postgres.Lit(schemas.LoanOpen) + ` AND rec.version = @version::integer
       AND coalesce((rec.jsonb ->> 'renewalCount')::integer, 0) = @count::integer
       AND rec.user_id = (@loan::jsonb ->> 'userId')::uuid AND rec.item_id = (@loan::jsonb ->> 'itemId')::uuid
       AND (@loan::jsonb #>> '{status,name}') = ` + postgres.Lit(schemas.LoanOpen) + `
       AND CASE WHEN @override_renewal::boolean OR @override_patron::boolean
                THEN @loan::jsonb ->> 'action' = ` + postgres.Lit(schemas.LoanRenewedThroughOverride) + `
                     AND btrim(coalesce(@loan::jsonb ->> 'actionComment', '')) <> ''
                ELSE @loan::jsonb ->> 'action' = 'renewed' END
       AND (@loan::jsonb ->> 'renewalCount')::integer = @count::integer + 1
       AND (@override_renewal::boolean OR NOT (SELECT open FROM recall))
       AND (SELECT ok FROM verdict)
    RETURNING rec.jsonb
), announced AS (
    INSERT INTO ` + outbox + ` (tenant_id, kind, type, data)
    SELECT @tenant, '` + storage.EventKindRenewal + `', '` + storage.EventRenewed + `', jsonb_build_object('old', NULL, 'new',
           jsonb_strip_nulls(jsonb_build_object('loanId', r.jsonb -> 'id', 'userId', r.jsonb -> 'userId', 'itemId', r.jsonb -> 'itemId',
           'dueDate', r.jsonb -> 'dueDate', 'renewalCount', r.jsonb -> 'renewalCount')))
      FROM renewed r WHERE ` + postgres.OutboxOn + `
), ` + feesfines.OverdueChargeCTEs("fine_", "@loan_id::uuid", "now()", "@loan::jsonb ->> 'checkoutServicePointId'", true,
		"EXISTS (SELECT 1 FROM renewed)") + `, ` + postgres.AnsweredSQL("(SELECT jsonb FROM renewed)", "EXISTS (SELECT 1 FROM renewed)") + `
)
SELECT (SELECT jsonb FROM renewed) AS stored, (SELECT open FROM recall) AS recalled, j.*
  FROM judged j`
}

var renewWrite = locksql.NewNamed(renewSQL(), "tenant", "loan_id", "loan", "version", "count", "metadata_user", "not_renewed",
	"override_renewal", "override_patron", "write_id")

// notRenewed are the item statuses a loan is not renewed in (FOLIO's
// RenewalValidator), each with its refusal: schemas' table of loan
// actions, the one circulation and the desk's page read.
var notRenewed = schemas.LoanActionRefusedStatuses(schemas.LoanActionRenew)

// renewalVerdict is renewSQL's row.
type renewalVerdict struct {
	Stored       json.RawMessage `db:"stored"`
	Recalled     bool            `db:"recalled"`
	Inactive     bool            `db:"inactive"`
	Blocked      bool            `db:"blocked"`
	Automated    json.RawMessage `db:"automated"`
	NoPolicy     bool            `db:"no_policy"`
	NotLoanable  bool            `db:"not_loanable"`
	ItemStatus   *string         `db:"item_status"`
	NotRenewable bool            `db:"not_renewable"`
	AtLimit      bool            `db:"at_limit"`
	Held         bool            `db:"held"`
	DueUnchanged bool            `db:"due_unchanged"`
}

// refusals are the rules v broke that w's override does not lift, in
// FOLIO's order (mod-circulation's RenewalValidator, as circulation's
// renewalRefusals words them).
func (v renewalVerdict) refusals(w storage.RenewalWrite) []*errs.Error {
	return slices.DeleteFunc(v.broken(w.LoanID), func(e *errs.Error) bool {
		return schemas.RenewalOverrideLifts(e.Code, w.OverridePatronBlock, w.OverrideRenewal)
	})
}

// broken are the rules v broke, in FOLIO's order.
func (v renewalVerdict) broken(loanID string) []*errs.Error {
	var out []*errs.Error
	add := func(code, message string) {
		out = append(out, errs.Errorf(errs.KindInvalid, code, "%s", message).With("loanId", loanID))
	}
	if v.Inactive {
		add(schemas.CodeUserIsInactiveOrExpired, "Cannot renew loan when user is inactive or expired")
	}
	if v.Blocked {
		add(schemas.CodeUserBlockedManually, "Patron blocked from renewing")
	}
	var automated []struct{ Condition, Message string }
	if json.Unmarshal(v.Automated, &automated) == nil {
		for _, b := range automated {
			out = append(out, errs.Errorf(errs.KindInvalid, schemas.CodeUserBlockedAutomatically, "%s", b.Message).
				With("patronBlockConditionId", b.Condition).With("loanId", loanID))
		}
	}
	if v.NoPolicy {
		// Nothing of a policy can be judged without one.
		add(schemas.CodeNoLoanPolicy, "No loan policy applies: the circulation rules are not set")
		return out
	}
	if v.NotLoanable {
		add(schemas.CodeItemNotLoanable, "item is not loanable")
	}
	if v.Recalled {
		add(schemas.CodeRenewalBlockedByRecall, "items cannot be renewed when there is an active recall request")
	}
	status := postgres.Deref(v.ItemStatus)
	if r, ok := notRenewed[status]; ok && status != schemas.ItemClaimedReturned {
		add(r.Code, r.Message)
	}
	switch {
	case v.NotRenewable:
		add(schemas.CodeLoanNotRenewable, "loan is not renewable")
	case v.AtLimit:
		add(schemas.CodeLoanRenewalLimitReached, "loan at maximum renewal number")
	}
	if v.Held {
		add(schemas.CodeRenewalBlockedByHoldRequest, "Items with this loan policy cannot be renewed when there is an active, pending hold request")
	}
	if r, ok := notRenewed[status]; ok && status == schemas.ItemClaimedReturned {
		add(r.Code, r.Message)
	}
	if v.DueUnchanged {
		add(schemas.CodeRenewalWouldNotChangeDueDate, "renewal would not change the due date")
	}
	return out
}

// RenewLoan implements storage.LoanWriter.
func (s *Loans) RenewLoan(ctx context.Context, t storage.Tenant, w storage.RenewalWrite) (json.RawMessage, error) {
	if err := versionRead(w.LoanVersion); err != nil {
		return nil, err
	}
	var v renewalVerdict
	statuses := make([]string, 0, len(notRenewed))
	for status := range notRenewed {
		statuses = append(statuses, status)
	}
	err := s.db.Once(ctx, t, schemas.WriteRenewal, func(c *pgx.Conn, id *storage.Write) error {
		// One transaction: the write's id, then the borrower's row (as
		// every write that judges or can newly block the borrower takes
		// it, borrowerRowSQL), then the item's queue (its row, as every
		// write of a request takes it), then the renewal, whose
		// statement's snapshot is taken after both. A loss declared, an
		// aging or a billing of another of the borrower's loans, or a
		// recall or a hold placed at once, is decided before it (and the
		// renewal judges it) or after it (and judges the renewed loan):
		// never each from what it read before the other committed.
		b := &pgx.Batch{}
		if id != nil {
			b.Queue(postgres.ClaimSQL, postgres.ClaimArgs(t, *id, schemas.WriteRenewal))
		}
		b.Queue(borrowerRowSQL, w.LoanID, string(t))
		b.Queue(itemRowSQL, record.FieldValue(w.Loan, "itemId"), string(t))
		b.Queue(renewWrite.SQL, renewWrite.Bind(map[string]any{"tenant": string(t), "loan_id": w.LoanID,
			"loan": w.Loan, "version": w.LoanVersion, "count": w.RenewalCount, "metadata_user": record.MetadataUser(ctx),
			"not_renewed": statuses, "override_renewal": w.OverrideRenewal, "override_patron": w.OverridePatronBlock,
			"write_id": postgres.WriteID(ctx)})).Query(func(rows pgx.Rows) error {
			var err error
			v, err = pgx.CollectExactlyOneRow(rows, pgx.RowToStructByName[renewalVerdict])
			return err
		})
		return c.SendBatch(ctx, b).Close()
	})
	switch {
	case err != nil:
		return nil, record.InterpretWrite(err, t, storage.Loans, w.Loan)
	case v.Stored != nil:
		return v.Stored, nil
	}
	// Nothing written: say why, as the loan stands now: changed by another
	// write first (the renewal is then read and judged again), else every
	// rule the renewal broke.
	var status string
	var count, version int
	err = s.db.Pool.QueryRow(ctx, postgres.WithTables(`SELECT status_name, coalesce((jsonb ->> 'renewalCount')::integer, 0), version
	    FROM %s WHERE tenant_id = $2 AND id = $1::uuid`, postgres.TableLoan), w.LoanID, string(t)).Scan(&status, &count, &version)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return nil, errs.NotFound(storage.Loans.Name, w.LoanID)
	case err != nil:
		return nil, postgres.Interpret(err, t)
	case status != schemas.LoanOpen:
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
	if refused := v.refusals(w); len(refused) == 1 && refused[0].Code == schemas.CodeRenewalBlockedByRecall {
		return nil, refused[0]
	} else if len(refused) > 0 {
		return nil, &errs.Refusal{Errors: refused}
	}
	if w.Overridden() {
		return nil, errs.Errorf(errs.KindInvalid, schemas.CodeValidation,
			"An override's renewal (%s, %s) keeps the loan open, its userId and itemId, with action %s, an actionComment that is not blank and renewalCount %d",
			schemas.HeaderRenewalCount, schemas.HeaderRenewalOverride, schemas.LoanRenewedThroughOverride, w.RenewalCount+1)
	}
	return nil, errs.Errorf(errs.KindInvalid, schemas.CodeValidation,
		"A renewal (%s) keeps the loan open, its userId and itemId, with action renewed and renewalCount %d", schemas.HeaderRenewalCount,
		w.RenewalCount+1)
}
