package gateway

import (
	"context"
	"net/http"

	"github.com/beige-dev/beige/internal/config"
	"github.com/beige-dev/beige/internal/llm"
	"github.com/beige-dev/beige/internal/proto"
	"github.com/beige-dev/beige/internal/proto/llmproto"
)

// newCatalogue returns the built-in model catalogue with the config's own
// models (llm.providers.<p>.models) added.
func newCatalogue(cfg *config.Config) *llm.Catalogue {
	c := llm.NewCatalogue()
	for name, p := range cfg.LLM.Providers {
		for _, m := range p.Models {
			info := llm.Model{
				ID: m.ID, Name: m.Name, API: p.API, Provider: name, BaseURL: p.BaseURL,
				Reasoning: m.Reasoning, Input: m.Input,
				Cost:          llm.ModelCost{Input: m.Cost.Input, Output: m.Cost.Output, CacheRead: m.Cost.CacheRead, CacheWrite: m.Cost.CacheWrite},
				ContextWindow: m.ContextWindow, MaxTokens: m.MaxTokens,
			}
			if info.Name == "" {
				info.Name = m.ID
			}
			if len(info.Input) == 0 {
				info.Input = []string{"text"}
			}
			c.Add(info)
		}
	}
	return c
}

// modelInfo returns the metadata of a configured model.
func (g *Gateway) modelInfo(ref config.ModelRef) llm.Model {
	p := g.cfg.LLM.Providers[ref.Provider]
	return g.catalogue.Lookup(ref.Provider, p.API, ref.Model, p.BaseURL)
}

// Models implements httpapi.Backend: the agent's primary and fallback models.
func (g *Gateway) Models(ctx context.Context, agent string) ([]llmproto.AgentModel, error) {
	a, ok := g.agents[agent]
	if !ok {
		return nil, proto.Errorf(http.StatusNotFound, "unknown agent %q", agent)
	}
	refs := a.models()
	out := make([]llmproto.AgentModel, len(refs))
	for i, ref := range refs {
		out[i] = llmproto.AgentModel{Model: g.modelInfo(ref), ThinkingLevel: ref.ThinkingLevel}
	}
	return out, nil
}
