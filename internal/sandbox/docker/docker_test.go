package docker_test

// Integration tests against a real Docker engine; they skip when none
// answers (see dockertest.RequireDocker).

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/client"

	"github.com/beige-dev/beige/internal/sandbox"
	"github.com/beige-dev/beige/internal/sandbox/docker"
	"github.com/beige-dev/beige/internal/sandbox/docker/dockertest"
)

// usesHelper is the optional ability of Docker sandboxes the tests check.
type usesHelper interface {
	UsesHelper(ctx context.Context) bool
}

// paths are the two ways a Docker sandbox runs calls.
var paths = []struct {
	name   string
	helper bool
}{
	{"helper", true},
	{"docker-exec", false},
}

func ensure(t testing.TB, rt sandbox.Runtime, spec sandbox.Spec) sandbox.Sandbox {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	sb, err := rt.Ensure(ctx, spec)
	if err != nil {
		t.Fatalf("Ensure: %v", err)
	}
	return sb
}

// newSandbox starts a sandbox using the helper or per-call docker exec.
func newSandbox(t *testing.T, name string, helper bool) (sandbox.Sandbox, sandbox.Spec) {
	t.Helper()
	rt := dockertest.NewRuntime(t, docker.Options{DisableHelper: !helper})
	spec := dockertest.NewSpec(t, name)
	sb := ensure(t, rt, spec)
	if got := sb.(usesHelper).UsesHelper(context.Background()); got != helper {
		t.Fatalf("UsesHelper = %v, want %v", got, helper)
	}
	return sb, spec
}

func run(t testing.TB, sb sandbox.Sandbox, req sandbox.ExecRequest) sandbox.ExecResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := sb.Exec(ctx, req)
	if err != nil {
		t.Fatalf("Exec(%q): %v", req.Command, err)
	}
	return res
}

func sh(t testing.TB, sb sandbox.Sandbox, command string) string {
	t.Helper()
	res := run(t, sb, sandbox.ExecRequest{Command: command})
	if res.ExitCode != 0 {
		t.Fatalf("%q exited %d: %s", command, res.ExitCode, res.Output)
	}
	return string(res.Output)
}

func inspect(t testing.TB, name string) (client.ContainerInspectResult, error) {
	t.Helper()
	return dockertest.RequireDocker(t).ContainerInspect(context.Background(), name, client.ContainerInspectOptions{})
}

func TestEnsureLifecycle(t *testing.T) {
	rt := dockertest.NewRuntime(t, docker.Options{})
	spec := dockertest.NewSpec(t, "life")
	name := docker.ContainerName(spec.Agent)

	sb := ensure(t, rt, spec)
	info, err := inspect(t, name)
	if err != nil {
		t.Fatal(err)
	}
	c := info.Container
	if c.ID != sb.ID() || c.Config.Labels[docker.LabelAgent] != spec.Agent || c.Config.Labels[docker.LabelManaged] != "true" ||
		len(c.Config.Labels[docker.LabelConfigHash]) != 64 {
		t.Errorf("container %s labels %v", c.ID, c.Config.Labels)
	}
	if got := strings.TrimSpace(sh(t, sb, "hostname")); got != name {
		t.Errorf("hostname = %q", got)
	}
	if got := strings.Join(c.Config.Entrypoint, " "); got != "/beige/beige-sandbox idle" {
		t.Errorf("entrypoint = %q", got)
	}

	// Again: same container, same handle.
	if sb2 := ensure(t, rt, spec); sb2.ID() != sb.ID() || sb2 != sb {
		t.Errorf("re-attach gave %s (same handle %v), want %s", sb2.ID(), sb2 == sb, sb.ID())
	}

	// Stopped: started again, same ID. The idle process exits promptly on SIGTERM.
	cli := dockertest.RequireDocker(t)
	start := time.Now()
	if _, err := cli.ContainerStop(context.Background(), name, client.ContainerStopOptions{}); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("stop took %v: idle does not exit on SIGTERM", d)
	}
	sb3 := ensure(t, rt, spec)
	if sb3.ID() != sb.ID() {
		t.Errorf("restart gave %s, want %s", sb3.ID(), sb.ID())
	}
	if got := sh(t, sb3, "echo back"); got != "back\n" {
		t.Errorf("after restart: %q", got)
	}

	// Changed spec: recreated.
	spec.Env = map[string]string{"CHANGED": "1"}
	sb4 := ensure(t, rt, spec)
	if sb4.ID() == sb.ID() {
		t.Fatal("changed spec did not recreate the container")
	}
	if got := sh(t, sb4, "echo $CHANGED"); got != "1\n" {
		t.Errorf("new env: %q", got)
	}
	if _, err := inspect(t, sb.ID()); !cerrdefs.IsNotFound(err) {
		t.Errorf("old container still there: %v", err)
	}
}

func TestCloseKeepsContainer(t *testing.T) {
	instance := "test-" + dockertest.Suffix()
	rt := dockertest.NewRuntime(t, docker.Options{Instance: instance})
	spec := dockertest.NewSpec(t, "close")
	sb := ensure(t, rt, spec)
	sh(t, sb, "true") // helper running
	if err := rt.Close(); err != nil {
		t.Fatal(err)
	}
	info, err := inspect(t, sb.ID())
	if err != nil || !info.Container.State.Running {
		t.Fatalf("container after Close: %v", err)
	}
	if _, err := rt.Ensure(context.Background(), spec); !errors.Is(err, docker.ErrClosed) {
		t.Errorf("Ensure after Close: %v", err)
	}
	if _, err := sb.Exec(context.Background(), sandbox.ExecRequest{Command: "true"}); !errors.Is(err, docker.ErrClosed) {
		t.Errorf("Exec after Close: %v", err)
	}

	rt2 := dockertest.NewRuntime(t, docker.Options{Instance: instance})
	sb2 := ensure(t, rt2, spec)
	if sb2.ID() != sb.ID() {
		t.Fatalf("new runtime recreated the container")
	}
	// The old helper exited on stdin EOF: only the new one is left.
	var out string
	for range 50 {
		out = sh(t, sb2, "ps -o pid,args | grep -c '[b]eige-sandbox serve'")
		if strings.TrimSpace(out) == "1" {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Errorf("helpers running: %s", out)
}

func TestPrune(t *testing.T) {
	rt := dockertest.NewRuntime(t, docker.Options{})
	a, b := dockertest.NewSpec(t, "prune-a"), dockertest.NewSpec(t, "prune-b")
	sbA, sbB := ensure(t, rt, a), ensure(t, rt, b)

	removed, err := rt.Prune(context.Background(), []string{a.Agent})
	if err != nil || !slices.Equal(removed, []string{b.Agent}) {
		t.Fatalf("Prune = %q, %v", removed, err)
	}
	if _, err := inspect(t, sbB.ID()); !cerrdefs.IsNotFound(err) {
		t.Errorf("pruned container still there: %v", err)
	}
	if info, err := inspect(t, sbA.ID()); err != nil || !info.Container.State.Running {
		t.Errorf("kept container: %v", err)
	}
	removed, err = rt.Prune(context.Background(), nil)
	if err != nil || !slices.Equal(removed, []string{a.Agent}) {
		t.Fatalf("Prune = %q, %v", removed, err)
	}
}

func TestMissingImage(t *testing.T) {
	rt := dockertest.NewRuntime(t, docker.Options{})
	spec := dockertest.NewSpec(t, "noimg")
	spec.Image = "beige-test:no-such-image-" + dockertest.Suffix()
	_, err := rt.Ensure(context.Background(), spec)
	if !errors.Is(err, docker.ErrNoImage) || !strings.Contains(err.Error(), "beige sandbox build") || !strings.Contains(err.Error(), spec.Image) {
		t.Fatalf("err = %v", err)
	}
}

func TestHardening(t *testing.T) {
	rt := dockertest.NewRuntime(t, docker.Options{})
	spec := dockertest.NewSpec(t, "hard")
	host := t.TempDir()
	spec.MemoryLimit = 256 << 20
	spec.CPUs = 0.5
	spec.Env = map[string]string{"GREETING": "hello"}
	spec.Packages = map[string]string{"git": filepath.Join(host, "git")}
	spec.Skills = map[string]string{"notes": filepath.Join(host, "notes")}
	os.MkdirAll(spec.Packages["git"], 0o755)
	os.WriteFile(filepath.Join(spec.Packages["git"], "plugin.json"), []byte(`{"name":"git"}`), 0o644)
	os.MkdirAll(spec.Skills["notes"], 0o755)
	os.WriteFile(filepath.Join(spec.Skills["notes"], "README.md"), []byte("notes skill"), 0o644)
	os.MkdirAll(spec.Launchers, 0o755)
	os.WriteFile(filepath.Join(spec.Launchers, "hello-tool"), []byte("#!/bin/sh\necho launcher ran\n"), 0o755)
	sb := ensure(t, rt, spec)

	info, err := inspect(t, sb.ID())
	if err != nil {
		t.Fatal(err)
	}
	hc := info.Container.HostConfig
	if !slices.Contains(hc.SecurityOpt, "no-new-privileges:true") {
		t.Errorf("SecurityOpt = %q", hc.SecurityOpt)
	}
	if !slices.Contains(hc.CapDrop, "CAP_ALL") && !slices.Contains(hc.CapDrop, "ALL") {
		t.Errorf("CapDrop = %q", hc.CapDrop)
	}
	for _, c := range hc.CapAdd {
		if strings.Contains(c, "NET_RAW") || strings.Contains(c, "MKNOD") {
			t.Errorf("CapAdd has %s", c)
		}
	}
	if hc.PidsLimit == nil || *hc.PidsLimit != sandbox.DefaultPidsLimit || hc.Memory != 256<<20 || hc.NanoCPUs != 5e8 {
		t.Errorf("resources: pids %v memory %d cpus %d", hc.PidsLimit, hc.Memory, hc.NanoCPUs)
	}
	if hc.Init == nil || !*hc.Init {
		t.Error("Init not set")
	}
	rw := map[string]bool{}
	for _, m := range info.Container.Mounts {
		rw[m.Destination] = m.RW
	}
	for dst, wantRW := range map[string]bool{
		"/workspace": true, "/tools/bin": false, "/tools/packages": false,
		"/skills/notes": false, "/beige": false, "/beige/tool-client": false, "/beige/beige-sandbox": false,
	} {
		if got, ok := rw[dst]; !ok || got != wantRW {
			t.Errorf("mount %s: present %v rw %v, want rw %v", dst, ok, got, wantRW)
		}
	}

	// Inside: capabilities. Agent code runs as a non-root user, so it has
	// none in effect; the bounding set is what the root helper needs.
	status := sh(t, sb, "cat /proc/self/status")
	var capEff, capBnd uint64
	for _, line := range strings.Split(status, "\n") {
		if v, ok := strings.CutPrefix(line, "CapEff:"); ok {
			capEff, _ = strconv.ParseUint(strings.TrimSpace(v), 16, 64)
		}
		if v, ok := strings.CutPrefix(line, "CapBnd:"); ok {
			capBnd, _ = strconv.ParseUint(strings.TrimSpace(v), 16, 64)
		}
		if v, ok := strings.CutPrefix(line, "NoNewPrivs:"); ok && strings.TrimSpace(v) != "1" {
			t.Errorf("NoNewPrivs = %s", v)
		}
	}
	caps := map[string]int{"CHOWN": 0, "DAC_OVERRIDE": 1, "FOWNER": 3, "KILL": 5, "SETGID": 6, "SETUID": 7,
		"NET_BIND_SERVICE": 10, "NET_RAW": 13, "SYS_CHROOT": 18, "MKNOD": 27, "AUDIT_WRITE": 29, "SETFCAP": 31}
	for name, bit := range caps {
		want := slices.Contains(sandbox.DefaultCapAdd, name)
		if got := capBnd&(1<<bit) != 0; got != want {
			t.Errorf("capability %s bounding = %v, want %v (CapBnd %x)", name, got, want, capBnd)
		}
	}
	if capEff != 0 {
		t.Errorf("agent code has capabilities in effect: CapEff %x", capEff)
	}
	if res := run(t, sb, sandbox.ExecRequest{Command: "mknod /tmp/null c 1 3"}); res.ExitCode == 0 {
		t.Error("mknod worked without CAP_MKNOD")
	}

	// Inside: read-only mounts.
	for _, p := range []string{"/tools/bin/x", "/tools/packages/x", "/tools/packages/git/x", "/beige/x", "/skills/notes/x"} {
		if res := run(t, sb, sandbox.ExecRequest{Command: "touch " + p}); res.ExitCode == 0 {
			t.Errorf("%s is writable", p)
		}
	}
	sh(t, sb, "touch /workspace/ok && test -x /beige/tool-client && test -x /beige/beige-sandbox")
	if got := sh(t, sb, "cat /tools/packages/git/plugin.json /skills/notes/README.md"); got != `{"name":"git"}notes skill` {
		t.Errorf("packages and skills: %q", got)
	}
	if got := sh(t, sb, "hello-tool"); got != "launcher ran\n" {
		t.Errorf("launcher on PATH: %q", got)
	}
	if got := sh(t, sb, "echo $PATH $GREETING"); got != sandbox.DefaultPATH+" hello\n" {
		t.Errorf("env: %q", got)
	}
}

func TestNetworkNone(t *testing.T) {
	rt := dockertest.NewRuntime(t, docker.Options{})
	spec := dockertest.NewSpec(t, "nonet")
	spec.Network = "none"
	sb := ensure(t, rt, spec)
	if got := strings.Fields(sh(t, sb, "ls /sys/class/net")); !slices.Equal(got, []string{"lo"}) {
		t.Errorf("interfaces = %q", got)
	}
}

func TestNoHostEnv(t *testing.T) {
	t.Setenv("ANTHROPIC_API_KEY", "canary-123")
	t.Setenv("BEIGE_CANARY", "canary-456")
	for _, p := range paths {
		t.Run(p.name, func(t *testing.T) {
			sb, _ := newSandbox(t, "env", p.helper)
			// Agent code that is not root cannot read the environ of root
			// processes at all (2>/dev/null; true); whatever it reads has no
			// host variables.
			for _, cmd := range []string{"env", "cat /proc/1/environ 2>/dev/null; true", "[ $PPID = 0 ] || cat /proc/$PPID/environ 2>/dev/null; true"} {
				out := sh(t, sb, cmd)
				if strings.Contains(out, "canary") {
					t.Errorf("%s shows host env: %q", cmd, out)
				}
			}
			env := sh(t, sb, "env")
			if !strings.Contains(env, "PATH="+sandbox.DefaultPATH+"\n") {
				t.Errorf("env = %q", env)
			}
		})
	}
}

func TestExec(t *testing.T) {
	for _, p := range paths {
		t.Run(p.name, func(t *testing.T) {
			sb, _ := newSandbox(t, "exec", p.helper)
			tests := []struct {
				name string
				req  sandbox.ExecRequest
				out  string
				code int
			}{
				{"echo", sandbox.ExecRequest{Command: "echo hello"}, "hello\n", 0},
				{"exit code", sandbox.ExecRequest{Command: "echo out; exit 3"}, "out\n", 3},
				{"signal", sandbox.ExecRequest{Command: "kill -9 $$"}, "", 137},
				{"stderr", sandbox.ExecRequest{Command: "echo oops >&2"}, "oops\n", 0},
				{"env", sandbox.ExecRequest{Command: `echo "$BEIGE_AGENT_NAME|$X"`, Env: map[string]string{"BEIGE_AGENT_NAME": "travel", "X": "a b"}}, "travel|a b\n", 0},
				{"dir", sandbox.ExecRequest{Command: "pwd", Dir: "/tmp"}, "/tmp\n", 0},
				{"relative dir", sandbox.ExecRequest{Command: "mkdir -p sub; cd sub; pwd"}, "/workspace/sub\n", 0},
				{"stdin", sandbox.ExecRequest{Command: "tr a-z A-Z", Stdin: []byte("quiet")}, "QUIET", 0},
				{"missing dir", sandbox.ExecRequest{Command: "pwd", Dir: "/nope"}, "", 126},
				{"quoting", sandbox.ExecRequest{Command: `printf '%s|' "a b" 'c"d' $((1+2))`}, `a b|c"d|3|`, 0},
			}
			for _, tt := range tests {
				res := run(t, sb, tt.req)
				if tt.code == 126 {
					if res.ExitCode != 126 || !strings.Contains(string(res.Output), "/nope") {
						t.Errorf("%s: got %q exit %d", tt.name, res.Output, res.ExitCode)
					}
					continue
				}
				if string(res.Output) != tt.out || res.ExitCode != tt.code || res.TimedOut || res.Truncated() {
					t.Errorf("%s: got %q exit %d timedOut %v, want %q exit %d", tt.name, res.Output, res.ExitCode, res.TimedOut, tt.out, tt.code)
				}
				if res.Duration <= 0 {
					t.Errorf("%s: no duration", tt.name)
				}
			}
		})
	}
}

func TestExecTimeout(t *testing.T) {
	for _, p := range paths {
		t.Run(p.name, func(t *testing.T) {
			sb, _ := newSandbox(t, "timeout", p.helper)
			start := time.Now()
			res := run(t, sb, sandbox.ExecRequest{Command: "echo before; sleep 100", Timeout: time.Second})
			if d := time.Since(start); d > 2*time.Second {
				t.Errorf("took %v", d)
			}
			if !res.TimedOut || string(res.Output) != "before\n" {
				t.Errorf("got %+v", res)
			}
			// Nothing of it is left running, nor unreaped.
			var ps string
			for range 20 {
				ps = sh(t, sb, "ps -o pid,stat,args")
				if !strings.Contains(ps, "sleep") && !hasZombie(ps) {
					return
				}
				time.Sleep(50 * time.Millisecond)
			}
			t.Errorf("leftover process:\n%s", ps)
		})
	}
}

// hasZombie reports whether `ps -o pid,stat,args` lists a zombie.
func hasZombie(ps string) bool {
	for _, line := range strings.Split(ps, "\n") {
		if f := strings.Fields(line); len(f) > 1 && strings.HasPrefix(f[1], "Z") {
			return true
		}
	}
	return false
}

func TestExecCancel(t *testing.T) {
	for _, p := range paths {
		t.Run(p.name, func(t *testing.T) {
			sb, _ := newSandbox(t, "cancel", p.helper)
			ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
			defer cancel()
			start := time.Now()
			_, err := sb.Exec(ctx, sandbox.ExecRequest{Command: "sleep 100 & sleep 100"})
			if !errors.Is(err, context.DeadlineExceeded) || time.Since(start) > 3*time.Second {
				t.Fatalf("err = %v after %v", err, time.Since(start))
			}
			var ps string
			for range 40 {
				ps = sh(t, sb, "ps -o pid,stat,args")
				if !strings.Contains(ps, "sleep") && !hasZombie(ps) {
					return
				}
				time.Sleep(50 * time.Millisecond)
			}
			t.Errorf("leftover process after cancel:\n%s", ps)
		})
	}
}

func TestExecOutputLimit(t *testing.T) {
	for _, p := range paths {
		t.Run(p.name, func(t *testing.T) {
			sb, _ := newSandbox(t, "output", p.helper)
			res := run(t, sb, sandbox.ExecRequest{Command: "head -c 1048576 /dev/zero | tr '\\0' x", OutputLimit: 1000})
			if len(res.Output) != 1000 || res.OutputBytes != 1<<20 || !res.Truncated() {
				t.Errorf("len %d OutputBytes %d", len(res.Output), res.OutputBytes)
			}
			if strings.Trim(string(res.Output), "x") != "" {
				t.Error("output is not the first bytes")
			}
			res = run(t, sb, sandbox.ExecRequest{Command: "head -c 1048576 /dev/zero"})
			if len(res.Output) != sandbox.DefaultOutputLimit || res.OutputBytes != 1<<20 {
				t.Errorf("default limit: len %d OutputBytes %d", len(res.Output), res.OutputBytes)
			}
		})
	}
}

func TestFiles(t *testing.T) {
	for _, p := range paths {
		t.Run(p.name, func(t *testing.T) {
			sb, spec := newSandbox(t, "files", p.helper)
			ctx := context.Background()
			content := []byte("line 1\nline 2\x00binary\n")
			if err := sb.WriteFile(ctx, "deep/er/file.txt", content); err != nil {
				t.Fatal(err)
			}
			if got, err := os.ReadFile(filepath.Join(spec.Workspace, "deep/er/file.txt")); err != nil || !bytes.Equal(got, content) {
				t.Fatalf("on host: %q, %v", got, err)
			}
			data, size, err := sb.ReadFile(ctx, "/workspace/deep/er/file.txt", 1<<20)
			if err != nil || !bytes.Equal(data, content) || size != int64(len(content)) {
				t.Errorf("read: %q %d %v", data, size, err)
			}
			data, size, err = sb.ReadFile(ctx, "deep/er/file.txt", 4)
			if err != nil || string(data) != "line" || size != int64(len(content)) {
				t.Errorf("read max 4: %q %d %v", data, size, err)
			}
			// Outside the workspace, and an empty file.
			if err := sb.WriteFile(ctx, "/tmp/a/b/empty", nil); err != nil {
				t.Fatal(err)
			}
			if data, size, err := sb.ReadFile(ctx, "/tmp/a/b/empty", 10); err != nil || len(data) != 0 || size != 0 {
				t.Errorf("empty: %q %d %v", data, size, err)
			}
			// A path full of shell syntax is a path, not a command.
			weird := `we ird $(touch pwned) ';touch pwned2;'.txt`
			if err := sb.WriteFile(ctx, weird, []byte("ok")); err != nil {
				t.Fatal(err)
			}
			if data, _, err := sb.ReadFile(ctx, weird, 10); err != nil || string(data) != "ok" {
				t.Errorf("weird name: %q %v", data, err)
			}
			for _, f := range []string{"pwned", "pwned2"} {
				if _, err := os.Stat(filepath.Join(spec.Workspace, f)); err == nil {
					t.Errorf("path was interpreted by a shell: %s exists", f)
				}
			}

			if _, _, err := sb.ReadFile(ctx, "missing.txt", 10); !errors.Is(err, sandbox.ErrNotExist) {
				t.Errorf("missing: %v", err)
			}
			if _, _, err := sb.ReadFile(ctx, "deep", 10); !errors.Is(err, sandbox.ErrIsDir) {
				t.Errorf("dir: %v", err)
			}
			if err := sb.WriteFile(ctx, "/workspace/deep", []byte("x")); !errors.Is(err, sandbox.ErrIsDir) {
				t.Errorf("write dir: %v", err)
			}
			if err := sb.WriteFile(ctx, "/tools/bin/x", []byte("x")); err == nil {
				t.Error("wrote into read-only /tools/bin")
			}
		})
	}
}

func TestConcurrentExec(t *testing.T) {
	rt := dockertest.NewRuntime(t, docker.Options{})
	var sbs []sandbox.Sandbox
	for i := range 4 {
		sbs = append(sbs, ensure(t, rt, dockertest.NewSpec(t, fmt.Sprintf("conc%d", i))))
	}
	var wg sync.WaitGroup
	errs := make(chan error, 200)
	for i := range 200 {
		sb := sbs[i%4]
		wg.Go(func() {
			res, err := sb.Exec(context.Background(), sandbox.ExecRequest{Command: fmt.Sprintf("echo %d", i), Timeout: 30 * time.Second})
			switch {
			case err != nil:
				errs <- err
			case string(res.Output) != fmt.Sprintf("%d\n", i) || res.ExitCode != 0:
				errs <- fmt.Errorf("call %d: %q exit %d", i, res.Output, res.ExitCode)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func TestHelperRestart(t *testing.T) {
	sb, spec := newSandbox(t, "restart", true)
	ctx := context.Background()
	// Agent code cannot signal the helper (it runs as root); the engine can.
	for _, sig := range []string{"-KILL", "-TERM"} {
		kill := "kill " + sig
		before := sh(t, sb, "echo $PPID")
		start := time.Now()
		killed := make(chan error, 1)
		go func() {
			time.Sleep(300 * time.Millisecond)
			killed <- tryRootExec(t, spec, "kill", sig, strings.TrimSpace(before))
		}()
		defer func() {
			if err := <-killed; err != nil {
				t.Error(err)
			}
		}()
		_, err := sb.Exec(ctx, sandbox.ExecRequest{Command: "sleep 5"})
		if err == nil {
			t.Fatalf("%s: the call survived the helper", kill)
		}
		if time.Since(start) > 3*time.Second {
			t.Errorf("%s: pending call failed only after %v", kill, time.Since(start))
		}
		after := sh(t, sb, "echo $PPID") // restarts the helper
		if before == after {
			t.Errorf("%s: same helper pid %s", kill, after)
		}
		if !sb.(usesHelper).UsesHelper(ctx) {
			t.Errorf("%s: not on the helper after restart", kill)
		}
	}
	if _, _, err := sb.ReadFile(ctx, "/etc/passwd", 100); err != nil {
		t.Error(err)
	}
}

func TestHelperUnavailableFallsBack(t *testing.T) {
	rt := dockertest.NewRuntime(t, docker.Options{})
	spec := dockertest.NewSpec(t, "nohelper")
	// A "helper" that can idle but not serve.
	spec.HelperBinary = filepath.Join(t.TempDir(), "beige-sandbox")
	script := "#!/bin/sh\n[ \"$1\" = idle ] && exec sh -c 'trap \"exit 0\" TERM; while :; do sleep 1000 & wait $!; done'\necho broken helper >&2\nexit 1\n"
	os.WriteFile(spec.HelperBinary, []byte(script), 0o755)
	sb := ensure(t, rt, spec)
	if sb.(usesHelper).UsesHelper(context.Background()) {
		t.Fatal("broken helper in use")
	}
	if got := sh(t, sb, "echo fallback"); got != "fallback\n" {
		t.Errorf("exec: %q", got)
	}
	if err := sb.WriteFile(context.Background(), "f", []byte("x")); err != nil {
		t.Error(err)
	}
	if data, _, err := sb.ReadFile(context.Background(), "f", 10); err != nil || string(data) != "x" {
		t.Errorf("read: %q %v", data, err)
	}

	// No helper binary at all: the container idles with sh; calls use docker exec.
	spec2 := dockertest.NewSpec(t, "nobinary")
	spec2.HelperBinary = ""
	sb2 := ensure(t, rt, spec2)
	if got := sh(t, sb2, "echo plain"); got != "plain\n" {
		t.Errorf("exec: %q", got)
	}
}

func TestBuildImage(t *testing.T) {
	base := dockertest.Image(t)
	// The build needs no network, so it does not depend on docker0.
	rt := dockertest.NewRuntime(t, docker.Options{BuildNetwork: "none"})
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "Dockerfile"), []byte("FROM "+base+"\nCOPY hello.txt /hello.txt\nRUN echo built > /built\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "hello.txt"), []byte("hello from context\n"), 0o644)
	tag := "beige-test:build-" + dockertest.Suffix()
	t.Cleanup(func() {
		dockertest.RequireDocker(t).ImageRemove(context.Background(), tag, client.ImageRemoveOptions{Force: true, PruneChildren: true})
	})
	var progress bytes.Buffer
	if err := rt.BuildImage(context.Background(), dir, tag, &progress); err != nil {
		t.Fatalf("BuildImage: %v\n%s", err, progress.String())
	}
	if !strings.Contains(progress.String(), "Step 1/3") {
		t.Errorf("progress = %q", progress.String())
	}
	spec := dockertest.NewSpec(t, "built")
	spec.Image = tag
	sb := ensure(t, rt, spec)
	if got := sh(t, sb, "cat /hello.txt /built"); got != "hello from context\nbuilt\n" {
		t.Errorf("built image: %q", got)
	}

	os.WriteFile(filepath.Join(dir, "Dockerfile"), []byte("FROM "+base+"\nRUN exit 7\n"), 0o644)
	if err := rt.BuildImage(context.Background(), dir, tag, nil); err == nil {
		t.Error("failing build succeeded")
	}
}

// TestExecLatency logs the p50 of an exec round trip on both paths.
func TestExecLatency(t *testing.T) {
	if testing.Short() {
		t.Skip("latency measurement")
	}
	p50 := map[bool]time.Duration{}
	for _, p := range paths {
		sb, _ := newSandbox(t, "lat-"+p.name, p.helper)
		n := 200
		if !p.helper {
			n = 30
		}
		ds := make([]time.Duration, n)
		for i := range ds {
			start := time.Now()
			run(t, sb, sandbox.ExecRequest{Command: "true"})
			ds[i] = time.Since(start)
		}
		slices.Sort(ds)
		p50[p.helper] = ds[n/2]
		t.Logf("%s: p50 %v p90 %v max %v (n=%d)", p.name, ds[n/2], ds[n*9/10], ds[n-1], n)
	}
	if p50[true] >= p50[false] {
		t.Errorf("helper p50 %v is not faster than docker exec p50 %v", p50[true], p50[false])
	}
}

func BenchmarkExec(b *testing.B) {
	for _, p := range paths {
		b.Run(p.name, func(b *testing.B) {
			rt := dockertest.NewRuntime(b, docker.Options{DisableHelper: !p.helper})
			sb := ensure(b, rt, dockertest.NewSpec(b, "bench"))
			ctx := context.Background()
			for b.Loop() {
				if _, err := sb.Exec(ctx, sandbox.ExecRequest{Command: "true"}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestGatewaySocket checks the reason /beige is a folder mount: the sandbox
// reaches gateway.sock through the read-only mount, also after the gateway
// re-created the socket (a new inode).
func TestGatewaySocket(t *testing.T) {
	rt := dockertest.NewRuntime(t, docker.Options{})
	spec := dockertest.NewSpec(t, "sock")
	sockClient := dockertest.StaticBinary(t, "./internal/sandbox/docker/testdata/sockclient")
	os.MkdirAll(spec.SocketDir, 0o755)
	sockPath := filepath.Join(spec.SocketDir, "gateway.sock")
	serve := func(greeting string) net.Listener {
		os.Remove(sockPath)
		l, err := net.Listen("unix", sockPath)
		if err != nil {
			t.Fatal(err)
		}
		if err := sandbox.PrepareSocket(sockPath, spec.User); err != nil { // as the gateway does
			t.Fatal(err)
		}
		go func() {
			for {
				c, err := l.Accept()
				if err != nil {
					return
				}
				c.Write([]byte(greeting))
				c.Close()
			}
		}()
		return l
	}
	l := serve("hello from gateway")
	spec.ExtraMounts = []sandbox.Mount{{Source: sockClient, Target: "/opt/sockclient", ReadOnly: true}}
	sb := ensure(t, rt, spec)
	if got := sh(t, sb, "/opt/sockclient "+sandbox.SocketPath); got != "hello from gateway\n" {
		t.Errorf("first gateway: %q", got)
	}
	l.Close()
	l = serve("hello again")
	defer l.Close()
	if got := sh(t, sb, "/opt/sockclient "+sandbox.SocketPath); got != "hello again\n" {
		t.Errorf("restarted gateway: %q", got)
	}
}

func TestFreeze(t *testing.T) {
	instance := "test-" + dockertest.Suffix()
	rt := dockertest.NewRuntime(t, docker.Options{Instance: instance})
	spec := dockertest.NewSpec(t, "freeze")
	sb := ensure(t, rt, spec)
	sh(t, sb, "true")
	f := sb.(sandbox.Freezer)
	thaw1, err := f.Freeze(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	thaw2, err := f.Freeze(context.Background()) // freezes nest
	if err != nil {
		t.Fatal(err)
	}
	state := func() string {
		info, err := inspect(t, sb.ID())
		if err != nil {
			t.Fatal(err)
		}
		return string(info.Container.State.Status)
	}
	if s := state(); s != "paused" {
		t.Fatalf("state %s while frozen", s)
	}
	// Nothing runs in a frozen sandbox.
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	_, err = sb.Exec(ctx, sandbox.ExecRequest{Command: "true"})
	cancel()
	if err == nil {
		t.Error("exec ran in a frozen sandbox")
	}
	thaw1()
	thaw1() // thaw is idempotent
	if s := state(); s != "paused" {
		t.Fatalf("state %s after one of two thaws", s)
	}
	thaw2()
	if s := state(); s != "running" {
		t.Fatalf("state %s after the last thaw", s)
	}
	sh(t, sb, "true")

	// A gateway that died mid-freeze leaves the sandbox paused; the next
	// Ensure resumes it and keeps the container.
	if _, err := f.Freeze(context.Background()); err != nil {
		t.Fatal(err)
	}
	rt.Close()
	rt2 := dockertest.NewRuntime(t, docker.Options{Instance: instance})
	sb2 := ensure(t, rt2, spec)
	if sb2.ID() != sb.ID() || state() != "running" {
		t.Fatalf("after Ensure: id %s (was %s), state %s", sb2.ID(), sb.ID(), state())
	}
	sh(t, sb2, "true")
}

// Importing the busybox image again under its tag (beige sandbox build
// --busybox, which the benchmark runs every time) removes the image it
// replaces, which would otherwise stay behind as a dangling <none> image.
func TestImportBusyboxRemovesTheImageItReplaces(t *testing.T) {
	c := dockertest.RequireDocker(t)
	dockertest.Image(t) // skips without a static busybox
	rt := dockertest.NewRuntime(t, docker.Options{})
	tag := "beige-test:import-" + dockertest.Suffix()
	ctx := context.Background()
	var ids []string
	t.Cleanup(func() {
		for _, id := range ids {
			c.ImageRemove(ctx, id, client.ImageRemoveOptions{Force: true})
		}
	})
	for range 2 {
		if err := rt.ImportBusybox(ctx, tag); err != nil {
			t.Fatal(err)
		}
		img, err := c.ImageInspect(ctx, tag)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, img.ID)
	}
	if ids[0] == ids[1] {
		t.Fatalf("the second import gave the same image %s", ids[0])
	}
	if _, err := c.ImageInspect(ctx, ids[0]); !cerrdefs.IsNotFound(err) {
		t.Errorf("the replaced image %s is still there (err %v)", ids[0], err)
	}
}
