//go:build !unix

package app

// stopSelf does nothing where there is no SIGSTOP.
func stopSelf() {}
