// Package install fetches plugins for `beige plugins install|update|remove|
// list`: from the npm registry, from GitHub (git clone), or from a local
// folder; it finds every plugin.json in what it fetched and puts each
// plugin in $BEIGE_HOME/plugins/<name>, with its npm dependencies, and
// records it in config.json5 (edited in place, see internal/config/json5edit).
// A source whose plugins live in subfolders is a package, kept whole in
// $BEIGE_HOME/packages/<base>@<version>/ (its plugins may import shared
// files beside them); plugins/<name> is then a symlink into it (see
// packages.go). Everything it creates or deletes is inside plugins/ and
// packages/; a link found there is removed as a link, never followed.
//
// Everything fetched is hostile input: archives are unpacked with bounded
// size and file count, never outside the folder they go to, and without
// device files or links pointing out; npm never runs lifecycle scripts.
package install

import (
	"fmt"
	"path"
	"path/filepath"
	"regexp"
	"strings"
)

// Kind is where a source fetches from.
type Kind string

const (
	KindNPM    Kind = "npm"
	KindGitHub Kind = "github"
	KindLocal  Kind = "local"
)

// Source is a parsed install source.
type Source struct {
	Kind Kind
	// npm: Package ("@scope/name" or "name") and Version (an exact version,
	// a dist-tag, or "" for latest).
	Package, Version string
	// github: Owner, Repo, SubPath (slash-separated, "" for the whole
	// repository) and Ref (a branch or tag, "" for the default branch).
	Owner, Repo, SubPath, Ref string
	// local: the absolute folder.
	Path string
}

// String is the source as written in _source: what update fetches again.
func (s Source) String() string {
	switch s.Kind {
	case KindNPM:
		if s.Version != "" {
			return "npm:" + s.Package + "@" + s.Version
		}
		return "npm:" + s.Package
	case KindGitHub:
		out := "github:" + s.Owner + "/" + s.Repo
		if s.SubPath != "" {
			out += "/" + s.SubPath
		}
		if s.Ref != "" {
			out += "#" + s.Ref
		}
		return out
	}
	return s.Path
}

var (
	npmNamePart = regexp.MustCompile(`^[a-z0-9~][a-z0-9._~-]*$`)
	npmVersion  = regexp.MustCompile(`^[A-Za-z0-9^~<>=*][A-Za-z0-9.+_^~<>=|* -]*$`)
	ghName      = regexp.MustCompile(`^[A-Za-z0-9_.-]+$`)
	ghRef       = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_./-]*$`)
)

// ParseSource parses npm:@scope/pkg[@version], github:owner/repo[/sub/path][#ref],
// or a local path (starting with ".", "/" or "~/"). A bare package name is an
// npm package. Relative local paths are made absolute against cwd.
func ParseSource(s, cwd string) (Source, error) {
	switch {
	case strings.HasPrefix(s, "npm:"):
		return parseNPM(s, s[len("npm:"):])
	case strings.HasPrefix(s, "github:"):
		return parseGitHub(s, s[len("github:"):])
	case s == "." || s == ".." || strings.HasPrefix(s, "./") || strings.HasPrefix(s, "../") || strings.HasPrefix(s, "/"):
		p := s
		if !filepath.IsAbs(p) {
			p = filepath.Join(cwd, p)
		}
		return Source{Kind: KindLocal, Path: filepath.Clean(p)}, nil
	case s == "":
		return Source{}, fmt.Errorf("empty source")
	}
	return parseNPM(s, s)
}

func parseNPM(orig, rest string) (Source, error) {
	name, version := rest, ""
	at := strings.LastIndexByte(rest, '@')
	if at > 0 {
		name, version = rest[:at], rest[at+1:]
		if version == "" {
			return Source{}, fmt.Errorf("source %q: empty version after @", orig)
		}
	}
	if err := validNPMName(name); err != nil {
		return Source{}, fmt.Errorf("source %q: %w", orig, err)
	}
	if version != "" && (!npmVersion.MatchString(version) || len(version) > 256) {
		return Source{}, fmt.Errorf("source %q: version %q: give a version (1.2.3), a range (^1.2.0, ~1.2, >=1 <2, 1.x) or a dist-tag (latest)", orig, version)
	}
	return Source{Kind: KindNPM, Package: name, Version: version}, nil
}

func validNPMName(name string) error {
	if len(name) == 0 || len(name) > 214 {
		return fmt.Errorf("bad npm package name %q", name)
	}
	parts := []string{name}
	if strings.HasPrefix(name, "@") {
		scope, pkg, ok := strings.Cut(name[1:], "/")
		if !ok {
			return fmt.Errorf("bad npm package name %q: a scoped package is @scope/name", name)
		}
		parts = []string{scope, pkg}
	}
	for _, p := range parts {
		if !npmNamePart.MatchString(p) || p == "." || p == ".." {
			return fmt.Errorf("bad npm package name %q", name)
		}
	}
	return nil
}

func parseGitHub(orig, rest string) (Source, error) {
	spec, ref, hasRef := strings.Cut(rest, "#")
	if hasRef && (!ghRef.MatchString(ref) || strings.Contains(ref, "..") || strings.HasSuffix(ref, "/") || len(ref) > 256) {
		return Source{}, fmt.Errorf("source %q: bad ref %q", orig, ref)
	}
	segs := strings.Split(spec, "/")
	if len(segs) < 2 {
		return Source{}, fmt.Errorf("source %q: expected github:owner/repo[/path][#ref]", orig)
	}
	// "repo.git" names the repository "repo"; ".git" alone names none, and
	// a name still ending in ".git" ("x.git.git") would name another
	// repository once printed.
	segs[1] = strings.TrimSuffix(segs[1], ".git")
	for _, s := range segs[:2] {
		if !ghName.MatchString(s) || s == "." || s == ".." || strings.HasSuffix(s, ".git") {
			return Source{}, fmt.Errorf("source %q: bad owner or repository name %q", orig, s)
		}
	}
	sub := strings.Join(segs[2:], "/")
	if sub != "" {
		for _, s := range segs[2:] {
			if s == "" || s == "." || s == ".." || strings.ContainsAny(s, "\\\x00") {
				return Source{}, fmt.Errorf("source %q: bad path %q", orig, sub)
			}
		}
		sub = path.Clean(sub)
	}
	return Source{Kind: KindGitHub, Owner: segs[0], Repo: segs[1], SubPath: sub, Ref: ref}, nil
}

var pluginName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$`)

// ValidName says whether name may be a plugin's name: the name of its
// folder under plugins/ and its key in the config.
func ValidName(name string) error {
	if !pluginName.MatchString(name) {
		return fmt.Errorf("bad plugin name %q: letters, digits, '.', '_' and '-', starting with a letter or digit, at most 64", name)
	}
	return nil
}
