package nodehost

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"

	"github.com/beige-dev/beige/internal/plugin"
)

// steerContext is a gateway that steers sessions and compacts during
// prompts.
type steerContext struct {
	*fakeContext
	mu     sync.Mutex
	steers []string // sessionKey + ": " + text
}

func (c *steerContext) Steer(_ context.Context, _, key, text string, _ bool) (bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.steers = append(c.steers, key+": "+text)
	return key == "busy:1", nil
}

func (c *steerContext) Prompt(ctx context.Context, r plugin.PromptRequest) (*plugin.PromptResult, error) {
	if r.OnCompactionStart != nil {
		r.OnCompactionStart()
	}
	if r.OnCompactionEnd != nil {
		r.OnCompactionEnd(plugin.CompactionEnd{Success: true, TokensBefore: 1234})
		r.OnCompactionEnd(plugin.CompactionEnd{ErrorMessage: "summary failed"})
	}
	return c.fakeContext.Prompt(ctx, r)
}

const promptOptsPlugin = `
export function createPlugin(config, ctx) {
  return {
    register(r) {
      r.tool({ name: "opts", description: "", handler: async (args, cfg, session) => {
        const events = [];
        const opts = {
          modelOverride: { provider: "pa", model: "model-b" },
          replyTo: { channel: "telegram", address: { chatId: "42" } },
          onAutoCompactionStart: () => events.push("start"),
          onAutoCompactionEnd: (r) => events.push(JSON.stringify(r)),
        };
        const a = await ctx.prompt("spawn:1", "helper", "one", opts);
        const b = await ctx.promptStreaming("spawn:1", "helper", "two", () => {}, opts);
        await ctx.prompt("spawn:1", "helper", "three");
        const steered = await ctx.steerSession("busy:1", "change of plan");
        await ctx.steerSession("idle:1", "anyone?");
        ctx.updateSessionSettings("chat:9", { replyTo: { channel: "mine", address: { room: "r1" } }, verbose: true });
        ctx.updateSessionSettings("chat:9", { model: { provider: "pa", model: "model-b" }, channel: "mine", metadata: { a: 1 } });
        ctx.updateSessionSettings("chat:9", { metadata: { b: 2 }, channel: "" });
        const s = ctx.getSessionSettings("chat:9");
        let badModel = "";
        try { ctx.updateSessionSettings("chat:9", { model: "pa/model-b" }); } catch (e) { badModel = e.message; }
        let bad = "";
        try { await ctx.prompt("spawn:1", "helper", "x", { replyTo: "nope" }); } catch (e) { bad = e.message; }
        return { output: JSON.stringify({ a, b, events, steered: steered === undefined, replyTo: s.replyTo, verbose: s.verbose,
          model: s.model, channel: s.channel, metadata: s.metadata, badModel, bad }), exitCode: 0 };
      }});
    },
  };
}
`

// TestPromptOptsAndSteer: a plugin's PromptOpts reach the gateway (the
// model override, the reply target; without them the next prompt has
// neither), the automatic compaction callbacks are called with the
// original's arguments, steerSession reaches the gateway's Steerer and
// resolves to undefined, and updateSessionSettings' replyTo, model, channel
// and metadata come back from getSessionSettings.
func TestPromptOptsAndSteer(t *testing.T) {
	f := mustFixture(t, map[string][]string{"travel": {"opts"}}, tsPlugin{name: "opts", source: promptOptsPlugin})
	pc := &steerContext{fakeContext: &fakeContext{}}
	if err := f.host.Start(context.Background(), pc); err != nil {
		t.Fatal(err)
	}
	resp := f.call("travel", "opts")
	if !resp.Success {
		t.Fatalf("%+v\n%s", resp, f.log)
	}
	var got struct {
		A, B     string
		Events   []string
		Steered  bool
		ReplyTo  map[string]any
		Verbose  bool
		Model    map[string]string
		Channel  string
		Metadata map[string]int
		BadModel string
		Bad      string
	}
	if err := json.Unmarshal([]byte(resp.Output), &got); err != nil {
		t.Fatalf("%v: %s", err, resp.Output)
	}
	if got.A != "answer to one" || got.B != "answer to two" {
		t.Errorf("answers %q, %q", got.A, got.B)
	}
	end := `{"success":true,"willRetry":false,"tokensBefore":1234}`
	failed := `{"success":false,"willRetry":false,"errorMessage":"summary failed"}`
	if want := []string{"start", end, failed, "start", end, failed}; strings.Join(got.Events, " ") != strings.Join(want, " ") {
		t.Errorf("compaction events %q, want %q", got.Events, want)
	}
	if len(pc.prompts) != 3 {
		t.Fatalf("prompts %+v", pc.prompts)
	}
	for i, p := range pc.prompts[:2] {
		if p.ModelOverride != "pa/model-b" || string(p.ReplyTo) != `{"channel":"telegram","address":{"chatId":"42"}}` {
			t.Errorf("prompt %d: override %q, replyTo %s", i, p.ModelOverride, p.ReplyTo)
		}
	}
	if p := pc.prompts[2]; p.ModelOverride != "" || p.ReplyTo != nil || p.OnCompactionStart != nil || p.OnCompactionEnd != nil {
		t.Errorf("a prompt without options: %+v", p)
	}
	if strings.Join(pc.steers, "|") != "busy:1: change of plan|idle:1: anyone?" || !got.Steered {
		t.Errorf("steers %q (undefined: %v)", pc.steers, got.Steered)
	}
	if got.ReplyTo["channel"] != "mine" || !got.Verbose {
		t.Errorf("settings: replyTo %v verbose %v", got.ReplyTo, got.Verbose)
	}
	// The original's other session-map settings round-trip the same way,
	// under its metadata keys; metadata is merged, a falsy value ignored.
	if got.Model["provider"] != "pa" || got.Model["model"] != "model-b" || got.Channel != "mine" || got.Metadata["a"] != 1 || got.Metadata["b"] != 2 {
		t.Errorf("settings: model %v channel %q metadata %v", got.Model, got.Channel, got.Metadata)
	}
	if !strings.Contains(got.BadModel, "model is not an object") {
		t.Errorf("a bad model: %q", got.BadModel)
	}
	if !strings.Contains(got.Bad, "replyTo is not an object") {
		t.Errorf("a bad replyTo: %q", got.Bad)
	}
}
