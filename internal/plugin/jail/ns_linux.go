//go:build linux

package jail

import (
	"os"
	"os/exec"
	"syscall"
)

// setNamespaces makes cmd start in new mount, network, IPC, UTS and PID
// namespaces, and in a user namespace mapping euid to itself when the
// gateway is not root.
func setNamespaces(cmd *exec.Cmd, euid int) error {
	attr := &syscall.SysProcAttr{
		Cloneflags: syscall.CLONE_NEWNS | syscall.CLONE_NEWNET | syscall.CLONE_NEWIPC |
			syscall.CLONE_NEWUTS | syscall.CLONE_NEWPID,
		Setpgid:   true,
		Pdeathsig: syscall.SIGKILL,
	}
	if euid != 0 {
		egid := os.Getegid()
		attr.Cloneflags |= syscall.CLONE_NEWUSER
		attr.UidMappings = []syscall.SysProcIDMap{{ContainerID: euid, HostID: euid, Size: 1}}
		attr.GidMappings = []syscall.SysProcIDMap{{ContainerID: egid, HostID: egid, Size: 1}}
		attr.GidMappingsEnableSetgroups = false
	}
	cmd.SysProcAttr = attr
	return nil
}
