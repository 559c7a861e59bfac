// Package providers decides which model APIs are built into the binary: it
// blank-imports each implementation, which registers itself with
// llm.RegisterAPI at init. Import it (for its side effect) from the
// gateway's main package or wherever providers are constructed.
//
// Built in: "anthropic-messages", "openai-completions", "openai-responses",
// "google-generative-ai". Config validation asks llm.HasAPI, so an API not
// imported here is reported as unsupported.
package providers

import (
	_ "github.com/beige-dev/beige/internal/llm/anthropic" // anthropic-messages
	_ "github.com/beige-dev/beige/internal/llm/google"    // google-generative-ai
	_ "github.com/beige-dev/beige/internal/llm/openai"    // openai-completions, openai-responses
)
