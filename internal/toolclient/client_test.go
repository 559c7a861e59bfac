package toolclient

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/beige-dev/beige/internal/proto"
	"github.com/beige-dev/beige/internal/toolbridge"
)

func server(t *testing.T, h toolbridge.Handler) string {
	return serverOf(t, h).Path()
}

func serverOf(t *testing.T, h toolbridge.Handler) *toolbridge.Server {
	t.Helper()
	d, err := os.MkdirTemp("", "tc")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	os.Chmod(d, 0o700)
	s, err := toolbridge.Listen(filepath.Join(d, "gateway.sock"), "travel", h, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func envOf(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

func TestClient(t *testing.T) {
	var seen proto.ToolRequest
	var seenAgent string
	srv := serverOf(t, func(ctx context.Context, agent string, req proto.ToolRequest) proto.ToolResponse {
		seen, seenAgent = req, agent
		switch req.Args[0] {
		case "ok":
			return proto.ToolResponse{Success: true, Output: "On branch main\n", Error: "progress\n"}
		case "fail":
			return proto.ToolResponse{Success: false, Output: "partial", Error: "fatal: no", ExitCode: 128}
		case "nocode":
			return proto.ToolResponse{Success: false, Error: "broken"}
		}
		return proto.ToolResponse{Success: true}
	})
	token, release := srv.Attribute(proto.ParseSessionKey("travel", "telegram:42:7"))
	defer release()
	env := envOf(map[string]string{
		SocketEnv:           srv.Path(),
		proto.CallTokenEnv:  token,
		"BEIGE_SESSION_KEY": "telegram:42:7",
		"BEIGE_CHANNEL":     "telegram",
		"BEIGE_AGENT_NAME":  "someone-else",
		"BEIGE_CHAT_ID":     "42",
		"BEIGE_THREAD_ID":   "7",
	})
	tests := []struct {
		args                []string
		wd                  string
		code                int
		stdout, stderr, cwd string
	}{
		{[]string{"git", "ok", "a b"}, "/workspace/repo/sub", 0, "On branch main\n", "progress\n", "repo/sub"},
		{[]string{"git", "fail"}, "/workspace", 128, "partial", "fatal: no\n", "."},
		{[]string{"git", "nocode"}, "/tmp", 1, "", "broken\n", ""},
		{[]string{"git", "x"}, "/workspacex", 0, "", "", ""},
	}
	for _, tt := range tests {
		var out, errb bytes.Buffer
		code := run(tt.args, env, tt.wd, &out, &errb)
		if code != tt.code || out.String() != tt.stdout || errb.String() != tt.stderr {
			t.Errorf("%v in %s: code %d, stdout %q, stderr %q; want %d, %q, %q", tt.args, tt.wd, code, out.String(), errb.String(), tt.code, tt.stdout, tt.stderr)
		}
		if seen.Tool != "git" || seen.Cwd != tt.cwd || strings.Join(seen.Args, "|") != strings.Join(tt.args[1:], "|") {
			t.Errorf("%v: gateway saw %+v", tt.args, seen)
		}
		sc := seen.SessionContext
		if seenAgent != "travel" || sc == nil || sc.AgentName != "travel" || sc.SessionKey != "telegram:42:7" ||
			sc.Channel != "telegram" || sc.ChatID != "42" || sc.ThreadID != "7" {
			t.Errorf("%v: agent %q, session context %+v", tt.args, seenAgent, sc)
		}
	}
}

func TestClientErrors(t *testing.T) {
	var out, errb bytes.Buffer
	missing := filepath.Join(t.TempDir(), "gateway.sock")
	code := run([]string{"git", "status"}, envOf(map[string]string{SocketEnv: missing}), "/workspace", &out, &errb)
	if code != 126 || !strings.Contains(errb.String(), "beige: cannot reach the gateway at "+missing+": no such file or directory") {
		t.Errorf("missing socket: code %d, stderr %q", code, errb.String())
	}

	errb.Reset()
	if code := run(nil, nil, "/", &out, &errb); code != 2 || !strings.Contains(errb.String(), "usage") {
		t.Errorf("no tool: code %d, stderr %q", code, errb.String())
	}
	errb.Reset()
	if code := run([]string{"../x"}, nil, "/", &out, &errb); code != 2 {
		t.Errorf("bad tool name: code %d, stderr %q", code, errb.String())
	}

	sock := server(t, func(ctx context.Context, agent string, req proto.ToolRequest) proto.ToolResponse {
		return proto.ToolResponse{Success: true}
	})
	errb.Reset()
	big := strings.Repeat("x", proto.MaxToolFrame)
	if code := run([]string{"git", big}, envOf(map[string]string{SocketEnv: sock}), "/", &out, &errb); code != 2 || !strings.Contains(errb.String(), "too large") {
		t.Errorf("huge args: code %d, stderr %q", code, errb.String())
	}
}

func TestRelCwd(t *testing.T) {
	for wd, want := range map[string]string{
		"/workspace": ".", "/workspace/": ".", "/workspace/a/b": "a/b", "/workspace/a/../b": "b",
		"/workspaces": "", "/": "", "": "", "relative": "", "/tmp/workspace": "",
	} {
		if got := relCwd(wd); got != want {
			t.Errorf("relCwd(%q) = %q, want %q", wd, got, want)
		}
	}
}

// TestClientSessionComesFromToken: the session the gateway sees is the one
// of the call token in the env; BEIGE_* variables alone (which the agent
// can set to anything) attribute nothing.
func TestClientSessionComesFromToken(t *testing.T) {
	var seen proto.ToolRequest
	srv := serverOf(t, func(ctx context.Context, agent string, req proto.ToolRequest) proto.ToolResponse {
		seen = req
		return proto.ToolResponse{Success: true}
	})
	token, release := srv.Attribute(proto.ParseSessionKey("travel", "tui:travel:default"))
	defer release()
	forged := map[string]string{SocketEnv: srv.Path(), "BEIGE_SESSION_KEY": "telegram:123456789:77", "BEIGE_CHANNEL": "telegram", "BEIGE_CHAT_ID": "123456789"}
	var out, errb bytes.Buffer
	if code := run([]string{"git"}, envOf(forged), "/workspace", &out, &errb); code != 0 {
		t.Fatalf("code %d: %s", code, errb.String())
	}
	if !seen.Unattributed || seen.SessionContext.SessionKey != "" || seen.SessionContext.ChatID != "" {
		t.Errorf("forged env: gateway saw %+v (unattributed %v)", seen.SessionContext, seen.Unattributed)
	}
	forged[proto.CallTokenEnv] = token
	if code := run([]string{"git"}, envOf(forged), "/workspace", &out, &errb); code != 0 {
		t.Fatalf("code %d: %s", code, errb.String())
	}
	if seen.Unattributed || seen.SessionContext.SessionKey != "tui:travel:default" || seen.SessionContext.Channel != "tui" {
		t.Errorf("with token: gateway saw %+v (unattributed %v)", seen.SessionContext, seen.Unattributed)
	}
}
