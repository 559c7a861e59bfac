package nodehost

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestProblemNoJail: a confined plugin whose host cannot start for want of
// a jail is named by Host.Problems (what /api/health reports), with why.
func TestProblemNoJail(t *testing.T) {
	shortTimeouts(t, 10*time.Second)
	old := jailAvailable
	jailAvailable = func() error { return errors.New("namespaces refused by the kernel") }
	t.Cleanup(func() { jailAvailable = old })
	f := mustFixture(t, map[string][]string{"travel": {"echo"}}, tsPlugin{name: "echo", source: echoPlugin})
	got := f.host.Problems()
	if len(got) != 1 || !strings.Contains(got["echo"], "no plugin jail available") || !strings.Contains(got["echo"], "namespaces refused by the kernel") {
		t.Errorf("problems %q", got)
	}
}

// TestProblemWhileRestarting: a running plugin has no problem; one whose
// host crashed is named while it backs off, and not once it runs again.
func TestProblemWhileRestarting(t *testing.T) {
	shortTimeouts(t, 10*time.Second)
	backoffMin = time.Second
	f := mustFixture(t, map[string][]string{"travel": {"crashy", "echo"}},
		tsPlugin{name: "crashy", source: crashPlugin}, tsPlugin{name: "echo", source: echoPlugin})
	if got := f.host.Problems(); got != nil {
		t.Fatalf("running: problems %q", got)
	}
	f.call("travel", "crashy", "exit")
	got := f.host.Problems()
	if len(got) != 1 || !strings.HasPrefix(got["crashy"], "plugin crashy is restarting: ") || !strings.Contains(got["crashy"], "exit") {
		t.Errorf("crashed: problems %q", got)
	}
	f.log.waitLog(t, "plugin host restarted")
	if got := f.host.Problems(); got != nil {
		t.Errorf("restarted: problems %q", got)
	}
}

// TestNodeInstalledLater: a plugin whose Node.js is missing does not fail
// the Host; Problems names it and its tool says why; once Node.js is
// there, the next retry finds it and the plugin runs.
func TestNodeInstalledLater(t *testing.T) {
	shortTimeouts(t, 10*time.Second)
	real := testNode(t)
	bin := filepath.Join(t.TempDir(), "bin")
	os.MkdirAll(bin, 0o755)
	node := filepath.Join(bin, "node")
	f := mustFixture(t, map[string][]string{"travel": {"echo"}}, tsPlugin{name: "echo", source: echoPlugin, node: node,
		manifest: `{"name":"echo","description":"test plugin","provides":{"tools":["echo"]}}`})
	got := f.host.Problems()
	if !strings.Contains(got["echo"], node) || !strings.Contains(got["echo"], "needs Node.js 22 or later") {
		t.Fatalf("no Node.js: problems %q", got)
	}
	if resp := f.call("travel", "echo", "x"); resp.Success || !strings.Contains(resp.Error, "needs Node.js 22 or later") {
		t.Errorf("no Node.js: tool %+v", resp)
	}
	// Node.js "installed": the same binary, hard-linked (a symlink would
	// lead outside the folder the jail binds).
	if err := os.Link(real, node); err != nil {
		t.Skipf("cannot link %s into the test's folder: %v", real, err)
	}
	deadline := time.Now().Add(15 * time.Second)
	for f.host.Problems() != nil {
		if time.Now().After(deadline) {
			t.Fatalf("Node.js is there and the plugin still does not run: %q\n%s", f.host.Problems(), f.log)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if resp := f.call("travel", "echo", "x"); !resp.Success {
		t.Errorf("after Node.js is installed: %+v\n%s", resp, f.log)
	}
}
