package nodehost

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/beige-dev/beige/internal/plugin"
	"github.com/beige-dev/beige/internal/proto"
)

// latePlugin fails its first load (createPlugin throws until a marker in
// its data folder exists) and loads on the retry, with a prePrompt hook.
const latePlugin = `
import fs from "node:fs";
export function createPlugin(config, ctx) {
  const marker = ctx.dataDir + "/loaded-once";
  if (!fs.existsSync(marker)) { fs.writeFileSync(marker, "x"); throw new Error("first load fails"); }
  return {
    register(r) {
      r.hook("prePrompt", async (ev) => ev.message.includes("forbidden") ? { message: ev.message, block: true, reason: "late guard" } : { message: ev.message });
    },
  };
}
`

// TestLateLoadingPluginHooks: a plugin whose first load fails and that
// loads on the retry has its prePrompt hook block a message (the hooks of
// a late-loading plugin used to be ignored until the gateway restarted).
func TestLateLoadingPluginHooks(t *testing.T) {
	shortTimeouts(t, 10*time.Second)
	f := mustFixture(t, map[string][]string{"travel": {"echo"}},
		tsPlugin{name: "late", source: latePlugin}, tsPlugin{name: "echo", source: echoPlugin})
	ev := &plugin.PrePromptEvent{Agent: "travel", Session: proto.SessionContext{SessionKey: "tui:travel:default", Channel: "tui"}, Prompt: "a forbidden thing"}
	// Before it loads: no hooks known, the prompt passes.
	f.log.waitLog(t, "first load fails")
	f.log.waitLog(t, "plugin host restarted")
	err := f.host.RunPrePrompt(context.Background(), ev)
	if err == nil || err.Error() != "late: late guard" {
		t.Fatalf("after the late load the prompt was not blocked: err = %v\n%s", err, f.log)
	}
	ev.Prompt = "hello"
	if err := f.host.RunPrePrompt(context.Background(), ev); err != nil || ev.Prompt != "hello" {
		t.Errorf("allowed prompt: %v, %q", err, ev.Prompt)
	}
}

const downGuardPlugin = `
export function createPlugin(config, ctx) {
  return {
    register(r) {
      r.tool({ name: "downguard", description: "", handler: async () => process.exit(3) });
      r.hook("prePrompt", async (ev) => ({ message: ev.message }));
    },
  };
}
`

// TestPrePromptOfDownPluginFailsClosed: while the host of a plugin that
// declared a prePrompt hook is down, prompts are refused.
func TestPrePromptOfDownPluginFailsClosed(t *testing.T) {
	shortTimeouts(t, 10*time.Second)
	backoffMin = 3 * time.Second
	f := mustFixture(t, map[string][]string{"travel": {"downguard"}}, tsPlugin{name: "downguard", source: downGuardPlugin})
	ev := &plugin.PrePromptEvent{Agent: "travel", Session: proto.SessionContext{SessionKey: "tui:travel:default", Channel: "tui"}, Prompt: "hi"}
	if err := f.host.RunPrePrompt(context.Background(), ev); err != nil {
		t.Fatal(err)
	}
	f.call("travel", "downguard")
	if err := f.host.RunPrePrompt(context.Background(), ev); err == nil || !strings.Contains(err.Error(), "plugin downguard is restarting") {
		t.Errorf("with the host down: %v", err)
	}
}

// TestEnumNeedsTsx: TypeScript that type stripping cannot run (an enum)
// fails to load with a message that says to ship tsx.
func TestEnumNeedsTsx(t *testing.T) {
	f := mustFixture(t, map[string][]string{"travel": {"enumy"}}, tsPlugin{name: "enumy", source: `
enum Color { Red, Green }
export function createPlugin(config, ctx) { return { register(r) {} }; }
`})
	resp := f.call("travel", "enumy")
	if resp.Success || !strings.Contains(resp.Error, "ship tsx with the plugin") {
		t.Errorf("%+v\n%s", resp, f.log)
	}
}
