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
// Run as two processes, it is the same floor with the product's hop
// between a front that takes the check-out and a back that sends the
// statements, as circulation and storage are, and nothing else on top:
// ROLE=back serves the check-out whole (POST /floor/check-out), and
// validation's read and the write apart (POST /floor/read, POST
// /floor/write); ROLE=front-one answers the check-out with one call to
// the back at BACK_URL, the whole check-out; ROLE=front-two with two,
// the read and then the write, the loan made in between, as circulation
// asks storage today. The benchmark sets each beside the floor, so that
// what the hop itself costs, and what a check-out asking storage once
// could reach, are measured apart from what the services add.
//
// Every role answers GET /admin/allocs with the bytes the process has
// allocated so far (runtime/metrics' /gc/heap/allocs:bytes), which the
// benchmark's probe reads as it reads the services' metrics.
//
// Environment: HTTP_ADDR, DATABASE_URL, TENANT (the tenant whose library
// it lends from, in the shared tables), POOL_SIZE (as storage's
// DB_MAX_CONNS: a check-out's statements run on storage's main pool, at
// the server's synchronous_commit), ROLE and BACK_URL (above), and
// TOUCH_KB: when set, every check-out the process answers first
// allocates and writes that many KiB of memory, and again once its work
// is done (the probe's control: what memory a process runs through
// between PostgreSQL's statements does to them, apart from its CPU);
// PROFILE_ADDR: when set, Go's profiles served there by the services'
// own profile server (serverkit.Profile), so that the probe profiles the
// floor's processes as it profiles the services.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net/http"
	"os"
	"runtime"
	"runtime/metrics"
	"strconv"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/checkoutlock/circulation"
	"github.com/checkoutlock/circulation-storage/checkoutsql"
	"github.com/checkoutlock/schemas"
	"github.com/checkoutlock/serverkit"
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

// checkOutRequest is the check-out's body, as a kiosk posts it.
type checkOutRequest struct {
	ItemBarcode    string `json:"itemBarcode"`
	UserBarcode    string `json:"userBarcode"`
	ServicePointID string `json:"servicePointId"`
}

// lending is what the write needs of validation's read: the loan, made
// from the patron, the item and the loan policy's period, and the item's
// version it is fenced by.
type lending struct {
	Loan        json.RawMessage `json:"loan"`
	LoanID      string          `json:"loanId"`
	PatronID    string          `json:"patronId"`
	ItemID      string          `json:"itemId"`
	ItemVersion int             `json:"itemVersion"`
	ItemBarcode string          `json:"itemBarcode"`
	SPID        string          `json:"servicePointId"`
}

// errRefused is a check-out the floor does not lend: nothing found, or
// nothing written.
var errRefused = errors.New("cannot check out")

// floor sends the check-out's statements.
type floor struct {
	pool   *pgxpool.Pool
	tenant string
	st     checkoutsql.Statements
	byWhom []byte
}

// read is validation's read, lean (the bench's tenant has no gate row),
// sent after the setting it runs under, in one round trip.
func (f *floor) read(ctx context.Context, req checkOutRequest) (checkoutsql.ReadRow, error) {
	b := &pgx.Batch{}
	b.Queue(f.st.GenericPlans)
	var row checkoutsql.ReadRow
	b.Queue(f.st.ReadLean.SQL, f.st.ReadLean.Bind(pgx.StrictNamedArgs{"user_barcode": req.UserBarcode,
		"item_barcode": req.ItemBarcode, "enforce_unscoped": true, "tenant": f.tenant})).Query(func(rows pgx.Rows) error {
		var err error
		row, err = pgx.CollectExactlyOneRow(rows, pgx.RowToStructByName[checkoutsql.ReadRow])
		return err
	})
	err := f.pool.SendBatch(ctx, b).Close()
	return row, err
}

// lend makes the loan of req from validation's read.
func lend(req checkOutRequest, read checkoutsql.ReadRow) (lending, error) {
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
		return lending{}, errRefused
	}
	loanDate := time.Now().UTC().Truncate(time.Millisecond)
	// The due date as circulation computes it.
	due := circulation.Period{Duration: policy.LoansPolicy.Period.Duration, Interval: policy.LoansPolicy.Period.Interval}.DueDate(loanDate)
	loanID := uuid.NewString()
	loan, err := json.Marshal(map[string]any{"id": loanID, "userId": patron.ID, "itemId": item.ID,
		"loanDate": loanDate.Format(schemas.TimeFormat), "dueDate": due.Format(schemas.TimeFormat),
		"action": "checkedout", "status": map[string]string{"name": schemas.LoanOpen}, "loanPolicyId": *read.PolicyID,
		"checkoutServicePointId": req.ServicePointID, "patronGroupIdAtCheckout": patron.Group})
	return lending{Loan: loan, LoanID: loanID, PatronID: patron.ID, ItemID: item.ID, ItemVersion: item.Version,
		ItemBarcode: req.ItemBarcode, SPID: req.ServicePointID}, err
}

// write is the check-out's write, one batch in one implicit transaction,
// as storage queues it (checkOutBatch, queueCheckOut): the loan stored.
func (f *floor) write(ctx context.Context, l lending) (json.RawMessage, error) {
	lockID, writeID := uuid.NewString(), uuid.NewString()
	holder, _ := json.Marshal(map[string]string{"instance": "checkoutfloor", "requestId": writeID, "acquiredBy": callerUser,
		"acquiredByModule": callerModule, "itemBarcode": l.ItemBarcode, "servicePointId": l.SPID})
	st := f.st
	b := &pgx.Batch{}
	b.Queue(st.Claim, pgx.StrictNamedArgs{"tenant": f.tenant, "id": writeID, "kind": schemas.WriteCheckOut, "digest": nil})
	b.Queue(st.WriteSettings)
	acquired := false
	b.Queue(st.AcquireInWrite, pgx.StrictNamedArgs{"lock_id": lockID, "user_id": l.PatronID, "ttl_ms": int64(lockTTL),
		"holder": holder, "tenant": f.tenant}).Query(func(rows pgx.Rows) error {
		got, err := pgx.CollectRows(rows, pgx.RowTo[bool])
		acquired = len(got) == 1
		return err
	})
	b.Queue(st.LockRows, lockID, l.PatronID, f.tenant)
	b.Queue(st.ItemRow, l.ItemID, f.tenant)
	var out writeRow
	b.Queue(st.WriteLean.SQL, st.WriteLean.Bind(pgx.StrictNamedArgs{
		"tenant": f.tenant, "loan_id": l.LoanID, "loan": l.Loan, "lock_id": lockID, "item_version": l.ItemVersion,
		"metadata_user": callerUser, "enforce_unscoped": true, "lock_default": true,
		"caller_user": callerUser, "caller_module": callerModule, "release": true, "lifted": []string{},
		"refused_statuses": schemas.ItemStatusesNotCheckedOut, "write_within_ms": writeWithin, "offline": false,
		"history": true, "by_whom": f.byWhom, "write_id": writeID,
		"caller_account": callerUser, "caller_kiosk": "", "caller_kiosk_named": false, "offline_grace_ms": int64(60000)})).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			// The two columns read, the others skipped (nil).
			dest := make([]any, len(rows.FieldDescriptions()))
			for i, fd := range rows.FieldDescriptions() {
				switch fd.Name {
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
	b.Queue(st.DropInWrite, lockID, f.tenant)
	if err := f.pool.SendBatch(ctx, b).Close(); err != nil {
		return nil, err
	}
	if !acquired || out.Full || out.Stored == nil {
		return nil, errRefused
	}
	return out.Stored, nil
}

// checkOut is the whole check-out in one process: read, lend, write.
func (f *floor) checkOut(ctx context.Context, req checkOutRequest) (json.RawMessage, error) {
	read, err := f.read(ctx, req)
	if err != nil {
		return nil, err
	}
	l, err := lend(req, read)
	if err != nil {
		return nil, err
	}
	stored, err := f.write(ctx, l)
	if err != nil {
		return nil, err
	}
	return answer(stored, read.Item, read.User), nil
}

// answer is the loan with its item and borrower, as circulation answers
// it.
func answer(stored, item, user json.RawMessage) json.RawMessage {
	body := append(stored[:len(stored)-1:len(stored)-1], `,"item":`...)
	body = append(append(append(body, item...), `,"borrower":`...), user...)
	return append(body, '}')
}

// serve answers a POST whose body decodes into In with do's JSON,
// touching touchKB KiB of new memory before do and after it.
func serve[In any](status int, do func(ctx context.Context, in In) (json.RawMessage, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var in In
		if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		touch()
		out, err := do(r.Context(), in)
		touch()
		switch {
		case errors.Is(err, errRefused):
			http.Error(w, err.Error(), http.StatusUnprocessableEntity)
			return
		case err != nil:
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = w.Write(out)
	}
}

// touchKB is TOUCH_KB.
var touchKB, _ = strconv.Atoi(os.Getenv("TOUCH_KB"))

// touch allocates touchKB KiB and writes a byte in every cache line.
func touch() {
	if touchKB <= 0 {
		return
	}
	b := make([]byte, touchKB<<10)
	for i := 0; i < len(b); i += 64 {
		b[i] = byte(i)
	}
	runtime.KeepAlive(b)
}

// allocs answers the bytes the process has allocated so far.
func allocs(w http.ResponseWriter, _ *http.Request) {
	s := []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}}
	metrics.Read(s)
	fmt.Fprintf(w, "%d\n", s[0].Value.Uint64())
}

// back is the back's client, as circulation's of storage keeps its
// connections.
type back struct {
	url    string
	client *http.Client
}

// call posts in to the back's path and answers its JSON, a status not
// want an error.
func (b back) call(ctx context.Context, path string, in any, want int) (json.RawMessage, error) {
	body, err := json.Marshal(in)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, b.url+path, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	res, err := b.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	out, err := io.ReadAll(res.Body)
	switch {
	case err != nil:
		return nil, err
	case res.StatusCode == http.StatusUnprocessableEntity:
		return nil, errRefused
	case res.StatusCode != want:
		return nil, fmt.Errorf("%s: %d %s", path, res.StatusCode, out)
	}
	return out, nil
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
	// Its values read as storage reads them.
	cfg.AfterConnect = func(_ context.Context, c *pgx.Conn) error {
		checkoutsql.ReadJSON(c.TypeMap())
		return nil
	}
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		log.Fatal(err)
	}
	byWhom, _ := json.Marshal(map[string]string{"acquiredBy": callerUser, "acquiredByModule": callerModule})
	f := &floor{pool: pool, tenant: os.Getenv("TENANT"), st: checkoutsql.CheckOut(), byWhom: byWhom}
	transport := http.DefaultTransport.(*http.Transport).Clone()
	transport.MaxIdleConns, transport.MaxIdleConnsPerHost = 256, 256
	b := back{url: os.Getenv("BACK_URL"), client: &http.Client{Transport: transport}}

	mux := http.NewServeMux()
	mux.HandleFunc("GET /admin/health", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) })
	mux.HandleFunc("GET /admin/allocs", allocs)
	const checkOut = "POST /circulation/check-out-by-barcode"
	switch role := os.Getenv("ROLE"); role {
	case "":
		mux.Handle(checkOut, serve(http.StatusCreated, f.checkOut))
	case "back":
		mux.Handle("POST /floor/check-out", serve(http.StatusCreated, f.checkOut))
		mux.Handle("POST /floor/read", serve(http.StatusOK, func(ctx context.Context, req checkOutRequest) (json.RawMessage, error) {
			read, err := f.read(ctx, req)
			if err != nil {
				return nil, err
			}
			return json.Marshal(read)
		}))
		mux.Handle("POST /floor/write", serve(http.StatusCreated, f.write))
	case "front-one":
		mux.Handle(checkOut, serve(http.StatusCreated, func(ctx context.Context, req checkOutRequest) (json.RawMessage, error) {
			return b.call(ctx, "/floor/check-out", req, http.StatusCreated)
		}))
	case "front-two":
		mux.Handle(checkOut, serve(http.StatusCreated, func(ctx context.Context, req checkOutRequest) (json.RawMessage, error) {
			out, err := b.call(ctx, "/floor/read", req, http.StatusOK)
			if err != nil {
				return nil, err
			}
			var read checkoutsql.ReadRow
			if err := json.Unmarshal(out, &read); err != nil {
				return nil, err
			}
			l, err := lend(req, read)
			if err != nil {
				return nil, err
			}
			stored, err := b.call(ctx, "/floor/write", l, http.StatusCreated)
			if err != nil {
				return nil, err
			}
			return answer(stored, read.Item, read.User), nil
		}))
	default:
		log.Fatalf("ROLE %q: none, back, front-one or front-two", role)
	}
	if addr := os.Getenv("PROFILE_ADDR"); addr != "" {
		// The services' own profile server, off the check-out's path: it
		// logs where it listens as they do, which is how the harness
		// finds it.
		if _, _, err := serverkit.Profile(addr, slog.New(slog.NewJSONHandler(os.Stderr, nil))); err != nil {
			log.Fatalf("PROFILE_ADDR: %v", err)
		}
	}
	log.Fatal(http.ListenAndServe(os.Getenv("HTTP_ADDR"), mux))
}
