package agent

import (
	"context"
	"errors"
	"net/http"
	"os"
	"strings"
	"testing"

	"github.com/beige-dev/beige/internal/llm/llmtest"
	"github.com/beige-dev/beige/internal/proto"
	"github.com/beige-dev/beige/internal/sandbox"
)

// TestSteerSkipsRemainingToolCalls: a message steered into a running
// prompt is taken when the running tool call finishes; the reply's other
// calls do not run (no command, no audit record) and get pi's "skipped"
// result; the message is recorded as a user message, the model is called
// again, and a second steered message follows in order. Both survive a
// restart in the session file.
func TestSteerSkipsRemainingToolCalls(t *testing.T) {
	e := newEnv(t, wireAnthropic)
	started, release := make(chan struct{}), make(chan struct{})
	first := true
	e.sb.execFn = func(ctx context.Context, req sandbox.ExecRequest) (sandbox.ExecResult, error) {
		if first {
			first = false
			close(started)
			<-release
		}
		return sandbox.ExecResult{Output: []byte("ran\n"), OutputBytes: 4}, nil
	}
	e.srv.Enqueue(
		llmtest.ToolCalls(
			llmtest.Call("exec", map[string]any{"command": "sleep 10"}),
			llmtest.Call("exec", map[string]any{"command": "echo never"}),
			llmtest.Call("write", map[string]any{"path": "never.txt", "content": "x"}),
		),
		llmtest.Text("ok, X instead"),
		llmtest.Text("and Y too"),
	)
	done := make(chan error, 1)
	var res *Result
	go func() {
		var err error
		res, err = e.m.Prompt(context.Background(), testAgent, "k1", "work", nil)
		done <- err
	}()
	<-started
	for _, msg := range []string{"stop, do X", "then Y"} {
		if ok, err := e.m.Steer(context.Background(), "", "k1", msg, false); !ok || err != nil {
			t.Fatalf("Steer(%q) = %v, %v", msg, ok, err)
		}
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	want := "user assistant toolResult toolResult toolResult user assistant user assistant"
	if got := roles(res.Messages); got != want {
		t.Fatalf("messages %q, want %q", got, want)
	}
	if r := res.Messages[2].ToolResult; r.IsError || !strings.Contains(r.Text(), "ran") {
		t.Errorf("the running call: %q", r.Text())
	}
	for _, i := range []int{3, 4} {
		if r := res.Messages[i].ToolResult; !r.IsError || r.Text() != SkippedForSteering {
			t.Errorf("call %d: %q (error %v), want %q", i-1, r.Text(), r.IsError, SkippedForSteering)
		}
	}
	if got := res.Messages[5].User.Text(); got != "stop, do X" {
		t.Errorf("steering message %q", got)
	}
	if got := res.Messages[7].User.Text(); got != "then Y" {
		t.Errorf("second steering message %q", got)
	}
	if res.Text != "and Y too" || res.ModelCalls != 3 {
		t.Errorf("result %q after %d model calls", res.Text, res.ModelCalls)
	}
	if cmds := e.sb.commands(); len(cmds) != 1 {
		t.Errorf("commands run: %q", cmds)
	}
	if _, ok := e.sb.files["/workspace/never.txt"]; ok {
		t.Error("a skipped write ran")
	}
	if a, _ := os.ReadFile(e.audit); strings.Contains(string(a), "echo never") || strings.Contains(string(a), "never.txt") {
		t.Errorf("a skipped call was audited:\n%s", a)
	}
	second := e.srv.Request(1)
	if all := second.AllText(); !strings.Contains(all, "stop, do X") || strings.Contains(all, "then Y") || !strings.Contains(all, SkippedForSteering) {
		t.Errorf("second request %q", all)
	}
	if all := e.srv.Request(2).AllText(); !strings.Contains(all, "then Y") {
		t.Errorf("third request %q", all)
	}

	e.restart()
	h, err := e.m.History(context.Background(), testAgent, "k1")
	if err != nil {
		t.Fatal(err)
	}
	if got := roles(h); got != want {
		t.Errorf("after a restart: %q", got)
	}
}

// TestSteerIdleWaitsForNextPrompt: steering a session that runs nothing
// queues the message, as pi does: no model call now, and the next prompt
// carries it right after its own message. A session that does not exist
// is a no-op; an empty or oversized message is refused as a prompt is.
func TestSteerIdleWaitsForNextPrompt(t *testing.T) {
	e := newEnv(t, wireAnthropic)
	e.srv.Enqueue(llmtest.Text("hello"), llmtest.Text("both seen"))
	if _, err := e.m.Prompt(context.Background(), testAgent, "k2", "hi", nil); err != nil {
		t.Fatal(err)
	}
	if ok, err := e.m.Steer(context.Background(), "", "k2", "remember the milk", false); !ok || err != nil {
		t.Fatalf("Steer = %v, %v", ok, err)
	}
	if e.srv.Count() != 1 {
		t.Fatalf("%d model calls: steering an idle session called the model", e.srv.Count())
	}
	res, err := e.m.Prompt(context.Background(), testAgent, "k2", "next", nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := roles(res.Messages); got != "user user assistant" || res.Messages[1].User.Text() != "remember the milk" {
		t.Fatalf("messages %q", got)
	}
	msgs := e.srv.Last().Messages()
	if len(msgs) < 2 || !strings.Contains(textOf(msgs[len(msgs)-2]), "next") || textOf(msgs[len(msgs)-1]) != "remember the milk" {
		t.Errorf("request messages %v", msgs)
	}

	if ok, err := e.m.Steer(context.Background(), "", "nobody:1", "hi", false); ok || err != nil {
		t.Errorf("Steer of no session = %v, %v", ok, err)
	}
	if ok, err := e.m.Steer(context.Background(), "other", "k2", "hi", false); ok || err != nil {
		t.Errorf("Steer of another agent's session = %v, %v", ok, err)
	}
	var pe *proto.Error
	if _, err := e.m.Steer(context.Background(), "", "k2", "  ", false); !errors.As(err, &pe) || pe.Status != http.StatusBadRequest {
		t.Errorf("empty: %v", err)
	}
	big := strings.Repeat("x", MaxMessageBytes+1)
	if _, err := e.m.Steer(context.Background(), "", "k2", big, false); !errors.As(err, &pe) || pe.Status != http.StatusRequestEntityTooLarge {
		t.Errorf("oversized steer: %v", err)
	}
	if _, err := e.m.Prompt(context.Background(), testAgent, "k2", big, nil); !errors.As(err, &pe) || pe.Status != http.StatusRequestEntityTooLarge {
		t.Errorf("oversized prompt: %v", err)
	}
	if e.srv.Count() != 2 {
		t.Errorf("%d model calls", e.srv.Count())
	}
}

// TestSteerAfterNewSessionDropped: messages waiting for a session are
// dropped when NewSession replaces it, and a bounded number may wait.
func TestSteerAfterNewSessionDropped(t *testing.T) {
	e := newEnv(t, wireAnthropic)
	e.srv.Enqueue(llmtest.Text("hello"), llmtest.Text("fresh"))
	e.prompt("hi")
	key := DefaultSessionKey(testAgent)
	for i := range maxSteerQueue {
		if ok, err := e.m.Steer(context.Background(), testAgent, key, "old news", false); !ok || err != nil {
			t.Fatalf("Steer %d = %v, %v", i, ok, err)
		}
	}
	var pe *proto.Error
	if _, err := e.m.Steer(context.Background(), testAgent, key, "one too many", false); !errors.As(err, &pe) || pe.Status != http.StatusTooManyRequests {
		t.Errorf("over the queue bound: %v", err)
	}
	if err := e.m.NewSession(context.Background(), testAgent, ""); err != nil {
		t.Fatal(err)
	}
	res := e.prompt("start over")
	if got := roles(res.Messages); got != "user assistant" {
		t.Errorf("messages %q: the old session's steering came along", got)
	}
}

// TestCompactionCallbacks: a prompt's OnCompactionStart and OnCompactionEnd
// are told about the automatic compaction it runs, with the size before on
// success and the reason on failure.
func TestCompactionCallbacks(t *testing.T) {
	for _, tc := range []struct {
		name    string
		summary llmtest.Response
		want    CompactionOutcome
	}{
		{"success", llmtest.Text("SUMMARY"), CompactionOutcome{Success: true, TokensBefore: 300 + 200 + 2}},
		{"failure", llmtest.Status(500), CompactionOutcome{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, wireAnthropic)
			e.configure(func(s *AgentSetup) { s.CompactionThreshold = 100 })
			e.srv.Enqueue(llmtest.Text(sized("BRAVO", 800)).WithUsage(300, 200), tc.summary, llmtest.Text("answer"))
			e.prompt(sized("ALPHA", 800))
			var events []string
			var got CompactionOutcome
			_, err := e.m.Prompt(context.Background(), testAgent, "", "CHARLIE", &PromptOptions{
				OnCompactionStart: func() { events = append(events, "start") },
				OnCompactionEnd:   func(o CompactionOutcome) { events = append(events, "end"); got = o },
			})
			if err != nil {
				t.Fatal(err)
			}
			if strings.Join(events, ",") != "start,end" {
				t.Fatalf("events %v", events)
			}
			if tc.want.Success {
				if got != tc.want {
					t.Errorf("outcome %+v, want %+v", got, tc.want)
				}
			} else if got.Success || got.TokensBefore != 0 || got.ErrorMessage == "" {
				t.Errorf("failed compaction: %+v", got)
			}
		})
	}
}

// TestPromptModelAndReplyTo: PromptOptions.Model answers that prompt
// instead of the agent's model, and ReplyTo lands in the session's
// metadata as _replyTo.
func TestPromptModelAndReplyTo(t *testing.T) {
	e := newEnv(t, wireAnthropic)
	other := e.model
	other.ID = "claude-other"
	e.srv.Enqueue(llmtest.Text("from other"), llmtest.Text("from primary"))
	_, err := e.m.Prompt(context.Background(), testAgent, "k3", "hi", &PromptOptions{
		Model:   ProviderModel{Provider: e.prov, Model: other},
		ReplyTo: []byte(`{"channel":"telegram","address":{"chatId":"7"}}`),
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.m.Prompt(context.Background(), testAgent, "k3", "again", nil); err != nil {
		t.Fatal(err)
	}
	if a, b := e.srv.Request(0).Model(), e.srv.Request(1).Model(); a != "claude-other" || b != "claude-test" {
		t.Errorf("models %q then %q", a, b)
	}
	meta, ok := e.m.SessionMetadata("k3")
	if !ok || string(meta["_replyTo"]) != `{"channel":"telegram","address":{"chatId":"7"}}` {
		t.Errorf("metadata %s", meta)
	}
}

// steerHooks refuses "blocked" and rewrites messages that start with "rw".
type steerHooks struct{}

func (steerHooks) PrePrompt(_ context.Context, _, _, message string) (string, error) {
	if message == "blocked" {
		return "", errors.New("no")
	}
	if strings.HasPrefix(message, "rw") {
		return message + " (rewritten)", nil
	}
	return message, nil
}
func (steerHooks) PostResponse(_ context.Context, _, _, response string) (string, error) {
	return response, nil
}
func (steerHooks) SessionCreated(context.Context, string, string) {}

// TestSteerRunningOnlyAndHooks: with runningOnly a session that runs
// nothing refuses the message (before and after its prompt), while the
// running prompt takes it; steering messages pass the prePrompt hooks when
// taken: a refused one is left out, a rewritten one is recorded rewritten.
func TestSteerRunningOnlyAndHooks(t *testing.T) {
	e := newEnv(t, wireAnthropic)
	m, err := NewManager(ManagerConfig{SessionsDir: e.dir, Agents: e.agents, Logger: e.logger, Hooks: steerHooks{}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	started, release := make(chan struct{}), make(chan struct{})
	e.sb.execFn = func(ctx context.Context, req sandbox.ExecRequest) (sandbox.ExecResult, error) {
		close(started)
		<-release
		return sandbox.ExecResult{}, nil
	}
	e.srv.Enqueue(
		llmtest.Text("hello"),
		llmtest.ToolCalls(
			llmtest.Call("exec", map[string]any{"command": "sleep 10"}),
			llmtest.Call("exec", map[string]any{"command": "echo never"}),
		),
		llmtest.Text("rewritten seen"),
	)
	if _, err := m.Prompt(context.Background(), testAgent, "k4", "hi", nil); err != nil {
		t.Fatal(err)
	}
	if ok, err := m.Steer(context.Background(), "", "k4", "not now", true); ok || err != nil {
		t.Errorf("runningOnly on an idle session = %v, %v", ok, err)
	}
	done := make(chan error, 1)
	var res *Result
	go func() {
		var err error
		res, err = m.Prompt(context.Background(), testAgent, "k4", "work", nil)
		done <- err
	}()
	<-started
	for _, msg := range []string{"blocked", "rw me"} {
		if ok, err := m.Steer(context.Background(), testAgent, "k4", msg, true); !ok || err != nil {
			t.Fatalf("Steer(%q) while running = %v, %v", msg, ok, err)
		}
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got := roles(res.Messages); got != "user assistant toolResult toolResult user assistant" {
		t.Fatalf("messages %q", got)
	}
	if got := res.Messages[4].User.Text(); got != "rw me (rewritten)" {
		t.Errorf("steering message %q", got)
	}
	if r := res.Messages[3].ToolResult; r.Text() != SkippedForSteering {
		t.Errorf("second call %q", r.Text())
	}
	if ok, err := m.Steer(context.Background(), "", "k4", "too late", true); ok || err != nil {
		t.Errorf("runningOnly after the prompt = %v, %v", ok, err)
	}
	if !strings.Contains(e.logs.String(), "refused by a prePrompt hook") {
		t.Error("the refused steering message is not logged")
	}
}

// TestAbortDropsSteering: steering messages not yet taken do not outlive
// an abort (the user stopped the agent): the next prompt goes alone.
func TestAbortDropsSteering(t *testing.T) {
	e := newEnv(t, wireAnthropic)
	e.srv.Enqueue(llmtest.Text("hello"), llmtest.Text("alone"))
	e.prompt("hi")
	if ok, err := e.m.Steer(context.Background(), testAgent, "", "stale", false); !ok || err != nil {
		t.Fatalf("Steer = %v, %v", ok, err)
	}
	e.m.Abort(testAgent, "")
	if got := roles(e.prompt("next").Messages); got != "user assistant" {
		t.Errorf("messages %q: the steering message outlived the abort", got)
	}
}
