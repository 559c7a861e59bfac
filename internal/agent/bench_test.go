package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/beige-dev/beige/internal/llm"
)

// instantModel answers at once: a tool call when the last message is the
// user's, the final text after a tool result.
type instantModel struct{}

func (instantModel) Info() llm.Model {
	return llm.Model{ID: "instant", API: "fake", Provider: "fake", ContextWindow: 200000, Input: []string{"text"}}
}

func (instantModel) Stream(ctx context.Context, c llm.Context, emit func(llm.Event)) (*llm.AssistantMessage, error) {
	msg := &llm.AssistantMessage{API: "fake", Provider: "fake", Model: "instant", StopReason: llm.StopReasonStop,
		Usage: llm.Usage{Input: 1000, Output: 50}, Timestamp: llm.Now()}
	if last := c.Messages[len(c.Messages)-1]; last.ToolResult == nil {
		msg.Content = []llm.Content{llm.Text("Let me check."),
			llm.ToolCallContent("call_1", "exec", json.RawMessage(`{"command":"ls -la"}`))}
		msg.StopReason = llm.StopReasonToolUse
	} else {
		msg.Content = []llm.Content{llm.Text("Here is what I found.")}
	}
	if emit != nil {
		emit(llm.Event{Type: llm.EventStart})
		emit(llm.Event{Type: llm.EventDone, Reason: string(msg.StopReason), Message: msg})
	}
	return msg, nil
}

// instantTools answers every call at once.
type instantTools struct{}

func (instantTools) Definitions() []llm.Tool {
	return []llm.Tool{{Name: "exec", Description: "run", Parameters: json.RawMessage(`{"type":"object"}`)}}
}

func (instantTools) Run(ctx context.Context, c ToolCall) ToolOutcome {
	return TextOutcome("Exit code: 0\nfile1\nfile2", false)
}

func history(n int) []llm.Message {
	var h []llm.Message
	for i := range n / 2 {
		h = append(h, llm.UserText(fmt.Sprintf("question %d %s", i, strings.Repeat("x", 200))))
		h = append(h, llm.Message{Assistant: &llm.AssistantMessage{Content: []llm.Content{llm.Text("answer")},
			StopReason: llm.StopReasonStop, Usage: llm.Usage{Input: 1000}, Timestamp: llm.Now()}})
	}
	return h
}

// BenchmarkLoopOverhead measures the loop's own cost per turn (one model
// call and its tool call), with the model and the tools answering
// instantly in process: one prompt is two turns.
func BenchmarkLoopOverhead(b *testing.B) {
	hist := history(40)
	comp := &Compactor{Model: instantModel{}}
	l := &Loop{
		Model: instantModel{}, Tools: instantTools{}, SystemPrompt: strings.Repeat("s", 4000),
		Compact: func(ctx context.Context, msgs []llm.Message) ([]llm.Message, *Compaction, error) {
			comp.Plan(msgs, EstimateTokens("", nil, msgs, 0), false)
			return msgs, nil, nil
		},
	}
	opts := &PromptOptions{OnEvent: func(llm.Event) {}, OnMessage: func(llm.Message) {}}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		res, err := l.Run(ctx, hist, llm.UserText("list my files"), opts)
		if err != nil || res.ModelCalls != 2 {
			b.Fatal(res, err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(2*b.N), "ns/turn")
}

// BenchmarkManagerTurn is the same through the Manager: the session's
// turn, the system prompt, the compaction check and the session file
// writes (three entries per turn) included. A new session every 25
// prompts keeps the history bounded.
func BenchmarkManagerTurn(b *testing.B) {
	m, err := NewManager(ManagerConfig{
		SessionsDir: filepath.Join(b.TempDir(), "sessions"),
		Agents: func(ctx context.Context, name string) (*AgentSetup, error) {
			return &AgentSetup{Model: instantModel{}, Tools: instantTools{}, ToolContext: strings.Repeat("t", 2000)}, nil
		},
	})
	if err != nil {
		b.Fatal(err)
	}
	defer m.Close()
	ctx := context.Background()
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if i%25 == 0 {
			if err := m.NewSession(ctx, "bench", ""); err != nil {
				b.Fatal(err)
			}
		}
		i++
		if _, err := m.Prompt(ctx, "bench", "", "list my files", nil); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(2*b.N), "ns/turn")
}
