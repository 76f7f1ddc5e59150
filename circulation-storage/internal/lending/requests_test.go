package lending

import (
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"slices"
	"strings"
	"testing"

	"github.com/checkoutlock/circulation-storage/internal/dbtest"
	"github.com/checkoutlock/circulation-storage/internal/postgres"
	"github.com/checkoutlock/circulation-storage/internal/sample"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	storage "github.com/checkoutlock/circulation-storage"
	"github.com/checkoutlock/migrations"
	"github.com/checkoutlock/schemas"
)

// request creates an open request of item by requester at position.
func request(t *testing.T, f dbtest.Fixture, item, requester string, position int, status string) string {
	t.Helper()
	id := uuid.NewString()
	if _, err := newLibrary(f.DB, testPolicy).Create(context.Background(), f.Tenant, storage.Requests, id, json.RawMessage(fmt.Sprintf(
		`{"requestType":"Hold","requestLevel":"Item","requestDate":"2026-01-0%dT10:00:00.000Z","requesterId":%q,"itemId":%q,
		  "status":%q,"position":%d,"fulfillmentPreference":"Hold Shelf"}`, position, requester, item, status, position))); err != nil {
		t.Fatal(err)
	}
	return id
}

// TestCheckOutFillsTheBorrowersRequest: an item's queue is Bob's request
// (awaiting pickup), then Alice's, then Dave's. Alice's check-out write is
// refused (the first request is Bob's) and changes no request; Bob's fills
// his request in the write: "Closed - Filled", without a position, and
// Alice's and Dave's move up to 1 and 2.
func TestCheckOutFillsTheBorrowersRequest(t *testing.T) {
	t.Parallel()
	f := dbtest.SetupLibrary(t, sample.LoadData)
	ctx := context.Background()
	lib := newLibrary(f.DB, testPolicy)
	item := sample.ID("book-090")
	bob, alice, dave := sample.ID("1002"), sample.ID("1001"), sample.ID("1004")
	bobs := request(t, f, item, bob, 1, "Open - Awaiting pickup")
	alices := request(t, f, item, alice, 2, "Open - Not yet filled")
	daves := request(t, f, item, dave, 3, "Open - Not yet filled")
	queue := func() string {
		t.Helper()
		var out string
		f.DB.Pool.QueryRow(ctx, `SELECT string_agg(id::text || ' ' || status || ' ' || coalesce(position::text, '-'), ', ' ORDER BY id)
			FROM `+dbtest.View(f.Tenant, postgres.TableRequest)).Scan(&out)
		return out
	}
	before := queue()

	_, err := lib.CreateCheckOutLoan(ctx, f.Tenant, storage.CheckOutWrite{LoanID: uuid.NewString(), UserID: alice,
		Loan: loanDoc(alice, item), ItemVersion: 1})
	if !dbtest.IsCode(err, schemas.CodeItemRequestedByAnotherPatron) {
		t.Fatalf("Alice's write of Bob's item: %v, want %s", err, schemas.CodeItemRequestedByAnotherPatron)
	}
	if got := queue(); got != before {
		t.Errorf("a refused write changed the queue:\n%s\nwant\n%s", got, before)
	}
	if n := f.Count(t, postgres.TableLoan, "item_id = $1", item); n != 0 {
		t.Errorf("%d loans after the refused write", n)
	}

	if _, err := lib.CreateCheckOutLoan(ctx, f.Tenant, storage.CheckOutWrite{LoanID: uuid.NewString(), UserID: bob,
		Loan: loanDoc(bob, item), ItemVersion: 1}); err != nil {
		t.Fatalf("Bob's write: %v", err)
	}
	for id, want := range map[string]string{bobs: "Closed - Filled -", alices: "Open - Not yet filled 1", daves: "Open - Not yet filled 2"} {
		var got string
		f.DB.Pool.QueryRow(ctx, `SELECT status || ' ' || coalesce(position::text, '-') FROM `+dbtest.View(f.Tenant, postgres.TableRequest)+` WHERE id = $1`, id).Scan(&got)
		if got != want {
			t.Errorf("request %s after Bob's check-out: %q, want %q", id, got, want)
		}
	}
	var doc map[string]any
	var raw []byte
	f.DB.Pool.QueryRow(ctx, `SELECT jsonb FROM `+dbtest.View(f.Tenant, postgres.TableRequest)+` WHERE id = $1`, bobs).Scan(&raw)
	if err := json.Unmarshal(raw, &doc); err != nil || doc["position"] != nil || doc["status"] != "Closed - Filled" {
		t.Errorf("Bob's request as stored: %s", raw)
	}
}

// TestMigrationPutsQueuesRight: queues written before storage kept them
// dense (written here straight into the table: a closed request keeping
// its position, a gap, open requests past it) are put right by migration
// 17: the closed request without a position, the open ones numbered from
// 1 in their order.
func TestMigrationPutsQueuesRight(t *testing.T) {
	// A database of its own: the migration puts every tenant's queues
	// right, not only this test's.
	db, tenant := sampleDatabase(t, 2)
	f := dbtest.Fixture{DB: db, Tenant: tenant}
	ctx := context.Background()
	item := sample.ID("book-090")
	raw := func(requester string, position int, status string) string {
		t.Helper()
		id := uuid.NewString()
		f.Exec(t, `INSERT INTO `+dbtest.View(f.Tenant, postgres.TableRequest)+` (id, jsonb) VALUES (@id::uuid, jsonb_build_object('id', @id::text,
			'requestType', 'Hold', 'requestDate', '2026-01-01T10:00:00.000Z', 'requesterId', @requester::text, 'itemId', @item::text,
			'status', @status::text, 'position', @position::integer, 'fulfillmentPreference', 'Hold Shelf'))`,
			pgx.StrictNamedArgs{"id": id, "requester": requester, "item": item, "status": status, "position": position})
		return id
	}
	closed := raw(sample.ID("1002"), 2, "Closed - Cancelled")
	third := raw(sample.ID("1004"), 7, "Open - Not yet filled")
	first := raw(sample.ID("1001"), 3, "Open - Awaiting pickup")
	up, err := fs.ReadFile(migrations.FS, "000017_request_queues_dense.up.sql")
	if err != nil {
		t.Fatal(err)
	}
	// As the migrator runs it: in the shared schema, in one transaction.
	if _, err := f.DB.Pool.Exec(ctx, "BEGIN; SET LOCAL search_path TO "+postgres.SharedSchema+"; "+string(up)+"; COMMIT"); err != nil {
		t.Fatal(err)
	}
	for id, want := range map[string]string{closed: "-", first: "1", third: "2"} {
		var got string
		if err := f.DB.Pool.QueryRow(ctx, `SELECT coalesce(position::text, '-') || coalesce(jsonb ->> 'position', '') FROM `+
			dbtest.View(f.Tenant, postgres.TableRequest)+` WHERE id = $1`, id).Scan(&got); err != nil {
			t.Fatal(err)
		}
		if want != "-" {
			want += want // the column and the document agree
		}
		if got != want {
			t.Errorf("request %s: position %q after the migration, want %q", id, got, want)
		}
	}
}

// TestQueueStaysDense: every write of a request keeps its item's queue
// positions 1 to n: requests join at the end (an item id in capitals is
// the same item), a request moved up or down in its queue moves the ones
// between, a position beyond the end is refused, a deleted request's
// position is given up, and a position written 2.0 is 2.
func TestQueueStaysDense(t *testing.T) {
	t.Parallel()
	f := dbtest.SetupLibrary(t, sample.LoadData)
	ctx := context.Background()
	lib := newLibrary(f.DB, testPolicy)
	item := sample.ID("book-095")
	doc := func(requester, itemID, position string) json.RawMessage {
		d := fmt.Sprintf(`{"requestType":"Hold","requestDate":"2026-01-01T10:00:00.000Z","requesterId":%q,"itemId":%q,
		  "status":"Open - Not yet filled","fulfillmentPreference":"Hold Shelf"`, requester, itemID)
		if position != "" {
			d += `,"position":` + position
		}
		return json.RawMessage(d + "}")
	}
	patrons := []string{sample.ID("1001"), sample.ID("1002"), sample.ID("1003"), sample.ID("1004"), sample.ID("1005")}
	ids := make([]string, len(patrons))
	for i, p := range patrons {
		ids[i] = uuid.NewString()
		itemID := item
		if i == 4 {
			itemID = strings.ToUpper(item)
		}
		if _, err := lib.Create(ctx, f.Tenant, storage.Requests, ids[i], doc(p, itemID, "")); err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
	}
	queue := func() []string {
		t.Helper()
		rows, err := f.DB.Pool.Query(ctx, `SELECT id::text, position FROM `+dbtest.View(f.Tenant, postgres.TableRequest)+
			` WHERE item_id = $1 AND left(status, 5) = 'Open ' ORDER BY position`, item)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		var out []string
		for n := 1; rows.Next(); n++ {
			var id string
			var pos int
			if err := rows.Scan(&id, &pos); err != nil {
				t.Fatal(err)
			}
			if pos != n {
				t.Fatalf("position %d where %d was expected: the queue has a gap", pos, n)
			}
			out = append(out, id)
		}
		return out
	}
	want := func(step string, order ...int) {
		t.Helper()
		var ids2 []string
		for _, i := range order {
			ids2 = append(ids2, ids[i])
		}
		if got := queue(); !slices.Equal(got, ids2) {
			t.Fatalf("%s: queue %v, want %v", step, got, ids2)
		}
	}
	want("joined at the end", 0, 1, 2, 3, 4)
	move := func(i int, position string) error {
		return lib.Update(ctx, f.Tenant, storage.Requests, ids[i], storedVersion(t, f, postgres.TableRequest, ids[i]), doc(patrons[i], item, position))
	}
	if err := move(3, "2"); err != nil {
		t.Fatal(err)
	}
	want("the fourth moved up to 2", 0, 3, 1, 2, 4)
	if err := move(0, "5"); err != nil {
		t.Fatal(err)
	}
	want("the first moved down to 5", 3, 1, 2, 4, 0)
	if err := move(1, "6"); !dbtest.IsCode(err, schemas.CodeValidation) {
		t.Fatalf("a move beyond the end: %v, want %s", err, schemas.CodeValidation)
	}
	if err := lib.Delete(ctx, f.Tenant, storage.Requests, ids[2]); err != nil {
		t.Fatal(err)
	}
	want("the third deleted", 3, 1, 4, 0)
	if err := move(4, "2.0"); err != nil {
		t.Fatal(err)
	}
	want("the fifth moved to 2.0", 3, 4, 1, 0)
	if err := move(1, "1.5"); !dbtest.IsCode(err, schemas.CodeValidation) {
		t.Fatalf("position 1.5: %v, want %s", err, schemas.CodeValidation)
	}
}

// storedVersion is the version of record id of table as stored.
func storedVersion(t *testing.T, f dbtest.Fixture, table postgres.TableName, id string) int {
	t.Helper()
	var v int
	if err := f.DB.Pool.QueryRow(context.Background(), "SELECT version FROM "+postgres.Table(table)+" WHERE tenant_id = $2 AND id = $1",
		id, string(f.Tenant)).Scan(&v); err != nil {
		t.Fatal(err)
	}
	return v
}
