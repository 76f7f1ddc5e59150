package config

import (
	"os"
	"runtime/debug"
	"testing"
)

// TestTuneRuntime: without GOGC the collector's target is GCPercent; with
// GOGC set, the environment's value stays.
func TestTuneRuntime(t *testing.T) {
	before := debug.SetGCPercent(100)
	defer debug.SetGCPercent(before)

	t.Setenv("GOGC", "150") // restores the variable when the test ends
	TuneRuntime()
	if got := debug.SetGCPercent(100); got != 100 {
		t.Errorf("with GOGC set, the target became %d, want it left alone (100)", got)
	}
	os.Unsetenv("GOGC")
	TuneRuntime()
	if got := debug.SetGCPercent(100); got != GCPercent {
		t.Errorf("without GOGC, the target is %d, want %d", got, GCPercent)
	}
}
