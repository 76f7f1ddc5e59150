package httpapi

import (
	"errors"

	"github.com/labstack/echo/v4"

	"github.com/checkoutlock/schemas"
	"github.com/checkoutlock/schemas/auth"
)

// authorize lets the request through if its caller may use the route (see
// auth.Guard.Check), and remembers who the caller is. In jwt mode the
// caller's token goes on to storage with every call made for the request,
// and storage checks it again.
func (s *Server) authorize(c echo.Context, r *requestInfo) error {
	who, _, err := s.cfg.Auth.Check(schemas.ServiceCirculation, c.Request().Method, c.Path(), c.Request().Header)
	if err != nil {
		return err
	}
	r.Caller = who
	return nil
}

// authFailure is err's *auth.Failure, if it has one.
func authFailure(err error) (*auth.Failure, bool) {
	var f *auth.Failure
	ok := errors.As(err, &f)
	return f, ok
}
