package integration

import (
	"compress/gzip"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/checkoutlock/integration-tests/harness"
	"github.com/checkoutlock/schemas"
)

// span is one span a service exported, as the test's collector received
// it.
type span struct {
	service, name           string
	trace, id, parent, kind string
}

// collector is an OTLP/HTTP trace receiver on loopback keeping, in
// memory, every span the services send it.
type collector struct {
	addr  string
	mu    sync.Mutex
	spans []span
}

func startCollector(t *testing.T) *collector {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	col := &collector{addr: ln.Addr().String()}
	srv := &http.Server{Handler: http.HandlerFunc(col.receive), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return col
}

func (col *collector) receive(w http.ResponseWriter, r *http.Request) {
	var body io.Reader = r.Body
	if r.Header.Get("Content-Encoding") == "gzip" {
		z, err := gzip.NewReader(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		body = z
	}
	data, err := io.ReadAll(body)
	var req collectortrace.ExportTraceServiceRequest
	if err == nil {
		err = proto.Unmarshal(data, &req)
	}
	if err != nil || r.URL.Path != "/v1/traces" {
		http.Error(w, fmt.Sprint(err), http.StatusBadRequest)
		return
	}
	col.mu.Lock()
	for _, rs := range req.ResourceSpans {
		service := ""
		for _, a := range rs.GetResource().GetAttributes() {
			if a.Key == "service.name" {
				service = a.GetValue().GetStringValue()
			}
		}
		for _, ss := range rs.ScopeSpans {
			for _, s := range ss.Spans {
				col.spans = append(col.spans, span{service: service, name: s.Name, trace: hex.EncodeToString(s.TraceId),
					id: hex.EncodeToString(s.SpanId), parent: hex.EncodeToString(s.ParentSpanId), kind: s.Kind.String()})
			}
		}
	}
	col.mu.Unlock()
	out, _ := proto.Marshal(&collectortrace.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(out)
}

// trace is the spans received of the trace traceID.
func (col *collector) trace(traceID string) []span {
	col.mu.Lock()
	defer col.mu.Unlock()
	var out []span
	for _, s := range col.spans {
		if s.trace == traceID {
			out = append(out, s)
		}
	}
	return out
}

// TestACheckOutIsOneTraceFromRequestToSQL: with OTEL_EXPORTER_OTLP_ENDPOINT
// naming a collector, a check-out that waits for a patron's held lock,
// sent with a caller's traceparent, is one trace: circulation's request,
// storage's answer to each of its two calls (validation's read and the
// write), continuing the request's span, the lock's wait and the SQL
// statements, each span's parent in the trace and the first one's the
// caller's. The lock list and the lock history keep the traces of a
// lock's acquisition and of a wait in vain, and the console links them to
// the trace viewer (TRACE_URL).
func TestACheckOutIsOneTraceFromRequestToSQL(t *testing.T) {
	t.Parallel()
	col := startCollector(t)
	env := []string{"OTEL_EXPORTER_OTLP_ENDPOINT=http://" + col.addr, "OTEL_BSP_SCHEDULE_DELAY=50"}
	c := harness.NewCluster(t, harness.Options{Circulations: 1, FeatureOn: true, RetryIntervalMs: "5000",
		StorageEnv: env, CirculationEnv: append(env, "TRACE_URL=http://traces.test/trace/{traceId}")})
	lib := c.SetupLibrary(1, 2, 5)
	patron, item := lib.Patrons[0], lib.Items[0][0]
	userID := patronID(t, c, patron)
	// The lock is held by a request of a trace of its own, which the lock
	// keeps, and the console links to.
	const holderTrace = "0af7651916cd43dd8448eb211c80319c"
	var lock struct {
		ID     string
		Holder struct{ TraceID string }
	}
	c.DoWith(c.Storage, "POST", "/check-out-lock-storage", map[string]any{"userId": userID, "ttlMs": 60000},
		c.HeadersWith("traceparent", "00-"+holderTrace+"-b7ad6b7169203331-01")).Want(t, http.StatusCreated).Decode(t, &lock)
	if lock.Holder.TraceID != holderTrace {
		t.Errorf("the lock's holder.traceId is %q, want the acquiring request's trace %s", lock.Holder.TraceID, holderTrace)
	}
	var console struct {
		CheckoutLocks []struct{ ID, TraceURL string }
	}
	c.Do(c.Circulations[0], "GET", "/circulation/check-out-locks", nil).Want(t, http.StatusOK).Decode(t, &console)
	if len(console.CheckoutLocks) != 1 || console.CheckoutLocks[0].TraceURL != "http://traces.test/trace/"+holderTrace {
		t.Errorf("the console lists %+v, want the lock with traceUrl http://traces.test/trace/%s", console.CheckoutLocks, holderTrace)
	}

	const traceID, callerSpan = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	result := make(chan harness.Response, 1)
	go func() {
		result <- c.DoWith(c.Circulations[0], "POST", "/circulation/check-out-by-barcode",
			map[string]any{"itemBarcode": item, "userBarcode": patron, "servicePointId": harness.ServicePoint},
			c.HeadersWith("traceparent", "00-"+traceID+"-"+callerSpan+"-01"))
	}()
	waitFor(t, "the check-out to wait at storage", func() bool { return metric(t, c, c.Storage, "checkout_lock_waiters") == 1 })
	c.Do(c.Storage, "DELETE", "/check-out-lock-storage/"+lock.ID, nil).Want(t, http.StatusNoContent)
	(<-result).Want(t, http.StatusCreated)

	want := []struct{ service, name string }{
		{"circulation", "POST /circulation/check-out-by-barcode"},
		{"circulation-storage", "GET /check-out-storage/validation"},
		{"circulation-storage", "POST /loan-storage/loans"},
		{"circulation-storage", "check-out lock wait"},
	}
	var spans []span
	has := func(service, name string) *span {
		for i := range spans {
			if spans[i].service == service && spans[i].name == name {
				return &spans[i]
			}
		}
		return nil
	}
	statements := func() int {
		n := 0
		for _, s := range spans {
			if s.service == "circulation-storage" && s.kind == tracepb.Span_SPAN_KIND_CLIENT.String() {
				n++
			}
		}
		return n
	}
	waitFor(t, "the check-out's spans at the collector", func() bool {
		spans = col.trace(traceID)
		for _, w := range want {
			if has(w.service, w.name) == nil {
				return false
			}
		}
		return statements() > 0
	})
	byID := map[string]span{}
	for _, s := range spans {
		byID[s.id] = s
	}
	for _, s := range spans {
		if _, ok := byID[s.parent]; !ok && s.parent != callerSpan {
			t.Errorf("span %s %q has a parent (%s) not in the trace", s.service, s.name, s.parent)
		}
	}
	parentOf := func(child, parent *span) {
		if child.parent != parent.id {
			t.Errorf("the parent of %s %q is %q, want %s %q", child.service, child.name, byID[child.parent].name, parent.service, parent.name)
		}
	}
	root := has("circulation", "POST /circulation/check-out-by-barcode")
	if root.parent != callerSpan {
		t.Errorf("circulation's span continues %s, want the caller's %s", root.parent, callerSpan)
	}
	// Circulation's calls have no spans of their own: storage's answers
	// continue its request's.
	parentOf(has("circulation-storage", "GET /check-out-storage/validation"), root)
	storageWrite := has("circulation-storage", "POST /loan-storage/loans")
	parentOf(storageWrite, root)
	for _, s := range spans {
		if s.service == "circulation" && s != *root {
			t.Errorf("circulation made a span %q besides its request's; its calls make none", s.name)
		}
	}
	parentOf(has("circulation-storage", "check-out lock wait"), storageWrite)
	// Every statement is storage's, under one of its requests.
	for _, s := range spans {
		if s.service != "circulation-storage" || s.kind != tracepb.Span_SPAN_KIND_CLIENT.String() {
			continue
		}
		p := byID[s.parent]
		for p.service == "circulation-storage" && p.name != "GET /check-out-storage/validation" && p.name != "POST /loan-storage/loans" && p.parent != "" {
			p = byID[p.parent]
		}
		if p.service != "circulation-storage" {
			t.Errorf("the statement %q is not under one of storage's requests", s.name)
		}
	}
	t.Logf("SUMMARY TestACheckOutIsOneTraceFromRequestToSQL: spans=%d statements=%d", len(spans), statements())

	// A wait in vain is in the lock history with the waiter's trace, and
	// the console links the entry to it.
	const waiterTrace = "5b8efff798038103d269b633813fc60c"
	c.DoWith(c.Storage, "POST", "/check-out-lock-storage", map[string]any{"userId": userID, "ttlMs": 60000},
		c.HeadersWith("traceparent", "00-"+holderTrace+"-b7ad6b7169203331-01")).Want(t, http.StatusCreated)
	c.DoWith(c.Storage, "POST", "/check-out-lock-storage", map[string]any{"userId": userID, "waitMs": 50},
		c.HeadersWith("traceparent", "00-"+waiterTrace+"-eee19b7ec3c1b174-01")).Want(t, http.StatusServiceUnavailable)
	var history struct {
		Events []struct {
			Type                       string
			Holder, By                 struct{ TraceID string }
			HolderTraceURL, ByTraceURL string
		}
	}
	c.Do(c.Circulations[0], "GET", "/circulation/check-out-locks/history?userId="+userID, nil).Want(t, http.StatusOK).Decode(t, &history)
	if len(history.Events) == 0 || history.Events[0].Type != "waiter_gave_up" {
		t.Fatalf("the history's newest event is not the wait in vain: %+v", history.Events)
	}
	e := history.Events[0]
	if e.By.TraceID != waiterTrace || e.ByTraceURL != "http://traces.test/trace/"+waiterTrace ||
		e.Holder.TraceID != holderTrace || e.HolderTraceURL != "http://traces.test/trace/"+holderTrace {
		t.Errorf("the wait in vain is in the history as %+v, want by.traceId %s and holder.traceId %s, each with its link", e, waiterTrace, holderTrace)
	}
}

// TestAKioskCheckOutIsOneTraceFromTheSIP2Message: with tracing on in the
// SIP2 door and the services, a kiosk's check-out (11) is one trace whose
// root is the door's span of the message: under it circulation's request,
// under that storage's answers, and under them their SQL statements.
func TestAKioskCheckOutIsOneTraceFromTheSIP2Message(t *testing.T) {
	t.Parallel()
	col := startCollector(t)
	env := []string{"OTEL_EXPORTER_OTLP_ENDPOINT=http://" + col.addr, "OTEL_BSP_SCHEDULE_DELAY=50"}
	c := harness.NewCluster(t, harness.Options{Circulations: 1, FeatureOn: true, StorageEnv: env, CirculationEnv: env})
	lib := c.SetupLibrary(1, 2, 0)
	c.Account(t, "user_id", "Kiosk", "One", schemas.RoleSelfCheck, "passw0rd")
	door := c.StartSIP2(t, 0, nil, env...)
	k := harness.DialSIP2(t, door.SIP2Addr)
	k.Login("user_id", "passw0rd")
	if out := k.Send(checkOutMsg(lib.Patrons[0], lib.Items[0][0])); !strings.HasPrefix(out, "121") {
		t.Fatalf("check-out: %q", out)
	}

	var spans []span
	find := func(service, name string) *span {
		for i := range spans {
			if spans[i].service == service && spans[i].name == name {
				return &spans[i]
			}
		}
		return nil
	}
	chain := []struct{ service, name string }{
		{"circulation-storage", "POST /loan-storage/loans"},
		{"circulation", "POST /circulation/check-out-by-barcode"},
		{"sip2", "SIP2 11"},
	}
	waitFor(t, "the kiosk's check-out, from the message to the SQL, at the collector", func() bool {
		col.mu.Lock()
		var root *span
		for i, s := range col.spans {
			if s.service == "sip2" && s.name == "SIP2 11" {
				root = &col.spans[i]
			}
		}
		col.mu.Unlock()
		if root == nil {
			return false
		}
		spans = col.trace(root.trace)
		// Each process sends its spans in batches of its own: wait for
		// every one of the chain.
		for _, want := range chain {
			if find(want.service, want.name) == nil {
				return false
			}
		}
		return slices.ContainsFunc(spans, func(s span) bool {
			return s.service == "circulation-storage" && s.kind == tracepb.Span_SPAN_KIND_CLIENT.String()
		})
	})
	byID := map[string]span{}
	for _, s := range spans {
		byID[s.id] = s
	}
	s := find(chain[0].service, chain[0].name)
	for _, want := range chain[1:] {
		p, ok := byID[s.parent]
		if !ok || p.service != want.service || p.name != want.name {
			t.Fatalf("the parent of %s %q is %s %q, want %s %q", s.service, s.name, p.service, p.name, want.service, want.name)
		}
		s = &p
	}
	if s.parent != "" {
		t.Errorf("the door's span of the message has a parent (%s); it is the trace's root", s.parent)
	}
	statements := 0
	for _, s := range spans {
		if s.service == "circulation-storage" && s.kind == tracepb.Span_SPAN_KIND_CLIENT.String() {
			statements++
		}
	}
	if statements == 0 {
		t.Error("no SQL statement in the kiosk's trace")
	}
	t.Logf("SUMMARY TestAKioskCheckOutIsOneTraceFromTheSIP2Message: spans=%d statements=%d", len(spans), statements)
}
