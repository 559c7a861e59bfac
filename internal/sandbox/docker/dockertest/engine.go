package dockertest

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/moby/moby/client"

	"github.com/beige-dev/beige/internal/sandbox/docker"
)

// Engine is a private Docker engine a test started: its own dockerd on its
// own socket, data root and exec root (with its own managed containerd), no
// bridge, no iptables, no live restore, so that stopping it kills its
// containers. It never touches the machine's engine.
type Engine struct {
	t       testing.TB
	dir     string // short, under /tmp: the socket path is limited to 108 bytes
	Host    string // DOCKER_HOST of the engine: unix://<dir>/docker.sock
	logPath string
	cmd     *exec.Cmd
	done    chan struct{} // closed when cmd has exited
	killed  bool          // the last stop was a SIGKILL: containers may outlive dockerd
	cli     *client.Client
}

// StartEngine starts a private dockerd and waits (at most 60 s) until it
// answers. It skips the test when not root or when dockerd is missing. The
// engine is stopped and its data root removed (after unmounting whatever is
// left under it) when the test ends.
func StartEngine(t testing.TB) *Engine {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("a private dockerd needs root")
	}
	if _, err := exec.LookPath("dockerd"); err != nil {
		t.Skipf("no dockerd to start a private engine: %v", err)
	}
	dir, err := os.MkdirTemp("/tmp", "bge-")
	if err != nil {
		t.Fatal(err)
	}
	e := &Engine{
		t:       t,
		dir:     dir,
		Host:    "unix://" + filepath.Join(dir, "docker.sock"),
		logPath: filepath.Join(t.TempDir(), "dockerd.log"),
	}
	// An empty config file: the machine's /etc/docker/daemon.json (if any)
	// is not this engine's.
	if err := os.WriteFile(filepath.Join(dir, "daemon.json"), []byte("{}"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.cleanup)
	cli, err := client.New(client.WithHost(e.Host))
	if err != nil {
		t.Fatalf("client of the private engine: %v", err)
	}
	e.cli = cli
	e.Start()
	return e
}

// Start starts dockerd (again, on the same data root) and waits until it
// answers; it returns the moment it first did.
func (e *Engine) Start() time.Time {
	e.t.Helper()
	at, err := e.start()
	if err != nil {
		e.t.Fatal(err)
	}
	return at
}

func (e *Engine) start() (time.Time, error) {
	if e.cmd != nil {
		return time.Time{}, errors.New("the private engine is already running")
	}
	logf, err := os.OpenFile(e.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return time.Time{}, err
	}
	defer logf.Close()
	cmd := exec.Command("dockerd",
		"--config-file", filepath.Join(e.dir, "daemon.json"),
		"-H", e.Host,
		"--data-root", filepath.Join(e.dir, "data"),
		"--exec-root", filepath.Join(e.dir, "exec"),
		"--pidfile", filepath.Join(e.dir, "docker.pid"),
		"--bridge=none", "--iptables=false", "--ip-masq=false", "--ip-forward=false",
		"--userland-proxy=false",
	)
	cmd.Stdout, cmd.Stderr = logf, logf
	// Its own process group, so that a signal to the test's group does
	// not reach it, and it does not outlive a killed test by being ours.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return time.Time{}, fmt.Errorf("start dockerd: %w", err)
	}
	e.cmd, e.done = cmd, make(chan struct{})
	go func(done chan struct{}) { cmd.Wait(); close(done) }(e.done)
	deadline := time.Now().Add(60 * time.Second)
	for {
		select {
		case <-e.done:
			e.cmd = nil
			return time.Time{}, fmt.Errorf("dockerd exited: %v\n%s", cmd.ProcessState, e.Log())
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_, err := e.cli.Ping(ctx, client.PingOptions{NegotiateAPIVersion: true})
		cancel()
		if err == nil {
			e.killed = false
			return time.Now(), nil
		}
		if time.Now().After(deadline) {
			return time.Time{}, fmt.Errorf("the private dockerd does not answer after 60 s: %v\n%s", err, e.Log())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Stop stops dockerd: SIGTERM, then SIGKILL after 20 s. Its containers die
// with it (no live restore).
func (e *Engine) Stop() {
	e.t.Helper()
	if e.cmd == nil {
		return
	}
	e.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-e.done:
	case <-time.After(20 * time.Second):
		e.t.Logf("the private dockerd did not stop within 20 s of SIGTERM; killing it")
		e.cmd.Process.Kill()
		<-e.done
		e.killed = true
	}
	e.cmd = nil
}

// Kill kills dockerd with SIGKILL, as a crash would: its managed
// containerd dies with it, but containers may go on running in their
// shims until the engine starts again (without live restore it then
// kills them).
func (e *Engine) Kill() {
	e.t.Helper()
	if e.cmd == nil {
		return
	}
	containerd := readPid(filepath.Join(e.dir, "exec", "containerd", "containerd.pid"))
	e.cmd.Process.Kill()
	<-e.done
	e.cmd, e.killed = nil, true
	// The managed containerd dies with dockerd (its parent-death signal);
	// wait for it, then remove the pid files left behind: on this busy
	// machine pids wrap quickly, and a stale pid file naming a live
	// process makes the next dockerd refuse to start or wait for a
	// containerd that is not there.
	if containerd > 0 {
		for range 250 {
			if syscall.Kill(containerd, 0) != nil {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	os.Remove(filepath.Join(e.dir, "docker.pid"))
	os.Remove(filepath.Join(e.dir, "exec", "containerd", "containerd.pid"))
}

// readPid returns the pid in the file at path, or 0.
func readPid(path string) int {
	data, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil {
		return 0
	}
	return pid
}

// Log returns what dockerd wrote.
func (e *Engine) Log() string {
	data, _ := os.ReadFile(e.logPath)
	return string(data)
}

// Image imports the test image (ImageTag) into the engine and returns its
// tag. It skips the test when there is no static busybox.
func (e *Engine) Image() string {
	e.t.Helper()
	rootfs, err := docker.BusyboxRootFS(docker.BusyboxPath)
	if errors.Is(err, docker.ErrNoBusybox) {
		e.t.Skip("cannot build the test image: " + err.Error())
	}
	if err != nil {
		e.t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := docker.ImportImage(ctx, e.cli, rootfs, ImageTag, "beige test image"); err != nil {
		e.t.Fatalf("import the test image into the private engine: %v", err)
	}
	return ImageTag
}

func (e *Engine) cleanup() {
	if e.t.Failed() {
		e.t.Logf("the private dockerd's log:\n%s", e.Log())
	}
	if e.cmd == nil && e.killed {
		// Containers may still run in their shims: a start kills them.
		if _, err := e.start(); err != nil {
			e.t.Errorf("start the killed private engine again to stop its containers: %v", err)
		}
	}
	if e.cmd != nil && e.cli != nil { // remove its containers while it runs
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		if list, err := e.cli.ContainerList(ctx, client.ContainerListOptions{All: true}); err == nil {
			for _, c := range list.Items {
				e.cli.ContainerRemove(ctx, c.ID, client.ContainerRemoveOptions{Force: true})
			}
		}
		cancel()
	}
	e.Stop()
	if e.cli != nil {
		e.cli.Close()
	}
	for _, m := range mountsUnder(e.dir) { // deepest first
		if err := syscall.Unmount(m, syscall.MNT_DETACH); err != nil {
			e.t.Errorf("unmount %s: %v", m, err)
		}
	}
	if err := os.RemoveAll(e.dir); err != nil {
		e.t.Errorf("remove the private engine's data: %v", err)
	}
}

// mountsUnder lists the mount points at or under dir, deepest first.
func mountsUnder(dir string) []string {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 5 {
			continue
		}
		p := unescapeMount(fields[4])
		if p == dir || strings.HasPrefix(p, dir+"/") {
			out = append(out, p)
		}
	}
	slices.SortFunc(out, func(a, b string) int { return strings.Count(b, "/") - strings.Count(a, "/") })
	return slices.Compact(out)
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			var v int
			if _, err := fmt.Sscanf(s[i+1:i+4], "%o", &v); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
