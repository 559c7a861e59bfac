// Package llm is Beige's provider-neutral model layer. It owns:
//
//   - the conversation types (messages, content blocks, usage, tools), whose
//     JSON is exactly that of pi-ai (@mariozechner/pi-ai), because clients
//     such as the terminal UI read them from the gateway's NDJSON stream;
//   - the streaming [Event] (pi's AssistantMessageEvent, plus the gateway's
//     own "blocked" and "model_fallback" events);
//   - the one [Provider] interface and the registry of API implementations
//     ("anthropic-messages", "openai-completions", ...), which live in their
//     own packages and register themselves at init, like database/sql drivers;
//   - model metadata and the built-in [Catalogue];
//   - thinking levels and their mapping to provider parameters;
//   - provider errors ([APIError]) and their classification for the
//     fallback loop ([Classify], [ParseRetryAfter]), and the reading of a
//     provider's error object in any of the shapes servers send ([ErrorObject]).
//
// It does not retry, fall back, limit concurrency or run tools: those belong
// to the callers.
package llm
