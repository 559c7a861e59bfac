package agent

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/beige-dev/beige/internal/proto"
)

// TestSessionsListBothFieldSets reads the sessions list the way two kinds of
// script do: one written for the spec (id, file, createdAt, updatedAt), one
// for the original Beige (sessionFile, sessionId, agentName, firstMessage).
func TestSessionsListBothFieldSets(t *testing.T) {
	e := newEnv(t, wireAnthropic)
	ctx := context.Background()
	long := strings.Repeat("é", 150) // multi-byte: cut by characters, not bytes
	e.promptKey("telegram:1:2", long)
	e.promptKey("telegram:1:2", "second message")
	e.promptKey("cli:x", "  plan my trip  ")

	list, err := e.m.Sessions(ctx, testAgent)
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(struct {
		Sessions []proto.SessionInfo `json:"sessions"`
	}{list})
	if err != nil {
		t.Fatal(err)
	}
	var resp struct {
		Sessions []map[string]any `json:"sessions"`
	}
	if err := json.Unmarshal(b, &resp); err != nil {
		t.Fatal(err)
	}
	if len(resp.Sessions) != 2 {
		t.Fatalf("sessions %s", b)
	}
	want := map[string]string{
		"telegram:1:2": strings.Repeat("é", 100),
		"cli:x":        "  plan my trip  ",
	}
	for _, s := range resp.Sessions {
		str := func(k string) string { v, _ := s[k].(string); return v }
		id, file := str("id"), str("file")
		if id == "" || file == "" || str("createdAt") == "" || str("updatedAt") == "" {
			t.Errorf("spec fields missing: %v", s)
		}
		if str("sessionFile") != file {
			t.Errorf("%s: sessionFile %q, file %q", id, str("sessionFile"), file)
		}
		if sid := str("sessionId"); sid == "" || sid+".jsonl" != filepath.Base(file) {
			t.Errorf("%s: sessionId %q for file %q", id, sid, file)
		}
		if str("agentName") != testAgent {
			t.Errorf("%s: agentName %q", id, str("agentName"))
		}
		if got, w := str("firstMessage"), want[id]; got != w {
			t.Errorf("%s: firstMessage %q, want %q", id, got, w)
		}
	}
}

func TestFirstMessageBounds(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, lines ...string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	header := `{"type":"session","version":3,"id":"h","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/workspace"}`
	user := func(text string) string {
		b, _ := json.Marshal(text)
		return `{"type":"message","id":"a","parentId":null,"timestamp":"2026-01-01T00:00:00.000Z","message":{"role":"user","content":[{"type":"text","text":` + string(b) + `}],"timestamp":1}}`
	}
	assistant := `{"type":"message","id":"b","parentId":"a","timestamp":"2026-01-01T00:00:00.000Z","message":{"role":"assistant","content":[{"type":"text","text":"hi"}],"api":"x","provider":"x","model":"x","usage":{},"stopReason":"stop","timestamp":1}}`
	for _, tc := range []struct {
		name, path, want string
	}{
		{"header only", write("a.jsonl", header), noFirstMessage},
		{"missing", filepath.Join(dir, "none.jsonl"), noFirstMessage},
		{"assistant first", write("b.jsonl", header, assistant, user("later")), "later"},
		{"torn line skipped", write("c.jsonl", header, `{"type":"mess`, user("ok")), "ok"},
		{"line past the bound", write("d.jsonl", header, user(strings.Repeat("x", firstMessageMaxBytes))), noFirstMessage},
		{"invalid UTF-8", write("e.jsonl", header, user("a\xffb")), "a\uFFFDb"},
	} {
		if got := firstMessage(tc.path); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, cutRunes(got, 20), tc.want)
		}
	}
}
