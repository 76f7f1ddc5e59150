// Package login is FOLIO's login for the tenant's accounts: passwords
// hashed with argon2id, sign-in that answers the same whether the name or
// the password was wrong, failures that lock an account and a client
// address for a while, access tokens holding the account's roles'
// permissions (the tokens both services verify in jwt mode), and refresh
// tokens that are rotated on use and revoked on logout.
package login

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"golang.org/x/crypto/argon2"

	"github.com/checkoutlock/schemas"
	"github.com/checkoutlock/schemas/auth"
	"github.com/checkoutlock/schemas/errs"
)

// Account is what signing in needs of an account.
type Account struct {
	ID, Username string
	Active       bool
	Roles        []string
}

// Store keeps accounts, password hashes, failures and refresh tokens, per
// tenant.
type Store interface {
	// Account finds an account by username, whatever its case, with its
	// password hash ("" when it has none); found is false when there is
	// no such account.
	Account(ctx context.Context, tenant, username string) (a Account, hash string, found bool, err error)
	// AccountByID is Account by the account's id.
	AccountByID(ctx context.Context, tenant, id string) (a Account, found bool, err error)
	// SetHash replaces the account's password hash; KindNotFound when
	// there is no such account.
	SetHash(ctx context.Context, tenant, accountID, hash string) error
	// LockedUntil is the latest lock among keys, zero when none is locked.
	LockedUntil(ctx context.Context, tenant string, keys []string) (time.Time, error)
	// Fail counts a failure for each key, within window; a key reaching
	// its maximum (max, by index) is locked for lockout.
	Fail(ctx context.Context, tenant string, keys []string, max []int, window, lockout time.Duration) error
	// Forget clears key's failures.
	Forget(ctx context.Context, tenant, key string) error
	// KeepRefresh stores a refresh token's hash for the account.
	KeepRefresh(ctx context.Context, tenant string, hash []byte, accountID string, expires time.Time) error
	// TakeRefresh revokes a live refresh token and returns its account;
	// found is false for a token that is unknown, revoked or expired.
	TakeRefresh(ctx context.Context, tenant string, hash []byte) (accountID string, found bool, err error)
	// SetPinHash replaces a patron's PIN hash; KindNotFound when there is
	// no such patron.
	SetPinHash(ctx context.Context, tenant, patronID, hash string) error
	// PinHash is a patron's PIN hash; found is false when they have none.
	PinHash(ctx context.Context, tenant, patronID string) (hash string, found bool, err error)
}

// Config is the login's configuration.
type Config struct {
	// Secret signs the access tokens (HS256): the AUTH_JWT_SECRET both
	// services verify with.
	Secret     string
	AccessTTL  time.Duration
	RefreshTTL time.Duration
	// MaxFailures locks an account after that many failed sign-ins within
	// FailureWindow, for Lockout; MaxAddressFailures does the same for a
	// client address.
	MaxFailures, MaxAddressFailures int
	FailureWindow, Lockout          time.Duration
	// Hashes bounds the password hashes computed at once (each holds
	// argon2's memory, 19 MiB).
	Hashes int
}

// Service signs people in.
type Service struct {
	store  Store
	cfg    Config
	hashes chan struct{}
	now    func() time.Time
	// dummy is a hash checked when no account matches, so that a wrong
	// name takes as long as a wrong password.
	dummy string
}

// New returns the login service.
func New(store Store, cfg Config) *Service {
	s := &Service{store: store, cfg: cfg, hashes: make(chan struct{}, max(1, cfg.Hashes)), now: time.Now}
	s.dummy, _ = s.hash(context.Background(), "not a password of anyone's")
	return s
}

// argon2id's parameters, OWASP's first recommendation: 19 MiB, two passes,
// one thread.
const (
	argonMemory  = 19 * 1024
	argonTime    = 2
	argonThreads = 1
	argonKeyLen  = 32
)

// hash is password's argon2id hash in the PHC string format.
func (s *Service) hash(ctx context.Context, password string) (string, error) {
	salt := make([]byte, 16)
	if _, err := rand.Read(salt); err != nil {
		return "", err
	}
	key, err := s.derive(ctx, password, salt, argonTime, argonMemory, argonThreads)
	if err != nil {
		return "", err
	}
	b64 := base64.RawStdEncoding
	return fmt.Sprintf("$argon2id$v=%d$m=%d,t=%d,p=%d$%s$%s", argon2.Version, argonMemory, argonTime, argonThreads,
		b64.EncodeToString(salt), b64.EncodeToString(key)), nil
}

// derive runs argon2id, at most cfg.Hashes at once.
func (s *Service) derive(ctx context.Context, password string, salt []byte, t, m uint32, p uint8) ([]byte, error) {
	select {
	case s.hashes <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	defer func() { <-s.hashes }()
	return argon2.IDKey([]byte(password), salt, t, m, p, argonKeyLen), nil
}

// matches says whether password is the one hash was made from.
func (s *Service) matches(ctx context.Context, password, hash string) (bool, error) {
	var v int
	var m, t uint32
	var p uint8
	parts := strings.Split(hash, "$")
	if len(parts) != 6 || parts[1] != "argon2id" {
		return false, errors.New("login: not an argon2id hash")
	}
	if _, err := fmt.Sscanf(parts[2], "v=%d", &v); err != nil {
		return false, err
	}
	if _, err := fmt.Sscanf(parts[3], "m=%d,t=%d,p=%d", &m, &t, &p); err != nil {
		return false, err
	}
	b64 := base64.RawStdEncoding
	salt, err := b64.DecodeString(parts[4])
	if err != nil {
		return false, err
	}
	want, err := b64.DecodeString(parts[5])
	if err != nil {
		return false, err
	}
	got, err := s.derive(ctx, password, salt, t, m, p)
	if err != nil {
		return false, err
	}
	return subtle.ConstantTimeCompare(got, want) == 1, nil
}

// Tokens are a sign-in's tokens and when they expire.
type Tokens struct {
	Access, Refresh               string
	AccessExpires, RefreshExpires time.Time
}

// The failure keys: per account (by username) and per client address.
func accountKey(username string) string { return "account:" + strings.ToLower(username) }
func addressKey(address string) string  { return "address:" + address }

// Failed is the answer to a wrong name or password: the same for both.
func Failed() *errs.Error {
	return errs.Errorf(errs.KindInvalid, schemas.CodeLoginFailed, "Wrong username or password")
}

// Login signs username in with password, from address: the tokens, or
// Failed, or a lock (KindTooManyRequests) while too many failures lock the
// account or the address.
func (s *Service) Login(ctx context.Context, tenant, username, password, address string) (Tokens, error) {
	keys := []string{accountKey(username), addressKey(address)}
	until, err := s.store.LockedUntil(ctx, tenant, keys)
	if err != nil {
		return Tokens{}, err
	}
	if now := s.now(); until.After(now) {
		return Tokens{}, locked(until.Sub(now))
	}
	a, hash, found, err := s.store.Account(ctx, tenant, username)
	if err != nil {
		return Tokens{}, err
	}
	if !found || hash == "" {
		hash = s.dummy
	}
	ok, err := s.matches(ctx, password, hash)
	if err != nil {
		return Tokens{}, err
	}
	if !found || !ok || !a.Active {
		if err := s.store.Fail(ctx, tenant, keys, []int{s.cfg.MaxFailures, s.cfg.MaxAddressFailures},
			s.cfg.FailureWindow, s.cfg.Lockout); err != nil {
			return Tokens{}, err
		}
		return Tokens{}, Failed()
	}
	if err := s.store.Forget(ctx, tenant, keys[0]); err != nil {
		return Tokens{}, err
	}
	return s.issue(ctx, tenant, a)
}

// locked is the answer while failures lock the sign-in.
func locked(wait time.Duration) *errs.Error {
	secs := int(wait.Seconds()) + 1
	e := errs.Errorf(errs.KindTooManyRequests, schemas.CodeLoginLocked, "Too many failed sign-ins: try again in %d s", secs)
	e.RetryAfter = wait
	return e
}

// issue makes a's tokens: an access token holding its roles' permissions,
// and a refresh token kept by its hash.
func (s *Service) issue(ctx context.Context, tenant string, a Account) (Tokens, error) {
	var perms []string
	for _, role := range a.Roles {
		set, ok := schemas.PermissionSetNamed(role)
		if !ok {
			continue
		}
		for _, p := range set.Permissions {
			if !slices.Contains(perms, p) {
				perms = append(perms, p)
			}
		}
	}
	now := s.now()
	t := Tokens{AccessExpires: now.Add(s.cfg.AccessTTL), RefreshExpires: now.Add(s.cfg.RefreshTTL)}
	var err error
	t.Access, err = auth.Mint(s.cfg.Secret, auth.Claims{Tenant: tenant, UserID: a.ID, Permissions: perms,
		RegisteredClaims: jwt.RegisteredClaims{Subject: a.Username}}, s.cfg.AccessTTL)
	if err != nil {
		return Tokens{}, err
	}
	raw := make([]byte, 32)
	if _, err := rand.Read(raw); err != nil {
		return Tokens{}, err
	}
	t.Refresh = base64.RawURLEncoding.EncodeToString(raw)
	if err := s.store.KeepRefresh(ctx, tenant, refreshHash(t.Refresh), a.ID, t.RefreshExpires); err != nil {
		return Tokens{}, err
	}
	return t, nil
}

func refreshHash(token string) []byte {
	h := sha256.Sum256([]byte(token))
	return h[:]
}

// ended is the answer to a refresh token that is unknown, revoked or
// expired: sign in again.
func ended() *errs.Error {
	return errs.Errorf(errs.KindUnauthorized, schemas.CodeSessionEnded, "The session has ended: sign in again")
}

// Refresh takes a refresh token, once: new tokens for its account.
func (s *Service) Refresh(ctx context.Context, tenant, refresh string) (Tokens, error) {
	if refresh == "" {
		return Tokens{}, ended()
	}
	id, found, err := s.store.TakeRefresh(ctx, tenant, refreshHash(refresh))
	if err != nil {
		return Tokens{}, err
	}
	if !found {
		return Tokens{}, ended()
	}
	a, found, err := s.store.AccountByID(ctx, tenant, id)
	if err != nil {
		return Tokens{}, err
	}
	if !found || !a.Active {
		return Tokens{}, ended()
	}
	return s.issue(ctx, tenant, a)
}

// Logout revokes a refresh token; an unknown one is no error.
func (s *Service) Logout(ctx context.Context, tenant, refresh string) error {
	if refresh == "" {
		return nil
	}
	_, _, err := s.store.TakeRefresh(ctx, tenant, refreshHash(refresh))
	return err
}

// SetPassword sets the account's password.
func (s *Service) SetPassword(ctx context.Context, tenant, accountID, password string) error {
	h, err := s.hash(ctx, password)
	if err != nil {
		return err
	}
	return s.store.SetHash(ctx, tenant, accountID, h)
}

// PIN lengths: a kiosk's keypad takes digits, and FOLIO's patron PINs are
// short; the upper bound keeps hashing bounded.
const (
	MinPin = 4
	MaxPin = 64
)

func pinKey(patronID string) string { return "pin:" + patronID }

// SetPin sets a patron's PIN (FOLIO's POST /patron-pin).
func (s *Service) SetPin(ctx context.Context, tenant, patronID, pin string) error {
	if n := len([]rune(pin)); n < MinPin || n > MaxPin {
		return errs.Errorf(errs.KindInvalid, schemas.CodeValidation, "A PIN has %d to %d characters", MinPin, MaxPin)
	}
	hash, err := s.hash(ctx, pin)
	if err != nil {
		return err
	}
	if err := s.store.SetPinHash(ctx, tenant, patronID, hash); err != nil {
		return err
	}
	return s.store.Forget(ctx, tenant, pinKey(patronID))
}

// VerifyPin checks a patron's PIN (FOLIO's POST /patron-pin/verify): nil
// when it matches; PIN_INVALID when it does not or the patron has none;
// PIN_LOCKED (KindTooManyRequests) while MaxFailures wrong ones within
// FailureWindow lock it, for Lockout.
func (s *Service) VerifyPin(ctx context.Context, tenant, patronID, pin string) error {
	keys := []string{pinKey(patronID)}
	until, err := s.store.LockedUntil(ctx, tenant, keys)
	if err != nil {
		return err
	}
	if now := s.now(); until.After(now) {
		wait := until.Sub(now)
		e := errs.Errorf(errs.KindTooManyRequests, schemas.CodePinLocked, "Too many wrong PINs: try again in %d s", int(wait.Seconds())+1)
		e.RetryAfter = wait
		return e
	}
	hash, found, err := s.store.PinHash(ctx, tenant, patronID)
	if err != nil {
		return err
	}
	if !found {
		hash = s.dummy
	}
	ok, err := s.matches(ctx, pin, hash)
	if err != nil {
		return err
	}
	if !found || !ok {
		if err := s.store.Fail(ctx, tenant, keys, []int{s.cfg.MaxFailures}, s.cfg.FailureWindow, s.cfg.Lockout); err != nil {
			return err
		}
		return errs.Errorf(errs.KindInvalid, schemas.CodePinInvalid, "Wrong PIN")
	}
	return s.store.Forget(ctx, tenant, keys[0])
}
