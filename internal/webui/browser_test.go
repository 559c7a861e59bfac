package webui_test

// The console in a real browser: headless Chromium driven through chromedp
// against a gateway on loopback, with real sandboxes (the Docker test
// image) and the loopback model server. Skipped, saying so, without
// Chromium or a Docker engine. Screenshots go to $BEIGE_SCREENSHOTS when
// set, else to the test's temporary folder (the log says where).

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/beige-dev/beige/internal/config"
	"github.com/beige-dev/beige/internal/gateway"
	"github.com/beige-dev/beige/internal/home"
	"github.com/beige-dev/beige/internal/llm/llmtest"
	"github.com/beige-dev/beige/internal/plugin"
	"github.com/beige-dev/beige/internal/sandbox/docker"
	"github.com/beige-dev/beige/internal/sandbox/docker/dockertest"
)

const token = "browser-test-token-77"

// chromium finds the browser, or skips.
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "headless-shell"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Skip("no Chromium on this machine (apt-get install -y chromium): the browser tests of the console are skipped")
	return ""
}

type testGW struct {
	*gateway.Gateway
	home   home.Home
	agents []string
}

// startGateway starts a gateway with the token and the given agents
// ("name: { config }", the name getting a random suffix) on a free port.
func startGateway(t *testing.T, providers string, agents map[string]string, order []string) *testGW {
	t.Helper()
	dockertest.RequireDocker(t)
	image := dockertest.Image(t)
	h := home.Home{Dir: t.TempDir()}
	if _, err := h.Setup(); err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "{ gateway: { authToken: %q }, llm: { providers: { %s } }, plugins: { git: {} }, agents: {\n", token, providers)
	var names []string
	for _, n := range order {
		a := n + "-" + dockertest.Suffix()
		names = append(names, a)
		fmt.Fprintf(&b, "  %q: { sandbox: { image: %q }, %s },\n", a, image, agents[n])
		t.Cleanup(func() { dockertest.RemoveContainer(t, a) })
	}
	b.WriteString("} }")
	path := filepath.Join(h.Dir, "config.json5")
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(path, &config.LoadOptions{Builtins: plugin.Builtins()})
	if err != nil {
		t.Fatal(err)
	}
	g, err := gateway.Start(context.Background(), gateway.Options{
		Home: h, Config: cfg, HelperBinary: dockertest.HelperBinary(t),
		Runtime: dockertest.NewRuntime(t, docker.Options{Instance: "test-" + dockertest.Suffix()}),
		Addr:    "127.0.0.1:0",
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Shutdown(context.Background()) })
	return &testGW{Gateway: g, home: h, agents: names}
}

// api calls the gateway's API with the bearer token.
func (g *testGW) api(t *testing.T, method, path, body string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(method, g.URL()+path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+token)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	res, err := (&http.Client{Timeout: 60 * time.Second}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var buf bytes.Buffer
	buf.ReadFrom(res.Body)
	return res.StatusCode, buf.String()
}

// browser is one headless Chromium tab. Every console error, uncaught
// exception and error log entry (a CSP violation, a failed load) fails the
// test, except while expectErrors is on.
type browser struct {
	ctx    context.Context
	t      *testing.T
	mu     sync.Mutex
	errs   []string
	expect bool
	shots  string
}

func newBrowser(t *testing.T) *browser {
	t.Helper()
	path := chromium(t)
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path), chromedp.NoSandbox, chromedp.WindowSize(1280, 800),
		chromedp.Flag("disable-dev-shm-usage", true), chromedp.UserDataDir(t.TempDir()))
	actx, cancelA := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelC := chromedp.NewContext(actx)
	t.Cleanup(func() { cancelC(); cancelA() })
	// The first run starts the browser, on a context without a deadline
	// (a deadline on it would stop the browser); later runs are bounded.
	if err := chromedp.Do(ctx, chromedp.Navigate("about:blank")); err != nil {
		t.Fatalf("start Chromium: %v", err)
	}
	tctx, cancelT := context.WithTimeout(ctx, 150*time.Second)
	t.Cleanup(cancelT)
	b := &browser{ctx: tctx, t: t, shots: os.Getenv("BEIGE_SCREENSHOTS")}
	if b.shots == "" {
		b.shots = t.TempDir()
	}
	b.desktop()
	messages := chromedp.Console(tctx)
	go func() {
		for m, err := range messages {
			if err != nil {
				return
			}
			if m.Type != chromedp.ConsoleError && !m.IsException() {
				continue
			}
			b.mu.Lock()
			if !b.expect {
				b.errs = append(b.errs, m.String()+" "+m.URL)
			}
			b.mu.Unlock()
		}
	}()
	t.Cleanup(b.checkErrors)
	return b
}

func (b *browser) do(actions ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	if err := chromedp.Do(b.ctx, actions...); err != nil {
		b.t.Fatalf("browser: %v", err)
	}
}

func (b *browser) expectErrors(on bool) {
	time.Sleep(300 * time.Millisecond) // let the messages of what was done arrive first
	b.mu.Lock()
	b.expect = on
	b.mu.Unlock()
}

func (b *browser) checkErrors() {
	time.Sleep(200 * time.Millisecond)
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, e := range b.errs {
		b.t.Errorf("browser console: %s", e)
	}
}

// screenshot saves the viewport as <name>.png.
func (b *browser) screenshot(name string) {
	b.t.Helper()
	time.Sleep(150 * time.Millisecond)
	png, err := chromedp.Run(b.ctx, chromedp.CaptureScreenshot())
	if err != nil {
		b.t.Fatalf("screenshot: %v", err)
	}
	p := filepath.Join(b.shots, name+".png")
	if err := os.WriteFile(p, png, 0o644); err != nil {
		b.t.Fatal(err)
	}
	b.t.Logf("screenshot %s (%d KB)", p, len(png)>>10)
}

// noOverflow fails when the page is wider than the viewport (a phone
// would scroll it sideways).
func (b *browser) noOverflow(what string) {
	b.t.Helper()
	var w struct{ Page, View int }
	b.eval(`({Page: document.documentElement.scrollWidth, View: window.innerWidth})`, &w)
	if w.Page > w.View+1 {
		b.t.Errorf("%s is %d px wide in a %d px viewport", what, w.Page, w.View)
	}
}

// mobile switches to a 390-wide phone viewport; desktop back to 1280×800.
func (b *browser) mobile()  { b.do(chromedp.EmulateViewport(390, 844, chromedp.EmulateMobile)) }
func (b *browser) desktop() { b.do(chromedp.EmulateViewport(1280, 800)) }

// eval runs js (a promise is awaited) and decodes its value into out.
func (b *browser) eval(js string, out any) {
	b.t.Helper()
	v, err := chromedp.Run(b.ctx, chromedp.Evaluate[string]("(async () => JSON.stringify(await ("+js+")))()", chromedp.EvalAwaitPromise))
	if err != nil {
		b.t.Fatalf("evaluate %s: %v", js, err)
	}
	if out != nil {
		if err := json.Unmarshal([]byte(v), out); err != nil {
			b.t.Fatalf("evaluate %s: %q: %v", js, v, err)
		}
	}
}

func (b *browser) navigate(url string) { b.do(chromedp.Navigate(url)) }

// waitFor waits until the JavaScript condition holds, up to d.
func (b *browser) waitFor(what, cond string, d time.Duration) {
	b.t.Helper()
	deadline := time.Now().Add(d)
	for {
		var ok bool
		b.eval("!!("+cond+")", &ok)
		if ok {
			return
		}
		if time.Now().After(deadline) {
			var text string
			b.eval(`document.body ? document.body.innerText.slice(0, 2000) : ""`, &text)
			b.t.Fatalf("%s: not within %v; the page says:\n%s", what, d, text)
		}
		time.Sleep(25 * time.Millisecond)
	}
}

// login opens the console: it is sent to the login page, where the
// token opens it.
func (b *browser) login(url string) {
	b.t.Helper()
	b.navigate(url + "/ui/")
	b.waitFor("the login page", `document.getElementById("token")`, 10*time.Second)
	var loc string
	b.eval(`location.pathname`, &loc)
	if loc != "/ui/login" {
		b.t.Fatalf("without the token /ui/ went to %s, want the login page", loc)
	}
	b.expectErrors(true) // the refusals below are logged as failed loads
	var status struct{ Page, Events, Script int }
	b.eval(`(async () => ({
		Page: (await fetch("/ui/", {redirect: "manual"})).status,
		Events: (await fetch("/ui/events")).status,
		Script: (await fetch("/ui/assets/app.js")).status,
	}))()`, &status)
	// a manual redirect is an opaque response with status 0
	if status.Page != 0 || status.Events != http.StatusUnauthorized || status.Script != http.StatusUnauthorized {
		b.t.Errorf("without the token: page %d, events %d, app.js %d; want 0 (a redirect to the login), 401, 401", status.Page, status.Events, status.Script)
	}
	b.eval(`(document.getElementById("token").value = "wrong", document.getElementById("login").requestSubmit(), 1)`, nil)
	b.waitFor("the wrong token refused", `document.getElementById("error").textContent.includes("wrong token")`, 5*time.Second)
	b.expectErrors(false)
	b.eval(`(document.getElementById("token").value = `+strconv.Quote(token)+`, document.getElementById("login").requestSubmit(), 1)`, nil)
	b.waitFor("the console after the login", `location.pathname === "/ui/" && document.getElementById("conn")?.classList.contains("live")`, 10*time.Second)
	var cookie string
	b.eval(`document.cookie`, &cookie)
	if strings.Contains(cookie, "beige_token") {
		b.t.Errorf("the token cookie is readable by the page's script (not HttpOnly): %q", cookie)
	}
}

// TestBrowserChat: log in; a page of another origin cannot drive the
// console even though the browser sends it the cookie; in Chat a message
// that makes the model call exec twice streams its answer, shows both calls
// with their exit codes, and the page shows the text the session file has.
func TestBrowserChat(t *testing.T) {
	model := llmtest.NewAnthropic(t)
	g := startGateway(t, fmt.Sprintf(`scripted: { api: "anthropic-messages", baseUrl: %q, apiKey: "k" }`, model.URL()),
		map[string]string{"chat": "model: { provider: 'scripted', model: 'claude-sonnet-4-5' }"}, []string{"chat"})
	// The browser after the gateway: its cleanups (the console check,
	// closing the tab) run before the gateway shuts down under the page.
	b := newBrowser(t)
	agent := g.agents[0]
	b.login(g.URL())

	// Another origin (another port of the same host: the same site, so
	// the SameSite=Strict cookie goes along) posts a prompt to the console.
	evil := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprintf(w, `<!doctype html><title>evil</title><p id=done></p><script>
fetch(%q, {method: "POST", mode: "no-cors", credentials: "include", body: JSON.stringify({message: "rm -rf"})})
  .then(() => document.getElementById("done").textContent = "sent", () => document.getElementById("done").textContent = "failed");
</script>`, g.URL()+"/ui/api/agents/"+agent+"/prompt")
	}))
	defer evil.Close()
	b.expectErrors(true)
	b.navigate(evil.URL)
	b.waitFor("the other origin's request", `document.getElementById("done").textContent !== ""`, 10*time.Second)
	b.expectErrors(false)
	if n := model.Count(); n != 0 {
		t.Fatalf("a page of another origin made the console prompt the model (%d requests)", n)
	}

	model.Enqueue(
		llmtest.ToolCall("exec", map[string]any{"command": "echo first"}),
		llmtest.ToolCall("exec", map[string]any{"command": "sleep 1; echo second; exit 3"}),
		llmtest.Reply(llmtest.TextBlock("Both commands ran. The second one **failed** with exit code 3.")),
	)
	b.navigate(g.URL() + "/ui/")
	b.waitFor("the agent list", `document.body.dataset.ready && document.getElementById("agent").value === `+strconv.Quote(agent), 10*time.Second)
	// The thinking switch: the session's model calls ask for "high".
	b.eval(`(document.getElementById("thinking").value = "high", document.getElementById("thinking").dispatchEvent(new Event("change")), 1)`, nil)
	b.waitFor("the thinking switch", `document.getElementById("transcript").textContent.includes("thinking: high")`, 5*time.Second)
	b.eval(`(document.getElementById("message").value = "run two commands", document.getElementById("send").click(), 1)`, nil)
	// A call shows as soon as it starts, before it ends.
	b.waitFor("the second call running", `[...document.querySelectorAll("details.tool.running .tool-cmd")].some(c => c.textContent.startsWith("sleep 1"))`, 30*time.Second)
	b.waitFor("the answer", `document.querySelector(".msg.assistant.done")`, 60*time.Second)

	if th, _ := model.Request(0).Body["thinking"].(map[string]any); th["budget_tokens"] != float64(16384) {
		t.Errorf("with thinking high, the model call asked for thinking %v", model.Request(0).Body["thinking"])
	}
	var tools []struct{ Name, Cmd, Status, Output string }
	b.eval(`[...document.querySelectorAll(".msg.assistant details.tool")].map(d => ({
		Name: d.querySelector(".tool-name").textContent, Cmd: d.querySelector(".tool-cmd").textContent,
		Status: d.querySelector(".tool-status").textContent, Output: d.querySelector(".tool-output").textContent}))`, &tools)
	if len(tools) != 2 {
		t.Fatalf("tool calls on the page: %+v, want 2", tools)
	}
	if tools[0].Cmd != "echo first" || !strings.HasPrefix(tools[0].Status, "exit 0") || !strings.Contains(tools[0].Output, "first") {
		t.Errorf("first call: %+v", tools[0])
	}
	if tools[1].Cmd != "sleep 1; echo second; exit 3" || !strings.HasPrefix(tools[1].Status, "exit 3") || !strings.Contains(tools[1].Output, "second") {
		t.Errorf("second call: %+v", tools[1])
	}
	if !regexp.MustCompile(`^exit \d+ · \d+ ms$`).MatchString(tools[0].Status) {
		t.Errorf("status %q: want exit code and duration", tools[0].Status)
	}
	var open bool
	b.eval(`[...document.querySelectorAll("details.tool")].some(d => d.open)`, &open)
	if open {
		t.Error("a tool call's output is not collapsed")
	}
	var text, strong string
	b.eval(`document.querySelector(".msg.assistant .text:last-of-type").textContent`, &text)
	b.eval(`document.querySelector(".msg.assistant .text strong")?.textContent ?? ""`, &strong)
	if strong != "failed" {
		t.Errorf("the Markdown was not rendered: <strong> %q", strong)
	}
	// The session file has the same answer.
	want := sessionAnswer(t, g.home.SessionsDir(), "ui:"+agent+":default")
	if plain := strings.ReplaceAll(want, "**", ""); text != plain {
		t.Errorf("the page shows %q; the session file has %q", text, want)
	}
	b.screenshot("chat-1280")
	// A reload resumes the session from its file: the same calls and answer.
	b.navigate(g.URL() + "/ui/")
	b.waitFor("the session's history", `document.querySelectorAll(".msg.assistant.done details.tool").length === 2`, 10*time.Second)
	var resumed struct {
		Statuses []string
		Text     string
		User     string
	}
	b.eval(`({Statuses: [...document.querySelectorAll("details.tool .tool-status")].map(s => s.textContent),
		Text: [...document.querySelectorAll(".msg.assistant .text")].at(-1).textContent,
		User: document.querySelector(".msg.user").textContent})`, &resumed)
	if len(resumed.Statuses) != 2 || resumed.Statuses[0] != "exit 0" || resumed.Statuses[1] != "exit 3" ||
		resumed.Text != strings.ReplaceAll(want, "**", "") || resumed.User != "run two commands" {
		t.Errorf("after a reload the page shows %+v", resumed)
	}
	b.screenshot("chat-resumed-1280")
	b.mobile()
	b.screenshot("chat-390")
	b.noOverflow("the chat")
	b.desktop()

	// Abort ends a prompt the model never answers; /new starts afresh.
	model.Enqueue(llmtest.Hang())
	b.eval(`(document.getElementById("message").value = "hang", document.getElementById("send").click(), 1)`, nil)
	b.waitFor("the abort button", `!document.getElementById("abort").disabled`, 10*time.Second)
	time.Sleep(200 * time.Millisecond)
	b.eval(`(document.getElementById("abort").click(), 1)`, nil)
	b.waitFor("the aborted prompt", `[...document.querySelectorAll(".msg.assistant .note.error")].some(n => n.textContent === "aborted") && !document.getElementById("send").disabled`, 10*time.Second)
	b.eval(`(document.getElementById("message").value = "/new", document.getElementById("send").click(), 1)`, nil)
	b.waitFor("the new session", `document.getElementById("transcript").textContent.includes("new session")`, 10*time.Second)
	b.navigate(g.URL() + "/ui/")
	b.waitFor("the page", `document.body.dataset.ready`, 10*time.Second)
	var n int
	b.eval(`document.querySelectorAll("#transcript .msg").length`, &n)
	if n != 0 {
		t.Errorf("after /new the session still shows %d messages", n)
	}

	// Model and tool output is hostile: none of it may become markup.
	model.Enqueue(
		llmtest.ToolCall("exec", map[string]any{"command": "echo '<img src=x id=evil1 onerror=document.title=1>'"}),
		llmtest.Reply(llmtest.TextBlock(`<img src=x id=evil2 onerror="document.title='pwned'"> [click](javascript:document.title='pwned') <script>document.title='pwned'</script>`+
			"\n\n"+strings.Repeat("[", 30000)+strings.Repeat("`", 30000)+strings.Repeat("_a", 10000))),
	)
	sent := time.Now()
	b.eval(`(document.getElementById("message").value = "again", document.getElementById("send").click(), 1)`, nil)
	b.waitFor("the second answer", `document.querySelectorAll(".msg.assistant.done").length === 1`, 60*time.Second)
	// Markup built to make a regular expression backtrack does not hang
	// the page.
	t.Logf("the hostile answer rendered in %v", time.Since(sent))
	if d := time.Since(sent); d > 15*time.Second {
		t.Errorf("the hostile answer took %v to render", d)
	}
	var hostile struct {
		Imgs, Scripts, JSLinks int
		Title                  string
	}
	b.eval(`({Imgs: document.querySelectorAll("#transcript img").length, Scripts: document.querySelectorAll("#transcript script").length,
		JSLinks: [...document.querySelectorAll("#transcript a")].filter(a => !/^(https?|mailto):/.test(a.href)).length, Title: document.title})`, &hostile)
	if hostile.Imgs != 0 || hostile.Scripts != 0 || hostile.JSLinks != 0 || hostile.Title == "pwned" {
		t.Errorf("model or tool output became markup: %+v", hostile)
	}
	b.eval(`[...document.querySelectorAll(".msg.assistant .text")].at(-1).textContent`, &text)
	if !strings.Contains(text, "<img src=x id=evil2") {
		t.Errorf("the hostile text is not shown as text: %q", text)
	}
}

// sessionAnswer returns the text of the last assistant message in the
// session file of key.
func sessionAnswer(t *testing.T, dir, key string) string {
	t.Helper()
	var answer string
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".jsonl") {
			return nil
		}
		data, _ := os.ReadFile(p)
		if !bytes.Contains(data, []byte(strconv.Quote(key))) {
			return nil
		}
		for line := range bytes.Lines(data) {
			var e struct {
				Message struct {
					Role    string `json:"role"`
					Content []struct {
						Type, Text string
					} `json:"content"`
				} `json:"message"`
			}
			if json.Unmarshal(line, &e) != nil || e.Message.Role != "assistant" {
				continue
			}
			for _, c := range e.Message.Content {
				if c.Type == "text" {
					answer = c.Text
				}
			}
		}
		return nil
	})
	if answer == "" {
		t.Fatalf("no assistant answer in a session file of %s under %s", key, dir)
	}
	return answer
}

// TestBrowserActivityAndHealth: Activity shows a denied plugin call
// within 1 s, and its filter narrows the list to that agent; Health shows
// a provider's cooldown after a scripted 429, with the time left.
func TestBrowserActivityAndHealth(t *testing.T) {
	pa, pb := llmtest.NewAnthropic(t), llmtest.NewAnthropic(t)
	g := startGateway(t,
		fmt.Sprintf(`pa: { api: "anthropic-messages", baseUrl: %q, apiKey: "ka" }, pb: { api: "anthropic-messages", baseUrl: %q, apiKey: "kb" }`, pa.URL(), pb.URL()),
		map[string]string{
			"worker": "model: { provider: 'pa', model: 'model-a' }, fallbackModels: [{ provider: 'pb', model: 'model-b' }]",
			"nogit":  "model: { provider: 'pa', model: 'model-a' }",
		}, []string{"worker", "nogit"})
	// The browser after the gateway: its cleanups (the console check,
	// closing the tab) run before the gateway shuts down under the page.
	b := newBrowser(t)
	worker, nogit := g.agents[0], g.agents[1]
	b.login(g.URL())
	b.eval(`(document.querySelector('nav button[data-view="activity"]').click(), 1)`, nil)

	if code, body := g.api(t, "POST", "/api/agents/"+worker+"/exec", `{"tool":"exec","params":{"command":"echo hi"}}`); code != 200 {
		t.Fatalf("exec: %d %s", code, body)
	}
	b.waitFor("the allowed exec", `document.querySelector('#activity li[data-agent=`+strconv.Quote(worker)+`][data-tool="exec"]')`, 5*time.Second)

	code, body := g.api(t, "POST", "/api/agents/"+nogit+"/exec", `{"tool":"exec","params":{"command":"git status"}}`)
	if code != 200 || !strings.Contains(body, "Permission denied") {
		t.Fatalf("denied git: %d %s", code, body)
	}
	denied := `document.querySelector('#activity li.denied[data-agent=` + strconv.Quote(nogit) + `][data-tool="git"]')`
	b.waitFor("the denied plugin call in Activity", denied, time.Second)
	var color string
	b.eval(`getComputedStyle(`+denied+`).backgroundColor`, &color)
	var plain string
	b.eval(`getComputedStyle(document.querySelector('#activity li:not(.denied)')).backgroundColor`, &plain)
	if color == plain {
		t.Errorf("a denied call does not stand out: background %s like the others", color)
	}

	// The filter narrows the list to that agent.
	b.eval(`(document.getElementById("f-agent").value = `+strconv.Quote(nogit)+`, document.getElementById("f-agent").dispatchEvent(new Event("change")), 1)`, nil)
	var visible []string
	b.eval(`[...document.querySelectorAll("#activity li")].filter(li => !li.hidden).map(li => li.dataset.agent)`, &visible)
	if len(visible) == 0 {
		t.Fatal("the filter hid the denied call")
	}
	for _, a := range visible {
		if a != nogit {
			t.Errorf("filtered by %s, the list still shows a record of %s", nogit, a)
		}
	}
	// Expanded, a record shows the whole of it.
	b.eval(`(`+denied+`.querySelector("summary").click(), 1)`, nil)
	var full string
	b.eval(denied+`.querySelector("pre").textContent`, &full)
	if !strings.Contains(full, `"decision": "denied"`) || !strings.Contains(full, `"agent": "`+nogit+`"`) {
		t.Errorf("the expanded record: %s", full)
	}
	b.screenshot("activity-1280")
	b.mobile()
	b.screenshot("activity-390")
	b.noOverflow("Activity")
	b.desktop()

	// A scripted 429 puts pa/model-a in a cooldown.
	pa.Enqueue(llmtest.Error(429, `{"type":"error","error":{"type":"rate_limit_error","message":"slow down"}}`, http.Header{"Retry-After": {"120"}}))
	pb.SetDefault(llmtest.Text("from b"))
	if code, body := g.api(t, "POST", "/api/agents/"+worker+"/prompt", `{"message":"hi","sessionKey":"api:s1"}`); code != 200 || !strings.Contains(body, "from b") {
		t.Fatalf("prompt: %d %s", code, body)
	}
	b.eval(`(document.querySelector('nav button[data-view="health"]').click(), 1)`, nil)
	cell := `document.querySelector('#providers tr[data-key="pa/model-a"] td.cooldown')`
	b.waitFor("the cooldown in Health", cell+`?.textContent.endsWith("s left")`, 5*time.Second)
	var left string
	b.eval(cell+`.textContent`, &left)
	n, _ := strconv.Atoi(strings.TrimSuffix(left, " s left"))
	if n < 100 || n > 120 {
		t.Errorf("cooldown shown as %q, want about 120 s left", left)
	}
	b.screenshot("health-1280")
	b.mobile()
	b.screenshot("health-390")
	b.noOverflow("Health")

	// The open console (its event stream) does not hold up a shutdown
	// for the drain timeout (10 s).
	start := time.Now()
	b.expectErrors(true) // the stream's end is logged
	if err := g.Shutdown(context.Background()); err != nil {
		t.Errorf("shutdown: %v", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("shutdown with the console open took %v", d)
	}
}
