package client

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/beige-dev/beige/internal/httpapi"
	"github.com/beige-dev/beige/internal/llm"
	"github.com/beige-dev/beige/internal/proto"
	"github.com/beige-dev/beige/internal/proto/llmproto"
)

// stub is a Backend for the real httpapi.Server: the client is tested
// against the gateway's own routing, auth and NDJSON writer.
type stub struct {
	mu      sync.Mutex
	execs   []proto.ExecRequest
	chats   []llmproto.ChatStreamRequest
	hooks   []string
	health  proto.Health
	stream  func(ctx context.Context, emit func(llm.Event)) error
	execRes func(req proto.ExecRequest) (proto.ToolResult, error)
}

func (s *stub) Health(ctx context.Context) proto.Health {
	if s.health.Status == "" {
		return proto.Health{Status: "ok"}
	}
	return s.health
}

func (s *stub) Agents(ctx context.Context) []proto.AgentInfo {
	return []proto.AgentInfo{{Name: "assistant", Model: proto.ModelRef{Provider: "anthropic", Model: "m1"}}, {Name: "other"}}
}

func (s *stub) Config(ctx context.Context) proto.ConfigView { return proto.ConfigView{} }

func (s *stub) Exec(ctx context.Context, a string, req proto.ExecRequest) (proto.ToolResult, error) {
	s.mu.Lock()
	s.execs = append(s.execs, req)
	s.mu.Unlock()
	if a != "assistant" {
		return proto.ToolResult{}, proto.Errorf(http.StatusNotFound, "unknown agent %q", a)
	}
	if s.execRes != nil {
		return s.execRes(req)
	}
	return proto.TextResult("Exit code: 0\nhello", false), nil
}

func (s *stub) Models(ctx context.Context, a string) ([]llmproto.AgentModel, error) {
	if a != "assistant" {
		return nil, proto.Errorf(http.StatusNotFound, "unknown agent %q", a)
	}
	return []llmproto.AgentModel{
		{Model: llm.Model{ID: "m1", Provider: "anthropic", API: llm.APIAnthropicMessages, ContextWindow: 1000}},
		{Model: llm.Model{ID: "m2", Provider: "openai"}, ThinkingLevel: "low"},
	}, nil
}

func (s *stub) Prompt(ctx context.Context, a string, req proto.PromptRequest) (proto.PromptResponse, error) {
	return proto.PromptResponse{}, nil
}

func (s *stub) Sessions(ctx context.Context, a string) ([]proto.SessionInfo, error) {
	return []proto.SessionInfo{{ID: "tui:assistant:default"}}, nil
}

func (s *stub) ChatStream(ctx context.Context, req llmproto.ChatStreamRequest, emit func(llm.Event)) error {
	s.mu.Lock()
	s.chats = append(s.chats, req)
	s.mu.Unlock()
	return s.stream(ctx, emit)
}

func (s *stub) PrePromptHook(ctx context.Context, a string, req proto.PrePromptRequest) (proto.PrePromptResponse, error) {
	return proto.PrePromptResponse{Message: req.Message}, nil
}

func (s *stub) PostResponseHook(ctx context.Context, a string, req proto.PostResponseRequest) (proto.PostResponseResponse, error) {
	return proto.PostResponseResponse{Response: req.Response}, nil
}

func (s *stub) SessionHook(ctx context.Context, a, hook string, req proto.SessionHookRequest) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.hooks = append(s.hooks, a+" "+hook+" "+req.SessionKey+" "+req.Channel)
	return nil
}

// textReply emits a full reply of text, one delta per word.
func textReply(text string) func(ctx context.Context, emit func(llm.Event)) error {
	return func(ctx context.Context, emit func(llm.Event)) error {
		emit(llm.Event{Type: llm.EventStart})
		emit(llm.Event{Type: llm.EventTextStart})
		for _, w := range strings.SplitAfter(text, " ") {
			emit(llm.Event{Type: llm.EventTextDelta, Delta: w})
		}
		emit(llm.Event{Type: llm.EventTextEnd, Content: text})
		msg := &llm.AssistantMessage{Content: []llm.Content{llm.Text(text)}, Provider: "anthropic", Model: "m1", StopReason: llm.StopReasonStop}
		emit(llm.Event{Type: llm.EventDone, Reason: "stop", Message: msg})
		return nil
	}
}

func newServer(t *testing.T, token string) (*stub, *httptest.Server) {
	t.Helper()
	s := &stub{stream: textReply("hello there")}
	srv := httptest.NewServer(httpapi.New(s, httpapi.Options{AuthToken: token}))
	t.Cleanup(srv.Close)
	return s, srv
}

func userContext(text string) llm.Context {
	return llm.Context{Messages: []llm.Message{llm.UserText(text)}}
}

func TestGetEndpointsAndAuth(t *testing.T) {
	_, srv := newServer(t, "tok")
	ctx := context.Background()
	c := New(srv.URL+"/", &Options{Token: "tok"})
	if c.BaseURL() != srv.URL {
		t.Errorf("base %q", c.BaseURL())
	}
	h, err := c.Health(ctx)
	if err != nil || h.Status != "ok" {
		t.Fatalf("health: %+v %v", h, err)
	}
	agents, err := c.Agents(ctx)
	if err != nil || len(agents) != 2 || agents[0].Name != "assistant" || agents[0].Model.Model != "m1" {
		t.Fatalf("agents: %+v %v", agents, err)
	}
	ms, err := c.Models(ctx, "assistant")
	if err != nil || len(ms) != 2 || ms[0].ID != "m1" || ms[0].ContextWindow != 1000 || ms[1].ThinkingLevel != "low" {
		t.Fatalf("models: %+v %v", ms, err)
	}
	ss, err := c.Sessions(ctx, "assistant")
	if err != nil || len(ss) != 1 || ss[0].ID != "tui:assistant:default" {
		t.Fatalf("sessions: %+v %v", ss, err)
	}

	_, err = c.Models(ctx, "nobody")
	var e *Error
	if !errors.As(err, &e) || e.Status != 404 || e.Msg != `unknown agent "nobody"` || StatusOf(err) != 404 {
		t.Errorf("unknown agent: %v", err)
	}
	if !strings.Contains(err.Error(), `GET /api/agents/nobody/models: unknown agent "nobody" (HTTP 404)`) {
		t.Errorf("message: %v", err)
	}

	for _, tok := range []string{"", "wrong"} {
		_, err := New(srv.URL, &Options{Token: tok}).Agents(ctx)
		if StatusOf(err) != http.StatusUnauthorized || !strings.Contains(err.Error(), "bearer token") {
			t.Errorf("token %q: %v", tok, err)
		}
	}
}

func TestHealthNotReady(t *testing.T) {
	s, srv := newServer(t, "")
	s.health = proto.Health{Status: "degraded", Agents: map[string]string{"assistant": "no image"}}
	h, err := New(srv.URL, nil).Health(context.Background())
	if err != nil || h.Status != "degraded" || h.Agents["assistant"] != "no image" {
		t.Errorf("%+v %v", h, err)
	}
}

func TestUnreachable(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := "http://" + ln.Addr().String()
	ln.Close()
	_, err = New(addr, nil).Agents(context.Background())
	if !IsUnreachable(err) {
		t.Fatalf("%T %v", err, err)
	}
	want := "cannot reach the gateway at " + addr + ": is it running? beige gateway start"
	if err.Error() != want {
		t.Errorf("%q, want %q", err, want)
	}
	_, err = New(addr, nil).ChatStream(context.Background(), llmproto.ChatStreamRequest{}, nil)
	if !IsUnreachable(err) {
		t.Errorf("stream: %v", err)
	}
}

func TestExecAndHooks(t *testing.T) {
	s, srv := newServer(t, "")
	c := New(srv.URL, nil)
	ctx := context.Background()
	res, err := c.Exec(ctx, "assistant", proto.ExecRequest{Tool: "exec", Params: json.RawMessage(`{"command":"ls -la"}`), SessionKey: "tui:assistant:x"})
	if err != nil || res.Text() != "Exit code: 0\nhello" || res.IsError {
		t.Fatalf("%+v %v", res, err)
	}
	if got := s.execs[0]; got.Tool != "exec" || string(got.Params) != `{"command":"ls -la"}` || got.SessionKey != "tui:assistant:x" {
		t.Errorf("request: %+v", got)
	}
	// The server's strict decoding answers 400 with its message.
	_, err = c.Exec(ctx, "assistant", proto.ExecRequest{})
	if StatusOf(err) != 400 || !strings.Contains(err.Error(), `missing "tool"`) {
		t.Errorf("no tool: %v", err)
	}

	if err := c.SessionHook(ctx, "assistant", HookSessionCreated, "tui:assistant:default"); err != nil {
		t.Fatal(err)
	}
	if err := c.SessionHook(ctx, "assistant", HookSessionDisposed, "tui:assistant:default"); err != nil {
		t.Fatal(err)
	}
	if err := c.SessionHook(ctx, "assistant", "nope", "k"); err == nil {
		t.Error("unknown hook accepted")
	}
	if err := c.SessionHook(ctx, "assistant", HookSessionCreated, ""); StatusOf(err) != 400 {
		t.Errorf("empty key: %v", err)
	}
	want := []string{"assistant session-created tui:assistant:default tui", "assistant session-disposed tui:assistant:default tui"}
	if strings.Join(s.hooks, "|") != strings.Join(want, "|") {
		t.Errorf("hooks %q", s.hooks)
	}
}

func TestChatStreamDeliversEventsAsTheyCome(t *testing.T) {
	s, srv := newServer(t, "tok")
	seen := make(chan llm.EventType, 100)
	release := make(chan struct{})
	s.stream = func(ctx context.Context, emit func(llm.Event)) error {
		emit(llm.Event{Type: llm.EventStart})
		emit(llm.Event{Type: llm.EventModelFallback, Provider: "openai", ModelID: "m2"})
		emit(llm.Event{Type: llm.EventTextStart})
		emit(llm.Event{Type: llm.EventTextDelta, Delta: "hel"})
		// The client must see the delta before the server goes on.
		select {
		case <-release:
		case <-time.After(5 * time.Second):
			return errors.New("the client did not see the delta in time")
		}
		return textReply("hello")(ctx, func(ev llm.Event) {
			if ev.Type != llm.EventStart && ev.Type != llm.EventTextStart {
				emit(ev)
			}
		})
	}
	c := New(srv.URL, &Options{Token: "tok"})
	var types []string
	var fallback llm.Event
	msg, err := c.ChatStream(context.Background(), llmproto.ChatStreamRequest{
		Provider: "anthropic", ModelID: "m1", Context: userContext("hi"), AgentName: "assistant", SessionKey: "tui:assistant:default",
	}, func(ev llm.Event) {
		types = append(types, string(ev.Type))
		if ev.Type == llm.EventModelFallback {
			fallback = ev
		}
		if ev.Type == llm.EventTextDelta && ev.Delta == "hel" {
			close(release)
		}
		seen <- ev.Type
	})
	if err != nil {
		t.Fatal(err)
	}
	if msg.Text() != "hello" || msg.StopReason != llm.StopReasonStop {
		t.Errorf("message %+v", msg)
	}
	if fallback.Provider != "openai" || fallback.ModelID != "m2" {
		t.Errorf("fallback %+v", fallback)
	}
	if got := strings.Join(types, " "); !strings.HasPrefix(got, "start model_fallback text_start text_delta text_delta") || !strings.HasSuffix(got, "text_end done") {
		t.Errorf("events %s", got)
	}
	req := s.chats[0]
	if req.Provider != "anthropic" || req.ModelID != "m1" || req.AgentName != "assistant" || req.SessionKey != "tui:assistant:default" || req.Context.Messages[0].User.Text() != "hi" {
		t.Errorf("request %+v", req)
	}
}

func TestChatStreamFailures(t *testing.T) {
	s, srv := newServer(t, "")
	c := New(srv.URL, nil)
	req := llmproto.ChatStreamRequest{Provider: "anthropic", ModelID: "m1", Context: userContext("hi"), AgentName: "assistant"}
	ctx := context.Background()

	// error event: the failed message and a *ModelError.
	s.stream = func(ctx context.Context, emit func(llm.Event)) error {
		emit(llm.Event{Type: llm.EventStart})
		failed := &llm.AssistantMessage{Content: []llm.Content{}, StopReason: llm.StopReasonError, ErrorMessage: "429 rate limited on every model"}
		emit(llm.Event{Type: llm.EventError, Reason: "error", Error: failed})
		return nil
	}
	msg, err := c.ChatStream(ctx, req, nil)
	var me *ModelError
	if !errors.As(err, &me) || me.Message != "429 rate limited on every model" || msg == nil || msg.StopReason != llm.StopReasonError {
		t.Errorf("error event: %v %+v", err, msg)
	}

	// blocked event.
	s.stream = func(ctx context.Context, emit func(llm.Event)) error {
		emit(llm.Event{Type: llm.EventBlocked, Reason: "no swearing"})
		return nil
	}
	_, err = c.ChatStream(ctx, req, nil)
	var be *BlockedError
	if !errors.As(err, &be) || be.Reason != "no swearing" || err.Error() != "blocked by the gateway's hooks: no swearing" {
		t.Errorf("blocked: %v", err)
	}

	// The gateway refuses before streaming: an *Error with its text.
	s.stream = func(ctx context.Context, emit func(llm.Event)) error {
		return proto.Errorf(http.StatusForbidden, "model x/y is not one of agent's models")
	}
	_, err = c.ChatStream(ctx, req, nil)
	if StatusOf(err) != 403 || !strings.Contains(err.Error(), "not one of agent's models") {
		t.Errorf("refused: %v", err)
	}

	// A stream that ends without done or error is cut.
	s.stream = func(ctx context.Context, emit func(llm.Event)) error {
		emit(llm.Event{Type: llm.EventStart})
		emit(llm.Event{Type: llm.EventTextStart})
		emit(llm.Event{Type: llm.EventTextDelta, Delta: "half an ans"})
		return nil
	}
	msg, err = c.ChatStream(ctx, req, nil)
	if !errors.Is(err, ErrStreamCut) || msg == nil || msg.Text() != "half an ans" || msg.StopReason != llm.StopReasonError {
		t.Errorf("cut: %v %+v", err, msg)
	}
}

func TestChatStreamDroppedConnection(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/x-ndjson")
		w.Write([]byte(`{"type":"start"}` + "\n" + `{"type":"text_start","contentIndex":0}` + "\n" + `{"type":"text_delta","contentIndex":0,"delta":"par`))
		w.(http.Flusher).Flush()
		conn, _, err := w.(http.Hijacker).Hijack()
		if err == nil {
			conn.Close()
		}
	}))
	defer srv.Close()
	var n int
	msg, err := New(srv.URL, nil).ChatStream(context.Background(), llmproto.ChatStreamRequest{}, func(llm.Event) { n++ })
	if !errors.Is(err, ErrStreamCut) || n != 2 {
		t.Errorf("%v after %d events", err, n)
	}
	if msg == nil || msg.StopReason != llm.StopReasonError {
		t.Errorf("message %+v", msg)
	}

	// Not even a line: the request ends, still an error.
	srv2 := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(200)
	}))
	defer srv2.Close()
	msg, err = New(srv2.URL, nil).ChatStream(context.Background(), llmproto.ChatStreamRequest{}, nil)
	if !errors.Is(err, ErrStreamCut) || msg != nil {
		t.Errorf("empty: %v %+v", err, msg)
	}
}

func TestChatStreamCancel(t *testing.T) {
	s, srv := newServer(t, "")
	ended := make(chan error, 1)
	s.stream = func(ctx context.Context, emit func(llm.Event)) error {
		emit(llm.Event{Type: llm.EventStart})
		emit(llm.Event{Type: llm.EventTextStart})
		emit(llm.Event{Type: llm.EventTextDelta, Delta: "thinking about it"})
		<-ctx.Done()
		ended <- ctx.Err()
		return nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	msg, err := New(srv.URL, nil).ChatStream(ctx, llmproto.ChatStreamRequest{}, func(ev llm.Event) {
		if ev.Type == llm.EventTextDelta {
			cancel()
		}
	})
	if !errors.Is(err, context.Canceled) {
		t.Errorf("err %v", err)
	}
	if msg == nil || msg.StopReason != llm.StopReasonAborted || msg.Text() != "thinking about it" {
		t.Errorf("message %+v", msg)
	}
	select {
	case <-ended: // the server saw the client go
	case <-time.After(5 * time.Second):
		t.Error("the server's call was not cancelled")
	}
}
