package providers_test

import (
	"testing"

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
