package gateway

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/beige-dev/beige/internal/config"
	"github.com/beige-dev/beige/internal/llm"
	"github.com/beige-dev/beige/internal/plugin"
	"github.com/beige-dev/beige/internal/routing"
)

var _ plugin.LLMPrompter = (*pluginContext)(nil)

// LLMPrompt implements plugin.LLMPrompter (ctx.llmPrompt): one model call
// for a plugin, through the same provider client and router as an agent's
// calls (the provider's key, its no-redirect and capture rules, its
// concurrency pool, the shared health and the metrics), with that one
// model and no fallback. No session is involved. The model must be one
// the gateway knows for the provider: in the catalogue under the
// provider's name, in llm.providers.<p>.models, or one of an agent's
// models. The call is logged (plugin, model, tokens), never its text.
func (p *pluginContext) LLMPrompt(ctx context.Context, req plugin.LLMPromptRequest) (*plugin.LLMPromptResult, error) {
	g := p.g
	// A provider without an apiKey is called as agents call it (a local
	// server may need none); one that wants a key answers so.
	if pcfg, ok := g.cfg.LLM.Providers[req.Provider]; !ok || pcfg == nil || g.providers[req.Provider] == nil {
		return nil, fmt.Errorf("provider %q is not configured (not a key of llm.providers)", req.Provider)
	}
	if !g.knownModel(req.Provider, req.Model) {
		return nil, fmt.Errorf("model %q not found for provider %q: list it under llm.providers.%s.models", req.Model, req.Provider, req.Provider)
	}
	cand := g.candidate(config.ModelRef{Provider: req.Provider, Model: req.Model})
	cand.Options.ThinkingLevel = req.ThinkingLevel
	if limit := cand.Model.MaxTokens; req.MaxTokens > 0 && limit > 0 && req.MaxTokens > limit {
		return nil, fmt.Errorf("maxTokens %d is over the %d of model %s", req.MaxTokens, limit, cand.Key())
	}
	cand.Options.MaxTokens = req.MaxTokens
	c := llm.Context{SystemPrompt: req.SystemPrompt, Messages: req.Messages}
	start := time.Now()
	msg, _, err := g.router.Stream(ctx, []routing.Candidate{cand}, c, nil, nil)
	log := g.log.With("plugin", req.Plugin, "model", cand.Key(), "durationMs", time.Since(start).Milliseconds())
	if err != nil {
		log.Warn("plugin model call failed", "err", err)
		if ctx.Err() != nil {
			return nil, fmt.Errorf("model %s: cancelled: %w", cand.Key(), context.Cause(ctx))
		}
		return nil, fmt.Errorf("model %s: %w", cand.Key(), err)
	}
	u := msg.Usage
	log.Info("plugin model call", "inputTokens", u.Input, "outputTokens", u.Output,
		"cacheReadTokens", u.CacheRead, "cacheWriteTokens", u.CacheWrite, "stopReason", string(msg.StopReason))
	text := msg.Text()
	if text == "" {
		return nil, errors.New("the model returned no text")
	}
	return &plugin.LLMPromptResult{Text: text, Usage: u}, nil
}

// knownModel reports whether the gateway knows modelID for provider: the
// catalogue has it under the provider's name (the built-in models of a
// provider named like pi's, and llm.providers.<p>.models), or an agent
// uses it.
func (g *Gateway) knownModel(provider, modelID string) bool {
	if modelID == "" {
		return false
	}
	for _, m := range g.catalogue.Models() {
		if m.Provider == provider && m.ID == modelID {
			return true
		}
	}
	for _, a := range g.agents {
		for _, ref := range a.models() {
			if ref.Provider == provider && ref.Model == modelID {
				return true
			}
		}
	}
	return false
}
