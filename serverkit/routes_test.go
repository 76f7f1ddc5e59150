package serverkit

import (
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/checkoutlock/schemas"
	"github.com/checkoutlock/schemas/errs/errhttp"
	"github.com/checkoutlock/serverkit/auth"
)

// jwtServer is service's server in jwt mode, with nothing routed but the
// open routes.
func jwtServer(t *testing.T, service string) *Server {
	t.Helper()
	v, err := auth.NewVerifier(t.Context(), auth.KeyConfig{Secret: strings.Repeat("k", 32)})
	if err != nil {
		t.Fatal(err)
	}
	return New(Service{Name: service}, Config{Auth: auth.Guard{Mode: auth.JWT, Verifier: v}, MaxBodyBytes: 1 << 20,
		MaxHeaderBytes: 1 << 16, RequestTimeout: time.Minute}, nil, NewMetrics(nil), slog.New(slog.NewTextHandler(io.Discard, nil)))
}

// refusedRoute is the panic of routing method and path at s, "" when it
// was routed.
func refusedRoute(s *Server, method, path string) (refusal string) {
	defer func() {
		if p := recover(); p != nil {
			refusal, _ = p.(string)
			if refusal == "" {
				refusal = "a panic that is not a refusal"
			}
		}
	}()
	s.Handle(method, path, func(c echo.Context) error { return c.NoContent(http.StatusNoContent) })
	return ""
}

// TestARouteOutsideThePermissionTableIsRefused: at either service, a
// route the permission table does not name among the service's is refused
// as the server is built (the service does not start), whatever the
// table says of the other service; it is not served. HEAD goes by GET's
// entry.
func TestARouteOutsideThePermissionTableIsRefused(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		service, method, path string
		refused               bool
	}{
		{schemas.ServiceCirculation, http.MethodGet, "/circulation/loans/:id", false},
		{schemas.ServiceCirculation, http.MethodHead, "/circulation/loans/{id}", false},
		{schemas.ServiceCirculation, http.MethodGet, "/circulation/unlisted", true},
		{schemas.ServiceCirculation, http.MethodDelete, "/circulation/loans/:id", true},
		{schemas.ServiceCirculation, http.MethodGet, "/loan-storage/loans", true},
		{schemas.ServiceStorage, http.MethodGet, "/loan-storage/loans/:id", false},
		{schemas.ServiceStorage, http.MethodHead, "/loan-storage/loans", false},
		{schemas.ServiceStorage, http.MethodGet, "/loan-storage/unlisted", true},
		{schemas.ServiceStorage, http.MethodPatch, "/loan-storage/loans/:id", true},
		{schemas.ServiceStorage, http.MethodGet, "/circulation/loans", true},
	} {
		s := jwtServer(t, c.service)
		refusal := refusedRoute(s, c.method, c.path)
		if (refusal != "") != c.refused {
			t.Errorf("%s: %s %s refused %v (%q), want %v", c.service, c.method, c.path, refusal != "", refusal, c.refused)
			continue
		}
		if !c.refused {
			continue
		}
		if !strings.Contains(refusal, "not in the permission table") || !strings.Contains(refusal, c.path) {
			t.Errorf("%s: the refusal of %s %s does not name it: %q", c.service, c.method, c.path, refusal)
		}
		for _, r := range s.Routes() {
			if r.Path == auth.Pattern(c.path) && r.Method == c.method {
				t.Errorf("%s: %s %s is served after its refusal", c.service, c.method, c.path)
			}
		}
	}
}

// TestEveryRouteIsAdmittedByItsPermission: a route routed through the
// kit is held to the permission the table names for it, at either
// service: without a token, 401 with the envelope; the open routes answer
// anyone; a route not routed is 404 with the envelope, the same at both.
func TestEveryRouteIsAdmittedByItsPermission(t *testing.T) {
	t.Parallel()
	routed := map[string]string{schemas.ServiceCirculation: "/circulation/loans", schemas.ServiceStorage: "/loan-storage/loans"}
	unknown := map[string]errhttp.Envelope{}
	for service, path := range routed {
		s := jwtServer(t, service)
		s.Get(path, func(c echo.Context) error { return c.NoContent(http.StatusNoContent) })
		for _, c := range []struct {
			path   string
			status int
		}{{path, http.StatusUnauthorized}, {"/admin/health", http.StatusOK}, {"/no-such-route", http.StatusNotFound}} {
			rec := httptest.NewRecorder()
			s.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, c.path, nil))
			if rec.Code != c.status {
				t.Errorf("%s: GET %s = %d %s, want %d", service, c.path, rec.Code, rec.Body, c.status)
			}
			if c.status == http.StatusOK {
				continue
			}
			env, ok := errhttp.Decode(rec.Body.Bytes())
			if !ok {
				t.Errorf("%s: GET %s answered %q, not the envelope", service, c.path, rec.Body)
			}
			if c.status == http.StatusNotFound {
				unknown[service] = env
			}
		}
	}
	c, st := unknown[schemas.ServiceCirculation], unknown[schemas.ServiceStorage]
	if len(c.Errors) != 1 || len(st.Errors) != 1 || !reflect.DeepEqual(c.Errors[0], st.Errors[0]) || c.Errors[0].Code != schemas.CodeRouteNotFound {
		t.Errorf("an unknown route is answered %v at circulation and %v at storage, want one ROUTE_NOT_FOUND alike", c, st)
	}
}

// TestCheckRoutesSaysWhatDiffers: a server's routes agree with the table
// when they are its routes with its permissions; a route served outside
// it, one served under another permission and one of the table not served
// are each named.
func TestCheckRoutesSaysWhatDiffers(t *testing.T) {
	t.Parallel()
	s := jwtServer(t, schemas.ServiceStorage)
	for _, r := range schemas.RoutesOf(schemas.ServiceStorage) {
		if r.Path != "/admin/health" && r.Path != "/admin/ready" && r.Path != "/metrics" && r.Path != schemas.OpenAPIPath {
			s.Handle(r.Method, r.Path, func(c echo.Context) error { return nil })
		}
	}
	served := s.Routes()
	if d := CheckRoutes(schemas.ServiceStorage, served); len(d) != 0 {
		t.Fatalf("the table's own routes differ from it: %v", d)
	}
	var changed []Route
	for _, r := range served {
		switch {
		case r.Method == http.MethodDelete && r.Path == "/users/{id}":
			continue // not served
		case r.Method == http.MethodGet && r.Path == "/users/{id}":
			r.Permission = "users.collection.get"
		}
		changed = append(changed, r)
	}
	changed = append(changed, Route{Method: http.MethodGet, Path: "/users/{id}/secrets"})
	d := CheckRoutes(schemas.ServiceStorage, changed)
	want := []string{
		`GET /users/{id} is served requiring "users.collection.get", the permission table says "users.item.get"`,
		"GET /users/{id}/secrets is served but not in the permission table",
		"DELETE /users/{id} is in the permission table but not served",
	}
	if !reflect.DeepEqual(d, want) {
		t.Errorf("CheckRoutes = %q, want %q", d, want)
	}
}

// TestTheServerIsMadeOnlyWithTheTablesRoutes: the net/http server is made
// for a service serving every route the table names for it, and refused
// (the service does not start) for one that leaves a route out.
func TestTheServerIsMadeOnlyWithTheTablesRoutes(t *testing.T) {
	t.Parallel()
	for _, leftOut := range []string{"", "DELETE /users/{id}"} {
		s := jwtServer(t, schemas.ServiceStorage)
		for _, r := range schemas.RoutesOf(schemas.ServiceStorage) {
			if r.Path != "/admin/health" && r.Path != "/admin/ready" && r.Path != "/metrics" && r.Path != schemas.OpenAPIPath && r.Method+" "+r.Path != leftOut {
				s.Handle(r.Method, r.Path, func(c echo.Context) error { return nil })
			}
		}
		refusal := func() (refusal any) {
			defer func() { refusal = recover() }()
			s.HTTP(time.Minute)
			return nil
		}()
		switch {
		case leftOut == "" && refusal != nil:
			t.Errorf("the table's routes were refused: %v", refusal)
		case leftOut != "" && (refusal == nil || !strings.Contains(fmt.Sprint(refusal), leftOut+" is in the permission table but not served")):
			t.Errorf("a server leaving %s out was made (%v)", leftOut, refusal)
		}
	}
}
