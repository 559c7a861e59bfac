package plugin

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/beige-dev/beige/internal/audit"
	"github.com/beige-dev/beige/internal/config"
	"github.com/beige-dev/beige/internal/home"
	"github.com/beige-dev/beige/internal/pipeline"
	"github.com/beige-dev/beige/internal/policy"
	"github.com/beige-dev/beige/internal/proto"
)

// coreTools are the model's own tools; no plugin may take their names, and
// they cannot be called through the socket.
var coreTools = policy.CoreTools

// Sandbox paths the context text refers to.
const (
	packagesPath = "/tools/packages"
	skillsPath   = "/skills"
)

// Options configure a Host. Audit is required.
type Options struct {
	// Home locates agent workspaces (unless agents.<a>.workspaceDir says
	// otherwise), the built-in plugins' documentation ($BEIGE_HOME/tools)
	// and plugin data ($BEIGE_HOME/data).
	Home home.Home
	// Audit receives a record before and after every tool call. A call
	// whose started record cannot be written is refused. It is the audit
	// log of the Host's own pipeline, used until SetPipeline gives it the
	// gateway's.
	Audit *audit.Logger
	// Policy is the gateway's one policy engine, for the Host's own
	// pipeline; nil means one built from the agents' tools.
	Policy *policy.Engine
	// Builtins are the built-in plugins to choose from; nil means those
	// registered with Register.
	Builtins map[string]Builtin
	// Freeze, when set, pauses every process of an agent's sandbox until
	// thaw is called (docker pause / unpause). It is handed to tools as
	// Call.Freeze. Without it, a tool that checks workspace files and then
	// uses them (git) cannot stop the agent from changing them in between.
	Freeze func(ctx context.Context, agent string) (thaw func(), err error)
	// Logger receives the Host's and the plugins' logs (default: discarded).
	Logger *slog.Logger
	// Redact, when set, replaces configured secrets in every tool result
	// (output and error text) of the Host's own pipeline before it goes
	// back to the sandbox (redact.Redactor.String); the gateway's pipeline
	// has its own.
	Redact func(string) string
	// EgressSocket, when set, is called once for each TypeScript/JavaScript
	// plugin as it starts and returns the host path of the Unix socket that
	// serves its egress proxy (Env.EgressSocket; "": the plugin has no
	// network). An error fails the plugin's start. The gateway sets it.
	EgressSocket func(plugin string, cfg *config.Plugin) (string, error)
}

// Host holds the loaded plugins of one config and runs tool calls. It is
// safe for concurrent use once NewHost has returned.
type Host struct {
	cfg      *config.Config
	opts     Options
	log      *slog.Logger
	pipe     atomic.Pointer[pipeline.Pipeline]
	plugins  []*loaded // in start (config) order
	tools    map[string]*registeredTool
	hooks    hooks
	channels map[string]Channel
	agents   map[string]*agentInfo

	closeOnce sync.Once
	closeErr  error
}

// loaded is one plugin of the config.
type loaded struct {
	name     string // key in config.json5
	builtin  string // the built-in's name, or "" for an external plugin
	script   bool   // a TypeScript/JavaScript plugin (index.ts/index.js)
	dir      string // Env.Dir
	docsDir  string // host folder mounted at /tools/packages/<name>
	manifest *config.Manifest
	config   map[string]any // defaultConfig < plugins.<name>.config
	plugin   Plugin

	tools      []string
	skills     []Skill
	registered bool // Register has returned
}

type registeredTool struct {
	Tool
	plugin *loaded
}

type agentInfo struct {
	name      string
	cfg       *config.Agent
	workspace string
	tools     []string // plugin tools, in config order
}

// NewHost loads the plugins of cfg in config order: a plugin with a path
// whose plugin.json has a run command is external; one with a path and no
// run command is the built-in named by its plugin.json; one without a path
// is the built-in of its name. It then checks that every agent's tools are
// registered and that every agent has what its skills require. Every
// problem found is returned, joined; on error the plugins already started
// are stopped.
func NewHost(cfg *config.Config, opts *Options) (*Host, error) {
	if cfg == nil || opts == nil || opts.Audit == nil {
		return nil, errors.New("plugin: NewHost needs a config and an audit logger")
	}
	h := &Host{
		cfg:      cfg,
		opts:     *opts,
		log:      opts.Logger,
		tools:    map[string]*registeredTool{},
		channels: map[string]Channel{},
		agents:   map[string]*agentInfo{},
	}
	if h.log == nil {
		h.log = slog.New(slog.DiscardHandler)
	}
	builtins := opts.Builtins
	if builtins == nil {
		builtins = registered()
	}

	var errs []error
	for _, name := range ordered(cfg.PluginOrder, cfg.Plugins) {
		if err := h.load(name, cfg.Plugins[name], builtins); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) == 0 {
		errs = h.checkAgents()
	}
	if len(errs) > 0 {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := h.Close(ctx); err != nil {
			errs = append(errs, err)
		}
		return nil, errors.Join(errs...)
	}
	eng := opts.Policy
	if eng == nil {
		allowed := make(map[string][]string, len(h.agents))
		for name, a := range h.agents {
			allowed[name] = a.tools
		}
		eng = policy.New(allowed)
	}
	h.pipe.Store(pipeline.New(pipeline.Options{Audit: opts.Audit, Policy: eng, Hooks: h, Redact: opts.Redact, Logger: h.log}))
	return h, nil
}

// SetPipeline makes Handle run socket calls through p, the gateway's one
// pipeline (assembled with this Host as its Hooks), instead of the Host's
// own (which has no redaction and no metrics).
func (h *Host) SetPipeline(p *pipeline.Pipeline) {
	if p != nil {
		h.pipe.Store(p)
	}
}

func (h *Host) pipeline() *pipeline.Pipeline { return h.pipe.Load() }

// ordered returns the keys of m in the given order, then any others sorted
// (a config built in code may have no order).
func ordered[T any](order []string, m map[string]T) []string {
	var out []string
	seen := map[string]bool{}
	for _, k := range order {
		if _, ok := m[k]; ok && !seen[k] {
			out = append(out, k)
			seen[k] = true
		}
	}
	for _, k := range slices.Sorted(maps.Keys(m)) {
		if !seen[k] {
			out = append(out, k)
		}
	}
	return out
}

func (h *Host) load(name string, pc *config.Plugin, builtins map[string]Builtin) error {
	if pc == nil {
		pc = &config.Plugin{}
	}
	if !proto.ValidToolName(name) {
		return fmt.Errorf("plugin %q: invalid name (letters, digits, '.', '_', '-'; it names a folder in the sandbox)", name)
	}
	l := &loaded{name: name, manifest: pc.Manifest}
	var b Builtin
	switch {
	case pc.Path != "":
		dir, err := filepath.Abs(pc.Path)
		if err != nil {
			return fmt.Errorf("plugin %s: %w", name, err)
		}
		l.dir, l.docsDir = dir, dir
		if l.manifest == nil {
			if l.manifest, err = config.ReadManifest(dir); err != nil {
				return fmt.Errorf("plugin %s: %w", name, err)
			}
		}
		// One manifest format: a run command makes an external plugin; else
		// a name built into beige is served by the built-in (a package of
		// the original's toolkit named so is not run); else an index.ts or
		// index.js is the original's TypeScript/JavaScript format.
		bb, isBuiltin := builtins[l.manifest.Name]
		switch {
		case l.manifest.Run != nil:
		case isBuiltin:
			b, l.builtin = bb, bb.Name
		case IsScriptDir(dir):
			l.script = true
		default:
			return fmt.Errorf("plugin %s: %s/plugin.json has no run command, no index.ts or index.js, and no plugin %q is built into beige", name, dir, l.manifest.Name)
		}
	default:
		var ok bool
		if b, ok = builtins[name]; !ok {
			return fmt.Errorf("plugin %s: no path given and no such plugin is built into beige (built in: %s)",
				name, strings.Join(slices.Sorted(maps.Keys(builtins)), ", "))
		}
		l.builtin = b.Name
		m, err := readDocsManifest(b.Docs)
		if err != nil {
			return fmt.Errorf("plugin %s: %w", name, err)
		}
		l.manifest = m
		if h.opts.Home.Dir != "" {
			l.docsDir = filepath.Join(h.opts.Home.ToolsDir(), b.Name)
			if err := writeDocs(h.opts.Home.ToolsDir(), b); err != nil {
				return err
			}
		}
		l.dir = l.docsDir
	}
	l.config = MergeConfig(l.manifest.DefaultConfig, pc.Config, nil)

	var p Plugin
	switch {
	case l.script:
		regMu.RLock()
		load := scriptLoader
		regMu.RUnlock()
		if load == nil {
			return fmt.Errorf("plugin %s: %s is a TypeScript/JavaScript plugin and this beige cannot run them", name, l.dir)
		}
		env := Env{
			Name: name, Dir: l.dir, Manifest: l.manifest,
			Config: MergeConfig(l.config, nil, nil),
			Logger: h.log.With("plugin", name),
			Node:   pc.Node, Agents: ordered(h.cfg.AgentOrder, h.cfg.Agents),
			AllowRead: pc.AllowRead, AllowWrite: pc.AllowWrite,
			Timeout:         time.Duration(pc.Timeout * float64(time.Second)),
			RegisteredTools: h.registeredTools,
			Unconfined:      pc.Confine != nil && !*pc.Confine, AllowChildProcess: pc.AllowChildProcess,
		}
		if h.opts.Home.Dir != "" {
			env.DataDir = filepath.Join(h.opts.Home.DataDir(), name)
			env.Packages = h.opts.Home.PackagesDir()
		}
		if h.opts.EgressSocket != nil {
			sock, err := h.opts.EgressSocket(name, pc)
			if err != nil {
				return fmt.Errorf("plugin %s: egress: %w", name, err)
			}
			env.EgressSocket = sock
		}
		var err error
		if p, err = newPlugin(Builtin{New: load}, env); err != nil {
			return fmt.Errorf("plugin %s: %w", name, err)
		}
	case l.builtin == "":
		ext, err := newExternal(name, l.dir, l.manifest)
		if err != nil {
			return err
		}
		p = ext
	default:
		env := Env{
			Name:     name,
			Dir:      l.dir,
			Manifest: l.manifest,
			Config:   MergeConfig(l.config, nil, nil),
			Logger:   h.log.With("plugin", name),
		}
		if h.opts.Home.Dir != "" {
			env.DataDir = filepath.Join(h.opts.Home.DataDir(), name)
		}
		var err error
		if p, err = newPlugin(b, env); err != nil {
			return fmt.Errorf("plugin %s: %w", name, err)
		}
	}
	l.plugin = p
	h.plugins = append(h.plugins, l) // started: Close stops it from now on
	err := func() (err error) {
		defer func() {
			if r := recover(); r != nil {
				err = fmt.Errorf("plugin %s: Register panicked: %v", name, r)
			}
		}()
		return p.Register(&Registrar{h: h, p: l})
	}()
	l.registered = true
	if err != nil {
		if !strings.HasPrefix(err.Error(), "plugin "+name) {
			err = fmt.Errorf("plugin %s: %w", name, err)
		}
		return err
	}
	return nil
}

func newPlugin(b Builtin, env Env) (p Plugin, err error) {
	defer func() {
		if r := recover(); r != nil {
			//lint:ignore ST1005 New is the Builtin's method, named as it is spelled
			err = fmt.Errorf("New panicked: %v", r)
		}
	}()
	p, err = b.New(env)
	if err == nil && p == nil {
		//lint:ignore ST1005 New is the Builtin's method, named as it is spelled
		err = errors.New("New returned no plugin")
	}
	return p, err
}

// registeredTools returns the plugin tools' names, sorted. The tools map
// is written only while NewHost loads the plugins: call it only once
// NewHost has returned (from Start on).
func (h *Host) registeredTools() []string {
	return slices.Sorted(maps.Keys(h.tools))
}

// checkAgents resolves every agent's workspace and tools, and checks what
// its skills require.
func (h *Host) checkAgents() []error {
	var errs []error
	for _, name := range ordered(h.cfg.AgentOrder, h.cfg.Agents) {
		a := h.cfg.Agents[name]
		if a == nil {
			continue
		}
		ai := &agentInfo{name: name, cfg: a, workspace: a.WorkspaceDir}
		if ai.workspace == "" {
			if h.opts.Home.Dir == "" {
				errs = append(errs, fmt.Errorf("agent %s: no workspace folder (set workspaceDir, or give the Host a home)", name))
			} else {
				ai.workspace = h.opts.Home.Workspace(name)
			}
		}
		for _, t := range a.Tools {
			switch {
			case slices.Contains(coreTools, t):
			case h.tools[t] != nil:
				if !slices.Contains(ai.tools, t) {
					ai.tools = append(ai.tools, t)
				}
			default:
				errs = append(errs, fmt.Errorf("agent %s: tool %q is not provided by any configured plugin", name, t))
			}
		}
		for _, s := range a.Skills {
			sk := h.cfg.Skills[s]
			switch {
			case sk == nil:
				errs = append(errs, fmt.Errorf("agent %s: unknown skill %q", name, s))
				continue
			case !proto.ValidToolName(s):
				errs = append(errs, fmt.Errorf("agent %s: skill name %q cannot name a folder in the sandbox", name, s))
				continue
			case sk.Manifest == nil:
				continue
			}
			for _, t := range sk.Manifest.Requires.Tools {
				if !slices.Contains(coreTools, t) && !slices.Contains(a.Tools, t) {
					errs = append(errs, fmt.Errorf("agent %s: skill %q requires tool %q, which the agent does not have (add it to agents.%s.tools)", name, s, t, name))
				}
			}
			for _, r := range sk.Manifest.Requires.Skills {
				if !slices.Contains(a.Skills, r) {
					errs = append(errs, fmt.Errorf("agent %s: skill %q requires skill %q, which the agent does not have (add it to agents.%s.skills)", name, s, r, name))
				}
			}
		}
		h.agents[name] = ai
	}
	return errs
}

// Agents returns the agents' names in config order.
func (h *Host) Agents() []string {
	return ordered(h.cfg.AgentOrder, h.agents)
}

// Tools returns the plugin tools agent may use, in config order: the
// launchers to write to its /tools/bin (toolbridge.WriteLaunchers).
func (h *Host) Tools(agent string) []string {
	if a := h.agents[agent]; a != nil {
		return slices.Clone(a.tools)
	}
	return nil
}

// Launchers returns the tools to write launchers for in agent's /tools/bin:
// every registered plugin tool, sorted, not only those the agent may use.
// A call to a tool the agent may not use then reaches the gateway, where
// the policy denies it with the spec's message and the attempt is audited,
// instead of failing unseen with "command not found".
func (h *Host) Launchers(agent string) []string {
	if h.agents[agent] == nil {
		return nil
	}
	return slices.Sorted(maps.Keys(h.tools))
}

// Workspace returns the host folder of agent's /workspace.
func (h *Host) Workspace(agent string) string {
	if a := h.agents[agent]; a != nil {
		return a.workspace
	}
	return ""
}

// agentPlugins returns the plugins agent uses a tool of, in config order.
func (h *Host) agentPlugins(agent string) []*loaded {
	a := h.agents[agent]
	if a == nil {
		return nil
	}
	var out []*loaded
	for _, p := range h.plugins {
		for _, t := range a.tools {
			if h.tools[t].plugin == p {
				out = append(out, p)
				break
			}
		}
	}
	return out
}

// Packages returns the documentation folders to mount for agent, by
// plugin name: mount each at /tools/packages/<name> (sandbox.Spec.Packages).
// A plugin with a path gives its own folder; a built-in without one gives
// $BEIGE_HOME/tools/<plugin>.
func (h *Host) Packages(agent string) map[string]string {
	out := map[string]string{}
	for _, p := range h.agentPlugins(agent) {
		if p.docsDir != "" {
			out[p.name] = p.docsDir
		}
	}
	return out
}

// Skills returns the skill folders to mount for agent, by name, at
// /skills/<name> (sandbox.Spec.Skills): the skills it lists, and those of
// the plugins whose tools it uses.
func (h *Host) Skills(agent string) map[string]string {
	out := map[string]string{}
	a := h.agents[agent]
	if a == nil {
		return out
	}
	for _, s := range a.cfg.Skills {
		if sk := h.cfg.Skills[s]; sk != nil {
			out[s] = sk.Path
		}
	}
	for _, p := range h.agentPlugins(agent) {
		for _, s := range p.skills {
			out[s.Name] = s.Path
		}
	}
	return out
}

// ToolContext describes agent's plugin tools for its system prompt; it is
// empty when the agent has none.
func (h *Host) ToolContext(agent string) string {
	a := h.agents[agent]
	if a == nil || len(a.tools) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("## Available Tools\n\n")
	b.WriteString("These commands are in /tools/bin (on PATH); run them with exec. They run on the gateway, not in the sandbox, and read the current folder under /workspace.\n")
	for _, t := range a.tools {
		rt := h.tools[t]
		desc := rt.Description
		if desc == "" {
			desc = rt.plugin.manifest.Description
		}
		cmds := rt.Commands
		if len(cmds) == 0 && rt.Name == rt.plugin.name {
			cmds = rt.plugin.manifest.Commands
		}
		fmt.Fprintf(&b, "\n### %s\n", t)
		if desc != "" {
			b.WriteString(strings.TrimSpace(desc) + "\n")
		}
		if len(cmds) > 0 {
			fmt.Fprintf(&b, "Usage: %s <command> [args...]; commands: %s\n", t, strings.Join(cmds, ", "))
		} else {
			fmt.Fprintf(&b, "Usage: %s [args...]\n", t)
		}
		dir := path.Join(packagesPath, rt.plugin.name)
		fmt.Fprintf(&b, "Docs: %s/README.md, usage guide %s/SKILL.md\n", dir, dir)
	}
	return b.String()
}

// SkillContext lists agent's skills for its system prompt; it is empty
// when the agent has none.
func (h *Host) SkillContext(agent string) string {
	a := h.agents[agent]
	if a == nil {
		return ""
	}
	type entry struct{ name, desc, file string }
	var es []entry
	for _, s := range a.cfg.Skills {
		sk := h.cfg.Skills[s]
		if sk == nil {
			continue
		}
		e := entry{name: s, file: "README.md"}
		if sk.Manifest != nil {
			e.desc = sk.Manifest.Description
			if sk.Manifest.ContextFile != "" {
				e.file = sk.Manifest.ContextFile
			}
		}
		es = append(es, e)
	}
	for _, p := range h.agentPlugins(agent) {
		for _, s := range p.skills {
			es = append(es, entry{name: s.Name, desc: s.Description, file: "README.md"})
		}
	}
	if len(es) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("## Available Skills\n")
	for _, e := range es {
		fmt.Fprintf(&b, "\n### %s\n", e.name)
		if e.desc != "" {
			b.WriteString(strings.TrimSpace(e.desc) + "\n")
		}
		fmt.Fprintf(&b, "Path: %s/%s/ (start with %s)\n", skillsPath, e.name, e.file)
	}
	return b.String()
}

// Problems returns, by plugin name, why each plugin that cannot run now
// cannot (see Prober); nil when every plugin runs.
func (h *Host) Problems() map[string]string {
	if h == nil {
		return nil
	}
	var out map[string]string
	for _, l := range h.plugins {
		pr, ok := l.plugin.(Prober)
		if !ok {
			continue
		}
		if msg := pr.Problem(); msg != "" {
			if out == nil {
				out = map[string]string{}
			}
			out[l.name] = msg
		}
	}
	return out
}

// Channels returns the channels plugins registered, by name.
func (h *Host) Channels() map[string]Channel { return maps.Clone(h.channels) }

// HasPostResponse reports whether a plugin registered a postResponse hook
// (a streaming proxy must then hold the answer back until the hooks saw it).
func (h *Host) HasPostResponse() bool { return len(h.hooks.postResponse) > 0 }

// RunPrePrompt runs the prePrompt hooks in order; the first error stops the
// prompt and is returned.
func (h *Host) RunPrePrompt(ctx context.Context, ev *PrePromptEvent) error {
	return runAll(ctx, h.hooks.prePrompt, ev)
}

// RunPostResponse runs the postResponse hooks in order, each seeing the
// response as the one before left it; their errors are returned joined.
func (h *Host) RunPostResponse(ctx context.Context, ev *PostResponseEvent) error {
	return runEach(ctx, h.hooks.postResponse, ev)
}

// RunSessionCreated runs the sessionCreated hooks; errors are joined.
func (h *Host) RunSessionCreated(ctx context.Context, ev *SessionCreatedEvent) error {
	return runEach(ctx, h.hooks.sessionCreated, ev)
}

// RunSessionDisposed runs the sessionDisposed hooks; errors are joined.
func (h *Host) RunSessionDisposed(ctx context.Context, ev *SessionDisposedEvent) error {
	return runEach(ctx, h.hooks.sessionDisposed, ev)
}

// RunModelSwitched runs the modelSwitched hooks; errors are joined.
func (h *Host) RunModelSwitched(ctx context.Context, ev *ModelSwitchedEvent) error {
	return runEach(ctx, h.hooks.modelSwitched, ev)
}

// RunGatewayStarted runs the gatewayStarted hooks; errors are joined.
func (h *Host) RunGatewayStarted(ctx context.Context, ev *GatewayStartedEvent) error {
	return runEach(ctx, h.hooks.gatewayStarted, ev)
}

// RunGatewayShutdown runs the gatewayShutdown hooks; errors are joined.
func (h *Host) RunGatewayShutdown(ctx context.Context, ev *GatewayShutdownEvent) error {
	return runEach(ctx, h.hooks.gatewayShutdown, ev)
}

func runEach[F ~func(context.Context, E) error, E any](ctx context.Context, hs []namedHook[F], ev E) error {
	var errs []error
	for _, hk := range hs {
		if err := callHook(ctx, hk, ev); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Start calls Start of the plugins that implement Starter, in config
// order, once the gateway serves; pc is how they reach agents and sessions.
// A plugin that fails to start is logged and the others still start; the
// errors are returned joined.
func (h *Host) Start(ctx context.Context, pc PluginContext) error {
	var errs []error
	for _, p := range h.plugins {
		s, ok := p.plugin.(Starter)
		if !ok {
			continue
		}
		if err := startPlugin(ctx, s, pc); err != nil {
			err = fmt.Errorf("plugin %s: start: %w", p.name, err)
			h.log.Error("plugin did not start", "plugin", p.name, "err", err)
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func startPlugin(ctx context.Context, s Starter, pc PluginContext) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("panic: %v", r)
		}
	}()
	return s.Start(ctx, pc)
}

// Close stops the plugins that implement Stopper, in the reverse of the
// order they were started. It is safe to call more than once.
func (h *Host) Close(ctx context.Context) error {
	h.closeOnce.Do(func() {
		var errs []error
		for i := len(h.plugins) - 1; i >= 0; i-- {
			p := h.plugins[i]
			s, ok := p.plugin.(Stopper)
			if !ok {
				continue
			}
			if err := stopPlugin(ctx, s); err != nil {
				errs = append(errs, fmt.Errorf("plugin %s: stop: %w", p.name, err))
			}
		}
		h.closeErr = errors.Join(errs...)
	})
	return h.closeErr
}

func stopPlugin(ctx context.Context, s Stopper) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("panic: %v", r)
		}
	}()
	return s.Stop(ctx)
}
