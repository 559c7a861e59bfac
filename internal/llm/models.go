package llm

import (
	"regexp"
	"slices"
	"strings"
	"sync"
)

// API names.
const (
	APIAnthropicMessages  = "anthropic-messages"
	APIOpenAICompletions  = "openai-completions"
	APIOpenAIResponses    = "openai-responses"
	APIGoogleGenerativeAI = "google-generative-ai"
)

// Default base URLs of the well-known providers.
const (
	AnthropicBaseURL = "https://api.anthropic.com"
	OpenAIBaseURL    = "https://api.openai.com/v1"
	// GoogleBaseURL is the Gemini API, with its version as pi writes it.
	GoogleBaseURL = "https://generativelanguage.googleapis.com/v1beta"
)

// Model is the metadata of one model, in the JSON shape of pi's Model (and
// of GET /api/agents/:name/models).
type Model struct {
	ID       string `json:"id"`
	Name     string `json:"name"`
	API      string `json:"api"`
	Provider string `json:"provider"`
	BaseURL  string `json:"baseUrl"`
	// Reasoning says the model can think; thinking levels are ignored for
	// models without it.
	Reasoning bool `json:"reasoning"`
	// Input lists what the model accepts: "text", and "image" if it sees images.
	Input []string `json:"input"`
	// Cost is the price in dollars per million tokens.
	Cost          ModelCost `json:"cost"`
	ContextWindow int       `json:"contextWindow"`
	// MaxTokens is the most output tokens the model can produce.
	MaxTokens int `json:"maxTokens"`
}

// ModelCost is a model's price in dollars per million tokens.
type ModelCost struct {
	Input      float64 `json:"input"`
	Output     float64 `json:"output"`
	CacheRead  float64 `json:"cacheRead"`
	CacheWrite float64 `json:"cacheWrite"`
}

// Of returns the cost of the tokens counted in u.
func (c ModelCost) Of(u Usage) UsageCost {
	r := UsageCost{
		Input:      c.Input * float64(u.Input) / 1e6,
		Output:     c.Output * float64(u.Output) / 1e6,
		CacheRead:  c.CacheRead * float64(u.CacheRead) / 1e6,
		CacheWrite: c.CacheWrite * float64(u.CacheWrite) / 1e6,
	}
	r.Total = r.Input + r.Output + r.CacheRead + r.CacheWrite
	return r
}

// AcceptsImages reports whether the model takes image input.
func (m Model) AcceptsImages() bool { return slices.Contains(m.Input, "image") }

// DefaultBaseURL returns the base URL of a well-known provider's API, or "".
func DefaultBaseURL(api string) string {
	switch api {
	case APIAnthropicMessages:
		return AnthropicBaseURL
	case APIOpenAICompletions, APIOpenAIResponses:
		return OpenAIBaseURL
	case APIGoogleGenerativeAI:
		return GoogleBaseURL
	}
	return ""
}

// Catalogue is a set of known models. It is safe for concurrent use.
type Catalogue struct {
	mu     sync.RWMutex
	models []Model
}

// NewCatalogue returns a catalogue holding the built-in models, to which
// the config can add its own.
func NewCatalogue() *Catalogue {
	return &Catalogue{models: builtinModels()}
}

var builtin = NewCatalogue()

// Lookup finds a model in the built-in catalogue; see Catalogue.Lookup.
func Lookup(provider, api, modelID, baseURL string) Model {
	return builtin.Lookup(provider, api, modelID, baseURL)
}

// Add adds m, replacing a model of the same provider and id.
func (c *Catalogue) Add(m Model) {
	c.mu.Lock()
	defer c.mu.Unlock()
	m.Input = slices.Clone(m.Input)
	for i := range c.models {
		if c.models[i].Provider == m.Provider && c.models[i].ID == m.ID {
			c.models[i] = m
			return
		}
	}
	c.models = append(c.models, m)
}

// Models returns a copy of every model.
func (c *Catalogue) Models() []Model {
	c.mu.RLock()
	defer c.mu.RUnlock()
	out := make([]Model, len(c.models))
	for i, m := range c.models {
		m.Input = slices.Clone(m.Input)
		out[i] = m
	}
	return out
}

// Lookup returns the metadata of modelID as served by provider through api
// at baseURL. It takes the catalogue entry of the same provider and id
// (preferring the same api), else one of the same api and id (e.g. a proxy
// serving Anthropic models), else a generic entry. The result always carries the given provider; api and
// baseURL override the entry's when not empty, and an empty base URL falls
// back to the entry's, then to the api's default.
func (c *Catalogue) Lookup(provider, api, modelID, baseURL string) Model {
	c.mu.RLock()
	m, ok := c.find(provider, api, modelID)
	c.mu.RUnlock()
	if !ok {
		m = genericModel(api, modelID)
	}
	m.Input = slices.Clone(m.Input)
	m.Provider = provider
	if api != "" {
		m.API = api
	}
	if baseURL != "" {
		m.BaseURL = baseURL
	} else if !ok || m.BaseURL == "" {
		m.BaseURL = DefaultBaseURL(m.API)
	}
	return m
}

func (c *Catalogue) find(provider, api, id string) (Model, bool) {
	for _, m := range c.models {
		if m.Provider == provider && m.ID == id && (api == "" || m.API == api) {
			return m, true
		}
	}
	// The same provider's model through another of its APIs (OpenAI chat
	// completions vs. Responses).
	for _, m := range c.models {
		if m.Provider == provider && m.ID == id {
			return m, true
		}
	}
	for _, m := range c.models {
		if m.ID == id && api != "" && m.API == api {
			m.BaseURL = "" // another provider's endpoint
			return m, true
		}
	}
	return Model{}, false
}

var claudeReasoning = regexp.MustCompile(`claude-(3-7-sonnet|(opus|sonnet|haiku)-[4-9])`)

// genericModel describes a model nobody catalogued, with guesses that are
// safe: text only, no reasoning, zero cost, a common window.
func genericModel(api, id string) Model {
	m := Model{
		ID: id, Name: id, API: api,
		Input:         []string{"text"},
		ContextWindow: 128000,
		MaxTokens:     16384,
	}
	if api == APIAnthropicMessages && strings.Contains(id, "claude") {
		m.Input = []string{"text", "image"}
		m.ContextWindow = 200000
		m.Reasoning = claudeReasoning.MatchString(id)
	}
	if api == APIGoogleGenerativeAI && strings.Contains(id, "gemini") {
		m.Input = []string{"text", "image"}
		m.ContextWindow = 1048576
		m.MaxTokens = 65536
		m.Reasoning = !strings.Contains(id, "gemini-1") && !strings.Contains(id, "gemini-2.0")
	}
	return m
}

func builtinModels() []Model {
	var ms []Model
	add := func(provider, api, baseURL string, ids []string, name string, reasoning bool, in []string,
		cost ModelCost, window, maxTokens int) {
		for _, id := range ids {
			ms = append(ms, Model{
				ID: id, Name: name, API: api, Provider: provider, BaseURL: baseURL,
				Reasoning: reasoning, Input: in, Cost: cost,
				ContextWindow: window, MaxTokens: maxTokens,
			})
		}
	}
	ti := []string{"text", "image"}
	anth := func(ids []string, name string, reasoning bool, cost ModelCost, maxTokens int) {
		add("anthropic", APIAnthropicMessages, AnthropicBaseURL, ids, name, reasoning, ti, cost, 200000, maxTokens)
	}
	opus4 := ModelCost{Input: 15, Output: 75, CacheRead: 1.5, CacheWrite: 18.75}
	sonnet := ModelCost{Input: 3, Output: 15, CacheRead: 0.3, CacheWrite: 3.75}
	anth([]string{"claude-opus-4-5", "claude-opus-4-5-20251101"}, "Claude Opus 4.5", true,
		ModelCost{Input: 5, Output: 25, CacheRead: 0.5, CacheWrite: 6.25}, 64000)
	anth([]string{"claude-opus-4-1", "claude-opus-4-1-20250805"}, "Claude Opus 4.1", true, opus4, 32000)
	anth([]string{"claude-opus-4-0", "claude-opus-4-20250514"}, "Claude Opus 4", true, opus4, 32000)
	anth([]string{"claude-sonnet-4-6"}, "Claude Sonnet 4.6", true, sonnet, 64000)
	anth([]string{"claude-sonnet-4-5", "claude-sonnet-4-5-20250929"}, "Claude Sonnet 4.5", true, sonnet, 64000)
	anth([]string{"claude-sonnet-4-0", "claude-sonnet-4-20250514"}, "Claude Sonnet 4", true, sonnet, 64000)
	anth([]string{"claude-3-7-sonnet-20250219", "claude-3-7-sonnet-latest"}, "Claude Sonnet 3.7", true, sonnet, 64000)
	anth([]string{"claude-3-5-sonnet-20241022", "claude-3-5-sonnet-latest"}, "Claude Sonnet 3.5 v2", false, sonnet, 8192)
	anth([]string{"claude-3-5-haiku-20241022", "claude-3-5-haiku-latest"}, "Claude Haiku 3.5", false,
		ModelCost{Input: 0.8, Output: 4, CacheRead: 0.08, CacheWrite: 1}, 8192)
	anth([]string{"claude-haiku-4-5", "claude-haiku-4-5-20251001"}, "Claude Haiku 4.5", true,
		ModelCost{Input: 1, Output: 5, CacheRead: 0.1, CacheWrite: 1.25}, 64000)

	oai := func(id, name string, reasoning bool, cost ModelCost, window, maxTokens int) {
		add("openai", APIOpenAICompletions, OpenAIBaseURL, []string{id}, name, reasoning, ti, cost, window, maxTokens)
	}
	oai("gpt-4o", "GPT-4o", false, ModelCost{Input: 2.5, Output: 10, CacheRead: 1.25}, 128000, 16384)
	oai("gpt-4o-mini", "GPT-4o mini", false, ModelCost{Input: 0.15, Output: 0.6, CacheRead: 0.075}, 128000, 16384)
	oai("gpt-4.1", "GPT-4.1", false, ModelCost{Input: 2, Output: 8, CacheRead: 0.5}, 1047576, 32768)
	oai("gpt-4.1-mini", "GPT-4.1 mini", false, ModelCost{Input: 0.4, Output: 1.6, CacheRead: 0.1}, 1047576, 32768)
	oai("o3", "o3", true, ModelCost{Input: 2, Output: 8, CacheRead: 0.5}, 200000, 100000)
	oai("o4-mini", "o4-mini", true, ModelCost{Input: 1.1, Output: 4.4, CacheRead: 0.275}, 200000, 100000)
	oai("gpt-5", "GPT-5", true, ModelCost{Input: 1.25, Output: 10, CacheRead: 0.125}, 400000, 128000)
	oai("gpt-5-mini", "GPT-5 mini", true, ModelCost{Input: 0.25, Output: 2, CacheRead: 0.025}, 400000, 128000)

	gem := func(id, name string, reasoning bool, cost ModelCost, maxTokens int) {
		add("google", APIGoogleGenerativeAI, GoogleBaseURL, []string{id}, name, reasoning, ti, cost, 1048576, maxTokens)
	}
	gem("gemini-3-pro-preview", "Gemini 3 Pro Preview", true, ModelCost{Input: 2, Output: 12, CacheRead: 0.2}, 65536)
	gem("gemini-2.5-pro", "Gemini 2.5 Pro", true, ModelCost{Input: 1.25, Output: 10, CacheRead: 0.31}, 65536)
	gem("gemini-2.5-flash", "Gemini 2.5 Flash", true, ModelCost{Input: 0.3, Output: 2.5, CacheRead: 0.075}, 65536)
	gem("gemini-2.5-flash-lite", "Gemini 2.5 Flash-Lite", true, ModelCost{Input: 0.1, Output: 0.4, CacheRead: 0.025}, 65536)
	gem("gemini-2.0-flash", "Gemini 2.0 Flash", false, ModelCost{Input: 0.1, Output: 0.4, CacheRead: 0.025}, 8192)
	return ms
}
