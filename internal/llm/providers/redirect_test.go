package providers_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/beige-dev/beige/internal/llm"
)

// A provider's base URL that answers with a redirect to another host must
// not get the API key (nor the request's extra headers) sent there: the
// providers' clients follow no redirect, and the request fails saying why.
func TestProvidersDoNotFollowRedirectsWithTheKey(t *testing.T) {
	const key = "sk-redirect-secret-key"
	const extra = "extra-header-secret"
	apis := []string{llm.APIAnthropicMessages, llm.APIOpenAICompletions, llm.APIOpenAIResponses, llm.APIGoogleGenerativeAI}
	for _, api := range apis {
		for _, status := range []int{http.StatusFound, http.StatusTemporaryRedirect, http.StatusPermanentRedirect} {
			t.Run(api+"/"+http.StatusText(status), func(t *testing.T) {
				var mu sync.Mutex
				var got []http.Header
				other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					mu.Lock()
					got = append(got, r.Header.Clone())
					mu.Unlock()
					http.Error(w, "not here", http.StatusNotFound)
				}))
				defer other.Close()
				first := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					http.Redirect(w, r, other.URL+r.URL.RequestURI(), status)
				}))
				defer first.Close()

				base := first.URL
				if api != llm.APIAnthropicMessages {
					base += "/v1"
				}
				p, err := llm.NewProvider(llm.ProviderConfig{Name: "p", API: api, APIKey: key, BaseURL: base})
				if err != nil {
					t.Fatal(err)
				}
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				_, err = p.Stream(ctx, llm.Request{
					Model:   llm.Lookup("p", api, "m", base),
					Context: llm.Context{Messages: []llm.Message{llm.UserText("hi")}},
					Options: llm.Options{Headers: map[string]string{"X-Extra": extra}},
				}, nil)
				if err == nil {
					t.Error("a redirected request succeeded")
				} else if !strings.Contains(err.Error(), "redirect") {
					t.Errorf("the error does not say it was a redirect: %v", err)
				}
				mu.Lock()
				defer mu.Unlock()
				for _, h := range got {
					for name, vs := range h {
						for _, v := range vs {
							if strings.Contains(v, key) || strings.Contains(v, extra) {
								t.Errorf("the other host got %s: %s", name, v)
							}
						}
					}
				}
				if len(got) != 0 {
					t.Errorf("the redirect was followed (%d requests to the other host)", len(got))
				}
			})
		}
	}
}
