package git

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/beige-dev/beige/internal/plugin"
)

// Limits of the repository checks.
const (
	maxConfigBytes = 1 << 20
	maxStateBytes  = 4 << 20
	maxGitDirWalk  = 200_000 // entries of .git looked at for symbolic links
)

// repo is a repository found from the working folder.
type repo struct {
	workTree  string // the folder holding .git ("" for a bare-looking folder)
	gitDir    string // resolved
	commonDir string // resolved; gitDir unless a linked worktree
}

// checker runs the checks that need the file system. Every path is
// resolved, and must lie in root, the agent's workspace.
type checker struct {
	git  string // the host's git
	root string // the workspace, resolved
	dir  string // the working folder, resolved, inside root
	// localRemotes are the host repositories the operator listed
	// (localRemotes in the plugin's config): the only local paths that
	// may be remotes.
	localRemotes []string
	// usesLocalRemote is set when a location the call may contact is one
	// of localRemotes: only then may git use local transports at all.
	usesLocalRemote bool
}

func (c *checker) rel(p string) string {
	r, err := filepath.Rel(c.root, p)
	if err != nil {
		return p
	}
	return "/workspace/" + filepath.ToSlash(r)
}

// findRepos returns every repository git could use from c.dir: for each
// folder from c.dir up to the workspace root, its .git (a folder, a
// "gitdir:" file, or a link) and the folder itself when it looks like a
// bare repository. All are checked, not only the nearest, since git skips
// a .git it finds invalid and goes on looking upwards. (Above the root,
// GIT_CEILING_DIRECTORIES stops git.)
func (c *checker) findRepos() ([]*repo, error) {
	var repos []*repo
	for d := c.dir; ; d = filepath.Dir(d) {
		r, err := c.dotGit(d)
		if err != nil {
			return nil, err
		}
		if r != nil {
			repos = append(repos, r)
		}
		if looksBare(d) {
			repos = append(repos, &repo{gitDir: d, commonDir: d})
		}
		if d == c.root || !plugin.Within(c.root, d) {
			break
		}
	}
	for _, r := range repos {
		if err := c.resolveCommon(r); err != nil {
			return nil, err
		}
	}
	return repos, nil
}

func looksBare(d string) bool {
	for _, p := range []string{"HEAD", "objects", "refs"} {
		if _, err := os.Lstat(filepath.Join(d, p)); err != nil {
			return false
		}
	}
	return true
}

// dotGit resolves d/.git, if there is one.
func (c *checker) dotGit(d string) (*repo, error) {
	p := filepath.Join(d, ".git")
	fi, err := os.Lstat(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, refuse("cannot read %s: %v", c.rel(p), unwrap(err))
	}
	target := p
	if fi.Mode().Type() == fs.ModeSymlink {
		if target, err = c.inside(p); err != nil {
			return nil, err
		}
		if fi, err = os.Stat(target); err != nil {
			return nil, refuse("cannot read %s: %v", c.rel(p), unwrap(err))
		}
	}
	switch {
	case fi.IsDir():
		return &repo{workTree: d, gitDir: target}, nil
	case fi.Mode().IsRegular():
		data, err := readSmall(target, 64<<10)
		if err != nil {
			return nil, refuse("cannot read %s: %v", c.rel(p), err)
		}
		line, _, _ := strings.Cut(string(data), "\n")
		gd, ok := strings.CutPrefix(strings.TrimRight(line, "\r"), "gitdir: ")
		if !ok || gd == "" {
			return nil, nil // git ignores an invalid .git file and goes on
		}
		if !filepath.IsAbs(gd) {
			gd = filepath.Join(d, gd)
		}
		resolved, err := c.inside(gd)
		if err != nil {
			return nil, refuse("%s points to a repository outside the workspace", c.rel(p))
		}
		return &repo{workTree: d, gitDir: resolved}, nil
	}
	return nil, refuse("%s is neither a folder nor a file", c.rel(p))
}

// resolveCommon follows gitDir/commondir (linked worktrees).
func (c *checker) resolveCommon(r *repo) error {
	r.commonDir = r.gitDir
	data, err := readSmall(filepath.Join(r.gitDir, "commondir"), 64<<10)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return refuse("cannot read %s: %v", c.rel(filepath.Join(r.gitDir, "commondir")), err)
	}
	cd := strings.TrimSpace(string(data))
	if !filepath.IsAbs(cd) {
		cd = filepath.Join(r.gitDir, cd)
	}
	resolved, err := c.inside(cd)
	if err != nil {
		return refuse("%s points to a repository outside the workspace", c.rel(filepath.Join(r.gitDir, "commondir")))
	}
	r.commonDir = resolved
	return nil
}

// inside resolves p's links and checks that the result, or for a path
// that does not exist its lexical form, is in the workspace.
func (c *checker) inside(p string) (string, error) {
	resolved, err := filepath.EvalSymlinks(p)
	if err != nil {
		clean := filepath.Clean(p)
		if !plugin.Within(c.root, clean) {
			return "", refuse("%s leads outside the workspace", c.rel(p))
		}
		return clean, nil
	}
	if !plugin.Within(c.root, resolved) {
		return "", refuse("%s is a symbolic link that leads outside the workspace", c.rel(p))
	}
	return resolved, nil
}

// checkRepo checks one repository: its config, its paused operations and
// the links inside it. It returns the config's entries.
func (c *checker) checkRepo(ctx context.Context, r *repo) ([]configEntry, error) {
	if !plugin.Within(c.root, r.gitDir) || !plugin.Within(c.root, r.commonDir) {
		return nil, refuse("the repository's .git lies outside the workspace")
	}
	dirs := []string{r.gitDir}
	if r.commonDir != r.gitDir {
		dirs = append(dirs, r.commonDir)
	}
	var entries []configEntry
	for _, d := range dirs {
		for _, name := range []string{"config", "config.worktree"} {
			es, err := c.readConfig(ctx, filepath.Join(d, name))
			if err != nil {
				return nil, err
			}
			for _, e := range es {
				if !keyAllowed(e.key) {
					return nil, refuse("the repository's config (%s) sets '%s', which is not allowed: it could make git run programs or read files on the gateway host. Remove it (edit the file in the sandbox) and try again; the README of the git tool lists the keys allowed",
						c.rel(filepath.Join(d, name)), clip(e.key, 80))
				}
			}
			entries = append(entries, es...)
		}
		if err := c.checkState(ctx, d); err != nil {
			return nil, err
		}
		if err := c.checkOutsideRefs(d); err != nil {
			return nil, err
		}
		if err := c.checkLinks(d); err != nil {
			return nil, err
		}
	}
	return entries, nil
}

type configEntry struct{ key, value string }

// readConfig lists a config file's entries with git itself (so there is no
// disagreement about the syntax), reading that file only: no includes, no
// system or global config, from a neutral folder.
func (c *checker) readConfig(ctx context.Context, p string) ([]configEntry, error) {
	fi, err := os.Lstat(p)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, nil
	case err != nil:
		return nil, refuse("cannot read %s: %v", c.rel(p), unwrap(err))
	case fi.Mode().Type() == fs.ModeSymlink:
		return nil, refuse("%s is a symbolic link; the repository's config must be a plain file", c.rel(p))
	case !fi.Mode().IsRegular():
		return nil, refuse("%s is not a regular file", c.rel(p))
	case fi.Size() > maxConfigBytes:
		return nil, refuse("%s is too large (%d bytes)", c.rel(p), fi.Size())
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, c.git, "config", "--file", p, "--no-includes", "--list", "-z")
	cmd.Dir = "/"
	cmd.Env = append(plugin.HostEnv("PATH"), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null", "HOME=/nonexistent")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(stderr.String())
		if msg == "" {
			msg = err.Error()
		}
		return nil, refuse("cannot read %s: %s", c.rel(p), clip(msg, 300))
	}
	var es []configEntry
	for _, item := range bytes.Split(stdout.Bytes(), []byte{0}) {
		if len(item) == 0 {
			continue
		}
		k, v, _ := strings.Cut(string(item), "\n")
		es = append(es, configEntry{key: k, value: v})
	}
	return es, nil
}

// checkState refuses paused rebases, cherry-picks and reverts whose saved
// state (files in .git the agent can write) would make git run a program
// when they continue: "exec" lines in the todo list, a merge strategy that
// is not built in, a signing option.
func (c *checker) checkState(ctx context.Context, gitDir string) error {
	for _, sub := range []string{"rebase-merge", "rebase-apply"} {
		d := filepath.Join(gitDir, sub)
		if _, err := os.Lstat(d); err != nil {
			continue
		}
		if _, err := os.Lstat(filepath.Join(d, "gpg_sign_opt")); err == nil {
			return refuse("the paused rebase in %s asks for signing, which is not allowed; run git rebase --abort (or remove that folder in the sandbox)", c.rel(d))
		}
		if data, err := readSmall(filepath.Join(d, "strategy"), 4096); err == nil {
			if s := strings.TrimSpace(string(data)); !slices.Contains(BuiltinStrategies, s) {
				return refuse("the paused rebase in %s uses merge strategy '%s', which is not built in; remove that folder in the sandbox", c.rel(d), clip(s, 40))
			}
		}
		for _, todo := range []string{"git-rebase-todo", "git-rebase-todo.backup"} {
			if err := c.checkTodo(filepath.Join(d, todo)); err != nil {
				return err
			}
		}
	}
	seq := filepath.Join(gitDir, "sequencer")
	if _, err := os.Lstat(seq); err == nil {
		if err := c.checkTodo(filepath.Join(seq, "todo")); err != nil {
			return err
		}
		es, err := c.readConfig(ctx, filepath.Join(seq, "opts"))
		if err != nil {
			return err
		}
		for _, e := range es {
			switch strings.ToLower(e.key) {
			case "options.strategy":
				if !slices.Contains(BuiltinStrategies, e.value) {
					return refuse("the paused cherry-pick or revert in %s uses merge strategy '%s', which is not built in; remove that folder in the sandbox", c.rel(seq), clip(e.value, 40))
				}
			case "options.gpg-sign":
				return refuse("the paused cherry-pick or revert in %s asks for signing, which is not allowed; remove that folder in the sandbox", c.rel(seq))
			}
		}
	}
	return nil
}

// checkTodo refuses a todo list with an exec ("x") line.
func (c *checker) checkTodo(p string) error {
	data, err := readSmall(p, maxStateBytes)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return refuse("cannot read %s: %v", c.rel(p), err)
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 64<<10), maxStateBytes)
	for n := 1; sc.Scan(); n++ {
		fields := strings.Fields(sc.Text())
		if len(fields) > 0 && (fields[0] == "x" || fields[0] == "exec") {
			return refuse("%s line %d runs a command (%s), which is not allowed: it would run on the gateway host. Run git rebase --abort, or remove the line in the sandbox", c.rel(p), n, fields[0])
		}
	}
	if err := sc.Err(); err != nil {
		return refuse("cannot read %s: %v", c.rel(p), err)
	}
	return nil
}

// Limits of the submodule checks.
const (
	maxSubmoduleDepth = 4
	maxSubmodules     = 256
)

// checkSubmodules checks every populated submodule of r (a gitlink in its
// index whose folder has a .git), and theirs: git status, diff, commit,
// checkout ... run git in each of them, with that repository's own config
// (a filter.<x>.clean named by its attributes, say) and only the -c
// settings of the command line. Each is checked like the main repository,
// after its folder is resolved inside the workspace.
func (c *checker) checkSubmodules(ctx context.Context, r *repo, depth int) error {
	paths, err := c.gitlinks(ctx, r)
	if err != nil {
		return err
	}
	if len(paths) == 0 {
		return nil
	}
	if depth >= maxSubmoduleDepth {
		return refuse("submodules nested deeper than %d are not supported (in %s)", maxSubmoduleDepth, c.rel(r.workTree))
	}
	if len(paths) > maxSubmodules {
		return refuse("more than %d submodules in %s are not supported", maxSubmodules, c.rel(r.workTree))
	}
	for _, p := range paths {
		wt, err := c.inside(filepath.Join(r.workTree, filepath.FromSlash(p)))
		if err != nil {
			return err
		}
		fi, err := os.Stat(wt)
		if err != nil || !fi.IsDir() {
			continue // not populated
		}
		sub, err := c.dotGit(wt)
		if err != nil || sub == nil {
			if err != nil {
				return err
			}
			continue
		}
		if err := c.resolveCommon(sub); err != nil {
			return err
		}
		if _, err := c.checkRepo(ctx, sub); err != nil {
			return err
		}
		if err := c.checkSubmodules(ctx, sub, depth+1); err != nil {
			return err
		}
	}
	return nil
}

// gitlinks lists the gitlink (submodule) entries of the index of the
// repository r, whose config has been checked: git ls-files
// with the gateway's settings and no local transport.
func (c *checker) gitlinks(ctx context.Context, r *repo) ([]string, error) {
	workTree := r.workTree
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	args := make([]string, 0, 2*len(safetyConfig)+6)
	for _, s := range safetyConfig {
		args = append(args, "-c", s)
	}
	args = append(args, "-c", noLocalTransport, "ls-files", "--stage", "-z")
	cmd := exec.CommandContext(ctx, c.git, args...)
	cmd.Dir = workTree
	cmd.Env = append(gitEnv(c.root, false), "GIT_DIR="+r.gitDir, "GIT_WORK_TREE="+workTree)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(stderr.String())
		if msg == "" {
			msg = err.Error()
		}
		return nil, refuse("cannot list the submodules of %s: %s", c.rel(workTree), clip(msg, 300))
	}
	var paths []string
	for _, item := range bytes.Split(stdout.Bytes(), []byte{0}) {
		// "160000 <oid> <stage>\t<path>"
		meta, path, ok := bytes.Cut(item, []byte{'\t'})
		if ok && bytes.HasPrefix(meta, []byte("160000 ")) && !slices.Contains(paths, string(path)) {
			paths = append(paths, string(path))
		}
	}
	return paths, nil
}

// checkOutsideRefs refuses files of a .git folder that make git read
// outside the repository or contact a location no check saw: alternates
// (objects of other repositories, which may be the host's: git would read
// them, and follow their own alternates), and the legacy remote files
// remotes/<name> and branches/<name> (remotes with URLs that are not in
// the config).
func (c *checker) checkOutsideRefs(gitDir string) error {
	for _, f := range []string{"objects/info/alternates", "objects/info/http-alternates"} {
		p := filepath.Join(gitDir, filepath.FromSlash(f))
		if _, err := os.Lstat(p); err == nil {
			return refuse("%s is not allowed: it makes git read objects of other repositories, which may be the gateway host's; remove it (git repack -a -d first, in a copy of the repository that has the objects)", c.rel(p))
		}
	}
	for _, d := range []string{"remotes", "branches"} {
		p := filepath.Join(gitDir, d)
		es, err := os.ReadDir(p)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			fi, lerr := os.Lstat(p)
			if lerr == nil && !fi.IsDir() {
				return refuse("%s is not a folder; remove it", c.rel(p))
			}
			return refuse("cannot read %s: %v", c.rel(p), unwrap(err))
		}
		if len(es) > 0 {
			return refuse("%s is not allowed: legacy remote files define remotes outside the config; use git remote add instead, and remove the files", c.rel(filepath.Join(p, es[0].Name())))
		}
	}
	return nil
}

// checkLinks refuses symbolic links inside a .git folder that lead out of
// the workspace: git would read or write through them.
func (c *checker) checkLinks(gitDir string) error {
	n := 0
	errTooMany := errors.New("too many")
	err := filepath.WalkDir(gitDir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if p == gitDir {
				return err
			}
			return nil // unreadable entries are git's problem, not a way out
		}
		if n++; n > maxGitDirWalk {
			return errTooMany
		}
		if d.Type()&fs.ModeSymlink == 0 {
			return nil
		}
		target, err := os.Readlink(p)
		if err != nil {
			return nil
		}
		if !filepath.IsAbs(target) {
			target = filepath.Join(filepath.Dir(p), target)
		}
		if _, err := c.inside(target); err != nil {
			return refuse("%s is a symbolic link that leads outside the workspace; remove it", c.rel(p))
		}
		return nil
	})
	if errors.Is(err, errTooMany) {
		return refuse("%s holds more than %d files; run git gc to pack it", c.rel(gitDir), maxGitDirWalk)
	}
	var r *refusal
	if errors.As(err, &r) {
		return err
	}
	if err != nil {
		return refuse("cannot read %s: %v", c.rel(gitDir), unwrap(err))
	}
	return nil
}

// checkLocation refuses a remote location (URL or path) that is a local
// path, unless it is one of the host repositories the operator listed in
// localRemotes, spelled as listed (or as a file:// URL of it), and that
// repository does not lead into the workspace. git would run upload-pack or
// receive-pack in a local repository, with its config and hooks and
// without the gateway's -c settings; whether a path reaches the workspace
// cannot be decided in the gateway's process (/proc/self/cwd, links, ..),
// so no path is judged: only the operator's list counts. Relative paths
// are tried against each of bases, for the message.
func (c *checker) checkLocation(loc string, bases ...string) error {
	p, local := localPath(loc)
	if !local {
		return nil
	}
	if p != "/" {
		p = strings.TrimRight(p, "/")
	}
	if slices.Contains(c.localRemotes, p) {
		in := plugin.Within(c.root, p)
		if r, err := filepath.EvalSymlinks(p); err == nil && plugin.Within(c.root, r) {
			in = true
		}
		if in {
			return refuse("'%s' (in the git plugin's localRemotes) leads inside the workspace; git cannot use it as a remote, because its configuration and hooks would run on the gateway host", clip(loc, 80))
		}
		c.usesLocalRemote = true
		return nil
	}
	var cands []string
	if filepath.IsAbs(p) {
		cands = []string{p}
	} else {
		for _, b := range bases {
			if b != "" {
				cands = append(cands, filepath.Join(b, p))
			}
		}
	}
	for _, cand := range cands {
		in := plugin.Within(c.root, filepath.Clean(cand))
		if r, err := filepath.EvalSymlinks(cand); err == nil && plugin.Within(c.root, r) {
			in = true
		}
		if in {
			return refuse("'%s' is a repository inside the workspace; git cannot use it as a remote, because its configuration and hooks would run on the gateway host. Copy it in the sandbox instead (cp -r)", clip(loc, 80))
		}
	}
	return refuse("'%s' is a local path; git can use a local repository as a remote only when the operator lists it in the git plugin's localRemotes (plugins.git.config), spelled as listed", clip(loc, 80))
}

// localPath returns the file system path of a git location, and whether it
// is one (not a URL, an scp-like ssh address or a remote helper).
func localPath(loc string) (string, bool) {
	if rest, ok := strings.CutPrefix(loc, "file://"); ok {
		if !strings.HasPrefix(rest, "/") { // file://host/path
			_, after, found := strings.Cut(rest, "/")
			if !found {
				return "", false
			}
			rest = "/" + after
		}
		return rest, true
	}
	if strings.Contains(loc, "://") || strings.Contains(loc, "::") {
		return "", false
	}
	colon := strings.IndexByte(loc, ':')
	slash := strings.IndexByte(loc, '/')
	if colon >= 0 && (slash < 0 || colon < slash) {
		return "", false // host:path
	}
	return loc, loc != ""
}

// checkNewDir checks that a folder clone or init will create resolves,
// links included, inside the workspace.
func (c *checker) checkNewDir(rel string) error {
	p := filepath.Join(c.dir, rel)
	// Resolve the deepest part that exists.
	existing := p
	for {
		if _, err := os.Lstat(existing); err == nil {
			break
		}
		parent := filepath.Dir(existing)
		if parent == existing {
			break
		}
		existing = parent
	}
	resolved, err := filepath.EvalSymlinks(existing)
	if err != nil || !plugin.Within(c.root, resolved) {
		return refuse("folder '%s' leads outside the workspace", clip(rel, 80))
	}
	return nil
}

func readSmall(p string, max int64) ([]byte, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("not a regular file")
	}
	if fi.Size() > max {
		return nil, fmt.Errorf("too large (%d bytes)", fi.Size())
	}
	data, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > max {
		return nil, fmt.Errorf("too large")
	}
	return data, nil
}

func unwrap(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}
