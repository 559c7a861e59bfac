package llm

import (
	"encoding/json"
	"fmt"
	"strings"
)

// EventType names a streaming event.
type EventType string

// The events of pi's AssistantMessageEvent, in the order a provider sends
// them: start; for each content block its _start, _delta… and _end; then
// done or error. The gateway adds blocked and model_fallback to the same
// stream.
const (
	EventStart         EventType = "start"
	EventTextStart     EventType = "text_start"
	EventTextDelta     EventType = "text_delta"
	EventTextEnd       EventType = "text_end"
	EventThinkingStart EventType = "thinking_start"
	EventThinkingDelta EventType = "thinking_delta"
	EventThinkingEnd   EventType = "thinking_end"
	EventToolCallStart EventType = "toolcall_start"
	EventToolCallDelta EventType = "toolcall_delta"
	EventToolCallEnd   EventType = "toolcall_end"
	EventDone          EventType = "done"
	EventError         EventType = "error"

	// EventBlocked says a prePrompt hook blocked the message (gateway only).
	EventBlocked EventType = "blocked"
	// EventModelFallback says the gateway switched model (gateway only).
	EventModelFallback EventType = "model_fallback"
)

// Event is one streaming event. Which fields are set depends on Type:
//
//	start                              partial?
//	text_start, thinking_start,
//	toolcall_start                     contentIndex, partial?
//	text_delta, thinking_delta,
//	toolcall_delta                     contentIndex, delta, partial?
//	text_end, thinking_end             contentIndex, content, partial?
//	toolcall_end                       contentIndex, toolCall, partial?
//	done                               reason (stop|length|toolUse), message
//	error                              reason (aborted|error), error
//	blocked                            reason
//	model_fallback                     provider, modelId
//
// Providers do not fill Partial (copying the message on every delta is
// quadratic); a caller that wants it can keep an [Accumulator]. The
// gateway's POST /api/chat/stream fills it on start and every block event,
// as pi's clients need.
type Event struct {
	Type         EventType
	ContentIndex int
	// Delta is the new text of a _delta event (raw JSON text for toolcall_delta).
	Delta string
	// Content is the whole text of the block, on text_end and thinking_end.
	Content string
	// ToolCall is the finished call, on toolcall_end. On toolcall_start
	// it names the call (id and name, no arguments yet) for an
	// [Accumulator]; it is not written to the wire there, as in pi.
	ToolCall *Content
	// Reason is the stop reason of done and error, or why a message was blocked.
	Reason string
	// Message is the final message, on done.
	Message *AssistantMessage
	// Error is the failed message (stopReason error or aborted, with
	// errorMessage), on error.
	Error *AssistantMessage
	// Partial is the message so far; optional, see above.
	Partial *AssistantMessage
	// Provider and ModelID name the new model, on model_fallback.
	Provider string
	ModelID  string
}

type eventJSON struct {
	Type         EventType         `json:"type"`
	ContentIndex *int              `json:"contentIndex,omitempty"`
	Delta        *string           `json:"delta,omitempty"`
	Content      *string           `json:"content,omitempty"`
	ToolCall     *Content          `json:"toolCall,omitempty"`
	Reason       *string           `json:"reason,omitempty"`
	Message      *AssistantMessage `json:"message,omitempty"`
	Error        *AssistantMessage `json:"error,omitempty"`
	Partial      *AssistantMessage `json:"partial,omitempty"`
	Provider     string            `json:"provider,omitempty"`
	ModelID      string            `json:"modelId,omitempty"`
}

func (t EventType) hasIndex() bool {
	return strings.HasSuffix(string(t), "_start") && t != EventStart ||
		strings.HasSuffix(string(t), "_delta") || strings.HasSuffix(string(t), "_end")
}

// MarshalJSON writes the fields that belong to the event's type, so that
// e.g. a contentIndex of 0 or an empty delta is still written.
func (e Event) MarshalJSON() ([]byte, error) {
	j := eventJSON{
		Type: e.Type, ToolCall: e.ToolCall, Message: e.Message, Error: e.Error,
		Partial: e.Partial, Provider: e.Provider, ModelID: e.ModelID,
	}
	if e.Type == EventToolCallStart {
		j.ToolCall = nil // pi's toolcall_start has only the partial
	}
	if e.Type.hasIndex() {
		j.ContentIndex = &e.ContentIndex
	}
	switch e.Type {
	case EventTextDelta, EventThinkingDelta, EventToolCallDelta:
		j.Delta = &e.Delta
	case EventTextEnd, EventThinkingEnd:
		j.Content = &e.Content
	case EventDone, EventError, EventBlocked:
		j.Reason = &e.Reason
	default:
		if e.Delta != "" {
			j.Delta = &e.Delta
		}
		if e.Content != "" {
			j.Content = &e.Content
		}
		if e.Reason != "" {
			j.Reason = &e.Reason
		}
	}
	return json.Marshal(j)
}

// UnmarshalJSON reads an event of any type.
func (e *Event) UnmarshalJSON(b []byte) error {
	var j eventJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return fmt.Errorf("event: %w", err)
	}
	*e = Event{
		Type: j.Type, ToolCall: j.ToolCall, Message: j.Message, Error: j.Error,
		Partial: j.Partial, Provider: j.Provider, ModelID: j.ModelID,
	}
	if j.ContentIndex != nil {
		e.ContentIndex = *j.ContentIndex
	}
	if j.Delta != nil {
		e.Delta = *j.Delta
	}
	if j.Content != nil {
		e.Content = *j.Content
	}
	if j.Reason != nil {
		e.Reason = *j.Reason
	}
	return nil
}

// Accumulator rebuilds the assistant message from a stream of events, for a
// caller that wants the partial message (to fill Event.Partial, to show
// progress, or to keep what arrived before an abort). Its zero value is
// ready to use.
type Accumulator struct {
	msg  AssistantMessage
	args map[int]*strings.Builder
	text map[int]*strings.Builder
}

// Apply adds one event.
func (a *Accumulator) Apply(e Event) {
	switch e.Type {
	case EventStart:
		if e.Partial != nil {
			a.msg = *e.Partial.Clone()
		}
	case EventModelFallback:
		// The gateway tries another model: what the failed attempt
		// streamed is not part of the answer.
		a.msg.Content, a.text, a.args = nil, nil, nil
		a.msg.Provider, a.msg.Model = e.Provider, e.ModelID
	case EventTextStart:
		a.set(e.ContentIndex, Content{Type: ContentText})
		delete(a.text, e.ContentIndex)
	case EventThinkingStart:
		a.set(e.ContentIndex, Content{Type: ContentThinking})
		delete(a.text, e.ContentIndex)
	case EventToolCallStart:
		c := Content{Type: ContentToolCall, Arguments: emptyObject}
		if e.ToolCall != nil {
			c.ID, c.Name = e.ToolCall.ID, e.ToolCall.Name
		}
		a.set(e.ContentIndex, c)
		delete(a.args, e.ContentIndex)
	case EventTextDelta, EventThinkingDelta, EventToolCallDelta:
		a.appendDelta(e.ContentIndex, e.Type, e.Delta)
	case EventTextEnd:
		if c := a.block(e.ContentIndex); c != nil {
			c.Text = e.Content
		}
		delete(a.text, e.ContentIndex)
	case EventThinkingEnd:
		if c := a.block(e.ContentIndex); c != nil {
			c.Thinking = e.Content
		}
		delete(a.text, e.ContentIndex)
	case EventToolCallEnd:
		if e.ToolCall != nil {
			a.set(e.ContentIndex, *e.ToolCall)
		}
		delete(a.args, e.ContentIndex)
	case EventDone:
		if e.Message != nil {
			a.msg = *e.Message.Clone()
		}
	case EventError:
		if e.Error != nil {
			a.msg = *e.Error.Clone()
		}
	}
}

func (a *Accumulator) block(i int) *Content {
	if i < 0 || i >= len(a.msg.Content) {
		return nil
	}
	return &a.msg.Content[i]
}

func (a *Accumulator) set(i int, c Content) {
	if i < 0 || i > 1<<20 {
		return
	}
	for len(a.msg.Content) <= i {
		a.msg.Content = append(a.msg.Content, Content{})
	}
	a.msg.Content[i] = c
}

func (a *Accumulator) appendDelta(i int, t EventType, d string) {
	c := a.block(i)
	if c == nil {
		return
	}
	m := &a.text
	if t == EventToolCallDelta {
		m = &a.args
	}
	if *m == nil {
		*m = map[int]*strings.Builder{}
	}
	sb := (*m)[i]
	if sb == nil {
		sb = new(strings.Builder)
		(*m)[i] = sb
	}
	sb.WriteString(d)
	switch t {
	case EventTextDelta:
		c.Text = sb.String()
	case EventThinkingDelta:
		c.Thinking = sb.String()
	}
}

// Message returns a copy of the message so far. Tool calls still streaming
// have {} arguments until their toolcall_end.
func (a *Accumulator) Message() *AssistantMessage { return a.msg.Clone() }
