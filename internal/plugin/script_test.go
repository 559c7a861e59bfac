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
	"github.com/beige-dev/beige/internal/home"
)

type startRecorder struct {
	RegisterFunc
	name string
	rec  *recorder
}

func (s startRecorder) Start(ctx context.Context, pc PluginContext) error {
	s.rec.add("start %s", s.name)
	return nil
}

func (s startRecorder) Stop(ctx context.Context) error { s.rec.add("stop %s", s.name); return nil }

// TestScriptFolders: one manifest format. A folder with a run command is
// external; one whose plugin.json names a built-in is that built-in even
// when it ships an index.ts (the toolkit's telegram); any other folder with
// index.ts or index.js goes to the script loader, which gets the plugin's
// node, data folder and the agents, and whose plugin is started in config
// order and stopped in reverse.
func TestScriptFolders(t *testing.T) {
	dir := t.TempDir()
	mk := func(name, manifest string, files ...string) string {
		d := filepath.Join(dir, name)
		os.MkdirAll(d, 0o755)
		os.WriteFile(filepath.Join(d, "plugin.json"), []byte(manifest), 0o644)
		for _, f := range files {
			os.WriteFile(filepath.Join(d, f), []byte("export function createPlugin() {}"), 0o644)
		}
		return d
	}
	tsA := mk("a", `{"name":"a","description":""}`, "index.ts")
	jsB := mk("b", `{"name":"b","description":""}`, "index.js")
	tg := mk("telegram", `{"name":"echo","description":"","provides":{"tools":["echo"]}}`, "index.ts")
	rec := &recorder{}
	var envs []Env
	old := scriptLoader
	t.Cleanup(func() { SetScriptLoader(old) })
	SetScriptLoader(func(env Env) (Plugin, error) {
		envs = append(envs, env)
		return startRecorder{name: env.Name, rec: rec, RegisterFunc: func(r *Registrar) error { return nil }}, nil
	})
	cfg := &config.Config{
		Plugins: map[string]*config.Plugin{
			"a": {Path: tsA, Node: "/opt/node"}, "b": {Path: jsB}, "telegram": {Path: tg},
		},
		PluginOrder: []string{"a", "b", "telegram"},
		Agents:      map[string]*config.Agent{"x": {WorkspaceDir: dir}},
		AgentOrder:  []string{"x"},
	}
	lg, _ := audit.Open(filepath.Join(dir, "audit.jsonl"), nil)
	defer lg.Close()
	hm := home.Home{Dir: filepath.Join(dir, "home")}
	h, err := NewHost(cfg, &Options{Home: hm, Audit: lg, Builtins: map[string]Builtin{"echo": echoBuiltin("echo", rec, nil)}})
	if err != nil {
		t.Fatal(err)
	}
	if len(envs) != 2 || envs[0].Name != "a" || envs[1].Name != "b" {
		t.Fatalf("script loader got %+v", envs)
	}
	if envs[0].Node != "/opt/node" || envs[0].DataDir != filepath.Join(hm.DataDir(), "a") || envs[0].Dir != tsA || len(envs[0].Agents) != 1 {
		t.Errorf("env a: %+v", envs[0])
	}
	if err := h.Start(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	h.Close(context.Background())
	if got := strings.Join(rec.list(), ", "); got != "new echo, start a, start b, stop echo, stop b, stop a" {
		t.Errorf("lifecycle: %s", got)
	}

	SetScriptLoader(nil)
	_, err = NewHost(&config.Config{Plugins: map[string]*config.Plugin{"a": {Path: tsA}}}, &Options{Home: hm, Audit: lg, Builtins: map[string]Builtin{}})
	if err == nil || !strings.Contains(err.Error(), "plugin a: "+tsA+" is a TypeScript/JavaScript plugin and this beige cannot run them") {
		t.Errorf("without a loader: %v", err)
	}
	none := mk("none", `{"name":"none","description":""}`)
	_, err = NewHost(&config.Config{Plugins: map[string]*config.Plugin{"none": {Path: none}}}, &Options{Home: hm, Audit: lg, Builtins: map[string]Builtin{}})
	if err == nil || !strings.Contains(err.Error(), "no run command, no index.ts or index.js, and no plugin \"none\" is built into beige") {
		t.Errorf("empty folder: %v", err)
	}
}

// TestScriptEgressSocket: Options.EgressSocket is asked once for each
// TypeScript/JavaScript plugin, with its config, and its answer reaches
// the plugin as Env.EgressSocket; built-in plugins are not asked (the
// egress proxy serves script plugins only); an error fails the start,
// naming the plugin.
func TestScriptEgressSocket(t *testing.T) {
	dir := t.TempDir()
	ts := filepath.Join(dir, "ts")
	os.MkdirAll(ts, 0o755)
	os.WriteFile(filepath.Join(ts, "plugin.json"), []byte(`{"name":"ts","description":""}`), 0o644)
	os.WriteFile(filepath.Join(ts, "index.ts"), []byte("export function createPlugin() {}"), 0o644)
	rec := &recorder{}
	var envs []Env
	old := scriptLoader
	t.Cleanup(func() { SetScriptLoader(old) })
	SetScriptLoader(func(env Env) (Plugin, error) {
		envs = append(envs, env)
		return startRecorder{name: env.Name, rec: rec, RegisterFunc: func(r *Registrar) error { return nil }}, nil
	})
	pcTS := &config.Plugin{Path: ts, Egress: config.Egress{Allow: []string{"x.org"}}}
	cfg := &config.Config{
		Plugins:     map[string]*config.Plugin{"ts": pcTS, "echo": {}},
		PluginOrder: []string{"ts", "echo"},
	}
	lg, _ := audit.Open(filepath.Join(dir, "audit.jsonl"), nil)
	defer lg.Close()
	hm := home.Home{Dir: filepath.Join(dir, "home")}
	var asked []string
	opts := &Options{Home: hm, Audit: lg, Builtins: map[string]Builtin{"echo": echoBuiltin("echo", rec, nil)},
		EgressSocket: func(name string, pc *config.Plugin) (string, error) {
			asked = append(asked, name)
			if pc != pcTS {
				t.Errorf("EgressSocket(%q) got config %+v", name, pc)
			}
			return "/h/sockets/_plugins/" + name + "/egress.sock", nil
		}}
	h, err := NewHost(cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	h.Close(context.Background())
	if len(asked) != 1 || asked[0] != "ts" {
		t.Errorf("EgressSocket asked for %q; want only the script plugin ts", asked)
	}
	if len(envs) != 1 || envs[0].EgressSocket != "/h/sockets/_plugins/ts/egress.sock" {
		t.Errorf("script plugin env: %+v", envs)
	}

	opts.EgressSocket = func(string, *config.Plugin) (string, error) {
		return "", errors.New("socket folder is writable by others")
	}
	if _, err := NewHost(cfg, opts); err == nil || !strings.Contains(err.Error(), "plugin ts: egress: socket folder is writable by others") {
		t.Errorf("a failing EgressSocket: %v", err)
	}
}
