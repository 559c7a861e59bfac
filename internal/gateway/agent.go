package gateway

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path"
	"path/filepath"
	"sync"

	"github.com/beige-dev/beige/internal/agent"
	"github.com/beige-dev/beige/internal/config"
	"github.com/beige-dev/beige/internal/egress"
	"github.com/beige-dev/beige/internal/egress/trust"
	"github.com/beige-dev/beige/internal/sandbox"
	"github.com/beige-dev/beige/internal/toolbridge"
)

// agentRuntime is one configured agent and its sandbox.
type agentRuntime struct {
	g    *Gateway
	name string
	cfg  *config.Agent

	bridge *toolbridge.Server // the agent's socket, mounted at /beige/gateway.sock
	egress *egress.Proxy      // its egress proxy on /beige/egress.sock, in the "proxy" network mode
	tools  agent.Tools        // the core tools, as the agent loop calls them

	mu  sync.Mutex
	sb  sandbox.Sandbox
	err error // why the sandbox is not ready, if it is not
}

func newAgentRuntime(g *Gateway, name string, cfg *config.Agent) *agentRuntime {
	a := &agentRuntime{g: g, name: name, cfg: cfg}
	a.tools = agent.CoreTools(g.runner, a.ensure, name)
	return a
}

// workspace is the host folder mounted at /workspace.
func (a *agentRuntime) workspace() string { return a.g.plugins.Workspace(a.name) }

// openToolBridge writes the agent's launchers and listens on its socket,
// before its sandbox starts.
func (a *agentRuntime) openToolBridge() error {
	h := a.g.home
	if err := os.MkdirAll(a.workspace(), sandbox.WorkspaceMode); err != nil {
		return fmt.Errorf("workspace of agent %q: %w", a.name, err)
	}
	if created, err := agent.SeedAgentsMD(a.workspace()); err != nil {
		a.g.log.Warn("could not seed AGENTS.md", "agent", a.name, "err", err)
	} else if created && os.Geteuid() == 0 {
		// The agent's user must be able to edit it. Lchown: the name was
		// just created by us, and a link put in its place is not followed.
		if uid, gid, err := sandbox.ParseUser(a.cfg.Sandbox.User); err == nil {
			if err := os.Lchown(filepath.Join(a.workspace(), "AGENTS.md"), uid, gid); err != nil {
				a.g.log.Warn("could not give AGENTS.md to the agent's user", "agent", a.name, "err", err)
			}
		}
	}
	if err := toolbridge.WriteLaunchers(h.Launchers(a.name), a.g.plugins.Launchers(a.name)); err != nil {
		return fmt.Errorf("launchers of agent %q: %w", a.name, err)
	}
	// The agent's folder is open (0755) so that the sandbox's non-root
	// user reaches /beige; $BEIGE_HOME/sockets (0700) keeps others out.
	if err := os.MkdirAll(h.SocketDir(a.name), sandbox.SocketDirMode); err != nil {
		return fmt.Errorf("socket folder of agent %q: %w", a.name, err)
	}
	srv, err := toolbridge.Listen(h.Socket(a.name), a.name, a.g.plugins.Handle,
		&toolbridge.Options{Logger: a.g.log.With("component", "toolbridge"), DirMode: sandbox.SocketDirMode})
	if err != nil {
		return fmt.Errorf("socket of agent %q: %w", a.name, err)
	}
	a.bridge = srv
	if err := sandbox.PrepareSocket(h.Socket(a.name), a.cfg.Sandbox.User); err != nil {
		return fmt.Errorf("socket of agent %q: %w", a.name, err)
	}
	if err := toolbridge.LinkSocket(h.SocketLink(a.name), filepath.Join(a.name, "gateway.sock")); err != nil {
		return fmt.Errorf("socket link of agent %q: %w", a.name, err)
	}
	return a.openEgress()
}

func (a *agentRuntime) closeToolBridge() error {
	errE := a.closeEgress()
	if a.bridge == nil {
		return errE
	}
	return errors.Join(a.bridge.Close(), errE)
}

// spec is the sandbox this agent needs.
func (a *agentRuntime) spec() sandbox.Spec {
	h, s := a.g.home, a.cfg.Sandbox
	spec := sandbox.Spec{
		Agent:          a.name,
		Image:          s.Image,
		Workspace:      a.workspace(),
		Launchers:      h.Launchers(a.name),
		PackagesDir:    h.Packages(a.name),
		SocketDir:      h.SocketDir(a.name),
		Packages:       a.g.plugins.Packages(a.name),
		Skills:         a.g.plugins.Skills(a.name),
		HelperBinary:   a.g.opts.HelperBinary,
		Env:            s.ExtraEnv,
		User:           s.User,
		MemoryLimit:    int64(s.MemoryLimit),
		CPUs:           s.CPUs,
		PidsLimit:      s.PidsLimit,
		ReadOnlyRootfs: s.ReadOnlyRootfs,
		Network:        s.Network,
		Runtime:        s.Runtime,
		CapAdd:         s.CapAdd,
		CapDrop:        s.CapDrop,
		SecurityOpt:    s.SecurityOpt,
	}
	if len(s.Egress.Credentials) > 0 && (s.Network == "" || s.Network == config.NetworkProxy) {
		env := maps.Clone(s.ExtraEnv)
		if env == nil {
			env = map[string]string{}
		}
		for _, k := range egressCAEnv {
			if _, ok := env[k]; !ok {
				env[k] = path.Join(sandbox.BeigeDir, EgressCAFile)
			}
		}
		if spec.HelperBinary != "" { // the helper's idle writes the bundle
			for _, k := range trust.Env {
				if _, ok := env[k]; !ok {
					env[k] = trust.BundlePath
				}
			}
		}
		spec.Env = env
	}
	for _, m := range s.ExtraMounts {
		spec.ExtraMounts = append(spec.ExtraMounts, sandbox.Mount{Source: m.Source, Target: m.Target, ReadOnly: m.ReadOnly})
	}
	return spec
}

// ensure returns the agent's sandbox as calls use it: a handle that
// survives the container (see liveSandbox). It (re)creates the container
// first if needed.
func (a *agentRuntime) ensure(ctx context.Context) (sandbox.Sandbox, error) {
	if _, err := a.current(ctx); err != nil {
		return nil, err
	}
	return liveSandbox{a}, nil
}

// current returns the running sandbox, (re)creating it if needed.
func (a *agentRuntime) current(ctx context.Context) (sandbox.Sandbox, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.sb != nil {
		return a.sb, nil
	}
	sb, err := a.g.runtime.Ensure(ctx, a.spec())
	if err != nil {
		a.err = err
		return nil, fmt.Errorf("sandbox of agent %q: %w", a.name, err)
	}
	a.sb, a.err = sb, nil
	return sb, nil
}

// forget drops sb from the cache, if it is still there, so that the next
// call ensures the sandbox again.
func (a *agentRuntime) forget(sb sandbox.Sandbox) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.sb == sb {
		a.sb = nil
	}
}

// liveSandbox is an agent's sandbox as the tools use it. When a call finds
// the container not running (killed, stopped or removed behind the
// gateway's back), the container is ensured again (started, or recreated)
// and the call, which did not run, is made once more.
type liveSandbox struct{ a *agentRuntime }

var (
	_ sandbox.Sandbox = liveSandbox{}
	_ sandbox.Freezer = liveSandbox{}
)

// do runs fn on the current sandbox, recovering it once if it is not running.
func (l liveSandbox) do(ctx context.Context, fn func(sandbox.Sandbox) error) error {
	sb, err := l.a.current(ctx)
	if err != nil {
		return err
	}
	err = fn(sb)
	if !errors.Is(err, sandbox.ErrNotRunning) {
		return err
	}
	l.a.g.log.Warn("sandbox is not running (killed, stopped or removed outside beige); starting or recreating it", "agent", l.a.name, "err", err)
	l.a.forget(sb)
	sb, rerr := l.a.current(ctx)
	if rerr != nil {
		return fmt.Errorf("%w; recovering it failed: %w", err, rerr)
	}
	return fn(sb)
}

func (l liveSandbox) ID() string {
	l.a.mu.Lock()
	defer l.a.mu.Unlock()
	if l.a.sb == nil {
		return ""
	}
	return l.a.sb.ID()
}

func (l liveSandbox) Exec(ctx context.Context, req sandbox.ExecRequest) (res sandbox.ExecResult, err error) {
	err = l.do(ctx, func(sb sandbox.Sandbox) error {
		res, err = sb.Exec(ctx, req)
		return err
	})
	return res, err
}

func (l liveSandbox) ReadFile(ctx context.Context, path string, max int64) (data []byte, size int64, err error) {
	err = l.do(ctx, func(sb sandbox.Sandbox) error {
		data, size, err = sb.ReadFile(ctx, path, max)
		return err
	})
	return data, size, err
}

func (l liveSandbox) WriteFile(ctx context.Context, path string, data []byte) error {
	return l.do(ctx, func(sb sandbox.Sandbox) error { return sb.WriteFile(ctx, path, data) })
}

func (l liveSandbox) Freeze(ctx context.Context) (thaw func(), err error) {
	err = l.do(ctx, func(sb sandbox.Sandbox) error {
		f, ok := sb.(sandbox.Freezer)
		if !ok {
			return fmt.Errorf("the sandbox of agent %q cannot be frozen", l.a.name)
		}
		thaw, err = f.Freeze(ctx)
		return err
	})
	return thaw, err
}

// problem says why the agent is not ready, or "" when it is.
func (a *agentRuntime) problem() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	switch {
	case a.sb != nil:
		return ""
	case a.err != nil:
		return a.err.Error()
	}
	return "starting"
}
