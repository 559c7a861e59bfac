package install

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/titanous/json5"

	"github.com/beige-dev/beige/internal/atomicfile"
	"github.com/beige-dev/beige/internal/config/json5edit"
)

// RecordFile is written into every installed plugin's folder: where it
// came from, for list.
const RecordFile = ".beige-install.json"

// Options configure an Installer.
type Options struct {
	// Home is $BEIGE_HOME: plugins go to Home/plugins/<name>/.
	Home string
	// Config is the config.json5 to record plugins in.
	Config string
	// Force replaces installed plugins (their config entry's config stays).
	Force bool
	// Registry is the default npm registry URL (default: NPMRC.Registry,
	// else DefaultRegistry).
	Registry string
	// NPMRC is the user's npm registry configuration (LoadNPMConfig):
	// scope registries and auth tokens, for the fetch and for npm install.
	NPMRC *NPMConfig
	// GitHubURL is where github:owner/repo is cloned from (default
	// DefaultGitHubURL); AllowFileGit allows a file:// URL there (tests).
	GitHubURL    string
	AllowFileGit bool
	// NPM is the npm program (default: npm in PATH).
	NPM        string
	HTTPClient *http.Client
	Limits     Limits
	Progress   *Progress
}

// Installer installs, updates and removes plugins.
type Installer struct {
	opts     Options
	progress *Progress
}

// New returns an Installer; zero options get their defaults.
func New(opts Options) *Installer {
	if opts.NPMRC == nil {
		opts.NPMRC = &NPMConfig{}
	}
	if opts.Registry == "" {
		opts.Registry = opts.NPMRC.Registry
	}
	if opts.Registry == "" {
		opts.Registry = DefaultRegistry
	}
	if opts.GitHubURL == "" {
		opts.GitHubURL = DefaultGitHubURL
	}
	if opts.HTTPClient == nil {
		opts.HTTPClient = &http.Client{Timeout: 10 * time.Minute}
	}
	if opts.Limits == (Limits{}) {
		opts.Limits = DefaultLimits
	}
	return &Installer{opts: opts, progress: opts.Progress}
}

// Installed is one plugin put in place.
type Installed struct {
	Name, Dir, Version string
	// Replaced: it was installed before (--force, update).
	Replaced bool
	// HasRun: plugin.json has a run command.
	HasRun bool
}

// record is RecordFile's content.
type record struct {
	Source      string `json:"source"`
	Version     string `json:"version,omitempty"`
	InstalledAt string `json:"installedAt"`
}

// ExistsError says plugins are installed already, or named in the config
// (and Force was not set).
type ExistsError struct{ Names []string }

func (e *ExistsError) Error() string {
	if len(e.Names) == 1 {
		return fmt.Sprintf("plugin %s is already installed or in the config (use --force to reinstall; its config is kept)", e.Names[0])
	}
	return fmt.Sprintf("plugins %s are already installed or in the config (use --force to reinstall; their config is kept)", strings.Join(e.Names, ", "))
}

func (in *Installer) pluginsDir() string { return filepath.Join(in.opts.Home, "plugins") }

// Install fetches src and installs every plugin in it, or, when only is
// not empty, the plugins of those names (which must all be there).
func (in *Installer) Install(ctx context.Context, src Source, only []string) ([]Installed, error) {
	unlock, err := in.lock()
	if err != nil {
		return nil, err
	}
	defer unlock()
	if fi, err := os.Lstat(in.pluginsDir()); err != nil || !fi.IsDir() {
		return nil, fmt.Errorf("%s is not a folder", in.pluginsDir())
	}
	plugins, err := os.OpenRoot(in.pluginsDir())
	if err != nil {
		return nil, err
	}
	defer plugins.Close()
	tmp, err := os.MkdirTemp(in.pluginsDir(), ".tmp-")
	if err != nil {
		return nil, fmt.Errorf("create a temporary folder: %w", err)
	}
	defer os.RemoveAll(tmp)
	tmpRel := filepath.Base(tmp)

	// Fetch.
	var (
		root    *os.Root
		dir     = "."
		version string
	)
	switch src.Kind {
	case KindNPM:
		if err := os.Mkdir(filepath.Join(tmp, "src"), 0o700); err != nil {
			return nil, err
		}
		if root, err = os.OpenRoot(filepath.Join(tmp, "src")); err != nil {
			return nil, err
		}
		if version, err = in.fetchNPM(ctx, src, root, tmp); err != nil {
			root.Close()
			return nil, err
		}
		if dir, err = packageRoot(root); err != nil {
			root.Close()
			return nil, err
		}
	case KindGitHub:
		if err := in.cloneGitHub(ctx, src, filepath.Join(tmp, "src")); err != nil {
			return nil, err
		}
		if root, err = os.OpenRoot(filepath.Join(tmp, "src")); err != nil {
			return nil, err
		}
		if src.SubPath != "" {
			fi, err := root.Stat(src.SubPath) // os.Root: never out of the clone
			if err != nil || !fi.IsDir() {
				root.Close()
				return nil, fmt.Errorf("path %q is not a folder in github:%s/%s%s", src.SubPath, src.Owner, src.Repo, refSuffix(src.Ref))
			}
			sub, err := root.OpenRoot(src.SubPath)
			root.Close()
			if err != nil {
				return nil, err
			}
			root = sub
		}
	case KindLocal:
		fi, err := os.Stat(src.Path)
		if err != nil || !fi.IsDir() {
			return nil, fmt.Errorf("%s is not a folder", src.Path)
		}
		if root, err = os.OpenRoot(src.Path); err != nil {
			return nil, err
		}
	default:
		return nil, fmt.Errorf("unknown source kind %q", src.Kind)
	}
	defer root.Close()

	found, err := discover(root, dir, func(w string) { in.progress.Stepf("warning: %s", w) })
	if err != nil {
		return nil, err
	}
	asPackage := isPackage(found)
	if len(only) > 0 {
		keep := found[:0]
		for _, f := range found {
			if contains(only, f.Name) {
				keep = append(keep, f)
			}
		}
		for _, n := range only {
			if !containsFound(keep, n) {
				return nil, fmt.Errorf("%s no longer has a plugin %q", src, n)
			}
		}
		found = keep
	}
	if len(found) == 0 {
		return nil, fmt.Errorf("no plugin.json found in %s", src)
	}

	// Refuse before writing anything when one is installed already.
	cfgData, err := os.ReadFile(in.opts.Config)
	if err != nil {
		return nil, fmt.Errorf("read the config: %w", err)
	}
	var exists []string
	replaced := map[string]bool{}
	for _, f := range found {
		inConfig, err := json5edit.Has(cfgData, "plugins", f.Name)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", in.opts.Config, err)
		}
		_, statErr := plugins.Lstat(f.Name)
		if inConfig || statErr == nil {
			exists = append(exists, f.Name)
			replaced[f.Name] = true
		}
	}
	if len(exists) > 0 && !in.opts.Force {
		return nil, &ExistsError{Names: exists}
	}

	rec := record{Source: src.String(), Version: version, InstalledAt: time.Now().UTC().Format(time.RFC3339)}
	// link, for a package: where plugins/<name> points (relative to plugins/).
	link := map[string]string{}
	unused := map[string]bool{} // package folders to delete once nothing points into them
	if asPackage {
		// The whole package, staged in packages/ and moved to its own
		// folder there; its plugins become links into it.
		pkgs, err := in.openPackages()
		if err != nil {
			return nil, err
		}
		defer pkgs.Close()
		ptmp, err := os.MkdirTemp(in.packagesDir(), ".tmp-")
		if err != nil {
			return nil, fmt.Errorf("create a temporary folder: %w", err)
		}
		defer os.RemoveAll(ptmp)
		stageRel, err := in.stagePackage(ctx, root, dir, pkgs, filepath.Base(ptmp), found, rec)
		if err != nil {
			return nil, fmt.Errorf("install from %s: %w", src, err)
		}
		pkgVersion := version
		if pkgVersion == "" {
			var pj struct {
				Version string `json:"version"`
			}
			if ok, err := readSmallJSON(root, path.Join(dir, "package.json"), &pj); ok && err == nil {
				pkgVersion = pj.Version
			}
		}
		name, err := newPackageDir(pkgs, packageBase(src), pkgVersion)
		if err != nil {
			return nil, err
		}
		if err := pkgs.Rename(stageRel, name); err != nil {
			return nil, fmt.Errorf("install the package %s: %w", name, err)
		}
		in.progress.Stepf("package kept in %s", filepath.Join(in.packagesDir(), name))
		for _, f := range found {
			link[f.Name] = path.Join("..", "packages", name, f.Dir)
		}
		// Should putting it in place fail, the new folder goes again.
		unused[name] = true
	} else {
		// Stage every plugin in the temporary folder.
		if err := plugins.Mkdir(path.Join(tmpRel, "stage"), 0o755); err != nil {
			return nil, err
		}
		for _, f := range found {
			stageRel := path.Join(tmpRel, "stage", f.Name)
			if err := plugins.Mkdir(stageRel, 0o755); err != nil {
				return nil, err
			}
			stage, err := plugins.OpenRoot(stageRel)
			if err != nil {
				return nil, err
			}
			err = in.stage(ctx, root, path.Join(dir, f.Dir), stage, filepath.Join(in.pluginsDir(), stageRel), f.Name, rec)
			stage.Close()
			if err != nil {
				return nil, fmt.Errorf("install %s from %s: %w", f.Name, src, err)
			}
		}
	}

	// Put them in place: the old folder (or link) aside, the new one in.
	var out []Installed
	for _, f := range found {
		if replaced[f.Name] {
			if d := in.linkedPackage(plugins, f.Name); d != "" {
				unused[d] = true
			}
			// Rename moves a link itself, never what it points to.
			if err := plugins.Rename(f.Name, path.Join(tmpRel, "old-"+f.Name)); err != nil && !errors.Is(err, os.ErrNotExist) {
				return out, errors.Join(fmt.Errorf("replace %s: %w", f.Name, err), in.prunePackages(unused))
			}
		}
		if target, ok := link[f.Name]; ok {
			if err := plugins.Symlink(target, f.Name); err != nil {
				return out, errors.Join(fmt.Errorf("install %s: %w", f.Name, err), in.prunePackages(unused))
			}
		} else if err := plugins.Rename(path.Join(tmpRel, "stage", f.Name), f.Name); err != nil {
			return out, fmt.Errorf("install %s: %w", f.Name, err)
		}
		v := f.Version
		if v == "" {
			v = version
		}
		out = append(out, Installed{Name: f.Name, Dir: filepath.Join(in.pluginsDir(), f.Name), Version: v, Replaced: replaced[f.Name], HasRun: f.HasRun})
	}
	if err := in.addToConfig(found, src.String()); err != nil {
		return out, err
	}
	return out, in.prunePackages(unused)
}

func (in *Installer) stage(ctx context.Context, src *os.Root, dir string, dst *os.Root, dstPath, name string, rec record) error {
	if err := copyTree(src, dir, dst, in.opts.Limits); err != nil {
		return err
	}
	return in.finish(ctx, dst, dstPath, name, rec)
}

// finish installs the npm dependencies of the plugin copied to dst (at
// dstPath) and writes its install record.
func (in *Installer) finish(ctx context.Context, dst *os.Root, dstPath, name string, rec record) error {
	deps, err := npmDeps(dst, name)
	if err != nil {
		return err
	}
	if deps {
		if err := in.runNPM(ctx, dst, dstPath, name); err != nil {
			return err
		}
	}
	b, _ := json.MarshalIndent(rec, "", "  ")
	return dst.WriteFile(RecordFile, append(b, '\n'), 0o644)
}

// addToConfig records the plugins under plugins.<name>: a new entry gets
// path, _source and the manifest's defaultConfig; an existing one only a
// new path and _source (its config, keys and tokens, is never touched).
func (in *Installer) addToConfig(found []Found, source string) error {
	fi, err := os.Stat(in.opts.Config)
	if err != nil {
		return fmt.Errorf("config: %w", err)
	}
	data, err := os.ReadFile(in.opts.Config)
	if err != nil {
		return fmt.Errorf("read the config: %w", err)
	}
	for _, f := range found {
		dir := filepath.Join(in.pluginsDir(), f.Name)
		has, err := json5edit.Has(data, "plugins", f.Name)
		if err != nil {
			return fmt.Errorf("%s: %w", in.opts.Config, err)
		}
		if has {
			for _, kv := range [][2]string{{"path", dir}, {"_source", source}} {
				if data, err = json5edit.Set(data, []string{"plugins", f.Name, kv[0]}, kv[1]); err != nil {
					return fmt.Errorf("edit %s: plugins.%s.%s: %w", in.opts.Config, f.Name, kv[0], err)
				}
			}
			continue
		}
		entry := json5edit.Object{{Key: "path", Value: dir}, {Key: "_source", Value: source}}
		if len(f.DefaultConfig) > 0 && string(f.DefaultConfig) != "{}" {
			entry = append(entry, json5edit.Member{Key: "config", Value: f.DefaultConfig})
		}
		if data, err = json5edit.Set(data, []string{"plugins", f.Name}, entry); err != nil {
			return fmt.Errorf("edit %s: plugins.%s: %w", in.opts.Config, f.Name, err)
		}
	}
	return in.writeConfig(data, fi.Mode().Perm())
}

func (in *Installer) writeConfig(data []byte, perm os.FileMode) error {
	var check any
	if err := json5.Unmarshal(data, &check); err != nil {
		return fmt.Errorf("edit %s: the result does not parse (nothing written): %w", in.opts.Config, err)
	}
	if err := atomicfile.Write(in.opts.Config, data, perm); err != nil {
		return fmt.Errorf("write %s: %w", in.opts.Config, err)
	}
	return nil
}

// Entry is one plugin of the config, or one folder of plugins/.
type Entry struct {
	Name, Version, Source, Path string
	// InConfig: the config has plugins.<name>; Installed: the folder
	// plugins/<name> exists.
	InConfig, Installed bool
}

type cfgFile struct {
	Plugins map[string]*struct {
		Path   string `json:"path"`
		Source string `json:"_source"`
	} `json:"plugins"`
}

func (in *Installer) readConfig() ([]byte, *cfgFile, error) {
	data, err := os.ReadFile(in.opts.Config)
	if err != nil {
		return nil, nil, fmt.Errorf("read the config: %w", err)
	}
	var c cfgFile
	if err := json5.Unmarshal(data, &c); err != nil {
		return nil, nil, fmt.Errorf("%s: %w", in.opts.Config, err)
	}
	return data, &c, nil
}

// List returns the config's plugins and the folders of plugins/ that the
// config does not name, sorted by name.
func (in *Installer) List() ([]Entry, error) {
	_, c, err := in.readConfig()
	if err != nil {
		return nil, err
	}
	byName := map[string]*Entry{}
	for name, p := range c.Plugins {
		e := &Entry{Name: name, InConfig: true}
		if p != nil {
			e.Path, e.Source = p.Path, p.Source
		}
		byName[name] = e
	}
	if entries, err := os.ReadDir(in.pluginsDir()); err == nil {
		for _, d := range entries {
			// A plugin of a package is a link into packages/.
			if (!d.IsDir() && d.Type()&fs.ModeSymlink == 0) || ValidName(d.Name()) != nil {
				continue
			}
			if _, ok := byName[d.Name()]; !ok {
				byName[d.Name()] = &Entry{Name: d.Name(), Path: filepath.Join(in.pluginsDir(), d.Name())}
			}
		}
	}
	var out []Entry
	for _, e := range byName {
		if e.Path != "" {
			e.Path = in.configPath(e.Path)
			e.Installed = e.Path == filepath.Join(in.pluginsDir(), e.Name)
			e.Version = readVersion(e.Path, e)
			if e.Version == "" {
				e.Version = in.packageVersion(e.Path)
			}
		}
		out = append(out, *e)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// readVersion reads the version from plugin.json, package.json, or the
// install record (a package's version, for plugins of a multi-plugin
// package); a source missing in the config comes from the record too.
func readVersion(dir string, e *Entry) string {
	r, err := os.OpenRoot(dir)
	if err != nil {
		return ""
	}
	defer r.Close()
	var v struct {
		Version string `json:"version"`
		Source  string `json:"source"`
	}
	for _, f := range []string{"plugin.json", "package.json"} {
		if ok, err := readSmallJSON(r, f, &v); ok && err == nil && v.Version != "" {
			return v.Version
		}
	}
	if ok, err := readSmallJSON(r, RecordFile, &v); ok && err == nil {
		if e.Source == "" {
			e.Source = v.Source
		}
		return v.Version
	}
	return ""
}

// Remove deletes plugins/<name> and the config's plugins.<name>; when it
// is a link into a package folder of packages/, that folder goes too once
// nothing points into it. A link is removed as a link, never followed. It
// refuses a plugin whose config path is not plugins/<name> (a folder of the
// user's own), and a name that is neither in the config nor in plugins/.
func (in *Installer) Remove(name string) error {
	if err := ValidName(name); err != nil {
		return err
	}
	unlock, err := in.lock()
	if err != nil {
		return err
	}
	defer unlock()
	data, c, err := in.readConfig()
	if err != nil {
		return err
	}
	dir := filepath.Join(in.pluginsDir(), name)
	p, inConfig := c.Plugins[name]
	if inConfig && (p == nil || in.configPath(p.Path) != dir) {
		where := "no path: it is built in"
		if p != nil && p.Path != "" {
			where = "its path is " + p.Path
		}
		return fmt.Errorf("plugin %q is not installed under %s (%s); remove it from %s yourself", name, in.pluginsDir(), where, in.opts.Config)
	}
	fi, statErr := os.Lstat(dir)
	if !inConfig && statErr != nil {
		return fmt.Errorf("plugin %q is not installed", name)
	}
	unused := map[string]bool{}
	if statErr == nil {
		if !fi.IsDir() && fi.Mode()&fs.ModeSymlink == 0 {
			return fmt.Errorf("%s is not a folder or a link", dir)
		}
		plugins, err := os.OpenRoot(in.pluginsDir())
		if err != nil {
			return err
		}
		defer plugins.Close()
		if d := in.linkedPackage(plugins, name); d != "" {
			unused[d] = true
		}
		// Out of sight first, so that a half-deleted plugin never loads.
		// Rename moves a link itself; RemoveAll removes a link, not its
		// target.
		tmp, err := os.MkdirTemp(in.pluginsDir(), ".tmp-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(tmp)
		if err := plugins.Rename(name, path.Join(filepath.Base(tmp), name)); err != nil {
			return fmt.Errorf("remove %s: %w", dir, err)
		}
	}
	if inConfig {
		fi, err := os.Stat(in.opts.Config)
		if err != nil {
			return err
		}
		out, err := json5edit.Delete(data, "plugins", name)
		if err != nil {
			return fmt.Errorf("edit %s: %w", in.opts.Config, err)
		}
		if err := in.writeConfig(out, fi.Mode().Perm()); err != nil {
			return err
		}
	}
	return in.prunePackages(unused)
}

// configPath resolves a path of the config the way the loader does:
// relative to the config's folder.
func (in *Installer) configPath(p string) string {
	if p == "" || filepath.IsAbs(p) {
		return filepath.Clean(p)
	}
	return filepath.Join(filepath.Dir(in.opts.Config), p)
}

// Sources returns the plugins that have a _source, grouped by it, for
// update; and those without one.
func (in *Installer) Sources(names []string) (map[string][]string, []string, error) {
	_, c, err := in.readConfig()
	if err != nil {
		return nil, nil, err
	}
	bySource := map[string][]string{}
	var without []string
	if len(names) == 0 {
		for n := range c.Plugins {
			names = append(names, n)
		}
		sort.Strings(names)
	}
	for _, n := range names {
		p, ok := c.Plugins[n]
		if !ok {
			return nil, nil, fmt.Errorf("plugin %q is not in %s", n, in.opts.Config)
		}
		if p == nil || p.Source == "" {
			without = append(without, n)
			continue
		}
		bySource[p.Source] = append(bySource[p.Source], n)
	}
	return bySource, without, nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func containsFound(list []Found, name string) bool {
	for _, f := range list {
		if f.Name == name {
			return true
		}
	}
	return false
}
