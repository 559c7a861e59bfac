package gateway

import (
	"testing"

	"github.com/beige-dev/beige/internal/config"
)

// TestLookupModel: a plugin's getModel sees the catalogue's entry for a
// model of a configured provider, a configured model's own metadata, and
// nothing for a provider that is not configured.
func TestLookupModel(t *testing.T) {
	cfg := &config.Config{LLM: config.LLM{Providers: map[string]*config.Provider{
		"anthropic": {API: "anthropic-messages"},
		"local":     {API: "openai-completions", BaseURL: "http://127.0.0.1:1", Models: []config.ModelInfo{{ID: "m1", Name: "Local One", ContextWindow: 8192, MaxTokens: 1024}}},
	}}}
	p := &pluginContext{g: &Gateway{cfg: cfg, catalogue: newCatalogue(cfg)}}
	m, ok := p.LookupModel("anthropic", "claude-sonnet-4-5")
	if !ok || m.Name != "Claude Sonnet 4.5" || m.ContextWindow != 200000 || m.MaxTokens != 64000 {
		t.Errorf("catalogued: %v %+v", ok, m)
	}
	m, ok = p.LookupModel("local", "m1")
	if !ok || m.Name != "Local One" || m.ContextWindow != 8192 || m.MaxTokens != 1024 {
		t.Errorf("configured: %v %+v", ok, m)
	}
	if m, ok := p.LookupModel("nope", "m1"); ok {
		t.Errorf("unconfigured provider: %+v", m)
	}
}
