package httpapi

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/checkoutlock/schemas"
	"github.com/checkoutlock/serverkit/auth"
)

// The pages' sign-in. Storage keeps the accounts and signs people in
// (FOLIO's /authn routes); circulation passes those routes on, so that the
// pages sign in on the origin that serves them: the tokens stay in
// storage's HttpOnly, SameSite=Strict cookies, which the page never reads,
// and every call the page makes carries them. /bl-users/_self says who is
// signed in and what they may do.

// Passer passes a request of the sign-in on to storage and answers what
// storage answered.
type Passer interface {
	Pass(ctx context.Context, method, path string, request []byte, header http.Header) (status int, answerHeader http.Header, answer []byte, err error)
}

// passAuthn is POST /authn/login-with-expiry, /authn/refresh and
// /authn/logout: storage's answer, cookies included. The client's address
// (behind the trusted proxies: a kiosk's, named by the SIP2 door) goes
// along for storage to count failed sign-ins by, and whether it came over
// TLS, for storage to make the cookies Secure; storage believes both only
// from circulation's module token.
func (s *Server) passAuthn(c echo.Context) error {
	req := c.Request()
	var body []byte
	if req.Body != nil {
		b, err := io.ReadAll(req.Body) // read whole and bounded by the admission (serverkit)
		if err != nil {
			return err
		}
		body = b
	}
	h := http.Header{}
	for _, k := range []string{"Content-Type", "Cookie"} {
		if v := req.Header.Values(k); len(v) > 0 {
			h[k] = v
		}
	}
	h.Set(schemas.HeaderForwardedFor, s.cfg.Clients.Address(req))
	if s.cfg.Clients.Secure(req) {
		h.Set(schemas.HeaderForwardedProto, "https")
	}
	status, answer, data, err := s.svc.Pass.Pass(req.Context(), req.Method, c.Path(), body, h)
	if err != nil {
		return err
	}
	out := c.Response().Header()
	for _, k := range []string{"Set-Cookie", "Content-Type", "Retry-After"} {
		for _, v := range answer.Values(k) {
			out.Add(k, v)
		}
	}
	out.Set("Cache-Control", "no-store")
	c.Response().WriteHeader(status)
	_, err = c.Response().Write(data)
	return err
}

// selfJSON is GET /bl-users/_self as FOLIO's mod-users-bl answers it, the
// part the pages use: the user and the permissions the caller holds.
type selfJSON struct {
	User struct {
		ID       string      `json:"id,omitempty"`
		Username string      `json:"username,omitempty"`
		Personal *personJSON `json:"personal,omitempty"`
	} `json:"user"`
	Permissions struct {
		Permissions []string `json:"permissions"`
	} `json:"permissions"`
	// Routes are circulation's routes that take a permission, by method
	// and path ("POST /circulation/renew-by-barcode"), each with whether
	// the caller may call it and, for the pages to say, its permission and
	// the roles that hold it: the pages ask these, from the one
	// permission table, and name no permission themselves.
	Routes map[string]routeAccess `json:"routes"`
}

// routeAccess is whether the caller may call a route, and what it takes.
type routeAccess struct {
	Allowed    bool   `json:"allowed"`
	Permission string `json:"permission"`
	Roles      string `json:"roles"`
}

// routesFor is circulation's routes that take a permission, each allowed
// when held names its permission (or allowed is true: a gateway decides).
func routesFor(held []string, all bool) map[string]routeAccess {
	out := map[string]routeAccess{}
	for _, r := range schemas.RoutesOf(schemas.ServiceCirculation) {
		if r.Permission == "" {
			continue
		}
		out[r.Method+" "+r.Path] = routeAccess{Allowed: all || slices.Contains(held, r.Permission), Permission: r.Permission,
			Roles: schemas.RolesHolding(r.Permission)}
	}
	return out
}

type personJSON struct {
	FirstName  string `json:"firstName,omitempty"`
	MiddleName string `json:"middleName,omitempty"`
	LastName   string `json:"lastName,omitempty"`
}

// self is GET /bl-users/_self: in jwt mode (401 without a valid token) the
// token's user, named by its account when it has one, and the token's
// permissions expanded, as FOLIO's answers with expandPermissions=true (the
// roles it names, then what each holds); behind a gateway the user it
// names and the permissions it granted of those the route desires (every
// permission of circulation's routes); with authentication off, the user
// the caller names, with every permission.
func (s *Server) self(c echo.Context) error {
	var out selfJSON
	switch s.cfg.Auth.Mode {
	case auth.JWT:
		claims, err := s.cfg.Auth.Identify(c.Request().Context(), c.Request().Header)
		if err != nil {
			return err
		}
		out.User.ID, out.User.Username = claims.UserID, claims.Subject
		out.Permissions.Permissions = claims.Held()
		if claims.UserID != "" {
			var a struct {
				Username string     `json:"username"`
				Personal personJSON `json:"personal"`
			}
			if err := s.svc.Console.GetJSON(c.Request().Context(), "/sign-in-accounts/"+url.PathEscape(claims.UserID), &a); err == nil {
				out.User.Username, out.User.Personal = a.Username, &a.Personal
			}
		}
	case auth.Gateway:
		// The gateway names the user, and grants of this route's desired
		// permissions (every permission of circulation's routes) those
		// the user holds: the answer is theirs, not everything.
		out.User.ID = c.Request().Header.Get(schemas.HeaderUserID)
		_ = json.Unmarshal([]byte(c.Request().Header.Get(schemas.HeaderPermissions)), &out.Permissions.Permissions)
	default:
		out.User.ID = c.Request().Header.Get(schemas.HeaderUserID)
		set, _ := schemas.PermissionSetNamed(schemas.RoleTenantAdmin)
		out.Permissions.Permissions = set.Permissions
	}
	if out.Permissions.Permissions == nil {
		out.Permissions.Permissions = []string{}
	}
	out.Routes = routesFor(out.Permissions.Permissions, s.cfg.Auth.Mode != auth.JWT && s.cfg.Auth.Mode != auth.Gateway)
	c.Response().Header().Set("Cache-Control", "no-store")
	return c.JSON(http.StatusOK, out)
}

// names looks people and service points up by id for one request, each
// once: a person by their account (who signs in), else as a patron; a
// service point by its record. One that cannot be read has no name.
type names struct {
	console Console
	ctx     context.Context
	valid   func(id string) bool
	seen    map[string]string
}

func (s *Server) names(ctx context.Context) *names {
	return &names{console: s.svc.Console, ctx: ctx, valid: s.Schemas().ValidUUID, seen: map[string]string{}}
}

// person is the name of the account or patron with this id, "" when
// neither is found.
func (n *names) person(id string) string { return n.known("person/", id) }

// username is the username of the account or user with this id: a
// self-check machine's account is named by it, as the door names it.
func (n *names) username(id string) string { return n.known("username/", id) }

// known is what look learnt of the account or user with this id under
// kind ("person/", "username/"), looking it up the first time.
func (n *names) known(kind, id string) string {
	if id == "" || !n.valid(id) {
		return ""
	}
	if name, ok := n.seen[kind+id]; ok {
		return name
	}
	n.look(id)
	return n.seen[kind+id]
}

// look reads the account or user with this id once, for person and
// username.
func (n *names) look(id string) {
	var r struct {
		Username string     `json:"username"`
		Personal personJSON `json:"personal"`
	}
	if err := n.console.GetJSON(n.ctx, "/sign-in-accounts/"+url.PathEscape(id), &r); err != nil {
		if err := n.console.GetJSON(n.ctx, "/users/"+url.PathEscape(id), &r); err != nil {
			r.Username, r.Personal = "", personJSON{}
		}
	}
	n.seen["person/"+id] = fullName(r.Personal, r.Username)
	n.seen["username/"+id] = r.Username
}

// servicePoint is the name of the service point with this id.
func (n *names) servicePoint(id string) string {
	if id == "" || !n.valid(id) {
		return ""
	}
	key := "sp/" + id
	if name, ok := n.seen[key]; ok {
		return name
	}
	var r struct {
		Name string `json:"name"`
	}
	name := ""
	if err := n.console.GetJSON(n.ctx, "/service-points/"+url.PathEscape(id), &r); err == nil {
		name = r.Name
	}
	n.seen[key] = name
	return name
}

// fullName is "first last", either alone when the other is missing, or
// fallback when both are.
func fullName(p personJSON, fallback string) string {
	name := strings.TrimSpace(p.FirstName + " " + p.LastName)
	if name == "" {
		return fallback
	}
	return name
}
