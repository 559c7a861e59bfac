package cli

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/beige-dev/beige/internal/home"
)

// The PID file alone proves nothing: a gateway killed with SIGKILL leaves it
// behind, and its pid is soon reused by some other process. So the running
// gateway holds an exclusive flock on $BEIGE_HOME/gateway.lock for its whole
// life (the kernel drops it when the process dies, zombie or not), and every
// command believes gateway.pid only while that lock is held, and only for
// the process that holds it.

// gatewayLock is the lock a running gateway holds.
type gatewayLock struct{ f *os.File }

// errLocked says another gateway of this home holds the lock.
var errLocked = errors.New("gateway: the lock is held")

// openLockFile opens gateway.lock, never through a symlink.
func openLockFile(h home.Home) (*os.File, error) {
	return os.OpenFile(h.LockFile(), os.O_RDWR|os.O_CREATE|syscall.O_NOFOLLOW, 0o600)
}

// dyingWait is how long acquireGatewayLock waits for a lock whose holder is
// already dead (a killed gateway whose threads are still exiting).
const dyingWait = 3 * time.Second

// acquireGatewayLock takes the lock for this process, or returns errLocked.
func acquireGatewayLock(h home.Home) (*gatewayLock, error) {
	f, err := openLockFile(h)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", h.LockFile(), err)
	}
	deadline := time.Now().Add(dyingWait)
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return &gatewayLock{f: f}, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			f.Close()
			return nil, fmt.Errorf("lock %s: %w", h.LockFile(), err)
		}
		// Held. By a live gateway: refuse. By one that is dead but not yet
		// gone (a zombie whose other threads still exit): wait a little.
		if _, ok := runningPID(h); ok || time.Now().After(deadline) {
			f.Close()
			return nil, errLocked
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Release drops the lock.
func (l *gatewayLock) Release() {
	if l != nil && l.f != nil {
		l.f.Close()
		l.f = nil
	}
}

// lockHeld reports whether some process holds gateway.lock, and the inode
// of the lock file (for /proc/locks).
func lockHeld(h home.Home) (held bool, ino uint64) {
	f, err := os.OpenFile(h.LockFile(), os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return false, 0 // no lock file: no gateway ever ran here with this version
	}
	defer f.Close()
	var st syscall.Stat_t
	if err := syscall.Fstat(int(f.Fd()), &st); err == nil {
		ino = st.Ino
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_SH|syscall.LOCK_NB); err != nil {
		return errors.Is(err, syscall.EWOULDBLOCK), ino
	}
	syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
	return false, ino
}

// lockHolders lists the pids that /proc/locks says hold a flock on inode
// ino; ok is false when /proc/locks cannot be read.
func lockHolders(ino uint64) (pids []int, ok bool) {
	f, err := os.Open("/proc/locks")
	if err != nil {
		return nil, false
	}
	defer f.Close()
	suffix := ":" + strconv.FormatUint(ino, 10)
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// "1: FLOCK  ADVISORY  WRITE 1234 08:01:5678 0 EOF"; blocked waiters
		// have a "->" field after the number.
		fields := strings.Fields(sc.Text())
		if len(fields) > 1 && fields[1] == "->" {
			continue
		}
		if len(fields) < 6 || fields[1] != "FLOCK" || !strings.HasSuffix(fields[5], suffix) {
			continue
		}
		if pid, err := strconv.Atoi(fields[4]); err == nil && pid > 0 {
			pids = append(pids, pid)
		}
	}
	return pids, sc.Err() == nil
}

// readPIDFile returns the pid written in gateway.pid, or 0.
func readPIDFile(h home.Home) int {
	data, err := os.ReadFile(h.PIDFile())
	if err != nil {
		return 0
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil || pid <= 0 {
		return 0
	}
	return pid
}

// alive reports whether pid is a live process: it exists and is not a zombie.
func alive(pid int) bool {
	if err := syscall.Kill(pid, 0); err != nil && !errors.Is(err, syscall.EPERM) {
		return false
	}
	return !isZombie(pid)
}

// sameExecutable reports whether pid runs the same program file as this
// process (the file may have been replaced since: "/x (deleted)").
func sameExecutable(pid int) bool {
	self, err := os.Executable()
	if err != nil {
		return false
	}
	if a, err := os.Stat("/proc/" + strconv.Itoa(pid) + "/exe"); err == nil {
		if b, err := os.Stat(self); err == nil && os.SameFile(a, b) {
			return true
		}
	}
	target, err := os.Readlink("/proc/" + strconv.Itoa(pid) + "/exe")
	return err == nil && strings.TrimSuffix(target, " (deleted)") == self
}

// runningPID returns the pid of the gateway of this home when one runs: the
// lock on gateway.lock is held, and the process named by gateway.pid is
// alive and is the one holding it. When the PID file names someone else (or
// nothing) while the lock is held, the holder from /proc/locks is returned.
// The holder must be a live process (a zombie is dead) running beige.
func runningPID(h home.Home) (int, bool) {
	held, ino := lockHeld(h)
	if !held {
		return 0, false
	}
	pid := readPIDFile(h)
	holders, ok := lockHolders(ino)
	if !ok {
		// No /proc/locks: fall back on the program file.
		if pid > 0 && alive(pid) && sameExecutable(pid) {
			return pid, true
		}
		return 0, false
	}
	for _, p := range holders {
		if p == pid && alive(p) && beigeProgram(p) {
			return p, true
		}
	}
	for _, p := range holders {
		if alive(p) && beigeProgram(p) {
			return p, true
		}
	}
	return 0, false
}

// beigeProgram reports whether pid runs beige: this very program file, or
// one named beige* (another build or install of it). A process that merely
// holds a lock on gateway.lock (`flock gateway.lock sleep 99`) is not it.
func beigeProgram(pid int) bool {
	if sameExecutable(pid) {
		return true
	}
	target, err := os.Readlink("/proc/" + strconv.Itoa(pid) + "/exe")
	return err == nil && strings.HasPrefix(filepath.Base(strings.TrimSuffix(target, " (deleted)")), "beige")
}
