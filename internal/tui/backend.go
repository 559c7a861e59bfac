package tui

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/beige-dev/beige/internal/agent"
	"github.com/beige-dev/beige/internal/client"
	"github.com/beige-dev/beige/internal/llm"
	"github.com/beige-dev/beige/internal/proto"
	"github.com/beige-dev/beige/internal/proto/llmproto"
)

// agentState is what the terminal knows of one agent: its entry of GET
// /api/agents, its models, and the model chosen with /model. It is a value
// held by the root model and handed to each prompt through its context.
type agentState struct {
	info   proto.AgentInfo
	models []llmproto.AgentModel
	model  llm.Model // the model the prompts ask for first
}

func (s agentState) name() string { return s.info.Name }

// modelName names the chosen model as provider/id.
func (s agentState) modelName() string {
	if s.model.ID == "" {
		return "no model"
	}
	return s.model.Provider + "/" + s.model.ID
}

type agentKey struct{}

func withAgent(ctx context.Context, s agentState) context.Context {
	return context.WithValue(ctx, agentKey{}, s)
}

// backend runs the agent loop of this process over the gateway: it is the
// Manager's AgentFunc and Hooks. It holds no mutable state, so that the
// prompt goroutines and the UI share it freely.
type backend struct {
	c   *client.Client
	log *slog.Logger
	// localFiles says the gateway runs on this machine, so that the
	// agent's AGENTS.md can be read from its workspace folder.
	localFiles bool
}

func newBackend(c *client.Client, log *slog.Logger) *backend {
	return &backend{c: c, log: log, localFiles: isLoopback(c.BaseURL())}
}

// isLoopback reports whether the URL names this machine.
func isLoopback(raw string) bool {
	u, err := url.Parse(raw)
	if err != nil {
		return false
	}
	h := u.Hostname()
	if strings.EqualFold(h, "localhost") {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}

// agents lists the gateway's agents.
func (b *backend) agents(ctx context.Context) ([]proto.AgentInfo, error) {
	ctx, cancel := client.WithTimeout(ctx)
	defer cancel()
	return b.c.Agents(ctx)
}

// load fetches an agent's entry and models; the primary model is chosen.
// An agent the gateway does not have gives an error listing those it has.
func (b *backend) load(ctx context.Context, name string) (agentState, error) {
	list, err := b.agents(ctx)
	if err != nil {
		return agentState{}, err
	}
	i := slices.IndexFunc(list, func(a proto.AgentInfo) bool { return a.Name == name })
	if i < 0 {
		return agentState{}, unknownAgentError(name, list)
	}
	return b.loadInfo(ctx, list[i])
}

func (b *backend) loadInfo(ctx context.Context, info proto.AgentInfo) (agentState, error) {
	ctx, cancel := client.WithTimeout(ctx)
	defer cancel()
	models, err := b.c.Models(ctx, info.Name)
	if err != nil {
		return agentState{}, err
	}
	s := agentState{info: info, models: models}
	if len(models) > 0 {
		s.model = models[0].Model
	} else {
		// An old gateway: name the configured model without metadata.
		s.model = llm.Model{ID: info.Model.Model, Provider: info.Model.Provider}
	}
	return s, nil
}

// unknownAgent says the gateway has no such agent; it is
// agent.ErrUnknownAgent for errors.Is.
type unknownAgent struct{ msg string }

func (e *unknownAgent) Error() string        { return e.msg }
func (e *unknownAgent) Is(target error) bool { return target == agent.ErrUnknownAgent }

func unknownAgentError(name string, list []proto.AgentInfo) error {
	names := make([]string, len(list))
	for i, a := range list {
		names[i] = a.Name
	}
	if len(names) == 0 {
		return &unknownAgent{fmt.Sprintf("unknown agent %q: the gateway has no agents", name)}
	}
	return &unknownAgent{fmt.Sprintf("unknown agent %q (the gateway has: %s)", name, strings.Join(names, ", "))}
}

// setup is the Manager's AgentFunc: the remote model and tools of the
// agent. The state comes with the prompt's context (withAgent); without
// it, it is fetched from the gateway.
func (b *backend) setup(ctx context.Context, name string) (*agent.AgentSetup, error) {
	s, ok := ctx.Value(agentKey{}).(agentState)
	if !ok || s.name() != name {
		var err error
		if s, err = b.load(ctx, name); err != nil {
			return nil, err
		}
	}
	setup := &agent.AgentSetup{
		Model:        client.NewRemoteModel(b.c, name, s.model, nil),
		Tools:        client.NewRemoteTools(b.c, name),
		ToolContext:  s.info.ToolContext,
		SkillContext: s.info.SkillContext,
	}
	if b.localFiles && s.info.WorkspaceDir != "" {
		dir := s.info.WorkspaceDir
		setup.AgentsMD = func() (string, error) { return agent.ReadAgentsMD(dir) }
	}
	return setup, nil
}

var _ agent.Hooks = (*backend)(nil)

// PrePrompt passes the message on: the gateway runs the prePrompt hooks
// inside /api/chat/stream.
func (b *backend) PrePrompt(ctx context.Context, agentName, sessionKey, message string) (string, error) {
	return message, nil
}

// PostResponse passes the answer on: the gateway runs the postResponse
// hooks inside /api/chat/stream.
func (b *backend) PostResponse(ctx context.Context, agentName, sessionKey, response string) (string, error) {
	return response, nil
}

// SessionCreated fires the gateway's session-created hook.
func (b *backend) SessionCreated(ctx context.Context, agentName, sessionKey string) {
	b.sessionHook(ctx, agentName, client.HookSessionCreated, sessionKey)
}

// sessionHook fires a session hook; a failure is logged only.
func (b *backend) sessionHook(ctx context.Context, agentName, hook, sessionKey string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err := b.c.SessionHook(ctx, agentName, hook, sessionKey); err != nil {
		b.log.Warn("session hook failed", "hook", hook, "agent", agentName, "session", sessionKey, "err", err)
	}
}
