// Package gateway assembles the running gateway from a config: the audit
// log, the sandbox runtime and each agent's sandbox, the tool runner and
// the HTTP API; it starts them in order and stops them in reverse, draining
// in-flight calls.
package gateway

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/beige-dev/beige/internal/agent"
	"github.com/beige-dev/beige/internal/approval"
	"github.com/beige-dev/beige/internal/audit"
	"github.com/beige-dev/beige/internal/config"
	"github.com/beige-dev/beige/internal/egress"
	"github.com/beige-dev/beige/internal/home"
	"github.com/beige-dev/beige/internal/httpapi"
	"github.com/beige-dev/beige/internal/llm"
	"github.com/beige-dev/beige/internal/metrics"
	"github.com/beige-dev/beige/internal/pipeline"
	"github.com/beige-dev/beige/internal/plugin"
	_ "github.com/beige-dev/beige/internal/plugin/builtin" // the built-in plugins
	"github.com/beige-dev/beige/internal/policy"
	"github.com/beige-dev/beige/internal/redact"
	"github.com/beige-dev/beige/internal/routing"
	"github.com/beige-dev/beige/internal/sandbox"
	"github.com/beige-dev/beige/internal/sandbox/docker"
	"github.com/beige-dev/beige/internal/settings"
	"github.com/beige-dev/beige/internal/tools"
	"github.com/beige-dev/beige/internal/webui"
)

// Options configures a gateway. Zero fields mean the defaults.
type Options struct {
	Home   home.Home
	Config *config.Config // already loaded and validated
	Logger *slog.Logger
	// HelperBinary is the static in-sandbox binary; default FindHelperBinary.
	HelperBinary string
	// Runtime runs the sandboxes; default the Docker engine (DOCKER_HOST).
	Runtime sandbox.Runtime
	// Addr overrides gateway.host:port (tests use "127.0.0.1:0").
	Addr string
	// DrainTimeout bounds the wait for in-flight calls at shutdown (default 10 s).
	DrainTimeout time.Duration
	// RestartDrainTimeout bounds it for a restart (default 3 s), so that
	// the gateway serves again within seconds.
	RestartDrainTimeout time.Duration
	// Reload reads the config from disk again, for a restart; nil means a
	// restart keeps the config it has.
	Reload func() (*config.Config, error)
	// Egress tunes the agents' egress proxies (tests: a resolver, a
	// dialer); nil means the defaults. Audit and Logger are the gateway's.
	Egress *egress.Options
	// Disk, if set, reports a problem with $BEIGE_HOME's disk ("" when
	// none) for /api/health: the gateway's disk reserve (home.Reserve).
	Disk interface{ Problem() string }
	// Metrics are the gateway's Prometheus metrics (GET /metrics); nil
	// means new ones. Run keeps the same across restarts, so the counters
	// count since the process started.
	Metrics *metrics.Metrics
	// OnListen, if set, is called with the API's address (host:port) each
	// time a gateway starts serving: at start and after every restart,
	// which may move it to the reloaded config's address.
	OnListen func(addr string)

	// listener, if set, is the API's listener, already bound (a restart
	// onto a new address binds it before the old gateway stops).
	listener net.Listener
	// auditUnchained writes the audit log without its hash chain: for the
	// benchmark of what the chain costs.
	auditUnchained bool
}

// Gateway is a running gateway.
type Gateway struct {
	opts    Options
	cfg     *config.Config
	log     *slog.Logger
	home    home.Home
	runtime sandbox.Runtime
	audit   *audit.Logger
	policy  *policy.Engine
	pipe    *pipeline.Pipeline // the one path of every tool call
	// approvals holds the calls that wait for a human (agents.<a>.approval).
	approvals *approval.Broker
	runner    *tools.Runner // the core tools, run through pipe
	agents    map[string]*agentRuntime

	catalogue *llm.Catalogue
	plugins   *plugin.Host
	providers map[string]llm.Provider // by config name
	health    *routing.Health
	router    *routing.Router
	manager   *agent.Manager
	settings  *settings.Store
	// auditTail is the web console's view of the audit log.
	auditTail *webui.FileTail

	// pluginEgress are the TypeScript/JavaScript plugins' egress proxies
	// (openPluginEgress), closed by Shutdown.
	pluginEgressMu sync.Mutex
	pluginEgress   []*egress.Proxy

	caOnce sync.Once
	ca     *egress.CA // the egress proxy's CA, loaded on first need
	caErr  error

	channelsCancel context.CancelFunc
	channelErrs    sync.Map // channel name -> why it did not start

	ln      net.Listener
	srv     *http.Server
	metrics *metrics.Metrics
	// metricsSrv serves gateway.metrics.listen; nil when not set.
	metricsSrv *http.Server
	metricsLn  net.Listener
	ready      atomic.Bool
	started    time.Time

	// baseCtx is the context of every request; it is cancelled when the
	// drain at shutdown runs out of time.
	baseCtx    context.Context
	baseCancel context.CancelFunc
	stopping   atomic.Bool
	ownRuntime bool // the runtime was made here, so Shutdown closes it

	restartReq chan struct{}          // POST /api/gateway/restart
	configErr  atomic.Pointer[string] // why the last reload was refused

	stopOnce sync.Once
	stopErr  error
}

// Start brings the gateway up: it listens first (so a busy port fails at
// once), serves /api/health ("starting") while the sandboxes are prepared,
// and returns when every agent's sandbox is ready or has failed (the
// failures are in /api/health and the log; calls retry them).
func Start(ctx context.Context, opts Options) (*Gateway, error) {
	if opts.Config == nil {
		return nil, errors.New("gateway: no config")
	}
	opts.setDefaults()
	cfg := opts.Config
	// Configured secrets never reach the log, the audit log or a tool's
	// result (issue #15): one Redactor per config, nil when none is set.
	red := redact.FromConfig(cfg)
	g := &Gateway{
		opts:    opts,
		cfg:     cfg,
		log:     slog.New(red.Handler(opts.Logger.Handler())),
		home:    opts.Home,
		agents:  map[string]*agentRuntime{},
		started: time.Now(),
	}
	g.baseCtx, g.baseCancel = context.WithCancel(context.Background())
	g.restartReq = make(chan struct{}, 1)
	g.metrics = opts.Metrics
	ok := false
	defer func() {
		if !ok {
			g.Shutdown(context.Background())
			// Shutdown closes the listener only once it is served.
			if g.srv == nil {
				if g.ln != nil {
					g.ln.Close()
				} else if opts.listener != nil {
					opts.listener.Close()
				}
			}
		}
	}()

	if soft, hard, err := httpapi.RaiseFileLimit(); err != nil {
		g.log.Warn("could not raise the open-file limit", "soft", soft, "hard", hard, "err", err)
	} else if soft > 0 && soft < uint64(4*cfg.Gateway.HTTP.MaxConnections) {
		g.log.Warn("the open-file limit is low for gateway.http.maxConnections", "limit", soft, "maxConnections", cfg.Gateway.HTTP.MaxConnections)
	}
	// $BEIGE_HOME and the agents' workspaces must stay closed to other
	// local users (an older beige made them 0755).
	fixed, err := g.home.Secure()
	if err != nil {
		return nil, err
	}
	for _, f := range fixed {
		g.log.Warn("made a folder of BEIGE_HOME private to the gateway's user", "folder", f)
	}
	auditSize := cfg.Gateway.Audit.MaxSizeBytes
	if auditSize == 0 {
		auditSize = cfg.Gateway.Log.MaxSizeBytes
	}
	g.auditTail = webui.NewFileTail(g.home.AuditLog())
	g.audit, err = audit.Open(g.home.AuditLog(), &audit.Options{MaxSizeBytes: auditSize, MaxFiles: cfg.Gateway.Audit.MaxFiles,
		Logger: g.log.With("component", "audit"), OnWriteError: home.ReleaseOnFull, Redactor: auditRedactor(red), HeadPath: g.home.AuditHead(),
		Unchained: g.opts.auditUnchained,
		OnRecord: func(seq int64) {
			g.metrics.AuditRecord()
			g.auditTail.Notify()
			if seq > 0 {
				g.metrics.AuditHead(seq)
			}
		}})
	if err != nil {
		return nil, fmt.Errorf("open audit log: %w", err)
	}
	if seq := g.audit.Seq(); seq > 0 {
		g.metrics.AuditHead(seq)
	}
	if n := cfg.Gateway.Audit.MaxFiles; n > 0 {
		g.log.Warn("gateway.audit.maxFiles is set: the oldest audit files are deleted, so a busy agent can push older records out of the audit log", "maxFiles", n)
	}
	for _, w := range plugin.ConfigWarnings(cfg) {
		g.log.Warn("config: " + w)
	}
	// The one policy engine of this config (a reload starts a new gateway,
	// and so builds a new one).
	allowed := map[string][]string{}
	for name, a := range cfg.Agents {
		allowed[name] = a.Tools
	}
	g.policy = policy.New(allowed)
	g.catalogue = newCatalogue(cfg)
	if err := g.openLLM(); err != nil {
		return nil, err
	}
	// Before the plugins: their egress proxies ask through it.
	g.approvals = newApprovals(cfg, g.log)
	g.plugins, err = plugin.NewHost(cfg, &plugin.Options{Home: g.home, Audit: g.audit, Policy: g.policy, Freeze: g.freeze, Logger: g.log.With("component", "plugins"),
		EgressSocket: g.openPluginEgress})
	if err != nil {
		return nil, fmt.Errorf("load plugins: %w", err)
	}
	g.pipe = newPipeline(g.audit, g.policy, g.approvals, g.plugins, red, g.metrics, g.log)
	g.plugins.SetPipeline(g.pipe)
	g.runner = tools.NewRunner(g.pipe, g.log.With("component", "tools"))
	g.runner.SetCallTokens(g.callToken)

	if g.opts.Runtime == nil {
		if g.opts.HelperBinary == "" {
			g.opts.HelperBinary, err = FindHelperBinary(g.home)
			if err != nil {
				return nil, err
			}
		}
		// This gateway owns only the sandboxes of its instance: by default a
		// hash of $BEIGE_HOME, so that gateways of different homes on one
		// engine never remove or take over each other's containers.
		// BEIGE_SANDBOX_INSTANCE overrides it (tests).
		d, err := docker.New(docker.Options{Logger: g.log.With("component", "sandbox"),
			Instance: os.Getenv("BEIGE_SANDBOX_INSTANCE"), Home: g.home.Dir,
			OnHelperRestart: g.metrics.HelperRestart, OnExecFallback: g.metrics.ExecFallback})
		if err != nil {
			return nil, fmt.Errorf("connect to the Docker engine: %w", err)
		}
		g.opts.Runtime = d
		g.ownRuntime = true
	}
	g.runtime = g.opts.Runtime

	if g.opts.listener != nil {
		g.ln = g.opts.listener
	} else if g.ln, err = listen(g.opts.listenAddr()); err != nil {
		return nil, err
	}

	g.settings = settings.Open(filepath.Join(g.home.SessionsDir(), "session-settings.json"), g.log.With("component", "settings"))
	if err := g.openAgents(); err != nil {
		return nil, err
	}
	for _, name := range cfg.AgentOrder {
		a := newAgentRuntime(g, name, cfg.Agents[name])
		g.agents[name] = a
		if err := a.openToolBridge(); err != nil {
			return nil, err
		}
	}
	g.setupMetrics()
	// Serve only now: the handlers read g.agents, g.manager and g.settings.
	api := httpapi.New(g, httpapi.Options{Host: cfg.Gateway.Host, AuthToken: cfg.Gateway.AuthToken.Reveal(), Logger: g.log.With("component", "http"),
		Metrics: g.metrics})
	ui := webui.New(webui.Options{AuthToken: cfg.Gateway.AuthToken.Reveal(), Status: g.consoleStatus, Audit: g.auditTail,
		Chat: consoleChat{g}, Approvals: consoleApprovals{g}, Logger: g.log.With("component", "webui")})
	ui.Register(api)
	srv, ln := api.HTTPServer(g.ln, httpapi.ServeOptions{
		MaxConns:    cfg.Gateway.HTTP.MaxConnections,
		BaseContext: g.baseCtx,
		ErrorLog:    slog.NewLogLogger(g.log.Handler(), slog.LevelWarn),
	})
	g.srv = srv
	srv.RegisterOnShutdown(ui.Close) // the console's event streams would hold up the drain
	go func() {
		if err := g.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			g.log.Error("http server stopped", "err", err)
		}
	}()
	g.log.Info("listening", "url", "http://"+g.ln.Addr().String())
	if err := g.listenMetrics(); err != nil {
		return nil, err
	}
	if g.opts.OnListen != nil {
		g.opts.OnListen(g.ln.Addr().String())
	}
	if err := g.prepareSandboxes(ctx); err != nil {
		return nil, err
	}
	g.ready.Store(true)
	g.startChannels()
	if err := g.plugins.RunGatewayStarted(ctx, &plugin.GatewayStartedEvent{Agents: slices.Clone(cfg.AgentOrder)}); err != nil {
		g.log.Warn("gatewayStarted hook failed", "err", err)
	}
	trimResident()
	g.log.Info("gateway ready", "agents", len(g.agents), "startup", time.Since(g.started).Round(time.Millisecond))
	ok = true
	return g, nil
}

// setDefaults fills in the zero fields that have a default.
func (o *Options) setDefaults() {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.DrainTimeout == 0 {
		o.DrainTimeout = 10 * time.Second
	}
	if o.RestartDrainTimeout == 0 {
		o.RestartDrainTimeout = 3 * time.Second
	}
	if o.Metrics == nil {
		o.Metrics = metrics.New()
	}
}

// listenAddr is the address the API is to listen on.
func (o *Options) listenAddr() string {
	if o.Addr != "" {
		return o.Addr
	}
	return net.JoinHostPort(o.Config.Gateway.Host, strconv.Itoa(o.Config.Gateway.Port))
}

func listen(addr string) (net.Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		if errors.Is(err, syscall.EADDRINUSE) {
			return nil, fmt.Errorf("listen on %s: the address is in use (is another gateway running? try: beige gateway status)", addr)
		}
		return nil, fmt.Errorf("listen on %s: %w", addr, err)
	}
	return ln, nil
}

// prepareSandboxes ensures every agent's sandbox in parallel, then removes
// the sandboxes of agents that are no longer configured.
func (g *Gateway) prepareSandboxes(ctx context.Context) error {
	var eg errgroup.Group
	for _, a := range g.agents {
		eg.Go(func() error {
			if _, err := a.ensure(ctx); err != nil {
				g.log.Error("sandbox not ready", "agent", a.name, "err", err)
			}
			return nil
		})
	}
	eg.Wait()
	if err := ctx.Err(); err != nil {
		return err
	}
	keep := make([]string, 0, len(g.agents))
	for name := range g.agents {
		keep = append(keep, name)
	}
	removed, err := g.runtime.Prune(ctx, keep)
	if err != nil {
		g.log.Warn("could not remove the sandboxes of agents no longer configured", "err", err)
	}
	for _, name := range removed {
		g.log.Info("removed sandbox of an agent no longer configured", "agent", name)
	}
	return nil
}

// Addr is the address the API listens on.
func (g *Gateway) Addr() string { return g.ln.Addr().String() }

// URL is the API's base URL.
func (g *Gateway) URL() string { return "http://" + g.Addr() }

// Shutdown stops the API, waiting up to the drain timeout for in-flight
// calls (then cancelling them), and drops the connections to the sandboxes.
// The containers keep running: the next gateway re-attaches to them.
func (g *Gateway) Shutdown(ctx context.Context) error {
	g.stopOnce.Do(func() {
		g.ready.Store(false)
		g.stopping.Store(true)
		var errs []error
		if g.channelsCancel != nil {
			g.channelsCancel() // no new messages from channels
		}
		g.drain(ctx)
		if g.metricsSrv != nil {
			g.metricsSrv.Close()
		}
		if g.plugins != nil {
			if err := g.plugins.RunGatewayShutdown(ctx, &plugin.GatewayShutdownEvent{}); err != nil {
				g.log.Warn("gatewayShutdown hook failed", "err", err)
			}
		}
		for _, a := range g.agents {
			errs = append(errs, a.closeToolBridge())
		}
		if g.plugins != nil {
			pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			errs = append(errs, g.plugins.Close(pctx))
			cancel()
		}
		// After the plugins, which may still be connected through them.
		errs = append(errs, g.closePluginEgress())
		if g.runtime != nil && g.ownRuntime {
			errs = append(errs, g.runtime.Close())
		}
		if g.health != nil {
			g.health.Close()
		}
		if g.audit != nil {
			errs = append(errs, g.audit.Close())
		}
		g.stopErr = errors.Join(errs...)
		g.log.Info("gateway stopped")
	})
	return g.stopErr
}

// drain stops the API from taking new requests and waits, up to the drain
// timeout, for the requests and prompts in flight (channel prompts too);
// then it cancels what is left, so that each gets a clear error.
func (g *Gateway) drain(ctx context.Context) {
	dctx, cancel := context.WithTimeout(ctx, g.opts.DrainTimeout)
	defer cancel()
	var wg sync.WaitGroup
	srvDone := make(chan struct{})
	if g.srv != nil {
		go func() {
			defer close(srvDone)
			if err := g.srv.Shutdown(dctx); err != nil {
				// Cancelled below; give the handlers a moment to answer.
				sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
				defer cancel()
				if g.srv.Shutdown(sctx) != nil {
					g.srv.Close()
				}
			}
		}()
	} else {
		close(srvDone)
	}
	if g.manager != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			g.manager.Shutdown(dctx) // waits for running prompts
		}()
	}
	select {
	case <-srvDone:
	case <-dctx.Done():
	}
	if dctx.Err() != nil {
		g.log.Warn("calls still in flight after the drain timeout; cancelling them", "timeout", g.opts.DrainTimeout)
		g.baseCancel()
		if g.manager != nil {
			g.manager.Close() // aborts the running prompts
		}
	}
	wg.Wait()
	<-srvDone
	g.baseCancel()
	if g.manager != nil {
		g.manager.Close()
	}
}

// Run starts the gateway and serves until ctx is done, then shuts down.
// A restart (POST /api/gateway/restart) reloads the config: when it
// validates, the gateway drains (at most RestartDrainTimeout), stops and
// starts again on it; when it does not, the running gateway stays up and
// /api/health and the log say why. A new address that cannot be bound (a
// port in use) is found before the running gateway stops, which then keeps
// serving; a new config that fails to start otherwise falls back to the one
// that ran.
func Run(ctx context.Context, opts Options) error {
	opts.setDefaults()
	g, err := Start(ctx, opts)
	if err != nil {
		return err
	}
	for {
		select {
		case <-ctx.Done():
			g.log.Info("stopping")
			return g.Shutdown(context.Background())
		case <-g.restartReq:
		}
		cfg := opts.Config
		if opts.Reload != nil {
			newCfg, err := opts.Reload()
			if err != nil {
				msg := err.Error()
				g.configErr.Store(&msg)
				g.log.Error("restart refused: the config does not validate; the gateway keeps running on the one it has", "errors", msg)
				continue
			}
			cfg = newCfg
		}
		next := opts
		next.Config = cfg
		next.listener = nil
		if addr := next.listenAddr(); addr != opts.listenAddr() {
			ln, err := listen(addr)
			if err != nil {
				msg := "the reloaded config did not start: " + err.Error()
				g.configErr.Store(&msg)
				g.log.Error("restart refused: the new address cannot be bound; the gateway keeps running on the config it has", "err", err)
				continue
			}
			next.listener = ln
		}
		g.log.Info("restarting", "config", cfg.File, "drainTimeout", opts.RestartDrainTimeout)
		g.opts.DrainTimeout = opts.RestartDrainTimeout
		g.Shutdown(context.Background())
		ng, startErr := Start(ctx, next)
		if startErr != nil {
			g.log.Error("the new config did not start; starting again on the old one", "err", startErr)
			if ng, err = Start(ctx, opts); err != nil {
				return fmt.Errorf("restart on the old config after the new one failed (%v): %w", startErr, err)
			}
			msg := "the reloaded config did not start: " + startErr.Error()
			ng.configErr.Store(&msg)
		} else {
			next.listener = nil // used; a later restart binds its own
			opts = next
		}
		g = ng
		g.log.Info("restarted")
	}
}

// Restart asks Run for a graceful restart (POST /api/gateway/restart).
func (g *Gateway) Restart(ctx context.Context) error {
	select {
	case g.restartReq <- struct{}{}:
	default: // one is already pending
	}
	return nil
}

// freeze pauses the agent's sandbox while a plugin tool checks and then uses
// workspace files (plugin.Options.Freeze).
func (g *Gateway) freeze(ctx context.Context, agent string) (func(), error) {
	a, ok := g.agents[agent]
	if !ok {
		return nil, fmt.Errorf("unknown agent %q", agent)
	}
	sb, err := a.ensure(ctx)
	if err != nil {
		return nil, err
	}
	f, ok := sb.(sandbox.Freezer)
	if !ok {
		return nil, fmt.Errorf("the sandbox of agent %q cannot be frozen", agent)
	}
	return f.Freeze(ctx)
}

// auditRedactor is red as an audit.Redactor; nil (not a typed nil) when no
// secret is configured.
func auditRedactor(red *redact.Redactor) audit.Redactor {
	if red == nil {
		return nil
	}
	return red
}
