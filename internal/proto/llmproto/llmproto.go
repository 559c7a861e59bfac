// Package llmproto holds the wire types of the HTTP API that carry the
// provider-neutral model types of internal/llm: the body of POST
// /api/chat/stream and the entries of GET /api/agents/:name/models. They are
// apart from internal/proto because internal/llm needs package net/http, and
// internal/proto is linked into the small in-sandbox binary, which must not.
package llmproto

import (
	"encoding/json"
	"errors"
	"fmt"
	"unicode/utf8"

	"github.com/beige-dev/beige/internal/llm"
)

// ChatStreamRequest is the body of POST /api/chat/stream. Its own fields
// and options are decoded strictly (a misspelt "modelId" or "maxTokens"
// would otherwise silently change the call); the context is pi's and is
// read leniently (see [llm.Context.UnmarshalJSON]): pi's clients send
// fields such as a tool's label or a message's usage that do not change
// what the model is sent.
type ChatStreamRequest struct {
	Provider   string       `json:"provider"`
	ModelID    string       `json:"modelId"`
	Context    llm.Context  `json:"context"`
	Options    *ChatOptions `json:"options,omitempty"`
	AgentName  string       `json:"agentName"`
	SessionKey string       `json:"sessionKey,omitempty"`
	// Partial false leaves the message so far out of the block events
	// (start keeps it), for a client that rebuilds it from the deltas,
	// as ours does: it is repeated in every event, so the stream's size
	// grows with the square of the answer's. Nil or true sends it, as
	// pi's clients need.
	Partial *bool `json:"partial,omitempty"`
}

// ChatOptions are the request options of a proxied model call.
type ChatOptions struct {
	// Reasoning turns thinking on (at the model's configured thinking
	// level, or medium), off, or to a level; nil keeps the configured one.
	Reasoning   *Reasoning `json:"reasoning,omitempty"`
	MaxTokens   int        `json:"maxTokens,omitempty"`
	Temperature *float64   `json:"temperature,omitempty"`
}

// Reasoning is options.reasoning: a bool (our clients, pi before its
// thinking levels) or one of pi's ThinkingLevel names, "minimal" to
// "xhigh" (what pi sends when the user picks a level); "off" is false.
type Reasoning struct {
	// Level is the level asked for, or "" for true and false.
	Level llm.ThinkingLevel
	// On is whether thinking is asked for at all.
	On bool
}

// UnmarshalJSON reads a bool or a level name.
func (r *Reasoning) UnmarshalJSON(b []byte) error {
	var on bool
	if err := json.Unmarshal(b, &on); err == nil {
		*r = Reasoning{On: on}
		return nil
	}
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return errors.New(`options.reasoning: want true, false or a thinking level (minimal, low, medium, high, xhigh)`)
	}
	l, err := llm.ParseThinkingLevel(s)
	if err != nil || s == "" {
		return fmt.Errorf(`options.reasoning: want true, false or a thinking level (minimal, low, medium, high, xhigh), got %q`, clipEcho(s))
	}
	if l == llm.ThinkingOff {
		*r = Reasoning{}
		return nil
	}
	*r = Reasoning{Level: l, On: true}
	return nil
}

// MarshalJSON writes the level, or the bool when there is none.
func (r Reasoning) MarshalJSON() ([]byte, error) {
	if r.On && r.Level != "" {
		return json.Marshal(string(r.Level))
	}
	return json.Marshal(r.On)
}

// AgentModel is one entry of GET /api/agents/:name/models.
type AgentModel struct {
	llm.Model
	ThinkingLevel string `json:"thinkingLevel"`
}

// clipEcho bounds a part of the client's body echoed in an error, on a
// rune boundary.
func clipEcho(s string) string {
	const max = 120
	if len(s) <= max {
		return s
	}
	n := max
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}
