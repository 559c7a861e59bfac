//go:build linux

package jail

import (
	"os"
	"os/exec"
	"syscall"
)

// setNamespaces makes cmd start in new mount, network, IPC, UTS and PID
// namespaces, and in a user namespace mapping euid to root in it when the
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
		// The gateway's uid is root inside: a process whose uid is not 0
		// loses its capabilities at execve, and the jail init needs them
		// (in its own user namespace only) to build the mounts. It drops
		// them all before the plugin's program runs.
		attr.UidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: euid, Size: 1}}
		attr.GidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: egid, Size: 1}}
		attr.GidMappingsEnableSetgroups = false
	}
	cmd.SysProcAttr = attr
	return nil
}
