package webui

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/beige-dev/beige/internal/audit"
	"github.com/beige-dev/beige/internal/httpapi"
	"github.com/beige-dev/beige/internal/proto"
	"github.com/beige-dev/beige/internal/proto/llmproto"
)

const testToken = "s3cret-token"

// backend is an httpapi.Backend with one agent and nothing behind it.
type backend struct{}

func (backend) Health(context.Context) proto.Health { return proto.Health{Status: "ok"} }
func (backend) Agents(context.Context) []proto.AgentInfo {
	return []proto.AgentInfo{{Name: "assistant"}}
}
func (backend) Config(context.Context) proto.ConfigView { return proto.ConfigView{} }
func (backend) Exec(context.Context, string, proto.ExecRequest) (proto.ToolResult, error) {
	return proto.ToolResult{}, nil
}
func (backend) Models(context.Context, string) ([]llmproto.AgentModel, error) { return nil, nil }
func (backend) Prompt(context.Context, string, proto.PromptRequest) (proto.PromptResponse, error) {
	return proto.PromptResponse{}, nil
}
func (backend) Sessions(context.Context, string) ([]proto.SessionInfo, error) { return nil, nil }

// console is a gateway's HTTP API with the console on it, listening on
// loopback.
func console(t *testing.T, opts Options) *httptest.Server {
	srv, _ := consoleUI(t, opts)
	return srv
}

func consoleUI(t *testing.T, opts Options) (*httptest.Server, *UI) {
	t.Helper()
	api := httpapi.New(backend{}, httpapi.Options{AuthToken: opts.AuthToken})
	ui := New(opts)
	ui.Register(api)
	srv := httptest.NewServer(api)
	t.Cleanup(srv.Close)
	return srv, ui
}

var noRedirect = &http.Client{
	CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	Timeout:       10 * time.Second,
}

func request(t *testing.T, method, url, body string, hdr map[string]string) *http.Response {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	res, err := noRedirect.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { res.Body.Close() })
	return res
}

func login(t *testing.T, srv *httptest.Server) *http.Cookie {
	t.Helper()
	res := request(t, "POST", srv.URL+"/ui/login", `{"token":"`+testToken+`"}`, nil)
	if res.StatusCode != http.StatusOK {
		t.Fatalf("login: %s", res.Status)
	}
	for _, c := range res.Cookies() {
		if c.Name == httpapi.TokenCookie {
			return c
		}
	}
	t.Fatal("login set no cookie")
	return nil
}

// TestConsoleRefusedWithoutToken: with gateway.authToken set, neither the
// page, nor its scripts, nor its event stream, nor its chat endpoints are
// served without the token; only the login page and what it needs are.
func TestConsoleRefusedWithoutToken(t *testing.T) {
	srv := console(t, Options{AuthToken: testToken})
	for _, tc := range []struct {
		method, path string
		want         int
	}{
		{"GET", "/ui/", http.StatusSeeOther},
		{"GET", "/ui", http.StatusSeeOther},
		{"GET", "/ui/events", http.StatusUnauthorized},
		{"GET", "/ui/assets/app.js", http.StatusUnauthorized},
		{"GET", "/ui/assets/md.js", http.StatusUnauthorized},
		{"GET", "/ui/assets/index.html", http.StatusUnauthorized},
		{"POST", "/ui/api/agents/assistant/prompt", http.StatusUnauthorized},
		{"POST", "/ui/api/agents/assistant/abort", http.StatusUnauthorized},
		{"GET", "/ui/login", http.StatusOK},
		{"GET", "/ui/assets/login.js", http.StatusOK},
		{"GET", "/ui/assets/style.css", http.StatusOK},
	} {
		body := ""
		if tc.method == "POST" {
			body = `{"message":"hi"}`
		}
		res := request(t, tc.method, srv.URL+tc.path, body, map[string]string{"Cookie": httpapi.TokenCookie + "=" + httpapi.TokenCookieValue("wrong")})
		if res.StatusCode != tc.want {
			t.Errorf("%s %s without the token: %s, want %d", tc.method, tc.path, res.Status, tc.want)
		}
		b, _ := io.ReadAll(res.Body)
		if tc.want != http.StatusOK && strings.Contains(string(b), "<script") {
			t.Errorf("%s %s without the token served the page: %.100s", tc.method, tc.path, b)
		}
		if tc.want == http.StatusSeeOther && res.Header.Get("Location") != "/ui/login" {
			t.Errorf("%s %s: redirected to %q, want /ui/login", tc.method, tc.path, res.Header.Get("Location"))
		}
	}
}

// TestLoginCookie: a wrong token sets no cookie; the right one sets an
// HttpOnly, SameSite=Strict cookie on / that opens the page and the event
// stream like the bearer token; logout clears it.
func TestLoginCookie(t *testing.T) {
	srv := console(t, Options{AuthToken: testToken})
	res := request(t, "POST", srv.URL+"/ui/login", `{"token":"nope"}`, nil)
	if res.StatusCode != http.StatusUnauthorized || len(res.Cookies()) != 0 {
		t.Fatalf("login with a wrong token: %s, cookies %v", res.Status, res.Cookies())
	}
	c := login(t, srv)
	if !c.HttpOnly || c.SameSite != http.SameSiteStrictMode || c.Path != "/" || c.Secure {
		t.Errorf("cookie %+v: want HttpOnly, SameSite=Strict, Path=/, not Secure over plain http", c)
	}
	if strings.Contains(c.Value, testToken) {
		t.Logf("note: the cookie holds the token encoded: %q", c.Value)
	}
	ck := map[string]string{"Cookie": c.Name + "=" + c.Value}
	for _, path := range []string{"/ui/", "/ui/assets/app.js", "/api/agents"} {
		if res := request(t, "GET", srv.URL+path, "", ck); res.StatusCode != http.StatusOK {
			t.Errorf("GET %s with the cookie: %s", path, res.Status)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", srv.URL+"/ui/events", nil)
	req.Header.Set("Cookie", ck["Cookie"])
	ev, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer ev.Body.Close()
	if ev.StatusCode != http.StatusOK || ev.Header.Get("Content-Type") != "text/event-stream" {
		t.Errorf("GET /ui/events with the cookie: %s %s", ev.Status, ev.Header.Get("Content-Type"))
	}
	cancel()

	// Two cookies of that name (one planted by another site on the same
	// host): the right one still counts.
	two := map[string]string{"Cookie": c.Name + "=" + httpapi.TokenCookieValue("planted") + "; " + c.Name + "=" + c.Value}
	if res := request(t, "GET", srv.URL+"/ui/", "", two); res.StatusCode != http.StatusOK {
		t.Errorf("GET /ui/ with a planted cookie besides the right one: %s", res.Status)
	}

	res = request(t, "POST", srv.URL+"/ui/logout", "", ck)
	var cleared bool
	for _, c := range res.Cookies() {
		cleared = cleared || (c.Name == httpapi.TokenCookie && c.MaxAge < 0 && c.Value == "")
	}
	if !cleared {
		t.Errorf("logout did not clear the cookie: %v", res.Header.Values("Set-Cookie"))
	}
}

// TestCrossOriginRefused: a page of another origin can drive neither the
// login, nor the console, nor its stream, even with the cookie.
func TestCrossOriginRefused(t *testing.T) {
	srv := console(t, Options{AuthToken: testToken})
	c := login(t, srv)
	ck := c.Name + "=" + c.Value
	for _, hdr := range []map[string]string{
		{"Origin": "http://evil.example", "Cookie": ck},
		{"Sec-Fetch-Site": "cross-site", "Cookie": ck},
		{"Origin": "null", "Cookie": ck},
	} {
		for _, tc := range []struct{ method, path, body string }{
			{"GET", "/ui/", ""},
			{"GET", "/ui/events", ""},
			{"POST", "/ui/login", `{"token":"` + testToken + `"}`},
			{"POST", "/ui/api/agents/assistant/prompt", `{"message":"hi"}`},
			{"POST", "/ui/logout", ""},
		} {
			res := request(t, tc.method, srv.URL+tc.path, tc.body, hdr)
			if res.StatusCode != http.StatusForbidden {
				t.Errorf("%s %s with %v: %s, want 403", tc.method, tc.path, hdr, res.Status)
			}
			if len(res.Cookies()) != 0 {
				t.Errorf("%s %s with %v set a cookie", tc.method, tc.path, hdr)
			}
		}
	}
	// A foreign Host (DNS rebinding) is refused too.
	req, _ := http.NewRequest("GET", srv.URL+"/ui/login", nil)
	req.Host = "evil.example"
	res, err := noRedirect.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusForbidden {
		t.Errorf("GET /ui/login with Host evil.example: %s, want 403", res.Status)
	}
}

// TestNoTokenOpensWithoutLogin: without gateway.authToken the console is
// open, like the API, and the login page sends the browser on.
func TestNoTokenOpensWithoutLogin(t *testing.T) {
	srv := console(t, Options{})
	if res := request(t, "GET", srv.URL+"/ui/", "", nil); res.StatusCode != http.StatusOK {
		t.Errorf("GET /ui/ without a configured token: %s", res.Status)
	}
	res := request(t, "GET", srv.URL+"/ui/login", "", nil)
	if res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != "/ui/" {
		t.Errorf("GET /ui/login without a configured token: %s → %q", res.Status, res.Header.Get("Location"))
	}
}

// TestSecurityHeaders: every console response carries the strict CSP and
// is not to be framed or sniffed.
func TestSecurityHeaders(t *testing.T) {
	srv := console(t, Options{AuthToken: testToken})
	ck := map[string]string{"Cookie": httpapi.TokenCookie + "=" + httpapi.TokenCookieValue(testToken)}
	for _, path := range []string{"/ui/", "/ui/login", "/ui/assets/app.js", "/ui/assets/style.css", "/ui/assets/nope.js"} {
		res := request(t, "GET", srv.URL+path, "", ck)
		csp := res.Header.Get("Content-Security-Policy")
		for _, want := range []string{"default-src 'self'", "script-src 'self'", "frame-ancestors 'none'"} {
			if !strings.Contains(csp, want) {
				t.Errorf("GET %s: CSP %q lacks %q", path, csp, want)
			}
		}
		if strings.Contains(csp, "unsafe-") {
			t.Errorf("GET %s: CSP %q allows unsafe sources", path, csp)
		}
		if res.Header.Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("GET %s: no nosniff", path)
		}
	}
}

// TestAssetsNeverParseHTML: the page's scripts put nothing into the DOM as
// HTML (model output and audit records are hostile) and the pages have no
// inline script or handler (the CSP would block it anyway).
func TestAssetsNeverParseHTML(t *testing.T) {
	sinks := regexp.MustCompile(`innerHTML|outerHTML|insertAdjacentHTML|document\.write|eval\(|new Function|javascript:`)
	inline := regexp.MustCompile(`(?i)<script(?:\s[^>]*)?>\s*[^<\s]|\son[a-z]+\s*=|style\s*=`)
	entries, err := assets.ReadDir("assets")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		b, err := assets.ReadFile("assets/" + e.Name())
		if err != nil {
			t.Fatal(err)
		}
		switch filepath.Ext(e.Name()) {
		case ".js":
			// Comments may name a sink to say it is not used.
			code := regexp.MustCompile(`(?m)^\s*//.*$`).ReplaceAll(b, nil)
			if m := sinks.Find(code); m != nil {
				t.Errorf("%s uses %s", e.Name(), m)
			}
		case ".html":
			if m := inline.Find(b); m != nil {
				t.Errorf("%s has inline code: %s", e.Name(), m)
			}
		}
	}
}

// TestEventsStreamAuditRecords: a record the audit logger writes reaches
// an open event stream at once (the logger's notification, not a timer),
// after the backlog of the records already there.
func TestEventsStreamAuditRecords(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	tail := NewFileTail(path)
	log, err := audit.Open(path, &audit.Options{OnRecord: func(int64) { tail.Notify() }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { log.Close() })
	if err := log.Log(audit.Record{Agent: "old", Phase: audit.PhaseFinished, Type: audit.TypeTool, Tool: "git"}); err != nil {
		t.Fatal(err)
	}
	srv := console(t, Options{AuthToken: testToken, Audit: tail, StatusEvery: time.Hour,
		Status: func(context.Context) Status { return Status{Health: proto.Health{Status: "ok"}} }})

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", srv.URL+"/ui/events", nil)
	req.Header.Set("Authorization", "Bearer "+testToken)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	events := make(chan [2]string, 16)
	go func() {
		sc := bufio.NewScanner(res.Body)
		var name string
		for sc.Scan() {
			line := sc.Text()
			if n, ok := strings.CutPrefix(line, "event: "); ok {
				name = n
			} else if d, ok := strings.CutPrefix(line, "data: "); ok {
				events <- [2]string{name, d}
			}
		}
		close(events)
	}()
	next := func(want string) map[string]any {
		t.Helper()
		for {
			select {
			case ev, ok := <-events:
				if !ok {
					t.Fatalf("stream ended before a %q event", want)
				}
				if ev[0] != want {
					continue
				}
				var v map[string]any
				if err := json.Unmarshal([]byte(ev[1]), &v); err != nil {
					t.Fatalf("%s event %q: %v", want, ev[1], err)
				}
				return v
			case <-ctx.Done():
				t.Fatalf("no %q event in time", want)
			}
		}
	}
	if st := next("status"); st["status"].(map[string]any)["health"].(map[string]any)["status"] != "ok" {
		t.Errorf("status event: %v", st)
	}
	if rec := next("audit"); rec["agent"] != "old" {
		t.Errorf("backlog record: %v", rec)
	}
	start := time.Now()
	if err := log.Log(audit.Record{Agent: "assistant", Phase: audit.PhaseStarted, Type: audit.TypeTool, Tool: "git", Decision: audit.DecisionDenied}); err != nil {
		t.Fatal(err)
	}
	rec := next("audit")
	if rec["agent"] != "assistant" || rec["decision"] != "denied" {
		t.Errorf("new record: %v", rec)
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("the record took %v to arrive, want under 1 s", d)
	}
}

// TestFileTailRotation: after the audit file is rotated (a new file at the
// path), the tail reads the new file from its start, and a torn last line
// waits until it is complete.
func TestFileTailRotation(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "audit.jsonl")
	write := func(s string) {
		f, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.WriteString(s); err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
	tail := NewFileTail(path)
	recs, cur, err := tail.Read(Cursor{}, 10)
	if err != nil || len(recs) != 0 {
		t.Fatalf("no file: %v %v", recs, err)
	}
	write(`{"n":1}` + "\n" + `{"n":2}` + "\n" + `{"n":`)
	recs, cur, _ = tail.Read(cur, 10)
	if len(recs) != 2 {
		t.Fatalf("read %q, want the 2 complete records", recs)
	}
	write("3}\n")
	recs, cur, _ = tail.Read(cur, 10)
	if len(recs) != 1 || string(recs[0]) != `{"n":3}` {
		t.Fatalf("after the line was completed: %q", recs)
	}
	if err := os.Rename(path, path+".1"); err != nil {
		t.Fatal(err)
	}
	write(`{"n":4}` + "\n")
	recs, cur, _ = tail.Read(cur, 10)
	if len(recs) != 1 || string(recs[0]) != `{"n":4}` {
		t.Fatalf("after rotation: %q", recs)
	}
	// A record written just before a rotation is not lost: the rest of
	// the renamed file comes first.
	write(`{"n":5}` + "\n")
	if err := os.Rename(path, path+".1"); err != nil {
		t.Fatal(err)
	}
	write(`{"n":6}` + "\n")
	recs, _, _ = tail.Read(cur, 10)
	if len(recs) != 2 || string(recs[0]) != `{"n":5}` || string(recs[1]) != `{"n":6}` {
		t.Fatalf("a record before the rotation: %q, want n 5 and 6", recs)
	}
}

// TestCloseEndsEventStreams: an open event stream ends when the console is
// closed (the gateway stops serving), instead of holding up the drain.
func TestCloseEndsEventStreams(t *testing.T) {
	srv, ui := consoleUI(t, Options{AuthToken: testToken})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", srv.URL+"/ui/events", nil)
	req.Header.Set("Authorization", "Bearer "+testToken)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	ended := make(chan struct{})
	go func() { io.Copy(io.Discard, res.Body); close(ended) }()
	ui.Close()
	select {
	case <-ended:
	case <-time.After(2 * time.Second):
		t.Fatal("the event stream still runs after Close")
	}
}

// TestStatusSharedByStreams: however many consoles are open, the health
// snapshot (which pings the sandbox engine) is taken about once per
// interval, not once per console.
func TestStatusSharedByStreams(t *testing.T) {
	var mu sync.Mutex
	calls := 0
	srv := console(t, Options{AuthToken: testToken, StatusEvery: 200 * time.Millisecond, Status: func(context.Context) Status {
		mu.Lock()
		defer mu.Unlock()
		calls++
		return Status{Health: proto.Health{Status: "ok"}}
	}})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	for range 8 {
		req, _ := http.NewRequestWithContext(ctx, "GET", srv.URL+"/ui/events", nil)
		req.Header.Set("Authorization", "Bearer "+testToken)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() { defer wg.Done(); io.Copy(io.Discard, res.Body); res.Body.Close() }()
	}
	time.Sleep(2 * time.Second)
	cancel()
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	// 2 s at one per 100-200 ms is at most about 20; 8 streams each taking
	// their own would be about 80.
	if calls > 25 {
		t.Errorf("%d health snapshots in 2 s for 8 consoles", calls)
	}
}
