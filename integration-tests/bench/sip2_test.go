package bench

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/checkoutlock/integration-tests/harness"
	"github.com/checkoutlock/schemas"
)

// SIP2 is scenario 8: a kiosk's check-outs through the SIP2 door against
// the same kiosk's check-outs over HTTP, one after another (a kiosk scans
// one item at a time), through the same circulation instance, in
// alternating slices; then the same kiosk renewing those loans (29 against
// POST /circulation/renew-by-barcode) the same way; and a patron's ten
// scans sent at once over ten kiosk connections.
type SIP2 struct {
	HTTP      Stats   `json:"http"`
	SIP2      Stats   `json:"sip2"`
	P50DiffMs float64 `json:"p50DiffMs"`
	P95DiffMs float64 `json:"p95DiffMs"`
	// RenewHTTP and RenewSIP2 are the renewals, each way.
	RenewHTTP      Stats   `json:"renewHttp"`
	RenewSIP2      Stats   `json:"renewSip2"`
	RenewP50DiffMs float64 `json:"renewP50DiffMs"`
	RenewP95DiffMs float64 `json:"renewP95DiffMs"`
	Bursts         int     `json:"bursts"`
	// BurstSucceeded is the mean of each burst's scans answered ok.
	BurstSucceeded float64 `json:"meanSucceededOf10"`
	// SlowestScanMs is the slowest scan of any burst, and BurstP50Ms the
	// median of every burst's slowest.
	SlowestScanMs float64 `json:"slowestScanMs"`
	BurstP50Ms    float64 `json:"burstSlowestP50Ms"`
}

func benchSIP2(t *testing.T, p plan, env []string) SIP2 {
	c := harness.NewCluster(t, harness.Options{Circulations: 1, FeatureOn: true, StorageEnv: env, CirculationEnv: env})
	slices := 2 * (p.rounds + 1)
	pop := populate(t, c, 20000, p.bursts+1)
	analyze(t, c)
	c.Account(t, "bench-kiosk", "Bench", "Kiosk", schemas.RoleSelfCheck, "bench-kiosk-password")
	door := c.StartSIP2(t, 0, nil, append([]string{"SIP2_MAX_CONNECTIONS_PER_ADDRESS=100"}, env...)...)
	kiosk := harness.DialSIP2(t, door.SIP2Addr)
	kiosk.Login("bench-kiosk", "bench-kiosk-password")

	// The same kiosk over HTTP: its sign-in's access token, keep-alive.
	token := kioskToken(t, c, "bench-kiosk", "bench-kiosk-password")
	client := &http.Client{Timeout: 30 * time.Second}
	url := c.Circulations[0].URL() + "/circulation/check-out-by-barcode"
	post := func(url string, n int64, want int) error {
		body := fmt.Sprintf(`{"itemBarcode":"BI%d","userBarcode":"B%d","servicePointId":%q}`, n, n, harness.ServicePoint)
		req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set(schemas.HeaderTenant, c.Tenant)
		req.Header.Set(schemas.HeaderToken, token)
		res, err := client.Do(req)
		if err != nil {
			return err
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		if res.StatusCode != want {
			return fmt.Errorf("%d %s", res.StatusCode, b)
		}
		return nil
	}
	httpCheckOut := func(n int64) error { return post(url, n, http.StatusCreated) }
	sip2CheckOut := func(n int64) error {
		reply := kiosk.Send(fmt.Sprintf("11YN%s%sAOit|AAB%d|ABBI%d|AC|", harness.SIP2Date(), harness.SIP2Date(), n, n))
		if !strings.HasPrefix(reply, "121") {
			return fmt.Errorf("%s", reply)
		}
		return nil
	}
	// alternate times each way in turn, slice by slice; next is the
	// number of the patron and item each call takes.
	alternate := func(what string, next func() int64, ways [2]func(n int64) error) [2]Stats {
		hists := [2]*hdrhistogram.Histogram{newHist(), newHist()}
		var errs [2]int64
		var elapsed [2]time.Duration
		for s := range slices {
			way := s % 2
			start := time.Now()
			for time.Since(start) < p.slice {
				n := next()
				t0 := time.Now()
				err := ways[way](n)
				if s < 2 {
					continue // the first slice of each: connections and caches warm up
				}
				if err != nil {
					if errs[way] == 0 {
						t.Logf("a %s failed: %v", what, err)
					}
					errs[way]++
					continue
				}
				record(hists[way], time.Since(t0))
			}
			if s >= 2 {
				elapsed[way] += time.Since(start)
			}
		}
		return [2]Stats{stats(hists[0], errs[0], elapsed[0]), stats(hists[1], errs[1], elapsed[1])}
	}
	first := pop.next.Load() + 1
	st := alternate("check-out", func() int64 { return pop.next.Add(1) }, [2]func(int64) error{httpCheckOut, sip2CheckOut})
	out := SIP2{HTTP: st[0], SIP2: st[1]}
	out.P50DiffMs, out.P95DiffMs = out.SIP2.P50Ms-out.HTTP.P50Ms, out.SIP2.P95Ms-out.HTTP.P95Ms

	// Renewals of the loans just made, round and round, under a policy
	// that renews them without end from their due date.
	renewForever(t, c)
	last := pop.next.Load()
	var turn int64
	httpRenew := func(n int64) error {
		return post(c.Circulations[0].URL()+"/circulation/renew-by-barcode", n, http.StatusOK)
	}
	sip2Renew := func(n int64) error {
		reply := kiosk.Send(fmt.Sprintf("29NN%s%sAOit|AAB%d|ABBI%d|", harness.SIP2Date(), harness.SIP2Date(), n, n))
		if !strings.HasPrefix(reply, "301Y") {
			return fmt.Errorf("%s", reply)
		}
		return nil
	}
	st = alternate("renewal", func() int64 { turn++; return first + turn%(last-first+1) }, [2]func(int64) error{httpRenew, sip2Renew})
	out.RenewHTTP, out.RenewSIP2 = st[0], st[1]
	out.RenewP50DiffMs, out.RenewP95DiffMs = out.RenewSIP2.P50Ms-out.RenewHTTP.P50Ms, out.RenewSIP2.P95Ms-out.RenewHTTP.P95Ms

	// Bursts: ten kiosk connections, one scan each, sent together.
	kiosks := make([]*harness.SIP2Client, 10)
	for i := range kiosks {
		kiosks[i] = harness.DialSIP2(t, door.SIP2Addr)
		kiosks[i].Login("bench-kiosk", "bench-kiosk-password")
	}
	slowest := newHist()
	succeeded := 0
	for b := range p.bursts + 1 {
		var wg sync.WaitGroup
		var mu sync.Mutex
		var worst time.Duration
		ok := 0
		for k := range kiosks {
			wg.Add(1)
			go func() {
				defer wg.Done()
				t0 := time.Now()
				reply := kiosks[k].Send(fmt.Sprintf("11YN%s%sAOit|AABURST%d|ABBURSTI%d|AC|", harness.SIP2Date(), harness.SIP2Date(), b+1, b*10+k+1))
				d := time.Since(t0)
				mu.Lock()
				defer mu.Unlock()
				worst = max(worst, d)
				if strings.HasPrefix(reply, "121") {
					ok++
				}
			}()
		}
		wg.Wait()
		if b == 0 {
			continue // the warm-up
		}
		record(slowest, worst)
		succeeded += ok
		out.Bursts++
	}
	out.BurstSucceeded = float64(succeeded) / float64(out.Bursts)
	out.SlowestScanMs = float64(slowest.Max()) / 1000
	out.BurstP50Ms = float64(slowest.ValueAtQuantile(50)) / 1000
	t.Logf("SIP2 check-out p50 %.2f ms, p95 %.2f ms; HTTP p50 %.2f ms, p95 %.2f ms; renewals SIP2 p50 %.2f ms, HTTP p50 %.2f ms; "+
		"bursts: %.1f of 10 ok, slowest scan %.0f ms", out.SIP2.P50Ms, out.SIP2.P95Ms, out.HTTP.P50Ms, out.HTTP.P95Ms,
		out.RenewSIP2.P50Ms, out.RenewHTTP.P50Ms, out.BurstSucceeded, out.SlowestScanMs)
	return out
}

// renewForever makes the tenant's loan policy renew without end, a week
// at a time from the due date, through storage's API.
func renewForever(t *testing.T, c *harness.Cluster) {
	t.Helper()
	var page struct {
		Policies []map[string]any `json:"loanPolicies"`
	}
	c.Do(c.Storage, "GET", "/loan-policy-storage/loan-policies", nil).Want(t, http.StatusOK).Decode(t, &page)
	if len(page.Policies) != 1 {
		t.Fatalf("%d loan policies, want the bench library's one", len(page.Policies))
	}
	policy := page.Policies[0]
	delete(policy, "metadata")
	policy["renewable"] = true
	policy["renewalsPolicy"] = map[string]any{"unlimited": true, "renewFromId": "CURRENT_DUE_DATE", "differentPeriod": true,
		"period": map[string]any{"duration": 1, "intervalId": "Weeks"}}
	c.Do(c.Storage, "PUT", fmt.Sprintf("/loan-policy-storage/loan-policies/%s", policy["id"]), policy).Want(t, http.StatusNoContent)
}

// kioskToken signs the kiosk in over HTTP, as a kiosk speaking HTTP would,
// and returns its access token.
func kioskToken(t *testing.T, c *harness.Cluster, user, password string) string {
	t.Helper()
	body, _ := json.Marshal(map[string]string{"username": user, "password": password})
	req, _ := http.NewRequest(http.MethodPost, c.Circulations[0].URL()+"/authn/login-with-expiry", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(schemas.HeaderTenant, c.Tenant)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	for _, k := range res.Cookies() {
		if k.Name == "folioAccessToken" {
			return k.Value
		}
	}
	t.Fatalf("the kiosk's sign-in answered %d without a token", res.StatusCode)
	return ""
}
