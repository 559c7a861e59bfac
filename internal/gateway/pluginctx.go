package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"

	"github.com/beige-dev/beige/internal/agent"
	"github.com/beige-dev/beige/internal/config"
	"github.com/beige-dev/beige/internal/llm"
	"github.com/beige-dev/beige/internal/plugin"
	"github.com/beige-dev/beige/internal/proto"
)

// modelSetting is the session setting that pins a session to one of its
// agent's models ("provider/model").
const modelSetting = "model"

// pluginContext is the gateway as channel plugins see it.
type pluginContext struct {
	g *Gateway

	mu      sync.Mutex
	running map[string]int // agent\x00sessionKey -> prompts running
}

var _ plugin.PluginContext = (*pluginContext)(nil)
var _ plugin.ModelLookup = (*pluginContext)(nil)
var _ plugin.ModelHealth = (*pluginContext)(nil)
var _ plugin.Disposer = (*pluginContext)(nil)
var _ plugin.UsageReader = (*pluginContext)(nil)
var _ plugin.MetadataStore = (*pluginContext)(nil)

func (p *pluginContext) Agents() []string { return slices.Clone(p.g.cfg.AgentOrder) }

// Sessions lists an agent's sessions (the original's ctx.listSessions and
// getSessionEntry, for TypeScript plugins).
func (p *pluginContext) Sessions(ctx context.Context, agent string) ([]proto.SessionInfo, error) {
	return p.g.Sessions(ctx, agent)
}

func (p *pluginContext) Prompt(ctx context.Context, req plugin.PromptRequest) (*plugin.PromptResult, error) {
	if _, ok := p.g.agents[req.Agent]; !ok {
		return nil, fmt.Errorf("unknown agent %q", req.Agent)
	}
	key := req.Agent + "\x00" + req.SessionKey
	p.mu.Lock()
	p.running[key]++
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		if p.running[key]--; p.running[key] == 0 {
			delete(p.running, key)
		}
		p.mu.Unlock()
	}()
	opts := &agent.PromptOptions{OnEvent: req.OnEvent, Channel: req.Channel, ReplyTo: req.ReplyTo, OnCompactionStart: req.OnCompactionStart}
	if req.OnCompactionEnd != nil {
		opts.OnCompactionEnd = func(o agent.CompactionOutcome) {
			req.OnCompactionEnd(plugin.CompactionEnd{Success: o.Success, TokensBefore: o.TokensBefore, WillRetry: o.WillRetry, ErrorMessage: o.ErrorMessage})
		}
	}
	if req.ModelOverride != "" {
		provider, modelID, _ := strings.Cut(req.ModelOverride, "/")
		ref, err := p.g.agentModel(req.Agent, provider, modelID)
		if err != nil {
			return nil, err
		}
		opts.Model = &routedModel{g: p.g, agent: p.g.agents[req.Agent], override: &ref}
	}
	if req.OnToolStart != nil || req.OnToolCall != nil {
		opts.OnToolStart = func(name string, args json.RawMessage) {
			if req.OnToolStart != nil {
				req.OnToolStart(agent.ToolCallSummary(name, args))
			}
			if req.OnToolCall != nil {
				req.OnToolCall(name, args)
			}
		}
	}
	res, err := p.g.manager.Prompt(ctx, req.Agent, req.SessionKey, req.Message, opts)
	if err != nil {
		return nil, err
	}
	out := &plugin.PromptResult{Text: res.Text, Usage: res.Usage}
	for i := len(res.Messages) - 1; i >= 0; i-- {
		if m := res.Messages[i].Assistant; m != nil {
			out.Model = m.Provider + "/" + m.Model
			break
		}
	}
	return out, nil
}

func (p *pluginContext) NewSession(ctx context.Context, agentName, sessionKey string) error {
	if err := p.g.manager.NewSession(ctx, agentName, sessionKey); err != nil {
		return err
	}
	// The old session under this key is done with.
	ev := &plugin.SessionDisposedEvent{Agent: agentName, Session: proto.ParseSessionKey(agentName, sessionKey)}
	if err := p.g.plugins.RunSessionDisposed(ctx, ev); err != nil {
		p.g.log.Warn("sessionDisposed hook failed", "agent", agentName, "session", sessionKey, "err", err)
	}
	return nil
}

func (p *pluginContext) Abort(agentName, sessionKey string) bool {
	return p.g.manager.Abort(agentName, sessionKey)
}

func (p *pluginContext) Compact(ctx context.Context, agentName, sessionKey string) error {
	_, err := p.g.manager.Compact(ctx, agentName, sessionKey)
	return err
}

func (p *pluginContext) Status(ctx context.Context, agentName, sessionKey string) (plugin.SessionStatus, error) {
	a, ok := p.g.agents[agentName]
	if !ok {
		return plugin.SessionStatus{}, fmt.Errorf("unknown agent %q", agentName)
	}
	st := plugin.SessionStatus{Agent: agentName, SessionKey: sessionKey, Model: a.cfg.Model.String()}
	if pinned := p.g.pinnedModel(a, sessionKey); pinned != nil {
		st.Model, st.Pinned = pinned.String(), true
	}
	p.mu.Lock()
	st.Running = p.running[agentName+"\x00"+sessionKey] > 0
	p.mu.Unlock()
	sessions, err := p.g.manager.Sessions(ctx, agentName)
	if err != nil {
		return st, err
	}
	for _, s := range sessions {
		if s.ID == sessionKey {
			st.File, st.CreatedAt, st.UpdatedAt = s.File, s.CreatedAt, s.UpdatedAt
		}
	}
	return st, nil
}

func (p *pluginContext) Models(agentName string) []string {
	a, ok := p.g.agents[agentName]
	if !ok {
		return nil
	}
	var out []string
	for _, ref := range a.models() {
		out = append(out, ref.String())
	}
	return out
}

func (p *pluginContext) SetModel(ctx context.Context, agentName, sessionKey, model string) error {
	if model == "" {
		return p.g.settings.Set(sessionKey, modelSetting, nil)
	}
	provider, id, _ := strings.Cut(model, "/")
	return p.g.pinModel(agentName, sessionKey, provider, id)
}

func (p *pluginContext) Settings(sessionKey string, channelDefaults map[string]any) map[string]any {
	return p.g.settings.Resolve(sessionKey, plugin.SystemSettings, channelDefaults)
}

func (p *pluginContext) SetSetting(sessionKey, name string, value any) error {
	return p.g.settings.Set(sessionKey, name, value)
}

// LookupModel implements plugin.ModelLookup: the metadata of a model of a
// configured provider.
func (p *pluginContext) LookupModel(provider, modelID string) (llm.Model, bool) {
	if _, ok := p.g.cfg.LLM.Providers[provider]; !ok || modelID == "" {
		return llm.Model{}, false
	}
	return p.g.modelInfo(config.ModelRef{Provider: provider, Model: modelID}), true
}

// ModelHealth implements plugin.ModelHealth from the routing's health store.
func (p *pluginContext) ModelHealth(provider, modelID string) (plugin.ModelHealthStatus, bool) {
	h := p.g.health
	if h == nil {
		return plugin.ModelHealthStatus{}, false
	}
	e, ok := h.Entry(provider + "/" + modelID)
	if !ok {
		return plugin.ModelHealthStatus{}, false
	}
	st := plugin.ModelHealthStatus{LastError: e.LastError, ConsecutiveFailures: e.ConsecutiveFailures}
	if left := e.RetryAfter.Sub(h.Now()); !e.RetryAfter.IsZero() && left > 0 {
		st.CoolingDown, st.Remaining = true, left
	}
	return st, true
}

// ClearModelHealth implements plugin.ModelHealth.
func (p *pluginContext) ClearModelHealth(provider, modelID string) {
	if p.g.health != nil {
		p.g.health.Clear(provider + "/" + modelID)
	}
}

// DisposeSession implements plugin.Disposer.
func (p *pluginContext) DisposeSession(sessionKey string) {
	for _, ag := range p.g.cfg.AgentOrder {
		p.g.manager.Dispose(ag, sessionKey)
	}
}

// SessionUsage implements plugin.UsageReader from the session's file, as
// the original reads it: the last assistant reply that did not fail or
// abort.
func (p *pluginContext) SessionUsage(ctx context.Context, agentName, sessionKey string) (llm.Usage, bool, error) {
	msgs, err := p.g.manager.History(ctx, agentName, sessionKey)
	if err != nil {
		return llm.Usage{}, false, err
	}
	for i := len(msgs) - 1; i >= 0; i-- {
		a := msgs[i].Assistant
		if a == nil || a.StopReason == llm.StopReasonError || a.StopReason == llm.StopReasonAborted {
			continue
		}
		return a.Usage, true, nil
	}
	return llm.Usage{}, false, nil
}

var _ plugin.Steerer = (*pluginContext)(nil)

// Steer implements plugin.Steerer: the agent manager's Steer.
func (p *pluginContext) Steer(ctx context.Context, agentName, sessionKey, text string, runningOnly bool) (bool, error) {
	return p.g.manager.Steer(ctx, agentName, sessionKey, text, runningOnly)
}

// SessionMetadata implements plugin.MetadataStore.
func (p *pluginContext) SessionMetadata(sessionKey string) (map[string]json.RawMessage, bool) {
	return p.g.manager.SessionMetadata(sessionKey)
}

// SetSessionMetadata implements plugin.MetadataStore in the session-map
// entry. activeModel is refused: the original's pinned model, which the
// gateway takes over as a pin at start (persistSessionModel sets a pin).
func (p *pluginContext) SetSessionMetadata(sessionKey, name string, value json.RawMessage) (bool, error) {
	if name == "activeModel" {
		return false, errors.New("activeModel is the session's pinned model: use persistSessionModel")
	}
	err := p.g.manager.SetSessionMetadata(sessionKey, name, value)
	if errors.Is(err, agent.ErrNoSessionEntry) {
		return false, nil
	}
	return err == nil, err
}

// models returns the agent's models, primary first.
func (a *agentRuntime) models() []config.ModelRef {
	return append([]config.ModelRef{a.cfg.Model}, a.cfg.FallbackModels...)
}

// pinModel pins a session to one of the agent's models; any other model is
// refused (403).
func (g *Gateway) pinModel(agentName, sessionKey, provider, modelID string) error {
	ref, err := g.agentModel(agentName, provider, modelID)
	if err != nil {
		return err
	}
	if sessionKey == "" {
		sessionKey = agent.DefaultSessionKey(agentName)
	}
	return g.settings.Set(sessionKey, modelSetting, ref.String())
}

// agentModel returns the agent's model provider/modelID: its primary or one
// of its fallbacks; any other is refused (403), naming the allowed.
func (g *Gateway) agentModel(agentName, provider, modelID string) (config.ModelRef, error) {
	a, ok := g.agents[agentName]
	if !ok {
		return config.ModelRef{}, proto.Errorf(http.StatusNotFound, "unknown agent %q", agentName)
	}
	var names []string
	for _, ref := range a.models() {
		if ref.Provider == provider && ref.Model == modelID {
			return ref, nil
		}
		names = append(names, ref.String())
	}
	return config.ModelRef{}, proto.Errorf(http.StatusForbidden, "model %s/%s is not one of agent %q's models (%s)", provider, modelID, agentName, strings.Join(names, ", "))
}

// pinnedModel returns the model a session is pinned to, if it is still one
// of the agent's.
func (g *Gateway) pinnedModel(a *agentRuntime, sessionKey string) *config.ModelRef {
	v, ok := g.settings.Get(sessionKey, modelSetting)
	if !ok {
		return nil
	}
	s, _ := v.(string)
	for _, ref := range a.models() {
		if ref.String() == s {
			return &ref
		}
	}
	return nil
}

// SetSessionModel implements PATCH /api/agents/:name/sessions/:key/model.
func (g *Gateway) SetSessionModel(ctx context.Context, agentName, sessionKey, provider, modelID string) error {
	return g.pinModel(agentName, sessionKey, provider, modelID)
}

// startChannels starts every channel plugins registered, once the gateway
// serves; they stop when channelsCancel is called.
func (g *Gateway) startChannels() {
	ctx, cancel := context.WithCancel(context.Background())
	g.channelsCancel = cancel
	pc := &pluginContext{g: g, running: map[string]int{}}
	// Plugins with work of their own (a TypeScript plugin's start()) start
	// first, in config order; a failure is logged and the rest go on.
	_ = g.plugins.Start(ctx, pc)
	for name, ch := range g.plugins.Channels() {
		if err := ch.Start(ctx, pc); err != nil {
			g.log.Error("channel did not start", "channel", name, "err", err)
			g.channelErrs.Store(name, err.Error())
			continue
		}
		g.log.Info("channel started", "channel", name)
	}
}

// Channel looks a channel up by name for a plugin (ctx.getChannel): the
// built-in ones and those plugins registered.
func (p *pluginContext) Channel(name string) (plugin.Channel, bool) {
	ch, ok := p.g.plugins.Channels()[name]
	return ch, ok
}

var _ plugin.ChannelLookup = (*pluginContext)(nil)

var _ plugin.ToolInvoker = (*pluginContext)(nil)

// InvokeTool runs a plugin tool for a TypeScript plugin (ctx.invokeTool)
// through the same entry as a sandbox's call (plugin.Host.Handle): the
// pipeline checks agent's policy, asks for approval, audits and runs the
// hooks. It runs in agent's workspace root.
func (p *pluginContext) InvokeTool(ctx context.Context, agent, tool string, args []string, session proto.SessionContext) (proto.ToolResponse, error) {
	if _, ok := p.g.agents[agent]; !ok {
		return proto.ToolResponse{}, fmt.Errorf("unknown agent %q", agent)
	}
	session.AgentName = agent
	return p.g.plugins.Handle(ctx, agent, proto.ToolRequest{
		Type:           proto.ToolRequestType,
		Tool:           tool,
		Args:           slices.Clone(args),
		Cwd:            ".",
		SessionContext: &session,
	}), nil
}
