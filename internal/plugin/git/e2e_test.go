package git_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/beige-dev/beige/internal/audit"
	"github.com/beige-dev/beige/internal/config"
	"github.com/beige-dev/beige/internal/home"
	"github.com/beige-dev/beige/internal/plugin"
	_ "github.com/beige-dev/beige/internal/plugin/builtin"
	"github.com/beige-dev/beige/internal/toolbridge"
	"github.com/beige-dev/beige/internal/toolclient"
)

// TestEndToEnd goes the whole way: a config naming the built-in git plugin,
// a Host, the agent's socket, its launcher and the tool client.
func TestEndToEnd(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed on this host")
	}
	base, _ := filepath.EvalSymlinks(t.TempDir())
	h := home.Home{Dir: filepath.Join(base, "beige")}
	if _, err := h.Setup(); err != nil {
		t.Fatal(err)
	}
	t.Setenv("HOME", base)
	os.WriteFile(filepath.Join(base, ".gitconfig"), []byte("[user]\n\tname = H\n\temail = h@example.com\n"), 0o644)
	src := `{
  llm: { providers: { anthropic: { apiKey: "x" } } },
  plugins: { git: {} },
  agents: {
    travel: { model: { provider: "anthropic", model: "m" }, tools: ["git"], sandbox: { image: "i" } },
    other:  { model: { provider: "anthropic", model: "m" }, sandbox: { image: "i" } },
  },
}`
	cfg, err := config.Parse(filepath.Join(base, "config.json5"), []byte(src), &config.LoadOptions{Builtins: plugin.Builtins()})
	if err != nil {
		t.Fatal(err)
	}
	lg, err := audit.Open(h.AuditLog(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer lg.Close()
	// The gateway pauses the sandbox while git runs; there is none here.
	noSandbox := func(context.Context, string) (func(), error) { return func() {}, nil }
	host, err := plugin.NewHost(cfg, &plugin.Options{Home: h, Audit: lg, Freeze: noSandbox})
	if err != nil {
		t.Fatal(err)
	}
	defer host.Close(context.Background())
	for _, a := range host.Agents() {
		os.MkdirAll(host.Workspace(a), 0o755)
		os.MkdirAll(h.SocketDir(a), 0o700)
		if err := toolbridge.WriteLaunchers(h.Launchers(a), host.Tools(a)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := os.Stat(filepath.Join(h.Launchers("travel"), "git")); err != nil {
		t.Errorf("launcher: %v", err)
	}
	if es, _ := os.ReadDir(h.Launchers("other")); len(es) != 0 {
		t.Errorf("launchers of other: %v", es)
	}
	if pk := host.Packages("travel"); pk["git"] != filepath.Join(h.ToolsDir(), "git") {
		t.Errorf("Packages = %v", pk)
	}
	if _, err := os.Stat(filepath.Join(h.ToolsDir(), "git", "README.md")); err != nil {
		t.Errorf("docs: %v", err)
	}
	if !strings.Contains(host.ToolContext("travel"), "### git\n") {
		t.Errorf("ToolContext:\n%s", host.ToolContext("travel"))
	}

	run := func(agent string, args ...string) (int, string, string) {
		t.Helper()
		// The socket of another agent is not reachable from this one's
		// sandbox; here both run in the test, each on its own socket.
		env := map[string]string{toolclient.SocketEnv: h.Socket(agent), "BEIGE_SESSION_KEY": "tui:" + agent + ":default", "BEIGE_CHANNEL": "tui"}
		var out, errb bytes.Buffer
		code := toolclient.Main(args, func(k string) string { return env[k] }, &out, &errb)
		return code, out.String(), errb.String()
	}
	for _, a := range []string{"travel", "other"} {
		s, err := toolbridge.Listen(h.Socket(a), a, host.Handle, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
	}

	if code, out, errs := run("travel", "git", "init", "-b", "main"); code != 0 || !strings.Contains(out, "Initialized empty Git repository") {
		t.Fatalf("git init: %d %q %q", code, out, errs)
	}
	os.WriteFile(filepath.Join(host.Workspace("travel"), "a.txt"), []byte("hi\n"), 0o644)
	run("travel", "git", "add", "a.txt")
	if code, out, errs := run("travel", "git", "commit", "-m", "first"); code != 0 || !strings.Contains(out, "first") {
		t.Fatalf("git commit: %d %q %q", code, out, errs)
	}
	if code, out, _ := run("travel", "git", "log", "--format=%s"); code != 0 || out != "first\n" {
		t.Errorf("git log: %d %q", code, out)
	}
	if code, _, errs := run("travel", "git", "-C", "/", "status"); code != 1 || !strings.Contains(errs, "git -C is not allowed") {
		t.Errorf("git -C: %d %q", code, errs)
	}
	code, _, errs := run("other", "git", "status")
	if code != 1 || errs != "Permission denied: tool 'git' not allowed for agent 'other'\n" {
		t.Errorf("other agent: %d %q", code, errs)
	}

	recs, err := audit.ReadFile(h.AuditLog())
	if err != nil {
		t.Fatal(err)
	}
	last := recs[len(recs)-1]
	// The tool client's BEIGE_SESSION_KEY is the sandbox's claim, not a
	// fact: a call the gateway did not start has no call token, and is
	// recorded as unattributed.
	if last.Agent != "other" || last.Decision != "denied" || last.Phase != "finished" || last.Session != "" || !last.Unattributed {
		t.Errorf("last audit record: %+v", last)
	}
}
