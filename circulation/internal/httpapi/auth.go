package httpapi

import (
	"errors"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/checkoutlock/schemas"
	"github.com/checkoutlock/schemas/auth"
)

// authorize lets the request through if its caller may use the route (see
// auth.Guard.Check), and remembers who the caller is.
func (s *Server) authorize(c echo.Context, r *requestInfo) error {
	who, _, err := s.cfg.Auth.Check(schemas.ServiceCirculation, c.Request().Method, c.Path(), c.Request().Header)
	if err != nil {
		return err
	}
	r.Caller = who.User
	return nil
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

// authFailure is err's *auth.Failure, if it has one.
func authFailure(err error) (*auth.Failure, bool) {
	var f *auth.Failure
	ok := errors.As(err, &f)
	return f, ok
}
