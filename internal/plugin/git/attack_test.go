package git

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/beige-dev/beige/internal/plugin"
)

// gatewaySecret is in the gateway's environment during the attack tests: a
// hook that ran on the host would copy it into the workspace.
const gatewaySecret = "sk-ant-gateway-secret-7c1f"

// plantHooks writes every server-side and client-side hook into the
// repository's .git/hooks (and a hooks folder next to it): each writes the
// marker outside the workspace and copies the environment into the
// workspace.
func (e *env) plantHooks(repo string) {
	e.t.Helper()
	e.t.Setenv("ANTHROPIC_API_KEY", gatewaySecret)
	script := fmt.Sprintf("#!/bin/sh\ntouch %s\nenv > %s/envdump-$$\n", e.marker, e.ws)
	for _, dir := range []string{filepath.Join(e.ws, repo, ".git", "hooks"), filepath.Join(e.ws, repo, "hooks")} {
		os.MkdirAll(dir, 0o755)
		for _, h := range []string{"pre-receive", "update", "post-receive", "post-update", "reference-transaction",
			"push-to-checkout", "proc-receive", "pre-push", "pre-commit", "post-checkout", "post-merge", "pre-auto-gc"} {
			if err := os.WriteFile(filepath.Join(dir, h), []byte(script), 0o755); err != nil {
				e.t.Fatal(err)
			}
		}
	}
}

// noLeak checks that no hook ran and that the gateway's secret is nowhere
// in the workspace.
func (e *env) noLeak() {
	e.t.Helper()
	e.noMarker()
	out, _ := exec.Command("grep", "-rl", gatewaySecret, e.ws).Output()
	if len(out) > 0 {
		e.t.Fatalf("the gateway's environment was copied into the workspace: %s", out)
	}
}

// failed runs the tool and checks that the call did not succeed.
func (e *env) failed(cwd string, args ...string) {
	e.t.Helper()
	res, err := e.git(cwd, args...)
	if err == nil && res.ExitCode == 0 {
		e.t.Errorf("git %q succeeded (stdout %q, stderr %q); want it refused", args, res.Output, res.Stderr)
	}
}

func (e *env) repoWithCommit(name string) {
	e.t.Helper()
	e.ok(".", "init", "-q", name)
	e.write(name+"/a", "1\n")
	e.ok(name, "add", "a")
	e.ok(name, "commit", "-q", "-m", "one")
}

// TestGitPushToProcSelfCwd is the report's host code execution: a push to
// /proc/self/cwd passed the check (resolved in the gateway's process) and
// ran receive-pack, with the repository's own hooks, in the workspace.
func TestGitPushToProcSelfCwd(t *testing.T) {
	e := newEnv(t)
	e.repoWithCommit("repo")
	e.plantHooks("repo")
	for _, url := range []string{
		"/proc/self/cwd", "file:///proc/self/cwd", "/proc/self/cwd/", "/proc/self/cwd/.git",
		"/proc/thread-self/cwd", "file://localhost/proc/self/cwd",
		"/proc/self/root" + filepath.Join(e.ws, "repo"), "/dev/fd/../cwd",
		fmt.Sprintf("/proc/%d/cwd", os.Getpid()),
	} {
		e.failed("repo", "push", url, "HEAD:refs/heads/x")
		e.failed("repo", "fetch", url)
		e.failed(".", "clone", "-q", url, "copy")
		e.noLeak()
	}
	// The same location as a remote: added with git remote, or written
	// into .git/config by the agent.
	e.failed("repo", "remote", "add", "evil", "/proc/self/cwd")
	cfg := filepath.Join(e.ws, "repo", ".git", "config")
	clean, _ := os.ReadFile(cfg)
	for _, url := range []string{"/proc/self/cwd", "file:///proc/self/cwd"} {
		os.WriteFile(cfg, append(append([]byte{}, clean...), "[remote \"evil\"]\n\turl = "+url+"\n"...), 0o644)
		e.failed("repo", "push", "evil", "HEAD:refs/heads/x")
		os.WriteFile(cfg, append(append([]byte{}, clean...), "[remote \"origin\"]\n\turl = https://example.com/x.git\n\tpushurl = "+url+"\n[branch \"main\"]\n\tremote = origin\n"...), 0o644)
		e.failed("repo", "push", "origin", "HEAD:refs/heads/x")
		e.failed("repo", "push")
		e.noLeak()
	}
	os.WriteFile(cfg, clean, 0o644)
}

// TestGitRemoteWithoutURL: a remote with no url in the config is the path
// named like it, or the URL of a legacy .git/remotes or .git/branches file;
// both let git reach a repository of the workspace.
func TestGitRemoteWithoutURL(t *testing.T) {
	e := newEnv(t)
	e.repoWithCommit("repo")
	e.plantHooks("repo")
	// A repository named like the remote, next to the working folder.
	e.hostGit(filepath.Join(e.ws, "repo"), "init", "-q", "--bare", "evil")
	e.plantHooks("repo/evil")
	cfg := filepath.Join(e.ws, "repo", ".git", "config")
	clean, _ := os.ReadFile(cfg)
	os.WriteFile(cfg, append(append([]byte{}, clean...), "[remote \"evil\"]\n\tfetch = +refs/heads/*:refs/remotes/evil/*\n"...), 0o644)
	e.failed("repo", "push", "evil", "HEAD:refs/heads/x")
	e.failed("repo", "fetch", "evil")
	e.noLeak()

	os.WriteFile(cfg, append(append([]byte{}, clean...), "[remote \"legacy\"]\n\tfetch = +refs/heads/*:refs/remotes/legacy/*\n"...), 0o644)
	for _, f := range []string{"remotes/legacy", "branches/legacy"} {
		e.write("repo/.git/"+f, "URL: /proc/self/cwd\nPush: HEAD:refs/heads/x\n")
		if f == "branches/legacy" {
			e.write("repo/.git/"+f, "/proc/self/cwd\n")
		}
		e.failed("repo", "push", "legacy", "HEAD:refs/heads/x")
		e.failed("repo", "status")
		os.Remove(filepath.Join(e.ws, "repo", ".git", f))
		e.noLeak()
	}
}

// TestGitLocalRemotesOnlyOperatorConfigured: a local path is a remote only
// when the operator listed it in localRemotes; then a push works (as the
// host user), by name or by path.
func TestGitLocalRemotesOnlyOperatorConfigured(t *testing.T) {
	e := newEnv(t)
	bare := filepath.Join(e.base, "srv", "project.git")
	other := filepath.Join(e.base, "srv", "other.git")
	os.MkdirAll(filepath.Join(e.base, "srv"), 0o755)
	e.hostGit(e.base, "init", "-q", "--bare", bare)
	e.hostGit(e.base, "init", "-q", "--bare", other)
	e.repoWithCommit("repo")

	// Not configured: refused, and git is not asked.
	e.refused("repo", "localRemotes", "push", bare, "main")
	e.refused("repo", "localRemotes", "remote", "add", "origin", bare)

	e.cfg = map[string]any{"localRemotes": []any{bare}}
	e.ok("repo", "remote", "add", "origin", bare)
	e.ok("repo", "push", "-q", "-u", "origin", "main")
	e.write("repo/b", "2\n")
	e.ok("repo", "add", "b")
	e.ok("repo", "commit", "-q", "-m", "two")
	e.ok("repo", "push", "-q")
	e.ok("repo", "push", "-q", "file://"+bare, "main:copy")
	e.ok("repo", "fetch", "-q", "origin")
	e.ok(".", "clone", "-q", bare, "clone")
	if out, err := exec.Command("git", "--git-dir", bare, "log", "--format=%s", "main").Output(); err != nil || string(out) != "two\none\n" {
		t.Errorf("operator's repository: %q, %v", out, err)
	}
	// Another host repository, or a spelling that is not the configured
	// one, is still refused.
	e.refused("repo", "localRemotes", "push", other, "main")
	e.refused("repo", "localRemotes", "push", bare+"/../other.git", "main")
	e.refused("repo", "localRemotes", "push", "/proc/self/cwd", "main")

	// A configured path that leads into the workspace is refused.
	os.Symlink(filepath.Join(e.ws, "repo"), filepath.Join(e.base, "srv", "ws.git"))
	e.cfg = map[string]any{"localRemotes": []any{bare, filepath.Join(e.base, "srv", "ws.git")}}
	e.refused("repo", "inside the workspace", "push", filepath.Join(e.base, "srv", "ws.git"), "main:y")
	for _, bad := range []any{"relative/path", "/proc/self/cwd", 3} {
		e.cfg = map[string]any{"localRemotes": []any{bad}}
		e.refused("repo", "localRemotes", "status")
	}
}

// TestGitAlternatesOutside: objects/info/alternates naming a host
// repository's objects would let the agent read that repository.
func TestGitAlternatesOutside(t *testing.T) {
	e := newEnv(t)
	host := filepath.Join(e.base, "private")
	e.hostGit(e.base, "init", "-q", "private")
	os.WriteFile(filepath.Join(host, "secret.txt"), []byte("host-secret-data\n"), 0o644)
	e.hostGit(host, "add", "secret.txt")
	e.hostGit(host, "commit", "-q", "-m", "secret")
	blob, err := exec.Command("git", "-C", host, "rev-parse", "HEAD:secret.txt").Output()
	if err != nil {
		t.Fatal(err)
	}
	e.repoWithCommit("repo")
	for _, alt := range []string{filepath.Join(host, ".git", "objects"), "../../../../private/.git/objects"} {
		e.write("repo/.git/objects/info/alternates", alt+"\n")
		res, _ := e.git("repo", "show", strings.TrimSpace(string(blob)))
		if strings.Contains(res.Output, "host-secret-data") {
			t.Fatalf("alternates %s: a host repository's object was read: %q", alt, res.Output)
		}
		e.refused("repo", "alternates", "status")
	}
	os.Remove(filepath.Join(e.ws, "repo", ".git", "objects", "info", "alternates"))
	e.ok("repo", "status")
}

// TestGitWorkingFolderIsLink: the call's folder is a link to a host
// repository (as if swapped after it was resolved): git must not run there.
func TestGitWorkingFolderIsLink(t *testing.T) {
	e := newEnv(t)
	outside := filepath.Join(e.base, "outside")
	e.hostGit(e.base, "init", "-q", "outside")
	e.hostGit(outside, "commit", "-q", "--allow-empty", "-m", "host")
	os.Symlink(outside, filepath.Join(e.ws, "link"))
	res, _ := e.git("link", "commit", "-q", "--allow-empty", "-m", "pwned")
	if out, _ := exec.Command("git", "-C", outside, "log", "--format=%s").Output(); string(out) != "host\n" {
		t.Fatalf("git ran in the host repository: its log is %q (tool: %+v)", out, res)
	}
	e.refused("link", "working folder", "status")
}

// swapper replaces the folder ws/sub by a link to the host repository
// outside, and back.
type swapper struct{ sub, outside string }

func (s swapper) toLink() {
	os.Rename(s.sub, s.sub+".real")
	os.Symlink(s.outside, s.sub)
}

func (s swapper) back() {
	os.Remove(s.sub)
	os.Rename(s.sub+".real", s.sub)
}

func swapSetup(t *testing.T) (*env, swapper) {
	e := newEnv(t)
	outside := filepath.Join(e.base, "outside")
	e.hostGit(e.base, "init", "-q", "outside")
	e.hostGit(outside, "commit", "-q", "--allow-empty", "-m", "host")
	e.ok(".", "init", "-q", "sub")
	e.ok("sub", "commit", "-q", "--allow-empty", "-m", "ws")
	return e, swapper{sub: filepath.Join(e.ws, "sub"), outside: outside}
}

func (e *env) hostLog(dir string) string {
	out, _ := exec.Command("git", "-C", dir, "log", "--format=%s").Output()
	return string(out)
}

// TestGitFolderSwappedBeforeFreeze: the agent swaps the call's folder for
// a link to a host repository after the gateway resolved it and before the
// sandbox is paused (here: in the freeze itself). git must not run in the
// host repository.
func TestGitFolderSwappedBeforeFreeze(t *testing.T) {
	e, s := swapSetup(t)
	dir, root, err := plugin.ResolveDir(e.ws, "sub")
	if err != nil {
		t.Fatal(err)
	}
	freeze := func(context.Context) (func(), error) {
		s.toLink() // the agent's last move before the pause
		return s.back, nil
	}
	res, err := e.p.handle(context.Background(), &plugin.Call{Agent: "travel", Tool: "git", Workspace: root, Dir: dir,
		Args: []string{"commit", "-q", "--allow-empty", "-m", "pwned"}, Config: map[string]any{}, Freeze: freeze})
	if log := e.hostLog(s.outside); log != "host\n" {
		t.Fatalf("git ran in the host repository: its log is %q (tool: %+v, %v)", log, res, err)
	}
	if err == nil || res.ExitCode == 0 {
		t.Errorf("got %+v, %v; want a refusal", res, err)
	}
}

// TestGitSwapRace races the swap against calls, as an agent looping in its
// sandbox would, with a freeze that really stops the swapping (like docker
// pause). No call may change the host repository. Bounded in count and time.
func TestGitSwapRace(t *testing.T) {
	e, s := swapSetup(t)
	var mu sync.Mutex // held by the "sandbox" while it runs a step
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; i < 100_000; i++ {
			select {
			case <-stop:
				return
			default:
			}
			time.Sleep(time.Duration(i%5) * 100 * time.Microsecond)
			mu.Lock()
			s.toLink()
			mu.Unlock()
			time.Sleep(time.Duration(i%3) * 100 * time.Microsecond)
			mu.Lock()
			s.back()
			mu.Unlock()
		}
	}()
	freeze := func(context.Context) (func(), error) {
		mu.Lock()
		return mu.Unlock, nil
	}
	deadline := time.Now().Add(8 * time.Second)
	ran := 0
	for i := 0; i < 30 && time.Now().Before(deadline); i++ {
		dir, root, err := plugin.ResolveDir(e.ws, "sub")
		if err != nil {
			continue // the folder was a link just then
		}
		res, err := e.p.handle(context.Background(), &plugin.Call{Agent: "travel", Tool: "git", Workspace: root, Dir: dir,
			Args: []string{"commit", "-q", "--allow-empty", "-m", "pwned"}, Config: map[string]any{}, Freeze: freeze})
		if err == nil && res.ExitCode == 0 {
			ran++
		}
	}
	close(stop)
	<-done
	if log := e.hostLog(s.outside); log != "host\n" {
		t.Fatalf("git ran in the host repository: its log is %q", log)
	}
	t.Logf("%d calls ran", ran)
}

// TestGitSubmoduleConfig: git status in a repository runs git in each
// populated submodule with that submodule's own config, which the checks
// of the main repository did not look at: a clean filter there runs on the
// host.
func TestGitSubmoduleConfig(t *testing.T) {
	e := newEnv(t)
	e.repoWithCommit("repo")
	e.ok("repo", "init", "-q", "sub")
	e.write("repo/sub/f", "x\n")
	e.ok("repo/sub", "add", "f")
	e.ok("repo/sub", "commit", "-q", "-m", "sub")
	e.ok("repo", "add", "sub") // a gitlink
	e.ok("repo", "commit", "-q", "-m", "with sub")
	e.ok("repo", "status")

	f, _ := os.OpenFile(filepath.Join(e.ws, "repo", "sub", ".git", "config"), os.O_APPEND|os.O_WRONLY, 0)
	f.WriteString("[filter \"x\"]\n\tclean = \"touch " + e.marker + "; cat\"\n")
	f.Close()
	e.write("repo/sub/.git/info/attributes", "* filter=x\n")
	e.write("repo/sub/f", "z\n") // same size: git must hash it, through the filter
	for _, cmd := range [][]string{{"status"}, {"diff"}, {"commit", "-q", "-a", "-m", "x"}, {"describe", "--dirty", "--always"}} {
		e.refused("repo", "sets 'filter.x.clean'", cmd...)
		e.noMarker()
	}
	// The hidden option behind pull's --recurse-submodules.
	e.refused("repo", "--recurse-submodules", "fetch", "--recurse-submodules-default=yes", "origin")
	e.noMarker()
}
