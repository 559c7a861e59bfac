package nodehost

import (
	"errors"
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
