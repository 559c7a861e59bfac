package llmtest

import "fmt"

// anthropicWire speaks the Anthropic Messages streaming format:
// message_start, ping, content_block_start / content_block_delta… /
// content_block_stop per block, message_delta (stop_reason, usage),
// message_stop.
type anthropicWire struct{}

func (anthropicWire) basePath() string { return "" }
func (anthropicWire) path() string     { return "/v1/messages" }

func (anthropicWire) defaultError(status int) (string, string) {
	switch status {
	case 400:
		return "invalid_request_error", "Invalid request"
	case 401:
		return "authentication_error", "invalid x-api-key"
	case 403:
		return "permission_error", "Your API key does not have permission to use the specified resource."
	case 404:
		return "not_found_error", "Not found"
	case 413:
		return "request_too_large", "Request exceeds the maximum allowed number of bytes."
	case 429:
		return "rate_limit_error", "Number of request tokens has exceeded your per-minute rate limit"
	case 529:
		return "overloaded_error", "Overloaded"
	}
	return "api_error", "Internal server error"
}

func (anthropicWire) errorBody(typ, msg string) string {
	return mustJSON(map[string]any{
		"type":  "error",
		"error": map[string]any{"type": typ, "message": msg},
	})
}

func (anthropicWire) streamError(typ, msg string) sse {
	return sse{"error", anthropicWire{}.errorBody(typ, msg)}
}

func anthropicStop(neutral string) string {
	switch neutral {
	case "stop":
		return "end_turn"
	case "length":
		return "max_tokens"
	case "toolUse":
		return "tool_use"
	}
	return neutral
}

func (anthropicWire) events(req Recorded, r Response) []sse {
	u := r.usage()
	model := req.Model()
	ev := func(name string, v map[string]any) sse {
		v["type"] = name
		return sse{name, mustJSON(v)}
	}
	out := []sse{
		ev("message_start", map[string]any{"message": map[string]any{
			"id": fmt.Sprintf("msg_%04d", req.Seq), "type": "message", "role": "assistant",
			"model": model, "content": []any{}, "stop_reason": nil, "stop_sequence": nil,
			"usage": map[string]any{
				"input_tokens": u.Input, "output_tokens": 1,
				"cache_read_input_tokens": u.CacheRead, "cache_creation_input_tokens": u.CacheWrite,
			},
		}}),
		ev("ping", map[string]any{}),
	}
	for i, b := range r.Blocks {
		delta := func(d map[string]any) sse {
			return ev("content_block_delta", map[string]any{"index": i, "delta": d})
		}
		switch b.Kind {
		case "thinking":
			out = append(out, ev("content_block_start", map[string]any{"index": i,
				"content_block": map[string]any{"type": "thinking", "thinking": "", "signature": ""}}))
			for _, p := range split(b.Text, r.chunk()) {
				out = append(out, delta(map[string]any{"type": "thinking_delta", "thinking": p}))
			}
			sig := b.Signature
			if sig == "" {
				sig = fmt.Sprintf("sig-%d-%d", req.Seq, i)
			}
			out = append(out, delta(map[string]any{"type": "signature_delta", "signature": sig}))
		case "redactedThinking":
			out = append(out, ev("content_block_start", map[string]any{"index": i,
				"content_block": map[string]any{"type": "redacted_thinking", "data": b.Text}}))
		case "toolCall":
			id := b.ID
			if id == "" {
				id = fmt.Sprintf("toolu_%02d_%02d", req.Seq, i)
			}
			out = append(out, ev("content_block_start", map[string]any{"index": i,
				"content_block": map[string]any{"type": "tool_use", "id": id, "name": b.Name, "input": map[string]any{}}}))
			out = append(out, delta(map[string]any{"type": "input_json_delta", "partial_json": ""}))
			for _, p := range split(b.Args, 8) {
				out = append(out, delta(map[string]any{"type": "input_json_delta", "partial_json": p}))
			}
		default:
			out = append(out, ev("content_block_start", map[string]any{"index": i,
				"content_block": map[string]any{"type": "text", "text": ""}}))
			for _, p := range split(b.Text, r.chunk()) {
				out = append(out, delta(map[string]any{"type": "text_delta", "text": p}))
			}
		}
		out = append(out, ev("content_block_stop", map[string]any{"index": i}))
	}
	out = append(out,
		ev("message_delta", map[string]any{
			"delta": map[string]any{"stop_reason": anthropicStop(r.stop()), "stop_sequence": nil},
			"usage": map[string]any{
				"input_tokens": u.Input, "output_tokens": u.Output,
				"cache_read_input_tokens": u.CacheRead, "cache_creation_input_tokens": u.CacheWrite,
			},
		}),
		ev("message_stop", map[string]any{}),
	)
	return out
}
