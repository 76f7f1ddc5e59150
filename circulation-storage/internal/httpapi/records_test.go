package httpapi

import (
	"context"
	"encoding/json"
	"fmt"
	"github.com/checkoutlock/schemas/errs/errhttp"
	"maps"
	"net/http"
	"net/url"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/checkoutlock/schemas"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// Tests of the FOLIO-style records (groups, material types, loan types,
// users, items, loan policies, loans, settings) over real HTTP against a real
// PostgreSQL: every status, every body against its schema, and the database
// state behind it.

// table is the quoted name of one of the tenant's tables.
func (f *fixture) table(name string) string {
	return pgx.Identifier{f.tenant + "_mod_circulation_storage", name}.Sanitize()
}

// countRows counts the rows of a tenant table matching where.
func (f *fixture) countRows(table, where string, args ...any) int {
	f.t.Helper()
	if where == "" {
		where = "true"
	}
	var n int
	if err := f.pool.QueryRow(context.Background(),
		`SELECT count(*) FROM `+f.table(table)+` WHERE `+where, args...).Scan(&n); err != nil {
		f.t.Fatalf("count %s: %v", table, err)
	}
	return n
}

// tableJSON is every row of a tenant table as JSON text, ordered by orderBy.
func (f *fixture) tableJSON(table, orderBy string) string {
	f.t.Helper()
	var s string
	if err := f.pool.QueryRow(context.Background(),
		`SELECT coalesce(json_agg(x ORDER BY `+orderBy+`)::text, '[]') FROM `+f.table(table)+` x`).Scan(&s); err != nil {
		f.t.Fatalf("snapshot %s: %v", table, err)
	}
	return s
}

// recordTables are the tables of the records and rules, with their order.
var recordTables = []struct{ name, order string }{
	{"patron_group", "id"}, {"material_type", "id"}, {"loan_type", "id"}, {"patron", "id"},
	{"item", "id"}, {"loan_policy", "id"}, {"loan", "id"}, {"request", "id"}, {"setting", "id"},
	{"circulation_rules", "tenant_id"}, {"circulation_rule", "position"},
}

// recordsSnapshot is every record and rule of the tenant, for "nothing changed".
func (f *fixture) recordsSnapshot() string {
	f.t.Helper()
	var b strings.Builder
	for _, tbl := range recordTables {
		fmt.Fprintf(&b, "%s: %s\n", tbl.name, f.tableJSON(tbl.name, tbl.order))
	}
	return b.String()
}

func (f *fixture) wantUnchanged(before, what string) {
	f.t.Helper()
	if after := f.recordsSnapshot(); after != before {
		f.t.Errorf("%s changed the database:\nbefore %s\nafter  %s", what, before, after)
	}
}

func jsonBody(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// jsonValue decodes JSON text into plain Go values, for comparing documents.
func jsonValue(t *testing.T, data []byte) any {
	t.Helper()
	var v any
	if err := json.Unmarshal(data, &v); err != nil {
		t.Fatalf("decode %s: %v", data, err)
	}
	return v
}

// roundTrip is v as it reads after encoding and decoding as JSON.
func roundTrip(t *testing.T, v any) any {
	t.Helper()
	return jsonValue(t, []byte(jsonBody(v)))
}

func (r response) doc() map[string]any {
	r.t.Helper()
	var m map[string]any
	r.decode(&m)
	return m
}

// params is the first error's parameters as a map.
func params(e errhttp.Envelope) map[string]string {
	m := map[string]string{}
	for _, p := range e.Errors[0].Parameters {
		m[p.Key] = p.Value
	}
	return m
}

// wantErrorParam checks the error's first entry names key with value.
func wantErrorParam(t *testing.T, e errhttp.Envelope, key, value string) {
	t.Helper()
	p := params(e)
	if v, ok := p[key]; !ok || v != value {
		t.Errorf("error parameters %v, want %s=%q; message %q", p, key, value, e.Errors[0].Message)
	}
}

// post creates a record and returns its id.
func (f *fixture) post(path, schema string, doc map[string]any) string {
	f.t.Helper()
	res := f.do("POST", path, jsonBody(doc)).wantStatus(http.StatusCreated).wantSchema(schema)
	id, _ := res.doc()["id"].(string)
	if uuid.Validate(id) != nil {
		f.t.Fatalf("POST %s: id %q in %s", path, id, res.body)
	}
	return id
}

func (f *fixture) newGroup(name string) string {
	return f.post("/groups", "group.json", map[string]any{"group": name})
}

func (f *fixture) newMaterialType(name string) string {
	return f.post("/material-types", "material-type.json", map[string]any{"name": name})
}

func (f *fixture) newLoanType(name string) string {
	return f.post("/loan-types", "loan-type.json", map[string]any{"name": name})
}

func (f *fixture) newPolicy(name string) string {
	return f.post("/loan-policy-storage/loan-policies", "loan-policy.json", map[string]any{"name": name, "loanable": false})
}

func (f *fixture) newPatron(barcode, group string) string {
	return f.post("/users", "user.json", userDoc(barcode, group))
}

func userDoc(barcode, group string) map[string]any {
	return map[string]any{"barcode": barcode, "active": true, "patronGroup": group,
		"personal": map[string]any{"firstName": "Ada", "lastName": "Lovelace"}}
}

func itemDoc(barcode, materialType, loanType string) map[string]any {
	return map[string]any{"barcode": barcode, "title": "Title " + barcode, "status": map[string]any{"name": "Available"},
		"materialTypeId": materialType, "permanentLoanTypeId": loanType}
}

// newItem creates an item. One Checked out is arranged in the database
// directly (see arrange): the API checks an item out only with its loan.
func (f *fixture) newItem(doc map[string]any) string {
	if status, _ := doc["status"].(map[string]any); status["name"] == "Checked out" {
		return f.arrange("item", doc)
	}
	return f.post("/item-storage/items", "item.json", doc)
}

// arrange writes a record of table straight into the database, bypassing
// the rules the API keeps (an open loan without its check-out, an item
// Checked out without its loan): for tests that need such a state as it
// is, not how it came about. It returns the record's id.
func (f *fixture) arrange(table string, doc map[string]any) string {
	f.t.Helper()
	id, _ := doc["id"].(string)
	if id == "" {
		id = uuid.NewString()
	}
	stored := map[string]any{"id": id}
	for k, v := range doc {
		stored[k] = v
	}
	if table == "item" {
		stored["_version"] = 1
	}
	b, _ := json.Marshal(stored)
	if _, err := f.pool.Exec(context.Background(), `INSERT INTO `+f.table(table)+` (id, jsonb) VALUES ($1, $2)`, id, b); err != nil {
		f.t.Fatalf("arrange %s: %v", table, err)
	}
	return id
}

func loanDoc(user, item, status string) map[string]any {
	return map[string]any{"userId": user, "itemId": item, "loanDate": "2024-03-01T10:00:00Z",
		"action": "checkedout", "status": map[string]any{"name": status}}
}

// newLoan makes a loan: an open one is arranged in the database directly
// (the API opens one only by a check-out's write, see checkOut).
func (f *fixture) newLoan(user, item, status string) string {
	if status == "Open" {
		return f.arrange("loan", loanDoc(user, item, status))
	}
	return f.post("/loan-storage/loans", "loan.json", loanDoc(user, item, status))
}

// checkOutAtVersion1 are the headers of a check-out's write of an item read at _version 1.
var checkOutAtVersion1 = map[string]string{schemas.HeaderItemVersion: "1"}

// with is the headers of do (the fixture's tenant and user) and h.
func (f *fixture) with(h map[string]string) map[string]string {
	out := map[string]string{TenantHeader: f.tenant, schemas.HeaderUserID: testUser}
	for k, v := range h {
		out[k] = v
	}
	return out
}

// list is one page of a collection: its records and totalRecords.
func (f *fixture) list(path, query, collectionSchema, plural string) ([]map[string]any, int) {
	f.t.Helper()
	if query != "" {
		path += "?" + query
	}
	res := f.do("GET", path, "").wantStatus(http.StatusOK).wantSchema(collectionSchema)
	var page map[string]json.RawMessage
	res.decode(&page)
	var docs []map[string]any
	if err := json.Unmarshal(page[plural], &docs); err != nil || docs == nil {
		f.t.Fatalf("GET %s: no %q array in %s", path, plural, res.body)
	}
	var total int
	if err := json.Unmarshal(page["totalRecords"], &total); err != nil {
		f.t.Fatalf("GET %s: totalRecords in %s: %v", path, res.body, err)
	}
	return docs, total
}

func idsOf(docs []map[string]any) []string {
	ids := make([]string, len(docs))
	for i, d := range docs {
		ids[i], _ = d["id"].(string)
	}
	return ids
}

// crudCase is one resource under the CRUD test: its contract and how to
// build five records of it (numbered 1..5) in a fresh tenant.
type crudCase struct {
	name       string
	path       string
	schema     string
	collection string
	plural     string
	table      string
	versioned  bool
	arrange    func(f *fixture) crudArrangement
}

type crudArrangement struct {
	// body is record n's document, without id.
	body func(n int) map[string]any
	// headers, when set, are record n's POST headers beyond the tenant.
	headers func(n int) map[string]string
	// change edits a record for PUT.
	change func(doc map[string]any)
	// filters are list queries and the records (by number) they match.
	filters []filterCase
	// invalid are list queries refused with 422 INVALID_PARAMETER, naming the parameter.
	invalid []invalidQuery
}

type filterCase struct {
	query url.Values
	want  []int
}

type invalidQuery struct {
	query string
	param string
}

// textFilterRefusals are the refusals every text filter shares: a value
// given twice, and one over 1024 characters.
func textFilterRefusals(param string) []invalidQuery {
	return []invalidQuery{
		{param + "=a&" + param + "=b", param},
		{param + "=" + strings.Repeat("x", 1025), param},
	}
}

func nameCase(name, path, schema, collection, plural, table, field string) crudCase {
	return crudCase{name: name, path: path, schema: schema, collection: collection, plural: plural, table: table,
		arrange: func(f *fixture) crudArrangement {
			return crudArrangement{
				body:   func(n int) map[string]any { return map[string]any{field: fmt.Sprintf("%s %d", name, n)} },
				change: func(doc map[string]any) { doc[field] = doc[field].(string) + " renamed" },
				filters: []filterCase{
					{url.Values{field: {name + " 2"}}, []int{2}},
					{url.Values{field: {name + " 9"}}, nil},
					{url.Values{field: {name}}, nil}, // exact match, not a prefix
				},
				invalid: textFilterRefusals(field),
			}
		}}
}

var crudCases = []crudCase{
	nameCase("group", "/groups", "group.json", "usergroups.json", "usergroups", "patron_group", "group"),
	nameCase("material type", "/material-types", "material-type.json", "mtypes.json", "mtypes", "material_type", "name"),
	nameCase("loan type", "/loan-types", "loan-type.json", "loantypes.json", "loantypes", "loan_type", "name"),
	{name: "user", path: "/users", schema: "user.json", collection: "users.json", plural: "users", table: "patron",
		arrange: func(f *fixture) crudArrangement {
			g1, g2 := f.newGroup("odd"), f.newGroup("even")
			group := func(n int) string { return map[bool]string{true: g1, false: g2}[n%2 == 1] }
			return crudArrangement{
				body: func(n int) map[string]any { return userDoc(fmt.Sprintf("u-%d", n), group(n)) },
				change: func(doc map[string]any) {
					doc["active"] = false
					doc["patronGroup"] = g2
					doc["personal"] = map[string]any{"lastName": "Byron"}
				},
				filters: []filterCase{
					{url.Values{"barcode": {"u-3"}}, []int{3}},
					{url.Values{"patronGroup": {g1}}, []int{1, 3, 5}},
					{url.Values{"patronGroup": {strings.ToUpper(g2)}}, []int{2, 4}},
					{url.Values{"barcode": {"u-3"}, "patronGroup": {g1}}, []int{3}},
					{url.Values{"barcode": {"u-3"}, "patronGroup": {g2}}, nil},
					{url.Values{"patronGroup": {uuid.NewString()}}, nil},
				},
				invalid: append(textFilterRefusals("barcode"),
					invalidQuery{"patronGroup=not-a-uuid", "patronGroup"},
					invalidQuery{"patronGroup=" + g1 + "&patronGroup=" + g2, "patronGroup"}),
			}
		}},
	{name: "item", path: "/item-storage/items", schema: "item.json", collection: "items.json", plural: "items", table: "item",
		versioned: true,
		arrange: func(f *fixture) crudArrangement {
			mt, lt := f.newMaterialType("book"), f.newLoanType("Can circulate")
			return crudArrangement{
				body: func(n int) map[string]any {
					doc := itemDoc(fmt.Sprintf("it-%d", n), mt, lt)
					if n > 2 {
						doc["status"] = map[string]any{"name": "In transit", "date": "2024-03-01T10:00:00Z"}
					}
					return doc
				},
				change: func(doc map[string]any) {
					doc["title"] = "A new title"
					doc["status"] = map[string]any{"name": "Missing"}
					doc["temporaryLoanTypeId"] = lt
				},
				filters: []filterCase{
					{url.Values{"barcode": {"it-2"}}, []int{2}},
					{url.Values{"status": {"Available"}}, []int{1, 2}},
					{url.Values{"status": {"In transit"}}, []int{3, 4, 5}},
					{url.Values{"status": {"In transit"}, "barcode": {"it-4"}}, []int{4}},
					{url.Values{"status": {"Available"}, "barcode": {"it-4"}}, nil},
					{url.Values{"barcode": {"it-"}}, nil},
				},
				invalid: append(textFilterRefusals("barcode"), textFilterRefusals("status")...),
			}
		}},
	{name: "loan policy", path: "/loan-policy-storage/loan-policies", schema: "loan-policy.json", collection: "loan-policies.json",
		plural: "loanPolicies", table: "loan_policy",
		arrange: func(f *fixture) crudArrangement {
			return crudArrangement{
				body: func(n int) map[string]any {
					return map[string]any{"name": fmt.Sprintf("policy %d", n), "loanable": true, "loansPolicy": map[string]any{
						"profileId": "Rolling", "period": map[string]any{"duration": n, "intervalId": "Weeks"}, "itemLimit": n}}
				},
				change: func(doc map[string]any) {
					doc["description"] = "Reference only"
					doc["loanable"] = false
					delete(doc, "loansPolicy")
				},
				filters: []filterCase{
					{url.Values{"name": {"policy 4"}}, []int{4}},
					{url.Values{"name": {"POLICY 4"}}, nil},
				},
				invalid: textFilterRefusals("name"),
			}
		}},
	{name: "loan", path: "/loan-storage/loans", schema: "loan.json", collection: "loans.json", plural: "loans", table: "loan", versioned: true,
		arrange: func(f *fixture) crudArrangement {
			g := f.newGroup("staff")
			u1, u2 := f.newPatron("p-1", g), f.newPatron("p-2", g)
			mt, lt := f.newMaterialType("book"), f.newLoanType("Can circulate")
			items := []string{""}
			for n := 1; n <= 5; n++ {
				items = append(items, f.newItem(itemDoc(fmt.Sprintf("li-%d", n), mt, lt)))
			}
			user := func(n int) string { return map[bool]string{true: u1, false: u2}[n%2 == 1] }
			return crudArrangement{
				// Loans 3 to 5 are open, made by check-out writes; 1 and 2
				// closed (PUT and DELETE keep to what a closed loan
				// allows).
				headers: func(n int) map[string]string {
					if n >= 3 {
						return map[string]string{ItemVersionHeader: "1"}
					}
					return nil
				},
				body: func(n int) map[string]any {
					status := map[bool]string{true: "Open", false: "Closed"}[n >= 3]
					doc := loanDoc(user(n), items[n], status)
					doc["loanDate"] = fmt.Sprintf("2024-03-0%dT10:00:00Z", n)
					doc["dueDate"] = fmt.Sprintf("2024-03-2%dT10:00:00Z", n)
					return doc
				},
				change: func(doc map[string]any) {
					doc["status"] = map[string]any{"name": "Closed"}
					doc["action"] = "checkedin"
					doc["returnDate"] = "2024-03-10T12:00:00.000+01:00"
				},
				filters: []filterCase{
					{url.Values{"userId": {u1}}, []int{1, 3, 5}},
					{url.Values{"itemId": {items[2]}}, []int{2}},
					{url.Values{"status": {"Open"}}, []int{3, 4, 5}},
					{url.Values{"status": {"Closed"}}, []int{1, 2}},
					{url.Values{"userId": {u1}, "status": {"Open"}}, []int{3, 5}},
					{url.Values{"userId": {u2}, "itemId": {items[2]}, "status": {"Closed"}}, []int{2}},
					{url.Values{"userId": {u2}, "itemId": {items[3]}}, nil},
					{url.Values{"userId": {uuid.NewString()}}, nil},
				},
				invalid: []invalidQuery{
					{"userId=42", "userId"},
					{"itemId=" + items[1] + "x", "itemId"},
					{"status=open", "status"},
					{"status=Lost", "status"},
					{"status=", "status"},
					{"status=Open&status=Closed", "status"},
				},
			}
		}},
	{name: "setting", path: "/settings/entries", schema: "setting.json", collection: "settings.json", plural: "items", table: "setting",
		versioned: true,
		arrange: func(f *fixture) crudArrangement {
			return crudArrangement{
				body: func(n int) map[string]any {
					scope := map[bool]string{true: "scope-a", false: "scope-b"}[n <= 3]
					return map[string]any{"scope": scope, "key": fmt.Sprintf("key-%d", n), "value": map[string]any{"n": n}}
				},
				change: func(doc map[string]any) { doc["value"] = []any{"changed", 2.5, nil} },
				filters: []filterCase{
					{url.Values{"scope": {"scope-a"}}, []int{1, 2, 3}},
					{url.Values{"key": {"key-4"}}, []int{4}},
					{url.Values{"scope": {"scope-b"}, "key": {"key-4"}}, []int{4}},
					{url.Values{"scope": {"scope-a"}, "key": {"key-4"}}, nil},
				},
				invalid: append(textFilterRefusals("scope"), textFilterRefusals("key")...),
			}
		}},
}

// TestRecordCRUD runs create, read, list, filter, update and delete against
// every resource, each in a tenant of its own.
func TestRecordCRUD(t *testing.T) {
	t.Parallel()
	for _, c := range crudCases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			testCRUD(t, setup(t), c)
		})
	}
}

func testCRUD(t *testing.T, f *fixture, c crudCase) {
	a := c.arrange(f)
	ids := make([]string, 6) // ids[1..5]
	stored := make([]map[string]any, 6)
	createdDates := make([]string, 6)

	// POST with a client id keeps it; without one, an id is generated.
	for n := 1; n <= 5; n++ {
		doc := a.body(n)
		if n%2 == 1 {
			doc["id"] = uuid.NewString()
		}
		if c.versioned && n == 3 {
			doc["_version"] = 9 // the service sets 1 whatever the client says
		}
		var h map[string]string
		if a.headers != nil {
			h = a.headers(n)
		}
		res := f.doWith("POST", c.path, jsonBody(doc), f.with(h)).wantStatus(http.StatusCreated).wantSchema(c.schema)
		got := res.doc()
		id, _ := got["id"].(string)
		if n%2 == 1 && id != doc["id"] {
			t.Errorf("POST record %d with id %s: stored with id %q", n, doc["id"], id)
		}
		if n%2 == 0 && uuid.Validate(id) != nil {
			t.Fatalf("POST record %d without id: id %q, want a generated UUID", n, id)
		}
		if loc := res.header.Get("Location"); loc != c.path+"/"+id {
			t.Errorf("Location %q, want %q", loc, c.path+"/"+id)
		}
		want := roundTrip(t, doc).(map[string]any)
		want["id"] = id
		if c.versioned {
			want["_version"] = 1.0
		}
		createdDates[n] = wantMetadata(t, got, "", "")
		want["metadata"] = got["metadata"]
		if !reflect.DeepEqual(got, want) {
			t.Errorf("POST record %d answered %v, want %v", n, got, want)
		}
		ids[n], stored[n] = id, got
	}
	if distinct := slices.Compact(slices.Sorted(slices.Values(ids[1:]))); len(distinct) != 5 {
		t.Fatalf("ids not distinct: %v", ids[1:])
	}
	if n := f.countRows(c.table, ""); n != 5 {
		t.Fatalf("%d rows in %s after five POSTs, want 5", n, c.table)
	}
	var dbID string
	if err := f.pool.QueryRow(t.Context(), `SELECT id::text FROM `+f.table(c.table)+` WHERE id = $1 AND jsonb ->> 'id' = $1::text`,
		ids[1]).Scan(&dbID); err != nil {
		t.Errorf("row %s: id column and document id disagree: %v", ids[1], err)
	}

	// GET.
	for n := 1; n <= 5; n++ {
		got := f.do("GET", c.path+"/"+ids[n], "").wantStatus(http.StatusOK).wantSchema(c.schema).doc()
		if !reflect.DeepEqual(got, stored[n]) {
			t.Errorf("GET record %d = %v, want %v", n, got, stored[n])
		}
	}
	f.do("GET", c.path+"/"+uuid.NewString(), "").wantError(http.StatusNotFound, "NOT_FOUND")
	e := f.do("GET", c.path+"/not-a-uuid", "").wantError(http.StatusBadRequest, "INVALID_ID")
	wantErrorParam(t, e, "id", "not-a-uuid")
	f.do("GET", c.path+"/"+ids[1]+"0", "").wantError(http.StatusBadRequest, "INVALID_ID")

	// List and paging: totalRecords counts every match, not the page.
	all, total := f.list(c.path, "", c.collection, c.plural)
	if total != 5 || len(all) != 5 {
		t.Errorf("list: %d records, total %d; want 5 of 5", len(all), total)
	}
	for _, d := range all {
		if err := sch.ValidateJSON(c.schema, []byte(jsonBody(d))); err != nil {
			t.Errorf("listed record does not match %s: %v", c.schema, err)
		}
	}
	var paged []string
	for _, p := range []struct{ offset, want int }{{0, 2}, {2, 2}, {4, 1}, {5, 0}, {100, 0}} {
		docs, total := f.list(c.path, fmt.Sprintf("offset=%d&limit=2", p.offset), c.collection, c.plural)
		if len(docs) != p.want || total != 5 {
			t.Errorf("offset %d limit 2: %d records, total %d; want %d of 5", p.offset, len(docs), total, p.want)
		}
		paged = append(paged, idsOf(docs)...)
	}
	if !reflect.DeepEqual(paged, idsOf(all)) {
		t.Errorf("pages %v, want the full list's order %v", paged, idsOf(all))
	}
	if docs, total := f.list(c.path, "limit=0", c.collection, c.plural); len(docs) != 0 || total != 5 {
		t.Errorf("limit 0: %d records, total %d; want 0 of 5", len(docs), total)
	}
	if docs, total := f.list(c.path, "limit=1000&offset=0", c.collection, c.plural); len(docs) != 5 || total != 5 {
		t.Errorf("limit 1000: %d records, total %d; want 5 of 5", len(docs), total)
	}
	// FOLIO's fetchers ask for every match with its pageable maximum.
	if docs, total := f.list(c.path, "limit=2147483647", c.collection, c.plural); len(docs) != 5 || total != 5 {
		t.Errorf("limit 2147483647: %d records, total %d; want 5 of 5", len(docs), total)
	}
	for _, q := range []string{"limit=-1", "limit=2147483648", "limit=ten", "offset=-1", "offset=1.5", "limit=1&limit=2"} {
		name := strings.SplitN(q, "=", 2)[0]
		e := f.do("GET", c.path+"?"+q, "").wantError(http.StatusUnprocessableEntity, "INVALID_PARAMETER")
		if _, ok := params(e)[name]; !ok {
			t.Errorf("?%s: error %+v does not name %s", q, e.Errors[0], name)
		}
	}

	// Filters, alone and combined, paged with totals.
	for _, fc := range a.filters {
		docs, total := f.list(c.path, fc.query.Encode(), c.collection, c.plural)
		var want []string
		for _, n := range fc.want {
			want = append(want, ids[n])
		}
		got := idsOf(docs)
		slices.Sort(got)
		slices.Sort(want)
		if total != len(want) || !slices.Equal(got, want) {
			t.Errorf("?%s: ids %v total %d, want %v", fc.query.Encode(), got, total, want)
		}
		if len(want) > 1 {
			docs, total := f.list(c.path, fc.query.Encode()+"&limit=1&offset=1", c.collection, c.plural)
			if len(docs) != 1 || total != len(want) {
				t.Errorf("?%s second page of 1: %d records, total %d; want 1 of %d", fc.query.Encode(), len(docs), total, len(want))
			}
		}
	}
	// An unknown parameter is not a filter.
	if _, total := f.list(c.path, "nonsense=1", c.collection, c.plural); total != 5 {
		t.Errorf("?nonsense=1: total %d, want 5", total)
	}
	for _, q := range a.invalid {
		e := f.do("GET", c.path+"?"+q.query, "").wantError(http.StatusUnprocessableEntity, "INVALID_PARAMETER")
		if _, ok := params(e)[q.param]; !ok || !strings.HasPrefix(e.Errors[0].Message, q.param+" ") {
			t.Errorf("?%.60s: error %+v should name %s", q.query, e.Errors[0], q.param)
		}
	}

	// PUT replaces the record; GET shows the change.
	doc := a.body(1)
	a.change(doc)
	doc["id"] = ids[1]
	if c.versioned {
		doc["_version"] = 1
	}
	f.do("PUT", c.path+"/"+ids[1], jsonBody(doc)).wantStatus(http.StatusNoContent)
	got := f.do("GET", c.path+"/"+ids[1], "").wantStatus(http.StatusOK).wantSchema(c.schema).doc()
	want := roundTrip(t, doc).(map[string]any)
	if c.versioned {
		want["_version"] = 2.0
	}
	// The creation is kept, the change recorded.
	wantMetadata(t, got, createdDates[1], "after")
	want["metadata"] = got["metadata"]
	if !reflect.DeepEqual(got, want) {
		t.Errorf("after PUT, GET = %v, want %v", got, want)
	}
	// A body without id takes the path's.
	doc2 := a.body(2)
	a.change(doc2)
	if c.versioned {
		doc2["_version"] = 1
	}
	f.do("PUT", c.path+"/"+ids[2], jsonBody(doc2)).wantStatus(http.StatusNoContent)
	if got := f.do("GET", c.path+"/"+ids[2], "").wantStatus(http.StatusOK).doc(); got["id"] != ids[2] {
		t.Errorf("PUT without body id: GET = %v, want id %s", got, ids[2])
	}

	// Refused PUTs and DELETEs change nothing.
	before := f.recordsSnapshot()
	other := uuid.NewString()
	mismatch := maps.Clone(doc)
	mismatch["id"] = other
	e = f.do("PUT", c.path+"/"+ids[1], jsonBody(mismatch)).wantError(http.StatusUnprocessableEntity, "VALIDATION_FAILED")
	wantErrorParam(t, e, "id", other)
	mismatch["id"] = ids[3]
	f.do("PUT", c.path+"/"+ids[1], jsonBody(mismatch)).wantError(http.StatusUnprocessableEntity, "VALIDATION_FAILED")
	unknown := maps.Clone(doc)
	delete(unknown, "id")
	f.do("PUT", c.path+"/"+other, jsonBody(unknown)).wantError(http.StatusNotFound, "NOT_FOUND")
	f.do("PUT", c.path+"/not-a-uuid", jsonBody(unknown)).wantError(http.StatusBadRequest, "INVALID_ID")
	f.do("PUT", c.path+"/"+ids[1], `{}`).wantError(http.StatusUnprocessableEntity, "VALIDATION_FAILED")
	f.do("PUT", c.path+"/"+ids[1], `{"id":`).wantError(http.StatusBadRequest, "MALFORMED_JSON")
	f.do("DELETE", c.path+"/"+other, "").wantError(http.StatusNotFound, "NOT_FOUND")
	f.do("DELETE", c.path+"/not-a-uuid", "").wantError(http.StatusBadRequest, "INVALID_ID")
	f.do("POST", c.path, `{}`).wantError(http.StatusUnprocessableEntity, "VALIDATION_FAILED")
	bad := a.body(1)
	bad["id"] = "not-a-uuid"
	e = f.do("POST", c.path, jsonBody(bad)).wantError(http.StatusUnprocessableEntity, "VALIDATION_FAILED")
	wantErrorParam(t, e, "id", "not-a-uuid")
	f.wantUnchanged(before, "refused writes")

	// DELETE, then it is gone.
	f.do("DELETE", c.path+"/"+ids[1], "").wantStatus(http.StatusNoContent)
	f.do("GET", c.path+"/"+ids[1], "").wantError(http.StatusNotFound, "NOT_FOUND")
	f.do("DELETE", c.path+"/"+ids[1], "").wantError(http.StatusNotFound, "NOT_FOUND")
	if c.versioned {
		doc["_version"] = 2
	}
	f.do("PUT", c.path+"/"+ids[1], jsonBody(doc)).wantError(http.StatusNotFound, "NOT_FOUND")
	if n := f.countRows(c.table, ""); n != 4 {
		t.Errorf("%d rows after DELETE, want 4", n)
	}
	if n := f.countRows(c.table, "id = $1", ids[1]); n != 0 {
		t.Errorf("deleted record %s still has a row", ids[1])
	}
	if _, total := f.list(c.path, "", c.collection, c.plural); total != 4 {
		t.Errorf("list after DELETE: total %d, want 4", total)
	}
}

// TestUniquenessIs422NamingTheField: a second record with a unique value
// taken is refused, by POST and by PUT, and nothing is written.
func TestUniquenessIs422NamingTheField(t *testing.T) {
	t.Parallel()
	f := setup(t)
	g := f.newGroup("taken")
	mt, lt := f.newMaterialType("taken"), f.newLoanType("taken")
	f.newPolicy("taken")
	f.newPatron("u-taken", g)
	f.newItem(itemDoc("i-taken", mt, lt))
	f.post("/settings/entries", "setting.json", map[string]any{"scope": "s", "key": "taken", "value": 1})
	otherPatron := f.newPatron("u-other", g)
	otherItem := f.newItem(itemDoc("i-other", mt, lt))

	for _, c := range []struct {
		path, table string
		doc         map[string]any
		field       string
		value       string
		message     string
	}{
		{"/groups", "patron_group", map[string]any{"group": "taken", "desc": "again"}, "group", "taken",
			`Patron group with group "taken" already exists`},
		{"/material-types", "material_type", map[string]any{"name": "taken"}, "name", "taken",
			`Material type with name "taken" already exists`},
		{"/loan-types", "loan_type", map[string]any{"name": "taken"}, "name", "taken", `Loan type with name "taken" already exists`},
		{"/loan-policy-storage/loan-policies", "loan_policy", map[string]any{"name": "taken", "loanable": false}, "name", "taken",
			`Loan policy with name "taken" already exists`},
		{"/users", "patron", userDoc("u-taken", g), "barcode", "u-taken", `User with barcode "u-taken" already exists`},
		{"/item-storage/items", "item", itemDoc("i-taken", mt, lt), "barcode", "i-taken", `Item with barcode "i-taken" already exists`},
		{"/settings/entries", "setting", map[string]any{"scope": "s", "key": "taken", "value": 2}, "key", "s/taken",
			`Setting with key "s/taken" already exists`},
	} {
		before := f.recordsSnapshot()
		rows := f.countRows(c.table, "")
		e := f.do("POST", c.path, jsonBody(c.doc)).wantError(http.StatusUnprocessableEntity, "ALREADY_EXISTS")
		wantErrorParam(t, e, c.field, c.value)
		if e.Errors[0].Message != c.message {
			t.Errorf("POST %s: message %q, want %q", c.path, e.Errors[0].Message, c.message)
		}
		if n := f.countRows(c.table, ""); n != rows {
			t.Errorf("POST %s: %d rows, want %d", c.path, n, rows)
		}
		f.wantUnchanged(before, "POST "+c.path)
	}

	// PUT onto a taken value is refused the same way.
	before := f.recordsSnapshot()
	e := f.do("PUT", "/users/"+otherPatron, jsonBody(userDoc("u-taken", g))).wantError(http.StatusUnprocessableEntity, "ALREADY_EXISTS")
	wantErrorParam(t, e, "barcode", "u-taken")
	doc := itemDoc("i-taken", mt, lt)
	doc["_version"] = 1
	e = f.do("PUT", "/item-storage/items/"+otherItem, jsonBody(doc)).wantError(http.StatusUnprocessableEntity, "ALREADY_EXISTS")
	wantErrorParam(t, e, "barcode", "i-taken")
	f.wantUnchanged(before, "PUT onto a taken value")

	// The same key in another scope, and patrons or items without barcodes, are fine.
	f.post("/settings/entries", "setting.json", map[string]any{"scope": "other", "key": "taken", "value": 3})
	noBarcode := userDoc("", g)
	delete(noBarcode, "barcode")
	f.post("/users", "user.json", noBarcode)
	f.post("/users", "user.json", noBarcode)
	if n := f.countRows("patron", "barcode IS NULL"); n != 2 {
		t.Errorf("%d patrons without barcode, want 2", n)
	}

	// A second record with an id that is taken is refused, and writes nothing.
	before = f.recordsSnapshot()
	dupe := userDoc("u-new", g)
	dupe["id"] = otherPatron
	f.do("POST", "/users", jsonBody(dupe)).wantError(http.StatusConflict, "CONFLICT")
	f.wantUnchanged(before, "POST with a taken id")
}

// TestReferencesAreChecked: a record naming a record that does not exist is
// refused naming the field; a record others refer to cannot be deleted.
func TestReferencesAreChecked(t *testing.T) {
	t.Parallel()
	f := setup(t)
	g := f.newGroup("staff")
	mt, lt := f.newMaterialType("book"), f.newLoanType("Can circulate")
	tempLT := f.newLoanType("Reading room")
	lp := f.newPolicy("standard")
	patron := f.newPatron("u-1", g)
	itemID := f.newItem(itemDoc("i-1", mt, lt))
	nobody := uuid.NewString()

	withField := func(doc map[string]any, k, v string) map[string]any {
		doc[k] = v
		return doc
	}
	for _, c := range []struct {
		path, table string
		doc         map[string]any
		field       string
		message     string
	}{
		{"/item-storage/items", "item", withField(itemDoc("i-2", mt, lt), "materialTypeId", nobody), "materialTypeId",
			"materialTypeId: material type " + nobody + " does not exist"},
		{"/item-storage/items", "item", withField(itemDoc("i-2", mt, lt), "permanentLoanTypeId", nobody), "permanentLoanTypeId",
			"permanentLoanTypeId: loan type " + nobody + " does not exist"},
		{"/item-storage/items", "item", withField(itemDoc("i-2", mt, lt), "temporaryLoanTypeId", nobody), "temporaryLoanTypeId",
			"temporaryLoanTypeId: loan type " + nobody + " does not exist"},
		{"/users", "patron", userDoc("u-2", nobody), "patronGroup", "patronGroup: patron group " + nobody + " does not exist"},
		{"/loan-storage/loans", "loan", loanDoc(nobody, itemID, "Closed"), "userId", "userId: user " + nobody + " does not exist"},
		{"/loan-storage/loans", "loan", loanDoc(patron, nobody, "Closed"), "itemId", "itemId: item " + nobody + " does not exist"},
		{"/loan-storage/loans", "loan", withField(loanDoc(patron, itemID, "Closed"), "loanPolicyId", nobody), "loanPolicyId",
			"loanPolicyId: loan policy " + nobody + " does not exist"},
	} {
		before := f.recordsSnapshot()
		e := f.do("POST", c.path, jsonBody(c.doc)).wantError(http.StatusUnprocessableEntity, "VALIDATION_FAILED")
		wantErrorParam(t, e, c.field, nobody)
		if e.Errors[0].Message != c.message {
			t.Errorf("POST %s: message %q, want %q", c.path, e.Errors[0].Message, c.message)
		}
		f.wantUnchanged(before, "POST "+c.path+" naming an unknown "+c.field)
	}

	// PUT to an unknown reference is refused too.
	before := f.recordsSnapshot()
	doc := withField(itemDoc("i-1", mt, lt), "materialTypeId", nobody)
	doc["_version"] = 1
	e := f.do("PUT", "/item-storage/items/"+itemID, jsonBody(doc)).wantError(http.StatusUnprocessableEntity, "VALIDATION_FAILED")
	wantErrorParam(t, e, "materialTypeId", nobody)
	e = f.do("PUT", "/users/"+patron, jsonBody(userDoc("u-1", nobody))).wantError(http.StatusUnprocessableEntity, "VALIDATION_FAILED")
	wantErrorParam(t, e, "patronGroup", nobody)
	f.wantUnchanged(before, "PUT naming unknown records")

	// Records in use cannot be deleted.
	tempItem := withField(itemDoc("i-temp", mt, lt), "temporaryLoanTypeId", tempLT)
	f.newItem(tempItem)
	loan := loanDoc(patron, itemID, "Closed")
	loan["loanPolicyId"] = lp
	loanID := f.post("/loan-storage/loans", "loan.json", loan)
	for _, c := range []struct{ path, id, message string }{
		{"/material-types/", mt, "Cannot delete material type " + mt + ": items refer to it"},
		{"/loan-types/", lt, "Cannot delete loan type " + lt + ": items refer to it"},
		{"/loan-types/", tempLT, "Cannot delete loan type " + tempLT + ": items refer to it"},
		{"/groups/", g, "Cannot delete patron group " + g + ": users refer to it"},
		{"/loan-policy-storage/loan-policies/", lp, "Cannot delete loan policy " + lp + ": loans refer to it"},
		{"/users/", patron, "Cannot delete user " + patron + ": loans refer to it"},
		{"/item-storage/items/", itemID, "Cannot delete item " + itemID + ": loans refer to it"},
	} {
		before := f.recordsSnapshot()
		e := f.do("DELETE", c.path+c.id, "").wantError(http.StatusConflict, "RECORD_IN_USE")
		wantErrorParam(t, e, "id", c.id)
		if e.Errors[0].Message != c.message {
			t.Errorf("DELETE %s%s: message %q, want %q", c.path, c.id, e.Errors[0].Message, c.message)
		}
		f.wantUnchanged(before, "DELETE "+c.path+c.id)
		f.do("GET", c.path+c.id, "").wantStatus(http.StatusOK)
	}
	// Once nothing refers to them, they can go, in order.
	f.do("DELETE", "/loan-storage/loans/"+loanID, "").wantStatus(http.StatusNoContent)
	f.do("DELETE", "/loan-policy-storage/loan-policies/"+lp, "").wantStatus(http.StatusNoContent)
	f.do("DELETE", "/users/"+patron, "").wantStatus(http.StatusNoContent)
	f.do("DELETE", "/groups/"+g, "").wantStatus(http.StatusNoContent)
	f.do("DELETE", "/item-storage/items/"+itemID, "").wantStatus(http.StatusNoContent)
}

// TestItemOptimisticLocking: POST sets _version 1, a PUT must carry the
// stored _version and increments it, a stale one is a 409 that changes
// nothing.
func TestItemOptimisticLocking(t *testing.T) {
	t.Parallel()
	f := setup(t)
	mt, lt := f.newMaterialType("book"), f.newLoanType("Can circulate")
	doc := itemDoc("v-1", mt, lt)
	doc["_version"] = 7
	res := f.do("POST", "/item-storage/items", jsonBody(doc)).wantStatus(http.StatusCreated).wantSchema("item.json")
	created := res.doc()
	id := created["id"].(string)
	if created["_version"] != 1.0 {
		t.Errorf("POST with _version 7 answered _version %v, want 1", created["_version"])
	}
	version := func() int {
		var v int
		if err := f.pool.QueryRow(t.Context(), `SELECT version FROM `+f.table("item")+` WHERE id = $1`, id).Scan(&v); err != nil {
			t.Fatal(err)
		}
		return v
	}
	if v := version(); v != 1 {
		t.Errorf("stored version %d, want 1", v)
	}

	doc["title"] = "Second edition"
	doc["_version"] = 1
	f.do("PUT", "/item-storage/items/"+id, jsonBody(doc)).wantStatus(http.StatusNoContent)
	got := f.do("GET", "/item-storage/items/"+id, "").wantStatus(http.StatusOK).wantSchema("item.json").doc()
	if got["_version"] != 2.0 || got["title"] != "Second edition" || version() != 2 {
		t.Errorf("after PUT: %v (stored version %d), want _version 2 and the new title", got, version())
	}

	// Stale, future and missing versions are conflicts (FOLIO's
	// optimistic-locking error); one that is not a version is invalid.
	before := f.recordsSnapshot()
	stale := maps.Clone(doc)
	stale["title"] = "Lost update"
	for _, v := range []int{1, 3} {
		stale["_version"] = v
		e := f.do("PUT", "/item-storage/items/"+id, jsonBody(stale)).wantError(http.StatusConflict, "VERSION_CONFLICT")
		wantErrorParam(t, e, "_version", "2")
		if !strings.Contains(e.Errors[0].Message, id) {
			t.Errorf("conflict message %q should name the item", e.Errors[0].Message)
		}
	}
	delete(stale, "_version")
	e := f.do("PUT", "/item-storage/items/"+id, jsonBody(stale)).wantError(http.StatusConflict, "VERSION_CONFLICT")
	wantErrorParam(t, e, "_version", "2")
	if want := "Cannot update record " + id + " because it has been changed (optimistic locking): Stored _version is 2, _version of request is <NULL>"; e.Errors[0].Message != want {
		t.Errorf("missing _version: %q, want %q", e.Errors[0].Message, want)
	}
	for _, v := range []string{"0", `"2"`, "null", "2.5"} {
		body := strings.Replace(jsonBody(stale), `"barcode"`, `"_version":`+v+`,"barcode"`, 1)
		f.do("PUT", "/item-storage/items/"+id, body).wantError(http.StatusUnprocessableEntity, "VALIDATION_FAILED")
	}
	f.wantUnchanged(before, "refused item updates")
	if got2 := f.do("GET", "/item-storage/items/"+id, "").wantStatus(http.StatusOK).doc(); !reflect.DeepEqual(got2, got) {
		t.Errorf("after refused updates GET = %v, want %v", got2, got)
	}

	// Ten writers with the same version: one wins, nine conflict.
	const writers = 10
	statuses := make([]int, writers)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range writers {
		body := maps.Clone(doc)
		body["_version"] = 2
		body["title"] = fmt.Sprintf("Writer %d", i)
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			statuses[i] = rawDo(t, f, "PUT", "/item-storage/items/"+id, jsonBody(body))
		}()
	}
	close(start)
	wg.Wait()
	winner := slices.Index(statuses, http.StatusNoContent)
	count := map[int]int{}
	for _, s := range statuses {
		count[s]++
	}
	if count[http.StatusNoContent] != 1 || count[http.StatusConflict] != writers-1 {
		t.Fatalf("concurrent PUTs: statuses %v, want one 204 and %d 409", count, writers-1)
	}
	got = f.do("GET", "/item-storage/items/"+id, "").wantStatus(http.StatusOK).doc()
	if got["_version"] != 3.0 || got["title"] != fmt.Sprintf("Writer %d", winner) {
		t.Errorf("after the race: %v, want _version 3 and writer %d's title", got, winner)
	}
}

// rawDo sends a request as f's tenant from any goroutine and returns the
// status; transport errors are reported with t.Errorf.
func rawDo(t *testing.T, f *fixture, method, path, body string) int {
	return rawDoWith(t, f, method, path, body, nil)
}

// rawDoWith is rawDo with headers.
func rawDoWith(t *testing.T, f *fixture, method, path, body string, headers map[string]string) int {
	req, err := http.NewRequest(method, f.url+path, strings.NewReader(body))
	if err != nil {
		t.Errorf("%s %s: %v", method, path, err)
		return 0
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(TenantHeader, f.tenant)
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Errorf("%s %s: %v", method, path, err)
		return 0
	}
	defer res.Body.Close()
	var e errhttp.Envelope
	if res.StatusCode >= 400 {
		if err := json.NewDecoder(res.Body).Decode(&e); err != nil || len(e.Errors) == 0 {
			t.Errorf("%s %s: %d without an error envelope", method, path, res.StatusCode)
		} else if res.StatusCode == http.StatusUnprocessableEntity && e.Errors[0].Code != "ITEM_HAS_OPEN_LOAN" ||
			res.StatusCode == http.StatusConflict && e.Errors[0].Code != "VERSION_CONFLICT" {
			t.Errorf("%s %s: %d %+v", method, path, res.StatusCode, e.Errors[0])
		}
	}
	return res.StatusCode
}

// TestLoansAndRequestsAreReplacedOnlyAtTheVersionRead: a loan or a
// request PUT without _version, or at one another write moved on, is 409
// with FOLIO's optimistic-locking error, and nothing changes; every write
// moves the version, a request's too when its queue moves around it. A
// stale replace of a loan cannot undo its renewal.
func TestLoansAndRequestsAreReplacedOnlyAtTheVersionRead(t *testing.T) {
	t.Parallel()
	f := setup(t)
	g := f.newGroup("staff")
	alice, bob := f.newPatron("alice", g), f.newPatron("bob", g)
	mt, lt := f.newMaterialType("book"), f.newLoanType("Can circulate")
	item := f.newItem(itemDoc("i-1", mt, lt))
	stale := func(path string, doc map[string]any, stored int, named string) {
		t.Helper()
		before := f.recordsSnapshot()
		e := f.do("PUT", path, jsonBody(doc)).wantError(http.StatusConflict, "VERSION_CONFLICT")
		id := path[strings.LastIndex(path, "/")+1:]
		if want := fmt.Sprintf("Cannot update record %s because it has been changed (optimistic locking): Stored _version is %d, _version of request is %s",
			id, stored, named); e.Errors[0].Message != want {
			t.Errorf("PUT %s at %s: %q, want %q", path, named, e.Errors[0].Message, want)
		}
		wantErrorParam(t, e, "_version", strconv.Itoa(stored))
		f.wantUnchanged(before, "PUT "+path+" at "+named)
	}
	version := func(path string) float64 {
		t.Helper()
		return f.do("GET", path, "").wantStatus(http.StatusOK).doc()["_version"].(float64)
	}

	// A loan: renewed at the version read, then a copy read before the
	// renewal, and one without a version, refused.
	loan := "/loan-storage/loans/" + f.doWith("POST", "/loan-storage/loans", jsonBody(loanDoc(alice, item, "Open")),
		f.with(checkOutAtVersion1)).wantStatus(http.StatusCreated).doc()["id"].(string)
	read := loanDoc(alice, item, "Open")
	read["dueDate"], read["_version"] = "2024-03-22T10:00:00Z", 1
	renewed := maps.Clone(read)
	renewed["dueDate"], renewed["action"], renewed["renewalCount"] = "2024-04-12T10:00:00Z", "renewed", 1
	f.do("PUT", loan, jsonBody(renewed)).wantStatus(http.StatusNoContent)
	stale(loan, read, 2, "1")
	delete(read, "_version")
	stale(loan, read, 2, "<NULL>")
	if got := f.do("GET", loan, "").wantStatus(http.StatusOK).doc(); got["dueDate"] != "2024-04-12T10:00:00Z" || got["renewalCount"] != 1.0 || got["_version"] != 2.0 {
		t.Errorf("the loan after the stale replaces: %v, want its renewal kept at _version 2", got)
	}

	// Requests: the first's replace moves its version; the second's moves
	// when the first, cancelled, leaves the queue in front of it.
	request := func(requester string) (string, map[string]any) {
		doc := map[string]any{"requestType": "Hold", "requestDate": "2024-03-01T10:00:00Z", "requesterId": requester, "itemId": item,
			"status": "Open - Not yet filled", "fulfillmentPreference": "Hold Shelf"}
		return "/request-storage/requests/" + f.post("/request-storage/requests", "request.json", doc), doc
	}
	first, firstDoc := request(bob)
	second, secondDoc := request(alice)
	if version(first) != 1 || version(second) != 1 {
		t.Fatalf("requests created at _version %v and %v, want 1", version(first), version(second))
	}
	stale(first, firstDoc, 1, "<NULL>")
	firstDoc["_version"], firstDoc["patronComments"] = 1, "Please keep it for me"
	f.do("PUT", first, jsonBody(firstDoc)).wantStatus(http.StatusNoContent)
	stale(first, firstDoc, 2, "1")
	firstDoc["_version"], firstDoc["status"] = 2, "Closed - Cancelled"
	f.do("PUT", first, jsonBody(firstDoc)).wantStatus(http.StatusNoContent)
	got := f.do("GET", second, "").wantStatus(http.StatusOK).doc()
	if got["position"] != 1.0 || got["_version"] != 2.0 {
		t.Errorf("the second request after the first left the queue: position %v, _version %v; want 1 and 2", got["position"], got["_version"])
	}
	secondDoc["_version"], secondDoc["position"] = 1, 2
	stale(second, secondDoc, 2, "1")
}

const openLoanMessage = "Cannot have more than one open loan for the same item"

// TestOneOpenLoanPerItem: a second open loan for an item is refused until
// the first is closed.
func TestOneOpenLoanPerItem(t *testing.T) {
	t.Parallel()
	f := setup(t)
	g := f.newGroup("staff")
	alice, bob := f.newPatron("alice", g), f.newPatron("bob", g)
	mt, lt := f.newMaterialType("book"), f.newLoanType("Can circulate")
	item := f.newItem(itemDoc("i-1", mt, lt))
	first := f.newLoan(alice, item, "Open")

	before := f.recordsSnapshot()
	for _, user := range []string{alice, bob} {
		e := f.doWith("POST", "/loan-storage/loans", jsonBody(loanDoc(user, item, "Open")), f.with(checkOutAtVersion1)).
			wantError(http.StatusUnprocessableEntity, "ITEM_HAS_OPEN_LOAN")
		if e.Errors[0].Message != openLoanMessage {
			t.Errorf("message %q, want %q", e.Errors[0].Message, openLoanMessage)
		}
		wantErrorParam(t, e, "itemId", item)
	}
	f.wantUnchanged(before, "a refused second open loan")
	if n := f.countRows("loan", "item_id = $1", item); n != 1 {
		t.Errorf("%d loans for the item, want 1", n)
	}

	// Closed loans of the item are history, not a conflict.
	closed := f.newLoan(bob, item, "Closed")

	// Check the first in: a new open loan is allowed.
	doc := loanDoc(alice, item, "Closed")
	doc["returnDate"] = "2024-03-05T09:00:00Z"
	doc["action"] = "checkedin"
	doc["_version"] = 1
	// It answers what it wrote: the item back on the shelf, no request.
	written := f.doWith("PUT", "/loan-storage/loans/"+first, jsonBody(doc), f.with(map[string]string{schemas.HeaderCheckInItemVersion: "1"})).
		wantStatus(http.StatusOK).doc()
	if status := written["item"].(map[string]any)["status"].(map[string]any)["name"]; status != "Available" || written["request"] != nil {
		t.Errorf("the check-in's answer: %v", written)
	}
	second := f.doWith("POST", "/loan-storage/loans", jsonBody(loanDoc(bob, item, "Open")),
		f.with(map[string]string{ItemVersionHeader: "2"})).wantStatus(http.StatusCreated).doc()["id"].(string)

	// Reopening a closed loan is refused: a loan opens only by a check-out.
	before = f.recordsSnapshot()
	for _, id := range []string{first, closed} {
		reopened := loanDoc(alice, item, "Open")
		reopened["_version"] = f.do("GET", "/loan-storage/loans/"+id, "").wantStatus(http.StatusOK).doc()["_version"]
		f.do("PUT", "/loan-storage/loans/"+id, jsonBody(reopened)).
			wantError(http.StatusUnprocessableEntity, "CHECK_OUT_REQUIRED")
	}
	f.wantUnchanged(before, "reopening a loan")
	// Updating the open loan itself is fine (a renewal).
	renewed := loanDoc(bob, item, "Open")
	renewed["dueDate"] = "2024-04-01T10:00:00Z"
	renewed["action"] = "renewed"
	renewed["_version"] = 1
	f.do("PUT", "/loan-storage/loans/"+second, jsonBody(renewed)).wantStatus(http.StatusNoContent)
	if n := f.countRows("loan", "item_id = $1 AND status_name = 'Open'", item); n != 1 {
		t.Errorf("%d open loans for the item, want 1", n)
	}
	if n := f.countRows("loan", "item_id = $1", item); n != 3 {
		t.Errorf("%d loans for the item, want 3", n)
	}
}

// TestConcurrentOpenLoansForOneItem races 20 check-out writes of one item
// (each read it at _version 1), round after round: one 201, nineteen
// refused (409 as the item changed, or 422 as it has an open loan), one
// open loan.
func TestConcurrentOpenLoansForOneItem(t *testing.T) {
	t.Parallel()
	f := setup(t)
	g := f.newGroup("staff")
	mt, lt := f.newMaterialType("book"), f.newLoanType("Can circulate")
	var users []string
	for i := range 4 {
		users = append(users, f.newPatron(fmt.Sprintf("racer-%d", i), g))
	}
	const rounds, racers = 10, 20
	for round := range rounds {
		item := f.newItem(itemDoc(fmt.Sprintf("race-%d", round), mt, lt))
		statuses := make([]int, racers)
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i := range racers {
			doc := loanDoc(users[i%len(users)], item, "Open")
			doc["id"] = uuid.NewString()
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				statuses[i] = rawDoWith(t, f, "POST", "/loan-storage/loans", jsonBody(doc), checkOutAtVersion1)
			}()
		}
		close(start)
		wg.Wait()
		count := map[int]int{}
		for _, s := range statuses {
			count[s]++
		}
		if count[http.StatusCreated] != 1 || count[http.StatusConflict]+count[http.StatusUnprocessableEntity] != racers-1 {
			t.Fatalf("round %d: statuses %v, want one 201 and %d 409 or 422", round, count, racers-1)
		}
		if n := f.countRows("loan", "item_id = $1 AND status_name = 'Open'", item); n != 1 {
			t.Fatalf("round %d: %d open loans for the item, want 1", round, n)
		}
		if n := f.countRows("loan", "item_id = $1", item); n != 1 {
			t.Fatalf("round %d: %d loans for the item, want 1", round, n)
		}
	}
}

// TestSettingValuesAreAnyJSON: a setting's value is any JSON value and
// comes back as it was sent.
func TestSettingValuesAreAnyJSON(t *testing.T) {
	t.Parallel()
	f := setup(t)
	values := []string{
		`{"checkOutLockFeatureEnabled":true,"lockTtl":3000}`,
		`{"nested":{"list":[1,"two",null,{"three":3}]},"empty":{}}`,
		`42`, `-1.5`, `0`, `12345678901234567890`,
		`"a string"`, `""`, `"ünïcödé 名前 🙂"`,
		`[]`, `[1,"a",null,true,{"b":[]}]`,
		`null`, `true`, `false`,
	}
	ids := map[string]string{}
	for i, v := range values {
		body := fmt.Sprintf(`{"scope":"test","key":"k%d","value":%s}`, i, v)
		res := f.do("POST", "/settings/entries", body).wantStatus(http.StatusCreated).wantSchema("setting.json")
		var got struct {
			ID    string          `json:"id"`
			Value json.RawMessage `json:"value"`
		}
		res.decode(&got)
		if !reflect.DeepEqual(jsonValue(t, got.Value), jsonValue(t, []byte(v))) {
			t.Errorf("POST value %s answered %s", v, got.Value)
		}
		f.do("GET", "/settings/entries/"+got.ID, "").wantStatus(http.StatusOK).wantSchema("setting.json").decode(&got)
		if !reflect.DeepEqual(jsonValue(t, got.Value), jsonValue(t, []byte(v))) {
			t.Errorf("GET value %s = %s", v, got.Value)
		}
		ids[v] = got.ID
	}
	if n := f.countRows("setting", "scope = 'test'"); n != len(values) {
		t.Errorf("%d settings stored, want %d", n, len(values))
	}
	// A value is required, though it may be null.
	e := f.do("POST", "/settings/entries", `{"scope":"test","key":"none"}`).wantError(http.StatusUnprocessableEntity, "VALIDATION_FAILED")
	if _, ok := params(e)["value"]; !ok {
		t.Errorf("missing value: error %+v should name value", e.Errors[0])
	}

	// The README's check-out lock feature setting.
	readme := `{"scope":"mod-circulation","key":"checkoutLockFeature","value":{"checkOutLockFeatureEnabled":true,"lockTtl":3000}}`
	res := f.do("POST", "/settings/entries", readme).wantStatus(http.StatusCreated).wantSchema("setting.json")
	id := res.doc()["id"].(string)
	want := jsonValue(t, []byte(readme)).(map[string]any)
	want["id"], want["_version"] = id, 1.0
	got1 := f.do("GET", "/settings/entries/"+id, "").wantStatus(http.StatusOK).doc()
	created := wantMetadata(t, got1, "", "")
	want["metadata"] = got1["metadata"]
	if !reflect.DeepEqual(got1, want) {
		t.Errorf("GET = %v, want %v", got1, want)
	}
	docs, total := f.list("/settings/entries", "scope=mod-circulation&key=checkoutLockFeature", "settings.json", "items")
	if total != 1 || !reflect.DeepEqual(docs[0], want) {
		t.Errorf("list by scope and key: %v (total %d), want %v", docs, total, want)
	}
	changed := `{"scope":"mod-circulation","key":"checkoutLockFeature","value":{"checkOutLockFeatureEnabled":false,"lockTtl":5000}}`
	f.do("PUT", "/settings/entries/"+id, changed).wantStatus(http.StatusNoContent)
	want = jsonValue(t, []byte(changed)).(map[string]any)
	want["id"], want["_version"] = id, 2.0
	got2 := f.do("GET", "/settings/entries/"+id, "").wantStatus(http.StatusOK).wantSchema("setting.json").doc()
	wantMetadata(t, got2, created, "after")
	want["metadata"] = got2["metadata"]
	if !reflect.DeepEqual(got2, want) {
		t.Errorf("after PUT GET = %v, want %v", got2, want)
	}
	// PUT may change a value's type.
	f.do("PUT", "/settings/entries/"+ids["42"], `{"scope":"test","key":"k2","value":[42]}`).wantStatus(http.StatusNoContent)
	var got struct{ Value any }
	f.do("GET", "/settings/entries/"+ids["42"], "").wantStatus(http.StatusOK).decode(&got)
	if !reflect.DeepEqual(got.Value, []any{42.0}) {
		t.Errorf("value after PUT = %v, want [42]", got.Value)
	}
}

// hostileStrings are texts that must be stored and matched as data.
var hostileStrings = []string{
	`'; DROP TABLE item; --`,
	`Robert'); DROP TABLE patron;--`,
	`" OR "1"="1`,
	`' OR 1=1 --`,
	`$1`,
	`%`,
	`_`,
	`\`,
	`\\'`,
	`a%b_c`,
	`{"$ne": null}`,
	`<script>alert(1)</script>`,
	"ünïcödé 名前 🙂 עברית \u202ereversed",
	"zero\u200bwidth\u00a0space",
	"e\u0301", // e and a combining acute accent
	"\u00e9",  // é, composed: a different string
	"tab\tnewline\nreturn\r",
	"  leading and trailing  ",
	strings.Repeat("long-", 51), // 255 characters
	strings.Repeat("界", 256),    // 256 characters, 768 bytes
}

// TestHostileStringsAreData: SQL-looking, unicode and long texts are stored
// and found exactly as sent; what the schema or PostgreSQL cannot take is a
// 422; nothing is ever a 500.
func TestHostileStringsAreData(t *testing.T) {
	t.Parallel()
	f := setup(t)
	mt, lt := f.newMaterialType("book"), f.newLoanType("Can circulate")
	groupOf := map[string]string{}
	for _, s := range hostileStrings {
		desc := s + strings.Repeat(".", 1000-len([]rune(s))) // 1000 characters
		gid := f.post("/groups", "group.json", map[string]any{"group": s, "desc": desc})
		groupOf[s] = gid
		got := f.do("GET", "/groups/"+gid, "").wantStatus(http.StatusOK).wantSchema("group.json").doc()
		if got["group"] != s || got["desc"] != desc {
			t.Errorf("group %q came back as %q", s, got["group"])
		}
		docs, total := f.list("/groups", url.Values{"group": {s}}.Encode(), "usergroups.json", "usergroups")
		if total != 1 || len(docs) != 1 || docs[0]["id"] != gid {
			t.Errorf("?group=%q: %v (total %d), want only its own group", s, idsOf(docs), total)
		}
		doc := itemDoc(s, mt, lt)
		doc["title"] = s + strings.Repeat("x", 1000)
		iid := f.newItem(doc)
		docs, total = f.list("/item-storage/items", url.Values{"barcode": {s}}.Encode(), "items.json", "items")
		if total != 1 || docs[0]["id"] != iid || docs[0]["barcode"] != s {
			t.Errorf("?barcode=%q: %v (total %d), want item %s", s, idsOf(docs), total, iid)
		}
		p := f.post("/users", "user.json", map[string]any{"barcode": s, "active": true, "patronGroup": gid,
			"personal": map[string]any{"firstName": s, "lastName": s}})
		docs, total = f.list("/users", url.Values{"barcode": {s}, "patronGroup": {gid}}.Encode(), "users.json", "users")
		if total != 1 || docs[0]["id"] != p {
			t.Errorf("?barcode=%q&patronGroup: %v (total %d), want user %s", s, idsOf(docs), total, p)
		}
		f.post("/settings/entries", "setting.json", map[string]any{"scope": s, "key": s, "value": s})
		docs, total = f.list("/settings/entries", url.Values{"scope": {s}, "key": {s}}.Encode(), "settings.json", "items")
		if total != 1 || docs[0]["value"] != s {
			t.Errorf("setting %q: %v (total %d)", s, docs, total)
		}
	}
	n := len(hostileStrings)
	for _, table := range []string{"patron_group", "item", "patron", "setting"} {
		if got := f.countRows(table, ""); got != n {
			t.Errorf("%d rows in %s, want %d", got, table, n)
		}
	}
	if _, total := f.list("/item-storage/items", "limit=0", "items.json", "items"); total != n {
		t.Errorf("items total %d, want %d", total, n)
	}

	// Texts the schema refuses: over the limits, empty.
	before := f.recordsSnapshot()
	for _, c := range []struct {
		path, body, field string
	}{
		{"/groups", jsonBody(map[string]any{"group": strings.Repeat("g", 257)}), "group"},
		{"/groups", jsonBody(map[string]any{"group": "ok", "desc": strings.Repeat("d", 1025)}), "desc"},
		{"/groups", `{"group":""}`, "group"},
		{"/item-storage/items", jsonBody(itemDoc(strings.Repeat("b", 1000), mt, lt)), "barcode"},
		{"/users", jsonBody(userDoc(strings.Repeat("界", 257), groupOf["%"])), "barcode"},
		{"/settings/entries", jsonBody(map[string]any{"scope": strings.Repeat("s", 1000), "key": "k", "value": 1}), "scope"},
	} {
		e := f.do("POST", c.path, c.body).wantError(http.StatusUnprocessableEntity, "VALIDATION_FAILED")
		if _, ok := params(e)[c.field]; !ok {
			t.Errorf("POST %s: error %+v should name %s", c.path, e.Errors[0], c.field)
		}
	}
	// NUL, which JSON allows and PostgreSQL cannot store, anywhere in a document.
	for _, c := range []struct{ path, body string }{
		{"/groups", `{"group":"nul\u0000"}`},
		{"/groups", `{"group":"ok","desc":"\u0000"}`},
		{"/users", fmt.Sprintf(`{"barcode":"x","active":true,"patronGroup":%q,"personal":{"lastName":"a\u0000b"}}`, groupOf["%"])},
		{"/item-storage/items", strings.Replace(jsonBody(itemDoc("nul", mt, lt)), `"Title nul"`, `"Title \u0000"`, 1)},
		{"/settings/entries", `{"scope":"s","key":"k","value":{"deep":["\u0000"]}}`},
		{"/settings/entries", `{"scope":"s","key":"k","value":{"a\u0000":1}}`},
	} {
		e := f.do("POST", c.path, c.body).wantError(http.StatusUnprocessableEntity, "VALIDATION_FAILED")
		if msg := e.Errors[0].Message; msg != `Text must not contain the NUL character (\u0000)` {
			t.Errorf("POST %s with NUL: message %q", c.path, msg)
		}
	}
	someGroup := groupOf["$1"]
	e := f.do("PUT", "/groups/"+someGroup, `{"group":"$1\u0000"}`).wantError(http.StatusUnprocessableEntity, "VALIDATION_FAILED")
	if msg := e.Errors[0].Message; msg != `Text must not contain the NUL character (\u0000)` {
		t.Errorf("PUT with NUL: message %q", msg)
	}

	// An item status outside item.json's list is refused, not matched.
	f.do("GET", "/item-storage/items?status="+url.QueryEscape("Available' OR 'x'='x"), "").wantError(http.StatusUnprocessableEntity, "INVALID_PARAMETER")
	f.do("GET", "/item-storage/items?barcode=a%00b", "").wantError(http.StatusUnprocessableEntity, "INVALID_PARAMETER")
	f.do("GET", "/item-storage/items?barcode=%ff", "").wantError(http.StatusUnprocessableEntity, "INVALID_PARAMETER")

	// Hostile query values: text filters match nothing, UUID filters refuse.
	for _, q := range []string{
		"barcode=" + url.QueryEscape("' OR '1'='1"),
		"barcode=" + url.QueryEscape("%%"),
		"barcode=" + url.QueryEscape("'; DELETE FROM item; --"),
		"barcode=" + strings.Repeat("%E7%95%8C", 300), // 300 characters, 900 bytes
		"barcode=" + strings.Repeat("y", 1024),
	} {
		if docs, total := f.list("/item-storage/items", q, "items.json", "items"); total != 0 || len(docs) != 0 {
			t.Errorf("?%.60s: %d items (total %d), want none", q, len(docs), total)
		}
	}
	f.do("GET", "/item-storage/items?barcode="+strings.Repeat("x", 1025), "").wantError(http.StatusUnprocessableEntity, "INVALID_PARAMETER")
	for _, q := range []string{
		"/users?patronGroup=" + url.QueryEscape("' OR 1=1 --"),
		"/users?patronGroup=" + url.QueryEscape(someGroup+"' OR '1'='1"),
		"/loan-storage/loans?userId=" + url.QueryEscape("00000000-0000-0000-0000-000000000000; DROP TABLE loan"),
		"/loan-storage/loans?status=" + url.QueryEscape("Open' OR 'a'='a"),
		"/loan-storage/loans/open-count?userId=" + url.QueryEscape("' OR 1=1 --"),
		"/circulation-rules-storage/loan-policy?patronGroupId=" + url.QueryEscape("🙂"),
		"/groups?offset=" + url.QueryEscape("0; DROP TABLE patron_group"),
		"/groups?limit=" + url.QueryEscape("1 OR 1=1"),
	} {
		f.do("GET", q, "").wantError(http.StatusUnprocessableEntity, "INVALID_PARAMETER")
	}
	for _, p := range []string{"/groups/" + url.PathEscape("' OR 1=1 --"), "/item-storage/items/" + url.PathEscape("名前"),
		"/users/%27%3B%20DROP%20TABLE%20patron%3B--"} {
		f.do("GET", p, "").wantError(http.StatusBadRequest, "INVALID_ID")
		f.do("DELETE", p, "").wantError(http.StatusBadRequest, "INVALID_ID")
	}
	f.wantUnchanged(before, "refused hostile input")
	for _, table := range []string{"patron_group", "item", "patron", "setting"} {
		if got := f.countRows(table, ""); got != n {
			t.Errorf("%d rows in %s after the hostile queries, want %d", got, table, n)
		}
	}
}

// TestUUIDsAreCaseInsensitive: ids and UUID parameters are canonicalised to
// lowercase, so the same UUID in either case names the same record.
func TestUUIDsAreCaseInsensitive(t *testing.T) {
	t.Parallel()
	f := setup(t)
	id := uuid.NewString()
	upper := strings.ToUpper(id)
	res := f.do("POST", "/groups", fmt.Sprintf(`{"id":%q,"group":"cased"}`, upper)).wantStatus(http.StatusCreated)
	if got := res.header.Get("Location"); got != "/groups/"+id {
		t.Errorf("Location %q, want the lowercase id", got)
	}
	f.do("GET", "/groups/"+upper, "").wantStatus(http.StatusOK)
	f.do("PUT", "/groups/"+id, fmt.Sprintf(`{"id":%q,"group":"renamed"}`, upper)).wantStatus(http.StatusNoContent)
	f.do("POST", "/groups", fmt.Sprintf(`{"id":%q,"group":"again"}`, id)).wantError(http.StatusConflict, "CONFLICT")

	policy := uuid.NewString()
	f.do("POST", "/loan-policy-storage/loan-policies", fmt.Sprintf(`{"id":%q,"name":"p","loanable":false}`, policy)).wantStatus(http.StatusCreated)
	f.do("PUT", "/circulation-rules-storage", fmt.Sprintf(`{"fallbackLoanPolicyId":%q,"rules":[{"patronGroupId":%q,"loanPolicyId":%q}]}`,
		policy, id, policy)).wantStatus(http.StatusNoContent)
	var m policyMatchJSON
	f.do("GET", "/circulation-rules-storage/loan-policy?patronGroupId="+upper, "").wantStatus(http.StatusOK).decode(&m)
	if m.RuleIndex == nil || *m.RuleIndex != 0 || !m.AppliedRuleConditions.PatronGroupMatch {
		t.Errorf("match with an uppercase UUID = %+v, want rule 0", m)
	}
}

// TestLargeVersionIsRefusedNot500 keeps _version within the column's range.
func TestLargeVersionIsRefusedNot500(t *testing.T) {
	t.Parallel()
	f := setup(t)
	f.do("PUT", "/item-storage/items/"+uuid.NewString(),
		`{"title":"t","status":{"name":"Available"},"materialTypeId":"`+uuid.NewString()+`","permanentLoanTypeId":"`+uuid.NewString()+`","_version":2147483648}`).
		wantError(http.StatusUnprocessableEntity, "VALIDATION_FAILED")
}

// TestSettingVersionIsOptional: a settings entry is versioned, but a client
// may leave _version out (FOLIO's clients of mod-settings do) and replace
// it; one that names a stale version is refused and changes nothing, so a
// read-merge-write loses no concurrent change.
func TestSettingVersionIsOptional(t *testing.T) {
	t.Parallel()
	f := setup(t)
	id := f.post("/settings/entries", "setting.json", map[string]any{"scope": "s", "key": "k", "value": 1})
	if created := f.do("GET", "/settings/entries/"+id, "").doc(); created["_version"] != 1.0 {
		t.Fatalf("created %v, want _version 1", created)
	}
	put := func(body map[string]any) response {
		return f.do("PUT", "/settings/entries/"+id, jsonBody(body))
	}
	put(map[string]any{"scope": "s", "key": "k", "value": 2}).wantStatus(http.StatusNoContent)
	put(map[string]any{"scope": "s", "key": "k", "value": 3, "_version": 2}).wantStatus(http.StatusNoContent)
	got := f.do("GET", "/settings/entries/"+id, "").wantStatus(http.StatusOK).wantSchema("setting.json").doc()
	if got["_version"] != 3.0 || got["value"] != 3.0 {
		t.Errorf("after two PUTs: %v, want _version 3 and value 3", got)
	}
	before := f.recordsSnapshot()
	e := put(map[string]any{"scope": "s", "key": "k", "value": 4, "_version": 2}).wantError(http.StatusConflict, "VERSION_CONFLICT")
	wantErrorParam(t, e, "_version", "3")
	f.wantUnchanged(before, "a stale settings write")
}

// wantMetadata checks doc's metadata block, as storage maintains it: made by testUser; created at createdDate when that
// is given; updated at the creation ("") or after it ("after"). It returns
// the createdDate.
func wantMetadata(t *testing.T, doc map[string]any, createdDate, updated string) string {
	t.Helper()
	md, _ := doc["metadata"].(map[string]any)
	created, _ := md["createdDate"].(string)
	updatedDate, _ := md["updatedDate"].(string)
	if md["createdByUserId"] != testUser || md["updatedByUserId"] != testUser || len(md) != 4 {
		t.Errorf("metadata %v, want created and updated by %s", md, testUser)
	}
	if createdDate != "" && created != createdDate {
		t.Errorf("metadata createdDate %q, want %q kept", created, createdDate)
	}
	c, err1 := time.Parse(time.RFC3339Nano, created)
	u, err2 := time.Parse(time.RFC3339Nano, updatedDate)
	switch {
	case err1 != nil || err2 != nil:
		t.Errorf("metadata dates %q, %q are not RFC 3339", created, updatedDate)
	case updated == "" && !u.Equal(c):
		t.Errorf("metadata updatedDate %s, want the createdDate %s", updatedDate, created)
	case updated == "after" && u.Before(c):
		t.Errorf("metadata updatedDate %s before createdDate %s", updatedDate, created)
	}
	return created
}
