package httpapi

import (
	"context"
	"errors"

	"github.com/labstack/echo/v4"

	storage "github.com/checkoutlock/circulation-storage"
	"github.com/checkoutlock/schemas"
	"github.com/checkoutlock/schemas/auth"
)

// Request-scoped values of authentication.
const (
	// callerKey holds who a request acts for, for audit logs.
	callerKey ctxKey = 100 + iota
	// claimsKey holds the verified claims of a jwt-mode request.
	claimsKey
)

// caller is who the request acts for: the token's user in jwt mode, the
// gateway's X-Okapi-User-Id in gateway mode; "" when unknown.
func caller(ctx context.Context) string {
	c, _ := ctx.Value(callerKey).(string)
	return c
}

// authorize lets the request through if its caller may use the route (see
// auth.Guard.Check), and remembers who the caller is.
func (s *Server) authorize(c echo.Context) error {
	who, claims, err := s.cfg.Auth.Check(schemas.ServiceStorage, c.Request().Method, c.Path(), c.Request().Header)
	if err != nil {
		return err
	}
	ctx := context.WithValue(c.Request().Context(), callerKey, who)
	ctx = storage.WithUser(ctx, who)
	c.SetRequest(c.Request().WithContext(context.WithValue(ctx, claimsKey, claims)))
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
	claims, _ := c.Request().Context().Value(claimsKey).(*auth.Claims)
	return s.cfg.Auth.Require(claims, schemas.SettingsScopeWrite(scope))
}
