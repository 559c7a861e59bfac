//go:build linux

package jail

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestNetworkNamespaceHasOnlyLoopback: a command started in the jail's
// namespaces sees no network interface but lo, so the host's LAN and
// loopback listeners are not reachable from it.
func TestNetworkNamespaceHasOnlyLoopback(t *testing.T) {
	if err := Probe(); err != nil {
		t.Skipf("kernel refuses the jail's namespaces here: %v", err)
	}
	cmd := exec.Command("cat", "/proc/self/net/dev")
	if err := setNamespaces(cmd, os.Geteuid()); err != nil {
		t.Fatal(err)
	}
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("cat in jail: %v", err)
	}
	var ifaces []string
	for _, line := range strings.Split(string(out), "\n")[2:] {
		if name, _, ok := strings.Cut(strings.TrimSpace(line), ":"); ok {
			ifaces = append(ifaces, name)
		}
	}
	if len(ifaces) != 1 || ifaces[0] != "lo" {
		t.Fatalf("interfaces in jail = %v, want only lo", ifaces)
	}
}
