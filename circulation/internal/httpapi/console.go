package httpapi

import (
	"context"
	"embed"
	"fmt"
	"io/fs"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"

	"github.com/checkoutlock/schemas"
	"github.com/checkoutlock/schemas/errs"

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
			body, err := fs.ReadFile(files, name)
			if err != nil {
				return echo.ErrNotFound
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
	// ServicePointName names the holder's service point.
	ServicePointName string `json:"servicePointName,omitempty"`
	// TraceURL is the trace of the lock's acquisition in the operators'
	// trace viewer (TRACE_URL), when storage traced it.
	TraceURL string `json:"traceUrl,omitempty"`
}

type consolePatron struct {
	Barcode string `json:"barcode,omitempty"`
	Name    string `json:"name,omitempty"`
}

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
		l.ServicePointName = names.servicePoint(l.Holder["servicePointId"])
		l.TraceURL = s.traceURL(l.Holder)
	}
	return c.JSON(http.StatusOK, page)
}

// lockHistory lists the tenant's lock history, newest first, with the
// patrons' barcodes and names.
func (s *Server) lockHistory(c echo.Context) error {
	q := url.Values{"limit": {strconv.Itoa(consoleLimit)}}
	if v := c.QueryParam("userId"); v != "" {
		if !s.Schemas().ValidUUID(v) {
			return invalidParam("userId", v, "must be a UUID")
		}
		q.Set("userId", v)
	}
	var page struct {
		Events []struct {
			ID         int64             `json:"id"`
			Type       string            `json:"type"`
			OccurredAt string            `json:"occurredAt"`
			UserID     string            `json:"userId"`
			LockID     string            `json:"lockId,omitempty"`
			Holder     map[string]string `json:"holder,omitempty"`
			By         map[string]string `json:"by,omitempty"`
			WaitedMs   int               `json:"waitedMs,omitempty"`
			Patron     *consolePatron    `json:"patron,omitempty"`
			// ByName names the person who released the lock, when
			// someone did; ServicePointName the holder's service point.
			ByName           string `json:"byName,omitempty"`
			ServicePointName string `json:"servicePointName,omitempty"`
			// The traces of the holder's acquisition and of the
			// acquisition (a waiter's) that caused the event.
			HolderTraceURL string `json:"holderTraceUrl,omitempty"`
			ByTraceURL     string `json:"byTraceUrl,omitempty"`
		} `json:"events"`
		TotalRecords int `json:"totalRecords"`
	}
	ctx := c.Request().Context()
	if err := s.svc.Console.GetJSON(ctx, "/check-out-lock-storage/history?"+q.Encode(), &page); err != nil {
		return err
	}
	patrons, names := s.patrons(ctx), s.names(ctx)
	for i := range page.Events {
		e := &page.Events[i]
		e.Patron = patrons(e.UserID)
		e.ByName = names.person(e.By["acquiredBy"])
		e.ServicePointName = names.servicePoint(e.Holder["servicePointId"])
		e.HolderTraceURL, e.ByTraceURL = s.traceURL(e.Holder), s.traceURL(e.By)
	}
	return c.JSON(http.StatusOK, page)
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
	id := c.Param("id")
	if !s.Schemas().ValidUUID(id) {
		return errs.Errorf(errs.KindBadRequest, schemas.CodeInvalidID, "Invalid lock id").With("id", truncate(id))
	}
	if err := s.svc.Console.ReleaseLock(c.Request().Context(), id); err != nil {
		return err
	}
	s.Logger().InfoContext(c.Request().Context(), "check-out lock released from the console", slog.String("lock_id", id),
		slog.String("user_id", circulation.OkapiFrom(c.Request().Context()).UserID))
	return c.NoContent(http.StatusNoContent)
}
