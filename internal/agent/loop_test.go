package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/beige-dev/beige/internal/llm"
	"github.com/beige-dev/beige/internal/llm/llmtest"
	"github.com/beige-dev/beige/internal/proto"
	"github.com/beige-dev/beige/internal/sandbox"
)

func TestMultiStepToolUse(t *testing.T) {
	for _, w := range []struct {
		name string
		kind wireKind
	}{{"anthropic", wireAnthropic}, {"openai", wireOpenAI}} {
		t.Run(w.name, func(t *testing.T) {
			e := newEnv(t, w.kind)
			e.srv.Enqueue(
				llmtest.Reply(llmtest.TextBlock("Let me look."), llmtest.Call("exec", map[string]any{"command": "ls -la"})),
				llmtest.Text("You have three files."),
			)
			var started, msgs []string
			var events int
			res, err := e.m.Prompt(context.Background(), testAgent, "", "what is in my workspace?", &PromptOptions{
				OnEvent:     func(llm.Event) { events++ },
				OnToolStart: func(name string, args json.RawMessage) { started = append(started, ToolCallSummary(name, args)) },
				OnMessage:   func(m llm.Message) { msgs = append(msgs, m.Role()) },
			})
			if err != nil {
				t.Fatal(err)
			}
			if res.Text != "You have three files." || res.ModelCalls != 2 || res.StopReason != llm.StopReasonStop {
				t.Errorf("result %+v", res)
			}
			if got := strings.Join(started, ","); got != "exec: ls -la" {
				t.Errorf("tool starts %q", got)
			}
			if got := strings.Join(msgs, " "); got != "user assistant toolResult assistant" {
				t.Errorf("messages %q", got)
			}
			if got := roles(res.Messages); got != "user assistant toolResult assistant" {
				t.Errorf("result messages %q", got)
			}
			if events == 0 {
				t.Error("no stream events")
			}
			if res.Usage.Input != 20 || res.Usage.Output != 10 {
				t.Errorf("usage %+v", res.Usage)
			}
			if got := e.sb.commands(); len(got) != 1 || got[0] != "ls -la" {
				t.Errorf("sandbox ran %q", got)
			}
			second := e.srv.Request(1)
			trs := toolResults(second)
			if len(trs) != 1 || !strings.Contains(trs[0].Text, "Exit code: 0") || !strings.Contains(trs[0].Text, "ran: ls -la") {
				t.Errorf("tool results sent %+v", trs)
			}
			if ids := toolCallIDs(second); len(ids) != 1 || ids[0] != trs[0].ID {
				t.Errorf("call ids %v vs results %+v", ids, trs)
			}
			if sys := second.System(); !strings.Contains(sys, "You are travel") || !strings.Contains(sys, "/workspace") {
				t.Errorf("system prompt %q", sys)
			}
			if got := second.Tools(); strings.Join(got, ",") != "read,write,patch,exec" {
				t.Errorf("tools offered %v", got)
			}
		})
	}
}

func TestSeveralToolCallsInOneMessage(t *testing.T) {
	e := newEnv(t, wireAnthropic)
	e.sb.files["/workspace/b.txt"] = []byte("bee\n")
	e.srv.Enqueue(
		llmtest.ToolCalls(
			llmtest.Call("exec", map[string]any{"command": "echo one"}),
			llmtest.Call("read", map[string]any{"path": "b.txt"}),
			llmtest.Call("write", map[string]any{"path": "c.txt", "content": "sea"}),
		),
		llmtest.Text("done"),
	)
	res := e.prompt("do three things")
	if got := roles(res.Messages); got != "user assistant toolResult toolResult toolResult assistant" {
		t.Fatalf("messages %q", got)
	}
	calls := res.Messages[1].Assistant.ToolCalls()
	for i, name := range []string{"exec", "read", "write"} {
		tr := res.Messages[2+i].ToolResult
		if tr.ToolName != name || tr.ToolCallID != calls[i].ID || tr.IsError {
			t.Errorf("result %d: %+v (call %+v)", i, tr, calls[i])
		}
	}
	trs := toolResults(e.srv.Request(1))
	ids := toolCallIDs(e.srv.Request(1))
	if len(trs) != 3 || len(ids) != 3 {
		t.Fatalf("request carries %d results for %d calls", len(trs), len(ids))
	}
	for i := range trs {
		if trs[i].ID != ids[i] {
			t.Errorf("result %d answers %s, call is %s", i, trs[i].ID, ids[i])
		}
	}
	if !strings.Contains(trs[0].Text, "ran: echo one") || !strings.Contains(trs[1].Text, "bee") || !strings.Contains(trs[2].Text, "c.txt") {
		t.Errorf("results %+v", trs)
	}
	if got := string(e.sb.files["/workspace/c.txt"]); got != "sea" {
		t.Errorf("c.txt = %q", got)
	}
}

func TestMalformedToolArguments(t *testing.T) {
	e := newEnv(t, wireAnthropic)
	e.srv.Enqueue(
		llmtest.MalformedToolCall("exec", `{"command": "ls`),
		llmtest.ToolCall("exec", map[string]any{"cmd": "ls"}), // rejected by the tool's schema
		llmtest.ToolCall("exec", map[string]any{"command": "ls"}),
		llmtest.Text("fixed it"),
	)
	res := e.prompt("list")
	if res.Text != "fixed it" || res.ModelCalls != 4 {
		t.Fatalf("result %+v", res)
	}
	r1 := res.Messages[2].ToolResult
	if !r1.IsError || !strings.Contains(r1.Text(), "invalid arguments for exec: not a JSON object") ||
		!strings.Contains(r1.Text(), `{"command": "ls`) {
		t.Errorf("malformed: %q", r1.Text())
	}
	r2 := res.Messages[4].ToolResult
	if !r2.IsError || !strings.Contains(r2.Text(), `invalid arguments for exec: params: unknown parameter "cmd"`) {
		t.Errorf("rejected: %q", r2.Text())
	}
	if r3 := res.Messages[6].ToolResult; r3.IsError {
		t.Errorf("good call: %q", r3.Text())
	}
	if got := e.sb.commands(); len(got) != 1 {
		t.Errorf("sandbox ran %q, want only the good call", got)
	}
	// The model saw the errors.
	if trs := toolResults(e.srv.Request(1)); len(trs) != 1 || !trs[0].IsError || !strings.Contains(trs[0].Text, "not a JSON object") {
		t.Errorf("second request results %+v", trs)
	}
}

func TestUnknownTool(t *testing.T) {
	e := newEnv(t, wireAnthropic)
	e.srv.Enqueue(llmtest.ToolCall("git", map[string]any{"args": "status"}), llmtest.Text("ok, via exec then"))
	res := e.prompt("git status")
	tr := res.Messages[2].ToolResult
	if !tr.IsError || !strings.Contains(tr.Text(), `unknown tool "git"`) || !strings.Contains(tr.Text(), "read, write, patch, exec") ||
		!strings.Contains(tr.Text(), "run them with exec") {
		t.Errorf("unknown tool result %q", tr.Text())
	}
	if res.Text != "ok, via exec then" {
		t.Errorf("text %q", res.Text)
	}
}

func TestModelFailures(t *testing.T) {
	cases := []struct {
		name string
		resp llmtest.Response
		want string
	}{
		{"error mid-stream", llmtest.Text("partial answer here").FailAfter(4, "api_error", "boom mid-stream"), "boom mid-stream"},
		{"http 500", llmtest.Status(http.StatusInternalServerError), "500"},
		{"cut stream", llmtest.Text("partial answer here").CutAfter(4), "anthropic claude-test"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, wireAnthropic)
			e.srv.Enqueue(tc.resp)
			res, err := e.m.Prompt(context.Background(), testAgent, "", "first question", nil)
			if err == nil || !strings.Contains(err.Error(), "model call failed") || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v", err)
			}
			if errors.Is(err, ErrAborted) {
				t.Error("a failure is not an abort")
			}
			if got := roles(res.Messages); got != "user assistant" || res.StopReason != llm.StopReasonError {
				t.Fatalf("messages %q stop %s", got, res.StopReason)
			}
			// A later prompt works and carries the first question, not the failed reply.
			e.srv.Enqueue(llmtest.Text("fine now"))
			if res := e.prompt("second question"); res.Text != "fine now" {
				t.Errorf("text %q", res.Text)
			}
			all := e.srv.Last().AllText()
			if !strings.Contains(all, "first question") || !strings.Contains(all, "second question") || strings.Contains(all, "partial") {
				t.Errorf("next request text %q", all)
			}
			// And so does the same after a restart.
			e.restart()
			e.srv.Enqueue(llmtest.Text("still fine"))
			e.prompt("third")
			if all := e.srv.Last().AllText(); !strings.Contains(all, "fine now") || strings.Contains(all, "partial") {
				t.Errorf("after restart %q", all)
			}
		})
	}
}

// bigTools returns a huge result for every call.
type bigTools struct{ size int }

func (b bigTools) Definitions() []llm.Tool {
	return []llm.Tool{{Name: "exec", Description: "x", Parameters: json.RawMessage(`{"type":"object"}`)}}
}

func (b bigTools) Run(ctx context.Context, c ToolCall) ToolOutcome {
	return TextOutcome(strings.Repeat("é", b.size/2), false)
}

func TestHugeToolOutputCapped(t *testing.T) {
	e := newEnv(t, wireAnthropic)
	e.configure(func(s *AgentSetup) { s.Tools = bigTools{size: 1 << 20} })
	e.srv.Enqueue(llmtest.ToolCall("exec", map[string]any{"command": "cat big"}), llmtest.Text("that was big"))
	res := e.prompt("go")
	tr := res.Messages[2].ToolResult
	text := tr.Text()
	if len(text) > MaxToolResultBytes+200 || !strings.Contains(text, "[tool result truncated: showed") {
		t.Errorf("result is %d bytes, ends %q", len(text), text[max(0, len(text)-80):])
	}
	if !strings.HasPrefix(text, "é") || strings.ContainsRune(text, '\uFFFD') {
		t.Error("cut inside a rune")
	}
	sent := toolResults(e.srv.Request(1))
	if len(sent) != 1 || len(sent[0].Text) > MaxToolResultBytes+200 {
		t.Errorf("request carried %d bytes", len(sent[0].Text))
	}
	// The core tools cap exec output themselves.
	e.configure(func(s *AgentSetup) {
		s.Tools = testCoreTools(e.runner, func(context.Context) (sandbox.Sandbox, error) { return e.sb, nil }, testAgent)
	})
	e.sb.execFn = func(ctx context.Context, req sandbox.ExecRequest) (sandbox.ExecResult, error) {
		out := []byte(strings.Repeat("x", 1<<20))
		return sandbox.ExecResult{Output: out, OutputBytes: int64(len(out))}, nil
	}
	e.srv.Enqueue(llmtest.ToolCall("exec", map[string]any{"command": "yes"}), llmtest.Text("ok"))
	res = e.prompt("again")
	if text := res.Messages[2].ToolResult.Text(); len(text) > 60<<10 || !strings.Contains(text, "output truncated") {
		t.Errorf("exec result %d bytes", len(text))
	}
}

func TestModelCallBound(t *testing.T) {
	e := newEnv(t, wireAnthropic)
	e.configure(func(s *AgentSetup) { s.MaxModelCalls = 3 })
	e.srv.SetDefault(llmtest.Reply(llmtest.TextBlock("still going"), llmtest.Call("exec", map[string]any{"command": "true"})))
	res, err := e.m.Prompt(context.Background(), testAgent, "", "loop forever", nil)
	if err != nil {
		t.Fatal(err)
	}
	if e.srv.Count() != 3 || res.ModelCalls != 3 || !res.Limited {
		t.Fatalf("%d requests, result %+v", e.srv.Count(), res)
	}
	if !strings.HasPrefix(res.Text, "still going\n\n[Stopped: this prompt reached its limit of 3 model calls") {
		t.Errorf("text %q", res.Text)
	}
	if got := len(e.sb.commands()); got != 2 {
		t.Errorf("ran %d commands, want 2 (the third call's tools are not run)", got)
	}
	last := res.Messages[len(res.Messages)-1].ToolResult
	if last == nil || !last.IsError || !strings.Contains(last.Text(), "limit of 3 model calls") {
		t.Errorf("last message %+v", res.Messages[len(res.Messages)-1])
	}
	// The session goes on.
	e.srv.SetDefault(llmtest.Text("ok"))
	if r := e.prompt("continue"); r.Text != "ok" {
		t.Errorf("next %q", r.Text)
	}
}

func TestAbortMidStream(t *testing.T) {
	for _, how := range []string{"Abort", "ctx"} {
		t.Run(how, func(t *testing.T) {
			e := newEnv(t, wireAnthropic)
			e.srv.Enqueue(llmtest.Reply(llmtest.TextBlock("I will never finish this sentence")).HangAfter(4))
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			type out struct {
				res *Result
				err error
			}
			done := make(chan out, 1)
			go func() {
				res, err := e.m.Prompt(ctx, testAgent, "", "talk", nil)
				done <- out{res, err}
			}()
			if !e.srv.WaitInFlight(1, 5*time.Second) {
				t.Fatal("no request")
			}
			time.Sleep(50 * time.Millisecond) // let some text arrive
			if how == "Abort" {
				if !e.m.Abort(testAgent, "") {
					t.Fatal("Abort found nothing running")
				}
			} else {
				cancel()
			}
			var o out
			select {
			case o = <-done:
			case <-time.After(5 * time.Second):
				t.Fatal("prompt did not end")
			}
			if !errors.Is(o.err, ErrAborted) || !errors.Is(o.err, context.Canceled) {
				t.Fatalf("err = %v", o.err)
			}
			if !e.srv.WaitCancelled(1, 5*time.Second) {
				t.Error("the server did not see the cancel")
			}
			if got := roles(o.res.Messages); got != "user assistant" || o.res.StopReason != llm.StopReasonAborted {
				t.Fatalf("messages %q stop %s", got, o.res.StopReason)
			}
			if e.m.Abort(testAgent, "") {
				t.Error("Abort with nothing running")
			}
			e.srv.Enqueue(llmtest.Text("fresh"))
			if r := e.prompt("again"); r.Text != "fresh" {
				t.Errorf("next %q", r.Text)
			}
			all := e.srv.Last().AllText()
			if strings.Contains(all, "never") || !strings.Contains(all, "talk") {
				t.Errorf("next request %q", all)
			}
			// The aborted turn is in the file.
			e.restart()
			e.srv.Enqueue(llmtest.Text("x"))
			e.prompt("after restart")
			if all := e.srv.Last().AllText(); strings.Contains(all, "never") || !strings.Contains(all, "fresh") {
				t.Errorf("after restart %q", all)
			}
		})
	}
}

func TestAbortDuringTool(t *testing.T) {
	e := newEnv(t, wireAnthropic)
	started := make(chan struct{})
	e.sb.execFn = func(ctx context.Context, req sandbox.ExecRequest) (sandbox.ExecResult, error) {
		close(started)
		<-ctx.Done()
		return sandbox.ExecResult{}, ctx.Err()
	}
	e.srv.Enqueue(llmtest.ToolCalls(
		llmtest.Call("exec", map[string]any{"command": "sleep 1000"}),
		llmtest.Call("exec", map[string]any{"command": "echo never"}),
	))
	done := make(chan error, 1)
	var res *Result
	go func() {
		var err error
		res, err = e.m.Prompt(context.Background(), testAgent, "k1", "work", nil)
		done <- err
	}()
	<-started
	e.m.Abort(testAgent, "k1")
	if err := <-done; !errors.Is(err, ErrAborted) {
		t.Fatalf("err = %v", err)
	}
	if got := roles(res.Messages); got != "user assistant toolResult toolResult" {
		t.Fatalf("messages %q", got)
	}
	if r := res.Messages[2].ToolResult; !r.IsError || !strings.Contains(r.Text(), "aborted") {
		t.Errorf("running tool: %q", r.Text())
	}
	if r := res.Messages[3].ToolResult; !r.IsError || !strings.Contains(r.Text(), "not run") {
		t.Errorf("next tool: %q", r.Text())
	}
	if e.srv.Count() != 1 || len(e.sb.commands()) != 1 {
		t.Errorf("%d requests, %d commands", e.srv.Count(), len(e.sb.commands()))
	}
}

func TestPromptErrors(t *testing.T) {
	e := newEnv(t, wireAnthropic)
	var pe *proto.Error
	_, err := e.m.Prompt(context.Background(), "nobody", "", "hi", nil)
	if !errors.As(err, &pe) || pe.Status != http.StatusNotFound {
		t.Errorf("unknown agent: %v", err)
	}
	_, err = e.m.Prompt(context.Background(), testAgent, "", "  ", nil)
	if !errors.As(err, &pe) || pe.Status != http.StatusBadRequest {
		t.Errorf("empty message: %v", err)
	}
	_, err = e.m.Prompt(context.Background(), testAgent, "bad\nkey", "hi", nil)
	if !errors.As(err, &pe) || pe.Status != http.StatusBadRequest {
		t.Errorf("bad key: %v", err)
	}
	if _, err := e.m.Sessions(context.Background(), "../etc"); !errors.As(err, &pe) || pe.Status != http.StatusNotFound {
		t.Errorf("sessions of bad name: %v", err)
	}
	if err := e.m.NewSession(context.Background(), "nobody", ""); !errors.As(err, &pe) || pe.Status != http.StatusNotFound {
		t.Errorf("new session of unknown agent: %v", err)
	}
	e.m.Close()
	if _, err := e.m.Prompt(context.Background(), testAgent, "", "hi", nil); !errors.Is(err, ErrClosed) {
		t.Errorf("after close: %v", err)
	}
	if e.srv.Count() != 0 {
		t.Errorf("%d requests", e.srv.Count())
	}
}

// panicTools panics.
type panicTools struct{}

func (panicTools) Definitions() []llm.Tool {
	return []llm.Tool{{Name: "exec", Parameters: json.RawMessage(`{"type":"object"}`)}}
}
func (panicTools) Run(context.Context, ToolCall) ToolOutcome { panic("boom") }

func TestToolPanicBecomesError(t *testing.T) {
	e := newEnv(t, wireAnthropic)
	e.configure(func(s *AgentSetup) { s.Tools = panicTools{} })
	e.srv.Enqueue(llmtest.ToolCall("exec", map[string]any{"command": "x"}), llmtest.Text("recovered"))
	res := e.prompt("go")
	if tr := res.Messages[2].ToolResult; !tr.IsError || !strings.Contains(tr.Text(), "internal error") {
		t.Errorf("result %q", tr.Text())
	}
	if !strings.Contains(e.logs.String(), "tool panicked") {
		t.Error("panic not logged")
	}
}

func TestToolCallSummary(t *testing.T) {
	for _, c := range []struct{ name, args, want string }{
		{"exec", `{"command":"ls  -la\n/x"}`, "exec: ls -la /x"},
		{"read", `{"path":"notes.md"}`, "read: notes.md"},
		{"write", `{"path":"a.txt","content":"hello"}`, "write: a.txt (5 bytes)"},
		{"git", `{}`, "git"},
		{"git", `{"a":1}`, `git: {"a":1}`},
	} {
		if got := ToolCallSummary(c.name, json.RawMessage(c.args)); got != c.want {
			t.Errorf("ToolCallSummary(%s, %s) = %q, want %q", c.name, c.args, got, c.want)
		}
	}
	long := fmt.Sprintf(`{"command":%q}`, strings.Repeat("a", 500))
	if got := ToolCallSummary("exec", json.RawMessage(long)); len(got) > 220 {
		t.Errorf("long summary %d bytes", len(got))
	}
}
