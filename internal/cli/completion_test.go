package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// completions runs cobra's hidden __complete command, as the shell scripts
// of `beige completion` do, and returns the candidates it prints.
func completions(t *testing.T, args ...string) []string {
	t.Helper()
	code, out, errOut := run(t, append([]string{cobra.ShellCompRequestCmd}, args...)...)
	if code != 0 {
		t.Fatalf("__complete %q: exit %d, %s", args, code, errOut)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) == 0 || !strings.HasPrefix(lines[len(lines)-1], ":") {
		t.Fatalf("__complete %q printed no directive: %q", args, out)
	}
	return lines[:len(lines)-1]
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestCompleteAgents: `beige tui <TAB>` offers the config's agents, from
// the file alone: an API key not set in this shell does not stop it, and
// completing neither runs setup nor prints anything when there is no
// config.
func TestCompleteAgents(t *testing.T) {
	h := withHome(t)
	if got := completions(t, "tui", ""); len(got) != 0 {
		t.Errorf("no config: %q, want nothing", got)
	}
	if _, err := os.Stat(h); !os.IsNotExist(err) {
		t.Errorf("completion set up %s: %v", h, err)
	}
	writeFile(t, filepath.Join(h, "config.json5"), `{
  llm: { providers: { anthropic: { apiKey: "${UNSET_IN_THIS_SHELL_KEY}" } } },
  agents: {
    travel: { model: { provider: "anthropic", model: "x" }, sandbox: { image: "img" } },
    assistant: { model: { provider: "anthropic", model: "x" }, sandbox: { image: "img" } },
    tutor: { model: { provider: "anthropic", model: "x" }, sandbox: { image: "img" } },
  },
}`)
	if got, want := completions(t, "tui", ""), []string{"travel", "assistant", "tutor"}; !slices.Equal(got, want) {
		t.Errorf("tui <TAB> = %q, want %q", got, want)
	}
	if got, want := completions(t, "tui", "t"), []string{"travel", "tutor"}; !slices.Equal(got, want) {
		t.Errorf("tui t<TAB> = %q, want %q", got, want)
	}
	if got := completions(t, "tui", "travel", ""); len(got) != 0 {
		t.Errorf("tui travel <TAB> = %q, want nothing (one agent only)", got)
	}
	if got := completions(t, "plugins", "remove", ""); len(got) != 0 {
		t.Errorf("plugins remove <TAB> without plugins = %q, want nothing", got)
	}
	other := filepath.Join(t.TempDir(), "other.json5")
	writeFile(t, other, `{ agents: { ops: {} }, plugins: { git: {}, telegram: {} } }`)
	if got, want := completions(t, "-c", other, "tui", ""), []string{"ops"}; !slices.Equal(got, want) {
		t.Errorf("-c other.json5 tui <TAB> = %q, want %q", got, want)
	}
	for _, cmd := range []string{"remove", "update"} {
		if got, want := completions(t, "-c", other, "plugins", cmd, ""), []string{"git", "telegram"}; !slices.Equal(got, want) {
			t.Errorf("plugins %s <TAB> = %q, want %q", cmd, got, want)
		}
	}
}

// TestCompleteSessions: a flag named --session completes the session keys
// of $BEIGE_HOME's session maps (the gateway's and the terminal's), only
// the --agent's when one is given; --agent completes agent names.
func TestCompleteSessions(t *testing.T) {
	h := withHome(t)
	writeFile(t, filepath.Join(h, "config.json5"), `{ agents: { travel: {}, assistant: {} } }`)
	writeFile(t, filepath.Join(h, "sessions", "session-map.json"), `{
  "telegram:42": {"agentName": "travel", "sessionFile": "travel/a.jsonl", "createdAt": "2026-01-01T00:00:00Z"},
  "api:assistant:default": {"agentName": "assistant", "sessionFile": "assistant/b.jsonl", "createdAt": "2026-01-01T00:00:00Z"}
}`)
	writeFile(t, filepath.Join(h, "sessions", "tui", "session-map.json"), `{
  "tui:travel:default": {"agentName": "travel", "sessionFile": "travel/c.jsonl", "createdAt": "2026-01-01T00:00:00Z"}
}`)
	writeFile(t, filepath.Join(h, "sessions", "broken", "session-map.json"), `{not json`)

	// No command takes --session yet; one that does gets the completion
	// by its flag's name.
	a := &app{}
	root := a.rootCommand()
	cmd := &cobra.Command{Use: "inspect", RunE: func(*cobra.Command, []string) error { return nil }}
	cmd.Flags().String("session", "", "")
	cmd.Flags().String("agent", "", "")
	root.AddCommand(cmd)
	a.registerCompletions(root)
	complete := func(args ...string) []string {
		var out bytes.Buffer
		root.SetArgs(append([]string{cobra.ShellCompRequestCmd}, args...))
		root.SetOut(&out)
		root.SetErr(&bytes.Buffer{})
		if err := root.Execute(); err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(strings.TrimSpace(out.String()), "\n")
		return lines[:len(lines)-1]
	}
	if got, want := complete("inspect", "--session", ""), []string{"api:assistant:default\tassistant", "telegram:42\ttravel", "tui:travel:default\ttravel"}; !slices.Equal(got, want) {
		t.Errorf("--session <TAB> = %q, want %q", got, want)
	}
	if got, want := complete("inspect", "--session", "t"), []string{"telegram:42\ttravel", "tui:travel:default\ttravel"}; !slices.Equal(got, want) {
		t.Errorf("--session t<TAB> = %q, want %q", got, want)
	}
	if got, want := complete("inspect", "--agent", "assistant", "--session", ""), []string{"api:assistant:default\tassistant"}; !slices.Equal(got, want) {
		t.Errorf("--agent assistant --session <TAB> = %q, want %q", got, want)
	}
	if got, want := complete("inspect", "--agent", ""), []string{"travel", "assistant"}; !slices.Equal(got, want) {
		t.Errorf("--agent <TAB> = %q, want %q", got, want)
	}
}
