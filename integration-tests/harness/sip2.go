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
	l := map[string]any{"address": "127.0.0.1:0", "tenant": c.Tenant, "servicePointId": ServicePoint, "plain": true}
	for k, v := range listener {
		l[k] = v
	}
	raw, _ := json.Marshal(map[string]any{"listeners": []any{l}})
	file := filepath.Join(t.TempDir(), "sip2.json")
	if err := os.WriteFile(file, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	p := startProcess(t, "sip2", filepath.Join(c.binDir(), "sip2"),
		append([]string{"SIP2_CONFIG=" + file, "CIRCULATION_URL=" + c.Circulations[circ].URL(), "LOG_LEVEL=info"}, env...)...)
	d := &SIP2Door{Process: p, ConfigFile: file}
	var health struct {
		Listeners []struct {
			Bound string `json:"bound"`
		} `json:"listeners"`
	}
	res, err := http.Get(p.URL() + "/admin/health")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if err := json.NewDecoder(res.Body).Decode(&health); err != nil || len(health.Listeners) != 1 {
		t.Fatalf("the door's health names no listener: %v", err)
	}
	d.SIP2Addr = health.Listeners[0].Bound
	return d
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
	if got := k.Send("9300CN" + user + "|CO" + password + "|CPkiosk|"); !strings.HasPrefix(got, "941") {
		k.t.Fatalf("login as %s: %q", user, got)
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
