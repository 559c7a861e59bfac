package plugin

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

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

// newPwdPlugin is an external plugin whose command prints the folder it
// runs in, and marks that folder with a file (what a real tool that writes
// output files would do).
func newPwdPlugin(t *testing.T) *external {
	t.Helper()
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "run"), []byte("#!/bin/sh\ntouch ./ran-here 2>/dev/null\npwd -P\n"), 0o755)
	e, err := newExternal("pwd", dir, &config.Manifest{Name: "pwd", Run: &config.RunSpec{Command: []string{"run"}}})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// swapFixture is a workspace with a folder sub that the agent can swap for
// a link to a host folder outside the workspace.
func swapFixture(t *testing.T) (ws, sub, outside string) {
	t.Helper()
	base, _ := filepath.EvalSymlinks(t.TempDir())
	ws, outside = filepath.Join(base, "ws"), filepath.Join(base, "outside")
	sub = filepath.Join(ws, "sub")
	for _, d := range []string{sub, outside} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return ws, sub, outside
}

// swap replaces the folder sub by a link to outside (moving the folder to
// sub.real), or back.
func swap(sub, outside string, toLink bool) {
	if toLink {
		os.Rename(sub, sub+".real")
		os.Symlink(outside, sub)
	} else {
		os.Remove(sub)
		os.Rename(sub+".real", sub)
	}
}

// TestExternalFolderSwappedForLink: the call's folder was resolved while it
// was a folder; before the command starts the agent replaces it with a link
// to a host folder. The command must not run there.
func TestExternalFolderSwappedForLink(t *testing.T) {
	needOpenBeneath(t)
	ws, sub, outside := swapFixture(t)
	e := newPwdPlugin(t)
	dir, root, err := ResolveDir(ws, "sub")
	if err != nil {
		t.Fatal(err)
	}
	swap(sub, outside, true) // the agent wins the race
	res, err := e.handle(context.Background(), &Call{Agent: "a", Tool: "pwd", Workspace: root, Dir: dir})
	if _, serr := os.Stat(filepath.Join(outside, "ran-here")); serr == nil {
		t.Fatalf("the plugin ran in the host folder %s (output %q)", outside, res.Output)
	}
	if err == nil || !errors.Is(err, ErrOutsideWorkspace) || res.ExitCode == 0 {
		t.Errorf("got %+v, %v; want a refusal: the folder is now a link", res, err)
	}

	// A folder that is what it was runs normally, in that folder.
	swap(sub, outside, false)
	res, err = e.handle(context.Background(), &Call{Agent: "a", Tool: "pwd", Workspace: root, Dir: dir})
	if err != nil || res.ExitCode != 0 || res.Output != dir+"\n" {
		t.Errorf("unswapped: %+v, %v; want pwd %s", res, err, dir)
	}
	// A link inside the workspace, resolved by ResolveDir, is fine.
	os.Symlink("sub", filepath.Join(ws, "inlink"))
	dir2, _, err := ResolveDir(ws, "inlink")
	if err != nil {
		t.Fatal(err)
	}
	res, err = e.handle(context.Background(), &Call{Agent: "a", Tool: "pwd", Workspace: root, Dir: dir2})
	if err != nil || res.Output != dir+"\n" {
		t.Errorf("through a link inside the workspace: %+v, %v; want pwd %s", res, err, dir)
	}
}

// TestExternalFolderMovedAfterOpen: once opened, the folder the command
// starts in is the one that was checked, even if its path changes before
// the program starts.
func TestExternalFolderMovedAfterOpen(t *testing.T) {
	needOpenBeneath(t)
	ws, sub, outside := swapFixture(t)
	f, err := OpenDir(ws, sub)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	swap(sub, outside, true)
	res, err := RunCommand(context.Background(), Command{Tool: "pwd", Path: "/bin/sh", Args: []string{"-c", "pwd -P"}, Dir: sub, DirFile: f})
	if err != nil || res.Output != sub+".real\n" {
		t.Errorf("got %+v, %v; want it to run in the opened folder (now %s.real)", res, err, sub)
	}
}

// TestExternalSwapRace races the swap against real calls through the Host,
// as an agent looping in its sandbox would: no call may run outside the
// workspace. Bounded in count and time.
func TestExternalSwapRace(t *testing.T) {
	needOpenBeneath(t)
	ws, sub, outside := swapFixture(t)
	pdir := t.TempDir()
	os.WriteFile(filepath.Join(pdir, "run"), []byte("#!/bin/sh\ntouch ./ran-here 2>/dev/null\npwd -P\n"), 0o755)
	os.WriteFile(filepath.Join(pdir, "plugin.json"), []byte(`{"name":"pwd","description":"pwd","run":{"command":["run"]}}`), 0o644)
	m, err := config.ReadManifest(pdir)
	if err != nil {
		t.Fatal(err)
	}
	cfg := &config.Config{
		Plugins: map[string]*config.Plugin{"pwd": {Path: pdir, Manifest: m}},
		Agents:  map[string]*config.Agent{"travel": {Tools: []string{"pwd"}, WorkspaceDir: ws}},
	}
	lg, _ := audit.Open(filepath.Join(t.TempDir(), "audit.jsonl"), nil)
	defer lg.Close()
	h, err := NewHost(cfg, &Options{Audit: lg, Builtins: map[string]Builtin{}})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close(context.Background())

	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; i < 100_000; i++ {
			select {
			case <-stop:
				return
			default:
			}
			// Mostly a folder (so that the call's folder resolves), now
			// and then a link for a moment.
			time.Sleep(time.Duration(i%7) * 50 * time.Microsecond)
			swap(sub, outside, true)
			time.Sleep(time.Duration(i%3) * 100 * time.Microsecond)
			swap(sub, outside, false)
		}
	}()
	deadline := time.Now().Add(3 * time.Second)
	ran := 0
	for i := 0; i < 40 && time.Now().Before(deadline); i++ {
		r := req("pwd")
		r.Cwd = "sub"
		resp := h.Handle(context.Background(), "travel", r)
		if resp.Success {
			ran++
			if !strings.HasPrefix(resp.Output, ws+"/") {
				t.Errorf("call %d ran outside the workspace: %q", i, resp.Output)
			}
		}
	}
	close(stop)
	<-done
	if _, err := os.Stat(filepath.Join(outside, "ran-here")); err == nil {
		t.Error("a call ran in the host folder")
	}
	t.Logf("%d of the calls ran, the others were refused", ran)
}

// BenchmarkExternalTrue is the per-call cost of an external tool running
// /bin/true (compare with the benchmark's "external plugin tool" figure).
func BenchmarkExternalTrue(b *testing.B) {
	ws, _ := filepath.EvalSymlinks(b.TempDir())
	os.MkdirAll(filepath.Join(ws, "a", "b"), 0o755)
	e, err := newExternal("t", b.TempDir(), &config.Manifest{Name: "t", Run: &config.RunSpec{Command: []string{"/bin/true"}}})
	if err != nil {
		b.Fatal(err)
	}
	call := &Call{Agent: "a", Tool: "t", Workspace: ws, Dir: filepath.Join(ws, "a", "b"), Config: map[string]any{}}
	for b.Loop() {
		if res, err := e.handle(context.Background(), call); err != nil || res.ExitCode != 0 {
			b.Fatal(res, err)
		}
	}
}
