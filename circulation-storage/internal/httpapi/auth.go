package httpapi

import (
	"context"
	"errors"

	"github.com/labstack/echo/v4"

	storage "github.com/checkoutlock/circulation-storage"
	"github.com/checkoutlock/schemas"
	"github.com/checkoutlock/schemas/auth"
)

// caller is who the request acts for: the token's user in jwt mode, the
// gateway's X-Okapi-User-Id in gateway mode; "" when unknown.
func caller(ctx context.Context) string {
	if r := requestOf(ctx); r != nil {
		return r.Caller
	}
	return ""
}

// authorize lets the request through if its caller may use the route (see
// auth.Guard.Check), and remembers who the caller is; what the request
// writes is recorded as theirs (storage.WithUser, in the context admit
// makes).
func (s *Server) authorize(c echo.Context, r *requestInfo) error {
	who, claims, err := s.cfg.Auth.Check(schemas.ServiceStorage, c.Request().Method, c.Path(), c.Request().Header)
	if err != nil {
		return err
	}
	r.Caller, r.claims = who, claims
	return nil
}

// authFailure is err's *auth.Failure, if it has one.
func authFailure(err error) (*auth.Failure, bool) {
	var f *auth.Failure
	ok := errors.As(err, &f)
	return f, ok
}

// settingsScope checks the scoped permission a write of a settings entry of
// scope needs (mod-settings' mod-settings.global.write.<scope>).
func (s *Server) settingsScope(c echo.Context, r storage.Resource, scope string) error {
	if r.Path != storage.Settings.Path {
		return nil
	}
	var claims *auth.Claims
	if r := requestOf(c.Request().Context()); r != nil {
		claims = r.claims
	}
	return s.cfg.Auth.Require(claims, schemas.SettingsScopeWrite(scope))
}
