package gateway

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/beige-dev/beige/internal/llm/llmtest"
	"github.com/beige-dev/beige/internal/metrics/metricstest"
	"github.com/beige-dev/beige/internal/testutil"
)

// llmPromptPlugin's postResponse hook runs ctx.llmPrompt with the agent's
// reply as its arguments (JSON: [provider, modelId, messages, opts]) and
// answers what it returned, or the error it threw.
const llmPromptPlugin = `
export function createPlugin(config: Record<string, unknown>, ctx: any) {
  return {
    register(r: any): void {
      r.hook("postResponse", async (ev: any) => {
        const args = JSON.parse(ev.response);
        if (args[0] === "crash") {
          setTimeout(() => process.exit(3), 300);
          args.shift();
        }
        try {
          return { response: "ok: " + await ctx.llmPrompt(...args) };
        } catch (e) {
          return { response: "error: " + (e as Error).message };
        }
      });
    },
  };
}
`

// TestTypeScriptLLMPrompt: a TypeScript plugin's ctx.llmPrompt reaches the
// configured provider as an agent's call does — with that provider's key,
// the model, system prompt, max tokens and the image it gave — and answers
// the model's text; it creates no session, is counted in the model-call
// metrics and logged with its tokens but never its text. An unknown model
// or provider, a provider without a key and a provider's refusal are
// errors the plugin sees, naming no key.
func TestTypeScriptLLMPrompt(t *testing.T) {
	node := tsNode(t)
	dir := filepath.Join(t.TempDir(), "asker")
	os.MkdirAll(dir, 0o755)
	os.WriteFile(filepath.Join(dir, "plugin.json"), []byte(`{"name":"asker","description":"Asks a model."}`), 0o644)
	os.WriteFile(filepath.Join(dir, "index.ts"), []byte(llmPromptPlugin), 0o644)
	a := llmtest.NewAnthropic(t)
	b := llmtest.NewAnthropic(t)
	logs := &testutil.SyncBuffer{}
	g := startGatewayWith(t, gatewaySetup{
		names:   []string{"asking"},
		plugins: fmt.Sprintf("asker: { path: %q, node: %q }", dir, node),
		providers: fmt.Sprintf(`pa: { api: "anthropic-messages", baseUrl: %q, apiKey: "key-of-pa" },
			pb: { api: "anthropic-messages", baseUrl: %q, apiKey: "key-of-pb", models: [{ id: "model-b", input: ["text", "image"], maxTokens: 1000 }] },
			pn: { api: "anthropic-messages", baseUrl: %q, apiKey: "", models: [{ id: "model-n" }] }`, a.URL(), b.URL(), b.URL()),
		model: "{ provider: 'pa', model: 'model-a' }",
		options: func(o *Options) {
			o.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
		},
	})
	ask := func(args string) string {
		t.Helper()
		a.Enqueue(llmtest.Text(args))
		return g.promptOK(t, "api:llm1", "go")
	}

	b.Enqueue(llmtest.Text("a small cat").WithUsage(12, 3))
	got := ask(`["pb","model-b",[{"role":"user","content":[{"type":"text","text":"describe the secret picture"},{"type":"image","data":"aGk=","mimeType":"image/png"}]}],{"systemPrompt":"be terse","maxTokens":77}]`)
	if got != "ok: a small cat" {
		t.Fatalf("llmPrompt answered %q\n%s", got, logs)
	}
	if b.Count() != 1 {
		t.Fatalf("%d requests to pb", b.Count())
	}
	req := b.Last()
	var body struct {
		MaxTokens int `json:"max_tokens"`
		Messages  []struct {
			Content []struct {
				Type   string `json:"type"`
				Source struct {
					MediaType string `json:"media_type"`
					Data      string `json:"data"`
				} `json:"source"`
			} `json:"content"`
		} `json:"messages"`
	}
	if err := req.Decode(&body); err != nil {
		t.Fatal(err)
	}
	if req.APIKey() != "key-of-pb" || req.Model() != "model-b" || req.System() != "be terse" || body.MaxTokens != 77 {
		t.Errorf("sent key %q model %q system %q max_tokens %d", req.APIKey(), req.Model(), req.System(), body.MaxTokens)
	}
	if !strings.Contains(req.AllText(), "describe the secret picture") || len(body.Messages) != 1 || len(body.Messages[0].Content) != 2 ||
		body.Messages[0].Content[1].Type != "image" || body.Messages[0].Content[1].Source.Data != "aGk=" || body.Messages[0].Content[1].Source.MediaType != "image/png" {
		t.Errorf("sent %s", req.Raw)
	}
	sessions, err := g.Sessions(context.Background(), g.agents[0])
	if err != nil || len(sessions) != 1 || sessions[0].ID != "api:llm1" {
		t.Errorf("sessions after llmPrompt: %+v %v (want the agent's own only)", sessions, err)
	}
	rec := httptest.NewRecorder()
	g.metrics.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	metricstest.Expect(t, rec.Body.String(), map[string]string{
		`beige_llm_attempts_total{model="model-b",outcome="ok",provider="pb"}`:    "1",
		`beige_llm_tokens_total{direction="input",model="model-b",provider="pb"}`: "12",
	})
	if line := grepLine(logs.String(), `msg="plugin model call"`); !strings.Contains(line, "plugin=asker model=pb/model-b") || !strings.Contains(line, "inputTokens=12 outputTokens=3") {
		t.Errorf("log line %q", line)
	}
	for _, secret := range []string{"describe the secret picture", "be terse", "a small cat"} {
		if strings.Contains(logs.String(), secret) {
			t.Errorf("the log shows %q", secret)
		}
	}

	msg := `[{"role":"user","content":"hi"}]`
	for _, tc := range []struct{ args, want string }{
		{`["pb","model-x",` + msg + `]`, `error: ctx.llmPrompt: model "model-x" not found for provider "pb": list it under llm.providers.pb.models`},
		{`["px","model-b",` + msg + `]`, `error: ctx.llmPrompt: provider "px" is not configured (not a key of llm.providers)`},
		{`["pb","model-b",` + msg + `,{"maxTokens":5000}]`, `error: ctx.llmPrompt: maxTokens 5000 is over the 1000 of model pb/model-b`},
	} {
		if got := ask(tc.args); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.args, got, tc.want)
		}
	}
	if b.Count() != 1 {
		t.Errorf("refused calls reached the provider: %d requests", b.Count())
	}
	// A provider without a key (a local server) is called as an agent's
	// would be, with no key.
	b.Enqueue(llmtest.Text("keyless answer"))
	if got := ask(`["pn","model-n",` + msg + `]`); got != "ok: keyless answer" || b.Count() != 2 || b.Last().APIKey() != "" {
		t.Errorf("keyless provider: %q, %d requests, key %q", got, b.Count(), b.Last().APIKey())
	}

	// The agent's own model, through the provider's refusal: the error says
	// what an agent's would, without the key.
	a.Enqueue(llmtest.Text(`["pa","model-a",` + msg + `]`))
	a.Enqueue(llmtest.Error(http.StatusUnauthorized, `{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}}`, nil))
	got = g.promptOK(t, "api:llm1", "go")
	if !strings.HasPrefix(got, "error: ctx.llmPrompt: model pa/model-a: ") || !strings.Contains(got, "invalid x-api-key") || strings.Contains(got, "key-of-pa") {
		t.Errorf("a refused call: %q", got)
	}
}

// TestTypeScriptLLMPromptCancelled: a plugin's model call that is still
// running when its host goes (here: it crashes) is cancelled at the
// provider, not left streaming.
func TestTypeScriptLLMPromptCancelled(t *testing.T) {
	node := tsNode(t)
	dir := filepath.Join(t.TempDir(), "asker")
	os.MkdirAll(dir, 0o755)
	os.WriteFile(filepath.Join(dir, "plugin.json"), []byte(`{"name":"asker","description":"Asks a model."}`), 0o644)
	os.WriteFile(filepath.Join(dir, "index.ts"), []byte(llmPromptPlugin), 0o644)
	a := llmtest.NewAnthropic(t)
	b := llmtest.NewAnthropic(t)
	g := startGatewayWith(t, gatewaySetup{
		names:   []string{"asking"},
		plugins: fmt.Sprintf("asker: { path: %q, node: %q }", dir, node),
		providers: fmt.Sprintf(`pa: { api: "anthropic-messages", baseUrl: %q, apiKey: "ka" },
			pb: { api: "anthropic-messages", baseUrl: %q, apiKey: "kb", models: [{ id: "model-b" }] }`, a.URL(), b.URL()),
		model: "{ provider: 'pa', model: 'model-a' }",
	})
	a.Enqueue(llmtest.Text(`["crash","pb","model-b",[{"role":"user","content":"hi"}]]`))
	b.Enqueue(llmtest.Hang())
	done := make(chan struct{})
	go func() {
		defer close(done)
		body := `{"message":"go","sessionKey":"api:llm2"}`
		if resp, err := http.Post(g.URL()+"/api/agents/"+g.agents[0]+"/prompt", "application/json", strings.NewReader(body)); err == nil {
			resp.Body.Close()
		}
	}()
	if !b.WaitCancelled(1, 20*time.Second) {
		t.Fatalf("the model call was not cancelled when the plugin host went (in flight %d)", b.InFlight())
	}
	<-done
}

// grepLine returns the first line of text containing s.
func grepLine(text, s string) string {
	for line := range strings.SplitSeq(text, "\n") {
		if strings.Contains(line, s) {
			return line
		}
	}
	return ""
}
