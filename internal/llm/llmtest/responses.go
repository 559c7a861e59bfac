package llmtest

import (
	"fmt"
	"testing"
)

// NewOpenAIResponses starts an OpenAI Responses API server (POST
// /v1/responses). It closes when the test ends.
func NewOpenAIResponses(t testing.TB) *Server { return newServer(t, responsesWire{}) }

// responsesWire speaks the OpenAI Responses streaming format:
// response.created, response.in_progress, then per output item
// response.output_item.added, its deltas (reasoning_summary_text,
// output_text, function_call_arguments) and response.output_item.done,
// then response.completed (or response.incomplete for a "length" stop).
type responsesWire struct{}

func (responsesWire) basePath() string { return "/v1" }
func (responsesWire) path() string     { return "/v1/responses" }

func (responsesWire) defaultError(status int) (string, string) {
	return openaiWire{}.defaultError(status)
}

func (responsesWire) errorBody(typ, msg string) string { return openaiWire{}.errorBody(typ, msg) }

func (responsesWire) streamError(typ, msg string) sse {
	return sse{"error", mustJSON(map[string]any{
		"type": "error", "code": typ, "message": msg, "param": nil, "sequence_number": 9999,
	})}
}

func (responsesWire) events(req Recorded, r Response) []sse {
	respID := fmt.Sprintf("resp_%04d", req.Seq)
	seq := 0
	var out []sse
	ev := func(name string, v map[string]any) {
		v["type"] = name
		v["sequence_number"] = seq
		seq++
		out = append(out, sse{name, mustJSON(v)})
	}
	response := func(status string, output []any) map[string]any {
		return map[string]any{"id": respID, "object": "response", "created_at": 1700000000,
			"status": status, "model": req.Model(), "output": output}
	}
	ev("response.created", map[string]any{"response": response("in_progress", []any{})})
	ev("response.in_progress", map[string]any{"response": response("in_progress", []any{})})

	var output []any
	for i, b := range r.Blocks {
		var item map[string]any
		switch b.Kind {
		case "thinking":
			id := fmt.Sprintf("rs_%02d_%02d", req.Seq, i)
			ev("response.output_item.added", map[string]any{"output_index": i,
				"item": map[string]any{"type": "reasoning", "id": id, "summary": []any{}}})
			ev("response.reasoning_summary_part.added", map[string]any{"item_id": id, "output_index": i,
				"summary_index": 0, "part": map[string]any{"type": "summary_text", "text": ""}})
			for _, p := range split(b.Text, r.chunk()) {
				ev("response.reasoning_summary_text.delta", map[string]any{"item_id": id, "output_index": i,
					"summary_index": 0, "delta": p})
			}
			ev("response.reasoning_summary_text.done", map[string]any{"item_id": id, "output_index": i,
				"summary_index": 0, "text": b.Text})
			ev("response.reasoning_summary_part.done", map[string]any{"item_id": id, "output_index": i,
				"summary_index": 0, "part": map[string]any{"type": "summary_text", "text": b.Text}})
			item = map[string]any{"type": "reasoning", "id": id,
				"summary": []any{map[string]any{"type": "summary_text", "text": b.Text}}}
		case "toolCall":
			id := fmt.Sprintf("fc_%02d_%02d", req.Seq, i)
			callID := b.ID
			if callID == "" {
				callID = fmt.Sprintf("call_%02d_%02d", req.Seq, i)
			}
			ev("response.output_item.added", map[string]any{"output_index": i, "item": map[string]any{
				"type": "function_call", "id": id, "call_id": callID, "name": b.Name,
				"arguments": "", "status": "in_progress"}})
			for _, p := range split(b.Args, 8) {
				ev("response.function_call_arguments.delta", map[string]any{"item_id": id, "output_index": i, "delta": p})
			}
			ev("response.function_call_arguments.done", map[string]any{"item_id": id, "output_index": i, "arguments": b.Args})
			item = map[string]any{"type": "function_call", "id": id, "call_id": callID, "name": b.Name,
				"arguments": b.Args, "status": "completed"}
		case "redactedThinking":
			continue
		default:
			id := fmt.Sprintf("msg_%02d_%02d", req.Seq, i)
			ev("response.output_item.added", map[string]any{"output_index": i, "item": map[string]any{
				"type": "message", "id": id, "status": "in_progress", "role": "assistant", "content": []any{}}})
			part := func(text string) map[string]any {
				return map[string]any{"type": "output_text", "text": text, "annotations": []any{}}
			}
			ev("response.content_part.added", map[string]any{"item_id": id, "output_index": i,
				"content_index": 0, "part": part("")})
			for _, p := range split(b.Text, r.chunk()) {
				ev("response.output_text.delta", map[string]any{"item_id": id, "output_index": i,
					"content_index": 0, "delta": p})
			}
			ev("response.output_text.done", map[string]any{"item_id": id, "output_index": i,
				"content_index": 0, "text": b.Text})
			ev("response.content_part.done", map[string]any{"item_id": id, "output_index": i,
				"content_index": 0, "part": part(b.Text)})
			item = map[string]any{"type": "message", "id": id, "status": "completed", "role": "assistant",
				"content": []any{part(b.Text)}}
		}
		ev("response.output_item.done", map[string]any{"output_index": i, "item": item})
		output = append(output, item)
	}
	u := r.usage()
	final := response("completed", output)
	final["usage"] = map[string]any{
		"input_tokens":          u.Input + u.CacheRead,
		"input_tokens_details":  map[string]any{"cached_tokens": u.CacheRead},
		"output_tokens":         u.Output,
		"output_tokens_details": map[string]any{"reasoning_tokens": 0},
		"total_tokens":          u.Input + u.CacheRead + u.Output,
	}
	switch r.stop() {
	case "length":
		final["status"] = "incomplete"
		final["incomplete_details"] = map[string]any{"reason": "max_output_tokens"}
		ev("response.incomplete", map[string]any{"response": final})
	case "content_filter":
		final["status"] = "incomplete"
		final["incomplete_details"] = map[string]any{"reason": "content_filter"}
		ev("response.incomplete", map[string]any{"response": final})
	case "failed":
		final["status"] = "failed"
		final["error"] = map[string]any{"code": "server_error", "message": "The model failed to respond"}
		ev("response.failed", map[string]any{"response": final})
	default:
		ev("response.completed", map[string]any{"response": final})
	}
	return out
}
