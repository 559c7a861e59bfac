package nodehost

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/beige-dev/beige/internal/llm"
	"github.com/beige-dev/beige/internal/plugin"
	"github.com/beige-dev/beige/internal/proto"
)

// echoPlugin is TypeScript (with types, run by Node's type stripping) in
// the original's format: createPlugin(config, ctx) -> { register }.
const echoPlugin = `
interface ToolResult { output: string; exitCode: number }
type Args = string[];
export function createPlugin(config: Record<string, unknown>, ctx: any) {
  return {
    register(r: any): void {
      console.log("hello from console.log");
      console.error("and from console.error");
      r.tool({
        name: "echo",
        description: "Echoes.",
        commands: ["say <words>"],
        handler: async (args: Args, cfg?: Record<string, unknown>, session?: any): Promise<ToolResult> => {
          if (args[0] === "fail") return { output: "bad input\n", exitCode: 3 };
          if (args[0] === "throw") throw new Error("thrown on purpose");
          const out = { args, cfg, created: config, session, env: process.env, cwd: process.cwd(), agents: ctx.agentNames, dataDir: ctx.dataDir };
          return { output: JSON.stringify(out), exitCode: 0 };
        },
      });
    },
  };
}
`

func TestToolCall(t *testing.T) {
	t.Setenv("ANTHROPIC_API_KEY", "sk-ant-secret")
	t.Setenv("NODE_OPTIONS", "--require=/nonexistent/inject.js")
	f := mustFixture(t, map[string][]string{"travel": {"echo"}, "other": {}},
		tsPlugin{name: "echo", manifest: `{"name":"echo","description":"d","provides":{"tools":["echo"]}}`, source: echoPlugin})
	resp := f.call("travel", "echo", "say", "it's")
	if !resp.Success {
		t.Fatalf("call: %+v\nlog:\n%s", resp, f.log)
	}
	var got struct {
		Args    []string          `json:"args"`
		Cfg     map[string]any    `json:"cfg"`
		Created map[string]any    `json:"created"`
		Session map[string]string `json:"session"`
		Env     map[string]string `json:"env"`
		Cwd     string            `json:"cwd"`
		Agents  []string          `json:"agents"`
		DataDir string            `json:"dataDir"`
	}
	if err := json.Unmarshal([]byte(resp.Output), &got); err != nil {
		t.Fatalf("%v: %s", err, resp.Output)
	}
	dataDir := filepath.Join(f.home.DataDir(), "echo")
	if !slices.Equal(got.Args, []string{"say", "it's"}) || got.Cfg["greeting"] != "hi" || got.Created["greeting"] != "hi" {
		t.Errorf("args/config: %+v", got)
	}
	if got.Session["sessionKey"] != "tui:travel:default" || got.Session["channel"] != "tui" || got.Session["agentName"] != "travel" {
		t.Errorf("session context: %v", got.Session)
	}
	if got.Cwd != dataDir || got.DataDir != dataDir || got.Env["HOME"] != dataDir {
		t.Errorf("cwd %q, dataDir %q, HOME %q; want %q", got.Cwd, got.DataDir, got.Env["HOME"], dataDir)
	}
	slices.Sort(got.Agents)
	if !slices.Equal(got.Agents, []string{"other", "travel"}) {
		t.Errorf("agentNames = %v", got.Agents)
	}
	for k := range got.Env {
		if !slices.Contains([]string{"PATH", "HOME", "NODE_ENV", "LANG", "TZ"}, k) {
			t.Errorf("the plugin's environment has %s", k)
		}
	}
	if strings.Contains(resp.Output, "sk-ant-secret") {
		t.Error("the gateway's secret reached the plugin")
	}

	resp = f.call("travel", "echo", "fail")
	if resp.Success || resp.ExitCode != 3 || resp.Output != "bad input\n" {
		t.Errorf("fail: %+v", resp)
	}
	resp = f.call("travel", "echo", "throw")
	if resp.Success || !strings.Contains(resp.Error, "plugin echo: tool 'echo' failed: thrown on purpose") {
		t.Errorf("throw: %+v", resp)
	}
	// Policy still applies: deny by default.
	resp = f.call("other", "echo", "x")
	if resp.Success || !strings.Contains(resp.Error, "Permission denied: tool 'echo' not allowed for agent 'other'") {
		t.Errorf("other agent: %+v", resp)
	}
	// The plugin's console output is the gateway's log, not the protocol.
	f.log.waitLog(t, `msg="hello from console.log" plugin=echo stream=stdout`)
	f.log.waitLog(t, `msg="and from console.error" plugin=echo stream=stderr`)
	if !strings.Contains(f.host.ToolContext("travel"), "say <words>") {
		t.Errorf("tool context lacks the commands:\n%s", f.host.ToolContext("travel"))
	}
}

const hookPlugin = `
export function createPlugin(config, ctx) {
  return {
    register(r) {
      r.hook("prePrompt", async (ev) => {
        if (ev.message.includes("forbidden")) return { message: ev.message, block: true, reason: "no forbidden words (" + ev.agentName + ")" };
        return { message: ev.message.toUpperCase() };
      });
      r.hook("preToolExec", async (ev) => ev.args[0] === "nope" ? { allow: false, reason: "not today" } : { allow: true });
    },
  };
}
`

func TestPrePromptHookBlocks(t *testing.T) {
	f := mustFixture(t, map[string][]string{"travel": {"echo"}},
		tsPlugin{name: "guard", file: "index.js", source: hookPlugin},
		tsPlugin{name: "echo", source: echoPlugin})
	ev := &plugin.PrePromptEvent{Agent: "travel", Session: proto.SessionContext{SessionKey: "tui:travel:default", Channel: "tui"}, Prompt: "a forbidden thing"}
	err := f.host.RunPrePrompt(context.Background(), ev)
	if err == nil || err.Error() != "guard: no forbidden words (travel)" {
		t.Fatalf("blocked prompt: err = %v", err)
	}
	ev.Prompt = "hello"
	if err := f.host.RunPrePrompt(context.Background(), ev); err != nil || ev.Prompt != "HELLO" {
		t.Errorf("allowed prompt: %v, %q", err, ev.Prompt)
	}
	resp := f.call("travel", "echo", "nope")
	if resp.Success || !strings.Contains(resp.Error, "not today") {
		t.Errorf("preToolExec deny: %+v", resp)
	}
}

const lifecyclePlugin = `
export function createPlugin(config, ctx) {
  return {
    register(r) { ctx.log.info("register " + config.greeting); },
    async start() { ctx.log.info("start ` + "${NAME}" + `"); },
    async stop() { ctx.log.info("stop ` + "${NAME}" + `"); },
  };
}
`

func TestStartStopOrder(t *testing.T) {
	src := func(n string) string { return strings.ReplaceAll(lifecyclePlugin, "${NAME}", n) }
	f := mustFixture(t, nil, tsPlugin{name: "a", source: src("a")}, tsPlugin{name: "b", source: src("b")})
	if err := f.host.Start(context.Background(), &fakeContext{}); err != nil {
		t.Fatal(err)
	}
	if err := f.host.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	var order []string
	for _, l := range strings.Split(f.log.String(), "\n") {
		for _, w := range []string{"start a", "start b", "stop a", "stop b"} {
			if strings.Contains(l, "msg=\""+w+"\"") {
				order = append(order, w)
			}
		}
	}
	if want := []string{"start a", "start b", "stop b", "stop a"}; !slices.Equal(order, want) {
		t.Errorf("order %v, want %v\n%s", order, want, f.log)
	}
	if !strings.Contains(f.log.String(), `msg="register hi" plugin=a`) {
		t.Errorf("ctx.log lines are not logged with the plugin's name:\n%s", f.log)
	}
}

func TestCreatePluginThrows(t *testing.T) {
	shortTimeouts(t, 5*time.Second)
	f := mustFixture(t, map[string][]string{"travel": {"bad", "echo"}},
		tsPlugin{name: "bad", source: `export function createPlugin() { throw new Error("boom"); }`},
		tsPlugin{name: "echo", source: echoPlugin})
	resp := f.call("travel", "bad")
	if resp.Success || !strings.Contains(resp.Error, "plugin bad is restarting: createPlugin() failed: boom") {
		t.Errorf("bad plugin's tool: %+v", resp)
	}
	if resp := f.call("travel", "echo", "x"); !resp.Success {
		t.Errorf("the other plugin is affected: %+v", resp)
	}
	f.log.waitLog(t, "createPlugin() failed: boom")
	if !strings.Contains(f.log.String(), "plugin=bad") {
		t.Errorf("the log does not name the plugin:\n%s", f.log)
	}
}

// crashPlugin names its host by a random id (every jailed host is pid 1).
const crashPlugin = `
const hostID = Math.random().toString(36).slice(2);
export function createPlugin(config, ctx) {
  return {
    register(r) {
      r.tool({ name: "crashy", description: "", handler: async (args) => {
        if (args[0] === "crash") { setTimeout(() => { throw new Error("crash on purpose"); }, 0); return new Promise(() => {}); }
        if (args[0] === "exit") process.exit(3);
        if (args[0] === "hang") return new Promise(() => {});
        if (args[0] === "spin") { for (;;) {} }
        return { output: "host " + hostID, exitCode: 0 };
      }});
    },
  };
}
`

func TestCrashDuringCall(t *testing.T) {
	shortTimeouts(t, 10*time.Second)
	f := mustFixture(t, map[string][]string{"travel": {"crashy", "echo"}},
		tsPlugin{name: "crashy", source: crashPlugin}, tsPlugin{name: "echo", source: echoPlugin})
	first := f.call("travel", "crashy")
	if !first.Success {
		t.Fatalf("%+v", first)
	}
	for _, how := range []string{"crash", "exit"} {
		resp := f.call("travel", "crashy", how)
		if resp.Success || !strings.Contains(resp.Error, "plugin crashy: tool 'crashy'") || !strings.Contains(resp.Error, "exit") {
			t.Errorf("%s: %+v\n%s", how, resp, f.log)
		}
		if resp := f.call("travel", "echo", "x"); !resp.Success {
			t.Errorf("%s: the other plugin is affected: %+v", how, resp)
		}
		f.log.waitLog(t, "plugin host restarted")
		resp = f.call("travel", "crashy")
		if !resp.Success || resp.Output == first.Output {
			t.Errorf("%s: after the restart: %+v (first %q)", how, resp, first.Output)
		}
		f.log.reset()
	}
}

func TestRestartingAnswersClearly(t *testing.T) {
	shortTimeouts(t, 10*time.Second)
	backoffMin = 2 * time.Second
	f := mustFixture(t, map[string][]string{"travel": {"crashy"}}, tsPlugin{name: "crashy", source: crashPlugin})
	f.call("travel", "crashy", "exit")
	resp := f.call("travel", "crashy")
	if resp.Success || !strings.HasPrefix(resp.Error, "plugin crashy is restarting: ") {
		t.Errorf("during the restart: %+v", resp)
	}
	f.log.waitLog(t, "plugin host crashed; restarting")
}

// TestNeverAnswersIsKilled: a tool call that outlasts plugins.<p>.timeout
// kills the plugin's host (a hung promise, or a busy loop that blocks the
// host's event loop), which is then restarted.
func TestNeverAnswersIsKilled(t *testing.T) {
	shortTimeouts(t, time.Minute)
	f := mustFixture(t, map[string][]string{"travel": {"crashy", "echo"}},
		tsPlugin{name: "crashy", source: crashPlugin, timeout: 1}, tsPlugin{name: "echo", source: echoPlugin})
	for _, how := range []string{"hang", "spin"} {
		start := time.Now()
		resp := f.call("travel", "crashy", how)
		if resp.Success || !strings.Contains(resp.Error, "plugin crashy: tool 'crashy' did not answer in time; the plugin host was killed") {
			t.Errorf("%s: %+v", how, resp)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("%s: took %s", how, d)
		}
		if resp := f.call("travel", "echo", "x"); !resp.Success {
			t.Errorf("the other plugin is affected: %+v", resp)
		}
		f.log.waitLog(t, "plugin host restarted")
		if resp := f.call("travel", "crashy"); !resp.Success {
			t.Errorf("%s: after the restart: %+v", how, resp)
		}
		f.log.reset()
	}
}

const fsPlugin = `
import fs from "node:fs";
export function createPlugin(config, ctx) {
  return {
    register(r) {
      r.tool({ name: "fsy", description: "", handler: async (args) => {
        if (args[0] === "write") { fs.writeFileSync(args[1], "x"); return { output: "wrote", exitCode: 0 }; }
        if (args[0] === "read") { return { output: fs.readFileSync(args[1], "utf8"), exitCode: 0 }; }
        if (args[0] === "spawn") { (await import("node:child_process")).execSync("true"); return { output: "spawned", exitCode: 0 }; }
        return { output: "?", exitCode: 2 };
      }});
    },
  };
}
`

func TestConfinedToDataDir(t *testing.T) {
	f := mustFixture(t, map[string][]string{"travel": {"fsy"}}, tsPlugin{name: "fsy", source: fsPlugin})
	outside := filepath.Join(t.TempDir(), "outside")
	secret := filepath.Join(f.home.Dir, "config.json5")
	os.MkdirAll(f.home.Dir, 0o755)
	os.WriteFile(secret, []byte(`{"apiKey":"sk-secret"}`), 0o600)
	inside := filepath.Join(f.home.DataDir(), "fsy", "state.json")

	if resp := f.call("travel", "fsy", "write", inside); !resp.Success {
		t.Errorf("write in the data folder: %+v", resp)
	}
	// Each refusal names the config key that would allow it (Node's own
	// text names a command-line flag).
	tests := []struct {
		args []string
		hint string
	}{
		{[]string{"write", outside}, "(plugin fsy writes only its data folder: plugins.fsy.allowWrite lists more)"},
		{[]string{"write", filepath.Join(f.dirs["fsy"], "index.ts")}, "plugins.fsy.allowWrite"},
		{[]string{"read", secret}, "(plugin fsy reads only its own folders: plugins.fsy.allowRead lists more)"},
		{[]string{"spawn"}, "(plugin fsy may not start programs: plugins.fsy.allowChildProcess: true allows it)"},
	}
	for _, tt := range tests {
		resp := f.call("travel", "fsy", tt.args...)
		if resp.Success || !strings.Contains(resp.Error, "plugin fsy: tool 'fsy' failed: ") || !strings.Contains(resp.Error, tt.hint) {
			t.Errorf("%v: %+v", tt.args, resp)
		}
	}
	if _, err := os.Stat(outside); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the plugin wrote outside its data folder: %v", err)
	}
	if !strings.Contains(f.log.String(), "plugin refused access outside its folders") {
		t.Errorf("the refused write is not in the log:\n%s", f.log)
	}
}

// fakeContext is the gateway as a plugin's ctx calls reach it.
type fakeContext struct {
	plugin.PluginContext
	prompts  []plugin.PromptRequest
	settings map[string]map[string]any
}

func (c *fakeContext) Agents() []string { return []string{"travel", "helper"} }
func (c *fakeContext) Prompt(_ context.Context, r plugin.PromptRequest) (*plugin.PromptResult, error) {
	c.prompts = append(c.prompts, r)
	return &plugin.PromptResult{Text: "answer to " + r.Message}, nil
}
func (c *fakeContext) Settings(key string, _ map[string]any) map[string]any {
	out := map[string]any{"verbose": false}
	for k, v := range c.settings[key] {
		out[k] = v
	}
	return out
}
func (c *fakeContext) SetSetting(key, name string, v any) error {
	if c.settings == nil {
		c.settings = map[string]map[string]any{}
	}
	if c.settings[key] == nil {
		c.settings[key] = map[string]any{}
	}
	if v == nil {
		delete(c.settings[key], name)
	} else {
		c.settings[key][name] = v
	}
	return nil
}

const ctxPlugin = `
export function createPlugin(config, ctx) {
  return {
    register(r) {
      r.tool({ name: "ctxy", description: "", handler: async (args, cfg, session) => {
        // Synchronous methods, as the original has them:
        ctx.updateSessionSettings(session.sessionKey, { verbose: true });
        const s = ctx.getSessionSettings(session.sessionKey);
        const tools = ctx.getRegisteredTools();
        let unsupported = "";
        try { await ctx.steerSession("x", "hi"); } catch (e) { unsupported = e.message; }
        // An asynchronous one:
        const answer = await ctx.prompt("spawn:1", "helper", "what is 2+2?");
        return { output: JSON.stringify({ verbose: s.verbose, answer, unsupported, tools }), exitCode: 0 };
      }});
    },
  };
}
`

func TestContextCalls(t *testing.T) {
	f := mustFixture(t, map[string][]string{"travel": {"ctxy"}}, tsPlugin{name: "ctxy", source: ctxPlugin})
	pc := &fakeContext{}
	if err := f.host.Start(context.Background(), pc); err != nil {
		t.Fatal(err)
	}
	resp := f.call("travel", "ctxy")
	if !resp.Success {
		t.Fatalf("%+v\n%s", resp, f.log)
	}
	var got struct {
		Verbose     bool     `json:"verbose"`
		Answer      string   `json:"answer"`
		Unsupported string   `json:"unsupported"`
		Tools       []string `json:"tools"`
	}
	json.Unmarshal([]byte(resp.Output), &got)
	if !slices.Equal(got.Tools, []string{"ctxy"}) {
		t.Errorf("getRegisteredTools = %v", got.Tools)
	}
	if !got.Verbose || got.Answer != "answer to what is 2+2?" || got.Unsupported != "ctx.steerSession: this gateway cannot steer sessions" {
		t.Errorf("got %+v", got)
	}
	if len(pc.prompts) != 1 || pc.prompts[0].Agent != "helper" || pc.prompts[0].SessionKey != "spawn:1" {
		t.Errorf("prompts %+v", pc.prompts)
	}
}

func TestNoNode(t *testing.T) {
	_, err := FindNode(context.Background(), "/nonexistent/node")
	if err == nil || err.Error() != `node "/nonexistent/node" not found` {
		t.Errorf("missing node: %v", err)
	}
	old := filepath.Join(t.TempDir(), "node")
	os.WriteFile(old, []byte("#!/bin/sh\necho v20.11.1\n"), 0o755)
	_, err = FindNode(context.Background(), old)
	if err == nil || err.Error() != old+" is Node.js 20.11.1" {
		t.Errorf("old node: %v", err)
	}
}

// slowContext answers prompts after a delay.
type slowContext struct{ fakeContext }

func (c *slowContext) Prompt(ctx context.Context, r plugin.PromptRequest) (*plugin.PromptResult, error) {
	select {
	case <-time.After(time.Second):
	case <-ctx.Done():
	}
	return &plugin.PromptResult{Text: "ok"}, nil
}

// TestContextCallsBounded: a plugin cannot make the gateway run more than
// maxInflight of its ctx calls at once; the rest fail at once, clearly.
func TestContextCallsBounded(t *testing.T) {
	f := mustFixture(t, map[string][]string{"travel": {"flood"}}, tsPlugin{name: "flood", source: `
export function createPlugin(config, ctx) {
  return { register(r) { r.tool({ name: "flood", description: "", handler: async () => {
    const rs = await Promise.allSettled(Array.from({ length: 100 }, (_, i) => ctx.prompt("k" + i, "travel", "hi")));
    const ok = rs.filter((r) => r.status === "fulfilled").length;
    const refused = rs.filter((r) => r.status === "rejected" && r.reason.message.includes("more than 64 ctx calls")).length;
    return { output: ok + " " + refused, exitCode: 0 };
  }}); } };
}`})
	if err := f.host.Start(context.Background(), &slowContext{}); err != nil {
		t.Fatal(err)
	}
	resp := f.call("travel", "flood")
	if !resp.Success || resp.Output != "64 36" {
		t.Errorf("got %+v", resp)
	}
}

// streamContext streams its answer in two deltas.
type streamContext struct{ fakeContext }

func (c *streamContext) Prompt(_ context.Context, r plugin.PromptRequest) (*plugin.PromptResult, error) {
	if r.OnEvent != nil {
		r.OnEvent(llm.Event{Type: llm.EventStart})
		r.OnEvent(llm.Event{Type: llm.EventTextDelta, Delta: "Hel"})
		r.OnEvent(llm.Event{Type: llm.EventTextDelta, Delta: "lo"})
	}
	return &plugin.PromptResult{Text: "Hello"}, nil
}

func TestPromptStreaming(t *testing.T) {
	f := mustFixture(t, map[string][]string{"travel": {"streamy"}}, tsPlugin{name: "streamy", source: `
export function createPlugin(config, ctx) {
  return { register(r) { r.tool({ name: "streamy", description: "", handler: async () => {
    const seen = [];
    const text = await ctx.promptStreaming("k", "helper", "hi", (d) => seen.push(d), { onAssistantTurnStart: () => seen.push("<turn>") });
    return { output: seen.join("|") + " => " + text, exitCode: 0 };
  }}); } };
}`})
	if err := f.host.Start(context.Background(), &streamContext{}); err != nil {
		t.Fatal(err)
	}
	if resp := f.call("travel", "streamy"); !resp.Success || resp.Output != "<turn>|Hel|lo => Hello" {
		t.Errorf("got %+v", resp)
	}
}
