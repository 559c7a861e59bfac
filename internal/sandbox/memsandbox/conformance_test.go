package memsandbox_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/client"

	"github.com/beige-dev/beige/internal/sandbox"
	"github.com/beige-dev/beige/internal/sandbox/docker"
	"github.com/beige-dev/beige/internal/sandbox/docker/dockertest"
	"github.com/beige-dev/beige/internal/sandbox/memsandbox"
)

// target is one runtime under the conformance suite.
type target struct {
	rt     sandbox.Runtime
	spec   sandbox.Spec
	kill   func(t *testing.T, agent string) // as `docker kill` behind the runtime's back
	remove func(t *testing.T, agent string) // as `docker rm -f`
}

// TestConformance runs the same suite against memsandbox and, when an
// engine answers, Docker: what the gateway and the tools rely on of a
// sandbox must hold for the fake as for the real thing.
func TestConformance(t *testing.T) {
	t.Run("mem", func(t *testing.T) {
		rt := memsandbox.New(memsandbox.Options{})
		conformance(t, target{
			rt:   rt,
			spec: sandbox.Spec{Agent: "conf-mem", Image: "mem", Workspace: t.TempDir()},
			kill: func(t *testing.T, agent string) {
				if err := rt.Kill(agent); err != nil {
					t.Fatal(err)
				}
			},
			remove: func(t *testing.T, agent string) {
				if err := rt.Remove(agent); err != nil {
					t.Fatal(err)
				}
			},
		})
	})
	t.Run("docker", func(t *testing.T) {
		spec := dockertest.NewSpec(t, "conf") // skips without an engine
		c := dockertest.RequireDocker(t)
		conformance(t, target{
			rt:   dockertest.NewRuntime(t, docker.Options{}),
			spec: spec,
			kill: func(t *testing.T, agent string) {
				ctx := context.Background()
				name := docker.ContainerName(agent)
				if _, err := c.ContainerKill(ctx, name, client.ContainerKillOptions{}); err != nil {
					t.Fatal(err)
				}
				for range 250 { // until the engine has acted on it
					info, err := c.ContainerInspect(ctx, name, client.ContainerInspectOptions{})
					if err != nil || !info.Container.State.Running {
						return
					}
					time.Sleep(20 * time.Millisecond)
				}
			},
			remove: func(t *testing.T, agent string) {
				_, err := c.ContainerRemove(context.Background(), docker.ContainerName(agent), client.ContainerRemoveOptions{Force: true})
				if err != nil {
					t.Fatal(err)
				}
			},
		})
	})
}

func conformance(t *testing.T, tg target) {
	ctx := context.Background()
	spec := tg.spec
	spec.Env = map[string]string{"CONF_VAR": "spec"}
	ensure := func(spec sandbox.Spec) sandbox.Sandbox {
		t.Helper()
		sb, err := tg.rt.Ensure(ctx, spec)
		if err != nil {
			t.Fatalf("Ensure: %v", err)
		}
		if sb.ID() == "" {
			t.Fatal("Ensure: a sandbox without an ID")
		}
		return sb
	}
	sb := ensure(spec)
	if again := ensure(spec); again.ID() != sb.ID() {
		t.Errorf("Ensure of the same spec: ID %s, then %s", sb.ID(), again.ID())
	}
	run := func(sb sandbox.Sandbox, req sandbox.ExecRequest) sandbox.ExecResult {
		t.Helper()
		res, err := sb.Exec(ctx, req)
		if err != nil {
			t.Fatalf("exec %q: %v", req.Command, err)
		}
		return res
	}

	t.Run("files", func(t *testing.T) {
		if err := sb.WriteFile(ctx, "d/e/f.txt", []byte("hello")); err != nil {
			t.Fatalf("WriteFile with missing parents: %v", err)
		}
		for _, c := range []struct {
			path string
			max  int64
			data string
		}{
			{"/workspace/d/e/f.txt", 100, "hello"},
			{"d/e/f.txt", 2, "he"},
			{"d/../d/e/f.txt", 0, ""},
		} {
			data, size, err := sb.ReadFile(ctx, c.path, c.max)
			if err != nil || string(data) != c.data || size != 5 {
				t.Errorf("ReadFile(%q, %d) = %q, %d, %v; want %q, 5", c.path, c.max, data, size, err, c.data)
			}
		}
		for _, c := range []struct {
			path string
			want error
		}{
			{"nope.txt", sandbox.ErrNotExist},
			{"/workspace/nope/x", sandbox.ErrNotExist},
			{"d/e/f.txt/x", sandbox.ErrNotExist},
			{"d", sandbox.ErrIsDir},
			{"/workspace", sandbox.ErrIsDir},
		} {
			if _, _, err := sb.ReadFile(ctx, c.path, 10); !errors.Is(err, c.want) {
				t.Errorf("ReadFile(%q): %v, want %v", c.path, err, c.want)
			}
		}
		if err := sb.WriteFile(ctx, "d", []byte("x")); !errors.Is(err, sandbox.ErrIsDir) {
			t.Errorf("WriteFile onto a folder: %v, want ErrIsDir", err)
		}
		for _, p := range []string{"d/e/f.txt/x", "/beige/planted"} {
			if err := sb.WriteFile(ctx, p, []byte("x")); err == nil {
				t.Errorf("WriteFile(%q) worked", p)
			}
		}
		if err := sb.WriteFile(ctx, "d/e/f.txt", []byte("hello again")); err != nil {
			t.Fatal(err)
		}
		if data, size, err := sb.ReadFile(ctx, "d/e/f.txt", 100); err != nil || string(data) != "hello again" || size != 11 {
			t.Errorf("after a rewrite: %q %d %v", data, size, err)
		}
		if err := sb.WriteFile(ctx, "d/e/f.txt", []byte("hello")); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("exec", func(t *testing.T) {
		for _, c := range []struct {
			req  sandbox.ExecRequest
			out  string
			code int
		}{
			{sandbox.ExecRequest{Command: "echo hi"}, "hi\n", 0},
			{sandbox.ExecRequest{Command: "exit 3"}, "", 3},
			{sandbox.ExecRequest{Command: "false || echo alt && echo and"}, "alt\nand\n", 0},
			{sandbox.ExecRequest{Command: "pwd"}, "/workspace\n", 0},
			{sandbox.ExecRequest{Command: "cat f.txt", Dir: "d/e"}, "hello", 0},
			{sandbox.ExecRequest{Command: "pwd", Dir: "/workspace/d"}, "/workspace/d\n", 0},
			{sandbox.ExecRequest{Command: `echo "$FOO"`, Env: map[string]string{"FOO": "bar  baz"}}, "bar  baz\n", 0},
			{sandbox.ExecRequest{Command: "echo $CONF_VAR $HOME $PATH"}, "spec /home/beige " + sandbox.DefaultPATH + "\n", 0},
			{sandbox.ExecRequest{Command: "cat", Stdin: []byte("from stdin")}, "from stdin", 0},
			{sandbox.ExecRequest{Command: "echo one; cat /workspace/none; echo two"}, "one\ncat: can't open '/workspace/none': No such file or directory\ntwo\n", 0},
			{sandbox.ExecRequest{Command: "echo made > made.txt; cat made.txt"}, "made\n", 0},
			{sandbox.ExecRequest{Command: "cat /workspace/none 2>/dev/null; echo $?"}, "1\n", 0},
			{sandbox.ExecRequest{Command: "printf 'a\\tb\\101\\n'"}, "a\tbA\n", 0},
			{sandbox.ExecRequest{Command: "memsandbox-no-such-command"}, "", 127},
		} {
			res := run(sb, c.req)
			if res.ExitCode != c.code || c.out != "" && string(res.Output) != c.out || res.TimedOut || res.Truncated() {
				t.Errorf("%q in %q: exit %d, output %q (timed out %v, truncated %v); want %d, %q",
					c.req.Command, c.req.Dir, res.ExitCode, res.Output, res.TimedOut, res.Truncated(), c.code, c.out)
			}
		}
		if data, _, err := sb.ReadFile(ctx, "made.txt", 100); err != nil || string(data) != "made\n" {
			t.Errorf("a file a command made: %q %v", data, err)
		}
		res := run(sb, sandbox.ExecRequest{Command: "echo 0123456789", OutputLimit: 4})
		if string(res.Output) != "0123" || res.OutputBytes != 11 || !res.Truncated() {
			t.Errorf("output limit 4: %q of %d bytes", res.Output, res.OutputBytes)
		}
		start := time.Now()
		res = run(sb, sandbox.ExecRequest{Command: "sleep 30", Timeout: 300 * time.Millisecond})
		if d := time.Since(start); !res.TimedOut || res.ExitCode == 0 || d > 5*time.Second {
			t.Errorf("sleep 30 with a 300 ms timeout: timed out %v, exit %d, after %v", res.TimedOut, res.ExitCode, d)
		}
		cctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
		_, err := sb.Exec(cctx, sandbox.ExecRequest{Command: "sleep 30"})
		cancel()
		if err == nil {
			t.Error("a command whose caller gave up: no error")
		}
		if _, err := sb.Exec(ctx, sandbox.ExecRequest{Command: "true", Env: map[string]string{"A=B": "x"}}); err == nil {
			t.Error("an env name with '=' was accepted")
		}
	})

	t.Run("freeze", func(t *testing.T) {
		f, ok := sb.(sandbox.Freezer)
		if !ok {
			t.Fatal("the sandbox is no Freezer")
		}
		thaw1, err := f.Freeze(ctx)
		if err != nil {
			t.Fatal(err)
		}
		thaw2, err := f.Freeze(ctx)
		if err != nil {
			t.Fatal(err)
		}
		thaw1()
		thaw1() // a thaw counts once
		thaw2()
		if res := run(sb, sandbox.ExecRequest{Command: "echo thawed"}); string(res.Output) != "thawed\n" {
			t.Errorf("after the thaws: %q", res.Output)
		}
	})

	t.Run("kill", func(t *testing.T) {
		if err := sb.WriteFile(ctx, "/tmp/t.txt", []byte("tmp")); err != nil {
			t.Fatal(err)
		}
		tg.kill(t, spec.Agent)
		if _, err := sb.Exec(ctx, sandbox.ExecRequest{Command: "echo up"}); !errors.Is(err, sandbox.ErrNotRunning) {
			t.Errorf("exec in a killed sandbox: %v, want ErrNotRunning", err)
		}
		if _, _, err := sb.ReadFile(ctx, "d/e/f.txt", 10); !errors.Is(err, sandbox.ErrNotRunning) {
			t.Errorf("read in a killed sandbox: %v, want ErrNotRunning", err)
		}
		sb = ensure(spec)
		if res := run(sb, sandbox.ExecRequest{Command: "cat d/e/f.txt"}); string(res.Output) != "hello" {
			t.Errorf("the workspace after a restart: %q", res.Output)
		}
		if _, _, err := sb.ReadFile(ctx, "/tmp/t.txt", 10); !errors.Is(err, sandbox.ErrNotExist) {
			t.Errorf("/tmp (a tmpfs) after a restart: %v, want ErrNotExist", err)
		}
	})

	t.Run("remove", func(t *testing.T) {
		tg.remove(t, spec.Agent)
		if _, err := sb.Exec(ctx, sandbox.ExecRequest{Command: "true"}); !errors.Is(err, sandbox.ErrNotRunning) {
			t.Errorf("exec in a removed sandbox: %v, want ErrNotRunning", err)
		}
		nsb := ensure(spec)
		if nsb.ID() == sb.ID() {
			t.Errorf("a removed sandbox came back with its ID %s", sb.ID())
		}
		if res := run(nsb, sandbox.ExecRequest{Command: "cat d/e/f.txt"}); string(res.Output) != "hello" {
			t.Errorf("the workspace after a removal: %q", res.Output)
		}
		sb = nsb
	})

	t.Run("recreate", func(t *testing.T) {
		changed := spec
		changed.Env = map[string]string{"CONF_VAR": "changed"}
		nsb := ensure(changed)
		if nsb.ID() == sb.ID() {
			t.Errorf("another spec, the same sandbox %s", sb.ID())
		}
		if _, err := sb.Exec(ctx, sandbox.ExecRequest{Command: "true"}); !errors.Is(err, sandbox.ErrNotRunning) {
			t.Errorf("exec in the replaced sandbox: %v, want ErrNotRunning", err)
		}
		if res := run(nsb, sandbox.ExecRequest{Command: "echo $CONF_VAR; cat d/e/f.txt"}); string(res.Output) != "changed\nhello" {
			t.Errorf("the new sandbox: %q (want its env and the workspace)", res.Output)
		}
		sb = nsb
	})

	t.Run("prune", func(t *testing.T) {
		removed, err := tg.rt.Prune(ctx, []string{"someone-else"})
		if err != nil || !slices.Contains(removed, spec.Agent) {
			t.Fatalf("Prune: %v %v, want %s removed", removed, err, spec.Agent)
		}
		if _, err := sb.Exec(ctx, sandbox.ExecRequest{Command: "true"}); !errors.Is(err, sandbox.ErrNotRunning) {
			t.Errorf("exec in a pruned sandbox: %v, want ErrNotRunning", err)
		}
		if removed, err := tg.rt.Prune(ctx, nil); err != nil || slices.Contains(removed, spec.Agent) {
			t.Errorf("Prune again: %v %v", removed, err)
		}
	})

	t.Run("invalid spec", func(t *testing.T) {
		bad := spec
		bad.Agent = "../escape"
		if _, err := tg.rt.Ensure(ctx, bad); err == nil || !strings.Contains(err.Error(), "invalid agent name") {
			t.Errorf("Ensure of agent %q: %v", bad.Agent, err)
		}
	})
}
