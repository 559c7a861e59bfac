package gateway

import (
	"context"
	"fmt"
	"os"
	"sync"

	"github.com/beige-dev/beige/internal/config"
	"github.com/beige-dev/beige/internal/sandbox"
)

// agentRuntime is one configured agent and its sandbox.
type agentRuntime struct {
	g    *Gateway
	name string
	cfg  *config.Agent

	mu  sync.Mutex
	sb  sandbox.Sandbox
	err error // why the sandbox is not ready, if it is not
}

func newAgentRuntime(g *Gateway, name string, cfg *config.Agent) *agentRuntime {
	return &agentRuntime{g: g, name: name, cfg: cfg}
}

// workspace is the host folder mounted at /workspace.
func (a *agentRuntime) workspace() string {
	if a.cfg.WorkspaceDir != "" {
		return a.cfg.WorkspaceDir
	}
	return a.g.home.Workspace(a.name)
}

// spec is the sandbox this agent needs.
func (a *agentRuntime) spec() sandbox.Spec {
	h, s := a.g.home, a.cfg.Sandbox
	spec := sandbox.Spec{
		Agent:        a.name,
		Image:        s.Image,
		Workspace:    a.workspace(),
		Launchers:    h.Launchers(a.name),
		PackagesDir:  h.Packages(a.name),
		SocketDir:    h.SocketDir(a.name),
		HelperBinary: a.g.opts.HelperBinary,
		Env:          s.ExtraEnv,
		MemoryLimit:  int64(s.MemoryLimit),
		CPUs:         s.CPUs,
		PidsLimit:    s.PidsLimit,
		Network:      s.Network,
		Runtime:      s.Runtime,
		CapAdd:       s.CapAdd,
		CapDrop:      s.CapDrop,
		SecurityOpt:  s.SecurityOpt,
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
	if err := os.MkdirAll(a.g.home.SocketsDir(), 0o700); err != nil {
		a.err = err
		return nil, err
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
