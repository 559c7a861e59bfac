package helper

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/beige-dev/beige/internal/proto"
)

// exec runs sh -c req.Command as the agent's user, in its own session and
// process group. stdout and stderr share one pipe, so the output is
// interleaved exactly as 2>&1 would. A timeout or cancel kills every
// process of the call (killCall).
func (s *server) exec(ctx context.Context, req *proto.HelperRequest) *proto.HelperResponse {
	env, err := mergeEnv(s.env, req.Env)
	if err != nil {
		return invalid("%v", err)
	}
	limit := req.OutputLimit
	if limit <= 0 {
		limit = DefaultOutputLimit
	}
	limit = min(limit, proto.MaxHelperBody)

	dir := s.resolve(req.Dir)
	var st fs.FileInfo
	if err := s.asAgent(func() (err error) { st, err = os.Stat(dir); return err }); err != nil || !st.IsDir() {
		// As docker exec does: exit 126 with the reason as output.
		if err == nil {
			err = syscall.ENOTDIR
		}
		msg := fmt.Sprintf("beige-sandbox: working folder %s: %v\n", dir, unwrapPathError(err))
		return &proto.HelperResponse{ExitCode: 126, Body: []byte(msg), OutputBytes: int64(len(msg))}
	}
	pr, pw, err := os.Pipe()
	if err != nil {
		return errResponse(err)
	}
	cmd := exec.Command(s.shell, "-c", req.Command)
	cmd.Dir = dir
	cmd.Env = env
	cmd.Stdout = pw
	cmd.Stderr = pw
	if len(req.Body) > 0 {
		cmd.Stdin = bytes.NewReader(req.Body)
		// A background process may keep stdin open without reading it; do not
		// let that hold Wait for ever.
		cmd.WaitDelay = time.Second
	}
	// Credential (when set) has no supplementary groups.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Credential: s.cred}

	start := time.Now()
	if err := cmd.Start(); err != nil {
		pr.Close()
		pw.Close()
		return errResponse(err)
	}
	pw.Close() // the children hold the write end now

	out := &cappedBuffer{limit: limit}
	readDone := make(chan struct{})
	go func() {
		defer close(readDone)
		defer pr.Close()
		out.readFrom(pr)
	}()
	waitDone := make(chan error, 1)
	go func() { waitDone <- cmd.Wait() }()

	var timer <-chan time.Time
	if req.TimeoutMs > 0 {
		t := time.NewTimer(time.Duration(req.TimeoutMs) * time.Millisecond)
		defer t.Stop()
		timer = t.C
	}
	var timedOut, cancelled bool
	select {
	case err = <-waitDone:
	case <-timer:
		timedOut = true
	case <-ctx.Done():
		cancelled = true
	}
	if timedOut || cancelled {
		// sh's pid, the call's session and group id, stays reserved while
		// any member of them lives, so matching on it finds only the call's.
		if !killCall(cmd.Process.Pid) {
			s.logf("exec %d: processes of the call still alive after %v", req.ID, KillBound)
		}
		err = <-waitDone
	}
	// sh is gone. When nothing else of its process group is alive, every
	// writer of the pipe has exited and the reader is sure to reach EOF soon:
	// wait for it, however busy the machine is, so no output is lost. When
	// something lives on (a background job holding the pipe), give it a
	// moment, then stop recording.
	wait := s.grace
	if syscall.Kill(-cmd.Process.Pid, 0) == syscall.ESRCH {
		wait = max(wait, drainTimeout)
	}
	// The call's own deadline bounds the drain too: the gateway waits only a
	// little past it.
	if timedOut || cancelled {
		wait = min(wait, killDrain)
	} else if req.TimeoutMs > 0 {
		left := time.Until(start.Add(time.Duration(req.TimeoutMs) * time.Millisecond))
		wait = min(wait, max(left, 0)+killDrain)
	}
	grace := time.NewTimer(wait)
	select {
	case <-readDone:
	case <-grace.C:
		out.abandon()
	}
	grace.Stop()

	resp := &proto.HelperResponse{TimedOut: timedOut, DurationUs: time.Since(start).Microseconds()}
	resp.Body, resp.OutputBytes = out.snapshot()
	resp.ExitCode, err = exitCode(cmd, err)
	if err != nil {
		return errResponse(err)
	}
	if cancelled {
		resp.Code, resp.Error = proto.HelperErrCancelled, "cancelled"
	}
	return resp
}

func unwrapPathError(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// drainTimeout bounds the wait for the output of a command whose processes
// have all exited.
const drainTimeout = 10 * time.Second

// exitCode returns the exit status of cmd, 128+n for death by signal n.
func exitCode(cmd *exec.Cmd, waitErr error) (int, error) {
	ps := cmd.ProcessState
	if ps == nil {
		if waitErr == nil {
			waitErr = errors.New("no process state")
		}
		return -1, waitErr
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal()), nil
	}
	var ee *exec.ExitError
	if waitErr != nil && !errors.As(waitErr, &ee) && !errors.Is(waitErr, exec.ErrWaitDelay) {
		return ps.ExitCode(), waitErr
	}
	return ps.ExitCode(), nil
}

// mergeEnv returns base with extra set over it (extra in sorted key order).
func mergeEnv(base []string, extra map[string]string) ([]string, error) {
	if len(extra) == 0 {
		return base, nil
	}
	keys := make([]string, 0, len(extra))
	for k := range extra {
		if k == "" || strings.ContainsAny(k, "=\x00") || strings.ContainsRune(extra[k], 0) {
			return nil, fmt.Errorf("invalid environment variable %q", k)
		}
		keys = append(keys, k)
	}
	slices.Sort(keys)
	env := make([]string, 0, len(base)+len(keys))
	for _, kv := range base {
		k, _, _ := strings.Cut(kv, "=")
		if _, over := extra[k]; !over {
			env = append(env, kv)
		}
	}
	for _, k := range keys {
		env = append(env, k+"="+extra[k])
	}
	return env, nil
}

// cappedBuffer keeps the first limit bytes written and counts all of them.
type cappedBuffer struct {
	mu        sync.Mutex
	limit     int
	buf       []byte
	total     int64
	abandoned bool
}

// readFrom reads r until EOF or error. After abandon it keeps draining r so
// writers do not block or get SIGPIPE, but it no longer records anything.
func (c *cappedBuffer) readFrom(r *os.File) {
	chunk := make([]byte, 32<<10)
	for {
		n, err := r.Read(chunk)
		if n > 0 {
			c.mu.Lock()
			if !c.abandoned {
				c.total += int64(n)
				if room := c.limit - len(c.buf); room > 0 {
					c.buf = append(c.buf, chunk[:min(n, room)]...)
				}
			}
			c.mu.Unlock()
		}
		if err != nil {
			return
		}
	}
}

func (c *cappedBuffer) abandon() {
	c.mu.Lock()
	c.abandoned = true
	c.mu.Unlock()
}

func (c *cappedBuffer) snapshot() ([]byte, int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.buf), c.total
}
