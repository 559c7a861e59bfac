// Package nodehost runs the original Beige's TypeScript/JavaScript plugins
// unmodified: a plugin folder with an index.ts or index.js that exports
// createPlugin runs in its own Node.js process (the plugin host, host.mjs,
// embedded in the binary), confined by Node's permission model to reading
// its own folder and writing its data folder, with a minimal environment
// and none of the gateway's secrets. The gateway speaks to it over pipes
// (see host.mjs); the plugin's tools and hooks are registered through the
// plugin.Registrar, so every call passes the Host's policy, audit and hooks
// like any other tool. A host that crashes is restarted with backoff; one
// that does not answer a tool call in time is killed (and restarted).
package nodehost

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/beige-dev/beige/internal/plugin"
)

func init() { plugin.SetScriptLoader(New) }

// Timeouts of the requests to the host. Tests shorten them.
var (
	// DefaultCallTimeout is how long a tool call may take when
	// plugins.<name>.timeout is not set (a spawn tool's sub-agent
	// conversation takes long); the host is killed (and restarted) when it
	// passes.
	DefaultCallTimeout = 900 * time.Second
	initTimeout        = 30 * time.Second
	hookTimeout        = 30 * time.Second
	lifecycleTimeout   = 30 * time.Second
	// Restart backoff: the first restart waits backoffMin, each crash
	// without a healthy minute before it doubles the wait, up to backoffMax.
	backoffMin = 500 * time.Millisecond
	backoffMax = 30 * time.Second
	healthy    = time.Minute
)

// Plugin is one TypeScript/JavaScript plugin and its host process.
type Plugin struct {
	env      plugin.Env // Dir: the real folder, links resolved
	readRoot string     // what the plugin may read: Dir, or its package's folder
	entry    string
	log      *slog.Logger

	mu       sync.Mutex
	node     Node   // the Node.js found; Path "" until one is
	proc     *proc  // nil while restarting or stopped
	reason   string // why proc is nil
	started  bool   // start() was called (and so is called again on restart)
	stopped  bool
	pc       plugin.PluginContext
	decl     *registration // what the first register() declared
	live     *registration // what the latest register() declared (its hooks run)
	restarts int
	since    time.Time // when the current host became ready
	wake     chan struct{}
	watchWG  sync.WaitGroup

	metaMu sync.Mutex
	meta   map[string]map[string]any // session key -> metadata set by the plugin
}

// registration is what register() declared.
type registration struct {
	Tools []struct {
		Name        string   `json:"name"`
		Description string   `json:"description"`
		Commands    []string `json:"commands"`
	} `json:"tools"`
	Hooks  []string `json:"hooks"`
	Skills []struct {
		Name        string `json:"name"`
		Path        string `json:"path"`
		Description string `json:"description"`
	} `json:"skills"`
	Channel          bool `json:"channel"`
	ChannelMessaging bool `json:"channelMessaging"`
}

// New checks the plugin's entry file and looks for its Node.js; the host
// starts in Register. A missing Node.js does not fail New: the plugin's
// tools answer why, Node.js is looked for again with each retry, and
// Problem names it (in /api/health).
func New(env plugin.Env) (plugin.Plugin, error) {
	// The configured folder with its links resolved (plugins/<name> is a
	// link into a package): Node is given the real folder, so that its
	// imports (../_shared/...) resolve where the jail shows them.
	real, err := filepath.EvalSymlinks(env.Dir)
	if err != nil {
		return nil, fmt.Errorf("resolve the plugin folder %s: %w", env.Dir, err)
	}
	if real, err = filepath.Abs(real); err != nil {
		return nil, fmt.Errorf("resolve the plugin folder %s: %w", env.Dir, err)
	}
	env.Dir = real
	entry, err := Entry(env.Dir)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", env.Dir, err)
	}
	if env.DataDir == "" {
		return nil, errors.New("a TypeScript plugin needs a data folder (the Host has no home)")
	}
	log := env.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	n, err := FindNode(context.Background(), env.Node)
	if err != nil {
		log.Error("no Node.js for the plugin; it is looked for again when loading is retried", "err", needNode(env.Name, err))
	}
	for _, l := range [][]string{env.AllowRead, env.AllowWrite} {
		for _, d := range l {
			if !filepath.IsAbs(d) || strings.ContainsAny(d, ",*") {
				return nil, fmt.Errorf("allowRead/allowWrite: %q must be an absolute path without ',' or '*'", d)
			}
		}
	}
	for _, d := range slices.Concat(env.AllowRead, env.AllowWrite) {
		if _, err := os.Stat(d); err != nil {
			// Node grants a folder's contents only if it is a folder when
			// the host starts.
			log.Warn("allowRead/allowWrite path does not exist; the plugin gets no access beneath it", "path", d)
		}
	}
	if len(env.AllowRead)+len(env.AllowWrite) > 0 {
		log.Warn("the plugin may read or write more than its own folders (plugins.<name>.allowRead/allowWrite)", "read", env.AllowRead, "write", env.AllowWrite)
	}
	if env.Unconfined {
		log.Warn("plugin " + env.Name + " runs with the gateway's network and files (plugins." + env.Name + ".confine: false): it can reach the gateway's API, every Unix socket (the agents' tool sockets, Docker's) and the network")
	}
	if !env.Unconfined && env.EgressSocket != "" && !n.proxiesFetch() {
		log.Warn(fmt.Sprintf("plugin %s runs on Node.js %d.%d.%d, whose fetch and WebSocket know no proxy: in the jail they have no way out (node:http/https go through the egress proxy); use Node.js 22.21 or later", env.Name, n.Major, n.Minor, n.Patch))
	}
	if env.AllowChildProcess {
		log.Warn("plugin " + env.Name + " may start programs (plugins." + env.Name + ".allowChildProcess: true): they are not under Node's file permissions, only the jail's mounts")
	}
	readRoot := env.Dir
	if pkg := packageFolder(env.Packages, env.Dir); pkg != "" {
		readRoot = pkg
		log.Info("the plugin is part of a package: the whole package folder is readable", "package", pkg)
	}
	if strings.ContainsAny(readRoot, ",*") {
		// Node reads them in --allow-fs-read as a list and a wildcard.
		return nil, fmt.Errorf("the plugin folder %s: a path with ',' or '*' cannot be granted to Node", readRoot)
	}
	return &Plugin{env: env, readRoot: readRoot, node: n, entry: entry, log: log, wake: make(chan struct{})}, nil
}

// packageFolder returns packages/<d> (its real path) when the plugin's
// real folder dir lies inside it, else "" (also when packages, the home's
// packages folder, is ""). Only that one package folder is returned:
// never packages/ itself, another package or anything else of the home.
func packageFolder(packages, dir string) string {
	if packages == "" {
		return ""
	}
	pkgs, err := filepath.EvalSymlinks(packages)
	if err != nil {
		return ""
	}
	rel, err := filepath.Rel(pkgs, dir)
	if err != nil || rel == "." || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) || filepath.IsAbs(rel) {
		return ""
	}
	d, _, _ := strings.Cut(rel, string(filepath.Separator))
	if d == "" || d == "." || d == ".." {
		return ""
	}
	return filepath.Join(pkgs, d)
}

func (p *Plugin) spec(node Node) *procSpec {
	return &procSpec{
		name: p.env.Name, node: node, dir: p.env.Dir, readRoot: p.readRoot, dataDir: p.env.DataDir,
		allowRead: p.env.AllowRead, allowWrite: p.env.AllowWrite,
		egressSocket: p.env.EgressSocket, unconfined: p.env.Unconfined, allowChildProcess: p.env.AllowChildProcess,
		log: p.log, serve: p.serve,
	}
}

// findNode returns the plugin's Node.js: the one found before while its
// binary is still there, else the one FindNode finds now (Node.js
// installed, upgraded or moved since).
func (p *Plugin) findNode() (Node, error) {
	p.mu.Lock()
	n := p.node
	p.mu.Unlock()
	if n.Path != "" {
		if _, err := os.Stat(n.Path); err == nil {
			return n, nil
		}
	}
	n, err := FindNode(context.Background(), p.env.Node)
	if err != nil {
		return Node{}, needNode(p.env.Name, err)
	}
	p.mu.Lock()
	p.node = n
	p.mu.Unlock()
	return n, nil
}

// launch starts a host and runs createPlugin and register in it.
func (p *Plugin) launch() (*proc, *registration, error) {
	node, err := p.findNode()
	if err != nil {
		return nil, nil, err
	}
	spec := p.spec(node)
	tsx, err := tsxImport(p.env.Dir)
	if err != nil {
		return nil, nil, fmt.Errorf("the plugin's tsx: %w", err)
	}
	if spec.tsx = tsx; tsx != "" {
		p.log.Info("running the plugin with the tsx in its folder (worker threads allowed for its loader)", "loader", tsx)
		if p.env.Unconfined {
			// Node 22 runs a Worker started with execArgv: [] (esbuild's,
			// any the plugin starts) without the permission model: only
			// the jail would still hold it.
			p.log.Warn("plugin " + p.env.Name + " ships tsx and runs unconfined: the worker threads tsx needs run outside Node's permission model, so it can read and write every file of the gateway's user and run programs")
		}
	}
	pr, err := startProc(spec)
	if err != nil {
		return nil, nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), initTimeout)
	defer cancel()
	raw, err := pr.call(ctx, "init", map[string]any{
		"name":          p.env.Name,
		"entry":         p.entry,
		"config":        p.env.Config,
		"dataDir":       p.env.DataDir,
		"agentNames":    p.env.Agents,
		"gatewayConfig": map[string]any{"plugins": map[string]any{p.env.Name: map[string]any{"config": p.env.Config}}},
	})
	if errors.Is(err, context.DeadlineExceeded) {
		err = fmt.Errorf("createPlugin and register did not return within %s", initTimeout)
	}
	if err != nil {
		pr.kill("loading failed")
		<-pr.done
		return nil, nil, err
	}
	var reg registration
	if err := strictDecode(raw, &reg); err != nil {
		pr.kill("bad register answer")
		<-pr.done
		return nil, nil, fmt.Errorf("register: %w", err)
	}
	return pr, &reg, nil
}

// Register starts the host, loads the plugin and registers what it
// declared: tools (each handled by the host), hooks and skills. When the
// plugin fails to load (createPlugin throws, say), the gateway still
// starts: the tools its plugin.json declares (provides.tools, else one
// named like the plugin) are registered and answer the load error, and
// loading is retried with backoff.
func (p *Plugin) Register(r *plugin.Registrar) error {
	pr, reg, err := p.launch()
	if err != nil {
		p.log.Error("plugin failed to load; its tools answer with the error and loading is retried", "err", err)
		p.mu.Lock()
		p.reason = err.Error()
		p.mu.Unlock()
		names := p.env.Manifest.Provides.Tools
		if len(names) == 0 {
			names = []string{p.env.Name}
		}
		for _, n := range names {
			if err := r.Tool(plugin.Tool{Name: n, Description: p.env.Manifest.Description, Commands: p.env.Manifest.Commands, Handler: p.toolHandler(n)}); err != nil {
				return err
			}
		}
		if err := p.registerHooks(r); err != nil {
			return err
		}
		p.watch(nil)
		return nil
	}
	for _, h := range reg.Hooks {
		if _, err := p.hook(plugin.HookName(h)); err != nil {
			pr.kill("bad register answer")
			<-pr.done
			return err
		}
	}
	p.mu.Lock()
	p.proc, p.decl, p.live, p.since = pr, reg, reg, time.Now()
	p.mu.Unlock()
	p.watch(pr)
	if reg.Channel {
		if err := r.Channel(&channel{p: p, messaging: reg.ChannelMessaging}); err != nil {
			return err
		}
	}
	for _, t := range reg.Tools {
		if err := r.Tool(plugin.Tool{
			Name: t.Name, Description: t.Description, Commands: t.Commands,
			Handler: p.toolHandler(t.Name),
		}); err != nil {
			return err
		}
	}
	if err := p.registerHooks(r); err != nil {
		return err
	}
	for _, s := range reg.Skills {
		path := s.Path
		if !filepath.IsAbs(path) {
			path = filepath.Join(p.env.Dir, path)
		}
		// A skill folder is mounted into sandboxes: it must be the plugin's
		// own, not a host folder the plugin names.
		if rel, err := filepath.Rel(p.env.Dir, filepath.Clean(path)); err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
			return fmt.Errorf("plugin %s: skill %q: %s is outside the plugin's folder", p.env.Name, s.Name, s.Path)
		}
		if err := r.Skill(plugin.Skill{Name: s.Name, Description: s.Description, Path: path}); err != nil {
			return err
		}
	}
	return nil
}

// registerHooks registers every hook for the plugin (see runHook): which
// of them run follows what the running host's register() declared.
func (p *Plugin) registerHooks(r *plugin.Registrar) error {
	for _, h := range plugin.HookNames {
		fn, err := p.hook(h)
		if err != nil {
			return err
		}
		if err := r.Hook(h, fn); err != nil {
			return err
		}
	}
	return nil
}

// current returns the running host, or an error naming why there is none.
func (p *Plugin) current() (*proc, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case p.stopped:
		return nil, fmt.Errorf("plugin %s is stopped", p.env.Name)
	case p.proc == nil:
		return nil, fmt.Errorf("plugin %s is restarting: %s", p.env.Name, p.reason)
	}
	select {
	case <-p.proc.done: // exited; watch has not seen it yet
		return nil, fmt.Errorf("plugin %s is restarting: %s", p.env.Name, p.proc.exitErr)
	default:
	}
	return p.proc, nil
}

// Problem says why the plugin cannot run now — its host is restarting
// after a crash, or cannot start (no Node.js, no jail, createPlugin
// throws) and is retried with backoff — or "" while its host runs or
// after Stop. The gateway's /api/health reports it.
func (p *Plugin) Problem() string {
	if _, err := p.current(); err != nil {
		p.mu.Lock()
		stopped := p.stopped
		p.mu.Unlock()
		if !stopped {
			return err.Error()
		}
	}
	return ""
}

// watch restarts the host when it exits (or, with pr nil, retries loading
// it), with backoff, until Stop.
func (p *Plugin) watch(pr *proc) {
	p.watchWG.Add(1)
	go func() {
		defer p.watchWG.Done()
		var reg *registration
		for {
			if pr != nil {
				<-pr.done
			}
			p.mu.Lock()
			if p.stopped {
				p.proc = nil
				p.mu.Unlock()
				return
			}
			reason := p.reason
			if pr != nil {
				reason = pr.exitErr.Error()
				if time.Since(p.since) > healthy {
					p.restarts = 0
				}
			}
			p.proc, p.reason = nil, reason
			wait := min(backoffMin<<min(p.restarts, 10), backoffMax)
			p.restarts++
			p.mu.Unlock()
			if pr != nil {
				p.log.Error("plugin host crashed; restarting", "reason", reason, "in", wait.String())
			}
			for {
				select {
				case <-time.After(wait):
				case <-p.wake:
					return
				}
				p.mu.Lock()
				started := p.started
				p.mu.Unlock()
				npr, nreg, err := p.relaunch(started)
				if err == nil {
					pr, reg = npr, nreg
					break
				}
				wait = min(wait*2, backoffMax)
				p.mu.Lock()
				if pr != nil {
					p.reason = reason + "; restart failed: " + err.Error()
				} else {
					p.reason = err.Error()
				}
				p.mu.Unlock()
				p.log.Error("plugin host restart failed", "err", err, "next", wait.String())
			}
			p.mu.Lock()
			if p.stopped {
				p.mu.Unlock()
				pr.kill("stopped")
				<-pr.done
				return
			}
			p.proc, p.live, p.since = pr, reg, time.Now()
			p.mu.Unlock()
			p.log.Info("plugin host restarted")
		}
	}()
}

func (p *Plugin) relaunch(start bool) (*proc, *registration, error) {
	pr, reg, err := p.launch()
	if err != nil {
		return nil, nil, err
	}
	for _, h := range reg.Hooks {
		if _, err := p.hook(plugin.HookName(h)); err != nil {
			pr.kill("bad register answer")
			<-pr.done
			return nil, nil, err
		}
	}
	p.mu.Lock()
	first := p.decl
	if first == nil {
		p.decl = reg
	}
	p.mu.Unlock()
	if first == nil && len(reg.Hooks) > 0 {
		p.log.Info("the plugin loaded late; its hooks run from now on", "hooks", reg.Hooks)
	} else if first != nil && !sameRegistration(first, reg) {
		p.log.Warn("the restarted plugin declared other tools than at first; the gateway keeps the first tools, its hooks are the new ones", "hooks", reg.Hooks)
	}
	if start {
		ctx, cancel := context.WithTimeout(context.Background(), lifecycleTimeout)
		defer cancel()
		if _, err := pr.call(ctx, "start", struct{}{}); err != nil {
			pr.kill("start failed")
			<-pr.done
			return nil, nil, fmt.Errorf("start(): %w", err)
		}
	}
	return pr, reg, nil
}

func sameRegistration(a, b *registration) bool {
	if a == nil || b == nil || len(a.Tools) != len(b.Tools) || !slices.Equal(a.Hooks, b.Hooks) {
		return false
	}
	for i := range a.Tools {
		if a.Tools[i].Name != b.Tools[i].Name {
			return false
		}
	}
	return true
}

// Start calls the plugin's start() (the Host calls it in config order once
// the gateway serves) and keeps pc for the plugin's ctx calls.
func (p *Plugin) Start(ctx context.Context, pc plugin.PluginContext) error {
	p.mu.Lock()
	p.pc, p.started = pc, true
	p.mu.Unlock()
	pr, err := p.current()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, lifecycleTimeout)
	defer cancel()
	if _, err := pr.call(ctx, "start", struct{}{}); err != nil {
		return fmt.Errorf("start(): %w", err)
	}
	return nil
}

// Stop calls the plugin's stop() if it was started, then ends the host.
func (p *Plugin) Stop(ctx context.Context) error {
	p.mu.Lock()
	if p.stopped {
		p.mu.Unlock()
		return nil
	}
	p.stopped = true
	pr, started := p.proc, p.started
	close(p.wake)
	p.mu.Unlock()
	var err error
	if pr != nil {
		if started {
			cctx, cancel := context.WithTimeout(ctx, lifecycleTimeout)
			_, err = pr.call(cctx, "stop", struct{}{})
			cancel()
			if err != nil {
				err = fmt.Errorf("stop(): %w", err)
			}
		}
		pr.kill("stopped")
		<-pr.done
	}
	p.watchWG.Wait()
	return err
}

// session is the original's SessionContext, as tool handlers get it.
type session struct {
	SessionKey   string `json:"sessionKey"`
	Channel      string `json:"channel"`
	AgentName    string `json:"agentName,omitempty"`
	WorkspaceDir string `json:"workspaceDir,omitempty"`
	Cwd          string `json:"cwd,omitempty"`
	ChatID       string `json:"chatId,omitempty"`
	ThreadID     string `json:"threadId,omitempty"`
}

func (p *Plugin) toolHandler(name string) plugin.Handler {
	return func(ctx context.Context, call *plugin.Call) (plugin.Result, error) {
		pr, err := p.current()
		if err != nil {
			return plugin.Result{ExitCode: 1}, err
		}
		cwd := ""
		if rel, err := filepath.Rel(call.Workspace, call.Dir); err == nil && rel != "." {
			cwd = filepath.ToSlash(rel)
		}
		args := call.Args
		if args == nil {
			args = []string{}
		}
		timeout := DefaultCallTimeout
		if p.env.Timeout > 0 {
			timeout = p.env.Timeout
		}
		ctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		raw, err := pr.call(ctx, "tool", map[string]any{
			"tool": name, "args": args, "config": call.Config,
			"session": session{
				SessionKey: call.Session.SessionKey, Channel: call.Session.Channel,
				AgentName: call.Agent, WorkspaceDir: call.Workspace, Cwd: cwd,
				ChatID: call.Session.ChatID, ThreadID: call.Session.ThreadID,
			},
		})
		if err != nil {
			return plugin.Result{ExitCode: 1}, p.callError(ctx, pr, "tool '"+name+"'", err)
		}
		var res struct {
			Output   string `json:"output"`
			ExitCode int    `json:"exitCode"`
		}
		if err := strictDecode(raw, &res); err != nil {
			return plugin.Result{ExitCode: 1}, fmt.Errorf("plugin %s: tool '%s': %w", p.env.Name, name, err)
		}
		return plugin.Result{Output: res.Output, ExitCode: res.ExitCode}, nil
	}
}

// callError turns a failed request into the error the agent or client
// sees, naming the plugin; a timeout kills the host (it is restarted).
func (p *Plugin) callError(ctx context.Context, pr *proc, what string, err error) error {
	var pe *pluginError
	switch {
	case errors.As(err, &pe):
		if pe.accessDenied() {
			p.log.Warn("plugin refused access outside its folders", "call", what, "err", pe.msg)
		}
		return fmt.Errorf("plugin %s: %s failed: %s%s", p.env.Name, what, pe.msg, pe.accessHint(p.env.Name))
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		why := fmt.Sprintf("%s did not answer in time; the plugin host was killed", what)
		p.log.Error("plugin host killed", "reason", why)
		pr.kill(why)
		return fmt.Errorf("plugin %s: %s", p.env.Name, why)
	case ctx.Err() != nil:
		return fmt.Errorf("plugin %s: %s: %w", p.env.Name, what, ctx.Err())
	default:
		return fmt.Errorf("plugin %s: %s: %w", p.env.Name, what, err)
	}
}

func strictDecode(raw json.RawMessage, v any) error {
	if len(raw) == 0 {
		return errors.New("empty answer")
	}
	dec := json.NewDecoder(strings.NewReader(string(raw)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("bad answer: %w", err)
	}
	return nil
}
