package config

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
	"time"
)

// TestLogOptionsWriteDurationsAsDurations: "1.5ms", not 1500000.
func TestLogOptionsWriteDurationsAsDurations(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	slog.New(slog.NewJSONHandler(&buf, LogOptions(slog.LevelInfo))).Info("x", slog.Duration("d", 1500*time.Microsecond),
		slog.Group("g", slog.Duration("timeout", 30*time.Second)))
	if got := buf.String(); !strings.Contains(got, `"d":"1.5ms"`) || !strings.Contains(got, `"timeout":"30s"`) {
		t.Errorf("log line %s", got)
	}
}
