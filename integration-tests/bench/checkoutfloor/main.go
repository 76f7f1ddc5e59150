// Command checkoutfloor is the benchmark's yardstick for the check-out: a
// minimal net/http + pgx server answering POST
// /circulation/check-out-by-barcode with the very statements a check-out
// through circulation and circulation-storage sends to PostgreSQL
// (package checkoutsql), in the same round trips: validation's read in
// one, then the write's batch (the write's id, its events, the patron's
// lock taken in the write, the row locks, the statement that judges every
// rule and writes the item and the loan, the lock dropped) in one
// transaction. Nothing else: no framework, no authentication, no
// validation but what the write needs from the read (the patron, the
// item, the loan policy's period), no metrics, no logging, no settings
// cache, no HTTP hop between two services. What circulation and
// circulation-storage do on top of it is what the benchmark's
// service ÷ floor ratio (scenario 14) measures. It is not a product.
//
// Environment: HTTP_ADDR, DATABASE_URL, TENANT (the tenant whose library
// it lends from, in the shared tables), POOL_SIZE (as storage's
// DB_MAX_CONNS: a check-out's statements run on storage's main pool, at
// the server's synchronous_commit).
package main

import (
	"context"
	"encoding/json"
	"log"
	"net/http"
	"os"
	"strconv"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/checkoutlock/circulation"
	"github.com/checkoutlock/circulation-storage/checkoutsql"
	"github.com/checkoutlock/schemas"
)

// caller is who the floor's writes are by: as storage's caller, the user
// and the module named in the lock's holder, the fence and the metadata.
const (
	callerUser   = "aaaaaaaa-aaaa-4aaa-8aaa-00000000f100"
	callerModule = "circulation"
	// lockTTL is the lock's TTL, as the harness's services have it.
	lockTTL = 3000
	// writeWithin is the time a write is given, as circulation's request
	// deadline leaves it (30 s).
	writeWithin = int64(29_999)
)

// writeRow is the part of the write's row the floor reads: the loan
// stored (NULL when nothing was written) and whether the lean statement
// met a gate row.
type writeRow struct {
	Stored json.RawMessage
	Full   bool
}

func main() {
	cfg, err := pgxpool.ParseConfig(os.Getenv("DATABASE_URL"))
	if err != nil {
		log.Fatal(err)
	}
	if n, err := strconv.Atoi(os.Getenv("POOL_SIZE")); err == nil && n > 0 {
		cfg.MaxConns = int32(n)
	}
	// The session settings storage's statements run under, which choose
	// their plans and their dates' text (postgres.openPool).
	cfg.ConnConfig.RuntimeParams["enable_seqscan"] = "off"
	cfg.ConnConfig.RuntimeParams["TimeZone"] = "UTC"
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		log.Fatal(err)
	}
	tenant := os.Getenv("TENANT")
	st := checkoutsql.CheckOut()
	byWhom, _ := json.Marshal(map[string]string{"acquiredBy": callerUser, "acquiredByModule": callerModule})

	mux := http.NewServeMux()
	mux.HandleFunc("GET /admin/health", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) })
	mux.HandleFunc("POST /circulation/check-out-by-barcode", func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			ItemBarcode    string `json:"itemBarcode"`
			UserBarcode    string `json:"userBarcode"`
			ServicePointID string `json:"servicePointId"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		ctx := r.Context()
		// Validation's read, lean (the bench's tenant has no gate row).
		rows, _ := pool.Query(ctx, st.ReadLean.SQL, st.ReadLean.Bind(pgx.StrictNamedArgs{"user_barcode": req.UserBarcode,
			"item_barcode": req.ItemBarcode, "enforce_unscoped": true, "tenant": tenant}))
		read, err := pgx.CollectExactlyOneRow(rows, pgx.RowToStructByName[checkoutsql.ReadRow])
		if err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		var patron struct {
			ID    string `json:"id"`
			Group string `json:"patronGroup"`
		}
		var item struct {
			ID      string `json:"id"`
			Version int    `json:"_version"`
		}
		var policy struct {
			LoansPolicy struct {
				Period struct {
					Duration int    `json:"duration"`
					Interval string `json:"intervalId"`
				} `json:"period"`
			} `json:"loansPolicy"`
		}
		if read.User == nil || read.Item == nil || read.LoanPolicy == nil || read.PolicyID == nil || read.Full ||
			json.Unmarshal(read.User, &patron) != nil || json.Unmarshal(read.Item, &item) != nil || json.Unmarshal(read.LoanPolicy, &policy) != nil {
			http.Error(w, "cannot check out", http.StatusUnprocessableEntity)
			return
		}
		loanDate := time.Now().UTC().Truncate(time.Millisecond)
		// The due date as circulation computes it.
		due := circulation.Period{Duration: policy.LoansPolicy.Period.Duration, Interval: policy.LoansPolicy.Period.Interval}.DueDate(loanDate)
		loanID, lockID, writeID := uuid.NewString(), uuid.NewString(), uuid.NewString()
		loan, _ := json.Marshal(map[string]any{"id": loanID, "userId": patron.ID, "itemId": item.ID,
			"loanDate": loanDate.Format(schemas.TimeFormat), "dueDate": due.Format(schemas.TimeFormat),
			"action": "checkedout", "status": map[string]string{"name": schemas.LoanOpen}, "loanPolicyId": *read.PolicyID,
			"checkoutServicePointId": req.ServicePointID, "patronGroupIdAtCheckout": patron.Group})
		holder, _ := json.Marshal(map[string]string{"instance": "checkoutfloor", "requestId": writeID, "acquiredBy": callerUser,
			"acquiredByModule": callerModule, "itemBarcode": req.ItemBarcode, "servicePointId": req.ServicePointID})

		// The write, one batch in one implicit transaction, as storage
		// queues it (checkOutBatch, queueCheckOut).
		b := &pgx.Batch{}
		b.Queue(st.Claim, pgx.StrictNamedArgs{"tenant": tenant, "id": writeID, "kind": schemas.WriteCheckOut, "digest": nil})
		b.Queue(st.OwnEvents)
		acquired := false
		b.Queue(st.AcquireInWrite, pgx.StrictNamedArgs{"lock_id": lockID, "user_id": patron.ID, "ttl_ms": int64(lockTTL),
			"holder": holder, "tenant": tenant}).Query(func(rows pgx.Rows) error {
			got, err := pgx.CollectRows(rows, pgx.RowTo[bool])
			acquired = len(got) == 1
			return err
		})
		b.Queue(st.LockRows, lockID, patron.ID, tenant)
		b.Queue(st.ItemRow, item.ID, tenant)
		var out writeRow
		b.Queue(st.WriteLean.SQL, st.WriteLean.Bind(pgx.StrictNamedArgs{
			"tenant": tenant, "loan_id": loanID, "loan": loan, "lock_id": lockID, "item_version": item.Version,
			"metadata_user": callerUser, "enforce_unscoped": true, "lock_default": true,
			"caller_user": callerUser, "caller_module": callerModule, "release": true, "lifted": []string{},
			"refused_statuses": schemas.ItemStatusesNotCheckedOut, "write_within_ms": writeWithin, "offline": false,
			"history": true, "by_whom": byWhom, "write_id": writeID})).Query(func(rows pgx.Rows) error {
			for rows.Next() {
				// The two columns read, the others skipped (nil).
				dest := make([]any, len(rows.FieldDescriptions()))
				for i, f := range rows.FieldDescriptions() {
					switch f.Name {
					case "stored":
						dest[i] = &out.Stored
					case "full":
						dest[i] = &out.Full
					}
				}
				if err := rows.Scan(dest...); err != nil {
					return err
				}
			}
			return rows.Err()
		})
		b.Queue(st.DropInWrite, lockID, tenant)
		if err := pool.SendBatch(ctx, b).Close(); err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		if !acquired || out.Full || out.Stored == nil {
			http.Error(w, "nothing written", http.StatusUnprocessableEntity)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		// The loan with its item and borrower, as circulation answers it.
		body := append(out.Stored[:len(out.Stored)-1:len(out.Stored)-1], `,"item":`...)
		body = append(append(append(body, read.Item...), `,"borrower":`...), read.User...)
		_, _ = w.Write(append(body, '}'))
	})
	log.Fatal(http.ListenAndServe(os.Getenv("HTTP_ADDR"), mux))
}
