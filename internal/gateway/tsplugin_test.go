package gateway

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/beige-dev/beige/internal/audit"
	"github.com/beige-dev/beige/internal/llm/llmtest"
	"github.com/beige-dev/beige/internal/plugin/nodehost"
)

// tsNode finds a Node.js 22 for the TypeScript plugin tests, or skips.
func tsNode(t *testing.T) string {
	t.Helper()
	cands := []string{os.Getenv(nodehost.NodeEnv)}
	if h, err := os.UserHomeDir(); err == nil {
		cands = append(cands, filepath.Join(h, ".cache", "beige", "node22", "bin", "node"))
	}
	if p, err := exec.LookPath("node"); err == nil {
		cands = append(cands, p)
	}
	for _, c := range cands {
		if c == "" {
			continue
		}
		if n, err := nodehost.FindNode(context.Background(), c); err == nil {
			return n.Path
		}
	}
	t.Skip("no Node.js 22 or later: run scripts/ensure-node22.sh or set BEIGE_NODE")
	return ""
}

// TestTypeScriptPrePromptBlocks: a prePrompt hook of a TypeScript plugin in
// the original's format blocks a message and the client sees it blocked,
// on the prompt API and on the chat stream; a TypeScript plugin whose
// createPlugin throws does not keep the gateway from serving.
func TestTypeScriptPrePromptBlocks(t *testing.T) {
	node := tsNode(t)
	dir := t.TempDir()
	guard := filepath.Join(dir, "guard")
	os.MkdirAll(guard, 0o755)
	os.WriteFile(filepath.Join(guard, "plugin.json"), []byte(`{"name":"guard","description":"Blocks forbidden words."}`), 0o644)
	os.WriteFile(filepath.Join(guard, "index.ts"), []byte(`
interface PrePromptEvent { message: string; sessionKey: string; agentName: string; channel: string }
export function createPlugin(config: Record<string, unknown>) {
  return {
    register(r: any): void {
      r.hook("prePrompt", async (ev: PrePromptEvent) =>
        ev.message.includes("forbidden") ? { message: ev.message, block: true, reason: "no forbidden words" } : { message: ev.message });
    },
  };
}
`), 0o644)
	broken := filepath.Join(dir, "broken")
	os.MkdirAll(broken, 0o755)
	os.WriteFile(filepath.Join(broken, "plugin.json"), []byte(`{"name":"broken","description":"Throws."}`), 0o644)
	os.WriteFile(filepath.Join(broken, "index.js"), []byte(`export function createPlugin() { throw new Error("boom"); }`), 0o644)

	a := llmtest.NewAnthropic(t)
	g := startGatewayWith(t, gatewaySetup{
		names:     []string{"guarded"},
		plugins:   fmt.Sprintf("guard: { path: %q, node: %q }, broken: { path: %q, node: %q }", guard, node, broken, node),
		providers: fmt.Sprintf(`pa: { api: "anthropic-messages", baseUrl: %q, apiKey: "ka" }`, a.URL()),
		model:     "{ provider: 'pa', model: 'model-a' }",
	})
	agent := g.agents[0]
	a.Enqueue(llmtest.Text("hello there"))
	if got := g.promptOK(t, "api:ts1", "hi"); got != "hello there" {
		t.Errorf("answer %q", got)
	}
	n := a.Count()
	code, out := g.post(t, "/api/agents/"+agent+"/prompt", `{"message": "a forbidden word"}`)
	if code != http.StatusForbidden || !strings.Contains(fmt.Sprint(out["error"]), "blocked by a prePrompt hook: guard: no forbidden words") || a.Count() != n {
		t.Errorf("blocked prompt: %d %v", code, out)
	}
	body := fmt.Sprintf(`{"provider":"pa","modelId":"model-a","context":{"messages":[{"role":"user","content":"forbidden"}]},"agentName":%q}`, agent)
	resp, err := http.Post(g.URL()+"/api/chat/stream", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	data, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(data), `"type":"blocked"`) || !strings.Contains(string(data), "no forbidden words") || a.Count() != n {
		t.Errorf("blocked stream: %d %s", resp.StatusCode, data)
	}
}

// TestToolkitSessionsInSandbox: an agent with tools: ["sessions"] (the
// toolkit's plugin, unmodified, given read access to the sessions folder)
// lists and reads its own sessions from inside its sandbox, and not
// another agent's. BEIGE_TOOLKIT names the toolkit's plugins folder
// (scripts/ensure-toolkit.sh).
func TestToolkitSessionsInSandbox(t *testing.T) {
	node := tsNode(t)
	tk := os.Getenv("BEIGE_TOOLKIT")
	if tk == "" {
		t.Skip("BEIGE_TOOLKIT is not set (the toolkit's plugins/ folder)")
	}
	a := llmtest.NewAnthropic(t)
	a.SetDefault(llmtest.Text("noted"))
	g := startGatewayWith(t, gatewaySetup{
		names: []string{"owner", "other"},
		plugins: fmt.Sprintf(`sessions: { path: %q, node: %q },
			spawn: { path: %q, node: %q, config: { targets: { "OTHER": {} } } },
			schedule: { path: %q, node: %q, config: { tickInterval: 1, allowExec: false } }`,
			filepath.Join(tk, "sessions"), node, filepath.Join(tk, "spawn"), node, filepath.Join(tk, "schedule"), node),
		rename:    map[string]string{"OTHER": "other"},
		providers: fmt.Sprintf(`pa: { api: "anthropic-messages", baseUrl: %q, apiKey: "ka" }`, a.URL()),
		model:     "{ provider: 'pa', model: 'model-a' }",
		extra:     map[string]string{"owner": `tools: ["sessions", "spawn", "schedule"]`, "other": `tools: ["sessions"]`},
		options: func(o *Options) {
			o.Config.Plugins["sessions"].AllowRead = []string{o.Home.SessionsDir()}
		},
		docker: true, // the plugins' launchers and tool client run in a real sandbox
	})
	owner, other := g.agents[0], g.agents[1]
	prompt := func(agent, key, msg string) {
		body := fmt.Sprintf(`{"message": %q, "sessionKey": %q}`, msg, key)
		if code, out := g.post(t, "/api/agents/"+agent+"/prompt", body); code != 200 {
			t.Fatalf("prompt %s: %d %v", agent, code, out)
		}
	}
	prompt(owner, "api:trip", "plan a trip to Lisbon")
	prompt(other, "api:secret", "the other agent's secret plans")

	list, isErr := g.tool(t, owner, "exec", map[string]any{"command": "sessions list --format json"})
	if isErr || !strings.Contains(list, "plan a trip to Lisbon") || strings.Contains(list, "secret") {
		t.Errorf("sessions list: %v\n%s", isErr, list)
	}
	got, isErr := g.tool(t, owner, "exec", map[string]any{"command": "sessions get api:trip"})
	if isErr || !strings.Contains(got, "plan a trip to Lisbon") {
		t.Errorf("sessions get own: %v\n%s", isErr, got)
	}
	got, _ = g.tool(t, owner, "exec", map[string]any{"command": "sessions get api:secret"})
	if strings.Contains(got, "secret plans") || !strings.Contains(got, "Permission denied") {
		t.Errorf("sessions get another agent's: %s", got)
	}
	// spawn, configured to allow the other agent, runs a sub-agent
	// conversation and gets its answer; a target it does not list is refused.
	a.Enqueue(llmtest.Text("four"))
	got, isErr = g.tool(t, owner, "exec", map[string]any{"command": "spawn --target " + other + " what is 2+2?"})
	if isErr || !strings.Contains(got, "four") {
		t.Errorf("spawn: %v\n%s", isErr, got)
	}
	got, _ = g.tool(t, owner, "exec", map[string]any{"command": "spawn --target " + owner + " hi"})
	if !strings.Contains(got, "Exit code: 1") {
		t.Errorf("spawn to a target not allowed: %s", got)
	}
	// schedule runs a prompt on its schedule (its tick loop runs from the
	// plugin's start()).
	at := time.Now().Add(1500 * time.Millisecond).UTC().Format(time.RFC3339)
	n0 := a.Count()
	got, isErr = g.tool(t, owner, "exec", map[string]any{"command": "schedule create --once " + at + " --prompt water the plants"})
	if isErr {
		t.Fatalf("schedule create: %s", got)
	}
	deadline := time.Now().Add(20 * time.Second)
	for a.Count() == n0 || !strings.Contains(a.Last().AllText(), "water the plants") {
		if time.Now().After(deadline) {
			t.Fatalf("the scheduled prompt never reached the model")
		}
		time.Sleep(100 * time.Millisecond)
	}
	// Every call through the plugin host is audited like any tool call.
	recs, err := audit.ReadFile(g.home.AuditLog())
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, r := range recs {
		if r.Tool == "sessions" && r.Agent == owner && r.Phase == audit.PhaseFinished {
			n++
		}
	}
	if n != 3 {
		t.Errorf("%d finished audit records of the sessions tool, want 3", n)
	}
}
