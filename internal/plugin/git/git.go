// Package git is the built-in git plugin: the tool `git`, which runs the
// gateway host's git in the agent's workspace, with the host's credentials,
// and refuses everything that would let the agent — who controls the
// workspace, .git/ included — run programs or reach files on the host. The
// threat model is written down in README.md, which is also the tool's
// documentation in the sandbox (/tools/packages/git/README.md).
package git

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/beige-dev/beige/internal/plugin"
)

//go:embed plugin.json README.md SKILL.md
var docs embed.FS

// Name is the plugin's and the tool's name.
const Name = "git"

// DefaultTimeout is how long one git command may run unless the plugin's
// config says otherwise ("timeout", in seconds).
const DefaultTimeout = 120 * time.Second

func init() {
	plugin.Register(plugin.Builtin{Name: Name, Docs: docs, New: New})
}

// Plugin is the git plugin.
type Plugin struct {
	env plugin.Env

	lookOnce sync.Once
	gitPath  string
	lookErr  error
	// lookPath finds the host's git; tests replace it.
	lookPath func(string) (string, error)
}

var _ plugin.Plugin = (*Plugin)(nil)

// New creates the plugin. The host's git is looked up at the first call, so
// that a gateway without git still starts (and says so when git is used).
func New(env plugin.Env) (plugin.Plugin, error) {
	return &Plugin{env: env, lookPath: exec.LookPath}, nil
}

// Register registers the tool git.
func (p *Plugin) Register(r *plugin.Registrar) error {
	desc := "Git version control, run on the gateway host with its credentials."
	if p.env.Manifest != nil && p.env.Manifest.Description != "" {
		desc = p.env.Manifest.Description
	}
	return r.Tool(plugin.Tool{
		Name:        Name,
		Description: desc,
		Commands:    Subcommands,
		Handler:     p.handle,
	})
}

func (p *Plugin) git() (string, error) {
	p.lookOnce.Do(func() {
		path, err := p.lookPath("git")
		if err == nil {
			path, err = filepath.Abs(path)
		}
		p.gitPath, p.lookErr = path, err
	})
	return p.gitPath, p.lookErr
}

// settings are the plugin's config options.
type settings struct {
	allowForcePush []string
	localRemotes   []string
	timeout        time.Duration
}

// readSettings reads the merged plugin config:
//
//	allowForcePush: ["del", "wip/*"]  branches that may be force-pushed or
//	                                  deleted on a remote (path.Match patterns)
//	localRemotes: ["/srv/git/a.git"]  host repositories (absolute paths)
//	                                  that may be used as remotes; no
//	                                  other local path ever is
//	timeout: 120                      seconds one git command may run
func readSettings(cfg map[string]any) (settings, error) {
	s := settings{timeout: DefaultTimeout}
	var err error
	if s.allowForcePush, err = stringList(cfg["allowForcePush"], "allowForcePush", "a list of branch names"); err != nil {
		return s, err
	}
	lr, err := stringList(cfg["localRemotes"], "localRemotes", "a list of absolute paths of host repositories")
	if err != nil {
		return s, err
	}
	for _, p := range lr {
		if !filepath.IsAbs(p) || filepath.Clean(p) != p && filepath.Clean(p)+"/" != p {
			return s, fmt.Errorf("git plugin config: localRemotes: %q is not a clean absolute path", p)
		}
		p = filepath.Clean(p)
		for _, magic := range []string{"/proc", "/dev", "/sys"} {
			if plugin.Within(magic, p) {
				return s, fmt.Errorf("git plugin config: localRemotes: %q is not a repository folder", p)
			}
		}
		s.localRemotes = append(s.localRemotes, p)
	}
	switch v := cfg["timeout"].(type) {
	case nil:
	case float64:
		if v <= 0 {
			return s, fmt.Errorf("git plugin config: timeout must be a positive number of seconds")
		}
		s.timeout = time.Duration(v * float64(time.Second))
	case int:
		if v <= 0 {
			return s, fmt.Errorf("git plugin config: timeout must be a positive number of seconds")
		}
		s.timeout = time.Duration(v) * time.Second
	default:
		return s, fmt.Errorf("git plugin config: timeout must be a number of seconds, got %T", v)
	}
	return s, nil
}

func stringList(v any, key, what string) ([]string, error) {
	switch v := v.(type) {
	case nil:
		return nil, nil
	case string:
		return []string{v}, nil
	case []string:
		return v, nil
	case []any:
		var out []string
		for _, e := range v {
			str, ok := e.(string)
			if !ok {
				return nil, fmt.Errorf("git plugin config: %s must be %s, got %v", key, what, e)
			}
			out = append(out, str)
		}
		return out, nil
	}
	return nil, fmt.Errorf("git plugin config: %s must be %s, got %T", key, what, v)
}

// safetyConfig is given to every git command with -c. The repository's own
// config cannot set these (see config.go); this also overrides the host's
// global config for them.
var safetyConfig = []string{
	"core.fsmonitor=false",
	"core.hooksPath=/dev/null",
	"core.sshCommand=ssh -o BatchMode=yes",
	"core.pager=cat",
	"safe.bareRepository=explicit",
	"submodule.recurse=false",
	"fetch.recurseSubmodules=false",
	"push.recurseSubmodules=no",
	"protocol.ext.allow=never",
	"protocol.fd.allow=never",
}

// noLocalTransport is added to safetyConfig unless the call contacts a
// repository the operator listed in localRemotes: git itself then refuses
// every local path and file:// URL as a remote, whatever spelling, link or
// legacy remote file named it. (A local transport runs upload-pack or
// receive-pack in that repository with its own config and hooks, without
// the -c settings above.)
const noLocalTransport = "protocol.file.allow=never"

// AllowedProtocols is GIT_ALLOW_PROTOCOL: no ext:: (runs a command), no
// fd::, no remote helpers, and no file (local paths) unless the call
// contacts an operator-listed local remote (AllowedProtocolsLocal).
// GIT_ALLOW_PROTOCOL overrides protocol.<name>.allow, so file must not be
// in it for protocol.file.allow=never to hold.
const (
	AllowedProtocols      = "git:http:https:ssh"
	AllowedProtocolsLocal = "file:" + AllowedProtocols
)

// gitEnv is the environment of git: what it needs to reach remotes with
// the host user's credentials (HOME for ~/.gitconfig and ~/.ssh, the ssh
// agent, proxies), nothing else of the gateway's (no provider keys), and
// settings that keep git from prompting, paging, editing or looking for a
// repository above the workspace.
func gitEnv(workspace string, localRemote bool) []string {
	protocols := AllowedProtocols
	if localRemote {
		protocols = AllowedProtocolsLocal
	}
	env := plugin.HostEnv("PATH", "HOME", "USER", "LOGNAME", "LANG", "LC_ALL", "LC_CTYPE", "LC_MESSAGES", "TZ",
		"SSH_AUTH_SOCK", "XDG_CONFIG_HOME",
		"http_proxy", "https_proxy", "no_proxy", "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "ALL_PROXY", "all_proxy")
	return append(env,
		"GIT_CONFIG_NOSYSTEM=1",
		"GIT_TERMINAL_PROMPT=0",
		"GIT_ALLOW_PROTOCOL="+protocols,
		"GIT_PROTOCOL_FROM_USER=0",
		"GIT_CEILING_DIRECTORIES="+filepath.Dir(workspace),
		"GIT_EDITOR=true",
		"GIT_SEQUENCE_EDITOR=true",
		"GIT_MERGE_AUTOEDIT=no",
		"GIT_PAGER=cat",
		"PAGER=cat",
		// Long options must be spelled out: the checks match whole names.
		"GIT_TEST_DISALLOW_ABBREVIATED_OPTIONS=1",
	)
}

func (p *Plugin) handle(ctx context.Context, call *plugin.Call) (plugin.Result, error) {
	set, err := readSettings(call.Config)
	if err != nil {
		return plugin.Result{ExitCode: 1}, err
	}
	gitPath, err := p.git()
	if err != nil {
		return plugin.Result{ExitCode: plugin.ExitNotFound}, errors.New("git: git is not installed on the gateway host")
	}
	cwdRel, err := filepath.Rel(call.Workspace, call.Dir)
	if err != nil || !plugin.Within(call.Workspace, call.Dir) {
		return plugin.Result{ExitCode: 1}, errors.New("git: the working folder is outside the workspace")
	}
	inv, err := parseArgs(call.Args, filepath.ToSlash(cwdRel), argOptions{allowForcePush: set.allowForcePush})
	if err != nil {
		return plugin.Result{ExitCode: 1}, err
	}

	// Nothing the agent runs may change the workspace between the checks
	// and the end of git's run: without a sandbox that can be paused, the
	// checks below would be advice, so git does not run at all.
	if call.Freeze == nil {
		return plugin.Result{ExitCode: 1}, errors.New("git: the git tool cannot run here: the gateway cannot pause this agent's sandbox while git runs")
	}
	thaw, err := call.Freeze(ctx)
	if err != nil {
		return plugin.Result{ExitCode: 1}, fmt.Errorf("git: cannot pause the sandbox while git runs: %w", err)
	}
	defer thaw()
	// The folder was resolved before the pause; the agent may have
	// swapped a part of it for a link since. Open it beneath the
	// workspace without following links, and run git in that very folder.
	dir, err := plugin.OpenDir(call.Workspace, call.Dir)
	if err != nil {
		return plugin.Result{ExitCode: 1}, refuse("the working folder /workspace/%s is not a folder of the workspace (a part of it is a symbolic link?)", filepath.ToSlash(cwdRel))
	}
	defer dir.Close()
	chk := &checker{git: gitPath, root: call.Workspace, dir: call.Dir, localRemotes: set.localRemotes}
	if err := p.check(ctx, chk, inv); err != nil {
		return plugin.Result{ExitCode: 1}, err
	}

	argv := make([]string, 0, 2*len(safetyConfig)+len(inv.globals)+3+len(inv.args))
	for _, c := range safetyConfig {
		argv = append(argv, "-c", c)
	}
	// The workspace belongs to the sandbox's (non-root) user, not to the
	// gateway's: without this git refuses it as of "dubious ownership".
	// What that check guards against (a repository's config running
	// commands) is what the checks above and safetyConfig neutralise.
	argv = append(argv, "-c", "safe.directory=*")
	if !chk.usesLocalRemote {
		argv = append(argv, "-c", noLocalTransport)
	}
	argv = append(argv, inv.globals...)
	argv = append(argv, inv.sub)
	if inv.sub == "clone" {
		// A local clone would hard-link the operator's object files into
		// the workspace, where the agent could change them.
		argv = append(argv, "--no-hardlinks")
	}
	argv = append(argv, inv.args...)
	return plugin.RunCommand(ctx, plugin.Command{
		Tool:    Name,
		Path:    gitPath,
		Args:    argv,
		Dir:     call.Dir,
		DirFile: dir,
		Env:     gitEnv(call.Workspace, chk.usesLocalRemote),
		Timeout: set.timeout,
	})
}

// check runs the checks that need the file system: the repositories git
// could use from the working folder, the remotes the call may contact and
// the folders it creates.
func (p *Plugin) check(ctx context.Context, chk *checker, inv *invocation) error {
	repos, err := chk.findRepos()
	if err != nil {
		return err
	}
	if inv.needsRepo && (len(repos) == 0 || repos[0].workTree == "") {
		return refuse("not inside a git repository in the workspace (run git init or git clone first)")
	}
	remoteNames := map[string]bool{}
	hasURL := map[string]bool{} // remotes with a url or pushurl in the config
	var remoteRefs []string     // values that name a remote or a location
	var workTree string
	for i, r := range repos {
		entries, err := chk.checkRepo(ctx, r)
		if err != nil {
			return err
		}
		if i > 0 {
			continue
		}
		if r.workTree != "" {
			// git status, diff, commit ... run git in every populated
			// submodule, with that repository's own config.
			if err := chk.checkSubmodules(ctx, r, 0); err != nil {
				return err
			}
		}
		workTree = r.workTree
		for _, e := range entries {
			section, sub, name, ok := splitKey(e.key)
			if !ok {
				continue
			}
			switch {
			case section == "remote" && sub != "":
				remoteNames[sub] = true
				if name == "url" || name == "pushurl" {
					hasURL[sub] = true
					if err := chk.checkLocation(e.value, r.workTree, chk.dir); err != nil {
						return refuseRemote(sub, err)
					}
				}
			case section == "branch" && (name == "remote" || name == "pushremote"),
				section == "remote" && name == "pushdefault":
				remoteRefs = append(remoteRefs, e.value)
			}
		}
	}
	for n := range remoteNames {
		// A remote without a URL is the location named like it (or the
		// URL of a legacy .git/remotes file, refused by checkRepo).
		if !hasURL[n] {
			if err := chk.checkLocation(n, workTree, chk.dir); err != nil {
				return refuseRemote(n, err)
			}
		}
	}
	for _, v := range remoteRefs {
		if !remoteNames[v] {
			if err := chk.checkLocation(v, workTree, chk.dir); err != nil {
				return err
			}
		}
	}
	for _, loc := range inv.remotes {
		if remoteNames[loc] {
			continue
		}
		if err := chk.checkLocation(loc, chk.dir, workTree); err != nil {
			return err
		}
	}
	for _, d := range inv.newDirs {
		if err := chk.checkNewDir(d); err != nil {
			return err
		}
	}
	if inv.sub == "diff" && workTree != "" {
		// git diff compares files outside the working tree as plain files
		// (an implicit --no-index); keep it to the repository.
		for _, a := range inv.paths {
			if strings.Contains(a, "..") && !plugin.Within(workTree, filepath.Clean(filepath.Join(chk.dir, a))) {
				return refuse("path '%s' is outside the repository", clip(a, 80))
			}
		}
	}
	return nil
}

func refuseRemote(name string, err error) error {
	var r *refusal
	if errors.As(err, &r) {
		return &refusal{msg: r.msg + fmt.Sprintf(" (remote '%s'; change it with git remote set-url)", name)}
	}
	return err
}
