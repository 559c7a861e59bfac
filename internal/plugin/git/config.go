package git

import (
	"slices"
	"strings"
)

// A repository's own configuration is written by the agent (it controls
// .git/), and git reads it with the gateway user's rights: many keys run
// programs (core.fsmonitor, core.hooksPath, core.sshCommand, filter.*,
// diff.*.textconv, alias.*, credential.helper, core.pager, gpg.program,
// include.path ...). So a repository is used only when every key of its
// config is in this allowlist: the keys git itself writes for init, clone,
// branch and remote, and a few preferences that run nothing.

// allowedKeys are two-level keys ("section.name"), lower case.
var allowedKeys = []string{
	"core.repositoryformatversion", "core.filemode", "core.bare", "core.logallrefupdates",
	"core.ignorecase", "core.precomposeunicode", "core.autocrlf", "core.eol", "core.symlinks",
	"core.safecrlf", "core.quotepath", "core.sharedrepository", "core.sparsecheckout",
	"core.sparsecheckoutcone", "index.sparse",
	"extensions.objectformat", "extensions.refstorage", "extensions.worktreeconfig", "extensions.partialclone",
	"user.name", "user.email", "init.defaultbranch",
	"pull.rebase", "pull.ff", "push.default", "push.autosetupremote", "fetch.prune",
	"rebase.autostash", "rebase.autosquash", "merge.ff", "merge.conflictstyle",
	"remote.pushdefault", "color.ui",
}

// allowedSubKeys are three-level keys by section and name
// ("remote.<name>.url" is "remote.url"), lower case.
var allowedSubKeys = []string{
	"remote.url", "remote.pushurl", "remote.fetch", "remote.tagopt", "remote.prune",
	"remote.promisor", "remote.partialclonefilter",
	"branch.remote", "branch.pushremote", "branch.merge", "branch.rebase", "branch.description",
}

// notSettable are allowed keys that `git config` may not change: they
// describe the repository's format.
var notSettable = []string{
	"core.repositoryformatversion", "core.bare", "core.sharedrepository",
	"extensions.objectformat", "extensions.refstorage", "extensions.worktreeconfig", "extensions.partialclone",
	"remote.promisor", "remote.partialclonefilter",
}

// splitKey splits "section.sub.name" into the lower-cased section and
// name and the subsection (case kept); sub is "" for a two-level key.
func splitKey(key string) (section, sub, name string, ok bool) {
	i := strings.IndexByte(key, '.')
	j := strings.LastIndexByte(key, '.')
	if i <= 0 || j == len(key)-1 {
		return "", "", "", false
	}
	section = strings.ToLower(key[:i])
	name = strings.ToLower(key[j+1:])
	if i != j {
		sub = key[i+1 : j]
	}
	return section, sub, name, true
}

// keyAllowed reports whether key may appear in a repository's config.
func keyAllowed(key string) bool {
	section, sub, name, ok := splitKey(key)
	if !ok {
		return false
	}
	if sub == "" {
		return slices.Contains(allowedKeys, section+"."+name)
	}
	return slices.Contains(allowedSubKeys, section+"."+name)
}

// keySettable reports whether `git config` may write key.
func keySettable(key string) bool {
	if !keyAllowed(key) {
		return false
	}
	section, _, name, _ := splitKey(key)
	return !slices.Contains(notSettable, section+"."+name)
}

// parseConfigArgs checks the arguments of `git config` and returns them
// with --local added: only the repository's own config file is read or
// written (never the gateway user's global config, which may hold
// secrets), and only keys of the allowlist are written. Both the classic
// form (git config [--get|--unset|...] KEY [VALUE]) and the newer one (git
// config get|set|unset|list ...) are understood.
func parseConfigArgs(args []string) ([]string, error) {
	modern := ""
	if len(args) > 0 {
		switch args[0] {
		case "list", "get", "set", "unset":
			modern = args[0]
			args = args[1:]
		case "edit", "rename-section", "remove-section":
			return nil, refuse("git config %s is not allowed", args[0])
		}
	}
	var pos []string
	write := modern == "set" || modern == "unset"
	read := modern == "list" || modern == "get"
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			pos = append(pos, args[i+1:]...)
			break
		}
		if !strings.HasPrefix(a, "-") || a == "-" {
			pos = append(pos, a)
			continue
		}
		name, _, hasVal := strings.Cut(a, "=")
		switch name {
		case "--local":
			continue // added below
		case "--global", "--system", "--worktree", "--file", "-f", "--blob", "--includes":
			return nil, refuse("git config %s is not allowed: only the repository's own config (--local) can be used", name)
		case "--edit", "-e", "--rename-section", "--remove-section", "--get-color", "--get-colorbool", "--get-urlmatch":
			return nil, refuse("git config %s is not allowed", name)
		case "--get", "--get-all", "--get-regexp", "--list", "-l":
			read = true
		case "--unset", "--unset-all", "--add", "--replace-all":
			write = true
		case "--type", "--default", "--value", "--comment":
			if !hasVal {
				i++ // the value
			}
		case "--name-only", "--null", "-z", "--show-origin", "--show-scope", "--bool", "--int",
			"--bool-or-int", "--path", "--expiry-date", "--no-type", "--fixed-value", "--all",
			"--regexp", "--no-includes", "--no-show-origin", "--no-show-scope", "--no-value", "--no-all", "--no-regexp":
		default:
			return nil, refuse("git config option '%s' is not allowed here", clip(a, 40))
		}
	}
	if !read && !write && len(pos) >= 2 {
		write = true // git config KEY VALUE
	}
	if write {
		if len(pos) == 0 {
			return nil, refuse("git config: which key?")
		}
		if !keySettable(pos[0]) {
			return nil, refuse("git config: setting '%s' is not allowed; keys that can be set: user.name, user.email, remote.<name>.url/pushurl/fetch, branch.<name>.remote/merge/rebase, pull.rebase, push.default and a few more (see the git plugin's README)", clip(pos[0], 80))
		}
	}
	out := make([]string, 0, len(args)+2)
	if modern != "" {
		out = append(out, modern)
	}
	out = append(out, "--local")
	for _, a := range args {
		if a != "--local" {
			out = append(out, a)
		}
	}
	return out, nil
}
