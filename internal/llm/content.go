package llm

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// Content block types, as pi names them.
const (
	ContentText     = "text"
	ContentThinking = "thinking"
	ContentImage    = "image"
	ContentToolCall = "toolCall"
)

// Content is one block of a message: text, thinking, an image or a tool call.
// Which fields apply depends on Type; the JSON holds only those, in pi's
// shapes:
//
//	{"type":"text","text":"…","textSignature":"…"?}
//	{"type":"thinking","thinking":"…","thinkingSignature":"…"?,"redacted":true?}
//	{"type":"image","data":"<base64>","mimeType":"image/png"}
//	{"type":"toolCall","id":"…","name":"…","arguments":{…}}
type Content struct {
	// Type is one of ContentText, ContentThinking, ContentImage, ContentToolCall.
	Type string

	// Text is the text of a text block.
	Text string
	// TextSignature is an opaque provider id of a text block (OpenAI
	// Responses message id); optional.
	TextSignature string

	// Thinking is the reasoning text of a thinking block.
	Thinking string
	// ThinkingSignature is the provider's opaque signature of a thinking
	// block, needed to send it back (Anthropic); for a redacted block it is
	// the encrypted data. For OpenAI-compatible servers it names the field
	// the reasoning came in ("reasoning_content" or "reasoning").
	ThinkingSignature string
	// Redacted marks a thinking block whose content the provider encrypted.
	Redacted bool

	// Data is the base64 data of an image block.
	Data string
	// MimeType is the media type of an image block, e.g. "image/png".
	MimeType string

	// ID is the provider's id of a tool call.
	ID string
	// Name is the name of the tool called.
	Name string
	// Arguments is the JSON object of a tool call's arguments. It is always
	// an object on the wire; nil encodes as {}.
	Arguments json.RawMessage
	// ThoughtSignature is the provider's opaque signature of a tool call
	// (Gemini's thoughtSignature, base64), needed to send the call back to
	// the model that made it; optional.
	ThoughtSignature string

	// InvalidArguments holds the model's argument text when it was not a JSON
	// object (malformed or cut-off JSON); Arguments is then {}. It is not
	// part of the wire format: the agent loop should answer such a call with
	// an error tool result rather than run the tool with empty arguments.
	InvalidArguments string
}

// Text returns a text block.
func Text(s string) Content { return Content{Type: ContentText, Text: s} }

// Image returns an image block of base64 data.
func Image(data, mimeType string) Content {
	return Content{Type: ContentImage, Data: data, MimeType: mimeType}
}

// ToolCallContent returns a tool call block; args must be a JSON object.
func ToolCallContent(id, name string, args json.RawMessage) Content {
	return Content{Type: ContentToolCall, ID: id, Name: name, Arguments: args}
}

var emptyObject = json.RawMessage(`{}`)

// ParseArguments turns a tool call's streamed argument text into a JSON
// object. Empty text means no arguments ({}). Text that is not a JSON object
// gives {} and reports ok false, so the caller can keep the raw text.
func ParseArguments(raw string) (args json.RawMessage, ok bool) {
	b := bytes.TrimSpace([]byte(raw))
	if len(b) == 0 {
		return emptyObject, true
	}
	if b[0] != '{' || !json.Valid(b) {
		return emptyObject, false
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, b); err != nil {
		return emptyObject, false
	}
	return json.RawMessage(buf.Bytes()), true
}

type contentText struct {
	Type          string `json:"type"`
	Text          string `json:"text"`
	TextSignature string `json:"textSignature,omitempty"`
}

type contentThinking struct {
	Type              string `json:"type"`
	Thinking          string `json:"thinking"`
	ThinkingSignature string `json:"thinkingSignature,omitempty"`
	Redacted          bool   `json:"redacted,omitempty"`
}

type contentImage struct {
	Type     string `json:"type"`
	Data     string `json:"data"`
	MimeType string `json:"mimeType"`
}

type contentToolCall struct {
	Type             string          `json:"type"`
	ID               string          `json:"id"`
	Name             string          `json:"name"`
	Arguments        json.RawMessage `json:"arguments"`
	ThoughtSignature string          `json:"thoughtSignature,omitempty"`
}

// contentAny is every field at once, for decoding and for unknown types.
type contentAny struct {
	Type              string          `json:"type"`
	Text              string          `json:"text,omitempty"`
	TextSignature     string          `json:"textSignature,omitempty"`
	Thinking          string          `json:"thinking,omitempty"`
	ThinkingSignature string          `json:"thinkingSignature,omitempty"`
	Redacted          bool            `json:"redacted,omitempty"`
	Data              string          `json:"data,omitempty"`
	MimeType          string          `json:"mimeType,omitempty"`
	ID                string          `json:"id,omitempty"`
	Name              string          `json:"name,omitempty"`
	Arguments         json.RawMessage `json:"arguments,omitempty"`
	ThoughtSignature  string          `json:"thoughtSignature,omitempty"`
}

// MarshalJSON writes the block in pi's shape for its type.
func (c Content) MarshalJSON() ([]byte, error) {
	switch c.Type {
	case ContentText:
		return json.Marshal(contentText{c.Type, c.Text, c.TextSignature})
	case ContentThinking:
		return json.Marshal(contentThinking{c.Type, c.Thinking, c.ThinkingSignature, c.Redacted})
	case ContentImage:
		return json.Marshal(contentImage{c.Type, c.Data, c.MimeType})
	case ContentToolCall:
		args := c.Arguments
		if a, ok := ParseArguments(string(args)); ok {
			args = a
		} else {
			args = emptyObject
		}
		return json.Marshal(contentToolCall{c.Type, c.ID, c.Name, args, c.ThoughtSignature})
	default:
		var args json.RawMessage
		if len(c.Arguments) > 0 && json.Valid(c.Arguments) {
			args = c.Arguments
		}
		return json.Marshal(contentAny{c.Type, c.Text, c.TextSignature, c.Thinking, c.ThinkingSignature,
			c.Redacted, c.Data, c.MimeType, c.ID, c.Name, args, c.ThoughtSignature})
	}
}

// UnmarshalJSON reads a block. Tool call arguments that are not a JSON
// object become {} with the raw text kept in InvalidArguments.
func (c *Content) UnmarshalJSON(b []byte) error {
	var a contentAny
	if err := json.Unmarshal(b, &a); err != nil {
		return fmt.Errorf("content block: %w", err)
	}
	*c = Content{
		Type: a.Type, Text: a.Text, TextSignature: a.TextSignature,
		Thinking: a.Thinking, ThinkingSignature: a.ThinkingSignature, Redacted: a.Redacted,
		Data: a.Data, MimeType: a.MimeType, ID: a.ID, Name: a.Name,
		ThoughtSignature: a.ThoughtSignature,
	}
	if a.Type == ContentToolCall {
		raw := bytes.TrimSpace(a.Arguments)
		if len(raw) == 0 || string(raw) == "null" {
			c.Arguments = emptyObject
		} else if args, ok := ParseArguments(string(raw)); ok {
			c.Arguments = args
		} else {
			c.Arguments = emptyObject
			c.InvalidArguments = string(raw)
		}
	} else if len(a.Arguments) > 0 {
		c.Arguments = append(json.RawMessage(nil), a.Arguments...)
	}
	return nil
}
