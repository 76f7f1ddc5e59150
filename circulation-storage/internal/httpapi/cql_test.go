package httpapi

import (
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
)

// cqlFixture is a tenant seeded for the query tests, with each record's id
// by a short name.
type cqlFixture struct {
	*fixture
	id map[string]string
}

func seedCQL(t *testing.T) cqlFixture {
	f := cqlFixture{fixture: setup(t), id: map[string]string{}}
	f.id["staff"], f.id["undergrad"] = f.newGroup("staff"), f.newGroup("undergrad")
	f.id["book"], f.id["dvd"] = f.newMaterialType("book"), f.newMaterialType("dvd")
	f.id["can circulate"], f.id["short term"] = f.newLoanType("can circulate"), f.newLoanType("short term")
	for _, u := range []struct{ name, barcode, group, first, last string }{
		{"ada", "1001", "staff", "Ada", "Lovelace"},
		{"grace", "1002", "undergrad", "Grace", "Hopper"},
		{"bob", "2001", "staff", "Bob", `O'Brien "the Bold"`},
		{"star", `10*1`, "undergrad", "Zed", "Zyx"},
	} {
		f.id[u.name] = f.post("/users", "user.json", map[string]any{"barcode": u.barcode, "active": u.name != "star",
			"patronGroup": f.id[u.group], "personal": map[string]any{"firstName": u.first, "lastName": u.last}})
	}
	for _, it := range []struct{ name, status, materialType string }{
		{"i1", "Available", "book"}, {"i2", "Checked out", "book"}, {"i3", "Checked out", "dvd"}, {"i4", "Missing", "dvd"},
	} {
		doc := itemDoc(it.name, f.id[it.materialType], f.id["can circulate"])
		doc["status"] = map[string]any{"name": it.status}
		f.id[it.name] = f.newItem(doc)
	}
	for _, l := range []struct{ name, user, item, status, date string }{
		{"l1", "ada", "i2", "Open", "2024-03-01T10:00:00.000Z"},
		{"l2", "grace", "i3", "Open", "2024-03-05T10:00:00.000Z"},
		{"l3", "ada", "i1", "Closed", "2024-02-01T10:00:00.000Z"},
	} {
		doc := loanDoc(f.id[l.user], f.id[l.item], l.status)
		doc["loanDate"] = l.date
		if l.status == "Open" {
			f.id[l.name] = f.arrange("loan", doc)
		} else {
			f.id[l.name] = f.post("/loan-storage/loans", "loan.json", doc)
		}
	}
	// An entry of another scope with the same key comes first in id order
	// and in creation: a client that took the first of an ignored query
	// would read it.
	for _, s := range []struct{ name, scope, key string }{
		{"other", "ui-circulation", "checkoutLockFeature"},
		{"lock", "mod-circulation", "checkoutLockFeature"},
		{"rules", "mod-circulation", "otherSettings"},
	} {
		f.id[s.name] = f.post("/settings/entries", "setting.json", map[string]any{"scope": s.scope, "key": s.key,
			"value": `{"checkOutLockFeatureEnabled":false}`})
	}
	return f
}

// TestCQLQueries: each query, as FOLIO's clients send it, finds exactly
// the expected records, in order when it sorts, with the true totalRecords.
func TestCQLQueries(t *testing.T) {
	t.Parallel()
	f := seedCQL(t)
	users, settings := "/users", "/settings/entries"
	cases := []struct {
		path, query string
		want        []string // record names; in order when sorted is set
		sorted      bool
	}{
		// Exact match, quoted or not, and through the barcode's column.
		{users, `barcode=="1001"`, []string{"ada"}, false},
		{users, `barcode==1001`, []string{"ada"}, false},
		{users, `barcode=="100"`, nil, false},
		// Wildcards, and a star that is data.
		{users, `barcode=="10*"`, []string{"ada", "grace", "star"}, false},
		{users, `barcode=="100?"`, []string{"ada", "grace"}, false},
		{users, `barcode=="10\*1"`, []string{"star"}, false},
		{users, `barcode<>"1001"`, []string{"grace", "bob", "star"}, false},
		{users, `barcode<>"10*"`, []string{"bob"}, false},
		// UUIDs, in any case, and a value list.
		{users, `patronGroup==` + f.id["staff"], []string{"ada", "bob"}, false},
		{users, `patronGroup==` + strings.ToUpper(f.id["staff"]), []string{"ada", "bob"}, false},
		{users, `patronGroup=="not-a-uuid"`, nil, false},
		{users, `id==("` + f.id["ada"] + `" or "` + f.id["grace"] + `")`, []string{"ada", "grace"}, false},
		// Nested fields, and = as "every word, any case".
		{users, `personal.lastName=="Lovelace"`, []string{"ada"}, false},
		{users, `personal.lastName=="lovelace"`, nil, false},
		{users, `personal.lastName=lovelace`, []string{"ada"}, false},
		{users, `personal.lastName="bold o'brien"`, []string{"bob"}, false},
		{users, `personal.lastName="love*"`, []string{"ada"}, false},
		{users, `personal.lastName=="O'Brien \"the Bold\""`, []string{"bob"}, false},
		{users, `personal.middleName=""`, nil, false},
		{users, `personal.lastName=""`, []string{"ada", "grace", "bob", "star"}, false},
		{users, `active==true`, []string{"ada", "grace", "bob"}, false},
		// Booleans: left to right, equal precedence, parentheses.
		{users, `barcode=="1001" or barcode=="1002"`, []string{"ada", "grace"}, false},
		{users, `patronGroup==` + f.id["staff"] + ` and barcode=="2001"`, []string{"bob"}, false},
		{users, `patronGroup==` + f.id["staff"] + ` not barcode=="2001"`, []string{"ada"}, false},
		{users, `cql.allRecords=1 not barcode=="1001"`, []string{"grace", "bob", "star"}, false},
		{users, `cql.allRecords=1 NOT personal.middleName=="x"`, []string{"ada", "grace", "bob", "star"}, false},
		{users, `barcode=="1001" or barcode=="1002" and personal.firstName==Grace`, []string{"grace"}, false},
		{users, `barcode=="1001" or (barcode=="1002" and personal.firstName==Grace)`, []string{"ada", "grace"}, false},
		// Sorting, by a column and by any field.
		{users, `patronGroup==` + f.id["staff"] + ` sortBy barcode/sort.descending`, []string{"bob", "ada"}, true},
		{users, `cql.allRecords=1 sortBy personal.lastName`, []string{"grace", "ada", "bob", "star"}, true},
		{users, `cql.allRecords=1 sortBy active/sort.descending personal.firstName/sort.ascending`,
			[]string{"ada", "bob", "grace", "star"}, true},
		// Injection attempts are data.
		{users, `barcode=="1001' OR '1'='1"`, nil, false},
		{users, `barcode=="1001\" or barcode==\"1002"`, nil, false},
		{users, `personal.lastName=="x'); DROP TABLE patron; --"`, nil, false},
		{users, `personal.lastName="%"`, nil, false},
		{users, `barcode=="_001"`, nil, false},
		{users, `barcode=="\\"`, nil, false},
		// The lock setting as mod-circulation looks it up.
		{settings, `scope=="mod-circulation" and key=="checkoutLockFeature"`, []string{"lock"}, false},
		{settings, `key=="checkoutLockFeature"`, []string{"other", "lock"}, false},
		{settings, `scope=="mod-circulation" sortBy key/sort.descending`, []string{"rules", "lock"}, true},
		// The other collections.
		{"/groups", `group=="staff"`, []string{"staff"}, false},
		{"/material-types", `name=="dvd"`, []string{"dvd"}, false},
		{"/loan-types", `name="short"`, []string{"short term"}, false},
		{"/item-storage/items", `status.name=="Checked out"`, []string{"i2", "i3"}, false},
		{"/item-storage/items", `materialTypeId==` + f.id["dvd"] + ` and status.name<>"Missing"`, []string{"i3"}, false},
		{"/item-storage/items", `status.name==Checked*`, []string{"i2", "i3"}, false},
		{"/loan-storage/loans", `userId==` + f.id["ada"] + ` and status.name=="Open"`, []string{"l1"}, false},
		{"/loan-storage/loans", `loanDate>"2024-02-15" sortBy loanDate/sort.descending`, []string{"l2", "l1"}, true},
		{"/loan-storage/loans", `itemId==(` + f.id["i1"] + ` or ` + f.id["i3"] + `) sortBy loanDate`, []string{"l3", "l2"}, true},
		{"/loan-storage/loans", `_version>=1`, []string{"l1", "l2", "l3"}, false}, // every loan has a _version
		{"/loan-storage/loans", `_version>=2`, nil, false},
		{"/loan-storage/loans", `_version<"2"`, []string{"l1", "l2", "l3"}, false},
		// A string field compared with a term that looks like a number
		// compares as a string.
		{users, `barcode<"1002"`, []string{"ada", "star"}, false},
		{users, `barcode<1002`, []string{"ada", "star"}, false},
		{users, `barcode>"1002"`, []string{"bob"}, false},
		{users, `barcode>=1002`, []string{"grace", "bob"}, false},
	}
	plural := map[string][2]string{
		users: {"users.json", "users"}, settings: {"settings.json", "items"}, "/groups": {"usergroups.json", "usergroups"},
		"/material-types": {"mtypes.json", "mtypes"}, "/loan-types": {"loantypes.json", "loantypes"},
		"/item-storage/items": {"items.json", "items"}, "/loan-storage/loans": {"loans.json", "loans"},
	}
	for _, c := range cases {
		p := plural[c.path]
		docs, total := f.list(c.path, "limit=100&query="+url.QueryEscape(c.query), p[0], p[1])
		got := idsOf(docs)
		want := make([]string, len(c.want))
		for i, name := range c.want {
			want[i] = f.id[name]
		}
		if !c.sorted {
			slices.Sort(got)
			slices.Sort(want)
		}
		if !slices.Equal(got, want) || total != len(want) {
			t.Errorf("GET %s?query=%s: %d records %v (totalRecords %d), want %v", c.path, c.query, len(got), f.names(got), total, c.want)
		}
	}
	// The injection attempts left every table as it was.
	if n := f.countRows("patron", ""); n != 4 {
		t.Errorf("%d users after the queries, want 4", n)
	}
}

// names turns ids back into the fixture's names, for messages.
func (f cqlFixture) names(ids []string) []string {
	out := make([]string, len(ids))
	for i, id := range ids {
		out[i] = id
		for name, known := range f.id {
			if known == id {
				out[i] = name
			}
		}
	}
	return out
}

// TestCQLPagesCountEveryMatch: totalRecords is the number of all matches,
// whatever the page; the existing filter parameters narrow the query.
func TestCQLPagesCountEveryMatch(t *testing.T) {
	t.Parallel()
	f := seedCQL(t)
	docs, total := f.list("/users", "limit=1&offset=1&query="+url.QueryEscape("active==true sortBy barcode"), "users.json", "users")
	if len(docs) != 1 || total != 3 || docs[0]["id"] != f.id["grace"] {
		t.Errorf("second page of one: %v (total %d), want grace of 3", f.names(idsOf(docs)), total)
	}
	docs, total = f.list("/users", "offset=10&query="+url.QueryEscape(`barcode=="10*"`), "users.json", "users")
	if len(docs) != 0 || total != 3 {
		t.Errorf("page past the end: %d records, total %d; want none of 3", len(docs), total)
	}
	docs, total = f.list("/users", "patronGroup="+f.id["staff"]+"&query="+url.QueryEscape(`barcode=="*1"`), "users.json", "users")
	if !slices.Equal(idsOf(docs), []string{f.id["ada"], f.id["bob"]}) || total != 2 {
		t.Errorf("filter and query: %v (total %d), want ada and bob", f.names(idsOf(docs)), total)
	}
}

// TestUnsupportedCQLIs422: a query this service cannot answer exactly is
// refused, naming what is not supported, rather than answered wrongly.
func TestUnsupportedCQLIs422(t *testing.T) {
	t.Parallel()
	f := seedCQL(t)
	for _, c := range []struct{ query, says string }{
		{`1001`, "needs a field"},
		{`cql.serverChoice=1001`, `"cql.serverChoice" is not supported`},
		{`barcode any "1001 1002"`, `relation "any" is not supported`},
		{`barcode==/respectCase "1001"`, `modifier "respectCase" is not supported`},
		{`cql.allRecords=1 sortBy barcode/sort.ignoreCase`, `"sort.ignoreCase" is not supported`},
		{`cql.allRecords=1 sortBy barcode/sort.ascending/sort.descending`, `has 2 modifiers: it takes one`},
		{`cql.allRecords=1 sortBy barcode/sort.descending/sort.descending`, `has 2 modifiers: it takes one`},
		{`cql.allRecords=1 sortBy barcode/sort.descending=1`, `"sort.descending" takes no value`},
		{`barcode<"10*"`, "wildcards are not supported with <"},
		{`barcode;DROP==1`, "query"},
		{`barcode==`, "query"},
		{`(barcode==1`, "query"},
		{`barcode=="1001`, "query"},
		{`barcode prox 1001`, "query"},
		{`personal..lastName==x`, "not a field name"},
		{strings.Repeat("(", 40) + "barcode==1" + strings.Repeat(")", 40), "deeper"},
	} {
		before := f.recordsSnapshot()
		e := f.do("GET", "/users?query="+url.QueryEscape(c.query), "").wantError(http.StatusUnprocessableEntity, "INVALID_PARAMETER")
		if !strings.Contains(e.Errors[0].Message, c.says) {
			t.Errorf("query %s: %q does not say %q", c.query, e.Errors[0].Message, c.says)
		}
		if _, ok := params(e)["query"]; !ok {
			t.Errorf("query %s: error %+v does not name the query parameter", c.query, e.Errors[0])
		}
		f.wantUnchanged(before, "refused query")
	}
	f.do("GET", "/users?query=a==1&query=b==2", "").wantError(http.StatusUnprocessableEntity, "INVALID_PARAMETER")
}
