package httpapi

import (
	"fmt"
	"github.com/checkoutlock/circulation-storage/internal/sample"
	"net/http"
	"net/url"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/checkoutlock/schemas/errs"

	"github.com/google/uuid"

	storage "github.com/checkoutlock/circulation-storage"
)

// Tests of the circulation rules, the loan policy matching, the item-limit
// count and the reference and sample data, over real HTTP against a real
// PostgreSQL.

const rulesPath = "/circulation-rules-storage"

// getRules reads the rules, checking the answer against its schema.
func (f *fixture) getRules() storage.CirculationRules {
	f.t.Helper()
	var r storage.CirculationRules
	f.do("GET", rulesPath, "").wantStatus(http.StatusOK).wantSchema("circulation-rules.json").decode(&r)
	return r
}

func (f *fixture) rulesSnapshot() string {
	f.t.Helper()
	return f.tableJSON("circulation_rules", "tenant_id") + f.tableJSON("circulation_rule", "position")
}

// TestCirculationRules: rules are absent until set, come back in order,
// are replaced whole, refuse records that do not exist naming the rule and
// field, and keep the records they name from being deleted.
func TestCirculationRules(t *testing.T) {
	t.Parallel()
	f := setup(t)
	f.do("GET", rulesPath, "").wantError(http.StatusNotFound, "NOT_FOUND")
	f.do("GET", rulesPath+"/loan-policy", "").wantError(http.StatusNotFound, "NOT_FOUND")

	g1, g2 := f.newGroup("undergrad"), f.newGroup("faculty")
	book, dvd := f.newMaterialType("book"), f.newMaterialType("dvd")
	circ, reading := f.newLoanType("Can circulate"), f.newLoanType("Reading room")
	standard, short, week, spare := f.newPolicy("standard"), f.newPolicy("short"), f.newPolicy("week"), f.newPolicy("spare")

	rules := storage.CirculationRules{FallbackLoanPolicyID: standard, Rules: []storage.CirculationRule{
		{PatronGroupID: g1, LoanTypeID: circ, LoanPolicyID: short},
		{MaterialTypeID: dvd, LoanPolicyID: week},
		{LoanTypeID: reading, LoanPolicyID: short},
		{PatronGroupID: g2, MaterialTypeID: book, LoanTypeID: circ, LoanPolicyID: week},
		{LoanPolicyID: standard},
	}}
	f.do("PUT", rulesPath, jsonBody(rules)).wantStatus(http.StatusNoContent)
	if got := f.getRules(); !reflect.DeepEqual(got, rules) {
		t.Fatalf("GET = %+v, want %+v", got, rules)
	}
	if n := f.countRows("circulation_rule", ""); n != 5 {
		t.Errorf("%d rule rows, want 5", n)
	}
	if n := f.countRows("circulation_rule", "position = 3 AND patron_group_id = $1 AND material_type_id = $2 AND loan_type_id = $3",
		g2, book, circ); n != 1 {
		t.Errorf("rule 3 is not stored at position 3")
	}

	// Refused rules leave the old ones as they were.
	before := f.rulesSnapshot()
	nobody := uuid.NewString()
	with := func(i int, edit func(r *storage.CirculationRule)) storage.CirculationRules {
		c := storage.CirculationRules{FallbackLoanPolicyID: rules.FallbackLoanPolicyID, Rules: slices.Clone(rules.Rules)}
		edit(&c.Rules[i])
		return c
	}
	for _, c := range []struct {
		name  string
		rules storage.CirculationRules
		field string
		what  string
	}{
		{"unknown policy", with(2, func(r *storage.CirculationRule) { r.LoanPolicyID = nobody }), "rules.2.loanPolicyId", "loan policy"},
		{"unknown group", with(0, func(r *storage.CirculationRule) { r.PatronGroupID = nobody }), "rules.0.patronGroupId", "patron group"},
		{"unknown material type", with(1, func(r *storage.CirculationRule) { r.MaterialTypeID = nobody }), "rules.1.materialTypeId", "material type"},
		{"unknown loan type", with(3, func(r *storage.CirculationRule) { r.LoanTypeID = nobody }), "rules.3.loanTypeId", "loan type"},
		{"unknown loan type in the last rule", with(4, func(r *storage.CirculationRule) { r.LoanTypeID = nobody }), "rules.4.loanTypeId", "loan type"},
		{"unknown fallback", storage.CirculationRules{FallbackLoanPolicyID: nobody, Rules: rules.Rules}, "fallbackLoanPolicyId", "loan policy"},
		{"unknown fallback, no rules", storage.CirculationRules{FallbackLoanPolicyID: nobody, Rules: []storage.CirculationRule{}},
			"fallbackLoanPolicyId", "loan policy"},
	} {
		e := f.do("PUT", rulesPath, jsonBody(c.rules)).wantError(http.StatusUnprocessableEntity, "VALIDATION_FAILED")
		wantErrorParam(t, e, c.field, nobody)
		if want := c.field + ": " + c.what + " " + nobody + " does not exist"; e.Errors[0].Message != want {
			t.Errorf("%s: message %q, want %q", c.name, e.Errors[0].Message, want)
		}
		if after := f.rulesSnapshot(); after != before {
			t.Errorf("%s: the stored rules changed:\nbefore %s\nafter  %s", c.name, before, after)
		}
	}
	// Bodies the schema refuses, naming the field.
	for _, c := range []struct{ body, field string }{
		{fmt.Sprintf(`{"fallbackLoanPolicyId":%q,"rules":[{"patronGroupId":%q}]}`, standard, g1), "rules.0.loanPolicyId"},
		{fmt.Sprintf(`{"fallbackLoanPolicyId":%q,"rules":[{"loanPolicyId":%q},{"loanPolicyId":%q,"materialTypeId":"book"}]}`,
			standard, short, short), "rules.1.materialTypeId"},
		{fmt.Sprintf(`{"fallbackLoanPolicyId":%q}`, standard), "rules"},
		{`{"rules":[]}`, "fallbackLoanPolicyId"},
		{`{"fallbackLoanPolicyId":"standard","rules":[]}`, "fallbackLoanPolicyId"},
		{fmt.Sprintf(`{"fallbackLoanPolicyId":%q,"rules":[{"loanPolicyId":%q,"itemTypeId":%q}]}`, standard, short, g1), "rules.0.itemTypeId"},
	} {
		e := f.do("PUT", rulesPath, c.body).wantError(http.StatusUnprocessableEntity, "VALIDATION_FAILED")
		if _, ok := params(e)[c.field]; !ok {
			t.Errorf("PUT %s: errors %+v should name %s", c.body, e.Errors, c.field)
		}
	}
	f.do("PUT", rulesPath, `[]`).wantError(http.StatusUnprocessableEntity, "VALIDATION_FAILED")
	f.do("PUT", rulesPath, `{"fallbackLoanPolicyId":`).wantError(http.StatusBadRequest, "MALFORMED_JSON")
	if after := f.rulesSnapshot(); after != before {
		t.Errorf("refused bodies changed the stored rules:\nbefore %s\nafter  %s", before, after)
	}
	if got := f.getRules(); !reflect.DeepEqual(got, rules) {
		t.Errorf("after refused PUTs GET = %+v, want %+v", got, rules)
	}

	// Records the rules name cannot be deleted.
	records := f.recordsSnapshot()
	for _, c := range []struct{ path, id, what string }{
		{"/loan-policy-storage/loan-policies/", short, "loan policy"},
		{"/loan-policy-storage/loan-policies/", standard, "loan policy"},
		{"/groups/", g1, "patron group"},
		{"/material-types/", dvd, "material type"},
		{"/loan-types/", reading, "loan type"},
	} {
		e := f.do("DELETE", c.path+c.id, "").wantError(http.StatusConflict, "RECORD_IN_USE")
		if want := "Cannot delete " + c.what + " " + c.id + ": circulation rules refer to it"; e.Errors[0].Message != want {
			t.Errorf("DELETE %s%s: message %q, want %q", c.path, c.id, e.Errors[0].Message, want)
		}
		wantErrorParam(t, e, "id", c.id)
	}
	f.wantUnchanged(records, "refused deletes")

	// New rules replace the old ones whole; what they no longer name can go.
	fewer := storage.CirculationRules{FallbackLoanPolicyID: spare, Rules: []storage.CirculationRule{
		{MaterialTypeID: book, LoanPolicyID: standard},
	}}
	f.do("PUT", rulesPath, jsonBody(fewer)).wantStatus(http.StatusNoContent)
	if got := f.getRules(); !reflect.DeepEqual(got, fewer) {
		t.Errorf("GET = %+v, want %+v", got, fewer)
	}
	if n := f.countRows("circulation_rule", ""); n != 1 {
		t.Errorf("%d rule rows after replacing five with one, want 1", n)
	}
	f.do("DELETE", "/loan-policy-storage/loan-policies/"+short, "").wantStatus(http.StatusNoContent)
	f.do("DELETE", "/loan-types/"+reading, "").wantStatus(http.StatusNoContent)
	f.do("DELETE", "/groups/"+g1, "").wantStatus(http.StatusNoContent)
	f.do("DELETE", "/loan-policy-storage/loan-policies/"+spare, "").wantError(http.StatusConflict, "RECORD_IN_USE")

	empty := storage.CirculationRules{FallbackLoanPolicyID: week, Rules: []storage.CirculationRule{}}
	f.do("PUT", rulesPath, jsonBody(empty)).wantStatus(http.StatusNoContent)
	if got := f.getRules(); !reflect.DeepEqual(got, empty) {
		t.Errorf("GET = %+v, want %+v", got, empty)
	}
	f.do("DELETE", "/loan-policy-storage/loan-policies/"+spare, "").wantStatus(http.StatusNoContent)
}

// rule is a circulation rule written with the names of the matching test.
type rule struct{ group, material, loanType, policy string }

// match is the expected answer of the matching endpoint.
type match struct {
	policy                 string
	ruleIndex              int // -1: the fallback
	group, material, lType bool
}

// policyMatch is schemas/loan-policy-match.json.
type policyMatch struct {
	LoanPolicyID          string `json:"loanPolicyId"`
	AppliedRuleConditions struct {
		PatronGroupMatch  bool `json:"patronGroupMatch"`
		MaterialTypeMatch bool `json:"materialTypeMatch"`
		LoanTypeMatch     bool `json:"loanTypeMatch"`
	} `json:"appliedRuleConditions"`
	RuleIndex *int `json:"ruleIndex"`
}

// TestLoanPolicyMatching is a table of rules and check-outs: the rule naming
// the most criteria wins; among as many, loan type outranks material type
// outranks patron group; then the earlier rule; and the fallback applies
// when no rule matches.
func TestLoanPolicyMatching(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ids := map[string]string{"": ""}
	for _, n := range []string{"G1", "G2"} {
		ids[n] = f.newGroup(n)
	}
	for _, n := range []string{"M1", "M2"} {
		ids[n] = f.newMaterialType(n)
	}
	for _, n := range []string{"L1", "L2"} {
		ids[n] = f.newLoanType(n)
	}
	for _, n := range []string{"P0", "P1", "P2", "P3", "P4"} {
		ids[n] = f.newPolicy(n)
	}
	ids["unknown"] = uuid.NewString()

	cases := []struct {
		name                  string
		rules                 []rule
		group, material, lTyp string
		want                  match
	}{
		{"two criteria beat an earlier loan type rule",
			[]rule{{"", "", "L1", "P1"}, {"G1", "M1", "", "P2"}}, "G1", "M1", "L1", match{"P2", 1, true, true, false}},
		{"three criteria beat two",
			[]rule{{"", "M1", "L1", "P1"}, {"G1", "M1", "L1", "P2"}, {"G1", "", "L1", "P3"}}, "G1", "M1", "L1", match{"P2", 1, true, true, true}},
		{"loan type outranks an earlier material type",
			[]rule{{"", "M1", "", "P1"}, {"", "", "L1", "P2"}}, "G1", "M1", "L1", match{"P2", 1, false, false, true}},
		{"loan type outranks an earlier patron group",
			[]rule{{"G1", "", "", "P1"}, {"", "", "L1", "P2"}}, "G1", "M1", "L1", match{"P2", 1, false, false, true}},
		{"material type outranks an earlier patron group",
			[]rule{{"G1", "", "", "P1"}, {"", "M1", "", "P2"}}, "G1", "M1", "L1", match{"P2", 1, false, true, false}},
		{"material type and loan type outrank the other pairs",
			[]rule{{"G1", "M1", "", "P1"}, {"G1", "", "L1", "P2"}, {"", "M1", "L1", "P3"}}, "G1", "M1", "L1", match{"P3", 2, false, true, true}},
		{"patron group and loan type outrank patron group and material type",
			[]rule{{"G1", "M1", "", "P1"}, {"G1", "", "L1", "P2"}}, "G1", "M1", "L1", match{"P2", 1, true, false, true}},
		{"same criteria: the earlier rule",
			[]rule{{"G1", "", "", "P3"}, {"G1", "", "", "P1"}}, "G1", "M1", "L1", match{"P3", 0, true, false, false}},
		{"same criteria, different values: the one that matches",
			[]rule{{"", "M2", "", "P1"}, {"", "M1", "", "P2"}}, "G1", "M1", "L1", match{"P2", 1, false, true, false}},
		{"a rule with one criterion not matching is out, however specific",
			[]rule{{"G1", "M1", "L2", "P1"}, {"G1", "", "", "P2"}}, "G1", "M1", "L1", match{"P2", 1, true, false, false}},
		{"a rule without criteria matches anything",
			[]rule{{"G2", "", "", "P1"}, {"", "", "", "P2"}}, "G1", "M1", "L1", match{"P2", 1, false, false, false}},
		{"a rule without criteria loses to any criterion",
			[]rule{{"", "", "", "P1"}, {"G1", "", "", "P2"}}, "G1", "M1", "L1", match{"P2", 1, true, false, false}},
		{"no rule matches: the fallback",
			[]rule{{"G2", "", "", "P1"}, {"", "M2", "", "P2"}, {"", "", "L2", "P3"}}, "G1", "M1", "L1", match{"P0", -1, false, false, false}},
		{"no rules: the fallback",
			nil, "G1", "M1", "L1", match{"P0", -1, false, false, false}},
		{"unknown ids: the fallback",
			[]rule{{"G1", "", "", "P1"}, {"", "M1", "", "P2"}}, "unknown", "unknown", "unknown", match{"P0", -1, false, false, false}},
		{"no criteria given: only rules without criteria match",
			[]rule{{"G1", "", "", "P1"}, {"", "", "", "P2"}}, "", "", "", match{"P2", 1, false, false, false}},
		{"no criteria given and no catch-all: the fallback",
			[]rule{{"G1", "", "", "P1"}}, "", "", "", match{"P0", -1, false, false, false}},
		{"a criterion not given does not match a rule naming it",
			[]rule{{"", "", "L1", "P1"}, {"G1", "", "", "P2"}}, "G1", "", "", match{"P2", 1, true, false, false}},
		{"the sample's undergraduate rule",
			[]rule{{"G1", "", "L1", "P1"}, {"", "M2", "", "P2"}, {"", "", "L2", "P3"}}, "G1", "M2", "L1", match{"P1", 0, true, false, true}},
		{"the sample's DVD rule",
			[]rule{{"G1", "", "L1", "P1"}, {"", "M2", "", "P2"}, {"", "", "L2", "P3"}}, "G2", "M2", "L1", match{"P2", 1, false, true, false}},
	}
	for _, c := range cases {
		rules := storage.CirculationRules{FallbackLoanPolicyID: ids["P0"], Rules: []storage.CirculationRule{}}
		for _, r := range c.rules {
			rules.Rules = append(rules.Rules, storage.CirculationRule{PatronGroupID: ids[r.group], MaterialTypeID: ids[r.material],
				LoanTypeID: ids[r.loanType], LoanPolicyID: ids[r.policy]})
		}
		f.do("PUT", rulesPath, jsonBody(rules)).wantStatus(http.StatusNoContent)
		q := url.Values{}
		for k, v := range map[string]string{"patronGroupId": c.group, "materialTypeId": c.material, "loanTypeId": c.lTyp} {
			if v != "" {
				q.Set(k, ids[v])
			}
		}
		res := f.do("GET", rulesPath+"/loan-policy?"+q.Encode(), "").wantStatus(http.StatusOK).wantSchema("loan-policy-match.json")
		var got policyMatch
		res.decode(&got)
		gotIndex := -1
		if got.RuleIndex != nil {
			gotIndex = *got.RuleIndex
		}
		if c.want.ruleIndex < 0 && strings.Contains(string(res.body), "ruleIndex") {
			t.Errorf("%s: the fallback answer %s has a ruleIndex", c.name, res.body)
		}
		a := got.AppliedRuleConditions
		if got.LoanPolicyID != ids[c.want.policy] || gotIndex != c.want.ruleIndex ||
			a.PatronGroupMatch != c.want.group || a.MaterialTypeMatch != c.want.material || a.LoanTypeMatch != c.want.lType {
			t.Errorf("%s: got %s, want policy %s (%s), rule %d, conditions group %v material %v loan type %v",
				c.name, res.body, c.want.policy, ids[c.want.policy], c.want.ruleIndex, c.want.group, c.want.material, c.want.lType)
		}
	}

	// Query parameters that are not UUIDs, or given twice, are refused.
	for _, q := range []string{
		"patronGroupId=G1", "materialTypeId=" + ids["M1"] + "x", "loanTypeId=", "loanTypeId=" + url.QueryEscape("' OR 1=1 --"),
		"patronGroupId=" + ids["G1"] + "&patronGroupId=" + ids["G2"],
	} {
		e := f.do("GET", rulesPath+"/loan-policy?"+q, "").wantError(http.StatusUnprocessableEntity, "INVALID_PARAMETER")
		name := strings.SplitN(q, "=", 2)[0]
		if _, ok := params(e)[name]; !ok || !strings.HasPrefix(e.Errors[0].Message, name+" ") {
			t.Errorf("?%s: error %+v should name %s", q, e.Errors[0], name)
		}
	}
}

// TestOpenLoanCount builds a patron's loans across material types and loan
// types and checks the item-limit count for every restriction.
func TestOpenLoanCount(t *testing.T) {
	t.Parallel()
	f := setup(t)
	g := f.newGroup("undergrad")
	patron, other := f.newPatron("patron", g), f.newPatron("other", g)
	book, dvd, atlas := f.newMaterialType("book"), f.newMaterialType("dvd"), f.newMaterialType("map")
	circ, reading, course := f.newLoanType("Can circulate"), f.newLoanType("Reading room"), f.newLoanType("Course reserve")
	item := func(barcode, material, permanent, temporary, status string) string {
		doc := itemDoc(barcode, material, permanent)
		if temporary != "" {
			doc["temporaryLoanTypeId"] = temporary
		}
		doc["status"] = map[string]any{"name": status}
		return f.newItem(doc)
	}
	// The patron's loans.
	f.newLoan(patron, item("b1", book, circ, "", "Checked out"), "Open")
	f.newLoan(patron, item("b2", book, circ, "", "Checked out"), "Open")
	f.newLoan(patron, item("b3", book, circ, reading, "Checked out"), "Open") // temporary loan type wins
	f.newLoan(patron, item("d1", dvd, circ, "", "Checked out"), "Open")
	f.newLoan(patron, item("d2", dvd, reading, "", "Checked out"), "Open")
	f.newLoan(patron, item("b4", book, circ, "", "Available"), "Closed")
	claimed := item("b5", book, circ, "", "Claimed returned")
	f.newLoan(patron, claimed, "Open")
	// Another patron's open loan.
	f.newLoan(other, item("b6", book, circ, "", "Checked out"), "Open")

	count := func(query string) int {
		t.Helper()
		var got struct{ TotalRecords int }
		f.do("GET", "/loan-storage/loans/open-count?"+query, "").wantStatus(http.StatusOK).wantSchema("open-loan-count.json").decode(&got)
		return got.TotalRecords
	}
	cases := []struct {
		query string
		want  int
	}{
		{"userId=" + patron, 5},
		{"userId=" + strings.ToUpper(patron), 5},
		{"userId=" + patron + "&materialTypeId=" + book, 3},
		{"userId=" + patron + "&materialTypeId=" + dvd, 2},
		{"userId=" + patron + "&materialTypeId=" + atlas, 0},
		{"userId=" + patron + "&loanTypeId=" + circ, 3},
		{"userId=" + patron + "&loanTypeId=" + reading, 2},
		{"userId=" + patron + "&loanTypeId=" + course, 0},
		{"userId=" + patron + "&materialTypeId=" + book + "&loanTypeId=" + circ, 2},
		{"userId=" + patron + "&materialTypeId=" + book + "&loanTypeId=" + reading, 1},
		{"userId=" + patron + "&materialTypeId=" + dvd + "&loanTypeId=" + circ, 1},
		{"userId=" + patron + "&materialTypeId=" + dvd + "&loanTypeId=" + reading, 1},
		{"userId=" + patron + "&materialTypeId=" + uuid.NewString(), 0},
		{"userId=" + other, 1},
		{"userId=" + uuid.NewString(), 0},
		{"userId=" + g, 0},
	}
	for _, c := range cases {
		if got := count(c.query); got != c.want {
			t.Errorf("?%s: %d, want %d", c.query, got, c.want)
		}
	}

	// The claimed-returned item counts again once it is found.
	// (Arranged in the database: through the API an item becomes Checked
	// out only with a check-out.)
	if _, err := f.pool.Exec(t.Context(), `UPDATE `+f.table("item")+` SET jsonb = jsonb_set(jsonb, '{status,name}', '"Checked out"') WHERE id = $1`,
		claimed); err != nil {
		t.Fatal(err)
	}
	if got := count("userId=" + patron); got != 6 {
		t.Errorf("after the claimed-returned item is found: %d, want 6", got)
	}
	if got := count("userId=" + patron + "&materialTypeId=" + book + "&loanTypeId=" + circ); got != 3 {
		t.Errorf("after the claimed-returned item is found, book and circulating: %d, want 3", got)
	}

	before := f.recordsSnapshot()
	for _, q := range []struct{ query, param string }{
		{"", "userId"},
		{"materialTypeId=" + book, "userId"},
		{"userId=", "userId"},
		{"userId=patron", "userId"},
		{"userId=" + patron + "&userId=" + other, "userId"},
		{"userId=" + patron + "&materialTypeId=book", "materialTypeId"},
		{"userId=" + patron + "&loanTypeId=" + circ + "0", "loanTypeId"},
		{"userId=" + patron + "&loanTypeId=", "loanTypeId"},
	} {
		e := f.do("GET", "/loan-storage/loans/open-count?"+q.query, "").wantError(http.StatusUnprocessableEntity, "INVALID_PARAMETER")
		if _, ok := params(e)[q.param]; !ok || !strings.HasPrefix(e.Errors[0].Message, q.param+" ") {
			t.Errorf("?%s: error %+v should name %s", q.query, e.Errors[0], q.param)
		}
	}
	f.wantUnchanged(before, "count requests")
}

// loadData posts the tenant interface with the given parameters.
func (f *fixture) loadData(params ...string) tenantJobJSON {
	f.t.Helper()
	var ps []errs.Parameter
	for _, p := range params {
		ps = append(ps, errs.Parameter{Key: p, Value: "true"})
	}
	body := jsonBody(storage.TenantAttributes{ModuleTo: "mod-circulation-storage-1.0.0", Parameters: ps})
	var job tenantJobJSON
	f.do("POST", "/_/tenant", body).wantStatus(http.StatusCreated).wantSchema("tenant-job.json").decode(&job)
	if !job.Complete || job.Error != "" {
		f.t.Fatalf("tenant job %+v", job)
	}
	return job
}

// collection is a resource's list: its path, schemas and key.
type collection struct{ path, schema, collection, plural string }

var collections = []collection{
	{"/groups", "group.json", "usergroups.json", "usergroups"},
	{"/material-types", "material-type.json", "mtypes.json", "mtypes"},
	{"/loan-types", "loan-type.json", "loantypes.json", "loantypes"},
	{"/users", "user.json", "users.json", "users"},
	{"/item-storage/items", "item.json", "items.json", "items"},
	{"/loan-policy-storage/loan-policies", "loan-policy.json", "loan-policies.json", "loanPolicies"},
	{"/loan-storage/loans", "loan.json", "loans.json", "loans"},
	{"/settings/entries", "setting.json", "settings.json", "items"},
	{"/owners", "fee-fine-owner.json", "fee-fine-owners.json", "owners"},
	{"/payments", "payment-method.json", "payment-methods.json", "payments"},
	{"/overdue-fines-policies", "overdue-fine-policy.json", "overdue-fine-policies.json", "overdueFinePolicies"},
	{"/lost-item-fees-policies", "lost-item-fee-policy.json", "lost-item-fee-policies.json", "lostItemFeePolicies"},
	{"/accounts", "fee-fine-account.json", "fee-fine-accounts.json", "accounts"},
}

// listAll lists every record of each collection, validating the page and
// each record against their schemas, and returns them by path.
func (f *fixture) listAll() map[string][]map[string]any {
	f.t.Helper()
	out := map[string][]map[string]any{}
	for _, c := range collections {
		docs, total := f.list(c.path, "limit=1000", c.collection, c.plural)
		if total != len(docs) {
			f.t.Fatalf("%s: %d records of %d", c.path, len(docs), total)
		}
		for _, d := range docs {
			if err := sch.ValidateJSON(c.schema, []byte(jsonBody(d))); err != nil {
				f.t.Errorf("%s record %v does not match %s: %v", c.path, d["id"], c.schema, err)
			}
			if d2 := f.do("GET", c.path+"/"+d["id"].(string), "").wantStatus(http.StatusOK).wantSchema(c.schema).doc(); !reflect.DeepEqual(d2, d) {
				f.t.Errorf("GET %s/%s = %v, listed as %v", c.path, d["id"], d2, d)
			}
		}
		out[c.path] = docs
	}
	return out
}

func fieldValues(docs []map[string]any, field string) []string {
	var vs []string
	for _, d := range docs {
		vs = append(vs, fmt.Sprint(d[field]))
	}
	slices.Sort(vs)
	return vs
}

// TestSampleData loads the reference and sample data, checks what it holds,
// and loads it again: nothing changes, and a librarian's edits survive.
func TestSampleData(t *testing.T) {
	t.Parallel()
	f := setup(t)
	job := f.loadData("loadReference", "loadSample")
	if len(job.Messages) < 3 {
		t.Errorf("job messages %v, want the schema, reference and sample lines", job.Messages)
	}
	all := f.listAll()
	counts := map[string]int{"/groups": 4, "/material-types": 2, "/loan-types": 2, "/users": 8, "/item-storage/items": 205,
		"/loan-policy-storage/loan-policies": 4, "/loan-storage/loans": len(sample.GracesLoans) + len(sample.HanasBooks), "/settings/entries": 0,
		"/owners": 1, "/payments": 2, "/overdue-fines-policies": 1, "/lost-item-fees-policies": 1, "/accounts": 1}
	for path, want := range counts {
		if got := len(all[path]); got != want {
			t.Errorf("%s: %d records, want %d", path, got, want)
		}
	}
	wantIDs := map[string][]string{
		"/groups":         {sample.GroupFaculty, sample.GroupGraduate, sample.GroupStaff, sample.GroupUndergrad},
		"/material-types": {sample.MaterialBook, sample.MaterialDVD},
		"/loan-types":     {sample.LoanTypeCanCirculate, sample.LoanTypeReadingRoom},
		"/users": {sample.ID("1001"), sample.ID("1002"), sample.ID("1003"), sample.ID("1004"),
			sample.ID("1005"), sample.ID("1006"), sample.ID("1007"), sample.ID("1008")},
		"/loan-policy-storage/loan-policies": {sample.PolicyStandard, sample.PolicyUndergrad, sample.PolicyDVD,
			sample.PolicyReadingRoom},
	}
	for path, want := range wantIDs {
		got := fieldValues(all[path], "id")
		want = slices.Sorted(slices.Values(want))
		if !slices.Equal(got, want) {
			t.Errorf("%s ids %v, want %v", path, got, want)
		}
	}
	if got := fieldValues(all["/users"], "barcode"); !slices.Equal(got, []string{"1001", "1002", "1003", "1004", "1005", "1006", "1007", "1008"}) {
		t.Errorf("user barcodes %v, want 1001..1008", got)
	}
	if got := fieldValues(all["/groups"], "group"); !slices.Equal(got, []string{"faculty", "graduate", "staff", "undergrad"}) {
		t.Errorf("group names %v", got)
	}
	// 153 books and 10 reading-room books, 40 DVDs.
	byMaterial := map[string]int{}
	for _, it := range all["/item-storage/items"] {
		byMaterial[it["materialTypeId"].(string)+"/"+it["permanentLoanTypeId"].(string)]++
		if it["id"] != sample.ID(it["barcode"].(string)) || it["_version"] != 1.0 {
			t.Errorf("item %v: want id sample.ID(barcode) and _version 1", it)
		}
	}
	if want := map[string]int{
		sample.MaterialBook + "/" + sample.LoanTypeCanCirculate: 150 + len(sample.GracesLoans) + len(sample.HanasBooks),
		sample.MaterialDVD + "/" + sample.LoanTypeCanCirculate:  40,
		sample.MaterialBook + "/" + sample.LoanTypeReadingRoom:  10,
	}; !reflect.DeepEqual(byMaterial, want) {
		t.Errorf("items by material type/loan type %v, want %v", byMaterial, want)
	}
	// Every item available but book-020, on the hold shelf for Bob, with
	// his request first in its queue, Grace's three, out to her and
	// open loans, Bob's hold first in the first's and the last's queue,
	// and Hana's first; Erin blocked; Frank expired; Hana owing 7.50.
	if n := f.countRows("item", "status_name = 'Available'"); n != 200 {
		t.Errorf("%d available items, want 200", n)
	}
	if n := f.countRows("fee_fine_account", fmt.Sprintf("user_id = '%s' AND remaining = 7.50 AND status = 'Open'", sample.ID("1008"))); n != 1 {
		t.Errorf("Hana owes %d fees/fines of 7.50, want 1", n)
	}
	for i, barcode := range sample.GracesLoans {
		if n := f.countRows("loan", fmt.Sprintf("item_id = '%s' AND user_id = '%s' AND status_name = 'Open'", sample.ID(barcode), sample.ID("1007"))); n != 1 {
			t.Errorf("%d open loans of %s to Grace, want 1", n, barcode)
		}
		if n := f.countRows("item", fmt.Sprintf("barcode = '%s' AND status_name = 'Checked out'", barcode)); n != 1 {
			t.Errorf("%s is not checked out", barcode)
		}
		held := 0
		if i != 1 {
			held = 1
		}
		if n := f.countRows("request", fmt.Sprintf("item_id = '%s' AND requester_id = '%s' AND position = 1 AND status = 'Open - Not yet filled'",
			sample.ID(barcode), sample.ID("1002"))); n != held {
			t.Errorf("%d holds of %s by Bob first in its queue, want %d", n, barcode, held)
		}
	}
	if n := f.countRows("item", "barcode = 'book-020' AND status_name = 'Awaiting pickup'"); n != 1 {
		t.Errorf("book-020 is not awaiting pickup")
	}
	if n := f.countRows("request", fmt.Sprintf("item_id = '%s' AND requester_id = '%s' AND position = 1 AND status = 'Open - Awaiting pickup'",
		sample.ID("book-020"), sample.ID("1002"))); n != 1 {
		t.Errorf("%d requests of book-020 by Bob first in its queue, want 1", n)
	}
	if n := f.countRows("manual_block", fmt.Sprintf("user_id = '%s' AND jsonb ->> 'borrowing' = 'true'", sample.ID("1005"))); n != 1 {
		t.Errorf("%d borrowing blocks of Erin, want 1", n)
	}
	if got := f.getRules(); !reflect.DeepEqual(got, sample.Rules) {
		t.Errorf("rules %+v, want the sample rules %+v", got, sample.Rules)
	}
	// Each policy's name says whether it renews, and how often: the demo
	// shows a renewal renewed, refused at its limit and refused outright.
	renews := map[string]string{}
	for _, p := range all["/loan-policy-storage/loan-policies"] {
		allowed, _ := p["renewalsPolicy"].(map[string]any)
		renews[p["name"].(string)] = fmt.Sprint(p["renewable"], " ", allowed["numberAllowed"])
	}
	if want := map[string]string{"Standard three-week loan, renewable twice": "true 2", "Undergraduate: 3 items, renewable once": "true 1",
		"DVD: 2 items for a week, not renewable": "false <nil>", "Reading room only": "<nil> <nil>"}; !reflect.DeepEqual(renews, want) {
		t.Errorf("the sample policies renew %v, want %v", renews, want)
	}
	// The sample rules choose the sample policies.
	var m policyMatch
	f.do("GET", rulesPath+"/loan-policy?patronGroupId="+sample.GroupUndergrad+"&materialTypeId="+sample.MaterialBook+
		"&loanTypeId="+sample.LoanTypeCanCirculate, "").wantStatus(http.StatusOK).wantSchema("loan-policy-match.json").decode(&m)
	if m.LoanPolicyID != sample.PolicyUndergrad || !m.AppliedRuleConditions.PatronGroupMatch || !m.AppliedRuleConditions.LoanTypeMatch {
		t.Errorf("undergraduate book: %+v", m)
	}

	// Loading again changes nothing.
	snapshot := f.recordsSnapshot()
	f.loadData("loadReference", "loadSample")
	f.loadData("loadSample")
	f.loadData("loadReference")
	f.wantUnchanged(snapshot, "loading the data again")

	// A librarian's edits survive a reload: rules, a group, an item.
	edited := storage.CirculationRules{FallbackLoanPolicyID: sample.PolicyDVD, Rules: []storage.CirculationRule{
		{MaterialTypeID: sample.MaterialBook, LoanPolicyID: sample.PolicyStandard},
	}}
	f.do("PUT", rulesPath, jsonBody(edited)).wantStatus(http.StatusNoContent)
	f.do("PUT", "/groups/"+sample.GroupStaff, `{"group":"library staff","desc":"Edited"}`).wantStatus(http.StatusNoContent)
	item := sample.ID("book-001")
	doc := f.do("GET", "/item-storage/items/"+item, "").wantStatus(http.StatusOK).doc()
	doc["title"] = "Middlemarch (annotated)"
	f.do("PUT", "/item-storage/items/"+item, jsonBody(doc)).wantStatus(http.StatusNoContent)
	snapshot = f.recordsSnapshot()
	f.loadData("loadReference", "loadSample")
	f.wantUnchanged(snapshot, "reloading after a librarian's edits")
	if got := f.getRules(); !reflect.DeepEqual(got, edited) {
		t.Errorf("rules after reload %+v, want the librarian's %+v", got, edited)
	}
	if got := f.do("GET", "/groups/"+sample.GroupStaff, "").wantStatus(http.StatusOK).doc(); got["group"] != "library staff" {
		t.Errorf("group after reload %v, want the librarian's edit", got)
	}
}

// TestReferenceDataOnly: loadReference loads the reference records and
// nothing else; no parameter loads nothing.
func TestReferenceDataOnly(t *testing.T) {
	t.Parallel()
	f := setup(t)
	empty := f.recordsSnapshot()
	var ps []errs.Parameter
	for _, k := range []string{"loadReference", "loadSample"} {
		ps = append(ps, errs.Parameter{Key: k, Value: "false"})
	}
	f.do("POST", "/_/tenant", jsonBody(storage.TenantAttributes{ModuleTo: "mod-circulation-storage-1.0.0", Parameters: ps})).
		wantStatus(http.StatusCreated)
	f.loadData()
	f.wantUnchanged(empty, "loading with no data parameters")

	f.loadData("loadReference")
	all := f.listAll()
	counts := map[string]int{"/groups": 4, "/material-types": 2, "/loan-types": 2, "/users": 0, "/item-storage/items": 0,
		"/loan-policy-storage/loan-policies": 0, "/loan-storage/loans": 0, "/settings/entries": 0}
	for path, want := range counts {
		if got := len(all[path]); got != want {
			t.Errorf("%s: %d records, want %d", path, got, want)
		}
	}
	if got := fieldValues(all["/material-types"], "name"); !slices.Equal(got, []string{"book", "dvd"}) {
		t.Errorf("material types %v", got)
	}
	if got := fieldValues(all["/loan-types"], "name"); !slices.Equal(got, []string{"Can circulate", "Reading room"}) {
		t.Errorf("loan types %v", got)
	}
	f.do("GET", rulesPath, "").wantError(http.StatusNotFound, "NOT_FOUND")
	snapshot := f.recordsSnapshot()
	f.loadData("loadReference")
	f.wantUnchanged(snapshot, "loading the reference data again")
}
