package install

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
)

// A package whose plugins live in subfolders (the toolkit's plugins/<p>/,
// importing ../_shared/...) is kept whole under
// $BEIGE_HOME/packages/<base>@<version>/, and each of its plugins installed
// is the symlink $BEIGE_HOME/plugins/<name> -> ../packages/<dir>/<its folder>,
// the layout of the original's installer (whose homes name the folder
// packages/<base>, without a version; those load and are removed alike).
//
// Each install of a package gets a folder of its own (<base>@<version>,
// then <base>@<version>_2, ... when that one exists), so that updating one
// plugin of a package never changes the code another plugin of it runs:
// only the updated plugin's link moves to the new folder. A package folder
// is deleted once no link in plugins/ and no config path points into it.

// packagesDir is $BEIGE_HOME/packages.
func (in *Installer) packagesDir() string { return filepath.Join(in.opts.Home, "packages") }

// openPackages returns $BEIGE_HOME/packages, made when missing; it must be
// a real folder (not a link to somewhere else).
func (in *Installer) openPackages() (*os.Root, error) {
	dir := in.packagesDir()
	if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
		return nil, fmt.Errorf("create %s: %w", dir, err)
	}
	if fi, err := os.Lstat(dir); err != nil || !fi.IsDir() {
		return nil, fmt.Errorf("%s is not a folder", dir)
	}
	return os.OpenRoot(dir)
}

// isPackage says whether a source's plugins are kept as a package: any of
// them is in a subfolder (it may import its siblings' files).
func isPackage(found []Found) bool {
	for _, f := range found {
		if f.Dir != "." {
			return true
		}
	}
	return false
}

var unsafeNameChars = regexp.MustCompile(`[^A-Za-z0-9._+-]+`)

// safePart makes s one harmless path component: letters, digits and
// ._+- only, starting with a letter or digit, at most 80 bytes.
func safePart(s, def string) string {
	s = unsafeNameChars.ReplaceAllString(s, "-")
	s = strings.TrimLeft(s, "._+-")
	if len(s) > 80 {
		s = s[:80]
	}
	if s == "" {
		return def
	}
	return s
}

// packageBase is the package folder's name before the version, as the
// original names it: npm @scope/name -> scope-name, github owner-repo, a
// local folder's name.
func packageBase(src Source) string {
	var b string
	switch src.Kind {
	case KindNPM:
		b = strings.ReplaceAll(strings.TrimPrefix(src.Package, "@"), "/", "-")
	case KindGitHub:
		b = src.Owner + "-" + src.Repo
	case KindLocal:
		b = filepath.Base(src.Path)
	}
	return safePart(b, "package")
}

// validPackageDir says whether name may be a folder of packages/ that the
// installer made or deletes: one component, not hidden.
func validPackageDir(name string) bool {
	return name != "" && !strings.HasPrefix(name, ".") && !strings.ContainsAny(name, "/\\\x00")
}

// newPackageDir picks the name of a package folder that does not exist yet.
func newPackageDir(pkgs *os.Root, base, version string) (string, error) {
	name := base + "@" + safePart(version, "0")
	for i := 2; ; i++ {
		if _, err := pkgs.Lstat(name); errors.Is(err, fs.ErrNotExist) {
			return name, nil
		} else if err != nil {
			return "", fmt.Errorf("packages/%s: %w", name, err)
		}
		if i > 1000 {
			return "", fmt.Errorf("too many installs of %s@%s in packages/", base, version)
		}
		name = fmt.Sprintf("%s@%s_%d", base, safePart(version, "0"), i)
	}
}

// stagePackage copies the whole package (dir of src) into
// packages/<tmpRel>/pkg and installs each plugin's npm dependencies and
// record in its own folder there. It returns the staged folder's path in
// packages/.
func (in *Installer) stagePackage(ctx context.Context, src *os.Root, dir string, pkgs *os.Root, tmpRel string, found []Found, rec record) (string, error) {
	stageRel := path.Join(tmpRel, "pkg")
	if err := pkgs.Mkdir(stageRel, 0o755); err != nil {
		return "", err
	}
	stage, err := pkgs.OpenRoot(stageRel)
	if err != nil {
		return "", err
	}
	defer stage.Close()
	if err := copyTree(src, dir, stage, in.opts.Limits); err != nil {
		return "", err
	}
	for _, f := range found {
		sub, err := stage.OpenRoot(f.Dir)
		if err != nil {
			return "", fmt.Errorf("install %s: %w", f.Name, err)
		}
		err = in.finish(ctx, sub, filepath.Join(in.packagesDir(), stageRel, filepath.FromSlash(f.Dir)), f.Name, rec)
		sub.Close()
		if err != nil {
			return "", fmt.Errorf("install %s: %w", f.Name, err)
		}
	}
	return stageRel, nil
}

// packageOf returns the folder of packages/ a link target found at
// plugins/<name> points into ("" when it points elsewhere), read lexically:
// nothing is followed.
func (in *Installer) packageOf(target string) string {
	if !filepath.IsAbs(target) {
		target = filepath.Join(in.pluginsDir(), target)
	}
	return in.packageOfPath(target)
}

// packageOfPath is packageOf for an absolute path.
func (in *Installer) packageOfPath(p string) string {
	p = filepath.Clean(p)
	bases := []string{in.packagesDir()}
	if real, err := filepath.EvalSymlinks(in.packagesDir()); err == nil && real != in.packagesDir() {
		bases = append(bases, real)
	}
	for _, b := range bases {
		rel, err := filepath.Rel(b, p)
		if err != nil || rel == "." || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
			continue
		}
		d, _, _ := strings.Cut(rel, string(filepath.Separator))
		if validPackageDir(d) {
			return d
		}
	}
	return ""
}

// linkedPackage returns the package folder plugins/<name> points into, if
// it is a symlink that does.
func (in *Installer) linkedPackage(plugins *os.Root, name string) string {
	fi, err := plugins.Lstat(name)
	if err != nil || fi.Mode()&fs.ModeSymlink == 0 {
		return ""
	}
	t, err := plugins.Readlink(name)
	if err != nil {
		return ""
	}
	return in.packageOf(t)
}

// usedPackages returns the package folders something still points into:
// a link in plugins/, or a config path.
func (in *Installer) usedPackages() (map[string]bool, error) {
	used := map[string]bool{}
	entries, err := os.ReadDir(in.pluginsDir())
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", in.pluginsDir(), err)
	}
	for _, e := range entries {
		if e.Type()&fs.ModeSymlink == 0 {
			continue
		}
		t, err := os.Readlink(filepath.Join(in.pluginsDir(), e.Name()))
		if err != nil {
			continue
		}
		if d := in.packageOf(t); d != "" {
			used[d] = true
		}
	}
	_, c, err := in.readConfig()
	if err != nil {
		return nil, err
	}
	for _, p := range c.Plugins {
		if p != nil && p.Path != "" {
			if d := in.packageOfPath(in.configPath(p.Path)); d != "" {
				used[d] = true
			}
		}
	}
	return used, nil
}

// prunePackages deletes those of the package folders that nothing points
// into any more. A folder is moved out of sight first; a link found in
// packages/ is removed as a link, never followed.
func (in *Installer) prunePackages(candidates map[string]bool) error {
	if len(candidates) == 0 {
		return nil
	}
	used, err := in.usedPackages()
	if err != nil {
		return fmt.Errorf("remove unused packages: %w", err)
	}
	var gone []string
	for d := range candidates {
		if !used[d] && validPackageDir(d) {
			gone = append(gone, d)
		}
	}
	if len(gone) == 0 {
		return nil
	}
	sort.Strings(gone)
	if fi, err := os.Lstat(in.packagesDir()); err != nil || !fi.IsDir() {
		return fmt.Errorf("%s is not a folder", in.packagesDir())
	}
	pkgs, err := os.OpenRoot(in.packagesDir())
	if err != nil {
		return err
	}
	defer pkgs.Close()
	tmp, err := os.MkdirTemp(in.packagesDir(), ".tmp-")
	if err != nil {
		return fmt.Errorf("create a temporary folder: %w", err)
	}
	defer os.RemoveAll(tmp)
	for _, d := range gone {
		if err := pkgs.Rename(d, path.Join(filepath.Base(tmp), d)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("remove the unused package %s: %w", filepath.Join(in.packagesDir(), d), err)
		}
		in.progress.Stepf("removed the unused package folder %s", filepath.Join(in.packagesDir(), d))
	}
	return nil
}

// packageVersion is the version in the package.json of the package folder
// a plugin's folder lies in (a home the original's installer made has no
// install records), or "".
func (in *Installer) packageVersion(dir string) string {
	real, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return ""
	}
	d := in.packageOfPath(real)
	if d == "" {
		return ""
	}
	r, err := os.OpenRoot(in.packagesDir())
	if err != nil {
		return ""
	}
	defer r.Close()
	var pj struct {
		Version string `json:"version"`
	}
	if ok, err := readSmallJSON(r, path.Join(d, "package.json"), &pj); ok && err == nil {
		return pj.Version
	}
	return ""
}
