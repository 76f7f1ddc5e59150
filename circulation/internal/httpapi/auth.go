package httpapi

import (
	"encoding/json"
	"net/http"
	"slices"

	"github.com/labstack/echo/v4"

	"github.com/checkoutlock/schemas"
	"github.com/checkoutlock/serverkit"
	"github.com/checkoutlock/serverkit/auth"
)

// holds says whether the caller holds permission beyond the route's: in
// jwt mode, whether the token does; behind a gateway, whether the gateway
// granted it (X-Okapi-Permissions, where FOLIO's gateway puts the
// permissionsDesired the caller holds); with authentication off, always.
func (s *Server) holds(c echo.Context, permission string) bool {
	switch s.cfg.Auth.Mode {
	case auth.JWT:
		claims := serverkit.Claims(c.Request().Context())
		return claims != nil && claims.Has(permission)
	case auth.Gateway:
		var granted []string
		if err := json.Unmarshal([]byte(c.Request().Header.Get(schemas.HeaderPermissions)), &granted); err != nil {
			return false
		}
		return slices.Contains(granted, permission)
	}
	return true
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
