package storagetest

import (
	"encoding/json"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"time"

	"github.com/google/uuid"

	"github.com/checkoutlock/circulation-storage/internal/postgres"
	"github.com/checkoutlock/schemas"
)

// The records a test arranges, each written through storage's own API (so
// storage checks it as it checks any client's) unless said otherwise.

// AddPatronGroup stores a patron group.
func (s *Storage) AddPatronGroup(id, name string) {
	s.t.Helper()
	s.send(http.MethodPost, "/groups", map[string]any{"id": id, "group": name}, nil, http.StatusCreated)
}

// AddMaterialType stores a material type.
func (s *Storage) AddMaterialType(id, name string) {
	s.t.Helper()
	s.send(http.MethodPost, "/material-types", map[string]any{"id": id, "name": name}, nil, http.StatusCreated)
}

// AddLoanType stores a loan type.
func (s *Storage) AddLoanType(id, name string) {
	s.t.Helper()
	s.send(http.MethodPost, "/loan-types", map[string]any{"id": id, "name": name}, nil, http.StatusCreated)
}

// AddServicePoint stores a service point: a loan names its tenant's.
func (s *Storage) AddServicePoint(id, name string) {
	s.t.Helper()
	s.send(http.MethodPost, "/service-points", map[string]any{"id": id, "name": name, "code": id[:8], "discoveryDisplayName": name}, nil, http.StatusCreated)
}

// User is a patron.
type User struct {
	ID, Barcode, PatronGroup, FirstName, LastName string
	Active                                        bool
	// ExpirationDate is as on the wire, "" for none.
	ExpirationDate string
}

// AddUser stores a patron.
func (s *Storage) AddUser(u User) {
	s.t.Helper()
	doc := map[string]any{"id": u.ID, "barcode": u.Barcode, "active": u.Active, "patronGroup": u.PatronGroup,
		"personal": map[string]any{"firstName": u.FirstName, "lastName": u.LastName}}
	if u.ExpirationDate != "" {
		doc["expirationDate"] = u.ExpirationDate
	}
	s.send(http.MethodPost, "/users", doc, nil, http.StatusCreated)
}

// Item is an item; Version is its _version (1 when stored).
type Item struct {
	ID, Barcode, Title, Status                               string
	MaterialTypeID, PermanentLoanTypeID, TemporaryLoanTypeID string
	Version                                                  int
}

// AddItem stores an item. One Checked out (which storage lets only a
// check-out make) is stored Available and given its status straight in
// its table, at version 1 still: the item of a loan AddLoan stores.
func (s *Storage) AddItem(i Item) {
	s.t.Helper()
	status := i.Status
	if status == checkedOut {
		status = schemas.ItemAvailable
	}
	doc := map[string]any{"id": i.ID, "barcode": i.Barcode, "title": i.Title, "status": map[string]any{"name": status},
		"materialTypeId": i.MaterialTypeID, "permanentLoanTypeId": i.PermanentLoanTypeID}
	if i.TemporaryLoanTypeID != "" {
		doc["temporaryLoanTypeId"] = i.TemporaryLoanTypeID
	}
	s.send(http.MethodPost, "/item-storage/items", doc, nil, http.StatusCreated)
	if status != i.Status {
		s.Exec(`UPDATE circulation_storage.item SET jsonb = jsonb_set(jsonb, '{status,name}', to_jsonb($3::text))
		         WHERE tenant_id = $1 AND id = $2`, i.ID, i.Status)
	}
}

const checkedOut = schemas.ItemCheckedOut

// Item is the stored item, and whether it exists.
func (s *Storage) Item(id string) (Item, bool) {
	s.t.Helper()
	var doc struct {
		ID, Barcode, Title                                       string
		Status                                                   struct{ Name string }
		MaterialTypeID, PermanentLoanTypeID, TemporaryLoanTypeID string
		Version                                                  int `json:"_version"`
	}
	if s.send(http.MethodGet, "/item-storage/items/"+url.PathEscape(id), nil, &doc, 0) != http.StatusOK {
		return Item{}, false
	}
	return Item{ID: doc.ID, Barcode: doc.Barcode, Title: doc.Title, Status: doc.Status.Name, MaterialTypeID: doc.MaterialTypeID,
		PermanentLoanTypeID: doc.PermanentLoanTypeID, TemporaryLoanTypeID: doc.TemporaryLoanTypeID, Version: doc.Version}, true
}

// SetItemStatus gives a stored item another status (a new version), as
// an item's life does between check-outs.
func (s *Storage) SetItemStatus(id, status string) {
	s.t.Helper()
	var doc map[string]any
	s.send(http.MethodGet, "/item-storage/items/"+url.PathEscape(id), nil, &doc, http.StatusOK)
	doc["status"] = map[string]any{"name": status}
	delete(doc, "metadata")
	s.send(http.MethodPut, "/item-storage/items/"+url.PathEscape(id), doc, nil, http.StatusNoContent)
}

// LoanPolicy is a loan policy; ItemLimit 0 means none. Extra fields
// (renewable, renewalsPolicy, requestManagement, …) go into the document
// as given.
type LoanPolicy struct {
	ID, Name  string
	Loanable  bool
	Duration  int
	Interval  string
	ItemLimit int
	Extra     map[string]any
}

// AddLoanPolicy stores a loan policy.
func (s *Storage) AddLoanPolicy(p LoanPolicy) {
	s.t.Helper()
	doc := map[string]any{"id": p.ID, "name": p.Name, "loanable": p.Loanable}
	if p.Loanable || p.ItemLimit > 0 {
		duration, interval := p.Duration, p.Interval
		if duration == 0 {
			duration, interval = 1, "Weeks"
		}
		lp := map[string]any{"profileId": "Rolling", "period": map[string]any{"duration": duration, "intervalId": interval}}
		if p.ItemLimit > 0 {
			lp["itemLimit"] = p.ItemLimit
		}
		doc["loansPolicy"] = lp
	}
	for k, v := range p.Extra {
		doc[k] = v
	}
	s.send(http.MethodPost, "/loan-policy-storage/loan-policies", doc, nil, http.StatusCreated)
}

// Rule is one circulation rule: the loan policy for the patron group,
// material type and loan type it names ("" names none).
type Rule struct {
	PatronGroupID, MaterialTypeID, LoanTypeID string
	LoanPolicyID                              string
}

// SetRules stores the circulation rules: fallback for whatever no rule
// matches.
func (s *Storage) SetRules(fallback string, rules ...Rule) {
	s.t.Helper()
	list := []any{}
	for _, r := range rules {
		doc := map[string]any{"loanPolicyId": r.LoanPolicyID}
		for k, v := range map[string]string{"patronGroupId": r.PatronGroupID, "materialTypeId": r.MaterialTypeID, "loanTypeId": r.LoanTypeID} {
			if v != "" {
				doc[k] = v
			}
		}
		list = append(list, doc)
	}
	s.send(http.MethodPut, "/circulation-rules-storage", map[string]any{"fallbackLoanPolicyId": fallback, "rules": list}, nil,
		http.StatusNoContent)
}

// Loan is a loan; times are as on the wire.
type Loan struct {
	ID, UserID, ItemID, Status, Action            string
	LoanDate, DueDate, ReturnDate                 string
	LoanPolicyID                                  string
	CheckoutServicePointID, CheckinServicePointID string
	ActionComment                                 string
}

// AddLoan stores a loan as it stands, written straight to the table: the
// loans a patron already has (their items' statuses are the test's to
// arrange).
func (s *Storage) AddLoan(l Loan) {
	s.t.Helper()
	doc := map[string]any{"id": l.ID, "userId": l.UserID, "itemId": l.ItemID, "status": map[string]any{"name": l.Status},
		"action": l.Action, "loanDate": l.LoanDate}
	for k, v := range map[string]string{"dueDate": l.DueDate, "returnDate": l.ReturnDate, "loanPolicyId": l.LoanPolicyID,
		"checkoutServicePointId": l.CheckoutServicePointID, "checkinServicePointId": l.CheckinServicePointID} {
		if v != "" {
			doc[k] = v
		}
	}
	j, _ := json.Marshal(doc)
	s.Exec(`INSERT INTO circulation_storage.loan (tenant_id, id, jsonb) VALUES ($1, $2, $3)`, l.ID, string(j))
}

// Loans are the stored loans.
func (s *Storage) Loans() []Loan {
	s.t.Helper()
	var page struct {
		Loans []struct {
			ID, UserID, ItemID, Action, ActionComment     string
			Status                                        struct{ Name string }
			LoanDate, DueDate, ReturnDate                 string
			LoanPolicyID                                  string
			CheckoutServicePointID, CheckinServicePointID string
		}
	}
	s.send(http.MethodGet, "/loan-storage/loans?limit="+strconv.Itoa(schemas.MaxPageSize), nil, &page, http.StatusOK)
	var out []Loan
	for _, l := range page.Loans {
		out = append(out, Loan{ID: l.ID, UserID: l.UserID, ItemID: l.ItemID, Status: l.Status.Name, Action: l.Action,
			LoanDate: l.LoanDate, DueDate: l.DueDate, ReturnDate: l.ReturnDate, LoanPolicyID: l.LoanPolicyID,
			CheckoutServicePointID: l.CheckoutServicePointID, CheckinServicePointID: l.CheckinServicePointID,
			ActionComment: l.ActionComment})
	}
	return out
}

// ManualBlock is a manual patron block. ExpirationDate is as on the wire,
// "" for none.
type ManualBlock struct {
	// ID is the block's id ("" for one of storage's choosing): blocks
	// made within one millisecond are listed in the order of their ids.
	ID                                          string
	UserID, Desc, PatronMessage, ExpirationDate string
	Borrowing, Renewals                         bool
}

// AddManualBlock stores a manual patron block.
func (s *Storage) AddManualBlock(b ManualBlock) {
	s.t.Helper()
	doc := map[string]any{"userId": b.UserID, "type": "Manual", "desc": b.Desc, "borrowing": b.Borrowing, "renewals": b.Renewals,
		"requests": false}
	if b.PatronMessage != "" {
		doc["patronMessage"] = b.PatronMessage
	}
	if b.ID != "" {
		doc["id"] = b.ID
	}
	if b.ExpirationDate != "" {
		doc["expirationDate"] = b.ExpirationDate
	}
	s.send(http.MethodPost, "/manualblocks", doc, nil, http.StatusCreated)
}

// LimitChargedOut gives the patron group a limit of maximum items charged
// out, its condition blocking borrowing with message.
func (s *Storage) LimitChargedOut(group string, limit int, message string) {
	s.t.Helper()
	path := "/patron-block-conditions/" + schemas.ConditionItemsChargedOut
	var c map[string]any
	s.send(http.MethodGet, path, nil, &c, http.StatusOK)
	c["blockBorrowing"], c["message"] = true, message
	delete(c, "metadata")
	s.send(http.MethodPut, path, c, nil, http.StatusNoContent)
	s.send(http.MethodPost, "/patron-block-limits", map[string]any{"patronGroupId": group,
		"conditionId": schemas.ConditionItemsChargedOut, "value": limit}, nil, http.StatusCreated)
}

// Request is a request for an item; Position 0 means none (a closed
// request); Type is its requestType, Hold when not given.
type Request struct {
	ID, ItemID, RequesterID, Status string
	Position                        int
	Type                            string
}

// AddRequest stores a request.
func (s *Storage) AddRequest(r Request) {
	s.t.Helper()
	kind := r.Type
	if kind == "" {
		kind = "Hold"
	}
	doc := map[string]any{"id": r.ID, "requestType": kind, "requestLevel": "Item", "requestDate": "2026-01-01T10:00:00.000Z",
		"requesterId": r.RequesterID, "itemId": r.ItemID, "status": r.Status, "fulfillmentPreference": "Hold Shelf"}
	if r.Position > 0 {
		doc["position"] = r.Position
	}
	s.send(http.MethodPost, "/request-storage/requests", doc, nil, http.StatusCreated)
}

// Requests are the stored requests, by id.
func (s *Storage) Requests() []Request {
	s.t.Helper()
	var page struct {
		Requests []struct {
			ID, ItemID, RequesterID, Status string
			Position                        int
		}
	}
	s.send(http.MethodGet, "/request-storage/requests?limit="+strconv.Itoa(schemas.MaxPageSize), nil, &page, http.StatusOK)
	var out []Request
	for _, r := range page.Requests {
		out = append(out, Request{ID: r.ID, ItemID: r.ItemID, RequesterID: r.RequesterID, Status: r.Status, Position: r.Position})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// AddSetting stores a settings entry through storage's API, which checks
// it as it checks any client's.
func (s *Storage) AddSetting(scope, key string, value any) {
	s.t.Helper()
	s.send(http.MethodPost, "/settings/entries", map[string]any{"scope": scope, "key": key, "value": value}, nil, http.StatusCreated)
}

// AddSettingUnchecked stores a settings entry straight in its table, as
// an entry written before storage checked entries stands: what the code
// under test must survive reading.
func (s *Storage) AddSettingUnchecked(scope, key string, value any) {
	s.t.Helper()
	j, _ := json.Marshal(map[string]any{"id": newID(), "scope": scope, "key": key, "value": value, "_version": 1})
	// With what storage's decoding at start-up keeps of it (migration 12),
	// as for an entry an earlier version stored.
	s.Exec(`INSERT INTO circulation_storage.setting (tenant_id, id, jsonb, lock_feature)
	        VALUES ($1, ($2::jsonb ->> 'id')::uuid, $2::jsonb, nullif($3, ''))`, string(j), postgres.LockFeature(j))
}

// Setting is the stored value of the entry, and whether there is one.
func (s *Storage) Setting(scope, key string) (json.RawMessage, bool) {
	s.t.Helper()
	var page struct {
		Items []struct {
			Value json.RawMessage `json:"value"`
		} `json:"items"`
	}
	q := url.QueryEscape(`scope=="` + scope + `" and key=="` + key + `"`)
	s.send(http.MethodGet, "/settings/entries?query="+q, nil, &page, http.StatusOK)
	if len(page.Items) == 0 {
		return nil, false
	}
	return page.Items[0].Value, true
}

// Lock is a lock, as storage answers it.
type Lock struct {
	ID           string         `json:"id"`
	UserID       string         `json:"userId"`
	TTLMs        int            `json:"ttlMs"`
	CreationDate time.Time      `json:"creationDate"`
	ExpiresAt    time.Time      `json:"expiresAt"`
	Holder       map[string]any `json:"holder"`
}

// Locks are the tenant's live locks.
func (s *Storage) Locks() []Lock {
	s.t.Helper()
	var page struct {
		Locks []Lock `json:"checkoutLocks"`
	}
	s.send(http.MethodGet, "/check-out-lock-storage?limit="+strconv.Itoa(schemas.MaxPageSize), nil, &page, http.StatusOK)
	return page.Locks
}

// Live says whether the lock is live at storage.
func (s *Storage) Live(id string) bool {
	s.t.Helper()
	return s.send(http.MethodGet, "/check-out-lock-storage/"+url.PathEscape(id), nil, nil, 0) == http.StatusOK
}

// Hold takes the patron's lock as someone else (another circulation
// instance), for ttl, and answers its id.
func (s *Storage) Hold(userID string, ttl time.Duration) string {
	s.t.Helper()
	var l struct {
		ID string `json:"id"`
	}
	s.send(http.MethodPost, "/check-out-lock-storage", map[string]any{"userId": userID, "ttlMs": ttl.Milliseconds(),
		"holder": map[string]any{"instance": "another"}}, &l, http.StatusCreated)
	return l.ID
}

// Release releases a lock as its holder.
func (s *Storage) Release(id string) {
	s.t.Helper()
	s.send(http.MethodDelete, "/check-out-lock-storage/"+url.PathEscape(id), nil, nil, 0)
}

func newID() string { return uuid.NewString() }
