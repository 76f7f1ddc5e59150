package storagetest

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/checkoutlock/schemas"
)

// get calls the boundary as a client would.
func get(t *testing.T, s *Storage, method, path string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(method, s.URL+path, nil)
	req.Header.Set(schemas.HeaderTenant, s.Tenant)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}

func TestTheBoundaryForwardsRecordsAndFails(t *testing.T) {
	t.Parallel()
	s := Start(t)
	s.AddPatronGroup("11111111-1111-4111-8111-111111111111", "staff")
	s.AddUser(User{ID: "22222222-2222-4222-8222-222222222222", Barcode: "u1", PatronGroup: "11111111-1111-4111-8111-111111111111",
		LastName: "Lovelace", Active: true})
	if status, body := get(t, s, http.MethodGet, "/users?query=barcode%3D%3Du1"); status != 200 || !strings.Contains(body, "Lovelace") {
		t.Fatalf("through the boundary: %d %s", status, body)
	}
	s.Refuse(RouteUsers, 1, http.StatusServiceUnavailable, schemas.CodeDatabaseUnavailable)
	if status, body := get(t, s, http.MethodGet, "/users"); status != 503 || !strings.Contains(body, schemas.CodeDatabaseUnavailable) {
		t.Fatalf("refused: %d %s", status, body)
	}
	if status, _ := get(t, s, http.MethodGet, "/users"); status != 200 {
		t.Fatalf("after the one refusal: %d", status)
	}
	lock := s.Hold("22222222-2222-4222-8222-222222222222", time.Minute)
	s.Lose(RouteRelease, 1, LostCut)
	if status, _ := get(t, s, http.MethodDelete, "/check-out-lock-storage/"+lock); status != 0 {
		t.Fatalf("a lost release answered %d", status)
	}
	if n := len(s.Locks()); n != 0 {
		t.Fatalf("the release whose answer was lost left %d locks", n)
	}
	want := []string{RouteUsers, RouteUsers, RouteUsers, RouteRelease}
	if got := s.Routes(); strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("routes %v, want %v", got, want)
	}
	if c := s.Calls()[1]; c.Status != 503 || c.Tenant != s.Tenant {
		t.Errorf("the refused call: %+v", c)
	}
	before := s.Snapshot()
	s.WantUnchanged(before)
	s.Down()
	if status, _ := get(t, s, http.MethodGet, "/users"); status != 0 {
		t.Errorf("a boundary that is down answered %d", status)
	}
}
