package config

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/mail"
	"strings"
	"time"

	"github.com/checkoutlock/schemas"
	"github.com/checkoutlock/schemas/locksettings"
)

// Storage configures circulation-storage. Every field is one environment
// variable; the README's configuration table lists them.
type Storage struct {
	// Server is what the HTTP server reads (the address, the request and
	// shutdown timeouts, the serving and authentication sections, the
	// bounds on a request, the log level), the same for both services.
	Server
	Database Database
	// TrustedModules are the modules whose tokens jwt mode accepts, each
	// with its P-256 public key: "circulation=/keys/circulation.pub.pem".
	// Their tokens hold at most what the module declares
	// (modulePermissions); without circulation here, circulation cannot
	// call storage in jwt mode.
	TrustedModules string `env:"AUTH_TRUSTED_MODULES"`
	// CheckoutLockFeatureEnabled is the lock feature for a tenant that
	// stored no checkoutLockFeature setting, off by default as in FOLIO:
	// with the feature on, storage opens a loan only under the borrower's
	// live lock. Its one home: circulation is told it with every answer
	// (schemas.HeaderLockDefault) and reads no variable of its own.
	CheckoutLockFeatureEnabled bool `env:"CHECKOUT_LOCK_FEATURE_ENABLED" envDefault:"false"`
	// ItemLimitWithoutCriteria says what to do with an item limit whose
	// circulation rule names neither a material type nor a loan type:
	// "enforce" counts all the patron's open loans; "ignore" lets the
	// check-out through, as FOLIO does. Storage decides it, in validation
	// and in the check-out's write alike.
	ItemLimitWithoutCriteria string `env:"ITEM_LIMIT_WITHOUT_CRITERIA" envDefault:"enforce"`
	// LockDefaultTTLMs is a lock's lifetime when the request names none.
	LockDefaultTTLMs int `env:"LOCK_DEFAULT_TTL_MS"`
	// LockMaxTTLMs is the longest lifetime a request may ask for, and a
	// tenant's lockTtl may be: at most the lock's bound
	// (locksettings.MaxLockTTL), which it is when unset.
	LockMaxTTLMs int `env:"LOCK_MAX_TTL_MS"`
	// LockMaxWaitMs is the longest an acquisition may wait for a held lock
	// (waitMs); it must cover circulation's retry budget.
	LockMaxWaitMs int `env:"LOCK_MAX_WAIT_MS" envDefault:"20000"`
	// LockWaitPoll is the safety-net interval at which waiters try a held
	// lock while release notifications arrive; while they do not, waiters
	// try every LockWaitPollUnlistened.
	LockWaitPoll           time.Duration `env:"LOCK_WAIT_POLL_INTERVAL" envDefault:"250ms"`
	LockWaitPollUnlistened time.Duration `env:"LOCK_WAIT_POLL_UNLISTENED" envDefault:"50ms"`
	// LockMaxWaiters bounds the acquisitions waiting on one instance.
	LockMaxWaiters int `env:"LOCK_MAX_WAITERS" envDefault:"10000"`
	// ListenDatabaseURL is the connection the release listener uses, when
	// it cannot be DATABASE_URL's (behind a transaction-mode pooler,
	// LISTEN needs a direct connection).
	ListenDatabaseURL string `env:"LISTEN_DATABASE_URL" log:"redact"`
	// SweepInterval is how often expired locks are deleted, and requests
	// past their hold shelf date closed, across tenants.
	SweepInterval time.Duration `env:"LOCK_SWEEP_INTERVAL" envDefault:"30s"`
	// NoticeSMTPAddr is the SMTP server (host:port) patron notices are
	// sent through; empty, notices are scheduled and none is sent.
	NoticeSMTPAddr string `env:"NOTICE_SMTP_ADDR"`
	// NoticeFrom is the address notices are sent from.
	NoticeFrom string `env:"NOTICE_FROM" envDefault:"library@localhost"`
	// NoticeInterval is how often notices are scheduled from the changes
	// recorded and those due are sent (by one instance at a time).
	NoticeInterval time.Duration `env:"NOTICE_INTERVAL" envDefault:"5s"`
	// NoticeMaxAttempts is how many tries a notice gets before it is
	// Failed; NoticeFirstRetry the wait after the first failed one,
	// doubling after each next.
	NoticeMaxAttempts int           `env:"NOTICE_MAX_ATTEMPTS" envDefault:"8"`
	NoticeFirstRetry  time.Duration `env:"NOTICE_FIRST_RETRY" envDefault:"1m"`
	// NoticeBatch is how many changes, then notices due, are read at
	// once, each taken in a transaction of its own; a round reads up to
	// 20 batches of each.
	NoticeBatch int `env:"NOTICE_BATCH" envDefault:"100"`
	// SweepBatchSize bounds each DELETE of the sweeper.
	SweepBatchSize int `env:"LOCK_SWEEP_BATCH_SIZE" envDefault:"1000"`
	// LockSynchronousCommit is PostgreSQL's synchronous_commit for the
	// statements that acquire and release locks (never for loans and
	// items): off, they do not wait for the WAL flush or a standby. Safe
	// because every check-out write is fenced by its lock in the write's
	// own, durable transaction: a lock row lost in a crash or a failover
	// makes a write refuse, never lets two past the limit.
	LockSynchronousCommit string `env:"LOCK_SYNCHRONOUS_COMMIT" envDefault:"off"`
	// LockHistory records the events that explain a wait or a refusal.
	LockHistory bool `env:"LOCK_HISTORY" envDefault:"true"`
	// LockHistoryRetention and LockHistoryMaxEvents bound each tenant's
	// lock history; the sweeper trims it.
	LockHistoryRetention time.Duration `env:"LOCK_HISTORY_RETENTION" envDefault:"168h"`
	LockHistoryMaxEvents int           `env:"LOCK_HISTORY_MAX_EVENTS" envDefault:"100000"`
	// KioskOfflineGrace is how far inside a span of a machine's presence
	// on line (kept by the SIP2 doors) a check-out it says it made
	// offline may be dated and still be taken as made offline: deeper,
	// the write refuses it (schemas.CodeOfflineWhileOnLine).
	KioskOfflineGrace time.Duration `env:"KIOSK_OFFLINE_GRACE" envDefault:"1m"`
	// MaxPageBytes bounds the records of one list answer; a larger page
	// gets 422 PAGE_TOO_LARGE.
	MaxPageBytes int `env:"MAX_PAGE_BYTES" envDefault:"4194304"`
	// Login is FOLIO's login (/authn): "on" signs people in with the
	// tenant's accounts, its access tokens signed with AUTH_JWT_SECRET
	// (AUTH_MODE=jwt); "off" where an identity provider issues the tokens.
	Login string `env:"LOGIN" envDefault:"on"`
	// Outbox records domain events of loans, items' statuses, requests,
	// check-outs and check-ins with their writes (on), or none (off).
	Outbox string `env:"OUTBOX" envDefault:"on"`
	// NATSURL is the NATS server the outbox relay publishes to, or the
	// servers of a cluster, comma-separated; empty: no relay runs here
	// (the events wait for an instance that has one).
	NATSURL string `env:"NATS_URL" log:"redact"`
	// NATSStreamReplicas is how many servers of a JetStream cluster keep
	// the stream (1 for a single server; 3 keeps it through the loss of
	// one).
	NATSStreamReplicas int `env:"NATS_STREAM_REPLICAS" envDefault:"1"`
	// NATSStream and NATSSubjectPrefix are the JetStream stream and the
	// subjects' prefix: <prefix>.<tenant>.<kind>.
	NATSStream        string `env:"NATS_STREAM" envDefault:"CHECKOUT_EVENTS"`
	NATSSubjectPrefix string `env:"NATS_SUBJECT_PREFIX" envDefault:"checkout.events"`
	// NATSDuplicateWindow is the stream's duplicate window, NATSMaxAge how
	// long it keeps a message.
	NATSDuplicateWindow time.Duration `env:"NATS_DUPLICATE_WINDOW" envDefault:"10m"`
	NATSMaxAge          time.Duration `env:"NATS_MAX_AGE" envDefault:"168h"`
	// OutboxRetention is how long published events stay in the outbox;
	// OutboxBatch how many the relay numbers and publishes at once;
	// OutboxPoll the longest it waits without being told of new ones;
	// OutboxLinger how long it lets events gather once told, so that a
	// busy tenant's events go out in batches rather than one by one.
	OutboxRetention time.Duration `env:"OUTBOX_RETENTION" envDefault:"24h"`
	OutboxBatch     int           `env:"OUTBOX_BATCH" envDefault:"500"`
	OutboxPoll      time.Duration `env:"OUTBOX_POLL" envDefault:"1s"`
	OutboxLinger    time.Duration `env:"OUTBOX_LINGER" envDefault:"2ms"`
	// OutboxLeadTimeout is how long the leading relay may fall silent
	// before PostgreSQL ends its session, and the lead with it: a leader
	// that stops answering (frozen, paused, swapping) is replaced within
	// it and OUTBOX_POLL.
	OutboxLeadTimeout time.Duration `env:"OUTBOX_LEAD_TIMEOUT" envDefault:"5s"`
	// OutboxFault, for the fault tests only: exit-after-publish or
	// stop-after-publish.
	OutboxFault string `env:"OUTBOX_FAULT"`
	// LoginAccessTTL and LoginRefreshTTL are how long a sign-in's access
	// and refresh tokens live.
	LoginAccessTTL  time.Duration `env:"LOGIN_ACCESS_TTL" envDefault:"10m"`
	LoginRefreshTTL time.Duration `env:"LOGIN_REFRESH_TTL" envDefault:"24h"`
	// LoginMaxFailures wrong passwords of one account from one client
	// address, or LoginMaxAddressFailures from one address whatever the
	// account, within LoginLockout lock that pair, or that address, for
	// LoginLockout; LoginMaxFailures wrong PINs lock a patron's PIN.
	// Attempts are counted before they are checked: no more of a pair's
	// (a patron's) are checked at once than its limit leaves room for,
	// and the others wait their turn for up to LoginBusyWait (and half
	// what is left of the request's time), then are refused busy,
	// unchecked.
	LoginMaxFailures        int           `env:"LOGIN_MAX_FAILURES" envDefault:"5"`
	LoginMaxAddressFailures int           `env:"LOGIN_MAX_ADDRESS_FAILURES" envDefault:"20"`
	LoginLockout            time.Duration `env:"LOGIN_LOCKOUT" envDefault:"15m"`
	LoginBusyWait           time.Duration `env:"LOGIN_BUSY_WAIT" envDefault:"2s"`
	// LoginAccountRate bounds the sign-ins of one account checked per
	// minute from addresses it has not signed in from within
	// LoginKnownFor (0: no bound): guesses spread over many addresses
	// slow the account there, and lock it nowhere.
	LoginAccountRate int           `env:"LOGIN_ACCOUNT_RATE" envDefault:"10"`
	LoginKnownFor    time.Duration `env:"LOGIN_KNOWN_FOR" envDefault:"720h"`
}

// LoginOn says whether storage signs people in: LOGIN=on, and tokens it
// can sign (AUTH_MODE=jwt with AUTH_JWT_SECRET).
func (c Storage) LoginOn() bool {
	return c.Login == "on" && c.Auth.Mode == "jwt" && c.Auth.JWTSecret != ""
}

// LoadStorage reads and validates circulation-storage's configuration from
// environ (typically the process environment as a map).
func LoadStorage(environ map[string]string) (Storage, error) {
	// The lock's default lifetime is locksettings'; the environment
	// overrides it.
	c := Storage{Server: storageServer, LockDefaultTTLMs: locksettings.DefaultTTLMs}
	if err := parse(&c, environ); err != nil {
		return Storage{}, err
	}
	if _, set := environ["LOCK_MAX_TTL_MS"]; !set {
		c.LockMaxTTLMs = int(locksettings.MaxLockTTL / time.Millisecond)
	}
	if err := c.Validate(); err != nil {
		return Storage{}, fmt.Errorf("configuration: %w", err)
	}
	return c, nil
}

// Validate reports every value that is out of range, naming its variable.
func (c Storage) Validate() error {
	errs := c.Server.validate()
	if err := c.Database.validate(); err != nil {
		errs = append(errs, err)
	}
	errs = append(errs, c.validateTrustedModules()...)
	if c.Outbox != "on" && c.Outbox != "off" {
		errs = append(errs, fmt.Errorf("OUTBOX must be on or off, got %q", c.Outbox))
	}
	if c.NATSURL != "" {
		for _, u := range strings.Split(c.NATSURL, ",") {
			if u = strings.TrimSpace(u); !strings.HasPrefix(u, "nats://") && !strings.HasPrefix(u, "tls://") {
				errs = append(errs, fmt.Errorf("NATS_URL must be nats:// or tls:// URLs, comma-separated, got %q", c.NATSURL))
				break
			}
		}
	}
	if c.NATSStreamReplicas < 1 || c.NATSStreamReplicas > 5 {
		errs = append(errs, fmt.Errorf("NATS_STREAM_REPLICAS must be 1..5 (JetStream's limit), got %d", c.NATSStreamReplicas))
	}
	// A leader that lost its lead mid-batch may have sent what the next
	// one publishes again: the window covers both.
	if minWindow := max(time.Second, 2*c.OutboxLeadTimeout); c.NATSDuplicateWindow < minWindow || c.NATSMaxAge < c.NATSDuplicateWindow {
		errs = append(errs, fmt.Errorf("NATS_DUPLICATE_WINDOW must be at least twice OUTBOX_LEAD_TIMEOUT (%s) and NATS_MAX_AGE at least it, "+
			"got %s and %s", minWindow, c.NATSDuplicateWindow, c.NATSMaxAge))
	}
	if c.OutboxRetention < time.Minute || c.OutboxBatch < 1 || c.OutboxBatch > 10000 || c.OutboxPoll < 10*time.Millisecond ||
		c.OutboxLinger < 0 || c.OutboxLinger > c.OutboxPoll {
		errs = append(errs, fmt.Errorf("OUTBOX_RETENTION must be at least 1m, OUTBOX_BATCH 1..10000, OUTBOX_POLL at least 10ms, "+
			"OUTBOX_LINGER 0 to OUTBOX_POLL; got %s, %d, %s, %s", c.OutboxRetention, c.OutboxBatch, c.OutboxPoll, c.OutboxLinger))
	}
	if c.OutboxLeadTimeout < time.Second || c.OutboxLeadTimeout > time.Minute {
		errs = append(errs, fmt.Errorf("OUTBOX_LEAD_TIMEOUT must be from 1s to 1m, got %s", c.OutboxLeadTimeout))
	}
	if c.OutboxFault != "" && c.OutboxFault != "exit-after-publish" && c.OutboxFault != "stop-after-publish" {
		errs = append(errs, fmt.Errorf("OUTBOX_FAULT is for the fault tests: exit-after-publish, stop-after-publish or empty, got %q",
			c.OutboxFault))
	}
	if c.KioskOfflineGrace < 0 || c.KioskOfflineGrace > schemas.MaxOfflineGrace {
		errs = append(errs, fmt.Errorf("KIOSK_OFFLINE_GRACE must be from 0 to %s (a longer grace takes check-outs made on line as made offline), got %s",
			schemas.MaxOfflineGrace, c.KioskOfflineGrace))
	}
	if c.Login != "on" && c.Login != "off" {
		errs = append(errs, fmt.Errorf("LOGIN must be on or off, got %q", c.Login))
	}
	if c.LoginAccessTTL < time.Second || c.LoginAccessTTL > 24*time.Hour || c.LoginRefreshTTL < c.LoginAccessTTL || c.LoginRefreshTTL > 30*24*time.Hour {
		errs = append(errs, fmt.Errorf("LOGIN_ACCESS_TTL must be from 1s to 24h and LOGIN_REFRESH_TTL from it to 720h, got %s and %s",
			c.LoginAccessTTL, c.LoginRefreshTTL))
	}
	if c.LoginAccountRate < 0 || c.LoginKnownFor < time.Minute {
		errs = append(errs, fmt.Errorf("LOGIN_ACCOUNT_RATE must be at least 0 and LOGIN_KNOWN_FOR at least 1m; got %d and %s",
			c.LoginAccountRate, c.LoginKnownFor))
	}
	if c.LoginMaxFailures < 1 || c.LoginMaxAddressFailures < c.LoginMaxFailures || c.LoginLockout < time.Second {
		errs = append(errs, fmt.Errorf("LOGIN_MAX_FAILURES must be at least 1, LOGIN_MAX_ADDRESS_FAILURES at least it, LOGIN_LOCKOUT at least 1s; got %d, %d, %s",
			c.LoginMaxFailures, c.LoginMaxAddressFailures, c.LoginLockout))
	}
	if c.LoginBusyWait < 0 || c.LoginBusyWait > c.RequestTimeout {
		errs = append(errs, fmt.Errorf("LOGIN_BUSY_WAIT must be from 0 to REQUEST_TIMEOUT (%s), got %s", c.RequestTimeout, c.LoginBusyWait))
	}
	if c.ItemLimitWithoutCriteria != "enforce" && c.ItemLimitWithoutCriteria != "ignore" {
		errs = append(errs, fmt.Errorf("ITEM_LIMIT_WITHOUT_CRITERIA must be enforce or ignore, got %q", c.ItemLimitWithoutCriteria))
	}
	// The lock's bounds are locksettings': an operator narrows them,
	// never widens them.
	ms := func(n int) time.Duration { return time.Duration(n) * time.Millisecond }
	if err := locksettings.InBounds("LOCK_MAX_TTL_MS", ms(c.LockMaxTTLMs), locksettings.MinLockTTL, locksettings.MaxLockTTL,
		"the bounds of a lock's lifetime"); err != nil {
		errs = append(errs, err)
	} else if err := locksettings.InBounds("LOCK_DEFAULT_TTL_MS", ms(c.LockDefaultTTLMs), locksettings.MinLockTTL, ms(c.LockMaxTTLMs),
		"from the shortest lock's lifetime to LOCK_MAX_TTL_MS"); err != nil {
		errs = append(errs, err)
	}
	if err := locksettings.InBounds("LOCK_MAX_WAIT_MS", ms(c.LockMaxWaitMs), 0, locksettings.MaxWait,
		"the longest an acquisition may wait"); err != nil {
		errs = append(errs, err)
	}
	if c.LockWaitPoll < 10*time.Millisecond || c.LockWaitPollUnlistened < 10*time.Millisecond {
		errs = append(errs, fmt.Errorf("LOCK_WAIT_POLL_INTERVAL and LOCK_WAIT_POLL_UNLISTENED must be at least 10ms, got %s and %s",
			c.LockWaitPoll, c.LockWaitPollUnlistened))
	}
	if c.LockMaxWaiters < 1 {
		errs = append(errs, fmt.Errorf("LOCK_MAX_WAITERS must be at least 1, got %d", c.LockMaxWaiters))
	}
	switch c.LockSynchronousCommit {
	case "on", "off", "local", "remote_write", "remote_apply":
	default:
		errs = append(errs, fmt.Errorf("LOCK_SYNCHRONOUS_COMMIT must be on, off, local, remote_write or remote_apply, got %q", c.LockSynchronousCommit))
	}
	if c.SweepInterval <= 0 {
		errs = append(errs, fmt.Errorf("LOCK_SWEEP_INTERVAL must be a positive duration such as 30s, got %s", c.SweepInterval))
	}
	if c.NoticeInterval <= 0 {
		errs = append(errs, fmt.Errorf("NOTICE_INTERVAL must be a positive duration such as 5s, got %s", c.NoticeInterval))
	}
	if c.NoticeMaxAttempts < 1 {
		errs = append(errs, fmt.Errorf("NOTICE_MAX_ATTEMPTS must be at least 1, got %d", c.NoticeMaxAttempts))
	}
	if c.NoticeBatch < 1 || c.NoticeBatch > 10000 {
		errs = append(errs, fmt.Errorf("NOTICE_BATCH must be from 1 to 10000, got %d", c.NoticeBatch))
	}
	if c.NoticeFirstRetry <= 0 {
		errs = append(errs, fmt.Errorf("NOTICE_FIRST_RETRY must be a positive duration such as 1m, got %s", c.NoticeFirstRetry))
	}
	if c.NoticeSMTPAddr != "" {
		if _, _, err := net.SplitHostPort(c.NoticeSMTPAddr); err != nil {
			errs = append(errs, fmt.Errorf("NOTICE_SMTP_ADDR must be host:port, got %q", c.NoticeSMTPAddr))
		}
	}
	if _, err := mail.ParseAddress(c.NoticeFrom); err != nil {
		errs = append(errs, fmt.Errorf("NOTICE_FROM must be an email address, got %q", c.NoticeFrom))
	}
	if c.SweepBatchSize < 1 || c.SweepBatchSize > 100000 {
		errs = append(errs, fmt.Errorf("LOCK_SWEEP_BATCH_SIZE must be 1..100000, got %d", c.SweepBatchSize))
	}
	if c.LockHistoryRetention <= 0 {
		errs = append(errs, fmt.Errorf("LOCK_HISTORY_RETENTION must be a positive duration such as 168h, got %s", c.LockHistoryRetention))
	}
	if c.LockHistoryMaxEvents < 1 || c.LockHistoryMaxEvents > 10000000 {
		errs = append(errs, fmt.Errorf("LOCK_HISTORY_MAX_EVENTS must be 1..10000000, got %d", c.LockHistoryMaxEvents))
	}
	if c.MaxPageBytes < 65536 || c.MaxPageBytes > schemas.MostPageBytes {
		errs = append(errs, fmt.Errorf("MAX_PAGE_BYTES must be from 65536 to %d (what circulation reads of a page), got %d",
			schemas.MostPageBytes, c.MaxPageBytes))
	}
	return errors.Join(errs...)
}

// validateTrustedModules checks AUTH_TRUSTED_MODULES: jwt mode only,
// name=file pairs of readable public keys, the published development key
// only when allowed.
func (c Storage) validateTrustedModules() []error {
	if c.TrustedModules == "" {
		return nil
	}
	if c.Auth.Mode != "jwt" {
		return []error{fmt.Errorf("AUTH_TRUSTED_MODULES applies to AUTH_MODE=jwt only, not %s", c.Auth.Mode)}
	}
	keys, err := ParseModuleKeys(c.TrustedModules)
	if err != nil {
		return []error{err}
	}
	var errs []error
	for _, k := range keys {
		f := k.File
		if _, err := publicKeyOfFile(f); err != nil {
			errs = append(errs, fmt.Errorf("AUTH_TRUSTED_MODULES: %s: %v", f, err))
		} else if isDevelopmentModuleKey(f) && !c.Auth.AllowDevelopmentKeys {
			errs = append(errs, errDevelopmentKey("AUTH_TRUSTED_MODULES ("+f+")"))
		}
	}
	return errs
}

// Warnings are what the configuration itself must tell an operator, on
// /admin/health too: a published development key in use.
func (c Storage) Warnings() []string {
	keys, _ := ParseModuleKeys(c.TrustedModules)
	var files []string
	for _, k := range keys {
		files = append(files, k.File)
	}
	if c.Auth.developmentKeys(files...) {
		return []string{DevelopmentWarning}
	}
	return nil
}

// LogValue lists the configuration for the start-up log, passwords
// masked.
func (c Storage) LogValue() slog.Value { return logValue(c) }

// ListenConnString is the release listener's connection string:
// LISTEN_DATABASE_URL, or the pool's. With redacted, a password is masked.
func (c Storage) ListenConnString(redacted bool) string {
	d := c.Database
	if c.ListenDatabaseURL != "" {
		d = Database{URL: c.ListenDatabaseURL}
	}
	if redacted {
		return d.Redacted()
	}
	return d.ConnString()
}
