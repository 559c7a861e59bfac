package docker_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/beige-dev/beige/internal/sandbox"
	"github.com/beige-dev/beige/internal/sandbox/docker"
	"github.com/beige-dev/beige/internal/sandbox/docker/dockertest"
)

func trimCaps(caps []string) []string {
	out := make([]string, 0, len(caps))
	for _, c := range caps {
		out = append(out, strings.TrimPrefix(strings.ToUpper(c), "CAP_"))
	}
	slices.Sort(out)
	return out
}

// portBound reports whether a busybox nc could listen on port as the
// agent's user: it waits until the port is in LISTEN state in
// /proc/net/tcp* (bound) or nc has exited (refused), whatever the load.
func portBound(t *testing.T, sb sandbox.Sandbox, port int) bool {
	t.Helper()
	script := `nc -l -p $1 </dev/null >/dev/null 2>&1 & p=$!
hex=$(printf %04X $1)
i=0
while [ $i -lt 200 ]; do
  if grep -qE ":$hex [0-9A-F]+:0000 0A" /proc/net/tcp /proc/net/tcp6 2>/dev/null; then kill $p; echo BOUND; exit 0; fi
  state=$(cut -d' ' -f3 /proc/$p/stat 2>/dev/null)
  if [ -z "$state" ] || [ "$state" = Z ]; then echo REFUSED; exit 0; fi
  sleep 0.05; i=$((i+1))
done
kill $p; echo UNDECIDED`
	out := sh(t, sb, "sh -c '"+strings.ReplaceAll(script, "'", `'\''`)+"' nc-test "+strconv.Itoa(port))
	switch strings.TrimSpace(out) {
	case "BOUND":
		return true
	case "REFUSED":
		return false
	}
	t.Fatalf("port %d: nc neither listened nor exited in 10 s: %q", port, out)
	return false
}

// A sandbox made with every default is hardened, and each default shows in
// docker inspect: a non-root user, no-new-privileges, the minimal
// capability set, the default seccomp profile, pids/memory/CPU limits,
// tmpfs /tmp and $HOME, ports below 1024 closed to the agent's user.
func TestDefaultSandboxHardened(t *testing.T) {
	rt := dockertest.NewRuntime(t, docker.Options{})
	spec := dockertest.NewSpec(t, "defaults")
	spec.ExtraMounts = []sandbox.Mount{{Source: dockertest.StaticBinary(t, "./internal/sandbox/docker/testdata/euid"), Target: "/opt/euid", ReadOnly: true}}
	sb := ensure(t, rt, spec)
	info, err := inspect(t, sb.ID())
	if err != nil {
		t.Fatal(err)
	}
	cfg, hc := info.Container.Config, info.Container.HostConfig
	wantUser := sandbox.DefaultUser()
	uid, gid, _ := sandbox.ParseUser(wantUser)
	if cfg.Labels[docker.LabelUser] != wantUser || uid == 0 {
		t.Errorf("agent user label = %q, want the non-root %q", cfg.Labels[docker.LabelUser], wantUser)
	}
	if !slices.Contains(hc.SecurityOpt, "no-new-privileges:true") {
		t.Errorf("SecurityOpt = %q", hc.SecurityOpt)
	}
	for _, o := range hc.SecurityOpt {
		if strings.HasPrefix(o, "seccomp") || strings.HasPrefix(o, "apparmor=unconfined") {
			t.Errorf("SecurityOpt %q replaces a default profile", o)
		}
	}
	if got := trimCaps(hc.CapDrop); !slices.Equal(got, []string{"ALL"}) {
		t.Errorf("CapDrop = %q", hc.CapDrop)
	}
	if got := trimCaps(hc.CapAdd); !slices.Equal(got, []string{"KILL", "SETGID", "SETUID"}) {
		t.Errorf("CapAdd = %q, want only what the root helper needs", hc.CapAdd)
	}
	if hc.PidsLimit == nil || *hc.PidsLimit != 1024 || hc.Memory != 3<<30 || hc.NanoCPUs != 1e9 {
		t.Errorf("limits: pids %v memory %d nanoCPUs %d, want 1024, 3 GiB, 1 CPU", hc.PidsLimit, hc.Memory, hc.NanoCPUs)
	}
	if hc.ReadonlyRootfs {
		t.Error("root filesystem read-only by default")
	}
	if _, ok := hc.Tmpfs["/tmp"]; !ok {
		t.Errorf("Tmpfs = %v, want /tmp", hc.Tmpfs)
	}
	if _, ok := hc.Tmpfs[sandbox.HomePath]; !ok {
		t.Errorf("Tmpfs = %v, want %s", hc.Tmpfs, sandbox.HomePath)
	}
	if hc.Sysctls["net.ipv4.ip_unprivileged_port_start"] != "1024" {
		t.Errorf("Sysctls = %v", hc.Sysctls)
	}

	// Inside, as agent code sees it.
	if got := sh(t, sb, "id -u; id -g; echo $HOME"); got != strconv.Itoa(uid)+"\n"+strconv.Itoa(gid)+"\n"+sandbox.HomePath+"\n" {
		t.Errorf("id and HOME: %q", got)
	}
	status := sh(t, sb, "cat /proc/self/status")
	if !strings.Contains(status, "Seccomp:\t2") || !strings.Contains(status, "NoNewPrivs:\t1") ||
		!strings.Contains(status, "CapEff:\t0000000000000000") || !strings.Contains(status, "CapPrm:\t0000000000000000") {
		t.Errorf("seccomp filter or no-new-privs missing, or agent code has capabilities:\n%s", status)
	}
	sh(t, sb, "touch /workspace/w $HOME/h /tmp/t && mkdir -p $HOME/.cache/x")
	if portBound(t, sb, 80) {
		t.Error("the agent's user can listen on port 80 (NET_BIND_SERVICE is meant to be dropped)")
	}
	if !portBound(t, sb, 8080) {
		t.Error("the agent's user cannot listen on port 8080: the port test proves nothing")
	}

	// No root-owned setuid file can come out of the workspace: agent code
	// cannot chown to root, and a setuid copy is its own user's.
	if res := run(t, sb, sandbox.ExecRequest{Command: "cp /opt/euid /workspace/euid && chmod 4755 /workspace/euid && chown 0:0 /workspace/euid"}); res.ExitCode == 0 {
		t.Error("agent code gave a file to root")
	}
	fi, err := os.Stat(filepath.Join(spec.Workspace, "euid"))
	if err != nil {
		t.Fatal(err)
	}
	if st := fi.Sys().(*syscall.Stat_t); st.Uid == 0 && fi.Mode()&os.ModeSetuid != 0 {
		t.Errorf("a setuid-root file came out of the workspace (owner %d, mode %v)", st.Uid, fi.Mode())
	}
	if os.Geteuid() == 0 {
		// A root-owned binary in the workspace cannot be made setuid either.
		root := filepath.Join(spec.Workspace, "rootbin")
		if err := os.WriteFile(root, []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		if res := run(t, sb, sandbox.ExecRequest{Command: "chmod u+s /workspace/rootbin"}); res.ExitCode == 0 {
			t.Error("agent code made a root-owned file setuid")
		}
		if fi, _ := os.Stat(root); fi.Mode()&os.ModeSetuid != 0 {
			t.Error("rootbin is setuid")
		}
	}
	if res := run(t, sb, sandbox.ExecRequest{Command: "mknod /tmp/null c 1 3"}); res.ExitCode == 0 {
		t.Error("agent code made a device file")
	}
}

// The workspace is unreachable by other local users, wherever it is: a
// setuid file the agent left there cannot be run by them.
func TestWorkspaceUnreachableByOthers(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root, to run a process as another uid")
	}
	rt := dockertest.NewRuntime(t, docker.Options{})
	spec := dockertest.NewSpec(t, "private")
	// The folders above the workspace are open to all (a workspace
	// configured outside $BEIGE_HOME, say).
	for d := filepath.Dir(spec.Workspace); d != os.TempDir() && d != "/"; d = filepath.Dir(d) {
		os.Chmod(d, 0o755)
	}
	spec.ExtraMounts = []sandbox.Mount{{Source: dockertest.StaticBinary(t, "./internal/sandbox/docker/testdata/euid"), Target: "/opt/euid", ReadOnly: true}}
	sb := ensure(t, rt, spec)
	sh(t, sb, "cp /opt/euid /workspace/euid && chmod 4755 /workspace/euid")

	other := exec.Command(filepath.Join(spec.Workspace, "euid"))
	other.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 4242, Gid: 4242}}
	out, err := other.CombinedOutput()
	if err == nil {
		t.Fatalf("uid 4242 ran the agent's setuid file from the workspace; euid %s", out)
	}
	if !errors.Is(err, os.ErrPermission) {
		t.Errorf("err = %v, want permission denied", err)
	}
	fi, _ := os.Stat(spec.Workspace)
	if fi.Mode().Perm()&0o077 != 0 {
		t.Errorf("workspace mode %v", fi.Mode().Perm())
	}
}

// sandbox.readOnlyRootfs: the image cannot be written; /tmp, $HOME and the
// workspace still can.
func TestReadOnlyRootfs(t *testing.T) {
	rt := dockertest.NewRuntime(t, docker.Options{})
	spec := dockertest.NewSpec(t, "rofs")
	spec.ReadOnlyRootfs = true
	sb := ensure(t, rt, spec)
	info, err := inspect(t, sb.ID())
	if err != nil {
		t.Fatal(err)
	}
	if !info.Container.HostConfig.ReadonlyRootfs {
		t.Error("ReadonlyRootfs not set")
	}
	sh(t, sb, "touch /workspace/w $HOME/h /tmp/t")
	if res := run(t, sb, sandbox.ExecRequest{Command: "touch /x || touch /bin/x || touch /etc/x"}); res.ExitCode == 0 {
		t.Error("the root filesystem is writable")
	}
}

// A plugin's folder is not mounted: only its docs are in the sandbox, and a
// secret beside plugin.json is not.
func TestPluginSecretNotInSandbox(t *testing.T) {
	rt := dockertest.NewRuntime(t, docker.Options{})
	spec := dockertest.NewSpec(t, "plugsecret")
	plug := filepath.Join(t.TempDir(), "weather")
	os.MkdirAll(plug, 0o755)
	os.WriteFile(filepath.Join(plug, "plugin.json"), []byte(`{"name":"weather"}`), 0o644)
	os.WriteFile(filepath.Join(plug, "README.md"), []byte("how to use"), 0o644)
	os.WriteFile(filepath.Join(plug, "secret.env"), []byte("API_KEY=canary-plugin-secret"), 0o644)
	spec.Packages = map[string]string{"weather": plug}
	sb := ensure(t, rt, spec)
	if got := sh(t, sb, "cat /tools/packages/weather/plugin.json /tools/packages/weather/README.md"); got != `{"name":"weather"}how to use` {
		t.Errorf("docs: %q", got)
	}
	if got := sh(t, sb, "ls -a /tools/packages/weather; grep -rl canary-plugin-secret /tools /beige /skills 2>/dev/null; true"); strings.Contains(got, "secret") {
		t.Errorf("the plugin's secret is in the sandbox:\n%s", got)
	}
}

// Two gateways (instances) on one engine with an agent of the same name:
// the second gets a clear error and the first's sandbox keeps running,
// untouched; neither prunes the other's.
func TestTwoInstancesOneEngine(t *testing.T) {
	a := dockertest.NewRuntime(t, docker.Options{Home: "/home/a/.beige", Instance: "test-a-" + dockertest.Suffix()})
	b := dockertest.NewRuntime(t, docker.Options{Home: "/home/b/.beige", Instance: "test-b-" + dockertest.Suffix()})
	specA := dockertest.NewSpec(t, "shared")
	sbA := ensure(t, a, specA)
	sh(t, sbA, "echo from-a > /workspace/mine")

	specB := specA
	specB.Workspace = filepath.Join(t.TempDir(), "workspace")
	ctx := context.Background()
	_, err := b.Ensure(ctx, specB)
	if !errors.Is(err, docker.ErrNameTaken) || !strings.Contains(err.Error(), "/home/a/.beige") || !strings.Contains(err.Error(), docker.ContainerName(specA.Agent)) {
		t.Fatalf("second gateway: err = %v, want ErrNameTaken naming the container and the other home", err)
	}
	if removed, err := b.Prune(ctx, nil); err != nil || len(removed) != 0 {
		t.Errorf("second gateway pruned %v (err %v)", removed, err)
	}
	info, err := inspect(t, docker.ContainerName(specA.Agent))
	if err != nil || info.Container.ID != sbA.ID() || !info.Container.State.Running {
		t.Fatalf("first gateway's sandbox: %v (id %s, want %s)", err, info.Container.ID, sbA.ID())
	}
	if got := sh(t, sbA, "cat /workspace/mine"); got != "from-a\n" {
		t.Errorf("first gateway's sandbox: %q", got)
	}
}

// A gateway that restarts after its workspace folder was replaced (same
// path, another folder) does not re-attach to a sandbox that still shows
// the old one: host and sandbox see the same files.
func TestReattachChecksMounts(t *testing.T) {
	instance := "test-" + dockertest.Suffix()
	spec := dockertest.NewSpec(t, "remount")
	first := ensure(t, dockertest.NewRuntime(t, docker.Options{Instance: instance}), spec)
	sh(t, first, "echo old > /workspace/f")

	if err := os.Rename(spec.Workspace, spec.Workspace+".old"); err != nil {
		t.Fatal(err)
	}
	os.Mkdir(spec.Workspace, 0o700)
	os.WriteFile(filepath.Join(spec.Workspace, "f"), []byte("new\n"), 0o644)

	again := ensure(t, dockertest.NewRuntime(t, docker.Options{Instance: instance}), spec)
	if got := sh(t, again, "cat /workspace/f"); got != "new\n" {
		t.Errorf("the sandbox shows the replaced workspace: %q (re-attached: %v)", got, again.ID() == first.ID())
	}
}

// The port check sees a bound port 80 (so its "refused" above means
// something): root given NET_BIND_SERVICE back may listen there.
func TestPortCheckSeesPort80(t *testing.T) {
	rt := dockertest.NewRuntime(t, docker.Options{})
	spec := dockertest.NewSpec(t, "port80")
	spec.User = sandbox.RootUser
	spec.CapAdd = []string{"NET_BIND_SERVICE"}
	if !portBound(t, ensure(t, rt, spec), 80) {
		t.Error("root with NET_BIND_SERVICE could not listen on port 80, or the check cannot see it")
	}
}
