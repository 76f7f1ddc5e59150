package integration

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/checkoutlock/integration-tests/harness"
	"github.com/checkoutlock/schemas"
)

// uuidPattern finds an id where a person reads a name.
var uuidPattern = regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`)

// makeHelp: make help lists every target of the Makefile but the default
// one, each with what it does, and prints no make variable unexpanded.
func (d *demo) makeHelp(t *testing.T) {
	t.Helper()
	help := exec.Command("make", "-s", "help")
	help.Dir = d.root
	out, err := help.CombinedOutput()
	if err != nil {
		t.Fatalf("make help: %v\n%s", err, out)
	}
	makefile, err := os.ReadFile(filepath.Join(d.root, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	phony := regexp.MustCompile(`(?m)^\.PHONY:(.*)$`).FindSubmatch(makefile)
	if phony == nil {
		t.Fatal("the Makefile declares no .PHONY targets")
	}
	for _, target := range strings.Fields(string(phony[1])) {
		if target != "all" && !regexp.MustCompile(`(?m)^  make `+regexp.QuoteMeta(target)+` +\S`).Match(out) {
			t.Errorf("make help does not list make %s:\n%s", target, out)
		}
	}
	if strings.Contains(string(out), "$(") {
		t.Errorf("make help prints a make variable unexpanded:\n%s", out)
	}
}

// demoState is what make run makes of the demo tenant and make
// demo-reset must give back: the items' statuses, the requests, the open
// loans, the accounts and the lock settings in effect.
type demoState struct {
	Items    map[string]string // barcode: status
	Requests map[string]string // id: status, position
	Open     int
	Accounts map[string]string // username: id, roles, active
	Settings string            // the values in effect and where each came from
}

func (d *demo) snapshot(t *testing.T) demoState {
	t.Helper()
	s := demoState{Items: map[string]string{}, Requests: map[string]string{}, Accounts: map[string]string{}}
	var items struct {
		Items []struct {
			Barcode string `json:"barcode"`
			Status  struct {
				Name string `json:"name"`
			} `json:"status"`
		} `json:"items"`
	}
	d.get(t, d.storage+"/item-storage/items?limit=1000", &items)
	for _, i := range items.Items {
		s.Items[i.Barcode] = i.Status.Name
	}
	var requests struct {
		Requests []struct {
			ID       string `json:"id"`
			Status   string `json:"status"`
			Position int    `json:"position"`
		} `json:"requests"`
	}
	d.get(t, d.storage+"/request-storage/requests?limit=1000", &requests)
	for _, r := range requests.Requests {
		b, _ := json.Marshal([]any{r.Status, r.Position})
		s.Requests[r.ID] = string(b)
	}
	var loans struct {
		TotalRecords int `json:"totalRecords"`
	}
	d.get(t, d.storage+"/loan-storage/loans?status=Open&limit=0", &loans)
	s.Open = loans.TotalRecords
	var accounts struct {
		Accounts []struct {
			ID       string   `json:"id"`
			Username string   `json:"username"`
			Roles    []string `json:"roles"`
			Active   *bool    `json:"active"`
		} `json:"accounts"`
	}
	d.get(t, d.storage+"/sign-in-accounts?limit=100", &accounts)
	for _, a := range accounts.Accounts {
		b, _ := json.Marshal([]any{a.ID, a.Roles, a.Active})
		s.Accounts[a.Username] = string(b)
	}
	var settings struct {
		Enabled bool              `json:"checkOutLockFeatureEnabled"`
		TTL     int               `json:"lockTtl"`
		Waits   []int             `json:"retryIntervalsMs"`
		Sources map[string]string `json:"sources"`
	}
	d.get(t, d.circulation+"/circulation/settings/check-out-lock", &settings)
	b, _ := json.Marshal(settings)
	s.Settings = string(b)
	return s
}

// sameAsMade: the demo is as make run made it (the settings within
// circulation's settings cache period).
func (d *demo) sameAsMade(t *testing.T, made demoState, when string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		now := d.snapshot(t)
		if reflect.DeepEqual(now, made) {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("%s the demo is not as make run made it:\nnow  %+v\nmade %+v", when, now, made)
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// events are the demo tenant's events so far, as the README's command
// (the one make run's banner gives) prints them (it reads for five seconds).
func (d *demo) events(t *testing.T) []demoEvent {
	t.Helper()
	blocks := shellBlocks(t, filepath.Join(d.root, "README.md"), "## Events")
	if len(blocks) == 0 {
		t.Fatal("the README's Events section has no command")
	}
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	// bin/ is where make build puts the binaries make run runs; the test
	// runs its own build's (make run's BIN_DIR).
	command := strings.Replace(blocks[0], "bin/events ", filepath.Join(harness.BinDir(), "events")+" ", 1)
	cmd := exec.CommandContext(ctx, "bash", "-c", command)
	cmd.Dir, cmd.Env = d.root, d.env()
	out, _ := cmd.Output()
	sch := schemas.MustLoad()
	var events []demoEvent
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		var e demoEvent
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatalf("the events command printed %q", line)
		}
		if err := sch.ValidateJSON("domain-event.json", e.Event); err != nil {
			t.Fatalf("not a domain event: %v\n%s", err, e.Event)
		}
		events = append(events, e)
	}
	return events
}

// demoEvent is a line of the events command.
type demoEvent struct {
	Subject string          `json:"subject"`
	Event   json.RawMessage `json:"event"`
}

// loansAnnouncedAsStored: every loan the events announced was last
// announced as the database holds it: the sample's open loans open, every
// other closed (or deleted). No watcher is left with a loan that is open
// for it and closed or gone from the database.
func (d *demo) loansAnnouncedAsStored(t *testing.T) {
	t.Helper()
	var open struct {
		Loans []struct {
			ID string `json:"id"`
		} `json:"loans"`
	}
	d.get(t, d.storage+"/loan-storage/loans?status=Open&limit=1000", &open)
	stored := map[string]bool{}
	for _, l := range open.Loans {
		stored[l.ID] = true
	}
	last := map[string]string{}
	var order []string
	for _, e := range d.events(t) {
		if e.Subject != "checkout.events.diku.loan" {
			continue
		}
		var ev struct {
			Type string `json:"type"`
			Data struct {
				Old, New *struct {
					ID     string `json:"id"`
					Status struct {
						Name string `json:"name"`
					} `json:"status"`
				}
			} `json:"data"`
		}
		if err := json.Unmarshal(e.Event, &ev); err != nil {
			t.Fatal(err)
		}
		loan := ev.Data.New
		state := ""
		if loan == nil {
			loan, state = ev.Data.Old, "deleted"
		} else {
			state = loan.Status.Name
		}
		if _, seen := last[loan.ID]; !seen {
			order = append(order, loan.ID)
		}
		last[loan.ID] = state
	}
	if len(order) == 0 {
		t.Error("the events announced no loan")
	}
	for _, id := range order {
		want := last[id] == "Closed" || last[id] == "deleted"
		if stored[id] {
			want = last[id] == schemas.LoanOpen
		}
		if !want {
			t.Errorf("loan %s was last announced %q; open in the database: %v", id, last[id], stored[id])
		}
	}
}

// readmePicture is what the README's picture of the console shows of the
// lock held, as its description says: patron, holder, item, service point.
func (d *demo) readmePicture(t *testing.T) []string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(d.root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`!\[[^\]]*Patron "([^"]+)", Held by "([^"]+)", Item "([^"]+)", Service point "([^"]+)"\]\(docs/screenshots/demo-locks.png\)`).
		FindStringSubmatch(string(raw))
	if m == nil {
		t.Fatal("the README's picture of the console does not say what it shows")
	}
	return m[1:]
}
