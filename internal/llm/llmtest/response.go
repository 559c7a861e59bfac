package llmtest

import (
	"encoding/json"
	"net/http"
	"time"
)

// Block is one content block of a scripted reply.
type Block struct {
	Kind string // "text", "thinking", "redactedThinking" (Anthropic only) or "toolCall"

	Text string // text, or the reasoning of a thinking block

	// Signature of a thinking block (Anthropic signature_delta); empty
	// means a generated one. For OpenAI servers, ReasoningField names the
	// delta field the reasoning is sent in ("reasoning_content" if empty,
	// or "reasoning").
	Signature      string
	ReasoningField string

	// ID of a tool call; empty means a generated one ("toolu_…" / "call_…").
	ID   string
	Name string
	// Args is the raw argument JSON text, streamed in pieces. It need not
	// be valid (see MalformedToolCall).
	Args string
}

// Usage is the token counts a scripted reply reports.
type Usage struct {
	Input, Output, CacheRead, CacheWrite int
}

// Response is one scripted answer: an HTTP error (Status ≥ 400), or a
// stream of Blocks in the provider's wire format, possibly broken on
// purpose. Build it with the constructors and methods below; each method
// returns a changed copy.
type Response struct {
	// Status is the HTTP status; 0 means a 200 stream.
	Status int
	// Header is added to the response header.
	Header http.Header
	// Body is the body of an error response; empty means the provider's JSON
	// error shape built from ErrorType and ErrorMessage.
	Body         string
	ErrorType    string
	ErrorMessage string

	Blocks []Block
	// Stop is the neutral stop reason: "stop", "length" or "toolUse";
	// empty means toolUse if there is a tool call, else stop. A wire value
	// ("end_turn", "tool_calls", "refusal", …) is sent as it is. For the
	// Responses API, "content_filter" and "failed" end the stream with
	// response.incomplete and response.failed.
	Stop string
	// Usage is reported at the end; nil means {Input: 10, Output: 5}.
	Usage *Usage
	// Chunk is how many bytes of text each delta carries (default 4).
	Chunk int
	// Delay is waited before each event.
	Delay time.Duration
	// Gate, if not nil, holds the answer (before any byte is sent) until it
	// is closed or the client goes away: for concurrency tests.
	Gate <-chan struct{}

	toolIndexZero bool // OpenAI: every tool call at index 0

	breakAt   int    // events written before the break
	breakKind string // "cut", "end", "fail", "hang"
	failType  string
	failMsg   string
}

func (r Response) withBreak(n int, kind string) Response {
	r.breakAt, r.breakKind = n, kind
	return r
}

// Reply returns a streamed reply of the given blocks.
func Reply(blocks ...Block) Response { return Response{Blocks: blocks} }

// Text returns a reply of one text block.
func Text(s string) Response { return Reply(TextBlock(s)) }

// Thinking returns a reply of a thinking block followed by a text block.
func Thinking(thinking, text string) Response {
	return Reply(ThinkingBlock(thinking), TextBlock(text))
}

// ToolCall returns a reply of one tool call; args is marshalled to JSON
// (a json.RawMessage is sent as it is).
func ToolCall(name string, args any) Response { return Reply(Call(name, args)) }

// ToolCalls returns a reply of several tool calls (see Call).
func ToolCalls(calls ...Block) Response { return Reply(calls...) }

// MalformedToolCall returns a reply of one tool call whose argument text is
// raw, e.g. `{"command": "ls` (cut off) or `not json`.
func MalformedToolCall(name, raw string) Response {
	return Reply(Block{Kind: "toolCall", Name: name, Args: raw})
}

// TextBlock returns a text block.
func TextBlock(s string) Block { return Block{Kind: "text", Text: s} }

// ThinkingBlock returns a thinking block with a generated signature.
func ThinkingBlock(s string) Block { return Block{Kind: "thinking", Text: s} }

// RedactedThinkingBlock returns an Anthropic redacted_thinking block
// carrying opaque data (OpenAI servers leave it out).
func RedactedThinkingBlock(data string) Block { return Block{Kind: "redactedThinking", Text: data} }

// Call returns a tool call block; args is marshalled to JSON (a
// json.RawMessage is sent as it is).
func Call(name string, args any) Block {
	var raw string
	switch a := args.(type) {
	case json.RawMessage:
		raw = string(a)
	case nil:
		raw = "{}"
	default:
		b, err := json.Marshal(a)
		if err != nil {
			panic("llmtest: marshal tool arguments: " + err.Error())
		}
		raw = string(b)
	}
	return Block{Kind: "toolCall", Name: name, Args: raw}
}

// Error returns an HTTP error response. An empty body means the provider's
// JSON error shape for status; header may be nil (e.g. set retry-after).
func Error(status int, body string, header http.Header) Response {
	return Response{Status: status, Body: body, Header: header.Clone()}
}

// Status returns an HTTP error response with the provider's usual body for
// that status (429 rate_limit_error, 529 overloaded_error, 401
// authentication_error, …).
func Status(code int) Response { return Error(code, "", nil) }

// Hang returns a stream that sends its first event and then waits until
// the client goes away (or the server closes): for watchdog and cancel
// tests.
func Hang() Response { return Text("never").HangAfter(1) }

// WithUsage sets the reported input and output tokens.
func (r Response) WithUsage(input, output int) Response {
	u := Usage{Input: input, Output: output}
	if r.Usage != nil {
		u.CacheRead, u.CacheWrite = r.Usage.CacheRead, r.Usage.CacheWrite
	}
	r.Usage = &u
	return r
}

// WithCache sets the reported cache read and write tokens.
func (r Response) WithCache(read, write int) Response {
	u := Usage{Input: 10, Output: 5}
	if r.Usage != nil {
		u = *r.Usage
	}
	u.CacheRead, u.CacheWrite = read, write
	r.Usage = &u
	return r
}

// WithStop sets the stop reason (neutral or wire value).
func (r Response) WithStop(stop string) Response { r.Stop = stop; return r }

// WithHeader adds a response header.
func (r Response) WithHeader(key, value string) Response {
	r.Header = r.Header.Clone()
	if r.Header == nil {
		r.Header = http.Header{}
	}
	r.Header.Add(key, value)
	return r
}

// WithDelay waits d before each event (a slow stream).
func (r Response) WithDelay(d time.Duration) Response { r.Delay = d; return r }

// WithChunk sets how many bytes of text each delta carries.
func (r Response) WithChunk(n int) Response { r.Chunk = n; return r }

// WithToolIndexZero sends every tool call at index 0, told apart only by
// their ids, as some OpenAI-compatible servers do (OpenAI only).
func (r Response) WithToolIndexZero() Response { r.toolIndexZero = true; return r }

// WithGate holds the answer until gate is closed (or the client goes away).
func (r Response) WithGate(gate <-chan struct{}) Response { r.Gate = gate; return r }

// CutAfter drops the connection abruptly after n events (no terminating
// chunk): the client sees an unexpected EOF.
func (r Response) CutAfter(n int) Response { return r.withBreak(n, "cut") }

// EndAfter ends the response cleanly after n events, without the final
// events (message_stop, [DONE]): a stream that stops early.
func (r Response) EndAfter(n int) Response { return r.withBreak(n, "end") }

// FailAfter sends a provider error event after n events and ends the
// stream, like a server failing mid-stream (Anthropic "event: error",
// OpenAI `data: {"error": …}`). errType is e.g. "overloaded_error" or
// "api_error"; empty type and message mean an api_error "Internal server
// error".
func (r Response) FailAfter(n int, errType, msg string) Response {
	if errType == "" && msg == "" {
		errType, msg = "api_error", "Internal server error"
	}
	r = r.withBreak(n, "fail")
	r.failType, r.failMsg = errType, msg
	return r
}

// HangAfter sends n events and then waits, sending nothing, until the client
// goes away or the server closes.
func (r Response) HangAfter(n int) Response { return r.withBreak(n, "hang") }

func (r Response) usage() Usage {
	if r.Usage == nil {
		return Usage{Input: 10, Output: 5}
	}
	return *r.Usage
}

// stop returns the neutral stop reason.
func (r Response) stop() string {
	if r.Stop != "" {
		return r.Stop
	}
	for _, b := range r.Blocks {
		if b.Kind == "toolCall" {
			return "toolUse"
		}
	}
	return "stop"
}

func (r Response) chunk() int {
	if r.Chunk <= 0 {
		return 4
	}
	return r.Chunk
}

// split cuts s into pieces of about n bytes, on UTF-8 boundaries.
func split(s string, n int) []string {
	if s == "" {
		return nil
	}
	var out []string
	for len(s) > 0 {
		i := min(n, len(s))
		for i < len(s) && i > 0 && s[i]&0xC0 == 0x80 {
			i++
		}
		out = append(out, s[:i])
		s = s[i:]
	}
	return out
}
