package anthropic_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/beige-dev/beige/internal/llm"
	"github.com/beige-dev/beige/internal/llm/anthropic"
	"github.com/beige-dev/beige/internal/llm/llmtest"
)

const testKey = "sk-ant-test-key"

func newProvider(t *testing.T, srv *llmtest.Server) llm.Provider {
	t.Helper()
	p, err := llm.NewProvider(llm.ProviderConfig{
		Name: "anthropic", APIKey: testKey, BaseURL: srv.URL(), API: anthropic.API,
	})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func model(srv *llmtest.Server, id string) llm.Model {
	return llm.Lookup("anthropic", anthropic.API, id, srv.URL())
}

func request(srv *llmtest.Server, text string) llm.Request {
	return llm.Request{
		Model:   model(srv, "claude-sonnet-4-5"),
		Context: llm.Context{Messages: []llm.Message{llm.UserText(text)}},
	}
}

// run streams req and returns the events, the message and the error. It
// also checks that the events rebuild the returned message.
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

func types(events []llm.Event) string {
	var s []string
	for _, e := range events {
		s = append(s, string(e.Type))
	}
	return strings.Join(s, " ")
}

// compact collapses repeated deltas: "a b b b c" → "a b+ c".
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
	srv := llmtest.NewAnthropic(t)
	srv.Enqueue(llmtest.Text("Hello, world!").WithUsage(1000, 2000).WithCache(300, 400))
	p := newProvider(t, srv)

	events, msg, err := run(t, p, context.Background(), request(srv, "hi"))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := compact(events), "start text_start text_delta+ text_end done"; got != want {
		t.Errorf("events = %s, want %s", got, want)
	}
	var deltas strings.Builder
	for _, e := range events {
		if e.Type == llm.EventTextDelta {
			deltas.WriteString(e.Delta)
			if e.ContentIndex != 0 {
				t.Errorf("delta contentIndex = %d", e.ContentIndex)
			}
		}
		if e.Partial != nil {
			t.Errorf("%s carries a partial message", e.Type)
		}
	}
	if deltas.String() != "Hello, world!" {
		t.Errorf("deltas = %q", deltas.String())
	}
	last := events[len(events)-1]
	if last.Reason != "stop" || last.Message == nil || last.Message.Text() != "Hello, world!" {
		t.Errorf("done = %+v", last)
	}
	if events[len(events)-2].Content != "Hello, world!" {
		t.Errorf("text_end content = %q", events[len(events)-2].Content)
	}
	if msg.Text() != "Hello, world!" || msg.StopReason != llm.StopReasonStop {
		t.Errorf("msg = %+v", msg)
	}
	if msg.API != anthropic.API || msg.Provider != "anthropic" || msg.Model != "claude-sonnet-4-5" || msg.Timestamp == 0 {
		t.Errorf("msg identity = %s %s %s %d", msg.API, msg.Provider, msg.Model, msg.Timestamp)
	}
	u := msg.Usage
	if u.Input != 1000 || u.Output != 2000 || u.CacheRead != 300 || u.CacheWrite != 400 || u.TotalTokens != 3700 {
		t.Errorf("usage = %+v", u)
	}
	// Sonnet 4.5: $3 in, $15 out, $0.30 cache read, $3.75 cache write per million.
	want := llm.UsageCost{Input: 0.003, Output: 0.03, CacheRead: 0.00009, CacheWrite: 0.0015}
	want.Total = want.Input + want.Output + want.CacheRead + want.CacheWrite
	if !closeTo(u.Cost, want) {
		t.Errorf("cost = %+v, want %+v", u.Cost, want)
	}
}

func closeTo(a, b llm.UsageCost) bool {
	near := func(x, y float64) bool { d := x - y; return d < 1e-12 && d > -1e-12 }
	return near(a.Input, b.Input) && near(a.Output, b.Output) && near(a.CacheRead, b.CacheRead) &&
		near(a.CacheWrite, b.CacheWrite) && near(a.Total, b.Total)
}

func TestHeaders(t *testing.T) {
	srv := llmtest.NewAnthropic(t)
	p := newProvider(t, srv)
	if _, _, err := run(t, p, context.Background(), request(srv, "hi")); err != nil {
		t.Fatal(err)
	}
	r := srv.Last()
	if r.Path != "/v1/messages" {
		t.Errorf("path = %s", r.Path)
	}
	if got := r.Header.Get("X-Api-Key"); got != testKey {
		t.Errorf("x-api-key = %q", got)
	}
	if got := r.Header.Values("Anthropic-Version"); len(got) != 1 || got[0] != "2023-06-01" {
		t.Errorf("anthropic-version = %q", got)
	}
	if got, ok := r.Header["Authorization"]; ok {
		t.Errorf("Authorization header sent: %q", got)
	}
	if got := r.Header.Get("Anthropic-Beta"); got != anthropic.Beta {
		t.Errorf("anthropic-beta = %q", got)
	}
	if r.Body["stream"] != true {
		t.Errorf("stream = %v", r.Body["stream"])
	}
}

// The SDK must not pick up keys, base URLs or headers from the process
// environment: only the configured ones count.
func TestIgnoresEnvironment(t *testing.T) {
	t.Setenv("ANTHROPIC_API_KEY", "env-key")
	t.Setenv("ANTHROPIC_AUTH_TOKEN", "env-token")
	t.Setenv("ANTHROPIC_BASE_URL", "http://127.0.0.1:1")
	t.Setenv("ANTHROPIC_CUSTOM_HEADERS", "X-Leak: yes")
	t.Setenv("ANTHROPIC_PROFILE", "nonexistent-profile")
	t.Setenv("ANTHROPIC_CONFIG_DIR", t.TempDir())

	srv := llmtest.NewAnthropic(t)
	p := newProvider(t, srv)
	if _, _, err := run(t, p, context.Background(), request(srv, "hi")); err != nil {
		t.Fatal(err)
	}
	r := srv.Last()
	if r.Header.Get("X-Api-Key") != testKey || r.Header.Get("Authorization") != "" || r.Header.Get("X-Leak") != "" {
		t.Errorf("headers = %v", r.Header)
	}

	// Without a configured base URL the default is Anthropic's, not the env's.
	p2, _ := llm.NewProvider(llm.ProviderConfig{Name: "anthropic", APIKey: "k", API: anthropic.API,
		HTTPClient: &http.Client{Transport: redirect{srv.URL()}}})
	req := request(srv, "hi")
	req.Model.BaseURL = ""
	if _, _, err := run(t, p2, context.Background(), req); err != nil {
		t.Fatal(err)
	}
	if host := srv.Last().Header.Get("X-Original-Host"); host != "api.anthropic.com" {
		t.Errorf("request went to %q, want api.anthropic.com", host)
	}
}

// redirect sends every request to a test server, remembering the host it
// was meant for.
type redirect struct{ to string }

func (r redirect) RoundTrip(req *http.Request) (*http.Response, error) {
	req = req.Clone(req.Context())
	req.Header.Set("X-Original-Host", req.URL.Host)
	req.URL.Scheme, req.URL.Host = "http", strings.TrimPrefix(r.to, "http://")
	req.Host = ""
	return http.DefaultTransport.RoundTrip(req)
}

func TestRequestMapping(t *testing.T) {
	srv := llmtest.NewAnthropic(t)
	p := newProvider(t, srv)
	temp := 0.5
	req := llm.Request{
		Model: model(srv, "claude-sonnet-4-5"),
		Context: llm.Context{
			SystemPrompt: "You are Beige.",
			Messages: []llm.Message{
				{User: &llm.UserMessage{Content: []llm.Content{llm.Text("look"), llm.Image("aGVsbG8=", "image/png")}}},
				{Assistant: &llm.AssistantMessage{
					API: anthropic.API, Provider: "anthropic", Model: "claude-sonnet-4-5", StopReason: llm.StopReasonToolUse,
					Content: []llm.Content{
						{Type: llm.ContentThinking, Thinking: "hmm", ThinkingSignature: "sig1"},
						llm.Text("running"),
						llm.ToolCallContent("toolu_1", "exec", json.RawMessage(`{"command":"ls"}`)),
						llm.ToolCallContent("toolu_2", "read", json.RawMessage(`{"path":"a"}`)),
					},
				}},
				{ToolResult: &llm.ToolResultMessage{ToolCallID: "toolu_1", ToolName: "exec", Content: []llm.Content{llm.Text("a.txt")}}},
				{ToolResult: &llm.ToolResultMessage{ToolCallID: "toolu_2", ToolName: "read", Content: []llm.Content{llm.Text("no such file")}, IsError: true}},
			},
			Tools: []llm.Tool{{Name: "exec", Description: "Run a command",
				Parameters: json.RawMessage(`{"type":"object","properties":{"command":{"type":"string"}},"required":["command"],"additionalProperties":false}`)}},
		},
		Options: llm.Options{MaxTokens: 1234, Temperature: &temp, Headers: map[string]string{"X-Extra": "1", "Authorization": "Bearer nope"}},
	}
	if _, _, err := run(t, p, context.Background(), req); err != nil {
		t.Fatal(err)
	}
	r := srv.Last()
	if r.Header.Get("X-Extra") != "1" || r.Header.Get("Authorization") != "" {
		t.Errorf("headers = %v", r.Header)
	}
	var body struct {
		Model       string           `json:"model"`
		MaxTokens   int              `json:"max_tokens"`
		Temperature *float64         `json:"temperature"`
		System      []map[string]any `json:"system"`
		Messages    []struct {
			Role    string           `json:"role"`
			Content []map[string]any `json:"content"`
		} `json:"messages"`
		Tools    []map[string]any `json:"tools"`
		Thinking any              `json:"thinking"`
	}
	if err := r.Decode(&body); err != nil {
		t.Fatal(err)
	}
	if body.Model != "claude-sonnet-4-5" || body.MaxTokens != 1234 || body.Temperature == nil || *body.Temperature != 0.5 || body.Thinking != nil {
		t.Errorf("model %s max_tokens %d temperature %v thinking %v", body.Model, body.MaxTokens, body.Temperature, body.Thinking)
	}
	if len(body.System) != 1 || body.System[0]["text"] != "You are Beige." {
		t.Errorf("system = %v", body.System)
	}
	if len(body.Messages) != 3 {
		t.Fatalf("messages = %+v", body.Messages)
	}
	user, asst, results := body.Messages[0], body.Messages[1], body.Messages[2]
	if user.Role != "user" || len(user.Content) != 2 || user.Content[1]["type"] != "image" {
		t.Errorf("user = %+v", user)
	}
	src, _ := user.Content[1]["source"].(map[string]any)
	if src["type"] != "base64" || src["media_type"] != "image/png" || src["data"] != "aGVsbG8=" {
		t.Errorf("image source = %v", src)
	}
	wantTypes := []string{"thinking", "text", "tool_use", "tool_use"}
	for i, c := range asst.Content {
		if i >= len(wantTypes) || c["type"] != wantTypes[i] {
			t.Errorf("assistant block %d = %v", i, c)
		}
	}
	if asst.Content[0]["signature"] != "sig1" || asst.Content[0]["thinking"] != "hmm" {
		t.Errorf("thinking block = %v", asst.Content[0])
	}
	if in, _ := asst.Content[2]["input"].(map[string]any); in["command"] != "ls" || asst.Content[2]["id"] != "toolu_1" {
		t.Errorf("tool_use = %v", asst.Content[2])
	}
	// Both tool results travel in one user message.
	if results.Role != "user" || len(results.Content) != 2 {
		t.Fatalf("results = %+v", results)
	}
	if results.Content[0]["type"] != "tool_result" || results.Content[0]["tool_use_id"] != "toolu_1" || results.Content[0]["is_error"] != false {
		t.Errorf("result 1 = %v", results.Content[0])
	}
	if results.Content[1]["tool_use_id"] != "toolu_2" || results.Content[1]["is_error"] != true {
		t.Errorf("result 2 = %v", results.Content[1])
	}
	if results.Content[1]["cache_control"] == nil {
		t.Errorf("last user block has no cache_control: %v", results.Content[1])
	}
	if len(body.Tools) != 1 || body.Tools[0]["name"] != "exec" || body.Tools[0]["description"] != "Run a command" {
		t.Fatalf("tools = %v", body.Tools)
	}
	schema, _ := body.Tools[0]["input_schema"].(map[string]any)
	if schema["type"] != "object" || schema["additionalProperties"] != false || !reflect.DeepEqual(schema["required"], []any{"command"}) {
		t.Errorf("input_schema = %v", schema)
	}
	if !strings.Contains(r.AllText(), "no such file") {
		t.Errorf("tool result text missing: %q", r.AllText())
	}
}

func TestThinking(t *testing.T) {
	srv := llmtest.NewAnthropic(t)
	srv.Enqueue(llmtest.Thinking("Let me think.", "The answer is 42."))
	p := newProvider(t, srv)
	req := request(srv, "meaning of life?")
	req.Options = llm.Options{ThinkingLevel: llm.ThinkingMedium, MaxTokens: 4000, Temperature: new(float64)}

	events, msg, err := run(t, p, context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	want := "start thinking_start thinking_delta+ thinking_end text_start text_delta+ text_end done"
	if got := compact(events); got != want {
		t.Errorf("events = %s\nwant %s", got, want)
	}
	if len(msg.Content) != 2 || msg.Content[0].Thinking != "Let me think." || msg.Content[0].ThinkingSignature != "sig-0-0" || msg.Text() != "The answer is 42." {
		t.Errorf("content = %+v", msg.Content)
	}
	if events[1].ContentIndex != 0 || events[len(events)-2].ContentIndex != 1 {
		t.Errorf("content indexes wrong: %+v", events)
	}
	body := srv.Last().Body
	th, _ := body["thinking"].(map[string]any)
	if th["type"] != "enabled" || th["budget_tokens"] != float64(8192) {
		t.Errorf("thinking = %v", body["thinking"])
	}
	if body["max_tokens"] != float64(4000+8192) {
		t.Errorf("max_tokens = %v", body["max_tokens"])
	}
	if _, ok := body["temperature"]; ok {
		t.Errorf("temperature sent with thinking")
	}
}

func TestThinkingIgnoredForNonReasoningModel(t *testing.T) {
	srv := llmtest.NewAnthropic(t)
	p := newProvider(t, srv)
	req := request(srv, "hi")
	req.Model = model(srv, "claude-3-5-haiku-20241022")
	req.Options.ThinkingLevel = llm.ThinkingHigh
	if _, _, err := run(t, p, context.Background(), req); err != nil {
		t.Fatal(err)
	}
	if th, ok := srv.Last().Body["thinking"]; ok {
		t.Errorf("thinking = %v", th)
	}
	if got := srv.Last().Body["max_tokens"]; got != float64(8192) {
		t.Errorf("max_tokens = %v", got)
	}
}

func TestToolCalls(t *testing.T) {
	srv := llmtest.NewAnthropic(t)
	srv.Enqueue(
		llmtest.ToolCall("exec", map[string]any{"command": "echo hi"}),
		llmtest.Reply(llmtest.TextBlock("Two things:"),
			llmtest.Call("read", map[string]any{"path": "/workspace/a.txt"}),
			llmtest.Call("exec", map[string]any{"command": "ls -la", "timeout": 5})),
	)
	p := newProvider(t, srv)

	events, msg, err := run(t, p, context.Background(), request(srv, "do it"))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := compact(events), "start toolcall_start toolcall_delta+ toolcall_end done"; got != want {
		t.Errorf("events = %s", got)
	}
	if msg.StopReason != llm.StopReasonToolUse || events[len(events)-1].Reason != "toolUse" {
		t.Errorf("stop = %s", msg.StopReason)
	}
	calls := msg.ToolCalls()
	if len(calls) != 1 || calls[0].Name != "exec" || calls[0].ID != "toolu_00_00" || string(calls[0].Arguments) != `{"command":"echo hi"}` {
		t.Errorf("calls = %+v", calls)
	}
	end := events[len(events)-2]
	if end.ToolCall == nil || string(end.ToolCall.Arguments) != `{"command":"echo hi"}` {
		t.Errorf("toolcall_end = %+v", end)
	}

	events, msg, err = run(t, p, context.Background(), request(srv, "do two"))
	if err != nil {
		t.Fatal(err)
	}
	want := "start text_start text_delta+ text_end toolcall_start toolcall_delta+ toolcall_end toolcall_start toolcall_delta+ toolcall_end done"
	if got := compact(events); got != want {
		t.Errorf("events = %s\nwant %s", got, want)
	}
	calls = msg.ToolCalls()
	if len(calls) != 2 || calls[0].Name != "read" || calls[1].Name != "exec" {
		t.Fatalf("calls = %+v", calls)
	}
	var args struct {
		Command string `json:"command"`
		Timeout int    `json:"timeout"`
	}
	if err := json.Unmarshal(calls[1].Arguments, &args); err != nil || args.Command != "ls -la" || args.Timeout != 5 {
		t.Errorf("args = %s (%v)", calls[1].Arguments, err)
	}
	if calls[0].ID == calls[1].ID {
		t.Errorf("duplicate ids %s", calls[0].ID)
	}
}

func TestMalformedToolJSON(t *testing.T) {
	srv := llmtest.NewAnthropic(t)
	srv.Enqueue(llmtest.MalformedToolCall("exec", `{"command": "ls`).WithStop("length"))
	p := newProvider(t, srv)
	_, msg, err := run(t, p, context.Background(), request(srv, "x"))
	if err != nil {
		t.Fatal(err)
	}
	calls := msg.ToolCalls()
	if len(calls) != 1 || string(calls[0].Arguments) != "{}" || calls[0].InvalidArguments != `{"command": "ls` {
		t.Errorf("calls = %+v", calls)
	}
	if msg.StopReason != llm.StopReasonLength {
		t.Errorf("stop = %s", msg.StopReason)
	}
	b, _ := json.Marshal(calls[0])
	if string(b) != `{"type":"toolCall","id":"toolu_00_00","name":"exec","arguments":{}}` {
		t.Errorf("wire = %s", b)
	}
}

func TestHTTPErrors(t *testing.T) {
	tests := []struct {
		name      string
		resp      llmtest.Response
		status    int
		typ       string
		class     llm.ErrorClass
		retry     time.Duration
		msgSubstr string
	}{
		{"429 retry-after", llmtest.Error(429, "", http.Header{"Retry-After": {"7"}}), 429, "rate_limit_error", llm.ClassRateLimit, 7 * time.Second, "rate limit"},
		{"429 retry-after-ms", llmtest.Status(429).WithHeader("Retry-After-Ms", "1500"), 429, "rate_limit_error", llm.ClassRateLimit, 1500 * time.Millisecond, ""},
		{"529 overloaded", llmtest.Status(529), 529, "overloaded_error", llm.ClassTransient, 0, "Overloaded"},
		{"401", llmtest.Status(401), 401, "authentication_error", llm.ClassFatal, 0, "invalid x-api-key"},
		{"400", llmtest.Error(400, `{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long"}}`, nil), 400, "invalid_request_error", llm.ClassFatal, 0, "prompt is too long"},
		{"500", llmtest.Status(500), 500, "api_error", llm.ClassOther, 0, "Internal server error"},
		{"502 html", llmtest.Error(502, "<html>Bad Gateway</html>", http.Header{"Content-Type": {"text/html"}}), 502, "", llm.ClassOther, 0, "<html>Bad Gateway</html>"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := llmtest.NewAnthropic(t)
			srv.Enqueue(tt.resp)
			p := newProvider(t, srv)
			events, msg, err := run(t, p, context.Background(), request(srv, "hi"))
			var ae *llm.APIError
			if !errors.As(err, &ae) {
				t.Fatalf("err = %T %v, want *llm.APIError", err, err)
			}
			if ae.StatusCode != tt.status || ae.Type != tt.typ || ae.RetryAfter != tt.retry || ae.Provider != "anthropic" || ae.Model != "claude-sonnet-4-5" {
				t.Errorf("APIError = %+v", ae)
			}
			if !strings.Contains(ae.Message, tt.msgSubstr) {
				t.Errorf("message = %q, want it to contain %q", ae.Message, tt.msgSubstr)
			}
			if ae.Header == nil {
				t.Errorf("no header")
			}
			if got := llm.Classify(err); got != tt.class {
				t.Errorf("Classify = %v, want %v", got, tt.class)
			}
			if got, want := types(events), "start error"; got != want {
				t.Errorf("events = %s", got)
			}
			last := events[len(events)-1]
			if last.Reason != "error" || last.Error == nil || last.Error.StopReason != llm.StopReasonError || last.Error.ErrorMessage == "" {
				t.Errorf("error event = %+v", last)
			}
			if msg.StopReason != llm.StopReasonError || msg.ErrorMessage != last.Error.ErrorMessage {
				t.Errorf("msg = %+v", msg)
			}
			if srv.Count() != 1 {
				t.Errorf("%d requests: the SDK retried", srv.Count())
			}
		})
	}
}

func TestMidStreamError(t *testing.T) {
	srv := llmtest.NewAnthropic(t)
	srv.Enqueue(llmtest.Text("partial answer here").FailAfter(5, "overloaded_error", "Overloaded"))
	p := newProvider(t, srv)
	events, msg, err := run(t, p, context.Background(), request(srv, "hi"))
	var ae *llm.APIError
	if !errors.As(err, &ae) || ae.StatusCode != 0 || ae.Type != "overloaded_error" || ae.Message != "Overloaded" {
		t.Fatalf("err = %#v", err)
	}
	if llm.Classify(err) != llm.ClassTransient {
		t.Errorf("class = %v", llm.Classify(err))
	}
	if got := compact(events); got != "start text_start text_delta+ error" {
		t.Errorf("events = %s", got)
	}
	if msg.StopReason != llm.StopReasonError || msg.Text() == "" || !strings.Contains(msg.ErrorMessage, "Overloaded") {
		t.Errorf("msg = %+v", msg)
	}

	// An api_error mid-stream (a 500 after the 200 headers).
	srv.Enqueue(llmtest.Text("abc").FailAfter(3, "", ""))
	_, _, err = run(t, p, context.Background(), request(srv, "hi"))
	if !errors.As(err, &ae) || ae.Type != "api_error" || llm.Classify(err) != llm.ClassOther {
		t.Fatalf("err = %v", err)
	}
}

func TestBrokenStreams(t *testing.T) {
	for _, tc := range []struct {
		name string
		resp llmtest.Response
	}{
		{"cut", llmtest.Text("some text that is long").CutAfter(5)},
		{"ended early", llmtest.Text("some text that is long").EndAfter(5)},
		{"cut before any event", llmtest.Text("x").CutAfter(0)},
		{"ended after content", llmtest.Text("x").EndAfter(5)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := llmtest.NewAnthropic(t)
			srv.Enqueue(tc.resp)
			p := newProvider(t, srv)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			events, msg, err := run(t, p, ctx, request(srv, "hi"))
			if err == nil {
				t.Fatal("no error")
			}
			if ctx.Err() != nil {
				t.Fatal("hung until the deadline")
			}
			if msg.StopReason != llm.StopReasonError || events[len(events)-1].Type != llm.EventError {
				t.Errorf("msg %+v events %s", msg, types(events))
			}
			if llm.Classify(err) != llm.ClassOther {
				t.Errorf("class = %v (%v)", llm.Classify(err), err)
			}
		})
	}
}

func TestCancel(t *testing.T) {
	srv := llmtest.NewAnthropic(t)
	srv.Enqueue(llmtest.Hang())
	p := newProvider(t, srv)
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		if srv.WaitCount(1, 5*time.Second) {
			time.Sleep(50 * time.Millisecond)
		}
		cancel()
	}()
	start := time.Now()
	events, msg, err := run(t, p, ctx, request(srv, "hi"))
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v", err)
	}
	if llm.Classify(err) != llm.ClassAborted {
		t.Errorf("class = %v", llm.Classify(err))
	}
	if msg.StopReason != llm.StopReasonAborted || msg.ErrorMessage == "" {
		t.Errorf("msg = %+v", msg)
	}
	last := events[len(events)-1]
	if last.Type != llm.EventError || last.Reason != "aborted" {
		t.Errorf("last event = %+v", last)
	}
	if !srv.WaitCancelled(1, 2*time.Second) {
		t.Errorf("server did not see the request cancelled")
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("took %v", d)
	}
}

func TestCancelCause(t *testing.T) {
	srv := llmtest.NewAnthropic(t)
	srv.Enqueue(llmtest.Hang())
	p := newProvider(t, srv)
	ctx, cancel := context.WithCancelCause(context.Background())
	watchdog := errors.New("no events for 10 minutes")
	go func() {
		srv.WaitCount(1, 5*time.Second)
		cancel(watchdog)
	}()
	_, _, err := run(t, p, ctx, request(srv, "hi"))
	if !errors.Is(err, context.Canceled) || !errors.Is(err, watchdog) {
		t.Fatalf("err = %v", err)
	}
}

func TestAdaptiveThinkingForOpus46(t *testing.T) {
	srv := llmtest.NewAnthropic(t)
	p := newProvider(t, srv)
	req := request(srv, "hi")
	req.Model = model(srv, "claude-opus-4-6")
	req.Options.ThinkingLevel = llm.ThinkingXHigh
	if _, _, err := run(t, p, context.Background(), req); err != nil {
		t.Fatal(err)
	}
	body := srv.Last().Body
	th, _ := body["thinking"].(map[string]any)
	oc, _ := body["output_config"].(map[string]any)
	if th["type"] != "adaptive" || oc["effort"] != "max" {
		t.Errorf("thinking %v output_config %v", body["thinking"], body["output_config"])
	}
}

func TestCrossModelHistory(t *testing.T) {
	srv := llmtest.NewAnthropic(t)
	p := newProvider(t, srv)
	req := request(srv, "")
	req.Context.Messages = []llm.Message{
		llm.UserText("q"),
		{Assistant: &llm.AssistantMessage{
			API: llm.APIOpenAICompletions, Provider: "openai", Model: "gpt-4o", StopReason: llm.StopReasonToolUse,
			Content: []llm.Content{
				{Type: llm.ContentThinking, Thinking: "other model's thoughts", ThinkingSignature: "reasoning_content"},
				llm.ToolCallContent("call|weird/id", "exec", json.RawMessage(`{"command":"ls"}`)),
			},
		}},
		llm.UserText("never mind"),
	}
	if _, _, err := run(t, p, context.Background(), req); err != nil {
		t.Fatal(err)
	}
	var body struct {
		Messages []struct {
			Role    string           `json:"role"`
			Content []map[string]any `json:"content"`
		} `json:"messages"`
	}
	if err := srv.Last().Decode(&body); err != nil {
		t.Fatal(err)
	}
	if len(body.Messages) != 4 {
		t.Fatalf("messages = %+v", body.Messages)
	}
	asst := body.Messages[1].Content
	if asst[0]["type"] != "text" || asst[0]["text"] != "other model's thoughts" || asst[1]["id"] != "call_weird_id" {
		t.Errorf("assistant = %v", asst)
	}
	res := body.Messages[2].Content[0]
	if res["type"] != "tool_result" || res["tool_use_id"] != "call_weird_id" || res["is_error"] != true {
		t.Errorf("synthetic result = %v", res)
	}
}

func TestRedactedThinking(t *testing.T) {
	srv := llmtest.NewAnthropic(t)
	srv.Enqueue(llmtest.Reply(llmtest.RedactedThinkingBlock("ENCRYPTED"), llmtest.TextBlock("ok then")))
	p := newProvider(t, srv)
	req := request(srv, "hi")
	_, msg, err := run(t, p, context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if len(msg.Content) != 2 || !msg.Content[0].Redacted || msg.Content[0].ThinkingSignature != "ENCRYPTED" || msg.Text() != "ok then" {
		t.Fatalf("content = %+v", msg.Content)
	}
	// Sent back to the same model, it is a redacted_thinking block again.
	req.Context.Messages = append(req.Context.Messages, llm.Message{Assistant: msg}, llm.UserText("more"))
	if _, _, err := run(t, p, context.Background(), req); err != nil {
		t.Fatal(err)
	}
	var body struct {
		Messages []struct {
			Content []map[string]any `json:"content"`
		} `json:"messages"`
	}
	if err := srv.Last().Decode(&body); err != nil {
		t.Fatal(err)
	}
	if b := body.Messages[1].Content[0]; b["type"] != "redacted_thinking" || b["data"] != "ENCRYPTED" {
		t.Errorf("replayed = %v", body.Messages[1].Content)
	}
}

// Failed and cancelled streams must not leave goroutines (or connections)
// behind.
func TestNoGoroutineLeak(t *testing.T) {
	before := runtime.NumGoroutine()
	func() {
		srv := llmtest.NewAnthropic(t)
		defer srv.Close()
		tr := http.DefaultTransport.(*http.Transport).Clone()
		defer tr.CloseIdleConnections()
		p, _ := llm.NewProvider(llm.ProviderConfig{Name: "a", API: anthropic.API, BaseURL: srv.URL(),
			HTTPClient: &http.Client{Transport: tr}})
		srv.Enqueue(
			llmtest.Text("ok"),
			llmtest.Text("abcdef").CutAfter(4),
			llmtest.Text("abcdef").FailAfter(4, "", ""),
			llmtest.Status(529),
			llmtest.Hang(),
		)
		for range 4 {
			_, _ = p.Stream(context.Background(), request(srv, "x"), nil)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		_, _ = p.Stream(ctx, request(srv, "x"), nil)
	}()
	deadline := time.Now().Add(3 * time.Second)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > before {
		buf := make([]byte, 1<<16)
		t.Errorf("%d goroutines before, %d after:\n%s", before, n, buf[:runtime.Stack(buf, true)])
	}
}

func TestRefusal(t *testing.T) {
	srv := llmtest.NewAnthropic(t)
	srv.Enqueue(llmtest.Text("I can't help with that.").WithStop("refusal"))
	p := newProvider(t, srv)
	events, msg, err := run(t, p, context.Background(), request(srv, "hi"))
	var ae *llm.APIError
	if !errors.As(err, &ae) || ae.Type != "refusal" || msg.StopReason != llm.StopReasonError || msg.Text() != "I can't help with that." {
		t.Fatalf("err %v msg %+v", err, msg)
	}
	if events[len(events)-1].Type != llm.EventError {
		t.Errorf("events = %s", types(events))
	}
}
