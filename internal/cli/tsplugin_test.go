package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestValidateTypeScriptPluginWithoutNode: a config using a TypeScript
// plugin fails `beige config validate` when no Node.js 22 can be found,
// with a message naming the plugin and what to install.
func TestValidateTypeScriptPluginWithoutNode(t *testing.T) {
	home := withHome(t)
	plug := filepath.Join(home, "plugins", "greeter")
	os.MkdirAll(plug, 0o755)
	os.WriteFile(filepath.Join(plug, "plugin.json"), []byte(`{"name":"greeter","description":"d"}`), 0o644)
	os.WriteFile(filepath.Join(plug, "index.ts"), []byte(`export function createPlugin() { return { register() {} }; }`), 0o644)
	cfg := `{ llm: { providers: { anthropic: { apiKey: "k" } } },
  plugins: { greeter: { path: "plugins/greeter", node: "/nonexistent/bin/node" } },
  agents: { a: { model: { provider: "anthropic", model: "m" }, tools: ["greeter"] } } }`
	os.MkdirAll(home, 0o755)
	os.WriteFile(filepath.Join(home, "config.json5"), []byte(cfg), 0o600)
	code, _, errOut := run(t, "config", "validate")
	if code != ExitFailure || !strings.Contains(errOut, `plugins.greeter: plugin "greeter" is a TypeScript/JavaScript plugin and needs Node.js 22 or later`) ||
		!strings.Contains(errOut, "(install it, or set plugins.greeter.node to its path)") {
		t.Errorf("validate: %d %q", code, errOut)
	}
}
