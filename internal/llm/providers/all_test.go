package providers_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/beige-dev/beige/internal/config"
	"github.com/beige-dev/beige/internal/llm"
	_ "github.com/beige-dev/beige/internal/llm/providers"
)

func TestBuiltIn(t *testing.T) {
	for _, api := range []string{llm.APIAnthropicMessages, llm.APIOpenAICompletions, llm.APIOpenAIResponses, llm.APIGoogleGenerativeAI} {
		if !llm.HasAPI(api) {
			t.Errorf("%s not registered", api)
		}
		p, err := llm.NewProvider(llm.ProviderConfig{Name: "x", API: api, APIKey: "k"})
		if err != nil || p == nil {
			t.Errorf("NewProvider(%s) = %v, %v", api, p, err)
		}
	}
}

func TestBadBaseURL(t *testing.T) {
	for _, api := range []string{llm.APIAnthropicMessages, llm.APIOpenAICompletions, llm.APIOpenAIResponses, llm.APIGoogleGenerativeAI} {
		for _, u := range []string{"api.example.com/v1", "ftp://x", "http://", "://"} {
			if _, err := llm.NewProvider(llm.ProviderConfig{Name: "x", API: api, BaseURL: u}); err == nil {
				t.Errorf("%s: base url %q accepted", api, u)
			}
		}
	}
}

// A config naming Google (by the well-known provider name, or by api) is
// valid in this build: validation asks llm.HasAPI.
func TestGoogleConfigValid(t *testing.T) {
	for _, providers := range []string{
		`google: { apiKey: "k" }`,
		`gem: { api: "google-generative-ai", apiKey: "k", baseUrl: "http://127.0.0.1:9/v1beta" }`,
	} {
		name, _, _ := strings.Cut(providers, ":")
		src := fmt.Sprintf(`{
  llm: { providers: { %s } },
  agents: { a1: { model: { provider: %q, model: "gemini-2.5-flash" }, sandbox: { image: "img" } } },
}`, providers, name)
		cfg, err := config.Parse("config.json5", []byte(src), &config.LoadOptions{
			SupportedAPI: llm.HasAPI, LookupEnv: func(string) (string, bool) { return "", false },
		})
		if err != nil {
			t.Errorf("%s: %v", providers, err)
			continue
		}
		if api := cfg.LLM.Providers[name].API; api != llm.APIGoogleGenerativeAI {
			t.Errorf("%s: api %q", providers, api)
		}
	}
}
