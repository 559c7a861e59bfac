package openai_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/beige-dev/beige/internal/llm"
	"github.com/beige-dev/beige/internal/llm/llmtest"
	"github.com/beige-dev/beige/internal/llm/openai"
)

func newResponses(t *testing.T, srv *llmtest.Server) llm.Provider {
	t.Helper()
	p, err := llm.NewProvider(llm.ProviderConfig{Name: "openai", APIKey: testKey, BaseURL: srv.URL(), API: openai.ResponsesAPI})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func responsesRequest(srv *llmtest.Server, id, text string) llm.Request {
	return llm.Request{
		Model:   llm.Lookup("openai", openai.ResponsesAPI, id, srv.URL()),
		Context: llm.Context{Messages: []llm.Message{llm.UserText(text)}},
	}
}

func TestResponsesText(t *testing.T) {
	srv := llmtest.NewOpenAIResponses(t)
	srv.Enqueue(llmtest.Text("Hello from responses").WithUsage(100, 20).WithCache(50, 0))
	p := newResponses(t, srv)
	events, msg, err := run(t, p, context.Background(), responsesRequest(srv, "gpt-4.1", "hi"))
	if err != nil {
		t.Fatal(err)
	}
	if got := compact(events); got != "start text_start text_delta+ text_end done" {
		t.Errorf("events = %s", got)
	}
	if msg.Text() != "Hello from responses" || msg.StopReason != llm.StopReasonStop || msg.Content[0].TextSignature != "msg_00_00" {
		t.Errorf("msg = %+v", msg)
	}
	if u := msg.Usage; u.Input != 100 || u.CacheRead != 50 || u.Output != 20 || u.Cost.Total == 0 {
		t.Errorf("usage = %+v", u)
	}
	r := srv.Last()
	if r.Path != "/v1/responses" || r.Header.Get("Authorization") != "Bearer "+testKey || r.Body["store"] != false || r.Body["stream"] != true {
		t.Errorf("request %s %v", r.Path, r.Body)
	}
}

func TestResponsesThinkingAndTools(t *testing.T) {
	srv := llmtest.NewOpenAIResponses(t)
	srv.Enqueue(llmtest.Reply(
		llmtest.ThinkingBlock("Need to look at files."),
		llmtest.Call("read", map[string]any{"path": "a.txt"}),
		llmtest.Call("exec", map[string]any{"command": "ls"}),
	))
	p := newResponses(t, srv)
	req := responsesRequest(srv, "gpt-5", "what's here?")
	req.Options.ThinkingLevel = llm.ThinkingHigh
	events, msg, err := run(t, p, context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	want := "start thinking_start thinking_delta+ thinking_end toolcall_start toolcall_delta+ toolcall_end toolcall_start toolcall_delta+ toolcall_end done"
	if got := compact(events); got != want {
		t.Errorf("events = %s", got)
	}
	calls := msg.ToolCalls()
	if msg.StopReason != llm.StopReasonToolUse || len(calls) != 2 || calls[0].ID != "call_00_01" ||
		string(calls[1].Arguments) != `{"command":"ls"}` || msg.Content[0].Thinking != "Need to look at files." {
		t.Errorf("msg = %+v", msg)
	}
	rs, _ := srv.Last().Body["reasoning"].(map[string]any)
	if rs["effort"] != "high" || rs["summary"] != "auto" {
		t.Errorf("reasoning = %v", srv.Last().Body["reasoning"])
	}
}

func TestResponsesRequestMapping(t *testing.T) {
	srv := llmtest.NewOpenAIResponses(t)
	p := newResponses(t, srv)
	temp := 0.3
	req := llm.Request{
		Model: llm.Lookup("openai", openai.ResponsesAPI, "gpt-4o", srv.URL()),
		Context: llm.Context{
			SystemPrompt: "You are Beige.",
			Messages: []llm.Message{
				llm.UserText("list files"),
				{Assistant: &llm.AssistantMessage{API: openai.ResponsesAPI, Provider: "openai", Model: "gpt-4o", StopReason: llm.StopReasonToolUse,
					Content: []llm.Content{
						{Type: llm.ContentThinking, Thinking: "hidden"},
						llm.Text("Sure."),
						llm.ToolCallContent("call_9", "exec", json.RawMessage(`{"command":"ls"}`)),
					}}},
				{ToolResult: &llm.ToolResultMessage{ToolCallID: "call_9", ToolName: "exec", Content: []llm.Content{llm.Text("a.txt b.txt")}}},
			},
			Tools: []llm.Tool{{Name: "exec", Description: "Run", Parameters: json.RawMessage(`{"type":"object","properties":{"command":{"type":"string"}},"required":["command"]}`)}},
		},
		Options: llm.Options{MaxTokens: 500, Temperature: &temp},
	}
	if _, _, err := run(t, p, context.Background(), req); err != nil {
		t.Fatal(err)
	}
	r := srv.Last()
	if r.System() != "You are Beige." || r.Body["max_output_tokens"] != float64(500) || r.Body["temperature"] != 0.3 {
		t.Errorf("body = %v", r.Body)
	}
	in := r.Messages()
	if len(in) != 4 {
		t.Fatalf("input = %v", in)
	}
	if in[0]["role"] != "user" || in[0]["content"] != "list files" {
		t.Errorf("user = %v", in[0])
	}
	if in[1]["role"] != "assistant" || in[1]["content"] != "Sure." {
		t.Errorf("assistant = %v", in[1])
	}
	if in[2]["type"] != "function_call" || in[2]["call_id"] != "call_9" || in[2]["name"] != "exec" || in[2]["arguments"] != `{"command":"ls"}` || in[2]["id"] != nil {
		t.Errorf("function_call = %v", in[2])
	}
	if in[3]["type"] != "function_call_output" || in[3]["call_id"] != "call_9" || in[3]["output"] != "a.txt b.txt" {
		t.Errorf("function_call_output = %v", in[3])
	}
	if strings.Contains(string(r.Raw), "hidden") {
		t.Error("reasoning was replayed")
	}
	tools, _ := r.Body["tools"].([]any)
	tool, _ := tools[0].(map[string]any)
	if tool["type"] != "function" || tool["name"] != "exec" || tool["strict"] != false || tool["parameters"] == nil {
		t.Errorf("tool = %v", tool)
	}
}

func TestResponsesStops(t *testing.T) {
	srv := llmtest.NewOpenAIResponses(t)
	srv.Enqueue(
		llmtest.Text("cut short").WithStop("length"),
		llmtest.Text("bad").WithStop("content_filter"),
		llmtest.Text("x").WithStop("failed"),
	)
	p := newResponses(t, srv)
	_, msg, err := run(t, p, context.Background(), responsesRequest(srv, "gpt-4o", "a"))
	if err != nil || msg.StopReason != llm.StopReasonLength {
		t.Errorf("length: %v %+v", err, msg)
	}
	_, msg, err = run(t, p, context.Background(), responsesRequest(srv, "gpt-4o", "b"))
	var ae *llm.APIError
	if !errors.As(err, &ae) || ae.Type != "content_filter" || msg.StopReason != llm.StopReasonError {
		t.Errorf("content filter: %v", err)
	}
	_, _, err = run(t, p, context.Background(), responsesRequest(srv, "gpt-4o", "c"))
	if !errors.As(err, &ae) || ae.Type != "server_error" || ae.Message != "The model failed to respond" {
		t.Errorf("failed: %v", err)
	}
}

func TestResponsesErrors(t *testing.T) {
	srv := llmtest.NewOpenAIResponses(t)
	srv.Enqueue(
		llmtest.Error(429, "", http.Header{"Retry-After": {"4"}}),
		llmtest.Text("partial text").FailAfter(5, "server_error", "overloaded"),
		llmtest.Text("some text here").CutAfter(5),
		llmtest.MalformedToolCall("exec", `{"command":`),
	)
	p := newResponses(t, srv)
	_, _, err := run(t, p, context.Background(), responsesRequest(srv, "gpt-4o", "a"))
	var ae *llm.APIError
	if !errors.As(err, &ae) || ae.StatusCode != 429 || ae.RetryAfter != 4*time.Second || llm.Classify(err) != llm.ClassRateLimit {
		t.Errorf("429: %v", err)
	}
	events, _, err := run(t, p, context.Background(), responsesRequest(srv, "gpt-4o", "b"))
	if !errors.As(err, &ae) || ae.StatusCode != 0 || ae.Type != "server_error" || llm.Classify(err) != llm.ClassTransient {
		t.Errorf("mid-stream: %v", err)
	}
	if events[len(events)-1].Type != llm.EventError {
		t.Errorf("events = %s", compact(events))
	}
	_, _, err = run(t, p, context.Background(), responsesRequest(srv, "gpt-4o", "c"))
	if err == nil || errors.As(err, &ae) {
		t.Errorf("cut: %v", err)
	}
	_, msg, err := run(t, p, context.Background(), responsesRequest(srv, "gpt-4o", "d"))
	if err != nil || msg.ToolCalls()[0].InvalidArguments != `{"command":` {
		t.Errorf("malformed: %v %+v", err, msg)
	}
}

func TestResponsesCancel(t *testing.T) {
	srv := llmtest.NewOpenAIResponses(t)
	srv.Enqueue(llmtest.Hang())
	p := newResponses(t, srv)
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		srv.WaitCount(1, 5*time.Second)
		cancel()
	}()
	_, msg, err := run(t, p, ctx, responsesRequest(srv, "gpt-4o", "hi"))
	if !errors.Is(err, context.Canceled) || msg.StopReason != llm.StopReasonAborted {
		t.Fatalf("err = %v", err)
	}
	if !srv.WaitCancelled(1, 2*time.Second) {
		t.Error("server did not see the cancel")
	}
}
