package llm

import "strings"

// TransformMessages prepares a history for model, which may differ from the
// models that wrote it (after a fallback):
//
//   - assistant messages that failed or were aborted are dropped: they are
//     incomplete turns the model should not see;
//   - thinking written by another model becomes plain text (empty thinking
//     and redacted thinking are dropped), since signatures only hold for
//     the model that made them;
//   - tool call ids written by another model go through normalizeID (if not
//     nil), and their tool results follow;
//   - a tool call left without a result (the turn was interrupted) gets an
//     error result "No result provided", because providers reject a call
//     without its result.
//
// The input is not modified.
func TransformMessages(msgs []Message, model Model, normalizeID func(string) string) []Message {
	idMap := map[string]string{}
	out := make([]Message, 0, len(msgs))
	var pending []Content
	answered := map[string]bool{}
	flush := func() {
		for _, tc := range pending {
			if !answered[tc.ID] {
				out = append(out, Message{ToolResult: &ToolResultMessage{
					ToolCallID: tc.ID, ToolName: tc.Name,
					Content: []Content{Text("No result provided")},
					IsError: true, Timestamp: Now(),
				}})
			}
		}
		pending = nil
		answered = map[string]bool{}
	}
	for _, m := range msgs {
		switch {
		case m.Assistant != nil:
			flush()
			a := m.Assistant
			if a.StopReason == StopReasonError || a.StopReason == StopReasonAborted {
				continue
			}
			same := a.Provider == model.Provider && a.API == model.API && a.Model == model.ID
			c := *a
			c.Content = make([]Content, 0, len(a.Content))
			for _, b := range a.Content {
				switch b.Type {
				case ContentThinking:
					if same {
						c.Content = append(c.Content, b)
					} else if !b.Redacted && strings.TrimSpace(b.Thinking) != "" {
						c.Content = append(c.Content, Text(b.Thinking))
					}
				case ContentToolCall:
					if !same && normalizeID != nil {
						if id := normalizeID(b.ID); id != b.ID {
							idMap[b.ID] = id
							b.ID = id
						}
					}
					c.Content = append(c.Content, b)
					pending = append(pending, b)
				default:
					c.Content = append(c.Content, b)
				}
			}
			out = append(out, Message{Assistant: &c})
		case m.ToolResult != nil:
			r := m.ToolResult
			if id, ok := idMap[r.ToolCallID]; ok {
				c := *r
				c.ToolCallID = id
				r = &c
			}
			answered[r.ToolCallID] = true
			out = append(out, Message{ToolResult: r})
		case m.User != nil:
			flush()
			out = append(out, m)
		}
	}
	// Trailing calls without results are left alone: the caller may be
	// about to run them.
	return out
}
