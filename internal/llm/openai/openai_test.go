package openai_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/beige-dev/beige/internal/llm"
	"github.com/beige-dev/beige/internal/llm/llmtest"
	"github.com/beige-dev/beige/internal/llm/openai"
)

const testKey = "sk-openai-test-key"

func newProvider(t *testing.T, srv *llmtest.Server) llm.Provider {
	t.Helper()
	p, err := llm.NewProvider(llm.ProviderConfig{
		Name: "local", APIKey: testKey, BaseURL: srv.URL(), API: openai.API,
	})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func request(srv *llmtest.Server, id, text string) llm.Request {
	return llm.Request{
		Model:   llm.Lookup("local", openai.API, id, srv.URL()),
		Context: llm.Context{Messages: []llm.Message{llm.UserText(text)}},
	}
}

func run(t *testing.T, p llm.Provider, ctx context.Context, req llm.Request) ([]llm.Event, *llm.AssistantMessage, error) {
	t.Helper()
	var events []llm.Event
	var acc llm.Accumulator
	msg, err := p.Stream(ctx, req, func(e llm.Event) {
		events = append(events, e)
		acc.Apply(e)
	})
	if msg == nil {
		t.Fatalf("Stream returned nil message (err %v)", err)
	}
	if got := acc.Message(); !reflect.DeepEqual(got.Content, msg.Content) {
		t.Errorf("accumulated content %+v\nwant %+v", got.Content, msg.Content)
	}
	return events, msg, err
}

func compact(events []llm.Event) string {
	var s []string
	for _, e := range events {
		t := string(e.Type)
		if n := len(s); n > 0 && (s[n-1] == t || s[n-1] == t+"+") && strings.HasSuffix(t, "_delta") {
			s[n-1] = t + "+"
			continue
		}
		s = append(s, t)
	}
	return strings.Join(s, " ")
}

func TestStreamText(t *testing.T) {
	srv := llmtest.NewOpenAI(t)
	srv.Enqueue(llmtest.Text("Hello, world!").WithUsage(1000, 2000).WithCache(500, 0))
	p := newProvider(t, srv)
	req := request(srv, "gpt-4o", "hi")
	req.Context.SystemPrompt = "Be brief."

	events, msg, err := run(t, p, context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := compact(events), "start text_start text_delta+ text_end done"; got != want {
		t.Errorf("events = %s, want %s", got, want)
	}
	if msg.Text() != "Hello, world!" || msg.StopReason != llm.StopReasonStop || msg.Provider != "local" || msg.API != openai.API {
		t.Errorf("msg = %+v", msg)
	}
	u := msg.Usage
	if u.Input != 1000 || u.CacheRead != 500 || u.Output != 2000 || u.TotalTokens != 3500 {
		t.Errorf("usage = %+v", u)
	}
	// gpt-4o: $2.50 in, $10 out, $1.25 cache read per million.
	if want := 0.0025 + 0.02 + 0.000625; u.Cost.Total < want-1e-12 || u.Cost.Total > want+1e-12 {
		t.Errorf("cost = %+v, want total %v", u.Cost, want)
	}

	r := srv.Last()
	if r.Path != "/v1/chat/completions" || r.Header.Get("Authorization") != "Bearer "+testKey {
		t.Errorf("path %s auth %q", r.Path, r.Header.Get("Authorization"))
	}
	if r.System() != "Be brief." || r.Messages()[0]["role"] != "system" {
		t.Errorf("system = %q (%v)", r.System(), r.Messages())
	}
	if so, _ := r.Body["stream_options"].(map[string]any); so["include_usage"] != true || r.Body["stream"] != true {
		t.Errorf("stream options = %v", r.Body)
	}
	// A compatible server gets max_tokens, not max_completion_tokens.
	if r.Body["max_tokens"] != float64(16384) || r.Body["max_completion_tokens"] != nil || r.Body["store"] != nil {
		t.Errorf("max tokens fields = %v / %v", r.Body["max_tokens"], r.Body["max_completion_tokens"])
	}
	if um := r.Messages()[1]; um["role"] != "user" || um["content"] != "hi" {
		t.Errorf("user message = %v", um)
	}
}

func TestNoKeyNoAuthHeader(t *testing.T) {
	srv := llmtest.NewOpenAI(t)
	p, err := llm.NewProvider(llm.ProviderConfig{Name: "ollama", BaseURL: srv.URL(), API: openai.API})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := run(t, p, context.Background(), request(srv, "llama3", "hi")); err != nil {
		t.Fatal(err)
	}
	if got := srv.Last().Header.Get("Authorization"); got != "" {
		t.Errorf("Authorization = %q", got)
	}
}

// The SDK must not pick up keys, base URLs or headers from the process
// environment.
func TestIgnoresEnvironment(t *testing.T) {
	t.Setenv("OPENAI_API_KEY", "env-key")
	t.Setenv("OPENAI_BASE_URL", "http://127.0.0.1:1/v1")
	t.Setenv("OPENAI_ORG_ID", "org-env")
	t.Setenv("OPENAI_PROJECT_ID", "proj-env")
	t.Setenv("OPENAI_ADMIN_KEY", "admin-env")
	t.Setenv("OPENAI_CUSTOM_HEADERS", "X-Leak: yes")

	srv := llmtest.NewOpenAI(t)
	p := newProvider(t, srv)
	if _, _, err := run(t, p, context.Background(), request(srv, "gpt-4o", "hi")); err != nil {
		t.Fatal(err)
	}
	h := srv.Last().Header
	if h.Get("Authorization") != "Bearer "+testKey || h.Get("X-Leak") != "" ||
		h.Get("Openai-Organization") != "" || h.Get("Openai-Project") != "" {
		t.Errorf("headers = %v", h)
	}

	// The Responses API provider is built the same way.
	rsrv := llmtest.NewOpenAIResponses(t)
	rp, _ := llm.NewProvider(llm.ProviderConfig{Name: "openai", APIKey: testKey, BaseURL: rsrv.URL(), API: openai.ResponsesAPI})
	if _, _, err := run(t, rp, context.Background(), request(rsrv, "gpt-4o", "hi")); err != nil {
		t.Fatal(err)
	}
	if h := rsrv.Last().Header; h.Get("Authorization") != "Bearer "+testKey || h.Get("X-Leak") != "" || h.Get("Openai-Organization") != "" {
		t.Errorf("responses headers = %v", h)
	}

	// A provider without key sends none, even with OPENAI_API_KEY set.
	p2, _ := llm.NewProvider(llm.ProviderConfig{Name: "ollama", BaseURL: srv.URL(), API: openai.API})
	if _, _, err := run(t, p2, context.Background(), request(srv, "llama3", "hi")); err != nil {
		t.Fatal(err)
	}
	if got := srv.Last().Header.Get("Authorization"); got != "" {
		t.Errorf("Authorization = %q", got)
	}
}

func TestOfficialAPIFields(t *testing.T) {
	srv := llmtest.NewOpenAI(t)
	p, _ := llm.NewProvider(llm.ProviderConfig{Name: "openai", APIKey: "k", API: openai.API,
		HTTPClient: &http.Client{Transport: redirect{srv.URL()}}})
	req := llm.Request{
		Model:   llm.Lookup("openai", openai.API, "o4-mini", ""),
		Context: llm.Context{SystemPrompt: "sys", Messages: []llm.Message{llm.UserText("hi")}},
		Options: llm.Options{ThinkingLevel: llm.ThinkingMinimal, MaxTokens: 999},
	}
	if _, _, err := run(t, p, context.Background(), req); err != nil {
		t.Fatal(err)
	}
	r := srv.Last()
	if host := r.Header.Get("X-Original-Host"); host != "api.openai.com" {
		t.Errorf("host = %q", host)
	}
	if r.Body["max_completion_tokens"] != float64(999) || r.Body["max_tokens"] != nil || r.Body["store"] != false {
		t.Errorf("body = %v", r.Body)
	}
	if r.Body["reasoning_effort"] != "low" { // o4-mini has no "minimal"
		t.Errorf("reasoning_effort = %v", r.Body["reasoning_effort"])
	}
	if r.Messages()[0]["role"] != "developer" {
		t.Errorf("system role = %v", r.Messages()[0]["role"])
	}

	req.Model = llm.Lookup("openai", openai.API, "gpt-5", "")
	if _, _, err := run(t, p, context.Background(), req); err != nil {
		t.Fatal(err)
	}
	if got := srv.Last().Body["reasoning_effort"]; got != "minimal" {
		t.Errorf("gpt-5 reasoning_effort = %v", got)
	}
	req.Options.ThinkingLevel = llm.ThinkingOff
	if _, _, err := run(t, p, context.Background(), req); err != nil {
		t.Fatal(err)
	}
	if got, ok := srv.Last().Body["reasoning_effort"]; ok {
		t.Errorf("off: reasoning_effort = %v", got)
	}
}

type redirect struct{ to string }

func (r redirect) RoundTrip(req *http.Request) (*http.Response, error) {
	req = req.Clone(req.Context())
	req.Header.Set("X-Original-Host", req.URL.Host)
	req.URL.Scheme, req.URL.Host = "http", strings.TrimPrefix(strings.TrimSuffix(r.to, "/v1"), "http://")
	req.Host = ""
	return http.DefaultTransport.RoundTrip(req)
}

func TestRequestMapping(t *testing.T) {
	srv := llmtest.NewOpenAI(t)
	p := newProvider(t, srv)
	temp := 0.7
	req := llm.Request{
		Model: llm.Lookup("local", openai.API, "gpt-4o", srv.URL()),
		Context: llm.Context{
			Messages: []llm.Message{
				{User: &llm.UserMessage{Content: []llm.Content{llm.Text("see"), llm.Image("aGk=", "image/jpeg")}}},
				{Assistant: &llm.AssistantMessage{
					API: openai.API, Provider: "local", Model: "gpt-4o", StopReason: llm.StopReasonToolUse,
					Content: []llm.Content{
						{Type: llm.ContentThinking, Thinking: "think", ThinkingSignature: "reasoning_content"},
						llm.Text("calling"),
						llm.ToolCallContent("call_1", "exec", json.RawMessage(`{"command":"ls"}`)),
					},
				}},
				{ToolResult: &llm.ToolResultMessage{ToolCallID: "call_1", ToolName: "exec",
					Content: []llm.Content{llm.Text("a.txt"), llm.Image("cGlj", "image/png")}}},
			},
			Tools: []llm.Tool{{Name: "exec", Description: "Run", Parameters: json.RawMessage(`{"type":"object","properties":{"command":{"type":"string"}}}`)}},
		},
		Options: llm.Options{Temperature: &temp, Headers: map[string]string{"X-Title": "beige", "Authorization": "Bearer nope"}},
	}
	if _, _, err := run(t, p, context.Background(), req); err != nil {
		t.Fatal(err)
	}
	r := srv.Last()
	if r.Header.Get("X-Title") != "beige" || r.Header.Get("Authorization") != "Bearer "+testKey {
		t.Errorf("headers = %v", r.Header)
	}
	if r.Body["temperature"] != 0.7 {
		t.Errorf("temperature = %v", r.Body["temperature"])
	}
	msgs := r.Messages()
	if len(msgs) != 4 {
		t.Fatalf("messages = %v", msgs)
	}
	parts, _ := msgs[0]["content"].([]any)
	if len(parts) != 2 {
		t.Fatalf("user parts = %v", msgs[0]["content"])
	}
	img, _ := parts[1].(map[string]any)["image_url"].(map[string]any)
	if img["url"] != "data:image/jpeg;base64,aGk=" {
		t.Errorf("image = %v", parts[1])
	}
	asst := msgs[1]
	calls, _ := asst["tool_calls"].([]any)
	call, _ := calls[0].(map[string]any)
	fn, _ := call["function"].(map[string]any)
	if asst["content"] != "calling" || asst["reasoning_content"] != "think" || call["id"] != "call_1" || fn["name"] != "exec" || fn["arguments"] != `{"command":"ls"}` {
		t.Errorf("assistant = %v", asst)
	}
	if msgs[2]["role"] != "tool" || msgs[2]["tool_call_id"] != "call_1" || msgs[2]["content"] != "a.txt" {
		t.Errorf("tool = %v", msgs[2])
	}
	if msgs[3]["role"] != "user" || !strings.Contains(mustJSON(msgs[3]), "data:image/png;base64,cGlj") {
		t.Errorf("image follow-up = %v", msgs[3])
	}
	if got := r.Tools(); !reflect.DeepEqual(got, []string{"exec"}) {
		t.Errorf("tools = %v", got)
	}
}

func mustJSON(v any) string { b, _ := json.Marshal(v); return string(b) }

func TestReasoningContent(t *testing.T) {
	for _, field := range []string{"reasoning_content", "reasoning"} {
		t.Run(field, func(t *testing.T) {
			srv := llmtest.NewOpenAI(t)
			th := llmtest.ThinkingBlock("Thinking hard.")
			th.ReasoningField = field
			srv.Enqueue(llmtest.Reply(th, llmtest.TextBlock("Answer: 7")))
			p := newProvider(t, srv)
			events, msg, err := run(t, p, context.Background(), request(srv, "qwen3", "q"))
			if err != nil {
				t.Fatal(err)
			}
			want := "start thinking_start thinking_delta+ thinking_end text_start text_delta+ text_end done"
			if got := compact(events); got != want {
				t.Errorf("events = %s", got)
			}
			if len(msg.Content) != 2 || msg.Content[0].Thinking != "Thinking hard." || msg.Content[0].ThinkingSignature != field {
				t.Errorf("content = %+v", msg.Content)
			}
		})
	}
}

func TestToolCalls(t *testing.T) {
	srv := llmtest.NewOpenAI(t)
	srv.Enqueue(
		llmtest.ToolCall("exec", map[string]any{"command": "echo hi"}),
		llmtest.Reply(llmtest.TextBlock("Doing two things"),
			llmtest.Call("read", map[string]any{"path": "/workspace/notes.md"}),
			llmtest.Call("exec", map[string]any{"command": "ls -la /workspace"})),
		llmtest.ToolCall("exec", map[string]any{"command": "pwd"}).WithStop("stop"),
	)
	p := newProvider(t, srv)

	events, msg, err := run(t, p, context.Background(), request(srv, "gpt-4o", "go"))
	if err != nil {
		t.Fatal(err)
	}
	if got := compact(events); got != "start toolcall_start toolcall_delta+ toolcall_end done" {
		t.Errorf("events = %s", got)
	}
	calls := msg.ToolCalls()
	if msg.StopReason != llm.StopReasonToolUse || len(calls) != 1 || calls[0].ID != "call_00_00" ||
		calls[0].Name != "exec" || string(calls[0].Arguments) != `{"command":"echo hi"}` {
		t.Errorf("msg = %+v", msg)
	}

	events, msg, err = run(t, p, context.Background(), request(srv, "gpt-4o", "go"))
	if err != nil {
		t.Fatal(err)
	}
	calls = msg.ToolCalls()
	if len(calls) != 2 || calls[0].Name != "read" || calls[1].Name != "exec" || calls[0].ID == calls[1].ID {
		t.Fatalf("calls = %+v", calls)
	}
	if string(calls[1].Arguments) != `{"command":"ls -la /workspace"}` || msg.Text() != "Doing two things" {
		t.Errorf("msg = %+v", msg)
	}
	ends := 0
	for _, e := range events {
		if e.Type == llm.EventToolCallEnd {
			ends++
		}
	}
	if ends != 2 {
		t.Errorf("%d toolcall_end events", ends)
	}

	// finish_reason "stop" with tool calls (Ollama does this) still means toolUse.
	_, msg, err = run(t, p, context.Background(), request(srv, "gpt-4o", "go"))
	if err != nil || msg.StopReason != llm.StopReasonToolUse {
		t.Errorf("stop = %s, %v", msg.StopReason, err)
	}
}

func TestMalformedToolJSON(t *testing.T) {
	srv := llmtest.NewOpenAI(t)
	srv.Enqueue(llmtest.MalformedToolCall("exec", `{"command": "ls" oops`))
	p := newProvider(t, srv)
	_, msg, err := run(t, p, context.Background(), request(srv, "gpt-4o", "x"))
	if err != nil {
		t.Fatal(err)
	}
	calls := msg.ToolCalls()
	if len(calls) != 1 || string(calls[0].Arguments) != "{}" || calls[0].InvalidArguments != `{"command": "ls" oops` {
		t.Errorf("calls = %+v", calls)
	}
}

func TestHTTPErrors(t *testing.T) {
	tests := []struct {
		name   string
		resp   llmtest.Response
		status int
		class  llm.ErrorClass
		retry  time.Duration
		msg    string
	}{
		{"429 retry-after", llmtest.Error(429, "", http.Header{"Retry-After": {"20"}}), 429, llm.ClassRateLimit, 20 * time.Second, "Rate limit"},
		{"429 date", llmtest.Status(429).WithHeader("Retry-After", time.Now().Add(time.Hour).UTC().Format(http.TimeFormat)), 429, llm.ClassRateLimit, time.Hour, ""},
		{"401", llmtest.Status(401), 401, llm.ClassFatal, 0, "Incorrect API key"},
		{"503 overloaded", llmtest.Status(503), 503, llm.ClassTransient, 0, "overloaded"},
		{"529", llmtest.Status(529), 529, llm.ClassTransient, 0, ""},
		{"500 plain text", llmtest.Error(500, "upstream exploded", http.Header{"Content-Type": {"text/plain"}}), 500, llm.ClassOther, 0, "upstream exploded"},
		{"ollama style", llmtest.Error(404, `{"error":"model \"nope\" not found, try pulling it first"}`, nil), 404, llm.ClassOther, 0, "not found"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := llmtest.NewOpenAI(t)
			srv.Enqueue(tt.resp)
			p := newProvider(t, srv)
			events, msg, err := run(t, p, context.Background(), request(srv, "gpt-4o", "hi"))
			var ae *llm.APIError
			if !errors.As(err, &ae) {
				t.Fatalf("err = %T %v", err, err)
			}
			if ae.StatusCode != tt.status || ae.Provider != "local" || ae.Model != "gpt-4o" {
				t.Errorf("APIError = %+v", ae)
			}
			if d := ae.RetryAfter - tt.retry; d < -2*time.Second || d > 0 {
				t.Errorf("RetryAfter = %v, want %v", ae.RetryAfter, tt.retry)
			}
			if !strings.Contains(ae.Message, tt.msg) {
				t.Errorf("message %q lacks %q", ae.Message, tt.msg)
			}
			if got := llm.Classify(err); got != tt.class {
				t.Errorf("class = %v, want %v", got, tt.class)
			}
			if compact(events) != "start error" || msg.StopReason != llm.StopReasonError || msg.ErrorMessage == "" {
				t.Errorf("events %s msg %+v", compact(events), msg)
			}
			if srv.Count() != 1 {
				t.Errorf("%d requests: the SDK retried", srv.Count())
			}
		})
	}
}

func TestMidStreamError(t *testing.T) {
	srv := llmtest.NewOpenAI(t)
	srv.Enqueue(llmtest.Text("some partial output").FailAfter(3, "server_error", "The server is overloaded"))
	p := newProvider(t, srv)
	events, msg, err := run(t, p, context.Background(), request(srv, "gpt-4o", "hi"))
	var ae *llm.APIError
	if !errors.As(err, &ae) || ae.StatusCode != 0 || ae.Type != "server_error" || ae.Message != "The server is overloaded" {
		t.Fatalf("err = %#v", err)
	}
	if llm.Classify(err) != llm.ClassTransient {
		t.Errorf("class = %v", llm.Classify(err))
	}
	if got := compact(events); got != "start text_start text_delta+ error" || msg.Text() == "" {
		t.Errorf("events = %s, text %q", got, msg.Text())
	}
}

func TestBrokenStreams(t *testing.T) {
	for _, tc := range []struct {
		name string
		resp llmtest.Response
	}{
		{"cut", llmtest.Text("some long text here").CutAfter(3)},
		{"ended early", llmtest.Text("some long text here").EndAfter(3)},
		{"cut at once", llmtest.Text("x").CutAfter(0)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := llmtest.NewOpenAI(t)
			srv.Enqueue(tc.resp)
			p := newProvider(t, srv)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			events, msg, err := run(t, p, ctx, request(srv, "gpt-4o", "hi"))
			if err == nil || ctx.Err() != nil {
				t.Fatalf("err = %v, ctx %v", err, ctx.Err())
			}
			if msg.StopReason != llm.StopReasonError || events[len(events)-1].Type != llm.EventError {
				t.Errorf("msg %+v", msg)
			}
		})
	}

	// Without [DONE] but after finish_reason, the reply is complete.
	srv := llmtest.NewOpenAI(t)
	srv.Enqueue(llmtest.Text("done here").EndAfter(5))
	p := newProvider(t, srv)
	_, msg, err := run(t, p, context.Background(), request(srv, "gpt-4o", "hi"))
	if err != nil || msg.Text() != "done here" {
		t.Errorf("msg %+v err %v", msg, err)
	}
}

func TestCancel(t *testing.T) {
	srv := llmtest.NewOpenAI(t)
	srv.Enqueue(llmtest.Hang())
	p := newProvider(t, srv)
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		srv.WaitCount(1, 5*time.Second)
		time.Sleep(20 * time.Millisecond)
		cancel()
	}()
	events, msg, err := run(t, p, ctx, request(srv, "gpt-4o", "hi"))
	if !errors.Is(err, context.Canceled) || llm.Classify(err) != llm.ClassAborted {
		t.Fatalf("err = %v", err)
	}
	if msg.StopReason != llm.StopReasonAborted || events[len(events)-1].Reason != "aborted" {
		t.Errorf("msg = %+v", msg)
	}
	if !srv.WaitCancelled(1, 2*time.Second) {
		t.Error("server did not see the request cancelled")
	}
}

func TestToolCallsAtIndexZero(t *testing.T) {
	srv := llmtest.NewOpenAI(t)
	srv.Enqueue(llmtest.ToolCalls(
		llmtest.Call("read", map[string]any{"path": "a"}),
		llmtest.Call("read", map[string]any{"path": "b"}),
	).WithToolIndexZero())
	p := newProvider(t, srv)
	_, msg, err := run(t, p, context.Background(), request(srv, "gemini", "x"))
	if err != nil {
		t.Fatal(err)
	}
	calls := msg.ToolCalls()
	if len(calls) != 2 || string(calls[0].Arguments) != `{"path":"a"}` || string(calls[1].Arguments) != `{"path":"b"}` || calls[0].ID == calls[1].ID {
		t.Errorf("calls = %+v", calls)
	}
}
