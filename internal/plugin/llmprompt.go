package plugin

import (
	"context"

	"github.com/beige-dev/beige/internal/llm"
)

// LLMPrompter is the optional part of a PluginContext that makes one-shot
// model calls for a plugin (the original's ctx.llmPrompt): no agent, no
// session, no session-map entry. The gateway's implements it.
type LLMPrompter interface {
	// LLMPrompt sends req to the model through the gateway's provider
	// clients and router (credentials, concurrency, health, metrics) and
	// returns the reply's text. Its errors are safe to show the plugin.
	LLMPrompt(ctx context.Context, req LLMPromptRequest) (*LLMPromptResult, error)
}

// LLMPromptRequest is one ctx.llmPrompt call, checked by the plugin host.
type LLMPromptRequest struct {
	// Plugin is the calling plugin, for the log.
	Plugin string
	// Provider is a key of llm.providers; Model a model id of it.
	Provider string
	Model    string
	// Messages are user messages (text and image blocks).
	Messages     []llm.Message
	SystemPrompt string
	// MaxTokens caps the output; 0 means the model's default (as agents').
	MaxTokens     int
	ThinkingLevel llm.ThinkingLevel
}

// LLMPromptResult is the model's reply.
type LLMPromptResult struct {
	Text  string
	Usage llm.Usage
}
