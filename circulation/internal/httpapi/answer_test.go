package httpapi

import (
	"context"
	"encoding/csv"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"
)

// heldLog holds up the request's log line, written after its answer, until
// release is closed, and says on logging when it began to.
type heldLog struct {
	slog.Handler
	logging chan struct{}
	release chan struct{}
}

func (h heldLog) Handle(ctx context.Context, r slog.Record) error {
	if r.Message == "request" {
		h.logging <- struct{}{}
		<-h.release
	}
	return h.Handler.Handle(ctx, r)
}

func (h heldLog) WithAttrs(attrs []slog.Attr) slog.Handler {
	return heldLog{h.Handler.WithAttrs(attrs), h.logging, h.release}
}

// TestTheAnswerLeavesBeforeTheBookkeeping: a self-check machine has its
// whole answer to a check-out, with its Content-Length, while the
// request's log line is still being written; a refusal's too.
func TestTheAnswerLeavesBeforeTheBookkeeping(t *testing.T) {
	t.Parallel()
	held := heldLog{logging: make(chan struct{}, 1), release: make(chan struct{})}
	a := newAPILogging(t, lockOn, func(h slog.Handler) slog.Handler { held.Handler = h; return held })
	defer close(held.release) // a failing test must not leave a handler held
	client := &http.Client{Timeout: 5 * time.Second}
	for _, c := range []struct {
		body    string
		status  int
		bodyHas string
	}{
		{checkOutBody, http.StatusCreated, `"itemId":"` + itemID + `"`},
		{`{"itemBarcode":""}`, http.StatusUnprocessableEntity, `"errors"`},
	} {
		req, _ := http.NewRequest("POST", a.url+"/circulation/check-out-by-barcode", strings.NewReader(c.body))
		for k, v := range a.jsonHeaders() {
			req.Header.Set(k, v)
		}
		res, err := client.Do(req)
		if err != nil {
			t.Fatalf("%s: %v (the answer waited for the log line)", c.body, err)
		}
		body, err := io.ReadAll(res.Body)
		res.Body.Close()
		if err != nil {
			t.Fatalf("%s: reading the answer: %v", c.body, err)
		}
		if res.StatusCode != c.status || !strings.Contains(string(body), c.bodyHas) {
			t.Errorf("%s: %d %s, want %d with %s", c.body, res.StatusCode, body, c.status, c.bodyHas)
		}
		if res.ContentLength != int64(len(body)) || len(res.TransferEncoding) > 0 {
			t.Errorf("%s: Content-Length %d, transfer encoding %v, for a body of %d bytes", c.body, res.ContentLength,
				res.TransferEncoding, len(body))
		}
		select {
		case <-held.logging:
		case <-time.After(5 * time.Second):
			t.Fatalf("%s: the request was never logged", c.body)
		}
		held.release <- struct{}{}
	}
}

// TestTheCSVExportWritesNoFormula: a cell a spreadsheet would take for a
// formula (a patron named "=HYPERLINK(…)", a barcode "+1", "-2", "@sum", a
// leading tab or carriage return) is written as text, after a single
// quote; every other cell as it is.
func TestTheCSVExportWritesNoFormula(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	writeCSV(&b, [][]string{
		{"=HYPERLINK(\"http://x\",\"Alice\")", "+1", "-2", "@sum(A1)", "\tTab", "\rReturn"},
		{"Alice", "P0001", "", "2026-11-27T10:00:00.000Z", "a=b", "4 - 2"},
	})
	rows, err := csv.NewReader(strings.NewReader(b.String())).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	want := [][]string{
		{"'=HYPERLINK(\"http://x\",\"Alice\")", "'+1", "'-2", "'@sum(A1)", "'\tTab", "'\rReturn"},
		{"Alice", "P0001", "", "2026-11-27T10:00:00.000Z", "a=b", "4 - 2"},
	}
	if !slices.EqualFunc(rows, want, slices.Equal) {
		t.Errorf("the CSV read back: %q, want %q", rows, want)
	}
}
