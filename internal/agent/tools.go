package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/beige-dev/beige/internal/llm"
	"github.com/beige-dev/beige/internal/proto"
)

// Tools are the tools a model may call. The gateway implements it with the
// core tools in the agent's sandbox (through its tool pipeline); a terminal client
// implements it over the gateway's /api/agents/:name/exec.
type Tools interface {
	// Definitions lists the tools, for the model.
	Definitions() []llm.Tool
	// Run runs one call. A call that fails (bad arguments, a tool error, a
	// sandbox that is down) gives an outcome with IsError and a message
	// for the model; there is no error return, because the model is told
	// and the loop goes on. Run should return promptly when ctx ends.
	Run(ctx context.Context, call ToolCall) ToolOutcome
}

// ToolCall is one tool call of the model, and on whose behalf it runs.
type ToolCall struct {
	ID   string // the model's id of the call
	Name string
	// Arguments is the JSON object of the arguments.
	Arguments json.RawMessage
	// InvalidArguments is the model's argument text when it was not a JSON
	// object (Arguments is then {}). The loop answers such calls itself,
	// so Run only sees it when called from elsewhere.
	InvalidArguments string
	// Session says where the prompt came from (channel, chat, thread).
	Session proto.SessionContext
	// Model is the id of the model that asked, for the audit log.
	Model string
	// Images says the model accepts images, so a tool may return them.
	Images bool
}

// ToolOutcome is what a tool call gave: text and image blocks.
type ToolOutcome struct {
	Content []llm.Content
	IsError bool
}

// ErrorOutcome returns an error outcome holding one text block.
func ErrorOutcome(format string, args ...any) ToolOutcome {
	return ToolOutcome{Content: []llm.Content{llm.Text(fmt.Sprintf(format, args...))}, IsError: true}
}

// TextOutcome returns an outcome holding one text block.
func TextOutcome(text string, isError bool) ToolOutcome {
	return ToolOutcome{Content: []llm.Content{llm.Text(text)}, IsError: isError}
}

// MaxToolResultBytes bounds the text of one tool result sent to the model.
// The core tools cap their own output well below it; this guards against
// any other Tools implementation.
const MaxToolResultBytes = 100 << 10

// capOutcome cuts the text blocks of o to MaxToolResultBytes in all, on a
// rune boundary, with a note saying how much was left out.
func capOutcome(o ToolOutcome) ToolOutcome {
	total := 0
	for _, c := range o.Content {
		if c.Type == llm.ContentText {
			total += len(c.Text)
		}
	}
	if total <= MaxToolResultBytes {
		return o
	}
	out := make([]llm.Content, 0, len(o.Content))
	left := MaxToolResultBytes
	for _, c := range o.Content {
		if c.Type != llm.ContentText {
			out = append(out, c)
			continue
		}
		if left <= 0 {
			continue
		}
		if len(c.Text) > left {
			c.Text = cutUTF8(c.Text, left)
		}
		left -= len(c.Text)
		out = append(out, c)
	}
	out = append(out, llm.Text(fmt.Sprintf("\n[tool result truncated: showed %d of %d bytes of text]",
		MaxToolResultBytes-max(left, 0), total)))
	return ToolOutcome{Content: out, IsError: o.IsError}
}

// cutUTF8 returns the longest prefix of s of at most n bytes that does not
// end inside a rune.
func cutUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// clipText shortens s to about n bytes for messages, marking the cut.
func clipText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return cutUTF8(s, n) + "…"
}

// ToolCallSummary describes a call in one line for people watching (verbose
// mode: "exec: ls -la", "read: notes.md", "write: a.txt (12 bytes)").
func ToolCallSummary(name string, args json.RawMessage) string {
	var a map[string]any
	_ = json.Unmarshal(args, &a)
	str := func(k string) string { s, _ := a[k].(string); return s }
	var detail string
	switch name {
	case "exec":
		detail = str("command")
	case "read", "patch":
		detail = str("path")
	case "write":
		detail = fmt.Sprintf("%s (%d bytes)", str("path"), len(str("content")))
	default:
		detail = string(args)
	}
	detail = strings.Join(strings.Fields(detail), " ")
	if detail == "" || detail == "{}" {
		return name
	}
	return name + ": " + clipText(detail, 200)
}

// FromToolResult converts a core tool's result (as POST
// /api/agents/:name/exec returns it) to an outcome.
func FromToolResult(r proto.ToolResult) ToolOutcome {
	o := ToolOutcome{IsError: r.IsError, Content: make([]llm.Content, 0, len(r.Content))}
	for _, c := range r.Content {
		switch c.Type {
		case llm.ContentImage:
			o.Content = append(o.Content, llm.Image(c.Data, c.MimeType))
		default:
			o.Content = append(o.Content, llm.Text(c.Text))
		}
	}
	return o
}

// InvalidJSONOutcome answers a call whose arguments were not a JSON object.
func InvalidJSONOutcome(name, raw string) ToolOutcome {
	return ErrorOutcome("invalid arguments for %s: not a JSON object: %s\n"+
		"Call the tool again with its arguments as one complete JSON object that follows its schema.",
		name, clipText(raw, 300))
}

// UnknownToolOutcome answers a call of a tool that does not exist; defs
// are the tools that do.
func UnknownToolOutcome(name string, defs []llm.Tool) ToolOutcome {
	if len(defs) == 0 {
		return ErrorOutcome("unknown tool %q: no tools are available here.", clipText(name, 64))
	}
	names := make([]string, len(defs))
	for i, d := range defs {
		names[i] = d.Name
	}
	return ErrorOutcome("unknown tool %q. Available tools: %s. "+
		"Other tools are commands in /tools/bin: run them with exec.", clipText(name, 64), strings.Join(names, ", "))
}
