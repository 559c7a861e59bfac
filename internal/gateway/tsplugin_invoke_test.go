package gateway

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/beige-dev/beige/internal/audit"
	"github.com/beige-dev/beige/internal/llm/llmtest"
)

// TestTypeScriptInvokeToolThroughPipeline: ctx.invokeTool from a real
// TypeScript plugin runs the tool as the agent sessionContext.agentName
// names, through the one pipeline: an agent allowed the tool gets its
// output (and the call is audited), an agent not allowed is denied (and
// audited as denied, the handler never runs), an unknown tool is a clear
// failed result, and without an agent the call is refused.
func TestTypeScriptInvokeToolThroughPipeline(t *testing.T) {
	node := tsNode(t)
	dir := filepath.Join(t.TempDir(), "caller")
	os.MkdirAll(dir, 0o755)
	os.WriteFile(filepath.Join(dir, "plugin.json"), []byte(`{"name":"caller","description":"Calls its tool."}`), 0o644)
	os.WriteFile(filepath.Join(dir, "index.ts"), []byte(`
export function createPlugin(config: Record<string, unknown>, ctx: any) {
  return {
    register(r: any): void {
      r.tool({ name: "caller", description: "", handler: async (args: string[], cfg: any, session: any) => {
        return { output: "ran " + args.join(",") + " as " + session?.agentName, exitCode: 0 };
      }});
      r.hook("postResponse", async (ev: any) => {
        const ok = await ctx.invokeTool("caller", ["a", "b"], { agentName: config.ok, sessionKey: ev.sessionKey });
        const no = await ctx.invokeTool("caller", ["c"], { agentName: config.no, sessionKey: ev.sessionKey });
        const unk = await ctx.invokeTool("missing", [], { agentName: config.ok });
        let none = "";
        try { await ctx.invokeTool("caller", []); } catch (e: any) { none = String(e.message ?? e); }
        return { response: [ok.exitCode + ":" + ok.output, no.exitCode + ":" + no.output, unk.exitCode + ":" + unk.output, none].join(" | ") };
      });
    },
  };
}
`), 0o644)
	a := llmtest.NewAnthropic(t)
	g := startGatewayWith(t, gatewaySetup{
		names:     []string{"okay", "nope"},
		plugins:   fmt.Sprintf(`caller: { path: %q, node: %q, config: { ok: "OKAY", no: "NOPE" } }`, dir, node),
		rename:    map[string]string{"OKAY": "okay", "NOPE": "nope"},
		providers: fmt.Sprintf(`pa: { api: "anthropic-messages", baseUrl: %q, apiKey: "ka" }`, a.URL()),
		model:     "{ provider: 'pa', model: 'model-a' }",
		extra:     map[string]string{"okay": `tools: ["caller"]`},
	})
	a.Enqueue(llmtest.Text("one"))
	got := g.promptOK(t, "api:inv1", "hi")
	parts := strings.Split(got, " | ")
	if len(parts) != 4 {
		t.Fatalf("answer %q", got)
	}
	if parts[0] != "0:ran a,b as "+g.agents[0] {
		t.Errorf("allowed call: %q", parts[0])
	}
	if !strings.HasPrefix(parts[1], "1:") || !strings.Contains(parts[1], "not allowed") || strings.Contains(parts[1], "ran ") {
		t.Errorf("denied call: %q", parts[1])
	}
	if parts[2] != "1:Unknown tool: missing" {
		t.Errorf("unknown tool: %q", parts[2])
	}
	if !strings.Contains(parts[3], "ctx.invokeTool") || !strings.Contains(parts[3], "agentName is required") {
		t.Errorf("no agent: %q", parts[3])
	}
	recs, err := audit.ReadFile(g.home.AuditLog())
	if err != nil {
		t.Fatal(err)
	}
	var okDone, denied bool
	for _, r := range recs {
		if r.Tool != "caller" {
			continue
		}
		okDone = okDone || (r.Agent == g.agents[0] && r.Phase == audit.PhaseFinished && r.Decision == audit.DecisionAllowed)
		denied = denied || (r.Agent == g.agents[1] && r.Decision == audit.DecisionDenied)
	}
	if !okDone || !denied {
		t.Errorf("audit: allowed finished %v, denied %v; records %+v", okDone, denied, recs)
	}
}
