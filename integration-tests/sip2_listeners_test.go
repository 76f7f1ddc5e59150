package integration

import (
	"bufio"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/csv"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/checkoutlock/integration-tests/harness"
	"github.com/checkoutlock/schemas"
)

// testCA is a certificate authority of a test's own, and what it signs.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pool *x509.CertPool
	dir  string
}

func newTestCA(t *testing.T) *testCA {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true,
		KeyUsage: x509.KeyUsageCertSign, BasicConstraintsValid: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	ca := &testCA{cert: cert, key: key, pool: x509.NewCertPool(), dir: t.TempDir()}
	ca.pool.AddCert(cert)
	ca.write(t, "ca.pem", "CERTIFICATE", der)
	return ca
}

func (ca *testCA) write(t *testing.T, name, kind string, der []byte) string {
	t.Helper()
	path := filepath.Join(ca.dir, name)
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// issue signs a certificate for a server (127.0.0.1) or a client, writes
// it and its key as PEM files, and returns them and the tls.Certificate.
func (ca *testCA) issue(t *testing.T, name string, server bool) (certFile, keyFile string, pair tls.Certificate) {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), KeyUsage: x509.KeyUsageDigitalSignature}
	if server {
		tmpl.ExtKeyUsage, tmpl.IPAddresses = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, []net.IP{net.ParseIP("127.0.0.1")}
	} else {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	kder, _ := x509.MarshalPKCS8PrivateKey(key)
	certFile, keyFile = ca.write(t, name+".pem", "CERTIFICATE", der), ca.write(t, name+"-key.pem", "PRIVATE KEY", kder)
	pair, err = tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	return certFile, keyFile, pair
}

// TestSIP2ListenersTLSProxyAndReload: a TLS listener asking for client
// certificates, a listener behind a PROXY-protocol load balancer (the
// kiosk's address counts for login failures and shows in the kiosk list),
// and a reload that adds a listener while a kiosk stays connected.
func TestSIP2ListenersTLSProxyAndReload(t *testing.T) {
	t.Parallel()
	c := harness.NewCluster(t, harness.Options{Circulations: 1, FeatureOn: true, StorageEnv: []string{"LOGIN_MAX_FAILURES=3"}})
	c.SetupLibrary(1, 1, 0)
	c.Account(t, "user_id", "Kiosk", "One", schemas.RoleSelfCheck, "passw0rd")
	ca := newTestCA(t)
	certFile, keyFile, _ := ca.issue(t, "door", true)
	_, _, kioskCert := ca.issue(t, "kiosk", false)
	tlsAddr, proxyAddr := freeAddr(t), freeAddr(t)
	listeners := []map[string]any{
		{"address": tlsAddr, "plain": nil, "tls": map[string]any{"certFile": certFile, "keyFile": keyFile, "clientCaFile": filepath.Join(ca.dir, "ca.pem")}},
		{"address": proxyAddr, "proxyProtocol": true},
	}
	door := c.StartSIP2With(t, 0, listeners)

	t.Run("TLS with a client certificate", func(t *testing.T) {
		conn, err := tls.Dial("tcp", tlsAddr, &tls.Config{RootCAs: ca.pool, Certificates: []tls.Certificate{kioskCert}})
		if err != nil {
			t.Fatal(err)
		}
		k := harness.SIP2Over(t, conn)
		k.Login("user_id", "passw0rd")
		if v := conn.ConnectionState().Version; v < tls.VersionTLS12 {
			t.Fatalf("TLS version %x", v)
		}
		// No client certificate: no session. TLS 1.3 reports the refusal on
		// the first read.
		bare, err := tls.Dial("tcp", tlsAddr, &tls.Config{RootCAs: ca.pool})
		if err == nil {
			_ = bare.SetDeadline(time.Now().Add(5 * time.Second))
			_, _ = bare.Write([]byte("9900302.00\r"))
			_, err = bare.Read(make([]byte, 64))
			bare.Close()
		}
		if err == nil {
			t.Fatal("a kiosk without a client certificate was answered")
		}
		// Plain TCP to the TLS listener gets no SIP2 answer.
		plain := harness.DialSIP2(t, tlsAddr)
		_, _ = plain.Conn.Write([]byte("9900302.00\r"))
		waitClosed(t, plain.Conn, 5*time.Second)
	})

	t.Run("PROXY protocol", func(t *testing.T) {
		via := func(addr string) *harness.SIP2Client {
			conn, err := net.Dial("tcp", proxyAddr)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := conn.Write([]byte("PROXY TCP4 " + addr + " 127.0.0.1 40000 6443\r\n")); err != nil {
				t.Fatal(err)
			}
			return harness.SIP2Over(t, conn)
		}
		// Three failed logins from 10.1.2.3 (LOGIN_MAX_FAILURES) lock the
		// kiosk account out at that address, the right password included;
		// 10.9.9.9 behind the same balancer logs in: storage counts by the
		// kiosk's address, which the door names and circulation believes
		// from the door.
		bad := via("10.1.2.3")
		for range 3 {
			if got := bad.Send("9300CNuser_id|COwrong|"); !strings.HasPrefix(got, "940") {
				t.Fatalf("wrong password: %q", got)
			}
		}
		if got := bad.Send("9300CNuser_id|COpassw0rd|"); !strings.HasPrefix(got, "940") {
			t.Fatalf("a locked address logged in: %q", got)
		}
		good := via("10.9.9.9")
		good.Login("user_id", "passw0rd")
		var kiosks struct {
			Kiosks []struct {
				Address  string `json:"address"`
				Username string `json:"username"`
				LoggedIn bool   `json:"loggedIn"`
			} `json:"kiosks"`
		}
		res, err := http.Get(door.URL() + "/admin/kiosks?tenant=" + c.Tenant)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		if err := json.NewDecoder(res.Body).Decode(&kiosks); err != nil {
			t.Fatal(err)
		}
		found := false
		for _, k := range kiosks.Kiosks {
			if k.Address == "10.9.9.9" && k.Username == "user_id" && k.LoggedIn {
				found = true
			}
		}
		if !found {
			t.Fatalf("the kiosk list does not show 10.9.9.9 logged in as user_id: %+v", kiosks.Kiosks)
		}
		// The door's log names the kiosk's address too, not the balancer's.
		if !harness.Poll(10*time.Second, 20*time.Millisecond, func() bool {
			for line := range strings.Lines(door.Log()) {
				if strings.Contains(line, `"msg":"sip2"`) && strings.Contains(line, `"message":"93"`) &&
					strings.Contains(line, `"outcome":"ok"`) && strings.Contains(line, `"peer":"10.9.9.9"`) {
					return true
				}
			}
			return false
		}) {
			t.Errorf("the door's log does not name 10.9.9.9 on its login's line:\n%s", door.Log())
		}
		// A connection without the header is closed.
		raw := harness.DialSIP2(t, proxyAddr)
		_, _ = raw.Conn.Write([]byte("9900302.00\r\n"))
		waitClosed(t, raw.Conn, 5*time.Second)
	})

	t.Run("reload", func(t *testing.T) {
		conn, err := tls.Dial("tcp", tlsAddr, &tls.Config{RootCAs: ca.pool, Certificates: []tls.Certificate{kioskCert}})
		if err != nil {
			t.Fatal(err)
		}
		stay := harness.SIP2Over(t, conn)
		stay.Login("user_id", "passw0rd")
		added := freeAddr(t)
		// The PROXY listener goes, a plain one comes; the TLS one stays.
		door.WriteConfig(t, c, []map[string]any{listeners[0], {"address": added, "charset": "UTF-8"}})
		if err := syscall.Kill(door.PID(), syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
		if !harness.Poll(10*time.Second, 20*time.Millisecond, func() bool {
			b := door.Bound(t)
			return b[added] != "" && b[proxyAddr] == ""
		}) {
			t.Fatalf("the reload did not take: %v", door.Bound(t))
		}
		k := harness.DialSIP2(t, added)
		k.Login("user_id", "passw0rd")
		// The connection made before the reload goes on.
		if got := stay.Send("9900302.00"); !strings.HasPrefix(got, "98") {
			t.Fatalf("the kiosk connected before the reload: %q", got)
		}
		// A file with an error changes nothing.
		if err := os.WriteFile(door.ConfigFile, []byte(`{"listeners":[{"address":"127.0.0.1:1"}]}`), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := syscall.Kill(door.PID(), syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
		if !harness.Poll(10*time.Second, 20*time.Millisecond, func() bool { return strings.Contains(door.Log(), "reload refused") }) {
			t.Fatal("the door did not refuse the bad file")
		}
		if b := door.Bound(t); b[added] == "" || b[tlsAddr] == "" {
			t.Fatalf("a refused reload changed the listeners: %v", b)
		}
		k.Send("9900302.00")
	})
}

// TestKiosksOnTheLockConsole: circulation lists the kiosks connected to
// its SIP2 doors for the caller's tenant (the operator may, a kiosk may
// not), says which door did not answer, and the lock console shows them.
func TestKiosksOnTheLockConsole(t *testing.T) {
	t.Parallel()
	adminAddr, silent := harness.FreeAddr(t), harness.FreeAddr(t)
	c := harness.NewCluster(t, harness.Options{Circulations: 1, FeatureOn: true,
		CirculationEnv: []string{"SIP2_ADMIN_URLS=http://" + adminAddr + ",http://" + silent}})
	c.SetupLibrary(1, 1, 0)
	c.Account(t, "user_id", "Kiosk", "One", schemas.RoleSelfCheck, "passw0rd")
	c.Account(t, "olga", "Olga", "Operator", schemas.RoleOperator, "olga-password")
	door := c.StartSIP2At(t, adminAddr, 0, []map[string]any{nil})
	k := harness.DialSIP2(t, door.SIP2Addr)
	k.Login("user_id", "passw0rd")
	k.Send("9900302.00")

	var got struct {
		Kiosks []struct {
			Address, Username string
			LoggedIn          bool
			Messages          int
		}
		Doors []struct{ URL, Error string }
	}
	c.DoWith(c.Circulations[0], "GET", "/circulation/kiosks", nil, c.HeadersWith(schemas.HeaderToken, c.Token(schemas.RoleOperator))).
		Want(t, http.StatusOK).Decode(t, &got)
	if len(got.Kiosks) != 1 || got.Kiosks[0].Username != "user_id" || !got.Kiosks[0].LoggedIn || got.Kiosks[0].Messages != 2 ||
		got.Kiosks[0].Address != "127.0.0.1" {
		t.Fatalf("kiosks %+v, want the one logged in with its two messages", got.Kiosks)
	}
	if len(got.Doors) != 2 || got.Doors[0].Error != "" || got.Doors[1].Error != "the door did not answer" {
		t.Fatalf("doors %+v, want the running one and the silent one named", got.Doors)
	}
	// Another tenant's console sees none of them.
	other := c.DoWith(c.Circulations[0], "GET", "/circulation/kiosks", nil,
		map[string]string{schemas.HeaderTenant: "diku", schemas.HeaderToken: harness.Token(t, "diku", schemas.RoleOperator)})
	if other.Status == http.StatusOK && strings.Contains(string(other.Body), "user_id") {
		t.Fatalf("another tenant sees this tenant's kiosks: %s", other.Body)
	}
	c.DoWith(c.Circulations[0], "GET", "/circulation/kiosks", nil, c.HeadersWith(schemas.HeaderToken, c.Token(schemas.RoleSelfCheck))).
		Want(t, http.StatusForbidden)

	ctx := browser(t)
	signIn(t, ctx, c, "/ui/locks.html", "olga", "olga-password")
	if err := chromedp.Run(ctx, chromedp.WaitVisible("#kiosks tbody tr", chromedp.ByQuery)); err != nil {
		t.Fatal(err)
	}
	if row := textOf(t, ctx, "#kiosks tbody tr"); !strings.Contains(row, "user_id") || !strings.Contains(row, "127.0.0.1") {
		t.Errorf("the console's kiosk row reads %q", row)
	}
	if status := textOf(t, ctx, "#kiosks-status"); !strings.Contains(status, "1 connected now, 0 ended in the last 24 hours.") ||
		!strings.Contains(status, silent) {
		t.Errorf("the console's kiosk status reads %q, want the count and the silent door", status)
	}

	// The kiosks' day: a check-out the library refuses, and the session
	// ends; it stays on the console, with its end, its messages and its
	// refusal, through a restart of circulation (the door keeps the day).
	if got := k.Send(checkOutMsg("no-such-patron", "no-such-item")); !strings.HasPrefix(got, "120") {
		t.Fatalf("a check-out for no patron: %q", got)
	}
	_ = k.Conn.Close()
	type dayKiosk struct {
		Username, LastCode string
		Messages, Refusals int
		Ended              *time.Time
	}
	var day struct{ Kiosks []dayKiosk }
	if !harness.Poll(10*time.Second, 20*time.Millisecond, func() bool {
		day.Kiosks = nil
		c.DoWith(c.Circulations[0], "GET", "/circulation/kiosks", nil, c.HeadersWith(schemas.HeaderToken, c.Token(schemas.RoleOperator))).
			Want(t, http.StatusOK).Decode(t, &day)
		return len(day.Kiosks) == 1 && day.Kiosks[0].Ended != nil
	}) {
		t.Fatalf("the ended session is not in the kiosks' day: %+v", day.Kiosks)
	}
	if k := day.Kiosks[0]; k.Username != "user_id" || k.Messages != 3 || k.Refusals != 1 || k.LastCode != "11" {
		t.Errorf("the ended session reads %+v, want user_id, 3 messages, 1 refused, the last a check-out (11)", k)
	}
	c.Circulations[0].Restart()
	if err := chromedp.Run(ctx, chromedp.Navigate(pageURL(c, "/ui/locks.html"))); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, ctx, "the ended session on the console", `document.querySelector('#kiosks tbody tr[data-ended="true"]') !== null`)
	row := evaluate[[]string](t, ctx, `[...document.querySelector('#kiosks tbody tr[data-ended="true"]').cells].map((c) => c.textContent)`)
	if len(row) != 7 || row[0] != "kiosk (user_id)" || row[3] == "connected now" || !strings.HasSuffix(row[4], "(check-out)") || row[5] != "3" || row[6] != "1" {
		t.Errorf("the console's row of the ended session reads %q", row)
	}
	if status := textOf(t, ctx, "#kiosks-status"); !strings.Contains(status, "0 connected now, 1 ended in the last 24 hours.") {
		t.Errorf("the console's kiosk status reads %q after the session ended", status)
	}
}

// TestTwoKiosksBehindOneAddressAreTwoNamedRows: two self-check machines
// behind one address, signed in with one kiosk account, each giving its
// own location code at login (SIP2's CP): circulation's list of kiosks
// names each by it, and the console's "Self-check machines today" shows
// two rows, each named by its machine's location and the account. A loan
// one of them made offline past a block names that machine in the lock
// history, on the page and in the CSV, and the console's "Kiosk or
// account" filter finds it by the name the table shows.
func TestTwoKiosksBehindOneAddressAreTwoNamedRows(t *testing.T) {
	t.Parallel()
	adminAddr := harness.FreeAddr(t)
	c := harness.NewCluster(t, harness.Options{Circulations: 1, FeatureOn: true,
		CirculationEnv: []string{"SIP2_ADMIN_URLS=http://" + adminAddr}})
	lib := c.SetupLibrary(1, 1, 0)
	c.Account(t, "user_id", "Kiosk", "Branch", schemas.RoleSelfCheck, "passw0rd")
	c.Account(t, "olga", "Olga", "Operator", schemas.RoleOperator, "olga-password")
	door := c.StartSIP2At(t, adminAddr, 0, []map[string]any{nil})
	var kiosks []*harness.SIP2Client
	for _, location := range []string{"east-wing-1", "east-wing-2"} {
		k := harness.DialSIP2From(t, "127.0.10.1", door.SIP2Addr)
		k.LoginAt("user_id", "passw0rd", location)
		kiosks = append(kiosks, k)
	}
	// East wing 1 lent the item ten minutes ago, while it was cut off, to
	// a patron blocked since: recorded past the block, for the desk.
	c.Do(c.Storage, "POST", "/manualblocks", map[string]any{"userId": c.IDOf(t, "/users", "users", lib.Patrons[0]),
		"desc": "Card reported stolen", "borrowing": true}).Want(t, http.StatusCreated)
	if r := kiosks[0].Send("11NY" + sip2UTC(time.Now().Add(-10*time.Minute)) + strings.Repeat(" ", 18) + "AOdiku|AA" + lib.Patrons[0] +
		"|AB" + lib.Items[0][0] + "|AC|"); !strings.HasPrefix(r, "121") {
		t.Fatalf("the offline check-out answered %q", r)
	}
	var got struct {
		Kiosks []struct{ Address, Username, Location string }
	}
	c.DoWith(c.Circulations[0], "GET", "/circulation/kiosks", nil, c.HeadersWith(schemas.HeaderToken, c.Token(schemas.RoleOperator))).
		Want(t, http.StatusOK).Decode(t, &got)
	var names []string
	for _, k := range got.Kiosks {
		if k.Address != "127.0.10.1" || k.Username != "user_id" {
			t.Fatalf("kiosks %+v, want both behind 127.0.10.1 as user_id", got.Kiosks)
		}
		names = append(names, k.Location)
	}
	if slices.Sort(names); !slices.Equal(names, []string{"east-wing-1", "east-wing-2"}) {
		t.Fatalf("the kiosks' locations %v, want east-wing-1 and east-wing-2", names)
	}
	ctx := browser(t)
	signIn(t, ctx, c, "/ui/locks.html", "olga", "olga-password")
	var rows []string
	if err := chromedp.Run(ctx, chromedp.WaitVisible("#kiosks tbody tr", chromedp.ByQuery),
		chromedp.Evaluate(`[...document.querySelectorAll("#kiosks tbody tr td:first-child")].map((td) => td.textContent).sort()`, &rows)); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(rows, []string{"east-wing-1 (user_id)", "east-wing-2 (user_id)"}) {
		t.Fatalf("the console's machines read %q, want two rows named by their locations", rows)
	}
	// The history's line of the loan made offline names its machine, and
	// the filter finds it by that name, not the other machine's.
	waitUntil(t, ctx, "the lent_offline line", `document.querySelectorAll("#history tbody tr[data-event=lent_offline]").length === 1`)
	cells := evaluate[[]string](t, ctx, `[...document.querySelector("#history tbody tr[data-event=lent_offline]").cells].map((td) => td.textContent)`)
	if cells[3] != "east-wing-1 (user_id)" || cells[4] != "east-wing-1 (user_id)" {
		t.Fatalf("the lent_offline line's holder and by read %q and %q, want east-wing-1 (user_id)", cells[3], cells[4])
	}
	for _, f := range []struct {
		machine string
		lines   int
	}{{"east-wing-1", 1}, {"east-wing-2", 0}} {
		if err := chromedp.Run(ctx, chromedp.SetValue("#f-account", f.machine, chromedp.ByQuery), press("#f-show")); err != nil {
			t.Fatal(err)
		}
		waitUntil(t, ctx, "the history of "+f.machine, fmt.Sprintf(`new URLSearchParams(location.search).get("account") === %s &&
			document.getElementById("history-status").textContent !== "" && document.querySelectorAll("#history tbody tr").length === %d`,
			jsString(f.machine), f.lines))
		res := c.DoWith(c.Circulations[0], "GET", "/circulation/check-out-locks/history.csv?account="+f.machine, nil,
			c.HeadersWith(schemas.HeaderToken, c.Token(schemas.RoleOperator))).Want(t, http.StatusOK)
		csvRows, err := csv.NewReader(strings.NewReader(string(res.Body))).ReadAll()
		if err != nil || len(csvRows) != 1+f.lines {
			t.Fatalf("the CSV of %s: %d rows (%v), want the header and %d", f.machine, len(csvRows), err, f.lines)
		}
		if f.lines == 1 && (csvRows[1][5] != "lent_offline" || csvRows[1][3] != "east-wing-1 (user_id)" || csvRows[1][4] != "east-wing-1 (user_id)") {
			t.Fatalf("the CSV's line %q, want lent_offline held and sent by east-wing-1 (user_id)", csvRows[1])
		}
	}
}

// TestAProxyListenerCountsAConnectionBeforeItsHeader: behind a
// PROXY-protocol listener, connections that have sent no header yet are
// held within SIP2_MAX_CONNECTIONS like any other: two such connections
// at a cap of two, a third is closed at once, not held until
// SIP2_LOGIN_TIMEOUT; one of the two gone, a kiosk
// behind the balancer is answered.
func TestAProxyListenerCountsAConnectionBeforeItsHeader(t *testing.T) {
	t.Parallel()
	c := harness.NewCluster(t, harness.Options{Circulations: 1, FeatureOn: true})
	proxyAddr := freeAddr(t)
	door := c.StartSIP2With(t, 0, []map[string]any{{"address": proxyAddr, "proxyProtocol": true}}, "SIP2_MAX_CONNECTIONS=2")
	dial := func() net.Conn {
		t.Helper()
		conn, err := net.Dial("tcp", proxyAddr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		return conn
	}
	silent := []net.Conn{dial(), dial()}
	third := dial()
	waitClosed(t, third, 5*time.Second)
	silent[0].Close()
	if !harness.Poll(10*time.Second, 50*time.Millisecond, func() bool {
		conn, err := net.DialTimeout("tcp", proxyAddr, time.Second)
		if err != nil {
			return false
		}
		defer conn.Close()
		_ = conn.SetDeadline(time.Now().Add(2 * time.Second))
		if _, err := conn.Write([]byte("PROXY TCP4 10.1.2.3 127.0.0.1 40000 6443\r\n9900302.00\r")); err != nil {
			return false
		}
		reply, err := bufio.NewReader(conn).ReadString('\r')
		return err == nil && strings.HasPrefix(reply, "98")
	}) {
		t.Fatalf("no kiosk behind the balancer was answered once a silent connection went:\n%s", door.Log())
	}
}
