package proto

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

func TestDecodeToolRequest(t *testing.T) {
	ok := []struct {
		in   string
		want ToolRequest
	}{
		{`{"type":"tool_request","tool":"git","args":["status"]}`,
			ToolRequest{Type: ToolRequestType, Tool: "git", Args: []string{"status"}}},
		{`{"type":"tool_request","tool":"git"}`,
			ToolRequest{Type: ToolRequestType, Tool: "git", Args: []string{}}},
		{`{"type":"tool_request","tool":"git","args":null}`,
			ToolRequest{Type: ToolRequestType, Tool: "git", Args: []string{}}},
		{` {"type":"tool_request","tool":"a.b-c_d","args":[],"cwd":"src/x"} `,
			ToolRequest{Type: ToolRequestType, Tool: "a.b-c_d", Args: []string{}, Cwd: "src/x"}},
		{`{"type":"tool_request","tool":"git","args":["a b","","\u00e9"],"agent":"other","extra":1}`,
			ToolRequest{Type: ToolRequestType, Tool: "git", Args: []string{"a b", "", "é"}}},
		{`{"type":"tool_request","tool":"git","args":[],"sessionContext":{"sessionKey":"tui:a:default","channel":"tui","agentName":"x","chatId":"1"}}`,
			ToolRequest{Type: ToolRequestType, Tool: "git", Args: []string{},
				SessionContext: &SessionContext{SessionKey: "tui:a:default", Channel: "tui", AgentName: "x", ChatID: "1"}}},
	}
	for _, tt := range ok {
		got, err := DecodeToolRequest([]byte(tt.in))
		if err != nil {
			t.Errorf("DecodeToolRequest(%s): %v", tt.in, err)
			continue
		}
		if !reflect.DeepEqual(got, tt.want) {
			t.Errorf("DecodeToolRequest(%s) = %+v, want %+v", tt.in, got, tt.want)
		}
	}

	bad := []struct{ in, wantErr string }{
		{``, "empty"},
		{`   `, "empty"},
		{`[1]`, "JSON object"},
		{`{`, "invalid JSON"},
		{`{"type":"tool_request","tool":"git"} {}`, "more than one"},
		{`{"tool":"git","args":[]}`, `missing "type"`},
		{`{"type":"tool_response","tool":"git"}`, `"type" is "tool_response"`},
		{`{"type":1,"tool":"git"}`, "invalid JSON"},
		{`{"type":"tool_request","args":[]}`, `missing "tool"`},
		{`{"type":"tool_request","tool":""}`, `missing "tool"`},
		{`{"type":"tool_request","tool":"../x"}`, "invalid tool name"},
		{`{"type":"tool_request","tool":"a b"}`, "invalid tool name"},
		{`{"type":"tool_request","tool":"-x"}`, "invalid tool name"},
		{`{"type":"tool_request","tool":"` + strings.Repeat("a", 64) + `"}`, "invalid tool name"},
		{`{"type":"tool_request","tool":"git","args":"status"}`, "array of strings"},
		{`{"type":"tool_request","tool":"git","args":[1]}`, "array of strings"},
		{`{"type":"tool_request","tool":"git","args":[["a"]]}`, "array of strings"},
		{`{"type":"tool_request","tool":"git","args":[null]}`, "is null"},
		{`{"type":"tool_request","tool":"git","args":["a\u0000b"]}`, "NUL"},
		{`{"type":"tool_request","tool":"git","cwd":"a\u0000"}`, "NUL"},
		{`{"type":"tool_request","tool":"git","cwd":1}`, "invalid JSON"},
		{`{"type":"tool_request","tool":"git","sessionContext":"x"}`, "sessionContext"},
		{`{"type":"tool_request","tool":"git","sessionContext":{"sessionKey":3}}`, "sessionContext"},
		{`{"type":"tool_request","tool":"git","callToken":3}`, "invalid JSON"},
		{`{"type":"tool_request","tool":"git","callToken":"a b"}`, "callToken"},
		{`{"type":"tool_request","tool":"git","callToken":"a\u0000"}`, "callToken"},
		{`{"type":"tool_request","tool":"git","callToken":"` + strings.Repeat("a", MaxCallToken+1) + `"}`, "callToken"},
	}
	for _, tt := range bad {
		_, err := DecodeToolRequest([]byte(tt.in))
		if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
			t.Errorf("DecodeToolRequest(%q) error = %v, want it to contain %q", tt.in, err, tt.wantErr)
		}
	}
}

func TestToolFrameRoundTrip(t *testing.T) {
	req := ToolRequest{Type: ToolRequestType, Tool: "git", Args: []string{"log", "<a&b>", "x\ny"}, Cwd: "."}
	b, err := AppendToolFrame(nil, req)
	if err != nil {
		t.Fatal(err)
	}
	if b[len(b)-1] != '\n' || strings.Count(string(b), "\n") != 1 {
		t.Fatalf("frame %q is not one line", b)
	}
	if !strings.Contains(string(b), "<a&b>") {
		t.Errorf("frame %q escapes HTML", b)
	}
	got, err := DecodeToolRequest(b[:len(b)-1])
	if err != nil || !reflect.DeepEqual(got, req) {
		t.Fatalf("round trip = %+v, %v; want %+v", got, err, req)
	}

	resp := ErrorResponse(1, "Permission denied: tool 'git' not allowed for agent 'travel'")
	b, _ = AppendToolFrame(nil, resp)
	want := `{"type":"tool_response","success":false,"error":"Permission denied: tool 'git' not allowed for agent 'travel'","exitCode":1}` + "\n"
	if string(b) != want {
		t.Errorf("response frame = %s, want %s", b, want)
	}
	b, _ = AppendToolFrame(nil, ToolResponse{Type: ToolResponseType, Success: true, Output: "OK", ExitCode: 0})
	if want := `{"type":"tool_response","success":true,"output":"OK","exitCode":0}` + "\n"; string(b) != want {
		t.Errorf("response frame = %s, want %s", b, want)
	}
}

func FuzzDecodeToolRequest(f *testing.F) {
	f.Add([]byte(`{"type":"tool_request","tool":"git","args":["status"],"cwd":"a","sessionContext":{"sessionKey":"k"}}`))
	f.Add([]byte(`{"type":"tool_request","tool":"git","args":[null]}`))
	f.Add([]byte(`{}`))
	f.Add([]byte(`[`))
	f.Add([]byte(`{"type":"tool_request","tool":"git","callToken":"0123456789abcdef0123456789abcdef"}`))
	f.Add([]byte(`{"type":"tool_request","tool":"git","callToken":"\u00e9"}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		req, err := DecodeToolRequest(data)
		if err != nil {
			return
		}
		if !validCallToken(req.CallToken) || req.Unattributed {
			t.Fatalf("accepted call token %q (unattributed %v)", req.CallToken, req.Unattributed)
		}
		if req.Type != ToolRequestType || !ValidToolName(req.Tool) || req.Args == nil {
			t.Fatalf("accepted an invalid request: %+v", req)
		}
		for _, a := range req.Args {
			if strings.IndexByte(a, 0) >= 0 {
				t.Fatalf("accepted an argument with NUL: %q", a)
			}
		}
		// What was accepted encodes and decodes to itself.
		b, err := AppendToolFrame(nil, req)
		if err != nil {
			t.Fatal(err)
		}
		again, err := DecodeToolRequest(b)
		if err != nil {
			t.Fatalf("re-decode %s: %v", b, err)
		}
		if !json.Valid(b) || !reflect.DeepEqual(normalize(again), normalize(req)) {
			t.Fatalf("round trip changed %+v into %+v", req, again)
		}
	})
}

// normalize maps invalid UTF-8 the way encoding/json does, so that a round
// trip can be compared.
func normalize(r ToolRequest) ToolRequest {
	fix := func(s string) string { return strings.ToValidUTF8(s, "\uFFFD") }
	for i := range r.Args {
		r.Args[i] = fix(r.Args[i])
	}
	r.Cwd = fix(r.Cwd)
	if r.SessionContext != nil {
		sc := *r.SessionContext
		sc.SessionKey, sc.Channel, sc.AgentName, sc.ChatID, sc.ThreadID =
			fix(sc.SessionKey), fix(sc.Channel), fix(sc.AgentName), fix(sc.ChatID), fix(sc.ThreadID)
		r.SessionContext = &sc
	}
	return r
}

func TestValidToolName(t *testing.T) {
	for name, want := range map[string]bool{
		"git": true, "Git2": true, "a.b": true, "a_b-c": true, "x": true, strings.Repeat("a", 63): true,
		"": false, ".": false, "..": false, ".a": false, "-a": false, "_a": false, "a b": false, "a/b": false,
		"a;b": false, "é": false, "a+b": false, strings.Repeat("a", 64): false,
	} {
		if got := ValidToolName(name); got != want {
			t.Errorf("ValidToolName(%q) = %v", name, got)
		}
	}
}
