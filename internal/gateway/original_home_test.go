package gateway

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/beige-dev/beige/internal/llm/llmtest"
)

// TestOriginalHomeStarts: a home the original Beige wrote (a pi session
// file, session-map.json with the original's activeModel pin,
// session-settings.json, provider-health.json) starts under this gateway
// with its session listed and resumed, on the pinned model.
func TestOriginalHomeStarts(t *testing.T) {
	primary := llmtest.NewOpenAI(t)
	pinned := llmtest.NewOpenAI(t)
	pinned.Enqueue(llmtest.Text("on the pinned model"))
	var key string
	g := startGatewayWith(t, gatewaySetup{
		names: []string{"moved"},
		providers: fmt.Sprintf(`pa: { api: "openai-completions", baseUrl: %q, apiKey: "ka" }, pb: { api: "openai-completions", baseUrl: %q, apiKey: "kb" }`,
			primary.URL(), pinned.URL()),
		model: "{ provider: 'pa', model: 'model-a' }",
		extra: map[string]string{"moved": "fallbackModels: [{ provider: 'pb', model: 'model-b' }]"},
		options: func(o *Options) {
			a := o.Config.AgentOrder[0]
			key = "api:" + a + ":default"
			sessions := o.Home.SessionsDir()
			file := filepath.Join(sessions, a, "20260301-101500-a1b2c3.jsonl")
			lines := []string{
				`{"type":"session","version":3,"id":"5e550000-0000-4000-8000-000000000000","timestamp":"2026-03-01T10:15:00.000Z","cwd":"/workspace"}`,
				`{"type":"message","id":"u1","parentId":null,"timestamp":"2026-03-01T10:15:01.000Z","message":{"role":"user","content":[{"type":"text","text":"remember the word pelican"}],"timestamp":1772360101000}}`,
				`{"type":"message","id":"a1","parentId":"u1","timestamp":"2026-03-01T10:15:02.000Z","message":{"role":"assistant","content":[{"type":"text","text":"pelican noted"}],"api":"openai-completions","provider":"pb","model":"model-b","usage":{"input":1,"output":1,"cacheRead":0,"cacheWrite":0,"totalTokens":2,"cost":{"input":0,"output":0,"cacheRead":0,"cacheWrite":0,"total":0}},"stopReason":"stop","timestamp":1772360102000}}`,
			}
			writeFile(t, file, strings.Join(lines, "\n")+"\n")
			writeFile(t, filepath.Join(sessions, "session-map.json"), fmt.Sprintf(
				`{%q: {"agentName": %q, "sessionFile": %q, "createdAt": "2026-03-01T10:15:00.000Z", "metadata": {"activeModel": {"provider": "pb", "modelId": "model-b"}}}}`,
				key, a, file))
			writeFile(t, filepath.Join(sessions, "session-settings.json"), fmt.Sprintf(`{%q: {"verbose": true}}`, key))
			writeFile(t, filepath.Join(o.Home.DataDir(), "provider-health.json"),
				`{"providers": {"pa/model-a": {"consecutiveFailures": 0}}, "lastUpdated": "2026-03-01T10:15:00.000Z"}`)
		},
	})
	a := g.agents[0]

	resp, err := http.Get(g.URL() + "/api/agents/" + a + "/sessions")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(body), `"id":"`+key+`"`) {
		t.Errorf("the original's session is not listed: %s", body)
	}

	code, out := g.post(t, "/api/agents/"+a+"/prompt", `{"message": "which word?"}`)
	if code != 200 || out["response"] != "on the pinned model" {
		t.Fatalf("prompt: %d %v", code, out)
	}
	if primary.Count() != 0 || pinned.Count() != 1 {
		t.Errorf("requests: primary %d, pinned %d; want the pinned model only", primary.Count(), pinned.Count())
	}
	if all := pinned.Last().AllText(); !strings.Contains(all, "remember the word pelican") || !strings.Contains(all, "pelican noted") {
		t.Errorf("the session was not resumed: %q", all)
	}
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}
