package helper

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"syscall"
)

// User is the uid:gid agent code runs as. The helper itself runs as root so
// that agent processes (another uid) can neither signal, trace nor open the
// /proc files of the helper; every command it starts and every file
// operation it does runs with the agent's credentials.
type User struct{ UID, GID int }

// Harden marks the process non-dumpable: its /proc/<pid> files (fd/, mem,
// environ) then belong to root and only a process with CAP_SYS_PTRACE may
// open them, and it cannot be ptrace-attached by its own uid either.
func Harden() error {
	if _, _, e := syscall.RawSyscall(syscall.SYS_PRCTL, syscall.PR_SET_DUMPABLE, 0, 0); e != 0 {
		return fmt.Errorf("prctl(PR_SET_DUMPABLE, 0): %w", e)
	}
	return nil
}

// DropGroups drops the helper's own supplementary groups (root's, from the
// image's /etc/group), which would still count in the permission checks of
// file operations made with the agent's fsuid and fsgid: read and write can
// then open only what the agent itself could. `serve --user` calls it for
// a non-root user (in every thread, as Go's Setgroups does).
func DropGroups() error {
	if err := syscall.Setgroups(nil); err != nil {
		return fmt.Errorf("drop the helper's supplementary groups: %w", err)
	}
	return nil
}

// setupUser decides how s switches to u. A nil u, or uid 0, runs everything
// with the helper's own credentials (as before users existed). Switching to
// another user needs root (CAP_SETUID and CAP_SETGID).
func (s *server) setupUser(u *User) error {
	if u == nil || u.UID == 0 {
		return nil
	}
	if u.UID < 0 || u.GID < 0 {
		return fmt.Errorf("invalid user %d:%d", u.UID, u.GID)
	}
	if u.UID == os.Geteuid() && u.GID == os.Getegid() {
		return nil // already that user: nothing to switch
	}
	if os.Geteuid() != 0 {
		return fmt.Errorf("run as user %d:%d: the helper is not root (uid %d)", u.UID, u.GID, os.Geteuid())
	}
	// Root without these (Docker gives a root exec no effective
	// capabilities when the container's own user is not root) could start
	// nothing as the agent and kill none of its processes.
	if missing := missingCaps(); missing != "" {
		return fmt.Errorf("run as user %d:%d: the helper lacks %s (the container's user must be root, with SETUID, SETGID and KILL)", u.UID, u.GID, missing)
	}
	s.user = u
	s.cred = &syscall.Credential{Uid: uint32(u.UID), Gid: uint32(u.GID), Groups: []uint32{}}
	return nil
}

// asAgent runs fn with the agent's file-system credentials: on a locked OS
// thread whose fsuid/fsgid are the agent's, so every open, create, mkdir and
// rename is checked as the agent's would be, and what it creates belongs to
// the agent. Changing the fsuid from 0 also drops the thread's effective
// file capabilities (CAP_DAC_OVERRIDE, CAP_CHOWN, CAP_FOWNER, ...). fn must
// not start goroutines that touch files.
func (s *server) asAgent(fn func() error) error {
	if s.user == nil {
		return fn()
	}
	runtime.LockOSThread()
	if err := setfs(s.user.UID, s.user.GID); err != nil {
		// The thread's credentials are unknown: leave it locked, so that
		// it ends with this goroutine instead of serving another one.
		if setfs(0, 0) == nil {
			runtime.UnlockOSThread()
		}
		return err
	}
	defer func() {
		if setfs(0, 0) == nil {
			runtime.UnlockOSThread()
		}
	}()
	return fn()
}

var errSetfs = errors.New("could not switch the file-system user")

// setfs sets the calling thread's fsgid and fsuid and checks that both took
// (the syscalls return the previous value, never an error).
func setfs(uid, gid int) error {
	const query = uintptr(^uint32(0)) // an invalid id: changes nothing, returns the current one
	syscall.RawSyscall(syscall.SYS_SETFSGID, uintptr(gid), 0, 0)
	if cur, _, _ := syscall.RawSyscall(syscall.SYS_SETFSGID, query, 0, 0); int(cur) != gid {
		return fmt.Errorf("%w: fsgid is %d, want %d", errSetfs, cur, gid)
	}
	syscall.RawSyscall(syscall.SYS_SETFSUID, uintptr(uid), 0, 0)
	if cur, _, _ := syscall.RawSyscall(syscall.SYS_SETFSUID, query, 0, 0); int(cur) != uid {
		return fmt.Errorf("%w: fsuid is %d, want %d", errSetfs, cur, uid)
	}
	return nil
}

// ParseUser parses the "uid:gid" of `serve --user`.
func ParseUser(s string) (*User, error) {
	us, gs, ok := strings.Cut(s, ":")
	uid, err1 := strconv.Atoi(us)
	gid, err2 := strconv.Atoi(gs)
	if !ok || err1 != nil || err2 != nil || uid < 0 || gid < 0 || uid > 1<<31-2 || gid > 1<<31-2 {
		return nil, fmt.Errorf("user %q: want numeric uid:gid", s)
	}
	return &User{UID: uid, GID: gid}, nil
}

// The capabilities the helper needs to run agent code as another user.
var neededCaps = []struct {
	bit  uint
	name string
}{{7, "CAP_SETUID"}, {6, "CAP_SETGID"}, {5, "CAP_KILL"}}

// missingCaps names the needed capabilities not in the helper's effective
// set ("" when it has them all, or when it cannot tell).
func missingCaps() string {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return ""
	}
	eff, ok := capEff(string(data))
	if !ok {
		return ""
	}
	var missing []string
	for _, c := range neededCaps {
		if eff&(1<<c.bit) == 0 {
			missing = append(missing, c.name)
		}
	}
	return strings.Join(missing, ", ")
}

// capEff reads the CapEff line of a /proc/<pid>/status.
func capEff(status string) (uint64, bool) {
	for _, line := range strings.Split(status, "\n") {
		if v, ok := strings.CutPrefix(line, "CapEff:"); ok {
			n, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
			return n, err == nil
		}
	}
	return 0, false
}
