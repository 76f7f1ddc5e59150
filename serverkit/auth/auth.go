// Package auth is who may call the services: the three authentication
// modes, the bearer tokens both services accept in jwt mode (their claims
// are part of the contract), and the check of a route's permission. The
// permission every route requires is in package schemas (Routes).
//
// Tokens are verified with golang-jwt (signature, algorithm, expiry) and,
// for a JWKS URL, keys fetched and refreshed by keyfunc: no cryptography is
// written here.
package auth

import (
	"context"
	"crypto"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/checkoutlock/schemas/text"

	"github.com/MicahParks/keyfunc/v3"
	"github.com/golang-jwt/jwt/v5"
	"github.com/hashicorp/golang-lru/v2/expirable"

	"github.com/checkoutlock/schemas"
	"github.com/checkoutlock/schemas/errs"
)

// Mode is how a service learns who calls it.
type Mode string

// The modes.
const (
	// Gateway: a gateway in front of the service (Okapi, Kong) has verified
	// the caller and the route's permission; the service trusts the request.
	// It must be reachable only through the gateway.
	Gateway Mode = "gateway"
	// JWT: the service verifies the caller's token itself, and the route's
	// permission in it.
	JWT Mode = "jwt"
	// None: anyone may do anything. Only when asked for explicitly.
	None Mode = "none"
)

// ParseMode reads a mode; there is no default.
func ParseMode(s string) (Mode, error) {
	switch m := Mode(s); m {
	case Gateway, JWT, None:
		return m, nil
	case "":
		return "", errors.New("AUTH_MODE must be set: gateway (behind Okapi or Kong, which verify callers), " +
			"jwt (the service verifies tokens: also set AUTH_JWT_SECRET, AUTH_JWT_PUBLIC_KEY_FILE or AUTH_JWKS_URL) " +
			"or none (anyone may do anything)")
	default:
		return "", fmt.Errorf("AUTH_MODE must be gateway, jwt or none, got %q", s)
	}
}

// Claims are a token's claims: FOLIO's (Okapi puts sub, user_id and tenant
// in its tokens) plus the permissions the bearer holds. A permission may be
// a permission set's name (a role, schemas.PermissionSets), as in FOLIO,
// where a set is itself a permission: the token holds every permission of
// the set (see Held). A sign-in's token names its account's roles, so it
// stays small whatever they hold.
type Claims struct {
	Tenant      string   `json:"tenant"`
	UserID      string   `json:"user_id,omitempty"`
	Permissions []string `json:"permissions"`
	// SessionID names the sign-in a token was issued for (storage's
	// login): such a token stops working when its session ends (see
	// Sessions). Tokens of an identity provider, and module tokens, name
	// none.
	SessionID string `json:"session_id,omitempty"`
	jwt.RegisteredClaims

	// Module is the module whose token this is (its issuer), when it is a
	// trusted module's token (see TrustedModule); "" for a user's.
	Module string `json:"-"`

	// held is what Permissions hold (Held) as a set, made once when a
	// verified token is remembered (see Verify); nil until then.
	held map[string]struct{}
}

// Caller is who a request acts for, for logs and audit: the token's user
// id or subject, or X-Okapi-User-Id where the gateway vouches for it.
func (c *Claims) Caller() string {
	if c.UserID != "" {
		return c.UserID
	}
	return c.Subject
}

// Has reports whether the token holds permission, itself or through a
// permission set it names.
func (c *Claims) Has(permission string) bool {
	held := c.held
	if held == nil {
		held = expand(c.Permissions)
	}
	_, ok := held[permission]
	return ok
}

// Held is every permission the token holds, each once: those it names,
// each permission set among them followed by the set's permissions.
func (c *Claims) Held() []string {
	var out []string
	seen := map[string]struct{}{}
	for _, p := range c.Permissions {
		set, _ := schemas.PermissionSetNamed(p)
		for _, q := range append([]string{p}, set.Permissions...) {
			if _, ok := seen[q]; !ok {
				seen[q] = struct{}{}
				out = append(out, q)
			}
		}
	}
	return out
}

// expand is the permissions a token naming permissions holds (Held), as
// a set.
func expand(permissions []string) map[string]struct{} {
	held := (&Claims{Permissions: permissions}).Held()
	m := make(map[string]struct{}, len(held))
	for _, p := range held {
		m[p] = struct{}{}
	}
	return m
}

// KeyConfig says where jwt mode's keys come from: exactly one of them.
type KeyConfig struct {
	// Secret is an HS256 shared secret.
	Secret string
	// PublicKeyFile is a PEM file with an RSA (RS256) or EC (ES256) public
	// key.
	PublicKeyFile string
	// JWKSURL serves the keys (RS256, ES256) as a JSON Web Key Set.
	JWKSURL string
}

// Verifier verifies tokens for jwt mode.
type Verifier struct {
	keyfunc jwt.Keyfunc
	parser  *jwt.Parser
	// userMethods are the algorithms users' tokens may be signed with.
	userMethods []string
	// modules are the modules whose tokens are trusted, by name, and
	// audience is this service, as their tokens must name it.
	modules  map[string]trusted
	audience string
	// verified remembers the claims of tokens that verified, by the token,
	// for a short while: a self-check machine sends the same token with
	// every scan, and circulation passes it on to storage with every call,
	// so most tokens are seen again within seconds. Only tokens that
	// verified are remembered (a caller cannot fill it with tokens of its
	// own making), never past their expiry, and at most verifiedMax of
	// them, each no larger than the header block a request may carry.
	verified *expirable.LRU[string, *Claims]
}

// Verified tokens are remembered for at most verifiedTTL (a key removed
// from the JWKS stops being honoured within it) and at most verifiedMax of
// them.
const (
	verifiedTTL = time.Minute
	verifiedMax = 10000
)

// NewVerifier returns a verifier for the keys cfg names. A JWKS is fetched
// now and refreshed in the background until ctx is done.
func NewVerifier(ctx context.Context, cfg KeyConfig) (*Verifier, error) {
	given := 0
	for _, s := range []string{cfg.Secret, cfg.PublicKeyFile, cfg.JWKSURL} {
		if s != "" {
			given++
		}
	}
	if given != 1 {
		return nil, errors.New("jwt mode needs exactly one of AUTH_JWT_SECRET, AUTH_JWT_PUBLIC_KEY_FILE and AUTH_JWKS_URL")
	}
	v := &Verifier{verified: expirable.NewLRU[string, *Claims](verifiedMax, nil, verifiedTTL)}
	switch {
	case cfg.Secret != "":
		if len(cfg.Secret) < 32 {
			return nil, errors.New("AUTH_JWT_SECRET must be at least 32 characters")
		}
		secret := []byte(cfg.Secret)
		v.keyfunc = func(*jwt.Token) (any, error) { return secret, nil }
		v.userMethods = []string{"HS256"}
	case cfg.PublicKeyFile != "":
		pem, err := os.ReadFile(cfg.PublicKeyFile)
		if err != nil {
			return nil, fmt.Errorf("AUTH_JWT_PUBLIC_KEY_FILE: %w", err)
		}
		var key crypto.PublicKey
		if key, err = jwt.ParseRSAPublicKeyFromPEM(pem); err != nil {
			if key, err = jwt.ParseECPublicKeyFromPEM(pem); err != nil {
				return nil, errors.New("AUTH_JWT_PUBLIC_KEY_FILE: not a PEM RSA or EC public key")
			}
		}
		v.keyfunc = func(*jwt.Token) (any, error) { return key, nil }
		v.userMethods = []string{"RS256", "ES256"}
	default:
		k, err := keyfunc.NewDefaultCtx(ctx, []string{cfg.JWKSURL})
		if err != nil {
			return nil, fmt.Errorf("AUTH_JWKS_URL: %w", err)
		}
		v.keyfunc = k.Keyfunc
		v.userMethods = []string{"RS256", "ES256"}
	}
	// Module tokens are ES256 whatever the users' keys are; which key and
	// algorithm a token is held to is moduleKeyfunc's choice.
	v.parser = jwt.NewParser(jwt.WithValidMethods(append(slices.Clone(v.userMethods), "ES256")), jwt.WithExpirationRequired())
	return v, nil
}

// TrustModules makes the verifier accept the tokens of modules, addressed
// to audience (this service), each within its declared permissions.
func (v *Verifier) TrustModules(audience string, modules []TrustedModule) {
	v.audience = audience
	v.modules = make(map[string]trusted, len(modules))
	for _, m := range modules {
		allowed := make(map[string]struct{}, len(m.Permissions))
		for _, p := range m.Permissions {
			allowed[p] = struct{}{}
		}
		v.modules[m.Name] = trusted{key: m.Key, allowed: allowed}
	}
}

// Verify checks a token's signature, algorithm and expiry and returns its
// claims. "alg": "none" and every algorithm but the configured ones are
// refused.
// The claims returned are shared: callers must not change them.
func (v *Verifier) Verify(token string) (*Claims, error) {
	if c, ok := v.verified.Get(token); ok && c.ExpiresAt != nil && time.Now().Before(c.ExpiresAt.Time) {
		return c, nil
	}
	var c Claims
	if _, err := v.parser.ParseWithClaims(token, &c, v.moduleKeyfunc); err != nil {
		return nil, err
	}
	if _, ok := v.modules[c.Issuer]; ok {
		if err := v.checkModule(&c); err != nil {
			return nil, err
		}
	}
	c.held = expand(c.Permissions)
	// The key is a copy: token may be a slice of a larger header buffer.
	v.verified.Add(strings.Clone(token), &c)
	return &c, nil
}

// Mint signs claims with an HS256 secret: for development tokens and tests.
// Tokens expire after ttl.
func Mint(secret string, c Claims, ttl time.Duration) (string, error) {
	now := time.Now()
	c.IssuedAt = jwt.NewNumericDate(now)
	c.ExpiresAt = jwt.NewNumericDate(now.Add(ttl))
	return jwt.NewWithClaims(jwt.SigningMethodHS256, c).SignedString([]byte(secret))
}

// RoleClaims are the claims of a token holding one of the roles
// (schemas.PermissionSets) for tenant, for user: the token names the role.
func RoleClaims(role, tenant, user string) (Claims, error) {
	if _, ok := schemas.PermissionSetNamed(role); !ok {
		return Claims{}, fmt.Errorf("no role %q", role)
	}
	return Claims{Tenant: tenant, UserID: user, Permissions: []string{role},
		RegisteredClaims: jwt.RegisteredClaims{Subject: strings.TrimPrefix(role, "circulation.role.")}}, nil
}

// unauthorized is a request refused because it has no token, or one that
// does not hold (401); cause is why, for logs, never sent.
func unauthorized(code, message string, cause error) *errs.Error {
	return errs.Errorf(errs.KindUnauthorized, code, "%s", message).Because(cause)
}

// forbidden is a valid token without the permission the request needs
// (403), naming it in the parameter "permission".
func forbidden(permission, message string, cause error) *errs.Error {
	return errs.Errorf(errs.KindForbidden, CodeForbidden, "%s", message).With("permission", permission).Because(cause)
}

// The codes of a refusal.
const (
	CodeAuthRequired = "AUTH_REQUIRED"
	CodeInvalidToken = "INVALID_TOKEN"
	CodeForbidden    = schemas.CodeForbidden
)

// AccessCookie is the cookie of a sign-in's access token
// (POST /authn/login-with-expiry), as FOLIO names it.
const AccessCookie = "folioAccessToken"

// Token is the bearer token of a request: X-Okapi-Token, or the
// Authorization header's Bearer token, or else a page's sign-in cookie
// (see cookieToken). When both headers are sent they must carry the same
// token (see Authorize).
func Token(h http.Header) string {
	t, _ := tokens(h)
	return t
}

// errTwoTokens is a request carrying two different tokens: which one
// speaks for the caller would be a guess, so neither does.
var errTwoTokens = errors.New("X-Okapi-Token and Authorization carry different tokens")

// tokens is Token, failing for a request whose two headers carry
// different tokens.
func tokens(h http.Header) (string, error) {
	okapi := h.Get(schemas.HeaderToken)
	var bearer string
	if a := h.Get("Authorization"); len(a) > 7 && strings.EqualFold(a[:7], "Bearer ") {
		bearer = strings.TrimSpace(a[7:])
	}
	switch {
	case okapi != "" && bearer != "" && okapi != bearer:
		return "", errTwoTokens
	case okapi != "":
		return okapi, nil
	case bearer != "":
		return bearer, nil
	}
	return cookieToken(h), nil
}

// cookieToken is the access token in a page's sign-in cookie, for a request
// that only a page of the service's own origin can make: it must carry
// X-Okapi-Tenant, a header no cross-site form can send and no cross-site
// script can send without a CORS preflight, which neither service answers;
// and a browser that says where a request comes from (Sec-Fetch-Site) must
// say the same origin. The cookie itself is SameSite=Strict.
func cookieToken(h http.Header) string {
	if h.Get(schemas.HeaderTenant) == "" {
		return ""
	}
	if site := h.Get("Sec-Fetch-Site"); site != "" && site != "same-origin" {
		return ""
	}
	k, err := (&http.Request{Header: h}).Cookie(AccessCookie)
	if err != nil {
		return ""
	}
	return k.Value
}

// Authorize checks that the request with headers h may use a route that
// requires permission, in jwt mode: one token, valid, for the request's
// tenant, holding the permission (a module's token holding only what its
// module declared). It returns the token's claims.
func (v *Verifier) Authorize(h http.Header, permission string) (*Claims, error) {
	claims, err := v.Identify(h)
	if err != nil {
		return nil, err
	}
	if !claims.Has(permission) {
		return nil, forbidden(permission, "Access requires permission: "+permission, nil)
	}
	return claims, nil
}

// Identify is who the request with headers h is, in jwt mode, whatever it
// may do: one token, valid, for the request's tenant (a module's token
// holding only what its module declared). It returns the token's claims.
func (v *Verifier) Identify(h http.Header) (*Claims, error) {
	token, err := tokens(h)
	if err != nil {
		return nil, unauthorized(CodeInvalidToken, "Send one token: X-Okapi-Token and Authorization carry different ones", err)
	}
	if token == "" {
		return nil, unauthorized(CodeAuthRequired, "A token is required: send it in X-Okapi-Token or as Authorization: Bearer", nil)
	}
	claims, err := v.Verify(token)
	var u *undeclared
	if errors.As(err, &u) {
		return nil, forbidden(u.permission, "A module token may hold only its module's declared permissions, not "+u.permission, err)
	}
	if err != nil {
		return nil, unauthorized(CodeInvalidToken, "The token is not valid", err)
	}
	// A missing or malformed tenant is answered 400 by the service itself.
	if tenant := h.Get(schemas.HeaderTenant); schemas.ValidTenant(tenant) && claims.Tenant != tenant {
		return nil, unauthorized(CodeInvalidToken, "The token is not for tenant "+truncate(tenant), fmt.Errorf("token tenant %q", claims.Tenant))
	}
	return claims, nil
}

// truncate is a client's value as an answer repeats it (schemas.Echoed).
func truncate(s string) string { return text.Echoed(s) }

// Guard is a service's authentication: its mode and, in jwt mode, its
// verifier.
type Guard struct {
	Mode     Mode
	Verifier *Verifier
	// Warnings are what an operator must know of this configuration (a
	// published development key in use, a gateway trusted blindly): said
	// at start-up and on /admin/health.
	Warnings []string
	// Sessions, in jwt mode, refuses the tokens of sessions that have
	// ended; nil checks none.
	Sessions *Sessions
}

// Identity is who a request acts for: the user (an id, or a token's
// subject) and, when a module calls on the user's behalf, the module.
// Unverified marks what a refused token claims, not proven.
type Identity struct {
	User       string
	Module     string
	Unverified bool
}

// Unverified is what the token of a request claims of its caller without
// its signature checked, for the log line of a refused request: the user
// and, as the module, the issuer (a module token's issuer is its module),
// each at most 64 characters; empty without a readable token.
func Unverified(h http.Header) Identity {
	token, err := tokens(h)
	if err != nil || token == "" {
		return Identity{}
	}
	var c Claims
	if _, _, err := jwt.NewParser().ParseUnverified(token, &c); err != nil {
		return Identity{}
	}
	who := Identity{User: truncate(c.Caller()), Module: truncate(c.Issuer), Unverified: true}
	if who.User == "" && who.Module == "" {
		return Identity{}
	}
	return who
}

// Identify is who the request with headers h is, in jwt mode, whatever it
// may do (Verifier.Identify), refusing a token whose session has ended.
func (g Guard) Identify(ctx context.Context, h http.Header) (*Claims, error) {
	claims, err := g.Verifier.Identify(h)
	if err != nil {
		return nil, err
	}
	if err := g.checkSession(ctx, claims); err != nil {
		return nil, err
	}
	return claims, nil
}

// Check decides whether a request may use a route of service, by the
// permission schemas.Routes names for it. route is the router's path, with
// ":name" or "{name}" parameters. Open routes, and routes not in the table
// (which the service answers 404 or 405), need nothing. It returns who the
// request acts for (empty when unknown) and, in jwt mode, the token's claims.
// A refused request's identity is what is known of its caller, for the
// log: a valid token's user and module when it lacks the permission or
// its session has ended, and otherwise what an unverified token claims,
// marked as such.
func (g Guard) Check(ctx context.Context, service, method, route string, h http.Header) (Identity, *Claims, error) {
	if method == http.MethodHead {
		method = http.MethodGet
	}
	permission, known := schemas.PermissionFor(service, method, route)
	if !known || permission == "" {
		return Identity{}, nil, nil
	}
	if g.Mode == JWT {
		claims, err := g.Verifier.Identify(h)
		if err != nil {
			who := Unverified(h)
			if errs.IsKind(err, errs.KindForbidden) {
				// A module token holding what its module did not
				// declare: its signature held, so it is who it says.
				who.Unverified = false
			}
			return who, nil, err
		}
		who := Identity{User: claims.Caller(), Module: claims.Module}
		if !claims.Has(permission) {
			return who, nil, forbidden(permission, "Access requires permission: "+permission, nil)
		}
		if err := g.checkSession(ctx, claims); err != nil {
			return who, nil, err
		}
		return who, claims, nil
	}
	// The gateway vouches for X-Okapi-User-Id; with authentication off,
	// it is the caller's word.
	return Identity{User: h.Get(schemas.HeaderUserID)}, nil, nil
}

// Require checks, in jwt mode, a permission beyond the route's (claims
// from Check; nil outside jwt mode, where the gateway decided).
func (g Guard) Require(claims *Claims, permission string) error {
	if !g.Holds(claims, permission) {
		return forbidden(permission, "Access requires permission: "+permission, nil)
	}
	return nil
}

// Holds reports whether the caller holds permission beyond the route's:
// in jwt mode, whether the token does; in the other modes, always.
func (g Guard) Holds(claims *Claims, permission string) bool {
	return g.Mode != JWT || (claims != nil && claims.Has(permission))
}

// Pattern turns a router's path ("/users/:id") into FOLIO's pathPattern
// ("/users/{id}").
func Pattern(route string) string {
	parts := strings.Split(route, "/")
	for i, p := range parts {
		if strings.HasPrefix(p, ":") {
			parts[i] = "{" + p[1:] + "}"
		}
	}
	return strings.Join(parts, "/")
}

// Health is the liveness answer: it names the mode, and warns while
// authentication is off, a gateway is trusted, or a published development
// key is in use.
func (g Guard) Health() map[string]any {
	h := map[string]any{"status": "UP", "authMode": string(g.Mode)}
	if len(g.Warnings) > 0 {
		h["warnings"] = g.Warnings
	}
	return h
}

// GuardConfig is a service's authentication configuration.
type GuardConfig struct {
	// Mode is gateway, jwt or none.
	Mode string
	// Keys verify users' tokens in jwt mode.
	Keys KeyConfig
	// Service is the service itself: the audience a module's token for it
	// names.
	Service string
	// TrustedModules are the modules whose tokens jwt mode accepts.
	TrustedModules []TrustedModule
	// Warnings are the configuration's own (see Guard.Warnings).
	Warnings []string
}

// The warnings of each mode.
const (
	WarningNone    = "authentication is off (AUTH_MODE=none): anyone who reaches this service may read and change everything"
	WarningGateway = "AUTH_MODE=gateway: this service trusts every request as the gateway sent it (X-Okapi-User-Id included); " +
		"it must be reachable only through Okapi or Kong"
)

// NewGuard builds the authentication a service's configuration asks for
// (mode and, for jwt, keys and trusted modules), and says at start-up what
// it means: a warning for each thing an operator must know.
func NewGuard(ctx context.Context, cfg GuardConfig, logger *slog.Logger) (Guard, error) {
	m, err := ParseMode(cfg.Mode)
	if err != nil {
		return Guard{}, err
	}
	g := Guard{Mode: m, Warnings: slices.Clone(cfg.Warnings)}
	switch m {
	case JWT:
		if g.Verifier, err = NewVerifier(ctx, cfg.Keys); err != nil {
			return Guard{}, err
		}
		g.Verifier.TrustModules(cfg.Service, cfg.TrustedModules)
		names := make([]string, len(cfg.TrustedModules))
		for i, t := range cfg.TrustedModules {
			names[i] = t.Name
		}
		logger.Info("authentication: every route but health, readiness and metrics needs a token holding its permission",
			slog.String("mode", cfg.Mode), slog.Any("trusted_modules", names))
	case Gateway:
		g.Warnings = append(g.Warnings, WarningGateway)
	case None:
		g.Warnings = append(g.Warnings, WarningNone)
	}
	for _, w := range g.Warnings {
		logger.Warn(w, slog.String("mode", cfg.Mode))
	}
	return g, nil
}
