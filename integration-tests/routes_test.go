package integration

import (
	"bufio"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/checkoutlock/integration-tests/harness"
	"github.com/checkoutlock/schemas"
	"github.com/checkoutlock/schemas/errs/errhttp"
	"github.com/checkoutlock/serverkit"
)

// servedRoutes are the routes process says, in its start-up log, it
// serves (serverkit's "routes" line), with their permissions.
func servedRoutes(t *testing.T, p *harness.Process) []serverkit.Route {
	t.Helper()
	sc := bufio.NewScanner(strings.NewReader(p.Log()))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var line struct {
			Msg    string            `json:"msg"`
			Routes []serverkit.Route `json:"routes"`
		}
		if json.Unmarshal(sc.Bytes(), &line) == nil && line.Msg == "routes" {
			return line.Routes
		}
	}
	t.Fatalf("%s logged no routes line", p.Name)
	return nil
}

// TestBothServicesServeThePermissionTableAlone: each running service
// serves exactly its routes of the permission table, each under the
// table's permission (as both go through serverkit, which refuses to
// route, or to serve, anything else), and every route its log names is
// served; a route outside the table, whatever it is, is refused the same
// way at both: 404 ROUTE_NOT_FOUND (405 METHOD_NOT_ALLOWED for a method a
// path does not take), with the envelope, before any token is looked at.
func TestBothServicesServeThePermissionTableAlone(t *testing.T) {
	t.Parallel()
	c := harness.NewCluster(t, harness.Options{Circulations: 1})
	services := map[string]*harness.Process{schemas.ServiceStorage: c.Storage, schemas.ServiceCirculation: c.Circulations[0]}
	n := 0
	for service, p := range services {
		served := servedRoutes(t, p)
		if len(served) < 10 {
			t.Fatalf("%s: %d routes logged", service, len(served))
		}
		for _, d := range serverkit.CheckRoutes(service, served) {
			t.Errorf("%s: %s", service, d)
		}
		// What the log names is what is served: a request without a
		// token meets the route's permission, never 404 or 405.
		for _, r := range served {
			path, body := routeRequest(schemas.Route{Method: r.Method, Path: r.Path})
			res := c.DoWith(p, r.Method, path, body, map[string]string{schemas.HeaderTenant: c.Tenant})
			n++
			if r.Permission != "" && res.Status != http.StatusUnauthorized ||
				res.Status == http.StatusNotFound && slices.Contains(res.ErrorCodes(), schemas.CodeRouteNotFound) ||
				res.Status == http.StatusMethodNotAllowed {
				t.Errorf("%s %s %s (requiring %q) without a token: %d %s", service, r.Method, r.Path, r.Permission, res.Status, res.Body)
			}
		}
	}

	// Outside the table: made-up routes, methods the table does not name
	// for a path, asked of both services, and each service's routes asked
	// of the other. Refused alike, whoever asks.
	type probe struct {
		method, path string
		status       int
		code         string
		// at is the one service the probe is asked of; "" for both.
		at string
	}
	probes := []probe{
		{"GET", "/no-such-route", http.StatusNotFound, schemas.CodeRouteNotFound, ""},
		{"POST", "/admin/routes", http.StatusNotFound, schemas.CodeRouteNotFound, ""},
		{"PATCH", "/admin/health", http.StatusMethodNotAllowed, schemas.CodeMethodNotAllowed, ""},
		{"DELETE", "/metrics", http.StatusMethodNotAllowed, schemas.CodeMethodNotAllowed, ""},
	}
	for _, r := range schemas.Routes {
		other := schemas.ServiceStorage
		if r.Service == schemas.ServiceStorage {
			other = schemas.ServiceCirculation
		}
		if _, served := schemas.PermissionFor(other, r.Method, r.Path); !served && !strings.Contains(r.Path, "{") &&
			r.Interface != schemas.InterfaceAdmin && !strings.HasPrefix(r.Path, "/authn/") {
			probes = append(probes, probe{r.Method, r.Path, http.StatusNotFound, schemas.CodeRouteNotFound, other})
		}
	}
	for _, o := range probes {
		for _, headers := range []map[string]string{{schemas.HeaderTenant: c.Tenant}, c.Headers()} {
			answers := map[string]harness.Response{}
			for service, p := range services {
				if o.at == "" || o.at == service {
					answers[service] = c.DoWith(p, o.method, o.path, nil, headers)
					n++
				}
			}
			for service, res := range answers {
				env, ok := errhttp.Decode(res.Body)
				if res.Status != o.status || !ok || len(env.Errors) != 1 || env.Errors[0].Code != o.code {
					t.Errorf("%s %s at %s: %d %s, want %d %s", o.method, o.path, service, res.Status, res.Body, o.status, o.code)
				}
			}
			if len(answers) == 2 {
				st, ci := answers[schemas.ServiceStorage], answers[schemas.ServiceCirculation]
				for _, h := range []string{"Content-Type", "Cache-Control", "Allow"} {
					if st.Header.Get(h) != ci.Header.Get(h) {
						t.Errorf("%s %s: %s %q at storage, %q at circulation", o.method, o.path, h, st.Header.Get(h), ci.Header.Get(h))
					}
				}
				if string(st.Body) != string(ci.Body) {
					t.Errorf("%s %s is refused otherwise at storage (%s) than at circulation (%s)", o.method, o.path, st.Body, ci.Body)
				}
			}
		}
	}
	summary(t, n, 0, n, 0, "every route served is the table's; the rest refused alike")
}
