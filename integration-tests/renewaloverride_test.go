package integration

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/checkoutlock/integration-tests/harness"
	"github.com/checkoutlock/schemas"
	"github.com/checkoutlock/serverkit/auth"
)

// overrideRefusal is one error of a refused renewal, as FOLIO's clients
// read it.
type overrideRefusal struct {
	Code, Message    string
	Parameters       []struct{ Key, Value string }
	OverridableBlock *struct {
		Name               string
		MissingPermissions []string
	}
}

// over is e naming the block that overrides it and the permissions the
// caller lacks to send it (FOLIO's overridableBlock).
func (e overrideRefusal) over(block string, missing ...string) overrideRefusal {
	e.OverridableBlock = &struct {
		Name               string
		MissingPermissions []string
	}{block, append([]string{}, missing...)}
	return e
}

// param is the value of e's parameter key ("" when it has none).
func (e overrideRefusal) param(key string) string {
	for _, p := range e.Parameters {
		if p.Key == key {
			return p.Value
		}
	}
	return ""
}

// loanRow is an open loan of the item as stored: its due date, renewal
// count, action and comment.
func loanRow(t *testing.T, c *harness.Cluster, item string) (due time.Time, count int, action, comment string) {
	t.Helper()
	var dueText string
	err := c.DB.QueryRow(context.Background(), fmt.Sprintf(`SELECT l.jsonb ->> 'dueDate', coalesce((l.jsonb ->> 'renewalCount')::int, 0),
		coalesce(l.jsonb ->> 'action', ''), coalesce(l.jsonb ->> 'actionComment', '')
		FROM %s.loan l JOIN %s.item i ON i.id = l.item_id WHERE i.barcode = $1 AND l.status_name = 'Open'`, c.Schema, c.Schema), item).
		Scan(&dueText, &count, &action, &comment)
	if err != nil {
		t.Fatal(err)
	}
	due, err = time.Parse(time.RFC3339, dueText)
	if err != nil {
		t.Fatal(err)
	}
	return due, count, action, comment
}

// TestRenewalsAreOverriddenAsFOLIOOverridesThem: a librarian renews past
// the refusals an override lifts with FOLIO's overrideBlocks on
// renew-by-barcode and renew-by-id (mod-circulation's
// OverrideRenewByBarcodeTests): the override's permissions are checked
// first, every block the caller may not override named at once; the
// comment is required; the renewal limit, a recall, a policy that does not
// renew or lend and a due date that would not move are lifted, the due
// date the policy's where it gives a later one, else the override's,
// which it requires, and which must be later than the loan's; an override
// with nothing to override, an inactive patron and a declared lost item
// are refused; a patron block is lifted by patronBlock. Every refusal
// writes nothing; every override renewal is renewedThroughOverride with
// its comment and one RENEWED event.
func TestRenewalsAreOverriddenAsFOLIOOverridesThem(t *testing.T) {
	t.Parallel()
	c := harness.NewCluster(t, harness.Options{Circulations: 1, FeatureOn: true})
	lib := c.SetupLibrary(4, 4, 0)
	renewable(t, c, lib, map[string]any{"numberAllowed": 1, "renewFromId": "CURRENT_DUE_DATE"})
	for p, patron := range lib.Patrons {
		for _, item := range lib.Items[p] {
			c.CheckOut(0, item, patron).Want(t, http.StatusCreated)
		}
	}
	librarian := c.HeadersWith(schemas.HeaderToken, c.Token(schemas.RoleLibrarian))
	selfCheck := c.HeadersWith(schemas.HeaderToken, c.Token(schemas.RoleSelfCheck))
	// A desk that may override renewals but not patron blocks.
	tok, err := auth.Mint(harness.Secret(), auth.Claims{Tenant: c.Tenant, UserID: harness.RoleUser(schemas.RoleLibrarian),
		Permissions: []string{"circulation.renew-by-barcode.post", schemas.PermissionOverrideRenewalBlock}}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	renewalsOnly := c.HeadersWith(schemas.HeaderToken, tok)
	const comment = "Comment to override"
	renew := func(headers map[string]string, item, patron string, overrideBlocks map[string]any) harness.Response {
		body := map[string]any{"itemBarcode": item, "userBarcode": patron}
		if overrideBlocks != nil {
			body["overrideBlocks"] = overrideBlocks
		}
		return c.DoWith(c.Circulations[0], "POST", "/circulation/renew-by-barcode", body, headers)
	}
	refused := func(name string, r harness.Response, want ...overrideRefusal) {
		t.Helper()
		var env struct{ Errors []overrideRefusal }
		if r.Status == http.StatusUnprocessableEntity {
			r.Decode(t, &env)
		}
		if r.Status != http.StatusUnprocessableEntity || len(env.Errors) != len(want) {
			t.Errorf("%s: %d %s, want 422 with %d errors", name, r.Status, r.Body, len(want))
			return
		}
		for i, w := range want {
			got := env.Errors[i]
			if got.Code != w.Code || (w.Message != "" && got.Message != w.Message) {
				t.Errorf("%s: error %d is %s %q, want %s %q", name, i, got.Code, got.Message, w.Code, w.Message)
			}
			if fmt.Sprint(got.OverridableBlock) != fmt.Sprint(w.OverridableBlock) {
				t.Errorf("%s: error %d's overridableBlock is %v, want %v (%s)", name, i, got.OverridableBlock, w.OverridableBlock, r.Body)
			}
			for _, p := range w.Parameters {
				if got.param(p.Key) != p.Value {
					t.Errorf("%s: error %d names %s %q, want %q (%s)", name, i, p.Key, got.param(p.Key), p.Value, r.Body)
				}
			}
		}
	}
	want := func(code, message string, kv ...string) overrideRefusal {
		e := overrideRefusal{Code: code, Message: message}
		for i := 0; i+1 < len(kv); i += 2 {
			e.Parameters = append(e.Parameters, struct{ Key, Value string }{kv[i], kv[i+1]})
		}
		return e
	}
	unchanged := func(name string, before string) {
		t.Helper()
		if c.Snapshot(t) != before {
			t.Errorf("%s: a refused override changed the tenant's data", name)
		}
	}
	overridden := func(name, item string, wantDue time.Time, wantCount int, r harness.Response) {
		t.Helper()
		var loan struct {
			Action, ActionComment, DueDate string
			RenewalCount                   int
		}
		r.Want(t, http.StatusOK).Decode(t, &loan)
		due, count, action, stored := loanRow(t, c, item)
		answered, _ := time.Parse(time.RFC3339, loan.DueDate)
		if loan.Action != schemas.LoanRenewedThroughOverride || loan.ActionComment != comment || loan.RenewalCount != wantCount ||
			action != schemas.LoanRenewedThroughOverride || stored != comment || count != wantCount || !due.Equal(wantDue) ||
			!answered.Equal(wantDue) {
			t.Errorf("%s: answered %+v, stored due %s count %d action %q comment %q; want due %s count %d, %s with the comment",
				name, loan, due, count, action, stored, wantDue, wantCount, schemas.LoanRenewedThroughOverride)
		}
	}
	renewal := map[string]any{"renewalBlock": map[string]any{}, "comment": comment}

	// At the renewal limit: renewed once, then refused, then overridden.
	atLimit, patron0 := lib.Items[0][0], lib.Patrons[0]
	first, _, _, _ := loanRow(t, c, atLimit)
	renew(librarian, atLimit, patron0, nil).Want(t, http.StatusOK)
	second, _, _, _ := loanRow(t, c, atLimit)
	period := second.Sub(first)
	before := c.Snapshot(t)
	// FOLIO's Users app offers the override when every refusal names the
	// block that lifts it.
	refused("at the limit", renew(librarian, atLimit, patron0, nil),
		want(schemas.CodeLoanRenewalLimitReached, "loan at maximum renewal number").over("renewalBlock"))
	refused("at the limit, at a self-check machine", renew(selfCheck, atLimit, patron0, nil),
		want(schemas.CodeLoanRenewalLimitReached, "loan at maximum renewal number").over("renewalBlock", schemas.PermissionOverrideRenewalBlock))
	refused("a self-check machine's override", renew(selfCheck, atLimit, patron0, map[string]any{"renewalBlock": map[string]any{},
		"patronBlock": map[string]any{}, "comment": comment}),
		want(schemas.CodeInsufficientOverridePermissions, "Insufficient override permissions",
			"overridableBlock", "patronBlock", "missingPermissions", schemas.PermissionOverridePatronBlock).
			over("patronBlock", schemas.PermissionOverridePatronBlock),
		want(schemas.CodeInsufficientOverridePermissions, "Insufficient override permissions",
			"overridableBlock", "renewalBlock", "missingPermissions", schemas.PermissionOverrideRenewalBlock).
			over("renewalBlock", schemas.PermissionOverrideRenewalBlock))
	refused("a patron block overridden without its permission", renew(renewalsOnly, atLimit, patron0, map[string]any{
		"renewalBlock": map[string]any{}, "patronBlock": map[string]any{}, "comment": comment}),
		want(schemas.CodeInsufficientOverridePermissions, "Insufficient override permissions",
			"overridableBlock", "patronBlock", "missingPermissions", schemas.PermissionOverridePatronBlock).
			over("patronBlock", schemas.PermissionOverridePatronBlock))
	refused("no comment", renew(librarian, atLimit, patron0, map[string]any{"renewalBlock": map[string]any{}, "comment": " \t"}),
		want(schemas.CodeOverrideRenewalCommentRequired, "Override renewal request must have a comment", "comment", ""))
	refused("a due date that is not one", renew(librarian, atLimit, patron0, map[string]any{
		"renewalDueDateRequiredBlock": map[string]any{"dueDate": "next week"}, "comment": comment}),
		want(schemas.CodeValidation, ""))
	unchanged("at the limit", before)
	events := renewalEvents(t, c)
	overridden("at the limit", atLimit, second.Add(period), 2, renew(renewalsOnly, atLimit, patron0, renewal))
	if n := renewalEvents(t, c); n != events+1 {
		t.Errorf("%d RENEWED events after an override's renewal, want %d", n, events+1)
	}

	// Nothing to override: the policy would renew the loan.
	free := lib.Items[0][1]
	before = c.Snapshot(t)
	refused("nothing to override", renew(librarian, free, patron0, renewal),
		want(schemas.CodeOverrideRenewalNotAllowedForCurrentLoan, "Override renewal does not match any of expected cases: "+
			"item is not loanable, item is not renewable, reached number of renewals limit,"+
			"renewal date falls outside of the date ranges in the loan policy, items cannot be renewed when there is an active recall request, "+
			"item is Declared lost, item is Aged to lost, renewal would not change the due date, loan has reminder fees",
			"loanPolicyId", lib.PolicyID))
	unchanged("nothing to override", before)

	// A recall: lifted.
	recalled := lib.Items[1][0]
	c.Do(c.Storage, "POST", "/request-storage/requests", map[string]any{"requestType": "Recall", "requestLevel": "Item",
		"requestDate": "2026-01-01T10:00:00.000Z", "requesterId": c.IDOf(t, "/users", "users", lib.Patrons[3]),
		"itemId": c.IDOf(t, "/item-storage/items", "items", recalled), "status": "Open - Not yet filled", "position": 1,
		"fulfillmentPreference": "Hold Shelf"}).Want(t, http.StatusCreated)
	refused("a recall", renew(librarian, recalled, lib.Patrons[1], nil), want(schemas.CodeRenewalBlockedByRecall, "").over("renewalBlock"))
	recalledDue, _, _, _ := loanRow(t, c, recalled)
	overridden("a recall", recalled, recalledDue.Add(period), 1, renew(librarian, recalled, lib.Patrons[1], renewal))

	// Declared lost: not lifted (the item's status is the desk's to
	// resolve by a check-in).
	lost := lib.Items[1][1]
	c.DoWith(c.Circulations[0], "POST", "/circulation/loans/"+openLoanID(t, c, lost)+"/declare-item-lost",
		map[string]any{"servicePointId": harness.ServicePoint}, librarian).Want(t, http.StatusNoContent)
	before = c.Snapshot(t)
	refused("declared lost", renew(librarian, lost, lib.Patrons[1], renewal),
		want(schemas.CodeItemDeclaredLostNotRenewable, "item is Declared lost"))
	unchanged("declared lost", before)

	// A manual block: lifted by patronBlock, not by renewalBlock; an
	// inactive patron never.
	blocked := lib.Items[2][0]
	c.Do(c.Storage, "POST", "/manualblocks", map[string]any{"userId": c.IDOf(t, "/users", "users", lib.Patrons[2]),
		"desc": "Overdue books", "renewals": true}).Want(t, http.StatusCreated)
	before = c.Snapshot(t)
	refused("blocked, renewalBlock", renew(librarian, blocked, lib.Patrons[2], renewal),
		want(schemas.CodeUserBlockedManually, "Patron blocked from renewing").over("patronBlock"))
	unchanged("blocked, renewalBlock", before)
	blockedDue, _, _, _ := loanRow(t, c, blocked)
	overridden("blocked, patronBlock", blocked, blockedDue.Add(period), 1,
		renew(librarian, blocked, lib.Patrons[2], map[string]any{"patronBlock": map[string]any{}, "comment": comment}))

	inactive := lib.Items[3][0]
	renew(librarian, inactive, lib.Patrons[3], nil).Want(t, http.StatusOK) // the renewal limit's one
	var user map[string]any
	userID := c.IDOf(t, "/users", "users", lib.Patrons[3])
	c.Do(c.Storage, "GET", "/users/"+userID, nil).Want(t, http.StatusOK).Decode(t, &user)
	delete(user, "metadata")
	user["active"] = false
	c.Do(c.Storage, "PUT", "/users/"+userID, user).Want(t, http.StatusNoContent)
	before = c.Snapshot(t)
	refused("inactive", renew(librarian, inactive, lib.Patrons[3], map[string]any{"renewalBlock": map[string]any{},
		"patronBlock": map[string]any{}, "comment": comment}),
		want(schemas.CodeUserIsInactiveOrExpired, "Cannot renew loan when user is inactive or expired"))
	unchanged("inactive", before)

	// What follows changes the whole library's policy.
	// A policy that does not renew: the override's due date is required
	// and must be later than the loan's.
	changePolicy(t, c, lib, map[string]any{"renewable": false})
	notRenewable := lib.Items[0][2]
	notRenewableDue, _, _, _ := loanRow(t, c, notRenewable)
	before = c.Snapshot(t)
	refused("not renewable", renew(librarian, notRenewable, patron0, nil),
		want(schemas.CodeLoanNotRenewable, "loan is not renewable").over("renewalDueDateRequiredBlock"))
	refused("not renewable, no due date", renew(librarian, notRenewable, patron0, renewal),
		want(schemas.CodeOverrideRenewalDueDateRequired, "New due date must be specified when due date calculation fails", "dueDate", ""))
	refused("not renewable, an earlier due date", renew(librarian, notRenewable, patron0, map[string]any{
		"renewalDueDateRequiredBlock": map[string]any{"dueDate": schemas.FormatTime(notRenewableDue.Add(-time.Hour))}, "comment": comment}),
		want(schemas.CodeRenewalWouldNotChangeDueDate, "renewal would not change the due date", "loanPolicyId", lib.PolicyID))
	unchanged("not renewable", before)
	chosen := notRenewableDue.Add(72 * time.Hour).Truncate(time.Millisecond)
	overridden("not renewable", notRenewable, chosen, 1, renew(librarian, notRenewable, patron0, map[string]any{
		"renewalDueDateRequiredBlock": map[string]any{"dueDate": schemas.FormatTime(chosen)}, "comment": comment}))

	// A due date the policy would not move: the override's is required.
	changePolicy(t, c, lib, map[string]any{"renewable": true, "renewalsPolicy": map[string]any{"numberAllowed": 5, "renewFromId": "SYSTEM_DATE",
		"differentPeriod": true, "period": map[string]any{"duration": 1, "intervalId": "Days"}}})
	unmoved := lib.Items[0][3]
	unmovedDue, _, _, _ := loanRow(t, c, unmoved)
	before = c.Snapshot(t)
	refused("the due date would not move, no override", renew(librarian, unmoved, patron0, nil),
		want(schemas.CodeRenewalWouldNotChangeDueDate, "renewal would not change the due date").over("renewalDueDateRequiredBlock"))
	refused("the due date would not move", renew(librarian, unmoved, patron0, renewal),
		want(schemas.CodeOverrideRenewalDueDateRequiredWhenDueDateUnchanged,
			"New due date is required when renewal would not change the due date", "dueDate", ""))
	unchanged("the due date would not move", before)
	chosen = unmovedDue.Add(24 * time.Hour).Truncate(time.Millisecond)
	// By ids, as FOLIO's renew by id takes overrideBlocks too.
	overridden("the due date would not move", unmoved, chosen, 1, c.DoWith(c.Circulations[0], "POST", "/circulation/renew-by-id",
		map[string]any{"itemId": c.IDOf(t, "/item-storage/items", "items", unmoved), "userId": c.IDOf(t, "/users", "users", patron0),
			"overrideBlocks": map[string]any{"renewalDueDateRequiredBlock": map[string]any{"dueDate": schemas.FormatTime(chosen)}, "comment": comment}},
		librarian))
}

// TestARenewalOverrideIsStoragesToAllow: storage writes a renewal past the
// refusals an override lifts (X-Renewal-Override) only for a caller
// holding circulation-storage.loans.renewal.override, only on a renewal's
// write, naming the blocks it knows, as renewedThroughOverride with a
// comment; and lifts only what the override names.
func TestARenewalOverrideIsStoragesToAllow(t *testing.T) {
	t.Parallel()
	c := harness.NewCluster(t, harness.Options{Circulations: 1, FeatureOn: true})
	lib := c.SetupLibrary(1, 1, 0)
	renewable(t, c, lib, map[string]any{"numberAllowed": 0, "renewFromId": "CURRENT_DUE_DATE"})
	item := lib.Items[0][0]
	c.CheckOut(0, item, lib.Patrons[0]).Want(t, http.StatusCreated)
	id := openLoanID(t, c, item)
	var loan map[string]any
	c.Do(c.Storage, "GET", "/loan-storage/loans/"+id, nil).Want(t, http.StatusOK).Decode(t, &loan)
	delete(loan, "metadata")
	due, _, _, _ := loanRow(t, c, item)
	renewed := func(action, comment string) map[string]any {
		out := map[string]any{}
		for k, v := range loan {
			out[k] = v
		}
		out["action"], out["renewalCount"], out["dueDate"] = action, 1, schemas.FormatTime(due.Add(48*time.Hour))
		if comment != "" {
			out["actionComment"] = comment
		}
		return out
	}
	put := func(headers map[string]string, body map[string]any) harness.Response {
		return c.DoWith(c.Storage, "PUT", "/loan-storage/loans/"+id, body, headers)
	}
	withCount := func(kv ...string) map[string]string {
		return c.HeadersWith(append([]string{schemas.HeaderRenewalCount, "0"}, kv...)...)
	}
	before := c.Snapshot(t)
	// The tenant administrator holds the permission; the librarian's role
	// reaches no storage route.
	tok, err := auth.Mint(harness.Secret(), auth.Claims{Tenant: c.Tenant, UserID: harness.RoleUser(schemas.RoleLibrarian),
		Permissions: []string{"circulation-storage.loans.item.put"}}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	noOverride := map[string]string{schemas.HeaderTenant: c.Tenant, schemas.HeaderToken: tok, schemas.HeaderRenewalCount: "0",
		schemas.HeaderRenewalOverride: "renewalBlock"}
	put(noOverride, renewed(schemas.LoanRenewedThroughOverride, "desk")).Want(t, http.StatusForbidden)
	put(withCount(schemas.HeaderRenewalOverride, "itemLimitBlock"), renewed(schemas.LoanRenewedThroughOverride, "desk")).
		Want(t, http.StatusBadRequest)
	put(c.HeadersWith(schemas.HeaderRenewalOverride, "renewalBlock"), renewed(schemas.LoanRenewedThroughOverride, "desk")).
		Want(t, http.StatusBadRequest)
	for _, tc := range []struct {
		name, override, action, comment, code string
	}{
		{"no override", "", "renewed", "", schemas.CodeLoanRenewalLimitReached},
		{"a patron block's override", "patronBlock", schemas.LoanRenewedThroughOverride, "desk", schemas.CodeLoanRenewalLimitReached},
		{"no comment", "renewalBlock", schemas.LoanRenewedThroughOverride, "", schemas.CodeValidation},
		{"a blank comment", "renewalBlock", schemas.LoanRenewedThroughOverride, " ", schemas.CodeValidation},
		{"action renewed", "renewalBlock", "renewed", "desk", schemas.CodeValidation},
	} {
		headers := withCount()
		if tc.override != "" {
			headers = withCount(schemas.HeaderRenewalOverride, tc.override)
		}
		r := put(headers, renewed(tc.action, tc.comment)).Want(t, http.StatusUnprocessableEntity)
		if codes := r.ErrorCodes(); len(codes) != 1 || codes[0] != tc.code {
			t.Errorf("%s: %s, want %s", tc.name, r.Body, tc.code)
		}
	}
	if c.Snapshot(t) != before {
		t.Error("a refused renewal changed the tenant's data")
	}
	put(withCount(schemas.HeaderRenewalOverride, "renewalBlock"), renewed(schemas.LoanRenewedThroughOverride, "desk")).Want(t, http.StatusOK)
	if _, count, action, comment := loanRow(t, c, item); count != 1 || action != schemas.LoanRenewedThroughOverride || comment != "desk" {
		t.Errorf("renewed through override: count %d action %q comment %q", count, action, comment)
	}
}

// TestOverrideRenewalsAtOnceRenewOnceEach: a loan at its policy's limit
// (no renewal allowed), renewed at once by four librarians' overrides over
// two circulation instances beside a self-check machine's plain renewal,
// fifteen rounds: the plain renewal is refused at the limit every time;
// every override answered 200 is one more on the loan's count, one more
// period on its due date (none undone, none applied twice) and one RENEWED
// event; the others are told the loan changed (409), never a 5xx.
func TestOverrideRenewalsAtOnceRenewOnceEach(t *testing.T) {
	t.Parallel()
	c := harness.NewCluster(t, harness.Options{Circulations: 2, FeatureOn: true})
	lib := c.SetupLibrary(1, 1, 0)
	renewable(t, c, lib, map[string]any{"numberAllowed": 0, "renewFromId": "CURRENT_DUE_DATE",
		"differentPeriod": true, "period": map[string]any{"duration": 1, "intervalId": "Days"}})
	patron, item := lib.Patrons[0], lib.Items[0][0]
	c.CheckOut(0, item, patron).Want(t, http.StatusCreated)
	first, _, _, _ := loanRow(t, c, item)
	librarian := c.HeadersWith(schemas.HeaderToken, c.Token(schemas.RoleLibrarian))
	selfCheck := c.HeadersWith(schemas.HeaderToken, c.Token(schemas.RoleSelfCheck))
	const overrides, rounds = 4, 15
	renewed := 0
	for round := range rounds {
		var wg sync.WaitGroup
		answers := make([]harness.Response, overrides+1)
		for i := range answers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				body, headers := map[string]any{"itemBarcode": item, "userBarcode": patron}, selfCheck
				if i < overrides {
					body["overrideBlocks"] = map[string]any{"renewalBlock": map[string]any{}, "comment": fmt.Sprintf("Round %d, desk %d", round, i)}
					headers = librarian
				}
				answers[i] = c.DoWith(c.Circulations[i%2], "POST", "/circulation/renew-by-barcode", body, headers)
			}()
		}
		wg.Wait()
		if codes := answers[overrides].ErrorCodes(); answers[overrides].Status != http.StatusUnprocessableEntity ||
			len(codes) != 1 || codes[0] != schemas.CodeLoanRenewalLimitReached {
			t.Fatalf("round %d: the plain renewal answered %d %s", round, answers[overrides].Status, answers[overrides].Body)
		}
		landed := 0
		for i, r := range answers[:overrides] {
			switch r.Status {
			case http.StatusOK:
				landed++
			case http.StatusConflict:
			default:
				t.Fatalf("round %d: override %d answered %d %s", round, i, r.Status, r.Body)
			}
		}
		if landed == 0 {
			t.Fatalf("round %d: no override landed", round)
		}
		renewed += landed
		due, count, action, _ := loanRow(t, c, item)
		if count != renewed || !due.Equal(first.Add(time.Duration(renewed)*24*time.Hour)) || action != schemas.LoanRenewedThroughOverride {
			t.Fatalf("round %d: the loan is due %s, count %d, %s; %d overrides answered 200 (due %s)", round, due, count, action,
				renewed, first.Add(time.Duration(renewed)*24*time.Hour))
		}
	}
	if n := renewalEvents(t, c); n != renewed {
		t.Errorf("%d RENEWED events, %d override renewals", n, renewed)
	}
	t.Logf("%d rounds of %d overrides and a plain renewal at once: %d renewed, %d told the loan changed", rounds, overrides, renewed,
		rounds*overrides-renewed)
}
