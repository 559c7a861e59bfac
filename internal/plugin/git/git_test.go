package git

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/beige-dev/beige/internal/plugin"
)

// needGit skips the test when the host has no git.
func needGit(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("git")
	if err != nil {
		t.Skip("git is not installed on this host: skipping the tests that run it")
	}
	return p
}

type env struct {
	t      *testing.T
	p      *Plugin
	base   string // holds ws, home, and folders "outside" the workspace
	ws     string // the workspace, resolved
	home   string
	marker string // a file that hostile repository code would create
	cfg    map[string]any
	freeze func(context.Context) (func(), error)
}

func newEnv(t *testing.T) *env {
	t.Helper()
	needGit(t)
	base, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, base: base, ws: filepath.Join(base, "ws"), home: filepath.Join(base, "home"),
		marker: filepath.Join(base, "PWNED"), cfg: map[string]any{}}
	os.MkdirAll(e.ws, 0o755)
	os.MkdirAll(e.home, 0o755)
	// The host user's global config: who commits, nothing else.
	os.WriteFile(filepath.Join(e.home, ".gitconfig"), []byte("[user]\n\tname = Host User\n\temail = host@example.com\n[init]\n\tdefaultBranch = main\n"), 0o644)
	t.Setenv("HOME", e.home)
	t.Setenv("XDG_CONFIG_HOME", "")
	p, _ := New(plugin.Env{Name: "git"})
	e.p = p.(*Plugin)
	// The gateway always gives a freeze (the sandbox's docker pause); here
	// there is no sandbox to pause.
	e.freeze = func(context.Context) (func(), error) { return func() {}, nil }
	return e
}

// git runs the tool as the agent would, from the workspace folder cwd.
func (e *env) git(cwd string, args ...string) (plugin.Result, error) {
	e.t.Helper()
	dir := filepath.Join(e.ws, cwd)
	return e.p.handle(context.Background(), &plugin.Call{
		Agent: "travel", Tool: "git", Args: args, Workspace: e.ws, Dir: dir,
		Config: e.cfg, Freeze: e.freeze,
	})
}

// ok runs the tool and fails the test unless git succeeded.
func (e *env) ok(cwd string, args ...string) string {
	e.t.Helper()
	res, err := e.git(cwd, args...)
	if err != nil || res.ExitCode != 0 {
		e.t.Fatalf("git %q: exit %d, err %v\nstdout: %s\nstderr: %s", args, res.ExitCode, err, res.Output, res.Stderr)
	}
	return res.Output
}

// refused runs the tool and checks that it was refused with want.
func (e *env) refused(cwd, want string, args ...string) {
	e.t.Helper()
	res, err := e.git(cwd, args...)
	if err == nil || !strings.Contains(err.Error(), want) {
		e.t.Errorf("git %q: err %v (exit %d, stdout %q, stderr %q), want a refusal with %q", args, err, res.ExitCode, res.Output, res.Stderr, want)
	}
	if res.ExitCode == 0 {
		e.t.Errorf("git %q: refused with exit code 0", args)
	}
}

// hostGit runs the host's git directly (setting up fixtures).
func (e *env) hostGit(dir string, args ...string) {
	e.t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		e.t.Fatalf("git %q: %v\n%s", args, err, out.String())
	}
}

func (e *env) write(rel, content string) {
	e.t.Helper()
	p := filepath.Join(e.ws, rel)
	os.MkdirAll(filepath.Dir(p), 0o755)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) noMarker() {
	e.t.Helper()
	if _, err := os.Stat(e.marker); err == nil {
		e.t.Fatalf("repository-controlled code ran on the host: %s exists", e.marker)
	}
}

func TestGitBasics(t *testing.T) {
	e := newEnv(t)
	e.refused(".", "not inside a git repository", "status")
	e.ok(".", "init", "repo")
	e.write("repo/README.md", "hello\n")
	e.write("repo/src/main.go", "package main\n")
	st := e.ok("repo", "status", "--porcelain")
	if !strings.Contains(st, "?? README.md") || !strings.Contains(st, "?? src/") {
		t.Errorf("status:\n%s", st)
	}
	e.ok("repo", "add", "-A")
	e.ok("repo", "commit", "-q", "-m", "first commit")
	if log := e.ok("repo/src", "log", "--oneline"); !strings.Contains(log, "first commit") {
		t.Errorf("log from a subfolder:\n%s", log)
	}
	if out := e.ok("repo/src", "rev-parse", "--show-prefix"); strings.TrimSpace(out) != "src/" {
		t.Errorf("git did not run in the call's folder: prefix %q", out)
	}
	e.ok("repo", "config", "user.name", "Agent")
	if out := e.ok("repo", "config", "--get", "user.name"); strings.TrimSpace(out) != "Agent" {
		t.Errorf("config --get = %q", out)
	}
	e.ok("repo", "switch", "-c", "feature")
	e.write("repo/README.md", "hello again\n")
	if d := e.ok("repo", "diff"); !strings.Contains(d, "+hello again") {
		t.Errorf("diff:\n%s", d)
	}
	// git's own failures come back as they are.
	res, err := e.git("repo", "checkout", "no-such-branch")
	if err != nil || res.ExitCode == 0 || !strings.Contains(res.Stderr, "no-such-branch") {
		t.Errorf("failing checkout: %+v, %v", res, err)
	}
	if v := e.ok(".", "--version"); !strings.HasPrefix(v, "git version") {
		t.Errorf("--version = %q", v)
	}
}

func TestGitRefusedOptions(t *testing.T) {
	e := newEnv(t)
	e.ok(".", "init", "-q", "repo")
	e.refused("repo", "git -c is not allowed", "-c", "core.sshCommand=touch "+e.marker, "fetch", "origin")
	e.refused("repo", "git -C is not allowed: run git from the folder instead", "-C", "/", "status")
	e.refused("repo", "absolute path", "diff", "/etc/passwd", "/dev/null")
	e.refused("repo", "--output is not allowed", "log", "--output="+e.marker)
	e.refused("repo", "path '../x' is outside the repository", "diff", "../x", "../y")
	e.refused("repo", "leads outside the workspace", "diff", "../../x", "../y")
	e.noMarker()
}

// hostileConfigs would each make git run `touch marker` on the host.
func TestGitRefusesHostileRepository(t *testing.T) {
	e := newEnv(t)
	e.ok(".", "init", "-q", "repo")
	e.write("repo/file", "x\n")
	touch := "touch " + e.marker
	cfgPath := filepath.Join(e.ws, "repo", ".git", "config")
	clean, _ := os.ReadFile(cfgPath)
	hostile := map[string]string{
		"core.fsmonitor":               "[core]\n\tfsmonitor = \"" + touch + "\"\n",
		"core.hooksPath":               "[core]\n\thooksPath = ../hooks\n",
		"core.pager":                   "[core]\n\tpager = " + touch + "\n",
		"core.sshCommand":              "[core]\n\tsshCommand = " + touch + "\n",
		"alias.st":                     "[alias]\n\tst = !" + touch + "\n",
		"filter.x.clean":               "[filter \"x\"]\n\tclean = " + touch + "\n",
		"include.path":                 "[include]\n\tpath = " + filepath.Join(e.home, ".gitconfig") + "\n",
		"credential.helper":            "[credential]\n\thelper = !" + touch + "\n",
		"diff.external":                "[diff]\n\texternal = " + touch + "\n",
		"core.worktree":                "[core]\n\tworktree = /\n",
		"url.ext::sh.insteadof":        "[url \"ext::sh\"]\n\tinsteadOf = https://example.com/\n",
		"core.gitproxy":                "[core]\n\tgitProxy = " + touch + "\n",
		"core.alternaterefscommand":    "[core]\n\talternateRefsCommand = " + touch + "\n",
		"uploadpack.packobjectshook":   "[uploadpack]\n\tpackObjectsHook = " + touch + "\n",
		"remote.origin.receivepack":    "[remote \"origin\"]\n\turl = https://example.com/x\n\treceivepack = " + touch + "\n",
		"gpg.program":                  "[gpg]\n\tprogram = " + touch + "\n",
		"sequence.editor":              "[sequence]\n\teditor = " + touch + "\n",
		"includeif.onbranch:main.path": "[includeIf \"onbranch:main\"]\n\tpath = " + filepath.Join(e.home, ".gitconfig") + "\n",
	}
	for key, extra := range hostile {
		os.WriteFile(cfgPath, append(append([]byte{}, clean...), extra...), 0o644)
		e.refused("repo", "sets '"+strings.ToLower(key)+"', which is not allowed", "status")
		e.refused("repo/", "sets '"+strings.ToLower(key)+"'", "add", "file")
		e.noMarker()
	}
	// The config as a link to a host file.
	os.Remove(cfgPath)
	os.Symlink(filepath.Join(e.home, ".gitconfig"), cfgPath)
	e.refused("repo", "symbolic link", "status")
	os.Remove(cfgPath)
	os.WriteFile(cfgPath, clean, 0o644)

	// A hook the agent planted is not run.
	hook := filepath.Join(e.ws, "repo", ".git", "hooks", "pre-commit")
	os.WriteFile(hook, []byte("#!/bin/sh\n"+touch+"\n"), 0o755)
	e.ok("repo", "add", "file")
	e.ok("repo", "commit", "-q", "-m", "with a hook present")
	e.noMarker()

	// A .gitattributes filter with no driver configured is harmless.
	e.write("repo/.gitattributes", "* filter=evil diff=evil\n")
	e.write("repo/file", "y\n")
	e.ok("repo", "add", "-A")
	e.ok("repo", "diff", "--cached")
	e.noMarker()

	// A paused rebase whose todo list runs a command.
	rm := filepath.Join(e.ws, "repo", ".git", "rebase-merge")
	os.MkdirAll(rm, 0o755)
	os.WriteFile(filepath.Join(rm, "git-rebase-todo"), []byte("pick abc one\n  exec "+touch+"\n"), 0o644)
	e.refused("repo", "runs a command (exec)", "rebase", "--continue")
	e.refused("repo", "runs a command", "status")
	os.WriteFile(filepath.Join(rm, "git-rebase-todo"), nil, 0o644)
	os.WriteFile(filepath.Join(rm, "strategy"), []byte("../../evil\n"), 0o644)
	e.refused("repo", "merge strategy '../../evil'", "status")
	os.RemoveAll(rm)
	e.noMarker()
}

// TestGitSafetySettings checks the -c settings and environment on their
// own: even with a hostile config (as if the agent won a race against the
// checks), the fsmonitor and hooks do not run.
func TestGitSafetySettings(t *testing.T) {
	e := newEnv(t)
	e.hostGit(e.ws, "init", "-q", "repo")
	repo := filepath.Join(e.ws, "repo")
	os.WriteFile(filepath.Join(repo, "f"), []byte("x"), 0o644)
	f, _ := os.OpenFile(filepath.Join(repo, ".git", "config"), os.O_APPEND|os.O_WRONLY, 0)
	f.WriteString("[core]\n\tfsmonitor = \"touch " + e.marker + "\"\n\thooksPath = hooks\n")
	f.Close()
	os.MkdirAll(filepath.Join(repo, "hooks"), 0o755)
	os.WriteFile(filepath.Join(repo, "hooks", "pre-commit"), []byte("#!/bin/sh\ntouch "+e.marker+"\n"), 0o755)
	gitPath, _ := exec.LookPath("git")
	var argv []string
	for _, c := range safetyConfig {
		argv = append(argv, "-c", c)
	}
	argv = append(argv, "-c", noLocalTransport)
	for _, cmd := range [][]string{{"status"}, {"add", "f"}, {"commit", "-q", "-m", "x"}} {
		res, err := plugin.RunCommand(context.Background(), plugin.Command{
			Tool: "git", Path: gitPath, Args: append(append([]string{}, argv...), cmd...), Dir: repo, Env: gitEnv(e.ws, false),
		})
		if err != nil || res.ExitCode != 0 {
			t.Fatalf("%v: %+v %v", cmd, res, err)
		}
	}
	e.noMarker()
	// Local transports (which drop the -c settings in the child) are
	// refused by git itself, whatever the spelling.
	for _, h := range []string{"pre-receive", "update", "post-update"} {
		os.WriteFile(filepath.Join(repo, ".git", "hooks", h), []byte("#!/bin/sh\ntouch "+e.marker+"\n"), 0o755)
	}
	for _, url := range []string{"/proc/self/cwd", "file:///proc/self/cwd", ".", repo} {
		res, err := plugin.RunCommand(context.Background(), plugin.Command{
			Tool: "git", Path: gitPath, Args: append(append([]string{}, argv...), "push", url, "HEAD:refs/heads/x"), Dir: repo, Env: gitEnv(e.ws, false),
		})
		if err != nil || res.ExitCode == 0 || !strings.Contains(res.Stderr, "transport 'file' not allowed") {
			t.Errorf("push %s: %+v %v", url, res, err)
		}
	}
	e.noMarker()
}

func TestGitDirOutsideWorkspace(t *testing.T) {
	e := newEnv(t)
	outside := filepath.Join(e.base, "outside")
	e.hostGit(e.base, "init", "-q", "outside")

	// .git as a link out of the workspace.
	os.MkdirAll(filepath.Join(e.ws, "a"), 0o755)
	os.Symlink(filepath.Join(outside, ".git"), filepath.Join(e.ws, "a", ".git"))
	e.refused("a", "symbolic link that leads outside the workspace", "status")

	// A .git file pointing out.
	os.MkdirAll(filepath.Join(e.ws, "b"), 0o755)
	os.WriteFile(filepath.Join(e.ws, "b", ".git"), []byte("gitdir: "+filepath.Join(outside, ".git")+"\n"), 0o644)
	e.refused("b", "points to a repository outside the workspace", "status")
	os.WriteFile(filepath.Join(e.ws, "b", ".git"), []byte("gitdir: ../../outside/.git\n"), 0o644)
	e.refused("b", "points to a repository outside the workspace", "log")

	// A link inside .git that leads out.
	e.ok(".", "init", "-q", "c")
	os.Symlink(filepath.Join(e.home), filepath.Join(e.ws, "c", ".git", "objects", "ab"))
	e.refused("c", "objects/ab is a symbolic link that leads outside", "status")

	// The workspace inside a host repository: git must not use it.
	e.hostGit(e.base, "init", "-q", ".")
	e.refused(".", "not inside a git repository", "status")
	e.ok(".", "init", "-q", "d")
	if out := e.ok("d", "rev-parse", "--show-toplevel"); strings.TrimSpace(out) != filepath.Join(e.ws, "d") {
		t.Errorf("toplevel = %q", out)
	}
}

func TestGitPushAndForcePush(t *testing.T) {
	e := newEnv(t)
	remote := filepath.Join(e.base, "remote.git") // outside the workspace
	e.hostGit(e.base, "init", "-q", "--bare", "remote.git")
	e.cfg = map[string]any{"localRemotes": []any{remote}} // the operator's repository

	e.ok(".", "init", "-q", "repo")
	e.write("repo/a", "1\n")
	e.ok("repo", "add", "a")
	e.ok("repo", "commit", "-q", "-m", "one")
	e.ok("repo", "remote", "add", "origin", remote)
	e.ok("repo", "push", "-q", "-u", "origin", "main")
	e.ok("repo", "switch", "-q", "-c", "del")
	e.ok("repo", "push", "-q", "origin", "del")

	// Rewrite history on both branches.
	e.write("repo/a", "2\n")
	e.ok("repo", "commit", "-q", "-a", "--amend", "-m", "one, amended")
	e.refused("repo", "force push to the remote branch 'del' is not allowed", "push", "--force", "origin", "del")
	e.refused("repo", "force push", "push", "origin", "+del")
	e.refused("repo", "deleting the remote branch 'del'", "push", "origin", ":del")

	e.cfg = map[string]any{"allowForcePush": []any{"del"}, "localRemotes": []any{remote}}
	e.ok("repo", "push", "-q", "--force", "origin", "del")
	e.refused("repo", "force push to the remote branch 'main'", "push", "--force", "origin", "del:main")
	e.ok("repo", "push", "-q", "origin", "--delete", "del")

	// A plain fast-forward push still works, and the remote has it.
	e.ok("repo", "switch", "-q", "main")
	e.write("repo/b", "3\n")
	e.ok("repo", "add", "b")
	e.ok("repo", "commit", "-q", "-m", "two")
	e.ok("repo", "push", "-q")
	cmd := exec.Command("git", "--git-dir", remote, "log", "--format=%s", "main")
	out, _ := cmd.Output()
	if string(out) != "two\none\n" {
		t.Errorf("remote log = %q", out)
	}
}

func TestGitLocalRemoteInsideWorkspace(t *testing.T) {
	e := newEnv(t)
	e.ok(".", "init", "-q", "src")
	e.write("src/a", "1\n")
	e.ok("src", "add", "a")
	e.ok("src", "commit", "-q", "-m", "one")
	e.refused(".", "is a repository inside the workspace", "clone", "src", "copy")
	e.refused(".", "is a repository inside the workspace", "clone", "./src/.git", "copy")
	e.refused(".", "is a repository inside the workspace", "clone", "file://"+filepath.Join(e.ws, "src"), "copy")

	e.ok(".", "init", "-q", "dst")
	e.refused("dst", "inside the workspace", "remote", "add", "x", "../src")
	e.refused("dst", "inside the workspace", "remote", "add", "-f", "x", "src")
	e.refused("dst", "inside the workspace", "remote", "set-url", "origin", "../src")
	e.refused("dst", "inside the workspace", "fetch", "../src")
	e.refused("dst", "inside the workspace", "push", "../src", "main")
	// A remote URL the agent wrote into the config.
	f, _ := os.OpenFile(filepath.Join(e.ws, "dst", ".git", "config"), os.O_APPEND|os.O_WRONLY, 0)
	f.WriteString("[remote \"origin\"]\n\turl = ../src\n")
	f.Close()
	e.refused("dst", "remote 'origin'", "fetch", "origin")
	e.refused("dst", "remote 'origin'", "remote", "update")
	e.refused("dst", "remote 'origin'", "status")
}

func TestGitBlockedProtocols(t *testing.T) {
	e := newEnv(t)
	e.ok(".", "init", "-q", "r")
	for _, url := range []string{"ext::sh -c touch% " + e.marker, "fd::3", "evilhelper::whatever"} {
		res, err := e.git("r", "fetch", url)
		if err != nil || res.ExitCode == 0 {
			t.Errorf("fetch %q: %+v, %v", url, res, err)
		}
		res, err = e.git(".", "clone", url, "x")
		if err != nil || res.ExitCode == 0 {
			t.Errorf("clone %q: %+v, %v", url, res, err)
		}
	}
	e.noMarker()
}

func TestGitCloneAndInitFolders(t *testing.T) {
	e := newEnv(t)
	src := filepath.Join(e.base, "upstream")
	e.hostGit(e.base, "init", "-q", "upstream")
	os.WriteFile(filepath.Join(src, "f"), []byte("x"), 0o644)
	e.hostGit(src, "add", "f")
	e.hostGit(src, "commit", "-q", "-m", "up")

	e.refused(".", "localRemotes", "clone", "-q", src, "mine")
	e.cfg = map[string]any{"localRemotes": []any{src}}
	e.ok(".", "clone", "-q", src, "mine")
	if _, err := os.Stat(filepath.Join(e.ws, "mine", "f")); err != nil {
		t.Errorf("clone: %v", err)
	}
	if out := e.ok("mine", "log", "--format=%s"); out != "up\n" {
		t.Errorf("log of the clone = %q", out)
	}
	// Folders that lead out of the workspace, by path or through a link.
	os.Symlink(e.base, filepath.Join(e.ws, "out"))
	e.refused(".", "leads outside the workspace", "clone", "-q", src, "out/evil")
	e.refused(".", "leads outside the workspace", "init", "out/evil")
	e.refused(".", "absolute folder", "init", filepath.Join(e.base, "evil"))
	if _, err := os.Stat(filepath.Join(e.base, "evil")); err == nil {
		t.Error("a repository was created outside the workspace")
	}
}

func TestGitFreezesTheSandbox(t *testing.T) {
	e := newEnv(t)
	var log []string
	e.freeze = func(ctx context.Context) (func(), error) {
		log = append(log, "freeze")
		return func() { log = append(log, "thaw") }, nil
	}
	e.ok(".", "init", "-q", "r")
	if strings.Join(log, ",") != "freeze,thaw" {
		t.Errorf("freeze calls: %v", log)
	}
	e.freeze = func(ctx context.Context) (func(), error) { return nil, os.ErrPermission }
	e.refused("r", "cannot pause the sandbox", "status")
	// Without a freeze the checks would be advice: git does not run.
	e.freeze = nil
	e.refused("r", "the gateway cannot pause this agent's sandbox", "status")
}

func TestGitMissing(t *testing.T) {
	p := &Plugin{lookPath: func(string) (string, error) { return "", exec.ErrNotFound }}
	res, err := p.handle(context.Background(), &plugin.Call{Tool: "git", Args: []string{"status"}, Workspace: "/", Dir: "/"})
	if err == nil || !strings.Contains(err.Error(), "not installed") || res.ExitCode != 127 {
		t.Errorf("got %+v, %v", res, err)
	}
}
