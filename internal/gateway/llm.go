package gateway

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	"github.com/beige-dev/beige/internal/agent"
	"github.com/beige-dev/beige/internal/audit"
	"github.com/beige-dev/beige/internal/config"
	"github.com/beige-dev/beige/internal/llm"
	_ "github.com/beige-dev/beige/internal/llm/providers" // the provider APIs
	"github.com/beige-dev/beige/internal/plugin"
	"github.com/beige-dev/beige/internal/proto"
	"github.com/beige-dev/beige/internal/routing"
)

// openLLM builds a client per configured provider and the router every
// model call goes through (fallback, cooldowns, concurrency limits,
// watchdog).
func (g *Gateway) openLLM() error {
	g.providers = map[string]llm.Provider{}
	limits := map[string]int{}
	for name, p := range g.cfg.LLM.Providers {
		client, err := llm.NewProvider(llm.ProviderConfig{Name: name, APIKey: p.APIKey.Reveal(), BaseURL: p.BaseURL, API: p.API})
		if err != nil {
			return fmt.Errorf("provider %q: %w", name, err)
		}
		g.providers[name] = client
		limits[name] = p.Concurrency
	}
	g.health = routing.OpenHealth(filepath.Join(g.home.DataDir(), routing.HealthFile), &routing.HealthOptions{Logger: g.log.With("component", "health")})
	g.router = routing.NewRouter(&routing.Options{
		Health:      g.health,
		Limiters:    routing.NewLimiters(limits),
		IdleTimeout: time.Duration(g.cfg.LLM.IdleTimeoutSeconds * float64(time.Second)),
		Logger:      g.log.With("component", "routing"),
	})
	return nil
}

// candidate returns the router's view of a configured model.
func (g *Gateway) candidate(ref config.ModelRef) routing.Candidate {
	level, _ := llm.ParseThinkingLevel(ref.ThinkingLevel)
	return routing.Candidate{
		Provider: ref.Provider,
		Client:   g.providers[ref.Provider],
		Model:    g.modelInfo(ref),
		Options:  llm.Options{ThinkingLevel: level},
	}
}

// candidates returns the agent's models in fallback order: primary first.
func (g *Gateway) candidates(a *agentRuntime) []routing.Candidate {
	var out []routing.Candidate
	for _, ref := range a.models() {
		out = append(out, g.candidate(ref))
	}
	return out
}

// observer audits every model attempt and fires modelSwitched when a
// session moves off its primary model.
func (g *Gateway) observer(agentName string, session proto.SessionContext) *routing.Observer {
	return &routing.Observer{
		OnAttempt: func(c routing.Candidate, err error, d time.Duration) {
			ms := d.Milliseconds()
			rec := audit.Record{
				Agent: agentName, Session: session.SessionKey, Channel: session.Channel,
				Phase: audit.PhaseFinished, Type: audit.TypeLLM, Tool: c.Key(), Model: c.Key(),
				Decision: audit.DecisionAllowed, Target: audit.TargetGateway, DurationMs: &ms,
			}
			if err != nil {
				rec.Error = llm.ErrorMessage(err)
			}
			if err := g.audit.Log(rec); err != nil {
				g.log.Error("audit a model call", "err", err)
			}
		},
		OnFallback: func(from, to routing.Candidate, reason string) {
			ev := &plugin.ModelSwitchedEvent{Agent: agentName, Session: session, From: from.Key(), To: to.Key(), Reason: reason}
			if err := g.plugins.RunModelSwitched(context.WithoutCancel(context.Background()), ev); err != nil {
				g.log.Warn("modelSwitched hook failed", "agent", agentName, "err", err)
			}
		},
	}
}

// routedModel is an agent's model as the agent loop sees it: every call
// goes through the router, across the agent's primary and fallback models.
type routedModel struct {
	g     *Gateway
	agent *agentRuntime
}

var _ agent.Model = (*routedModel)(nil)

func (m *routedModel) Info() llm.Model { return m.g.modelInfo(m.agent.cfg.Model) }

func (m *routedModel) Stream(ctx context.Context, c llm.Context, emit func(llm.Event)) (*llm.AssistantMessage, error) {
	session, _ := agent.SessionFromContext(ctx)
	cands := m.g.candidates(m.agent)
	if pinned := m.g.pinnedModel(m.agent, session.SessionKey); pinned != nil {
		cands = []routing.Candidate{m.g.candidate(*pinned)} // the user chose it: no fallback
	}
	msg, _, err := m.g.router.Stream(ctx, cands, c, emit, m.g.observer(m.agent.name, session))
	return msg, err
}
