package gateway

import (
	"context"
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
			return err // it names the provider already
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
		Metrics:     g.metrics,
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

// routeCall is one routed model call of an agent's session: it audits
// every attempt, and when the call ends up answered by a model other than
// the first candidate, fires modelSwitched with the reason of the last
// switch.
type routeCall struct {
	g          *Gateway
	agent      string
	session    proto.SessionContext
	lastReason string
}

func (g *Gateway) newRouteCall(agentName string, session proto.SessionContext) *routeCall {
	return &routeCall{g: g, agent: agentName, session: session}
}

func (rc *routeCall) observer() *routing.Observer {
	return &routing.Observer{
		OnAttempt: func(c routing.Candidate, err error, d time.Duration) {
			ms := d.Milliseconds()
			rec := audit.Record{
				Agent: rc.agent, Session: rc.session.SessionKey, Channel: rc.session.Channel,
				Phase: audit.PhaseFinished, Type: audit.TypeLLM, Tool: c.Key(), Model: c.Key(),
				Decision: audit.DecisionAllowed, Target: audit.TargetGateway, DurationMs: &ms,
			}
			if err != nil {
				rec.Error = llm.ErrorMessage(err)
			}
			if err := rc.g.audit.Log(rec); err != nil {
				rc.g.log.Error("audit a model call", "err", err)
			}
		},
		OnFallback: func(from, to routing.Candidate, reason string) { rc.lastReason = reason },
	}
}

// stream runs the call through the router.
func (rc *routeCall) stream(ctx context.Context, cands []routing.Candidate, c llm.Context, emit func(llm.Event)) (*llm.AssistantMessage, routing.Candidate, error) {
	msg, used, err := rc.g.router.Stream(ctx, cands, c, emit, rc.observer())
	if err == nil && len(cands) > 0 && used.Key() != cands[0].Key() {
		reason := rc.lastReason
		if reason == "" {
			reason = plugin.SwitchFallbackError
		}
		ev := &plugin.ModelSwitchedEvent{Agent: rc.agent, Session: rc.session, From: cands[0].Key(), To: used.Key(), Reason: reason}
		if err := rc.g.plugins.RunModelSwitched(context.WithoutCancel(ctx), ev); err != nil {
			rc.g.log.Warn("modelSwitched hook failed", "agent", rc.agent, "err", err)
		}
	}
	return msg, used, err
}

// routedModel is an agent's model as the agent loop sees it: every call
// goes through the router, across the agent's primary and fallback models.
type routedModel struct {
	g     *Gateway
	agent *agentRuntime
	// override, if set, is the only model (a plugin prompt's
	// modelOverride): no fallback, the session's pin not consulted.
	override *config.ModelRef
}

var _ agent.Model = (*routedModel)(nil)

func (m *routedModel) Info() llm.Model {
	if m.override != nil {
		return m.g.modelInfo(*m.override)
	}
	return m.g.modelInfo(m.agent.cfg.Model)
}

func (m *routedModel) Stream(ctx context.Context, c llm.Context, emit func(llm.Event)) (*llm.AssistantMessage, error) {
	session, _ := agent.SessionFromContext(ctx)
	cands := m.g.candidates(m.agent)
	if m.override != nil {
		cands = []routing.Candidate{m.g.candidate(*m.override)}
	} else if pinned := m.g.pinnedModel(m.agent, session.SessionKey); pinned != nil {
		cands = []routing.Candidate{m.g.candidate(*pinned)} // the user chose it: no fallback
	}
	if level := m.g.sessionThinking(session.SessionKey); level != "" { // the session's choice (web console)
		for i := range cands {
			cands[i].Options.ThinkingLevel = level
		}
	}
	msg, _, err := m.g.newRouteCall(m.agent.name, session).stream(ctx, cands, c, emit)
	return msg, err
}
