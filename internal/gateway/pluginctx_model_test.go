package gateway

import (
	"errors"
	"testing"
	"time"

	"github.com/beige-dev/beige/internal/config"
	"github.com/beige-dev/beige/internal/routing"
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

// TestPluginModelHealth: a plugin sees a model's cooldown and failures as
// the routing recorded them, and clearing ends the cooldown for the router
// too.
func TestPluginModelHealth(t *testing.T) {
	h := routing.OpenHealth("", nil)
	p := &pluginContext{g: &Gateway{health: h}}
	if _, ok := p.ModelHealth("pa", "m"); ok {
		t.Error("health of a model nothing was recorded for")
	}
	h.RecordRateLimit("pa/m", h.Now().Add(time.Minute), errors.New("429"))
	st, ok := p.ModelHealth("pa", "m")
	if !ok || !st.CoolingDown || st.Remaining <= 50*time.Second || st.Remaining > time.Minute || st.ConsecutiveFailures != 1 || st.LastError != "429" {
		t.Errorf("ModelHealth = %+v, %v", st, ok)
	}
	p.ClearModelHealth("pa", "m")
	if _, ok := h.CooldownUntil("pa/m", h.Now()); ok {
		t.Error("the router still sees the cooldown")
	}
	if st, ok := p.ModelHealth("pa", "m"); ok {
		t.Errorf("health after clear: %+v", st)
	}
}
