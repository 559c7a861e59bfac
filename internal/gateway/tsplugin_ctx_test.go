package gateway

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/beige-dev/beige/internal/llm/llmtest"
)

// TestTypeScriptSessionMetadataSurvivesRestart: what a TypeScript plugin
// sets with ctx.setSessionMetadata on a session is still there for it after
// the gateway (and with it the plugin host) restarts.
func TestTypeScriptSessionMetadataSurvivesRestart(t *testing.T) {
	node := tsNode(t)
	dir := filepath.Join(t.TempDir(), "counter")
	os.MkdirAll(dir, 0o755)
	os.WriteFile(filepath.Join(dir, "plugin.json"), []byte(`{"name":"counter","description":"Counts replies."}`), 0o644)
	os.WriteFile(filepath.Join(dir, "index.ts"), []byte(`
export function createPlugin(config: Record<string, unknown>, ctx: any) {
  return {
    register(r: any): void {
      r.hook("postResponse", async (ev: any) => {
        const n = (ctx.getSessionMetadata(ev.sessionKey, "counter") as { n: number } | undefined)?.n ?? 0;
        ctx.setSessionMetadata(ev.sessionKey, "counter", { n: n + 1 });
        return { response: ev.response + " #" + (n + 1) };
      });
    },
  };
}
`), 0o644)
	a := llmtest.NewAnthropic(t)
	g := startGatewayWith(t, gatewaySetup{
		names:     []string{"counted"},
		plugins:   fmt.Sprintf("counter: { path: %q, node: %q }", dir, node),
		providers: fmt.Sprintf(`pa: { api: "anthropic-messages", baseUrl: %q, apiKey: "ka" }`, a.URL()),
		model:     "{ provider: 'pa', model: 'model-a' }",
	})
	a.Enqueue(llmtest.Text("one"), llmtest.Text("two"), llmtest.Text("three"))
	if got := g.promptOK(t, "api:meta1", "hi"); got != "one #1" {
		t.Fatalf("first answer %q", got)
	}
	if got := g.promptOK(t, "api:meta1", "hi"); got != "two #2" {
		t.Fatalf("second answer %q", got)
	}
	g.restart(t)
	if got := g.promptOK(t, "api:meta1", "hi"); got != "three #3" {
		t.Errorf("after a restart: %q (the metadata was lost)", got)
	}
}

// TestTypeScriptSessionModelAndInfo: from a real TypeScript plugin against
// the gateway, getSessionModel is the agent's primary, then the model
// persistSessionModel pinned (a model the agent may not use is ignored);
// the pin is what the next prompt uses; getModel describes it;
// getSessionUsage reports the last reply's usage; clearSessionModel
// returns the session to the primary.
func TestTypeScriptSessionModelAndInfo(t *testing.T) {
	node := tsNode(t)
	dir := filepath.Join(t.TempDir(), "modeler")
	os.MkdirAll(dir, 0o755)
	os.WriteFile(filepath.Join(dir, "plugin.json"), []byte(`{"name":"modeler","description":"Reports the model."}`), 0o644)
	os.WriteFile(filepath.Join(dir, "index.ts"), []byte(`
export function createPlugin(config: Record<string, unknown>, ctx: any) {
  return {
    register(r: any): void {
      r.hook("postResponse", async (ev: any) => {
        const m = ctx.getSessionModel(ev.sessionKey);
        const info = ctx.getModel(m.provider, m.modelId);
        const u = ctx.getSessionUsage(ev.sessionKey);
        let out = ev.response + " | " + m.provider + "/" + m.modelId + " " + info.name + " " + (u ? "usage" : "no usage");
        if (ev.response === "one") {
          ctx.persistSessionModel(ev.sessionKey, ev.agentName, "pa", "evil-model");
          ctx.persistSessionModel(ev.sessionKey, ev.agentName, "pa", "model-b");
        }
        if (ev.response === "two") ctx.clearSessionModel(ev.sessionKey);
        return { response: out };
      });
    },
  };
}
`), 0o644)
	a := llmtest.NewAnthropic(t)
	g := startGatewayWith(t, gatewaySetup{
		names:     []string{"modeled"},
		plugins:   fmt.Sprintf("modeler: { path: %q, node: %q }", dir, node),
		providers: fmt.Sprintf(`pa: { api: "anthropic-messages", baseUrl: %q, apiKey: "ka" }`, a.URL()),
		model:     "{ provider: 'pa', model: 'model-a' }",
		extra:     map[string]string{"modeled": "fallbackModels: [{ provider: 'pa', model: 'model-b' }]"},
	})
	a.Enqueue(llmtest.Text("one"), llmtest.Text("two"), llmtest.Text("three"))
	for i, want := range []string{
		"one | pa/model-a model-a usage",
		"two | pa/model-b model-b usage",
		"three | pa/model-a model-a usage",
	} {
		if got := g.promptOK(t, "api:model1", "hi"); got != want {
			t.Errorf("prompt %d: %q, want %q", i+1, got, want)
		}
	}
	if n := a.Count(); n != 3 {
		t.Fatalf("%d requests", n)
	}
	if got := a.Request(1).Model(); got != "model-b" {
		t.Errorf("the pinned prompt went to %q", got)
	}
}
