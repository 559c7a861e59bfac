package gateway

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/beige-dev/beige/internal/audit"
	"github.com/beige-dev/beige/internal/llm/llmtest"
	"github.com/beige-dev/beige/internal/sandbox/docker/dockertest"
)

// This file runs the original (TypeScript) Beige's terminal client, as
// installed from the npm registry by scripts/original-client.sh, in a real
// terminal (tmux) against a gateway started in this process, whose agent
// has a real Docker sandbox and a scripted model (llmtest).

// originalClient returns the path of the original client's launcher, or
// skips the test saying how to install it.
func originalClient(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("runs the original Beige terminal client against a gateway with a Docker sandbox")
	}
	if _, err := exec.LookPath("tmux"); err != nil {
		t.Skip("tmux is not installed: this test drives the original client in a real terminal with tmux (apt-get install tmux)")
	}
	path := os.Getenv("BEIGE_ORIGINAL_CLIENT")
	if path == "" {
		dir := os.Getenv("BEIGE_ORIGINAL_DIR")
		if dir == "" {
			cache, err := os.UserCacheDir()
			if err != nil {
				t.Skipf("the original client is not installed (no cache dir: %v): run scripts/original-client.sh or set BEIGE_ORIGINAL_CLIENT", err)
			}
			dir = filepath.Join(cache, "beige-original")
		}
		path = filepath.Join(dir, "beige")
	}
	if _, err := os.Stat(path); err != nil {
		t.Skipf("the original Beige client is not installed at %s: run scripts/original-client.sh (or set BEIGE_ORIGINAL_CLIENT to its launcher)", path)
	}
	return path
}

// recorder is a reverse proxy in front of the gateway that keeps the
// body of every request the client sends.
type recorder struct {
	mu   sync.Mutex
	reqs []recorded
	srv  *httptest.Server
}

type recorded struct {
	method, path string
	header       http.Header
	body, resp   []byte
}

type teeWriter struct {
	http.ResponseWriter
	buf bytes.Buffer
}

func (w *teeWriter) Write(p []byte) (int, error) { w.buf.Write(p); return w.ResponseWriter.Write(p) }
func (w *teeWriter) Flush()                      { w.ResponseWriter.(http.Flusher).Flush() }

func newRecorder(t *testing.T, target string) *recorder {
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	rp := httputil.NewSingleHostReverseProxy(u)
	rp.FlushInterval = -1
	r := &recorder{}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		r.reqs = append(r.reqs, recorded{method: req.Method, path: req.URL.Path, header: req.Header.Clone(), body: body})
		r.mu.Unlock()
		req.Body = io.NopCloser(bytes.NewReader(body))
		req.Host = u.Host
		rw := &teeWriter{ResponseWriter: w}
		rp.ServeHTTP(rw, req)
		r.mu.Lock()
		r.reqs[len(r.reqs)-1].resp = rw.buf.Bytes()
		r.mu.Unlock()
	}))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *recorder) requests(path string) []recorded {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []recorded
	for _, q := range r.reqs {
		if path == "" || q.path == path {
			out = append(out, q)
		}
	}
	return out
}

// compatTerminal is a tmux session on a server of its own.
type compatTerminal struct {
	t      *testing.T
	socket string
	raw    string // the file pipe-pane copies the output into
}

func startCompatTerminal(t *testing.T, env, argv []string) *compatTerminal {
	t.Helper()
	tm := &compatTerminal{t: t, socket: "beige-compat-" + dockertest.Suffix(), raw: filepath.Join(t.TempDir(), "terminal.raw")}
	var quoted []string
	for _, a := range append(append([]string{"env", "-i"}, env...), argv...) {
		quoted = append(quoted, "'"+strings.ReplaceAll(a, "'", `'\''`)+"'")
	}
	script := strings.Join(quoted, " ") + ` 2>&1; echo "__EXIT:$?"; sleep 3600`
	tm.tmux("-f", "/dev/null", "new-session", "-d", "-s", "main", "-x", "120", "-y", "50", "sh", "-c", script)
	tm.tmux("pipe-pane", "-o", "-t", "main", "cat >> '"+tm.raw+"'")
	t.Cleanup(func() { exec.Command("tmux", "-L", tm.socket, "kill-server").Run() })
	return tm
}

func (tm *compatTerminal) tmux(args ...string) string {
	tm.t.Helper()
	out, err := exec.Command("tmux", append([]string{"-L", tm.socket}, args...)...).CombinedOutput()
	if err != nil {
		tm.t.Fatalf("tmux %v: %v\n%s", args, err, out)
	}
	return string(out)
}

func (tm *compatTerminal) typeLine(text string) {
	tm.tmux("send-keys", "-t", "main", "-l", text)
	time.Sleep(100 * time.Millisecond)
	tm.tmux("send-keys", "-t", "main", "Enter")
}

func (tm *compatTerminal) keys(keys ...string) {
	tm.tmux(append([]string{"send-keys", "-t", "main"}, keys...)...)
}

func (tm *compatTerminal) screen() string {
	return tm.tmux("capture-pane", "-p", "-J", "-t", "main", "-S", "-1000")
}

// waitFor waits until the screen holds every one of want.
func (tm *compatTerminal) waitFor(t *testing.T, timeout time.Duration, want ...string) string {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var s string
	for time.Now().Before(deadline) {
		s = tm.screen()
		ok := true
		for _, w := range want {
			if !strings.Contains(s, w) {
				ok = false
				break
			}
		}
		if ok {
			return s
		}
		if strings.Contains(s, "__EXIT:") {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("the terminal never showed %q; it shows:\n%s", want, s)
	return ""
}

// rawOutput is what the client wrote to its terminal, escapes and all:
// lines the client prints with console.log while its UI runs are drawn
// over at once, so the screen alone does not keep them.
func (tm *compatTerminal) rawOutput() string {
	data, _ := os.ReadFile(tm.raw)
	return string(data)
}

// startOriginalClient starts a gateway whose agent has models a (pa) and
// b (pb, the fallback) and plugins, and the original client on it in a
// terminal, through a recorder, and waits for its UI.
func startOriginalClient(t *testing.T, client string, a, b *llmtest.Server, plugins string) (*testGateway, *recorder, *compatTerminal) {
	t.Helper()
	g := startGatewayWith(t, gatewaySetup{
		names: []string{"orig"},
		providers: fmt.Sprintf(`pa: { api: "anthropic-messages", baseUrl: %q, apiKey: "ka" }, pb: { api: "anthropic-messages", baseUrl: %q, apiKey: "kb" }`,
			a.URL(), b.URL()),
		model:   "{ provider: 'pa', model: 'claude-sonnet-4-5' }",
		extra:   map[string]string{"orig": "fallbackModels: [{ provider: 'pb', model: 'claude-haiku-4-5' }]"},
		plugins: plugins,
		docker:  true, // the client's tool calls run in a real sandbox
	})
	rec := newRecorder(t, g.URL())
	// The client runs on the gateway's machine with the gateway's home, as
	// the original's did (it keeps its sessions there); HOME is its own.
	env := []string{"HOME=" + t.TempDir(), "BEIGE_HOME=" + g.home.Dir, "TERM=xterm-256color", "PATH=/usr/bin:/bin", "LANG=C.UTF-8",
		"PI_OFFLINE=1"} // pi would download fd and ripgrep at start
	tm := startCompatTerminal(t, env, []string{client, "-g", rec.srv.URL, "tui", g.agents[0]})
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the terminal:\n%s", tm.screen())
		}
		// BEIGE_COMPAT_CAPTURE=dir keeps the client's request bodies, for
		// testdata/original-client (replace the agent's name by AGENT).
		if dir := os.Getenv("BEIGE_COMPAT_CAPTURE"); dir != "" {
			for i, q := range rec.requests("") {
				name := fmt.Sprintf("%02d-%s%s.json", i, q.method, strings.ReplaceAll(q.path, "/", "_"))
				if err := os.WriteFile(filepath.Join(dir, name), q.body, 0o644); err != nil {
					t.Error(err)
				}
			}
		}
	})
	tm.waitFor(t, 30*time.Second, "pi v0.", "(pa) claude-sonnet-4-5")
	return g, rec, tm
}

// TestOriginalClient runs the original terminal client against our
// gateway (issue #12): a reply streams and renders; a turn with write,
// exec and read runs them in our sandbox and renders their results;
// Shift+Tab changes the thinking level the model is asked for; an LLM
// error and a 429 fallback show.
func TestOriginalClient(t *testing.T) {
	client := originalClient(t)
	began := time.Now()
	a, b := llmtest.NewAnthropic(t), llmtest.NewAnthropic(t)
	g, rec, tm := startOriginalClient(t, client, a, b, "")
	agent := g.agents[0]

	if !t.Run("a reply streams and renders", func(t *testing.T) {
		const answer = "Streaming one two three four five six seven eight nine ten, done."
		a.Enqueue(llmtest.Text(answer).WithChunk(6).WithDelay(200 * time.Millisecond))
		tm.typeLine("hello")
		if s := tm.waitFor(t, 20*time.Second, "Streaming one"); strings.Contains(s, answer) {
			t.Errorf("the whole answer came at once, nothing streamed:\n%s", s)
		}
		tm.waitFor(t, 20*time.Second, answer)
	}) {
		return // each step builds on the last: stop at the first failure
	}

	if !t.Run("write, exec and read run in the sandbox", func(t *testing.T) {
		a.Enqueue(
			llmtest.ToolCall("write", map[string]any{"path": "notes.txt", "content": "written by the model\n"}),
			llmtest.ToolCall("exec", map[string]any{"command": "wc -c notes.txt; hostname"}),
			llmtest.ToolCall("read", map[string]any{"path": "notes.txt"}),
			llmtest.Text("All three tools ran."),
		)
		tm.typeLine("use the tools")
		s := tm.waitFor(t, 20*time.Second, "All three tools ran.")
		s = s[strings.Index(s, "use the tools"):]
		for _, want := range []string{"write notes.txt", `"command": "wc -c notes.txt; hostname"`, "Exit code: 0", "21 notes.txt", "beige-" + agent, "read notes.txt", "written by the model"} {
			if !strings.Contains(s, want) {
				t.Errorf("the turn does not show %q:\n%s", want, s)
			}
		}
		if strings.Contains(s, " {}") {
			t.Errorf("a stray empty tool view:\n%s", s)
		}
		if data, err := os.ReadFile(filepath.Join(g.home.Workspace(agent), "notes.txt")); string(data) != "written by the model\n" {
			t.Errorf("the workspace's notes.txt: %q %v", data, err)
		}
		if !strings.Contains(a.Last().AllText(), "written by the model") {
			t.Errorf("the read result did not reach the model: %s", a.Last().AllText())
		}
		recs, err := audit.ReadFile(g.home.AuditLog())
		if err != nil {
			t.Fatal(err)
		}
		var tools []string
		for _, r := range recs {
			if r.Phase == audit.PhaseFinished && r.Type == audit.TypeCoreTool {
				tools = append(tools, r.Tool+" "+r.Model)
			}
		}
		if want := []string{"write pa/claude-sonnet-4-5", "exec pa/claude-sonnet-4-5", "read pa/claude-sonnet-4-5"}; !slices.Equal(tools, want) {
			t.Errorf("audited %q, want %q", tools, want)
		}
	}) {
		return // each step builds on the last: stop at the first failure
	}

	if !t.Run("shift+tab thinking levels", func(t *testing.T) {
		tm.keys("BTab")
		tm.waitFor(t, 10*time.Second, "Thinking level: minimal")
		tm.keys("BTab")
		tm.waitFor(t, 10*time.Second, "Thinking level: low")
		a.Enqueue(llmtest.Thinking("pondering the question", "Thought about it."))
		tm.typeLine("think")
		s := tm.waitFor(t, 20*time.Second, "Thought about it.")
		if !strings.Contains(s, "pondering the question") {
			t.Errorf("the thinking does not show:\n%s", s)
		}
		reqs := rec.requests("/api/chat/stream")
		var body struct{ Options struct{ Reasoning any } }
		json.Unmarshal(reqs[len(reqs)-1].body, &body)
		if body.Options.Reasoning != "low" {
			t.Errorf("the client asked for reasoning %v, want low", body.Options.Reasoning)
		}
		if th, _ := a.Last().Body["thinking"].(map[string]any); th["type"] != "enabled" || th["budget_tokens"] != float64(2048) {
			t.Errorf("upstream thinking %v, want enabled with low's 2048 tokens", a.Last().Body["thinking"])
		}
	}) {
		return // each step builds on the last: stop at the first failure
	}

	if !t.Run("an LLM error shows", func(t *testing.T) {
		bad := llmtest.Error(400, `{"type":"error","error":{"type":"invalid_request_error","message":"the canary error message"}}`, nil)
		a.SetDefault(bad)
		b.SetDefault(bad)
		defer a.SetDefault(llmtest.Text("ok"))
		defer b.SetDefault(llmtest.Text("ok"))
		tm.typeLine("fail please")
		s := tm.waitFor(t, 20*time.Second, "Error: all models failed: pa/claude-sonnet-4-5: ")
		s = s[strings.Index(s, "fail please"):]
		if !strings.Contains(s, "the canary error message") || strings.Contains(s, "Retrying") {
			t.Errorf("the error:\n%s", s)
		}
	}) {
		return // each step builds on the last: stop at the first failure
	}

	if !t.Run("a context overflow makes the client compact and retry", func(t *testing.T) {
		over := llmtest.Error(400, `{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 213462 tokens > 200000 maximum"}}`, nil)
		a.Enqueue(over)
		b.Enqueue(over)
		a.Enqueue(llmtest.Text("SUMMARY of the talk so far."), llmtest.Text("Answered after compaction."))
		n := a.Count()
		tm.typeLine("a long question")
		s := tm.waitFor(t, 30*time.Second, "Answered after compaction.")
		if s = s[strings.LastIndex(s, "a long question"):]; !strings.Contains(s, "prompt is too long") || !strings.Contains(s, "[compaction]") {
			t.Errorf("the overflow and the compaction do not show:\n%s", s)
		}
		// The summary was asked for through the gateway, and the retry
		// carried it.
		var summarised bool
		for i := n; i < a.Count(); i++ {
			summarised = summarised || strings.Contains(a.Request(i).System(), "summarization")
		}
		if !summarised || !strings.Contains(a.Last().AllText(), "SUMMARY of the talk so far.") {
			t.Errorf("no summary request through the gateway, or the retry lacks it: %s", a.Last().AllText())
		}
	}) {
		return // each step builds on the last: stop at the first failure
	}

	if !t.Run("escape aborts and the gateway cancels the model call", func(t *testing.T) {
		a.Enqueue(llmtest.Text("Counting slowly: one two three four five").WithChunk(9).HangAfter(6))
		tm.typeLine("count for me")
		tm.waitFor(t, 20*time.Second, "Counting slowly:")
		if !a.WaitInFlight(1, 10*time.Second) {
			t.Fatal("the model request is not in flight")
		}
		tm.keys("Escape")
		if !a.WaitCancelled(1, 10*time.Second) {
			t.Error("the provider's request was not cancelled")
		}
		tm.waitFor(t, 10*time.Second, "Operation aborted")
	}) {
		return // each step builds on the last: stop at the first failure
	}

	if !t.Run("a 429 falls back and says so", func(t *testing.T) {
		a.Enqueue(llmtest.Status(429))
		b.Enqueue(llmtest.Text("Answer from the fallback."))
		tm.typeLine("rate limited")
		tm.waitFor(t, 20*time.Second, "Answer from the fallback.")
		if raw := tm.rawOutput(); !strings.Contains(raw, "Gateway switched to fallback model: pb/claude-haiku-4-5") {
			t.Errorf("the client never said it switched model; it wrote:\n%q", raw)
		}
	}) {
		return // each step builds on the last: stop at the first failure
	}

	if !t.Run("ctrl+p switches model and the gateway keeps the pin", func(t *testing.T) {
		tm.keys("C-p")
		tm.waitFor(t, 10*time.Second, "(pb) claude-haiku-4-5")
		b.Enqueue(llmtest.Text("Haiku here."))
		tm.typeLine("who are you")
		tm.waitFor(t, 20*time.Second, "Haiku here.")
		var patched *recorded
		for _, q := range rec.requests("") {
			if q.method == http.MethodPatch {
				patched = &q
			}
		}
		if patched == nil || patched.path != "/api/agents/"+agent+"/sessions/tui:"+agent+":default/model" || !strings.Contains(string(patched.resp), `"provider":"pb"`) {
			t.Errorf("the model pin: %s %s -> %s", patched.path, patched.body, patched.resp)
		}
	}) {
		return // each step builds on the last: stop at the first failure
	}

	if !t.Run("beige-sessions lists the session", func(t *testing.T) {
		tm.typeLine("/beige-sessions")
		tm.waitFor(t, 10*time.Second, "Sessions for agent '"+agent+"'", ".jsonl")
		// The client keeps its session in the gateway's home (in the
		// session map, which a gateway reads when it starts, as the
		// original's did): a restarted gateway lists it.
		g.restart(t)
		resp, err := http.Get(g.URL() + "/api/agents/" + agent + "/sessions")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		if !strings.Contains(string(body), `"id":"tui:`+agent+`:default"`) {
			t.Errorf("the gateway's sessions: %s", body)
		}
	}) {
		return // each step builds on the last: stop at the first failure
	}

	if d := time.Since(began); d > 60*time.Second {
		t.Errorf("the run took %s, over its 60 s bound", d)
	}
}

// TestOriginalClientHooks: the gateway's prePrompt and postResponse hooks
// (the hooktest plugin of hooks_test.go) as the original client shows them:
// a blocked message says why and calls no model; an answer a hook
// rewrote (held back until the hook saw it) is what shows.
func TestOriginalClientHooks(t *testing.T) {
	client := originalClient(t)
	a, b := llmtest.NewAnthropic(t), llmtest.NewAnthropic(t)
	_, _, tm := startOriginalClient(t, client, a, b, "hooktest: {}")

	a.Enqueue(llmtest.Text("The secret word is pelican."))
	tm.typeLine("what is the colour of the word")
	s := tm.waitFor(t, 20*time.Second, "The [redacted] word is pelican.")
	if strings.Contains(s, "secret word") {
		t.Errorf("the answer before the hook rewrote it shows:\n%s", s)
	}
	if !strings.Contains(a.Last().AllText(), "what is the color of the word") {
		t.Errorf("the prePrompt rewrite did not reach the model: %s", a.Last().AllText())
	}

	n := a.Count()
	tm.typeLine("say a forbidden thing")
	// The client writes the reason over its UI and ends the turn as aborted.
	tm.waitFor(t, 20*time.Second, "❌ hooktest: no forbidden words", "Operation aborted")
	if a.Count() != n || b.Count() != 0 {
		t.Errorf("a blocked message reached a model: %d, %d requests", a.Count()-n, b.Count())
	}
}

// originalBody reads a request body the original client sent (captured
// from a run of TestOriginalClient with BEIGE_COMPAT_CAPTURE set), with the
// agent's name where it says AGENT.
func originalBody(t *testing.T, name, agent string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", "original-client", name))
	if err != nil {
		t.Fatal(err)
	}
	return strings.ReplaceAll(string(data), "AGENT", agent)
}

// TestOriginalClientRequestBodies replays the request bodies the original
// terminal client (beige 1.1.0 on pi 0.57) really sent, in the order it
// sent them, and checks what it needs of each answer. It runs without the
// client installed.
func TestOriginalClientRequestBodies(t *testing.T) {
	a, b := llmtest.NewAnthropic(t), llmtest.NewAnthropic(t)
	g := startGatewayWith(t, gatewaySetup{
		names: []string{"replay"},
		providers: fmt.Sprintf(`pa: { api: "anthropic-messages", baseUrl: %q, apiKey: "ka" }, pb: { api: "anthropic-messages", baseUrl: %q, apiKey: "kb" }`,
			a.URL(), b.URL()),
		model:  "{ provider: 'pa', model: 'claude-sonnet-4-5' }",
		extra:  map[string]string{"replay": "fallbackModels: [{ provider: 'pb', model: 'claude-haiku-4-5' }]"},
		docker: true, // the replayed tool calls run real commands (wc, hostname)
	})
	agent := g.agents[0]

	if code, out := g.post(t, "/api/agents/"+agent+"/hooks/session-created", originalBody(t, "hook-session-created.json", agent)); code != 200 || out["ok"] != true {
		t.Errorf("session-created: %d %v", code, out)
	}

	// The tools of one turn, in order.
	for _, tc := range []struct{ file, want string }{
		{"exec-1-write.json", "Wrote 21 bytes"},
		{"exec-2-exec.json", "Exit code: 0\n21 notes.txt\nbeige-" + agent},
		{"exec-3-read.json", "written by the model\n"},
	} {
		code, out := g.post(t, "/api/agents/"+agent+"/exec", originalBody(t, tc.file, agent))
		raw, _ := json.Marshal(out)
		if code != 200 || out["isError"] != false || !strings.Contains(string(raw), strings.ReplaceAll(tc.want, "\n", `\n`)) {
			t.Errorf("%s: %d %s, want %q", tc.file, code, raw, tc.want)
		}
	}

	for _, tc := range []struct {
		file     string
		srv      *llmtest.Server
		thinking bool
	}{
		// After three tool results, reasoning left out (thinking off).
		{"chat-stream-tool-results.json", a, false},
		// Shift+Tab to low: options.reasoning "low".
		{"chat-stream-reasoning-low.json", a, true},
		// After Ctrl+P to the fallback model: a history with pa's
		// thinking, an error turn and an aborted turn.
		{"chat-stream-fallback-model-history.json", b, true},
	} {
		t.Run(tc.file, func(t *testing.T) {
			body := originalBody(t, tc.file, agent)
			tc.srv.Enqueue(llmtest.Reply(llmtest.TextBlock("Checking."), llmtest.Call("exec", map[string]string{"command": "ls"})))
			evs := postPi(t, g, body)
			final := checkPiStream(t, evs)
			if final.Type != "done" || final.Message.text() != "Checking." || final.Message.StopReason != "toolUse" {
				t.Errorf("final %s", final.Raw)
			}
			for _, ev := range evs {
				if strings.HasPrefix(ev.Type, "toolcall_") {
					var call struct{ ID, Name string }
					json.Unmarshal(ev.Partial.Content[*ev.ContentIndex], &call)
					if call.ID == "" || call.Name != "exec" {
						t.Errorf("%s does not name the call: %s", ev.Type, ev.Raw)
					}
				}
			}

			up := tc.srv.Last()
			if _, on := up.Body["thinking"]; on != tc.thinking {
				t.Errorf("upstream thinking %v, want on %v", up.Body["thinking"], tc.thinking)
			}
			if got := up.Tools(); !slices.Equal(got, []string{"read", "write", "patch", "exec"}) || strings.Contains(string(up.Raw), `"label"`) {
				t.Errorf("upstream tools %v", got)
			}
			if !strings.Contains(up.System(), "You are an AI agent named \""+agent+"\"") {
				t.Errorf("upstream system prompt: %.200s", up.System())
			}
			// The client's history goes up whole but for its failed
			// turns (error, aborted), which have no content and which
			// the provider would refuse, as pi leaves them out.
			var sent struct {
				Context struct {
					Messages []struct {
						Role, StopReason string
						Content          json.RawMessage
					}
				}
			}
			json.Unmarshal([]byte(body), &sent)
			wantAssistant := 0
			for _, m := range sent.Context.Messages {
				if m.Role == "assistant" && m.StopReason != "error" && m.StopReason != "aborted" {
					wantAssistant++
				}
			}
			gotAssistant := 0
			for i, m := range up.Messages() {
				blocks, _ := m["content"].([]any)
				if text, _ := m["content"].(string); text == "" && len(blocks) == 0 {
					t.Errorf("upstream message %d has no content: %v", i, m)
				}
				if m["role"] == "assistant" {
					gotAssistant++
				}
			}
			if gotAssistant != wantAssistant {
				t.Errorf("%d assistant messages upstream, want %d: %s", gotAssistant, wantAssistant, up.Raw)
			}
			if tc.srv == b && (strings.Contains(string(up.Raw), `"type":"thinking"`) || !strings.Contains(up.AllText(), "pondering the question")) {
				t.Errorf("pa's thinking did not go to pb as text, as pi sends another model's: %s", up.Raw)
			}
			if !strings.Contains(up.AllText(), "written by the model") || !strings.Contains(up.AllText(), "Exit code: 0") {
				t.Errorf("the tool results did not go up: %s", up.AllText())
			}
		})
	}

	// Ctrl+P's pin.
	req, _ := http.NewRequest(http.MethodPatch, g.URL()+"/api/agents/"+agent+"/sessions/"+url.PathEscape("tui:"+agent+":default")+"/model",
		strings.NewReader(originalBody(t, "patch-session-model.json", agent)))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("PATCH model: %d", resp.StatusCode)
	}
}
