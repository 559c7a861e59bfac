package helper

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/beige-dev/beige/internal/proto"
)

const nobody = 65534

// agentDir returns a folder that belongs to the agent user nobody.
func agentDir(t *testing.T) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: the helper switches to the agent's user")
	}
	base := t.TempDir()
	for d := base; d != "/tmp" && d != "/" && d != "."; d = filepath.Dir(d) {
		os.Chmod(d, 0o755) // let the agent reach ws
		if d == os.TempDir() {
			break
		}
	}
	dir := filepath.Join(base, "ws")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(dir, nobody, nobody); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestRunsAsAgentUser: with a User, commands run as that uid:gid with no
// supplementary groups, and file operations can open nothing the agent
// could not and create files that belong to the agent.
func TestRunsAsAgentUser(t *testing.T) {
	dir := agentDir(t)
	secret := filepath.Join(filepath.Dir(dir), "secret")
	if err := os.WriteFile(secret, []byte("root only"), 0o600); err != nil {
		t.Fatal(err)
	}
	rootDir := filepath.Join(filepath.Dir(dir), "rootdir")
	if err := os.Mkdir(rootDir, 0o755); err != nil {
		t.Fatal(err)
	}
	c := startServe(t, Options{Dir: dir, User: &User{UID: nobody, GID: nobody}})

	r := c.do(proto.HelperRequest{Op: proto.HelperOpExec, Command: "id -u; id -g; id -G; cat " + secret})
	want := fmt.Sprintf("%d\n%d\n%d\n", nobody, nobody, nobody)
	if !strings.HasPrefix(string(r.Body), want) || r.ExitCode == 0 {
		t.Errorf("exec as agent: exit %d, output %q; want ids %q and cat refused", r.ExitCode, r.Body, want)
	}

	if r := c.do(proto.HelperRequest{Op: proto.HelperOpRead, Path: secret, Max: 100}); r.Code != proto.HelperErrPermission || len(r.Body) > 0 {
		t.Errorf("read of a root-only file = %+v, want permission error", r)
	}
	if r := c.do(proto.HelperRequest{Op: proto.HelperOpWrite, Path: filepath.Join(rootDir, "x"), Body: []byte("x")}); r.Code != proto.HelperErrPermission {
		t.Errorf("write into a root folder = %+v, want permission error", r)
	}
	if r := c.do(proto.HelperRequest{Op: proto.HelperOpWrite, Path: secret, Body: []byte("pwned")}); r.Error == "" {
		t.Errorf("write over a root-only file = %+v, want an error", r)
	}
	if b, _ := os.ReadFile(secret); string(b) != "root only" {
		t.Errorf("root-only file now holds %q", b)
	}
	if r := c.do(proto.HelperRequest{Op: proto.HelperOpExec, Command: "true", Dir: rootDir + "/../secret"}); r.ExitCode != 126 {
		t.Errorf("exec in a folder the agent cannot enter = %+v", r)
	}

	if r := c.do(proto.HelperRequest{Op: proto.HelperOpWrite, Path: "sub/new.txt", Body: []byte("hi")}); r.Error != "" {
		t.Fatalf("write = %+v", r)
	}
	for _, p := range []string{filepath.Join(dir, "sub"), filepath.Join(dir, "sub", "new.txt")} {
		st, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if sys := st.Sys().(*syscall.Stat_t); sys.Uid != nobody || sys.Gid != nobody {
			t.Errorf("%s belongs to %d:%d, want the agent's %d:%d", p, sys.Uid, sys.Gid, nobody, nobody)
		}
	}
	if r := c.do(proto.HelperRequest{Op: proto.HelperOpRead, Path: "sub/new.txt", Max: 10}); string(r.Body) != "hi" {
		t.Errorf("read back = %+v", r)
	}
	// The helper's own threads are root again after file operations.
	if uid := os.Geteuid(); uid != 0 {
		t.Errorf("helper euid is %d after the calls", uid)
	}
}

// TestRootUserRunsAsToday: uid 0 (root asked for) and no User switch nothing.
func TestRootUserRunsAsToday(t *testing.T) {
	for _, u := range []*User{nil, {UID: 0, GID: 0}} {
		c := startServe(t, Options{User: u})
		r := c.do(proto.HelperRequest{Op: proto.HelperOpExec, Command: "id -u"})
		if want := strconv.Itoa(os.Geteuid()) + "\n"; string(r.Body) != want {
			t.Errorf("user %v: id -u = %q, want %q", u, r.Body, want)
		}
	}
}

// procsWith lists the live processes whose command line contains mark.
func procsWith(mark string) []string {
	var found []string
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		cl, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err != nil || !strings.Contains(string(cl), mark) {
			continue
		}
		if st, err := os.ReadFile("/proc/" + e.Name() + "/stat"); err == nil && !strings.Contains(string(st), ") Z ") {
			found = append(found, e.Name())
		}
	}
	return found
}

func killAll(pids []string) {
	for _, p := range pids {
		if n, err := strconv.Atoi(p); err == nil {
			syscall.Kill(n, syscall.SIGKILL)
		}
	}
}

// TestTimeoutKillsEverythingTheCallStarted: processes that left the call's
// process group and session (setsid), and ones that keep forking new ones,
// all die when the call times out or is cancelled.
func TestTimeoutKillsEverythingTheCallStarted(t *testing.T) {
	tests := []struct{ name, command string }{
		{"setsid", "for i in 1 2 3; do setsid sh -c 'sleep 600; : MARK' & done; sleep 600"},
		{"setsid grandchildren", "sh -c \"setsid sh -c 'sleep 600; : MARK' & sleep 600\" & sleep 600"},
		{"respawning", "while :; do setsid sh -c 'sleep 600; : MARK' & sleep 0.02; done"},
		{"respawning in new sessions", "setsid sh -c 'while :; do sh -c \"sleep 600; : MARK\" & sleep 0.01; done' & sleep 600"},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mark := fmt.Sprintf("beige-kill-test-%d-%d", os.Getpid(), i)
			cmd := strings.ReplaceAll(tt.command, "MARK", mark)
			c := startServe(t, Options{})
			start := time.Now()
			r := c.do(proto.HelperRequest{Op: proto.HelperOpExec, Command: cmd, TimeoutMs: 400})
			if d := time.Since(start); !r.TimedOut || d > 400*time.Millisecond+KillBound+time.Second {
				t.Errorf("got %+v after %v, want timed out within the kill bound", r, d)
			}
			if left := procsWith(mark); len(left) > 0 {
				t.Errorf("processes of the call still alive after its timeout: %v", left)
				killAll(left)
			}
		})
	}
}

// TestCancelKillsEverythingTheCallStarted: the same for a cancelled call.
func TestCancelKillsEverythingTheCallStarted(t *testing.T) {
	mark := fmt.Sprintf("beige-cancel-test-%d", os.Getpid())
	c := startServe(t, Options{})
	id := c.send(proto.HelperRequest{Op: proto.HelperOpExec, Command: "setsid sh -c 'sleep 600; : " + mark + "' & sleep 600"})
	for range 100 {
		if len(procsWith(mark)) > 0 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	proto.WriteHelperRequest(c.w, &proto.HelperRequest{ID: id, Op: proto.HelperOpCancel})
	if r := c.wait(id); r.Code != proto.HelperErrCancelled {
		t.Errorf("cancelled call = %+v", r)
	}
	if left := procsWith(mark); len(left) > 0 {
		t.Errorf("processes of the cancelled call still alive: %v", left)
		killAll(left)
	}
}

// TestKillHelper: a helper that stopped answering (here: stopped by
// SIGSTOP) is killed, with everything it started, by the kill-helper op of
// a new one; a pid that is not a helper is refused.
func TestKillHelper(t *testing.T) {
	dir := t.TempDir()
	mark := fmt.Sprintf("beige-old-helper-%d", os.Getpid())
	script := filepath.Join(dir, "beige-sandbox")
	if err := os.WriteFile(script, []byte("sleep 600 & sleep 601\n: "+mark+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	old := exec.Command("/bin/sh", script, "serve")
	if err := old.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { old.Wait(); close(exited) }()
	t.Cleanup(func() { old.Process.Kill() })
	var child string
	for range 200 {
		if out, _ := exec.Command("pgrep", "-P", strconv.Itoa(old.Process.Pid)).Output(); len(out) > 0 {
			child = strings.Fields(string(out))[0]
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	syscall.Kill(old.Process.Pid, syscall.SIGSTOP)

	c := startServe(t, Options{})
	other := exec.Command("sleep", "600")
	if err := other.Start(); err != nil {
		t.Fatal(err)
	}
	defer other.Process.Kill()
	for _, pid := range []int{0, 1, os.Getpid(), other.Process.Pid} {
		if r := c.do(proto.HelperRequest{Op: proto.HelperOpKillHelper, Pid: pid}); r.Code != proto.HelperErrInvalid {
			t.Errorf("kill helper %d = %+v, want refused", pid, r)
		}
	}
	if r := c.do(proto.HelperRequest{Op: proto.HelperOpKillHelper, Pid: old.Process.Pid}); r.Error != "" {
		t.Fatalf("kill helper = %+v", r)
	}
	select {
	case <-exited:
	case <-time.After(5 * time.Second):
		t.Fatal("the stopped helper did not die")
	}
	if child != "" {
		waitGone(t, child)
	}
}

func TestPingReportsPid(t *testing.T) {
	c := startServe(t, Options{})
	if r := c.do(proto.HelperRequest{Op: proto.HelperOpPing}); r.Pid != os.Getpid() {
		t.Errorf("ping pid = %d, want %d", r.Pid, os.Getpid())
	}
}

func TestParseUser(t *testing.T) {
	for in, ok := range map[string]bool{"1000:1000": true, "0:0": true, "1000": false, "a:b": false, "-1:0": false, ":": false, "1:2:3": false} {
		if _, err := ParseUser(in); (err == nil) != ok {
			t.Errorf("ParseUser(%q) err = %v", in, err)
		}
	}
}

func FuzzParseStat(f *testing.F) {
	f.Add([]byte("1234 (sh) S 1 1234 1234 0 -1 4194560 100 0 0 0 0 0 0 0 20 0 1 0 5000 1000 100 0 0 0"))
	f.Add([]byte("77 (a) b) c) Z 1 2 3 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 42 0 0"))
	f.Add([]byte("(x) S"))
	f.Fuzz(func(t *testing.T, b []byte) {
		p, ok := parseStat(b)
		if ok && p.pid <= 0 {
			t.Errorf("parseStat accepted pid %d", p.pid)
		}
	})
}

func TestParseStat(t *testing.T) {
	p, ok := parseStat([]byte("77 (a) b) Z 1 2 3 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 42 0 0"))
	if !ok || p.pid != 77 || p.ppid != 1 || p.pgrp != 2 || p.sid != 3 || p.start != 42 || !p.zombie {
		t.Errorf("parseStat = %+v, %v", p, ok)
	}
	self, ok := readSmall("/proc/self/stat", make([]byte, 1024))
	if p, ok2 := parseStat(self); !ok || !ok2 || p.pid != os.Getpid() || p.ppid != os.Getppid() {
		t.Errorf("parseStat(/proc/self/stat) = %+v", p)
	}
}

// TestFileOpsRefuseOwnProc: read and write do not reach the helper's own
// /proc entries (which a process may always open): not its request stream
// (/proc/self/fd/0), not its response stream, not its memory, through
// /proc/self, its pid or a symlink in the workspace.
func TestFileOpsRefuseOwnProc(t *testing.T) {
	dir := t.TempDir()
	pid := strconv.Itoa(os.Getpid())
	os.Symlink("/proc/self/environ", filepath.Join(dir, "link"))
	c := startServe(t, Options{Dir: dir})
	for _, p := range []string{"/proc/self/fd/0", "/proc/self/environ", "/proc/" + pid + "/environ", "/proc/thread-self/environ", "/proc/self/mem", "link"} {
		if r := c.do(proto.HelperRequest{Op: proto.HelperOpRead, Path: p, Max: 100}); r.Error == "" {
			t.Errorf("read %s = %d bytes, want refused", p, len(r.Body))
		}
	}
	for _, p := range []string{"/proc/self/fd/1", "/proc/" + pid + "/fd/1", "/proc/self/attr/current"} {
		if r := c.do(proto.HelperRequest{Op: proto.HelperOpWrite, Path: p, Body: []byte("\x00\x00\x00\x02\x00\x00\x00\x00{}")}); r.Error == "" {
			t.Errorf("write %s succeeded, want refused", p)
		}
	}
	// The stream still works.
	if r := c.do(proto.HelperRequest{Op: proto.HelperOpPing}); r.Version != proto.HelperVersion {
		t.Errorf("ping after the attempts = %+v", r)
	}
	if r := c.do(proto.HelperRequest{Op: proto.HelperOpRead, Path: "/proc/meminfo", Max: 10}); r.Error != "" {
		t.Errorf("read /proc/meminfo = %+v", r)
	}
}

func TestCapEff(t *testing.T) {
	if v, ok := capEff("Name:\tx\nCapPrm:\t00000000000000e0\nCapEff:\t00000000000000e0\n"); !ok || v != 0xe0 {
		t.Errorf("capEff = %#x, %v", v, ok)
	}
	if _, ok := capEff("Name:\tx\n"); ok {
		t.Error("capEff without the line")
	}
	if os.Geteuid() == 0 && missingCaps() != "" {
		t.Logf("this test process lacks %s", missingCaps())
	}
}
