package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/beige-dev/beige/internal/llm/llmtest"
	"github.com/beige-dev/beige/internal/settings"
)

// writeOriginalHome writes the sessions folder of a home the original
// Beige left: pi session files named <YYYYMMDD-HHMMSS-xxxxxx>.jsonl, a
// session map whose metadata carries the original's activeModel pin (and
// the toolkit's depth), session-settings.json and provider-health.json.
func writeOriginalHome(t *testing.T, sessionsDir string) (files map[string]string) {
	t.Helper()
	files = map[string]string{}
	agentDir := filepath.Join(sessionsDir, testAgent)
	if err := os.MkdirAll(agentDir, 0o755); err != nil {
		t.Fatal(err)
	}
	sessions := []struct{ key, name, said string }{
		{"tui:travel:default", "20260301-101500-a1b2c3", "plan a trip to Lisbon"},
		{"telegram:4242", "20260302-080000-d4e5f6", "book the train"},
		{"api:travel:default", "20260303-120000-0a0b0c", "what is the weather"},
	}
	for i, s := range sessions {
		lines := []string{
			fmt.Sprintf(`{"type":"session","version":3,"id":"5e55%04d-0000-4000-8000-000000000000","timestamp":"2026-03-0%dT10:15:00.000Z","cwd":"/workspace"}`, i, i+1),
			fmt.Sprintf(`{"type":"model_change","id":"m%d","parentId":null,"timestamp":"2026-03-0%dT10:15:00.001Z","provider":"anthropic","modelId":"claude-test"}`, i, i+1),
			fmt.Sprintf(`{"type":"message","id":"u%d","parentId":"m%d","timestamp":"2026-03-0%dT10:15:01.000Z","message":{"role":"user","content":[{"type":"text","text":%q}],"timestamp":1772360101000}}`, i, i, i+1, s.said),
			fmt.Sprintf(`{"type":"message","id":"a%d","parentId":"u%d","timestamp":"2026-03-0%dT10:15:02.000Z","message":{"role":"assistant","content":[{"type":"text","text":"noted: %s"}],"api":"anthropic-messages","provider":"anthropic","model":"claude-test","usage":{"input":10,"output":5,"cacheRead":0,"cacheWrite":0,"totalTokens":15,"cost":{"input":0,"output":0,"cacheRead":0,"cacheWrite":0,"total":0}},"stopReason":"stop","timestamp":1772360102000}}`, i, i, i+1, s.said),
		}
		p := filepath.Join(agentDir, s.name+".jsonl")
		if err := os.WriteFile(p, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		files[s.key] = p
	}
	sm := fmt.Sprintf(`{
  "tui:travel:default": {"agentName": "travel", "sessionFile": %q, "createdAt": "2026-03-01T10:15:00.000Z",
    "metadata": {"activeModel": {"provider": "openai", "modelId": "gpt-test"}}},
  "telegram:4242": {"agentName": "travel", "sessionFile": %q, "createdAt": "2026-03-02T08:00:00.000Z",
    "metadata": {"depth": 0, "activeModel": {"provider": "anthropic", "modelId": "claude-test"}}},
  "api:travel:default": {"agentName": "travel", "sessionFile": %q, "createdAt": "2026-03-03T12:00:00.000Z"}
}`, files["tui:travel:default"], files["telegram:4242"], files["api:travel:default"])
	write := func(name, content string) {
		if err := os.WriteFile(filepath.Join(sessionsDir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(SessionMapFile, sm)
	write("session-settings.json", `{"telegram:4242": {"verbose": true, "streaming": false}}`)
	dataDir := filepath.Join(filepath.Dir(sessionsDir), "data")
	if err := os.MkdirAll(dataDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dataDir, "provider-health.json"), []byte(`{"providers":{"anthropic/claude-test":{"consecutiveFailures":0}},"lastUpdated":"2026-03-03T12:00:00.000Z"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	return files
}

// TestOriginalHome: a home the original Beige wrote starts with every
// session listed and resumable, and each session's pinned model
// (metadata.activeModel) is handed to the settings once.
func TestOriginalHome(t *testing.T) {
	e := newEnv(t, wireAnthropic)
	files := writeOriginalHome(t, e.dir)
	e.restart()
	ctx := context.Background()

	list, err := e.m.Sessions(ctx, testAgent)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != len(files) {
		t.Fatalf("listed %d sessions, want %d: %+v", len(list), len(files), list)
	}
	for _, s := range list {
		if files[s.ID] != s.File {
			t.Errorf("session %q listed with file %q, want %q", s.ID, s.File, files[s.ID])
		}
	}

	// Resumable: each session's history is what the model sees next.
	for key, said := range map[string]string{"telegram:4242": "book the train", "api:travel:default": "what is the weather"} {
		e.srv.Enqueue(llmtest.Text("ok"))
		if _, err := e.m.Prompt(ctx, testAgent, key, "and then?", nil); err != nil {
			t.Fatalf("prompt %s: %v", key, err)
		}
		if all := e.srv.Last().AllText(); !strings.Contains(all, said) || !strings.Contains(all, "noted: "+said) {
			t.Errorf("%s resumed without its history: %q", key, all)
		}
	}

	// The pins go to the settings store, as beige keeps them.
	st := settings.Open(filepath.Join(e.dir, "session-settings.json"), nil)
	if v, _ := st.Get("telegram:4242", "verbose"); v != true {
		t.Errorf("original session-settings.json not read: verbose = %v", v)
	}
	got := map[string]string{}
	if err := e.m.TakeActiveModels(func(key, agent, model string) error {
		if agent != testAgent {
			t.Errorf("%s: agent %q", key, agent)
		}
		got[key] = model
		return st.Set(key, "model", model)
	}); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"tui:travel:default": "openai/gpt-test", "telegram:4242": "anthropic/claude-test"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("pins taken = %v, want %v", got, want)
	}
	if v, _ := st.Get("tui:travel:default", "model"); v != "openai/gpt-test" {
		t.Errorf("settings pin = %v", v)
	}

	// Taken once: an unpin made afterwards is not undone by a restart, and
	// the rest of the original's metadata stays.
	m := readMap(t, e.dir)
	var meta map[string]any
	if err := json.Unmarshal(m["telegram:4242"].Metadata, &meta); err != nil || len(meta) != 1 || meta["depth"] != 0.0 {
		t.Errorf("telegram metadata after take = %s, want {\"depth\":0}", m["telegram:4242"].Metadata)
	}
	if m["tui:travel:default"].Metadata != nil {
		t.Errorf("tui metadata after take = %s, want none", m["tui:travel:default"].Metadata)
	}
	e.restart()
	if err := e.m.TakeActiveModels(func(key, _, model string) error {
		t.Errorf("taken again after restart: %s %s", key, model)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if list, _ := e.m.Sessions(ctx, testAgent); len(list) != len(files) {
		t.Errorf("after restart %d sessions", len(list))
	}
}

// TestTakeActiveModelsRefusesJunk: only two plain names are a model; a
// failed take leaves the pin where it is.
func TestTakeActiveModelsRefusesJunk(t *testing.T) {
	tests := []struct {
		meta string
		want string
	}{
		{`{"activeModel":{"provider":"openrouter","modelId":"anthropic/claude-sonnet-4"}}`, "openrouter/anthropic/claude-sonnet-4"},
		{`{"activeModel":{"provider":"a/b","modelId":"m"}}`, ""},
		{`{"activeModel":{"provider":"a","modelId":""}}`, ""},
		{`{"activeModel":{"provider":"a","modelId":"m\nx"}}`, ""},
		{`{"activeModel":"anthropic/claude"}`, ""},
		{`{"activeModel":{"provider":"a","modelId":"` + strings.Repeat("m", maxModelName+1) + `"}}`, ""},
		{`[1]`, ""},
	}
	for _, tt := range tests {
		got, _, ok := activeModelOf(json.RawMessage(tt.meta))
		if got != tt.want || ok != (tt.want != "") {
			t.Errorf("%s: %q %v, want %q", tt.meta, got, ok, tt.want)
		}
	}

	e := newEnv(t, wireAnthropic)
	writeOriginalHome(t, e.dir)
	e.restart()
	if err := e.m.TakeActiveModels(func(string, string, string) error { return os.ErrPermission }); err == nil {
		t.Fatal("a failed take was not reported")
	}
	if meta := string(readMap(t, e.dir)["tui:travel:default"].Metadata); !strings.Contains(meta, "activeModel") {
		t.Errorf("pin dropped although not taken: %s", meta)
	}
}
