package gateway

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/beige-dev/beige/internal/audit"
	"github.com/beige-dev/beige/internal/llm/llmtest"
)

// piChatBody is a POST /api/chat/stream body as the original terminal
// client sends it (pi's Context, messages and AgentTools, JSON.stringify'd):
// every field of pi's message types, tools with their label, and
// options.reasoning as a thinking level.
func piChatBody(agent, reasoning string) string {
	return fmt.Sprintf(`{
  "provider": "pa", "modelId": "claude-sonnet-4-5", "agentName": %q, "sessionKey": "tui:%s:default",
  "options": {"reasoning": %s, "maxTokens": 4096},
  "context": {
    "systemPrompt": "You are a helpful agent.",
    "messages": [
      {"role": "user", "content": [{"type": "text", "text": "list the files"}], "timestamp": 1764590000000},
      {"role": "assistant",
       "content": [
         {"type": "thinking", "thinking": "I should run ls.", "thinkingSignature": "sig"},
         {"type": "text", "text": "Let me look."},
         {"type": "toolCall", "id": "toolu_1", "name": "exec", "arguments": {"command": "ls"}}],
       "api": "anthropic-messages", "provider": "pa", "model": "model-a",
       "usage": {"input": 10, "output": 5, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 15,
                 "cost": {"input": 0.1, "output": 0.2, "cacheRead": 0, "cacheWrite": 0, "total": 0.3}},
       "stopReason": "toolUse", "timestamp": 1764590001000},
      {"role": "toolResult", "toolCallId": "toolu_1", "toolName": "exec",
       "content": [{"type": "text", "text": "a.txt\nb.txt"}], "details": {"exitCode": 0}, "isError": false,
       "timestamp": 1764590002000},
      {"role": "user", "content": "thanks, now read a.txt", "timestamp": 1764590003000}
    ],
    "tools": [
      {"name": "exec", "label": "Execute", "description": "Run a shell command in the sandbox.",
       "parameters": {"type": "object", "properties": {"command": {"type": "string", "description": "Command"}}, "required": ["command"]}},
      {"name": "read", "label": "Read File", "description": "Read a file.",
       "parameters": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}}
    ]
  }
}`, agent, agent, reasoning)
}

// piEvent is an event as a pi client reads it.
type piEvent struct {
	Type         string          `json:"type"`
	ContentIndex *int            `json:"contentIndex"`
	Delta        string          `json:"delta"`
	Reason       string          `json:"reason"`
	Partial      *piMessage      `json:"partial"`
	Message      *piMessage      `json:"message"`
	Error        *piMessage      `json:"error"`
	Provider     string          `json:"provider"`
	ModelID      string          `json:"modelId"`
	Raw          json.RawMessage `json:"-"`
}

type piMessage struct {
	Role         string            `json:"role"`
	Content      []json.RawMessage `json:"content"`
	Provider     string            `json:"provider"`
	Model        string            `json:"model"`
	StopReason   string            `json:"stopReason"`
	ErrorMessage string            `json:"errorMessage"`
	Timestamp    int64             `json:"timestamp"`
}

// text joins the message's text blocks.
func (m *piMessage) text() string {
	if m == nil {
		return ""
	}
	var s string
	for _, c := range m.Content {
		var b struct{ Type, Text string }
		json.Unmarshal(c, &b)
		if b.Type == "text" {
			s += b.Text
		}
	}
	return s
}

func postPi(t *testing.T, g *testGateway, body string) []piEvent {
	t.Helper()
	resp, err := http.Post(g.URL()+"/api/chat/stream", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		var b strings.Builder
		bufio.NewReader(resp.Body).WriteTo(&b)
		t.Fatalf("chat/stream: %d %s", resp.StatusCode, b.String())
	}
	var evs []piEvent
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<24)
	for sc.Scan() {
		var ev piEvent
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		ev.Raw = append(json.RawMessage(nil), sc.Bytes()...)
		evs = append(evs, ev)
	}
	return evs
}

// checkPiStream checks what pi's agent loop needs of a stream: exactly one
// start, carrying partial, before any block event; partial on every block
// event; model_fallback allowed in between; exactly one final done or
// error, last, carrying the whole message. It returns the final message.
func checkPiStream(t *testing.T, evs []piEvent) (final piEvent) {
	t.Helper()
	starts, finals := 0, 0
	for i, ev := range evs {
		switch ev.Type {
		case "start":
			starts++
			if ev.Partial == nil || ev.Partial.Role != "assistant" || ev.Partial.Content == nil {
				t.Errorf("event %d: start without a partial message: %s", i, ev.Raw)
			}
		case "model_fallback":
		case "done", "error":
			finals++
			if i != len(evs)-1 {
				t.Errorf("event %d: %s is not the last event", i, ev.Type)
			}
			m := ev.Message
			if ev.Type == "error" {
				m = ev.Error
			}
			if m == nil || m.Role != "assistant" || m.Content == nil || m.Timestamp == 0 {
				t.Errorf("event %d: %s without its whole message: %s", i, ev.Type, ev.Raw)
			}
			if ev.Type == "error" && (m == nil || m.StopReason != "error" && m.StopReason != "aborted" || m.ErrorMessage == "") {
				t.Errorf("event %d: error without stopReason error and errorMessage: %s", i, ev.Raw)
			}
			final = ev
		default:
			if starts == 0 {
				t.Errorf("event %d: %s before start", i, ev.Type)
			}
			if ev.Partial == nil || ev.Partial.Role != "assistant" || ev.ContentIndex == nil || *ev.ContentIndex >= len(ev.Partial.Content) {
				t.Errorf("event %d: %s without a partial message holding its block: %s", i, ev.Type, ev.Raw)
			}
		}
	}
	if starts != 1 || finals != 1 {
		t.Errorf("%d start and %d done/error events, want 1 and 1: %s", starts, finals, types(evs))
	}
	return final
}

func types(evs []piEvent) string {
	var s []string
	for _, ev := range evs {
		s = append(s, ev.Type)
	}
	return strings.Join(s, " ")
}

// TestPiClientChatStream replays the original terminal client's request
// (issue #12 items 1, 2 and 4) and checks the events it needs.
func TestPiClientChatStream(t *testing.T) {
	// Models that can think, so that reasoning shows upstream.
	a, b := llmtest.NewAnthropic(t), llmtest.NewAnthropic(t)
	g := startGatewayWith(t, gatewaySetup{
		names: []string{"pi"},
		providers: fmt.Sprintf(`pa: { api: "anthropic-messages", baseUrl: %q, apiKey: "ka" }, pb: { api: "anthropic-messages", baseUrl: %q, apiKey: "kb" }`,
			a.URL(), b.URL()),
		model: "{ provider: 'pa', model: 'claude-sonnet-4-5' }",
		extra: map[string]string{"pi": "fallbackModels: [{ provider: 'pb', model: 'claude-haiku-4-5' }]"},
	})
	agent := g.agents[0]

	t.Run("answer", func(t *testing.T) {
		a.Enqueue(llmtest.Reply(llmtest.ThinkingBlock("hm"), llmtest.TextBlock("Here is a.txt"), llmtest.Call("read", map[string]string{"path": "a.txt"})))
		evs := postPi(t, g, piChatBody(agent, `"high"`))
		final := checkPiStream(t, evs)
		if final.Type != "done" || final.Message.text() != "Here is a.txt" || final.Message.StopReason != "toolUse" {
			t.Errorf("final %s", final.Raw)
		}
		// The last delta's partial is the answer so far.
		for _, ev := range evs {
			if ev.Type == "text_end" && ev.Partial.text() != "Here is a.txt" {
				t.Errorf("text_end partial %s", ev.Raw)
			}
		}
		// reasoning "high" asked the model to think.
		if th, _ := a.Last().Body["thinking"].(map[string]any); th["type"] != "enabled" {
			t.Errorf("upstream thinking %v", a.Last().Body["thinking"])
		}
		if tools, _ := a.Last().Body["tools"].([]any); len(tools) != 2 || strings.Contains(string(a.Last().Raw), "label") {
			t.Errorf("upstream tools %v", a.Last().Body["tools"])
		}
	})

	t.Run("reasoning bool and off", func(t *testing.T) {
		for _, r := range []string{"true", "false", `"off"`, `"minimal"`, `"xhigh"`} {
			a.Enqueue(llmtest.Text("ok"))
			if final := checkPiStream(t, postPi(t, g, piChatBody(agent, r))); final.Type != "done" {
				t.Errorf("reasoning %s: %s", r, final.Raw)
			}
			_, thinking := a.Last().Body["thinking"]
			if want := r != "false" && r != `"off"`; thinking != want {
				t.Errorf("reasoning %s: upstream thinking %v", r, a.Last().Body["thinking"])
			}
		}
		if code, out := g.post(t, "/api/chat/stream", piChatBody(agent, `"hgih"`)); code != 400 || !strings.Contains(fmt.Sprint(out), "options.reasoning") {
			t.Errorf("misspelt level: %d %v", code, out)
		}
	})

	t.Run("partial false", func(t *testing.T) {
		// Our own client rebuilds the message: only start carries it.
		a.Enqueue(llmtest.Text("Hello there"))
		body := strings.Replace(piChatBody(agent, "true"), `"agentName"`, `"partial": false, "agentName"`, 1)
		evs := postPi(t, g, body)
		for _, ev := range evs {
			if (ev.Partial != nil) != (ev.Type == "start") {
				t.Errorf("partial on %s: %s", ev.Type, ev.Raw)
			}
		}
		if final := evs[len(evs)-1]; final.Type != "done" || final.Message.text() != "Hello there" {
			t.Errorf("final %s", final.Raw)
		}
	})

	t.Run("fallback after a failed attempt", func(t *testing.T) {
		// The primary fails mid-answer; the fallback answers. One
		// message, the fallback's, without the primary's text.
		a.Enqueue(llmtest.Text("primary text that fails").FailAfter(4, "overloaded_error", "Overloaded"))
		b.Enqueue(llmtest.Text("from b"))
		evs := postPi(t, g, piChatBody(agent, "true"))
		final := checkPiStream(t, evs)
		if final.Type != "done" || final.Message.text() != "from b" || final.Message.Provider != "pb" {
			t.Errorf("final %s", final.Raw)
		}
		if !strings.Contains(types(evs), "model_fallback") {
			t.Errorf("no model_fallback: %s", types(evs))
		}
		last := evs[len(evs)-2]
		if last.Partial == nil || last.Partial.text() != "from b" || last.Partial.Provider != "pb" {
			t.Errorf("partial before done: %s", last.Raw)
		}
	})

	t.Run("every model fails", func(t *testing.T) {
		// 3 passes × 2 models, each failing after its stream began.
		for range 3 {
			a.Enqueue(llmtest.Text("nope").FailAfter(2, "overloaded_error", "Overloaded"))
			b.Enqueue(llmtest.Text("nope").FailAfter(2, "overloaded_error", "Overloaded"))
		}
		evs := postPi(t, g, piChatBody(agent, "true"))
		final := checkPiStream(t, evs)
		if final.Type != "error" || final.Reason != "error" || !strings.Contains(final.Error.ErrorMessage, "Overloaded") {
			t.Errorf("final %s", final.Raw)
		}
	})
}

// TestPiClientExecActiveModel sends a tool call as the original terminal
// client does, with activeModel (issue #12 item 3): it runs, and its audit
// records name the model as provider/modelId.
func TestPiClientExecActiveModel(t *testing.T) {
	g := startGateway(t, "piexec")
	a := g.agents[0]
	for _, tc := range []struct{ active, want string }{
		{`,"activeModel":{"provider":"anthropic","modelId":"claude-sonnet-4-5"}`, "anthropic/claude-sonnet-4-5"},
		{``, ""},
		{`,"activeModel":{"provider":"anthropic"}`, ""},
	} {
		before, _ := audit.ReadFile(g.home.AuditLog())
		code, out := g.post(t, "/api/agents/"+a+"/exec", `{"tool":"exec","params":{"command":"echo hi"}`+tc.active+`}`)
		if code != 200 || out["isError"] == true {
			t.Fatalf("%s: %d %v", tc.active, code, out)
		}
		recs, err := audit.ReadFile(g.home.AuditLog())
		if err != nil || len(recs) <= len(before) {
			t.Fatalf("%s: audit %v, %d records", tc.active, err, len(recs))
		}
		for _, r := range recs[len(before):] {
			if r.Model != tc.want {
				t.Errorf("%s: audit model %q, want %q", tc.active, r.Model, tc.want)
			}
		}
	}
}

// TestPiClientExecActiveModelImages: read returns an image only when the
// active model takes images, as the original gateway checked.
func TestPiClientExecActiveModelImages(t *testing.T) {
	g := startGatewayWith(t, gatewaySetup{
		names:     []string{"pivision"},
		providers: `anthropic: { apiKey: "k" }, textonly: { api: "openai-completions", baseUrl: "http://127.0.0.1:9", apiKey: "k" }`,
		model:     "{ provider: 'anthropic', model: 'claude-sonnet-4-5' }",
		extra:     map[string]string{"pivision": "fallbackModels: [{ provider: 'textonly', model: 'glm-4.6' }]"},
	})
	a := g.agents[0]
	if text, isErr := g.tool(t, a, "exec", map[string]any{"command": `printf '\211PNG\r\n\032\n\0\0\0\rIHDR' > /workspace/i.png`}); isErr {
		t.Fatalf("write the image: %s", text)
	}
	for _, tc := range []struct {
		active string
		image  bool
	}{
		{`{"provider":"anthropic","modelId":"claude-sonnet-4-5"}`, true},
		{`{"provider":"textonly","modelId":"glm-4.6"}`, false},
		{`{"provider":"textonly","modelId":"not-the-agents"}`, true}, // only audited
	} {
		code, out := g.post(t, "/api/agents/"+a+"/exec", `{"tool":"read","params":{"path":"i.png"},"activeModel":`+tc.active+`}`)
		raw, _ := json.Marshal(out)
		if code != 200 || strings.Contains(string(raw), `"type":"image"`) != tc.image {
			t.Errorf("%s: %d %.300s, want an image %v", tc.active, code, raw, tc.image)
		}
	}
}

// TestPiClientToolCallStartNamesTheCall: the partial of toolcall_start (and
// of every later event of the call) holds the call's id and name, as pi's
// own providers send it. pi's terminal keys a tool's view by the call's id:
// a first partial with an empty id drew a stray "{}" tool view above the
// real one (found with the original client).
func TestPiClientToolCallStartNamesTheCall(t *testing.T) {
	a, o := llmtest.NewAnthropic(t), llmtest.NewOpenAI(t)
	g := startGatewayWith(t, gatewaySetup{
		names: []string{"pitc"},
		providers: fmt.Sprintf(`pa: { api: "anthropic-messages", baseUrl: %q, apiKey: "ka" }, po: { api: "openai-completions", baseUrl: %q, apiKey: "ko" }`,
			a.URL(), o.URL()),
		model: "{ provider: 'pa', model: 'claude-sonnet-4-5' }",
		extra: map[string]string{"pitc": "fallbackModels: [{ provider: 'po', model: 'gpt-4.1' }]"},
	})
	agent := g.agents[0]
	for _, tc := range []struct {
		name, provider, model string
		srv                   *llmtest.Server
	}{
		{"anthropic", "pa", "claude-sonnet-4-5", a},
		{"openai", "po", "gpt-4.1", o},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.srv.Enqueue(llmtest.Reply(llmtest.TextBlock("Writing it."), llmtest.Call("write", map[string]string{"path": "a.txt", "content": "hi"})).WithChunk(3))
			body := strings.Replace(piChatBody(agent, "false"), `"provider": "pa", "modelId": "claude-sonnet-4-5"`,
				fmt.Sprintf(`"provider": %q, "modelId": %q`, tc.provider, tc.model), 1)
			evs := postPi(t, g, body)
			final := checkPiStream(t, evs)
			if final.Type != "done" {
				t.Fatalf("final %s", final.Raw)
			}
			var id string
			seen := 0
			for _, ev := range evs {
				if !strings.HasPrefix(ev.Type, "toolcall_") {
					continue
				}
				seen++
				var call struct{ Type, ID, Name string }
				json.Unmarshal(ev.Partial.Content[*ev.ContentIndex], &call)
				if call.Type != "toolCall" || call.ID == "" || call.Name != "write" {
					t.Errorf("%s: the partial's call has id %q and name %q: %s", ev.Type, call.ID, call.Name, ev.Raw)
				}
				if id == "" {
					id = call.ID
				}
				if call.ID != id {
					t.Errorf("%s: the call's id changed from %q to %q", ev.Type, id, call.ID)
				}
				if ev.Type == "toolcall_start" && strings.Contains(string(ev.Raw), `"toolCall":{`) {
					t.Errorf("toolcall_start carries toolCall, which pi's does not: %s", ev.Raw)
				}
			}
			if seen < 3 {
				t.Errorf("%d toolcall events: %s", seen, types(evs))
			}
		})
	}
}

// TestPiClientErrorNamesTheRequestedModel: when every model fails, the
// final error names the model the client asked for, not the last fallback
// tried. pi compacts a session whose call overflowed the context only when
// the error names the session's model (found with the original client: a
// session that overflowed stayed stuck, every prompt failing again).
func TestPiClientErrorNamesTheRequestedModel(t *testing.T) {
	a, b := llmtest.NewAnthropic(t), llmtest.NewOpenAI(t)
	g := startGatewayWith(t, gatewaySetup{
		names: []string{"pierr"},
		providers: fmt.Sprintf(`pa: { api: "anthropic-messages", baseUrl: %q, apiKey: "ka" }, pb: { api: "openai-completions", baseUrl: %q, apiKey: "kb" }`,
			a.URL(), b.URL()),
		model: "{ provider: 'pa', model: 'claude-sonnet-4-5' }",
		extra: map[string]string{"pierr": "fallbackModels: [{ provider: 'pb', model: 'claude-haiku-4-5' }]"},
	})
	over := llmtest.Error(400, `{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 213462 tokens > 200000 maximum"}}`, nil)
	a.SetDefault(over)
	b.SetDefault(llmtest.Error(400, `{"error":{"message":"This model's maximum context length is 128000 tokens.","type":"invalid_request_error","code":"context_length_exceeded"}}`, nil))
	evs := postPi(t, g, piChatBody(g.agents[0], "false"))
	final := checkPiStream(t, evs)
	if final.Type != "error" || !strings.Contains(final.Error.ErrorMessage, "prompt is too long") {
		t.Fatalf("final %s", final.Raw)
	}
	if b.Count() == 0 {
		t.Fatal("the fallback was not tried")
	}
	var api struct{ Error struct{ API string } }
	json.Unmarshal(final.Raw, &api)
	if final.Error.Provider != "pa" || final.Error.Model != "claude-sonnet-4-5" || api.Error.API != "anthropic-messages" {
		t.Errorf("the error names %s/%s (%s), want the requested pa/claude-sonnet-4-5 (anthropic-messages): %s",
			final.Error.Provider, final.Error.Model, api.Error.API, final.Raw)
	}
}
