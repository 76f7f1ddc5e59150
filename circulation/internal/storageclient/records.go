package storageclient

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/checkoutlock/schemas/errs"

	"github.com/checkoutlock/circulation"
	"github.com/checkoutlock/schemas"
)

// Wire forms of storage's records (schemas/*.json), as far as this service
// reads them.

type patronJSON struct {
	ID          string `json:"id"`
	Barcode     string `json:"barcode"`
	Active      bool   `json:"active"`
	PatronGroup string `json:"patronGroup"`
	// ExpirationDate is as on the wire: RFC 3339, "" when none.
	ExpirationDate string `json:"expirationDate"`
	Personal       struct {
		FirstName string `json:"firstName"`
		LastName  string `json:"lastName"`
	} `json:"personal"`
}

// patron is the patron as the domain sees it.
func (u *patronJSON) patron() *circulation.Patron {
	return &circulation.Patron{ID: u.ID, Barcode: u.Barcode, Active: u.Active, PatronGroupID: u.PatronGroup,
		FirstName: u.Personal.FirstName, LastName: u.Personal.LastName, ExpirationDate: parseTime(u.ExpirationDate)}
}

// blocksJSON are a patron's blocks as validation and the patron summary
// carry them.
type blocksJSON struct {
	Automated []struct {
		ConditionID    string `json:"patronBlockConditionId"`
		BlockBorrowing bool   `json:"blockBorrowing"`
		BlockRenewals  bool   `json:"blockRenewals"`
		Message        string `json:"message"`
	} `json:"automatedPatronBlocks"`
	ManualBlocks []struct {
		Desc          string `json:"desc"`
		PatronMessage string `json:"patronMessage"`
		Borrowing     bool   `json:"borrowing"`
		Renewals      bool   `json:"renewals"`
	} `json:"manualBlocks"`
}

// blocks are the blocks as the domain sees them.
func (b blocksJSON) blocks() (automated []circulation.AutomatedBlock, manual []circulation.ManualBlock) {
	for _, a := range b.Automated {
		automated = append(automated, circulation.AutomatedBlock{ConditionID: a.ConditionID, BlockBorrowing: a.BlockBorrowing,
			BlockRenewals: a.BlockRenewals, Message: a.Message})
	}
	for _, m := range b.ManualBlocks {
		manual = append(manual, circulation.ManualBlock{Desc: m.Desc, PatronMessage: m.PatronMessage, Borrowing: m.Borrowing,
			Renewals: m.Renewals})
	}
	return automated, manual
}

type statusJSON struct {
	Name string `json:"name"`
}

type itemJSON struct {
	ID                  string     `json:"id"`
	Barcode             string     `json:"barcode"`
	Title               string     `json:"title"`
	Status              statusJSON `json:"status"`
	MaterialTypeID      string     `json:"materialTypeId"`
	PermanentLoanTypeID string     `json:"permanentLoanTypeId"`
	TemporaryLoanTypeID string     `json:"temporaryLoanTypeId"`
	Version             int        `json:"_version"`
	// InTransitDestinationServicePointID is where an item In transit goes.
	InTransitDestinationServicePointID string `json:"inTransitDestinationServicePointId"`
}

type loanJSON struct {
	ID                     string       `json:"id"`
	UserID                 string       `json:"userId"`
	ItemID                 string       `json:"itemId"`
	LoanDate               string       `json:"loanDate"`
	DueDate                string       `json:"dueDate,omitempty"`
	ReturnDate             string       `json:"returnDate,omitempty"`
	Action                 string       `json:"action"`
	ActionComment          string       `json:"actionComment,omitempty"`
	Status                 statusJSON   `json:"status"`
	LoanPolicyID           string       `json:"loanPolicyId,omitempty"`
	CheckoutServicePointID string       `json:"checkoutServicePointId,omitempty"`
	CheckinServicePointID  string       `json:"checkinServicePointId,omitempty"`
	RenewalCount           int          `json:"renewalCount,omitempty"`
	ClaimedReturnedDate    string       `json:"claimedReturnedDate,omitempty"`
	DeclaredLostDate       string       `json:"declaredLostDate,omitempty"`
	PatronGroupAtCheckout  string       `json:"patronGroupIdAtCheckout,omitempty"`
	Offline                *offlineJSON `json:"offline,omitempty"`
	Version                int          `json:"_version,omitempty"`
}

// offlineJSON is a loan's offline (loan.json): a loan made offline.
type offlineJSON struct {
	TransactionDate string   `json:"transactionDate"`
	RecordedBy      string   `json:"recordedBy,omitempty"`
	Kiosk           string   `json:"kiosk,omitempty"`
	BrokenRules     []string `json:"brokenRules,omitempty"`
}

// parseTime reads a date storage answered; one that cannot be read
// (schemas.ParseDateTime) is the zero time, as an absent one.
func parseTime(s string) time.Time {
	t, _ := schemas.ParseDateTime(s)
	return t
}

// ReadForCheckOut implements circulation.Storage.
func (c *Client) ReadForCheckOut(ctx context.Context, itemBarcode, userBarcode string) (circulation.CheckOutReads, error) {
	return c.readForCheckOut(ctx, query("itemBarcode", itemBarcode, "userBarcode", userBarcode))
}

// ReadForCheckOutByID implements circulation.Storage.
func (c *Client) ReadForCheckOutByID(ctx context.Context, itemID, userID string) (circulation.CheckOutReads, error) {
	return c.readForCheckOut(ctx, query("itemId", itemID, "userId", userID))
}

// readForCheckOut is validation's read, the item and the patron named by
// the query q.
func (c *Client) readForCheckOut(ctx context.Context, q string) (circulation.CheckOutReads, error) {
	var v struct {
		User         *patronJSON       `json:"user"`
		Item         json.RawMessage   `json:"item"`
		MaterialType *materialTypeJSON `json:"materialType"`
		OpenLoan     json.RawMessage   `json:"openLoan"`
		QueueHead    *struct {
			ID          string `json:"id"`
			RequesterID string `json:"requesterId"`
			RequestType string `json:"requestType"`
		} `json:"requestQueueHead"`
		OpenRecall bool `json:"openRecall"`
		blocksJSON
		RulesSet      bool             `json:"circulationRulesSet"`
		Match         *policyMatchJSON `json:"loanPolicyMatch"`
		LoanPolicy    *loanPolicyJSON  `json:"loanPolicy"`
		OpenLoanCount int              `json:"openLoanCount"`
		ItemLimit     *struct {
			Limit          int    `json:"limit"`
			MaterialTypeID string `json:"materialTypeId"`
			LoanTypeID     string `json:"loanTypeId"`
			Reached        bool   `json:"reached"`
		} `json:"itemLimit"`
		LockSettings *struct {
			Entry *settingJSON `json:"entry"`
		} `json:"lockSettings"`
	}
	err := c.call(ctx, http.MethodGet, "/check-out-storage/validation"+q, nil, &v)
	if err != nil {
		return circulation.CheckOutReads{}, err
	}
	out := circulation.CheckOutReads{OpenLoan: v.OpenLoan != nil, RulesSet: v.RulesSet, OpenLoans: v.OpenLoanCount,
		OpenRecall: v.OpenRecall}
	if v.OpenLoan != nil {
		var l struct {
			ID           string `json:"id"`
			UserID       string `json:"userId"`
			DueDate      string `json:"dueDate"`
			RenewalCount int    `json:"renewalCount"`
		}
		if json.Unmarshal(v.OpenLoan, &l) == nil {
			out.OpenLoanOf = &circulation.OpenLoan{ID: l.ID, UserID: l.UserID, DueDate: parseTime(l.DueDate), RenewalCount: l.RenewalCount,
				Doc: v.OpenLoan}
		}
	}
	if ls := v.LockSettings; ls != nil {
		out.LockSetting = &circulation.SettingRead{}
		if ls.Entry != nil {
			out.LockSetting.Entry, out.LockSetting.Found = settingEntry(*ls.Entry), true
		}
	}
	if l := v.ItemLimit; l != nil {
		out.Limit = &circulation.ItemLimit{Limit: l.Limit, MaterialTypeID: l.MaterialTypeID, LoanTypeID: l.LoanTypeID, Reached: l.Reached}
	}
	if h := v.QueueHead; h != nil {
		out.QueueHead = &circulation.QueuedRequest{ID: h.ID, RequesterID: h.RequesterID, RequestType: h.RequestType}
	}
	out.AutomatedBlocks, out.ManualBlocks = v.blocks()
	if u := v.User; u != nil {
		out.Patron = u.patron()
	}
	if v.Item != nil {
		item, err := decodeItemOfType(v.Item, v.MaterialType)
		if err != nil {
			return circulation.CheckOutReads{}, err
		}
		out.Item = &item
	}
	if m := v.Match; m != nil {
		out.Match = circulation.PolicyMatch{LoanPolicyID: m.LoanPolicyID, PatronGroupMatch: m.Conditions.PatronGroupMatch,
			MaterialTypeMatch: m.Conditions.MaterialTypeMatch, LoanTypeMatch: m.Conditions.LoanTypeMatch}
	}
	if p := v.LoanPolicy; p != nil {
		out.Policy = p.policy()
	}
	return out, nil
}

type policyMatchJSON struct {
	LoanPolicyID string `json:"loanPolicyId"`
	Conditions   struct {
		PatronGroupMatch  bool `json:"patronGroupMatch"`
		MaterialTypeMatch bool `json:"materialTypeMatch"`
		LoanTypeMatch     bool `json:"loanTypeMatch"`
	} `json:"appliedRuleConditions"`
}

type loanPolicyJSON struct {
	ID          string `json:"id"`
	Name        string `json:"name"`
	Loanable    bool   `json:"loanable"`
	LoansPolicy struct {
		Period    periodJSON `json:"period"`
		ItemLimit int        `json:"itemLimit"`
	} `json:"loansPolicy"`
	Renewable      bool `json:"renewable"`
	RenewalsPolicy struct {
		Unlimited       bool       `json:"unlimited"`
		NumberAllowed   int        `json:"numberAllowed"`
		RenewFromID     string     `json:"renewFromId"`
		DifferentPeriod bool       `json:"differentPeriod"`
		Period          periodJSON `json:"period"`
	} `json:"renewalsPolicy"`
	RequestManagement struct {
		Holds struct {
			RenewItemsWithRequest      bool        `json:"renewItemsWithRequest"`
			AlternateRenewalLoanPeriod *periodJSON `json:"alternateRenewalLoanPeriod"`
		} `json:"holds"`
	} `json:"requestManagement"`
}

type periodJSON struct {
	Duration   int    `json:"duration"`
	IntervalID string `json:"intervalId"`
}

func (p periodJSON) period() circulation.Period {
	return circulation.Period{Duration: p.Duration, Interval: p.IntervalID}
}

// policy is the loan policy as the domain sees it: a renewal's period is
// the loan period unless the policy names a different one.
func (p *loanPolicyJSON) policy() circulation.LoanPolicy {
	r := p.RenewalsPolicy
	renewals := circulation.Renewals{Unlimited: r.Unlimited, NumberAllowed: r.NumberAllowed, From: r.RenewFromID,
		Period: p.LoansPolicy.Period.period()}
	if r.DifferentPeriod {
		renewals.Period = r.Period.period()
	}
	if alt := p.RequestManagement.Holds.AlternateRenewalLoanPeriod; alt != nil {
		renewals.HoldPeriod = alt.period()
	}
	return circulation.LoanPolicy{ID: p.ID, Name: p.Name, Loanable: p.Loanable, ItemLimit: p.LoansPolicy.ItemLimit,
		Period: p.LoansPolicy.Period.period(), Renewable: p.Renewable, Renewals: renewals,
		HoldsRenewable: p.RequestManagement.Holds.RenewItemsWithRequest}
}

// LoanPolicy implements circulation.Storage.
func (c *Client) LoanPolicy(ctx context.Context, id string) (circulation.LoanPolicy, error) {
	var p loanPolicyJSON
	if err := c.call(ctx, http.MethodGet, "/loan-policy-storage/loan-policies/"+url.PathEscape(id), nil, &p); err != nil {
		return circulation.LoanPolicy{}, err
	}
	return p.policy(), nil
}

// PatronIDByBarcode implements circulation.Storage.
func (c *Client) PatronIDByBarcode(ctx context.Context, barcode string) (string, bool, error) {
	if barcode == "" {
		return "", false, nil // no one's; asked, storage would answer anyone's
	}
	var page struct {
		Users []struct {
			ID string `json:"id"`
		} `json:"users"`
	}
	if err := c.call(ctx, http.MethodGet, "/users"+query("barcode", barcode, "limit", "1"), nil, &page); err != nil {
		return "", false, err
	}
	if len(page.Users) == 0 {
		return "", false, nil
	}
	return page.Users[0].ID, true, nil
}

// VerifyPin implements circulation.Storage.
func (c *Client) VerifyPin(ctx context.Context, patronID, pin string) error {
	// Storage counts wrong PINs by the client's address too, which it
	// believes of circulation's module token alone.
	var headers []string
	if a := circulation.OkapiFrom(ctx).ClientAddress; a != "" {
		headers = []string{schemas.HeaderForwardedFor, a}
	}
	return c.call(ctx, http.MethodPost, "/patron-pin/verify", map[string]string{"id": patronID, "pin": pin}, nil, headers...)
}

// PatronSummary implements circulation.Storage.
func (c *Client) PatronSummary(ctx context.Context, barcode string) (circulation.PatronRecords, error) {
	var v struct {
		User          *patronJSON `json:"user"`
		OpenLoanCount int         `json:"openLoanCount"`
		OverdueCount  int         `json:"overdueCount"`
		OpenLoans     []struct {
			ItemBarcode string `json:"itemBarcode"`
			Title       string `json:"title"`
			DueDate     string `json:"dueDate"`
			Overdue     bool   `json:"overdue"`
		} `json:"openLoans"`
		ItemLimits []struct {
			ItemLimit         int  `json:"itemLimit"`
			OpenLoans         int  `json:"openLoans"`
			Reached           bool `json:"reached"`
			PatronGroupMatch  bool `json:"patronGroupMatch"`
			MaterialTypeMatch bool `json:"materialTypeMatch"`
			LoanTypeMatch     bool `json:"loanTypeMatch"`
		} `json:"itemLimits"`
		Unlimited      bool   `json:"unlimited"`
		FeeFineBalance string `json:"feeFineBalance"`
		FeeFineCount   int    `json:"feeFineCount"`
		FeesFines      []struct {
			ID          string `json:"id"`
			FeeFineType string `json:"feeFineType"`
			Amount      string `json:"amount"`
			Remaining   string `json:"remaining"`
			Title       string `json:"title"`
			ItemBarcode string `json:"itemBarcode"`
			DateCreated string `json:"dateCreated"`
		} `json:"feesFines"`
		blocksJSON
	}
	if err := c.call(ctx, http.MethodGet, "/check-out-storage/patron"+query("userBarcode", barcode), nil, &v); err != nil {
		return circulation.PatronRecords{}, err
	}
	out := circulation.PatronRecords{OpenLoanCount: v.OpenLoanCount, OverdueCount: v.OverdueCount, Unlimited: v.Unlimited}
	for _, l := range v.ItemLimits {
		out.ItemLimits = append(out.ItemLimits, circulation.LimitState{Limit: l.ItemLimit, OpenLoans: l.OpenLoans, Reached: l.Reached,
			Match: circulation.PolicyMatch{PatronGroupMatch: l.PatronGroupMatch, MaterialTypeMatch: l.MaterialTypeMatch, LoanTypeMatch: l.LoanTypeMatch}})
	}
	if u := v.User; u != nil {
		out.Patron = u.patron()
	}
	for _, l := range v.OpenLoans {
		out.OpenLoans = append(out.OpenLoans, circulation.SummaryLoan{ItemBarcode: l.ItemBarcode, Title: l.Title, DueDate: parseTime(l.DueDate),
			Overdue: l.Overdue})
	}
	out.AutomatedBlocks, out.ManualBlocks = v.blocks()
	out.FeeFineBalance, out.FeeFineCount = v.FeeFineBalance, v.FeeFineCount
	for _, f := range v.FeesFines {
		out.FeesFines = append(out.FeesFines, circulation.SummaryFeeFine{ID: f.ID, FeeFineType: f.FeeFineType, Amount: f.Amount,
			Remaining: f.Remaining, Title: f.Title, ItemBarcode: f.ItemBarcode, DateCreated: parseTime(f.DateCreated)})
	}
	return out, nil
}

// ItemByBarcode implements circulation.Storage.
func (c *Client) ItemByBarcode(ctx context.Context, barcode string) (circulation.Item, error) {
	var page struct {
		Items []json.RawMessage `json:"items"`
	}
	if err := c.call(ctx, http.MethodGet, "/item-storage/items"+query("barcode", barcode, "limit", "1"), nil, &page); err != nil {
		return circulation.Item{}, err
	}
	if len(page.Items) == 0 {
		return circulation.Item{}, errs.Errorf(errs.KindNotFound, schemas.CodeNotFound, "no item with barcode %s", barcode)
	}
	return decodeItem(page.Items[0])
}

func decodeItem(doc json.RawMessage) (circulation.Item, error) {
	var i itemJSON
	if err := json.Unmarshal(doc, &i); err != nil {
		return circulation.Item{}, errs.Errorf(errs.KindInternal, schemas.CodeInternal, "unreadable item").Because(err)
	}
	return circulation.Item{ID: i.ID, Barcode: i.Barcode, Title: i.Title, Status: i.Status.Name,
		MaterialTypeID: i.MaterialTypeID, PermanentLoanTypeID: i.PermanentLoanTypeID, TemporaryLoanTypeID: i.TemporaryLoanTypeID,
		Version: i.Version, InTransitDestinationServicePointID: i.InTransitDestinationServicePointID, Doc: doc}, nil
}

// materialTypeJSON is the material type storage reads with an item.
type materialTypeJSON struct {
	Name string `json:"name"`
}

// decodeItemOfType decodes an item storage read with its material type
// (nil when it read none), the type's name in the item.
func decodeItemOfType(doc json.RawMessage, mt *materialTypeJSON) (circulation.Item, error) {
	item, err := decodeItem(doc)
	if err == nil && mt != nil {
		item.MaterialTypeName = mt.Name
	}
	return item, err
}

// OpenLoanForItem implements circulation.Storage.
func (c *Client) OpenLoanForItem(ctx context.Context, itemID string) (circulation.Loan, bool, error) {
	var page struct {
		Loans []json.RawMessage `json:"loans"`
	}
	if err := c.call(ctx, http.MethodGet, "/loan-storage/loans"+query("itemId", itemID, "status", schemas.LoanOpen, "limit", "1"), nil, &page); err != nil {
		return circulation.Loan{}, false, err
	}
	if len(page.Loans) == 0 {
		return circulation.Loan{}, false, nil
	}
	l, err := decodeLoan(page.Loans[0])
	return l, err == nil, err
}

func decodeLoan(doc json.RawMessage) (circulation.Loan, error) {
	var l loanJSON
	if err := json.Unmarshal(doc, &l); err != nil {
		return circulation.Loan{}, errs.Errorf(errs.KindInternal, schemas.CodeInternal, "unreadable loan").Because(err)
	}
	return circulation.Loan{ID: l.ID, UserID: l.UserID, ItemID: l.ItemID, LoanDate: parseTime(l.LoanDate), DueDate: parseTime(l.DueDate),
		ReturnDate: parseTime(l.ReturnDate), Action: l.Action, ActionComment: l.ActionComment, Status: l.Status.Name, LoanPolicyID: l.LoanPolicyID,
		CheckoutServicePointID: l.CheckoutServicePointID, CheckinServicePointID: l.CheckinServicePointID,
		RenewalCount: l.RenewalCount, ClaimedReturnedDate: parseTime(l.ClaimedReturnedDate), DeclaredLostDate: parseTime(l.DeclaredLostDate),
		Offline: fromOfflineJSON(l.Offline), Version: l.Version, Doc: doc}, nil
}

func fromOfflineJSON(o *offlineJSON) *circulation.OfflineRecord {
	if o == nil {
		return nil
	}
	return &circulation.OfflineRecord{TransactionDate: parseTime(o.TransactionDate), RecordedBy: o.RecordedBy, Kiosk: o.Kiosk, BrokenRules: o.BrokenRules}
}

// Request implements circulation.Storage.
func (c *Client) Request(ctx context.Context, id string) (json.RawMessage, error) {
	var doc json.RawMessage
	err := c.call(ctx, http.MethodGet, "/request-storage/requests/"+url.PathEscape(id), nil, &doc)
	return doc, err
}

// Requests implements circulation.Storage.
func (c *Client) Requests(ctx context.Context, f circulation.RequestFilter) (json.RawMessage, error) {
	var doc json.RawMessage
	err := c.call(ctx, http.MethodGet, "/request-storage/requests"+query("itemId", f.ItemID, "requesterId", f.RequesterID,
		"status", f.Status, "query", f.Query, "offset", fmt.Sprint(f.Offset), "limit", fmt.Sprint(f.Limit)), nil, &doc)
	return doc, err
}

type settingJSON struct {
	ID       string          `json:"id,omitempty"`
	Scope    string          `json:"scope"`
	Key      string          `json:"key"`
	Value    json.RawMessage `json:"value"`
	Version  int             `json:"_version,omitempty"`
	Metadata *struct {
		UpdatedDate     string `json:"updatedDate"`
		UpdatedByUserID string `json:"updatedByUserId"`
	} `json:"metadata,omitempty"`
}

func (c *Client) findSetting(ctx context.Context, scope, key string) (settingJSON, bool, error) {
	var page struct {
		Items []settingJSON `json:"items"`
	}
	if err := c.call(ctx, http.MethodGet, "/settings/entries"+query("scope", scope, "key", key, "limit", "1"), nil, &page); err != nil {
		return settingJSON{}, false, err
	}
	if len(page.Items) == 0 {
		return settingJSON{}, false, nil
	}
	return page.Items[0], true, nil
}

// Setting implements circulation.Storage.
func (c *Client) Setting(ctx context.Context, scope, key string) (circulation.SettingEntry, bool, error) {
	s, found, err := c.findSetting(ctx, scope, key)
	return settingEntry(s), found, err
}

// settingEntry is a settings entry as circulation keeps it.
func settingEntry(s settingJSON) circulation.SettingEntry {
	e := circulation.SettingEntry{ID: s.ID, Value: s.Value, Version: s.Version}
	if s.Metadata != nil {
		e.UpdatedBy, e.UpdatedDate = s.Metadata.UpdatedByUserID, s.Metadata.UpdatedDate
	}
	return e
}

// PutSetting implements circulation.Storage: create the entry, or replace
// prev naming the _version it was read at, so that a write in between is a
// conflict rather than lost.
func (c *Client) PutSetting(ctx context.Context, scope, key string, value json.RawMessage, prev *circulation.SettingEntry) error {
	entry := settingJSON{Scope: scope, Key: key, Value: value} // storage sets metadata
	if prev == nil {
		return c.call(ctx, http.MethodPost, "/settings/entries", entry, nil)
	}
	entry.ID, entry.Version = prev.ID, prev.Version
	err := c.call(ctx, http.MethodPut, "/settings/entries/"+url.PathEscape(prev.ID), entry, nil)
	if errs.IsKind(err, errs.KindNotFound) {
		// Deleted since it was read: as much a change as a new version.
		return errs.Errorf(errs.KindConflict, schemas.CodeConflict, "The setting was deleted meanwhile").Because(err)
	}
	return err
}

// withFields returns doc with the given top-level fields replaced.
// withoutFields is doc without the named fields.
func withoutFields(doc json.RawMessage, names ...string) (json.RawMessage, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(doc, &m); err != nil {
		return nil, errs.Errorf(errs.KindInternal, schemas.CodeInternal, "unreadable record").Because(err)
	}
	for _, n := range names {
		delete(m, n)
	}
	return json.Marshal(m)
}

func withFields(doc json.RawMessage, fields map[string]any) (json.RawMessage, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(doc, &m); err != nil {
		return nil, errs.Errorf(errs.KindInternal, schemas.CodeInternal, "unreadable record").Because(err)
	}
	for k, v := range fields {
		b, err := json.Marshal(v)
		if err != nil {
			return nil, err
		}
		m[k] = b
	}
	return json.Marshal(m)
}

// AllowedServicePoints implements circulation.Storage.
func (c *Client) AllowedServicePoints(ctx context.Context, requesterID, itemID string, ignoreItemStatus bool) (json.RawMessage, error) {
	var doc json.RawMessage
	err := c.call(ctx, http.MethodGet, "/circulation-rules-storage/allowed-service-points"+query("requesterId", requesterID, "itemId", itemID,
		"ignoreItemStatus", strconv.FormatBool(ignoreItemStatus)), nil, &doc)
	return doc, err
}
