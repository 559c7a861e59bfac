package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/beige-dev/beige/internal/audit"
	"github.com/beige-dev/beige/internal/llm/llmtest"
	"github.com/beige-dev/beige/internal/plugin"
)

// TestTypeScriptSteerSession: a TypeScript plugin's ctx.steerSession, sent
// while the agent's first tool call runs (from its preToolExec hook),
// reaches the running prompt: the reply's second call never runs and is
// not audited, its result says it was skipped, the steered message (after
// the prePrompt hooks) is what the model answers next, and it is in the
// session after a restart. Steering a session that does not exist is a
// no-op.
func TestTypeScriptSteerSession(t *testing.T) {
	node := tsNode(t)
	dir := filepath.Join(t.TempDir(), "steerer")
	os.MkdirAll(dir, 0o755)
	os.WriteFile(filepath.Join(dir, "plugin.json"), []byte(`{"name":"steerer","description":"Steers."}`), 0o644)
	os.WriteFile(filepath.Join(dir, "index.ts"), []byte(`
export function createPlugin(config: Record<string, unknown>, ctx: any) {
  let steered = false;
  return {
    register(r: any): void {
      r.hook("prePrompt", async (ev: any) => ({ message: ev.message.startsWith("STEER") ? ev.message + " (checked)" : ev.message }));
      r.hook("preToolExec", async (ev: any) => {
        if (!steered) {
          steered = true;
          await ctx.steerSession("nobody:1", "anyone?");
          await ctx.steerSession(ev.sessionKey, "STEER: stop, do the other thing");
        }
        return { allow: true };
      });
    },
  };
}
`), 0o644)
	a := llmtest.NewAnthropic(t)
	g := startGatewayWith(t, gatewaySetup{
		names:     []string{"steered"},
		plugins:   fmt.Sprintf("steerer: { path: %q, node: %q }", dir, node),
		providers: fmt.Sprintf(`pa: { api: "anthropic-messages", baseUrl: %q, apiKey: "ka" }`, a.URL()),
		model:     "{ provider: 'pa', model: 'model-a' }",
	})
	a.Enqueue(
		llmtest.ToolCalls(
			llmtest.Call("exec", map[string]any{"command": "echo first"}),
			llmtest.Call("exec", map[string]any{"command": "echo NEVER-RUN"}),
		),
		llmtest.Text("doing the other thing"),
	)
	if got := g.promptOK(t, "api:steer1", "do the first thing"); got != "doing the other thing" {
		t.Fatalf("answer %q", got)
	}
	if n := a.Count(); n != 2 {
		t.Fatalf("%d model calls", n)
	}
	second := a.Request(1).AllText()
	if !strings.Contains(second, "STEER: stop, do the other thing (checked)") || !strings.Contains(second, "Skipped due to queued user message.") {
		t.Errorf("the model was not told: %q", second)
	}
	recs, err := audit.ReadFile(g.home.AuditLog())
	if err != nil {
		t.Fatal(err)
	}
	var first bool
	for _, r := range recs {
		b, _ := json.Marshal(r)
		if strings.Contains(string(b), "NEVER-RUN") {
			t.Errorf("the skipped call was audited: %s", b)
		}
		first = first || strings.Contains(string(b), "echo first")
	}
	if !first {
		t.Errorf("the call that ran is not audited: %+v", recs)
	}
	g.restart(t)
	h, err := g.manager.History(context.Background(), g.agents[0], "api:steer1")
	if err != nil {
		t.Fatal(err)
	}
	var users []string
	for _, m := range h {
		if m.User != nil {
			users = append(users, m.User.Text())
		}
	}
	if strings.Join(users, "|") != "do the first thing|STEER: stop, do the other thing (checked)" {
		t.Errorf("user messages after a restart: %q", users)
	}
	if _, ok := g.manager.SessionMetadata("nobody:1"); ok {
		t.Error("steering a session that does not exist made one")
	}
}

// TestTypeScriptPromptModelOverrideAndReplyTo: a TypeScript plugin's
// prompt with modelOverride goes to that model only, leaving the session's
// pinned model as it was (the next prompt uses the pin); a model the agent
// may not use is refused naming the allowed ones; replyTo is kept in the
// session's metadata as the original keeps it (_replyTo) and comes back
// from getSessionEntry and getSessionSettings.
func TestTypeScriptPromptModelOverrideAndReplyTo(t *testing.T) {
	node := tsNode(t)
	dir := filepath.Join(t.TempDir(), "overrider")
	os.MkdirAll(dir, 0o755)
	os.WriteFile(filepath.Join(dir, "plugin.json"), []byte(`{"name":"overrider","description":"Overrides."}`), 0o644)
	os.WriteFile(filepath.Join(dir, "index.ts"), []byte(`
import fs from "node:fs";
export function createPlugin(config: Record<string, unknown>, ctx: any) {
  return {
    register(r: any): void {},
    async start(): Promise<void> {
      (async () => {
        const agent = ctx.agentNames[0], key = "api:ovr";
        ctx.createSession(key, agent);
        const first = await ctx.prompt(key, agent, "hello", {});
        ctx.persistSessionModel(key, agent, "pa", "model-c");
        const one = await ctx.prompt(key, agent, "hi", {
          modelOverride: { provider: "pa", model: "model-b" },
          replyTo: { channel: "telegram", address: { chatId: "5" } },
        });
        let bad = "";
        try { await ctx.prompt(key, agent, "x", { modelOverride: { provider: "pa", model: "evil" } }); } catch (e: any) { bad = e.message; }
        const entry = ctx.getSessionEntry(key);
        const settings = ctx.getSessionSettings(key);
        const pin = ctx.getSessionModel(key);
        fs.writeFileSync(ctx.dataDir + "/result.json", JSON.stringify({ first, one, bad, entry: entry?.metadata?._replyTo, settings: settings.replyTo, pin }));
      })().catch((e) => fs.writeFileSync(ctx.dataDir + "/result.json", JSON.stringify({ error: String(e) })));
    },
  };
}
`), 0o644)
	a := llmtest.NewAnthropic(t)
	a.Enqueue(llmtest.Text("first"), llmtest.Text("from b"), llmtest.Text("from c"))
	g := startGatewayWith(t, gatewaySetup{
		names:     []string{"overridden"},
		plugins:   fmt.Sprintf("overrider: { path: %q, node: %q }", dir, node),
		providers: fmt.Sprintf(`pa: { api: "anthropic-messages", baseUrl: %q, apiKey: "ka" }`, a.URL()),
		model:     "{ provider: 'pa', model: 'model-a' }",
		extra:     map[string]string{"overridden": "fallbackModels: [{ provider: 'pa', model: 'model-b' }, { provider: 'pa', model: 'model-c' }]"},
	})
	resultFile := filepath.Join(g.home.DataDir(), "overrider", "result.json")
	var data []byte
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if data, _ = os.ReadFile(resultFile); len(data) > 0 {
			break
		}
	}
	var got struct {
		Error, First, One, Bad string
		Entry, Settings        map[string]any
		Pin                    struct{ Provider, ModelID string }
	}
	if err := json.Unmarshal(data, &got); err != nil || got.Error != "" {
		t.Fatalf("plugin result %s: %v", data, err)
	}
	if got.First != "first" || got.One != "from b" {
		t.Errorf("answers %q, %q", got.First, got.One)
	}
	if a.Count() < 2 || a.Request(1).Model() != "model-b" {
		t.Errorf("the override did not go to model-b")
	}
	want := fmt.Sprintf("model pa/evil is not one of agent %q's models (pa/model-a, pa/model-b, pa/model-c)", g.agents[0])
	if !strings.Contains(got.Bad, want) {
		t.Errorf("a model the agent may not use: %q, want %q", got.Bad, want)
	}
	if got.Pin.ModelID != "model-c" {
		t.Errorf("the pin after the override: %+v", got.Pin)
	}
	for _, rt := range []map[string]any{got.Entry, got.Settings} {
		if rt["channel"] != "telegram" || fmt.Sprint(rt["address"]) != "map[chatId:5]" {
			t.Errorf("replyTo %v", rt)
		}
	}
	if got := g.promptOK(t, "api:ovr", "and now?"); got != "from c" {
		t.Errorf("the next prompt: %q", got)
	}
	if n := a.Count(); n != 3 || a.Request(2).Model() != "model-c" {
		t.Errorf("%d requests; the next prompt went to %q, not the pinned model-c", n, a.Request(n-1).Model())
	}
	meta, _ := g.manager.SessionMetadata("api:ovr")
	var stored bytes.Buffer
	if json.Compact(&stored, meta["_replyTo"]); stored.String() != `{"channel":"telegram","address":{"chatId":"5"}}` {
		t.Errorf("session map metadata %s", meta)
	}
}

// TestPromptModelOverrideHasNoFallback: a prompt with a model override
// that fails fails, instead of falling back to the agent's other models.
func TestPromptModelOverrideHasNoFallback(t *testing.T) {
	a := llmtest.NewAnthropic(t)
	g := startGatewayWith(t, gatewaySetup{
		names:     []string{"nofallback"},
		providers: fmt.Sprintf(`pa: { api: "anthropic-messages", baseUrl: %q, apiKey: "ka" }`, a.URL()),
		model:     "{ provider: 'pa', model: 'model-a' }",
		extra:     map[string]string{"nofallback": "fallbackModels: [{ provider: 'pa', model: 'model-b' }]"},
	})
	a.Enqueue(llmtest.Error(400, `{"type":"error","error":{"type":"invalid_request_error","message":"no such model"}}`, nil), llmtest.Text("from a"))
	pc := &pluginContext{g: g.Gateway, running: map[string]int{}}
	_, err := pc.Prompt(context.Background(), plugin.PromptRequest{Agent: g.agents[0], SessionKey: "api:nf", Message: "hi", ModelOverride: "pa/model-b"})
	if err == nil {
		t.Fatal("the failed override fell back")
	}
	if n := a.Count(); n != 1 || a.Request(0).Model() != "model-b" {
		t.Errorf("%d requests (first to %q), want 1 to model-b", n, a.Request(0).Model())
	}
	if got := g.promptOK(t, "api:nf", "again"); got != "from a" {
		t.Errorf("the next prompt: %q", got)
	}
}
