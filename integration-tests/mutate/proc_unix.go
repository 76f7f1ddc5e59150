//go:build unix

package main

import (
	"os/exec"
	"syscall"
)

// ownProcessGroup runs cmd in a process group of its own, killed whole
// when cmd is cancelled: go test's test binaries go with it.
func ownProcessGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
}
