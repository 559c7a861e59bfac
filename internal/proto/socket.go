package proto

// The socket protocol is spoken between the tool client in a sandbox
// (/beige/tool-client, run by the launchers in /tools/bin) and the gateway,
// over the agent's Unix socket (/beige/gateway.sock in the sandbox). Frames
// are newline-delimited JSON: the client sends one ToolRequest line and
// reads one ToolResponse line. A connection may carry several requests, one
// after the other.
//
// The agent a request is for is never read from the frame: the gateway knows
// it from the socket that accepted the connection (one socket per agent).
// Nor is the session: the request's sessionContext comes from the sandbox's
// env, which the agent controls. The gateway attributes a call to a session
// only by its callToken, a secret it gave the one command it started for
// that session (in CallTokenEnv) for as long as that command runs.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
)

// Frame types.
const (
	ToolRequestType  = "tool_request"
	ToolResponseType = "tool_response"
)

// CallTokenEnv names the variable that carries the call token to the tool
// client: the gateway sets it for each exec it starts.
const CallTokenEnv = "BEIGE_CALL_TOKEN"

// MaxCallToken bounds the length of a request's callToken.
const MaxCallToken = 128

// MaxToolFrame is the default size limit of one request frame, newline excluded.
const MaxToolFrame = 1 << 20

// Limits on the parts of a request, checked by DecodeToolRequest.
const (
	MaxToolName = 63
	MaxToolCwd  = 4096
)

// Exit codes the gateway and the tool client use besides a tool's own.
const (
	ExitBadRequest  = 2   // malformed frame, or a call the tool refused to parse
	ExitUnreachable = 126 // the tool client could not talk to the gateway
	ExitUnknownTool = 127 // no such tool on the gateway
)

// ToolRequest is a sandbox → gateway frame.
type ToolRequest struct {
	Type string   `json:"type"` // ToolRequestType
	Tool string   `json:"tool"`
	Args []string `json:"args"`
	// Cwd is the caller's working folder relative to /workspace ("." for
	// /workspace itself); empty when it was outside /workspace.
	Cwd string `json:"cwd,omitempty"`
	// SessionContext is read by the tool client from the BEIGE_* variables.
	// Its AgentName is informative only: the gateway overwrites it.
	SessionContext *SessionContext `json:"sessionContext,omitempty"`
	// CallToken is the value of CallTokenEnv the tool client was run with.
	CallToken string `json:"callToken,omitempty"`

	// Unattributed is set by the gateway, never read from a frame: the
	// call could not be attributed to a session (no token, or an unknown
	// or expired one), so SessionContext carries only the agent.
	Unattributed bool `json:"-"`
}

// ToolResponse is a gateway → sandbox frame. The tool client prints Output
// on stdout and Error on stderr, and exits with ExitCode.
type ToolResponse struct {
	Type     string `json:"type"` // ToolResponseType
	Success  bool   `json:"success"`
	Output   string `json:"output,omitempty"`
	Error    string `json:"error,omitempty"`
	ExitCode int    `json:"exitCode"`
}

// ErrorResponse returns a failed response carrying msg.
func ErrorResponse(exitCode int, msg string) ToolResponse {
	return ToolResponse{Type: ToolResponseType, Success: false, Error: msg, ExitCode: exitCode}
}

// BadRequest is the response to a malformed frame.
func BadRequest(format string, args ...any) ToolResponse {
	return ErrorResponse(ExitBadRequest, "bad request: "+fmt.Sprintf(format, args...))
}

// ValidToolName reports whether name can name a tool: it is also a file name
// in /tools/bin and a word in a shell script, so it is limited to ASCII
// letters, digits, '.', '_' and '-', starting with a letter or digit,
// at most MaxToolName bytes.
func ValidToolName(name string) bool {
	if name == "" || len(name) > MaxToolName {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case (c == '.' || c == '_' || c == '-') && i > 0:
		default:
			return false
		}
	}
	return true
}

// wireRequest is what DecodeToolRequest reads; pointers tell a missing or
// null field from an empty one.
type wireRequest struct {
	Type           *string         `json:"type"`
	Tool           *string         `json:"tool"`
	Args           json.RawMessage `json:"args"`
	Cwd            *string         `json:"cwd"`
	SessionContext json.RawMessage `json:"sessionContext"`
	CallToken      *string         `json:"callToken"`
}

// DecodeToolRequest parses one request frame (without its newline). Unknown
// fields are ignored (an "agent" field among them: identity comes from the
// socket). The error, when there is one, is meant for the sender and does
// not start with "bad request".
func DecodeToolRequest(frame []byte) (ToolRequest, error) {
	var w wireRequest
	frame = bytes.TrimSpace(frame)
	if len(frame) == 0 {
		return ToolRequest{}, fmt.Errorf("empty frame")
	}
	if frame[0] != '{' {
		return ToolRequest{}, fmt.Errorf("want a JSON object")
	}
	dec := json.NewDecoder(bytes.NewReader(frame))
	if err := dec.Decode(&w); err != nil {
		return ToolRequest{}, fmt.Errorf("invalid JSON: %v", err)
	}
	if dec.More() {
		return ToolRequest{}, fmt.Errorf("invalid JSON: more than one value on the line")
	}
	var req ToolRequest
	switch {
	case w.Type == nil:
		return req, fmt.Errorf("missing \"type\" (want %q)", ToolRequestType)
	case *w.Type != ToolRequestType:
		return req, fmt.Errorf("\"type\" is %q, want %q", clipString(*w.Type, 40), ToolRequestType)
	}
	req.Type = ToolRequestType
	switch {
	case w.Tool == nil || *w.Tool == "":
		return req, fmt.Errorf("missing \"tool\"")
	case !ValidToolName(*w.Tool):
		return req, fmt.Errorf("invalid tool name %q", clipString(*w.Tool, MaxToolName+8))
	}
	req.Tool = *w.Tool
	args, err := decodeArgs(w.Args)
	if err != nil {
		return req, err
	}
	req.Args = args
	if w.Cwd != nil {
		switch c := *w.Cwd; {
		case len(c) > MaxToolCwd:
			return req, fmt.Errorf("\"cwd\" is longer than %d bytes", MaxToolCwd)
		case strings.IndexByte(c, 0) >= 0:
			return req, fmt.Errorf("\"cwd\" contains a NUL byte")
		}
		req.Cwd = *w.Cwd
	}
	if w.CallToken != nil {
		if !validCallToken(*w.CallToken) {
			return req, fmt.Errorf("\"callToken\" must be at most %d printable ASCII characters", MaxCallToken)
		}
		req.CallToken = *w.CallToken
	}
	if len(w.SessionContext) > 0 && string(w.SessionContext) != "null" {
		var sc SessionContext
		if err := json.Unmarshal(w.SessionContext, &sc); err != nil {
			return req, fmt.Errorf("\"sessionContext\" must be an object of strings: %v", err)
		}
		req.SessionContext = &sc
	}
	return req, nil
}

func validCallToken(t string) bool {
	if len(t) > MaxCallToken {
		return false
	}
	for i := 0; i < len(t); i++ {
		if t[i] <= ' ' || t[i] > '~' {
			return false
		}
	}
	return true
}

// decodeArgs accepts a missing or null "args" as none, and otherwise wants
// an array of strings without NUL bytes (they could not be passed to a
// program).
func decodeArgs(raw json.RawMessage) ([]string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return []string{}, nil
	}
	var ps []*string
	if err := json.Unmarshal(raw, &ps); err != nil {
		return nil, fmt.Errorf("\"args\" must be an array of strings")
	}
	args := make([]string, len(ps))
	for i, p := range ps {
		if p == nil {
			return nil, fmt.Errorf("\"args\"[%d] is null, want a string", i)
		}
		if strings.IndexByte(*p, 0) >= 0 {
			return nil, fmt.Errorf("\"args\"[%d] contains a NUL byte", i)
		}
		args[i] = *p
	}
	return args, nil
}

// AppendToolFrame appends v (a ToolRequest or ToolResponse) as one JSON line.
// HTML characters are not escaped; invalid UTF-8 in strings becomes U+FFFD.
func AppendToolFrame(dst []byte, v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil { // Encode ends the value with '\n'
		return dst, fmt.Errorf("encode tool frame: %w", err)
	}
	return append(dst, buf.Bytes()...), nil
}

func clipString(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
