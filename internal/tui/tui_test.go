package tui

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/ansi"

	"github.com/beige-dev/beige/internal/agent"
	"github.com/beige-dev/beige/internal/client"
	"github.com/beige-dev/beige/internal/httpapi"
	"github.com/beige-dev/beige/internal/llm"
	"github.com/beige-dev/beige/internal/proto"
	"github.com/beige-dev/beige/internal/proto/llmproto"
)

// gateway is a stub gateway behind the real HTTP API: scripted model
// replies, exec results, and a record of every call.
type gateway struct {
	mu      sync.Mutex
	chats   []llmproto.ChatStreamRequest
	execs   []proto.ExecRequest
	hooks   []string
	replies []func(ctx context.Context, emit func(llm.Event))
}

func (g *gateway) Health(ctx context.Context) proto.Health { return proto.Health{Status: "ok"} }

func (g *gateway) Agents(ctx context.Context) []proto.AgentInfo {
	return []proto.AgentInfo{
		{Name: "assistant", Model: proto.ModelRef{Provider: "anthropic", Model: "m1"}},
		{Name: "other", Model: proto.ModelRef{Provider: "openai", Model: "o1"}},
	}
}

func (g *gateway) Config(ctx context.Context) proto.ConfigView { return proto.ConfigView{} }

func (g *gateway) Exec(ctx context.Context, a string, req proto.ExecRequest) (proto.ToolResult, error) {
	g.mu.Lock()
	g.execs = append(g.execs, req)
	g.mu.Unlock()
	if strings.Contains(string(req.Params), "sleep") {
		<-ctx.Done()
		return proto.ToolResult{}, ctx.Err()
	}
	return proto.TextResult("Exit code: 0\ntotal 8\ndrwxr-xr-x 2 root root 4096 .\n-rw-r--r-- 1 root root 3 a.txt\n-rw-r--r-- 1 root root 3 b.txt\n-rw-r--r-- 1 root root 3 c.txt", false), nil
}

func (g *gateway) Models(ctx context.Context, a string) ([]llmproto.AgentModel, error) {
	switch a {
	case "assistant":
		return []llmproto.AgentModel{
			{Model: llm.Model{ID: "m1", Name: "Model One", Provider: "anthropic", ContextWindow: 200000}},
			{Model: llm.Model{ID: "m2", Provider: "anthropic"}},
		}, nil
	case "other":
		return []llmproto.AgentModel{{Model: llm.Model{ID: "o1", Provider: "openai"}}}, nil
	}
	return nil, proto.Errorf(http.StatusNotFound, "unknown agent %q", a)
}

func (g *gateway) Prompt(ctx context.Context, a string, req proto.PromptRequest) (proto.PromptResponse, error) {
	return proto.PromptResponse{}, errors.New("not here")
}

func (g *gateway) Sessions(ctx context.Context, a string) ([]proto.SessionInfo, error) {
	return nil, nil
}

func (g *gateway) ChatStream(ctx context.Context, req llmproto.ChatStreamRequest, emit func(llm.Event)) error {
	g.mu.Lock()
	g.chats = append(g.chats, req)
	var reply func(ctx context.Context, emit func(llm.Event))
	if len(g.replies) > 0 {
		reply, g.replies = g.replies[0], g.replies[1:]
	}
	g.mu.Unlock()
	if reply == nil {
		reply = say("ok")
	}
	reply(ctx, emit)
	return nil
}

func (g *gateway) PrePromptHook(ctx context.Context, a string, req proto.PrePromptRequest) (proto.PrePromptResponse, error) {
	return proto.PrePromptResponse{Message: req.Message}, nil
}

func (g *gateway) PostResponseHook(ctx context.Context, a string, req proto.PostResponseRequest) (proto.PostResponseResponse, error) {
	return proto.PostResponseResponse{Response: req.Response}, nil
}

func (g *gateway) SessionHook(ctx context.Context, a, hook string, req proto.SessionHookRequest) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.hooks = append(g.hooks, hook+" "+req.SessionKey+" "+req.Channel)
	return nil
}

func (g *gateway) script(replies ...func(ctx context.Context, emit func(llm.Event))) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.replies = append(g.replies, replies...)
}

func (g *gateway) chatCount() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.chats)
}

func (g *gateway) chat(i int) llmproto.ChatStreamRequest {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.chats[i]
}

func (g *gateway) hookList() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]string(nil), g.hooks...)
}

// say streams a text reply, a few characters per delta.
func say(text string) func(ctx context.Context, emit func(llm.Event)) {
	return func(ctx context.Context, emit func(llm.Event)) {
		emit(llm.Event{Type: llm.EventStart})
		emit(llm.Event{Type: llm.EventTextStart})
		for i := 0; i < len(text); i += 5 {
			emit(llm.Event{Type: llm.EventTextDelta, Delta: text[i:min(i+5, len(text))]})
		}
		emit(llm.Event{Type: llm.EventTextEnd, Content: text})
		emit(llm.Event{Type: llm.EventDone, Reason: "stop", Message: &llm.AssistantMessage{
			Content: []llm.Content{llm.Text(text)}, Provider: "anthropic", Model: "m1", StopReason: llm.StopReasonStop,
		}})
	}
}

// call asks for one tool call.
func call(name, args string) func(ctx context.Context, emit func(llm.Event)) {
	return func(ctx context.Context, emit func(llm.Event)) {
		tc := llm.ToolCallContent("call_"+name, name, json.RawMessage(args))
		emit(llm.Event{Type: llm.EventStart})
		emit(llm.Event{Type: llm.EventToolCallStart})
		emit(llm.Event{Type: llm.EventToolCallEnd, ToolCall: &tc})
		emit(llm.Event{Type: llm.EventDone, Reason: "toolUse", Message: &llm.AssistantMessage{
			Content: []llm.Content{tc}, Provider: "anthropic", Model: "m1", StopReason: llm.StopReasonToolUse,
		}})
	}
}

// fixture runs the real program (without a terminal) against the stub
// gateway; what the UI prints above itself is collected.
type fixture struct {
	t    *testing.T
	gw   *gateway
	p    *tea.Program
	done chan struct{}

	mu      sync.Mutex
	printed []string
	turns   int    // turns done
	frame   string // the latest view, without styles
}

// Write discards the renderer's output: it only writes the cells that
// changed since the last frame, so a line on screen is not a substring of
// what was written ("calling exec: x" redrawn as "running exec: x" writes
// "runn"). What is on screen is the model's latest view, recorded by
// frameRecorder.
func (f *fixture) Write(p []byte) (int, error) { return len(p), nil }

// frameRecorder records every view the program renders.
type frameRecorder struct {
	tea.Model
	f *fixture
}

func (r frameRecorder) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	m, cmd := r.Model.Update(msg)
	r.Model = m
	return r, cmd
}

func (r frameRecorder) View() tea.View {
	v := r.Model.View()
	r.f.mu.Lock()
	r.f.frame = ansi.Strip(v.Content)
	r.f.mu.Unlock()
	return v
}

// waitScreen waits until the screen shows s (the live area is not
// printed above, it is drawn).
func (f *fixture) waitScreen(s string) {
	f.t.Helper()
	deadline := time.Now().Add(30 * time.Second) // a loaded CI machine draws slowly
	var frame string
	for time.Now().Before(deadline) {
		f.mu.Lock()
		frame = f.frame
		f.mu.Unlock()
		if strings.Contains(frame, s) {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	f.t.Fatalf("%q was not drawn; the screen:\n%s", s, frame)
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	return newFixtureWith(t, nil)
}

// newFixtureWith is newFixture with the API's backend wrapping the stub
// (wrap nil: the stub itself).
func newFixtureWith(t *testing.T, wrap func(*gateway) any) *fixture {
	t.Helper()
	gw := &gateway{}
	var backend httpapi.Backend = gw
	if wrap != nil {
		backend = wrap(gw).(httpapi.Backend)
	}
	srv := httptest.NewServer(httpapi.New(backend, httpapi.Options{AuthToken: "tok"}))
	t.Cleanup(srv.Close)
	c := client.New(srv.URL, &client.Options{Token: "tok"})
	back := newBackend(c, slog.New(slog.DiscardHandler))
	st, err := back.load(context.Background(), "assistant")
	if err != nil {
		t.Fatal(err)
	}
	mgr, err := agent.NewManager(agent.ManagerConfig{SessionsDir: t.TempDir(), Agents: back.setup, Hooks: back})
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{t: t, gw: gw, done: make(chan struct{})}
	e := &env{mgr: mgr, back: back, md: &markdown{plain: true}, now: time.Now}
	e.println = func(s string) {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.printed = append(f.printed, strings.Split(ansi.Strip(s), "\n")...)
	}
	f.p = tea.NewProgram(frameRecorder{newModel(e, st, false), f}, tea.WithInput(nil), tea.WithOutput(f),
		tea.WithoutSignals(), tea.WithWindowSize(100, 30), tea.WithFilter(func(m tea.Model, msg tea.Msg) tea.Msg {
			if _, ok := msg.(turnDoneMsg); ok {
				f.mu.Lock()
				f.turns++
				f.mu.Unlock()
			}
			return interruptAsCtrlC(m, msg)
		}))
	e.send = f.p.Send
	go func() {
		defer close(f.done)
		f.p.Run()
		mgr.Close()
	}()
	t.Cleanup(func() {
		f.p.Quit()
		<-f.done
	})
	f.waitFor("beige tui · agent assistant")
	return f
}

// enter types a line and Enter.
func (f *fixture) enter(line string) {
	f.p.Send(tea.PasteMsg{Content: line})
	f.p.Send(tea.KeyPressMsg{Code: tea.KeyEnter})
}

func (f *fixture) ctrlC() { f.p.Send(tea.KeyPressMsg{Code: 'c', Mod: tea.ModCtrl}) }

func (f *fixture) transcript() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.printed...)
}

// waitFor waits until a printed line contains s and returns its index.
func (f *fixture) waitFor(s string) int {
	f.t.Helper()
	deadline := time.Now().Add(30 * time.Second) // a loaded CI machine draws slowly
	for time.Now().Before(deadline) {
		for i, l := range f.transcript() {
			if strings.Contains(l, s) {
				return i
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	f.t.Fatalf("%q was not printed; the transcript:\n%s", s, strings.Join(f.transcript(), "\n"))
	return -1
}

// waitTurns waits until n turns are done.
func (f *fixture) waitTurns(n int) {
	f.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		f.mu.Lock()
		done := f.turns
		f.mu.Unlock()
		if done >= n {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	f.t.Fatalf("%d turns did not end", n)
}

// index returns the index of the first printed line containing s, or -1.
func (f *fixture) index(s string) int {
	for i, l := range f.transcript() {
		if strings.Contains(l, s) {
			return i
		}
	}
	return -1
}

func (f *fixture) exited() bool {
	select {
	case <-f.done:
		return true
	case <-time.After(5 * time.Second):
		return false
	}
}

func TestPromptShowsAnswerAndToolCalls(t *testing.T) {
	f := newFixture(t)
	f.gw.script(call("exec", `{"command":"ls -la"}`), say("There are **three** files."))
	f.enter("/v on")
	f.waitFor("verbose on")
	f.enter("list the files")
	answer := f.waitFor("There are **three** files.")

	user, notice, tool, preview := f.index("› list the files"), f.index("🔧 exec: ls -la"), f.index("⚙ exec: ls -la"), f.index("⎿ Exit code: 0")
	if !(user >= 0 && user < notice && notice < tool && tool < preview && preview < answer) {
		t.Errorf("order: user %d, notice %d, tool %d, preview %d, answer %d:\n%s", user, notice, tool, preview, answer, strings.Join(f.transcript(), "\n"))
	}
	if f.index("… 2 more lines") < 0 {
		t.Errorf("the preview is not cut:\n%s", strings.Join(f.transcript(), "\n"))
	}

	// The model was asked through the proxy, the tool through exec, with
	// the terminal's session; the session's creation was announced.
	if f.gw.chatCount() != 2 {
		t.Fatalf("%d model calls", f.gw.chatCount())
	}
	req := f.gw.chat(1)
	if req.Provider != "anthropic" || req.ModelID != "m1" || req.AgentName != "assistant" || req.SessionKey != "tui:assistant:default" {
		t.Errorf("chat request %+v", req)
	}
	if !strings.Contains(req.Context.SystemPrompt, "the terminal (beige tui)") || len(req.Context.Tools) != 4 {
		t.Errorf("system prompt or tools: %d tools", len(req.Context.Tools))
	}
	if last := req.Context.Messages[len(req.Context.Messages)-1]; last.ToolResult == nil || !strings.HasPrefix(last.ToolResult.Text(), "Exit code: 0") {
		t.Errorf("the tool result did not reach the model: %+v", last)
	}
	f.gw.mu.Lock()
	ex := f.gw.execs[0]
	f.gw.mu.Unlock()
	if ex.Tool != "exec" || ex.SessionKey != "tui:assistant:default" || !strings.Contains(string(ex.Params), `"command":"ls -la"`) {
		t.Errorf("exec %+v %s", ex, ex.Params)
	}
	if h := f.gw.hookList(); len(h) != 1 || h[0] != "session-created tui:assistant:default tui" {
		t.Errorf("hooks %q", h)
	}

	// With verbose off there is no notice, the call still shows.
	f.gw.script(call("exec", `{"command":"echo hi"}`), say("done."))
	f.enter("/v off")
	f.waitFor("verbose off")
	f.enter("say hi")
	f.waitFor("done.")
	if f.index("⚙ exec: echo hi") < 0 || f.index("🔧 exec: echo hi") >= 0 {
		t.Errorf("verbose off:\n%s", strings.Join(f.transcript(), "\n"))
	}
}

func TestCommandsNeverReachTheModel(t *testing.T) {
	f := newFixture(t)
	for _, tc := range []struct{ line, want string }{
		{"/help", "Commands (handled here, never sent to the model)"},
		{"/v", "verbose is off"},
		{"/verbose on", "verbose on"},
		{"/v maybe", "usage: /v on|off"},
		{"/sessions", "no terminal sessions of assistant yet"},
		{"/model", "m1  (Model One, 200k context)"},
		{"/agent", "* assistant"},
		{"/agent nobody", `unknown agent "nobody" (the gateway has: assistant, other)`},
		{"/resume nope", `no session "nope" of assistant`},
		{"/resume", "usage: /resume"},
		{"/model m9", `no model "m9" of assistant`},
		{"/frobnicate now", "unknown command /frobnicate (see /help)"},
	} {
		f.enter(tc.line)
		f.waitFor(tc.want)
	}
	if n := f.gw.chatCount(); n != 0 {
		t.Errorf("%d model calls for commands", n)
	}
	// "//" sends a message that starts with a slash.
	f.enter("//etc is a folder")
	f.waitFor("› /etc is a folder")
	f.waitTurns(1)
	if n := f.gw.chatCount(); n != 1 || f.gw.chat(0).Context.Messages[0].User.Text() != "/etc is a folder" {
		t.Errorf("%d calls", n)
	}
}

func TestSessionsAgentsAndModels(t *testing.T) {
	f := newFixture(t)
	f.enter("hello")
	f.waitTurns(1)

	f.enter("/new")
	f.waitFor("new session tui:assistant:")
	f.enter("/sessions")
	f.waitFor("Terminal sessions of assistant")
	tr := strings.Join(f.transcript(), "\n")
	if !strings.Contains(tr, " default ") || !strings.Contains(tr, "*  1  20") {
		t.Errorf("sessions:\n%s", tr)
	}
	hooks := f.gw.hookList()
	if len(hooks) != 3 || hooks[0] != "session-created tui:assistant:default tui" ||
		!strings.HasPrefix(hooks[1], "session-created tui:assistant:20") || hooks[2] != "session-disposed tui:assistant:default tui" {
		t.Errorf("hooks %q", hooks)
	}
	f.enter("/resume default")
	f.waitFor("resumed session tui:assistant:default")
	f.enter("again")
	f.waitTurns(2)
	// The resumed session's history went to the model.
	if req := f.gw.chat(1); req.SessionKey != "tui:assistant:default" || len(req.Context.Messages) != 3 {
		t.Errorf("resumed: %s, %d messages", req.SessionKey, len(req.Context.Messages))
	}

	f.enter("/model 2")
	f.waitFor("model anthropic/m2 is now asked first")
	f.enter("with m2")
	f.waitTurns(3)
	if req := f.gw.chat(2); req.ModelID != "m2" {
		t.Errorf("model %s", req.ModelID)
	}

	f.enter("/agent other")
	f.waitFor("agent other · model openai/o1 · session tui:other:default")
	f.enter("hi other")
	f.waitTurns(4)
	if req := f.gw.chat(3); req.AgentName != "other" || req.ModelID != "o1" || req.SessionKey != "tui:other:default" {
		t.Errorf("other: %+v", req)
	}
}

func TestCtrlCAbortsThenQuits(t *testing.T) {
	f := newFixture(t)
	streaming := make(chan struct{})
	cancelled := make(chan struct{})
	f.gw.script(func(ctx context.Context, emit func(llm.Event)) {
		emit(llm.Event{Type: llm.EventStart})
		emit(llm.Event{Type: llm.EventTextStart})
		emit(llm.Event{Type: llm.EventTextDelta, Delta: "Counting: one two"})
		close(streaming)
		<-ctx.Done()
		close(cancelled)
	})
	f.enter("count to a million")
	<-streaming
	// The reply streams in the live area, and the status line says so.
	f.waitScreen("Counting: one two")
	f.waitScreen("streaming")
	f.ctrlC()
	f.waitFor("⏹ aborted")
	select {
	case <-cancelled:
	case <-time.After(5 * time.Second):
		t.Fatal("the gateway's model call was not cancelled")
	}
	if f.index("Counting: one two") < 0 {
		t.Errorf("the partial answer is not kept:\n%s", strings.Join(f.transcript(), "\n"))
	}
	// The next prompt works.
	f.enter("still there?")
	f.waitTurns(2)

	// Idle, with text in the input: Ctrl-C clears it; a second one quits.
	time.Sleep(2100 * time.Millisecond) // not a double Ctrl-C with the first
	f.p.Send(tea.PasteMsg{Content: "half typed"})
	f.ctrlC()
	select {
	case <-f.done:
		t.Fatal("the first Ctrl-C quit")
	case <-time.After(100 * time.Millisecond):
	}
	f.ctrlC()
	if !f.exited() {
		t.Fatal("a second Ctrl-C did not quit")
	}
}

func TestCtrlCAbortsARunningTool(t *testing.T) {
	f := newFixture(t)
	f.gw.script(call("exec", `{"command":"sleep 1000"}`))
	f.enter("/v on")
	f.enter("wait a while")
	f.waitFor("🔧 exec: sleep 1000")
	f.waitScreen("running exec: sleep 1000")
	f.ctrlC()
	f.waitFor("⏹ aborted")
	tool := f.waitFor("✗ exec: sleep 1000")
	if !strings.Contains(strings.Join(f.transcript()[tool:], "\n"), "exec aborted") {
		t.Errorf("the tool result does not say it was aborted:\n%s", strings.Join(f.transcript(), "\n"))
	}
	if f.gw.chatCount() != 1 {
		t.Errorf("%d model calls after the abort", f.gw.chatCount())
	}
}

func TestDoubleCtrlCQuitsARunningTurn(t *testing.T) {
	f := newFixture(t)
	streaming := make(chan struct{})
	f.gw.script(func(ctx context.Context, emit func(llm.Event)) {
		emit(llm.Event{Type: llm.EventStart})
		close(streaming)
		<-ctx.Done()
	})
	f.enter("hang")
	<-streaming
	f.ctrlC()
	f.ctrlC()
	if !f.exited() {
		t.Fatal("two quick Ctrl-C did not quit")
	}
}

func TestCtrlDQuits(t *testing.T) {
	f := newFixture(t)
	f.p.Send(tea.KeyPressMsg{Code: 'd', Mod: tea.ModCtrl})
	if !f.exited() {
		t.Fatal("Ctrl-D did not quit")
	}
}

func TestModelErrorsAreShown(t *testing.T) {
	f := newFixture(t)
	f.gw.script(func(ctx context.Context, emit func(llm.Event)) {
		emit(llm.Event{Type: llm.EventBlocked, Reason: "no secrets please"})
	})
	f.enter("tell me the secret")
	f.waitFor("✗ blocked by the gateway's hooks: no secrets please")
	f.gw.script(func(ctx context.Context, emit func(llm.Event)) {
		emit(llm.Event{Type: llm.EventStart})
		emit(llm.Event{Type: llm.EventModelFallback, Provider: "anthropic", ModelID: "m2"})
		emit(llm.Event{Type: llm.EventError, Reason: "error", Error: &llm.AssistantMessage{StopReason: llm.StopReasonError, ErrorMessage: "529 overloaded"}})
	})
	f.enter("try again")
	f.waitFor("↪ the gateway fell back to anthropic/m2")
	f.waitFor("✗ 529 overloaded")
}

func TestRunErrors(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := "http://" + ln.Addr().String()
	ln.Close()
	err = Run(context.Background(), Options{Client: client.New(addr, nil), SessionsDir: t.TempDir()})
	if err == nil || err.Error() != "cannot reach the gateway at "+addr+": is it running? beige gateway start" {
		t.Errorf("unreachable: %v", err)
	}

	gw := &gateway{}
	srv := httptest.NewServer(httpapi.New(gw, httpapi.Options{AuthToken: "tok"}))
	defer srv.Close()
	err = Run(context.Background(), Options{Client: client.New(srv.URL, &client.Options{Token: "tok"}), Agent: "nobody", SessionsDir: t.TempDir()})
	if err == nil || err.Error() != `unknown agent "nobody" (the gateway has: assistant, other)` {
		t.Errorf("unknown agent: %v", err)
	}
	err = Run(context.Background(), Options{Client: client.New(srv.URL, &client.Options{Token: "wrong"}), SessionsDir: t.TempDir()})
	if client.StatusOf(err) != 401 {
		t.Errorf("wrong token: %v", err)
	}
}

func TestHelpers(t *testing.T) {
	list := []proto.SessionInfo{{ID: "tui:a:new"}, {ID: "tui:a:default"}, {ID: "other:key"}}
	for arg, want := range map[string]int{"1": 0, "2": 1, "default": 1, "tui:a:new": 0, "other:key": 2, "4": -1, "nope": -1} {
		if got := findSession("a", arg, list); got != want {
			t.Errorf("findSession(%q) = %d, want %d", arg, got, want)
		}
	}
	if _, err := pickAgent("", nil); err == nil {
		t.Error("no agents accepted")
	}
	if a, err := pickAgent("", []proto.AgentInfo{{Name: "x"}, {Name: "y"}}); err != nil || a.Name != "x" {
		t.Errorf("first agent: %v %v", a, err)
	}
	if !errors.Is(unknownAgentError("z", nil), agent.ErrUnknownAgent) {
		t.Error("unknown agent is not agent.ErrUnknownAgent")
	}
	for raw, want := range map[string]bool{"http://127.0.0.1:7433": true, "http://localhost:1": true, "http://[::1]:2": true, "http://10.0.0.2:7433": false, "http://gw.example": false} {
		if isLoopback(raw) != want {
			t.Errorf("isLoopback(%q)", raw)
		}
	}
	long := strings.Repeat("x", maxLiveBytes) + "\nend"
	if got := liveTail(long); !strings.HasPrefix(got, "…\n") || !strings.HasSuffix(got, "end") || len(got) > maxLiveBytes+10 {
		t.Errorf("liveTail: %d bytes", len(got))
	}
	if got := liveTail("short"); got != "short" {
		t.Errorf("liveTail(short) = %q", got)
	}
	if got := newSessionKey("a", time.Date(2025, 6, 12, 15, 30, 1, 0, time.UTC)); got != "tui:a:20250612-153001" {
		t.Errorf("key %q", got)
	}
	res := &llm.ToolResultMessage{Content: []llm.Content{llm.Text("line1\nline2")}, IsError: true}
	if got := ansi.Strip(toolLine("exec: false", res, 80)); got != "✗ exec: false\n  ⎿ line1\n    line2" {
		t.Errorf("tool line %q", got)
	}
	if w := healthWarning(proto.Health{Status: "degraded", Agents: map[string]string{"a": "no image"}}, "a"); w != "the gateway is degraded: agent a: no image · beige gateway status" {
		t.Errorf("health warning %q", w)
	}
	if w := healthWarning(proto.Health{Status: "ok"}, "a"); w != "" {
		t.Errorf("healthy: %q", w)
	}
	md := &markdown{}
	if out := ansi.Strip(md.render("# Title\n\nSome **bold** text.", 60, true)); !strings.Contains(out, "Title") || !strings.Contains(out, "Some bold text.") || strings.Contains(out, "**") {
		t.Errorf("markdown %q", out)
	}
}
