package anthropic_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"regexp"
	"testing"

	"github.com/beige-dev/beige/internal/llm"
	"github.com/beige-dev/beige/internal/llm/anthropic"
	"github.com/beige-dev/beige/internal/llm/llmtest"
)

// FuzzStream feeds the Messages stream parser (SDK events to llm events,
// Provider.Stream) arbitrary server answers: an SSE stream, a JSON body
// with status 200, or an error status.
func FuzzStream(f *testing.F) {
	llmtest.AddStreams(f, "a_")
	f.Add(uint8(1), []byte(`{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`))
	f.Add(uint8(2), []byte(`{"type":"error","error":{"type":"rate_limit_error","message":"slow down"}}`))
	f.Add(uint8(0), []byte("event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":7,\"delta\":{\"type\":\"text_delta\",\"text\":\"x\"}}\n\n"))
	f.Fuzz(func(t *testing.T, mode uint8, body []byte) {
		tr := llmtest.BodyTransport{Status: 200, CType: "text/event-stream", Body: body}
		switch mode % 4 {
		case 1:
			tr.CType = "application/json"
		case 2:
			tr.Status, tr.CType = 429, "application/json"
		case 3:
			tr.Status, tr.CType = 502, "text/html"
		}
		p, err := llm.NewProvider(llm.ProviderConfig{
			Name: "anthropic", APIKey: "k", BaseURL: "http://fuzz.invalid", API: anthropic.API,
			HTTPClient: &http.Client{Transport: tr},
		})
		if err != nil {
			t.Fatal(err)
		}
		m := llm.Lookup("anthropic", anthropic.API, "claude-sonnet-4-5", "http://fuzz.invalid")
		req := llm.Request{Model: m, Context: llm.Context{Messages: []llm.Message{llm.UserText("hi")}}}
		llmtest.CheckStream(t, p, req, body)
	})
}

// captureTransport keeps the request body and answers a minimal stream.
type captureTransport struct{ body *[]byte }

const minimalStream = "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"m\",\"type\":\"message\",\"role\":\"assistant\",\"content\":[],\"model\":\"x\",\"usage\":{\"input_tokens\":1,\"output_tokens\":1}}}\n\n" +
	"event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":1}}\n\n" +
	"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"

func (t captureTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	*t.body, _ = io.ReadAll(req.Body)
	req.Body.Close()
	return llmtest.BodyTransport{Status: 200, CType: "text/event-stream", Body: []byte(minimalStream)}.RoundTrip(req)
}

var toolIDRE = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

// normalizedID is what Anthropic is sent for a tool call id (the
// documented rule: other characters become "_", at most 64, never empty).
func normalizedID(id string) string {
	b := []byte(id)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			b[i] = '_'
		}
	}
	if len(b) > 64 {
		b = b[:64]
	}
	if len(b) == 0 {
		return "tool_call"
	}
	return string(b)
}

// FuzzRequest converts an arbitrary conversation (a stored session: model
// output and tool results, hostile) into a Messages request: no panic, the
// body is JSON, and every tool id is one Anthropic accepts.
func FuzzRequest(f *testing.F) {
	for _, s := range []string{
		`{"systemPrompt":"s","messages":[{"role":"user","content":"hi"}]}`,
		`{"messages":[{"role":"user","content":[{"type":"text","text":"a"},{"type":"image","data":"AA==","mimeType":"image/png"}]}]}`,
		`{"messages":[{"role":"user","content":"q"},{"role":"assistant","content":[{"type":"thinking","thinking":"t","thinkingSignature":"sig"},{"type":"toolCall","id":"call.1:x/y","name":"exec","arguments":{"command":"ls"}}],"stopReason":"toolUse","provider":"openai","model":"gpt"},{"role":"toolResult","toolCallId":"call.1:x/y","toolName":"exec","content":[{"type":"text","text":"out"}],"isError":false}]}`,
		`{"messages":[{"role":"assistant","content":[{"type":"toolCall","id":"","name":"","arguments":{}}]},{"role":"toolResult","toolCallId":"","content":[]}]}`,
		`{"tools":[{"name":"exec","description":"d","parameters":{"type":"object","properties":{"command":{"type":"string"}}}}],"messages":[{"role":"user","content":"x"}]}`,
		`{"messages":[{"role":"assistant","content":[{"type":"redactedThinking","text":"abc"},{"type":"text","text":""}]}]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var c llm.Context
		if json.Unmarshal(data, &c) != nil {
			return
		}
		var sent []byte
		p, err := llm.NewProvider(llm.ProviderConfig{
			Name: "anthropic", APIKey: "k", BaseURL: "http://fuzz.invalid", API: anthropic.API,
			HTTPClient: &http.Client{Transport: captureTransport{&sent}},
		})
		if err != nil {
			t.Fatal(err)
		}
		m := llm.Lookup("anthropic", anthropic.API, "claude-sonnet-4-5", "http://fuzz.invalid")
		p.Stream(context.Background(), llm.Request{Model: m, Context: c}, func(llm.Event) {})
		if sent == nil {
			return // refused before sending
		}
		var body struct {
			Messages []struct {
				Content json.RawMessage `json:"content"`
			} `json:"messages"`
		}
		if err := json.Unmarshal(sent, &body); err != nil {
			t.Fatalf("the request is not JSON: %v\n%s", err, sent)
		}
		// Every tool call's id is one Anthropic accepts, and so is the id
		// of every result of a call the request holds. (A result without
		// its call, from a damaged session, keeps its id.)
		calls := map[string]bool{}
		var results []string
		for _, msg := range body.Messages {
			var blocks []struct {
				Type      string `json:"type"`
				ID        string `json:"id"`
				ToolUseID string `json:"tool_use_id"`
			}
			if json.Unmarshal(msg.Content, &blocks) != nil {
				continue // a string
			}
			for _, b := range blocks {
				switch b.Type {
				case "tool_use":
					if !toolIDRE.MatchString(b.ID) {
						t.Fatalf("tool_use id %q", b.ID)
					}
					calls[b.ID] = true
				case "tool_result":
					results = append(results, b.ToolUseID)
				}
			}
		}
		sentCalls := map[string]bool{} // the original ids of the calls sent
		for _, m := range c.Messages {
			if m.Assistant == nil {
				continue
			}
			for _, b := range m.Assistant.Content {
				if b.Type == llm.ContentToolCall && calls[normalizedID(b.ID)] {
					sentCalls[b.ID] = true
				}
			}
		}
		for _, id := range results {
			if !calls[id] && sentCalls[id] {
				t.Fatalf("tool_result tool_use_id %q names a call sent under another id", id)
			}
		}
	})
}
