package tui_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/beige-dev/beige/internal/config"
	"github.com/beige-dev/beige/internal/gateway"
	"github.com/beige-dev/beige/internal/home"
	"github.com/beige-dev/beige/internal/llm/llmtest"
	"github.com/beige-dev/beige/internal/plugin"
	"github.com/beige-dev/beige/internal/sandbox/docker"
	"github.com/beige-dev/beige/internal/sandbox/docker/dockertest"
)

// This file drives the real `beige tui` binary in a real terminal (tmux),
// against a real gateway started in this process, whose agent has a real
// Docker sandbox and a scripted model provider (llmtest).

const (
	canaryKey = "sk-canary-tui-7777"
	authToken = "tui-test-token"
)

// startGateway starts a gateway on a free port with one agent whose model
// is srv, a key that only the gateway knows, and an auth token.
func startGateway(t *testing.T, srv *llmtest.Server) (url, agentName string) {
	t.Helper()
	image := dockertest.Image(t)
	h := home.Home{Dir: t.TempDir()}
	if _, err := h.Setup(); err != nil {
		t.Fatal(err)
	}
	agentName = "tui-" + dockertest.Suffix()
	t.Cleanup(func() { dockertest.RemoveContainer(t, agentName) })
	cfgText := fmt.Sprintf(`{
  gateway: { authToken: %q },
  llm: { providers: { scripted: { api: "anthropic-messages", baseUrl: %q, apiKey: %q } } },
  agents: { %q: { model: { provider: "scripted", model: "test-model" }, sandbox: { image: %q } } },
}`, authToken, srv.URL(), canaryKey, agentName, image)
	path := filepath.Join(h.Dir, "config.json5")
	if err := os.WriteFile(path, []byte(cfgText), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(path, &config.LoadOptions{Builtins: plugin.Builtins()})
	if err != nil {
		t.Fatal(err)
	}
	g, err := gateway.Start(context.Background(), gateway.Options{
		Home:         h,
		Config:       cfg,
		HelperBinary: dockertest.HelperBinary(t),
		Runtime:      dockertest.NewRuntime(t, docker.Options{Instance: "tui-" + dockertest.Suffix()}),
		Addr:         "127.0.0.1:0",
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Shutdown(context.Background()) })
	return g.URL(), agentName
}

// terminal is a tmux session on a server of its own.
type terminal struct {
	t      *testing.T
	socket string
}

// startTerminal runs argv in a new tmux session of width × height with
// exactly the environment env, and prints "__EXIT:<code>" when it ends.
func startTerminal(t *testing.T, env, argv []string, width, height int) *terminal {
	t.Helper()
	if _, err := exec.LookPath("tmux"); err != nil {
		t.Skip("tmux is not installed: this test drives beige tui in a real terminal with tmux (apt-get install tmux)")
	}
	tm := &terminal{t: t, socket: "beige-tui-test-" + dockertest.Suffix()}
	var quoted []string
	for _, a := range append(append([]string{"env", "-i"}, env...), argv...) {
		quoted = append(quoted, "'"+strings.ReplaceAll(a, "'", `'\''`)+"'")
	}
	script := strings.Join(quoted, " ") + `; echo "__EXIT:$?"; sleep 3600`
	tm.tmux("-f", "/dev/null", "new-session", "-d", "-s", "main", "-x", fmt.Sprint(width), "-y", fmt.Sprint(height), "sh", "-c", script)
	t.Cleanup(func() { exec.Command("tmux", "-L", tm.socket, "kill-server").Run() })
	return tm
}

func (tm *terminal) tmux(args ...string) string {
	tm.t.Helper()
	out, err := exec.Command("tmux", append([]string{"-L", tm.socket}, args...)...).CombinedOutput()
	if err != nil {
		tm.t.Fatalf("tmux %v: %v\n%s", args, err, out)
	}
	return string(out)
}

// typeLine types text and Enter.
func (tm *terminal) typeLine(text string) {
	tm.tmux("send-keys", "-t", "main", "-l", text)
	tm.tmux("send-keys", "-t", "main", "Enter")
}

func (tm *terminal) keys(keys ...string) {
	tm.tmux(append([]string{"send-keys", "-t", "main"}, keys...)...)
}

// screen returns the pane with its scrollback, joined wrapped lines.
func (tm *terminal) screen() string {
	return tm.tmux("capture-pane", "-p", "-J", "-t", "main", "-S", "-500")
}

// waitFor waits until the screen holds every one of want.
func (tm *terminal) waitFor(want ...string) string {
	tm.t.Helper()
	deadline := time.Now().Add(60 * time.Second)
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
		if strings.Contains(s, "__EXIT:") && !slices.ContainsFunc(want, func(w string) bool { return strings.Contains(w, "__EXIT:") }) {
			break // beige ended
		}
		time.Sleep(50 * time.Millisecond)
	}
	tm.t.Fatalf("the terminal never showed %q; it shows:\n%s", want, s)
	return ""
}

// lineOf returns the number of the first line of s holding sub after line
// from, or -1.
func lineOf(s, sub string, from int) int {
	for i, l := range strings.Split(s, "\n") {
		if i >= from && strings.Contains(l, sub) {
			return i
		}
	}
	return -1
}

func TestTUIInATerminal(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a gateway with a Docker sandbox and drives beige in tmux")
	}
	if _, err := exec.LookPath("tmux"); err != nil {
		t.Skip("tmux is not installed: this test drives beige tui in a real terminal with tmux (apt-get install tmux)")
	}
	srv := llmtest.NewAnthropic(t)
	url, agentName := startGateway(t, srv)
	bin := dockertest.StaticBinary(t, "./cmd/beige")

	// The terminal's own home and config: the same shape as the gateway's,
	// but the key is only a ${VAR} that is not set here. The process gets
	// an empty environment besides.
	tuiHome := t.TempDir()
	cfg := filepath.Join(tuiHome, "config.json5")
	os.WriteFile(cfg, []byte(fmt.Sprintf(`{
  gateway: { authToken: %q },
  llm: { providers: { scripted: { api: "anthropic-messages", baseUrl: "http://127.0.0.1:1", apiKey: "${SCRIPTED_API_KEY}" } } },
  agents: { %q: { model: { provider: "scripted", model: "test-model" }, sandbox: { image: "beige-sandbox:latest" } } },
}`, authToken, agentName)), 0o600)
	env := []string{"HOME=" + tuiHome, "BEIGE_HOME=" + tuiHome, "TERM=xterm-256color", "PATH=/usr/bin:/bin", "LANG=C.UTF-8"}
	tm := startTerminal(t, env, []string{bin, "-c", cfg, "-g", url, "tui", agentName}, 110, 40)
	tm.waitFor("beige tui · agent "+agentName, "idle · verbose off")

	// /v on, then a prompt: the model runs `ls -la` in the sandbox, then
	// answers in markdown.
	srv.Enqueue(
		llmtest.ToolCall("exec", map[string]any{"command": "ls -la"}),
		llmtest.Text("The workspace holds **AGENTS.md** and nothing else.").WithChunk(6),
	)
	tm.typeLine("/v on")
	tm.waitFor("verbose on: each tool call is announced")
	tm.typeLine("what is in the workspace?")
	s := tm.waitFor("The workspace holds AGENTS.md and nothing else.", "idle · verbose on")
	user := lineOf(s, "› what is in the workspace?", 0)
	notice := lineOf(s, "🔧 exec: ls -la", user)
	tool := lineOf(s, "⚙ exec: ls -la", user)
	result := lineOf(s, "⎿ Exit code: 0", user)
	answer := lineOf(s, "The workspace holds AGENTS.md", user)
	if !(user >= 0 && user < notice && notice < tool && tool < result && result < answer) {
		t.Errorf("order: prompt %d, notice %d, tool %d, result %d, answer %d:\n%s", user, notice, tool, result, answer, s)
	}
	if strings.Contains(s, "**AGENTS.md**") {
		t.Errorf("the answer was not rendered as markdown:\n%s", s)
	}
	if srv.Count() != 2 {
		t.Fatalf("%d model requests, want 2", srv.Count())
	}
	for _, r := range srv.Requests() {
		// The key reaches the provider, added by the gateway: the terminal
		// never had it.
		if r.APIKey() != canaryKey {
			t.Errorf("request %d: key %q", r.Seq, r.APIKey())
		}
	}
	if !strings.Contains(srv.Last().AllText(), "Exit code: 0") || !strings.Contains(srv.Last().AllText(), "AGENTS.md") {
		t.Errorf("the tool result did not reach the model: %s", srv.Last().AllText())
	}
	if sys := srv.Last().System(); !strings.Contains(sys, "the terminal (beige tui)") || !strings.Contains(sys, "This file is your standing instructions") {
		t.Errorf("system prompt: %s", srv.Last().System())
	}

	// Commands never reach the model.
	for _, c := range []struct{ line, want string }{
		{"/help", "Commands (handled here, never sent to the model)"},
		{"/sessions", "Terminal sessions of " + agentName},
		{"/model", "scripted/test-model"},
		{"/v off", "verbose off"},
		{"/nope", "unknown command /nope"},
	} {
		tm.typeLine(c.line)
		tm.waitFor(c.want)
	}
	if srv.Count() != 2 {
		t.Errorf("commands reached the model: %d requests", srv.Count())
	}

	// A reply that streams, then hangs: it shows while streaming; Ctrl-C
	// aborts it, and the gateway cancels the provider's request.
	srv.Enqueue(llmtest.Text("Counting slowly: one two three four five six seven").WithChunk(9).HangAfter(5))
	tm.typeLine("count for me")
	s = tm.waitFor("Counting slowly:", "· streaming ·")
	t.Logf("the terminal while streaming:\n%s", s)
	if !srv.WaitInFlight(1, 10*time.Second) {
		t.Fatal("the model request is not in flight")
	}
	tm.keys("C-c")
	tm.waitFor("⏹ aborted", "idle · verbose off")
	if !srv.WaitCancelled(1, 10*time.Second) {
		t.Error("the provider's request was not cancelled")
	}

	// The terminal goes on; with verbose off there is no notice.
	srv.Enqueue(llmtest.ToolCall("exec", map[string]any{"command": "echo $BEIGE_SESSION_KEY"}), llmtest.Text("Still here."))
	tm.typeLine("still there?")
	s = tm.waitFor("Still here.", "⚙ exec: echo $BEIGE_SESSION_KEY")
	if strings.Contains(s, "🔧 exec: echo") {
		t.Errorf("a notice with verbose off:\n%s", s)
	}
	if !strings.Contains(s, "tui:"+agentName+":default") {
		t.Errorf("the command did not run in the terminal's session:\n%s", s)
	}

	// Idle, a Ctrl-C quits.
	tm.keys("C-c")
	s = tm.waitFor("__EXIT:0")
	t.Logf("the terminal at the end:\n%s", s)

	// The terminal's files hold no key.
	filepath.Walk(tuiHome, func(p string, info os.FileInfo, err error) error {
		if err == nil && info.Mode().IsRegular() {
			if data, _ := os.ReadFile(p); strings.Contains(string(data), canaryKey) {
				t.Errorf("%s holds the key", p)
			}
		}
		return nil
	})
	if _, err := os.Stat(filepath.Join(tuiHome, "sessions", "tui", "session-map.json")); err != nil {
		t.Errorf("no session map in sessions/tui: %v", err)
	}
}

func TestTUIUnreachableGateway(t *testing.T) {
	if _, err := exec.LookPath("tmux"); err != nil {
		t.Skip("tmux is not installed")
	}
	bin := dockertest.StaticBinary(t, "./cmd/beige")
	dir := t.TempDir()
	env := []string{"HOME=" + dir, "BEIGE_HOME=" + dir, "TERM=xterm-256color", "PATH=/usr/bin:/bin"}
	tm := startTerminal(t, env, []string{bin, "-g", "http://127.0.0.1:1", "tui"}, 100, 20)
	s := tm.waitFor("__EXIT:1")
	if !strings.Contains(s, "beige: cannot reach the gateway at http://127.0.0.1:1: is it running? beige gateway start") || strings.Contains(s, "goroutine") {
		t.Errorf("%s", s)
	}
}
