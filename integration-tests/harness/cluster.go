package harness

import (
	"bytes"
	"cmp"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/checkoutlock/schemas"
)

// Options shape a cluster.
type Options struct {
	// Circulations is how many circulation instances to start (default 3).
	Circulations int
	// Storages is how many circulation-storage instances to start (default
	// 1); circulation instance i talks to storage i mod Storages.
	Storages int
	// FeatureOn turns the check-out lock on through the environment.
	FeatureOn bool
	// LockTTLMs and RetryIntervalMs are the lock's environment settings
	// (defaults 3000 and "500|500|1000").
	LockTTLMs       int
	RetryIntervalMs string
	// StorageProxy puts a fault-injecting proxy between every circulation
	// instance and storage (one storage only); DBProxy one between storage
	// and PostgreSQL; ListenProxy one between storage's release listener
	// and PostgreSQL (LISTEN_DATABASE_URL) alone.
	StorageProxy, DBProxy, ListenProxy bool
	// CirculationProxies puts a proxy of its own between each circulation
	// instance and the storage instance it talks to (CirculationProxies in
	// the cluster, one per instance, in Circulations' order), so that the
	// connections of every instance can be cut whatever the storages.
	CirculationProxies bool
	// StorageEnv and CirculationEnv add environment variables.
	StorageEnv, CirculationEnv []string
	// DatabaseURL is the database the services use (default: the one
	// created for the test run), e.g. an HA cluster's.
	DatabaseURL string
	// BinDir holds the binaries to run (default: the ones built for the
	// test run), e.g. an earlier version's, to compare with.
	BinDir string
}

// binDir is where the cluster's binaries are.
func (c *Cluster) binDir() string { return cmp.Or(c.opts.BinDir, envState().BinDir) }

// StartBinary starts bin as a process of the test, on a free port given
// in HTTP_ADDR, and waits until it answers GET /admin/health.
func StartBinary(t testing.TB, name, bin string, env ...string) *Process {
	return startProcess(t, name, bin, env...)
}

// startStorage starts storage instance i (its listener named after i).
func (c *Cluster) startStorage(name string, i int, env []string) *Process {
	p := c.storageProcess(name, i, env)
	p.Start()
	return p
}

// storageProcess is storage instance i, not started yet.
func (c *Cluster) storageProcess(name string, i int, env []string) *Process {
	return c.storageProcessFrom(c.binDir(), name, i, env)
}

// storageProcessFrom is storageProcess of the binary in binDir.
func (c *Cluster) storageProcessFrom(binDir, name string, i int, env []string) *Process {
	listen := *c.listenURL
	q := listen.Query()
	q.Set("application_name", ListenerName(c.Tenant, i))
	listen.RawQuery = q.Encode()
	return newProcess(c.t, freeAddr(c.t), name, filepath.Join(binDir, "circulation-storage"),
		append(append(storageAuthEnv(), "DATABASE_URL="+c.dbURL, "LISTEN_DATABASE_URL="+listen.String(), "LOG_LEVEL=info", "DB_MAX_CONNS=20",
			fmt.Sprintf("CHECKOUT_LOCK_FEATURE_ENABLED=%t", c.opts.FeatureOn)), env...)...)
}

// LaunchStorage starts one more storage instance as AddStorage does, but
// does not wait for it to answer: for an instance meant to exit or to
// freeze itself (it may be gone or stopped before it would have been seen
// healthy).
func (c *Cluster) LaunchStorage(name string, env ...string) *Process {
	p := c.storageProcess(name, len(c.Storages)+1, append(append([]string(nil), c.opts.StorageEnv...), env...))
	p.launch()
	return p
}

// AddStorage starts one more storage instance on the cluster's database,
// with the cluster's storage environment and env on top. No circulation
// instance talks to it; it is not in Storages.
func (c *Cluster) AddStorage(name string, env ...string) *Process {
	return c.startStorage(name, len(c.Storages)+1, append(append([]string(nil), c.opts.StorageEnv...), env...))
}

// AddStorageFrom is AddStorage of the binary in binDir (another
// release's, for an upgrade).
func (c *Cluster) AddStorageFrom(binDir, name string, env ...string) *Process {
	p := c.storageProcessFrom(binDir, name, len(c.Storages)+1, append(append([]string(nil), c.opts.StorageEnv...), env...))
	p.Start()
	return p
}

// AddStorageTLS is AddStorage serving HTTPS with certFile and keyFile,
// whose CA is in roots.
func (c *Cluster) AddStorageTLS(name string, roots *x509.CertPool, certFile, keyFile string, env ...string) *Process {
	p := c.storageProcess(name, len(c.Storages)+1, append(append([]string(nil), c.opts.StorageEnv...),
		append(env, "TLS_CERT_FILE="+certFile, "TLS_KEY_FILE="+keyFile)...))
	p.Client = &http.Client{Timeout: 60 * time.Second,
		Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}}}
	p.Start()
	return p
}

// Cluster is one circulation-storage and several circulation instances on
// a tenant of their own.
type Cluster struct {
	t      testing.TB
	Tenant string
	// Storage is the first of Storages.
	Storage      *Process
	Storages     []*Process
	Circulations []*Process
	// StorageProxy, DBProxy and ListenProxy are nil unless asked for.
	StorageProxy, DBProxy, ListenProxy *Proxy
	// CirculationProxies are the proxies between each circulation
	// instance and its storage, in the order the instances were started
	// (Options.CirculationProxies; nil unless asked for).
	CirculationProxies []*Proxy
	// DB reaches the tenant's data directly, for checking invariants.
	DB     *pgxpool.Pool
	Schema string
	client *http.Client

	opts        Options
	storageURLs []string
	dbURL       string
	listenURL   *url.URL
	started     int // circulation instances started, for their names
}

// clientsFrom are DoFrom's clients, by local address, shared by every
// cluster.
var clientsFrom sync.Map

// TrustedProxy is the address circulation trusts to name its clients (the
// SIP2 door's, and every test's that connects from the default address).
const TrustedProxy = "127.0.0.1"

// AddCirculations starts n more circulation instances with the cluster's
// options and env added to their environment, and returns them (they are
// not added to Circulations). Instance i talks to storage i mod Storages.
func (c *Cluster) AddCirculations(n int, env ...string) []*Process {
	c.t.Helper()
	return c.addCirculations(c.binDir(), c.storageURLs, n, env)
}

// AddCirculationsFrom is AddCirculations of the binary in binDir (another
// release's, for an upgrade), each talking to storage.
func (c *Cluster) AddCirculationsFrom(binDir string, storage *Process, n int, env ...string) []*Process {
	c.t.Helper()
	return c.addCirculations(binDir, []string{storage.URL()}, n, env)
}

// addCirculations starts n circulation instances of the binary in binDir,
// instance i talking to storageURLs[i mod their number].
func (c *Cluster) addCirculations(binDir string, storageURLs []string, n int, env []string) []*Process {
	c.t.Helper()
	var out []*Process
	for i := range n {
		storageURL := storageURLs[i%len(storageURLs)]
		if c.opts.CirculationProxies {
			proxy := NewProxy(c.t, strings.TrimPrefix(storageURL, "http://"))
			c.CirculationProxies = append(c.CirculationProxies, proxy)
			storageURL = "http://" + proxy.Addr()
		}
		out = append(out, startProcess(c.t, fmt.Sprintf("circulation-%d", c.started+1),
			filepath.Join(binDir, "circulation"),
			append(append(append(circulationAuthEnv(),
				"STORAGE_URL="+storageURL,
				fmt.Sprintf("LOCK_TTL_MS=%d", c.opts.LockTTLMs),
				"RETRY_INTERVAL_MS="+c.opts.RetryIntervalMs,
				"SETTINGS_CACHE_TTL=200ms",
				"STORAGE_TIMEOUT=3s",
				"LOG_LEVEL=info",
				// The SIP2 door connects from here and names its kiosks'
				// addresses; tests that play clients at addresses of
				// their own connect from 127.0.0.2 and up (DoFrom).
				"TRUSTED_PROXIES="+TrustedProxy,
			), c.opts.CirculationEnv...), env...)...))
		c.started++
	}
	return out
}

// NewCluster starts the processes and initialises the tenant.
func NewCluster(t testing.TB, opts Options) *Cluster {
	t.Helper()
	if opts.Circulations == 0 {
		opts.Circulations = 3
	}
	if opts.Storages == 0 {
		opts.Storages = 1
	}
	if opts.StorageProxy && opts.Storages > 1 {
		t.Fatal("harness: StorageProxy needs a single storage instance")
	}
	if opts.LockTTLMs == 0 {
		opts.LockTTLMs = 3000
	}
	if opts.RetryIntervalMs == "" {
		opts.RetryIntervalMs = "500|500|1000"
	}
	e := envState()
	c := &Cluster{t: t, Tenant: TenantID(), client: &http.Client{
		Timeout:   60 * time.Second,
		Transport: &http.Transport{MaxIdleConnsPerHost: 512, MaxIdleConns: 512},
	}}
	c.Schema = schemaOf(c.Tenant)
	c.opts = opts

	base := cmp.Or(opts.DatabaseURL, e.DatabaseURL)
	dbURL := base
	if opts.DBProxy {
		u, _ := url.Parse(dbURL)
		c.DBProxy = NewProxy(t, u.Host)
		u.Host = c.DBProxy.Addr()
		dbURL = u.String()
	}
	// The release listener connects directly (or through its own proxy),
	// under a name of its own, so a test can find its session.
	listen, _ := url.Parse(base)
	if opts.ListenProxy {
		c.ListenProxy = NewProxy(t, listen.Host)
		listen.Host = c.ListenProxy.Addr()
	}
	c.dbURL, c.listenURL = dbURL, listen
	for i := range opts.Storages {
		name := "storage"
		if opts.Storages > 1 {
			name = fmt.Sprintf("storage-%d", i+1)
		}
		c.Storages = append(c.Storages, c.startStorage(name, i, opts.StorageEnv))
	}
	c.Storage = c.Storages[0]
	storageURLs := make([]string, len(c.Storages))
	for i, s := range c.Storages {
		storageURLs[i] = s.URL()
	}
	if opts.StorageProxy {
		c.StorageProxy = NewProxy(t, c.Storage.Addr)
		storageURLs[0] = "http://" + c.StorageProxy.Addr()
	}
	c.opts, c.storageURLs = opts, storageURLs
	c.Circulations = c.AddCirculations(opts.Circulations)

	c.enableTenant(t)
	c.AddServicePoint(t)
	pool, err := pgxpool.New(context.Background(), base)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	c.DB = pool
	return c
}

// ListenerName is the application_name of the release listener of the
// cluster's storage instance i (tenant is the cluster's), in
// pg_stat_activity.
func ListenerName(tenant string, i int) string { return fmt.Sprintf("listener-%s-%d", tenant, i) }

// Response is an HTTP answer.
type Response struct {
	Status int
	Header http.Header
	Body   []byte
	// Err is a transport error: no answer at all.
	Err error
}

// Want fails the test unless the status is want.
func (r Response) Want(t testing.TB, want int) Response {
	t.Helper()
	if r.Err != nil {
		t.Fatalf("no answer: %v", r.Err)
	}
	if r.Status != want {
		t.Fatalf("status %d, want %d: %s", r.Status, want, r.Body)
	}
	return r
}

// Decode decodes the body.
func (r Response) Decode(t testing.TB, v any) {
	t.Helper()
	if err := json.Unmarshal(r.Body, v); err != nil {
		t.Fatalf("decode %s: %v", r.Body, err)
	}
}

// ErrorCodes lists the codes of an error envelope.
func (r Response) ErrorCodes() []string {
	var env struct {
		Errors []struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"errors"`
	}
	if json.Unmarshal(r.Body, &env) != nil {
		return nil
	}
	codes := make([]string, len(env.Errors))
	for i, e := range env.Errors {
		codes[i] = e.Code
	}
	return codes
}

// Do sends a request to a process as the cluster's tenant, with a
// tenant administrator's token (every permission). body may be nil, a
// string (sent as is) or a value (sent as JSON).
func (c *Cluster) Do(p *Process, method, path string, body any) Response {
	return c.DoWith(p, method, path, body, c.Headers())
}

// enableTenant enables the cluster's tenant at its storage. Enabling a
// tenant is one transaction, which, while the tests beside it enable
// theirs and load a machine of two cores, can outlast REQUEST_TIMEOUT
// (503, rolled back); it is idempotent, and asked again.
func (c *Cluster) enableTenant(t testing.TB) {
	t.Helper()
	var res Response
	for range 3 {
		res = c.Do(c.Storage, http.MethodPost, "/_/tenant", map[string]any{"module_to": "mod-circulation-storage-1.0.0"})
		if res.Status != http.StatusServiceUnavailable {
			break
		}
	}
	res.Want(t, http.StatusCreated)
}

// Headers are a request's headers as the cluster's tenant administrator:
// the tenant and a token holding every permission.
func (c *Cluster) Headers() map[string]string {
	return map[string]string{schemas.HeaderTenant: c.Tenant, schemas.HeaderToken: c.Token(schemas.RoleTenantAdmin)}
}

// HeadersWith is Headers and the name, value pairs kv.
func (c *Cluster) HeadersWith(kv ...string) map[string]string {
	h := c.Headers()
	for i := 0; i+1 < len(kv); i += 2 {
		h[kv[i]] = kv[i+1]
	}
	return h
}

// Token is a token for the cluster's tenant holding role (see
// schemas.PermissionSets), signed with the run's secret.
func (c *Cluster) Token(role string) string {
	return Token(c.t, c.Tenant, role)
}

// DoWith sends a request with exactly the given headers (plus a JSON
// Content-Type when there is a body and none is given).
func (c *Cluster) DoWith(p *Process, method, path string, body any, headers map[string]string) Response {
	if p.Client != nil {
		return c.do(p.Client, p, method, path, body, headers)
	}
	return c.do(c.client, p, method, path, body, headers)
}

// do sends a request with client.
func (c *Cluster) do(client *http.Client, p *Process, method, path string, body any, headers map[string]string) Response {
	var r io.Reader
	var sent []byte
	if body != nil {
		switch b := body.(type) {
		case string:
			sent = []byte(b)
		case []byte:
			sent = b
		default:
			data, err := json.Marshal(b)
			if err != nil {
				return Response{Err: err}
			}
			sent = data
		}
		r = bytes.NewReader(sent)
	}
	req, err := http.NewRequest(method, p.URL()+path, r)
	if err != nil {
		return Response{Err: err}
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	res, err := client.Do(req)
	if err != nil {
		return Response{Err: err}
	}
	defer res.Body.Close()
	data, err := io.ReadAll(res.Body)
	if err == nil {
		// Every answer is held to the service's OpenAPI description.
		if msg := CheckContract(p, method, path, sent, res.StatusCode, res.Header, data); msg != "" {
			c.t.Errorf("contract: %s", msg)
		}
	}
	return Response{Status: res.StatusCode, Header: res.Header, Body: data, Err: err}
}

// DoFrom is DoWith from the local address local (127.0.0.2 and up on
// loopback: a client at an address of its own, which no service trusts as
// a proxy).
func (c *Cluster) DoFrom(local string, p *Process, method, path string, body any, headers map[string]string) Response {
	client, ok := clientsFrom.Load(local)
	if !ok {
		client, _ = clientsFrom.LoadOrStore(local, &http.Client{Timeout: 60 * time.Second, Transport: &http.Transport{
			DialContext:         (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(local)}, Timeout: 5 * time.Second}).DialContext,
			MaxIdleConnsPerHost: 64,
		}})
	}
	return c.do(client.(*http.Client), p, method, path, body, headers)
}

// ServicePoint is the service point every check-out names: the sample
// data's Circ Desk 2, which a cluster's tenant has (AddServicePoint).
const ServicePoint = "c4c90014-c8c9-4ade-8f24-b5e313319f4b"

// AddServicePoint gives the cluster's tenant the service point ServicePoint
// (a loan must name one of its tenant's), unless it has it.
func (c *Cluster) AddServicePoint(t testing.TB) {
	t.Helper()
	r := c.Do(c.Storage, "POST", "/service-points", map[string]any{"id": ServicePoint, "name": "Circ Desk 2", "code": "cd2",
		"discoveryDisplayName": "Circulation Desk -- Back Entrance"})
	if r.Status != http.StatusCreated && r.Status != http.StatusConflict {
		t.Fatalf("service point: %d %s", r.Status, r.Body)
	}
}

// CheckOut checks an item out through circulation instance i.
func (c *Cluster) CheckOut(i int, itemBarcode, userBarcode string) Response {
	return c.Do(c.Circulations[i%len(c.Circulations)], "POST", "/circulation/check-out-by-barcode",
		map[string]string{"itemBarcode": itemBarcode, "userBarcode": userBarcode, "servicePointId": ServicePoint})
}

// CheckIn checks an item in through circulation instance i.
func (c *Cluster) CheckIn(i int, itemBarcode string) Response {
	return c.Do(c.Circulations[i%len(c.Circulations)], "POST", "/circulation/check-in-by-barcode",
		map[string]string{"itemBarcode": itemBarcode, "servicePointId": ServicePoint})
}

// Library is what SetupLibrary created.
type Library struct {
	PolicyID string
	// GroupID is the patrons' group.
	GroupID string
	Patrons []string // barcodes
	// Items[i] are the items set aside for patron i.
	Items [][]string
}

// IDOf is the id of the record at path (a storage collection, plural its
// key) whose barcode is barcode.
func (c *Cluster) IDOf(t testing.TB, path, plural, barcode string) string {
	t.Helper()
	var page map[string]json.RawMessage
	c.Do(c.Storage, "GET", path+"?barcode="+url.QueryEscape(barcode), nil).Want(t, http.StatusOK).Decode(t, &page)
	var records []struct{ ID string }
	if err := json.Unmarshal(page[plural], &records); err != nil || len(records) != 1 {
		t.Fatalf("%s with barcode %s: %s", path, barcode, page[plural])
	}
	return records[0].ID
}

// Request puts a hold of the item (by barcode) for the patron (by barcode)
// in the item's queue at position, awaiting pickup, and returns its id.
func (c *Cluster) Request(t testing.TB, itemBarcode, patronBarcode string, position int) string {
	t.Helper()
	var out struct{ ID string }
	c.Do(c.Storage, "POST", "/request-storage/requests", map[string]any{"requestType": "Hold", "requestLevel": "Item",
		"requestDate": "2026-01-01T10:00:00.000Z", "requesterId": c.IDOf(t, "/users", "users", patronBarcode),
		"itemId": c.IDOf(t, "/item-storage/items", "items", itemBarcode), "status": "Open - Awaiting pickup",
		"position": position, "fulfillmentPreference": "Hold Shelf"}).Want(t, http.StatusCreated).Decode(t, &out)
	return out.ID
}

// SetupLibrary creates, through storage's HTTP API, a patron group, a
// material type, a loan type, a loan policy with the given item limit (0:
// none) and rules applying it by loan type, and patrons each with their own
// items.
func (c *Cluster) SetupLibrary(patrons, itemsPerPatron, itemLimit int) Library {
	c.t.Helper()
	s := c.Storage
	post := func(path string, body map[string]any) string {
		c.t.Helper()
		var out struct {
			ID string `json:"id"`
		}
		c.setUp(path, body).Want(c.t, http.StatusCreated).Decode(c.t, &out)
		return out.ID
	}
	c.AddServicePoint(c.t)
	group := post("/groups", map[string]any{"group": "patrons"})
	material := post("/material-types", map[string]any{"name": "book"})
	loanType := post("/loan-types", map[string]any{"name": "Can circulate"})
	loansPolicy := map[string]any{"profileId": "Rolling", "period": map[string]any{"duration": 3, "intervalId": "Weeks"}}
	if itemLimit > 0 {
		loansPolicy["itemLimit"] = itemLimit
	}
	policy := post("/loan-policy-storage/loan-policies", map[string]any{"name": "limited", "loanable": true, "loansPolicy": loansPolicy})
	c.Do(s, "PUT", "/circulation-rules-storage", map[string]any{
		"fallbackLoanPolicyId": policy,
		"rules":                []map[string]any{{"loanTypeId": loanType, "loanPolicyId": policy}},
	}).Want(c.t, http.StatusNoContent)

	lib := Library{PolicyID: policy, GroupID: group, Items: make([][]string, patrons)}
	var mu sync.Mutex
	var wg sync.WaitGroup
	errs := make(chan string, patrons*(itemsPerPatron+1))
	sem := make(chan struct{}, 16)
	for p := range patrons {
		barcode := fmt.Sprintf("P%04d", p)
		lib.Patrons = append(lib.Patrons, barcode)
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			r := c.setUp("/users", map[string]any{"barcode": barcode, "active": true, "patronGroup": group,
				"personal": map[string]any{"lastName": "Patron " + barcode}})
			if r.Status != http.StatusCreated {
				errs <- fmt.Sprintf("create user %s: %d %s", barcode, r.Status, r.Body)
			}
			var items []string
			for i := range itemsPerPatron {
				ib := fmt.Sprintf("%s-I%03d", barcode, i)
				r := c.setUp("/item-storage/items", map[string]any{"barcode": ib, "title": "Item " + ib,
					"status": map[string]any{"name": "Available"}, "materialTypeId": material, "permanentLoanTypeId": loanType})
				if r.Status != http.StatusCreated {
					errs <- fmt.Sprintf("create item %s: %d %s", ib, r.Status, r.Body)
				}
				items = append(items, ib)
			}
			mu.Lock()
			lib.Items[p] = items
			mu.Unlock()
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		c.t.Fatal(e)
	}
	return lib
}

// setUp creates a record of the library a test starts from, at storage:
// an answer 503 (the database not answering for a moment, as a Patroni
// cluster's leader under the load of its start may not) is asked again,
// for up to setUpPatience. What a test then does is not: only the
// library it starts from is made this way.
func (c *Cluster) setUp(path string, body map[string]any) Response {
	var r Response
	Poll(setUpPatience, 100*time.Millisecond, func() bool {
		r = c.Do(c.Storage, "POST", path, body)
		return r.Status != http.StatusServiceUnavailable
	})
	return r
}

// setUpPatience bounds how long setUp asks again.
const setUpPatience = 30 * time.Second

// Account makes an account in the cluster's tenant, a person with role
// who signs in with username and password, and returns its id.
func (c *Cluster) Account(t testing.TB, username, first, last, role, password string) string {
	t.Helper()
	var a struct {
		ID string `json:"id"`
	}
	c.Do(c.Storage, "POST", "/sign-in-accounts", map[string]any{"username": username,
		"personal": map[string]any{"firstName": first, "lastName": last}, "roles": []string{role}}).
		Want(t, http.StatusCreated).Decode(t, &a)
	c.Do(c.Storage, "POST", "/authn/credentials", map[string]any{"userId": a.ID, "password": password}).Want(t, http.StatusCreated)
	return a.ID
}

// TerminateStorageBackends terminates every database backend of the
// cluster's storage (pg_terminate_backend, as an operator or a failover
// does) and waits until they have ended. It returns when
// pg_terminate_backend returned, before the wait: what a measurement of
// the recovery (the benchmark's scenario 13) starts its clock at.
func (c *Cluster) TerminateStorageBackends(t testing.TB) time.Time {
	t.Helper()
	ctx := context.Background()
	var pids []int32
	if err := c.DB.QueryRow(ctx, `SELECT coalesce(array_agg(pid), '{}') FROM pg_stat_activity
		WHERE datname = current_database() AND application_name LIKE 'circulation-storage%'`).Scan(&pids); err != nil {
		t.Fatalf("list backends: %v", err)
	}
	if _, err := c.DB.Exec(ctx, `SELECT pg_terminate_backend(pid) FROM unnest($1::int[]) AS pid`, pids); err != nil {
		t.Fatalf("terminate backends: %v", err)
	}
	at := time.Now()
	if !Poll(5*time.Second, time.Millisecond, func() bool {
		var left int
		err := c.DB.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE pid = ANY($1)`, pids).Scan(&left)
		return err == nil && left == 0
	}) {
		t.Fatal("storage's backends still running 5 s after pg_terminate_backend")
	}
	return at
}
