package gateway

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/beige-dev/beige/internal/audit"
	"github.com/beige-dev/beige/internal/llm/llmtest"
)

const canaryKey = "sk-canary-4242"

// TestPromptRunsToolsInTheSandbox: a scripted model asks for exec, then
// answers; the prompt API returns the answer, the command ran in the
// sandbox, and the audit line names agent, session and model. Every wire
// format.
func TestPromptRunsToolsInTheSandbox(t *testing.T) {
	for _, api := range []string{"anthropic-messages", "openai-completions", "google-generative-ai"} {
		name := api
		if api == "google-generative-ai" {
			name = "google" // the socket path holds the test name: keep it short
		}
		t.Run(name, func(t *testing.T) {
			srv := llmtest.NewAnthropic(t)
			switch api {
			case "openai-completions":
				srv = llmtest.NewOpenAI(t)
			case "google-generative-ai":
				srv = llmtest.NewGemini(t)
			}
			srv.Enqueue(llmtest.ToolCall("exec", map[string]any{"command": "echo hi > /workspace/x"}), llmtest.Text("done"))
			g := startGatewayWith(t, gatewaySetup{
				names:     []string{"prompter"},
				providers: fmt.Sprintf("scripted: { api: %q, baseUrl: %q, apiKey: %q }", api, srv.URL(), canaryKey),
				model:     "{ provider: 'scripted', model: 'test-model' }",
			})
			a := g.agents[0]
			code, out := g.post(t, "/api/agents/"+a+"/prompt", `{"message": "write hi to x"}`)
			if code != 200 || out["response"] != "done" {
				t.Fatalf("prompt: %d %v", code, out)
			}
			if data, err := g.workspaceFile(t, a, "x"); err != nil || string(data) != "hi\n" {
				t.Errorf("x on the host: %q %v", data, err)
			}
			if srv.Count() != 2 || srv.Last().APIKey() != canaryKey {
				t.Errorf("requests %d, key %q", srv.Count(), srv.Last().APIKey())
			}
			if !strings.Contains(srv.Last().AllText(), "Exit code: 0") {
				t.Errorf("the tool result did not reach the model: %s", srv.Last().AllText())
			}
			rec := lastRecord(t, g, a, "exec")
			if rec.Session != "api:"+a+":default" || rec.Model != "test-model" && rec.Model != "scripted/test-model" || rec.Type != audit.TypeCoreTool {
				t.Errorf("audit: %+v", rec)
			}
			resp, _ := http.Get(g.URL() + "/api/agents/" + a + "/sessions")
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if !strings.Contains(string(body), `"id":"api:`+a+`:default"`) {
				t.Errorf("sessions: %s", body)
			}
			resp, _ = http.Get(g.URL() + "/api/agents/" + a + "/models")
			body, _ = io.ReadAll(resp.Body)
			resp.Body.Close()
			if !strings.Contains(string(body), `"id":"test-model"`) || !strings.Contains(string(body), `"api":"`+api+`"`) {
				t.Errorf("models: %s", body)
			}
			assertNoKey(t, g)
		})
	}
}

// assertNoKey checks the API key appears nowhere a user or agent can see.
func assertNoKey(t *testing.T, g *testGateway) {
	t.Helper()
	for _, path := range []string{"/api/config", "/api/agents"} {
		resp, err := http.Get(g.URL() + path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if strings.Contains(string(body), canaryKey) {
			t.Errorf("%s shows the key", path)
		}
	}
	filepath.Walk(g.home.Dir, func(p string, info os.FileInfo, err error) error {
		if err != nil || info.IsDir() || info.Mode()&os.ModeType != 0 || strings.HasSuffix(p, "config.json5") {
			return nil
		}
		if data, _ := os.ReadFile(p); strings.Contains(string(data), canaryKey) {
			t.Errorf("%s holds the key", p)
		}
		return nil
	})
	for _, a := range g.agents {
		text, _ := g.tool(t, a, "exec", map[string]any{"command": "env; cat /proc/1/environ; grep -rs sk-canary /workspace /tools /beige /etc /root /tmp | head -3"})
		if strings.Contains(text, canaryKey) {
			t.Errorf("the sandbox sees the key: %q", text)
		}
	}
}

// TestProviderErrorInItsOwnWords: an error object a provider sends where
// the SDK does not look for one — z.ai's HTTP 200 JSON body, an older
// vLLM's {"object":"error"} chunk — is what the audit record says, not
// "stream ended before the reply was complete", and routing treats it by
// its class: the balance error is retried on a later pass, the
// context-length 400 is not (the fallback model fails every time here).
func TestProviderErrorInItsOwnWords(t *testing.T) {
	for _, tc := range []struct {
		name, ct, body, want string
		attempts             int // requests the primary sees
	}{
		{"zai-200", "application/json", `{"error":{"code":"1113","message":"Insufficient balance or no resource package. Please recharge."}}`,
			"1113: Insufficient balance or no resource package. Please recharge.", 3},
		{"vllm", "text/event-stream", "data: {\"object\":\"error\",\"message\":\"This model's maximum context length is 4096 tokens.\",\"type\":\"BadRequestError\",\"param\":null,\"code\":400}\n\ndata: [DONE]\n\n",
			"400 BadRequestError: This model's maximum context length is 4096 tokens.", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var mu sync.Mutex
			primary := 0
			bad := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				primary++
				mu.Unlock()
				w.Header().Set("Content-Type", tc.ct)
				_, _ = io.WriteString(w, tc.body)
			}))
			defer bad.Close()
			fallback := llmtest.NewOpenAI(t)
			fallback.SetDefault(llmtest.Status(500))
			g := startGatewayWith(t, gatewaySetup{
				names: []string{"errs"},
				providers: fmt.Sprintf(`pa: { api: "openai-completions", baseUrl: %q, apiKey: "ka" }, pb: { api: "openai-completions", baseUrl: %q, apiKey: "kb" }`,
					bad.URL+"/v1", fallback.URL()),
				model: "{ provider: 'pa', model: 'model-a' }",
				extra: map[string]string{"errs": "fallbackModels: [{ provider: 'pb', model: 'model-b' }]"},
			})
			code, out := g.post(t, "/api/agents/"+g.agents[0]+"/prompt", `{"message": "hi"}`)
			if code == 200 || fallback.Count() == 0 {
				t.Errorf("prompt: %d %v; fallback saw %d requests", code, out, fallback.Count())
			}
			mu.Lock()
			n := primary
			mu.Unlock()
			if n != tc.attempts {
				t.Errorf("primary saw %d requests, want %d", n, tc.attempts)
			}
			recs, _ := audit.ReadFile(g.home.AuditLog())
			found := 0
			for _, r := range recs {
				if r.Type == audit.TypeLLM && r.Tool == "pa/model-a" && strings.Contains(r.Error, tc.want) {
					found++
				}
				if strings.Contains(r.Error, "stream ended before the reply was complete") {
					t.Errorf("the provider's words were lost: %+v", r)
				}
			}
			if found == 0 {
				t.Errorf("no model attempt audited with %q: %+v", tc.want, recs)
			}
		})
	}
}
