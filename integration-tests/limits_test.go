package integration

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/checkoutlock/integration-tests/harness"
	"github.com/checkoutlock/schemas"
)

// metricValue reads one unlabelled metric from a process's /metrics.
func metricValue(t *testing.T, c *harness.Cluster, p *harness.Process, name string) float64 {
	t.Helper()
	v, found := c.Metric(t, p, name)
	if !found {
		t.Fatalf("no metric %s", name)
	}
	return v
}

// TestSlowBodiesAreCutOff is the slow-body attack on both services: a
// thousand connections each send a request's headers and the first byte of
// a 100-byte body, then nothing. Each service must answer or close every
// one within its REQUEST_TIMEOUT and a few seconds, and its goroutines must
// return to their idle count.
func TestSlowBodiesAreCutOff(t *testing.T) {
	t.Parallel()
	const conns = 1000
	const requestTimeout = 2 * time.Second
	c := harness.NewCluster(t, harness.Options{Circulations: 1, FeatureOn: true,
		StorageEnv:     []string{"REQUEST_TIMEOUT=2s"},
		CirculationEnv: []string{"REQUEST_TIMEOUT=2s"}})
	for _, target := range []struct {
		p    *harness.Process
		path string
	}{{c.Storage, "/check-out-lock-storage"}, {c.Circulations[0], "/circulation/check-out-by-barcode"}} {
		idle := metricValue(t, c, target.p, "go_goroutines")
		token := c.Token(schemas.RoleTenantAdmin)
		start := time.Now()
		type slow struct {
			conn   net.Conn
			dialed time.Time
		}
		open := make([]slow, 0, conns)
		for range conns {
			dialed := time.Now()
			conn, err := net.Dial("tcp", target.p.Addr)
			if err != nil {
				t.Fatalf("dial %s: %v", target.p.Name, err)
			}
			t.Cleanup(func() { conn.Close() })
			fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: x\r\nX-Okapi-Tenant: %s\r\nX-Okapi-Token: %s\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{",
				target.path, c.Tenant, token)
			open = append(open, slow{conn, dialed})
		}
		// Every connection must be answered and closed by the server: a
		// read ends in EOF (after any answer) by its deadline, counted from
		// its own dial, since the server's timeout runs per request (dialling
		// a thousand takes a while on a loaded machine).
		var wg sync.WaitGroup
		var mu sync.Mutex
		stillOpen, answered := 0, map[string]int{}
		for _, o := range open {
			conn := o.conn
			wg.Add(1)
			go func() {
				defer wg.Done()
				_ = conn.SetReadDeadline(o.dialed.Add(requestTimeout + 5*time.Second))
				status := "none"
				if res, err := http.ReadResponse(bufio.NewReader(conn), nil); err == nil {
					status = res.Status
					_, _ = io.Copy(io.Discard, res.Body)
				}
				_, err := conn.Read(make([]byte, 1))
				mu.Lock()
				defer mu.Unlock()
				answered[status]++
				if ne, ok := err.(net.Error); ok && ne.Timeout() {
					stillOpen++
				}
			}()
		}
		wg.Wait()
		closedAfter := time.Since(start)
		if stillOpen > 0 {
			t.Errorf("%s: %d of %d slow connections still open %s after they began", target.p.Name, stillOpen, conns, closedAfter)
		}
		waitFor(t, target.p.Name+"'s goroutines back to idle", func() bool {
			return metricValue(t, c, target.p, "go_goroutines") <= idle+5
		})
		summary(t, conns, 0, conns-stillOpen, stillOpen, fmt.Sprintf("service=%s closed_within=%s answers=%v idle_goroutines=%.0f",
			target.p.Name, closedAfter.Round(100*time.Millisecond), answered, idle))
	}
}

// rssBytes is a process's peak resident set size (VmHWM).
func rssBytes(t *testing.T, pid int) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb << 10
		}
	}
	t.Fatal("no VmHWM")
	return 0
}

// TestLargePagesToClientsThatDoNotRead is the memory attack on storage:
// sixteen settings of almost a megabyte each, and eight clients asking for
// all of them at once and never reading the answer. The page is refused
// for its size before it is built, so the peak memory stays small.
func TestLargePagesToClientsThatDoNotRead(t *testing.T) {
	t.Parallel()
	c := harness.NewCluster(t, harness.Options{Circulations: 1})
	big := strings.Repeat("x", 1000_000)
	for i := range 16 {
		c.Do(c.Storage, "POST", "/settings/entries", map[string]any{"scope": "mod-circulation", "key": fmt.Sprint("attack-", i), "value": big}).
			Want(t, http.StatusCreated)
	}
	before := rssBytes(t, c.Storage.PID())
	const clients = 8
	for range clients {
		conn, err := net.Dial("tcp", c.Storage.Addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		fmt.Fprintf(conn, "GET /settings/entries?scope=mod-circulation&limit=1000 HTTP/1.1\r\nHost: x\r\nX-Okapi-Tenant: %s\r\nX-Okapi-Token: %s\r\n\r\n",
			c.Tenant, c.Token(schemas.RoleTenantAdmin))
	}
	// Every request has been answered (and counted) once storage's
	// request metric shows them.
	waitFor(t, "the eight page requests to be answered", func() bool {
		return c.Served(t, c.Storage, "GET", "/settings/entries") >= clients
	})
	peak := rssBytes(t, c.Storage.PID())
	if peak > 200<<20 {
		t.Errorf("storage peak RSS %d MB, want under 200 MB", peak>>20)
	}
	// A page that fits is still served.
	c.Do(c.Storage, "GET", "/settings/entries?scope=mod-circulation&limit=2", nil).Want(t, http.StatusOK)
	summary(t, clients, 0, clients, 0, fmt.Sprintf("rss_before_mb=%d peak_rss_mb=%d", before>>20, peak>>20))
}
