package notices

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/mail"
	"net/textproto"
	"slices"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/jackc/pgx/v5"

	storage "github.com/checkoutlock/circulation-storage"
	"github.com/checkoutlock/circulation-storage/internal/postgres"
	"github.com/checkoutlock/schemas"
)

// Mailer sends a notice's mail: an error is a failed try (the notice is
// tried again later); nil means the server took it.
type Mailer interface {
	Send(ctx context.Context, m Mail) error
}

// mailTimeout bounds one mail's exchange with the server. The notice's
// transaction sits idle meanwhile, holding it, and is let sit that long
// and mailMargin more (idle_in_transaction_session_timeout, set for it
// alone: the pool's sessions may be ended sooner, REQUEST_TIMEOUT). Were
// PostgreSQL to end the session while the server takes a slow mail, the
// mail would land, its record would not, and the notice would be mailed
// again at every round, never counted as a try.
const (
	mailTimeout = 10 * time.Second
	mailMargin  = 5 * time.Second
)

// idleWhileMailingSQL lets the notice's transaction sit idle while its
// mail is sent.
var idleWhileMailingSQL = fmt.Sprintf("SET LOCAL idle_in_transaction_session_timeout = %d", (mailTimeout + mailMargin).Milliseconds())

// SendConfig is how Send sends.
type SendConfig struct {
	// Batch is the most notices one call sends.
	Batch int
	// MaxAttempts is how many tries a notice gets before it is Failed.
	MaxAttempts int
	// FirstRetry is the wait after the first failed try; each next one
	// doubles it (jittered), up to an hour.
	FirstRetry time.Duration
	// OnSent, when set, is told what became of each notice it settled
	// (schemas.NoticeSent, …), and of each failed try
	// (schemas.NoticeScheduled).
	OnSent func(status string)
}

// dueNow is SQL holding when the scheduled notice s is due now (at its
// time, or at its next try after one failed): the one test of "due",
// which the listing and the send's own read both ask, so that none is
// sent early.
const dueNow = `coalesce(s.retry_at, s.next_run_at) <= now()`

var (
	// dueSQL is the notices due now, of every tenant, each its patron's
	// earliest one scheduled (a patron's notices are sent in the order
	// they are due: one being tried again holds back the later ones).
	dueSQL = postgres.WithTables(`
SELECT s.tenant_id, s.id::text FROM %[1]s s
 WHERE s.status = '`+schemas.NoticeScheduled+`' AND `+dueNow+`
   AND NOT EXISTS (SELECT 1 FROM %[1]s e
                    WHERE e.tenant_id = s.tenant_id AND e.recipient_id = s.recipient_id AND e.status = '`+schemas.NoticeScheduled+`'
                      AND (e.next_run_at, e.seq) < (s.next_run_at, s.seq))
 ORDER BY coalesce(s.retry_at, s.next_run_at), s.seq LIMIT $1`, postgres.TableScheduledNotice)
	// noticeSQL reads a notice due, locked, with everything its mail is
	// written from; none when it is no longer due or another instance
	// holds it.
	noticeSQL = postgres.WithTables(`
SELECT s.jsonb AS notice, s.next_run_at AS next, p.jsonb AS patron, l.jsonb AS loan, r.jsonb AS request, i.jsonb AS item,
       a.jsonb AS charge, t.jsonb AS template, mt.name AS material_type, lt.name AS loan_type, sp.jsonb ->> 'name' AS pickup,
       %[10]s(s.tenant_id) AS zone
  FROM %[1]s s
  LEFT JOIN %[2]s p ON p.tenant_id = s.tenant_id AND p.id = s.recipient_id
  LEFT JOIN %[3]s l ON l.tenant_id = s.tenant_id AND l.id = s.loan_id
  LEFT JOIN %[4]s r ON r.tenant_id = s.tenant_id AND r.id = s.request_id
  LEFT JOIN %[11]s a ON a.tenant_id = s.tenant_id AND a.id = s.fee_fine_id
  LEFT JOIN %[5]s i ON i.tenant_id = s.tenant_id AND i.id = coalesce(l.item_id, r.item_id, (a.jsonb ->> 'itemId')::uuid)
  LEFT JOIN %[6]s t ON t.tenant_id = s.tenant_id AND t.id = (s.jsonb #>> '{noticeConfig,templateId}')::uuid
  LEFT JOIN %[7]s mt ON mt.tenant_id = s.tenant_id AND mt.id = i.material_type_id
  LEFT JOIN %[8]s lt ON lt.tenant_id = s.tenant_id AND lt.id = coalesce(i.temporary_loan_type_id, i.permanent_loan_type_id)
  LEFT JOIN %[9]s sp ON sp.tenant_id = s.tenant_id AND sp.id = (r.jsonb ->> 'pickupServicePointId')::uuid
 WHERE s.tenant_id = $1 AND s.id = $2::uuid AND s.status = '`+schemas.NoticeScheduled+`'
   AND `+dueNow+`
   FOR UPDATE OF s SKIP LOCKED`, postgres.TableScheduledNotice, postgres.TablePatron, postgres.TableLoan, postgres.TableRequest,
		postgres.TableItem, postgres.TableNoticeTemplate, postgres.TableMaterialType, postgres.TableLoanType, postgres.TableServicePoint, postgres.FuncCalendarZone,
		postgres.TableFeeFineAccount)
	// settleSQL writes what became of a notice: its document's changes
	// (@set), when it is due next and when it is tried again.
	settleSQL = postgres.WithTables(`
UPDATE %s SET jsonb = jsonb || @set::jsonb, next_run_at = @next, retry_at = @retry
 WHERE tenant_id = @tenant AND id = @id::uuid`, postgres.TableScheduledNotice)
)

// Send sends up to cfg.Batch notices due now through m, each in a
// transaction of its own that holds the notice while its mail is sent,
// and answers how many it settled or tried. A notice is marked sent only
// after the server took its mail: one whose instance stops between the
// two is sent again, with the same Message-ID (the notice's id and its
// send's number), which a server that drops a Message-ID it has
// delivered delivers once.
//
// It starts no mail after until (none when zero): a round ends well within
// the time it may hold the lead.
func Send(ctx context.Context, db *postgres.DB, m Mailer, cfg SendConfig, until time.Time) (int, error) {
	rows, err := db.Pool.Query(ctx, dueSQL, cfg.Batch)
	if err != nil {
		return 0, err
	}
	type ref struct {
		tenant storage.Tenant
		id     string
	}
	due, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (ref, error) {
		var r ref
		err := row.Scan(&r.tenant, &r.id)
		return r, err
	})
	if err != nil {
		return 0, err
	}
	// A notice that cannot be read or settled holds up no other patron's.
	var errs []error
	for _, r := range due {
		if !until.IsZero() && time.Now().After(until) {
			break
		}
		var status string
		err := db.InTx(ctx, r.tenant, func(tx pgx.Tx) (err error) {
			status, err = sendOne(ctx, tx, r.tenant, r.id, m, cfg)
			return err
		})
		if err != nil {
			errs = append(errs, fmt.Errorf("send notice %s: %w", r.id, err))
			if err := putOff(ctx, db, r.tenant, r.id, err, cfg); err != nil {
				errs = append(errs, fmt.Errorf("count the failed try of notice %s: %w", r.id, err))
			}
			continue
		}
		if status != "" && cfg.OnSent != nil {
			cfg.OnSent(status)
		}
	}
	return len(due), errors.Join(errs...)
}

// attemptsSQL is the tries a notice still Scheduled and due has had,
// locked; none when another instance holds it, or when it was settled
// after all (sent, its answer lost; by another instance, this one frozen):
// it is then due later, or not Scheduled.
var attemptsSQL = postgres.WithTables(`SELECT coalesce((s.jsonb ->> 'attempts')::integer, 0) FROM %s s
 WHERE s.tenant_id = $1 AND s.id = $2::uuid AND s.status = '`+schemas.NoticeScheduled+`' AND `+dueNow+`
   FOR UPDATE SKIP LOCKED`, postgres.TableScheduledNotice)

// putOffSQL counts a try of the notice that failed before it could be
// settled: @attempts tries, the last failing as @error, tried again at
// @retry, or Failed when @retry is NULL. A notice another instance holds
// or has settled is left.
var putOffSQL = postgres.WithTables(`
UPDATE %s SET jsonb = jsonb || jsonb_build_object('attempts', @attempts::integer, 'lastError', @error::text,
                                                 'status', CASE WHEN @retry::timestamptz IS NULL THEN '`+schemas.NoticeFailed+`' ELSE status END),
       retry_at = @retry
 WHERE tenant_id = @tenant AND id = @id::uuid AND status = '`+schemas.NoticeScheduled+`'`, postgres.TableScheduledNotice)

// putOff counts a try of the notice id whose transaction failed (its
// read, its settling, its commit: failed), as a failed mail counts: it
// is tried again later, or, its tries spent, Failed. Left as it was, it
// would stay first among the notices due and, with a batch of others
// like it, hold up every patron's.
func putOff(ctx context.Context, db *postgres.DB, t storage.Tenant, id string, failed error, cfg SendConfig) error {
	return db.InTx(ctx, t, func(tx pgx.Tx) error {
		var attempts int
		err := tx.QueryRow(ctx, attemptsSQL, string(t), id).Scan(&attempts)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		if err != nil {
			return err
		}
		attempts++
		_, err = tx.Exec(ctx, putOffSQL, pgx.StrictNamedArgs{"attempts": attempts, "error": failed.Error(), "retry": retryAt(attempts, cfg),
			"tenant": string(t), "id": id})
		return err
	})
}

// noticeRow is a row of noticeSQL: the notice and what its mail is
// written from (nil where there is none).
type noticeRow struct {
	Notice       json.RawMessage `db:"notice"`
	Next         time.Time       `db:"next"`
	Patron       json.RawMessage `db:"patron"`
	Loan         json.RawMessage `db:"loan"`
	Request      json.RawMessage `db:"request"`
	Item         json.RawMessage `db:"item"`
	Charge       json.RawMessage `db:"charge"`
	Template     json.RawMessage `db:"template"`
	MaterialType *string         `db:"material_type"`
	LoanType     *string         `db:"loan_type"`
	Pickup       *string         `db:"pickup"`
	Zone         string          `db:"zone"`
}

// sent is a scheduled notice's document as the sender reads it.
type sent struct {
	TriggeringEvent string `json:"triggeringEvent"`
	BasisDate       string `json:"basisDate"`
	Attempts        int    `json:"attempts"`
	Sent            int    `json:"sent"`
	NoticeConfig    struct {
		Timing          string  `json:"timing"`
		RecurringPeriod *Period `json:"recurringPeriod"`
	} `json:"noticeConfig"`
}

// sendOne sends the notice id, in tx, and answers what became of it
// (empty when it was no longer due).
func sendOne(ctx context.Context, tx pgx.Tx, t storage.Tenant, id string, m Mailer, cfg SendConfig) (string, error) {
	rows, err := tx.Query(ctx, noticeSQL, string(t), id)
	if err != nil {
		return "", err
	}
	row, err := pgx.CollectExactlyOneRow(rows, pgx.RowToStructByName[noticeRow])
	if errors.Is(err, pgx.ErrNoRows) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	doc, next := row.Notice, row.Next
	var n sent
	if err := json.Unmarshal(doc, &n); err != nil {
		return "", err
	}
	settle := func(status string, set map[string]any, next time.Time, retry *time.Time) (string, error) {
		set["status"] = status
		set["nextRunTime"] = schemas.FormatTime(next)
		b, err := json.Marshal(set)
		if err != nil {
			return "", err
		}
		_, err = tx.Exec(ctx, settleSQL, pgx.StrictNamedArgs{"set": string(b), "next": next, "retry": retry,
			"tenant": string(t), "id": id})
		return status, err
	}
	if !stillDue(n, row.Loan, row.Request, row.Item) {
		return settle(schemas.NoticeObsolete, map[string]any{}, next, nil)
	}
	zone, err := time.LoadLocation(row.Zone)
	if err != nil {
		zone = time.UTC
	}
	data := tokens(zone, row.Patron, row.Loan, row.Request, row.Item, deref(row.MaterialType), deref(row.LoanType), deref(row.Pickup))
	if row.Charge != nil {
		data["feeCharge"] = chargeTokens(zone, row.Charge)
	}
	to := addressOf(row.Patron)
	if to == "" {
		return settle(schemas.NoticeNoEmail, map[string]any{"lastError": "the patron has no email address (personal.email)"}, next, nil)
	}
	msg, err := render(row.Template, data)
	if err != nil {
		return settle(schemas.NoticeFailed, map[string]any{"lastError": err.Error()}, next, nil)
	}
	msg.To = to
	msg.MessageID = fmt.Sprintf("<%s.%d.%s@checkoutlock>", id, n.Sent+1, t)
	if _, err := tx.Exec(ctx, idleWhileMailingSQL); err != nil {
		return "", err
	}
	mailing, cancel := context.WithTimeout(ctx, mailTimeout)
	err = m.Send(mailing, msg)
	cancel()
	if err != nil {
		attempts := n.Attempts + 1
		set := map[string]any{"attempts": attempts, "lastError": err.Error()}
		// A permanent refusal (5xx: no such mailbox, the message
		// refused) is not tried again.
		var refused *textproto.Error
		retry := retryAt(attempts, cfg)
		if retry == nil || errors.As(err, &refused) && refused.Code >= 500 {
			return settle(schemas.NoticeFailed, set, next, nil)
		}
		return settle(schemas.NoticeScheduled, set, next, retry)
	}
	set := map[string]any{"sent": n.Sent + 1, "attempts": 0, "sentDate": schemas.FormatTime(time.Now()), "messageId": msg.MessageID}
	if every := n.NoticeConfig.RecurringPeriod.Length(); every > 0 {
		// The next time after now: a notice sent late (the server down,
		// the loan lent long ago) is sent once, not once for each period
		// it missed.
		again := next.Add(every)
		for now := time.Now(); !again.After(now); {
			again = again.Add(every)
		}
		basis, err := schemas.ParseDateTime(n.BasisDate)
		if n.NoticeConfig.Timing == schemas.NoticeAfter || (err == nil && again.Before(basis)) {
			return settle(schemas.NoticeScheduled, set, again, nil)
		}
	}
	return settle(schemas.NoticeSent, set, next, nil)
}

// stillDue is whether a notice is still what its event called for: a
// notice before, at or after a loan's due date while the loan is open
// and due then, its item (item) not lost or claimed returned
// (schemas.ItemStatusesNoLongerDue); one before a request's hold shelf
// or request expiration while the request waits, with that date. Any
// other notice stays due.
func stillDue(n sent, loan, request, item json.RawMessage) bool {
	d, isDated := dated[n.TriggeringEvent]
	if !isDated || n.BasisDate == "" {
		return true
	}
	// A notice before a date that has passed (sent late: the server was
	// down) says what is no longer so.
	if basis, err := schemas.ParseDateTime(n.BasisDate); n.NoticeConfig.Timing == schemas.NoticeBefore && (err != nil || !time.Now().Before(basis)) {
		return false
	}
	var rec map[string]any
	if n.TriggeringEvent == schemas.NoticeDueDate {
		if json.Unmarshal(loan, &rec) != nil {
			return false
		}
		status, _ := rec["status"].(map[string]any)
		var it struct {
			Status struct {
				Name string `json:"name"`
			} `json:"status"`
		}
		if item != nil && json.Unmarshal(item, &it) != nil {
			return false
		}
		return status["name"] == schemas.LoanOpen && rec[d.field] == n.BasisDate &&
			!slices.Contains(schemas.ItemStatusesNoLongerDue, it.Status.Name)
	}
	if json.Unmarshal(request, &rec) != nil {
		return false
	}
	status, _ := rec["status"].(string)
	return schemas.RequestIsOpen(status) && rec[d.field] == n.BasisDate
}

// retryAt is when a notice that has failed attempts tries is tried
// again; nil when its tries are spent (it is then Failed).
func retryAt(attempts int, cfg SendConfig) *time.Time {
	if attempts >= cfg.MaxAttempts {
		return nil
	}
	at := time.Now().Add(retryAfter(cfg.FirstRetry, attempts))
	return &at
}

// retryAfter is the wait before the attempts-th try after the first,
// FOLIO's and the outbox's discipline: exponential from first, jittered,
// at most an hour.
func retryAfter(first time.Duration, attempts int) time.Duration {
	b := backoff.NewExponentialBackOff()
	b.InitialInterval, b.Multiplier, b.MaxInterval, b.MaxElapsedTime = first, 2, time.Hour, 0
	b.Reset()
	d := b.NextBackOff()
	for i := 1; i < attempts; i++ {
		d = b.NextBackOff()
	}
	return d
}

// addressOf is the patron's email address (personal.email), empty when
// there is none that is one address.
func addressOf(patron json.RawMessage) string {
	var p struct {
		Personal struct {
			Email string `json:"email"`
		} `json:"personal"`
	}
	if json.Unmarshal(patron, &p) != nil || p.Personal.Email == "" {
		return ""
	}
	a, err := mail.ParseAddress(p.Personal.Email)
	if err != nil {
		return ""
	}
	return a.Address
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
