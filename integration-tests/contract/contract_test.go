package contract_test

import (
	"fmt"
	"os"
	"testing"

	"github.com/google/uuid"

	"github.com/checkoutlock/circulation/storagefake"
	"github.com/checkoutlock/integration-tests/contract"
	"github.com/checkoutlock/integration-tests/harness"
)

// TestMain builds the binaries and creates the run's database, for the real
// storage.
func TestMain(m *testing.M) {
	os.Exit(harness.Main(m))
}

// TestContractFakeStorage holds circulation's fake of storage to the
// contract.
func TestContractFakeStorage(t *testing.T) {
	t.Parallel()
	contract.Exercise(t, true, func(t *testing.T) contract.Target {
		f := storagefake.New(t)
		// Naming the initialised tenant makes every other one
		// uninitialised, as in storage.
		tenant := "contract_" + harness.TenantID()
		f.AddTenant(tenant)
		return &fakeTarget{fake: f, tenant: tenant, never: harness.TenantID()}
	})
}

// TestContractRealStorage holds the real circulation-storage, one process on
// a real PostgreSQL, to the contract: each case on a tenant of its own.
func TestContractRealStorage(t *testing.T) {
	t.Parallel()
	s := harness.StartStorage(t, fmt.Sprintf("LOCK_DEFAULT_TTL_MS=%d", contract.DefaultLockTTLMs),
		fmt.Sprintf("LOCK_MAX_TTL_MS=%d", contract.MaxLockTTLMs), fmt.Sprintf("LOCK_MAX_WAIT_MS=%d", contract.MaxWaitMs))
	contract.Exercise(t, false, func(t *testing.T) contract.Target {
		return &realTarget{url: s.URL(), tenant: s.InitTenant(t), never: harness.TenantID()}
	})
}

// fakeTarget is the fake, seeded through its Add methods.
type fakeTarget struct {
	fake          *storagefake.Fake
	tenant, never string
}

func (f *fakeTarget) URL() string                 { return f.fake.URL }
func (f *fakeTarget) Tenant() string              { return f.tenant }
func (f *fakeTarget) UninitializedTenant() string { return f.never }

func (f *fakeTarget) Seed(*testing.T) contract.Records {
	r := contract.Records{PatronID: uuid.NewString(), PatronGroupID: uuid.NewString(), ItemID: uuid.NewString(),
		MaterialTypeID: uuid.NewString(), LoanTypeID: uuid.NewString()}
	r.ItemBarcode, r.PatronBarcode = "I-"+r.ItemID[:8], "P-"+r.PatronID[:8]
	f.fake.AddUser(storagefake.User{ID: r.PatronID, Barcode: r.PatronBarcode, PatronGroup: r.PatronGroupID,
		LastName: "Patron", Active: true})
	f.fake.AddItem(storagefake.Item{ID: r.ItemID, Barcode: r.ItemBarcode, Title: fmt.Sprintf("Item %s", r.ItemBarcode),
		Status: "Available", MaterialTypeID: r.MaterialTypeID, PermanentLoanTypeID: r.LoanTypeID})
	return r
}

func (f *fakeTarget) LimitItems(_ *testing.T, _ contract.Records, n int) {
	id := uuid.NewString()
	f.fake.AddLoanPolicy(storagefake.LoanPolicy{ID: id, Name: "limit " + id[:8], Loanable: true, Duration: 3, Interval: "Weeks", ItemLimit: n})
	f.fake.SetPolicyMatch(storagefake.PolicyMatch{LoanPolicyID: id, MaterialTypeMatch: true})
}

func (f *fakeTarget) Block(_ *testing.T, r contract.Records, block map[string]any) {
	str := func(k string) string { s, _ := block[k].(string); return s }
	borrowing, _ := block["borrowing"].(bool)
	f.fake.AddManualBlock(storagefake.ManualBlock{UserID: r.PatronID, Desc: str("desc"), PatronMessage: str("patronMessage"),
		ExpirationDate: str("expirationDate"), Borrowing: borrowing})
}

func (f *fakeTarget) LimitChargedOut(_ *testing.T, _ contract.Records, n int, message string) {
	f.fake.SetChargedOutLimit(storagefake.ChargedOutLimit{Limit: n, Message: message})
}

func (f *fakeTarget) Request(_ *testing.T, r contract.Records, byAnother bool, position int) string {
	requester := r.PatronID
	if byAnother {
		requester = uuid.NewString()
		f.fake.AddUser(storagefake.User{ID: requester, Barcode: "other-" + requester[:8], PatronGroup: r.PatronGroupID,
			LastName: "Other", Active: true})
	}
	id := uuid.NewString()
	f.fake.AddRequest(storagefake.Request{ID: id, ItemID: r.ItemID, RequesterID: requester, Status: "Open - Awaiting pickup", Position: position})
	return id
}

// realTarget is circulation-storage, seeded through its HTTP API.
type realTarget struct {
	url, tenant, never string
}

func (r *realTarget) URL() string                 { return r.url }
func (r *realTarget) Tenant() string              { return r.tenant }
func (r *realTarget) UninitializedTenant() string { return r.never }

func (r *realTarget) LimitItems(t *testing.T, rec contract.Records, n int) {
	t.Helper()
	contract.LimitItemsHTTP(t, r.url, r.tenant, rec, n)
}

func (r *realTarget) Block(t *testing.T, rec contract.Records, block map[string]any) {
	t.Helper()
	contract.BlockHTTP(t, r.url, r.tenant, rec, block)
}

func (r *realTarget) LimitChargedOut(t *testing.T, rec contract.Records, n int, message string) {
	t.Helper()
	contract.LimitChargedOutHTTP(t, r.url, r.tenant, rec, n, message)
}

func (r *realTarget) Request(t *testing.T, rec contract.Records, byAnother bool, position int) string {
	t.Helper()
	return contract.RequestHTTP(t, r.url, r.tenant, rec, byAnother, position)
}

func (r *realTarget) Seed(t *testing.T) contract.Records {
	t.Helper()
	return contract.SeedHTTP(t, r.url, r.tenant)
}
