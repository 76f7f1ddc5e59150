package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/checkoutlock/integration-tests/harness"
	"github.com/checkoutlock/schemas"
)

// A shutdown ends what the process started: on SIGTERM, storage's waiting
// acquisitions answer at once, the HTTP server stops within
// SHUTDOWN_TIMEOUT, and the process exits 0, leaving no lock behind but
// the ones its clients hold.

// TestShutdownAnswersWaitersAndLeavesOnlyTheHeldLock: one patron's lock is
// held for two minutes, and twenty acquisitions wait for it (waitMs a
// minute, far beyond SHUTDOWN_TIMEOUT) on storage instance B. SIGTERM to
// B: every waiter answers 503 SHUTTING_DOWN within a second, B exits 0
// within SHUTDOWN_TIMEOUT, and the database holds exactly one lock row for
// the patron, the held one (a lock belongs to its holder, who releases it
// or lets it expire; a shutdown does not take it away), still served by
// instance A; no waiter_gave_up event was written for the waits the
// shutdown ended.
//
// B is started here rather than by the harness because the harness keeps
// a process's exit status to itself: it runs the harness's own build of
// storage (found through instance A's /proc/<pid>/exe).
func TestShutdownAnswersWaitersAndLeavesOnlyTheHeldLock(t *testing.T) {
	t.Parallel()
	const (
		waiters         = 20
		shutdownTimeout = 5 * time.Second
	)
	a := harness.StartStorage(t)
	tenant := a.InitTenant(t)
	bin, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", a.PID()))
	if err != nil {
		t.Skipf("the storage binary's path: %v", err)
	}
	b := startOwnStorage(t, bin, "SHUTDOWN_TIMEOUT="+shutdownTimeout.String(), "LOCK_MAX_WAIT_MS=60000")

	user, held := uuid.NewString(), uuid.NewString()
	if r := post(t, b.url, tenant, "/check-out-lock-storage", lockBody(user, held, 120000, 0)); r.status != http.StatusCreated {
		t.Fatalf("acquire: %d %s", r.status, r.body)
	}
	type timed struct {
		answer
		at time.Time
	}
	answers := make(chan timed, waiters)
	for range waiters {
		go func() {
			r := post(t, b.url, tenant, "/check-out-lock-storage", lockBody(user, uuid.NewString(), 60000, 60000))
			answers <- timed{r, time.Now()}
		}()
	}
	waitFor(t, "20 acquisitions to wait on B", func() bool { return b.gauge(t, "checkout_lock_waiters") == waiters })

	signalled := time.Now()
	if err := b.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	for i := range waiters {
		var r timed
		select {
		case r = <-answers:
		case <-time.After(shutdownTimeout):
			t.Fatalf("%d of %d waiters answered; the others not within SHUTDOWN_TIMEOUT", i, waiters)
		}
		if r.err != nil {
			t.Fatalf("waiter %d: no answer: %v", i, r.err)
		}
		if took := r.at.Sub(signalled); took > time.Second {
			t.Errorf("waiter %d answered %s after SIGTERM, want within a second", i, took.Round(time.Millisecond))
		}
		if r.status != http.StatusServiceUnavailable || r.code() != "SHUTTING_DOWN" || r.header.Get("Retry-After") == "" {
			t.Errorf("waiter %d: %d %s (Retry-After %q), want 503 SHUTTING_DOWN with Retry-After", i, r.status, r.body, r.header.Get("Retry-After"))
		}
	}
	select {
	case <-b.exited:
	case <-time.After(shutdownTimeout):
		t.Fatalf("B still runs %s after SIGTERM", shutdownTimeout)
	}
	if code := b.cmd.ProcessState.ExitCode(); code != 0 {
		t.Errorf("B exited %d, want 0\n%s", code, b.log())
	}
	t.Logf("B exited %d, %s after SIGTERM", b.cmd.ProcessState.ExitCode(), time.Since(signalled).Round(time.Millisecond))
	if log := b.log(); !strings.Contains(log, `"msg":"stopped"`) {
		t.Errorf("B's log does not say it stopped:\n%s", log)
	}

	// What is left in the database.
	ctx := context.Background()
	db, err := pgx.Connect(ctx, harness.DatabaseURL())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close(ctx)
	schema := tenant + "_mod_circulation_storage"
	var locks []string
	rows, err := db.Query(ctx, "SELECT id::text FROM "+pgx.Identifier{schema, "check_out_lock"}.Sanitize()+" ORDER BY id")
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		locks = append(locks, id)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if len(locks) != 1 || locks[0] != held {
		t.Errorf("lock rows %v after the shutdown, want only the held lock %s", locks, held)
	}
	var gaveUp int
	if err := db.QueryRow(ctx, "SELECT count(*) FROM "+pgx.Identifier{schema, "check_out_lock_event"}.Sanitize()+
		" WHERE type = 'waiter_gave_up'").Scan(&gaveUp); err != nil {
		t.Fatal(err)
	}
	if gaveUp != 0 {
		t.Errorf("%d waiter_gave_up events, want none for waits a shutdown ended", gaveUp)
	}
	// The waiters' registration for release announcements (one row per
	// patron, check_out_lock_waiter) is no lock: it lapses by itself
	// (waitMs and a second) and the sweeper deletes it. Other instances'
	// waiters may rely on it, so a shutdown leaves it.
	var registrations int
	if err := db.QueryRow(ctx, "SELECT count(*) FROM "+pgx.Identifier{schema, "check_out_lock_waiter"}.Sanitize()+
		" WHERE expires_at <= now() + interval '62 seconds'").Scan(&registrations); err != nil {
		t.Fatal(err)
	}
	if registrations > 1 {
		t.Errorf("%d waiter registrations, want at most the patron's one", registrations)
	}

	// The held lock is still its holder's, as instance A says.
	res, err := http.DefaultClient.Do(request(t, http.MethodGet, a.URL()+"/check-out-lock-storage/"+held, tenant, nil))
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Errorf("GET the held lock on A after B's shutdown: %d, want 200", res.StatusCode)
	}
	if r := post(t, a.URL(), tenant, "/check-out-lock-storage", lockBody(user, uuid.NewString(), 1000, 0)); r.status != http.StatusServiceUnavailable || r.code() != schemas.CodeLockHeld {
		t.Errorf("acquire on A after B's shutdown: %d %s, want 503 LOCK_HELD", r.status, r.body)
	}
	summary(t, waiters+1, 1, waiters, 0, fmt.Sprintf("exit=%d lock_rows=%d", b.cmd.ProcessState.ExitCode(), len(locks)))
}

// ownStorage is a storage process this test starts and waits for itself,
// for its exit status.
type ownStorage struct {
	url     string
	cmd     *exec.Cmd
	exited  chan struct{}
	logPath string
}

func (s *ownStorage) log() string {
	b, _ := os.ReadFile(s.logPath)
	return string(b)
}

// startOwnStorage runs bin with no authentication on the run's database
// on a free port, env on top, and waits until it answers /admin/health.
// It is killed when the test ends if it still runs; its log is printed
// if the test failed.
func startOwnStorage(t *testing.T, bin string, env ...string) *ownStorage {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	s := &ownStorage{url: "http://" + addr, exited: make(chan struct{}), logPath: filepath.Join(t.TempDir(), "storage-b.log")}
	logFile, err := os.Create(s.logPath)
	if err != nil {
		t.Fatal(err)
	}
	s.cmd = exec.Command(bin)
	s.cmd.Env = append(os.Environ(), append([]string{"HTTP_ADDR=" + addr, "AUTH_MODE=none",
		"DATABASE_URL=" + harness.DatabaseURL(), "LOG_LEVEL=info"}, env...)...)
	s.cmd.Stdout, s.cmd.Stderr = logFile, logFile
	if err := s.cmd.Start(); err != nil {
		logFile.Close()
		t.Fatal(err)
	}
	go func() {
		_ = s.cmd.Wait()
		logFile.Close()
		close(s.exited)
	}()
	t.Cleanup(func() {
		select {
		case <-s.exited:
		default:
			_ = s.cmd.Process.Kill()
			<-s.exited
		}
		if t.Failed() {
			t.Logf("---- log of storage B ----\n%s", s.log())
		}
	})
	waitFor(t, "storage B to answer", func() bool {
		select {
		case <-s.exited:
			t.Fatalf("storage B exited while starting:\n%s", s.log())
		default:
		}
		res, err := http.Get(s.url + "/admin/health")
		if err != nil {
			return false
		}
		res.Body.Close()
		return res.StatusCode == http.StatusOK
	})
	return s
}

// gauge reads an unlabelled series of the process's /metrics; -1 when
// it cannot.
func (s *ownStorage) gauge(t *testing.T, series string) float64 {
	res, err := http.Get(s.url + "/metrics")
	if err != nil {
		return -1
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	for _, line := range strings.Split(string(body), "\n") {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err != nil {
				t.Fatalf("%s: %v", line, err)
			}
			return f
		}
	}
	return -1
}

// answer is an HTTP answer, or the error of a request that got none.
type answer struct {
	status int
	header http.Header
	body   []byte
	err    error
}

// code is the first code of an error envelope.
func (a answer) code() string {
	var env struct {
		Errors []struct {
			Code string `json:"code"`
		} `json:"errors"`
	}
	if json.Unmarshal(a.body, &env) != nil || len(env.Errors) == 0 {
		return ""
	}
	return env.Errors[0].Code
}

func request(t *testing.T, method, url, tenant string, body any) *http.Request {
	var r io.Reader
	if body != nil {
		data, err := json.Marshal(body)
		if err != nil {
			panic(err)
		}
		r = bytes.NewReader(data)
	}
	req, err := http.NewRequest(method, url, r)
	if err != nil {
		panic(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set(schemas.HeaderTenant, tenant)
	return req
}

// post sends body as JSON to base+path as tenant; safe to call from any
// goroutine (it does not fail the test).
func post(t *testing.T, base, tenant, path string, body any) answer {
	client := &http.Client{Timeout: 2 * time.Minute}
	res, err := client.Do(request(t, http.MethodPost, base+path, tenant, body))
	if err != nil {
		return answer{err: err}
	}
	defer res.Body.Close()
	data, err := io.ReadAll(res.Body)
	if err != nil && !errors.Is(err, io.EOF) {
		return answer{status: res.StatusCode, header: res.Header, err: err}
	}
	return answer{status: res.StatusCode, header: res.Header, body: data}
}

// TestShutdownLetsAnInFlightCheckOutFinish: a check-out through
// circulation waits at storage for the patron's lock, which someone else
// holds, when circulation gets SIGTERM. Circulation stops taking requests
// at once, and the check-out still finishes: the lock is released, the
// check-out takes it, writes its loan and releases it, and answers 201;
// then circulation stops cleanly (its log says "stopped", which it writes
// only on the way to exit 0; the harness keeps exit statuses to itself).
func TestShutdownLetsAnInFlightCheckOutFinish(t *testing.T) {
	t.Parallel()
	c := harness.NewCluster(t, harness.Options{Circulations: 1, FeatureOn: true, RetryIntervalMs: "3000|3000"})
	lib := c.SetupLibrary(1, 1, 0)
	patron, item := lib.Patrons[0], lib.Items[0][0]
	user, held := patronID(t, c, patron), uuid.NewString()
	c.Do(c.Storage, "POST", "/check-out-lock-storage", lockBody(user, held, 60000, 0)).Want(t, http.StatusCreated)
	circ := c.Circulations[0]
	result := make(chan harness.Response, 1)
	go func() { result <- c.CheckOut(0, item, patron) }()
	waitFor(t, "the check-out to wait for the lock at storage", func() bool {
		return metric(t, c, c.Storage, "checkout_lock_waiters") == 1
	})
	if err := syscall.Kill(circ.PID(), syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "circulation to stop taking requests", func() bool {
		res, err := http.Get(circ.URL() + "/admin/health")
		if err == nil {
			res.Body.Close()
		}
		return err != nil
	})
	c.Do(c.Storage, "DELETE", "/check-out-lock-storage/"+held, nil).Want(t, http.StatusNoContent)
	select {
	case r := <-result:
		r.Want(t, http.StatusCreated)
	case <-time.After(10 * time.Second):
		t.Fatal("the in-flight check-out has not finished 10 s after the lock was released")
	}
	waitFor(t, "circulation to stop", func() bool { return strings.Contains(circ.Log(), `"msg":"stopped"`) })
	if log := circ.Log(); strings.Contains(log, "still in flight") {
		t.Errorf("circulation cut check-outs off:\n%s", log)
	}
	if n := c.OpenLoans(t, patron); n != 1 {
		t.Errorf("%d open loans for the patron, want the check-out's one", n)
	}
	if n := liveLocks(t, c); n != 0 {
		t.Errorf("%d live locks after the check-out, want none (it releases its lock with the write)", n)
	}
}

// doorBehindAProxy is a cluster with the kiosk account user_id and a SIP2
// door (with env) that reaches circulation through a proxy, which the
// test slows or silences.
func doorBehindAProxy(t *testing.T, env ...string) (*harness.Cluster, *harness.Proxy, *harness.SIP2Door) {
	t.Helper()
	c := harness.NewCluster(t, harness.Options{Circulations: 1, FeatureOn: true})
	c.Account(t, "user_id", "Kiosk", "One", schemas.RoleSelfCheck, "passw0rd")
	toCirculation := harness.NewProxy(t, c.Circulations[0].Addr)
	door := c.StartSIP2(t, 0, nil, append([]string{"CIRCULATION_URL=http://" + toCirculation.Addr()}, env...)...)
	return c, toCirculation, door
}

// kioskSessions counts the sessions of the kiosk account user_id at
// storage: alive, and ended.
func kioskSessions(t *testing.T, c *harness.Cluster) (alive, ended int) {
	t.Helper()
	err := c.DB.QueryRow(context.Background(), fmt.Sprintf(`SELECT count(*) FILTER (WHERE s.ended_at IS NULL), count(s.ended_at)
		FROM %[1]s.login_session s JOIN %[1]s.account a ON a.id = s.account_id
		WHERE a.jsonb->>'username' = 'user_id'`, c.Schema)).Scan(&alive, &ended)
	if err != nil {
		t.Fatal(err)
	}
	return alive, ended
}

// TestSIP2StopLogsEveryKioskOut: twenty kiosks at five addresses are
// connected and logged in to the SIP2 door when it gets SIGTERM. Every
// kiosk's session ends at storage before the door exits (ended_at set on
// all twenty login_session rows), and the door exits 0 with nothing in its
// log about a logout it could not do. Each logout takes two seconds (a
// second each way between the door and circulation), twenty of them forty
// in a row, and SHUTDOWN_TIMEOUT is eleven: they fit only when they run at
// once.
func TestSIP2StopLogsEveryKioskOut(t *testing.T) {
	t.Parallel()
	const kiosks = 20
	c, toCirculation, door := doorBehindAProxy(t, "SIP2_CALL_TIMEOUT=5s", "SIP2_WRITE_TIMEOUT=1s", "SHUTDOWN_TIMEOUT=11s")
	sessions := func() (alive, ended int) { return kioskSessions(t, c) }
	for i := range kiosks {
		harness.DialSIP2From(t, fmt.Sprintf("127.0.3.%d", 1+i%5), door.SIP2Addr).Login("user_id", "passw0rd")
	}
	if alive, ended := sessions(); alive != kiosks || ended != 0 {
		t.Fatalf("%d sessions alive and %d ended after %d kiosks' logins, want %d alive", alive, ended, kiosks, kiosks)
	}

	toCirculation.SetLatency(time.Second)
	signalled := time.Now()
	door.Stop()
	code, exited := door.WaitExit(time.Second)
	t.Logf("the door exited %d, %s after SIGTERM", code, time.Since(signalled).Round(time.Millisecond))
	if !exited || code != 0 {
		t.Errorf("the door's exit status %d (exited: %t), want 0", code, exited)
	}
	if alive, ended := sessions(); alive != 0 || ended != kiosks {
		t.Errorf("%d kiosks' sessions alive and %d ended after the door stopped, want all %d ended", alive, ended, kiosks)
	}
	log := door.Log()
	if strings.Contains(log, `"msg":"logout`) || !strings.Contains(log, `"msg":"stopped"`) {
		t.Errorf("the door's log after SIGTERM:\n%s", log)
	}
}

// TestSIP2StopWithoutCirculationSaysWhichSessionsLiveOn: three kiosks are
// logged in when circulation stops answering the door (nothing passes
// between them) and the door gets SIGTERM. Each logout gives up at
// SIP2_CALL_TIMEOUT, the door exits 0 within SHUTDOWN_TIMEOUT, and its log
// names each kiosk whose session lives on, which storage still holds.
func TestSIP2StopWithoutCirculationSaysWhichSessionsLiveOn(t *testing.T) {
	t.Parallel()
	const kiosks = 3
	c, toCirculation, door := doorBehindAProxy(t, "SIP2_CALL_TIMEOUT=2s", "SIP2_WRITE_TIMEOUT=1s", "SHUTDOWN_TIMEOUT=5s")
	for i := range kiosks {
		harness.DialSIP2From(t, fmt.Sprintf("127.0.3.%d", 11+i), door.SIP2Addr).Login("user_id", "passw0rd")
	}

	toCirculation.Blackhole(true)
	door.Stop()
	code, exited := door.WaitExit(time.Second)
	if !exited || code != 0 {
		t.Errorf("the door's exit status %d (exited: %t), want 0", code, exited)
	}
	notDone := map[string]bool{}
	for line := range strings.Lines(door.Log()) {
		var l struct {
			Msg, Kiosk, Peer string
		}
		if json.Unmarshal([]byte(line), &l) == nil && strings.HasPrefix(l.Msg, "logout not done") && l.Kiosk == "user_id" {
			notDone[l.Peer] = true
		}
	}
	if len(notDone) != kiosks {
		t.Errorf("the door's log names logouts not done at %v, want one at each of the %d kiosks' addresses", notDone, kiosks)
	}
	if alive, _ := kioskSessions(t, c); alive != kiosks {
		t.Errorf("%d sessions alive at storage, want the %d the door could not end", alive, kiosks)
	}
}
