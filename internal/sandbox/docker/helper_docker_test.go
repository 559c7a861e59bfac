package docker_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/moby/moby/client"

	"github.com/beige-dev/beige/internal/sandbox"
	"github.com/beige-dev/beige/internal/sandbox/docker"
	"github.com/beige-dev/beige/internal/sandbox/docker/dockertest"
)

// agentUser is the non-root user these tests run agent code as; they set
// it explicitly, whatever the container's own user.
const agentUser = "1000:1000"

// newAgentSandbox starts a sandbox (through the helper) whose agent code
// runs as agentUser, with a workspace that belongs to that user.
func newAgentSandbox(t *testing.T, name string, edit func(*sandbox.Spec)) (sandbox.Sandbox, sandbox.Spec) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to give the workspace to the agent user")
	}
	rt := dockertest.NewRuntime(t, docker.Options{})
	spec := dockertest.NewSpec(t, name)
	spec.User = agentUser
	if edit != nil {
		edit(&spec)
	}
	if err := os.MkdirAll(spec.Workspace, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(spec.Workspace, 1000, 1000); err != nil {
		t.Fatal(err)
	}
	sb := ensure(t, rt, spec)
	if !sb.(usesHelper).UsesHelper(context.Background()) {
		t.Fatal("not on the helper")
	}
	return sb, spec
}

// rootExec runs cmd in the agent's container as root, through the engine
// (not through the helper), and waits for it to end.
func rootExec(t *testing.T, spec sandbox.Spec, cmd ...string) {
	t.Helper()
	if err := tryRootExec(t, spec, cmd...); err != nil {
		t.Fatal(err)
	}
}

func tryRootExec(t *testing.T, spec sandbox.Spec, cmd ...string) error {
	c := dockertest.RequireDocker(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ex, err := c.ExecCreate(ctx, docker.ContainerName(spec.Agent), client.ExecCreateOptions{User: "0:0", Cmd: cmd})
	if err != nil {
		return fmt.Errorf("exec %q: %w", cmd, err)
	}
	if _, err := c.ExecStart(ctx, ex.ID, client.ExecStartOptions{Detach: true}); err != nil {
		return fmt.Errorf("exec %q: %w", cmd, err)
	}
	for ctx.Err() == nil {
		ins, err := c.ExecInspect(ctx, ex.ID, client.ExecInspectOptions{})
		if err != nil {
			return fmt.Errorf("exec %q: %w", cmd, err)
		}
		if !ins.Running {
			if ins.ExitCode != 0 {
				return fmt.Errorf("exec %q exited %d", cmd, ins.ExitCode)
			}
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("exec %q did not end", cmd)
}

// TestHelperOutOfAgentsReach (security issue #10, finding 4): agent code
// cannot open the helper's stdin or stdout through /proc, read its memory
// or environment, stop it or trace it, and a concurrent call's result stays
// intact while it tries.
func TestHelperOutOfAgentsReach(t *testing.T) {
	sb, spec := newAgentSandbox(t, "reach", nil)
	if got := sh(t, sb, "id -u; id -G"); got != "1000\n1000\n" {
		t.Fatalf("agent code runs as %q, want uid 1000 with no other groups", got)
	}
	var wg sync.WaitGroup
	var victim sandbox.ExecResult
	var victimErr error
	wg.Add(1)
	go func() {
		defer wg.Done()
		victim, victimErr = sb.Exec(context.Background(), sandbox.ExecRequest{Command: "sleep 1; echo tests failed; exit 3", Timeout: 30 * time.Second})
	}()
	// Each attempt prints OPEN (or KILLED) when it got through.
	attack := `h=$PPID
frame='\000\000\000\042\000\000\000\000{"id":1,"exitCode":0,"outputBytes":0}'
(exec 3>/proc/$h/fd/1 && echo OPEN fd1 && printf "$frame" >&3) 2>/dev/null
(exec 3</proc/$h/fd/0 && echo OPEN fd0) 2>/dev/null
(exec 3</proc/$h/mem && echo OPEN mem) 2>/dev/null
(cat /proc/$h/environ >/dev/null && echo OPEN environ) 2>/dev/null
(ls /proc/$h/fd >/dev/null && echo OPEN fd) 2>/dev/null
kill -STOP $h 2>/dev/null && echo KILLED stop && kill -CONT $h
kill -0 $h 2>/dev/null && echo KILLED signal
echo done`
	res := run(t, sb, sandbox.ExecRequest{Command: attack, Timeout: 20 * time.Second})
	if got := string(res.Output); got != "done\n" {
		t.Errorf("agent code reached the helper:\n%s", got)
	}
	wg.Wait()
	if victimErr != nil || victim.ExitCode != 3 || string(victim.Output) != "tests failed\n" {
		t.Errorf("concurrent call = %+v, %v; want its own exit 3 and output", victim, victimErr)
	}
	// The helper's own groups (root's) do not open files for the agent: a
	// root:root 0640 file is as closed to the read tool as to agent code.
	rootFile := filepath.Join(spec.Workspace, "root-group.txt")
	if err := os.WriteFile(rootFile, []byte("root's group only"), 0o640); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(rootFile, 0, 0); err != nil {
		t.Fatal(err)
	}
	if data, _, err := sb.ReadFile(context.Background(), "root-group.txt", 100); err == nil {
		t.Errorf("the read tool opened a root:root 0640 file the agent cannot read: %q", data)
	}
	// Files the helper writes belong to the agent.
	if err := sb.WriteFile(context.Background(), "made/by/helper.txt", []byte("x")); err != nil {
		t.Fatal(err)
	}
	if got := sh(t, sb, "stat -c %u:%g made made/by/helper.txt"); got != "1000:1000\n1000:1000\n" {
		t.Errorf("owners %q, want the agent's", got)
	}
	// Nor can the read tool open the helper's own /proc files (which a
	// process may always open): its request stream, its environment.
	for _, p := range []string{"/proc/1/environ", "/proc/self/fd/0", "/proc/self/environ", "/proc/self/mem"} {
		if data, _, err := sb.ReadFile(context.Background(), p, 100); err == nil {
			t.Errorf("read %s for the agent: %q", p, data)
		}
	}
	if err := sb.WriteFile(context.Background(), "/proc/self/fd/1", []byte("\x00\x00\x00\x02\x00\x00\x00\x00{}")); err == nil {
		t.Error("wrote into the helper's response stream")
	}
	if got := sh(t, sb, "echo still"); got != "still\n" {
		t.Errorf("after the attempts: %q", got)
	}
}

// TestStoppedHelperReplaced (#10 finding 9, #13 finding 8): a stopped
// helper does not hold a call past its own deadline (timeout plus a small
// grace), and is replaced: the next call runs on a new helper and the old
// one is gone.
func TestStoppedHelperReplaced(t *testing.T) {
	sb, spec := newAgentSandbox(t, "stopped", nil)
	old := strings.TrimSpace(sh(t, sb, "echo $PPID"))
	rootExec(t, spec, "kill", "-STOP", old)

	start := time.Now()
	_, err := sb.Exec(context.Background(), sandbox.ExecRequest{Command: "echo hi", Timeout: 3 * time.Second})
	took := time.Since(start)
	if err == nil || took > 8*time.Second {
		t.Errorf("exec with timeout 3s on a stopped helper: err %v after %v; want an error within the call's deadline", err, took)
	}
	t.Logf("failed after %v: %v", took, err)

	start = time.Now()
	now := strings.TrimSpace(sh(t, sb, "echo $PPID"))
	if d := time.Since(start); d > 15*time.Second {
		t.Errorf("next call took %v", d)
	}
	if now == old {
		t.Errorf("still on the stopped helper %s", old)
	}
	if !sb.(usesHelper).UsesHelper(context.Background()) {
		t.Error("not on a helper after the replacement")
	}
	var alive string
	for range 50 {
		alive = sh(t, sb, fmt.Sprintf("[ -e /proc/%s ] && cat /proc/%s/stat || true", old, old))
		if alive == "" {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if alive != "" {
		t.Errorf("the stopped helper %s is still there: %s", old, alive)
	}
}

// TestTimeoutKillsForkBomb (#10 finding 9): when an exec times out, every
// process it started dies, fork bombs and processes that left its session
// included.
func TestTimeoutKillsForkBomb(t *testing.T) {
	sb, _ := newAgentSandbox(t, "bomb", func(s *sandbox.Spec) { s.PidsLimit = 256 })
	tests := []struct{ name, command string }{
		// exec sleep: the call's own sh must not die of a failed fork
		// (the pids limit) and end the call before its timeout.
		{"fork bomb", "b() { b | b & }; b & exec sleep 600"},
		{"setsid", "for i in $(seq 40); do setsid sh -c 'sleep 600' & done; exec sleep 600"},
		// A tree of processes each in a session of its own (depth 5, 63 of
		// them: under the pids limit, so no parent dies of a failed fork).
		{"setsid tree", "printf '[ $1 -lt 5 ] && { setsid sh ./tree $(($1+1)) & setsid sh ./tree $(($1+1)) & }; exec sleep 600\\n' > tree; sh ./tree 0 & exec sleep 600"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			start := time.Now()
			res, err := sb.Exec(context.Background(), sandbox.ExecRequest{Command: tt.command, Timeout: 2 * time.Second})
			if err != nil || !res.TimedOut {
				t.Fatalf("got %+v, %v; want a timeout", res, err)
			}
			if d := time.Since(start); d > 6*time.Second {
				t.Errorf("took %v", d)
			}
			var ps string
			for range 20 {
				ps = sh(t, sb, "ps -o user,pid,stat,args | grep -v -e 'ps -o' -e grep -e 'sh -c' | grep -c '^1000' || true")
				if ps == "0\n" {
					return
				}
				time.Sleep(100 * time.Millisecond)
			}
			t.Errorf("%s agent processes left after the timeout:\n%s", strings.TrimSpace(ps), sh(t, sb, "ps -o user,pid,ppid,stat,args | head -20"))
		})
	}
}

// TestHelperDeadlineFailsClearly: the error of a call whose helper missed
// its deadline says so.
func TestHelperDeadlineFailsClearly(t *testing.T) {
	sb, spec := newAgentSandbox(t, "deadline", nil)
	old := strings.TrimSpace(sh(t, sb, "echo $PPID"))
	rootExec(t, spec, "kill", "-STOP", old)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err := sb.Exec(ctx, sandbox.ExecRequest{Command: "true", Timeout: time.Second})
	if err == nil || !strings.Contains(err.Error(), "did not answer") || errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("err = %v", err)
	}
}
