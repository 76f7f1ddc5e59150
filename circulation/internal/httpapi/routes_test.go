package httpapi

import (
	"net/http"
	"testing"

	"github.com/checkoutlock/schemas"
)

// TestServedRoutesAreThePermissionTable: every route the server serves is
// in schemas.Routes (so in the module descriptor, with its permission),
// and every route there is served.
func TestServedRoutesAreThePermissionTable(t *testing.T) {
	t.Parallel()
	srv := New(Config{}, Services{}, sch, NewMetrics(), nil)
	served := map[[2]string]bool{}
	for _, r := range srv.Routes() {
		served[r] = true
		if _, known := schemas.PermissionFor(schemas.ServiceCirculation, r[0], r[1]); !known {
			t.Errorf("%s %s is served but not in the permission table", r[0], r[1])
		}
	}
	for _, r := range schemas.RoutesOf(schemas.ServiceCirculation) {
		if !served[[2]string{r.Method, r.Path}] {
			t.Errorf("%s %s is in the permission table but not served", r.Method, r.Path)
		}
	}
}

// TestARouteOutsideThePermissionTablePanics: a route the table leaves out
// is refused when the server is built, not found open at run time; HEAD
// goes by GET's entry.
func TestARouteOutsideThePermissionTablePanics(t *testing.T) {
	t.Parallel()
	mustBeInPermissionTable(http.MethodGet, "/circulation/loans/:id")
	mustBeInPermissionTable(http.MethodHead, "/circulation/loans/{id}")
	defer func() {
		if recover() == nil {
			t.Error("GET /circulation/unlisted was routed without a panic")
		}
	}()
	mustBeInPermissionTable(http.MethodGet, "/circulation/unlisted")
}
