package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/google/uuid"

	storage "github.com/checkoutlock/circulation-storage"
	"github.com/checkoutlock/schemas"
)

// TestTheGateFollowsTheFirstRecordOfEachKind: a tenant that has never had
// a manual block, a block limit or a request skips looking for them
// (migration 15); the first of each kind is seen by the very next
// check-out: its validation reads the block, and its write refuses at the
// limit and for another patron's request.
func TestTheGateFollowsTheFirstRecordOfEachKind(t *testing.T) {
	t.Parallel()
	db, tenant := sampleDatabase(t)
	ctx := context.Background()
	records, rules := NewRecords(db, testPolicy), NewRules(db, testPolicy)
	exec := func(sql string, args ...any) {
		t.Helper()
		if _, err := db.pool.Exec(ctx, sql, args...); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	// The sample's block and request go, and with them what the tenant's
	// row says of them: a tenant that never had any.
	exec(withTables(`DELETE FROM %s WHERE tenant_id = $1`, tableManualBlock), string(tenant))
	exec(withTables(`DELETE FROM %s WHERE tenant_id = $1`, tableRequest), string(tenant))
	exec(withTables(`UPDATE %s SET has_manual_blocks = false, has_block_limits = false, has_requests = false WHERE id = $1`, tableTenant), string(tenant))
	flags := func() string {
		t.Helper()
		var mb, bl, rq bool
		if err := db.pool.QueryRow(ctx, tenantGateSQL("$1"), string(tenant)).Scan(&mb, &bl, &rq); err != nil {
			t.Fatal(err)
		}
		return fmt.Sprint(mb, bl, rq)
	}
	create := func(r storage.Resource, doc string) {
		t.Helper()
		if _, err := records.Create(ctx, tenant, r, uuid.NewString(), json.RawMessage(doc)); err != nil {
			t.Fatalf("create %s: %v", r.Name, err)
		}
	}
	write := func(user, item string) error {
		_, err := records.CreateCheckOutLoan(ctx, tenant, storage.CheckOutWrite{LoanID: uuid.NewString(), UserID: user,
			Loan: loanDoc(user, item), ItemVersion: 1})
		return err
	}
	alice, bob, dave := SampleID("1001"), SampleID("1002"), SampleID("1004")
	if got := flags(); got != "false false false" {
		t.Fatalf("flags %s", got)
	}

	// A manual block: validation reads it at once.
	create(storage.ManualBlocks, fmt.Sprintf(`{"userId":%q,"type":"Manual","desc":"Overdue fines","borrowing":true}`, dave))
	read, err := rules.ReadForCheckOut(ctx, tenant, "book-030", "1004")
	if err != nil {
		t.Fatal(err)
	}
	if len(read.ManualBlocks) == 0 || string(read.ManualBlocks) == "null" {
		t.Errorf("validation after the tenant's first manual block reads none (flags %s)", flags())
	}

	// A request of Bob's for book-031: Alice's write is refused.
	create(storage.Requests, fmt.Sprintf(`{"requestType":"Hold","requestLevel":"Item","requestDate":"2026-01-05T09:00:00.000Z",
		"requesterId":%q,"itemId":%q,"status":"Open - Not yet filled","position":1,"fulfillmentPreference":"Hold Shelf"}`, bob, SampleID("book-031")))
	if err := write(alice, SampleID("book-031")); !isCode(err, schemas.CodeItemRequestedByAnotherPatron) {
		t.Errorf("Alice's write of an item Bob requested first: %v (flags %s)", err, flags())
	}

	// A limit of no items charged out for Alice's group: her write is
	// refused.
	blockOn(t, fixture{db: db, tenant: tenant}, storage.ConditionItemsChargedOut, GroupUndergrad, 0, false, "No items")
	if err := write(alice, SampleID("book-032")); !isCode(err, schemas.CodeUserBlockedAutomatically) {
		t.Errorf("Alice's write at a limit of no items charged out: %v (flags %s)", err, flags())
	}
	if got := flags(); got != "true true true" {
		t.Errorf("flags after one of each: %s", got)
	}
}
