package cli

import (
	"bufio"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/beige-dev/beige/internal/home"
)

// TestLockHolderHelper is not a test: run as a child (BEIGE_TEST_LOCK_HOLDER
// set) it plays a gateway of $BEIGE_HOME: it takes the lock, writes the PID
// file, says "ready" and waits for SIGTERM.
func TestLockHolderHelper(t *testing.T) {
	if os.Getenv("BEIGE_TEST_LOCK_HOLDER") == "" {
		t.Skip("helper process only")
	}
	h, err := home.Default()
	if err != nil {
		os.Exit(10)
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM)
	lock, err := acquireGatewayLock(h)
	if err != nil {
		os.Exit(11)
	}
	defer lock.Release()
	os.WriteFile(h.PIDFile(), []byte(strconv.Itoa(os.Getpid())+"\n"), 0o600)
	os.Stdout.WriteString("ready\n")
	select {
	case <-sig:
		os.Exit(0)
	case <-time.After(30 * time.Second):
		os.Exit(12)
	}
}

// startLockHolder starts a fake gateway of the test's home and waits until
// it holds the lock.
func startLockHolder(t *testing.T) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestLockHolderHelper$")
	cmd.Env = append(os.Environ(), "BEIGE_TEST_LOCK_HOLDER=1")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || line != "ready\n" {
		t.Fatalf("helper: %q %v", line, err)
	}
	return cmd
}

func startSleep(t *testing.T) *exec.Cmd {
	t.Helper()
	cmd := exec.Command("sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Skip("no sleep program:", err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	return cmd
}

// A PID file that names a process that is not this home's gateway (a pid
// reused by a `sleep`) must never get that process signalled.
func TestStopNeverSignalsAStranger(t *testing.T) {
	dir := withHome(t)
	run(t, "setup")
	sleep := startSleep(t)
	pidFile := filepath.Join(dir, "gateway.pid")
	os.WriteFile(pidFile, []byte(strconv.Itoa(sleep.Process.Pid)+"\n"), 0o600)

	if code, out, _ := run(t, "gateway", "status"); code != ExitNotRunning || !strings.Contains(out, "not running") {
		t.Errorf("status: %d %q", code, out)
	}
	if code, out, errOut := run(t, "gateway", "stop", "--timeout", "1"); code != 0 || !strings.Contains(out, "not running") {
		t.Errorf("stop: %d %q %q", code, out, errOut)
	}
	time.Sleep(50 * time.Millisecond)
	if err := syscall.Kill(sleep.Process.Pid, 0); err != nil || isZombie(sleep.Process.Pid) {
		t.Fatalf("stop signalled the sleep whose pid was in gateway.pid (%v)", err)
	}
	if _, err := os.Stat(pidFile); err == nil {
		t.Error("the stale pid file was kept")
	}
}

// The same, when a gateway does run and holds the lock but the PID file was
// overwritten with a stranger's pid: the gateway is stopped, the stranger
// lives.
func TestStopSignalsTheLockHolderOnly(t *testing.T) {
	dir := withHome(t)
	run(t, "setup")
	gw := startLockHolder(t)
	sleep := startSleep(t)
	os.WriteFile(filepath.Join(dir, "gateway.pid"), []byte(strconv.Itoa(sleep.Process.Pid)+"\n"), 0o600)

	code, out, errOut := run(t, "gateway", "stop", "--timeout", "5")
	if code != 0 || !strings.Contains(out, "gateway stopped") || !strings.Contains(errOut, "pid "+strconv.Itoa(gw.Process.Pid)) {
		t.Errorf("stop: %d %q %q", code, out, errOut)
	}
	if err := gw.Wait(); err != nil {
		t.Errorf("the gateway did not exit cleanly on SIGTERM: %v", err)
	}
	if err := syscall.Kill(sleep.Process.Pid, 0); err != nil || isZombie(sleep.Process.Pid) {
		t.Fatalf("stop signalled the stranger (%v)", err)
	}
}

// A gateway killed with SIGKILL and not yet reaped (a zombie) is dead: it
// no longer holds the lock, and status and start must not take it for a
// running gateway.
func TestKilledGatewayZombieIsNotRunning(t *testing.T) {
	withHome(t)
	run(t, "setup")
	gw := startLockHolder(t)
	pid := gw.Process.Pid
	h, _ := home.Default()
	if p, ok := runningPID(h); !ok || p != pid {
		t.Fatalf("runningPID with the helper up = %d %v, want %d", p, ok, pid)
	}
	if code, out, _ := run(t, "gateway", "status"); code == ExitNotRunning || !strings.Contains(out, "pid "+strconv.Itoa(pid)) {
		t.Errorf("status with the helper up: %d %q", code, out)
	}
	syscall.Kill(pid, syscall.SIGKILL)
	// Not reaped: wait until it is a zombie.
	for i := 0; !isZombie(pid); i++ {
		if i > 500 {
			t.Fatal("the helper did not become a zombie")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if p, ok := runningPID(h); ok {
		t.Errorf("runningPID = %d for a zombie", p)
	}
	if code, out, _ := run(t, "gateway", "status"); code != ExitNotRunning {
		t.Errorf("status after SIGKILL: %d %q", code, out)
	}
	if lock, err := acquireGatewayLock(h); err != nil {
		t.Errorf("a new gateway cannot take the lock: %v", err)
	} else {
		lock.Release()
	}
}

// Two gateways of one home cannot both hold the lock.
func TestGatewayLockIsExclusive(t *testing.T) {
	withHome(t)
	run(t, "setup")
	h, _ := home.Default()
	a, err := acquireGatewayLock(h)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := acquireGatewayLock(h); err != errLocked {
		t.Errorf("second lock: %v, want errLocked", err)
	}
	a.Release()
	b, err := acquireGatewayLock(h)
	if err != nil {
		t.Errorf("after release: %v", err)
	}
	b.Release()
}

// A restart after an agent filled the disk can still write its PID file:
// the reserve left by the last run is released for it.
func TestPIDFileWrittenOnAFullDisk(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to mount a small tmpfs")
	}
	mnt := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", mnt).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs: %v: %s", err, out)
	}
	t.Cleanup(func() { exec.Command("umount", "-l", mnt).Run() })
	h := home.Home{Dir: filepath.Join(mnt, "beige")}
	h.Setup()
	last := home.OpenReserve(h, &home.ReserveOptions{Size: 1 << 20}) // the last run's
	last.Refresh()
	last.Close()
	// Fill the disk, then take even the last free page with the pid file's
	// own first block.
	f, _ := os.Create(filepath.Join(mnt, "fill"))
	buf := make([]byte, 4096)
	for range 1 << 12 {
		if _, err := f.Write(buf); err != nil {
			break
		}
	}
	f.Close()
	os.WriteFile(h.PIDFile(), nil, 0o600)
	r := home.OpenReserve(h, &home.ReserveOptions{Size: 1 << 20})
	defer r.Close()
	if err := writePIDFile(h); err != nil {
		t.Fatalf("write pid file on a full disk: %v", err)
	}
	if pid := readPIDFile(h); pid != os.Getpid() {
		t.Errorf("pid file holds %d", pid)
	}
}

// A process that is not beige but holds a lock on gateway.lock (say
// `flock gateway.lock sleep`) is not taken for the gateway.
func TestLockHeldByAStrangerIsNotTheGateway(t *testing.T) {
	dir := withHome(t)
	run(t, "setup")
	if _, err := exec.LookPath("flock"); err != nil {
		t.Skip("no flock program")
	}
	lockPath := filepath.Join(dir, "gateway.lock")
	os.WriteFile(lockPath, nil, 0o600)
	cmd := exec.Command("flock", "-x", lockPath, "sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	h, _ := home.Default()
	for i := 0; ; i++ {
		if held, _ := lockHeld(h); held {
			break
		}
		if i > 500 {
			t.Fatal("flock never took the lock")
		}
		time.Sleep(10 * time.Millisecond)
	}
	os.WriteFile(filepath.Join(dir, "gateway.pid"), []byte(strconv.Itoa(cmd.Process.Pid)+"\n"), 0o600)
	if code, out, _ := run(t, "gateway", "stop", "--timeout", "1"); code != 0 || !strings.Contains(out, "not running") {
		t.Errorf("stop: %d %q", code, out)
	}
	if err := syscall.Kill(cmd.Process.Pid, 0); err != nil || isZombie(cmd.Process.Pid) {
		t.Fatalf("stop signalled flock (%v)", err)
	}
}
