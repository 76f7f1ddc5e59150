// Package login is FOLIO's login for the tenant's accounts: passwords
// hashed with argon2id, sign-in that answers the same whether the name or
// the password was wrong, attempts counted before they are checked (so
// that a burst of guesses gets no more checks than the limits allow), and
// failures that lock the account at one client address, or the address,
// for a while, while an account's failures elsewhere only slow it down;
// sessions whose access tokens hold the account's roles' permissions (the
// tokens both services verify in jwt mode) and whose refresh tokens are
// rotated on use; a session ends on logout, when a refresh token is used
// twice, when its account's roles change, and with its account.
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
	"sync"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/google/uuid"
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

// Limit is one count an attempt is held to: at most Max attempts counted
// on Key within Window of the first. The attempt that reaches Max locks
// Key for Lockout (zero: until the window ends), and while Key is locked
// or at Max every attempt is refused before anything is checked. An
// attempt that succeeds gives its count back, so only what failed (or is
// still being checked) stays counted.
type Limit struct {
	Key     string
	Max     int
	Window  time.Duration
	Lockout time.Duration
}

// Count is a key's count as kept: the attempts counted since FirstAt
// that did not succeed (or are still being checked), and the end of the
// lock they set, if any.
type Count struct {
	Failures    int
	FirstAt     time.Time
	LockedUntil *time.Time
}

// Decide is what one attempt held to l does to its key's count c at now:
// the count with the attempt in it, or, when the key is locked or full,
// c as it was and how long until the key lets attempts in again. A window
// that has passed, or a lock that has, starts the count again. The
// attempt that fills the count locks the key at once: it is still checked,
// and gives the lock back if it succeeds (Store.Succeed).
func Decide(l Limit, c Count, now time.Time) (Count, time.Duration) {
	if c.LockedUntil != nil {
		if c.LockedUntil.After(now) {
			return c, c.LockedUntil.Sub(now)
		}
		c = Count{FirstAt: now}
	}
	if now.Sub(c.FirstAt) >= l.Window {
		c = Count{FirstAt: now}
	}
	if c.Failures >= l.Max {
		return c, c.FirstAt.Add(l.Window).Sub(now)
	}
	c.Failures++
	if c.Failures >= l.Max {
		until := c.FirstAt.Add(l.Window)
		if l.Lockout > 0 {
			until = now.Add(l.Lockout)
		}
		c.LockedUntil = &until
	}
	return c, 0
}

// Store keeps accounts, password hashes, counted attempts, sessions and
// refresh tokens, per tenant.
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
	// Count counts one attempt against every limit, atomically: all of
	// them counted, or none when any is locked or at its maximum, and
	// then wait is how long until the last of those lets attempts in
	// again. Nothing else may decide on these counts between reading and
	// counting them. filled lists the keys whose count this attempt
	// filled (locking them).
	Count(ctx context.Context, tenant string, limits []Limit) (wait time.Duration, filled []string, err error)
	// Succeed settles a counted attempt whose secret matched, atomically:
	// unless guard ("" for none) is locked by a count other attempts
	// filled while this one was checked (filledGuard says whether this
	// one filled it), the attempt's count is given back on each limit,
	// lifting the locks it set, signedIn (when not "") is recorded as
	// signed in now, and granted is true. Otherwise nothing changes: the
	// attempt stays counted, as a failure.
	Succeed(ctx context.Context, tenant string, limits []Limit, guard string, filledGuard bool, signedIn string) (granted bool, err error)
	// SignedIn says whether key signed in within the last d.
	SignedIn(ctx context.Context, tenant, key string, d time.Duration) (bool, error)
	// Forget clears key's count.
	Forget(ctx context.Context, tenant, key string) error
	// StartSession stores a new session of the account, living until
	// expires, with its first refresh token's hash.
	StartSession(ctx context.Context, tenant, sessionID, accountID string, refreshHash []byte, expires time.Time) error
	// Rotate takes a live refresh token of a live session, once, and
	// keeps next in its place in the session, which then lives until
	// expires; found is false for a token that is unknown, revoked or
	// expired, or whose session has ended. A token already taken ends its
	// session: it was used twice, and one of the two is not its owner.
	Rotate(ctx context.Context, tenant string, hash, next []byte, expires time.Time) (accountID, sessionID string, found bool, err error)
	// EndSession ends a session, named by its id or by one of its
	// refresh tokens' hashes (whichever is given), for reason; ending an
	// unknown or ended one is no error.
	EndSession(ctx context.Context, tenant, sessionID string, refreshHash []byte, reason string) error
	// SessionAlive says whether a session has not ended nor expired; a
	// disabled account's have ended, and so have those of an account
	// whose roles changed since; a deleted one's are gone.
	SessionAlive(ctx context.Context, tenant, sessionID string) (bool, error)
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
	// MaxFailures wrong passwords for one account from one client address
	// within FailureWindow lock that pair for Lockout; MaxAddressFailures
	// from one address lock the address, whatever the account. Either is
	// the limit of wrong PINs of one patron too (MaxFailures).
	MaxFailures, MaxAddressFailures int
	FailureWindow, Lockout          time.Duration
	// AccountRate bounds the passwords of one account checked per minute
	// from addresses it has not signed in from within KnownFor: guesses
	// spread over many addresses slow the account down there, and lock
	// it out nowhere.
	AccountRate int
	KnownFor    time.Duration
	// Hashes bounds the password hashes computed at once (each holds
	// argon2's memory, 19 MiB).
	Hashes int
	// Checked, when set, is told of every secret checked ("password" or
	// "pin") and whether it matched; Refused of every attempt refused
	// before it was checked.
	Checked func(kind string, matched bool)
	Refused func(kind string)
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

	// arrivals are the attempts on each guarded key (a pair, a patron's
	// PIN) this instance is handling now, by tenant and key: an entry
	// lives while one is.
	mu       sync.Mutex
	arrivals map[string]*arrival
}

// arrival is the attempts on one guarded key in progress here: how many
// have arrived in all (each attempt's number) and how many are in
// progress.
type arrival struct {
	seq      uint64
	inFlight int
}

// attempt is one attempt on a guarded key in progress: before is how many
// others were in progress when it arrived, and seq its number.
type attempt struct {
	key    string
	seq    uint64
	before int
}

// arrive records an attempt on key arriving, before anything else is done
// for it.
func (s *Service) arrive(key string) attempt {
	s.mu.Lock()
	defer s.mu.Unlock()
	a := s.arrivals[key]
	if a == nil {
		a = &arrival{}
		s.arrivals[key] = a
	}
	a.seq++
	a.inFlight++
	return attempt{key: key, seq: a.seq, before: a.inFlight - 1}
}

// others is how many other attempts on at's key were in progress here at
// some time while at was: those in progress when it arrived and those
// that arrived since.
func (s *Service) others(at attempt) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return at.before + int(s.arrivals[at.key].seq-at.seq)
}

// leave records the end of an attempt.
func (s *Service) leave(at attempt) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if a := s.arrivals[at.key]; a != nil {
		if a.inFlight--; a.inFlight <= 0 {
			delete(s.arrivals, at.key)
		}
	}
}

// New returns the login service.
func New(store Store, cfg Config) *Service {
	if cfg.Checked == nil {
		cfg.Checked = func(string, bool) {}
	}
	if cfg.Refused == nil {
		cfg.Refused = func(string) {}
	}
	s := &Service{store: store, cfg: cfg, hashes: make(chan struct{}, max(1, cfg.Hashes)), now: time.Now, arrivals: map[string]*arrival{}}
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

// The counts a sign-in is held to: per client address and account (the
// pair), per address whatever the account, and per account from addresses
// it has not signed in from. An address is an IP address, which holds no
// "|".
func pairKey(address, username string) string {
	return "pair:" + address + "|" + strings.ToLower(username)
}
func addressKey(address string) string  { return "address:" + address }
func accountKey(username string) string { return "account:" + strings.ToLower(username) }

// Failed is the answer to a wrong name or password: the same for both.
func Failed() *errs.Error {
	return errs.Errorf(errs.KindInvalid, schemas.CodeLoginFailed, "Wrong username or password")
}

// limits are the counts a sign-in of username from address is held to:
// the pair and the address always; the account too unless it signed in
// from this address within KnownFor, so that guesses from elsewhere slow
// the places it is used from down no more than they lock them out.
func (s *Service) limits(ctx context.Context, tenant, username, address string) ([]Limit, error) {
	pair := pairKey(address, username)
	limits := []Limit{
		{Key: pair, Max: s.cfg.MaxFailures, Window: s.cfg.FailureWindow, Lockout: s.cfg.Lockout},
		{Key: addressKey(address), Max: s.cfg.MaxAddressFailures, Window: s.cfg.FailureWindow, Lockout: s.cfg.Lockout},
	}
	if s.cfg.AccountRate <= 0 {
		return limits, nil
	}
	known, err := s.store.SignedIn(ctx, tenant, pair, s.cfg.KnownFor)
	if err != nil {
		return nil, err
	}
	if !known {
		limits = append(limits, Limit{Key: accountKey(username), Max: s.cfg.AccountRate, Window: time.Minute})
	}
	return limits, nil
}

// Login signs username in with password, from address: the tokens, or
// Failed, or a lock (KindTooManyRequests) while too many attempts lock the
// pair, the address or, from an address the account has not signed in
// from, the account.
//
// The attempt is counted before the password is checked (Store.Count),
// and refused without a check when a count is full: a burst of guesses at
// once has no more of them checked than the limits allow, whatever their
// order. A success gives its own count back; a failure leaves it; and the
// right password in a burst from its pair larger than MaxFailures (as this
// instance saw it arrive), or in one that filled the pair's count while it
// was checked (Store.Succeed), is refused as locked: a burst of guesses
// opens nothing, whatever is among them.
func (s *Service) Login(ctx context.Context, tenant, username, password, address string) (Tokens, error) {
	// As accounts compare names: a variant of a username is the username,
	// for its counts as for its account.
	username = schemas.NormalUsername(username)
	at := s.arrive(tenant + "\x00" + pairKey(address, username))
	defer s.leave(at)
	limits, err := s.limits(ctx, tenant, username, address)
	if err != nil {
		return Tokens{}, err
	}
	wait, filled, err := s.store.Count(ctx, tenant, limits)
	if err != nil {
		return Tokens{}, err
	}
	if wait > 0 {
		s.cfg.Refused("password")
		return Tokens{}, locked(wait)
	}
	pair := limits[0].Key
	a, hash, found, err := s.store.Account(ctx, tenant, username)
	if err != nil {
		return Tokens{}, s.unchecked(ctx, tenant, limits, err)
	}
	if !found || hash == "" {
		hash = s.dummy
	}
	ok, err := s.matches(ctx, password, hash)
	if err != nil {
		return Tokens{}, s.unchecked(ctx, tenant, limits, err)
	}
	ok = ok && found && a.Active
	s.cfg.Checked("password", ok)
	if !ok {
		return Tokens{}, Failed()
	}
	// The right password, but in a burst from the same place larger than
	// the limit, or one that filled the pair's count (at any instance)
	// while it was checked: a guess among guesses, which opens nothing and
	// stays counted.
	granted := s.others(at) < s.cfg.MaxFailures
	if granted {
		if granted, err = s.store.Succeed(ctx, tenant, limits, pair, slices.Contains(filled, pair), pair); err != nil {
			return Tokens{}, err
		}
	}
	if !granted {
		s.cfg.Refused("password")
		return Tokens{}, locked(s.cfg.Lockout)
	}
	return s.issue(ctx, tenant, a)
}

// unchecked gives back the count of an attempt whose secret was never
// checked (the database failed, the caller went away) and returns err:
// only a check that was made is a guess.
func (s *Service) unchecked(ctx context.Context, tenant string, limits []Limit, err error) error {
	if _, gerr := s.store.Succeed(context.WithoutCancel(ctx), tenant, limits, "", false, ""); gerr != nil {
		return errors.Join(err, gerr)
	}
	return err
}

// locked is the answer while failures lock the sign-in.
func locked(wait time.Duration) *errs.Error {
	secs := int(wait.Seconds()) + 1
	e := errs.Errorf(errs.KindTooManyRequests, schemas.CodeLoginLocked, "Too many failed sign-ins: try again in %d s", secs)
	e.RetryAfter = wait
	return e
}

// roles are a's roles that exist, each once: a token names them, and
// each service expands them from the one permission table (auth.Claims),
// so a token is as small for the tenant's administrator as for a kiosk.
func roles(a Account) []string {
	var out []string
	for _, role := range a.Roles {
		if _, ok := schemas.PermissionSetNamed(role); ok && !slices.Contains(out, role) {
			out = append(out, role)
		}
	}
	return out
}

// issue starts a session of a's: an access token naming it and a's
// roles, and its first refresh token, kept by its hash.
func (s *Service) issue(ctx context.Context, tenant string, a Account) (Tokens, error) {
	sid := uuid.NewString()
	refresh, err := newRefresh()
	if err != nil {
		return Tokens{}, err
	}
	t, err := s.tokens(tenant, a, sid, refresh)
	if err != nil {
		return Tokens{}, err
	}
	if err := s.store.StartSession(ctx, tenant, sid, a.ID, refreshHash(refresh), t.RefreshExpires); err != nil {
		return Tokens{}, err
	}
	return t, nil
}

// tokens are the tokens of session sid of a's: a new access token and
// refresh.
func (s *Service) tokens(tenant string, a Account, sid, refresh string) (Tokens, error) {
	now := s.now()
	t := Tokens{Refresh: refresh, AccessExpires: now.Add(s.cfg.AccessTTL), RefreshExpires: now.Add(s.cfg.RefreshTTL)}
	var err error
	t.Access, err = auth.Mint(s.cfg.Secret, auth.Claims{Tenant: tenant, UserID: a.ID, Permissions: roles(a), SessionID: sid,
		RegisteredClaims: jwt.RegisteredClaims{Subject: a.Username}}, s.cfg.AccessTTL)
	return t, err
}

// newRefresh is a new refresh token: 32 random bytes.
func newRefresh() (string, error) {
	raw := make([]byte, 32)
	if _, err := rand.Read(raw); err != nil {
		return "", err
	}
	return base64.RawURLEncoding.EncodeToString(raw), nil
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

// Refresh takes a refresh token, once: new tokens of its session. A
// token taken before ends its session (Store.Rotate), and so do a
// disabled or deleted account.
func (s *Service) Refresh(ctx context.Context, tenant, refresh string) (Tokens, error) {
	if refresh == "" {
		return Tokens{}, ended()
	}
	next, err := newRefresh()
	if err != nil {
		return Tokens{}, err
	}
	expires := s.now().Add(s.cfg.RefreshTTL)
	id, sid, found, err := s.store.Rotate(ctx, tenant, refreshHash(refresh), refreshHash(next), expires)
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
		if err := s.store.EndSession(ctx, tenant, sid, nil, EndAccount); err != nil {
			return Tokens{}, err
		}
		return Tokens{}, ended()
	}
	return s.tokens(tenant, a, sid, next)
}

// Why a session ended (login_session.end_reason). The database ends an
// account's sessions itself in the write that disables it (EndAccount) or
// changes its roles (EndRoles, migration 20): a token names the roles its
// account had at sign-in, so a session outlives no change of them.
const (
	EndLogout  = "logout"
	EndReused  = "refresh_reused"
	EndAccount = "account_disabled"
	EndRoles   = "roles_changed"
)

// Logout ends the session named by sessionID (an access token's) or
// refresh (its refresh token), whichever is given; an unknown one is no
// error.
func (s *Service) Logout(ctx context.Context, tenant, sessionID, refresh string) error {
	var hash []byte
	if refresh != "" {
		hash = refreshHash(refresh)
	}
	if sessionID == "" && hash == nil {
		return nil
	}
	return s.store.EndSession(ctx, tenant, sessionID, hash, EndLogout)
}

// SessionAlive says whether a session still speaks for its account: not
// ended, and the account there and active.
func (s *Service) SessionAlive(ctx context.Context, tenant, sessionID string) (bool, error) {
	return s.store.SessionAlive(ctx, tenant, sessionID)
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

// pinAddressKey counts the PIN checks from one address, whatever the
// patron.
func pinAddressKey(address string) string { return "pin-address:" + address }

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

// VerifyPin checks a patron's PIN (FOLIO's POST /patron-pin/verify), tried
// from address: nil when it matches; PIN_INVALID when it does not or the
// patron has none; PIN_LOCKED (KindTooManyRequests) while MaxFailures
// wrong ones for the patron, or MaxAddressFailures from the address,
// within FailureWindow lock it, for Lockout. Like a sign-in, the attempt is
// counted before the PIN is checked, and a success gives its counts back,
// unless other guesses filled the patron's count while it was checked.
//
// The address is counted first, alone: guesses at made-up patrons from one
// address stop at its limit, without a count of their own for each beyond
// it (every count is a row until the sweeper removes it). An attempt the
// patron's count then refuses unchecked is given back to the address: what
// the address counts is the PINs checked from it.
func (s *Service) VerifyPin(ctx context.Context, tenant, patronID, pin, address string) error {
	key := pinKey(patronID)
	at := s.arrive(tenant + "\x00" + key)
	defer s.leave(at)
	byAddress := []Limit{{Key: pinAddressKey(address), Max: s.cfg.MaxAddressFailures, Window: s.cfg.FailureWindow, Lockout: s.cfg.Lockout}}
	wait, _, err := s.store.Count(ctx, tenant, byAddress)
	if err != nil {
		return err
	}
	if wait > 0 {
		s.cfg.Refused("pin")
		return pinLocked(wait)
	}
	byPatron := []Limit{{Key: key, Max: s.cfg.MaxFailures, Window: s.cfg.FailureWindow, Lockout: s.cfg.Lockout}}
	limits := append(slices.Clone(byPatron), byAddress...)
	wait, filled, err := s.store.Count(ctx, tenant, byPatron)
	if err != nil {
		return s.unchecked(ctx, tenant, byAddress, err)
	}
	if wait > 0 {
		// Refused unchecked: not a guess from the address either.
		s.cfg.Refused("pin")
		return s.unchecked(ctx, tenant, byAddress, pinLocked(wait))
	}
	hash, found, err := s.store.PinHash(ctx, tenant, patronID)
	if err != nil {
		return s.unchecked(ctx, tenant, limits, err)
	}
	if !found {
		hash = s.dummy
	}
	ok, err := s.matches(ctx, pin, hash)
	if err != nil {
		return s.unchecked(ctx, tenant, limits, err)
	}
	ok = ok && found
	s.cfg.Checked("pin", ok)
	if !ok {
		return errs.Errorf(errs.KindInvalid, schemas.CodePinInvalid, "Wrong PIN")
	}
	// The right PIN in a burst of guesses larger than the limit, or one
	// that filled the count while it was checked, opens nothing either.
	granted := s.others(at) < s.cfg.MaxFailures
	if granted {
		if granted, err = s.store.Succeed(ctx, tenant, limits, key, slices.Contains(filled, key), ""); err != nil {
			return err
		}
	}
	if !granted {
		s.cfg.Refused("pin")
		return pinLocked(s.cfg.Lockout)
	}
	return nil
}

// pinLocked is the answer while wrong PINs lock a patron's PIN.
func pinLocked(wait time.Duration) *errs.Error {
	e := errs.Errorf(errs.KindTooManyRequests, schemas.CodePinLocked, "Too many wrong PINs: try again in %d s", int(wait.Seconds())+1)
	e.RetryAfter = wait
	return e
}
