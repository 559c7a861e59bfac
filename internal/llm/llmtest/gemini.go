package llmtest

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
)

// NewGemini starts a Gemini API server (POST
// /v1beta/models/{model}:streamGenerateContent?alt=sse). It closes when the
// test ends.
func NewGemini(t testing.TB) *Server { return newServer(t, geminiWire{}) }

// geminiWire speaks the Gemini API's streaming format: with alt=sse,
// "data: <GenerateContentResponse>" events, each carrying
// candidates[0].content.parts (text; thought: true parts; a whole
// functionCall per part, with a thoughtSignature), the last one the
// finishReason and usageMetadata. Errors are Google's
// {"error":{"code","message","status"}}.
type geminiWire struct{}

func (geminiWire) basePath() string { return "/v1beta" }
func (geminiWire) path() string     { return "/v1beta/models/{model}:streamGenerateContent" }

// matches accepts any model in the path.
func (geminiWire) matches(r *http.Request) bool {
	rest, ok := strings.CutPrefix(r.URL.Path, "/v1beta/models/")
	model, ok2 := strings.CutSuffix(rest, ":streamGenerateContent")
	return ok && ok2 && model != "" && !strings.Contains(model, "/") && r.URL.Query().Get("alt") == "sse"
}

// geminiStatus is Google's status name and HTTP code of a status.
var geminiStatus = map[int]string{
	400: "INVALID_ARGUMENT", 401: "UNAUTHENTICATED", 403: "PERMISSION_DENIED", 404: "NOT_FOUND",
	429: "RESOURCE_EXHAUSTED", 500: "INTERNAL", 503: "UNAVAILABLE", 504: "DEADLINE_EXCEEDED",
}

func (geminiWire) defaultError(status int) (string, string) {
	switch status {
	case 400:
		return geminiStatus[400], "Request contains an invalid argument."
	case 401:
		return geminiStatus[401], "API key not valid. Please pass a valid API key."
	case 403:
		return geminiStatus[403], "The caller does not have permission"
	case 404:
		return geminiStatus[404], "models/x is not found for API version v1beta"
	case 429:
		return geminiStatus[429], "Resource has been exhausted (e.g. check quota)."
	case 503:
		return geminiStatus[503], "The model is overloaded. Please try again later."
	}
	return geminiStatus[500], "An internal error has occurred."
}

func geminiCode(typ string) int {
	for c, s := range geminiStatus {
		if s == typ {
			return c
		}
	}
	return 500
}

func (geminiWire) errorBody(typ, msg string) string {
	if typ == "not_found_error" { // the server's "no route"
		typ = geminiStatus[404]
	}
	return mustJSON(map[string]any{"error": map[string]any{"code": geminiCode(typ), "message": msg, "status": typ}})
}

func (geminiWire) streamError(typ, msg string) sse {
	if typ == "api_error" {
		typ = "INTERNAL"
	}
	return sse{"", geminiWire{}.errorBody(typ, msg)}
}

func geminiFinish(neutral string) string {
	switch neutral {
	case "stop", "toolUse":
		return "STOP"
	case "length":
		return "MAX_TOKENS"
	}
	return neutral // a wire value: "SAFETY", "MALFORMED_FUNCTION_CALL", …
}

func (geminiWire) events(req Recorded, r Response) []sse {
	model := req.Model()
	chunk := func(parts []any, extra map[string]any) sse {
		cand := map[string]any{"content": map[string]any{"role": "model", "parts": parts}, "index": 0}
		for k, v := range extra {
			cand[k] = v
		}
		return sse{"", mustJSON(map[string]any{
			"candidates":   []any{cand},
			"modelVersion": model,
			"responseId":   fmt.Sprintf("resp-%04d", req.Seq),
		})}
	}
	var out []sse
	for i, b := range r.Blocks {
		switch b.Kind {
		case "thinking":
			pieces := split(b.Text, r.chunk())
			for j, p := range pieces {
				part := map[string]any{"text": p, "thought": true}
				if j == len(pieces)-1 {
					part["thoughtSignature"] = geminiSignature(b.Signature, req.Seq, i)
				}
				out = append(out, chunk([]any{part}, nil))
			}
		case "toolCall":
			var args any
			if err := json.Unmarshal([]byte(b.Args), &args); err != nil {
				args = b.Args // not JSON: sent as a string, which a client must not take for an object
			}
			fc := map[string]any{"name": b.Name, "args": args}
			if b.ID != "" {
				fc["id"] = b.ID
			}
			out = append(out, chunk([]any{map[string]any{
				"functionCall": fc, "thoughtSignature": geminiSignature("", req.Seq, i),
			}}, nil))
		case "redactedThinking":
		default:
			for _, p := range split(b.Text, r.chunk()) {
				out = append(out, chunk([]any{map[string]any{"text": p}}, nil))
			}
		}
	}
	u := r.usage()
	last := chunk([]any{map[string]any{"text": ""}}, map[string]any{"finishReason": geminiFinish(r.stop())})
	var m map[string]any
	_ = json.Unmarshal([]byte(last.data), &m)
	m["usageMetadata"] = map[string]any{
		"promptTokenCount": u.Input + u.CacheRead, "candidatesTokenCount": u.Output,
		"cachedContentTokenCount": u.CacheRead, "totalTokenCount": u.Input + u.CacheRead + u.Output,
	}
	return append(out, sse{"", mustJSON(m)})
}

// geminiSignature is a thought signature: the scripted one, or a generated
// one, base64 as on the wire.
func geminiSignature(s string, seq, block int) string {
	if s == "" {
		s = fmt.Sprintf("sig-%d-%d", seq, block)
	}
	return base64.StdEncoding.EncodeToString([]byte(s))
}
