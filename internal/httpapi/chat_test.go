package httpapi

import (
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/beige-dev/beige/internal/llm"
	"github.com/beige-dev/beige/internal/proto"
	"github.com/beige-dev/beige/internal/proto/llmproto"
)

// TestChatStreamRequestDecoding is which chat/stream bodies are read and
// which refused: pi's context shapes are accepted whatever they carry; our
// own fields stay strict, since a misspelt one would silently change the
// call.
func TestChatStreamRequestDecoding(t *testing.T) {
	const ctx = `"context":{"messages":[{"role":"user","content":"hi"}]}`
	for _, tc := range []struct {
		name, body string
		err        string // "" for accepted
		reasoning  *llmproto.Reasoning
	}{
		{"bool true", `{"provider":"p","modelId":"m",` + ctx + `,"options":{"reasoning":true}}`, "", &llmproto.Reasoning{On: true}},
		{"bool false", `{"provider":"p","modelId":"m",` + ctx + `,"options":{"reasoning":false}}`, "", &llmproto.Reasoning{}},
		{"null", `{"provider":"p","modelId":"m",` + ctx + `,"options":{"reasoning":null}}`, "", nil},
		{"level minimal", `{"provider":"p","modelId":"m",` + ctx + `,"options":{"reasoning":"minimal"}}`, "", &llmproto.Reasoning{Level: llm.ThinkingMinimal, On: true}},
		{"level xhigh", `{"provider":"p","modelId":"m",` + ctx + `,"options":{"reasoning":"xhigh"}}`, "", &llmproto.Reasoning{Level: llm.ThinkingXHigh, On: true}},
		{"level off", `{"provider":"p","modelId":"m",` + ctx + `,"options":{"reasoning":"off"}}`, "", &llmproto.Reasoning{}},
		{"unknown level", `{"provider":"p","modelId":"m",` + ctx + `,"options":{"reasoning":"hgih"}}`, "options.reasoning", nil},
		{"empty level", `{"provider":"p","modelId":"m",` + ctx + `,"options":{"reasoning":""}}`, "options.reasoning", nil},
		{"number", `{"provider":"p","modelId":"m",` + ctx + `,"options":{"reasoning":1}}`, "options.reasoning", nil},
		{"tool label", `{"provider":"p","modelId":"m","context":{"messages":[{"role":"user","content":"hi"}],"tools":[{"name":"read","label":"Read File","description":"d","parameters":{"type":"object"}}]}}`, "", nil},
		{"pi fields everywhere", `{"provider":"p","modelId":"m","context":{"systemPrompt":"s","future":1,"messages":[` +
			`{"role":"user","content":[{"type":"text","text":"hi","extra":true}],"timestamp":1},` +
			`{"role":"assistant","content":[],"api":"anthropic-messages","provider":"p","model":"m","usage":{"input":1,"output":2,"cacheRead":0,"cacheWrite":0,"totalTokens":3,"cost":{"input":0,"output":0,"cacheRead":0,"cacheWrite":0,"total":0}},"stopReason":"stop","timestamp":2,"responseId":"r"},` +
			`{"role":"toolResult","toolCallId":"c","toolName":"read","content":[],"details":{"x":1},"isError":false,"timestamp":3}]}}`, "", nil},
		{"typo of our field", `{"provider":"p","model":"m",` + ctx + `}`, `unknown field "model"`, nil},
		{"typo of an option", `{"provider":"p","modelId":"m",` + ctx + `,"options":{"maxToken":5}}`, `unknown field "maxToken"`, nil},
		{"wrong type in the context", `{"provider":"p","modelId":"m","context":{"messages":"hi"}}`, "invalid JSON body", nil},
		{"unknown role", `{"provider":"p","modelId":"m","context":{"messages":[{"role":"system","content":"x"}]}}`, "unknown role", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest("POST", "/api/chat/stream", strings.NewReader(tc.body))
			var req llmproto.ChatStreamRequest
			err := DecodeBody(r, &req)
			if tc.err == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				var got *llmproto.Reasoning
				if req.Options != nil {
					got = req.Options.Reasoning
				}
				if (got == nil) != (tc.reasoning == nil) || got != nil && *got != *tc.reasoning {
					t.Errorf("reasoning %+v, want %+v", got, tc.reasoning)
				}
				return
			}
			var pe *proto.Error
			if err == nil || !asProto(err, &pe) || pe.Status != 400 || !strings.Contains(pe.Msg, tc.err) {
				t.Fatalf("error %v, want a 400 saying %q", err, tc.err)
			}
		})
	}
}

func asProto(err error, pe **proto.Error) bool {
	p, ok := err.(*proto.Error)
	*pe = p
	return ok
}

// TestExecRequestActiveModel: the original client's exec body, with
// activeModel, is read.
func TestExecRequestActiveModel(t *testing.T) {
	r := httptest.NewRequest("POST", "/api/agents/a/exec", strings.NewReader(`{"tool":"read","params":{"path":"a.txt"},"activeModel":{"provider":"anthropic","modelId":"claude-sonnet-4-5"}}`))
	var req proto.ExecRequest
	if err := DecodeBody(r, &req); err != nil {
		t.Fatal(err)
	}
	if got := req.ActiveModel.String(); got != "anthropic/claude-sonnet-4-5" {
		t.Errorf("activeModel %q", got)
	}
}
