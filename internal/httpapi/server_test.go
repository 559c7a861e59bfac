package httpapi

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/beige-dev/beige/internal/llm"
	"github.com/beige-dev/beige/internal/proto"
	"github.com/beige-dev/beige/internal/proto/llmproto"
	"github.com/beige-dev/beige/internal/tools"
)

// stub is a Backend that decodes exec calls like the gateway does, without sandboxes.
type stub struct{ last proto.ExecRequest }

func (s *stub) Health(context.Context) proto.Health { return proto.Health{Status: "ok"} }
func (s *stub) Agents(context.Context) []proto.AgentInfo {
	return []proto.AgentInfo{{Name: "assistant"}}
}
func (s *stub) Config(context.Context) proto.ConfigView { return proto.ConfigView{} }
func (s *stub) Models(ctx context.Context, agent string) ([]llmproto.AgentModel, error) {
	if agent != "assistant" {
		return nil, proto.Errorf(http.StatusNotFound, "unknown agent %q", agent)
	}
	return []llmproto.AgentModel{{Model: llm.Model{ID: "claude-sonnet-4-6", Input: []string{"text"}}, ThinkingLevel: "off"}}, nil
}

func (s *stub) Prompt(ctx context.Context, agentName string, req proto.PromptRequest) (proto.PromptResponse, error) {
	if agentName != "assistant" {
		return proto.PromptResponse{}, proto.Errorf(http.StatusNotFound, "unknown agent %q", agentName)
	}
	return proto.PromptResponse{Response: "echo: " + req.Message}, nil
}

func (s *stub) Sessions(ctx context.Context, agentName string) ([]proto.SessionInfo, error) {
	return nil, nil
}

func (s *stub) Exec(ctx context.Context, agent string, req proto.ExecRequest) (proto.ToolResult, error) {
	if agent != "assistant" {
		return proto.ToolResult{}, proto.Errorf(http.StatusNotFound, "unknown agent %q", agent)
	}
	if _, err := tools.Decode(req.Tool, req.Params); err != nil {
		return proto.ToolResult{}, proto.Errorf(http.StatusBadRequest, "%v", err)
	}
	s.last = req
	return proto.TextResult("ok", false), nil
}

func do(t *testing.T, h http.Handler, method, target, body string, hdr map[string]string) (int, string) {
	t.Helper()
	if strings.HasPrefix(target, "/") {
		target = "http://127.0.0.1:7433" + target
	}
	req := httptest.NewRequest(method, target, strings.NewReader(body))
	if body != "" {
		req.Header.Set("Content-Type", "application/json") // as the beige client sends it
	}
	for k, v := range hdr {
		if v == "" {
			req.Header.Del(k)
			continue
		}
		req.Header.Set(k, v)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec.Code, rec.Body.String()
}

func TestBadRequests(t *testing.T) {
	s := New(&stub{}, Options{Host: "127.0.0.1"})
	cases := []struct {
		name, method, path, body string
		status                   int
		want                     string
	}{
		{"ok", "POST", "/api/agents/assistant/exec", `{"tool":"exec","params":{"command":"ls"}}`, 200, `"text":"ok"`},
		{"malformed", "POST", "/api/agents/assistant/exec", `{"tool":`, 400, "invalid JSON body"},
		{"not an object", "POST", "/api/agents/assistant/exec", `[1]`, 400, "want an object"},
		{"empty body", "POST", "/api/agents/assistant/exec", ``, 400, "missing request body"},
		{"trailing", "POST", "/api/agents/assistant/exec", `{"tool":"exec","params":{"command":"ls"}} x`, 400, "trailing data"},
		{"unknown field", "POST", "/api/agents/assistant/exec", `{"tool":"exec","parms":{}}`, 400, `unknown field \"parms\"`},
		{"missing tool", "POST", "/api/agents/assistant/exec", `{"params":{}}`, 400, `missing \"tool\"`},
		{"unknown tool", "POST", "/api/agents/assistant/exec", `{"tool":"rm","params":{}}`, 400, `unknown tool`},
		{"missing param", "POST", "/api/agents/assistant/exec", `{"tool":"read","params":{}}`, 400, `path`},
		{"wrong type", "POST", "/api/agents/assistant/exec", `{"tool":"exec","params":{"command":"ls","timeout":"5"}}`, 400, `timeout`},
		{"tool wrong type", "POST", "/api/agents/assistant/exec", `{"tool":5}`, 400, `tool`},
		{"unknown agent", "POST", "/api/agents/nobody/exec", `{"tool":"exec","params":{"command":"ls"}}`, 404, `unknown agent \"nobody\"`},
		{"models", "GET", "/api/agents/assistant/models", ``, 200, `"id":"claude-sonnet-4-6"`},
		{"models of unknown agent", "GET", "/api/agents/x/models", ``, 404, `unknown agent`},
		{"prompt", "POST", "/api/agents/assistant/prompt", `{"message":"hi"}`, 200, `"response":"echo: hi"`},
		{"prompt without message", "POST", "/api/agents/assistant/prompt", `{"sessionKey":"x"}`, 400, `missing \"message\"`},
		{"sessions", "GET", "/api/agents/assistant/sessions", ``, 200, `"sessions":[]`},
		{"unknown endpoint", "GET", "/api/nothing", ``, 404, `no such endpoint: GET /api/nothing`},
		{"wrong method", "GET", "/api/agents/assistant/exec", ``, 404, `no such endpoint`},
		{"oversize", "POST", "/api/agents/assistant/exec", `{"tool":"write","params":{"path":"/x","content":"` + strings.Repeat("a", MaxBodyBytes) + `"}}`, 413, "request body too large"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			code, body := do(t, s, tc.method, tc.path, tc.body, nil)
			if code != tc.status || !strings.Contains(body, tc.want) {
				t.Errorf("%d %s, want %d containing %s", code, body, tc.status, tc.want)
			}
			var e map[string]any
			if err := json.Unmarshal([]byte(body), &e); err != nil {
				t.Errorf("body is not JSON: %s", body)
			}
			if code >= 400 && e["error"] == nil {
				t.Errorf("error body without \"error\": %s", body)
			}
		})
	}
}

func TestHostGuard(t *testing.T) {
	cases := []struct {
		configured, host string
		ok               bool
	}{
		{"127.0.0.1", "127.0.0.1:7433", true},
		{"127.0.0.1", "localhost:7433", true},
		{"127.0.0.1", "LOCALHOST", true},
		{"127.0.0.1", "[::1]:7433", true},
		{"127.0.0.1", "127.0.0.2", true},
		{"127.0.0.1", "evil.example:7433", false},
		{"127.0.0.1", "192.168.1.5:7433", false},
		{"127.0.0.1", "localhost.evil.example", false},
		{"gw.internal", "gw.internal:7433", true},
		{"gw.internal", "other.internal:7433", false},
		{"0.0.0.0", "10.0.0.7:7433", true},
		{"0.0.0.0", "evil.example", false},
		{"192.168.1.5", "192.168.1.5:7433", true},
	}
	for _, tc := range cases {
		s := New(&stub{}, Options{Host: tc.configured})
		code, body := do(t, s, "GET", "http://"+tc.host+"/api/health", "", map[string]string{"Host": tc.host})
		if got := code == 200; got != tc.ok {
			t.Errorf("configured %s, Host %s: %d %s", tc.configured, tc.host, code, body)
		}
	}
}

func TestAuthToken(t *testing.T) {
	s := New(&stub{}, Options{Host: "127.0.0.1", AuthToken: "s3cret"})
	for _, tc := range []struct {
		auth string
		code int
	}{{"", 401}, {"Bearer wrong", 401}, {"s3cret", 401}, {"Basic s3cret", 401}, {"Bearer s3cret", 200}} {
		code, body := do(t, s, "GET", "/api/agents", "", map[string]string{"Authorization": tc.auth})
		if code != tc.code {
			t.Errorf("Authorization %q: %d %s", tc.auth, code, body)
		}
		if strings.Contains(body, "s3cret") {
			t.Error("token echoed")
		}
	}
}

func TestSessionKeyPassedThrough(t *testing.T) {
	b := &stub{}
	s := New(b, Options{Host: "127.0.0.1"})
	do(t, s, "POST", "/api/agents/assistant/exec", `{"tool":"exec","params":{"command":"ls"},"sessionKey":"telegram:1:2"}`, nil)
	if b.last.SessionKey != "telegram:1:2" {
		t.Errorf("session key %q", b.last.SessionKey)
	}
}

func FuzzExecRequest(f *testing.F) {
	s := New(&stub{}, Options{Host: "127.0.0.1"})
	f.Add(`{"tool":"exec","params":{"command":"ls"}}`)
	f.Add(`{"tool":"read","params":{"path":"/workspace/x","offset":1,"limit":2}}`)
	f.Add(`{"tool":"patch","params":{"path":"a","oldText":"x","newText":"y"},"sessionKey":"a:b:c"}`)
	f.Add(`{"tool":"write","params":null}`)
	f.Fuzz(func(t *testing.T, body string) {
		req := httptest.NewRequest("POST", "http://127.0.0.1:7433/api/agents/assistant/exec", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		s.ServeHTTP(rec, req)
		if rec.Code != 200 && rec.Code != 400 {
			t.Fatalf("status %d for %q: %s", rec.Code, body, rec.Body)
		}
		var out map[string]any
		if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil {
			t.Fatalf("response is not JSON: %s", rec.Body)
		}
	})
}
