package gateway

import (
	"context"
	"errors"
	"github.com/beige-dev/beige/internal/metrics"
	"log/slog"
	"net/http"
	"time"

	"github.com/beige-dev/beige/internal/approval"
	"github.com/beige-dev/beige/internal/audit"
	"github.com/beige-dev/beige/internal/config"
	"github.com/beige-dev/beige/internal/httpapi"
	"github.com/beige-dev/beige/internal/pipeline"
	"github.com/beige-dev/beige/internal/plugin"
	"github.com/beige-dev/beige/internal/policy"
	"github.com/beige-dev/beige/internal/proto"
	"github.com/beige-dev/beige/internal/redact"
	"github.com/beige-dev/beige/internal/tools"
)

var _ httpapi.Backend = (*Gateway)(nil)

// newPipeline assembles the one tool pipeline every call takes — the
// model's, POST /api/agents/:name/exec and the sockets' (see
// internal/pipeline): policy, audit, the plugins' tool hooks, and the
// redaction of configured secrets in every result.
func newPipeline(a *audit.Logger, p *policy.Engine, ap *approval.Broker, hooks *plugin.Host, red *redact.Redactor, m *metrics.Metrics, log *slog.Logger) *pipeline.Pipeline {
	opts := pipeline.Options{
		Audit:     a,
		Policy:    p,
		Approvals: ap,
		Hooks:     hooks,
		Metrics:   pipeline.Observe(toolCallMetrics(m)),
		Logger:    log.With("component", "tools"),
	}
	if red != nil {
		opts.Redact = red.String
	}
	return pipeline.New(opts)
}

// toolCallMetrics counts every call of the pipeline in
// beige_tool_calls_total and its duration histogram: the policy's (or a
// hook's) decision, and the outcome — denied, canceled (the caller went
// away or the gateway stopped), error (a tool's failure, or a call that
// could not be carried out) or ok.
func toolCallMetrics(m *metrics.Metrics) func(c *pipeline.Call, res pipeline.Result, err error, d time.Duration) {
	return func(c *pipeline.Call, res pipeline.Result, err error, d time.Duration) {
		decision, outcome := metrics.DecisionAllow, metrics.OutcomeOK
		switch {
		case res.Denied():
			decision, outcome = metrics.DecisionDeny, metrics.OutcomeDenied
		case err != nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)):
			outcome = metrics.OutcomeCanceled
		case err != nil || res.IsError || res.ExitCode != 0 || res.Err != nil:
			outcome = metrics.OutcomeError
		}
		m.ToolCall(c.Agent, c.Tool, decision, outcome, d)
	}
}

// Health implements httpapi.Backend.
func (g *Gateway) Health(ctx context.Context) proto.Health {
	h := proto.Health{Status: "ok", Stats: g.stats()}
	if !g.ready.Load() {
		h.Status = "starting"
	}
	if msg := g.configErr.Load(); msg != nil {
		h.Config = *msg
	}
	engine := g.pingEngine(ctx)
	if g.opts.Disk != nil {
		if p := g.opts.Disk.Problem(); p != "" {
			h.Disk = p
			if h.Status == "ok" {
				h.Status = "degraded"
			}
		}
	}
	for name, a := range g.agents {
		p := a.problem()
		if p == "" && engine != nil {
			p = "sandbox engine: " + engine.Error()
		}
		if p != "" {
			if h.Agents == nil {
				h.Agents = map[string]string{}
			}
			h.Agents[name] = p
			if h.Status == "ok" {
				h.Status = "degraded"
			}
		}
	}
	if h.Plugins = g.plugins.Problems(); len(h.Plugins) > 0 && h.Status == "ok" {
		h.Status = "degraded"
	}
	return h
}

// pingEngine checks that the sandbox engine answers, when the runtime can
// tell: a sandbox that was ready is no use while its engine is down.
func (g *Gateway) pingEngine(ctx context.Context) error {
	p, ok := g.runtime.(interface{ Ping(context.Context) error })
	if !ok || len(g.agents) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	return p.Ping(ctx)
}

func modelRef(m config.ModelRef) proto.ModelRef {
	return proto.ModelRef{Provider: m.Provider, Model: m.Model, ThinkingLevel: m.ThinkingLevel}
}

func modelRefs(ms []config.ModelRef) []proto.ModelRef {
	out := make([]proto.ModelRef, len(ms))
	for i, m := range ms {
		out[i] = modelRef(m)
	}
	return out
}

// Agents implements httpapi.Backend.
func (g *Gateway) Agents(ctx context.Context) []proto.AgentInfo {
	out := make([]proto.AgentInfo, 0, len(g.agents))
	for _, name := range g.cfg.AgentOrder {
		a := g.agents[name]
		out = append(out, proto.AgentInfo{
			Name:           name,
			Model:          modelRef(a.cfg.Model),
			FallbackModels: modelRefs(a.cfg.FallbackModels),
			Tools:          a.cfg.Tools,
			Skills:         a.cfg.Skills,
			WorkspaceDir:   a.workspace(),
			ToolContext:    g.plugins.ToolContext(name),
			SkillContext:   g.plugins.SkillContext(name),
		})
	}
	return out
}

// Config implements httpapi.Backend. It never includes a key or token.
func (g *Gateway) Config(ctx context.Context) proto.ConfigView {
	var v proto.ConfigView
	v.Agents = map[string]proto.AgentConfigView{}
	for name, a := range g.agents {
		v.Agents[name] = proto.AgentConfigView{
			Model:          modelRef(a.cfg.Model),
			FallbackModels: modelRefs(a.cfg.FallbackModels),
			Tools:          a.cfg.Tools,
			Skills:         a.cfg.Skills,
			WorkspaceDir:   a.workspace(),
		}
	}
	v.LLM.Providers = map[string]proto.ProviderView{}
	for name, p := range g.cfg.LLM.Providers {
		pv := proto.ProviderView{Concurrency: p.Concurrency}
		if p.BaseURL != "" {
			pv.BaseURL = &p.BaseURL
		}
		if p.API != "" {
			pv.API = &p.API
		}
		v.LLM.Providers[name] = pv
	}
	return v
}

// Exec implements httpapi.Backend: a core tool call through the HTTP API.
func (g *Gateway) Exec(ctx context.Context, agent string, req proto.ExecRequest) (proto.ToolResult, error) {
	a, ok := g.agents[agent]
	if !ok {
		return proto.ToolResult{}, proto.Errorf(http.StatusNotFound, "unknown agent %q", agent)
	}
	call, err := tools.Decode(req.Tool, req.Params)
	if err != nil {
		return proto.ToolResult{}, proto.Errorf(http.StatusBadRequest, "%v", err)
	}
	sb, err := a.ensure(ctx)
	if err != nil {
		return proto.ToolResult{}, err
	}
	key := req.SessionKey
	if key == "" {
		key = "tui:" + agent + ":default"
	}
	// read returns images only to a model that takes them: the active
	// model when it is one of the agent's (any other name is only audited).
	noImages := false
	if m := req.ActiveModel; m != nil {
		for _, ref := range a.models() {
			if ref.Provider == m.Provider && ref.Model == m.ModelID {
				noImages = !g.modelInfo(ref).AcceptsImages()
				break
			}
		}
	}
	res, err := g.runner.Run(ctx, tools.Invocation{
		Agent:       agent,
		Sandbox:     sb,
		Call:        call,
		Session:     proto.ParseSessionKey(agent, key),
		Model:       req.ActiveModel.String(),
		ExecTimeout: tools.HTTPExecTimeout,
		NoImages:    noImages,
	})
	var nr *pipeline.NotRunError
	if errors.As(err, &nr) {
		return proto.ToolResult{}, proto.Errorf(http.StatusServiceUnavailable, "%s", err)
	}
	return res, g.stopError(err)
}
