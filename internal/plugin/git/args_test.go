package git

import (
	"encoding/json"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/beige-dev/beige/internal/config"
)

func TestParseArgsAllowed(t *testing.T) {
	allow := argOptions{allowForcePush: []string{"del", "wip/*"}}
	tests := []struct {
		cwd  string
		args []string
	}{
		{".", []string{"status"}},
		{".", []string{"status", "--porcelain", "-sb"}},
		{".", []string{"--no-pager", "log", "--oneline", "-5"}},
		{".", []string{"-P", "--literal-pathspecs", "log", "-n", "3"}},
		{".", []string{"commit", "-m", "/abs/path and --output in a message"}},
		{".", []string{"commit", "-am", "-F is fine inside a message"}},
		{".", []string{"commit", "--message", "/x", "--author", "A <a@b>"}},
		{".", []string{"log", "-S", "/usr/bin", "--grep", "/x"}},
		{".", []string{"log", "--format=%H %s", "--since=2.weeks"}},
		{".", []string{"diff", "HEAD~1..HEAD", "--stat"}},
		{".", []string{"diff", "a..b", "--", "file"}},
		{".", []string{"show", "HEAD:../x"}},
		{"a/b", []string{"add", "../file", "./x"}},
		{".", []string{"add", "-A"}},
		{".", []string{"push", "-u", "origin", "main"}},
		{".", []string{"push", "origin", "main", "--follow-tags"}},
		{".", []string{"push", "/tmp/bare.git", "main"}},
		{".", []string{"push", "--force", "origin", "del"}},
		{".", []string{"push", "-f", "origin", "wip/x"}},
		{".", []string{"push", "origin", "+del", "main"}},
		{".", []string{"push", "origin", "+main:del"}},
		{".", []string{"push", "origin", ":del"}},
		{".", []string{"push", "--delete", "origin", "del"}},
		{".", []string{"push", "--force-with-lease=del:abc", "origin", "del"}},
		{".", []string{"push", "--force", "--no-force", "origin", "main"}},
		{".", []string{"push", "origin", ":"}},
		{".", []string{"fetch", "origin", "+main:refs/remotes/origin/main"}},
		{".", []string{"fetch", "--all", "--prune"}},
		{".", []string{"pull", "--rebase", "origin", "main"}},
		{".", []string{"clone", "https://example.com/x.git"}},
		{".", []string{"clone", "--depth", "1", "-b", "main", "git@github.com:o/r.git", "dir"}},
		{"sub", []string{"clone", "/tmp/local-repo", "../copy"}},
		{".", []string{"init"}},
		{".", []string{"init", "-b", "main", "sub/dir"}},
		{".", []string{"remote", "add", "origin", "/tmp/bare.git"}},
		{".", []string{"remote", "-v"}},
		{".", []string{"remote", "set-url", "origin", "https://x/y"}},
		{".", []string{"branch", "-u", "origin/main"}},
		{".", []string{"branch", "-D", "old"}},
		{".", []string{"checkout", "-b", "new", "origin/main"}},
		{".", []string{"switch", "-c", "feature"}},
		{".", []string{"restore", "--source", "HEAD~2", "file"}},
		{".", []string{"reset", "--hard", "HEAD~1"}},
		{".", []string{"tag", "-a", "v1", "-m", "release"}},
		{".", []string{"merge", "--no-ff", "-s", "ort", "-X", "theirs", "x"}},
		{".", []string{"merge", "--strategy=recursive", "x"}},
		{".", []string{"rebase", "-i", "HEAD~2"}},
		{".", []string{"rebase", "--continue"}},
		{".", []string{"cherry-pick", "-x", "abc"}},
		{".", []string{"revert", "--no-edit", "abc"}},
		{".", []string{"stash", "push", "-m", "wip"}},
		{".", []string{"stash", "pop"}},
		{".", []string{"rev-parse", "--git-dir", "--show-toplevel", "HEAD"}},
		{".", []string{"ls-files", "-x", "*.o", "--others"}},
		{".", []string{"blame", "-L", "1,5", "file"}},
		{".", []string{"describe", "--tags", "--match", "v*"}},
		{".", []string{"shortlog", "-sn"}},
		{".", []string{"grep", "-n", "-e", "/usr", "--", "*.go"}},
		{".", []string{"config", "user.name", "Beige Bot"}},
		{".", []string{"config", "--get", "user.email"}},
		{".", []string{"config", "--list"}},
		{".", []string{"config", "remote.origin.url", "/tmp/bare.git"}},
		{".", []string{"config", "set", "branch.main.rebase", "true"}},
		{".", []string{"config", "get", "core.hooksPath"}},
		{".", []string{"version"}},
		{".", []string{"--version"}},
		{".", []string{"status", "-h"}},
	}
	for _, tt := range tests {
		inv, err := parseArgs(tt.args, tt.cwd, allow)
		if err != nil {
			t.Errorf("%q (in %s): refused: %v", tt.args, tt.cwd, err)
			continue
		}
		if inv.sub == "config" && !slices.Contains(inv.args, "--local") {
			t.Errorf("%q: config without --local: %q", tt.args, inv.args)
		}
	}
}

func TestParseArgsRefused(t *testing.T) {
	allow := argOptions{allowForcePush: []string{"del"}}
	tests := []struct {
		cwd  string
		args []string
		want string
	}{
		{".", nil, "no subcommand"},
		{".", []string{"clone", "--shared", "/srv/git/a.git", "x"}, "--shared is not allowed"},
		{".", []string{"clone", "-qs", "/srv/git/a.git", "x"}, "-s (--shared) is not allowed"},
		{".", []string{"fetch", "--recurse-submodules-default=yes", "origin"}, "--recurse-submodules is not allowed"},
		{".", []string{"log", "-p", "--submodule=diff"}, "--submodule is not allowed"},
		{".", []string{"diff", "--submodule"}, "--submodule is not allowed"},
		{".", []string{"-C", "/", "status"}, "git -C is not allowed: run git from the folder instead"},
		{".", []string{"-C/", "status"}, "git -C is not allowed"},
		{".", []string{"-c", "core.sshCommand=touch /tmp/pwned", "fetch"}, "git -c is not allowed"},
		{".", []string{"-ccore.pager=sh", "log"}, "git -c is not allowed"},
		{".", []string{"--config-env=core.pager=X", "log"}, "--config-env is not allowed"},
		{".", []string{"--git-dir=/etc", "status"}, "--git-dir is not allowed"},
		{".", []string{"--git", "/etc", "status"}, "--git-dir is not allowed"},
		{".", []string{"--work-tree", "/", "status"}, "--work-tree is not allowed"},
		{".", []string{"--exec-path=/tmp", "status"}, "--exec-path is not allowed"},
		{".", []string{"--namespace=x", "log"}, "--namespace is not allowed"},
		{".", []string{"--super-prefix=x", "log"}, "--super-prefix is not allowed"},
		{".", []string{"--bare", "log"}, "--bare is not allowed"},
		{".", []string{"-p", "log"}, "no pager"},
		{".", []string{"--help"}, "not available"},
		{".", []string{"--weird", "log"}, "global option '--weird' is not allowed"},
		{".", []string{"--version", "x"}, "takes no arguments"},
		{".", []string{"submodule", "update"}, "'submodule' is not allowed"},
		{".", []string{"bisect", "run", "sh"}, "'bisect' is not allowed"},
		{".", []string{"filter-branch"}, "not allowed"},
		{".", []string{"archive", "HEAD"}, "not allowed"},
		{".", []string{"help", "git"}, "not allowed"},
		{".", []string{"upload-pack", "."}, "not allowed"},
		{".", []string{"credential", "fill"}, "not allowed"},
		{".", []string{"am"}, "not allowed"},
		{".", []string{"fetch", "--upload-pack=touch /tmp/x", "origin"}, "--upload-pack is not allowed"},
		{".", []string{"fetch", "--upload", "x", "origin"}, "--upload-pack is not allowed"},
		{".", []string{"fetch", "-u", "origin"}, "fetch -u"},
		{".", []string{"pull", "--upload-pack", "x"}, "--upload-pack is not allowed"},
		{".", []string{"clone", "-u", "sh", "https://x/y"}, "clone -u"},
		{".", []string{"clone", "--upload-pack", "sh", "https://x/y"}, "--upload-pack is not allowed"},
		{".", []string{"push", "--receive-pack=sh", "origin"}, "--receive-pack is not allowed"},
		{".", []string{"push", "--exec=sh", "origin"}, "--exec is not allowed"},
		{".", []string{"clone", "--template=/tmp/t", "https://x/y"}, "--template is not allowed"},
		{".", []string{"init", "--template", "/tmp/t"}, "--template is not allowed"},
		{".", []string{"init", "--separate-git-dir", "/tmp/x"}, "--separate-git-dir is not allowed"},
		{".", []string{"clone", "-c", "core.hooksPath=/x", "https://x/y"}, "clone -c is not allowed"},
		{".", []string{"clone", "--config=core.x=y", "https://x/y"}, "clone -c/--config is not allowed"},
		{".", []string{"clone", "--recurse-submodules", "https://x/y"}, "submodules"},
		{".", []string{"clone", "--recursive", "https://x/y"}, "submodules"},
		{".", []string{"clone", "--reference", "/home/u/repo", "https://x/y"}, "--reference is not allowed"},
		{".", []string{"clone", "--mirror", "https://x/y"}, "--mirror is not allowed"},
		{".", []string{"clone", "https://x/y", "/tmp/evil"}, "absolute folder"},
		{".", []string{"clone", "https://x/y", "../../evil"}, "outside the workspace"},
		{".", []string{"clone", "https://x/y", "a", "b"}, "at most one folder"},
		{".", []string{"init", "/tmp/x"}, "absolute folder"},
		{"a", []string{"init", "../../x"}, "outside the workspace"},
		{".", []string{"push", "--force", "origin", "main"}, "force push to the remote branch 'main' is not allowed; to allow it, add \"main\" to allowForcePush"},
		{".", []string{"push", "-f", "origin", "main"}, "force push to the remote branch 'main'"},
		{".", []string{"push", "-uf", "origin", "main"}, "force push to the remote branch 'main'"},
		{".", []string{"push", "origin", "+main"}, "force push to the remote branch 'main'"},
		{".", []string{"push", "origin", "del", "+main"}, "force push to the remote branch 'main'"},
		{".", []string{"push", "origin", "+del:refs/heads/main"}, "force push to the remote branch 'main'"},
		{".", []string{"push", "--force-with-lease", "origin", "main"}, "force push"},
		{".", []string{"push", "--force-with-lease=main:abc", "origin", "main"}, "force push"},
		{".", []string{"push", "--force-if-includes", "origin", "main"}, "force push"},
		{".", []string{"push", "-f"}, "needs the branch named"},
		{".", []string{"push", "--force", "origin"}, "needs the branch named"},
		{".", []string{"push", "origin", ":main"}, "deleting the remote branch 'main' is not allowed"},
		{".", []string{"push", "--delete", "origin", "main"}, "deleting the remote branch 'main'"},
		{".", []string{"push", "-d", "origin", "main"}, "deleting the remote branch 'main'"},
		{".", []string{"push", "--mirror", "origin"}, "--mirror is not allowed"},
		{".", []string{"push", "--prune", "origin"}, "--prune is not allowed"},
		{".", []string{"push", "--all", "--force", "origin", "del"}, "all branches"},
		{".", []string{"push", "origin", "+refs/heads/*:refs/heads/*"}, "name the branch explicitly"},
		{".", []string{"push", "origin", "+HEAD"}, "name the branch explicitly"},
		{".", []string{"push", "+main"}, "not a repository"},
		{".", []string{"push", "--signed", "origin", "main"}, "signing"},
		{".", []string{"push", "--repo=../src", "main"}, "--repo is not allowed"},
		{".", []string{"fetch", "--multiple", "origin", "../src"}, "--multiple is not allowed"},
		{".", []string{"log", "--output=/tmp/x"}, "--output is not allowed"},
		{".", []string{"log", "--output", "/tmp/x"}, "--output is not allowed"},
		{".", []string{"log", "--outp=/tmp/x"}, "abbreviates --output"},
		{".", []string{"show", "--output=x"}, "--output is not allowed"},
		{".", []string{"diff", "--no-index", "a", "b"}, "--no-index is not allowed"},
		{".", []string{"diff", "/etc/passwd", "/dev/null"}, "absolute path '/etc/passwd'"},
		{".", []string{"diff", "../../etc/passwd", "x"}, "leads outside the workspace"},
		{".", []string{"diff", "-O/etc/passwd"}, "-O is not allowed"},
		{".", []string{"diff", "--orderfile=/etc/x"}, "--orderfile is not allowed"},
		{".", []string{"log", "/etc/passwd"}, "absolute path"},
		{".", []string{"add", "/etc/passwd"}, "absolute path"},
		{"a", []string{"add", "../../x"}, "leads outside the workspace"},
		{".", []string{"add", "--", "../x"}, "leads outside the workspace"},
		{".", []string{"status", "--help"}, "--help is not available"},
		{".", []string{"commit", "-F", "/home/u/.ssh/id_rsa"}, "commit -F is not allowed"},
		{".", []string{"commit", "--file=/x"}, "-F/--file is not allowed"},
		{".", []string{"commit", "-aF", "x"}, "commit -F is not allowed"},
		{".", []string{"commit", "-t", "/x"}, "commit -t is not allowed"},
		{".", []string{"commit", "--template=/x"}, "--template is not allowed"},
		{".", []string{"commit", "-S", "-m", "x"}, "signing"},
		{".", []string{"commit", "--gpg-sign", "-m", "x"}, "signing"},
		{".", []string{"commit", "--pathspec-from-file=/x"}, "--pathspec-from-file is not allowed"},
		{".", []string{"add", "--pathspec-from-file", "/x"}, "--pathspec-from-file is not allowed"},
		{".", []string{"tag", "-s", "v1"}, "signing"},
		{".", []string{"tag", "-u", "key", "v1"}, "signing"},
		{".", []string{"tag", "-F", "/x", "v1"}, "tag -F is not allowed"},
		{".", []string{"merge", "-s", "evil", "x"}, "merge strategy 'evil' is not allowed"},
		{".", []string{"merge", "-sevil", "x"}, "merge strategy 'evil'"},
		{".", []string{"merge", "--strategy=../../x", "x"}, "merge strategy '../../x'"},
		{".", []string{"merge", "-F", "/x"}, "merge -F is not allowed"},
		{".", []string{"rebase", "-x", "touch /tmp/p"}, "rebase -x/--exec is not allowed"},
		{".", []string{"rebase", "--exec", "sh"}, "--exec is not allowed"},
		{".", []string{"rebase", "-ix", "sh"}, "rebase -x"},
		{".", []string{"rebase", "-s", "foo"}, "merge strategy 'foo'"},
		{".", []string{"cherry-pick", "--strategy=foo", "x"}, "merge strategy 'foo'"},
		{".", []string{"pull", "-s", "foo"}, "merge strategy 'foo'"},
		{".", []string{"grep", "-O", "pattern"}, "grep -O is not allowed"},
		{".", []string{"grep", "-nO", "pattern"}, "grep -O is not allowed"},
		{".", []string{"grep", "--open-files-in-pager=vim", "x"}, "--open-files-in-pager is not allowed"},
		{".", []string{"grep", "-f", "/etc/passwd"}, "grep -f is not allowed"},
		{".", []string{"grep", "--no-index", "x"}, "--no-index is not allowed"},
		{".", []string{"blame", "--contents", "/etc/passwd", "f"}, "--contents is not allowed"},
		{".", []string{"blame", "-S", "/x", "f"}, "blame -S is not allowed"},
		{".", []string{"blame", "--ignore-revs-file=/x", "f"}, "--ignore-revs-file is not allowed"},
		{".", []string{"ls-files", "-X", "/etc/x"}, "ls-files -X is not allowed"},
		{".", []string{"ls-files", "--exclude-from=/x"}, "--exclude-from is not allowed"},
		{".", []string{"checkout", "--recurse-submodules", "x"}, "submodules"},
		{".", []string{"remote", "add", "--mirror=push", "x", "url"}, "--mirror is not allowed"},
		{".", []string{"config", "--global", "user.name", "x"}, "--global is not allowed"},
		{".", []string{"config", "--system", "--list"}, "--system is not allowed"},
		{".", []string{"config", "--file", "/x", "--list"}, "--file is not allowed"},
		{".", []string{"config", "-f", "/x", "--list"}, "-f is not allowed"},
		{".", []string{"config", "--blob", "HEAD:x", "--list"}, "--blob is not allowed"},
		{".", []string{"config", "core.hooksPath", "/tmp"}, "setting 'core.hooksPath' is not allowed"},
		{".", []string{"config", "core.fsmonitor", "touch x"}, "setting 'core.fsmonitor'"},
		{".", []string{"config", "alias.st", "!sh"}, "setting 'alias.st'"},
		{".", []string{"config", "--add", "filter.x.clean", "sh"}, "setting 'filter.x.clean'"},
		{".", []string{"config", "--replace-all", "credential.helper", "x"}, "setting 'credential.helper'"},
		{".", []string{"config", "include.path", "/x"}, "setting 'include.path'"},
		{".", []string{"config", "core.bare", "true"}, "setting 'core.bare'"},
		{".", []string{"config", "set", "core.pager", "x"}, "setting 'core.pager'"},
		{".", []string{"config", "--edit"}, "--edit is not allowed"},
		{".", []string{"config", "edit"}, "config edit is not allowed"},
		{".", []string{"config", "--unset", "core.hooksPath"}, "setting 'core.hooksPath'"},
	}
	for _, tt := range tests {
		_, err := parseArgs(tt.args, tt.cwd, allow)
		if err == nil {
			t.Errorf("%q (in %s): allowed", tt.args, tt.cwd)
			continue
		}
		if !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%q: error %q, want it to contain %q", tt.args, err, tt.want)
		}
	}
}

func TestKeyAllowed(t *testing.T) {
	for key, want := range map[string]bool{
		"core.repositoryformatversion": true, "CORE.FileMode": true, "remote.origin.url": true,
		"remote.My.Remote.fetch": true, "branch.feature/x.merge": true, "user.email": true,
		"core.fsmonitor": false, "core.hookspath": false, "core.sshcommand": false, "core.pager": false,
		"core.editor": false, "core.worktree": false, "core.askpass": false, "core.gitproxy": false,
		"filter.lfs.clean": false, "diff.x.textconv": false, "diff.external": false, "merge.x.driver": false,
		"alias.st": false, "include.path": false, "includeif.gitdir:/x.path": false, "credential.helper": false,
		"credential.https://x.helper": false, "gpg.program": false, "remote.origin.uploadpack": false,
		"remote.origin.receivepack": false, "remote.origin.vcs": false, "remote.origin.push": false,
		"remote.origin.proxy": false, "protocol.allow": false, "url.x.insteadof": false, "http.cookiefile": false,
		"commit.template": false, "core.excludesfile": false, "core.attributesfile": false,
		"submodule.x.update": false, "uploadpack.packobjectshook": false, "core.alternaterefscommand": false,
		"remote.url": false, "user.x.name": false, "core": false, "": false, "core.": false,
	} {
		if got := keyAllowed(key); got != want {
			t.Errorf("keyAllowed(%q) = %v, want %v", key, got, want)
		}
	}
}

func TestManifestMatches(t *testing.T) {
	data, err := docs.ReadFile("plugin.json")
	if err != nil {
		t.Fatal(err)
	}
	var m config.Manifest
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	if m.Name != "git" || !slices.Equal(m.Provides.Tools, []string{"git"}) {
		t.Errorf("manifest %+v", m)
	}
	if !slices.Equal(m.Commands, Subcommands) {
		t.Errorf("plugin.json commands %v\nallowed subcommands %v", m.Commands, Subcommands)
	}
	keys := slices.Sorted(maps.Keys(specs))
	if sorted := slices.Sorted(slices.Values(Subcommands)); !slices.Equal(keys, sorted) {
		t.Errorf("specs %v\nSubcommands %v", keys, sorted)
	}
}

// FuzzParseArgs checks that whatever parseArgs accepts keeps to the rules:
// only harmless global options, an allowed subcommand, and none of the
// options that run programs.
func FuzzParseArgs(f *testing.F) {
	for _, s := range []string{
		"status", "-c\x00x=y\x00log", "push\x00-f\x00origin\x00main", "clone\x00-u\x00x\x00url",
		"config\x00core.pager\x00x", "commit\x00-m\x00msg", "--no-pager\x00log\x00--output=x",
		"merge\x00-s\x00ort", "rebase\x00-ix\x00sh", "grep\x00-nO", "diff\x00/etc/passwd",
	} {
		f.Add(s, ".")
	}
	f.Fuzz(func(t *testing.T, line, cwd string) {
		args := strings.Split(line, "\x00")
		inv, err := parseArgs(args, cwd, argOptions{})
		if err != nil {
			return
		}
		for _, g := range inv.globals {
			if !slices.Contains(allowedGlobals, g) {
				t.Fatalf("%q: global %q accepted", args, g)
			}
		}
		if _, ok := specs[inv.sub]; !ok {
			t.Fatalf("%q: subcommand %q accepted", args, inv.sub)
		}
		for _, a := range inv.args {
			if a == "--" {
				break
			}
			name, _, _ := strings.Cut(strings.TrimPrefix(a, "--"), "=")
			if !strings.HasPrefix(a, "--") || name == "" {
				continue
			}
			for _, bad := range []string{"upload-pack", "receive-pack", "exec", "template", "output", "open-files-in-pager", "separate-git-dir", "no-index", "pathspec-from-file"} {
				if strings.HasPrefix(bad, name) {
					t.Fatalf("%q: %q accepted", args, a)
				}
			}
		}
		if inv.sub == "config" && !slices.Contains(inv.args, "--local") {
			t.Fatalf("%q: config without --local", args)
		}
	})
}
