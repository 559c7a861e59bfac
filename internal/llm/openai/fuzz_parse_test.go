package openai_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"testing"

	"github.com/beige-dev/beige/internal/llm"
	"github.com/beige-dev/beige/internal/llm/llmtest"
	"github.com/beige-dev/beige/internal/llm/openai"
)

// fuzzProvider runs one provider over the fuzzer's server answer.
func fuzzProvider(t *testing.T, api, name, base string, mode uint8, body []byte) {
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
		Name: name, APIKey: "k", BaseURL: base, API: api,
		HTTPClient: &http.Client{Transport: tr},
	})
	if err != nil {
		t.Fatal(err)
	}
	req := llm.Request{
		Model:   llm.Lookup(name, api, "gpt-4o", base),
		Context: llm.Context{Messages: []llm.Message{llm.UserText("hi")}},
	}
	llmtest.CheckStream(t, p, req, body)
}

// FuzzChatStream feeds the chat completions stream parser (chunks to llm
// events) arbitrary server answers, as the servers that speak it send
// them (OpenAI, Ollama, vLLM, DeepSeek, OpenRouter, Mistral).
func FuzzChatStream(f *testing.F) {
	llmtest.AddStreams(f, "o_")
	f.Add(uint8(1), []byte(`{"error":{"code":"1113","message":"Insufficient balance or no resource package. Please recharge."}}`))
	f.Add(uint8(0), []byte("data: {\"object\":\"error\",\"message\":\"bad\",\"code\":400}\n\n"))
	f.Add(uint8(0), []byte("data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":3,\"function\":{\"arguments\":\"{\"}}]}}]}\n\ndata: [DONE]\n\n"))
	f.Fuzz(func(t *testing.T, mode uint8, body []byte) {
		fuzzProvider(t, openai.API, "local", "http://fuzz.invalid/v1", mode, body)
	})
}

// FuzzResponsesStream feeds the Responses stream parser arbitrary server
// answers.
func FuzzResponsesStream(f *testing.F) {
	llmtest.AddStreams(f, "r_")
	f.Add(uint8(2), []byte(`{"error":{"message":"Rate limit reached","type":"requests","code":"rate_limit_exceeded"}}`))
	f.Fuzz(func(t *testing.T, mode uint8, body []byte) {
		fuzzProvider(t, openai.ResponsesAPI, "openai", "http://fuzz.invalid/v1", mode, body)
	})
}

// captureTransport keeps the request body and answers an empty stream.
type captureTransport struct{ body *[]byte }

func (t captureTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	*t.body, _ = io.ReadAll(req.Body)
	req.Body.Close()
	return llmtest.BodyTransport{Status: 200, CType: "text/event-stream", Body: []byte("data: [DONE]\n\n")}.RoundTrip(req)
}

var contextSeeds = []string{
	`{"systemPrompt":"s","messages":[{"role":"user","content":"hi"}]}`,
	`{"messages":[{"role":"user","content":[{"type":"text","text":"a"},{"type":"image","data":"AA==","mimeType":"image/png"}]}]}`,
	`{"messages":[{"role":"user","content":"q"},{"role":"assistant","content":[{"type":"thinking","thinking":"t","thinkingSignature":"sig"},{"type":"toolCall","id":"toolu_01","name":"exec","arguments":{"command":"ls"}}],"stopReason":"toolUse","provider":"anthropic","model":"claude"},{"role":"toolResult","toolCallId":"toolu_01","toolName":"exec","content":[{"type":"text","text":"out"},{"type":"image","data":"AA==","mimeType":"image/png"}],"isError":true}]}`,
	`{"messages":[{"role":"assistant","content":[{"type":"toolCall","id":"","name":"","arguments":{}}]},{"role":"toolResult","toolCallId":"","content":[]}]}`,
	`{"tools":[{"name":"exec","description":"d","parameters":{"type":"object"}}],"messages":[{"role":"user","content":"x"}]}`,
	`{"messages":[{"role":"assistant","content":[{"type":"redactedThinking","text":"abc"},{"type":"text","text":""}],"stopReason":"error"}]}`,
}

// fuzzRequest converts an arbitrary conversation (a stored session: model
// output and tool results, hostile) into a request of api: no panic, and
// the body sent is one JSON object.
func fuzzRequest(f *testing.F, api, name string) {
	for _, s := range contextSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var c llm.Context
		if json.Unmarshal(data, &c) != nil {
			return
		}
		var sent []byte
		p, err := llm.NewProvider(llm.ProviderConfig{
			Name: name, APIKey: "k", BaseURL: "http://fuzz.invalid/v1", API: api,
			HTTPClient: &http.Client{Transport: captureTransport{&sent}},
		})
		if err != nil {
			t.Fatal(err)
		}
		req := llm.Request{Model: llm.Lookup(name, api, "gpt-4o", "http://fuzz.invalid/v1"), Context: c}
		p.Stream(context.Background(), req, func(llm.Event) {})
		if sent == nil {
			return // refused before sending
		}
		var body map[string]any
		if err := json.Unmarshal(sent, &body); err != nil {
			t.Fatalf("the request is not a JSON object: %v\n%s", err, sent)
		}
		if body["model"] != "gpt-4o" {
			t.Fatalf("model %v", body["model"])
		}
	})
}

// FuzzChatRequest converts conversations for chat completions (convert.go).
func FuzzChatRequest(f *testing.F) { fuzzRequest(f, openai.API, "local") }

// FuzzResponsesRequest converts conversations for the Responses API.
func FuzzResponsesRequest(f *testing.F) { fuzzRequest(f, openai.ResponsesAPI, "openai") }
