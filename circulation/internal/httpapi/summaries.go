package httpapi

import (
	"context"
	"encoding/json"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sync/errgroup"

	"github.com/checkoutlock/circulation"
	"github.com/checkoutlock/schemas"
)

// FOLIO's mod-circulation answers its loans and requests with summaries
// of the records they name, which its clients display: a loan's item,
// borrower, loan policy, patron group at check-out and service points; a
// request's item, requester, pickup service point and the item's loan.
// Here they are computed the same way, from what storage holds, with one
// read of each kind of record for a whole page. A record that no longer
// exists gives no summary, as in FOLIO. What needs data this project does
// not keep (instances, holdings, locations, fees) is not given
// (docs/known-limits.md).

// requestSummaries are a request's summaries, by the names FOLIO gives
// them: computed here and never stored. A request sent back with them has
// them removed before it is written (withoutSummaries).
var requestSummaries = []string{"item", "requester", "proxy", "pickupServicePoint", "loan"}

// summaryBatch bounds the ids of one read of related records (each an
// "id==(… or …)" query), so that a page of loans makes a bounded URL.
const summaryBatch = 50

// summaryReads bounds the reads of one kind of related record a page's
// summaries have in flight at once: a page of thousands of loans (FOLIO's
// clients ask for every match) makes tens of reads of each kind.
const summaryReads = 4

// document is a stored record's members, as stored.
type document map[string]json.RawMessage

// str is the string member name of d, "" when absent or not a string.
func (d document) str(name string) string {
	var v string
	_ = json.Unmarshal(d[name], &v)
	return v
}

// set sets member name of d to v, when v is not nil.
func (d document) set(name string, v any) {
	if v == nil {
		return
	}
	if b, err := json.Marshal(v); err == nil {
		d[name] = b
	}
}

// withoutSummaries is doc, a record FOLIO's client read and sends back,
// without the summaries circulation computed for it (names): they are
// never stored. A doc that is not a JSON object is returned as it is, for
// the schema's refusal.
func withoutSummaries(doc []byte, names []string) []byte {
	var d document
	if json.Unmarshal(doc, &d) != nil || d == nil {
		return doc
	}
	n := len(d)
	for _, name := range names {
		delete(d, name)
	}
	if len(d) == n {
		return doc
	}
	out, err := json.Marshal(d)
	if err != nil {
		return doc
	}
	return out
}

// related reads the records of path (their collection's member plural)
// whose ids are ids, by id (lower case).
func (s *Server) related(ctx context.Context, path, plural string, ids []string) (map[string]document, error) {
	docs, err := s.recordsWhere(ctx, path, plural, "id", "", ids)
	if err != nil {
		return nil, err
	}
	out := make(map[string]document, len(docs))
	for _, d := range docs {
		out[strings.ToLower(d.str("id"))] = d
	}
	return out, nil
}

// recordsWhere reads the records of path (their collection's member
// plural) whose member field is one of values and that meet the CQL
// condition and (when not ""), in reads of summaryBatch values each.
func (s *Server) recordsWhere(ctx context.Context, path, plural, field, and string, values []string) ([]document, error) {
	// A page may hold thousands of records (FOLIO's clients ask with
	// limit 2147483647 for every match): a set, not a search, finds the
	// ones seen.
	var valid []string
	seen := make(map[string]bool, len(values))
	for _, v := range values {
		if v = strings.ToLower(v); !seen[v] && s.Schemas().ValidUUID(v) {
			seen[v] = true
			valid = append(valid, v)
		}
	}
	batches := slices.Collect(slices.Chunk(valid, summaryBatch))
	read := make([][]document, len(batches))
	g, ctx := errgroup.WithContext(ctx)
	g.SetLimit(summaryReads)
	for i, batch := range batches {
		g.Go(func() error {
			terms := make([]string, len(batch))
			for j, v := range batch {
				terms[j] = cqlTerm(v)
			}
			q := field + "==(" + strings.Join(terms, " or ") + ")"
			if and != "" {
				q += " and " + and
			}
			var page map[string]json.RawMessage
			if err := s.svc.Console.GetJSON(ctx, path+"?"+url.Values{"query": {q}, "limit": {strconv.Itoa(len(batch))}}.Encode(), &page); err != nil {
				return err
			}
			return json.Unmarshal(page[plural], &read[i])
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	return slices.Concat(read...), nil
}

// idsOf is member name of each of docs.
func idsOf(docs []document, name string) []string {
	ids := make([]string, 0, len(docs))
	for _, d := range docs {
		if id := d.str(name); id != "" {
			ids = append(ids, id)
		}
	}
	return ids
}

// itemOf is an item record as circulation reads it, for its summary.
func itemOf(d document) circulation.Item {
	var v struct {
		ID, Barcode, Title, MaterialTypeID, PermanentLoanTypeID, TemporaryLoanTypeID string
		Status                                                                       statusJSON
		InTransitDestinationServicePointID                                           string
	}
	b, _ := json.Marshal(d)
	_ = json.Unmarshal(b, &v)
	return circulation.Item{ID: v.ID, Barcode: v.Barcode, Title: v.Title, Status: v.Status.Name, MaterialTypeID: v.MaterialTypeID,
		PermanentLoanTypeID: v.PermanentLoanTypeID, TemporaryLoanTypeID: v.TemporaryLoanTypeID,
		InTransitDestinationServicePointID: v.InTransitDestinationServicePointID}
}

// userOf is a user record's name, barcode and group.
type userOf struct {
	ID            string     `json:"id"`
	Barcode       string     `json:"barcode"`
	PatronGroupID string     `json:"patronGroup"`
	Personal      personJSON `json:"personal"`
}

func decodeUser(d document) userOf {
	var u userOf
	b, _ := json.Marshal(d)
	_ = json.Unmarshal(b, &u)
	return u
}

// servicePointSummary is a service point as FOLIO's loans and requests
// summarise it.
func servicePointSummary(d document) any {
	if d == nil {
		return nil
	}
	var v struct {
		Name                 string           `json:"name"`
		Code                 string           `json:"code"`
		DiscoveryDisplayName string           `json:"discoveryDisplayName"`
		Description          string           `json:"description,omitempty"`
		ShelvingLagTime      *json.RawMessage `json:"shelvingLagTime,omitempty"`
		PickupLocation       bool             `json:"pickupLocation"`
	}
	b, _ := json.Marshal(d)
	_ = json.Unmarshal(b, &v)
	return v
}

// summarizeLoans adds to each of loans (stored documents) the summaries
// FOLIO's loans carry: item (as a check-out answers it), borrower,
// loanPolicy, patronGroupAtCheckout (for patronGroupIdAtCheckout, which
// it replaces, as FOLIO's does), checkoutServicePoint and
// checkinServicePoint.
func (s *Server) summarizeLoans(ctx context.Context, loans []document) error {
	if len(loans) == 0 {
		return nil
	}
	items, err := s.related(ctx, "/item-storage/items", "items", idsOf(loans, "itemId"))
	if err != nil {
		return err
	}
	users, err := s.related(ctx, "/users", "users", idsOf(loans, "userId"))
	if err != nil {
		return err
	}
	policies, err := s.related(ctx, "/loan-policy-storage/loan-policies", "loanPolicies", idsOf(loans, "loanPolicyId"))
	if err != nil {
		return err
	}
	groups, err := s.related(ctx, "/groups", "usergroups", idsOf(loans, "patronGroupIdAtCheckout"))
	if err != nil {
		return err
	}
	points, err := s.related(ctx, "/service-points", "servicepoints",
		slices.Concat(idsOf(loans, "checkoutServicePointId"), idsOf(loans, "checkinServicePointId")))
	if err != nil {
		return err
	}
	for _, l := range loans {
		if it, ok := items[strings.ToLower(l.str("itemId"))]; ok {
			l.set("item", itemSummary(itemOf(it)))
		}
		if u, ok := users[strings.ToLower(l.str("userId"))]; ok {
			v := decodeUser(u)
			l.set("borrower", borrowerJSON{ID: v.ID, Barcode: v.Barcode, FirstName: v.Personal.FirstName,
				MiddleName: v.Personal.MiddleName, LastName: v.Personal.LastName, PatronGroup: v.PatronGroupID})
		}
		if p, ok := policies[strings.ToLower(l.str("loanPolicyId"))]; ok {
			l.set("loanPolicy", loanPolicyJSON{Name: p.str("name")})
		}
		if g, ok := groups[strings.ToLower(l.str("patronGroupIdAtCheckout"))]; ok {
			l.set("patronGroupAtCheckout", struct {
				ID   string `json:"id"`
				Name string `json:"name"`
			}{g.str("id"), g.str("group")})
		}
		delete(l, "patronGroupIdAtCheckout")
		l.set("checkoutServicePoint", servicePointSummary(points[strings.ToLower(l.str("checkoutServicePointId"))]))
		l.set("checkinServicePoint", servicePointSummary(points[strings.ToLower(l.str("checkinServicePointId"))]))
	}
	return nil
}

// summarizeRequests adds to each of requests (stored documents) the
// summaries FOLIO's requests carry: item (barcode, title, status), the
// requester (names, barcode and patron group), the pickup service point,
// and the item's open loan (its due date).
func (s *Server) summarizeRequests(ctx context.Context, requests []document) error {
	if len(requests) == 0 {
		return nil
	}
	items, err := s.related(ctx, "/item-storage/items", "items", idsOf(requests, "itemId"))
	if err != nil {
		return err
	}
	users, err := s.related(ctx, "/users", "users", idsOf(requests, "requesterId"))
	if err != nil {
		return err
	}
	var groupIDs []string
	for _, u := range users {
		groupIDs = append(groupIDs, decodeUser(u).PatronGroupID)
	}
	groups, err := s.related(ctx, "/groups", "usergroups", groupIDs)
	if err != nil {
		return err
	}
	points, err := s.related(ctx, "/service-points", "servicepoints", idsOf(requests, "pickupServicePointId"))
	if err != nil {
		return err
	}
	dues, err := s.openLoanDueDates(ctx, idsOf(requests, "itemId"))
	if err != nil {
		return err
	}
	for _, r := range requests {
		itemID := strings.ToLower(r.str("itemId"))
		if it, ok := items[itemID]; ok {
			v := itemOf(it)
			r.set("item", struct {
				Barcode    string `json:"barcode,omitempty"`
				Title      string `json:"title"`
				Status     string `json:"status"`
				LoanTypeID string `json:"loanTypeId,omitempty"`
			}{v.Barcode, v.Title, v.Status, v.LoanTypeID()})
		}
		if u, ok := users[strings.ToLower(r.str("requesterId"))]; ok {
			v := decodeUser(u)
			type group struct {
				ID    string `json:"id"`
				Group string `json:"group"`
				Desc  string `json:"desc,omitempty"`
			}
			summary := struct {
				LastName      string `json:"lastName"`
				FirstName     string `json:"firstName,omitempty"`
				MiddleName    string `json:"middleName,omitempty"`
				Barcode       string `json:"barcode,omitempty"`
				PatronGroup   *group `json:"patronGroup,omitempty"`
				PatronGroupID string `json:"patronGroupId,omitempty"`
			}{LastName: v.Personal.LastName, FirstName: v.Personal.FirstName, MiddleName: v.Personal.MiddleName, Barcode: v.Barcode,
				PatronGroupID: v.PatronGroupID}
			if g, ok := groups[strings.ToLower(v.PatronGroupID)]; ok {
				summary.PatronGroup = &group{ID: g.str("id"), Group: g.str("group"), Desc: g.str("desc")}
			}
			r.set("requester", summary)
		}
		r.set("pickupServicePoint", servicePointSummary(points[strings.ToLower(r.str("pickupServicePointId"))]))
		if due, ok := dues[itemID]; ok {
			r.set("loan", struct {
				DueDate string `json:"dueDate"`
			}{due})
		}
	}
	return nil
}

// openLoanDueDates is the due date of each of items' open loans, by item
// id (lower case).
func (s *Server) openLoanDueDates(ctx context.Context, items []string) (map[string]string, error) {
	loans, err := s.recordsWhere(ctx, "/loan-storage/loans", "loans", "itemId", `status.name==`+cqlTerm(schemas.LoanOpen), items)
	if err != nil {
		return nil, err
	}
	out := make(map[string]string, len(loans))
	for _, l := range loans {
		out[strings.ToLower(l.str("itemId"))] = l.str("dueDate")
	}
	return out, nil
}

// summarizedPage is storage's page of records (plural), each with its
// summaries (summarize).
func (s *Server) summarizedPage(ctx context.Context, page json.RawMessage, plural string,
	summarize func(context.Context, []document) error) (any, error) {
	var p map[string]json.RawMessage
	if err := json.Unmarshal(page, &p); err != nil {
		return nil, err
	}
	var docs []document
	if err := json.Unmarshal(p[plural], &docs); err != nil {
		return nil, err
	}
	if docs == nil {
		docs = []document{}
	}
	if err := summarize(ctx, docs); err != nil {
		return nil, err
	}
	out := map[string]any{}
	for k, v := range p {
		out[k] = v
	}
	out[plural] = docs
	return out, nil
}

// summarizedOne is one stored record with its summaries.
func (s *Server) summarizedOne(ctx context.Context, doc json.RawMessage, summarize func(context.Context, []document) error) (document, error) {
	var d document
	if err := json.Unmarshal(doc, &d); err != nil {
		return nil, err
	}
	if err := summarize(ctx, []document{d}); err != nil {
		return nil, err
	}
	return d, nil
}
