package nodehost

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/beige-dev/beige/internal/plugin"
	"github.com/beige-dev/beige/internal/proto"
)

// toolkitDir is the plugins folder of the original's toolkit
// (@matthias-hausberger/beige-toolkit), named by $BEIGE_TOOLKIT; the
// tests that run its plugins unmodified skip without it.
func toolkitDir(t *testing.T, plugins ...string) string {
	d := os.Getenv("BEIGE_TOOLKIT")
	if d == "" {
		t.Skip("BEIGE_TOOLKIT is not set (the toolkit's plugins/ folder)")
	}
	for _, p := range plugins {
		if _, err := os.Stat(filepath.Join(d, p, "index.ts")); err != nil {
			t.Skipf("BEIGE_TOOLKIT has no %s plugin: %v", p, err)
		}
	}
	return d
}

// sessionsContext is a gateway with sessions: each agent's sessions are
// files in the original's JSONL format.
type sessionsContext struct {
	fakeContext
	mu       sync.Mutex
	sessions map[string][]proto.SessionInfo // by agent
	dir      string
}

func (c *sessionsContext) Sessions(_ context.Context, agent string) ([]proto.SessionInfo, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]proto.SessionInfo{}, c.sessions[agent]...), nil
}

func (c *sessionsContext) add(t *testing.T, agent, key, text string) {
	file := filepath.Join(c.dir, agent, strings.ReplaceAll(key, ":", "_")+".jsonl")
	os.MkdirAll(filepath.Dir(file), 0o755)
	line, _ := json.Marshal(map[string]any{"type": "message", "timestamp": "2026-01-01T00:00:00Z",
		"message": map[string]any{"role": "user", "content": []any{map[string]any{"type": "text", "text": text}}}})
	if err := os.WriteFile(file, append(line, '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.sessions[agent] = append(c.sessions[agent], proto.SessionInfo{ID: key, File: file, SessionFile: file,
		SessionID: filepath.Base(file), AgentName: agent, CreatedAt: "2026-01-01T00:00:00Z", FirstMessage: text})
}

func (c *sessionsContext) NewSession(_ context.Context, agent, key string) error { return nil }

// TestToolkitSessionsAndSpawn runs the toolkit's sessions and spawn
// plugins unmodified: an agent lists and reads its own sessions and not
// another agent's; spawn, configured to allow a target, gets the target's
// answer.
func TestToolkitSessionsAndSpawn(t *testing.T) {
	tk := toolkitDir(t, "sessions", "spawn")
	sessDir := filepath.Join(t.TempDir(), "sessions")
	os.MkdirAll(sessDir, 0o755)
	f := mustFixture(t, map[string][]string{"travel": {"sessions", "spawn"}, "helper": {}},
		tsPlugin{name: "sessions", dir: filepath.Join(tk, "sessions"), config: map[string]any{}, allowRead: []string{sessDir}},
		tsPlugin{name: "spawn", dir: filepath.Join(tk, "spawn"), config: map[string]any{"targets": map[string]any{"helper": map[string]any{}}}})
	pc := &sessionsContext{sessions: map[string][]proto.SessionInfo{}, dir: sessDir}
	pc.add(t, "travel", "tui:travel:default", "plan a trip to Lisbon")
	pc.add(t, "helper", "tui:helper:default", "the helper's secret plans")
	if err := f.host.Start(context.Background(), pc); err != nil {
		t.Fatal(err)
	}

	resp := f.call("travel", "sessions", "list")
	if !resp.Success || !strings.Contains(resp.Output, "1 session for agent 'travel'") || strings.Contains(resp.Output, "helper") {
		t.Errorf("sessions list: %+v\n%s", resp, f.log)
	}
	resp = f.call("travel", "sessions", "get", "tui:travel:default")
	if !resp.Success || !strings.Contains(resp.Output, "plan a trip to Lisbon") {
		t.Errorf("sessions get own: %+v\n%s", resp, f.log)
	}
	resp = f.call("travel", "sessions", "get", "tui:helper:default")
	if strings.Contains(resp.Output+resp.Error, "secret plans") || !strings.Contains(resp.Output+resp.Error, "Permission denied") {
		t.Errorf("sessions get other agent's: %+v", resp)
	}

	resp = f.call("travel", "spawn", "--target", "helper", "what is 2+2?")
	if !resp.Success || !strings.Contains(resp.Output, "answer to what is 2+2?") {
		t.Errorf("spawn: %+v\n%s", resp, f.log)
	}
	if len(pc.prompts) != 1 || pc.prompts[0].Agent != "helper" {
		t.Errorf("prompts: %+v", pc.prompts)
	}
	resp = f.call("travel", "spawn", "--target", "travel", "hi")
	if resp.Success {
		t.Errorf("spawn to a target not allowed: %+v", resp)
	}
}

var _ plugin.PluginContext = (*sessionsContext)(nil)

// lockedContext records prompts under a lock (schedule prompts from its
// tick loop).
type lockedContext struct {
	fakeContext
	n chan plugin.PromptRequest
}

func (c *lockedContext) Prompt(_ context.Context, r plugin.PromptRequest) (*plugin.PromptResult, error) {
	c.n <- r
	return &plugin.PromptResult{Text: "done"}, nil
}

// TestToolkitSchedule runs the toolkit's schedule plugin unmodified: a
// one-off prompt created from the sandbox runs on its schedule, from the
// plugin's start()ed tick loop, as a prompt to the agent that created it;
// its state is in the plugin's data folder.
func TestToolkitSchedule(t *testing.T) {
	tk := toolkitDir(t, "schedule")
	if _, err := os.Stat(filepath.Join(tk, "schedule", "node_modules", "cron-parser")); err != nil {
		t.Skip("the toolkit's schedule plugin has no node_modules/cron-parser (scripts/ensure-toolkit.sh installs it)")
	}
	f := mustFixture(t, map[string][]string{"travel": {"schedule"}},
		tsPlugin{name: "schedule", dir: filepath.Join(tk, "schedule"), config: map[string]any{"tickInterval": 1, "allowExec": false}})
	pc := &lockedContext{n: make(chan plugin.PromptRequest, 4)}
	if err := f.host.Start(context.Background(), pc); err != nil {
		t.Fatal(err)
	}
	at := time.Now().Add(1500 * time.Millisecond).UTC().Format(time.RFC3339)
	resp := f.call("travel", "schedule", "create", "--once", at, "--prompt", "water the plants")
	if !resp.Success {
		t.Fatalf("create: %+v\n%s", resp, f.log)
	}
	select {
	case r := <-pc.n:
		if r.Agent != "travel" || r.Message != "water the plants" {
			t.Errorf("scheduled prompt %+v", r)
		}
	case <-time.After(15 * time.Second):
		t.Fatalf("the schedule never ran\n%s", f.log)
	}
	entries, _ := os.ReadDir(filepath.Join(f.home.DataDir(), "schedule"))
	if len(entries) == 0 {
		t.Error("nothing in the plugin's data folder")
	}
	resp = f.call("travel", "schedule", "create", "--once", at, "--exec", "id")
	if resp.Success {
		t.Errorf("exec schedule with allowExec false: %+v", resp)
	}
}
