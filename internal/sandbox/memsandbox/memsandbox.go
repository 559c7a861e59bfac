// Package memsandbox is an in-memory implementation of the sandbox
// interfaces (sandbox.Runtime, sandbox.Sandbox, sandbox.Freezer) for tests
// whose subject is not the container engine: the gateway's routing, hooks,
// HTTP routes and prompts run on it without Docker.
//
// A sandbox's files live in a map; commands run through an ExecFunc, by
// default Interpret, a tiny shell of a few builtins (echo, printf, cat,
// sleep, exit, ...). Nothing ever runs on the host and no host path is
// touched: Spec's host folders are recorded, never opened.
//
// It behaves as the Docker runtime does where the gateway and the tools
// rely on it (the conformance test runs one suite against both): relative
// paths are relative to /workspace; ReadFile and WriteFile return
// sandbox.ErrNotExist and sandbox.ErrIsDir; a killed or removed sandbox
// answers sandbox.ErrNotRunning until Ensure starts or recreates it; the
// workspace (a host folder in Docker) survives a recreation, /tmp and
// $HOME (tmpfs) do not survive a restart; Freeze nests.
package memsandbox

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/beige-dev/beige/internal/proto"
	"github.com/beige-dev/beige/internal/sandbox"
)

// ErrClosed is returned by a closed runtime and its sandboxes.
var ErrClosed = errors.New("memsandbox: runtime closed")

// ExecFunc runs one command in sb and returns its whole output; the sandbox
// cuts it to the request's OutputLimit and sets OutputBytes when the
// function leaves it 0. ctx ends at the request's Timeout (the result is
// then marked TimedOut) or when the caller gives up. req.Dir is absolute
// and req.Env holds the sandbox's whole environment (Spec.Env, PATH, HOME
// and the request's own variables).
type ExecFunc func(ctx context.Context, sb *Sandbox, req sandbox.ExecRequest) (sandbox.ExecResult, error)

// Options configure a Runtime.
type Options struct {
	// Exec runs the commands of every sandbox; nil means Interpret.
	Exec ExecFunc
}

// State is the lifecycle state of a sandbox.
type State string

const (
	StateRunning State = "running"
	StateStopped State = "stopped" // killed or stopped: Ensure starts it again
	StateRemoved State = "removed" // gone: Ensure creates a new one
)

// engine is what a container engine would hold: the sandboxes, which
// outlive the runtime (client) that made them.
type engine struct {
	mu        sync.Mutex
	boxes     map[string]*Sandbox // agent -> current sandbox
	nextID    int
	pingErr   error
	ensureErr error
	exec      ExecFunc
}

// Runtime is an in-memory sandbox.Runtime. It is safe for concurrent use.
type Runtime struct {
	e      *engine
	mu     sync.Mutex
	closed bool
}

var _ sandbox.Runtime = (*Runtime)(nil)

// New returns a runtime with no sandboxes.
func New(opts Options) *Runtime {
	ex := opts.Exec
	if ex == nil {
		ex = Interpret
	}
	return &Runtime{e: &engine{boxes: map[string]*Sandbox{}, exec: ex}}
}

// Reopen returns a new runtime over the same sandboxes, as a restarted
// gateway's runtime would re-attach to the containers: r may be closed.
func (r *Runtime) Reopen() *Runtime { return &Runtime{e: r.e} }

func (r *Runtime) isClosed() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.closed
}

// SetExec replaces the ExecFunc of every sandbox (nil: Interpret).
func (r *Runtime) SetExec(f ExecFunc) {
	if f == nil {
		f = Interpret
	}
	r.e.mu.Lock()
	r.e.exec = f
	r.e.mu.Unlock()
}

// SetPingError makes Ping return err (nil: the engine answers again).
func (r *Runtime) SetPingError(err error) {
	r.e.mu.Lock()
	r.e.pingErr = err
	r.e.mu.Unlock()
}

// SetEnsureError makes Ensure fail with err (nil: it works again).
func (r *Runtime) SetEnsureError(err error) {
	r.e.mu.Lock()
	r.e.ensureErr = err
	r.e.mu.Unlock()
}

// Ping reports whether the (simulated) engine answers; see SetPingError.
func (r *Runtime) Ping(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	r.e.mu.Lock()
	defer r.e.mu.Unlock()
	return r.e.pingErr
}

// Ensure implements sandbox.Runtime: it returns the running sandbox of
// spec.Agent, starting a stopped one, and (re)creates it when there is
// none or its spec differs. The workspace's files survive a recreation.
func (r *Runtime) Ensure(ctx context.Context, spec sandbox.Spec) (sandbox.Sandbox, error) {
	if err := spec.Validate(); err != nil {
		return nil, fmt.Errorf("start sandbox %q: %w", spec.Agent, err)
	}
	if r.isClosed() {
		return nil, fmt.Errorf("start sandbox %q: %w", spec.Agent, ErrClosed)
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("start sandbox %q: %w", spec.Agent, err)
	}
	e := r.e
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.ensureErr != nil {
		return nil, fmt.Errorf("start sandbox %q: %w", spec.Agent, e.ensureErr)
	}
	old := e.boxes[spec.Agent]
	if old != nil && reflect.DeepEqual(old.spec, spec) {
		old.mu.Lock()
		if old.state == StateStopped {
			old.startLocked()
		}
		running := old.state == StateRunning
		if running {
			old.rt = r
		}
		old.mu.Unlock()
		if running {
			return old, nil
		}
	}
	var files *tree
	if old != nil {
		files = old.removeAndKeepWorkspace()
	}
	e.nextID++
	sb := newSandbox(r, cloneSpec(spec), fmt.Sprintf("mem-%s-%d", spec.Agent, e.nextID), files)
	e.boxes[spec.Agent] = sb
	return sb, nil
}

// Prune implements sandbox.Runtime: it removes the sandboxes of agents not
// in keep, their workspaces with them, and returns their names, sorted.
func (r *Runtime) Prune(ctx context.Context, keep []string) ([]string, error) {
	if r.isClosed() {
		return nil, fmt.Errorf("prune sandboxes: %w", ErrClosed)
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("prune sandboxes: %w", err)
	}
	r.e.mu.Lock()
	defer r.e.mu.Unlock()
	var removed []string
	for _, agent := range slices.Sorted(maps.Keys(r.e.boxes)) {
		if slices.Contains(keep, agent) {
			continue
		}
		r.e.boxes[agent].remove()
		delete(r.e.boxes, agent)
		removed = append(removed, agent)
	}
	return removed, nil
}

// Close implements sandbox.Runtime: the sandboxes keep running (Reopen
// re-attaches to them), but this runtime and the handles it gave out fail
// with ErrClosed.
func (r *Runtime) Close() error {
	r.mu.Lock()
	r.closed = true
	r.mu.Unlock()
	return nil
}

// Sandbox returns the current sandbox of agent (running or stopped), or nil.
func (r *Runtime) Sandbox(agent string) *Sandbox {
	r.e.mu.Lock()
	defer r.e.mu.Unlock()
	return r.e.boxes[agent]
}

// Agents returns the agents that have a sandbox, sorted.
func (r *Runtime) Agents() []string {
	r.e.mu.Lock()
	defer r.e.mu.Unlock()
	return slices.Sorted(maps.Keys(r.e.boxes))
}

// Kill stops the sandbox of agent behind its runtime's back, as `docker
// kill` does: commands running in it end, and calls fail with
// sandbox.ErrNotRunning until Ensure starts it again.
func (r *Runtime) Kill(agent string) error {
	r.e.mu.Lock()
	sb := r.e.boxes[agent]
	r.e.mu.Unlock()
	if sb == nil {
		return fmt.Errorf("kill sandbox %q: %w", agent, sandbox.ErrNoSuchAgent)
	}
	sb.mu.Lock()
	defer sb.mu.Unlock()
	sb.stopLocked(StateStopped)
	return nil
}

// Remove removes the sandbox of agent behind its runtime's back, as
// `docker rm -f` does: the next Ensure creates a new one (with the
// workspace's files).
func (r *Runtime) Remove(agent string) error {
	r.e.mu.Lock()
	defer r.e.mu.Unlock()
	sb := r.e.boxes[agent]
	if sb == nil {
		return fmt.Errorf("remove sandbox %q: %w", agent, sandbox.ErrNoSuchAgent)
	}
	// Keep only its workspace, for the next sandbox of the agent.
	ws := sb.removeAndKeepWorkspace()
	ghost := newSandbox(nil, sb.spec, "", ws)
	ghost.state = StateRemoved
	r.e.boxes[agent] = ghost
	return nil
}

// Sandbox is one in-memory sandbox; it implements sandbox.Sandbox and
// sandbox.Freezer.
type Sandbox struct {
	agent string
	id    string
	spec  sandbox.Spec

	mu      sync.Mutex
	rt      *Runtime // the runtime that last ensured it (ErrClosed when closed)
	state   State
	files   *tree
	frozen  int
	thawed  chan struct{}      // closed while not frozen
	stopped context.Context    // done when the sandbox stops
	stop    context.CancelFunc // ends the running commands
	execs   []sandbox.ExecRequest
}

var (
	_ sandbox.Sandbox = (*Sandbox)(nil)
	_ sandbox.Freezer = (*Sandbox)(nil)
)

// maxExecLog bounds the requests a sandbox remembers (Execs).
const maxExecLog = 1000

func newSandbox(rt *Runtime, spec sandbox.Spec, id string, files *tree) *Sandbox {
	if files == nil {
		files = newTree()
	}
	s := &Sandbox{agent: spec.Agent, id: id, spec: spec, rt: rt, files: files}
	s.startLocked()
	return s
}

// startLocked (re)starts s: fresh tmpfs folders, nothing frozen.
func (s *Sandbox) startLocked() {
	s.files.reset(sandbox.TmpPath)
	s.files.reset(sandbox.HomePath)
	s.state = StateRunning
	s.frozen = 0
	s.thawed = make(chan struct{})
	close(s.thawed)
	s.stopped, s.stop = context.WithCancel(context.Background())
}

func (s *Sandbox) stopLocked(st State) {
	if s.state == StateRunning {
		s.stop()
	}
	s.state = st
	s.frozen = 0
	select {
	case <-s.thawed:
	default:
		close(s.thawed)
	}
}

func (s *Sandbox) remove() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stopLocked(StateRemoved)
}

// removeAndKeepWorkspace removes s and returns a tree holding only its
// workspace, which in Docker is a host folder that outlives the container.
func (s *Sandbox) removeAndKeepWorkspace() *tree {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stopLocked(StateRemoved)
	return s.files.keepOnly(sandbox.WorkspacePath)
}

// ID implements sandbox.Sandbox.
func (s *Sandbox) ID() string { return s.id }

// Agent is the agent the sandbox belongs to.
func (s *Sandbox) Agent() string { return s.agent }

// Spec is the spec the sandbox was created with.
func (s *Sandbox) Spec() sandbox.Spec { return cloneSpec(s.spec) }

// State is the sandbox's lifecycle state.
func (s *Sandbox) State() State {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.state
}

// Frozen reports whether a Freeze is not thawed yet.
func (s *Sandbox) Frozen() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.frozen > 0
}

// Execs returns the last requests run in the sandbox (at most 1000), oldest
// first, as the sandbox received them.
func (s *Sandbox) Execs() []sandbox.ExecRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.execs)
}

// Peek returns the content of a file as the host would see it, whatever the
// sandbox's state; a relative path is relative to /workspace.
func (s *Sandbox) Peek(p string) ([]byte, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	data, _, err := s.files.read(sandbox.ResolvePath(p), -1)
	return data, err == nil
}

// Put writes a file as the host (or the image) would have put it there,
// whatever the sandbox's state, read-only folders included.
func (s *Sandbox) Put(p string, data []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.files.write(sandbox.ResolvePath(p), data, false)
}

// Env is the environment of the sandbox's commands without a request's
// own variables: Spec.Env, then PATH and HOME (which Spec.Env cannot
// change), and the egress proxy's variables in "proxy" mode.
func (s *Sandbox) Env() map[string]string {
	env := maps.Clone(s.spec.Env)
	if env == nil {
		env = map[string]string{}
	}
	if s.spec.Network == "" || s.spec.Network == sandbox.NetworkProxy {
		maps.Copy(env, sandbox.ProxyEnv())
	}
	env["PATH"] = sandbox.DefaultPATH
	env["HOME"] = sandbox.HomePath
	return env
}

// enter waits until s runs unfrozen and returns the context of its life
// and the runtime that ensured it.
func (s *Sandbox) enter(ctx context.Context, what string) (context.Context, *Runtime, error) {
	for {
		s.mu.Lock()
		rt := s.rt
		if rt == nil || rt.isClosed() {
			s.mu.Unlock()
			return nil, nil, fmt.Errorf("%s in sandbox %q: %w", what, s.agent, ErrClosed)
		}
		if s.state != StateRunning {
			st := s.state
			s.mu.Unlock()
			return nil, nil, fmt.Errorf("%s in sandbox %q: %w (%s)", what, s.agent, sandbox.ErrNotRunning, st)
		}
		if s.frozen == 0 {
			life := s.stopped
			s.mu.Unlock()
			return life, rt, nil
		}
		thawed := s.thawed
		s.mu.Unlock()
		select {
		case <-thawed:
		case <-ctx.Done():
			return nil, nil, fmt.Errorf("%s in sandbox %q (frozen): %w", what, s.agent, ctx.Err())
		}
	}
}

// Exec implements sandbox.Sandbox.
func (s *Sandbox) Exec(ctx context.Context, req sandbox.ExecRequest) (sandbox.ExecResult, error) {
	req, err := req.Normalize()
	if err != nil {
		return sandbox.ExecResult{}, fmt.Errorf("exec in sandbox %q: %w", s.agent, err)
	}
	life, rt, err := s.enter(ctx, "exec")
	if err != nil {
		return sandbox.ExecResult{}, err
	}
	s.mu.Lock()
	logged := req
	logged.Env = maps.Clone(req.Env)
	logged.Stdin = slices.Clone(req.Stdin)
	s.execs = append(s.execs, logged)
	if len(s.execs) > maxExecLog {
		s.execs = slices.Delete(s.execs, 0, len(s.execs)-maxExecLog)
	}
	s.mu.Unlock()
	rt.e.mu.Lock()
	run := rt.e.exec
	rt.e.mu.Unlock()

	env := s.Env()
	maps.Copy(env, req.Env)
	env["PATH"] = sandbox.DefaultPATH
	req.Env = env

	// The command ends at its timeout, when the caller gives up, or when
	// the sandbox stops.
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(life, cancel)
	defer stop()
	tctx := cctx
	if req.Timeout > 0 {
		var tcancel context.CancelFunc
		tctx, tcancel = context.WithTimeout(cctx, req.Timeout)
		defer tcancel()
	}
	start := time.Now()
	res, err := run(tctx, s, req)
	res.Duration = time.Since(start)
	switch {
	case life.Err() != nil:
		return sandbox.ExecResult{}, fmt.Errorf("exec in sandbox %q: the sandbox stopped while the command ran", s.agent)
	case ctx.Err() != nil:
		return sandbox.ExecResult{}, fmt.Errorf("exec in sandbox %q: %w", s.agent, ctx.Err())
	case err != nil:
		return sandbox.ExecResult{}, fmt.Errorf("exec in sandbox %q: %w", s.agent, err)
	}
	if tctx.Err() != nil {
		res.TimedOut = true
		if res.ExitCode == 0 {
			res.ExitCode = 128 + 9 // killed, as the helper reports it
		}
	}
	if res.OutputBytes < int64(len(res.Output)) {
		res.OutputBytes = int64(len(res.Output))
	}
	if len(res.Output) > req.OutputLimit {
		res.Output = res.Output[:req.OutputLimit:req.OutputLimit]
	}
	return res, nil
}

// ReadFile implements sandbox.Sandbox. A relative path is relative to
// /workspace; max is capped at proto.MaxHelperBody, and max <= 0 returns
// only the size.
func (s *Sandbox) ReadFile(ctx context.Context, p string, max int64) ([]byte, int64, error) {
	p = sandbox.ResolvePath(p)
	if _, _, err := s.enter(ctx, "read "+p); err != nil {
		return nil, 0, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	data, size, err := s.files.read(p, min(max, proto.MaxHelperBody))
	if err != nil {
		return nil, 0, fmt.Errorf("read %s in sandbox %q: %w", p, s.agent, err)
	}
	return data, size, nil
}

// WriteFile implements sandbox.Sandbox. A relative path is relative to
// /workspace; parent folders are created.
func (s *Sandbox) WriteFile(ctx context.Context, p string, data []byte) error {
	p = sandbox.ResolvePath(p)
	if _, _, err := s.enter(ctx, "write "+p); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.files.write(p, data, true); err != nil {
		return fmt.Errorf("write %s in sandbox %q: %w", p, s.agent, err)
	}
	return nil
}

// Freeze implements sandbox.Freezer: until every thaw is called, calls into
// the sandbox wait.
func (s *Sandbox) Freeze(ctx context.Context) (func(), error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.rt == nil || s.rt.isClosed():
		return nil, fmt.Errorf("freeze sandbox %q: %w", s.agent, ErrClosed)
	case s.state != StateRunning:
		return nil, fmt.Errorf("freeze sandbox %q: %w (%s)", s.agent, sandbox.ErrNotRunning, s.state)
	case ctx.Err() != nil:
		return nil, fmt.Errorf("freeze sandbox %q: %w", s.agent, ctx.Err())
	}
	if s.frozen == 0 {
		s.thawed = make(chan struct{})
	}
	s.frozen++
	thawed := s.thawed
	var once sync.Once
	return func() {
		once.Do(func() {
			s.mu.Lock()
			defer s.mu.Unlock()
			if s.thawed != thawed || s.frozen == 0 { // stopped (and maybe restarted) since
				return
			}
			s.frozen--
			if s.frozen == 0 {
				close(s.thawed)
			}
		})
	}, nil
}

func cloneSpec(s sandbox.Spec) sandbox.Spec {
	s.Packages = maps.Clone(s.Packages)
	s.Skills = maps.Clone(s.Skills)
	s.Env = maps.Clone(s.Env)
	s.ExtraMounts = slices.Clone(s.ExtraMounts)
	s.CapAdd = slices.Clone(s.CapAdd)
	s.CapDrop = slices.Clone(s.CapDrop)
	s.SecurityOpt = slices.Clone(s.SecurityOpt)
	return s
}

// quoteEnv formats env as sorted KEY=value lines, as env(1) prints it.
func quoteEnv(env map[string]string) string {
	var b strings.Builder
	for _, k := range slices.Sorted(maps.Keys(env)) {
		b.WriteString(k + "=" + env[k] + "\n")
	}
	return b.String()
}

// atoiExit parses an exit status as sh does: 0-255, wrapping.
func atoiExit(s string) (int, bool) {
	n, err := strconv.Atoi(s)
	if err != nil {
		return 0, false
	}
	return n & 0xff, true
}
