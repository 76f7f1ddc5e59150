package harness

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// Mailpit is an SMTP server with a web API, the release the mailpit
// module pins (built beside the services' binaries, Build), run by the
// test on free loopback ports with its store in the test's directory,
// dropping a mail whose Message-ID it has delivered
// (--ignore-duplicate-ids); stopped when the test ends.
type Mailpit struct {
	t       testing.TB
	SMTP    string
	HTTP    string
	dir     string
	logPath string
	cmd     *exec.Cmd
	exited  chan struct{}
}

// StartMailpit starts an SMTP server.
func StartMailpit(t testing.TB) *Mailpit {
	t.Helper()
	m := &Mailpit{t: t, SMTP: freeAddr(t), HTTP: freeAddr(t), dir: t.TempDir(),
		logPath: logPath(t, "mailpit")}
	t.Cleanup(func() {
		m.Stop()
		if t.Failed() {
			if b, err := os.ReadFile(m.logPath); err == nil {
				t.Logf("---- log of mailpit ----\n%s", tail(b, 50))
			}
		}
	})
	m.Start()
	return m
}

// Start starts (or starts again) the server on its ports and store, and
// waits until it answers.
func (m *Mailpit) Start() {
	m.t.Helper()
	log, err := os.OpenFile(m.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		m.t.Fatal(err)
	}
	cmd := exec.Command(filepath.Join(BinDir(), MailpitBinary), "--smtp", m.SMTP, "--listen", m.HTTP,
		"--database", filepath.Join(m.dir, "mailpit.db"), "--max", "0", "--ignore-duplicate-ids", "--disable-version-check")
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = diesWithTheTests()
	if err := cmd.Start(); err != nil {
		m.t.Fatalf("start mailpit: %v", err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		log.Close()
		close(exited)
	}()
	m.cmd, m.exited = cmd, exited
	deadline := time.Now().Add(15 * time.Second)
	for {
		res, err := http.Get("http://" + m.HTTP + "/api/v1/info")
		if err == nil {
			res.Body.Close()
			if res.StatusCode == http.StatusOK {
				return
			}
		}
		select {
		case <-exited:
			m.t.Fatalf("mailpit exited while starting; see %s", m.logPath)
		default:
		}
		if time.Now().After(deadline) {
			m.t.Fatalf("mailpit not answering at %s after 15s: %v", m.HTTP, err)
		}
		time.Sleep(20 * time.Millisecond) // polling the port, with a deadline
	}
}

// Stop stops the server (SIGTERM, then SIGKILL after 10 s).
func (m *Mailpit) Stop() {
	if m.cmd == nil {
		return
	}
	select {
	case <-m.exited:
		return
	default:
	}
	_ = m.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-m.exited:
	case <-time.After(10 * time.Second):
		_ = m.cmd.Process.Kill()
		<-m.exited
	}
}

// Kill ends the server with SIGKILL, as a lost machine would; Start
// starts it again on its ports and store.
func (m *Mailpit) Kill() {
	_ = m.cmd.Process.Kill()
	<-m.exited
}

// Mail is a mail as the server delivered it.
type Mail struct {
	ID        string `json:"ID"`
	MessageID string `json:"MessageID"`
	To        []struct {
		Address string `json:"Address"`
	} `json:"To"`
	Subject string    `json:"Subject"`
	Created time.Time `json:"Created"`
	// Text is the body (Message only).
	Text string `json:"Text"`
}

// Messages is every mail the server delivered, newest first.
func (m *Mailpit) Messages(ctx context.Context) ([]Mail, error) {
	var out []Mail
	for start := 0; ; {
		var page struct {
			Total    int    `json:"total"`
			Messages []Mail `json:"messages"`
		}
		if err := m.get(ctx, fmt.Sprintf("/api/v1/messages?start=%d&limit=500", start), &page); err != nil {
			return nil, err
		}
		out = append(out, page.Messages...)
		start += len(page.Messages)
		if len(page.Messages) == 0 || start >= page.Total {
			return out, nil
		}
	}
}

// Message is one mail with its body.
func (m *Mailpit) Message(ctx context.Context, id string) (Mail, error) {
	var out Mail
	err := m.get(ctx, "/api/v1/message/"+url.PathEscape(id), &out)
	return out, err
}

// WaitMessages waits until the server has delivered at least n mails,
// and answers them; it fails the test after within.
func (m *Mailpit) WaitMessages(n int, within time.Duration) []Mail {
	m.t.Helper()
	var got []Mail
	var err error
	if !Poll(within, 50*time.Millisecond, func() bool {
		got, err = m.Messages(context.Background())
		return err == nil && len(got) >= n
	}) {
		m.t.Fatalf("mailpit delivered %d mails within %s, want %d (%v)", len(got), within, n, err)
	}
	return got
}

func (m *Mailpit) get(ctx context.Context, path string, out any) error {
	req, err := http.NewRequestWithContext(ctx, "GET", "http://"+m.HTTP+path, nil)
	if err != nil {
		return err
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", path, res.Status)
	}
	return json.NewDecoder(res.Body).Decode(out)
}

// Env is the storage environment sending notices to this server.
func (m *Mailpit) Env() []string {
	return []string{"NOTICE_SMTP_ADDR=" + m.SMTP, "NOTICE_FROM=library@checkoutlock.test"}
}
