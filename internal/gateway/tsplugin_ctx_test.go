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
