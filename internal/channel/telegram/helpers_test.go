package telegram

import (
	"path/filepath"
	"testing"

	"github.com/beige-dev/beige/internal/audit"
	"github.com/beige-dev/beige/internal/llm"
)

func newAuditLogger(t *testing.T, dir string) *audit.Logger {
	t.Helper()
	lg, err := audit.Open(filepath.Join(dir, "audit.jsonl"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lg.Close() })
	return lg
}

func llmStart() llm.Event         { return llm.Event{Type: llm.EventStart} }
func llmDelta(s string) llm.Event { return llm.Event{Type: llm.EventTextDelta, Delta: s} }
func llmDone() llm.Event          { return llm.Event{Type: llm.EventDone, Reason: "stop"} }
