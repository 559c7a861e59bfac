package tui

import (
	"os/exec"
	"strings"
	"testing"
)

// TestGatewayDoesNotImportTheTUI guards the structure: the gateway and its
// HTTP API never depend on the terminal client or its UI libraries.
func TestGatewayDoesNotImportTheTUI(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list")
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command")
	}
	for _, pkg := range []string{"github.com/beige-dev/beige/internal/gateway", "github.com/beige-dev/beige/internal/httpapi"} {
		out, err := exec.Command(goBin, "list", "-deps", pkg).CombinedOutput()
		if err != nil {
			t.Fatalf("go list -deps %s: %v\n%s", pkg, err, out)
		}
		for _, dep := range strings.Fields(string(out)) {
			if strings.HasPrefix(dep, "github.com/beige-dev/beige/internal/tui") ||
				strings.HasPrefix(dep, "github.com/beige-dev/beige/internal/client") ||
				strings.HasPrefix(dep, "charm.land/") {
				t.Errorf("%s depends on %s", pkg, dep)
			}
		}
	}
}
