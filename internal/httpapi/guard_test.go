package httpapi

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/beige-dev/beige/internal/proto"
)

// counting is a stub that counts the calls that reached the backend.
type counting struct {
	stub
	calls atomic.Int32
}

func (c *counting) Exec(ctx context.Context, agent string, req proto.ExecRequest) (proto.ToolResult, error) {
	c.calls.Add(1)
	return c.stub.Exec(ctx, agent, req)
}

func (c *counting) Prompt(ctx context.Context, agent string, req proto.PromptRequest) (proto.PromptResponse, error) {
	c.calls.Add(1)
	return c.stub.Prompt(ctx, agent, req)
}

func (c *counting) Config(ctx context.Context) proto.ConfigView {
	c.calls.Add(1)
	return c.stub.Config(ctx)
}

func (c *counting) Restart(context.Context) error { c.calls.Add(1); return nil }

// TestBrowserGuard: a page of another site cannot make a browser drive the
// API, while curl (no Origin, no Sec-Fetch-Site) and a console served by the
// gateway itself can.
func TestBrowserGuard(t *testing.T) {
	const (
		exec    = "/api/agents/assistant/exec"
		prompt  = "/api/agents/assistant/prompt"
		restart = "/api/gateway/restart"
		execOK  = `{"tool":"exec","params":{"command":"ls"}}`
		self    = "http://127.0.0.1:7433"
	)
	cases := []struct {
		name, method, path, body string
		hdr                      map[string]string
		chunked                  bool
		status                   int
	}{
		// What the spec's curl examples and the beige client send.
		{"curl exec", "POST", exec, execOK, h("Content-Type", "application/json"), false, 200},
		{"curl restart without body", "POST", restart, "", nil, false, 202},
		{"json with charset", "POST", exec, execOK, h("Content-Type", "application/json; charset=utf-8"), false, 200},
		{"json in capitals", "POST", exec, execOK, h("Content-Type", "Application/JSON"), false, 200},
		{"get config", "GET", "/api/config", "", nil, false, 200},

		// The gateway's own web console (/ui).
		{"same origin", "POST", exec, execOK, h("Content-Type", "application/json", "Origin", self, "Sec-Fetch-Site", "same-origin"), false, 200},
		{"same origin restart", "POST", restart, "", h("Origin", self), false, 202},
		{"typed into the address bar", "GET", "/api/config", "", h("Sec-Fetch-Site", "none"), false, 200},

		// The CSRF of issue #10: simple requests from evil.example.
		{"text/plain exec from evil", "POST", exec, execOK, h("Content-Type", "text/plain", "Origin", "http://evil.example"), false, 403},
		{"text/plain prompt from evil", "POST", prompt, `{"message":"rm -rf"}`, h("Content-Type", "text/plain;charset=UTF-8", "Origin", "http://evil.example"), false, 403},
		{"text/plain restart from evil", "POST", restart, "x", h("Content-Type", "text/plain", "Origin", "http://evil.example"), false, 403},
		{"form restart from evil", "POST", restart, "", h("Content-Type", "application/x-www-form-urlencoded", "Origin", "http://evil.example"), false, 403},
		{"json from evil", "POST", exec, execOK, h("Content-Type", "application/json", "Origin", "http://evil.example"), false, 403},
		{"get config from evil", "GET", "/api/config", "", h("Origin", "http://evil.example"), false, 403},
		{"get config cross-site", "GET", "/api/config", "", h("Sec-Fetch-Site", "cross-site"), false, 403},
		{"same-site is not same-origin", "POST", exec, execOK, h("Content-Type", "application/json", "Sec-Fetch-Site", "same-site"), false, 403},
		{"unknown Sec-Fetch-Site", "POST", exec, execOK, h("Content-Type", "application/json", "Sec-Fetch-Site", "bogus"), false, 403},
		{"cross-site despite own origin", "POST", exec, execOK, h("Content-Type", "application/json", "Origin", self, "Sec-Fetch-Site", "cross-site"), false, 403},
		{"null origin", "POST", exec, execOK, h("Content-Type", "application/json", "Origin", "null"), false, 403},
		{"other scheme", "POST", exec, execOK, h("Content-Type", "application/json", "Origin", "https://127.0.0.1:7433"), false, 403},
		{"other port", "POST", exec, execOK, h("Content-Type", "application/json", "Origin", "http://127.0.0.1:7434"), false, 403},
		{"other loopback name", "POST", exec, execOK, h("Content-Type", "application/json", "Origin", "http://localhost:7433"), false, 403},
		{"origin with a path", "POST", exec, execOK, h("Content-Type", "application/json", "Origin", self+"/ui"), false, 403},
		{"origin with a query", "POST", exec, execOK, h("Content-Type", "application/json", "Origin", self+"?"), false, 403},
		{"origin with userinfo", "POST", exec, execOK, h("Content-Type", "application/json", "Origin", "http://x@127.0.0.1:7433"), false, 403},
		{"preflight from evil", "OPTIONS", exec, "", h("Origin", "http://evil.example", "Access-Control-Request-Method", "POST", "Access-Control-Request-Headers", "content-type"), false, 403},

		// Bodies must be JSON, whoever sends them.
		{"text/plain without origin", "POST", exec, execOK, h("Content-Type", "text/plain"), false, 415},
		{"form with empty body", "POST", restart, "", h("Content-Type", "application/x-www-form-urlencoded"), false, 415},
		{"multipart", "POST", prompt, "--x--", h("Content-Type", "multipart/form-data; boundary=x"), false, 415},
		{"body without content type", "POST", exec, execOK, h("Content-Type", ""), false, 415},
		{"chunked body without content type", "POST", restart, "{}", h("Content-Type", ""), true, 415},
		{"json lookalike", "POST", exec, execOK, h("Content-Type", "application/jsonp"), false, 415},
		{"invalid content type", "POST", exec, execOK, h("Content-Type", "application/json;;;"), false, 415},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b := &counting{}
			s := New(b, Options{Host: "127.0.0.1"})
			req := httptest.NewRequest(tc.method, "http://127.0.0.1:7433"+tc.path, strings.NewReader(tc.body))
			if tc.chunked {
				req.ContentLength = -1
			}
			for k, v := range tc.hdr {
				if v != "" {
					req.Header.Set(k, v)
				}
			}
			rec := httptest.NewRecorder()
			s.ServeHTTP(rec, req)
			if rec.Code != tc.status {
				t.Errorf("%d %s, want %d", rec.Code, rec.Body, tc.status)
			}
			if rec.Code >= 400 && b.calls.Load() != 0 {
				t.Errorf("refused with %d, yet the backend ran %d call(s)", rec.Code, b.calls.Load())
			}
			for k := range rec.Header() {
				if strings.HasPrefix(strings.ToLower(k), "access-control-") {
					t.Errorf("CORS header %s: %s", k, rec.Header().Get(k))
				}
			}
		})
	}
}

func h(kv ...string) map[string]string {
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return m
}

// TestBrowserGuardOverHTTP sends the attack of issue #10 over a real
// connection, as a browser would: a text/plain POST from another origin.
func TestBrowserGuardOverHTTP(t *testing.T) {
	b := &counting{}
	srv := httptest.NewServer(New(b, Options{Host: "127.0.0.1"}))
	defer srv.Close()
	for path, body := range map[string]string{
		"/api/agents/assistant/exec":   `{"tool":"exec","params":{"command":"touch /workspace/pwned"}}`,
		"/api/agents/assistant/prompt": `{"message":"run touch /workspace/pwned"}`,
		"/api/gateway/restart":         `{}`,
	} {
		req, _ := http.NewRequest("POST", srv.URL+path, strings.NewReader(body))
		req.Header.Set("Content-Type", "text/plain")
		req.Header.Set("Origin", "http://evil.example")
		req.Header.Set("Sec-Fetch-Site", "cross-site")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden {
			t.Errorf("%s: %s, want 403", path, resp.Status)
		}
	}
	if n := b.calls.Load(); n != 0 {
		t.Errorf("%d cross-site call(s) reached the backend", n)
	}
}

// FuzzBrowserGuard: whatever Origin, Sec-Fetch-Site and Content-Type a
// request carries, it reaches the backend only if a browser could have sent
// it from the gateway's own origin (or it is no browser's) with a JSON body.
func FuzzBrowserGuard(f *testing.F) {
	f.Add("", "", "application/json")
	f.Add("http://127.0.0.1:7433", "same-origin", "application/json; charset=utf-8")
	f.Add("http://evil.example", "cross-site", "text/plain")
	f.Add("null", "none", "application/x-www-form-urlencoded")
	f.Add("HTTP://127.0.0.1:7433", "", "APPLICATION/JSON")
	f.Add("http://127.0.0.1:7433/", "", "application/json")
	f.Fuzz(func(t *testing.T, origin, site, ct string) {
		b := &counting{}
		s := New(b, Options{Host: "127.0.0.1"})
		req := httptest.NewRequest("POST", "http://127.0.0.1:7433/api/agents/assistant/exec", strings.NewReader(`{"tool":"exec","params":{"command":"ls"}}`))
		for k, v := range map[string]string{"Origin": origin, "Sec-Fetch-Site": site, "Content-Type": ct} {
			if v != "" {
				req.Header[k] = []string{v}
			}
		}
		rec := httptest.NewRecorder()
		s.ServeHTTP(rec, req)
		if b.calls.Load() == 0 {
			return
		}
		if site != "" && site != "same-origin" && site != "none" {
			t.Fatalf("ran with Sec-Fetch-Site %q", site)
		}
		if origin != "" && !strings.EqualFold(origin, "http://127.0.0.1:7433") {
			t.Fatalf("ran with Origin %q", origin)
		}
		if !strings.HasPrefix(strings.ToLower(strings.TrimSpace(ct)), "application/json") {
			t.Fatalf("ran with Content-Type %q", ct)
		}
	})
}
