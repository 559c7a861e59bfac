package llmtest

import "fmt"

// openaiWire speaks the OpenAI chat completions streaming format: chunks
// of choices[0].delta (role, content, reasoning_content, tool_calls by
// index), a chunk with finish_reason, a usage chunk when the request asked
// for stream_options.include_usage, and data: [DONE].
type openaiWire struct{}

func (openaiWire) basePath() string { return "/v1" }
func (openaiWire) path() string     { return "/v1/chat/completions" }

func (openaiWire) defaultError(status int) (string, string) {
	switch status {
	case 400:
		return "invalid_request_error", "Invalid request"
	case 401:
		return "invalid_request_error", "Incorrect API key provided"
	case 403:
		return "invalid_request_error", "Project does not have access to model"
	case 404:
		return "invalid_request_error", "The model does not exist"
	case 429:
		return "requests", "Rate limit reached for requests"
	case 503:
		return "server_error", "The engine is currently overloaded, please try again later"
	}
	return "server_error", "The server had an error while processing your request"
}

func (openaiWire) errorBody(typ, msg string) string {
	return mustJSON(map[string]any{"error": map[string]any{
		"message": msg, "type": typ, "param": nil, "code": nil,
	}})
}

func (openaiWire) streamError(typ, msg string) sse {
	return sse{"", openaiWire{}.errorBody(typ, msg)}
}

func openaiFinish(neutral string) string {
	switch neutral {
	case "toolUse":
		return "tool_calls"
	}
	return neutral // "stop", "length", or a wire value
}

func (openaiWire) events(req Recorded, r Response) []sse {
	id := fmt.Sprintf("chatcmpl-%04d", req.Seq)
	model := req.Model()
	chunk := func(delta map[string]any, finish any) sse {
		return sse{"", mustJSON(map[string]any{
			"id": id, "object": "chat.completion.chunk", "created": 1700000000, "model": model,
			"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish, "logprobs": nil}},
		})}
	}
	out := []sse{chunk(map[string]any{"role": "assistant", "content": ""}, nil)}
	tool := 0
	for i, b := range r.Blocks {
		switch b.Kind {
		case "thinking":
			field := b.ReasoningField
			if field == "" {
				field = "reasoning_content"
			}
			for _, p := range split(b.Text, r.chunk()) {
				out = append(out, chunk(map[string]any{field: p}, nil))
			}
		case "toolCall":
			callID := b.ID
			if callID == "" {
				callID = fmt.Sprintf("call_%02d_%02d", req.Seq, i)
			}
			out = append(out, chunk(map[string]any{"tool_calls": []any{map[string]any{
				"index": tool, "id": callID, "type": "function",
				"function": map[string]any{"name": b.Name, "arguments": ""},
			}}}, nil))
			for _, p := range split(b.Args, 8) {
				out = append(out, chunk(map[string]any{"tool_calls": []any{map[string]any{
					"index": tool, "function": map[string]any{"arguments": p},
				}}}, nil))
			}
			if !r.toolIndexZero {
				tool++
			}
		case "redactedThinking":
		default:
			for _, p := range split(b.Text, r.chunk()) {
				out = append(out, chunk(map[string]any{"content": p}, nil))
			}
		}
	}
	out = append(out, chunk(map[string]any{}, openaiFinish(r.stop())))
	if so, _ := req.Body["stream_options"].(map[string]any); so["include_usage"] == true {
		u := r.usage()
		out = append(out, sse{"", mustJSON(map[string]any{
			"id": id, "object": "chat.completion.chunk", "created": 1700000000, "model": model,
			"choices": []any{},
			"usage": map[string]any{
				"prompt_tokens": u.Input + u.CacheRead, "completion_tokens": u.Output,
				"total_tokens":          u.Input + u.CacheRead + u.Output,
				"prompt_tokens_details": map[string]any{"cached_tokens": u.CacheRead},
			},
		})})
	}
	return append(out, sse{"", "[DONE]"})
}
