package plugin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/fstest"

	"github.com/beige-dev/beige/internal/audit"
	"github.com/beige-dev/beige/internal/config"
	"github.com/beige-dev/beige/internal/home"
	"github.com/beige-dev/beige/internal/proto"
)

// fakeDocs returns plugin docs for a built-in called name.
func fakeDocs(name, extra string) fstest.MapFS {
	return fstest.MapFS{
		"plugin.json": {Data: []byte(fmt.Sprintf(`{"name":%q,"description":"The %s tool.","commands":["run","list"],"provides":{"tools":[%q]}%s}`, name, name, name, extra))},
		"README.md":   {Data: []byte("# " + name + "\n")},
		"SKILL.md":    {Data: []byte("Use " + name + ".\n")},
	}
}

// recorder collects what the fake plugins saw, in order.
type recorder struct {
	mu     sync.Mutex
	events []string
	calls  []*Call
}

func (r *recorder) add(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, fmt.Sprintf(format, args...))
}

func (r *recorder) list() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.events)
}

type stopper struct {
	RegisterFunc
	name string
	rec  *recorder
}

func (s stopper) Stop(ctx context.Context) error { s.rec.add("stop %s", s.name); return nil }

// echoBuiltin is a built-in plugin whose tool prints its call as JSON.
func echoBuiltin(name string, rec *recorder, extra func(r *Registrar) error) Builtin {
	return Builtin{
		Name: name,
		Docs: fakeDocs(name, `,"defaultConfig":{"level":1,"nested":{"a":"default","b":"default"},"list":["d"]}`),
		New: func(env Env) (Plugin, error) {
			rec.add("new %s", name)
			return stopper{name: name, rec: rec, RegisterFunc: func(r *Registrar) error {
				err := r.Tool(Tool{Name: name, Description: "Echo things.", Handler: func(ctx context.Context, call *Call) (Result, error) {
					rec.add("run %s %s", call.Tool, strings.Join(call.Args, " "))
					rec.mu.Lock()
					rec.calls = append(rec.calls, call)
					rec.mu.Unlock()
					switch {
					case len(call.Args) > 0 && call.Args[0] == "fail":
						return Result{Output: "half", Stderr: "it broke", ExitCode: 3}, nil
					case len(call.Args) > 0 && call.Args[0] == "error":
						return Result{Stderr: "some stderr"}, errors.New("tool 'echo' timed out after 5s")
					case len(call.Args) > 0 && call.Args[0] == "panic":
						panic("boom")
					}
					return Result{Output: "echo: " + strings.Join(call.Args, " ")}, nil
				}})
				if err != nil || extra == nil {
					return err
				}
				return extra(r)
			}}, nil
		},
	}
}

type fixture struct {
	host   *Host
	rec    *recorder
	audit  string
	ws     string
	logger *audit.Logger
}

func newFixture(t *testing.T, mutate func(cfg *config.Config, bs map[string]Builtin)) *fixture {
	t.Helper()
	dir := t.TempDir()
	f := &fixture{rec: &recorder{}, audit: filepath.Join(dir, "audit.jsonl"), ws: filepath.Join(dir, "ws", "travel")}
	os.MkdirAll(filepath.Join(f.ws, "sub"), 0o755)
	os.MkdirAll(filepath.Join(dir, "outside"), 0o755)
	os.Symlink(filepath.Join(dir, "outside"), filepath.Join(f.ws, "escape"))
	skillDir := filepath.Join(dir, "skills", "trips")
	os.MkdirAll(skillDir, 0o755)

	cfg := &config.Config{
		Plugins: map[string]*config.Plugin{
			"echo": {Config: map[string]any{"level": 2.0, "nested": map[string]any{"b": "plugin"}}},
			"hook": {},
		},
		PluginOrder: []string{"echo", "hook"},
		Skills: map[string]*config.Skill{
			"trips": {Path: skillDir, Manifest: &config.SkillManifest{Name: "trips", Description: "Plan trips.", ContextFile: "GUIDE.md"}},
		},
		Agents: map[string]*config.Agent{
			"travel": {Tools: []string{"echo", "exec"}, Skills: []string{"trips"}, WorkspaceDir: f.ws,
				PluginConfigs: map[string]map[string]any{"echo": {"nested": map[string]any{"a": "agent"}, "list": []any{"x", "y"}}}},
			"other": {Tools: []string{}, WorkspaceDir: filepath.Join(dir, "ws", "other")},
		},
		AgentOrder: []string{"travel", "other"},
	}
	cfg.Skills["trips"].Manifest.Requires.Tools = []string{"echo"}
	bs := map[string]Builtin{
		"echo": echoBuiltin("echo", f.rec, nil),
		"hook": {
			Name: "hook", Docs: fakeDocs("hook", ""),
			New: func(env Env) (Plugin, error) {
				f.rec.add("new hook")
				return stopper{name: "hook", rec: f.rec, RegisterFunc: func(r *Registrar) error {
					if err := r.Hook(HookPreToolExec, func(ctx context.Context, ev *PreToolExecEvent) error {
						f.rec.add("pre %s %s %s", ev.Agent, ev.Tool, strings.Join(ev.Args, " "))
						if slices.Contains(ev.Args, "forbidden") {
							return errors.New("arguments look dangerous")
						}
						return nil
					}); err != nil {
						return err
					}
					return r.Hook(HookPostToolExec, PostToolExecHook(func(ctx context.Context, ev *PostToolExecEvent) error {
						f.rec.add("post %s exit=%d err=%v", ev.Tool, ev.Result.ExitCode, ev.Err)
						return errors.New("post hooks' errors are only logged")
					}))
				}}, nil
			},
		},
	}
	if mutate != nil {
		mutate(cfg, bs)
	}
	lg, err := audit.Open(f.audit, nil)
	if err != nil {
		t.Fatal(err)
	}
	f.logger = lg
	t.Cleanup(func() { lg.Close() })
	h, err := NewHost(cfg, &Options{Home: home.Home{Dir: filepath.Join(dir, "home")}, Audit: lg, Builtins: bs})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close(context.Background()) })
	f.host = h
	return f
}

func (f *fixture) records(t *testing.T) []audit.Record {
	t.Helper()
	recs, err := audit.ReadFile(f.audit)
	if err != nil {
		t.Fatal(err)
	}
	return recs
}

func req(tool string, args ...string) proto.ToolRequest {
	return proto.ToolRequest{Type: proto.ToolRequestType, Tool: tool, Args: args,
		SessionContext: &proto.SessionContext{SessionKey: "tui:travel:default", Channel: "tui", AgentName: "admin"}}
}

func TestHandlePolicy(t *testing.T) {
	f := newFixture(t, nil)
	tests := []struct {
		agent, tool string
		success     bool
		exit        int
		errText     string
		records     []string // phase/decision of the audit lines written
	}{
		{"travel", "echo", true, 0, "", []string{"started/allowed", "finished/allowed"}},
		{"other", "echo", false, 1, "Permission denied: tool 'echo' not allowed for agent 'other'", []string{"finished/denied"}},
		{"nobody", "echo", false, 1, "Permission denied: tool 'echo' not allowed for agent 'nobody'", []string{"finished/denied"}},
		{"travel", "hook", false, 1, "Permission denied: tool 'hook' not allowed for agent 'travel'", []string{"finished/denied"}},
		{"travel", "git", false, 1, "Permission denied: tool 'git' not allowed for agent 'travel'", []string{"finished/denied"}},
		{"travel", "exec", false, 127, "beige: no tool 'exec' on the gateway", []string{"started/allowed", "finished/allowed"}},
	}
	for _, tt := range tests {
		before := len(f.records(t))
		resp := f.host.Handle(context.Background(), tt.agent, req(tt.tool, "hi"))
		if resp.Success != tt.success || resp.ExitCode != tt.exit || resp.Error != tt.errText {
			t.Errorf("%s/%s: got %+v, want success=%v exit=%d error=%q", tt.agent, tt.tool, resp, tt.success, tt.exit, tt.errText)
		}
		recs := f.records(t)[before:]
		var got []string
		for _, r := range recs {
			got = append(got, r.Phase+"/"+r.Decision)
			if r.Agent != tt.agent || r.Tool != tt.tool || r.Type != "tool" || r.Target != "gateway" ||
				string(r.Args) != `["hi"]` || r.Session != "tui:travel:default" || r.Channel != "tui" {
				t.Errorf("%s/%s: audit record %+v", tt.agent, tt.tool, r)
			}
		}
		if !slices.Equal(got, tt.records) {
			t.Errorf("%s/%s: audit lines %v, want %v", tt.agent, tt.tool, got, tt.records)
		}
		last := recs[len(recs)-1]
		if last.DurationMs == nil || last.ExitCode == nil || *last.ExitCode != tt.exit {
			t.Errorf("%s/%s: finished record %+v", tt.agent, tt.tool, last)
		}
		if tt.errText != "" && last.Error != tt.errText {
			t.Errorf("%s/%s: audit error %q", tt.agent, tt.tool, last.Error)
		}
	}
}

func TestHandleCall(t *testing.T) {
	f := newFixture(t, nil)
	r := req("echo", "a", "b c")
	r.Cwd = "sub"
	resp := f.host.Handle(context.Background(), "travel", r)
	if !resp.Success || resp.Output != "echo: a b c" || resp.ExitCode != 0 || resp.Error != "" {
		t.Fatalf("got %+v", resp)
	}
	call := f.rec.calls[0]
	realWS, _ := filepath.EvalSymlinks(f.ws)
	if call.Agent != "travel" || call.Session.AgentName != "travel" || call.Workspace != realWS || call.Dir != filepath.Join(realWS, "sub") {
		t.Errorf("call = %+v", call)
	}
	wantCfg := map[string]any{"level": 2.0, "nested": map[string]any{"a": "agent", "b": "plugin"}, "list": []any{"x", "y"}}
	if b1, b2 := mustJSON(call.Config), mustJSON(wantCfg); b1 != b2 {
		t.Errorf("merged config = %s, want %s", b1, b2)
	}
	recs := f.records(t)
	fin := recs[len(recs)-1]
	if *fin.OutputBytes != int64(len("echo: a b c")) || *fin.ExitCode != 0 || fin.Error != "" {
		t.Errorf("finished record %+v", fin)
	}
	if got := f.rec.list(); !slices.Equal(got[len(got)-3:], []string{"pre travel echo a b c", "run echo a b c", "post echo exit=0 err=<nil>"}) {
		t.Errorf("events %v", got)
	}

	// Failing tool, tool error, panicking tool.
	resp = f.host.Handle(context.Background(), "travel", req("echo", "fail"))
	if resp.Success || resp.ExitCode != 3 || resp.Output != "half" || resp.Error != "it broke" {
		t.Errorf("fail: %+v", resp)
	}
	resp = f.host.Handle(context.Background(), "travel", req("echo", "error"))
	if resp.Success || resp.ExitCode != 1 || resp.Error != "some stderr\ntool 'echo' timed out after 5s" {
		t.Errorf("error: %+v", resp)
	}
	if rec := f.records(t); rec[len(rec)-1].Error != "tool 'echo' timed out after 5s" {
		t.Errorf("audit error = %q", rec[len(rec)-1].Error)
	}
	resp = f.host.Handle(context.Background(), "travel", req("echo", "panic"))
	if resp.Success || resp.ExitCode != 1 || !strings.Contains(resp.Error, "internal error") {
		t.Errorf("panic: %+v", resp)
	}

	// Working folders outside the workspace.
	for _, cwd := range []string{"../other", "escape", "/etc", "missing"} {
		r := req("echo", "x")
		r.Cwd = cwd
		n := len(f.rec.list())
		resp := f.host.Handle(context.Background(), "travel", r)
		if resp.Success || resp.ExitCode != 1 || !strings.Contains(resp.Error, "cwd") {
			t.Errorf("cwd %q: %+v", cwd, resp)
		}
		// The hooks see the call (they run before every tool); the tool
		// does not run.
		if slices.ContainsFunc(f.rec.list()[n:], func(e string) bool { return strings.HasPrefix(e, "run ") }) {
			t.Errorf("cwd %q: the tool ran: %v", cwd, f.rec.list()[n:])
		}
	}
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func TestHandleHookDenies(t *testing.T) {
	f := newFixture(t, nil)
	resp := f.host.Handle(context.Background(), "travel", req("echo", "forbidden"))
	want := "Permission denied: tool 'echo' blocked for agent 'travel': arguments look dangerous"
	if resp.Success || resp.ExitCode != 1 || resp.Error != want {
		t.Errorf("got %+v", resp)
	}
	if slices.ContainsFunc(f.rec.list(), func(e string) bool { return strings.HasPrefix(e, "run ") }) {
		t.Error("the tool ran although a hook denied it")
	}
	recs := f.records(t)
	if len(recs) != 2 || recs[1].Decision != "denied" || recs[1].Phase != "finished" || recs[1].Error != want {
		t.Errorf("audit: %+v", recs)
	}
}

func TestHandleRefusesWithoutAudit(t *testing.T) {
	f := newFixture(t, nil)
	f.logger.Close()
	resp := f.host.Handle(context.Background(), "travel", req("echo", "x"))
	if resp.Success || !strings.Contains(resp.Error, "audit log") {
		t.Errorf("got %+v", resp)
	}
	if len(f.rec.calls) != 0 {
		t.Error("tool ran without an audit record")
	}
}

func TestHostContext(t *testing.T) {
	f := newFixture(t, nil)
	h := f.host
	if got := h.Tools("travel"); !slices.Equal(got, []string{"echo"}) {
		t.Errorf("Tools = %v", got)
	}
	if got := h.Tools("other"); len(got) != 0 {
		t.Errorf("Tools(other) = %v", got)
	}
	tc := h.ToolContext("travel")
	for _, want := range []string{"## Available Tools\n", "### echo\nEcho things.\n", "Usage: echo <command> [args...]; commands: run, list\n", "Docs: /tools/packages/echo/README.md"} {
		if !strings.Contains(tc, want) {
			t.Errorf("ToolContext lacks %q:\n%s", want, tc)
		}
	}
	if h.ToolContext("other") != "" || h.SkillContext("other") != "" {
		t.Error("context for an agent without tools or skills")
	}
	sc := h.SkillContext("travel")
	if want := "## Available Skills\n\n### trips\nPlan trips.\nPath: /skills/trips/ (start with GUIDE.md)\n"; sc != want {
		t.Errorf("SkillContext =\n%q\nwant\n%q", sc, want)
	}
	pk := h.Packages("travel")
	if len(pk) != 1 || !strings.HasSuffix(pk["echo"], filepath.Join("home", "tools", "echo")) {
		t.Errorf("Packages = %v", pk)
	}
	for _, name := range DocFiles {
		if _, err := os.Stat(filepath.Join(pk["echo"], name)); err != nil {
			t.Errorf("docs of the built-in not written: %v", err)
		}
	}
	if sk := h.Skills("travel"); len(sk) != 1 || !strings.HasSuffix(sk["trips"], filepath.Join("skills", "trips")) {
		t.Errorf("Skills = %v", sk)
	}
}

func TestHostCloseOrder(t *testing.T) {
	f := newFixture(t, nil)
	if err := f.host.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	ev := f.rec.list()
	if !slices.Equal(ev, []string{"new echo", "new hook", "stop hook", "stop echo"}) {
		t.Errorf("events %v", ev)
	}
}

func TestNewHostErrors(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(cfg *config.Config, bs map[string]Builtin)
		want   []string
	}{
		{"unknown tool", func(cfg *config.Config, bs map[string]Builtin) {
			cfg.Agents["other"].Tools = []string{"browser"}
		}, []string{`agent other: tool "browser" is not provided by any configured plugin`}},
		{"not built in", func(cfg *config.Config, bs map[string]Builtin) {
			cfg.Plugins["nope"] = &config.Plugin{}
		}, []string{"plugin nope: no path given and no such plugin is built into beige"}},
		{"tool name not the plugin's", func(cfg *config.Config, bs map[string]Builtin) {
			b := bs["hook"]
			inner := b.New
			b.New = func(env Env) (Plugin, error) {
				p, _ := inner(env)
				return RegisterFunc(func(r *Registrar) error {
					if err := p.Register(r); err != nil {
						return err
					}
					return r.Tool(Tool{Name: "echo2", Handler: func(context.Context, *Call) (Result, error) { return Result{}, nil }})
				}), nil
			}
			bs["hook"] = b
		}, []string{`plugin hook: tool "echo2" must be named "hook" or "hook.<name>"`}},
		{"tool taken", func(cfg *config.Config, bs map[string]Builtin) {
			b := bs["hook"]
			b.Docs = fakeDocs("hook", "")
			b.Docs.(fstest.MapFS)["plugin.json"] = &fstest.MapFile{Data: []byte(`{"name":"hook","provides":{"tools":["echo"]}}`)}
			b.New = func(env Env) (Plugin, error) {
				return RegisterFunc(func(r *Registrar) error {
					return r.Tool(Tool{Name: "echo", Handler: func(context.Context, *Call) (Result, error) { return Result{}, nil }})
				}), nil
			}
			bs["hook"] = b
		}, []string{`tool "echo" is already provided by plugin echo`}},
		{"bad hook", func(cfg *config.Config, bs map[string]Builtin) {
			b := bs["hook"]
			b.New = func(env Env) (Plugin, error) {
				return RegisterFunc(func(r *Registrar) error {
					return r.Hook(HookPreToolExec, func(ctx context.Context, ev *PostToolExecEvent) error { return nil })
				}), nil
			}
			bs["hook"] = b
		}, []string{"hook preToolExec: want a func(context.Context, *PreToolExecEvent) error"}},
		{"skill requirements", func(cfg *config.Config, bs map[string]Builtin) {
			cfg.Agents["other"].Skills = []string{"trips"}
			cfg.Skills["trips"].Manifest.Requires.Skills = []string{"maps"}
		}, []string{`agent other: skill "trips" requires tool "echo"`, `agent other: skill "trips" requires skill "maps"`, `agent travel: skill "trips" requires skill "maps"`}},
		{"New fails", func(cfg *config.Config, bs map[string]Builtin) {
			b := bs["hook"]
			b.New = func(env Env) (Plugin, error) { return nil, errors.New("no token") }
			bs["hook"] = b
		}, []string{"plugin hook: no token"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			rec := &recorder{}
			ws := filepath.Join(dir, "ws")
			cfg := &config.Config{
				Plugins:     map[string]*config.Plugin{"echo": {}, "hook": {}},
				PluginOrder: []string{"echo", "hook"},
				Skills:      map[string]*config.Skill{"trips": {Path: dir, Manifest: &config.SkillManifest{Name: "trips"}}},
				Agents: map[string]*config.Agent{
					"travel": {Tools: []string{"echo"}, Skills: []string{"trips"}, WorkspaceDir: ws},
					"other":  {WorkspaceDir: ws},
				},
				AgentOrder: []string{"travel", "other"},
			}
			cfg.Skills["trips"].Manifest.Requires.Tools = []string{"echo"}
			bs := map[string]Builtin{
				"echo": echoBuiltin("echo", rec, nil),
				"hook": {Name: "hook", Docs: fakeDocs("hook", ""), New: func(env Env) (Plugin, error) {
					return RegisterFunc(func(r *Registrar) error { return nil }), nil
				}},
			}
			tt.mutate(cfg, bs)
			lg, _ := audit.Open(filepath.Join(dir, "audit.jsonl"), nil)
			defer lg.Close()
			h, err := NewHost(cfg, &Options{Audit: lg, Builtins: bs})
			if err == nil {
				h.Close(context.Background())
				t.Fatal("NewHost succeeded")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
			// A plugin created before the failure was stopped.
			if ev := rec.list(); slices.Contains(ev, "new echo") && !slices.Contains(ev, "stop echo") {
				t.Errorf("echo not stopped after a failed load: %v", ev)
			}
		})
	}
}

func TestRunHooks(t *testing.T) {
	var order []string
	mk := func(name string) Builtin {
		return Builtin{Name: name, Docs: fakeDocs(name, ""), New: func(env Env) (Plugin, error) {
			return RegisterFunc(func(r *Registrar) error {
				r.Hook(HookPrePrompt, func(ctx context.Context, ev *PrePromptEvent) error {
					order = append(order, name)
					ev.Prompt += "+" + name
					if name == "b" && strings.Contains(ev.Prompt, "stop") {
						return errors.New("stopped")
					}
					return nil
				})
				r.Hook(HookGatewayStarted, func(ctx context.Context, ev *GatewayStartedEvent) error {
					return fmt.Errorf("%s failed", name)
				})
				return nil
			}), nil
		}}
	}
	dir := t.TempDir()
	lg, _ := audit.Open(filepath.Join(dir, "a.jsonl"), nil)
	defer lg.Close()
	cfg := &config.Config{
		Plugins:     map[string]*config.Plugin{"a": {}, "b": {}, "c": {}},
		PluginOrder: []string{"c", "a", "b"},
	}
	h, err := NewHost(cfg, &Options{Audit: lg, Builtins: map[string]Builtin{"a": mk("a"), "b": mk("b"), "c": mk("c")}})
	if err != nil {
		t.Fatal(err)
	}
	ev := &PrePromptEvent{Prompt: "hi"}
	if err := h.RunPrePrompt(context.Background(), ev); err != nil || ev.Prompt != "hi+c+a+b" {
		t.Errorf("prompt %q, %v", ev.Prompt, err)
	}
	order = nil
	ev = &PrePromptEvent{Prompt: "stop"}
	err = h.RunPrePrompt(context.Background(), ev)
	var he *HookError
	if !errors.As(err, &he) || he.Plugin != "b" || !slices.Equal(order, []string{"c", "a", "b"}) {
		t.Errorf("err %v, order %v", err, order)
	}
	err = h.RunGatewayStarted(context.Background(), &GatewayStartedEvent{})
	if err == nil || !strings.Contains(err.Error(), "c: c failed") || !strings.Contains(err.Error(), "b: b failed") {
		t.Errorf("joined errors: %v", err)
	}
}

// TestOriginalChannelManifest: a plugin folder the original Beige's
// `plugins install` left, whose plugin.json declares its channel as
// `"channel": true`, loads as the built-in of its name.
func TestOriginalChannelManifest(t *testing.T) {
	dir := t.TempDir()
	pdir := filepath.Join(dir, "plugins", "echo")
	if err := os.MkdirAll(pdir, 0o755); err != nil {
		t.Fatal(err)
	}
	manifest := `{"name": "echo", "description": "a channel", "provides": {"channel": true, "tools": ["echo"]}, "defaultConfig": {}}`
	if err := os.WriteFile(filepath.Join(pdir, "plugin.json"), []byte(manifest), 0o644); err != nil {
		t.Fatal(err)
	}
	rec := &recorder{}
	cfg := &config.Config{
		Plugins:     map[string]*config.Plugin{"echo": {Path: pdir, Source: "npm:@example/echo@1.0.0"}},
		PluginOrder: []string{"echo"},
		Agents:      map[string]*config.Agent{"travel": {Tools: []string{"echo"}, WorkspaceDir: filepath.Join(dir, "ws")}},
		AgentOrder:  []string{"travel"},
	}
	lg, _ := audit.Open(filepath.Join(dir, "audit.jsonl"), nil)
	defer lg.Close()
	h, err := NewHost(cfg, &Options{Audit: lg, Builtins: map[string]Builtin{"echo": echoBuiltin("echo", rec, nil)}})
	if err != nil {
		t.Fatalf("NewHost: %v", err)
	}
	h.Close(context.Background())
}
