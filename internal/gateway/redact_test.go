package gateway

import (
	"log/slog"
	"os"
	"strings"
	"testing"

	"github.com/beige-dev/beige/internal/testutil"
)

// An agent that gets hold of a configured key (here: a file in its
// workspace) and prints it gets "[redacted:<path>]" back through /exec,
// and neither audit.jsonl nor the gateway's log holds the key.
func TestConfiguredSecretsAreRedacted(t *testing.T) {
	const key = "sk-ant-api03-e2e-redaction-key"
	var logs testutil.SyncBuffer
	g := startGatewayWith(t, gatewaySetup{
		names:     []string{"redact"},
		providers: "anthropic: { apiKey: '" + key + "' }",
		options: func(o *Options) {
			o.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
		},
	})
	a := g.agents[0]
	g.putWorkspaceFile(t, a, "leak.txt", []byte(key+"\n"))
	const marker = "[redacted:llm.providers.anthropic.apiKey]"
	text, _ := g.tool(t, a, "exec", map[string]any{"command": "cat /workspace/leak.txt; echo " + key})
	if strings.Contains(text, key) || strings.Count(text, marker) != 2 {
		t.Errorf("/exec output: %q", text)
	}
	text, _ = g.tool(t, a, "read", map[string]any{"path": "leak.txt"})
	if strings.Contains(text, key) || !strings.Contains(text, marker) {
		t.Errorf("read output: %q", text)
	}
	g.log.Warn("provider refused key "+key, "key", key)
	audit, err := os.ReadFile(g.home.AuditLog())
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(audit), key) || !strings.Contains(string(audit), marker) {
		t.Errorf("audit.jsonl:\n%s", audit)
	}
	if l := logs.String(); strings.Contains(l, key) || !strings.Contains(l, marker) {
		t.Errorf("gateway log:\n%s", l)
	}
}
