package integration

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/nats-io/nats.go"

	"github.com/checkoutlock/integration-tests/harness"
	"github.com/checkoutlock/schemas"
)

// demo is a make run (scripts/run.sh) on free ports and its own database.
type demo struct {
	root                   string
	storage, circulation   string // URLs
	storageAddr, circulAdr string
	sip2Addr, natsAddr     string
	mailboxAddr            string
	adminToken             string
	out                    *syncBuffer
}

// syncBuffer is make run's output, written as it comes and read by the
// test.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) WriteString(x string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.b.WriteString(x)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// freeAddr is a loopback address with a port free right now, reserved
// for the test.
func freeAddr(t *testing.T) string { return harness.FreeAddr(t) }

// startDemo runs scripts/run.sh as make run does, and waits for its banner.
func startDemo(t *testing.T) *demo {
	t.Helper()
	d := &demo{root: harness.RepoRoot(), storageAddr: freeAddr(t), circulAdr: freeAddr(t), sip2Addr: freeAddr(t), natsAddr: freeAddr(t),
		mailboxAddr: freeAddr(t), out: &syncBuffer{}}
	d.storage, d.circulation = "http://"+d.storageAddr, "http://"+d.circulAdr
	cmd := exec.Command("bash", filepath.Join(d.root, "scripts", "run.sh"))
	cmd.Env = append(os.Environ(), "STORAGE_ADDR="+d.storageAddr, "CIRCULATION_ADDR="+d.circulAdr,
		"SIP2_ADDR="+d.sip2Addr, "SIP2_ADMIN_ADDR="+freeAddr(t), "NATS_ADDR="+d.natsAddr, "NATS_STORE="+filepath.Join(t.TempDir(), "nats"),
		"MAILBOX_ADDR="+d.mailboxAddr, "MAILBOX_SMTP_ADDR="+freeAddr(t), "MAILBOX_STORE="+filepath.Join(t.TempDir(), "mailbox.db"),
		"DATABASE_URL="+harness.FreshDatabase(t), "BIN_DIR="+harness.BinDir())
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// Ctrl-C: the script stops what it started.
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGINT)
		_ = cmd.Wait()
	})
	banner := make(chan error, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		seen := false
		for sc.Scan() {
			d.out.WriteString(sc.Text() + "\n")
			if !seen && strings.Contains(sc.Text(), "make demo-reset") {
				seen = true
				banner <- nil
			}
		}
		if !seen {
			banner <- io.ErrUnexpectedEOF
		}
	}()
	select {
	case err := <-banner:
		if err != nil {
			t.Fatalf("make run ended before its banner:\n%s", d.out)
		}
	case <-time.After(3 * time.Minute):
		t.Fatalf("make run printed no banner in 3 minutes:\n%s", d.out)
	}
	tokens, err := os.ReadFile(filepath.Join(d.root, ".run", "tokens.env"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^(?:export )?ADMIN_TOKEN=(\S+)$`).FindStringSubmatch(string(tokens))
	if m == nil {
		t.Fatalf("no ADMIN_TOKEN in .run/tokens.env")
	}
	d.adminToken = strings.Trim(m[1], `'"`)
	return d
}

// env is make run's addresses as the variables that moved them: the
// documents' commands read them, as make demo-reset does.
func (d *demo) env() []string {
	return append(os.Environ(), "STORAGE_ADDR="+d.storageAddr, "CIRCULATION_ADDR="+d.circulAdr, "SIP2_ADDR="+d.sip2Addr,
		"NATS_ADDR="+d.natsAddr, "MAILBOX_ADDR="+d.mailboxAddr)
}

// shell runs script with bash in the repository's root, make run's
// addresses in the environment (the documents' commands take make run's
// defaults otherwise, where nothing of this demo listens).
func (d *demo) shell(t *testing.T, script string) string {
	t.Helper()
	cmd := exec.Command("bash", "-c", script)
	cmd.Dir = d.root
	cmd.Env = d.env()
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v running:\n%s\n--- output:\n%s", err, script, out)
	}
	return string(out)
}

// asWritten runs a document's block (or part of one, as pasted) and fails
// the test for each answer its comments write that its commands do not
// give (docSteps); it answers the output.
func (d *demo) asWritten(t *testing.T, what, block string, pace func(string) string) string {
	t.Helper()
	steps := docSteps(block)
	out := d.shell(t, pace(stepsScript(steps)))
	for _, m := range unanswered(steps, out) {
		t.Errorf("%s: %s", what, m)
	}
	return withoutMarkers(out)
}

// pastedWhole is a block pasted at once.
func pastedWhole(script string) string { return script }

// reset is make demo-reset against this demo.
func (d *demo) reset(t *testing.T) {
	t.Helper()
	cmd := exec.Command("make", "-s", "demo-reset")
	cmd.Dir = d.root
	cmd.Env = append(os.Environ(), "STORAGE_ADDR="+d.storageAddr, "CIRCULATION_ADDR="+d.circulAdr)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("demo-reset: %v\n%s", err, out)
	}
}

// get reads a JSON answer as the tenant's administrator.
func (d *demo) get(t *testing.T, url string, out any) {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	req.Header.Set(schemas.HeaderTenant, "diku")
	req.Header.Set(schemas.HeaderToken, d.adminToken)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	if res.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %s", url, res.StatusCode, body)
	}
	if err := json.Unmarshal(body, out); err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
}

// openLoans counts patron's open loans.
func (d *demo) openLoans(t *testing.T, patronID string) int {
	t.Helper()
	var page struct {
		TotalRecords int `json:"totalRecords"`
	}
	d.get(t, d.storage+"/loan-storage/loans?status=Open&userId="+patronID, &page)
	return page.TotalRecords
}

// payments counts the payments of the patron's fees/fines.
func (d *demo) payments(t *testing.T, patronID string) int {
	t.Helper()
	var page struct {
		Feefineactions []struct {
			TypeAction string `json:"typeAction"`
		} `json:"feefineactions"`
	}
	d.get(t, d.storage+"/feefineactions?limit=1000&userId="+patronID, &page)
	n := 0
	for _, a := range page.Feefineactions {
		if a.TypeAction == schemas.ActionPay.Full() || a.TypeAction == schemas.ActionPay.Partial() {
			n++
		}
	}
	return n
}

// watchEvents runs the command make run's banner gives to watch the demo
// tenant's events for a few seconds: it prints the check-outs made so
// far, as domain events.
func (d *demo) watchEvents(t *testing.T) {
	t.Helper()
	m := regexp.MustCompile(`watch the demo tenant's: (\S+/events -nats \S+ -tenant diku)`).FindStringSubmatch(d.out.String())
	if m == nil {
		t.Fatalf("make run's banner gives no command to watch the events:\n%s", d.out)
	}
	// The README gives the same command, for make run's default address.
	blocks := shellBlocks(t, filepath.Join(d.root, "README.md"), "## Events")
	if len(blocks) == 0 {
		t.Fatal("the README's Events section has no command")
	}
	readme := strings.TrimSpace(blocks[0])
	want := regexp.MustCompile(`nats://\S+`).ReplaceAllString(m[1], "nats://${NATS_ADDR:-127.0.0.1:4223}")
	if want = regexp.MustCompile(`^\S*/events `).ReplaceAllString(want, "bin/events "); readme != want {
		t.Errorf("the README's command to watch the events is %q; make run's banner says %q", readme, want)
	}
	checkedOut := 0
	for _, e := range d.events(t) {
		if e.Subject == "checkout.events.diku.check-out" {
			checkedOut++
		}
	}
	if checkedOut != 6 {
		t.Fatalf("the events command showed %d check-outs, want 6 (the README's 5: Alice's 3, Hana's and Bob's DVD, the SIP2 session's 1)", checkedOut)
	}
}

// sip2Session runs the README's SIP2 session against the demo and
// compares what was sent and received with what the README shows, dates
// and checksums aside.
func (d *demo) sip2Session(t *testing.T) {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(d.root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	section := string(raw)[strings.Index(string(raw), "## A self-check machine (SIP2)"):]
	cmd := regexp.MustCompile("(?s)```sh\n(.*?)```").FindStringSubmatch(section)
	want := regexp.MustCompile("(?s)```text\n(.*?)```").FindStringSubmatch(section)
	if cmd == nil || want == nil {
		t.Fatal("the README's SIP2 section has no command or no session")
	}
	mask := func(s string) string {
		s = regexp.MustCompile(`\d{8}    \d{6}`).ReplaceAllString(s, "YYYYMMDD    HHMMSS")
		return regexp.MustCompile(`AZ[0-9A-F]{4}`).ReplaceAllString(s, "AZxxxx")
	}
	got := d.shell(t, cmd[1])
	if mask(got) != mask(want[1]) {
		t.Fatalf("the README's SIP2 session went otherwise:\n%s\nthe README shows:\n%s", got, want[1])
	}
}

// docBlocks are the command blocks of the README and the walk-through,
// by the heading of their section, and how many each has: the test runs
// each (the README's first two commands are make run, which the test
// runs, and make test, which runs the test).
var docBlocks = map[string]map[string]int{
	"README.md":           {"## Two commands": 1, "## Try it": 1, "## A self-check machine (SIP2)": 1, "## Events": 1},
	"docs/walkthrough.md": {"## Check-outs, every answer": 1, "## The lock API": 1},
}

// everyBlockRun: the documents have the command blocks docBlocks names,
// and no other: a block added is a block this test must run.
func (d *demo) everyBlockRun(t *testing.T) {
	t.Helper()
	for doc, sections := range docBlocks {
		raw, err := os.ReadFile(filepath.Join(d.root, doc))
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]int{}
		section := ""
		inBlock := false
		for _, line := range strings.Split(string(raw), "\n") {
			switch {
			case strings.HasPrefix(line, "```"):
				if !inBlock && line == "```sh" {
					got[section]++
				}
				inBlock = !inBlock
			case !inBlock && strings.HasPrefix(line, "## "):
				section = line
			}
		}
		if !reflect.DeepEqual(got, sections) {
			t.Errorf("%s's command blocks by section are %v; the test runs %v", doc, got, sections)
		}
	}
}

// shellBlocks are the ```sh blocks of a Markdown document, from the
// heading that starts with from on.
func shellBlocks(t *testing.T, path, from string) []string {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(raw)
	if i := strings.Index(doc, from); i >= 0 {
		doc = doc[i:]
	} else {
		t.Fatalf("%s has no %q", path, from)
	}
	var blocks []string
	for _, m := range regexp.MustCompile("(?s)```sh\n(.*?)```").FindAllStringSubmatch(doc, -1) {
		blocks = append(blocks, m[1])
	}
	return blocks
}

// slowly puts a pause after each command of a block, as a person pasting
// one command at a time would: longer than a lock's default lifetime, so
// a walk-through that counts on a lock outliving the next command fails.
func slowly(block string) string {
	var b strings.Builder
	for _, line := range strings.Split(block, "\n") {
		b.WriteString(line + "\n")
		trimmed := strings.TrimSpace(line)
		if trimmed != "" && !strings.HasPrefix(trimmed, "#") && !strings.HasSuffix(trimmed, "\\") && !strings.HasPrefix(trimmed, "printf '\\n@@step") {
			b.WriteString("sleep 3.5\n")
		}
	}
	return b.String()
}

// TestReadmeAndWalkthrough: make run (scripts/run.sh) on free ports prints
// the demo accounts; make help lists every target; the README's Try it
// runs as written against it (a burst of five scans for a patron with a
// limit of three: three loans, two refusals, FOLIO's reason), and so does
// its SIP2 session; a newcomer signs in to the settings with a demo
// account. The walk-through (docs/walkthrough.md) runs as written and gets
// every answer it says; its last step (make demo-reset) leaves the demo as
// make run made it (items, requests, loans, accounts, settings), and every
// loan the events announced was last announced closed. Its lock, held, reads
// in the console as the README's picture says (the picture is taken then);
// the rest of its lock API runs slowly, as pasted one command at a time,
// and the console's history names who acted. make demo-reset again gives
// the same demo and the same account of the loans.
func TestReadmeAndWalkthrough(t *testing.T) {
	t.Parallel()
	d := startDemo(t)
	for _, want := range []string{"kiosk      kiosk-demo", "librarian  librarian-demo", "operator   operator-demo", "admin      admin-demo"} {
		if !strings.Contains(d.out.String(), want) {
			t.Errorf("make run's banner does not show the demo account %q:\n%s", want, d.out)
		}
	}
	// Every page the service serves, in the banner.
	pages, _ := filepath.Glob(filepath.Join(d.root, "circulation", "internal", "httpapi", "ui", "*.body.html"))
	for _, p := range pages {
		page := "/ui/" + strings.TrimSuffix(filepath.Base(p), ".body.html") + ".html?tenant=diku"
		if !strings.Contains(d.out.String(), d.circulation+page) {
			t.Errorf("make run's banner does not list the page %s:\n%s", page, d.out)
		}
	}
	if len(pages) != 3 {
		t.Errorf("the service has %d pages, want 3 (the banner's)", len(pages))
	}
	if strings.Contains(d.out.String(), "eyJ") {
		t.Errorf("make run's banner prints a token:\n%s", d.out)
	}
	d.makeHelp(t)
	// The broker make run starts is the release nats/go.mod pins.
	nc, err := nats.Connect("nats://"+d.natsAddr, nats.Timeout(5*time.Second))
	if err != nil {
		t.Fatalf("make run's NATS server: %v", err)
	}
	if got, want := "v"+nc.ConnectedServerVersion(), harness.PinnedNATSVersion(t); got != want {
		t.Errorf("make run's NATS server is %s, nats/go.mod pins %s", got, want)
	}
	nc.Close()
	made := d.snapshot(t)
	d.everyBlockRun(t)
	readme := shellBlocks(t, filepath.Join(d.root, "README.md"), "## Try it")
	if len(readme) == 0 {
		t.Fatal("the README's Try it has no commands")
	}
	out := d.asWritten(t, "the README's Try it", readme[0], pastedWhole)
	alice := regexp.MustCompile(`(?m)^book-00\d (\d+)$`).FindAllStringSubmatch(out, -1)
	codes := map[string]int{}
	for _, m := range alice {
		codes[m[1]]++
	}
	if len(alice) != 5 || codes["201"] != 3 || codes["422"] != 2 || !strings.Contains(out, "accessTokenExpiration") {
		t.Fatalf("the README's Try it answered:\n%s", out)
	}
	// Hana: refused for what she owes, her payment sent twice answered
	// once and paid once, lent at once, then billed for the book lost.
	paid := regexp.MustCompile(`(?m)^\{.*"remainingAmount":"0.00".*\}$`).FindAllString(out, -1)
	if !strings.Contains(out, `"code":"USER_IS_BLOCKED_AUTOMATICALLY"`) || !strings.Contains(out, "Patron has fees/fines over the limit") ||
		len(paid) != 2 || paid[0] != paid[1] || !strings.Contains(out, "book-011 201") || !strings.Contains(out, "declared lost 204") ||
		!strings.Contains(out, `"feeFineBalance":"30.00"`) {
		t.Errorf("the README's Try it did not take Hana's money as it says:\n%s", out)
	}
	if n := d.payments(t, "fb16c2bd-e288-51e2-93b0-3aa8628f91d2"); n != 1 {
		t.Errorf("Hana paid %d times, want once", n)
	}
	// Bob's DVD, due a week on when the desks are closed: the end of
	// the day after (the demo's calendar closes the day a week after its
	// load, moments ago: sample.StocktakingDay).
	if due := `"dueDate":"` + time.Now().UTC().AddDate(0, 0, 8).Format(time.DateOnly) + `T23:59:59.000Z"`; !strings.Contains(out, due) {
		t.Errorf("the README's Try it did not move Bob's DVD off the closed day (%s):\n%s", due, out)
	}
	aliceID := "6717fd9c-1f38-547a-bba4-52052e92b785"
	if n := d.openLoans(t, aliceID); n != 3 {
		t.Errorf("Alice has %d open loans after the README's burst, want 3", n)
	}
	// Grace's renewals: one renewed, one refused at the limit; book-151
	// on the hold shelf for Bob.
	if n := strings.Count(out, `"renewalCount":1,"action":"renewed"`); n != 1 {
		t.Errorf("the README's Try it renewed %d loans, want 1:\n%s", n, out)
	}
	var shelf struct {
		Items []struct {
			Barcode string `json:"barcode"`
		} `json:"items"`
	}
	d.get(t, d.storage+"/item-storage/items?query="+url.QueryEscape(`status.name=="`+schemas.ItemAwaitingPickup+`"`), &shelf)
	if len(shelf.Items) != 2 || !slices.ContainsFunc(shelf.Items, func(i struct {
		Barcode string `json:"barcode"`
	}) bool {
		return i.Barcode == "book-151"
	}) {
		t.Errorf("after the README's Try it the hold shelf holds %v, want book-020 and book-151", shelf.Items)
	}
	// Bob is mailed that book-151 waits for him, once, in the demo's
	// mailbox.
	if n := strings.Count(out, `"Subject":"Your hold is ready: `); n != 1 {
		t.Errorf("the README's Try it found %d mails telling Bob his hold is ready, want 1:\n%s", n, out)
	}

	// The desk's page, as the README says: Grace, found by the beginning
	// of her name, her loans with their policy, the renewals the server
	// would refuse not offered and why (the limit, Bob's hold); the
	// README's picture of it is taken then.
	ctx := browser(t)
	if err := chromedp.Run(ctx, chromedp.EmulateViewport(1280, 800, chromedp.EmulateScale(1))); err != nil {
		t.Fatal(err)
	}
	d.signIn(t, ctx, "/ui/loans.html", "librarian")
	if err := chromedp.Run(ctx, chromedp.SetValue("#patron", "Gre", chromedp.ByQuery), chromedp.Click("#find-submit", chromedp.ByQuery)); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, ctx, "Grace's two loans", `document.querySelectorAll("#results tbody tr").length === 2`)
	if got := textOf(t, ctx, "#results h2"); got != "Grace Green (1007)" {
		t.Errorf("the desk found %q for Gre", got)
	}
	renewals := map[string]string{}
	for _, b := range evaluate[[]deskButton](t, ctx, deskButtonsScript) {
		if b.Action == "renew" && !b.Enabled {
			renewals[b.Item] = b.Reason
		}
		if b.Action != "renew" && !b.Enabled {
			t.Errorf("the desk does not offer %s of %s: %q", b.Action, b.Item, b.Reason)
		}
	}
	if len(renewals) != 2 || !strings.Contains(renewals["book-152"], "loan at maximum renewal number") ||
		!strings.Contains(renewals["book-153"], "cannot be renewed when there is an active, pending hold request") {
		t.Errorf("the desk's renewals not offered, by item: %q; want book-152 at its limit and book-153 held for Bob", renewals)
	}
	if page := textOf(t, ctx, "#results"); !strings.Contains(page, "Undergraduate: 3 items, renewable once") {
		t.Errorf("the desk does not name Grace's loan policy:\n%s", page)
	}
	screenshot(t, ctx, "demo-desk.png")
	if err := chromedp.Run(ctx, chromedp.Click("#sign-out", chromedp.ByQuery), chromedp.WaitVisible("#signin-panel", chromedp.ByQuery)); err != nil {
		t.Fatal(err)
	}

	// The README's SIP2 session, byte for byte but for the dates and the
	// checksums over them.
	d.sip2Session(t)

	// The banner's command to watch the demo tenant's events shows the
	// check-outs made so far: the README's five (Alice's three, Hana's, Bob's DVD) and the SIP2 session's.
	d.watchEvents(t)

	// The pages, signed in with the demo accounts: the settings for the
	// librarian, the console for the operator.
	d.signIn(t, ctx, "/ui/settings.html", "librarian")
	if err := chromedp.Run(ctx, chromedp.WaitVisible("#settings", chromedp.ByQuery)); err != nil {
		t.Fatal(err)
	}
	if got := textOf(t, ctx, "#who"); got != "Signed in as Lee Librarian" {
		t.Errorf("the librarian's page says %q", got)
	}
	screenshot(t, ctx, "demo-settings.png")
	if err := chromedp.Run(ctx, chromedp.Click("#sign-out", chromedp.ByQuery), chromedp.WaitVisible("#signin-panel", chromedp.ByQuery)); err != nil {
		t.Fatal(err)
	}
	d.reset(t)
	if n := d.openLoans(t, aliceID); n != 0 {
		t.Errorf("Alice has %d open loans after demo-reset, want 0", n)
	}

	// The walk-through's check-outs, run as written, end with its step
	// that puts the demo back: the database and the settings are as make
	// run made them, and every loan opened so far was announced closed.
	walk := shellBlocks(t, filepath.Join(d.root, "docs", "walkthrough.md"), "## Check-outs, every answer")
	if len(walk) != 2 {
		t.Fatalf("the walk-through has %d blocks, want 2", len(walk))
	}
	out = d.asWritten(t, "the walk-through", walk[0], pastedWhole)
	for _, want := range []string{schemas.CodeItemLimitPatronGroupLoanType, schemas.CodeUserInactive, schemas.CodeUserBlockedManually,
		schemas.CodeItemRequestedByAnotherPatron, schemas.CodeInsufficientOverridePermissions, "checkedOutThroughOverride", "Closed - Filled",
		"demo-reset: checked in 9 open loan(s)"} {
		if !strings.Contains(out, want) {
			t.Errorf("the walk-through's answers do not include %q", want)
		}
	}
	if t.Failed() {
		t.Logf("the walk-through answered:\n%s", out)
	}
	d.sameAsMade(t, made, "after the walk-through's last step")
	d.loansAnnouncedAsStored(t)

	// The walk-through's lock, held: the console shows it as the README's
	// picture says, and the picture is taken of it.
	setup, _, _ := strings.Cut(walk[0], "\n\n")
	vars, acquire, ok1 := strings.Cut(walk[1], "# Acquire Alice's lock")
	acquire, rest, ok2 := strings.Cut(acquire, "# Again")
	if !ok1 || !ok2 {
		t.Fatalf("the walk-through's lock API has no steps \"# Acquire Alice's lock\" and \"# Again\":\n%s", walk[1])
	}
	if out := d.asWritten(t, "the walk-through's lock API", setup+"\n"+vars+"# Acquire Alice's lock"+acquire, pastedWhole); !strings.Contains(out, `"itemBarcode":"book-007"`) {
		t.Fatalf("the walk-through's lock: %s", out)
	}
	d.signIn(t, ctx, "/ui/locks.html", "operator")
	if err := chromedp.Run(ctx, chromedp.WaitVisible("#locks tbody tr", chromedp.ByQuery)); err != nil {
		t.Fatal(err)
	}
	picture := d.readmePicture(t)
	row := evaluate[[]string](t, ctx, `[...document.querySelector("#locks tbody tr").cells].slice(0, 4).map((c) => c.textContent)`)
	if strings.Join(row, " | ") != strings.Join(picture, " | ") {
		t.Errorf("the walk-through's lock reads %q in the console; the README's picture shows %q", row, picture)
	}
	screenshot(t, ctx, "demo-locks.png")

	// The rest of the lock API, slowly, as pasted one command at a time.
	out = d.asWritten(t, "the walk-through's lock API, pasted slowly", setup+"\n"+vars+"# Again"+rest, slowly)
	for _, want := range []string{"Unable to acquire lock", `"waitedMs"`, "HTTP/1.1 204"} {
		if !strings.Contains(out, want) {
			t.Errorf("the walk-through's lock API does not answer %q", want)
		}
	}
	// A release that found no lock to name would hit the collection: 405.
	if regexp.MustCompile(`(?m)^(HTTP/1.1 405|405$)`).MatchString(out) || !strings.HasSuffix(strings.TrimSpace(out), "204") {
		t.Errorf("the walk-through's lock API, pasted slowly, ended:\n%s", out[max(0, len(out)-600):])
	}
	// The history names who acted, for every event.
	waitUntil(t, ctx, "the waiter that gave up in the history", `document.querySelector('#history tr[data-event="waiter_gave_up"]') !== null`)
	history := evaluate[[][]string](t, ctx, `[...document.querySelectorAll("#history tbody tr")].map((r) => [r.dataset.event, r.cells[2].textContent, r.cells[4].textContent])`)
	for _, h := range history {
		if h[1] != "Alice Archer (1001)" || h[0] == "waiter_gave_up" && h[2] != "Ada Admin" || uuidPattern.MatchString(h[2]) {
			t.Errorf("a history row reads %q: want Alice Archer (1001), and the person who acted by name", h)
		}
	}
	if len(history) == 0 {
		t.Error("the console's history is empty after the walk-through's lock API")
	}

	// A librarian's setting, then the reset with the console open: the
	// settings are the environment's as soon as it returns, and the
	// console says the session ended, as the README says it will.
	req, _ := http.NewRequest("PATCH", d.circulation+"/circulation/settings/check-out-lock", strings.NewReader(`{"lockTtl": 9000}`))
	req.Header.Set(schemas.HeaderTenant, "diku")
	req.Header.Set(schemas.HeaderToken, d.adminToken)
	req.Header.Set("Content-Type", "application/merge-patch+json")
	if res, err := http.DefaultClient.Do(req); err != nil || res.StatusCode != http.StatusOK {
		t.Fatalf("PATCH the settings: %v %v", res, err)
	} else {
		res.Body.Close()
	}
	d.reset(t)
	var settings struct{ Sources map[string]string }
	d.get(t, d.circulation+"/circulation/settings/check-out-lock", &settings)
	for field, source := range settings.Sources {
		if source != "environment" {
			t.Errorf("right after demo-reset, circulation answers %s from %s, want the environment's", field, source)
		}
	}
	waitUntil(t, ctx, "the console to say its session ended", `!document.getElementById("signin-panel").hidden &&
		document.getElementById("signin-status").textContent === "Your session has ended: sign in again."`)
	if readme, err := os.ReadFile(filepath.Join(d.root, "README.md")); err != nil ||
		!strings.Contains(strings.Join(strings.Fields(string(readme)), " "), `signed out ("Your session has ended: sign in again")`) {
		t.Error("the README does not say that make demo-reset signs the pages out, in the console's words")
	}
	d.sameAsMade(t, made, "after the second demo-reset")
	d.loansAnnouncedAsStored(t)

	// All the while, make run's log said nothing to worry a newcomer,
	// and kept its request lines to itself: the banner stays in view.
	for _, line := range strings.Split(d.out.String(), "\n") {
		if strings.Contains(line, `"level":"WARN"`) || strings.Contains(line, `"level":"ERROR"`) || strings.Contains(line, `"msg":"request"`) {
			t.Errorf("make run logged %s", line)
		}
	}
}

// signIn opens a page of the demo and signs in with a demo account.
func (d *demo) signIn(t *testing.T, ctx context.Context, page, account string) {
	t.Helper()
	if err := chromedp.Run(ctx, chromedp.Navigate(d.circulation+page+"?tenant=diku")); err != nil {
		t.Fatal(err)
	}
	signInHere(t, ctx, account, account+"-demo")
}
