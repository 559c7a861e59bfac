package plugin

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/beige-dev/beige/internal/audit"
	"github.com/beige-dev/beige/internal/config"
)

func TestExternalPlugin(t *testing.T) {
	dir := t.TempDir()
	pdir := filepath.Join(dir, "weather")
	os.MkdirAll(filepath.Join(pdir, "bin"), 0o755)
	script := `#!/bin/sh
case "$2" in
sleep) exec sleep 30 ;;
fail) echo "bad input" >&2; exit 4 ;;
esac
echo "args:$*"
echo "pwd:$(pwd)"
echo "stdin:$(cat)"
env | sort | grep -v '^PWD=' | grep -v '^SHLVL=' | grep -v '^_='
`
	os.WriteFile(filepath.Join(pdir, "bin", "run"), []byte(script), 0o755)
	manifest := `{"name":"weather","description":"Weather.","provides":{"tools":["weather","weather.alerts"]},
		"defaultConfig":{"units":"metric","api":{"host":"x"}},"run":{"command":["bin/run","--fixed"],"timeout":1}}`
	os.WriteFile(filepath.Join(pdir, "plugin.json"), []byte(manifest), 0o644)
	m, err := config.ReadManifest(pdir)
	if err != nil {
		t.Fatal(err)
	}
	ws := filepath.Join(dir, "ws")
	os.MkdirAll(filepath.Join(ws, "docs"), 0o755)
	cfg := &config.Config{
		Plugins: map[string]*config.Plugin{"weather": {Path: pdir, Manifest: m, Config: map[string]any{"api": map[string]any{"key": "k"}}}},
		Agents: map[string]*config.Agent{"travel": {Tools: []string{"weather", "weather.alerts"}, WorkspaceDir: ws,
			PluginConfigs: map[string]map[string]any{"weather": {"units": "imperial"}}}},
	}
	lg, _ := audit.Open(filepath.Join(dir, "audit.jsonl"), nil)
	defer lg.Close()
	t.Setenv("ANTHROPIC_API_KEY", "sk-ant-secret")
	h, err := NewHost(cfg, &Options{Audit: lg, Builtins: map[string]Builtin{}})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close(context.Background())

	r := req("weather.alerts", "paris", "it's")
	r.Cwd = "docs"
	resp := h.Handle(context.Background(), "travel", r)
	if !resp.Success {
		t.Fatalf("got %+v", resp)
	}
	out := resp.Output
	realWS, _ := filepath.EvalSymlinks(ws)
	for _, want := range []string{
		"args:--fixed paris it's\n",
		"pwd:" + filepath.Join(realWS, "docs") + "\n",
		"BEIGE_AGENT_NAME=travel\n", "BEIGE_SESSION_KEY=tui:travel:default\n", "BEIGE_CHANNEL=tui\n",
		"BEIGE_PLUGIN_DIR=" + pdir + "\n", "BEIGE_TOOL_NAME=weather.alerts\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "sk-ant-secret") || strings.Contains(out, "ANTHROPIC") {
		t.Errorf("the gateway's secret reached the plugin:\n%s", out)
	}
	stdinLine := out[strings.Index(out, "stdin:")+6:]
	stdinLine = stdinLine[:strings.IndexByte(stdinLine, '\n')]
	var gotCfg map[string]any
	if err := json.Unmarshal([]byte(stdinLine), &gotCfg); err != nil {
		t.Fatalf("stdin %q: %v", stdinLine, err)
	}
	if mustJSON(gotCfg) != `{"api":{"host":"x","key":"k"},"units":"imperial"}` {
		t.Errorf("config on stdin = %s", mustJSON(gotCfg))
	}

	resp = h.Handle(context.Background(), "travel", req("weather", "fail"))
	if resp.Success || resp.ExitCode != 4 || resp.Error != "bad input\n" {
		t.Errorf("fail: %+v", resp)
	}
	resp = h.Handle(context.Background(), "travel", req("weather", "sleep"))
	if resp.Success || resp.ExitCode != ExitTimeout || resp.Error != "tool 'weather' timed out after 1s" {
		t.Errorf("timeout: %+v", resp)
	}
	if pk := h.Packages("travel"); pk["weather"] != pdir {
		t.Errorf("Packages = %v", pk)
	}
}

func TestExternalCommandResolution(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "tool"), []byte("#!/bin/sh\n"), 0o755)
	os.WriteFile(filepath.Join(dir, "noexec"), []byte("#!/bin/sh\n"), 0o644)
	tests := []struct {
		cmd  []string
		want string // "" means an error
	}{
		{[]string{"tool"}, filepath.Join(dir, "tool")},
		{[]string{"./tool"}, filepath.Join(dir, "tool")},
		{[]string{"sh", "x.sh"}, "/"}, // from PATH: any absolute path
		{[]string{"/bin/sh"}, "/bin/sh"},
		{[]string{"noexec"}, ""},
		{[]string{"missing-program-xyz"}, ""},
		{[]string{"sub/missing"}, ""},
	}
	for _, tt := range tests {
		e, err := newExternal("p", dir, &config.Manifest{Name: "p", Run: &config.RunSpec{Command: tt.cmd}})
		switch {
		case tt.want == "" && err == nil:
			t.Errorf("%v: accepted as %s", tt.cmd, e.program)
		case tt.want != "" && err != nil:
			t.Errorf("%v: %v", tt.cmd, err)
		case tt.want != "" && !strings.HasPrefix(e.program, tt.want):
			t.Errorf("%v: program %s, want %s", tt.cmd, e.program, tt.want)
		}
	}
}
