package bench

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	"github.com/jackc/pgx/v5"
	vegeta "github.com/tsenart/vegeta/v12/lib"

	"github.com/checkoutlock/circulation-storage/login"
	"github.com/checkoutlock/integration-tests/harness"
	"github.com/checkoutlock/schemas"
	"github.com/checkoutlock/schemas/errs/errhttp"
)

// Flood is scenario 11: wrong passwords for one account from many client
// addresses (a botnet's flood), against its owner's sign-ins from the
// address they use: what the owner's sign-in costs during the flood
// against a quiet one, and the counts the flood leaves, at its end and
// once its window has passed.
type Flood struct {
	Addresses int `json:"addresses"`
	// Answers are the flood's answers by status and code.
	Answers map[string]int `json:"answers"`
	// PerSecond is the flood's rate, as sent.
	PerSecond float64 `json:"perSecond"`
	// Quiet and During are the owner's sign-ins with the right password
	// from their address, before and after the flood, and during it.
	Quiet  Stats   `json:"quiet"`
	During Stats   `json:"during"`
	Ratio  float64 `json:"p50Ratio"`
	// Window is LOGIN_LOCKOUT, the window counts are kept for.
	Window string `json:"window"`
	// RowsAtEnd are the counts kept when the flood ended; RowsAfter those
	// left once the window had passed and the sweeper had run, AfterS
	// seconds after the flood's end; Bound what the docs say is left: the
	// pairs that signed in within LOGIN_KNOWN_FOR, and the account's rate
	// count while its minute lasts.
	RowsAtEnd int     `json:"rowsAtEnd"`
	RowsAfter int     `json:"rowsAfterWindow"`
	AfterS    float64 `json:"secondsAfterFlood"`
	Bound     int     `json:"bound"`
}

// floodWindow is the scenario's LOGIN_LOCKOUT: short, so that its end is
// seen within the run (shorter still in a smoke run).
func floodWindow() time.Duration {
	if *smoke {
		return 3 * time.Second
	}
	return 20 * time.Second
}

// floodAddress is the i-th address of the flood, in 10.0.0.0/8.
func floodAddress(i int) string { return fmt.Sprintf("10.%d.%d.%d", i>>16&255, i>>8&255, i&255) }

// floodRate is the flood's rate: a botnet's, sent whatever the answers
// (an open loop), not a load test's as fast as answered.
const floodRate = 500

// benchFlood runs scenario 11: the owner signs in from their address
// before, during and after a flood of wrong passwords from 10,000
// addresses (1,000 in a smoke run), each address once, floodRate a
// second. Storage trusts the bench as a
// proxy (TRUSTED_PROXIES), which names each attempt's address in
// X-Forwarded-For, as a load balancer in front of it would.
func benchFlood(t *testing.T, env []string) Flood {
	addresses := 10000
	if *smoke {
		addresses = 1000
	}
	c := harness.NewCluster(t, harness.Options{Circulations: 1, FeatureOn: true,
		StorageEnv:     append([]string{"TRUSTED_PROXIES=127.0.0.1", "LOGIN_LOCKOUT=" + floodWindow().String(), "LOCK_SWEEP_INTERVAL=1s"}, env...),
		CirculationEnv: env})
	const owner, password = "ada", "correct horse battery staple"
	c.Account(t, owner, "Ada", "Lovelace", schemas.RoleLibrarian, password)
	body := fmt.Sprintf(`{"username":%q,"password":%q}`, owner, password)
	signIn := func() (time.Duration, bool) {
		start := time.Now()
		r := c.DoWith(c.Storage, "POST", "/authn/login-with-expiry", body,
			map[string]string{schemas.HeaderTenant: c.Tenant, "Content-Type": "application/json", schemas.HeaderForwardedFor: "192.0.2.1"})
		return time.Since(start), r.Status == http.StatusCreated
	}
	if _, ok := signIn(); !ok {
		t.Fatal("the owner's first sign-in failed")
	}
	quiet := newSignIns()
	for range 100 {
		quiet.add(signIn())
	}

	// The flood, with the owner signing in one after another meanwhile.
	var next int64
	var mu sync.Mutex
	targeter := func(tgt *vegeta.Target) error {
		mu.Lock()
		i := next
		next++
		mu.Unlock()
		if i >= int64(addresses) {
			return vegeta.ErrNoTargets
		}
		*tgt = vegeta.Target{Method: http.MethodPost, URL: c.Storage.URL() + "/authn/login-with-expiry",
			Body: []byte(fmt.Sprintf(`{"username":%q,"password":"guess %d"}`, owner, i)),
			Header: http.Header{"Content-Type": {"application/json"}, schemas.HeaderTenant: {c.Tenant},
				schemas.HeaderForwardedFor: {floodAddress(int(i))}}}
		return nil
	}
	atk := vegeta.NewAttacker(vegeta.KeepAlive(true), vegeta.Connections(64), vegeta.Timeout(60*time.Second))
	during := newSignIns()
	over, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-over:
				return
			default:
				during.add(signIn())
			}
		}
	}()
	answers := map[string]int{}
	start := time.Now()
	for res := range atk.Attack(vegeta.Targeter(targeter), vegeta.Rate{Freq: floodRate, Per: time.Second}, time.Hour, "flood") {
		if res.Error == vegeta.ErrNoTargets.Error() {
			continue // the targeter's end, not an answer
		}
		answers[floodAnswer(res)]++
	}
	elapsed := time.Since(start)
	close(over)
	<-done
	ended := time.Now()
	rows := func() int {
		var n int
		if err := c.DB.QueryRow(context.Background(), `SELECT count(*) FROM circulation_storage.login_failure WHERE tenant_id = $1`, c.Tenant).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	f := Flood{Addresses: addresses, Answers: answers, PerSecond: float64(addresses) / elapsed.Seconds(), Window: floodWindow().String(),
		RowsAtEnd: rows()}
	for range 100 {
		quiet.add(signIn())
	}
	f.Quiet, f.During = quiet.stats(), during.stats()
	if f.Quiet.P50Ms > 0 {
		f.Ratio = f.During.P50Ms / f.Quiet.P50Ms
	}
	// The window ends floodWindow() after the last count began; the sweeper
	// passes every second. What may be left then is the owner's pair, and
	// the account's rate count until its minute (login.AccountRateWindow)
	// from the flood's first guess ends. Look until the rows are down to
	// that bound, or well past the window.
	bound := func(now time.Time) int {
		if now.Before(start.Add(login.AccountRateWindow)) {
			return 2
		}
		return 1
	}
	deadline := ended.Add(floodWindow() + 30*time.Second)
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	for {
		now := time.Now()
		f.RowsAfter, f.AfterS, f.Bound = rows(), now.Sub(ended).Seconds(), bound(now)
		if (f.RowsAfter <= f.Bound && now.After(ended.Add(floodWindow()))) || now.After(deadline) {
			break
		}
		<-tick.C
	}
	if f.Quiet.Errors+f.During.Errors > 0 {
		t.Errorf("the owner's sign-ins failed %d times quiet and %d during the flood", f.Quiet.Errors, f.During.Errors)
	}
	if f.RowsAfter > f.Bound {
		t.Errorf("%d counts left %.0f s after the flood (window %s), want at most %d:\n%s", f.RowsAfter, f.AfterS, floodWindow(), f.Bound, countsLeft(t, c))
	}
	return f
}

// signIns are the owner's sign-ins of one phase: their latencies, and how
// many failed.
type signIns struct {
	mu     sync.Mutex
	h      *hdrhistogram.Histogram
	errors int64
	took   time.Duration
}

func newSignIns() *signIns { return &signIns{h: newHist()} }

func (s *signIns) add(d time.Duration, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.took += d
	if !ok {
		s.errors++
		return
	}
	record(s.h, d)
}

func (s *signIns) stats() Stats { return stats(s.h, s.errors, s.took) }

// floodAnswer is an answer of the flood as the report counts them.
func floodAnswer(res *vegeta.Result) string {
	if res.Error != "" && res.Code == 0 {
		return "error: " + res.Error
	}
	code := ""
	if env, ok := errhttp.Decode(res.Body); ok {
		code = " " + env.Errors[0].Code
	}
	return fmt.Sprintf("%d%s", res.Code, code)
}

// printFlood writes scenario 11's table.
func printFlood(w io.Writer, f Flood) {
	fmt.Fprintf(w, "flood of %d addresses at %.0f/s: answers", f.Addresses, f.PerSecond)
	keys := make([]string, 0, len(f.Answers))
	for k := range f.Answers {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(w, " %s ×%d", k, f.Answers[k])
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "owner's sign-in p50: quiet %.2f ms (%d), during the flood %.2f ms (%d): ×%.2f\n",
		f.Quiet.P50Ms, f.Quiet.Requests, f.During.P50Ms, f.During.Requests, f.Ratio)
	fmt.Fprintf(w, "counts: %d at the flood's end, %d after %.0f s (window %s; bound %d)\n", f.RowsAtEnd, f.RowsAfter, f.AfterS, f.Window, f.Bound)
}

// countsLeft lists the counts of the cluster's tenant, a row a line, to
// say which ones outlived their window.
func countsLeft(t *testing.T, c *harness.Cluster) string {
	rows, err := c.DB.Query(context.Background(), `SELECT key, failures, checking, first_at, locked_until, checking_at, succeeded_at, now()
  FROM circulation_storage.login_failure WHERE tenant_id = $1 ORDER BY key`, c.Tenant)
	if err != nil {
		t.Fatal(err)
	}
	type count struct {
		Key                   string
		Failures, Checking    int
		FirstAt               time.Time
		LockedUntil           *time.Time
		CheckingAt, Succeeded *time.Time
		Now                   time.Time
	}
	counts, err := pgx.CollectRows(rows, pgx.RowToStructByPos[count])
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, n := range counts {
		fmt.Fprintf(&b, "%+v\n", n)
	}
	return b.String()
}
