package llm

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Message roles.
const (
	RoleUser       = "user"
	RoleAssistant  = "assistant"
	RoleToolResult = "toolResult"
)

// StopReason says why the model stopped.
type StopReason string

// Stop reasons, as pi names them.
const (
	StopReasonStop    StopReason = "stop"    // end of turn
	StopReasonLength  StopReason = "length"  // max tokens reached
	StopReasonToolUse StopReason = "toolUse" // the model called tools
	StopReasonError   StopReason = "error"   // the request failed
	StopReasonAborted StopReason = "aborted" // the caller cancelled
)

// Now returns the current time in Unix milliseconds, the unit of message
// timestamps.
func Now() int64 { return time.Now().UnixMilli() }

// UserMessage is what the user said: {role:"user", content, timestamp}. The
// content may be a plain string in JSON; it is read as one text block and
// written back as an array.
type UserMessage struct {
	Content   []Content // text and image blocks
	Timestamp int64     // Unix milliseconds
}

// AssistantMessage is one model reply: its content (text, thinking, tool
// calls), which model produced it, the tokens it used and why it stopped.
type AssistantMessage struct {
	Content    []Content  `json:"content"`
	API        string     `json:"api"`
	Provider   string     `json:"provider"`
	Model      string     `json:"model"`
	Usage      Usage      `json:"usage"`
	StopReason StopReason `json:"stopReason"`
	// ErrorMessage is set when StopReason is error or aborted.
	ErrorMessage string `json:"errorMessage,omitempty"`
	Timestamp    int64  `json:"timestamp"` // Unix milliseconds
}

// ToolResultMessage is the result of one tool call, sent back to the model.
type ToolResultMessage struct {
	ToolCallID string    `json:"toolCallId"`
	ToolName   string    `json:"toolName"`
	Content    []Content `json:"content"` // text and image blocks
	// Details is optional tool-specific data for the UI; the model does not
	// see it.
	Details   json.RawMessage `json:"details,omitempty"`
	IsError   bool            `json:"isError"`
	Timestamp int64           `json:"timestamp"` // Unix milliseconds
}

// Usage counts the tokens of one reply and what they cost.
type Usage struct {
	Input       int       `json:"input"`
	Output      int       `json:"output"`
	CacheRead   int       `json:"cacheRead"`
	CacheWrite  int       `json:"cacheWrite"`
	TotalTokens int       `json:"totalTokens"`
	Cost        UsageCost `json:"cost"`
}

// UsageCost is the dollar cost of a reply, by kind of token.
type UsageCost struct {
	Input      float64 `json:"input"`
	Output     float64 `json:"output"`
	CacheRead  float64 `json:"cacheRead"`
	CacheWrite float64 `json:"cacheWrite"`
	Total      float64 `json:"total"`
}

// Text joins the text blocks of the reply.
func (m *AssistantMessage) Text() string { return joinText(m.Content) }

// ToolCalls returns the tool call blocks of the reply.
func (m *AssistantMessage) ToolCalls() []Content {
	var calls []Content
	for _, c := range m.Content {
		if c.Type == ContentToolCall {
			calls = append(calls, c)
		}
	}
	return calls
}

// Clone returns a deep copy of m's content slice header and blocks, so that
// the copy can be changed without touching m.
func (m *AssistantMessage) Clone() *AssistantMessage {
	c := *m
	c.Content = append([]Content(nil), m.Content...)
	return &c
}

// Text joins the text blocks of the message.
func (m *UserMessage) Text() string { return joinText(m.Content) }

// Text joins the text blocks of the result.
func (m *ToolResultMessage) Text() string { return joinText(m.Content) }

func joinText(cs []Content) string {
	var b strings.Builder
	for _, c := range cs {
		if c.Type != ContentText {
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(c.Text)
	}
	return b.String()
}

func nonNil(cs []Content) []Content {
	if cs == nil {
		return []Content{}
	}
	return cs
}

// MarshalJSON writes {role:"user", content:[…], timestamp}.
func (m UserMessage) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		Role      string    `json:"role"`
		Content   []Content `json:"content"`
		Timestamp int64     `json:"timestamp"`
	}{RoleUser, nonNil(m.Content), m.Timestamp})
}

// UnmarshalJSON reads a user message whose content is a string or an array.
func (m *UserMessage) UnmarshalJSON(b []byte) error {
	var aux struct {
		Content   json.RawMessage `json:"content"`
		Timestamp int64           `json:"timestamp"`
	}
	if err := json.Unmarshal(b, &aux); err != nil {
		return fmt.Errorf("user message: %w", err)
	}
	*m = UserMessage{Timestamp: aux.Timestamp}
	raw := bytes.TrimSpace(aux.Content)
	switch {
	case len(raw) == 0 || string(raw) == "null":
	case raw[0] == '"':
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return fmt.Errorf("user message content: %w", err)
		}
		m.Content = []Content{Text(s)}
	default:
		if err := json.Unmarshal(raw, &m.Content); err != nil {
			return fmt.Errorf("user message content: %w", err)
		}
	}
	return nil
}

type assistantJSON AssistantMessage

// MarshalJSON writes {role:"assistant", content:[…], api, provider, …}.
func (m AssistantMessage) MarshalJSON() ([]byte, error) {
	m.Content = nonNil(m.Content)
	return json.Marshal(struct {
		Role string `json:"role"`
		assistantJSON
	}{RoleAssistant, assistantJSON(m)})
}

// UnmarshalJSON reads an assistant message.
func (m *AssistantMessage) UnmarshalJSON(b []byte) error {
	var aux assistantJSON
	if err := json.Unmarshal(b, &aux); err != nil {
		return fmt.Errorf("assistant message: %w", err)
	}
	*m = AssistantMessage(aux)
	return nil
}

type toolResultJSON ToolResultMessage

// MarshalJSON writes {role:"toolResult", toolCallId, toolName, …}.
func (m ToolResultMessage) MarshalJSON() ([]byte, error) {
	m.Content = nonNil(m.Content)
	if len(m.Details) > 0 && !json.Valid(m.Details) {
		m.Details = nil
	}
	return json.Marshal(struct {
		Role string `json:"role"`
		toolResultJSON
	}{RoleToolResult, toolResultJSON(m)})
}

// UnmarshalJSON reads a tool result message.
func (m *ToolResultMessage) UnmarshalJSON(b []byte) error {
	var aux toolResultJSON
	if err := json.Unmarshal(b, &aux); err != nil {
		return fmt.Errorf("tool result message: %w", err)
	}
	if string(bytes.TrimSpace(aux.Details)) == "null" {
		aux.Details = nil
	}
	*m = ToolResultMessage(aux)
	return nil
}

// Message is one message of a conversation: exactly one of its fields is
// set. In JSON it is the message itself, told apart by its "role".
type Message struct {
	User       *UserMessage
	Assistant  *AssistantMessage
	ToolResult *ToolResultMessage
}

// UserText returns a user message holding one text block, stamped now.
func UserText(text string) Message {
	return Message{User: &UserMessage{Content: []Content{Text(text)}, Timestamp: Now()}}
}

// Role returns the role of the message that is set, or "".
func (m Message) Role() string {
	switch {
	case m.User != nil:
		return RoleUser
	case m.Assistant != nil:
		return RoleAssistant
	case m.ToolResult != nil:
		return RoleToolResult
	}
	return ""
}

var errEmptyMessage = errors.New("llm: message has no role")

// MarshalJSON writes the message that is set.
func (m Message) MarshalJSON() ([]byte, error) {
	switch {
	case m.User != nil:
		return json.Marshal(m.User)
	case m.Assistant != nil:
		return json.Marshal(m.Assistant)
	case m.ToolResult != nil:
		return json.Marshal(m.ToolResult)
	}
	return nil, errEmptyMessage
}

// UnmarshalJSON reads a message by its role.
func (m *Message) UnmarshalJSON(b []byte) error {
	var head struct {
		Role string `json:"role"`
	}
	if err := json.Unmarshal(b, &head); err != nil {
		return fmt.Errorf("message: %w", err)
	}
	*m = Message{}
	switch head.Role {
	case RoleUser:
		m.User = new(UserMessage)
		return json.Unmarshal(b, m.User)
	case RoleAssistant:
		m.Assistant = new(AssistantMessage)
		return json.Unmarshal(b, m.Assistant)
	case RoleToolResult:
		m.ToolResult = new(ToolResultMessage)
		return json.Unmarshal(b, m.ToolResult)
	}
	return fmt.Errorf("message: unknown role %q", head.Role)
}

// Tool describes a tool the model may call.
type Tool struct {
	Name        string `json:"name"`
	Description string `json:"description"`
	// Parameters is the JSON schema of the arguments (an object schema).
	Parameters json.RawMessage `json:"parameters"`
	// Label is the tool's display name in pi's clients (AgentTool.label);
	// kept for the round trip, never sent to a model.
	Label string `json:"label,omitempty"`
}

// Context is everything the model sees: system prompt, history and tools.
type Context struct {
	SystemPrompt string    `json:"systemPrompt,omitempty"`
	Messages     []Message `json:"messages"`
	Tools        []Tool    `json:"tools,omitempty"`
}

// UnmarshalJSON reads a context leniently, whatever the decoder's
// settings: pi's clients send more than is modelled here (fields of newer pi
// versions, UI data on messages and tools), and none of it changes what the
// model is sent, so it is ignored rather than refused. Types and the
// message roles are still checked.
func (c *Context) UnmarshalJSON(b []byte) error {
	type plain Context
	var p plain
	if err := json.Unmarshal(b, &p); err != nil {
		return fmt.Errorf("context: %w", err)
	}
	*c = Context(p)
	return nil
}

// MarshalJSON writes messages as [] rather than null when there are none.
func (c Context) MarshalJSON() ([]byte, error) {
	type plain Context
	if c.Messages == nil {
		c.Messages = []Message{}
	}
	for i, t := range c.Tools {
		if len(t.Parameters) == 0 || !json.Valid(t.Parameters) {
			c.Tools = append([]Tool(nil), c.Tools...)
			c.Tools[i].Parameters = json.RawMessage(`{"type":"object","properties":{}}`)
		}
	}
	return json.Marshal(plain(c))
}
