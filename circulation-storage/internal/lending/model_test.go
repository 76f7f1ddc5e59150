package lending

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"
	"pgregory.net/rapid"

	storage "github.com/checkoutlock/circulation-storage"
	"github.com/checkoutlock/circulation-storage/internal/dbtest"
	"github.com/checkoutlock/circulation-storage/internal/postgres"
	"github.com/checkoutlock/circulation-storage/internal/records"
	"github.com/checkoutlock/circulation-storage/internal/sample"
	"github.com/checkoutlock/schemas"
)

// The model-based test of the loan's, the item's and the request's writes:
// random sequences of check-outs, check-ins, renewals, holds placed and
// cancelled, and loans and requests replaced at the version read or at an
// older one, made through storage's writes as circulation makes them, each
// compared with a small model of FOLIO's rules (the statuses, the queue,
// the hold shelf, the item limit, the renewal limit, the versions): the
// write must be done exactly when the model allows it, and afterwards the
// database must hold the model's state. rapid shrinks a failing sequence
// to the shortest.

// The library's policy in the model: two items a patron, two renewals a
// loan, none while a hold waits.
const (
	modelItemLimit = 2
	modelRenewals  = 2
)

// modelLoan is an item's open loan, as the model holds it.
type modelLoan struct {
	id, patron        string
	renewals, version int
}

// modelRequest is an open hold of an item's queue.
type modelRequest struct {
	id, patron string
	version    int
	waiting    bool
}

// modelItem is an item: its open loan and its queue.
type modelItem struct {
	loan  *modelLoan
	queue []modelRequest
}

func (m modelItem) status() string {
	switch {
	case m.loan != nil:
		return schemas.ItemCheckedOut
	case len(m.queue) > 0 && m.queue[0].waiting:
		return schemas.ItemAwaitingPickup
	}
	return schemas.ItemAvailable
}

// machine runs one sequence: the model's items and patrons, and the
// library it is compared with.
type machine struct {
	ctx     context.Context
	f       dbtest.Fixture
	lib     library
	patrons []string
	items   []string
	state   map[string]*modelItem
}

// pick draws one of the items for which has holds, "" when there is none.
func (m *machine) pick(t *rapid.T, has func(*modelItem) bool) string {
	var items []string
	for _, item := range m.items {
		if has(m.state[item]) {
			items = append(items, item)
		}
	}
	if len(items) == 0 {
		return ""
	}
	return rapid.SampledFrom(items).Draw(t, "item")
}

func lent(it *modelItem) bool   { return it.loan != nil }
func queued(it *modelItem) bool { return len(it.queue) > 0 }

// open is how many open loans patron has.
func (m *machine) open(patron string) int {
	n := 0
	for _, it := range m.state {
		if it.loan != nil && it.loan.patron == patron {
			n++
		}
	}
	return n
}

func (m *machine) checkOut(t *rapid.T) {
	item := rapid.SampledFrom(m.items).Draw(t, "item")
	patron := rapid.SampledFrom(m.patrons).Draw(t, "patron")
	it := m.state[item]
	allowed := it.loan == nil && (len(it.queue) == 0 || it.queue[0].patron == patron) && m.open(patron) < modelItemLimit
	id := uuid.NewString()
	doc := json.RawMessage(fmt.Sprintf(`{"userId":%q,"itemId":%q,"loanDate":%q,"dueDate":%q,"action":"checkedout","status":{"name":"Open"}}`,
		patron, item, stamp(0), stamp(21*24*time.Hour)))
	_, err := m.lib.CreateCheckOutLoan(storage.WithRequestRules(m.ctx), m.f.Tenant, storage.CheckOutWrite{LoanID: id, UserID: patron, Loan: doc,
		ItemVersion: m.itemVersion(t, item)})
	m.judged(t, "check-out", allowed, err)
	if err != nil {
		return
	}
	it.loan = &modelLoan{id: id, patron: patron, version: 1}
	if len(it.queue) > 0 {
		it.queue = it.queue[1:]
		for i := range it.queue {
			it.queue[i].version++
		}
	}
}

func (m *machine) checkIn(t *rapid.T) {
	item := m.pick(t, lent)
	if item == "" {
		return
	}
	it := m.state[item]
	doc := m.loanDoc(t, it.loan.id, map[string]any{"status": map[string]any{"name": "Closed"}, "action": "checkedin",
		"returnDate": stamp(0), "checkinServicePointId": sample.ServicePointDesk1})
	_, err := m.lib.CheckInLoan(m.ctx, m.f.Tenant, storage.CheckInWrite{LoanID: it.loan.id, Loan: doc, ItemVersion: m.itemVersion(t, item),
		LoanVersion: it.loan.version})
	m.judged(t, "check-in", true, err)
	it.loan = nil
	if len(it.queue) > 0 {
		it.queue[0].waiting = true
		it.queue[0].version++
	}
}

func (m *machine) renew(t *rapid.T) {
	item := m.pick(t, lent)
	if item == "" {
		return
	}
	it := m.state[item]
	l := it.loan
	allowed := l.renewals < modelRenewals && len(it.queue) == 0
	doc := m.loanDoc(t, l.id, map[string]any{"action": "renewed", "renewalCount": l.renewals + 1,
		"dueDate": stamp(time.Duration(l.renewals+2) * 21 * 24 * time.Hour)})
	_, err := m.lib.RenewLoan(m.ctx, m.f.Tenant, storage.RenewalWrite{LoanID: l.id, Loan: doc, LoanVersion: l.version, RenewalCount: l.renewals})
	m.judged(t, "renewal", allowed, err)
	if err == nil {
		l.renewals++
		l.version++
	}
}

func (m *machine) hold(t *rapid.T) {
	item := rapid.SampledFrom(m.items).Draw(t, "item")
	patron := rapid.SampledFrom(m.patrons).Draw(t, "patron")
	it := m.state[item]
	onLoan := it.loan != nil && it.loan.patron != patron
	onShelf := it.loan == nil && len(it.queue) > 0 && it.queue[0].waiting
	queued := slices.ContainsFunc(it.queue, func(r modelRequest) bool { return r.patron == patron })
	id := uuid.NewString()
	_, err := m.lib.Create(storage.WithRequestRules(m.ctx), m.f.Tenant, storage.Requests, id, placeDoc("Hold", patron, item))
	m.judged(t, "hold", (onLoan || onShelf) && !queued, err)
	if err == nil {
		it.queue = append(it.queue, modelRequest{id: id, patron: patron, version: 1})
	}
}

func (m *machine) cancel(t *rapid.T) {
	item := m.pick(t, queued)
	if item == "" {
		return
	}
	it := m.state[item]
	i := rapid.IntRange(0, len(it.queue)-1).Draw(t, "hold")
	r := it.queue[i]
	stale := rapid.Bool().Draw(t, "stale") && r.version > 1
	version := r.version
	if stale {
		version--
	}
	doc := m.requestDoc(t, r.id, map[string]any{"status": schemas.RequestCancelled, "_version": version})
	err := m.lib.Update(m.ctx, m.f.Tenant, storage.Requests, r.id, version, doc)
	m.judged(t, "cancel", !stale, err)
	if err != nil {
		return
	}
	it.queue = slices.Delete(it.queue, i, i+1)
	for j := i; j < len(it.queue); j++ {
		it.queue[j].version++
	}
	if i == 0 && r.waiting && len(it.queue) > 0 {
		it.queue[0].waiting = true
		it.queue[0].version++
	}
}

func (m *machine) replaceLoan(t *rapid.T) {
	item := m.pick(t, lent)
	if item == "" {
		return
	}
	it := m.state[item]
	l := it.loan
	stale := rapid.Bool().Draw(t, "stale") && l.version > 1
	version := l.version
	if stale {
		version--
	}
	doc := m.loanDoc(t, l.id, map[string]any{"_version": version, "patronComments": "replaced"})
	err := m.lib.Update(m.ctx, m.f.Tenant, storage.Loans, l.id, version, doc)
	m.judged(t, "a loan's replace", !stale, err)
	if err == nil {
		l.version++
	}
}

// judged checks a write's answer against the model: done exactly when it
// allows it, and refused (a 4xx of the rules or of a version, never a
// failure) when it does not.
func (m *machine) judged(t *rapid.T, what string, allowed bool, err error) {
	switch {
	case allowed && err != nil:
		t.Fatalf("%s: %v; the model allows it", what, err)
	case !allowed && err == nil:
		t.Fatalf("%s: done; the model refuses it", what)
	case err != nil && !definite(err):
		t.Fatalf("%s: %v, want a refusal", what, err)
	}
}

// check holds the database to the model: each item's status, its open
// loan (borrower, renewals, version) and its queue (holds in order, their
// versions, the one on the hold shelf).
func (m *machine) check(t *rapid.T) {
	for _, item := range m.items {
		want := m.state[item]
		var status string
		if err := m.f.DB.Pool.QueryRow(m.ctx, `SELECT status_name FROM `+postgres.Table(postgres.TableItem)+` WHERE tenant_id = $2 AND id = $1`,
			item, string(m.f.Tenant)).Scan(&status); err != nil {
			t.Fatal(err)
		}
		if status != want.status() {
			t.Fatalf("item %s is %q, the model says %q", item, status, want.status())
		}
		rows, err := m.f.DB.Pool.Query(m.ctx, `SELECT id::text, user_id::text, coalesce((jsonb ->> 'renewalCount')::int, 0), version FROM `+
			postgres.Table(postgres.TableLoan)+` WHERE tenant_id = $2 AND item_id = $1 AND status_name = 'Open'`, item, string(m.f.Tenant))
		if err != nil {
			t.Fatal(err)
		}
		var loans []modelLoan
		for rows.Next() {
			var l modelLoan
			if err := rows.Scan(&l.id, &l.patron, &l.renewals, &l.version); err != nil {
				t.Fatal(err)
			}
			loans = append(loans, l)
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		switch {
		case want.loan == nil && len(loans) != 0, want.loan != nil && (len(loans) != 1 || loans[0] != *want.loan):
			t.Fatalf("item %s's open loans %+v, the model says %+v", item, loans, want.loan)
		}
		rows, err = m.f.DB.Pool.Query(m.ctx, `SELECT id::text, requester_id::text, version, status = $3 FROM `+postgres.Table(postgres.TableRequest)+`
			WHERE tenant_id = $2 AND item_id = $1 AND left(status, 5) = 'Open ' ORDER BY position`, item, string(m.f.Tenant), schemas.RequestAwaitingPickup)
		if err != nil {
			t.Fatal(err)
		}
		var queue []modelRequest
		for rows.Next() {
			var r modelRequest
			if err := rows.Scan(&r.id, &r.patron, &r.version, &r.waiting); err != nil {
				t.Fatal(err)
			}
			queue = append(queue, r)
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(queue, want.queue) {
			t.Fatalf("item %s's queue %+v, the model says %+v", item, queue, want.queue)
		}
	}
}

// itemVersion is item's version as stored: a check-out or a check-in
// writes at the version it read, as circulation's do.
func (m *machine) itemVersion(t *rapid.T, item string) int {
	var v int
	if err := m.f.DB.Pool.QueryRow(m.ctx, `SELECT version FROM `+postgres.Table(postgres.TableItem)+` WHERE tenant_id = $2 AND id = $1`,
		item, string(m.f.Tenant)).Scan(&v); err != nil {
		t.Fatal(err)
	}
	return v
}

// loanDoc is loan id as stored, with change's fields.
func (m *machine) loanDoc(t *rapid.T, id string, change map[string]any) json.RawMessage {
	return m.recordDoc(t, postgres.TableLoan, id, change)
}

// requestDoc is request id as stored, with change's fields.
func (m *machine) requestDoc(t *rapid.T, id string, change map[string]any) json.RawMessage {
	return m.recordDoc(t, postgres.TableRequest, id, change)
}

func (m *machine) recordDoc(t *rapid.T, table postgres.TableName, id string, change map[string]any) json.RawMessage {
	var doc map[string]any
	if err := m.f.DB.Pool.QueryRow(m.ctx, `SELECT jsonb FROM `+postgres.Table(table)+` WHERE tenant_id = $2 AND id = $1`,
		id, string(m.f.Tenant)).Scan(&doc); err != nil {
		t.Fatal(err)
	}
	delete(doc, "metadata")
	for k, v := range change {
		doc[k] = v
	}
	out, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// stamp is now and d, as FOLIO writes a time.
func stamp(d time.Duration) string { return time.Now().Add(d).UTC().Format(schemas.TimeFormat) }

// TestTheWritesFollowTheModel runs rapid's random sequences of the writes
// against the model, each sequence with patrons and items of its own in
// one library whose rules lend every item under the model's policy.
func TestTheWritesFollowTheModel(t *testing.T) {
	t.Parallel()
	f := setupLeanLibrary(t)
	ctx := context.Background()
	lib := library{Records: records.NewRecords(f.DB), Loans: NewLoans(f.DB, testPolicy)}
	policy := uuid.NewString()
	if _, err := lib.Create(ctx, f.Tenant, storage.LoanPolicies, policy, json.RawMessage(fmt.Sprintf(`{"name":"The model's","loanable":true,
	  "renewable":true,"loansPolicy":{"profileId":"Rolling","period":{"duration":3,"intervalId":"Weeks"},"itemLimit":%d},
	  "renewalsPolicy":{"unlimited":false,"numberAllowed":%d,"renewFromId":"CURRENT_DUE_DATE"}}`, modelItemLimit, modelRenewals))); err != nil {
		t.Fatal(err)
	}
	if err := NewRules(f.DB, testPolicy).SetRules(ctx, f.Tenant, storage.CirculationRules{FallbackLoanPolicyID: policy,
		FallbackRequestPolicyID: sample.Rules.FallbackRequestPolicyID, Rules: []storage.CirculationRule{}}); err != nil {
		t.Fatal(err)
	}
	rapid.Check(t, func(t *rapid.T) {
		m := &machine{ctx: ctx, f: f, lib: lib, state: map[string]*modelItem{}}
		for i := range 2 {
			id := uuid.NewString()
			if _, err := lib.Create(ctx, f.Tenant, storage.Patrons, id, json.RawMessage(fmt.Sprintf(
				`{"barcode":"model-%s","active":true,"patronGroup":%q,"personal":{"lastName":"Model %d"}}`, id, sample.GroupStaff, i))); err != nil {
				t.Fatal(err)
			}
			m.patrons = append(m.patrons, id)
		}
		for range 3 {
			id := uuid.NewString()
			if _, err := lib.Create(ctx, f.Tenant, storage.Items, id, json.RawMessage(fmt.Sprintf(
				`{"barcode":"model-%s","title":"Model","status":{"name":"Available"},"materialTypeId":%q,"permanentLoanTypeId":%q}`,
				id, sample.MaterialBook, sample.LoanTypeCanCirculate))); err != nil {
				t.Fatal(err)
			}
			m.items = append(m.items, id)
			m.state[id] = &modelItem{}
		}
		actions := map[string]func(*rapid.T){"check out": m.checkOut, "check in": m.checkIn, "renew": m.renew, "hold": m.hold,
			"cancel": m.cancel, "replace loan": m.replaceLoan}
		names := slices.Sorted(maps.Keys(actions))
		for range rapid.IntRange(10, 60).Draw(t, "steps") {
			actions[rapid.SampledFrom(names).Draw(t, "action")](t)
			m.check(t)
		}
	})
}
