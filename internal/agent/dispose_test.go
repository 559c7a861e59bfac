package agent

import (
	"strings"
	"testing"

	"github.com/beige-dev/beige/internal/llm/llmtest"
)

// TestDispose: a disposed session is read again from its file at the next
// prompt, with its history; disposing a session not in memory says so.
func TestDispose(t *testing.T) {
	e := newEnv(t, wireAnthropic)
	if e.m.Dispose(testAgent, "") {
		t.Error("disposed a session that was never loaded")
	}
	e.srv.Enqueue(llmtest.Text("The answer is 42."))
	e.prompt("remember the number")
	if !e.m.Dispose(testAgent, "") {
		t.Fatal("the loaded session was not disposed")
	}
	before := strings.Count(e.logs.String(), "session resumed")
	e.srv.Enqueue(llmtest.Text("It was 42."))
	e.prompt("what was the number?")
	if got := strings.Count(e.logs.String(), "session resumed"); got != before+1 {
		t.Errorf("the session was not read again from its file (%d resumes)", got-before)
	}
	if all := e.srv.Last().AllText(); !strings.Contains(all, "remember the number") || !strings.Contains(all, "The answer is 42.") {
		t.Errorf("history lost after dispose: %s", all)
	}
}
