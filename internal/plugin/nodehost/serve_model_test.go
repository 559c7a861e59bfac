package nodehost

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/beige-dev/beige/internal/llm"
	"github.com/beige-dev/beige/internal/plugin"
	"github.com/beige-dev/beige/internal/proto"
)

// modelContext is a gateway with two agents whose sessions can be pinned to
// one of their models, as the gateway's pinModel does.
type modelContext struct {
	fakeContext
	pins map[string]string
}

func (c *modelContext) models(agent string) []string {
	return map[string][]string{"travel": {"pa/model-a", "pb/model-b"}, "helper": {"pa/model-a"}}[agent]
}

func (c *modelContext) SetModel(_ context.Context, agent, key, model string) error {
	if model == "" {
		delete(c.pins, key)
		return nil
	}
	for _, m := range c.models(agent) {
		if m == model {
			c.pins[key] = model
			return nil
		}
	}
	return errors.New("model " + model + " is not one of agent " + agent + "'s models")
}

func (c *modelContext) Status(_ context.Context, agent, key string) (plugin.SessionStatus, error) {
	ms := c.models(agent)
	if ms == nil {
		return plugin.SessionStatus{}, errors.New("unknown agent")
	}
	st := plugin.SessionStatus{Agent: agent, SessionKey: key, Model: ms[0]}
	for _, m := range ms {
		if c.pins[key] == m {
			st.Model, st.Pinned = m, true
		}
	}
	return st, nil
}

func (c *modelContext) Sessions(_ context.Context, agent string) ([]proto.SessionInfo, error) {
	if agent == "travel" {
		return []proto.SessionInfo{{ID: "tg:1", AgentName: "travel", SessionFile: "/s/tg1.jsonl"}}, nil
	}
	return nil, nil
}

// TestSessionModel: a plugin reads the model a session uses (the agent's
// primary until pinned), pins it to one of the agent's models, cannot pin
// it to any other (ignored, as in the original), clears the pin; a session
// no agent has is undefined; hostile arguments are refused naming the
// method.
func TestSessionModel(t *testing.T) {
	f := mustFixture(t, map[string][]string{"travel": {"modely"}}, tsPlugin{name: "modely", source: `
export function createPlugin(config, ctx) {
  return { register(r) { r.tool({ name: "modely", description: "", handler: async () => {
    const out = [];
    const show = () => { const m = ctx.getSessionModel("tg:1"); out.push(m === undefined ? "undefined" : m.provider + "/" + m.modelId); };
    show();
    ctx.persistSessionModel("tg:1", "travel", "pb", "model-b"); show();
    ctx.persistSessionModel("tg:1", "travel", "evil", "model-x"); show();
    ctx.persistSessionModel("tg:1", "nobody", "pa", "model-a"); show();
    ctx.clearSessionModel("tg:1"); show();
    out.push(String(ctx.getSessionModel("tg:unknown")));
    ctx.persistSessionModel("tg:new", "helper", "pa", "model-a");
    out.push(JSON.stringify(ctx.getSessionModel("tg:new")));
    for (const bad of [() => ctx.getSessionModel("k".repeat(600)), () => ctx.clearSessionModel(""), () => ctx.getSessionModel(42)]) {
      try { bad(); out.push("accepted"); } catch (e) { out.push(e.message); }
    }
    return { output: JSON.stringify(out), exitCode: 0 };
  }}); } };
}`})
	pc := &modelContext{pins: map[string]string{}}
	if err := f.host.Start(context.Background(), pc); err != nil {
		t.Fatal(err)
	}
	resp := f.call("travel", "modely")
	if !resp.Success {
		t.Fatalf("%+v\n%s", resp, f.log)
	}
	var got []string
	if err := json.Unmarshal([]byte(resp.Output), &got); err != nil {
		t.Fatalf("%v: %s", err, resp.Output)
	}
	want := []string{
		"pa/model-a", "pb/model-b", "pb/model-b", "pb/model-b", "pa/model-a",
		"undefined",
		`{"modelId":"model-a","provider":"pa"}`,
		"ctx.getSessionModel: bad arguments: a name longer than 512 bytes",
		"ctx.clearSessionModel: bad arguments: an empty name",
		"ctx.getSessionModel: bad arguments:",
	}
	if len(got) != len(want) {
		t.Fatalf("got %q", got)
	}
	for i := range want {
		if !strings.HasPrefix(got[i], want[i]) {
			t.Errorf("step %d: got %q, want %q", i, got[i], want[i])
		}
	}
	if !strings.Contains(f.log.String(), "ctx.persistSessionModel: ignored") {
		t.Errorf("the ignored pin is not logged:\n%s", f.log)
	}
}

// lookupContext knows one provider's models.
type lookupContext struct{ fakeContext }

func (c *lookupContext) LookupModel(provider, id string) (llm.Model, bool) {
	if provider != "pa" {
		return llm.Model{}, false
	}
	return llm.Model{ID: id, Name: "Model " + id, Provider: "pa", ContextWindow: 200000, MaxTokens: 64000}, true
}

// TestGetModel: getModel answers the original's ModelInfo for a model of a
// configured provider and undefined for any other provider.
func TestGetModel(t *testing.T) {
	f := mustFixture(t, map[string][]string{"travel": {"infoy"}}, tsPlugin{name: "infoy", source: `
export function createPlugin(config, ctx) {
  return { register(r) { r.tool({ name: "infoy", description: "", handler: async () => {
    const out = [ctx.getModel("pa", "model-a"), String(ctx.getModel("nope", "model-a"))];
    try { ctx.getModel("pa", ""); out.push("accepted"); } catch (e) { out.push(e.message); }
    return { output: JSON.stringify(out), exitCode: 0 };
  }}); } };
}`})
	if err := f.host.Start(context.Background(), &lookupContext{}); err != nil {
		t.Fatal(err)
	}
	resp := f.call("travel", "infoy")
	want := `[{"contextWindow":200000,"maxTokens":64000,"modelId":"model-a","name":"Model model-a","provider":"pa"},"undefined","ctx.getModel: bad arguments: an empty name"]`
	if !resp.Success || resp.Output != want {
		t.Errorf("got %+v\nwant %s", resp, want)
	}
}

// healthContext has one model cooling down until it is cleared.
type healthContext struct {
	fakeContext
	cleared bool
}

func (c *healthContext) ModelHealth(provider, id string) (plugin.ModelHealthStatus, bool) {
	if provider+"/"+id != "pa/model-a" || c.cleared {
		return plugin.ModelHealthStatus{}, false
	}
	return plugin.ModelHealthStatus{CoolingDown: true, Remaining: 1500 * time.Millisecond, LastError: "429", ConsecutiveFailures: 2}, true
}

func (c *healthContext) ClearModelHealth(provider, id string) {
	if provider+"/"+id == "pa/model-a" {
		c.cleared = true
	}
}

// TestModelHealth: getModelHealth answers the original's shape (undefined
// when nothing was recorded), clearModelHealth resets it.
func TestModelHealth(t *testing.T) {
	f := mustFixture(t, map[string][]string{"travel": {"healthy"}}, tsPlugin{name: "healthy", source: `
export function createPlugin(config, ctx) {
  return { register(r) { r.tool({ name: "healthy", description: "", handler: async () => {
    const out = [ctx.getModelHealth("pa", "model-a"), String(ctx.getModelHealth("pb", "model-b"))];
    out.push(String(ctx.clearModelHealth("pa", "model-a")));
    out.push(String(ctx.getModelHealth("pa", "model-a")));
    return { output: JSON.stringify(out), exitCode: 0 };
  }}); } };
}`})
	if err := f.host.Start(context.Background(), &healthContext{}); err != nil {
		t.Fatal(err)
	}
	resp := f.call("travel", "healthy")
	want := `[{"consecutiveFailures":2,"isCoolingDown":true,"lastError":"429","remainingCooldownMs":1500},"undefined","undefined","undefined"]`
	if !resp.Success || resp.Output != want {
		t.Errorf("got %+v\nwant %s", resp, want)
	}
}

// disposeContext records the sessions disposed.
type disposeContext struct {
	fakeContext
	disposed []string
}

func (c *disposeContext) DisposeSession(key string) { c.disposed = append(c.disposed, key) }

// TestDisposeSession: disposeSession (async, as in the original) reaches
// the gateway with the session key and resolves to undefined.
func TestDisposeSession(t *testing.T) {
	f := mustFixture(t, map[string][]string{"travel": {"disposy"}}, tsPlugin{name: "disposy", source: `
export function createPlugin(config, ctx) {
  return { register(r) { r.tool({ name: "disposy", description: "", handler: async () => {
    const p = ctx.disposeSession("tg:1");
    const v = await p;
    let bad = "";
    try { await ctx.disposeSession(""); } catch (e) { bad = e.message; }
    return { output: (p instanceof Promise) + " " + String(v) + " " + bad, exitCode: 0 };
  }}); } };
}`})
	pc := &disposeContext{}
	if err := f.host.Start(context.Background(), pc); err != nil {
		t.Fatal(err)
	}
	resp := f.call("travel", "disposy")
	if !resp.Success || resp.Output != "true undefined ctx.disposeSession: bad arguments: an empty name" {
		t.Errorf("got %+v", resp)
	}
	if len(pc.disposed) != 1 || pc.disposed[0] != "tg:1" {
		t.Errorf("disposed %q", pc.disposed)
	}
}

// usageContext has one session with a reply's usage.
type usageContext struct{ modelContext }

func (c *usageContext) SessionUsage(_ context.Context, agent, key string) (llm.Usage, bool, error) {
	if agent != "travel" || key != "tg:1" {
		return llm.Usage{}, false, nil
	}
	return llm.Usage{Input: 100, Output: 20, CacheRead: 300, CacheWrite: 5}, true, nil
}

// TestSessionUsage: getSessionUsage answers the original's SessionUsage of
// the session's last reply, inputTokens being the context's size, and
// undefined for a session no agent has.
func TestSessionUsage(t *testing.T) {
	f := mustFixture(t, map[string][]string{"travel": {"usagy"}}, tsPlugin{name: "usagy", source: `
export function createPlugin(config, ctx) {
  return { register(r) { r.tool({ name: "usagy", description: "", handler: async () => {
    return { output: JSON.stringify([ctx.getSessionUsage("tg:1"), String(ctx.getSessionUsage("tg:other"))]), exitCode: 0 };
  }}); } };
}`})
	if err := f.host.Start(context.Background(), &usageContext{modelContext{pins: map[string]string{}}}); err != nil {
		t.Fatal(err)
	}
	resp := f.call("travel", "usagy")
	want := `[{"cacheReadTokens":300,"cacheWriteTokens":5,"inputTokens":425,"outputTokens":20},"undefined"]`
	if !resp.Success || resp.Output != want {
		t.Errorf("got %+v\nwant %s", resp, want)
	}
}

// metaContext is a gateway whose session "tg:1" has an entry once
// hasEntry is set; it stores metadata as the session map does.
type metaContext struct {
	modelContext
	hasEntry bool
	stored   map[string]json.RawMessage
}

func (c *metaContext) SessionMetadata(key string) (map[string]json.RawMessage, bool) {
	if key != "tg:1" || !c.hasEntry {
		return nil, false
	}
	return c.stored, true
}

func (c *metaContext) SetSessionMetadata(key, name string, v json.RawMessage) (bool, error) {
	if key != "tg:1" || !c.hasEntry {
		return false, nil
	}
	if v == nil {
		delete(c.stored, name)
	} else {
		c.stored[name] = v
	}
	return true, nil
}

// TestSessionMetadataStored: metadata set before the session has an entry
// waits in the host's memory and goes to the gateway's store with the next
// set once it has one; a new host (a restart) reads it back from the store;
// oversized values are refused naming the method.
func TestSessionMetadataStored(t *testing.T) {
	src := `
export function createPlugin(config, ctx) {
  return { register(r) { r.tool({ name: "metay", description: "", handler: async (args) => {
    if (args[0] === "before") { ctx.setSessionMetadata("tg:1", "early", { a: 1 }); return { output: JSON.stringify(ctx.getSessionMetadata("tg:1", "early")), exitCode: 0 }; }
    if (args[0] === "after") { ctx.setSessionMetadata("tg:1", "late", "x"); return { output: "ok", exitCode: 0 }; }
    let big = "";
    try { ctx.setSessionMetadata("tg:1", "big", "x".repeat(20000)); big = "accepted"; } catch (e) { big = e.message; }
    return { output: JSON.stringify([ctx.getSessionMetadata("tg:1", "early"), ctx.getSessionMetadata("tg:1", "late"), big]), exitCode: 0 };
  }}); } };
}`
	pc := &metaContext{modelContext: modelContext{pins: map[string]string{}}, stored: map[string]json.RawMessage{}}
	f := mustFixture(t, map[string][]string{"travel": {"metay"}}, tsPlugin{name: "metay", source: src})
	if err := f.host.Start(context.Background(), pc); err != nil {
		t.Fatal(err)
	}
	if resp := f.call("travel", "metay", "before"); !resp.Success || resp.Output != `{"a":1}` {
		t.Fatalf("before the entry: %+v", resp)
	}
	if len(pc.stored) != 0 {
		t.Fatalf("stored without an entry: %s", pc.stored)
	}
	pc.hasEntry = true
	if resp := f.call("travel", "metay", "after"); !resp.Success {
		t.Fatalf("after: %+v", resp)
	}
	if string(pc.stored["early"]) != `{"a":1}` || string(pc.stored["late"]) != `"x"` {
		t.Fatalf("stored %s", pc.stored)
	}
	// A new host: only the store has the metadata.
	g := mustFixture(t, map[string][]string{"travel": {"metay"}}, tsPlugin{name: "metay", source: src})
	if err := g.host.Start(context.Background(), pc); err != nil {
		t.Fatal(err)
	}
	resp := g.call("travel", "metay", "read")
	want := `[{"a":1},"x","ctx.setSessionMetadata: the value of \"big\" is over 16384 bytes"]`
	if !resp.Success || resp.Output != want {
		t.Errorf("after restart: %+v\nwant %s", resp, want)
	}
}

// toolStartContext runs one tool call during each prompt.
type toolStartContext struct{ fakeContext }

func (c *toolStartContext) Prompt(_ context.Context, r plugin.PromptRequest) (*plugin.PromptResult, error) {
	if r.OnToolCall != nil {
		r.OnToolCall("exec", json.RawMessage(`{"command":"ls -la"}`))
		r.OnToolCall("exec", json.RawMessage(`"not an object"`))
	}
	return &plugin.PromptResult{Text: "done"}, nil
}

// TestPromptOnToolStart: PromptOpts.onToolStart gets each tool call's name
// and params, on prompt and promptStreaming.
func TestPromptOnToolStart(t *testing.T) {
	f := mustFixture(t, map[string][]string{"travel": {"tooly"}}, tsPlugin{name: "tooly", source: `
export function createPlugin(config, ctx) {
  return { register(r) { r.tool({ name: "tooly", description: "", handler: async () => {
    const seen = [];
    const onToolStart = (name, params) => seen.push(name + " " + JSON.stringify(params));
    const a = await ctx.prompt("k", "helper", "hi", { onToolStart });
    const b = await ctx.promptStreaming("k", "helper", "hi", () => {}, { onToolStart });
    await ctx.prompt("k", "helper", "hi");
    return { output: seen.join("|") + " => " + a + b, exitCode: 0 };
  }}); } };
}`})
	if err := f.host.Start(context.Background(), &toolStartContext{}); err != nil {
		t.Fatal(err)
	}
	want := `exec {"command":"ls -la"}|exec {}|exec {"command":"ls -la"}|exec {} => donedone`
	if resp := f.call("travel", "tooly"); !resp.Success || resp.Output != want {
		t.Errorf("got %+v\nwant %s", resp, want)
	}
}
