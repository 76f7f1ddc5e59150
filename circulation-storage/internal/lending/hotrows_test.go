package lending

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/checkoutlock/circulation-storage/internal/dbtest"
	"github.com/checkoutlock/circulation-storage/internal/postgres"
	"github.com/checkoutlock/circulation-storage/internal/sample"
	"github.com/checkoutlock/circulation-storage/internal/tenants"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	storage "github.com/checkoutlock/circulation-storage"
	"github.com/checkoutlock/schemas"
)

// multiXactRows counts, table by table, the rows of the database db
// reaches whose xmax is a MultiXact (HEAP_XMAX_IS_MULTI in the row's
// header, read with pageinspect): the rows two transactions locked at
// once. The database is the test's own, so the rows are its own, whatever
// other tests do on the server meanwhile.
func multiXactRows(ctx context.Context, db *postgres.DB) (map[string]int, error) {
	rows, err := db.Pool.Query(ctx, `SELECT c.oid::regclass::text, count(*)
  FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace,
       LATERAL generate_series(0, pg_relation_size(c.oid) / current_setting('block_size')::int - 1) AS page,
       LATERAL heap_page_items(get_raw_page(c.oid::regclass::text, page)) AS i
 WHERE c.relkind = 'r' AND n.nspname NOT IN ('pg_catalog', 'information_schema', 'pg_toast')
   AND i.t_infomask & 4096 <> 0
 GROUP BY 1`)
	if err != nil {
		return nil, err
	}
	marked := map[string]int{}
	var table string
	var n int
	_, err = pgx.ForEachRow(rows, []any{&table, &n}, func() error {
		marked[table] = n
		return nil
	})
	return marked, err
}

// TestCheckOutsShareNoRow: 3,000 check-outs of one tenant, eight at a
// time, each a patron's own item, take no lock that another check-out of
// the tenant also takes: no row of the test's database holds a MultiXact
// afterwards (one is made when two transactions lock one row at once, for
// key share as a foreign key's check does: the loan policy's row, before
// migration 14, and 904 MultiXacts in such a burst), looked for in the
// rows' headers while the check-outs run and after; the policy's row is
// held for key share by the test meanwhile, so that a check-out locking it
// marks it for certain.
func TestCheckOutsShareNoRow(t *testing.T) {
	db, tenant := sampleDatabase(t, 8)
	ctx := context.Background()
	// Long enough for check-outs to overlap even on a machine busy with
	// other work: a MultiXact needs two of them holding the row at once.
	const n = 3000
	if _, err := db.Pool.Exec(ctx, postgres.WithTables(`INSERT INTO %s (tenant_id, id, jsonb)
SELECT $1, md5('p' || g)::uuid, jsonb_build_object('id', md5('p' || g)::uuid, 'barcode', 'p' || g, 'active', true, 'patronGroup', $2::text)
  FROM generate_series(1, $3::int) g`, postgres.TablePatron), string(tenant), sample.GroupFaculty, n); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Pool.Exec(ctx, postgres.WithTables(`INSERT INTO %s (tenant_id, id, jsonb)
SELECT @tenant, md5('i' || g)::uuid, jsonb_build_object('id', md5('i' || g)::uuid, 'barcode', 'i' || g, '_version', 1,
       'status', jsonb_build_object('name', 'Available'), 'materialTypeId', @material_type::text, 'permanentLoanTypeId', @loan_type::text)
  FROM generate_series(1, @n::int) g`, postgres.TableItem), pgx.StrictNamedArgs{"tenant": string(tenant), "material_type": sample.MaterialBook,
		"loan_type": sample.LoanTypeCanCirculate, "n": n}); err != nil {
		t.Fatal(err)
	}
	lib := newLibrary(db, testPolicy)
	// Sampled during the burst, not only after it: a row locked by one
	// transaction after two had it loses its MultiXact mark.
	if _, err := db.Pool.Exec(ctx, "CREATE EXTENSION IF NOT EXISTS pageinspect"); err != nil {
		t.Fatal(err)
	}
	// The loan policy every check-out names, held for key share by a
	// transaction of the test's own from before the burst until after its
	// last sample: a check-out that locked it, as a foreign key's check
	// does, would make its row a MultiXact's at once, and the mark would
	// stay while this holds, however little the check-outs overlap.
	holder, err := pgx.ConnectConfig(ctx, db.Pool.Config().ConnConfig)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close(ctx)
	held, err := holder.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = held.Rollback(ctx) }()
	if _, err := held.Exec(ctx, postgres.WithTables(`SELECT 1 FROM %s WHERE tenant_id = $1 AND id = $2 FOR KEY SHARE`, postgres.TableLoanPolicy),
		string(tenant), sample.PolicyStandard); err != nil {
		t.Fatal(err)
	}
	marked := map[string]int{}
	var sampleErr error
	look := func() {
		seen, err := multiXactRows(ctx, db)
		if err != nil {
			sampleErr = err
		}
		for table, rows := range seen {
			marked[table] = max(marked[table], rows)
		}
	}
	done, sampled := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(sampled)
		for {
			look()
			select {
			case <-done:
				return
			default:
			}
		}
	}()
	burst(t, db, lib, tenant, 1, n)
	close(done)
	<-sampled
	look()
	if sampleErr != nil {
		t.Fatal(sampleErr)
	}
	var open int
	if err := db.Pool.QueryRow(ctx, postgres.WithTables("SELECT count(*) FROM %s WHERE tenant_id = $1 AND status_name = 'Open'", postgres.TableLoan), string(tenant)).Scan(&open); err != nil {
		t.Fatal(err)
	}
	if open != n+sample.OpenLoans {
		t.Fatalf("%d open loans after %d check-outs and the sample's %d", open, n, sample.OpenLoans)
	}
	if len(marked) > 0 {
		t.Errorf("during %d check-outs of one tenant at c = 8, rows locked by two at once, by table (the most seen at once): %v", n, marked)
	}
}

// burst checks out item i to patron i, for i from first to last, eight at
// a time.
func burst(t *testing.T, db *postgres.DB, lib library, tenant storage.Tenant, first, last int) {
	t.Helper()
	ctx := context.Background()
	work := make(chan int)
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for g := range work {
				var user, item string
				if err := db.Pool.QueryRow(ctx, "SELECT md5('p' || $1)::uuid::text, md5('i' || $1)::uuid::text", fmt.Sprint(g)).Scan(&user, &item); err != nil {
					t.Error(err)
					continue
				}
				loan := fmt.Sprintf(`{"userId":%q,"itemId":%q,"loanDate":"2026-01-01T10:00:00.000Z","action":"checkedout","status":{"name":"Open"},"loanPolicyId":%q}`,
					user, item, sample.PolicyStandard)
				if _, err := lib.CreateCheckOutLoan(ctx, tenant, storage.CheckOutWrite{LoanID: uuid.NewString(), UserID: user,
					Loan: []byte(loan), ItemVersion: 1}); err != nil {
					t.Errorf("check-out %d: %v", g, err)
				}
			}
		}()
	}
	for g := first; g <= last; g++ {
		work <- g
	}
	close(work)
	wg.Wait()
}

// TestLoanPolicyReferencesHold: without the foreign key (migration 14), a
// loan still names a loan policy of its tenant, and a policy a loan names
// is still not deleted; a purge deletes the tenant's policies with its
// loans.
func TestLoanPolicyReferencesHold(t *testing.T) {
	db, tenant := sampleDatabase(t, 2)
	ctx := context.Background()
	lib := newLibrary(db, testPolicy)
	var user, item string
	if err := db.Pool.QueryRow(ctx, postgres.WithTables(`SELECT (SELECT id::text FROM %s WHERE tenant_id = $1 AND barcode = '1004'),
	       (SELECT id::text FROM %s WHERE tenant_id = $1 AND barcode = 'book-001')`, postgres.TablePatron, postgres.TableItem), string(tenant)).Scan(&user, &item); err != nil {
		t.Fatal(err)
	}
	loan := func(policy string) []byte {
		return fmt.Appendf(nil, `{"userId":%q,"itemId":%q,"loanDate":"2026-01-01T10:00:00.000Z","action":"checkedin","status":{"name":"Closed"},"loanPolicyId":%q}`,
			user, item, policy)
	}
	nobody := uuid.NewString()
	_, err := lib.Create(ctx, tenant, storage.Loans, uuid.NewString(), loan(nobody))
	if !dbtest.IsCode(err, "VALIDATION_FAILED") || !strings.Contains(err.Error(), "loanPolicyId: loan policy "+nobody+" does not exist") {
		t.Fatalf("a loan naming no policy of the tenant: %v", err)
	}
	// A policy no circulation rule names (whose foreign key would keep
	// it), named by a loan.
	policy := uuid.NewString()
	if _, err := lib.Create(ctx, tenant, storage.LoanPolicies, policy,
		[]byte(`{"name":"Lent once","loanable":true,"loansPolicy":{"profileId":"Rolling","period":{"duration":1,"intervalId":"Weeks"}}}`)); err != nil {
		t.Fatal(err)
	}
	if _, err := lib.Create(ctx, tenant, storage.Loans, uuid.NewString(), loan(policy)); err != nil {
		t.Fatal(err)
	}
	err = lib.Delete(ctx, tenant, storage.LoanPolicies, policy)
	if !dbtest.IsCode(err, schemas.CodeInUse) {
		t.Fatalf("deleting a loan policy a loan names: %v", err)
	}
	if _, err := lib.Get(ctx, tenant, storage.LoanPolicies, policy); err != nil {
		t.Fatalf("the policy a loan names is gone: %v", err)
	}
	if err := tenants.NewTenants(db, dbtest.Discard).Purge(ctx, tenant); err != nil {
		t.Fatalf("purge: %v", err)
	}
}
