package plugin

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/beige-dev/beige/internal/audit"
	"github.com/beige-dev/beige/internal/config"
	"github.com/beige-dev/beige/internal/redact"
)

// A plugin tool's output, stderr and error reach the agent redacted, as a
// core tool's result does.
func TestHandleRedactsResults(t *testing.T) {
	const secret = "ghp_PluginLeak0123456789"
	red := redact.New([]redact.Secret{{Name: "plugins.gh.config.token", Value: secret}})
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "ws"), 0o755); err != nil {
		t.Fatal(err)
	}
	rec := &recorder{}
	leak := func(r *Registrar) error {
		return r.Tool(Tool{Name: "echo.leak", Description: "Leak things.", Handler: func(ctx context.Context, call *Call) (Result, error) {
			return Result{Output: "token=" + secret, Stderr: "stderr " + secret}, errors.New("failed with " + secret)
		}})
	}
	cfg := &config.Config{
		Plugins:     map[string]*config.Plugin{"echo": {}},
		PluginOrder: []string{"echo"},
		Agents:      map[string]*config.Agent{"travel": {Tools: []string{"echo", "echo.leak"}, WorkspaceDir: filepath.Join(dir, "ws")}},
		AgentOrder:  []string{"travel"},
	}
	lg, err := audit.Open(filepath.Join(dir, "audit.jsonl"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer lg.Close()
	h, err := NewHost(cfg, &Options{Audit: lg, Redact: red.String, Builtins: map[string]Builtin{"echo": echoBuiltin("echo", rec, leak)}})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close(context.Background())
	const mark = "[redacted:plugins.gh.config.token]"
	for _, tc := range []struct {
		tool, arg, output, errText string
	}{
		{"echo", secret, "echo: " + mark, ""},
		{"echo.leak", "", "token=" + mark, "stderr " + mark + "\nfailed with " + mark},
	} {
		resp := h.Handle(context.Background(), "travel", req(tc.tool, tc.arg))
		if resp.Output != tc.output || resp.Error != tc.errText || strings.Contains(resp.Output+resp.Error, secret) {
			t.Errorf("%s: output %q error %q, want %q and %q", tc.tool, resp.Output, resp.Error, tc.output, tc.errText)
		}
	}
}
