package integration

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/checkoutlock/integration-tests/harness"
	"github.com/checkoutlock/schemas"
)

// TestSummaryVerdictIsTheCheckOutsOutcome: what a kiosk is told of a
// patron is what a check-out then does. A library with books and DVDs, and
// three patron groups: one with a book limit of 3 and a DVD limit of 2,
// one with a limit of 2 on all its loans (its rule names no type), one with
// no limit. For each patron (loans out, a block, an expired card), the
// summary over HTTP and SIP2 (23 and 63) says whether they may borrow,
// which limits they are at, and CB the group's limit; then a check-out of
// a book and one of a DVD, each given back at once, must agree: the
// patron may borrow exactly when one of them is lent, and every limit
// the summary calls reached refuses its kind of item.
func TestSummaryVerdictIsTheCheckOutsOutcome(t *testing.T) {
	t.Parallel()
	c := harness.NewCluster(t, harness.Options{Circulations: 1, FeatureOn: true})
	s := c.Storage
	post := func(path string, body map[string]any) string {
		t.Helper()
		var out struct {
			ID string `json:"id"`
		}
		c.Do(s, "POST", path, body).Want(t, http.StatusCreated).Decode(t, &out)
		return out.ID
	}
	book := post("/material-types", map[string]any{"name": "book"})
	dvd := post("/material-types", map[string]any{"name": "dvd"})
	circulates := post("/loan-types", map[string]any{"name": "Can circulate"})
	policy := func(name string, limit int) string {
		lp := map[string]any{"profileId": "Rolling", "period": map[string]any{"duration": 3, "intervalId": "Weeks"}}
		if limit > 0 {
			lp["itemLimit"] = limit
		}
		return post("/loan-policy-storage/loan-policies", map[string]any{"name": name, "loanable": true, "loansPolicy": lp})
	}
	typed := post("/groups", map[string]any{"group": "undergraduate"})
	grouped := post("/groups", map[string]any{"group": "visitor"})
	free := post("/groups", map[string]any{"group": "faculty"})
	c.Do(s, "PUT", "/circulation-rules-storage", map[string]any{
		"fallbackLoanPolicyId": policy("no limit", 0),
		"rules": []map[string]any{
			{"patronGroupId": typed, "materialTypeId": book, "loanPolicyId": policy("three books", 3)},
			{"patronGroupId": typed, "materialTypeId": dvd, "loanPolicyId": policy("two DVDs", 2)},
			{"patronGroupId": grouped, "loanPolicyId": policy("two items", 2)},
		},
	}).Want(t, http.StatusNoContent)
	items := map[string]int{}
	item := func(kind string) string {
		items[kind]++
		barcode := fmt.Sprintf("%s-%03d", kind, items[kind])
		mt := book
		if kind == "dvd" {
			mt = dvd
		}
		post("/item-storage/items", map[string]any{"barcode": barcode, "title": strings.ToUpper(kind) + " " + barcode,
			"status": map[string]any{"name": "Available"}, "materialTypeId": mt, "permanentLoanTypeId": circulates})
		return barcode
	}
	c.Account(t, "user_id", "Kiosk", "One", schemas.RoleSelfCheck, "passw0rd")
	door := c.StartSIP2(t, 0, nil)
	k := harness.DialSIP2(t, door.SIP2Addr)
	k.Login("user_id", "passw0rd")
	librarian := map[string]string{schemas.HeaderTenant: c.Tenant, schemas.HeaderToken: c.Token(schemas.RoleLibrarian)}

	for i, tc := range []struct {
		name        string
		group       string
		books, dvds int
		blocked     bool
		expired     bool
		// What the check-outs must do, and so the summary say.
		bookLent, dvdLent bool
		groupLimit        int // CB, 0 for none
	}{
		{name: "two books out of three, like Alice", group: typed, books: 2, bookLent: true, dvdLent: true},
		{name: "at the book limit, not the DVD one", group: typed, books: 3, bookLent: false, dvdLent: true},
		{name: "at the DVD limit, not the book one", group: typed, dvds: 2, bookLent: true, dvdLent: false},
		{name: "at every limit", group: typed, books: 3, dvds: 2},
		{name: "below the group's limit", group: grouped, books: 1, bookLent: true, dvdLent: true, groupLimit: 2},
		{name: "at the group's limit", group: grouped, books: 1, dvds: 1, groupLimit: 2},
		{name: "no limit at all", group: free, books: 5, dvds: 3, bookLent: true, dvdLent: true},
		{name: "blocked", group: free, blocked: true},
		{name: "expired", group: free, expired: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			barcode := fmt.Sprintf("P-%d", i)
			patron := map[string]any{"barcode": barcode, "active": true, "patronGroup": tc.group,
				"personal": map[string]any{"firstName": "Pat", "lastName": barcode}}
			if tc.expired {
				patron["expirationDate"] = "2020-01-01T00:00:00.000Z"
			}
			id := post("/users", patron)
			for kind, n := range map[string]int{"book": tc.books, "dvd": tc.dvds} {
				for range n {
					c.CheckOut(0, item(kind), barcode).Want(t, http.StatusCreated)
				}
			}
			if tc.blocked {
				post("/manualblocks", map[string]any{"userId": id, "desc": "Card reported stolen", "borrowing": true})
			}
			mayBorrow := tc.bookLent || tc.dvdLent

			// HTTP: the verdict, the reasons, the limits.
			var sum struct {
				CanBorrow   bool `json:"canBorrow"`
				AtItemLimit bool `json:"atItemLimit"`
				Reasons     []struct {
					Code string `json:"code"`
				} `json:"reasons"`
				ItemLimits []struct {
					ItemLimit int    `json:"itemLimit"`
					Reached   bool   `json:"reached"`
					AllLoans  bool   `json:"allLoans"`
					Code      string `json:"code"`
				} `json:"itemLimits"`
			}
			c.DoWith(c.Circulations[0], "GET", "/circulation/patron-summary?userBarcode="+barcode, nil, librarian).Want(t, http.StatusOK).Decode(t, &sum)
			if sum.CanBorrow != mayBorrow || (len(sum.Reasons) == 0) != mayBorrow {
				t.Errorf("the summary says may borrow %v with reasons %v; want %v", sum.CanBorrow, sum.Reasons, mayBorrow)
			}
			reached := map[string]bool{}
			groupLimit := 0
			for _, l := range sum.ItemLimits {
				if l.Reached {
					reached[l.Code] = true
				}
				if l.AllLoans {
					groupLimit = l.ItemLimit
				}
			}
			if groupLimit != tc.groupLimit {
				t.Errorf("the summary's limit on all loans is %d, want %d", groupLimit, tc.groupLimit)
			}

			// SIP2: 24's charge privileges and too many items charged, and
			// 63's CB.
			st := k.Send("23001" + harness.SIP2Date() + "AOdiku|AA" + barcode + "|")
			if denied := st[2] == 'Y'; denied == mayBorrow || (st[7] == 'Y') != sum.AtItemLimit {
				t.Errorf("patron status %q: charge privileges denied %v, too many items charged %v; want denied %v, at the limit %v",
					st, st[2] == 'Y', st[7] == 'Y', !mayBorrow, sum.AtItemLimit)
			}
			info := k.Send("63001" + harness.SIP2Date() + "          AOdiku|AA" + barcode + "|")
			wantCB := ""
			if tc.groupLimit > 0 {
				wantCB = fmt.Sprintf("%04d", tc.groupLimit)
			}
			if got := harness.SIP2Field(info, "CB"); got != wantCB || (info[2] == 'Y') == mayBorrow {
				t.Errorf("patron information %q: CB %q, want %q", info, got, wantCB)
			}

			// The check-outs themselves, each given back at once.
			for kind, lent := range map[string]bool{"book": tc.bookLent, "dvd": tc.dvdLent} {
				it := item(kind)
				r := c.CheckOut(0, it, barcode)
				if (r.Status == http.StatusCreated) != lent {
					t.Errorf("a %s's check-out: %d %s; want lent %v", kind, r.Status, r.Body, lent)
				}
				if r.Status == http.StatusCreated {
					c.CheckIn(0, it).Want(t, http.StatusOK)
					continue
				}
				for _, code := range r.ErrorCodes() {
					if strings.HasPrefix(code, "ITEM_LIMIT") && !reached[code] {
						t.Errorf("a %s's check-out was refused at %s, which the summary does not call reached (%v)", kind, code, reached)
					}
				}
			}
			t.Logf("%s: may borrow %v, limits %+v", tc.name, sum.CanBorrow, sum.ItemLimits)
		})
	}
}

// TestLockSettingIsReadOneWay: tricky values of the lock settings entry,
// written straight to storage's settings: one that reads two ways (a key
// repeated or nested) is refused 422 at storage, and at circulation's
// settings too; every value storage takes, circulation and storage's
// check-out write read alike: circulation's effective setting says on
// exactly when storage refuses a write without a lock (LOCK_REQUIRED).
func TestLockSettingIsReadOneWay(t *testing.T) {
	t.Parallel()
	c := harness.NewCluster(t, harness.Options{Circulations: 1, FeatureOn: false})
	lib := c.SetupLibrary(1, 20, 0)
	user := patronID(t, c, lib.Patrons[0])
	quoted := func(s string) string { b, _ := json.Marshal(s); return string(b) }
	var entryID string
	for i, tc := range []struct {
		value   string
		refused bool
	}{
		{`{"checkOutLockFeatureEnabled":true}`, false},
		{quoted(`{"checkOutLockFeatureEnabled":false}`), false},
		{quoted(`{"checkOutLockFeatureEnabled":false,"x":{"checkOutLockFeatureEnabled":true}}`), true},
		{`{"checkOutLockFeatureEnabled":false,"x":{"checkOutLockFeatureEnabled":true}}`, true},
		{quoted(`{"checkOutLockFeatureEnabled":true,"checkOutLockFeatureEnabled":false}`), true},
		{quoted(`{"note":"\"checkOutLockFeatureEnabled\": true","checkOutLockFeatureEnabled":false}`), false},
		{quoted(`{"lockTtl":3000}`), false},
		{quoted(`{ "checkOutLockFeatureEnabled" : true }`), false},
		{`{"checkOutLockFeatureEnabled":"true"}`, true},
		{quoted(`not json at all`), true},
	} {
		entry := map[string]any{"scope": "mod-circulation", "key": "checkoutLockFeature", "value": json.RawMessage(tc.value)}
		var r harness.Response
		if entryID == "" {
			r = c.Do(c.Storage, "POST", "/settings/entries", entry)
			var created struct {
				ID string `json:"id"`
			}
			if r.Status == http.StatusCreated {
				r.Decode(t, &created)
				entryID = created.ID
			}
		} else {
			var current map[string]any
			c.Do(c.Storage, "GET", "/settings/entries/"+entryID, nil).Want(t, http.StatusOK).Decode(t, &current)
			entry["id"], entry["_version"] = entryID, current["_version"]
			r = c.Do(c.Storage, "PUT", "/settings/entries/"+entryID, entry)
		}
		if tc.refused {
			if r.Status != http.StatusUnprocessableEntity {
				t.Errorf("%s: %d %s, want 422", tc.value, r.Status, r.Body)
			}
			continue
		}
		if r.Status != http.StatusCreated && r.Status != http.StatusNoContent {
			t.Fatalf("%s: %d %s", tc.value, r.Status, r.Body)
		}
		w := c.DoWith(c.Storage, "POST", "/loan-storage/loans", map[string]any{
			"userId": user, "itemId": itemID(t, c, lib.Items[0][i]), "action": "checkedout", "status": map[string]any{"name": "Open"},
			"loanDate": schemas.FormatTime(time.Now())}, c.HeadersWith(schemas.HeaderItemVersion, "1"))
		storageOn := w.Status == http.StatusUnprocessableEntity && len(w.ErrorCodes()) > 0 && w.ErrorCodes()[0] == schemas.CodeLockRequired
		if !storageOn && w.Status != http.StatusCreated {
			t.Fatalf("%s: a write without a lock: %d %s", tc.value, w.Status, w.Body)
		}
		// Circulation reads the entry anew once its settings cache (200 ms
		// in the harness) has let it go: it must come to read it as the
		// write did, and stay there.
		var effective struct {
			On bool `json:"checkOutLockFeatureEnabled"`
		}
		if !harness.Poll(5*time.Second, 50*time.Millisecond, func() bool {
			c.Do(c.Circulations[0], "GET", "/circulation/settings/check-out-lock", nil).Want(t, http.StatusOK).Decode(t, &effective)
			return effective.On == storageOn
		}) {
			t.Errorf("%s: circulation reads the lock feature %v, storage's write %v", tc.value, effective.On, storageOn)
		}
	}
	// At circulation, a body with a field it does not know is refused too.
	r := c.Do(c.Circulations[0], "PUT", "/circulation/settings/check-out-lock",
		json.RawMessage(`{"checkOutLockFeatureEnabled":false,"x":{"checkOutLockFeatureEnabled":true}}`))
	if r.Status != http.StatusUnprocessableEntity {
		t.Errorf("circulation's settings with a nested flag: %d %s, want 422", r.Status, r.Body)
	}
}

// TestOperatorsNarrowTheLocksBounds: storage with LOCK_MAX_TTL_MS=60000
// refuses a tenant's lockTtl of 300000 (every acquisition would be refused
// under it), at its settings and through circulation's, naming the bound;
// 60000 is taken.
func TestOperatorsNarrowTheLocksBounds(t *testing.T) {
	t.Parallel()
	c := harness.NewCluster(t, harness.Options{Circulations: 1, StorageEnv: []string{"LOCK_MAX_TTL_MS=60000"}})
	r := c.Do(c.Storage, "POST", "/settings/entries", map[string]any{"scope": "mod-circulation", "key": "checkoutLockFeature",
		"value": map[string]any{"lockTtl": 300000}})
	if r.Status != http.StatusUnprocessableEntity || !strings.Contains(string(r.Body), "must be from 100 to 60000 ms") {
		t.Errorf("a lockTtl beyond LOCK_MAX_TTL_MS at storage: %d %s, want 422 naming the bound", r.Status, r.Body)
	}
	r = c.Do(c.Circulations[0], "PATCH", "/circulation/settings/check-out-lock", json.RawMessage(`{"lockTtl":300000}`))
	if r.Status != http.StatusUnprocessableEntity || !strings.Contains(string(r.Body), "must be from 100 to 60000 ms") {
		t.Errorf("a lockTtl beyond LOCK_MAX_TTL_MS through circulation: %d %s, want 422 naming the bound", r.Status, r.Body)
	}
	c.Do(c.Circulations[0], "PATCH", "/circulation/settings/check-out-lock", json.RawMessage(`{"lockTtl":60000}`)).Want(t, http.StatusOK)
}
