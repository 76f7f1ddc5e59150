package httpapi

import (
	"cmp"
	"context"
	"embed"
	"encoding/csv"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
	_ "time/tzdata" // a history reader's zone, on a machine without zoneinfo
	"unicode"

	"github.com/checkoutlock/schemas"

	"github.com/labstack/echo/v4"

	"github.com/checkoutlock/circulation"
)

// Console is what the lock console reads and does in storage, as
// circulation, with the console handlers' module permissions.
type Console interface {
	// GetJSON reads a storage resource into out.
	GetJSON(ctx context.Context, path string, out any) error
	// ReleaseLock releases a lock by id.
	ReleaseLock(ctx context.Context, lockID string) error
}

//go:embed ui
var uiFiles embed.FS

// uiPages are the embedded pages, at their root; taken once, at start-up.
var uiPages = mustSub(uiFiles, "ui")

// mustSub is fsys's subtree dir. It panics if dir is not a valid path,
// which for an embedded directory is a programming error, found at
// start-up, not a request's.
func mustSub(fsys fs.FS, dir string) fs.FS {
	sub, err := fs.Sub(fsys, dir)
	if err != nil {
		panic(fmt.Sprintf("httpapi: embedded %s: %v", dir, err))
	}
	return sub
}

// pages serves the librarian's settings page and the operator's lock
// console: static files, embedded, that call the API with the tenant and,
// in jwt mode, a token the user gives them.
func (s *Server) pages() {
	files := uiPages
	serve := func(name string) echo.HandlerFunc {
		return func(c echo.Context) error {
			body, made := renderedPages[name]
			if !made {
				var err error
				if body, err = fs.ReadFile(files, name); err != nil || notServed(name) {
					return echo.ErrNotFound
				}
			}
			h := c.Response().Header()
			h.Set("Content-Security-Policy", "default-src 'self'; frame-ancestors 'none'")
			h.Set("X-Content-Type-Options", "nosniff")
			h.Set("Referrer-Policy", "no-referrer")
			h.Set("Cache-Control", "no-cache")
			return c.Blob(http.StatusOK, contentType(name), body)
		}
	}
	s.Get("/", serve("index.html"))
	s.Get("/ui/:file", func(c echo.Context) error { return serve(c.Param("file"))(c) })
}

func contentType(name string) string {
	switch {
	case len(name) > 5 && name[len(name)-5:] == ".html":
		return "text/html; charset=utf-8"
	case len(name) > 3 && name[len(name)-3:] == ".js":
		return "text/javascript; charset=utf-8"
	case len(name) > 4 && name[len(name)-4:] == ".css":
		return "text/css; charset=utf-8"
	}
	return "application/octet-stream"
}

// consoleLock is a live lock as the console shows it: the lock, with the
// patron's barcode and name.
type consoleLock struct {
	ID           string            `json:"id"`
	UserID       string            `json:"userId"`
	CreationDate string            `json:"creationDate"`
	ExpiresAt    string            `json:"expiresAt"`
	TTLMs        int64             `json:"ttlMs"`
	Holder       map[string]string `json:"holder,omitempty"`
	Patron       *consolePatron    `json:"patron,omitempty"`
	// PatronText is the patron as the page shows them (patronWords);
	// ServicePointName names the holder's service point; HeldBy who held
	// it (heldBy, notSaid when nobody said); HolderName the account that
	// took it.
	PatronText       string `json:"patronText"`
	ServicePointName string `json:"servicePointName,omitempty"`
	HeldBy           string `json:"heldBy,omitempty"`
	HolderName       string `json:"holderName,omitempty"`
	// TraceURL is the trace of the lock's acquisition in the operators'
	// trace viewer (TRACE_URL), when storage traced it.
	TraceURL string `json:"traceUrl,omitempty"`
}

type consolePatron struct {
	Barcode string `json:"barcode,omitempty"`
	Name    string `json:"name,omitempty"`
}

// patronWords is a patron as the console shows them, in its live table,
// its history and its CSV: "Name (barcode)", either alone, or their id
// when neither is known.
func patronWords(p *consolePatron, userID string) string {
	switch {
	case p == nil || p.Name == "" && p.Barcode == "":
		return userID
	case p.Name != "" && p.Barcode != "":
		return p.Name + " (" + p.Barcode + ")"
	}
	return p.Name + p.Barcode
}

// notSaid is who held a lock whose acquisition did not say.
const notSaid = "(not said)"

// consoleLimit bounds the locks and events one console answer lists.
const consoleLimit = 100

// listConsoleLocks lists the tenant's live locks with their patrons.
func (s *Server) listConsoleLocks(c echo.Context) error {
	var page struct {
		CheckoutLocks []consoleLock `json:"checkoutLocks"`
		TotalRecords  int           `json:"totalRecords"`
	}
	ctx := c.Request().Context()
	if err := s.svc.Console.GetJSON(ctx, "/check-out-lock-storage?limit="+strconv.Itoa(consoleLimit), &page); err != nil {
		return err
	}
	patrons, names := s.patrons(ctx), s.names(ctx)
	for i := range page.CheckoutLocks {
		l := &page.CheckoutLocks[i]
		l.Patron = patrons(l.UserID)
		l.PatronText = patronWords(l.Patron, l.UserID)
		l.ServicePointName = names.servicePoint(l.Holder["servicePointId"])
		l.HeldBy, l.HolderName = cmp.Or(heldBy(names, l.Holder), notSaid), names.person(l.Holder["acquiredBy"])
		l.TraceURL = s.traceURL(l.Holder)
	}
	return c.JSON(http.StatusOK, page)
}

// consoleEvent is a lock history event as the console shows it: the
// event, with the patron's barcode and name, who acted by name, the
// holder's service point by name, and links to the traces.
type consoleEvent struct {
	ID         int64             `json:"id"`
	Type       string            `json:"type"`
	OccurredAt string            `json:"occurredAt"`
	UserID     string            `json:"userId"`
	LockID     string            `json:"lockId,omitempty"`
	Holder     map[string]string `json:"holder,omitempty"`
	By         map[string]string `json:"by,omitempty"`
	WaitedMs   int               `json:"waitedMs,omitempty"`
	// LoanID and BrokenRules: a loan lent offline and the rules it broke,
	// or a loan a check-in dated before it left open; What says them in
	// words ("lent offline past the item limit").
	LoanID      string         `json:"loanId,omitempty"`
	BrokenRules []string       `json:"brokenRules,omitempty"`
	What        string         `json:"what,omitempty"`
	Patron      *consolePatron `json:"patron,omitempty"`
	// ByName names the person who released the lock, or the account
	// that waited, when someone did; HolderName the account that held
	// it; ServicePointName the holder's service point; HeldBy who held
	// it as the console and its CSV say (heldBy).
	ByName           string `json:"byName,omitempty"`
	HolderName       string `json:"holderName,omitempty"`
	ServicePointName string `json:"servicePointName,omitempty"`
	HeldBy           string `json:"heldBy,omitempty"`
	// The traces of the holder's acquisition and of the acquisition (a
	// waiter's) that caused the event.
	HolderTraceURL string `json:"holderTraceUrl,omitempty"`
	ByTraceURL     string `json:"byTraceUrl,omitempty"`
	// Row is the line as the console's page and its CSV both show it.
	Row historyRow `json:"row"`
}

// historyRow is a line of the lock history as a person reads it, on the
// console's page and in its CSV alike, one member a column
// (HistoryColumns): when (in the reader's time zone), what happened (in
// words, with how long a check-out waited), the patron by name and
// barcode, who held the lock with the item and the service point, and
// who acted.
type historyRow struct {
	When   string `json:"when"`
	What   string `json:"what"`
	Patron string `json:"patron"`
	Holder string `json:"holder"`
	By     string `json:"by"`
}

// HistoryColumns are the history's columns, as the page heads them and
// the CSV's first five do.
var HistoryColumns = []string{"When", "What", "Patron", "Holder", "By"}

// cells is r's cells, in HistoryColumns' order.
func (r historyRow) cells() []string { return []string{r.When, r.What, r.Patron, r.Holder, r.By} }

// HistoryKinds are the kinds of the lock history's lines, each in the
// console's words, in the order its filter offers them.
var HistoryKinds = []struct{ Type, Words string }{
	{"expired", "expired while held"},
	{"taken_over", "expired and taken over"},
	{"released_by_other", "released by someone else"},
	{"waiter_gave_up", "a waiting check-out gave up"},
	{"lent_offline", "lent offline past a rule"},
	{schemas.HistoryReturnedBeforeLoan, "returned while it was already back"},
}

// historyWhen is how a line's time reads: in the reader's zone, to the
// second, with the zone's name.
const historyWhen = "2006-01-02 15:04:05 MST"

// row is e as a person reads it (historyRow), its time in zone.
func (e *consoleEvent) row(zone *time.Location) historyRow {
	r := historyRow{When: e.OccurredAt, What: e.What, Patron: patronWords(e.Patron, e.UserID)}
	if t, err := schemas.ParseDateTime(e.OccurredAt); err == nil {
		r.When = t.In(zone).Format(historyWhen)
	}
	if r.What == "" {
		r.What = e.Type
		for _, k := range HistoryKinds {
			if k.Type == e.Type {
				r.What = k.Words
			}
		}
	}
	if e.WaitedMs > 0 {
		r.What += " after " + schemas.DurationWords(e.WaitedMs)
	}
	held := cmp.Or(e.HeldBy, notSaid)
	r.Holder = strings.Join(slices.DeleteFunc([]string{held, e.Holder["itemBarcode"], e.ServicePointName}, func(s string) bool { return s == "" }), " · ")
	if len(e.By) > 0 {
		r.By = cmp.Or(e.ByName, e.By["acquiredBy"], e.By["instance"])
	}
	return r
}

// historyZone is the time zone a history reader asked for (tz: an IANA
// name, as a browser gives it), UTC when none.
func historyZone(c echo.Context) (*time.Location, error) {
	name := c.QueryParam("tz")
	if name == "" {
		return time.UTC, nil
	}
	if len(name) > 64 || strings.HasPrefix(name, "/") || strings.Contains(name, "..") {
		return nil, invalidParam("tz", name, "must be a time zone such as Europe/Berlin")
	}
	zone, err := time.LoadLocation(name)
	if err != nil {
		return nil, invalidParam("tz", name, "must be a time zone such as Europe/Berlin")
	}
	return zone, nil
}

// historyPage is a page of the console's history and how many events
// match its filters.
type historyPage struct {
	Events       []consoleEvent `json:"events"`
	TotalRecords int            `json:"totalRecords"`
}

// The console's history: at most historyPageLimit events a page (50 when
// the page does not say), and at most historyExportLimit in an export.
const (
	historyPageLimit   = 100
	historyExportLimit = 10000
)

// lockHistory is the console's history, newest first: the events that
// match its filters (historyFilters), a page of them.
func (s *Server) lockHistory(c echo.Context) error {
	q, none, err := s.historyFilters(c)
	if err != nil {
		return err
	}
	zone, err := historyZone(c)
	if err != nil {
		return err
	}
	offset, err := intParam(c, "offset", 0, 0, 1<<20)
	if err != nil {
		return err
	}
	limit, err := intParam(c, "limit", 50, 1, historyPageLimit)
	if err != nil {
		return err
	}
	page := historyPage{Events: []consoleEvent{}}
	if !none {
		if page, err = s.historyEvents(c.Request().Context(), q, zone, offset, limit); err != nil {
			return err
		}
	}
	return c.JSON(http.StatusOK, page)
}

// lockHistoryCSV is the console's history, the events that match its
// filters (at most historyExportLimit, newest first), as CSV: one row an
// event, first the columns the console shows, as it shows them
// (historyRow, its times in the zone tz names), then the ids behind them.
func (s *Server) lockHistoryCSV(c echo.Context) error {
	q, none, err := s.historyFilters(c)
	if err != nil {
		return err
	}
	zone, err := historyZone(c)
	if err != nil {
		return err
	}
	var events []consoleEvent
	total := 0
	for !none {
		page, err := s.historyEvents(c.Request().Context(), q, zone, len(events), min(1000, historyExportLimit-len(events)))
		if err != nil {
			return err
		}
		events, total = append(events, page.Events...), page.TotalRecords
		if len(page.Events) == 0 || len(events) >= min(total, historyExportLimit) {
			break
		}
	}
	rows := [][]string{append(slices.Clone(HistoryColumns), "Kind", "Patron's user id", "Lock id", "Loan id", "Holder's trace id", "By's trace id")}
	for _, e := range events {
		rows = append(rows, append(e.Row.cells(), e.Type, e.UserID, e.LockID, e.LoanID, e.Holder["traceId"], e.By["traceId"]))
	}
	var b strings.Builder
	writeCSV(&b, rows)
	h := c.Response().Header()
	h.Set("Content-Disposition", `attachment; filename="lock-history.csv"`)
	h.Set("X-Total-Records", strconv.Itoa(total))
	return c.Blob(http.StatusOK, "text/csv; charset=utf-8", []byte(b.String()))
}

// writeCSV writes rows as CSV, each cell a spreadsheet reads as text: a
// cell beginning with what a spreadsheet takes for a formula (=, +, -, @,
// a tab or a carriage return; a patron's name, a barcode, a kiosk's
// account are anyone's to choose) is written after a single quote, as
// OWASP's advice on CSV injection has it.
func writeCSV(w io.Writer, rows [][]string) {
	cw := csv.NewWriter(w)
	for _, row := range rows {
		safe := make([]string, len(row))
		for i, cell := range row {
			safe[i] = csvText(cell)
		}
		_ = cw.Write(safe)
	}
	cw.Flush()
}

// csvText is cell as a spreadsheet reads text (writeCSV).
func csvText(cell string) string {
	if cell != "" && strings.ContainsRune("=+-@\t\r", rune(cell[0])) {
		return "'" + cell
	}
	return cell
}

// historyFilters reads the console's history filters into storage's
// history query: patron (a barcode, or the words of a name), account (the
// username of a kiosk or a person: the events of the locks it held or the
// waits and releases it made), type, from and to (date-times, to
// excluded). none says a patron or an account matched nobody, so no event
// can match.
func (s *Server) historyFilters(c echo.Context) (q url.Values, none bool, err error) {
	ctx := c.Request().Context()
	q = url.Values{}
	var conds []string
	if v := strings.TrimSpace(c.QueryParam("patron")); v != "" {
		found, err := s.patronsNamed(ctx, v)
		if err != nil {
			return nil, false, err
		}
		if len(found) == 0 {
			return nil, true, nil
		}
		ids := make([]string, len(found))
		for i, p := range found {
			ids[i] = cqlTerm(p.ID)
		}
		conds = append(conds, "userId==("+strings.Join(ids, " or ")+")")
	}
	if v := strings.TrimSpace(c.QueryParam("account")); v != "" {
		var page struct {
			Accounts []struct {
				ID string `json:"id"`
			} `json:"accounts"`
		}
		err := s.svc.Console.GetJSON(ctx, "/sign-in-accounts?"+url.Values{"query": {"username==" + cqlTerm(strings.ToLower(v))}, "limit": {"1"}}.Encode(), &page)
		if err != nil {
			return nil, false, err
		}
		machine := cqlTerm(schemas.KioskLocation(v))
		who := "holder.kiosk==" + machine + " or by.kiosk==" + machine
		if len(page.Accounts) > 0 {
			id := cqlTerm(page.Accounts[0].ID)
			who += " or holder.acquiredBy==" + id + " or by.acquiredBy==" + id
		}
		conds = append(conds, "("+who+")")
	}
	if v := c.QueryParam("type"); v != "" {
		conds = append(conds, "type=="+cqlTerm(v))
	}
	for _, name := range []string{"from", "to"} {
		if v := c.QueryParam(name); v != "" {
			t, err := schemas.ParseDateTime(v)
			if err != nil {
				return nil, false, invalidParam(name, v, "must be a date and time such as 2026-11-27T10:14:00Z")
			}
			q.Set(name, schemas.FormatTime(t))
		}
	}
	if len(conds) > 0 {
		q.Set("query", strings.Join(conds, " and "))
	}
	return q, false, nil
}

// namedPatron is a patron found by barcode or name.
type namedPatron struct {
	ID       string     `json:"id"`
	Barcode  string     `json:"barcode"`
	Personal personJSON `json:"personal"`
}

// patronsNamed is the patrons (at most 50) whose barcode is text, or
// whose first or last names hold a word beginning with each word of it
// ("Alic", "Arch", "Alice A"): a desk types a name as far as it knows it.
func (s *Server) patronsNamed(ctx context.Context, text string) ([]namedPatron, error) {
	words := strings.Fields(text)
	if len(words) > 5 {
		words = words[:5]
	}
	var byName []string
	for _, w := range words {
		byName = append(byName, "(personal.firstName="+cqlPrefix(w)+" or personal.lastName="+cqlPrefix(w)+")")
	}
	query := "barcode==" + cqlTerm(text) + " or (" + strings.Join(byName, " and ") + ")"
	var page struct {
		Users []namedPatron `json:"users"`
	}
	if err := s.svc.Console.GetJSON(ctx, "/users?"+url.Values{"query": {query}, "limit": {"50"}}.Encode(), &page); err != nil {
		return nil, err
	}
	return page.Users, nil
}

// cqlTerm is text as a CQL term, quoted, matching itself alone: its
// quotes, backslashes and wildcards escaped.
func cqlTerm(text string) string {
	r := strings.NewReplacer(`\`, `\\`, `"`, `\"`, `*`, `\*`, `?`, `\?`, `^`, `\^`)
	return `"` + r.Replace(text) + `"`
}

// cqlPrefix is text as a CQL term matching any word it begins: text
// escaped as cqlTerm escapes it, then CQL's right truncation (*), which
// storage's = relation applies to each word of the field. Text without a
// letter or a digit is no beginning of a word (truncated, it would match
// every name): it stays as cqlTerm makes it.
func cqlPrefix(text string) string {
	t := cqlTerm(text)
	if !strings.ContainsFunc(text, func(r rune) bool { return unicode.IsLetter(r) || unicode.IsDigit(r) }) {
		return t
	}
	return t[:len(t)-1] + `*"`
}

// historyEvents reads a page of storage's history for q, with the
// patrons, the people and the service points by name.
func (s *Server) historyEvents(ctx context.Context, q url.Values, zone *time.Location, offset, limit int) (historyPage, error) {
	q = maps.Clone(q)
	q.Set("offset", strconv.Itoa(offset))
	q.Set("limit", strconv.Itoa(limit))
	page := historyPage{Events: []consoleEvent{}}
	if err := s.svc.Console.GetJSON(ctx, "/check-out-lock-storage/history?"+q.Encode(), &page); err != nil {
		return historyPage{}, err
	}
	patrons, names := s.patrons(ctx), s.names(ctx)
	for i := range page.Events {
		e := &page.Events[i]
		e.Patron = patrons(e.UserID)
		e.ByName = acting(names, e.By)
		e.HolderName = names.person(e.Holder["acquiredBy"])
		e.ServicePointName = names.servicePoint(e.Holder["servicePointId"])
		e.HeldBy = heldBy(names, e.Holder)
		if len(e.Holder) == 0 {
			// A line of no lock (a loan made offline, a late check-in):
			// who sent it.
			e.HeldBy = e.ByName
		}
		e.HolderTraceURL, e.ByTraceURL = s.traceURL(e.Holder), s.traceURL(e.By)
		switch {
		case e.Type == schemas.HistoryReturnedBeforeLoan:
			e.What = schemas.ReturnedBeforeLoanWords
		case e.LoanID != "":
			e.What = schemas.OfflineWords(e.BrokenRules)
		}
		e.Row = e.row(zone)
	}
	return page, nil
}

// heldBy is who held a lock, as the console's page and its CSV both say
// it: the self-check machine it was for (schemas.MachineName), else the
// holder's own name for itself (circulation's instance), else the account
// that took it, by name.
func heldBy(n *names, holder map[string]string) string {
	if holder["kiosk"] == "" && holder["instance"] != "" {
		return holder["instance"]
	}
	return acting(n, holder)
}

// acting is who acted, as a history line's holder or by says it: the
// self-check machine with its account's username, as the console's
// machines name it, or the account alone, by name.
func acting(n *names, who map[string]string) string {
	if k := who["kiosk"]; k != "" {
		return schemas.MachineName(k, n.username(who["acquiredBy"]))
	}
	return n.person(who["acquiredBy"])
}

// traceURL is the trace viewer's address of holder's trace, "" when
// storage did not trace it or no viewer is configured.
func (s *Server) traceURL(holder map[string]string) string {
	if id := holder["traceId"]; id != "" && s.cfg.TraceLink != nil {
		return s.cfg.TraceLink(id)
	}
	return ""
}

// patrons looks patrons up by id, once each per request; one that cannot
// be read is shown without barcode and name.
func (s *Server) patrons(ctx context.Context) func(id string) *consolePatron {
	seen := map[string]*consolePatron{}
	return func(id string) *consolePatron {
		if p, ok := seen[id]; ok {
			return p
		}
		var u struct {
			Barcode  string `json:"barcode"`
			Personal struct {
				FirstName string `json:"firstName"`
				LastName  string `json:"lastName"`
			} `json:"personal"`
		}
		var p *consolePatron
		if err := s.svc.Console.GetJSON(ctx, "/users/"+url.PathEscape(id), &u); err == nil {
			name := u.Personal.FirstName
			if u.Personal.LastName != "" {
				name = (name + " " + u.Personal.LastName)
				if u.Personal.FirstName == "" {
					name = u.Personal.LastName
				}
			}
			p = &consolePatron{Barcode: u.Barcode, Name: name}
		}
		seen[id] = p
		return p
	}
}

// releaseConsoleLock releases a lock for an operator; storage records the
// release in the lock history as made by the caller.
func (s *Server) releaseConsoleLock(c echo.Context) error {
	id, err := s.pathID(c, "lock")
	if err != nil {
		return err
	}
	if err := s.svc.Console.ReleaseLock(c.Request().Context(), id); err != nil {
		return err
	}
	s.Logger().InfoContext(c.Request().Context(), "check-out lock released from the console", slog.String("lock_id", id),
		slog.String("user_id", circulation.OkapiFrom(c.Request().Context()).UserID))
	return c.NoContent(http.StatusNoContent)
}
