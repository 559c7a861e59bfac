package client

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/beige-dev/beige/internal/agent"
	"github.com/beige-dev/beige/internal/llm"
	"github.com/beige-dev/beige/internal/proto"
	"github.com/beige-dev/beige/internal/tools"
)

func TestRemoteModel(t *testing.T) {
	s, srv := newServer(t, "tok")
	c := New(srv.URL, &Options{Token: "tok"})
	info := llm.Model{ID: "m1", Provider: "anthropic", ContextWindow: 1000}
	m := NewRemoteModel(c, "assistant", info, nil)
	if m.Info().ID != "m1" || m.Info().ContextWindow != 1000 {
		t.Errorf("info %+v", m.Info())
	}
	ctx := agent.ContextWithSession(context.Background(), proto.ParseSessionKey("assistant", "tui:assistant:abc"))
	var deltas []string
	msg, err := m.Stream(ctx, userContext("hi"), func(ev llm.Event) {
		if ev.Type == llm.EventTextDelta {
			deltas = append(deltas, ev.Delta)
		}
	})
	if err != nil || msg.Text() != "hello there" || strings.Join(deltas, "") != "hello there" {
		t.Fatalf("%+v %v %q", msg, err, deltas)
	}
	req := s.chats[0]
	if req.Provider != "anthropic" || req.ModelID != "m1" || req.AgentName != "assistant" || req.SessionKey != "tui:assistant:abc" ||
		req.Partial == nil || *req.Partial { // the deltas are enough: no quadratic stream
		t.Errorf("request %+v", req)
	}
	// emit may be nil.
	if _, err := m.Stream(ctx, userContext("again"), nil); err != nil {
		t.Error(err)
	}
}

// TestRemoteModelInTheLoop runs the agent loop over the remote model and
// tools: the model asks for exec, the tool runs at the "gateway", the
// model answers.
func TestRemoteModelInTheLoop(t *testing.T) {
	s, srv := newServer(t, "")
	c := New(srv.URL, nil)
	calls := 0
	s.stream = func(ctx context.Context, emit func(llm.Event)) error {
		calls++
		if calls == 1 {
			tc := llm.ToolCallContent("call_1", "exec", json.RawMessage(`{"command":"ls -la"}`))
			emit(llm.Event{Type: llm.EventStart})
			emit(llm.Event{Type: llm.EventToolCallStart})
			emit(llm.Event{Type: llm.EventToolCallEnd, ToolCall: &tc})
			emit(llm.Event{Type: llm.EventDone, Reason: "toolUse", Message: &llm.AssistantMessage{Content: []llm.Content{tc}, StopReason: llm.StopReasonToolUse}})
			return nil
		}
		return textReply("two files")(ctx, emit)
	}
	loop := &agent.Loop{
		Model:   NewRemoteModel(c, "assistant", llm.Model{ID: "m1", Provider: "anthropic"}, nil),
		Tools:   NewRemoteTools(c, "assistant"),
		Session: proto.ParseSessionKey("assistant", "tui:assistant:default"),
	}
	var started []string
	res, err := loop.Run(context.Background(), nil, llm.UserText("list files"), &agent.PromptOptions{
		OnToolStart: func(name string, args json.RawMessage) { started = append(started, agent.ToolCallSummary(name, args)) },
	})
	if err != nil || res.Text != "two files" || res.ModelCalls != 2 {
		t.Fatalf("%+v %v", res, err)
	}
	if len(started) != 1 || started[0] != "exec: ls -la" {
		t.Errorf("tool starts %q", started)
	}
	ex := s.execs[0]
	if ex.Tool != "exec" || ex.SessionKey != "tui:assistant:default" {
		t.Errorf("exec request %+v", ex)
	}
	var p map[string]any
	json.Unmarshal(ex.Params, &p)
	if p["command"] != "ls -la" || p["timeout"] != float64(900) {
		t.Errorf("params %s", ex.Params)
	}
	// The second model call saw the tool result.
	last := s.chats[1].Context.Messages
	if tr := last[len(last)-1].ToolResult; tr == nil || tr.Text() != "Exit code: 0\nhello" || tr.ToolCallID != "call_1" {
		t.Errorf("tool result %+v", last[len(last)-1])
	}
}

func TestRemoteTools(t *testing.T) {
	s, srv := newServer(t, "")
	c := New(srv.URL, nil)
	rt := NewRemoteTools(c, "assistant")
	var names []string
	for _, d := range rt.Definitions() {
		names = append(names, d.Name)
		if !json.Valid(d.Parameters) {
			t.Errorf("%s: schema %s", d.Name, d.Parameters)
		}
	}
	if len(names) != len(tools.Definitions()) || !strings.Contains(strings.Join(names, ","), "exec") {
		t.Errorf("definitions %v", names)
	}
	ctx := context.Background()
	sc := proto.ParseSessionKey("assistant", "tui:assistant:default")

	// The arguments go as they are; an explicit timeout is kept.
	out := rt.Run(ctx, agent.ToolCall{Name: "exec", Arguments: json.RawMessage(`{"command":"sleep 1","timeout":5}`), Session: sc})
	if out.IsError || out.Content[0].Text != "Exit code: 0\nhello" {
		t.Errorf("exec %+v", out)
	}
	if string(s.execs[0].Params) != `{"command":"sleep 1","timeout":5}` {
		t.Errorf("params %s", s.execs[0].Params)
	}
	out = rt.Run(ctx, agent.ToolCall{Name: "read", Arguments: json.RawMessage(`{"path":"a.txt"}`), Session: sc})
	if string(s.execs[1].Params) != `{"path":"a.txt"}` || out.IsError {
		t.Errorf("read params %s %+v", s.execs[1].Params, out)
	}

	// A 400 becomes an error result the model can read.
	s.execRes = func(req proto.ExecRequest) (proto.ToolResult, error) {
		return proto.ToolResult{}, proto.Errorf(http.StatusBadRequest, `read: missing "path"`)
	}
	out = rt.Run(ctx, agent.ToolCall{Name: "read", Arguments: json.RawMessage(`{}`), Session: sc})
	if !out.IsError || out.Content[0].Text != `invalid arguments for read: read: missing "path"` {
		t.Errorf("400: %+v", out)
	}
	// Any other failure too.
	s.execRes = func(req proto.ExecRequest) (proto.ToolResult, error) {
		return proto.ToolResult{}, proto.Errorf(http.StatusServiceUnavailable, "sandbox down")
	}
	out = rt.Run(ctx, agent.ToolCall{Name: "exec", Arguments: json.RawMessage(`{"command":"true"}`), Session: sc})
	if !out.IsError || out.Content[0].Text != "exec failed: sandbox down" {
		t.Errorf("503: %+v", out)
	}
	// Images are kept only for models that take them.
	s.execRes = func(req proto.ExecRequest) (proto.ToolResult, error) {
		return proto.ToolResult{Content: []proto.Content{{Type: "image", Data: "AAAA", MimeType: "image/png"}}}, nil
	}
	out = rt.Run(ctx, agent.ToolCall{Name: "read", Arguments: json.RawMessage(`{"path":"a.png"}`), Session: sc, Images: true})
	if out.Content[0].Type != llm.ContentImage || out.Content[0].Data != "AAAA" {
		t.Errorf("image: %+v", out)
	}
	out = rt.Run(ctx, agent.ToolCall{Name: "read", Arguments: json.RawMessage(`{"path":"a.png"}`), Session: sc})
	if out.Content[0].Type != llm.ContentText || !strings.Contains(out.Content[0].Text, "image not shown") {
		t.Errorf("no images: %+v", out)
	}
	// An unknown agent.
	out = NewRemoteTools(c, "nobody").Run(ctx, agent.ToolCall{Name: "exec", Arguments: json.RawMessage(`{"command":"true"}`)})
	if !out.IsError || !strings.Contains(out.Content[0].Text, `unknown agent "nobody"`) {
		t.Errorf("404: %+v", out)
	}
	// A cancelled call says so.
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	out = rt.Run(cctx, agent.ToolCall{Name: "exec", Arguments: json.RawMessage(`{"command":"true"}`)})
	if !out.IsError || !strings.HasPrefix(out.Content[0].Text, "exec aborted") {
		t.Errorf("cancelled: %+v", out)
	}
}

func TestWithExecTimeout(t *testing.T) {
	for in, want := range map[string]string{
		`{"command":"ls"}`:             `{"command":"ls","timeout":900}`,
		`{"command":"ls","timeout":3}`: `{"command":"ls","timeout":3}`,
		`[1]`:                          `[1]`,
		`null`:                         `null`,
	} {
		if got := string(withExecTimeout(json.RawMessage(in))); got != want {
			t.Errorf("%s: %s, want %s", in, got, want)
		}
	}
}
