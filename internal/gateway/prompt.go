package gateway

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/beige-dev/beige/internal/agent"
	"github.com/beige-dev/beige/internal/plugin"
	"github.com/beige-dev/beige/internal/proto"
)

// openAgents builds the agent manager: sessions for every agent, with the
// routed model and the sandboxed core tools.
func (g *Gateway) openAgents() error {
	m, err := agent.NewManager(agent.ManagerConfig{
		SessionsDir: g.home.SessionsDir(),
		Agents:      g.agentSetup,
		Logger:      g.log.With("component", "agent"),
		Hooks:       promptHooks{g},
	})
	if err != nil {
		return fmt.Errorf("sessions: %w", err)
	}
	g.manager = m
	// The original Beige kept a session's pinned model in session-map.json
	// (metadata.activeModel); beige keeps it in session-settings.json. A
	// choice made here already wins.
	if err := m.TakeActiveModels(func(key, _, model string) error {
		if _, set := g.settings.Get(key, modelSetting); set {
			return nil
		}
		return g.settings.Set(key, modelSetting, model)
	}); err != nil {
		g.log.Warn("pinned models of the original session map not all taken over; retried at the next start", "err", err)
	}
	return nil
}

// agentSetup is the manager's view of an agent.
func (g *Gateway) agentSetup(ctx context.Context, name string) (*agent.AgentSetup, error) {
	a, ok := g.agents[name]
	if !ok {
		return nil, agent.ErrUnknownAgent
	}
	return &agent.AgentSetup{
		Model:               &routedModel{g: g, agent: a},
		Tools:               a.tools,
		ToolContext:         g.plugins.ToolContext(name),
		SkillContext:        g.plugins.SkillContext(name),
		AgentsMD:            func() (string, error) { return agent.ReadAgentsMD(a.workspace()) },
		CompactionThreshold: a.cfg.Model.CompactionThreshold,
	}, nil
}

// promptHooks runs the plugins' prePrompt, postResponse and sessionCreated
// hooks for the agent manager.
type promptHooks struct{ g *Gateway }

func (h promptHooks) PrePrompt(ctx context.Context, agentName, sessionKey, message string) (string, error) {
	ev := &plugin.PrePromptEvent{Agent: agentName, Session: proto.ParseSessionKey(agentName, sessionKey), Model: h.g.primaryModel(agentName), Prompt: message}
	if err := h.g.plugins.RunPrePrompt(ctx, ev); err != nil {
		return "", proto.Errorf(http.StatusForbidden, "blocked by a prePrompt hook: %v", err)
	}
	return ev.Prompt, nil
}

func (h promptHooks) PostResponse(ctx context.Context, agentName, sessionKey, response string) (string, error) {
	ev := &plugin.PostResponseEvent{Agent: agentName, Session: proto.ParseSessionKey(agentName, sessionKey), Model: h.g.primaryModel(agentName), Response: response}
	if err := h.g.plugins.RunPostResponse(ctx, ev); err != nil {
		return "", proto.Errorf(http.StatusForbidden, "blocked by a postResponse hook: %v", err)
	}
	return ev.Response, nil
}

func (h promptHooks) SessionCreated(ctx context.Context, agentName, sessionKey string) {
	ev := &plugin.SessionCreatedEvent{Agent: agentName, Session: proto.ParseSessionKey(agentName, sessionKey)}
	if err := h.g.plugins.RunSessionCreated(ctx, ev); err != nil {
		h.g.log.Warn("sessionCreated hook failed", "agent", agentName, "session", sessionKey, "err", err)
	}
}

// primaryModel names the agent's primary model as provider/model.
func (g *Gateway) primaryModel(agentName string) string {
	if a, ok := g.agents[agentName]; ok {
		return a.cfg.Model.String()
	}
	return ""
}

// Prompt implements httpapi.Backend: POST /api/agents/:name/prompt.
func (g *Gateway) Prompt(ctx context.Context, agentName string, req proto.PromptRequest) (proto.PromptResponse, error) {
	if _, ok := g.agents[agentName]; !ok {
		return proto.PromptResponse{}, proto.Errorf(http.StatusNotFound, "unknown agent %q", agentName)
	}
	res, err := g.manager.Prompt(ctx, agentName, req.SessionKey, req.Message, nil)
	if err != nil {
		return proto.PromptResponse{}, g.stopError(err)
	}
	return proto.PromptResponse{Response: res.Text}, nil
}

// Sessions implements httpapi.Backend: GET /api/agents/:name/sessions.
func (g *Gateway) Sessions(ctx context.Context, agentName string) ([]proto.SessionInfo, error) {
	s, err := g.manager.Sessions(ctx, agentName)
	if errors.Is(err, agent.ErrUnknownAgent) {
		return nil, proto.Errorf(http.StatusNotFound, "unknown agent %q", agentName)
	}
	return s, err
}

// stopError turns the error of a call cut short by a stopping or restarting
// gateway into one that says so (503), instead of a bare cancellation.
func (g *Gateway) stopError(err error) error {
	if err != nil && g.stopping.Load() && (errors.Is(err, context.Canceled) || errors.Is(err, agent.ErrAborted) || errors.Is(err, agent.ErrClosed)) {
		return proto.Errorf(http.StatusServiceUnavailable, "the gateway is restarting or stopping; the call was cancelled: send it again")
	}
	return err
}
