package llm

import (
	"context"
	"errors"
	"fmt"
	"strings"
)

// Builder assembles an AssistantMessage from a provider's stream and emits
// the matching events, so that every provider produces the same sequence:
// start, then for each block its _start, _delta… and _end, then done or
// error. It is for provider implementations; it is not safe for concurrent
// use. Block indexes it returns are content indexes of the message.
type Builder struct {
	model   Model
	emit    func(Event)
	msg     AssistantMessage
	started bool
	blocks  []blockState
}

type blockState struct {
	open bool
	buf  strings.Builder // text, thinking or raw tool arguments
}

// NewBuilder starts the message of one request to model. emit may be nil.
func NewBuilder(model Model, emit func(Event)) *Builder {
	if emit == nil {
		emit = func(Event) {}
	}
	return &Builder{
		model: model,
		emit:  emit,
		msg: AssistantMessage{
			Content:    []Content{},
			API:        model.API,
			Provider:   model.Provider,
			Model:      model.ID,
			StopReason: StopReasonStop,
			Timestamp:  Now(),
		},
	}
}

// Start emits the start event; the other methods call it if needed.
func (b *Builder) Start() {
	if b.started {
		return
	}
	b.started = true
	b.emit(Event{Type: EventStart})
}

func (b *Builder) begin(c Content, t EventType) int {
	b.Start()
	b.msg.Content = append(b.msg.Content, c)
	b.blocks = append(b.blocks, blockState{open: true})
	i := len(b.msg.Content) - 1
	b.emit(Event{Type: t, ContentIndex: i})
	return i
}

func (b *Builder) state(i int, typ string) *blockState {
	if i < 0 || i >= len(b.blocks) || b.msg.Content[i].Type != typ || !b.blocks[i].open {
		return nil
	}
	return &b.blocks[i]
}

// BeginText opens a text block.
func (b *Builder) BeginText() int { return b.begin(Content{Type: ContentText}, EventTextStart) }

// AppendText adds text to text block i.
func (b *Builder) AppendText(i int, s string) {
	if st := b.state(i, ContentText); st != nil && s != "" {
		st.buf.WriteString(s)
		b.emit(Event{Type: EventTextDelta, ContentIndex: i, Delta: s})
	}
}

// SetTextSignature sets the opaque provider id of text block i.
func (b *Builder) SetTextSignature(i int, sig string) {
	if i >= 0 && i < len(b.msg.Content) && b.msg.Content[i].Type == ContentText {
		b.msg.Content[i].TextSignature = sig
	}
}

// BeginThinking opens a thinking block.
func (b *Builder) BeginThinking() int {
	return b.begin(Content{Type: ContentThinking}, EventThinkingStart)
}

// AppendThinking adds reasoning text to thinking block i.
func (b *Builder) AppendThinking(i int, s string) {
	if st := b.state(i, ContentThinking); st != nil && s != "" {
		st.buf.WriteString(s)
		b.emit(Event{Type: EventThinkingDelta, ContentIndex: i, Delta: s})
	}
}

// AppendSignature adds to the signature of thinking block i.
func (b *Builder) AppendSignature(i int, sig string) {
	if b.state(i, ContentThinking) != nil {
		b.msg.Content[i].ThinkingSignature += sig
	}
}

// AddRedactedThinking adds a whole redacted thinking block, whose data is
// opaque and kept as its signature.
func (b *Builder) AddRedactedThinking(data string) int {
	i := b.begin(Content{Type: ContentThinking, ThinkingSignature: data, Redacted: true}, EventThinkingStart)
	b.blocks[i].buf.WriteString("[Reasoning redacted]")
	b.End(i)
	return i
}

// SetThinkingSignature sets the signature of thinking block i.
func (b *Builder) SetThinkingSignature(i int, sig string) {
	if i >= 0 && i < len(b.msg.Content) && b.msg.Content[i].Type == ContentThinking {
		b.msg.Content[i].ThinkingSignature = sig
	}
}

// BeginToolCall opens a tool call block. Its toolcall_start event carries
// the call's id and name (in ToolCall), so that the partial message a pi
// client gets names the call from its first event: pi keys the tool's
// view by the call's id.
func (b *Builder) BeginToolCall(id, name string) int {
	c := Content{Type: ContentToolCall, ID: id, Name: name, Arguments: emptyObject}
	b.Start()
	b.msg.Content = append(b.msg.Content, c)
	b.blocks = append(b.blocks, blockState{open: true})
	i := len(b.msg.Content) - 1
	b.emit(Event{Type: EventToolCallStart, ContentIndex: i, ToolCall: &c})
	return i
}

// SetToolCallID sets the id of tool call i (OpenAI may send it late).
func (b *Builder) SetToolCallID(i int, id string) {
	if b.state(i, ContentToolCall) != nil && id != "" {
		b.msg.Content[i].ID = id
	}
}

// SetToolCallSignature sets the thought signature of tool call i (Gemini).
func (b *Builder) SetToolCallSignature(i int, sig string) {
	if b.state(i, ContentToolCall) != nil && sig != "" {
		b.msg.Content[i].ThoughtSignature = sig
	}
}

// SetToolCallName sets the name of tool call i.
func (b *Builder) SetToolCallName(i int, name string) {
	if b.state(i, ContentToolCall) != nil && name != "" {
		b.msg.Content[i].Name = name
	}
}

// AppendToolCall adds raw argument JSON text to tool call i. The text is
// parsed once, when the block ends.
func (b *Builder) AppendToolCall(i int, s string) {
	if st := b.state(i, ContentToolCall); st != nil {
		st.buf.WriteString(s)
		b.emit(Event{Type: EventToolCallDelta, ContentIndex: i, Delta: s})
	}
}

// End closes block i and emits its _end event. Tool call arguments are
// parsed here; text that is not a JSON object gives {} and is kept in
// InvalidArguments.
func (b *Builder) End(i int) {
	if i < 0 || i >= len(b.blocks) || !b.blocks[i].open {
		return
	}
	st := &b.blocks[i]
	st.open = false
	c := &b.msg.Content[i]
	switch c.Type {
	case ContentText:
		c.Text = st.buf.String()
		b.emit(Event{Type: EventTextEnd, ContentIndex: i, Content: c.Text})
	case ContentThinking:
		c.Thinking = st.buf.String()
		b.emit(Event{Type: EventThinkingEnd, ContentIndex: i, Content: c.Thinking})
	case ContentToolCall:
		raw := st.buf.String()
		args, ok := ParseArguments(raw)
		c.Arguments = args
		if !ok {
			c.InvalidArguments = raw
		}
		call := *c
		b.emit(Event{Type: EventToolCallEnd, ContentIndex: i, ToolCall: &call})
	}
	st.buf.Reset()
}

// EndAll closes every open block, in order.
func (b *Builder) EndAll() {
	for i := range b.blocks {
		b.End(i)
	}
}

// IsOpen reports whether block i is open.
func (b *Builder) IsOpen(i int) bool { return i >= 0 && i < len(b.blocks) && b.blocks[i].open }

// SetUsage sets the token counts; the total and the cost are computed from
// them and the model's prices.
func (b *Builder) SetUsage(u Usage) {
	u.TotalTokens = u.Input + u.Output + u.CacheRead + u.CacheWrite
	u.Cost = b.model.Cost.Of(u)
	b.msg.Usage = u
}

// SetStopReason sets why the model stopped.
func (b *Builder) SetStopReason(r StopReason) { b.msg.StopReason = r }

// StopReason returns the stop reason so far.
func (b *Builder) StopReason() StopReason { return b.msg.StopReason }

// Finish closes any open block, emits done and returns the message.
func (b *Builder) Finish() (*AssistantMessage, error) {
	b.Start()
	b.EndAll()
	msg := b.msg.Clone()
	b.emit(Event{Type: EventDone, Reason: string(msg.StopReason), Message: msg})
	return msg.Clone(), nil
}

// Fail ends the message with an error: stopReason aborted if ctx is done
// (the returned error then wraps ctx.Err() and its cause), error otherwise.
// It emits the error event and returns the failed message with the error.
// Open blocks keep what arrived, without _end events.
func (b *Builder) Fail(ctx context.Context, err error) (*AssistantMessage, error) {
	b.Start()
	for i := range b.blocks {
		if !b.blocks[i].open {
			continue
		}
		c := &b.msg.Content[i]
		switch c.Type {
		case ContentText:
			c.Text = b.blocks[i].buf.String()
		case ContentThinking:
			c.Thinking = b.blocks[i].buf.String()
		case ContentToolCall:
			if args, ok := ParseArguments(b.blocks[i].buf.String()); ok {
				c.Arguments = args
			} else {
				c.InvalidArguments = b.blocks[i].buf.String()
			}
		}
		b.blocks[i].open = false
	}
	if ctx != nil && ctx.Err() != nil {
		b.msg.StopReason = StopReasonAborted
		b.msg.ErrorMessage = "Request was aborted"
		err = AbortError(ctx)
	} else {
		if err == nil {
			err = errors.New("llm: unknown error")
		}
		b.msg.StopReason = StopReasonError
		b.msg.ErrorMessage = ErrorMessage(err)
	}
	msg := b.msg.Clone()
	b.emit(Event{Type: EventError, Reason: string(msg.StopReason), Error: msg})
	return msg.Clone(), err
}

// AbortError returns the error for a request whose ctx is done: it wraps
// ctx.Err() (so errors.Is(err, context.Canceled) holds) and, when it differs,
// the cancellation cause.
func AbortError(ctx context.Context) error {
	cause := context.Cause(ctx)
	if cause == nil || errors.Is(cause, ctx.Err()) {
		return fmt.Errorf("llm: request aborted: %w", ctx.Err())
	}
	return fmt.Errorf("llm: request aborted: %w: %w", ctx.Err(), cause)
}
