package httpapi

import (
	"context"
	"encoding/json"
	"math"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	storage "github.com/checkoutlock/circulation-storage"
	"github.com/checkoutlock/circulation-storage/login"
	"github.com/checkoutlock/schemas"
	"github.com/checkoutlock/schemas/errs"
	"github.com/checkoutlock/serverkit/auth"
)

// FOLIO's cookies of a sign-in.
const (
	accessCookie  = "folioAccessToken"
	refreshCookie = "folioRefreshToken"
)

// loginService is the login, or the refusal while it is off.
func (s *Server) loginService() (*login.Service, error) {
	if s.svc.Login == nil {
		return nil, errs.Errorf(errs.KindNotFound, schemas.CodeLoginOff,
			"Signing in here is off: tokens come from the identity provider (LOGIN=off, or AUTH_MODE is not jwt with AUTH_JWT_SECRET)")
	}
	return s.svc.Login, nil
}

// pinService is the patrons' PINs' keeper.
func (s *Server) pinService() (*login.Service, error) {
	if s.svc.Pins == nil {
		return nil, errs.Errorf(errs.KindNotFound, schemas.CodeRouteNotFound, "Patrons' PINs are not kept here")
	}
	return s.svc.Pins, nil
}

// login is POST /authn/login-with-expiry: the tokens in FOLIO's HttpOnly
// cookies, their expirations in the body. The password is never logged
// or returned.
func (s *Server) login(c echo.Context) error {
	svc, err := s.loginService()
	if err != nil {
		return err
	}
	var req struct {
		Username string `json:"username"`
		Password string `json:"password"`
	}
	if err := s.bind(c, &req); err != nil {
		return err
	}
	t, err := svc.Login(c.Request().Context(), string(tenantOf(c)), req.Username, req.Password, s.clientAddress(c))
	if err != nil {
		return err
	}
	return s.signedIn(c, t, http.StatusCreated)
}

// refresh is POST /authn/refresh: the refresh cookie, once, for new tokens.
func (s *Server) refresh(c echo.Context) error {
	svc, err := s.loginService()
	if err != nil {
		return err
	}
	t, err := svc.Refresh(c.Request().Context(), string(tenantOf(c)), cookie(c, refreshCookie))
	if err != nil {
		return err
	}
	return s.signedIn(c, t, http.StatusCreated)
}

// logout is POST /authn/logout: the session ends, named by the refresh
// cookie or by a valid access token (header or cookie); its refresh
// tokens no longer work, nor, at either service within auth.SessionTTL,
// its access tokens; and both cookies are cleared.
func (s *Server) logout(c echo.Context) error {
	svc, err := s.loginService()
	if err != nil {
		return err
	}
	tenant := string(tenantOf(c))
	var sid string
	if claims, err := s.cfg.Auth.Verifier.Verify(auth.Token(c.Request().Header)); err == nil && claims.Tenant == tenant {
		sid = claims.SessionID
	}
	if err := svc.Logout(c.Request().Context(), tenant, sid, cookie(c, refreshCookie)); err != nil {
		return err
	}
	if sid != "" && s.cfg.Auth.Sessions != nil {
		s.cfg.Auth.Sessions.Forget(tenant, sid)
	}
	for _, name := range []string{accessCookie, refreshCookie} {
		c.SetCookie(&http.Cookie{Name: name, Value: "", Path: "/", MaxAge: -1, HttpOnly: true, SameSite: http.SameSiteStrictMode,
			Secure: s.secure(c)})
	}
	return c.NoContent(http.StatusNoContent)
}

// session is GET /authn/sessions/{id}: whether a sign-in's session still
// speaks for its account (circulation asks, to refuse the tokens of one
// that has ended).
func (s *Server) session(c echo.Context) error {
	svc, err := s.pinService()
	if err != nil {
		return err
	}
	id := c.Param("id")
	alive, err := svc.SessionAlive(c.Request().Context(), string(tenantOf(c)), id)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, map[string]any{"id": id, "active": alive})
}

// setCredentials is POST /authn/credentials: an account's password, the
// account named by userId or username.
func (s *Server) setCredentials(c echo.Context) error {
	svc, err := s.loginService()
	if err != nil {
		return err
	}
	var req struct {
		UserID   string `json:"userId"`
		Username string `json:"username"`
		Password string `json:"password"`
	}
	if err := s.bind(c, &req); err != nil {
		return err
	}
	id := req.UserID
	if id == "" {
		if req.Username == "" {
			return errs.Errorf(errs.KindInvalid, schemas.CodeValidation, "userId or username: one names the account")
		}
		page, _, err := s.svc.Records.List(c.Request().Context(), tenantOf(c), storage.Accounts,
			storage.RecordFilter{Params: map[string]string{"username": strings.ToLower(req.Username)}, Limit: 1})
		if err != nil {
			return err
		}
		if len(page) == 0 {
			return errs.NotFound(storage.Accounts.Name, req.Username)
		}
		var h recordHeader
		if err := json.Unmarshal(page[0], &h); err != nil {
			return err
		}
		id = h.ID
	}
	if err := svc.SetPassword(c.Request().Context(), string(tenantOf(c)), id, req.Password); err != nil {
		return err
	}
	return c.NoContent(http.StatusCreated)
}

// setPatronPin is POST /patron-pin (FOLIO's mod-users): sets a patron's
// PIN.
func (s *Server) setPatronPin(c echo.Context) error {
	return s.withPin(c, http.StatusCreated, (*login.Service).SetPin)
}

// verifyPatronPin is POST /patron-pin/verify: 200 when the PIN matches,
// 422 PIN_INVALID when not, 429 PIN_LOCKED after too many wrong ones.
func (s *Server) verifyPatronPin(c echo.Context) error {
	address := s.clientAddress(c)
	return s.withPin(c, http.StatusOK, func(svc *login.Service, ctx context.Context, tenant, id, pin string) error {
		return svc.VerifyPin(ctx, tenant, id, pin, address)
	})
}

// withPin reads a patron-pin.json body and does what with it, answering
// status when it succeeds.
func (s *Server) withPin(c echo.Context, status int, what func(*login.Service, context.Context, string, string, string) error) error {
	svc, err := s.pinService()
	if err != nil {
		return err
	}
	var req struct{ ID, Pin string }
	if err := s.bind(c, &req); err != nil {
		return err
	}
	if err := what(svc, c.Request().Context(), string(tenantOf(c)), strings.ToLower(req.ID), req.Pin); err != nil {
		return err
	}
	return c.NoContent(status)
}

// signedIn answers a sign-in or a refresh: the cookies, and the body.
func (s *Server) signedIn(c echo.Context, t login.Tokens, status int) error {
	for _, k := range []struct {
		name, value string
		expires     time.Time
	}{{accessCookie, t.Access, t.AccessExpires}, {refreshCookie, t.Refresh, t.RefreshExpires}} {
		// Max-Age rounds up: one rounded down would end a short-lived
		// token's cookie before the token (a Max-Age of 0 is none at all,
		// leaving the second-granular Expires, already past).
		c.SetCookie(&http.Cookie{Name: k.name, Value: k.value, Path: "/", Expires: k.expires,
			MaxAge: int(math.Ceil(time.Until(k.expires).Seconds())), HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: s.secure(c)})
	}
	return c.JSON(status, map[string]string{"accessTokenExpiration": schemas.FormatTime(t.AccessExpires),
		"refreshTokenExpiration": schemas.FormatTime(t.RefreshExpires)})
}

// cookie is the named cookie's value, "" when there is none.
func cookie(c echo.Context, name string) string {
	k, err := c.Cookie(name)
	if err != nil {
		return ""
	}
	return k.Value
}

// fromCirculation says whether the request is circulation passing on a
// page's or a kiosk's sign-in: it carries circulation's own module token
// (jwt mode), and only then are the client's address and scheme it names
// believed.
func (s *Server) fromCirculation(c echo.Context) bool {
	if s.cfg.Auth.Mode != auth.JWT {
		return false
	}
	claims, err := s.cfg.Auth.Verifier.Verify(c.Request().Header.Get(schemas.HeaderToken))
	return err == nil && claims.Module == schemas.ServiceCirculation
}

// clientAddress is the address failures are counted by: the client's as
// the connection and the trusted proxies say (serverkit.Clients), never a
// header a client could choose; except that for a sign-in circulation
// passes on, carrying its module token, it is the address circulation
// names in X-Forwarded-For.
func (s *Server) clientAddress(c echo.Context) string {
	req := c.Request()
	if fwd := req.Header.Get(schemas.HeaderForwardedFor); fwd != "" && s.fromCirculation(c) {
		if ip := net.ParseIP(strings.TrimSpace(fwd)); ip != nil {
			return ip.String()
		}
	}
	return s.cfg.Clients.Address(req)
}

// secure says whether the client reached us over TLS, so that the
// sign-in's cookies are Secure: the connection is TLS or a trusted proxy
// says https, or circulation, passing a sign-in on, does.
func (s *Server) secure(c echo.Context) bool {
	req := c.Request()
	if s.cfg.Clients.Secure(req) {
		return true
	}
	return strings.EqualFold(req.Header.Get(schemas.HeaderForwardedProto), "https") && s.fromCirculation(c)
}
