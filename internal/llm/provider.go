package llm

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"sort"
	"sync"
)

// Provider streams one model reply. Implementations live in their own
// packages (internal/llm/anthropic, internal/llm/openai,
// internal/llm/google) and register a Factory for their API name.
//
// Stream sends req and calls emit (if not nil) synchronously, in stream
// order, with the events of the reply; it returns the final message, which
// is also sent as the done event. On failure it emits an error event and
// returns the failed message (stopReason error or aborted, with
// errorMessage) together with a non-nil error: an *APIError for what the
// provider reported, an error wrapping ctx.Err() when ctx was cancelled, or
// another error (network, cut stream). A Provider never retries.
type Provider interface {
	Stream(ctx context.Context, req Request, emit func(Event)) (*AssistantMessage, error)
}

// Request is one call to a model.
type Request struct {
	Model   Model
	Context Context
	Options Options
}

// Options tune a request. The zero value is the model's defaults.
type Options struct {
	// ThinkingLevel asks reasoning models to think; ignored for models
	// without Reasoning.
	ThinkingLevel ThinkingLevel
	// MaxTokens caps the output; 0 means min(model.MaxTokens, 32000).
	MaxTokens int
	// Temperature, when set, is sent to the provider, except where it
	// would be refused: with Anthropic extended thinking, and to OpenAI's
	// own reasoning models.
	Temperature *float64
	// Headers are extra HTTP headers for this request. They cannot replace
	// the authentication headers.
	Headers map[string]string
}

// DefaultMaxTokens is the output cap when neither the options nor the model
// say otherwise.
const DefaultMaxTokens = 4096

// MaxTokensFor returns the output cap for a request: o.MaxTokens, else the
// model's maximum capped at 32000, else DefaultMaxTokens.
func (o Options) MaxTokensFor(m Model) int {
	switch {
	case o.MaxTokens > 0:
		return o.MaxTokens
	case m.MaxTokens > 0:
		return min(m.MaxTokens, 32000)
	}
	return DefaultMaxTokens
}

// ProviderConfig is what a Factory needs to build a Provider.
type ProviderConfig struct {
	// Name is the provider's name in the config ("anthropic", "zai"); it is
	// used in errors.
	Name string
	// APIKey is the only key the provider sends; the process environment
	// is never read.
	APIKey string
	// BaseURL overrides the API's default base URL; a request's
	// Model.BaseURL, when set, wins over both.
	BaseURL string
	// API selects the implementation, e.g. "anthropic-messages".
	API string
	// HTTPClient sends the requests; nil means a client of our own
	// (without timeout: streams are long; cancel through the context).
	HTTPClient *http.Client
}

// LogValue keeps the API key out of logs.
func (c ProviderConfig) LogValue() slog.Value {
	key := ""
	if c.APIKey != "" {
		key = "REDACTED"
	}
	return slog.GroupValue(
		slog.String("name", c.Name), slog.String("api", c.API),
		slog.String("baseUrl", c.BaseURL), slog.String("apiKey", key),
	)
}

// Factory builds a Provider for one configured provider.
type Factory func(ProviderConfig) (Provider, error)

// Registry maps API names to factories. It is safe for concurrent use.
type Registry struct {
	mu        sync.RWMutex
	factories map[string]Factory
}

// Register adds the factory of an API. It panics if name is empty, f is
// nil or the API is already registered: registration happens at init,
// and a clash is a programming error.
func (r *Registry) Register(api string, f Factory) {
	if api == "" || f == nil {
		panic("llm: Register with empty API name or nil factory")
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.factories == nil {
		r.factories = map[string]Factory{}
	}
	if _, dup := r.factories[api]; dup {
		panic(fmt.Sprintf("llm: API %q registered twice", api))
	}
	r.factories[api] = f
}

// Has reports whether api is registered.
func (r *Registry) Has(api string) bool {
	r.mu.RLock()
	defer r.mu.RUnlock()
	_, ok := r.factories[api]
	return ok
}

// APIs returns the registered API names, sorted.
func (r *Registry) APIs() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	names := make([]string, 0, len(r.factories))
	for n := range r.factories {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// New builds a provider for cfg with the factory of cfg.API.
func (r *Registry) New(cfg ProviderConfig) (Provider, error) {
	r.mu.RLock()
	f, ok := r.factories[cfg.API]
	r.mu.RUnlock()
	if !ok {
		return nil, fmt.Errorf("provider %q: unsupported api %q (supported: %v)", cfg.Name, cfg.API, r.APIs())
	}
	p, err := f(cfg)
	if err != nil {
		return nil, fmt.Errorf("provider %q: %w", cfg.Name, err)
	}
	return p, nil
}

var defaultRegistry Registry

// RegisterAPI registers a provider implementation in the default registry;
// call it from init. It panics on duplicates.
func RegisterAPI(api string, f Factory) { defaultRegistry.Register(api, f) }

// NewProvider builds a provider from the default registry.
func NewProvider(cfg ProviderConfig) (Provider, error) { return defaultRegistry.New(cfg) }

// HasAPI reports whether the default registry supports api.
func HasAPI(api string) bool { return defaultRegistry.Has(api) }

// CheckBaseURL reports whether s is an absolute http(s) URL, as a base URL
// must be.
func CheckBaseURL(s string) error {
	u, err := url.Parse(s)
	if err != nil {
		return fmt.Errorf("base url %q: %w", s, err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("base url %q: want an http or https URL", s)
	}
	return nil
}
