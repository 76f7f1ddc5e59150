package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/checkoutlock/circulation-storage/locksql"
	"github.com/checkoutlock/integration-tests/harness"
	"github.com/checkoutlock/migrations"
	"github.com/checkoutlock/schemas"
	"github.com/jackc/pgx/v5"
)

// TestAStorageAheadOfItsSchemaSaysTheUpgrade: a storage started on a
// database whose schema lacks its last migration (its tenant not upgraded
// yet, as in a rolling upgrade) answers a tenant's calls 503 SCHEMA_BEHIND,
// naming the migration the schema is at and the one it needs, with
// Retry-After, and changes nothing; once the tenant is upgraded (POST
// /_/tenant with module_from), it serves.
func TestAStorageAheadOfItsSchemaSaysTheUpgrade(t *testing.T) {
	t.Parallel()
	c := harness.NewCluster(t, harness.Options{Circulations: 1, DatabaseURL: harness.FreshDatabase(t)})
	ctx := context.Background()
	latest := latestMigration(t)
	down, err := fs.ReadFile(migrations.FS, migrationFile(t, latest, "down"))
	if err != nil {
		t.Fatal(err)
	}
	// The schema one migration back, as the release before left it.
	shared := pgx.Identifier{locksql.Schema}.Sanitize()
	if _, err := c.DB.Exec(ctx, "SET search_path TO "+shared+"; "+string(down)+
		fmt.Sprintf("; UPDATE %s.schema_migrations SET version = %d", shared, latest-1)); err != nil {
		t.Fatalf("take back migration %d: %v", latest, err)
	}
	s := c.AddStorage("storage-ahead")
	r := c.Do(s, "GET", "/check-out-lock-storage", nil)
	r.Want(t, http.StatusServiceUnavailable)
	if codes := r.ErrorCodes(); len(codes) != 1 || codes[0] != schemas.CodeSchemaBehind {
		t.Fatalf("codes %v, want [%s]", codes, schemas.CodeSchemaBehind)
	}
	want := fmt.Sprintf("at migration %d; this circulation-storage needs migration %d", latest-1, latest)
	if !strings.Contains(string(r.Body), want) || !strings.Contains(string(r.Body), "POST /_/tenant") {
		t.Fatalf("answer %s, want it to say %q and how to upgrade", r.Body, want)
	}
	if r.Header.Get("Retry-After") == "" {
		t.Fatalf("no Retry-After: %v", r.Header)
	}
	c.Do(s, "POST", "/_/tenant", map[string]any{"module_from": "mod-circulation-storage-1.0.0", "module_to": "mod-circulation-storage-1.1.0"}).
		Want(t, http.StatusCreated)
	harness.Poll(10*time.Second, 100*time.Millisecond, func() bool { return c.Do(s, "GET", "/check-out-lock-storage", nil).Status == http.StatusOK })
	c.Do(s, "GET", "/check-out-lock-storage", nil).Want(t, http.StatusOK)
}

// latestMigration is the highest migration of the shared schema.
func latestMigration(t *testing.T) int {
	t.Helper()
	names, err := fs.Glob(migrations.FS, "*.up.sql")
	if err != nil {
		t.Fatal(err)
	}
	latest := 0
	for _, n := range names {
		var v int
		if _, err := fmt.Sscanf(n, "%d_", &v); err == nil && v > latest {
			latest = v
		}
	}
	return latest
}

// migrationFile is the name of migration v's up or down file.
func migrationFile(t *testing.T, v int, way string) string {
	t.Helper()
	names, _ := fs.Glob(migrations.FS, fmt.Sprintf("%06d_*.%s.sql", v, way))
	if len(names) != 1 {
		t.Fatalf("migration %d's %s file: %v", v, way, names)
	}
	return names[0]
}

// TestRollingUpgradeFromThePreviousRelease: the previous release (its
// binaries in PREVIOUS_RELEASE_BIN_DIR, built by make test-upgrade from the
// commit scripts/previous-release names) serves check-outs and check-ins
// of a library with the lock on, and is upgraded under that load as an
// operator would: this release's storage started beside the old one and
// the tenant upgraded through it (POST /_/tenant with module_from) while
// the old one serves; an old circulation instance on the new storage; then
// this release's circulation instances, each old one taken out of the
// rotation, its calls finished, and stopped; then the old storage stopped.
// Two kiosks check out for each patron at once, at an item limit of one,
// and two of FOLIO's check-outs take and give back another patron's lock
// through storage's lock API: the lock and the limit are held across
// both releases. Not one call
// fails (a check-out refused at the limit is an answer, not a failure),
// and every invariant holds.
func TestRollingUpgradeFromThePreviousRelease(t *testing.T) {
	prev := os.Getenv("PREVIOUS_RELEASE_BIN_DIR")
	if prev == "" {
		t.Skip("PREVIOUS_RELEASE_BIN_DIR is not set: make test-upgrade sets it")
	}
	t.Parallel()
	const limit = 1
	c := harness.NewCluster(t, harness.Options{BinDir: prev, Circulations: 2, FeatureOn: true, DatabaseURL: harness.FreshDatabase(t)})
	lib := c.SetupLibrary(4, 4, limit)
	rot := &rotation{inflight: map[*harness.Process]*sync.WaitGroup{}}
	rot.add(c.Circulations...)

	var calls, failed, refused atomic.Int64
	var mu sync.Mutex
	var created, closed []string
	var firstFailure string
	fail := func(what string, r harness.Response) {
		if failed.Add(1) == 1 {
			mu.Lock()
			firstFailure = fmt.Sprintf("%s: %d %s (err %v)", what, r.Status, r.Body, r.Err)
			mu.Unlock()
		}
	}
	stop := make(chan struct{})
	var load sync.WaitGroup
	// Two check-outs of FOLIO's circulation take and give back one more
	// patron's lock through storage's lock API (the wire contract), at
	// whichever storage serves: a lock held by the other is an answer, as
	// is a release of one already gone.
	folio := c.Do(c.Storage, "POST", "/users", map[string]any{"barcode": "FOLIO", "active": true, "patronGroup": lib.GroupID,
		"personal": map[string]any{"lastName": "Patron FOLIO"}}).Want(t, http.StatusCreated)
	var folioPatron struct{ ID string }
	folio.Decode(t, &folioPatron)
	storages := &rotation{inflight: map[*harness.Process]*sync.WaitGroup{}}
	storages.add(c.Storage)
	var held atomic.Int64
	for range 2 {
		load.Add(1)
		go func() {
			defer load.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				p, done := storages.take()
				r := c.Do(p, "POST", "/check-out-lock-storage", map[string]any{"userId": folioPatron.ID, "ttlMs": 2000, "waitMs": 50})
				done()
				calls.Add(1)
				if codes := r.ErrorCodes(); r.Status == http.StatusServiceUnavailable && slices.Equal(codes, []string{schemas.CodeLockHeld}) {
					held.Add(1)
					continue
				}
				if r.Status != http.StatusCreated {
					fail("the lock acquired at "+p.Name, r)
					continue
				}
				var lock struct{ ID string }
				_ = json.Unmarshal(r.Body, &lock)
				p, done = storages.take()
				r = c.Do(p, "DELETE", "/check-out-lock-storage/"+lock.ID, nil)
				done()
				calls.Add(1)
				if r.Status != http.StatusNoContent && r.Status != http.StatusNotFound {
					fail("the lock released at "+p.Name, r)
				}
			}
		}()
	}
	for w := range 2 * len(lib.Patrons) {
		patron, items := lib.Patrons[w/2], lib.Items[w/2][w%2*2:w%2*2+2]
		load.Add(1)
		go func() {
			defer load.Done()
			for k := 0; ; k++ {
				select {
				case <-stop:
					return
				default:
				}
				item := items[k%len(items)]
				p, done := rot.take()
				r := c.Do(p, "POST", "/circulation/check-out-by-barcode",
					map[string]string{"itemBarcode": item, "userBarcode": patron, "servicePointId": harness.ServicePoint})
				done()
				calls.Add(1)
				if codes := r.ErrorCodes(); r.Status == http.StatusUnprocessableEntity && len(codes) == 1 && slices.Contains(schemas.ItemLimitCodes, codes[0]) {
					refused.Add(1)
					continue
				}
				if r.Status != http.StatusCreated {
					fail("check-out of "+item+" at "+p.Name, r)
					continue
				}
				var loan struct{ ID string }
				_ = json.Unmarshal(r.Body, &loan)
				p, done = rot.take()
				r = c.Do(p, "POST", "/circulation/check-in-by-barcode", map[string]string{"itemBarcode": item, "servicePointId": harness.ServicePoint})
				done()
				calls.Add(1)
				if r.Status != http.StatusOK {
					fail("check-in of "+item+" at "+p.Name, r)
					continue
				}
				mu.Lock()
				created, closed = append(created, loan.ID), append(closed, loan.ID)
				mu.Unlock()
			}
		}()
	}
	// stage lets the load run until it has made at least n more calls.
	stage := func(what string, n int64) {
		t.Helper()
		from := calls.Load()
		if !harness.Poll(time.Minute, 10*time.Millisecond, func() bool { return calls.Load() >= from+n }) {
			t.Fatalf("%s: %d calls in a minute", what, calls.Load()-from)
		}
		t.Logf("%s: %d calls so far, %d failed", what, calls.Load(), failed.Load())
	}
	const each = 150
	stage("the previous release", each)

	next := c.AddStorageFrom(harness.BinDir(), "storage-next")
	c.Do(next, "POST", "/_/tenant", map[string]any{"module_from": "mod-circulation-storage-1.0.0", "module_to": "mod-circulation-storage-1.1.0"}).
		Want(t, http.StatusCreated)
	stage("the tenant upgraded while the old storage serves", each)
	storages.add(next)
	stage("the locks taken at both storages", each)

	oldOnNext := c.AddCirculationsFrom(prev, next, 1)
	rot.add(oldOnNext...)
	stage("an old circulation on the new storage beside the old ones", each)
	rot.drain(c.Circulations[0])
	c.Circulations[0].Stop()
	stage("an old circulation stopped", each)

	news := c.AddCirculationsFrom(harness.BinDir(), next, 2)
	rot.add(news...)
	stage("this release's circulation beside the old", each)
	for _, old := range append([]*harness.Process{c.Circulations[1]}, oldOnNext...) {
		rot.drain(old)
		old.Stop()
		stage("the old circulation "+old.Name+" stopped", each)
	}
	storages.drain(c.Storage)
	c.Storage.Stop()
	stage("the old storage stopped", each)

	close(stop)
	load.Wait()
	if failed.Load() != 0 {
		t.Fatalf("%d of %d calls failed; the first: %s", failed.Load(), calls.Load(), firstFailure)
	}
	c.CheckInvariants(t, harness.Invariants{ItemLimit: limit, Created: created, Closed: closed})
	if refused.Load() == 0 {
		t.Fatalf("no check-out was refused at the limit: the two kiosks of a patron never met")
	}
	summary(t, int(calls.Load()), int(calls.Load()-failed.Load()-refused.Load()-held.Load()), int(refused.Load()+held.Load()), 0,
		fmt.Sprintf("loans=%d locks_found_held=%d", len(created), held.Load()))
}

// rotation is a load balancer's list of circulation instances: calls go
// round it, and an instance is taken out (drain) before it is stopped, its
// calls in flight finished first.
type rotation struct {
	mu       sync.Mutex
	procs    []*harness.Process
	next     int
	inflight map[*harness.Process]*sync.WaitGroup
}

func (r *rotation) add(ps ...*harness.Process) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, p := range ps {
		r.procs = append(r.procs, p)
		r.inflight[p] = &sync.WaitGroup{}
	}
}

// take is the next instance and the call to make when its call is done.
func (r *rotation) take() (*harness.Process, func()) {
	r.mu.Lock()
	defer r.mu.Unlock()
	p := r.procs[r.next%len(r.procs)]
	r.next++
	wg := r.inflight[p]
	wg.Add(1)
	return p, wg.Done
}

// drain takes p out of the rotation and waits for its calls in flight.
func (r *rotation) drain(p *harness.Process) {
	r.mu.Lock()
	r.procs = slices.DeleteFunc(r.procs, func(q *harness.Process) bool { return q == p })
	wg := r.inflight[p]
	r.mu.Unlock()
	wg.Wait()
}
