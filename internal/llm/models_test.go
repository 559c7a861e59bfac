package llm

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
)

func TestModelJSON(t *testing.T) {
	m := Lookup("anthropic", APIAnthropicMessages, "claude-sonnet-4-5", "")
	got := mustMarshal(t, m)
	want := `{"id":"claude-sonnet-4-5","name":"Claude Sonnet 4.5","api":"anthropic-messages","provider":"anthropic","baseUrl":"https://api.anthropic.com","reasoning":true,"input":["text","image"],"cost":{"input":3,"output":15,"cacheRead":0.3,"cacheWrite":3.75},"contextWindow":200000,"maxTokens":64000}`
	if got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}

func TestCatalogueCoversTheBrief(t *testing.T) {
	for _, id := range []string{
		"claude-opus-4-5", "claude-opus-4-1", "claude-opus-4-0", "claude-sonnet-4-6", "claude-sonnet-4-5",
		"claude-sonnet-4-0", "claude-3-7-sonnet-20250219", "claude-3-5-sonnet-20241022",
		"claude-3-5-haiku-20241022", "claude-haiku-4-5",
	} {
		m := Lookup("anthropic", "", id, "")
		if m.Name == id || m.Cost.Input == 0 || m.ContextWindow != 200000 || m.API != APIAnthropicMessages || m.BaseURL != AnthropicBaseURL {
			t.Errorf("%s: %+v", id, m)
		}
	}
	for _, id := range []string{"gpt-4o", "gpt-4o-mini", "gpt-4.1", "gpt-4.1-mini", "o3", "o4-mini", "gpt-5", "gpt-5-mini"} {
		m := Lookup("openai", APIOpenAICompletions, id, "")
		if m.Cost.Input == 0 || m.BaseURL != OpenAIBaseURL || m.MaxTokens == 0 {
			t.Errorf("%s: %+v", id, m)
		}
	}
}

func TestLookup(t *testing.T) {
	// A proxy serving Anthropic models gets the catalogue data, its own name and URL.
	m := Lookup("work-proxy", APIAnthropicMessages, "claude-haiku-4-5", "https://proxy.example/anthropic")
	if m.Provider != "work-proxy" || m.BaseURL != "https://proxy.example/anthropic" || m.Cost.Input != 1 || !m.Reasoning {
		t.Errorf("proxy: %+v", m)
	}
	// The same proxy without a URL falls back to the API default.
	if m := Lookup("work-proxy", APIAnthropicMessages, "claude-haiku-4-5", ""); m.BaseURL != AnthropicBaseURL {
		t.Errorf("proxy default url: %s", m.BaseURL)
	}
	// Unknown model: generic, text only, no reasoning, zero cost.
	g := Lookup("zai", APIOpenAICompletions, "glm-4.6", "https://api.z.ai/api/paas/v4")
	if g.ID != "glm-4.6" || g.Name != "glm-4.6" || g.Reasoning || g.Cost != (ModelCost{}) ||
		len(g.Input) != 1 || g.ContextWindow == 0 || g.MaxTokens == 0 || g.BaseURL != "https://api.z.ai/api/paas/v4" {
		t.Errorf("generic: %+v", g)
	}
	// Unknown Claude: images and reasoning guessed from the family.
	c := Lookup("anthropic", APIAnthropicMessages, "claude-opus-4-6", "")
	if !c.Reasoning || !c.AcceptsImages() || c.BaseURL != AnthropicBaseURL {
		t.Errorf("claude-opus-4-6: %+v", c)
	}
	if Lookup("anthropic", APIAnthropicMessages, "claude-3-haiku-20240307", "").Reasoning {
		t.Error("claude 3 haiku cannot reason")
	}
	// Lookups hand out copies.
	a := Lookup("openai", APIOpenAICompletions, "gpt-4o", "")
	a.Input[0] = "changed"
	if Lookup("openai", APIOpenAICompletions, "gpt-4o", "").Input[0] != "text" {
		t.Error("catalogue was modified through a lookup")
	}
}

func TestCatalogueAdd(t *testing.T) {
	c := NewCatalogue()
	n := len(c.Models())
	c.Add(Model{ID: "glm-4.6", Name: "GLM 4.6", API: APIOpenAICompletions, Provider: "zai",
		BaseURL: "https://api.z.ai/api/paas/v4", Reasoning: true, Input: []string{"text"},
		Cost: ModelCost{Input: 0.6, Output: 2.2}, ContextWindow: 200000, MaxTokens: 128000})
	m := c.Lookup("zai", APIOpenAICompletions, "glm-4.6", "")
	if m.Name != "GLM 4.6" || !m.Reasoning || m.BaseURL != "https://api.z.ai/api/paas/v4" || len(c.Models()) != n+1 {
		t.Errorf("added: %+v", m)
	}
	c.Add(Model{ID: "glm-4.6", Name: "GLM", Provider: "zai", API: APIOpenAICompletions})
	if len(c.Models()) != n+1 || c.Lookup("zai", "", "glm-4.6", "").Name != "GLM" {
		t.Error("Add did not replace")
	}
	if Lookup("zai", APIOpenAICompletions, "glm-4.6", "").Name != "glm-4.6" {
		t.Error("NewCatalogue shares state with the built-in catalogue")
	}
}

func TestCost(t *testing.T) {
	c := ModelCost{Input: 3, Output: 15, CacheRead: 0.3, CacheWrite: 3.75}
	got := c.Of(Usage{Input: 1_000_000, Output: 100_000, CacheRead: 2_000_000, CacheWrite: 10_000})
	want := UsageCost{Input: 3, Output: 1.5, CacheRead: 0.6, CacheWrite: 0.0375, Total: 5.1375}
	if d := got.Total - want.Total; got.Input != want.Input || got.Output != want.Output || d > 1e-9 || d < -1e-9 {
		t.Errorf("got %+v, want %+v", got, want)
	}
}

type fakeProvider struct{ cfg ProviderConfig }

func (fakeProvider) Stream(context.Context, Request, func(Event)) (*AssistantMessage, error) {
	return nil, nil
}

func TestRegistry(t *testing.T) {
	var r Registry
	r.Register("fake", func(cfg ProviderConfig) (Provider, error) { return fakeProvider{cfg}, nil })
	if !r.Has("fake") || r.Has("nope") || strings.Join(r.APIs(), ",") != "fake" {
		t.Errorf("APIs = %v", r.APIs())
	}
	p, err := r.New(ProviderConfig{Name: "x", API: "fake", APIKey: "k"})
	if err != nil || p.(fakeProvider).cfg.APIKey != "k" {
		t.Errorf("New = %v, %v", p, err)
	}
	if _, err := r.New(ProviderConfig{Name: "g", API: APIGoogleGenerativeAI}); err == nil ||
		!strings.Contains(err.Error(), `unsupported api "google-generative-ai"`) {
		t.Errorf("err = %v", err)
	}
	for _, bad := range []func(){
		func() { r.Register("fake", func(ProviderConfig) (Provider, error) { return nil, nil }) },
		func() { r.Register("", func(ProviderConfig) (Provider, error) { return nil, nil }) },
		func() { r.Register("nil", nil) },
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Error("no panic")
				}
			}()
			bad()
		}()
	}
}

func TestProviderConfigLogValue(t *testing.T) {
	v := ProviderConfig{Name: "a", APIKey: "sk-secret"}.LogValue()
	if strings.Contains(v.String(), "sk-secret") {
		t.Errorf("key logged: %s", v)
	}
}

func TestTransformMessages(t *testing.T) {
	target := Model{ID: "claude-sonnet-4-5", API: APIAnthropicMessages, Provider: "anthropic"}
	other := func(content ...Content) Message {
		return Message{Assistant: &AssistantMessage{API: APIOpenAICompletions, Provider: "openai", Model: "gpt-4o",
			StopReason: StopReasonToolUse, Content: content}}
	}
	same := Message{Assistant: &AssistantMessage{API: target.API, Provider: target.Provider, Model: target.ID,
		StopReason: StopReasonStop, Content: []Content{{Type: ContentThinking, Thinking: "mine", ThinkingSignature: "sig"}}}}
	in := []Message{
		UserText("q1"),
		other(Content{Type: ContentThinking, Thinking: "theirs", ThinkingSignature: "reasoning_content"},
			Content{Type: ContentThinking, Thinking: "  "},
			Content{Type: ContentThinking, Thinking: "x", Redacted: true, ThinkingSignature: "d"},
			ToolCallContent("call/1", "exec", json.RawMessage(`{}`)),
			ToolCallContent("call/2", "exec", json.RawMessage(`{}`))),
		{ToolResult: &ToolResultMessage{ToolCallID: "call/1", ToolName: "exec"}},
		{Assistant: &AssistantMessage{StopReason: StopReasonError, ErrorMessage: "boom"}},
		UserText("q2"),
		same,
	}
	norm := func(id string) string { return strings.ReplaceAll(id, "/", "_") }
	out := TransformMessages(in, target, norm)
	var roles []string
	for _, m := range out {
		roles = append(roles, m.Role())
	}
	if got := strings.Join(roles, " "); got != "user assistant toolResult toolResult user assistant" {
		t.Fatalf("roles = %s", got)
	}
	a := out[1].Assistant
	if len(a.Content) != 3 || a.Content[0].Type != ContentText || a.Content[0].Text != "theirs" ||
		a.Content[1].ID != "call_1" || a.Content[2].ID != "call_2" {
		t.Errorf("assistant = %+v", a.Content)
	}
	if out[2].ToolResult.ToolCallID != "call_1" || out[3].ToolResult.ToolCallID != "call_2" || !out[3].ToolResult.IsError {
		t.Errorf("results = %+v %+v", out[2].ToolResult, out[3].ToolResult)
	}
	if out[5].Assistant.Content[0].Type != ContentThinking {
		t.Errorf("same-model thinking lost: %+v", out[5].Assistant.Content)
	}
	// The input is untouched.
	if in[1].Assistant.Content[3].ID != "call/1" || in[2].ToolResult.ToolCallID != "call/1" {
		t.Error("input modified")
	}
}

func TestGoogleModels(t *testing.T) {
	m := Lookup("google", APIGoogleGenerativeAI, "gemini-2.5-pro", "")
	if m.API != APIGoogleGenerativeAI || m.BaseURL != GoogleBaseURL || !m.Reasoning || !m.AcceptsImages() || m.Cost.Input == 0 || m.ContextWindow != 1048576 {
		t.Errorf("gemini-2.5-pro = %+v", m)
	}
	// The provider name alone finds the API, as for anthropic and openai.
	if m := Lookup("google", "", "gemini-2.5-flash", ""); m.API != APIGoogleGenerativeAI || m.BaseURL != GoogleBaseURL {
		t.Errorf("gemini-2.5-flash without api = %+v", m)
	}
	if m := Lookup("proxy", APIGoogleGenerativeAI, "gemini-9-ultra", ""); m.BaseURL != GoogleBaseURL || !m.AcceptsImages() || !m.Reasoning {
		t.Errorf("uncatalogued gemini = %+v", m)
	}
}
