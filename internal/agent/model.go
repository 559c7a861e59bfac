package agent

import (
	"context"

	"github.com/beige-dev/beige/internal/llm"
)

// Model streams model replies for the loop. The gateway implements it with
// a router that falls back across an agent's models; a terminal client
// implements it over the gateway's /api/chat/stream.
type Model interface {
	// Info returns the metadata of the model that is tried first: its
	// context window sizes compaction; its provider and id name it in logs
	// and in tool audit records.
	Info() llm.Model
	// Stream sends the context and calls emit (if not nil) synchronously
	// with the reply's events; it returns the final message. It follows
	// llm.Provider.Stream: on failure it returns the failed message
	// (stopReason error or aborted) when it has one, and a non-nil error,
	// which wraps ctx.Err() when ctx was cancelled. Retries and fallback,
	// if any, happen inside.
	Stream(ctx context.Context, c llm.Context, emit func(llm.Event)) (*llm.AssistantMessage, error)
}

// ProviderModel is a Model that calls one model of one provider, without
// retries or fallback.
type ProviderModel struct {
	Provider llm.Provider
	Model    llm.Model
	Options  llm.Options
}

var _ Model = ProviderModel{}

// Info returns p.Model.
func (p ProviderModel) Info() llm.Model { return p.Model }

// Stream calls p.Provider.Stream with p.Model and p.Options.
func (p ProviderModel) Stream(ctx context.Context, c llm.Context, emit func(llm.Event)) (*llm.AssistantMessage, error) {
	return p.Provider.Stream(ctx, llm.Request{Model: p.Model, Context: c, Options: p.Options}, emit)
}
