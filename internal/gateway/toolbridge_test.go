package gateway

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/beige-dev/beige/internal/audit"
	"github.com/beige-dev/beige/internal/sandbox/docker/dockertest"
)

// lastRecord returns the newest audit record for agent and tool.
func lastRecord(t *testing.T, g *testGateway, agent, tool string) audit.Record {
	t.Helper()
	recs, err := audit.ReadFile(g.home.AuditLog())
	if err != nil {
		t.Fatal(err)
	}
	for i := len(recs) - 1; i >= 0; i-- {
		if recs[i].Agent == agent && recs[i].Tool == tool {
			return recs[i]
		}
	}
	t.Fatalf("no audit record of %s by %s", tool, agent)
	return audit.Record{}
}

func requireGit(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git on the host: the git tool runs the host's git")
	}
}

func TestGitThroughLaunchers(t *testing.T) {
	requireGit(t)
	rawframe := dockertest.StaticBinary(t, "./internal/gateway/testdata/rawframe")
	g := startGatewayWith(t, gatewaySetup{
		docker:  true, // launchers and the tool client run in the sandbox
		names:   []string{"gitter", "nogit"},
		plugins: "git: {}",
		extra:   map[string]string{"gitter": `tools: ["git"]`},
		sandbox: map[string]string{"gitter": fmt.Sprintf(`extraMounts: [%q]`, rawframe+":/opt/rawframe:ro")},
	})
	gitter, nogit := g.agents[0], g.agents[1]

	text, isErr := g.tool(t, gitter, "exec", map[string]any{"command": "git init -q . && git config user.email a@example.org && git config user.name A && echo hi > f && git add f && git commit -qm one && git status && git log --oneline"})
	if isErr || !strings.Contains(text, "On branch") || !strings.Contains(text, " one") {
		t.Fatalf("git in the sandbox: %q", text)
	}
	if rec := lastRecord(t, g, gitter, "git"); rec.Type != audit.TypeTool || rec.Decision != audit.DecisionAllowed || rec.Target != audit.TargetGateway {
		t.Errorf("audit: %+v", rec)
	}

	// An agent without the tool gets the spec's denial, exit 1, audited.
	text, isErr = g.tool(t, nogit, "exec", map[string]any{"command": "git status"})
	want := fmt.Sprintf("Permission denied: tool 'git' not allowed for agent '%s'", nogit)
	if !isErr || !strings.HasPrefix(text, "Exit code: 1") || !strings.Contains(text, want) {
		t.Errorf("denied git: %q", text)
	}
	if rec := lastRecord(t, g, nogit, "git"); rec.Decision != audit.DecisionDenied || rec.Phase != audit.PhaseFinished {
		t.Errorf("audit of the denial: %+v", rec)
	}

	// A hand-written client that claims to be another agent still acts as itself.
	frame := fmt.Sprintf(`{"type":"tool_request","tool":"git","args":["status"],"agent":%q,"sessionContext":{"agentName":%q}}`, nogit, nogit)
	text, _ = g.tool(t, gitter, "exec", map[string]any{"command": "/opt/rawframe /beige/gateway.sock '" + frame + "'"})
	if !strings.Contains(text, `"success":true`) {
		t.Errorf("spoofed frame: %q", text)
	}
	if rec := lastRecord(t, g, gitter, "git"); rec.Decision != audit.DecisionAllowed {
		t.Errorf("the spoofed call was not audited as %s's: %+v", gitter, rec)
	}

	// The tool folders and the client are read-only; an edited copy of a
	// launcher still reaches only the agent's own socket.
	for _, cmd := range []string{"touch /tools/bin/x", "touch /tools/packages/x", "cp /bin/busybox /beige/tool-client", "rm /tools/bin/git", "touch /beige/x"} {
		if text, isErr := g.tool(t, nogit, "exec", map[string]any{"command": cmd}); !isErr {
			t.Errorf("%s succeeded: %q", cmd, text)
		}
	}
	text, _ = g.tool(t, nogit, "exec", map[string]any{"command": "sed 's/tool-client git/tool-client anything/' /tools/bin/git > /workspace/l && sh /workspace/l"})
	if !strings.Contains(text, fmt.Sprintf("not allowed for agent '%s'", nogit)) {
		t.Errorf("edited launcher: %q", text)
	}
	if data, err := os.ReadFile(filepath.Join(g.home.Launchers(gitter), "git")); err != nil || !strings.Contains(string(data), `exec /beige/tool-client git "$@"`) {
		t.Errorf("launcher: %q %v", data, err)
	}
}

func TestGitHostileRepository(t *testing.T) {
	requireGit(t)
	marker := filepath.Join(t.TempDir(), "pwned")
	bare := filepath.Join(t.TempDir(), "remote.git")
	if out, err := exec.Command("git", "init", "-q", "--bare", bare).CombinedOutput(); err != nil {
		t.Fatalf("%v %s", err, out)
	}
	// The operator lists the host repository agents may push to: the only
	// way a local path is a remote.
	g := startGatewayWith(t, gatewaySetup{docker: true, names: []string{"hostile"}, plugins: fmt.Sprintf("git: { config: { localRemotes: [%q] } }", bare),
		extra: map[string]string{"hostile": `tools: ["git"]`}})
	a := g.agents[0]
	sh := func(cmd string) (string, bool) {
		return g.tool(t, a, "exec", map[string]any{"command": cmd})
	}
	if text, isErr := sh("git init -q . && git config user.email a@example.org && git config user.name A && echo x > f && git add f && git commit -qm one"); isErr {
		t.Fatal(text)
	}
	// A pushed commit reaches a bare repository outside the sandbox, with the host's git.
	if text, isErr := sh("git remote add origin " + bare + " && git push -q origin HEAD:main"); isErr {
		t.Errorf("push to a local bare repository: %q", text)
	}
	if out, err := exec.Command("git", "--git-dir", bare, "log", "--oneline", "main").CombinedOutput(); err != nil || !strings.Contains(string(out), "one") {
		t.Errorf("bare repository: %s %v", out, err)
	}
	// Force pushes and dangerous global options are refused.
	for _, cmd := range []string{"git push -f origin HEAD:main", "git push --force origin HEAD:main", "git push origin +HEAD:main", "git -c core.sshCommand='touch " + marker + "' fetch origin", "git -C / status"} {
		if text, isErr := sh(cmd); !isErr || !strings.Contains(strings.ToLower(text), "not allowed") && !strings.Contains(strings.ToLower(text), "refus") {
			t.Errorf("%s: %v %q", cmd, isErr, text)
		}
	}
	// A repository config or hook that would run code on the host never runs.
	sh(fmt.Sprintf("printf '[core]\\n\\tfsmonitor = touch %s\\n' >> .git/config", marker))
	sh(fmt.Sprintf("mkdir -p .git/hooks && printf '#!/bin/sh\\ntouch %s\\n' > .git/hooks/pre-commit && chmod +x .git/hooks/pre-commit", marker))
	sh("git status")
	sh("echo y >> f && git commit -qam two")
	sh("sed -i '/fsmonitor/d' .git/config && git commit -qam three")
	time.Sleep(100 * time.Millisecond)
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("the repository ran code on the host")
	}

	// Issue #10: a server-side hook planted in the workspace repository,
	// reached through a local path the gateway's process resolves
	// elsewhere. The hook would touch the marker and copy the gateway's
	// environment into the workspace.
	hook := fmt.Sprintf("#!/bin/sh\ntouch %s\nenv > envdump\n", marker)
	for _, h := range []string{"pre-receive", "update", "post-receive", "reference-transaction"} {
		sh(fmt.Sprintf("printf '%s' > .git/hooks/%s && chmod +x .git/hooks/%s", hook, h, h))
	}
	for _, cmd := range []string{
		"git push /proc/self/cwd HEAD:refs/heads/x",
		"git push file:///proc/self/cwd HEAD:refs/heads/x",
		"git remote add evil /proc/self/cwd",
		"git config remote.evil.url /proc/self/cwd; git push evil HEAD:refs/heads/x",
	} {
		if text, isErr := sh(cmd); !isErr {
			t.Errorf("%s: succeeded: %q", cmd, text)
		}
	}
	time.Sleep(100 * time.Millisecond)
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("a hook of the workspace repository ran on the host")
	}
	if text, _ := sh("cat envdump .git/envdump 2>/dev/null; true"); strings.Contains(text, "=") {
		t.Fatalf("the gateway's environment reached the workspace: %q", text)
	}
}

func TestExternalPlugin(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "plugin.json"), []byte(`{"name": "hello", "description": "Says hello.", "provides": {"tools": ["hello", "hello.hang"]}, "run": {"command": ["./hello.sh"], "timeout": 1}}`), 0o644)
	os.WriteFile(filepath.Join(dir, "hello.sh"), []byte("#!/bin/sh\nif [ \"$BEIGE_TOOL_NAME\" = hello.hang ]; then exec sleep 100; fi\nconfig=$(cat)\necho \"hello $* from $BEIGE_AGENT_NAME with $config\"\n"), 0o755)
	g := startGatewayWith(t, gatewaySetup{
		docker:  true, // launchers and the tool client run in the sandbox
		names:   []string{"ext"},
		plugins: fmt.Sprintf(`hello: { path: %q, config: { greeting: "hi" } }`, dir),
		extra:   map[string]string{"ext": `tools: ["hello", "hello.hang"]`},
	})
	a := g.agents[0]
	text, isErr := g.tool(t, a, "exec", map[string]any{"command": "hello world"})
	if isErr || !strings.Contains(text, "hello world from "+a) || !strings.Contains(text, `"greeting":"hi"`) {
		t.Errorf("external tool: %q", text)
	}
	start := time.Now()
	text, isErr = g.tool(t, a, "exec", map[string]any{"command": "hello.hang"})
	if !isErr || !strings.Contains(text, "timed out") || time.Since(start) > 10*time.Second {
		t.Errorf("hanging tool: %v %q after %v", isErr, text, time.Since(start))
	}
}
