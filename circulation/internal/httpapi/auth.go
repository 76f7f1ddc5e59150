package httpapi

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"

	"github.com/labstack/echo/v4"

	"github.com/checkoutlock/schemas"
	"github.com/checkoutlock/schemas/auth"
)

// authorize lets the request through if its caller may use the route (see
// auth.Guard.Check), and remembers who the caller is.
func (s *Server) authorize(c echo.Context, r *requestInfo) error {
	who, claims, err := s.cfg.Auth.Check(c.Request().Context(), schemas.ServiceCirculation, c.Request().Method, c.Path(), c.Request().Header)
	// A refused request is logged with who it is, or claims to be, too.
	r.Caller, r.Module, r.Claimed, r.claims = who.User, who.Module, who.Unverified, claims
	return err
}

// holds says whether the caller holds permission beyond the route's: in
// jwt mode, whether the token does; behind a gateway, whether the gateway
// granted it (X-Okapi-Permissions, where FOLIO's gateway puts the
// permissionsDesired the caller holds); with authentication off, always.
func (s *Server) holds(c echo.Context, permission string) bool {
	switch s.cfg.Auth.Mode {
	case auth.JWT:
		r := requestOf(c.Request().Context())
		return r != nil && r.claims != nil && r.claims.Has(permission)
	case auth.Gateway:
		var granted []string
		if err := json.Unmarshal([]byte(c.Request().Header.Get(schemas.HeaderPermissions)), &granted); err != nil {
			return false
		}
		return slices.Contains(granted, permission)
	}
	return true
}

// callerOf is who the request acts for, "" when unknown.
func callerOf(c echo.Context) string {
	if r := requestOf(c.Request().Context()); r != nil {
		return r.Caller
	}
	return ""
}

// storageToken is the token the request's calls to storage carry: never
// the caller's own. In jwt mode it is circulation's module token for the
// tenant, naming the user it acts for, holding exactly the module
// permissions of the route's handler (schemas.Route.ModulePermissions);
// storage refuses anything beyond them. Behind a gateway it is the token
// the gateway gave this module for the request (Okapi's, holding the
// handler's modulePermissions from the descriptor); with authentication
// off there is none.
func (s *Server) storageToken(c echo.Context, tenant, user string) (string, error) {
	switch s.cfg.Auth.Mode {
	case auth.JWT:
		method := c.Request().Method
		if method == http.MethodHead {
			method = http.MethodGet
		}
		perms := schemas.ModulePermissionsFor(schemas.ServiceCirculation, method, c.Path())
		return s.cfg.Module.Token(tenant, user, method+" "+c.Path(), perms)
	case auth.Gateway:
		return auth.Token(c.Request().Header), nil
	}
	return "", nil
}

// mustBeInPermissionTable panics unless schemas.Routes names the route
// (method, and path in a router's notation) among circulation's: it is
// called for every route as the server is built. A route left out would
// otherwise be found only at run time, and then as no permission at all:
// auth.Guard.Check lets a route the table does not know through, and in jwt
// mode its calls to storage would carry no module permissions.
func mustBeInPermissionTable(method, path string) {
	if method == http.MethodHead {
		method = http.MethodGet // served wherever GET is, by GET's permission
	}
	if _, known := schemas.PermissionFor(schemas.ServiceCirculation, method, path); !known {
		panic(fmt.Sprintf("httpapi: %s %s is served but not in the permission table (schemas.Routes)", method, path))
	}
}
