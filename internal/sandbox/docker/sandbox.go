package docker

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/client"

	"github.com/beige-dev/beige/internal/proto"
	"github.com/beige-dev/beige/internal/sandbox"
)

const (
	// helperRetryDelay is how long a sandbox whose helper failed to start
	// uses docker exec before it tries the helper again.
	helperRetryDelay = 30 * time.Second
	// helperStartTimeout bounds starting a helper and its first ping.
	helperStartTimeout = 10 * time.Second
	// helperGrace is added to an exec's own timeout (which the helper
	// enforces, killing the call's processes within helper.KillBound) before
	// the gateway stops waiting for the helper: the call's deadline bounds
	// the whole call, helper included.
	helperGrace = 3 * time.Second
	// helperFileTimeout is the deadline of a read or write through the helper.
	helperFileTimeout = 20 * time.Second
	// helperCheckTimeout bounds the ping that tells a helper that missed a
	// deadline from a hung one, and the kill of a hung one.
	helperCheckTimeout = 2 * time.Second
)

// errHelperStalled is returned by a call whose helper did not answer by the
// call's deadline; the helper is then checked and, if hung, replaced.
var errHelperStalled = errors.New("sandbox helper did not answer in time; it is being replaced if hung")

// dockerSandbox is one agent's running container.
type dockerSandbox struct {
	d     *Runtime
	agent string
	id    string
	log   *slog.Logger

	useHelper bool
	user      string // "uid:gid" agent code runs as: per-call execs run as it, and it is passed to the helper

	hmu     sync.Mutex
	hc      *helperClient // nil until started, or after it died
	started bool          // a helper was started before: the next is a restart
	retryAt time.Time     // no helper start before this
	closed  bool

	fmu    sync.Mutex
	frozen int // how many Freezes are not thawed yet
}

var (
	_ sandbox.Sandbox = (*dockerSandbox)(nil)
	_ sandbox.Freezer = (*dockerSandbox)(nil)
)

// Freeze implements Freezer with docker pause (the cgroup freezer).
func (s *dockerSandbox) Freeze(ctx context.Context) (func(), error) {
	s.fmu.Lock()
	defer s.fmu.Unlock()
	if s.frozen == 0 {
		if _, err := s.d.api.ContainerPause(ctx, s.id, client.ContainerPauseOptions{}); err != nil {
			return nil, fmt.Errorf("freeze sandbox %q: %w", s.agent, mapExecErr(err)) // gone or stopped: ErrNotRunning
		}
	}
	s.frozen++
	var once sync.Once
	return func() { once.Do(s.thaw) }, nil
}

// isFrozen reports whether a Freeze is not thawed yet.
func (s *dockerSandbox) isFrozen() bool {
	s.fmu.Lock()
	defer s.fmu.Unlock()
	return s.frozen > 0
}

func (s *dockerSandbox) thaw() {
	s.fmu.Lock()
	defer s.fmu.Unlock()
	s.frozen--
	if s.frozen > 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := s.d.api.ContainerUnpause(ctx, s.id, client.ContainerUnpauseOptions{}); err != nil {
		// The next Ensure unpauses a sandbox it finds paused.
		s.log.Error("could not unpause the sandbox", "err", err)
	}
}

func newDockerSandbox(d *Runtime, spec sandbox.Spec, id string) *dockerSandbox {
	s := &dockerSandbox{
		d: d, agent: spec.Agent, id: id,
		log:       d.log.With("agent", spec.Agent),
		useHelper: !d.noHelper && spec.HelperBinary != "",
	}
	uid, gid, err := sandbox.ParseUser(spec.User)
	if err != nil {
		// The config was validated; never fall back to root.
		s.log.Error("invalid sandbox user; using the default", "user", spec.User, "err", err)
		uid, gid, _ = sandbox.ParseUser("")
	}
	s.user = fmt.Sprintf("%d:%d", uid, gid)
	return s
}

func (s *dockerSandbox) ID() string { return s.id }

// UsesHelper reports whether calls currently go through the helper (fast
// path) rather than per-call docker exec; it starts the helper if needed.
func (s *dockerSandbox) UsesHelper(ctx context.Context) bool { return s.helper(ctx) != nil }

// helper returns a live helper client, starting one when there is none, or
// nil when calls must use docker exec.
func (s *dockerSandbox) helper(ctx context.Context) *helperClient {
	if !s.useHelper {
		return nil
	}
	s.hmu.Lock()
	defer s.hmu.Unlock()
	if s.closed {
		return nil
	}
	if s.hc != nil && s.hc.stalled.Load() {
		s.checkHelperLocked(s.hc) // replaces it if it is hung
	}
	if s.hc != nil {
		if !s.hc.dead() {
			return s.hc
		}
		s.log.Warn("sandbox helper exited; restarting it", "err", s.hc.deathErr())
		s.hc = nil
	}
	if time.Now().Before(s.retryAt) {
		return nil
	}
	// Starting serves every caller waiting on hmu, so it must not die with
	// the ctx of the one that happened to start it.
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), helperStartTimeout)
	defer cancel()
	hc, err := s.startHelper(sctx)
	if err != nil {
		s.log.Warn("sandbox helper unavailable; using docker exec", "err", err, "retry_in", helperRetryDelay)
		s.retryAt = time.Now().Add(helperRetryDelay)
		return nil
	}
	s.hc = hc
	if s.started && s.d.onRestart != nil {
		s.d.onRestart(s.agent)
	}
	s.started = true
	return hc
}

// fellBack counts a call made by docker exec although the sandbox uses
// the helper (it was not available, or the body too large for it).
func (s *dockerSandbox) fellBack() {
	if s.useHelper && s.d.onFallback != nil {
		s.d.onFallback(s.agent)
	}
}

// retryHelperNow lets the next call try to start the helper even if a
// start failed recently.
func (s *dockerSandbox) retryHelperNow() {
	s.hmu.Lock()
	s.retryAt = time.Time{}
	s.hmu.Unlock()
}

// startHelper runs `beige-sandbox serve` as one long-lived exec and pings it.
// The helper runs as root (whatever the container's user) so that agent
// processes cannot reach it, and runs agent code as s.user.
func (s *dockerSandbox) startHelper(ctx context.Context) (*helperClient, error) {
	start := time.Now()
	api := s.d.api
	ex, err := api.ExecCreate(ctx, s.id, client.ExecCreateOptions{
		User:         sandbox.RootUser,
		Cmd:          []string{sandbox.HelperPath, "serve", "--user", s.user},
		AttachStdin:  true,
		AttachStdout: true,
		AttachStderr: true,
		WorkingDir:   sandbox.WorkspacePath,
	})
	if err != nil {
		return nil, mapExecErr(err)
	}
	att, err := api.ExecAttach(ctx, ex.ID, client.ExecAttachOptions{})
	if err != nil {
		return nil, mapExecErr(err)
	}
	hr := att.HijackedResponse
	stderr := newLogWriter(s.log.With("from", "helper"))
	pr, pw := io.Pipe()
	// Tearing down closes the pipe too, so a StdCopy blocked writing into it
	// (the read loop stopped on a bad frame) returns.
	hc := newHelperClient(hr.Conn, pr, hr.CloseWrite, func() { hr.Close(); pr.Close() })
	go func() {
		_, err := stdcopy.StdCopy(pw, stderr, hr.Reader)
		stderr.flush()
		if err == nil {
			err = errors.New("helper stream ended")
		}
		pw.CloseWithError(err)
	}()
	if err := hc.ping(ctx); err != nil {
		hc.fail(err)
		if tail := stderr.tail(); tail != "" {
			return nil, fmt.Errorf("helper did not answer: %w (it said: %s)", err, tail)
		}
		return nil, fmt.Errorf("helper did not answer: %w", err)
	}
	s.log.Debug("sandbox helper started", "exec", short(ex.ID), "pid", hc.helperPid(), "took", time.Since(start))
	return hc, nil
}

// call sends req to hc and waits at most wait for the answer (0: no limit
// but ctx). When hc misses that deadline the call fails with
// errHelperStalled and hc is checked and, if hung, replaced.
func (s *dockerSandbox) call(ctx context.Context, hc *helperClient, req *proto.HelperRequest, wait time.Duration) (*proto.HelperResponse, error) {
	if wait <= 0 {
		return hc.call(ctx, req)
	}
	cctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	resp, err := hc.call(cctx, req)
	if err != nil && ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) {
		hc.stalled.Store(true) // the next call waits for the check
		go s.checkHelper(hc)
		return nil, fmt.Errorf("%w (no answer within %v)", errHelperStalled, wait)
	}
	return resp, err
}

// checkHelper pings hc, which missed a call's deadline; when it does not
// answer that either, it is hung (stopped, say): checkHelper starts a new
// helper, has it kill the old one and everything the old one started (a
// stopped process can only be reached from inside the sandbox, as root),
// and drops the old connection, which fails the calls still waiting on it.
// Calls arriving meanwhile wait for the outcome (they need hmu).
func (s *dockerSandbox) checkHelper(hc *helperClient) {
	s.hmu.Lock()
	defer s.hmu.Unlock()
	s.checkHelperLocked(hc)
}

// checkHelperLocked is checkHelper with s.hmu held.
func (s *dockerSandbox) checkHelperLocked(hc *helperClient) {
	if s.hc != hc || s.closed || hc.dead() || !hc.stalled.Swap(false) {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), helperCheckTimeout)
	err := hc.ping(ctx)
	cancel()
	if err == nil {
		s.log.Warn("sandbox helper missed a call's deadline but answers; keeping it")
		return
	}
	if s.isFrozen() {
		// docker pause stops the helper too; it is not hung.
		s.log.Warn("sandbox helper did not answer while the sandbox is frozen; keeping it")
		return
	}
	s.log.Warn("sandbox helper hung; replacing it", "pid", hc.helperPid(), "err", err)
	s.hc = nil
	hc.fail(errors.New("hung; replaced"))
	sctx, cancel := context.WithTimeout(context.Background(), helperStartTimeout)
	defer cancel()
	nhc, err := s.startHelper(sctx)
	if err != nil {
		s.log.Warn("sandbox helper unavailable; using docker exec", "err", err, "retry_in", helperRetryDelay)
		s.retryAt = time.Now().Add(helperRetryDelay)
		return
	}
	s.hc = nhc
	if pid := hc.helperPid(); pid > 0 {
		go s.killHelper(nhc, pid) // calls need not wait for it
	}
}

// killHelper has the helper hc kill the hung helper pid and everything it
// started.
func (s *dockerSandbox) killHelper(hc *helperClient, pid int) {
	ctx, cancel := context.WithTimeout(context.Background(), helperCheckTimeout+2*time.Second)
	defer cancel()
	resp, err := hc.call(ctx, &proto.HelperRequest{Op: proto.HelperOpKillHelper, Pid: pid})
	if err == nil && resp.Error != "" {
		err = errors.New(resp.Error)
	}
	if err != nil {
		s.log.Error("could not kill the hung sandbox helper", "pid", pid, "err", err)
		return
	}
	s.log.Info("killed the hung sandbox helper", "pid", pid)
}

// close drops the helper (it exits on stdin EOF); the container keeps running.
func (s *dockerSandbox) close() {
	s.hmu.Lock()
	hc := s.hc
	s.hc, s.closed = nil, true
	s.hmu.Unlock()
	if hc != nil {
		hc.close()
	}
}

// Exec implements Sandbox.
func (s *dockerSandbox) Exec(ctx context.Context, req sandbox.ExecRequest) (sandbox.ExecResult, error) {
	req, err := req.Normalize()
	if err != nil {
		return sandbox.ExecResult{}, fmt.Errorf("exec in sandbox %q: %w", s.agent, err)
	}
	if s.d.closed.Load() {
		return sandbox.ExecResult{}, fmt.Errorf("exec in sandbox %q: %w", s.agent, ErrClosed)
	}
	start := time.Now()
	var res sandbox.ExecResult
	if hc := s.helper(ctx); hc != nil && len(req.Stdin) <= proto.MaxHelperBody {
		res, err = s.helperExec(ctx, hc, req)
	} else {
		s.fellBack()
		res, err = s.dockerExecCommand(ctx, req)
	}
	res.Duration = time.Since(start)
	if err != nil {
		return res, fmt.Errorf("exec in sandbox %q: %w", s.agent, err)
	}
	return res, nil
}

func (s *dockerSandbox) helperExec(ctx context.Context, hc *helperClient, req sandbox.ExecRequest) (sandbox.ExecResult, error) {
	hreq := &proto.HelperRequest{
		Op:          proto.HelperOpExec,
		Command:     req.Command,
		Env:         req.Env,
		Dir:         req.Dir,
		OutputLimit: req.OutputLimit,
		Body:        req.Stdin,
	}
	if req.Timeout > 0 {
		hreq.TimeoutMs = max(1, int64((req.Timeout+time.Millisecond-1)/time.Millisecond))
	}
	var wait time.Duration
	if req.Timeout > 0 {
		wait = req.Timeout + helperGrace
	}
	resp, err := s.call(ctx, hc, hreq, wait)
	if err != nil {
		return sandbox.ExecResult{}, err
	}
	if resp.Error != "" {
		return sandbox.ExecResult{}, helperError(resp)
	}
	return sandbox.ExecResult{
		Output:      resp.Body,
		OutputBytes: resp.OutputBytes,
		ExitCode:    resp.ExitCode,
		TimedOut:    resp.TimedOut,
	}, nil
}

// ReadFile implements Sandbox. A relative path is relative to /workspace;
// max is capped at proto.MaxHelperBody, and max <= 0 returns only the size.
func (s *dockerSandbox) ReadFile(ctx context.Context, p string, max int64) ([]byte, int64, error) {
	p = sandbox.ResolvePath(p)
	max = min(max, proto.MaxHelperBody)
	var data []byte
	var size int64
	var err error
	if s.d.closed.Load() {
		err = ErrClosed
	} else if hc := s.helper(ctx); hc != nil {
		var resp *proto.HelperResponse
		resp, err = s.call(ctx, hc, &proto.HelperRequest{Op: proto.HelperOpRead, Path: p, Max: max}, helperFileTimeout)
		if err == nil && resp.Error != "" {
			err = helperError(resp)
		}
		if err == nil {
			data, size = resp.Body, resp.Size
		}
	} else {
		s.fellBack()
		data, size, err = s.dockerReadFile(ctx, p, max)
	}
	if err != nil {
		return nil, 0, fmt.Errorf("read %s in sandbox %q: %w", p, s.agent, err)
	}
	return data, size, nil
}

// WriteFile implements Sandbox. A relative path is relative to /workspace.
func (s *dockerSandbox) WriteFile(ctx context.Context, p string, data []byte) error {
	p = sandbox.ResolvePath(p)
	var err error
	if s.d.closed.Load() {
		err = ErrClosed
	} else if hc := s.helper(ctx); hc != nil && len(data) <= proto.MaxHelperBody {
		var resp *proto.HelperResponse
		resp, err = s.call(ctx, hc, &proto.HelperRequest{Op: proto.HelperOpWrite, Path: p, Body: data}, helperFileTimeout)
		if err == nil && resp.Error != "" {
			err = helperError(resp)
		}
	} else {
		s.fellBack()
		err = s.dockerWriteFile(ctx, p, data)
	}
	if err != nil {
		return fmt.Errorf("write %s in sandbox %q: %w", p, s.agent, err)
	}
	return nil
}

// helperError maps an error response to the package's sentinels.
func helperError(resp *proto.HelperResponse) error {
	switch resp.Code {
	case proto.HelperErrNotExist:
		return sandbox.ErrNotExist
	case proto.HelperErrIsDir:
		return sandbox.ErrIsDir
	}
	return fmt.Errorf("sandbox helper: %s", resp.Error)
}

// logWriter logs what the helper writes on stderr, a line at a time, and
// keeps the last bytes for error messages.
type logWriter struct {
	log  *slog.Logger
	mu   sync.Mutex
	line []byte
	last []byte
}

func newLogWriter(log *slog.Logger) *logWriter { return &logWriter{log: log} }

func (w *logWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.last = append(w.last, p...)
	if len(w.last) > 1024 {
		w.last = w.last[len(w.last)-1024:]
	}
	w.line = append(w.line, p...)
	for {
		i := bytes.IndexByte(w.line, '\n')
		if i < 0 {
			break
		}
		w.emit(w.line[:i])
		w.line = w.line[i+1:]
	}
	if len(w.line) > 4096 {
		w.emit(w.line)
		w.line = nil
	}
	return len(p), nil
}

func (w *logWriter) emit(line []byte) {
	if s := strings.TrimSpace(string(line)); s != "" {
		w.log.Warn("sandbox helper stderr", "line", s)
	}
}

func (w *logWriter) flush() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.emit(w.line)
	w.line = nil
}

func (w *logWriter) tail() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return strings.TrimSpace(string(w.last))
}
