package install

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path"
	"sort"
	"strings"
)

// Found is one plugin found in a fetched source.
type Found struct {
	Name string
	// Dir is its folder, relative to the source's root ("." for the root).
	Dir string
	// Version is plugin.json's version, else its package.json's.
	Version string
	// DefaultConfig is plugin.json's defaultConfig, as written (JSON).
	DefaultConfig json.RawMessage
	// HasRun: plugin.json has a run command (beige can run it today).
	HasRun bool
}

// skipDiscover are folders never searched for plugin.json (as the original).
var skipDiscover = map[string]bool{
	"node_modules": true, "__tests__": true, "test": true, "tests": true, "scripts": true, "dist": true,
}

const maxManifest = 1 << 20

type manifestFile struct {
	Name          string          `json:"name"`
	Version       string          `json:"version"`
	DefaultConfig json.RawMessage `json:"defaultConfig"`
	Run           json.RawMessage `json:"run"`
}

// readSmallJSON reads a regular file (never through a symlink) of at most
// maxManifest bytes into v.
func readSmallJSON(r *os.Root, name string, v any) (bool, error) {
	fi, err := r.Lstat(name)
	if err != nil {
		if os.IsNotExist(err) {
			return false, nil
		}
		return false, err
	}
	if !fi.Mode().IsRegular() {
		return false, fmt.Errorf("%s is not a regular file", name)
	}
	f, err := r.OpenFile(name, os.O_RDONLY|noFollow, 0)
	if err != nil {
		return false, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxManifest+1))
	if err != nil {
		return false, err
	}
	if len(data) > maxManifest {
		return false, fmt.Errorf("%s is larger than %d bytes", name, maxManifest)
	}
	if err := json.Unmarshal(data, v); err != nil {
		return false, fmt.Errorf("%s: %w", name, err)
	}
	return true, nil
}

// discover finds every plugin.json under dir of root (not below a plugin's
// own folder, nor in hidden or skipped folders, nor through symlinks). A
// plugin.json that does not parse, or whose name is not a valid plugin
// name, is an error: the source is broken or hostile. warn gets the
// duplicates skipped.
func discover(root *os.Root, dir string, warn func(string)) ([]Found, error) {
	var found []Found
	seen := map[string]string{}
	visited := 0
	var walk func(rel string, depth int) error
	walk = func(rel string, depth int) error {
		visited++
		if visited > DefaultLimits.MaxFiles || depth > 32 {
			return fmt.Errorf("too many or too deeply nested folders to search for plugin.json")
		}
		full := path.Join(dir, rel)
		var m manifestFile
		ok, err := readSmallJSON(root, path.Join(full, "plugin.json"), &m)
		if err != nil {
			return fmt.Errorf("read plugin.json: %w", err)
		}
		if ok {
			if err := ValidName(m.Name); err != nil {
				return fmt.Errorf("%s: %w", path.Join(rel, "plugin.json"), err)
			}
			if prev, dup := seen[m.Name]; dup {
				warn(fmt.Sprintf("skipped %s: a plugin named %q is at %s already", rel, m.Name, prev))
				return nil
			}
			seen[m.Name] = rel
			f := Found{Name: m.Name, Dir: rel, Version: m.Version, HasRun: len(m.Run) > 0 && string(m.Run) != "null"}
			if len(m.DefaultConfig) > 0 && string(m.DefaultConfig) != "null" {
				f.DefaultConfig = m.DefaultConfig
			}
			if f.Version == "" {
				var pkg struct {
					Version string `json:"version"`
				}
				if ok, err := readSmallJSON(root, path.Join(full, "package.json"), &pkg); ok && err == nil {
					f.Version = pkg.Version
				}
			}
			found = append(found, f)
			return nil // a plugin's own folders are its business
		}
		d, err := root.Open(full)
		if err != nil {
			return fmt.Errorf("open %s: %w", full, err)
		}
		entries, err := d.ReadDir(-1)
		d.Close()
		if err != nil {
			return fmt.Errorf("read %s: %w", full, err)
		}
		sort.Slice(entries, func(i, j int) bool { return entries[i].Name() < entries[j].Name() })
		for _, e := range entries {
			if !e.IsDir() || strings.HasPrefix(e.Name(), ".") || skipDiscover[e.Name()] {
				continue
			}
			if err := walk(path.Join(rel, e.Name()), depth+1); err != nil {
				return err
			}
		}
		return nil
	}
	if err := walk(".", 0); err != nil {
		return nil, err
	}
	return found, nil
}
