package agent

import (
	"context"
	"testing"

	"github.com/beige-dev/beige/internal/llm/llmtest"
)

// TestHistory: a session's history is every message of its file in order,
// after a restart too; a session never used has none; an unknown agent is
// an error.
func TestHistory(t *testing.T) {
	e := newEnv(t, wireAnthropic)
	e.srv.Enqueue(llmtest.ToolCall("exec", map[string]any{"command": "echo hi"}), llmtest.Text("done"))
	e.prompt("run it")
	e.srv.Enqueue(llmtest.Text("again"))
	e.prompt("once more")
	e.restart()
	msgs, err := e.m.History(context.Background(), testAgent, "")
	if err != nil {
		t.Fatal(err)
	}
	if got := roles(msgs); got != "user assistant toolResult assistant user assistant" {
		t.Fatalf("roles %q", got)
	}
	if msgs[3].Assistant.Content[0].Text != "done" || msgs[5].Assistant.Content[0].Text != "again" {
		t.Errorf("answers: %+v %+v", msgs[3].Assistant, msgs[5].Assistant)
	}
	if msgs, err := e.m.History(context.Background(), testAgent, "api:other"); err != nil || msgs != nil {
		t.Errorf("unused session: %v %v", msgs, err)
	}
	if _, err := e.m.History(context.Background(), "nobody", ""); err == nil {
		t.Errorf("unknown agent: %v", err)
	}
}
