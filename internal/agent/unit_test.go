package agent

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/beige-dev/beige/internal/llm"
	"github.com/beige-dev/beige/internal/llm/llmtest"
	"github.com/beige-dev/beige/internal/proto"
)

// recordingModel returns a fixed reply (or error) and keeps the contexts it got.
type recordingModel struct {
	reply *llm.AssistantMessage
	err   error

	mu   sync.Mutex
	seen []llm.Context
}

func (m *recordingModel) Info() llm.Model {
	return llm.Model{ID: "rec", Provider: "fake", API: "fake", ContextWindow: 8000}
}

func (m *recordingModel) Stream(ctx context.Context, c llm.Context, emit func(llm.Event)) (*llm.AssistantMessage, error) {
	m.mu.Lock()
	m.seen = append(m.seen, c)
	m.mu.Unlock()
	if m.reply == nil {
		return nil, m.err
	}
	return m.reply.Clone(), m.err
}

func TestLoopWithoutToolsOrPersistence(t *testing.T) {
	l := &Loop{Model: instantModel{}}
	res, err := l.Run(context.Background(), nil, llm.UserText("hi"), nil)
	if err != nil {
		t.Fatal(err)
	}
	// instantModel calls exec, which does not exist here.
	tr := res.Messages[2].ToolResult
	if !tr.IsError || !strings.Contains(tr.Text(), "no tools are available") || res.Text != "Here is what I found." {
		t.Errorf("%q / %q", tr.Text(), res.Text)
	}
}

func TestLoopModelWithoutMessage(t *testing.T) {
	m := &recordingModel{err: errors.New("all models exhausted")}
	l := &Loop{Model: m}
	res, err := l.Run(context.Background(), nil, llm.UserText("hi"), nil)
	if err == nil || !strings.Contains(err.Error(), "all models exhausted") {
		t.Fatalf("err %v", err)
	}
	a := res.Messages[1].Assistant
	if a.StopReason != llm.StopReasonError || a.ErrorMessage != "all models exhausted" || a.Provider != "fake" {
		t.Errorf("made-up reply %+v", a)
	}
	// Neither a reply nor an error.
	m.err = nil
	if _, err := l.Run(context.Background(), nil, llm.UserText("hi"), nil); err == nil {
		t.Error("no error for no reply")
	}
}

func TestLoopRecordFailureStops(t *testing.T) {
	l := &Loop{Model: instantModel{}, Tools: instantTools{}, Record: func(m llm.Message) error {
		if m.ToolResult != nil {
			return errors.New("disk full")
		}
		return nil
	}}
	_, err := l.Run(context.Background(), nil, llm.UserText("hi"), nil)
	if err == nil || !strings.Contains(err.Error(), "record toolResult message: disk full") {
		t.Errorf("err %v", err)
	}
}

func TestSummarizeBudget(t *testing.T) {
	m := &recordingModel{reply: &llm.AssistantMessage{Content: []llm.Content{llm.Text("S")}, StopReason: llm.StopReasonStop}}
	c := &Compactor{Model: m} // window 8000: budget (8000-2000-512)*4 characters
	msgs := []llm.Message{SummaryMessage("EARLIER-SUMMARY", 0)}
	for i := range 40 {
		msgs = append(msgs, llm.UserText(strings.Repeat("q", 1000)+string(rune('A'+i%26))))
	}
	msgs = append(msgs, llm.UserText("NEWEST"))
	if _, _, err := c.Summarize(context.Background(), msgs); err != nil {
		t.Fatal(err)
	}
	sent := m.seen[0].Messages[0].User.Text()
	if !strings.Contains(sent, "EARLIER-SUMMARY") || !strings.Contains(sent, "NEWEST") ||
		!strings.Contains(sent, "oldest part of the conversation was left out") {
		t.Errorf("transcript kept the wrong parts")
	}
	if len(sent) > (8000-2000-512)*4+4000 {
		t.Errorf("transcript %d characters", len(sent))
	}
	// An empty summary is an error.
	m.reply.Content = nil
	if _, _, err := c.Summarize(context.Background(), msgs); err == nil {
		t.Error("empty summary accepted")
	}
}

// The core tools' own adapter is tested in internal/gateway
// (TestCoreToolsAdapter); here, what the loop gets of a result.
func TestFromToolResult(t *testing.T) {
	// Images are converted.
	o := FromToolResult(proto.ToolResult{Content: []proto.Content{{Type: "image", Data: "aGk=", MimeType: "image/png"}, {Type: "text", Text: "t"}}})
	if o.Content[0].Type != llm.ContentImage || o.Content[0].MimeType != "image/png" || o.Content[1].Text != "t" {
		t.Errorf("converted %+v", o)
	}
}

func TestModelChangeEntry(t *testing.T) {
	e := newEnv(t, wireAnthropic)
	e.prompt("one")
	other := e.model
	other.ID = "claude-other"
	e.configure(func(s *AgentSetup) { s.Model = ProviderModel{Provider: e.prov, Model: other} })
	e.srv.Enqueue(llmtest.Text("from the other"))
	e.prompt("two")
	var changes []string
	for _, l := range sessionLines(t, sessionFileOf(t, e, DefaultSessionKey(testAgent))) {
		if l["type"] == "model_change" {
			changes = append(changes, l["modelId"].(string))
		}
	}
	if strings.Join(changes, ",") != "claude-test,claude-other" {
		t.Errorf("model changes %v", changes)
	}
	// Resuming does not repeat it.
	e.restart()
	e.prompt("three")
	n := 0
	for _, l := range sessionLines(t, sessionFileOf(t, e, DefaultSessionKey(testAgent))) {
		if l["type"] == "model_change" {
			n++
		}
	}
	if n != 2 {
		t.Errorf("%d model changes after restart", n)
	}
}
