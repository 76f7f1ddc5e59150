// Package login is FOLIO's login for the tenant's accounts: passwords
// hashed with argon2id, sign-in that answers the same whether the name or
// the password was wrong, attempts counted before they are checked (so
// that a burst of guesses gets no more wrong secrets checked than the
// limits allow, while a crowd of right ones all get in, each in its
// turn), and wrong secrets that lock the account at one client address,
// or the address, for a while, while an account's failures elsewhere only
// slow it down;
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
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/google/uuid"
	"github.com/hashicorp/golang-lru/v2/expirable"
	"golang.org/x/crypto/argon2"

	"github.com/checkoutlock/schemas"
	"github.com/checkoutlock/schemas/errs"
	"github.com/checkoutlock/serverkit/auth"
)

// Account is what signing in needs of an account.
type Account struct {
	ID, Username string
	Active       bool
	Roles        []string
}

// Limit is one count an attempt is held to: at most Max wrong secrets
// counted on Key within Window of the first, together with the attempts
// on Key being checked now. The wrong secret that reaches Max locks Key
// for Lockout (zero: until the window ends); while Key is locked every
// attempt is refused unchecked, and while its wrong secrets and the
// attempts being checked fill Max, an attempt waits its turn (or is
// refused unchecked, busy, when no turn comes soon enough). A right
// secret costs nothing: its turn ends and leaves the count as it was.
type Limit struct {
	Key     string
	Max     int
	Window  time.Duration
	Lockout time.Duration
}

// Count is a key's count as kept: the wrong secrets counted since
// FirstAt, the end of the lock they set, if any, and the attempts
// admitted and not yet settled (Checking, the last admitted at
// CheckingAt).
type Count struct {
	Failures    int
	FirstAt     time.Time
	LockedUntil *time.Time
	Checking    int
	CheckingAt  time.Time
}

// Verdict is what an attempt's count says of it before its secret is
// checked.
type Verdict int

const (
	// Admitted: the attempt is counted among those being checked, and
	// its secret may be checked.
	Admitted Verdict = iota
	// Busy: the key's wrong secrets and the attempts being checked fill
	// its limit; the attempt is not counted, and may try again when one
	// of those being checked has ended.
	Busy
	// Locked: wrong secrets lock the key; the attempt is not counted.
	Locked
)

// Admission is what Count decided of an attempt: its verdict, how long
// until it may be let in when it was not, and the keys it found locked,
// each with how long its lock lasts yet.
type Admission struct {
	Verdict Verdict
	Wait    time.Duration
	Locks   map[string]time.Duration
}

// Outcome is how an admitted attempt ended.
type Outcome int

const (
	// Right: its secret was checked and matched.
	Right Outcome = iota
	// Wrong: its secret was checked and did not match.
	Wrong
	// Unchecked: its secret was never checked (the database failed, the
	// caller went away, another count refused it).
	Unchecked
)

// MaxCheck bounds an admitted attempt's check; an attempt admitted more
// than twice as long ago is taken to have ended with the instance that
// checked it (stopped mid-check, before it settled), and its place is
// given to others.
const MaxCheck = 15 * time.Second

// BusyRetry is how soon an attempt refused busy may try again: by then
// the attempts being checked, a hash each, have ended.
const BusyRetry = time.Second

// fresh is c with what has passed at now forgotten: a lock or window that
// ended starts the count of wrong secrets again, and attempts admitted
// longer ago than an attempt can last no longer hold places.
func fresh(l Limit, c Count, now time.Time) Count {
	if c.LockedUntil != nil && !c.LockedUntil.After(now) {
		c.Failures, c.FirstAt, c.LockedUntil = 0, now, nil
	}
	if c.LockedUntil == nil && now.Sub(c.FirstAt) >= l.Window {
		c.Failures, c.FirstAt = 0, now
	}
	if c.Checking > 0 && now.Sub(c.CheckingAt) >= 2*MaxCheck {
		c.Checking = 0
	}
	return c
}

// Admit is what one attempt held to l does to its key's count c at now,
// before its secret is checked: the count with the attempt among those
// being checked (Admitted), or c as it was and the verdict with how long
// until the key may let it in (Locked: the lock's end; Busy: BusyRetry).
func Admit(l Limit, c Count, now time.Time) (Count, Verdict, time.Duration) {
	c = fresh(l, c, now)
	switch {
	case c.LockedUntil != nil:
		return c, Locked, c.LockedUntil.Sub(now)
	case c.Failures >= l.Max:
		// Full of wrong secrets without a lock (the limit was lowered
		// since): refused to the window's end.
		return c, Locked, c.FirstAt.Add(l.Window).Sub(now)
	case c.Failures+c.Checking >= l.Max:
		return c, Busy, BusyRetry
	}
	c.Checking++
	c.CheckingAt = now
	return c, Admitted, 0
}

// Settle is what an admitted attempt's outcome does to its key's count c
// at now: its place among those being checked is given up, and a wrong
// secret is counted, the one that reaches Max locking the key.
func Settle(l Limit, c Count, o Outcome, now time.Time) Count {
	c = fresh(l, c, now)
	c.Checking = max(c.Checking-1, 0)
	if o != Wrong {
		return c
	}
	c.Failures++
	if c.Failures >= l.Max && c.LockedUntil == nil {
		until := c.FirstAt.Add(l.Window)
		if l.Lockout > 0 {
			until = now.Add(l.Lockout)
		}
		c.LockedUntil = &until
	}
	return c
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
	// Count admits one attempt on every limit, atomically (Admit): on
	// all of them, or on none when any is locked or busy, and then the
	// verdict is the worst of theirs (Locked before Busy) with the longest
	// wait of those. Nothing else may decide on these counts between
	// reading and counting them.
	Count(ctx context.Context, tenant string, limits []Limit) (Admission, error)
	// Settle records an admitted attempt's outcome on every limit,
	// atomically (Settle); a Right outcome also records signedIn (when
	// not "") as signed in now.
	Settle(ctx context.Context, tenant string, limits []Limit, o Outcome, signedIn string) error
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
	// BusyWait is how long an attempt waits for its turn while its key is
	// busy (Busy) before it is refused unchecked, busy.
	BusyWait time.Duration
	// Checked, when set, is told of every secret checked ("password" or
	// "pin") and whether it matched; Refused of every attempt refused
	// before it was checked, and why ("locked" or "busy").
	Checked func(kind string, matched bool)
	Refused func(kind, why string)
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
	// turns are the attempts waiting here for a turn on a busy key.
	turns *turns
	// recent remembers the secrets that matched a while ago.
	recent *matched
	// locks remembers the sign-in keys this instance found locked, by
	// tenant and key, with the end of each lock (countAll).
	locks *expirable.LRU[string, time.Time]
}

// maxLocks bounds the locks an instance remembers: past it, the least
// recently used are forgotten (and asked of the database again).
const maxLocks = 10000

// New returns the login service.
func New(store Store, cfg Config) *Service {
	if cfg.Checked == nil {
		cfg.Checked = func(string, bool) {}
	}
	if cfg.Refused == nil {
		cfg.Refused = func(string, string) {}
	}
	s := &Service{store: store, cfg: cfg, hashes: make(chan struct{}, max(1, cfg.Hashes)), now: time.Now, turns: newTurns(maxTurns), recent: newMatched(),
		locks: expirable.NewLRU[string, time.Time](maxLocks, nil, max(cfg.Lockout, cfg.FailureWindow, time.Minute))}
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

// matches says whether password is the one hash was made from: at once
// when it is the one that last matched hash within matchedFor, else by
// argon2.
func (s *Service) matches(ctx context.Context, password, hash string) (bool, error) {
	if s.recent.holds(hash, password) {
		return true, nil
	}
	ok, err := s.derived(ctx, password, hash)
	if ok && err == nil {
		s.recent.remember(hash, password)
	}
	return ok, err
}

// derived says whether password is the one hash was made from, by argon2.
func (s *Service) derived(ctx context.Context, password, hash string) (bool, error) {
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
		limits = append(limits, Limit{Key: accountKey(username), Max: s.cfg.AccountRate, Window: AccountRateWindow})
	}
	return limits, nil
}

// AccountRateWindow is the window of LOGIN_ACCOUNT_RATE: the sign-ins of
// an account checked from addresses it has not signed in from are
// counted a minute at a time, and a count that reached the rate slows
// the account there until its minute ends.
const AccountRateWindow = time.Minute

// Login signs username in with password, from address: the tokens, or
// Failed, or, unchecked, a lock (KindTooManyRequests, LOGIN_LOCKED)
// while wrong passwords lock the pair, the address or, from an address
// the account has not signed in from, the account, or busy
// (KindTooManyRequests, LOGIN_BUSY) when no turn came within BusyWait.
//
// The attempt is counted before the password is checked (Store.Count):
// at most the limit's attempts of a pair are checked at once, and a
// wrong password ends its turn as a failure, a right one as nothing.
// However many arrive together, no more wrong passwords of a pair are
// checked than its limit, and every right one is let in once its turn
// comes: kiosks behind one address signing in together all get in. What
// a refused attempt is told depends on the counts alone, never on its
// password.
func (s *Service) Login(ctx context.Context, tenant, username, password, address string) (Tokens, error) {
	// As accounts compare names: a variant of a username is the username,
	// for its counts as for its account.
	username = schemas.NormalUsername(username)
	limits, err := s.limits(ctx, tenant, username, address)
	if err != nil {
		return Tokens{}, err
	}
	pair := limits[0].Key
	queue := tenant + "\x00" + pair
	if err := s.admit(ctx, tenant, queue, "password", limits); err != nil {
		return Tokens{}, err
	}
	defer s.turns.wake(queue)
	// The check is bounded, so that the attempt's place is given up in
	// time (MaxCheck), and settled whatever becomes of the caller.
	check, cancel := context.WithTimeout(ctx, MaxCheck)
	defer cancel()
	a, hash, found, err := s.store.Account(check, tenant, username)
	if err != nil {
		return Tokens{}, s.settle(ctx, tenant, limits, Unchecked, "", err)
	}
	if !found || hash == "" {
		hash = s.dummy
	}
	ok, err := s.matches(check, password, hash)
	if err != nil {
		return Tokens{}, s.settle(ctx, tenant, limits, Unchecked, "", err)
	}
	ok = ok && found && a.Active
	s.cfg.Checked("password", ok)
	if !ok {
		return Tokens{}, s.settle(ctx, tenant, limits, Wrong, "", Failed())
	}
	if err := s.settle(ctx, tenant, limits, Right, pair, nil); err != nil {
		return Tokens{}, err
	}
	return s.issue(ctx, tenant, a)
}

// admit counts an attempt in on each group of limits in turn (Store.Count:
// each group all or nothing, the groups before given back when a later
// one refuses), waiting while a key is busy for a turn on queue (woken
// when an attempt on it here settles; the first in line looks again every
// turnPoll, for places given up at other instances) until BusyWait, or
// half what is left of ctx's time, has passed. nil when it is admitted on
// every group; otherwise the refusal, the same whatever its secret: locked,
// or busy.
func (s *Service) admit(ctx context.Context, tenant, queue, kind string, groups ...[]Limit) error {
	now := s.now()
	deadline := now.Add(s.cfg.BusyWait)
	if dl, ok := ctx.Deadline(); ok {
		// Half what is left of the request's time at most: its check and
		// its answer fit in the rest.
		if half := now.Add(dl.Sub(now) / 2); half.Before(deadline) {
			deadline = half
		}
	}
	// front: the attempt was woken, or was first in the line when it
	// looked again: it goes back to the front.
	woken, front := false, false
	// An attempt that finds others waiting here joins the line without
	// looking: their turns come first, and a crowd arriving together
	// waits without queueing at the count's row ahead of the attempts
	// that would settle there.
	look := !s.turns.queued(queue)
	for {
		v, wait, err := Busy, time.Duration(0), error(nil)
		if look {
			v, wait, err = s.countAll(ctx, tenant, kind, groups)
		}
		look = true
		if err != nil {
			return err
		}
		if v != Busy {
			if front {
				// What let this attempt in, or locked it out, may do the
				// same for the next, which looks in its place.
				s.turns.wake(queue)
			}
			if v == Locked {
				s.cfg.Refused(kind, "locked")
				return lockedAnswer(kind, wait)
			}
			return nil
		}
		left := deadline.Sub(s.now())
		var turn chan struct{}
		first, joined := false, false
		if left > 0 {
			turn, first, joined = s.turns.join(queue, front)
		}
		if !joined {
			if front {
				s.turns.wake(queue)
			}
			s.cfg.Refused(kind, "busy")
			return busyAnswer(kind)
		}
		if first {
			left = min(left, turnPoll)
		}
		if woken, err = s.turns.await(ctx, queue, turn, left); err != nil {
			return err
		}
		front = woken || first
	}
}

// countAll counts an attempt in on every group, in order: Admitted on
// all, or the first refusal, with the groups counted before it given back
// (Unchecked). A sign-in's (kind password) is refused here, without a
// word to the database, while one of its keys is locked as a count told
// this instance (remembered): a flood of guesses at a locked account costs
// the database nothing more.
func (s *Service) countAll(ctx context.Context, tenant, kind string, groups [][]Limit) (Verdict, time.Duration, error) {
	remember := kind == "password"
	if remember {
		if wait := s.lockedHere(tenant, groups); wait > 0 {
			return Locked, wait, nil
		}
	}
	for i, g := range groups {
		a, err := s.store.Count(ctx, tenant, g)
		if err == nil && remember {
			for key, left := range a.Locks {
				s.locks.Add(tenant+"\x00"+key, s.now().Add(left))
			}
		}
		if err == nil && a.Verdict == Admitted {
			continue
		}
		var before []Limit
		for _, counted := range groups[:i] {
			before = append(before, counted...)
		}
		if len(before) > 0 {
			if serr := s.store.Settle(context.WithoutCancel(ctx), tenant, before, Unchecked, ""); serr != nil {
				err = errors.Join(err, serr)
			}
		}
		return a.Verdict, a.Wait, err
	}
	return Admitted, 0, nil
}

// lockedHere is how long the longest lock this instance remembers of the
// groups' keys lasts yet; zero when it remembers none. A lock ends only
// when its time is up (none is lifted early), so remembering it refuses
// nothing the database would let in. PINs' locks are not remembered:
// setting a patron's PIN anew ends their lock (SetPin), at every
// instance.
func (s *Service) lockedHere(tenant string, groups [][]Limit) time.Duration {
	var wait time.Duration
	now := s.now()
	for _, g := range groups {
		for _, l := range g {
			if until, ok := s.locks.Get(tenant + "\x00" + l.Key); ok && until.After(now) {
				wait = max(wait, until.Sub(now))
			}
		}
	}
	return wait
}

// settle records an admitted attempt's outcome and returns answer; an
// error settling is joined to it. It is done whatever becomes of the
// caller: an attempt's place is given back.
func (s *Service) settle(ctx context.Context, tenant string, limits []Limit, o Outcome, signedIn string, answer error) error {
	if err := s.store.Settle(context.WithoutCancel(ctx), tenant, limits, o, signedIn); err != nil {
		if answer == nil {
			return err
		}
		return errors.Join(answer, err)
	}
	return answer
}

// lockedAnswer and busyAnswer are the refusals of an attempt unchecked, a
// sign-in's or a PIN's (kind).
func lockedAnswer(kind string, wait time.Duration) *errs.Error {
	if kind == "pin" {
		return pinLocked(wait)
	}
	return locked(wait)
}

func busyAnswer(kind string) *errs.Error {
	code, what := schemas.CodeLoginBusy, "sign-ins"
	if kind == "pin" {
		code, what = schemas.CodePinBusy, "PINs"
	}
	e := errs.Errorf(errs.KindTooManyRequests, code, "As many %s from here as can be checked at once are being checked: try again in %d s",
		what, int(BusyRetry.Seconds()))
	e.RetryAfter = BusyRetry
	return e
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
