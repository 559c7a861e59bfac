package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestValidateWarnsAboutAllowlistUsernames: `config validate` accepts a
// Telegram allowlist with an @username, saying that it can change hands.
func TestValidateWarnsAboutAllowlistUsernames(t *testing.T) {
	withHome(t)
	p := filepath.Join(t.TempDir(), "c.json5")
	os.WriteFile(p, []byte(`{
  llm: { providers: { anthropic: { apiKey: "k" } } },
  agents: { main: { model: { provider: "anthropic", model: "x" }, sandbox: { image: "img" } } },
  plugins: { telegram: { config: { token: "1:abcdefgh", allowedUsers: [42, "@Alice_x"], agentMapping: { default: "main" } } } },
}`), 0o600)
	code, out, errOut := run(t, "config", "validate", "-c", p)
	if code != 0 || out != "OK\n" {
		t.Fatalf("%d %q %q", code, out, errOut)
	}
	if !strings.Contains(errOut, `warning: plugins.telegram.config.allowedUsers: "@alice_x" is a username, which can change hands`) {
		t.Errorf("stderr %q lacks the warning", errOut)
	}
	os.WriteFile(p, []byte(`{
  llm: { providers: { anthropic: { apiKey: "k" } } },
  agents: { main: { model: { provider: "anthropic", model: "x" }, sandbox: { image: "img" } } },
  plugins: { telegram: { config: { token: "1:abcdefgh", allowedUsers: [42], agentMapping: { default: "main" } } } },
}`), 0o600)
	if code, out, errOut := run(t, "config", "validate", "-c", p); code != 0 || out != "OK\n" || errOut != "" {
		t.Errorf("numeric ids: %d %q %q", code, out, errOut)
	}
}

// TestValidatePluginConfig: `config validate` checks a built-in plugin's
// config against its manifest's configSchema, with the position and a
// did-you-mean, as for the core config; `gateway start` loads the config
// the same way, so it refuses the same file before starting anything.
func TestValidatePluginConfig(t *testing.T) {
	withHome(t)
	p := filepath.Join(t.TempDir(), "c.json5")
	os.WriteFile(p, []byte(`{
  llm: { providers: { anthropic: { apiKey: "k" } } },
  agents: { main: { model: { provider: "anthropic", model: "x" }, sandbox: { image: "img" } } },
  plugins: { telegram: { config: { token: "1:abcdefgh", allowedUsers: [42], agentMapping: { default: "main" },
    defualts: { verbose: true } } } },
}`), 0o600)
	want := p + `:5:5: plugins.telegram.config.defualts: unknown key "defualts" (did you mean "defaults"?)`
	for _, args := range [][]string{{"config", "validate", "-c", p}, {"gateway", "start", "--foreground", "-c", p}} {
		code, out, errOut := run(t, args...)
		lines := strings.Split(strings.TrimSpace(errOut), "\n") // after the first run's note
		if code != ExitFailure || out != "" || lines[len(lines)-1] != want || strings.Count(errOut, "c.json5:") != 1 {
			t.Errorf("%v: %d %q %q, want exit %d and %q", args, code, out, errOut, ExitFailure, want)
		}
	}
}
