package gateway

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"github.com/beige-dev/beige/internal/agent"
	"github.com/beige-dev/beige/internal/config"
	"github.com/beige-dev/beige/internal/egress"
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
	for _, m := range s.ExtraMounts {
		spec.ExtraMounts = append(spec.ExtraMounts, sandbox.Mount{Source: m.Source, Target: m.Target, ReadOnly: m.ReadOnly})
	}
	return spec
}

// ensure returns the agent's running sandbox, (re)creating it if needed.
func (a *agentRuntime) ensure(ctx context.Context) (sandbox.Sandbox, error) {
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
