//go:build unix

package app

import "syscall"

// stopSelf stops the process until it is sent SIGCONT.
func stopSelf() { _ = syscall.Kill(syscall.Getpid(), syscall.SIGSTOP) }
