package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"unicode/utf8"

	"github.com/beige-dev/beige/internal/proto"
	"github.com/beige-dev/beige/internal/proto/llmproto"
)

// bodyKinds are the request bodies DecodeBody reads, by route.
var bodyKinds = []func() any{
	func() any { return new(proto.PromptRequest) },        // POST /api/agents/{name}/prompt
	func() any { return new(llmproto.ChatStreamRequest) }, // POST /api/chat/stream
	func() any { return new(proto.SessionModelRequest) },  // PATCH .../sessions/{key}/model
	func() any { return new(proto.PrePromptRequest) },     // POST .../hooks/pre-prompt
	func() any { return new(proto.PostResponseRequest) },  // POST .../hooks/post-response
	func() any { return new(proto.SessionHookRequest) },   // POST .../hooks/session-created|disposed
}

func decodeBytes(body []byte, v any) error {
	r := httptest.NewRequest("POST", "http://127.0.0.1:7433/x", bytes.NewReader(body))
	r.Body = http.MaxBytesReader(httptest.NewRecorder(), r.Body, MaxBodyBytes)
	return DecodeBody(r, v)
}

// FuzzDecodeBody decodes the bodies of prompt, chat/stream, PATCH model and
// the hooks: no panic; a refusal is a client error (400 or 413) whose
// message is bounded and valid UTF-8; what decodes encodes and decodes back
// to the same JSON.
func FuzzDecodeBody(f *testing.F) {
	seeds := [][]string{
		{`{"message":"hi","sessionKey":"tui:main"}`, `{"message":"x","unknown":1}`, `{"message":"x"} {}`},
		{`{"provider":"anthropic","modelId":"claude","context":{"systemPrompt":"s","messages":[{"role":"user","content":"hi"}]},"options":{"maxTokens":10},"agentName":"main","sessionKey":"k"}`,
			`{"provider":"p","modelId":"m","context":{"messages":[{"role":"assistant","content":[{"type":"toolCall","id":"1","name":"x","arguments":"{bad"}]}]}}`,
			`{"provider":"p","modelId":"m","partial":false,"options":{"reasoning":"xhigh"},"context":{"messages":[{"role":"user","content":"hi","timestamp":1}],"tools":[{"name":"read","label":"Read File","description":"d","parameters":{"type":"object"}}]}}`,
			`{"provider":"p","modelId":"m","options":{"reasoning":"off"},"context":{"extra":1,"messages":[]}}`},
		{`{"model":"anthropic/claude-sonnet-4-6"}`, `{"model":null}`, `{"model":""}`},
		{`{"sessionKey":"k","message":"hi"}`},
		{`{"sessionKey":"k","response":"yo"}`},
		{`{"sessionKey":"telegram:42"}`, `[]`, `null`, ``, `{"sessionKey":"\ud800"}`},
	}
	for kind, list := range seeds {
		for _, s := range list {
			f.Add(uint8(kind), []byte(s))
		}
	}
	f.Fuzz(func(t *testing.T, kind uint8, body []byte) {
		v := bodyKinds[int(kind)%len(bodyKinds)]()
		err := decodeBytes(body, v)
		if err != nil {
			var pe *proto.Error
			if !errors.As(err, &pe) || (pe.Status != 400 && pe.Status != 413) {
				t.Fatalf("refusal %T %v is not a client error", err, err)
			}
			if len(pe.Msg) > 1000 || !utf8.ValidString(pe.Msg) {
				t.Fatalf("refusal message of %d bytes (valid UTF-8 %v): %q", len(pe.Msg), utf8.ValidString(pe.Msg), pe.Msg)
			}
			return
		}
		out, err := json.Marshal(v)
		if err != nil {
			return // a value only the decoder builds (a message without a role)
		}
		v2 := bodyKinds[int(kind)%len(bodyKinds)]()
		if err := decodeBytes(out, v2); err != nil {
			t.Fatalf("what was read does not read back: %s: %v", out, err)
		}
		if out2, _ := json.Marshal(v2); !bytes.Equal(out, out2) {
			t.Fatalf("not stable:\n%s\n%s", out, out2)
		}
	})
}
