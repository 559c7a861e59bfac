//go:build unix

package plugin

import (
	"os/exec"
	"syscall"
)

// setProcessGroup makes the command lead its own process group, and makes
// cancellation kill the whole group.
func setProcessGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error {
		return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
}

// killProcessGroup kills what is left of the group after the leader exited.
// The kernel does not reuse a pid while it names a process group, so this
// cannot hit an unrelated process.
func killProcessGroup(cmd *exec.Cmd) {
	if cmd.Process != nil {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
}
