package docker_test

import (
	"context"
	"github.com/beige-dev/beige/internal/sandbox"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/beige-dev/beige/internal/sandbox/docker"
	"github.com/beige-dev/beige/internal/sandbox/docker/dockertest"
)

// TestHelperRestartCounted: a helper killed behind the gateway's back is
// started again by the next call, and that restart is counted once (the
// first start is not a restart).
func TestHelperRestartCounted(t *testing.T) {
	var restarts, fallbacks atomic.Int64
	rt := dockertest.NewRuntime(t, docker.Options{
		OnHelperRestart: func(string) { restarts.Add(1) },
		OnExecFallback:  func(string) { fallbacks.Add(1) },
	})
	spec := dockertest.NewSpec(t, "mrestart")
	sb := ensure(t, rt, spec)
	pid := strings.TrimSpace(sh(t, sb, "echo $PPID"))
	if n := restarts.Load(); n != 0 {
		t.Fatalf("%d restarts counted before any", n)
	}
	if err := tryRootExec(t, spec, "kill", "-KILL", pid); err != nil {
		t.Fatal(err)
	}
	// A call that reaches the helper before its death is noticed fails
	// (a command that may have started is not run twice); the next one is
	// on a new helper.
	var after string
	for range 3 {
		res, err := sb.Exec(context.Background(), sandbox.ExecRequest{Command: "echo $PPID"})
		if err == nil {
			after = strings.TrimSpace(string(res.Output))
			break
		}
		t.Logf("exec right after the helper was killed: %v", err)
	}
	if after == "" || after == pid {
		t.Fatalf("helper pid %q after the kill (before %s)", after, pid)
	}
	if n := restarts.Load(); n != 1 {
		t.Errorf("%d restarts counted, want 1", n)
	}
	if n := fallbacks.Load(); n != 0 {
		t.Errorf("%d fallbacks counted with a working helper, want 0", n)
	}
}

// TestExecFallbackCounted: every call made by docker exec because the
// helper does not serve is counted; a sandbox that never uses the helper
// counts none.
func TestExecFallbackCounted(t *testing.T) {
	var fallbacks atomic.Int64
	rt := dockertest.NewRuntime(t, docker.Options{OnExecFallback: func(string) { fallbacks.Add(1) }})
	spec := dockertest.NewSpec(t, "mfallback")
	spec.HelperBinary = filepath.Join(t.TempDir(), "beige-sandbox")
	script := "#!/bin/sh\n[ \"$1\" = idle ] && exec sh -c 'trap \"exit 0\" TERM; while :; do sleep 1000 & wait $!; done'\necho broken helper >&2\nexit 1\n"
	if err := os.WriteFile(spec.HelperBinary, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	sb := ensure(t, rt, spec)
	sh(t, sb, "true")
	if err := sb.WriteFile(context.Background(), "f", []byte("x")); err != nil {
		t.Fatal(err)
	}
	if _, _, err := sb.ReadFile(context.Background(), "f", 10); err != nil {
		t.Fatal(err)
	}
	if n := fallbacks.Load(); n != 3 {
		t.Errorf("%d fallbacks counted, want 3 (exec, write, read)", n)
	}

	var none atomic.Int64
	rt2 := dockertest.NewRuntime(t, docker.Options{DisableHelper: true, OnExecFallback: func(string) { none.Add(1) }})
	sb2 := ensure(t, rt2, dockertest.NewSpec(t, "mnohelper"))
	sh(t, sb2, "true")
	if n := none.Load(); n != 0 {
		t.Errorf("%d fallbacks counted with the helper disabled, want 0", n)
	}
}
