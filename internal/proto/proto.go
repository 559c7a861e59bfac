// Package proto holds the wire types shared by the gateway, the CLI, the
// terminal client and the in-sandbox binaries: the HTTP API bodies, the
// gateway socket frames and the session key format. It has no dependencies
// beyond the standard library so that the small in-sandbox binary can use it;
// the API bodies that carry internal/llm types are in internal/proto/llmproto.
package proto

import "strings"

// Content is one block of a tool result, as the HTTP API and the model see it.
type Content struct {
	Type     string `json:"type"` // "text" or "image"
	Text     string `json:"text,omitempty"`
	Data     string `json:"data,omitempty"`     // base64, for images
	MimeType string `json:"mimeType,omitempty"` // for images
}

// ToolResult is the result of a core tool call (read, write, patch, exec).
type ToolResult struct {
	Content []Content `json:"content"`
	IsError bool      `json:"isError"`
}

// TextResult returns a result holding one text block.
func TextResult(text string, isError bool) ToolResult {
	return ToolResult{Content: []Content{{Type: "text", Text: text}}, IsError: isError}
}

// Text joins the text blocks of r.
func (r ToolResult) Text() string {
	var b strings.Builder
	for i, c := range r.Content {
		if c.Type != "text" {
			continue
		}
		if i > 0 && b.Len() > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(c.Text)
	}
	return b.String()
}

// SessionContext says on whose behalf a tool runs. It is passed to tools and,
// as BEIGE_* variables, to commands in the sandbox.
type SessionContext struct {
	SessionKey string `json:"sessionKey,omitempty"`
	Channel    string `json:"channel,omitempty"`
	AgentName  string `json:"agentName,omitempty"`
	ChatID     string `json:"chatId,omitempty"`
	ThreadID   string `json:"threadId,omitempty"`
}

// ParseSessionKey splits a session key of the form channel:chatId[:threadId]
// ("tui:assistant:default", "telegram:123456:789").
func ParseSessionKey(agent, key string) SessionContext {
	sc := SessionContext{SessionKey: key, AgentName: agent}
	parts := strings.SplitN(key, ":", 3)
	sc.Channel = parts[0]
	if len(parts) > 1 {
		sc.ChatID = parts[1]
	}
	if len(parts) > 2 {
		sc.ThreadID = parts[2]
	}
	return sc
}

// Env returns the BEIGE_* variables a command in the sandbox sees.
func (sc SessionContext) Env() map[string]string {
	env := map[string]string{
		"BEIGE_AGENT_NAME":  sc.AgentName,
		"BEIGE_CHANNEL":     sc.Channel,
		"BEIGE_SESSION_KEY": sc.SessionKey,
	}
	if sc.ChatID != "" {
		env["BEIGE_CHAT_ID"] = sc.ChatID
	}
	if sc.ThreadID != "" {
		env["BEIGE_THREAD_ID"] = sc.ThreadID
	}
	return env
}

// ErrorBody is the body of every HTTP API error.
type ErrorBody struct {
	Error string `json:"error"`
}
