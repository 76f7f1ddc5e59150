package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/google/uuid"

	"github.com/checkoutlock/integration-tests/harness"
	"github.com/checkoutlock/schemas"
	"github.com/checkoutlock/schemas/errs/errhttp"
)

// historyLength is how long TestHistoriesAreLinearizable records
// (make test-long: ten minutes).
var historyLength = flag.Duration("history", 20*time.Second, "how long the history checker records operations under faults")

// historyArtifacts is where a history that is not linearizable is written,
// as porcupine's visualisation (an HTML page): CHECKOUT_LOCK_ARTIFACTS, or
// the system's temporary directory.
func historyArtifacts() string {
	if dir := os.Getenv("CHECKOUT_LOCK_ARTIFACTS"); dir != "" {
		return dir
	}
	return os.TempDir()
}

// TestHistoriesAreLinearizable: clients check items out and in, renew,
// place and cancel holds, replace loans at the version they read, and
// read the loans, the queues and the items, at once, over two storage and
// two circulation instances on one database, while storage processes are
// killed and restarted and their database backends terminated. Every
// operation's call, answer and time is recorded, and the history is
// checked with porcupine against the model of an item, its loan and its
// queue (itemmodel_test.go): it must be linearizable, an operation whose
// answer was lost allowed either way. A history that is not is written as
// porcupine's visualisation, whose path the failure names.
func TestHistoriesAreLinearizable(t *testing.T) {
	t.Parallel()
	c := harness.NewCluster(t, harness.Options{Circulations: 2, Storages: 2, FeatureOn: true,
		// The database is the test's own: its backends are terminated.
		DatabaseURL: harness.FreshDatabase(t)})
	const items, patrons = 3, 3
	lib := c.SetupLibrary(patrons, 0, 0)
	renewable(t, c, lib, map[string]any{"unlimited": true, "renewFromId": "CURRENT_DUE_DATE"})
	keepHolds(t, c, harness.ServicePoint, 2, "Days")
	w := &historyWorld{c: c}
	// The clients work on three items at a time, three new ones every
	// itemLife: each item's history (porcupine checks an item's on its
	// own) stays as short as the short run's, however long the run.
	material, loanType := materialTypeOf(t, c), loanTypeOf(t, c)
	for set := range int(*historyLength/itemLife) + 1 {
		var batch []historyItem
		for i := range items {
			barcode := fmt.Sprintf("H%03d-%d", set, i)
			var item struct{ ID string }
			c.Do(c.Storage, "POST", "/item-storage/items", map[string]any{"barcode": barcode, "title": "Item " + barcode,
				"status": map[string]any{"name": "Available"}, "materialTypeId": material, "permanentLoanTypeId": loanType}).
				Want(t, http.StatusCreated).Decode(t, &item)
			batch = append(batch, historyItem{barcode: barcode, id: item.ID})
		}
		w.items = append(w.items, batch)
	}
	w.rec = &history{start: time.Now()}
	for _, p := range lib.Patrons {
		w.patrons = append(w.patrons, historyPatron{barcode: p, id: patronID(t, c, p)})
	}

	ctx, stop := context.WithTimeout(context.Background(), *historyLength)
	defer stop()
	var wg sync.WaitGroup
	const clients = 8
	for client := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w.client(ctx, client)
		}()
	}
	// The faults, one every two seconds: every storage backend terminated,
	// and every fifth time a storage instance killed and started again
	// (its clients' calls refused until it is back).
	faults := 0
	tick := time.NewTicker(2 * time.Second)
	for done := false; !done; {
		select {
		case <-ctx.Done():
			done = true
		case <-tick.C:
			faults++
			if faults%5 == 0 {
				s := c.Storages[faults/5%len(c.Storages)]
				s.Kill()
				s.Restart()
			} else {
				c.TerminateStorageBackends(t)
			}
		}
	}
	tick.Stop()
	wg.Wait()

	ops := w.rec.operations()
	counts := map[string]int{}
	for _, op := range ops {
		in, out := op.Input.(histInput), op.Output.(histOutput)
		name := opNames[in.Kind]
		if in.Kind < opReadLoan {
			name += " " + []string{"done", "refused", "unknown"}[out.Outcome]
		}
		counts[name]++
	}
	// Each item's history on its own (porcupine would check them all at
	// once), two at a time: a history that is linearizable is found so in
	// seconds; one that is not may take much longer to give up on, and
	// "unknown" after a minute fails the test too. The one that is not
	// linearizable is written as porcupine's visualisation, and as JSON.
	model := itemModel.ToModel()
	parts := itemModel.Partition(ops)
	var failed []string
	var mu sync.Mutex
	sem := make(chan struct{}, 2)
	var checks sync.WaitGroup
	for _, part := range parts {
		checks.Add(1)
		sem <- struct{}{}
		go func() {
			defer checks.Done()
			defer func() { <-sem }()
			result, info := porcupine.CheckOperationsVerbose(model, part, time.Minute)
			if result == porcupine.Ok {
				return
			}
			base := filepath.Join(historyArtifacts(), fmt.Sprintf("checkout-lock-history-%s-item-%s",
				time.Now().UTC().Format("20060102T150405"), short(part[0].Input.(histInput).Item)))
			if err := porcupine.VisualizePath(model, info, base+".html"); err != nil {
				t.Errorf("write the history's visualisation: %v", err)
			}
			if data, err := json.Marshal(part); err == nil {
				_ = os.WriteFile(base+".json", data, 0o644)
			}
			mu.Lock()
			failed = append(failed, fmt.Sprintf("item %s: %s (%d operations): %s.html", part[0].Input.(histInput).Item, result, len(part), base))
			mu.Unlock()
		}()
	}
	checks.Wait()
	t.Logf("SUMMARY TestHistoriesAreLinearizable: %d operations by %d clients over %s, %d faults, %d items each checked on its own, %d not found linearizable: %v",
		len(ops), clients, *historyLength, faults, len(parts), len(failed), counts)
	if len(failed) > 0 {
		t.Fatalf("against the model of an item, its loan and its queue, these items' histories are not found linearizable:\n%s",
			strings.Join(failed, "\n"))
	}
}

// materialTypeOf and loanTypeOf are the library's only material and loan
// types.
func materialTypeOf(t *testing.T, c *harness.Cluster) string {
	return onlyIDOf(t, c, "/material-types", "mtypes")
}

func loanTypeOf(t *testing.T, c *harness.Cluster) string {
	return onlyIDOf(t, c, "/loan-types", "loantypes")
}

func onlyIDOf(t *testing.T, c *harness.Cluster, path, plural string) string {
	t.Helper()
	var page map[string]json.RawMessage
	c.Do(c.Storage, "GET", path, nil).Want(t, http.StatusOK).Decode(t, &page)
	var records []struct{ ID string }
	if err := json.Unmarshal(page[plural], &records); err != nil || len(records) != 1 {
		t.Fatalf("%s: %d records (%v), want one", path, len(records), err)
	}
	return records[0].ID
}

type historyItem struct{ barcode, id string }
type historyPatron struct{ barcode, id string }

// historyWorld is what the history's clients share: the cluster, the
// library and the record of what they did.
type historyWorld struct {
	c *harness.Cluster
	// items are the sets of items, one for each itemLife of the run.
	items   [][]historyItem
	patrons []historyPatron
	rec     *history
}

// itemLife is how long the clients work on one set of items.
const itemLife = 20 * time.Second

// itemsNow is the set of items the clients work on now.
func (w *historyWorld) itemsNow() []historyItem {
	return w.items[min(int(time.Since(w.rec.start)/itemLife), len(w.items)-1)]
}

// history records operations as porcupine checks them.
type history struct {
	start time.Time
	mu    sync.Mutex
	ops   []porcupine.Operation
}

// inFlight bounds how long after its call a write whose answer was lost
// may still take effect: storage ends a request after REQUEST_TIMEOUT (10
// s), circulation's write after its WriteTimeout (15 s), and a statement
// that outlives its client is settled or ended within seconds. The bound
// keeps the checker's search finite over a long history, where every such
// write would otherwise stay open to the end.
const inFlight = 30 * time.Second

func (h *history) record(client int, in histInput, call time.Time, out histOutput) {
	ret := time.Since(h.start).Nanoseconds()
	if out.Outcome == outUnknown {
		ret = call.Sub(h.start).Nanoseconds() + inFlight.Nanoseconds()
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.ops = append(h.ops, porcupine.Operation{ClientId: client, Input: in, Call: call.Sub(h.start).Nanoseconds(), Output: out, Return: ret})
}

func (h *history) operations() []porcupine.Operation {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.ops)
}

// client does random operations until ctx ends. What it last read of
// each item's loan and queue it writes back later, at the version read,
// after other clients may have written.
func (w *historyWorld) client(ctx context.Context, client int) {
	rng := rand.New(rand.NewPCG(uint64(client), uint64(time.Now().UnixNano())))
	loans := map[string]map[string]any{}    // the loan last read, by item
	queues := map[string][]map[string]any{} // the holds last read, by item
	for ctx.Err() == nil {
		items := w.itemsNow()
		item := items[rng.IntN(len(items))]
		patron := w.patrons[rng.IntN(len(w.patrons))]
		in := histInput{Item: item.id, Patron: patron.id}
		call := time.Now()
		var out histOutput
		circ := w.c.Circulations[rng.IntN(len(w.c.Circulations))]
		store := w.c.Storages[rng.IntN(len(w.c.Storages))]
		switch n := rng.IntN(100); {
		case n < 15:
			in.Kind = opCheckOut
			var loanID string
			out.Outcome, loanID = w.write(circ, "POST", "/circulation/check-out-by-barcode",
				map[string]any{"itemBarcode": item.barcode, "userBarcode": patron.barcode, "servicePointId": harness.ServicePoint})
			out.ID = loanID
		case n < 24:
			in.Kind, in.Patron = opCheckIn, ""
			out.Outcome, _ = w.write(circ, "POST", "/circulation/check-in-by-barcode",
				map[string]any{"itemBarcode": item.barcode, "servicePointId": harness.ServicePoint})
		case n < 38:
			// Mostly by the borrower last read, whose renewal may be done.
			if l := loans[item.id]; l != nil && rng.IntN(4) > 0 {
				patron = w.patronOf(l["userId"].(string))
			}
			in.Kind, in.Patron = opRenew, patron.id
			out.Outcome, _ = w.write(circ, "POST", "/circulation/renew-by-barcode",
				map[string]any{"itemBarcode": item.barcode, "userBarcode": patron.barcode})
		case n < 44:
			in.Kind, in.ID = opHold, uuid.NewString()
			out.Outcome, _ = w.write(circ, "POST", "/circulation/requests", map[string]any{"id": in.ID, "requestType": schemas.RequestTypeHold,
				"requestDate": time.Now().UTC().Format(schemas.TimeFormat), "requesterId": patron.id, "itemId": item.id,
				"fulfillmentPreference": "Hold Shelf", "pickupServicePointId": harness.ServicePoint})
		case n < 51:
			read := queues[item.id]
			if len(read) == 0 {
				continue
			}
			doc := copyDoc(read[rng.IntN(len(read))])
			doc["status"] = schemas.RequestCancelled
			in.Kind, in.Patron, in.ID, in.Version = opCancel, "", doc["id"].(string), int(doc["_version"].(float64))
			out.Outcome, _ = w.write(circ, "PUT", "/circulation/requests/"+in.ID, doc)
		case n < 61:
			// The loan as last read, however long ago: another write may
			// have come first.
			read := loans[item.id]
			if read == nil {
				continue
			}
			in.Kind, in.Patron, in.ID, in.Version = opReplaceLoan, "", read["id"].(string), int(read["_version"].(float64))
			in.Renewals = renewalsOf(read)
			out.Outcome, _ = w.write(store, "PUT", "/loan-storage/loans/"+in.ID, read)
		case n < 75:
			in.Kind, in.Patron = opReadLoan, ""
			var page struct{ Loans []map[string]any }
			if !w.read(store, "/loan-storage/loans?status=Open&itemId="+item.id, &page) {
				continue
			}
			switch len(page.Loans) {
			case 0:
			case 1:
				l := page.Loans[0]
				loans[item.id] = l
				out.Loan = &modelLoan{ID: l["id"].(string), Patron: l["userId"].(string), Renewals: renewalsOf(l), Version: int(l["_version"].(float64))}
			default:
				// Two open loans of one item: no state of the model.
				out.Loan = &modelLoan{ID: fmt.Sprintf("%d open loans", len(page.Loans))}
			}
		case n < 88:
			in.Kind, in.Patron = opReadQueue, ""
			var page struct{ Requests []map[string]any }
			if !w.read(store, "/request-storage/requests?limit=100&itemId="+item.id, &page) {
				continue
			}
			var open []map[string]any
			for _, r := range page.Requests {
				if strings.HasPrefix(r["status"].(string), "Open ") {
					open = append(open, r)
				}
			}
			slices.SortFunc(open, func(a, b map[string]any) int { return int(a["position"].(float64) - b["position"].(float64)) })
			queues[item.id] = open
			for _, r := range open {
				out.Queue = append(out.Queue, modelRequest{ID: r["id"].(string), Patron: r["requesterId"].(string),
					Version: int(r["_version"].(float64)), Waiting: r["status"] == schemas.RequestAwaitingPickup})
			}
		default:
			in.Kind, in.Patron = opReadItem, ""
			var doc struct{ Status struct{ Name string } }
			if !w.read(store, "/item-storage/items/"+item.id, &doc) {
				continue
			}
			out.Status = doc.Status.Name
		}
		w.rec.record(client, in, call, out)
	}
}

// patronOf is the patron whose id is id.
func (w *historyWorld) patronOf(id string) historyPatron {
	for _, p := range w.patrons {
		if p.id == id {
			return p
		}
	}
	return w.patrons[0]
}

// copyDoc is a copy of a record read.
func copyDoc(doc map[string]any) map[string]any {
	out := make(map[string]any, len(doc))
	for k, v := range doc {
		out[k] = v
	}
	return out
}

// renewalsOf is a loan's renewal count as read.
func renewalsOf(loan map[string]any) int {
	n, _ := loan["renewalCount"].(float64)
	return int(n)
}

// write sends a write and says what its answer tells of it: done (2xx);
// refused (4xx, or a 503 whose code says nothing was written); otherwise
// not known. A check-out's loan is its answer's id, or the loanId a 503
// names.
func (w *historyWorld) write(p *harness.Process, method, path string, body any) (outcome, string) {
	status, data, err := w.send(p, method, path, body)
	var dial *net.OpError
	switch {
	case errors.As(err, &dial) && dial.Op == "dial":
		// Never sent: the process was not there to take it.
		return outRefused, ""
	case err != nil:
		return outUnknown, ""
	case status >= 200 && status < 300:
		var doc struct{ ID string }
		_ = json.Unmarshal(data, &doc)
		return outDone, doc.ID
	case status >= 400 && status < 500:
		return outRefused, ""
	}
	env, _ := errhttp.Decode(data)
	var code, loanID string
	if len(env.Errors) > 0 {
		code = env.Errors[0].Code
		for _, p := range env.Errors[0].Parameters {
			if p.Key == "loanId" {
				loanID = p.Value
			}
		}
	}
	if status == http.StatusServiceUnavailable && slices.Contains([]string{schemas.CodeCheckOutsBusy, schemas.CodeLockHeld,
		schemas.CodeUnableToAcquireLock, schemas.CodeShuttingDown}, code) {
		return outRefused, ""
	}
	if path == "/circulation/check-out-by-barcode" && status == http.StatusServiceUnavailable && loanID == "" {
		// A check-out that never reached its write names no loan: nothing
		// was written (its write, once sent, names the loan it would make).
		return outRefused, ""
	}
	return outUnknown, loanID
}

// read GETs path into v, reporting whether it was answered 200.
func (w *historyWorld) read(p *harness.Process, path string, v any) bool {
	status, data, err := w.send(p, "GET", path, nil)
	return err == nil && status == http.StatusOK && json.Unmarshal(data, v) == nil
}

// historyClient is the clients' HTTP client: a call gives up after
// twenty seconds, its answer lost.
var historyClient = &http.Client{Timeout: 20 * time.Second}

func (w *historyWorld) send(p *harness.Process, method, path string, body any) (int, []byte, error) {
	var r io.Reader
	if body != nil {
		data, err := json.Marshal(body)
		if err != nil {
			return 0, nil, err
		}
		r = bytes.NewReader(data)
	}
	req, err := http.NewRequest(method, p.URL()+path, r)
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	for k, v := range w.c.Headers() {
		req.Header.Set(k, v)
	}
	res, err := historyClient.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer res.Body.Close()
	data, err := io.ReadAll(res.Body)
	return res.StatusCode, data, err
}
