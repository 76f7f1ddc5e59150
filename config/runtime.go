package config

import (
	"os"
	"runtime/debug"
)

// GCPercent is the services' garbage collection target when the
// environment does not set GOGC: the heap may grow to three times what is
// live before a collection, where Go's default is twice. The services keep
// a few megabytes live and allocate a few kilobytes per request, so at
// Go's default they collect many times a second under load; at 200 they
// spend about half the CPU on it, for a few megabytes more of memory
// (make bench records both).
const GCPercent = 200

// TuneRuntime sets the garbage collector's target to GCPercent unless
// GOGC is set, which then rules as it always does. Call it once, first
// thing in main.
func TuneRuntime() {
	if _, set := os.LookupEnv("GOGC"); !set {
		debug.SetGCPercent(GCPercent)
	}
}
