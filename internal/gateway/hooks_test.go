package gateway

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"testing/fstest"

	"github.com/beige-dev/beige/internal/llm/llmtest"
	"github.com/beige-dev/beige/internal/plugin"
)

// hookRecorder is a built-in plugin of this test binary: its hooks record
// what they see and, on cue, change or block prompts and answers.
var hookRecorder = struct {
	sync.Mutex
	events []string
}{}

func recordHook(format string, args ...any) {
	hookRecorder.Lock()
	defer hookRecorder.Unlock()
	hookRecorder.events = append(hookRecorder.events, fmt.Sprintf(format, args...))
}

func hookEvents() []string {
	hookRecorder.Lock()
	defer hookRecorder.Unlock()
	return append([]string(nil), hookRecorder.events...)
}

func init() {
	plugin.Register(plugin.Builtin{
		Name: "hooktest",
		Docs: fstest.MapFS{"plugin.json": {Data: []byte(`{"name": "hooktest", "description": "Records hooks (tests only)."}`)}},
		New: func(plugin.Env) (plugin.Plugin, error) {
			return plugin.RegisterFunc(func(r *plugin.Registrar) error {
				return errors.Join(
					r.Hook(plugin.HookPrePrompt, plugin.PrePromptHook(func(ctx context.Context, ev *plugin.PrePromptEvent) error {
						recordHook("prePrompt %s", ev.Prompt)
						if strings.Contains(ev.Prompt, "forbidden") {
							return errors.New("no forbidden words")
						}
						ev.Prompt = strings.ReplaceAll(ev.Prompt, "colour", "color")
						return nil
					})),
					r.Hook(plugin.HookPostResponse, plugin.PostResponseHook(func(ctx context.Context, ev *plugin.PostResponseEvent) error {
						recordHook("postResponse %s", ev.Response)
						ev.Response = strings.ReplaceAll(ev.Response, "secret", "[redacted]")
						return nil
					})),
					r.Hook(plugin.HookModelSwitched, plugin.ModelSwitchedHook(func(ctx context.Context, ev *plugin.ModelSwitchedEvent) error {
						recordHook("modelSwitched %s -> %s (%s)", ev.From, ev.To, ev.Reason)
						return nil
					})),
				)
			}), nil
		},
	})
}

func TestPromptHooks(t *testing.T) {
	a, b := llmtest.NewAnthropic(t), llmtest.NewAnthropic(t)
	g := startGatewayWith(t, gatewaySetup{
		names:     []string{"hooked"},
		plugins:   "hooktest: {}",
		providers: fmt.Sprintf(`pa: { api: "anthropic-messages", baseUrl: %q, apiKey: "ka" }, pb: { api: "anthropic-messages", baseUrl: %q, apiKey: "kb" }`, a.URL(), b.URL()),
		model:     "{ provider: 'pa', model: 'model-a' }",
		extra:     map[string]string{"hooked": "fallbackModels: [{ provider: 'pb', model: 'model-b' }]"},
	})
	agent := g.agents[0]

	// prePrompt rewrites the message; postResponse rewrites the answer.
	a.Enqueue(llmtest.Text("the secret colour is blue"))
	if got := g.promptOK(t, "api:h1", "what colour?"); got != "the [redacted] colour is blue" {
		t.Errorf("answer %q", got)
	}
	if !strings.Contains(a.Last().AllText(), "what color?") {
		t.Errorf("the model saw %q", a.Last().AllText())
	}
	// prePrompt may block: no model call.
	n := a.Count()
	code, out := g.post(t, "/api/agents/"+agent+"/prompt", `{"message": "a forbidden word"}`)
	if code != http.StatusForbidden || !strings.Contains(fmt.Sprint(out["error"]), "no forbidden words") || a.Count() != n {
		t.Errorf("blocked prompt: %d %v", code, out)
	}
	// Through the proxy too: a blocked event.
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

	// modelSwitched fires when the session ends up on the fallback, not
	// when a retry brings it back to the primary.
	a.Enqueue(llmtest.Error(429, `{"type":"error","error":{"type":"rate_limit_error","message":"slow"}}`, http.Header{"Retry-After": {"1"}}))
	b.Enqueue(llmtest.Text("from b"))
	g.promptOK(t, "api:h2", "hi")
	var switched []string
	for _, e := range hookEvents() {
		if strings.HasPrefix(e, "modelSwitched") {
			switched = append(switched, e)
		}
	}
	if len(switched) != 1 || switched[0] != "modelSwitched pa/model-a -> pb/model-b (fallback_rate_limit)" {
		t.Errorf("modelSwitched: %q", switched)
	}
}
