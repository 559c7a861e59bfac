package plugin

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestRunCommand(t *testing.T) {
	sh := "/bin/sh"
	res, err := RunCommand(context.Background(), Command{
		Tool: "t", Path: sh, Args: []string{"-c", `echo out; echo err >&2; cat; exit 3`},
		Dir: t.TempDir(), Stdin: []byte("in\n"),
	})
	if err != nil || res.Output != "out\nin\n" || res.Stderr != "err\n" || res.ExitCode != 3 {
		t.Errorf("got %+v, %v", res, err)
	}

	// The environment is exactly what was given.
	t.Setenv("SECRET_API_KEY", "sk-123")
	res, _ = RunCommand(context.Background(), Command{Tool: "t", Path: sh, Args: []string{"-c", "env"}, Env: []string{"A=1"}})
	if strings.Contains(res.Output, "sk-123") || !strings.Contains(res.Output, "A=1") {
		t.Errorf("env leaked or missing:\n%s", res.Output)
	}
	res, _ = RunCommand(context.Background(), Command{Tool: "t", Path: sh, Args: []string{"-c", "env"}})
	if strings.Contains(res.Output, "sk-123") {
		t.Errorf("nil Env inherited the gateway's environment:\n%s", res.Output)
	}

	// Output past the limit is cut and said so.
	res, err = RunCommand(context.Background(), Command{Tool: "t", Path: sh, Args: []string{"-c", "head -c 5000 /dev/zero"}, OutputLimit: 1000})
	if err != nil || len(res.Output) != 1000 || res.OutputBytes != 5000 || !strings.Contains(res.Stderr, "cut to 1000 of 5000 bytes") {
		t.Errorf("limit: len %d, bytes %d, stderr %q, %v", len(res.Output), res.OutputBytes, res.Stderr, err)
	}

	res, err = RunCommand(context.Background(), Command{Tool: "t", Path: "/nonexistent/prog"})
	if err == nil || res.ExitCode != ExitNotFound {
		t.Errorf("missing program: %+v, %v", res, err)
	}
}

func TestRunCommandTimeoutKillsGroup(t *testing.T) {
	dir := t.TempDir()
	pidFile := filepath.Join(dir, "pid")
	start := time.Now()
	// A background grandchild that holds stdout open and outlives its parent.
	res, err := RunCommand(context.Background(), Command{
		Tool: "slow", Path: "/bin/sh",
		Args:    []string{"-c", `sleep 30 & echo $! > ` + pidFile + `; echo started; wait`},
		Timeout: 300 * time.Millisecond,
	})
	if err == nil || err.Error() != "tool 'slow' timed out after 0.3s" || res.ExitCode != ExitTimeout {
		t.Fatalf("got %+v, %v", res, err)
	}
	if !strings.Contains(res.Output, "started") {
		t.Errorf("partial output lost: %q", res.Output)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("took %v", d)
	}
	data, _ := os.ReadFile(pidFile)
	pid, _ := strconv.Atoi(strings.TrimSpace(string(data)))
	if pid == 0 {
		t.Fatal("no pid")
	}
	deadline := time.Now().Add(3 * time.Second)
	for alive(pid) {
		if time.Now().After(deadline) {
			t.Fatalf("grandchild %d still alive", pid)
		}
		time.Sleep(20 * time.Millisecond)
	}

	ctx, cancel := context.WithCancel(context.Background())
	go func() { time.Sleep(100 * time.Millisecond); cancel() }()
	res, err = RunCommand(ctx, Command{Tool: "t", Path: "/bin/sh", Args: []string{"-c", "sleep 30"}})
	if err == nil || !strings.Contains(err.Error(), "cancelled") || res.ExitCode != ExitCancelled {
		t.Errorf("cancel: %+v, %v", res, err)
	}
}

func TestSeconds(t *testing.T) {
	for d, want := range map[time.Duration]string{5 * time.Second: "5s", 1500 * time.Millisecond: "1.5s", 120 * time.Second: "120s"} {
		if got := Seconds(d); got != want {
			t.Errorf("Seconds(%v) = %q, want %q", d, got, want)
		}
	}
}

func TestHostEnvPath(t *testing.T) {
	t.Setenv("PATH", "/usr/bin::.:bin:/bin")
	t.Setenv("OPENAI_API_KEY", "x")
	env := HostEnv("PATH", "OPENAI_UNSET_VAR")
	if len(env) != 1 || env[0] != "PATH=/usr/bin:/bin" {
		t.Errorf("HostEnv = %q", env)
	}
}

// alive reports whether pid runs (a zombie waiting for its reaper does not).
func alive(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return false
	}
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true
	}
	s := string(stat)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] != 'Z'
}
