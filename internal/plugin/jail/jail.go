// Package jail owns the confinement of plugin host processes in their own
// Linux namespaces (mount, network, IPC, UTS, PID, and a user namespace when
// the gateway is not root), so that the gateway's loopback API, Unix sockets
// and files do not exist for a plugin host.
//
// This is the first increment (issue #14 item 3): the namespace set and a
// probe of whether the kernel grants it. The re-exec'd init that builds the
// new root, brings up lo and runs the egress forwarder is not written yet.
package jail

import (
	"fmt"
	"os"
	"os/exec"
)

// Probe reports whether the kernel lets this process create the namespaces a
// plugin host runs in, by starting `true` in them. The error says why not.
func Probe() error {
	path, err := exec.LookPath("true")
	if err != nil {
		return fmt.Errorf("probe plugin jail: find true: %w", err)
	}
	cmd := exec.Command(path)
	cmd.Env = []string{}
	if err := setNamespaces(cmd, os.Geteuid()); err != nil {
		return fmt.Errorf("probe plugin jail: %w", err)
	}
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("probe plugin jail: start in new namespaces: %w", err)
	}
	return nil
}
