package gateway

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/beige-dev/beige/internal/audit"
)

// TestToolCallAttribution (security issue #10, finding 6), end to end: a
// tool call from a command the gateway started is attributed to that
// command's session by its call token, whatever BEIGE_* variables say; a
// call with a forged session and no token, or from a process that outlived
// its exec, is audited as unattributed and the plugin sees no session.
func TestToolCallAttribution(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "plugin.json"), []byte(`{"name": "attrib", "description": "Says whose call it is.", "provides": {"tools": ["attrib"]}, "run": {"command": ["./attrib.sh"]}}`), 0o644)
	os.WriteFile(filepath.Join(dir, "attrib.sh"), []byte("#!/bin/sh\necho \"session=[$BEIGE_SESSION_KEY] chat=[$BEIGE_CHAT_ID]\"\n"), 0o755)
	g := startGatewayWith(t, gatewaySetup{
		docker:  true, // the tool client in the sandbox calls back through gateway.sock
		names:   []string{"attr"},
		plugins: fmt.Sprintf(`attrib: { path: %q }`, dir),
		extra:   map[string]string{"attr": `tools: ["attrib"]`},
		// Root in the sandbox: this test is about the token, not the user.
		sandbox: map[string]string{"attr": `user: "0:0"`},
	})
	a := g.agents[0]
	own := "tui:" + a + ":default" // the HTTP API's default session
	forged := "BEIGE_SESSION_KEY=telegram:123456789:77 BEIGE_CHANNEL=telegram BEIGE_CHAT_ID=123456789 "

	check := func(name, command, wantOut string, unattributed bool, session string) {
		t.Helper()
		text, _ := g.tool(t, a, "exec", map[string]any{"command": command})
		if !strings.Contains(text, wantOut) {
			t.Errorf("%s: output %q, want %q", name, text, wantOut)
		}
		rec := lastRecord(t, g, a, "attrib")
		if rec.Unattributed != unattributed || rec.Session != session || rec.Type != audit.TypeTool {
			t.Errorf("%s: audited as %+v; want unattributed=%v session %q", name, rec, unattributed, session)
		}
	}
	check("own call", "attrib", "session=["+own+"]", false, own)
	check("forged env, real token", forged+"attrib", "session=["+own+"] chat=["+a+"]", false, own)
	check("forged env, no token", forged+"BEIGE_CALL_TOKEN= attrib", "session=[] chat=[]", true, "")
	check("forged env, made-up token", forged+"BEIGE_CALL_TOKEN=0123456789abcdef0123456789abcdef attrib", "session=[] chat=[]", true, "")

	// A process that outlives its exec: its token has expired.
	g.tool(t, a, "exec", map[string]any{"command": "(sleep 1; attrib > late.txt) >/dev/null 2>&1 &"})
	var late string
	for range 100 {
		data, _ := os.ReadFile(filepath.Join(g.home.Workspace(a), "late.txt"))
		if late = string(data); strings.Contains(late, "session=") {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if !strings.Contains(late, "session=[]") {
		t.Errorf("a call after its exec ended: %q", late)
	}
	if rec := lastRecord(t, g, a, "attrib"); !rec.Unattributed || rec.Session != "" {
		t.Errorf("late call audited as %+v", rec)
	}
}
