package helper

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/beige-dev/beige/internal/proto"
)

// Bounds of killing a call's processes.
const (
	// KillBound is how long the helper keeps looking for processes of a
	// timed-out or cancelled call before it answers anyway.
	KillBound = time.Second
	// killDrain is how long, after such a kill, the helper waits for the
	// call's output pipe to close.
	killDrain = 250 * time.Millisecond
)

// procStat is what the helper needs of /proc/<pid>/stat.
type procStat struct {
	pid, ppid, pgrp, sid int
	start                uint64 // start time in clock ticks since boot: tells a reused pid apart
	zombie               bool
}

// parseStat parses the content of /proc/<pid>/stat. The command name (field
// 2) is in parentheses and may contain anything, spaces and ')' included, so
// the fields are counted from the last ')'.
func parseStat(b []byte) (procStat, bool) {
	open := bytes.IndexByte(b, '(')
	end := bytes.LastIndexByte(b, ')')
	if open <= 0 || end < open {
		return procStat{}, false
	}
	pid, err := strconv.Atoi(string(bytes.TrimSpace(b[:open])))
	if err != nil || pid <= 0 {
		return procStat{}, false
	}
	// After ')': state(3) ppid(4) pgrp(5) session(6) ... starttime(22).
	f := bytes.Fields(b[end+1:])
	if len(f) < 20 || len(f[0]) != 1 {
		return procStat{}, false
	}
	var p procStat
	p.pid = pid
	p.zombie = f[0][0] == 'Z' || f[0][0] == 'X'
	ints := [3]*int{&p.ppid, &p.pgrp, &p.sid}
	for i, dst := range ints {
		n, err := strconv.Atoi(string(f[1+i]))
		if err != nil {
			return procStat{}, false
		}
		*dst = n
	}
	if p.start, err = strconv.ParseUint(string(f[19]), 10, 64); err != nil {
		return procStat{}, false
	}
	return p, true
}

// listProcs reads the stat of every process in /proc (of the sandbox's pid
// namespace). Processes that vanish while it reads are skipped.
func listProcs() []procStat {
	d, err := os.Open("/proc")
	if err != nil {
		return nil
	}
	defer d.Close()
	names, _ := d.Readdirnames(-1)
	procs := make([]procStat, 0, len(names))
	buf := make([]byte, 1024)
	for _, n := range names {
		if n == "" || n[0] < '0' || n[0] > '9' {
			continue
		}
		b, ok := readSmall("/proc/"+n+"/stat", buf)
		if !ok {
			continue
		}
		if p, ok := parseStat(b); ok {
			procs = append(procs, p)
		}
	}
	return procs
}

func readSmall(name string, buf []byte) ([]byte, bool) {
	f, err := os.Open(name)
	if err != nil {
		return nil, false
	}
	defer f.Close()
	n, err := f.Read(buf)
	if err != nil || n == 0 {
		return nil, false
	}
	return buf[:n], true
}

// killTree kills every process that match selects and every descendant of
// those. So that none of them can fork a new process out of reach while it
// works, it first stops (SIGSTOP) what it finds and scans again, as long as
// a scan finds new ones; once a scan finds nothing new (or half of bound
// has passed) it sends SIGKILL to all of them, and scans and kills again
// until none is alive or bound has passed. Descendants are found by parent
// pid, walked while the parents still live (stopped, they do not exit); a
// process seen once stays targeted by pid and start time even after it was
// re-parented. group, when not 0, is a process group killed with each
// round. It reports whether nothing was left alive.
func killTree(match func(p procStat) bool, group int, bound time.Duration) bool {
	self := os.Getpid()
	targets := map[int]uint64{} // pid → start time
	stopped := map[int]bool{}
	start := time.Now()
	killing := false
	pause := time.Millisecond
	for {
		procs := listProcs()
		children := make(map[int][]int, len(procs))
		byPid := make(map[int]procStat, len(procs))
		var queue []int
		for _, p := range procs {
			if p.pid == self || p.pid == 1 {
				continue
			}
			byPid[p.pid] = p
			children[p.ppid] = append(children[p.ppid], p.pid)
			if st, seen := targets[p.pid]; (seen && st == p.start) || match(p) {
				queue = append(queue, p.pid)
			}
		}
		marked := map[int]bool{}
		for len(queue) > 0 {
			pid := queue[len(queue)-1]
			queue = queue[:len(queue)-1]
			if !marked[pid] {
				marked[pid] = true
				queue = append(queue, children[pid]...)
			}
		}
		var alive []int
		fresh := false
		for pid := range marked {
			p := byPid[pid]
			if st, seen := targets[pid]; !seen || st != p.start {
				targets[pid] = p.start
				delete(stopped, pid)
			}
			if !p.zombie {
				alive = append(alive, pid)
				if !stopped[pid] {
					fresh = true
				}
			}
		}
		if len(alive) == 0 {
			return true
		}
		elapsed := time.Since(start)
		if elapsed > bound {
			return false
		}
		if !killing && (!fresh || elapsed > bound/2) {
			killing = true
		}
		sig := syscall.SIGSTOP
		if killing {
			sig = syscall.SIGKILL
		}
		for _, pid := range alive {
			if sig == syscall.SIGKILL || !stopped[pid] {
				_ = syscall.Kill(pid, sig)
				stopped[pid] = true
			}
		}
		if group > 0 {
			_ = syscall.Kill(-group, sig)
		}
		if killing {
			time.Sleep(pause)
			pause = min(2*pause, 20*time.Millisecond)
		}
	}
}

// killCall kills every process of the call whose sh is leader (it leads
// its own session and process group): the session, the process group, and
// all their descendants, including those that moved to a session or group
// of their own while their parent lived.
func killCall(leader int) bool {
	return killTree(func(p procStat) bool {
		return p.pid == leader || p.pgrp == leader || p.sid == leader
	}, leader, KillBound)
}

// killHelper kills an old helper (req.Pid) that stopped answering, and
// every process it started. The old helper may be stopped (SIGSTOP) or
// hung; SIGKILL ends it either way. A pid that is not another
// `beige-sandbox serve` (reused since the gateway learnt it) is refused.
func (s *server) killHelper(req *proto.HelperRequest) *proto.HelperResponse {
	pid := req.Pid
	if pid <= 1 || pid == os.Getpid() {
		return invalid("kill helper: invalid pid %d", pid)
	}
	cmdline, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	if err != nil {
		return errResponse(err)
	}
	if !isHelperCmdline(cmdline) {
		return invalid("kill helper: process %d is not a beige-sandbox helper", pid)
	}
	if !killTree(func(p procStat) bool { return p.pid == pid }, 0, KillBound) {
		return &proto.HelperResponse{Code: proto.HelperErrInternal,
			Error: fmt.Sprintf("kill helper %d: processes still alive after %v", pid, KillBound)}
	}
	return &proto.HelperResponse{}
}

// isHelperCmdline reports whether a /proc/<pid>/cmdline is that of
// `beige-sandbox serve` (directly, or through an interpreter).
func isHelperCmdline(cmdline []byte) bool {
	argv := bytes.Split(bytes.TrimRight(cmdline, "\x00"), []byte{0})
	for i := 0; i+1 < len(argv) && i < 2; i++ {
		if filepath.Base(string(argv[i])) == "beige-sandbox" && string(argv[i+1]) == "serve" {
			return true
		}
	}
	return false
}
