//go:build linux

package jail

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
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

// TestJailSeesOnlyItsFolders: a shell in the jail sees the system folders
// and the folders it was given, nothing else of the host (not the folder
// next to them, not /root, not /var/run), cannot write a read-only folder,
// can write its read-write one, and has no capabilities.
func TestJailSeesOnlyItsFolders(t *testing.T) {
	if err := Probe(); err != nil {
		t.Skipf("kernel refuses the jail's namespaces here: %v", err)
	}
	home := t.TempDir()
	ro, rw, other := filepath.Join(home, "plugin"), filepath.Join(home, "data"), filepath.Join(home, "other")
	for _, d := range []string{ro, rw, other} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	os.WriteFile(filepath.Join(ro, "code"), []byte("code"), 0o644)
	os.WriteFile(filepath.Join(other, "secret"), []byte("secret"), 0o644)
	os.WriteFile(filepath.Join(home, "config.json5"), []byte("{}"), 0o644)
	script := `
cat ` + ro + `/code; echo
cat ` + other + `/secret 2>/dev/null && echo READ-OTHER
cat ` + home + `/config.json5 2>/dev/null && echo READ-CONFIG
ls /var/run/docker.sock 2>/dev/null && echo SEES-DOCKER
ls /root 2>/dev/null && echo SEES-ROOT
echo x > ` + ro + `/new 2>/dev/null && echo WROTE-RO
echo x > ` + rw + `/new && echo wrote-rw
grep CapEff /proc/self/status
grep NoNewPrivs /proc/self/status
echo pid $$
`
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip(err)
	}
	cmd, err := Command(t.Context(), Spec{Path: sh, Args: []string{"-c", script}, Env: []string{"PATH=/usr/bin:/bin"}, Dir: rw, ReadOnly: []string{ro}, ReadWrite: []string{rw}})
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("jail: %v\n%s", err, out)
	}
	got := string(out)
	for _, bad := range []string{"READ-OTHER", "READ-CONFIG", "SEES-DOCKER", "SEES-ROOT", "WROTE-RO"} {
		if strings.Contains(got, bad) {
			t.Errorf("jail output has %s:\n%s", bad, got)
		}
	}
	for _, want := range []string{"code\n", "wrote-rw", "CapEff:\t0000000000000000", "NoNewPrivs:\t1", "pid 1\n"} {
		if !strings.Contains(got, want) {
			t.Errorf("jail output lacks %q:\n%s", want, got)
		}
	}
	if b, err := os.ReadFile(filepath.Join(rw, "new")); err != nil || string(b) != "x\n" {
		t.Errorf("write in the read-write folder: %q, %v", b, err)
	}
}

// TestKillGroupLeavesNothing: killing the jail's process group (what the
// gateway does to a host) ends the init that stays for the forwarder and
// the program under it, with nothing left behind.
func TestKillGroupLeavesNothing(t *testing.T) {
	if err := Probe(); err != nil {
		t.Skipf("kernel refuses the jail's namespaces here: %v", err)
	}
	d := t.TempDir()
	sock := filepath.Join(d, "egress.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip(err)
	}
	cmd, err := Command(t.Context(), Spec{Path: sh, Args: []string{"-c", "sleep 300 & sleep 300; wait"}, Env: []string{"PATH=/usr/bin:/bin"}, Dir: d, ReadWrite: []string{d}, EgressSocket: sock})
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pgid := cmd.Process.Pid
	time.Sleep(300 * time.Millisecond)
	if n := groupSize(t, pgid); n < 3 {
		t.Fatalf("the jail's group has %d processes before the kill, want the init, sh and its sleeps", n)
	}
	if err := syscall.Kill(-pgid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	deadline := time.Now().Add(5 * time.Second)
	for groupSize(t, pgid) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d processes of the jail's group are left after the kill", groupSize(t, pgid))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// groupSize counts the live (not zombie) processes of process group pgid.
func groupSize(t *testing.T, pgid int) int {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range ents {
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		s := string(b)
		f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if len(f) > 2 && f[0] != "Z" && f[2] == fmt.Sprint(pgid) {
			n++
		}
	}
	return n
}

// TestJailAsNonRoot: a gateway that is not root gets the same jail (in a
// user namespace of its own): the tests above, run again as nobody.
func TestJailAsNonRoot(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("runs as root, to run the jail's tests as nobody")
	}
	if os.Getenv("BEIGE_JAIL_AS_NOBODY") != "" {
		t.Skip("already nobody")
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "jail-nonroot-") // t.TempDir's parent is 0700
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	os.Chmod(dir, 0o755)
	bin := filepath.Join(dir, "jail.test")
	data, err := os.ReadFile(self)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, data, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-test.run", "^(TestJailSeesOnlyItsFolders|TestKillGroupLeavesNothing|TestNetworkNamespaceHasOnlyLoopback)$", "-test.v")
	cmd.Dir = "/"
	cmd.Env = []string{"BEIGE_JAIL_AS_NOBODY=1", "PATH=/usr/bin:/bin", "TMPDIR=/tmp"}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, err := cmd.CombinedOutput()
	if strings.Contains(string(out), "kernel refuses the jail's namespaces") {
		t.Skipf("the kernel gives nobody no user namespace:\n%s", out)
	}
	if err != nil || strings.Count(string(out), "--- PASS") != 3 {
		t.Fatalf("the jail's tests as nobody: %v\n%s", err, out)
	}
}
