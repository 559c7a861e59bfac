package httpapi

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"testing"

	"github.com/beige-dev/beige/internal/llm"
	"github.com/beige-dev/beige/internal/proto"
	"github.com/beige-dev/beige/internal/proto/llmproto"
)

const secretURL = "https://alice:hunter2@proxy.example:8443/v1?key=AIzaSECRET&x=1#tok=FRAG"

// leaky is a backend whose configured provider URL carries secrets.
type leaky struct{ stub }

func (leaky) Config(context.Context) proto.ConfigView {
	var v proto.ConfigView
	u, api := secretURL, "openai-completions"
	v.LLM.Providers = map[string]proto.ProviderView{"proxy": {BaseURL: &u, API: &api}}
	return v
}

func (leaky) Models(context.Context, string) ([]llmproto.AgentModel, error) {
	return []llmproto.AgentModel{{Model: llm.Model{ID: "m", Provider: "proxy", BaseURL: secretURL}}}, nil
}

// TestNoURLSecretsInResponses: GET /api/config and /models show a
// baseUrl's scheme, host and path, never its userinfo or query (#10.10).
func TestNoURLSecretsInResponses(t *testing.T) {
	s := New(&leaky{}, Options{Host: "127.0.0.1"})
	for _, path := range []string{"/api/config", "/api/agents/assistant/models"} {
		code, body := do(t, s, "GET", path, "", nil)
		if code != 200 {
			t.Fatalf("%s: %d %s", path, code, body)
		}
		for _, secret := range []string{"alice", "hunter2", "AIzaSECRET", "key=", "FRAG", "x=1"} {
			if strings.Contains(body, secret) {
				t.Errorf("%s shows %q: %s", path, secret, body)
			}
		}
		if !strings.Contains(body, `"baseUrl":"https://proxy.example:8443/v1"`) {
			t.Errorf("%s does not show the public part of the URL: %s", path, body)
		}
	}
}

func TestPublicURL(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"https://api.openai.com/v1", "https://api.openai.com/v1"},
		{"http://127.0.0.1:11434/v1/", "http://127.0.0.1:11434/v1/"},
		{"https://user:pass@host.example/v1", "https://host.example/v1"},
		{"https://user@host.example", "https://host.example"},
		{"https://host.example/v1?key=s3cret", "https://host.example/v1"},
		{"https://host.example/v1?", "https://host.example/v1"},
		{"https://host.example/#s3cret", "https://host.example/"},
		{"https://host.example/a%2Fb", "https://host.example/a%2Fb"},
		{"https://u:p@[::1]:8080/x?k=v", "https://[::1]:8080/x"},
		{"http:user:pass@host", ""},        // opaque: no host to show
		{"//user:pass@host/x", ""},         // no scheme
		{"host.example/v1?key=s3cret", ""}, // not absolute
		{"https://u:p@host\x7f/x", ""},     // does not parse
		{"", ""},
	} {
		if got := PublicURL(tc.in); got != tc.want {
			t.Errorf("PublicURL(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// FuzzPublicURL: whatever the input, the output has no userinfo, query or
// fragment, and never contains the password or query of the input.
func FuzzPublicURL(f *testing.F) {
	for _, s := range []string{secretURL, "https://a:b@c/d?e=f", "http://x", "http://a@b@c/", "http://[::1]:1/%41?x#y"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		out := PublicURL(in)
		if out == "" {
			return
		}
		u, err := url.Parse(out)
		if err != nil {
			t.Fatalf("PublicURL(%q) = %q, which does not parse: %v", in, out, err)
		}
		if u.User != nil || u.RawQuery != "" || u.Fragment != "" || u.ForceQuery || strings.ContainsAny(out, "?#") {
			t.Fatalf("PublicURL(%q) = %q keeps userinfo, query or fragment", in, out)
		}
		orig, _ := url.Parse(strings.TrimSpace(in))
		// The password may not show, unless the parts kept (scheme, host,
		// path) happen to hold the same text. What shows is compared
		// unescaped: an escape the output adds ("\xb0" as "%B0") can put
		// the password's text next to a digit of the host.
		kept := strings.ToLower(orig.Scheme + "://" + orig.Host + orig.Path)
		shown := u.Scheme + "://" + u.Host + u.Path
		if p, ok := orig.User.Password(); ok && len(p) > 3 && strings.Contains(shown, p) && !strings.Contains(kept, strings.ToLower(p)) {
			t.Fatalf("PublicURL(%q) = %q shows the password", in, out)
		}
	})
}

// failing is a backend whose calls fail with an upstream error that quotes
// the URL it called, as Go's HTTP client does.
type failing struct{ stub }

const upstreamErr = `Post "https://alice:hunter2@proxy.example/v1/chat?key=AIzaSECRET": dial tcp: connection refused`

func (failing) Prompt(context.Context, string, proto.PromptRequest) (proto.PromptResponse, error) {
	return proto.PromptResponse{}, errors.New(upstreamErr)
}

func (failing) Exec(context.Context, string, proto.ExecRequest) (proto.ToolResult, error) {
	return proto.ToolResult{}, proto.Errorf(502, "provider: %s", upstreamErr)
}

func (failing) ChatStream(ctx context.Context, req llmproto.ChatStreamRequest, emit func(llm.Event)) error {
	emit(llm.Event{Type: llm.EventError, Error: &llm.AssistantMessage{ErrorMessage: upstreamErr}})
	return nil
}

// TestNoURLSecretsInErrors: an error that quotes a URL with secrets (a
// provider's client error) reaches the client without them.
func TestNoURLSecretsInErrors(t *testing.T) {
	s := New(&failing{}, Options{Host: "127.0.0.1"})
	for _, tc := range []struct{ path, body string }{
		{"/api/agents/assistant/prompt", `{"message":"hi"}`},
		{"/api/agents/assistant/exec", `{"tool":"exec","params":{"command":"ls"}}`},
		{"/api/chat/stream", `{"provider":"p","modelId":"m","agentName":"assistant","context":{"messages":[]}}`},
	} {
		_, body := do(t, s, "POST", tc.path, tc.body, nil)
		for _, secret := range []string{"alice", "hunter2", "AIzaSECRET"} {
			if strings.Contains(body, secret) {
				t.Errorf("%s shows %q: %s", tc.path, secret, body)
			}
		}
		if !strings.Contains(body, "https://proxy.example/v1/chat") {
			t.Errorf("%s: the error lost its URL: %s", tc.path, body)
		}
	}
}

func TestRedactURLs(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"no url here", "no url here"},
		{`Get "http://u:p@h/x?k=v": EOF`, `Get "http://h/x": EOF`},
		{"a https://h/?k=1 and ftp://x:y@z/w b", "a https://h/ and ftp://z/w b"},
		{"weird ://x", "weird ://x"},
	} {
		if got := redactURLs(tc.in); got != tc.want {
			t.Errorf("redactURLs(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
