package harness

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// SIP2Door is the SIP2 door running in front of a cluster.
type SIP2Door struct {
	*Process
	// Addr is the SIP2 listener's bound address (the Process's Addr is its
	// admin address: health and metrics).
	SIP2Addr string
	// ConfigFile is the listeners' file it reads (rewrite it and send
	// SIGHUP to reload).
	ConfigFile string
}

// StartSIP2 starts the SIP2 door in front of circulation instance circ with
// one plain listener for the cluster's tenant at the cluster's service
// point; listener adds to (or replaces) the listener's settings, env to the
// door's environment.
func (c *Cluster) StartSIP2(t testing.TB, circ int, listener map[string]any, env ...string) *SIP2Door {
	t.Helper()
	return c.StartSIP2With(t, circ, []map[string]any{listener}, env...)
}

// SIP2Listener is a listener of the cluster's tenant with settings added.
func (c *Cluster) SIP2Listener(settings map[string]any) map[string]any {
	l := map[string]any{"address": "127.0.0.1:0", "tenant": c.Tenant, "servicePointId": ServicePoint, "plain": true}
	for k, v := range settings {
		if v == nil {
			delete(l, k)
			continue
		}
		l[k] = v
	}
	return l
}

// StartSIP2With starts the door with a listener per entry (each given to
// SIP2Listener); SIP2Addr is the first's bound address.
func (c *Cluster) StartSIP2With(t testing.TB, circ int, listeners []map[string]any, env ...string) *SIP2Door {
	t.Helper()
	return c.StartSIP2At(t, freeAddr(t), circ, listeners, env...)
}

// StartSIP2At is StartSIP2With with the door's admin address (health,
// metrics, kiosks) at adminAddr: circulation's SIP2_ADMIN_URLS names it.
func (c *Cluster) StartSIP2At(t testing.TB, adminAddr string, circ int, listeners []map[string]any, env ...string) *SIP2Door {
	t.Helper()
	file := filepath.Join(t.TempDir(), "sip2.json")
	d := &SIP2Door{ConfigFile: file}
	d.WriteConfig(t, c, listeners)
	d.Process = startProcessAt(t, adminAddr, "sip2", filepath.Join(c.binDir(), "sip2"),
		append([]string{"SIP2_CONFIG=" + file, "CIRCULATION_URL=" + c.Circulations[circ].URL(), "LOG_LEVEL=info"}, env...)...)
	bound := d.Bound(t)
	if len(bound) != len(listeners) {
		t.Fatalf("the door's health names %d listeners, want %d", len(bound), len(listeners))
	}
	d.SIP2Addr = bound[c.SIP2Listener(listeners[0])["address"].(string)]
	return d
}

// WriteConfig writes the door's listeners' file.
func (d *SIP2Door) WriteConfig(t testing.TB, c *Cluster, listeners []map[string]any) {
	t.Helper()
	ls := make([]any, len(listeners))
	for i, l := range listeners {
		ls[i] = c.SIP2Listener(l)
	}
	raw, _ := json.Marshal(map[string]any{"listeners": ls})
	if err := os.WriteFile(d.ConfigFile, raw, 0o644); err != nil {
		t.Fatal(err)
	}
}

// Bound is the door's listeners, configured address → bound address, from
// its health answer.
func (d *SIP2Door) Bound(t testing.TB) map[string]string {
	t.Helper()
	var health struct {
		Listeners []struct {
			Address string `json:"address"`
			Bound   string `json:"bound"`
		} `json:"listeners"`
	}
	res, err := http.Get(d.URL() + "/admin/health")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if err := json.NewDecoder(res.Body).Decode(&health); err != nil {
		t.Fatalf("the door's health: %v", err)
	}
	out := map[string]string{}
	for _, l := range health.Listeners {
		out[l.Address] = l.Bound
	}
	return out
}

// SIP2Client is a kiosk's connection to the door: it sends messages and
// reads replies, CR-terminated.
type SIP2Client struct {
	t    testing.TB
	Conn net.Conn
	r    *bufio.Reader
	seq  int
}

// DialSIP2 connects to a SIP2 listener.
func DialSIP2(t testing.TB, addr string) *SIP2Client {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	return SIP2Over(t, conn)
}

// DialSIP2From connects to a SIP2 listener from the local address local
// (127.0.0.2 and up on loopback: a kiosk at an address of its own).
func DialSIP2From(t testing.TB, local, addr string) *SIP2Client {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(local)}, Timeout: 5 * time.Second}
	conn, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	return SIP2Over(t, conn)
}

// SIP2Over is a kiosk's session over conn (TLS, or after a PROXY header).
func SIP2Over(t testing.TB, conn net.Conn) *SIP2Client {
	t.Cleanup(func() { conn.Close() })
	return &SIP2Client{t: t, Conn: conn, r: bufio.NewReaderSize(conn, 4096)}
}

// Raw sends b as it is (a CR is added when it has none) and returns the
// reply without its CR.
func (k *SIP2Client) Raw(b string) string {
	k.t.Helper()
	if !strings.HasSuffix(b, "\r") {
		b += "\r"
	}
	if _, err := k.Conn.Write([]byte(b)); err != nil {
		k.t.Fatalf("send %q: %v", b, err)
	}
	return k.Read()
}

// Read is the next reply, without its CR, within 30 s.
func (k *SIP2Client) Read() string {
	k.t.Helper()
	_ = k.Conn.SetReadDeadline(time.Now().Add(30 * time.Second))
	line, err := k.r.ReadString('\r')
	if err != nil {
		k.t.Fatalf("read a reply: %v (so far %q)", err, line)
	}
	return strings.TrimSuffix(line, "\r")
}

// Send sends msg with error detection (the next sequence number and the
// checksum) and returns the reply, without its CR.
func (k *SIP2Client) Send(msg string) string {
	k.t.Helper()
	return k.Raw(k.Seal(msg))
}

// Seal adds the next sequence number and the checksum to msg.
func (k *SIP2Client) Seal(msg string) string {
	s := fmt.Sprintf("%sAY%dAZ", msg, k.seq%10)
	k.seq++
	return s + SIP2Checksum([]byte(s))
}

// Login logs the kiosk in and fails the test unless the door says 941.
func (k *SIP2Client) Login(user, password string) {
	k.t.Helper()
	k.LoginAt(user, password, "kiosk")
}

// LoginAt logs in as user, the machine giving location as its location
// code (CP).
func (k *SIP2Client) LoginAt(user, password, location string) {
	k.t.Helper()
	if got := k.Send("9300CN" + user + "|CO" + password + "|CP" + location + "|"); !strings.HasPrefix(got, "941") {
		k.t.Fatalf("login as %s at %s: %q", user, location, got)
	}
}

// SIP2Checksum is SIP2's checksum of b: the two's complement of the 16-bit
// sum of its bytes, in four upper-case hex digits.
func SIP2Checksum(b []byte) string {
	var sum uint16
	for _, c := range b {
		sum += uint16(c)
	}
	return fmt.Sprintf("%04X", -sum)
}

// SIP2Field is the value of the variable field id in a reply ("" when it
// is absent). The first field follows the fixed part, which holds no two
// upper-case letters of a field id.
func SIP2Field(reply, id string) string {
	for i, f := range strings.Split(reply, "|") {
		if i == 0 {
			if j := strings.Index(f, id); j >= 0 {
				return f[j+2:]
			}
			continue
		}
		if strings.HasPrefix(f, id) {
			return f[2:]
		}
	}
	return ""
}

// SIP2Date is a SIP2 transaction date for now.
func SIP2Date() string {
	now := time.Now().UTC()
	return now.Format("20060102") + "    " + now.Format("150405")
}
