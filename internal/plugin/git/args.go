package git

import (
	"fmt"
	"path"
	"slices"
	"strings"
)

// refusal is a git call the plugin will not run; its text is for the agent.
type refusal struct{ msg string }

func (r *refusal) Error() string { return r.msg }

func refuse(format string, args ...any) error {
	return &refusal{msg: "git: " + fmt.Sprintf(format, args...)}
}

// invocation is a checked git call.
type invocation struct {
	globals []string // global options the agent gave, all harmless
	sub     string   // the subcommand
	args    []string // its arguments, possibly rewritten (config gets --local)
	// needsRepo: the call must run inside a repository of the workspace.
	needsRepo bool
	// remotes are repository arguments (URLs or paths) the call contacts.
	remotes []string
	// newDirs are folders the call creates (clone, init), relative to the
	// working folder.
	newDirs []string
	// paths are the positional arguments checked as paths (diff must keep
	// them inside the repository's working tree).
	paths []string
}

// argOptions are the plugin settings that change what is allowed.
type argOptions struct {
	// allowForcePush lists branch names (path.Match patterns) that may be
	// force-pushed or deleted on a remote.
	allowForcePush []string
}

// Global options that change nothing the plugin relies on.
var allowedGlobals = []string{
	"--no-pager", "-P", "--literal-pathspecs", "--glob-pathspecs", "--noglob-pathspecs",
	"--icase-pathspecs", "--no-replace-objects", "--no-optional-locks", "--no-advice",
}

// Global options refused, with the reason.
var refusedGlobals = map[string]string{
	"-C":             "git -C is not allowed: run git from the folder instead (cd DIR && git ...)",
	"-c":             "git -c is not allowed: per-call configuration could run programs on the gateway host",
	"--config-env":   "git --config-env is not allowed: per-call configuration could run programs on the gateway host",
	"--git-dir":      "git --git-dir is not allowed: run git from inside the repository's folder",
	"--work-tree":    "git --work-tree is not allowed: run git from inside the repository's folder",
	"--exec-path":    "git --exec-path is not allowed: it would run git's helpers from another folder",
	"--namespace":    "git --namespace is not allowed",
	"--super-prefix": "git --super-prefix is not allowed",
	"--bare":         "git --bare is not allowed: run git from inside a repository with a working tree",
	"-p":             "git -p is not allowed: there is no pager here",
	"--paginate":     "git --paginate is not allowed: there is no pager here",
	"--help":         "git --help is not available here (it opens a manual page); use git SUBCOMMAND -h for a summary",
	"-h":             "git -h is not available here; use git SUBCOMMAND -h for a summary",
	"--html-path":    "git --html-path is not available here",
	"--man-path":     "git --man-path is not available here",
	"--info-path":    "git --info-path is not available here",
	"--list-cmds":    "git --list-cmds is not available here",
}

// Subcommands is the allowlist of git subcommands, in the order they are
// documented (specs holds their option rules).
var Subcommands = []string{
	"status", "add", "rm", "mv", "commit", "log", "diff", "show", "branch", "checkout", "switch",
	"restore", "reset", "fetch", "pull", "push", "clone", "init", "remote", "tag", "merge", "rebase",
	"stash", "rev-parse", "ls-files", "blame", "cherry-pick", "revert", "describe", "shortlog", "grep",
	"config", "version",
}

type posKind int

const (
	posPaths       posKind = iota // every positional argument is checked as a path
	posNone                       // positional arguments are not paths (remote, config)
	posRemoteFirst                // the first is a repository (URL or path), the rest paths/refspecs
	posClone                      // <repository> [<directory>]
	posInit                       // [<directory>]
)

// spec describes a subcommand's options, as far as the checks need.
type spec struct {
	repo bool // must run inside a repository
	pos  posKind
	// shortVal lists short options that take a value, attached or as the
	// next argument; longVal the same for long options (without "--").
	// Only options whose value is required belong here: treating a flag
	// as taking a value would skip the check of the next argument.
	shortVal string
	longVal  []string
	// refuse and refuseShort map options to why they are refused. A long
	// option is also refused when abbreviated (any prefix of the name).
	refuse      map[string]string
	refuseShort map[byte]string
	// strategy: -s (when strategyShort) and --strategy take a merge
	// strategy, which must be built in.
	strategy, strategyShort bool
}

const (
	whyHostFile   = "it reads a file on the gateway host"
	whyRunsHost   = "it runs a program on the gateway host"
	whySigning    = "signing would use the gateway host's keys"
	whySubmodules = "submodules are not supported"
)

// commonRefused applies to every subcommand.
var commonRefused = map[string]string{
	"help":                "--help is not available here (it opens a manual page); use -h for a summary",
	"output":              "--output is not allowed: it writes a file on the gateway host; redirect the output in the sandbox instead",
	"pathspec-from-file":  "--pathspec-from-file is not allowed: " + whyHostFile + "; pass the paths as arguments",
	"recurse-submodules":  "--recurse-submodules is not allowed: " + whySubmodules,
	"submodule":           "--submodule is not allowed: " + whySubmodules,
	"upload-pack":         "--upload-pack is not allowed: " + whyRunsHost,
	"receive-pack":        "--receive-pack is not allowed: " + whyRunsHost,
	"exec":                "--exec is not allowed: " + whyRunsHost,
	"template":            "--template is not allowed: " + whyHostFile + "s",
	"separate-git-dir":    "--separate-git-dir is not allowed: the repository must stay inside the workspace",
	"gpg-sign":            "--gpg-sign is not allowed: " + whySigning,
	"no-index":            "--no-index is not allowed: it compares files outside the repository",
	"open-files-in-pager": "--open-files-in-pager is not allowed: " + whyRunsHost,
	"orderfile":           "--orderfile is not allowed: " + whyHostFile,
}

var logLong = []string{
	"max-count", "skip", "since", "after", "until", "before", "author", "committer",
	"grep", "grep-reflog", "min-age", "max-age", "exclude", "find-object", "line-prefix",
	"src-prefix", "dst-prefix", "anchored", "ignore-matching-lines", "diff-algorithm",
	"word-diff-regex", "ws-error-highlight", "inter-hunk-context", "skip-to", "rotate-to",
}

var diffShortRefused = map[byte]string{'O': "-O is not allowed: " + whyHostFile}

var specs = map[string]spec{
	"status": {repo: true},
	"add":    {repo: true},
	"rm":     {repo: true},
	"mv":     {repo: true},
	"commit": {repo: true, shortVal: "mCcFt",
		longVal: []string{"message", "file", "author", "date", "reuse-message", "reedit-message", "fixup", "squash", "trailer", "cleanup", "template"},
		refuse: map[string]string{
			"file": "git commit -F/--file is not allowed: " + whyHostFile + `; use -m "$(cat FILE)" instead`,
		},
		refuseShort: map[byte]string{
			'F': "git commit -F is not allowed: " + whyHostFile + `; use -m "$(cat FILE)" instead`,
			't': "git commit -t is not allowed: " + whyHostFile,
			'S': "git commit -S is not allowed: " + whySigning,
		}},
	"log":      {repo: true, shortVal: "nLSGIO", longVal: logLong, refuseShort: diffShortRefused},
	"show":     {repo: true, shortVal: "nLSGIO", longVal: logLong, refuseShort: diffShortRefused},
	"diff":     {repo: true, shortVal: "SGIO", longVal: logLong, refuseShort: diffShortRefused},
	"shortlog": {repo: true, longVal: []string{"group"}},
	"branch": {repo: true, shortVal: "u",
		longVal: []string{"set-upstream-to", "contains", "no-contains", "merged", "no-merged", "points-at", "sort", "format"}},
	"checkout": {repo: true, shortVal: "bB", longVal: []string{"orphan"}},
	"switch":   {repo: true, shortVal: "cC", longVal: []string{"create", "force-create", "orphan"}},
	"restore":  {repo: true, shortVal: "s", longVal: []string{"source"}},
	"reset":    {repo: true},
	"fetch": {repo: true, pos: posRemoteFirst, shortVal: "oj",
		longVal: []string{"depth", "deepen", "shallow-since", "shallow-exclude", "jobs", "server-option", "negotiation-tip", "refmap", "filter"},
		refuse: map[string]string{
			"update-head-ok": "--update-head-ok is not allowed",
			"multiple":       "git fetch --multiple is not allowed: fetch one remote at a time, or use --all",
		},
		refuseShort: map[byte]string{'u': "git fetch -u (--update-head-ok) is not allowed"}},
	"pull": {repo: true, pos: posRemoteFirst, shortVal: "sXj", strategy: true, strategyShort: true,
		longVal: []string{"strategy", "strategy-option", "depth", "deepen", "shallow-since", "shallow-exclude", "jobs", "server-option", "negotiation-tip"},
		refuseShort: map[byte]string{
			'S': "git pull -S is not allowed: " + whySigning,
			'u': "git pull -u is not allowed",
		}},
	"push": {repo: true, pos: posRemoteFirst, shortVal: "o", longVal: []string{"push-option"},
		refuse: map[string]string{
			"mirror": "git push --mirror is not allowed: it can overwrite and delete every branch of the remote",
			"prune":  "git push --prune is not allowed: it deletes remote branches",
			"signed": "git push --signed is not allowed: " + whySigning,
			"repo":   "git push --repo is not allowed: name the remote as the first argument",
		}},
	"clone": {pos: posClone, shortVal: "objuc",
		longVal: []string{"origin", "branch", "depth", "jobs", "filter", "server-option", "shallow-since", "shallow-exclude", "config", "reference", "reference-if-able", "bundle-uri", "ref-format"},
		refuse: map[string]string{
			"config":            "git clone -c/--config is not allowed: per-repository configuration could run programs on the gateway host",
			"reference":         "git clone --reference is not allowed: it reads repositories of the gateway host",
			"reference-if-able": "git clone --reference-if-able is not allowed: it reads repositories of the gateway host",
			"recursive":         "git clone --recursive is not allowed: " + whySubmodules,
			"bundle-uri":        "git clone --bundle-uri is not allowed",
			"mirror":            "git clone --mirror is not allowed; use a normal clone",
			"shared":            "git clone --shared is not allowed: the clone would read the objects of a repository of the gateway host (alternates)",
		},
		refuseShort: map[byte]string{
			's': "git clone -s (--shared) is not allowed: the clone would read the objects of a repository of the gateway host (alternates)",
			'c': "git clone -c is not allowed: per-repository configuration could run programs on the gateway host",
			'u': "git clone -u (--upload-pack) is not allowed: " + whyRunsHost,
		}},
	"init": {pos: posInit, shortVal: "b", longVal: []string{"initial-branch", "object-format", "ref-format"}},
	"remote": {repo: true, pos: posNone, shortVal: "tm",
		refuse: map[string]string{"mirror": "git remote --mirror is not allowed: mirror remotes force-push and delete on push"}},
	"tag": {repo: true, shortVal: "mFu",
		longVal: []string{"message", "file", "local-user", "sort", "contains", "no-contains", "points-at", "merged", "no-merged", "cleanup"},
		refuse: map[string]string{
			"file":       "git tag -F/--file is not allowed: " + whyHostFile + `; use -m "$(cat FILE)" instead`,
			"sign":       "git tag --sign is not allowed: " + whySigning,
			"local-user": "git tag --local-user is not allowed: " + whySigning,
		},
		refuseShort: map[byte]string{
			'F': "git tag -F is not allowed: " + whyHostFile + `; use -m "$(cat FILE)" instead`,
			's': "git tag -s is not allowed: " + whySigning,
			'u': "git tag -u is not allowed: " + whySigning,
		}},
	"merge": {repo: true, shortVal: "msXF", strategy: true, strategyShort: true,
		longVal: []string{"message", "file", "strategy", "strategy-option", "into-name", "cleanup"},
		refuse: map[string]string{
			"file": "git merge -F/--file is not allowed: " + whyHostFile + `; use -m "$(cat FILE)" instead`,
		},
		refuseShort: map[byte]string{
			'F': "git merge -F is not allowed: " + whyHostFile + `; use -m "$(cat FILE)" instead`,
			'S': "git merge -S is not allowed: " + whySigning,
		}},
	"rebase": {repo: true, shortVal: "sXx", strategy: true, strategyShort: true,
		longVal: []string{"onto", "strategy", "strategy-option", "exec"},
		refuseShort: map[byte]string{
			'x': "git rebase -x/--exec is not allowed: " + whyRunsHost,
			'S': "git rebase -S is not allowed: " + whySigning,
		}},
	"stash":     {repo: true, shortVal: "m", longVal: []string{"message"}, refuseShort: diffShortRefused},
	"rev-parse": {repo: true},
	"ls-files": {repo: true, shortVal: "xX", longVal: []string{"exclude", "exclude-from", "exclude-per-directory", "format", "with-tree"},
		refuse:      map[string]string{"exclude-from": "--exclude-from is not allowed: " + whyHostFile},
		refuseShort: map[byte]string{'X': "git ls-files -X is not allowed: " + whyHostFile}},
	"blame": {repo: true, shortVal: "LS", longVal: []string{"ignore-rev", "contents", "ignore-revs-file"},
		refuse: map[string]string{
			"contents":         "git blame --contents is not allowed: " + whyHostFile,
			"ignore-revs-file": "git blame --ignore-revs-file is not allowed: " + whyHostFile,
		},
		refuseShort: map[byte]string{'S': "git blame -S is not allowed: " + whyHostFile}},
	"cherry-pick": {repo: true, shortVal: "mX", strategy: true,
		longVal:     []string{"mainline", "strategy", "strategy-option", "cleanup"},
		refuseShort: map[byte]string{'S': "git cherry-pick -S is not allowed: " + whySigning}},
	"revert": {repo: true, shortVal: "mX", strategy: true,
		longVal:     []string{"mainline", "strategy", "strategy-option", "cleanup"},
		refuseShort: map[byte]string{'S': "git revert -S is not allowed: " + whySigning}},
	"describe": {repo: true, longVal: []string{"match", "exclude"}},
	"grep": {repo: true, shortVal: "efABCmO",
		longVal: []string{"max-count", "context", "after-context", "before-context", "threads", "max-depth"},
		refuseShort: map[byte]string{
			'O': "git grep -O is not allowed: " + whyRunsHost,
			'f': "git grep -f is not allowed: " + whyHostFile + "; use -e PATTERN",
		}},
	"config":  {repo: true, pos: posNone},
	"version": {},
}

// BuiltinStrategies are the merge strategies -s/--strategy may name.
var BuiltinStrategies = []string{"ort", "recursive", "resolve", "octopus", "ours", "subtree"}

// parseArgs checks a git command line (without "git") and returns what to
// run. cwdRel is the working folder relative to the workspace root ("."
// for the root), for the check that path arguments stay in the workspace.
func parseArgs(args []string, cwdRel string, opts argOptions) (*invocation, error) {
	inv := &invocation{}
	i := 0
	for ; i < len(args); i++ {
		a := args[i]
		if !strings.HasPrefix(a, "-") {
			break
		}
		if a == "--version" {
			inv.sub = "version"
			inv.args = []string{}
			if i+1 < len(args) {
				return nil, refuse("git --version takes no arguments")
			}
			inv.globals = append(inv.globals, args[:i]...)
			return inv, checkGlobals(inv.globals)
		}
		if slices.Contains(allowedGlobals, a) {
			continue
		}
		return nil, globalRefusal(a)
	}
	inv.globals = slices.Clone(args[:i])
	if i == len(args) {
		return nil, refuse("no subcommand given; allowed: %s", strings.Join(Subcommands, ", "))
	}
	inv.sub = args[i]
	rest := args[i+1:]
	sp, ok := specs[inv.sub]
	if !ok {
		return nil, refuse("'%s' is not allowed here; allowed subcommands: %s", clip(inv.sub, 40), strings.Join(Subcommands, ", "))
	}
	inv.needsRepo = sp.repo
	if inv.sub == "config" {
		out, err := parseConfigArgs(rest)
		if err != nil {
			return nil, err
		}
		inv.args = out
		return inv, nil
	}
	if inv.sub == "version" && len(rest) > 0 && rest[0] != "--build-options" {
		return nil, refuse("git version takes no arguments")
	}
	pos, flags, err := scanOptions(inv.sub, sp, rest)
	if err != nil {
		return nil, err
	}
	inv.args = slices.Clone(rest)

	switch sp.pos {
	case posPaths:
		for _, p := range pos {
			if err := checkPathArg(p, cwdRel); err != nil {
				return nil, err
			}
		}
		inv.paths = pos
	case posRemoteFirst:
		for j, p := range pos {
			if j == 0 {
				if strings.HasPrefix(p, "+") || strings.HasPrefix(p, ":") {
					return nil, refuse("'%s' is not a repository: name the remote first (git %s REMOTE REFSPEC...)", clip(p, 60), inv.sub)
				}
				inv.remotes = append(inv.remotes, p)
				continue
			}
			if err := checkPathArg(p, cwdRel); err != nil {
				return nil, err
			}
		}
	case posClone:
		if len(pos) == 0 {
			return nil, refuse("git clone needs a repository to clone")
		}
		if len(pos) > 2 {
			return nil, refuse("git clone takes a repository and at most one folder")
		}
		inv.remotes = append(inv.remotes, pos[0])
		if len(pos) == 2 {
			if err := checkNewDir(pos[1], cwdRel); err != nil {
				return nil, err
			}
			inv.newDirs = append(inv.newDirs, pos[1])
		}
	case posInit:
		if len(pos) > 1 {
			return nil, refuse("git init takes at most one folder")
		}
		if len(pos) == 1 {
			if err := checkNewDir(pos[0], cwdRel); err != nil {
				return nil, err
			}
			inv.newDirs = append(inv.newDirs, pos[0])
		}
	case posNone:
		// remote add NAME URL, remote set-url NAME NEWURL [OLDURL]: the
		// URL is checked against the workspace (add -f fetches at once).
		if inv.sub == "remote" && len(pos) >= 3 && (pos[0] == "add" || pos[0] == "set-url") {
			inv.remotes = append(inv.remotes, pos[2])
		}
	}
	if inv.sub == "push" {
		if err := checkPush(pos, flags, opts.allowForcePush); err != nil {
			return nil, err
		}
	}
	return inv, nil
}

func checkGlobals(gs []string) error {
	for _, g := range gs {
		if !slices.Contains(allowedGlobals, g) {
			return globalRefusal(g)
		}
	}
	return nil
}

func globalRefusal(a string) error {
	name, _, _ := strings.Cut(a, "=")
	if why, ok := refusedGlobals[name]; ok {
		return &refusal{msg: why}
	}
	switch {
	case strings.HasPrefix(a, "-C"):
		return &refusal{msg: refusedGlobals["-C"]}
	case strings.HasPrefix(a, "-c"):
		return &refusal{msg: refusedGlobals["-c"]}
	}
	for n, why := range refusedGlobals {
		if strings.HasPrefix(n, "--") && len(name) > 2 && strings.HasPrefix(n, name) {
			return &refusal{msg: why}
		}
	}
	return refuse("global option '%s' is not allowed here (allowed before the subcommand: %s)", clip(a, 40), strings.Join(allowedGlobals, " "))
}

// pushFlags are the push options checkPush needs.
type pushFlags struct {
	force, delete, all bool
}

// scanOptions walks a subcommand's arguments: it refuses what must be
// refused and returns the positional arguments (everything after "--"
// included) and, for push, its force/delete flags.
func scanOptions(sub string, sp spec, args []string) (pos []string, pf pushFlags, err error) {
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
			return append(pos, args[i+1:]...), pf, nil
		case a == "-" || !strings.HasPrefix(a, "-"):
			pos = append(pos, a)
		case strings.HasPrefix(a, "--"):
			name, val, hasVal := strings.Cut(a[2:], "=")
			if why := refusedLong(sub, sp, name); why != "" {
				return nil, pf, &refusal{msg: "git: " + why}
			}
			if sp.strategy && name == "strategy" {
				if !hasVal {
					if i+1 >= len(args) {
						return nil, pf, refuse("--strategy needs a value")
					}
					val = args[i+1]
				}
				if err := checkStrategy(val); err != nil {
					return nil, pf, err
				}
			}
			if sub == "push" {
				pushLong(&pf, name)
			}
			if !hasVal && slices.Contains(sp.longVal, name) {
				i++ // the value
			}
		default: // a cluster of short options: -abc, -mMESSAGE
			for j := 1; j < len(a); j++ {
				c := a[j]
				if why, ok := sp.refuseShort[c]; ok {
					return nil, pf, &refusal{msg: why}
				}
				if sp.strategyShort && c == 's' {
					val := a[j+1:]
					if val == "" {
						if i+1 >= len(args) {
							return nil, pf, refuse("-s needs a merge strategy")
						}
						val = args[i+1]
					}
					if err := checkStrategy(val); err != nil {
						return nil, pf, err
					}
				}
				if sub == "push" {
					switch c {
					case 'f':
						pf.force = true
					case 'd':
						pf.delete = true
					}
				}
				if strings.IndexByte(sp.shortVal, c) >= 0 {
					if j == len(a)-1 {
						i++ // the value is the next argument
					}
					break // the rest of the cluster is the value
				}
			}
		}
	}
	return pos, pf, nil
}

// refusedLong returns why --name is refused for sub, or "". An abbreviation
// of a refused option is refused too (git is also told to refuse
// abbreviations, see the environment in git.go).
func refusedLong(sub string, sp spec, name string) string {
	if name == "" {
		return ""
	}
	for _, m := range []map[string]string{sp.refuse, commonRefused} {
		if why, ok := m[name]; ok {
			return why
		}
	}
	if strings.HasPrefix(name, "recurse-submodules") { // -default, =...
		return commonRefused["recurse-submodules"]
	}
	for _, m := range []map[string]string{sp.refuse, commonRefused} {
		for n, why := range m {
			if strings.HasPrefix(n, name) {
				return why + fmt.Sprintf(" (--%s abbreviates --%s)", name, n)
			}
		}
	}
	return ""
}

func checkStrategy(s string) error {
	if !slices.Contains(BuiltinStrategies, s) {
		return refuse("merge strategy '%s' is not allowed: an unknown strategy runs a program on the gateway host (built in: %s)",
			clip(s, 40), strings.Join(BuiltinStrategies, ", "))
	}
	return nil
}

func pushLong(pf *pushFlags, name string) {
	switch name {
	case "force", "force-with-lease", "force-if-includes":
		pf.force = true
	case "no-force", "no-force-with-lease":
		pf.force = false
	case "delete":
		pf.delete = true
	case "all", "branches", "tags":
		pf.all = true
	}
}

// checkPush refuses force pushes and remote deletions, unless each branch
// they touch matches allowForcePush. pos is [repository, refspec...].
func checkPush(pos []string, pf pushFlags, allow []string) error {
	var refspecs []string
	if len(pos) > 1 {
		refspecs = pos[1:]
	}
	if (pf.force || pf.delete) && len(refspecs) == 0 {
		what := "force push"
		if pf.delete {
			what = "git push --delete"
		}
		return refuse("%s needs the branch named: git push --force REMOTE BRANCH (only branches listed in the plugin's allowForcePush may be forced or deleted)", what)
	}
	if pf.force && pf.all {
		return refuse("force push of all branches or tags is not allowed")
	}
	for _, r := range refspecs {
		forced := pf.force || strings.HasPrefix(r, "+")
		spec := strings.TrimPrefix(r, "+")
		deleting := pf.delete || (strings.HasPrefix(spec, ":") && spec != ":")
		if !forced && !deleting {
			continue
		}
		var dst string
		switch {
		case pf.delete:
			dst = spec
		case spec == ":":
			return refuse("force push of matching branches ('+:') is not allowed")
		default:
			src, d, ok := strings.Cut(spec, ":")
			dst = d
			if !ok || d == "" {
				dst = src
			}
		}
		branch := strings.TrimPrefix(dst, "refs/heads/")
		if branch == "" || branch == "HEAD" || branch == "@" || strings.ContainsAny(branch, "*?[") {
			return refuse("force push or delete of '%s' is not allowed: name the branch explicitly (git push --force REMOTE BRANCH)", clip(r, 80))
		}
		if !matchAny(allow, branch) {
			verb := "force push to"
			if deleting {
				verb = "deleting"
			}
			return refuse("%s the remote branch '%s' is not allowed; to allow it, add \"%s\" to allowForcePush in the git plugin's config (plugins.git.config or agents.<agent>.pluginConfigs.git)",
				verb, clip(branch, 80), clip(branch, 80))
		}
	}
	return nil
}

func matchAny(patterns []string, name string) bool {
	for _, p := range patterns {
		if p == name {
			return true
		}
		if ok, err := path.Match(p, name); err == nil && ok {
			return true
		}
	}
	return false
}

// checkPathArg refuses a positional argument that names a host path: an
// absolute path, or one that climbs out of the workspace with "..".
// Revisions are not affected ("a..b" has no ".." path segment).
func checkPathArg(a, cwdRel string) error {
	if strings.HasPrefix(a, "/") {
		return refuse("absolute path '%s' is not allowed: it would name a file on the gateway host, not in the sandbox; use a path relative to the current folder", clip(a, 80))
	}
	if escapes(a, cwdRel) {
		return refuse("path '%s' leads outside the workspace", clip(a, 80))
	}
	return nil
}

// checkNewDir checks a folder clone or init will create.
func checkNewDir(d, cwdRel string) error {
	if d == "" {
		return refuse("empty folder name")
	}
	if strings.HasPrefix(d, "/") {
		return refuse("absolute folder '%s' is not allowed: use a folder relative to the current one, inside /workspace", clip(d, 80))
	}
	if escapes(d, cwdRel) {
		return refuse("folder '%s' is outside the workspace", clip(d, 80))
	}
	if strings.HasPrefix(d, "-") {
		return refuse("folder '%s' looks like an option", clip(d, 80))
	}
	return nil
}

// escapes reports whether rel, taken from the folder cwdRel of the
// workspace, climbs out of it.
func escapes(rel, cwdRel string) bool {
	if !strings.Contains(rel, "..") {
		return false
	}
	p := path.Clean(path.Join(cwdRel, rel))
	return p == ".." || strings.HasPrefix(p, "../")
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
