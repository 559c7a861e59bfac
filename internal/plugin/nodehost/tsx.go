package nodehost

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// tsxImport returns the file: URL of the ESM loader of the tsx the plugin
// ships in its own folder (dir/node_modules/tsx), as `node --import tsx`
// run in the plugin folder resolves it through the package's exports; ""
// when the plugin ships no tsx. It is never looked up from the gateway's
// cwd or HOME, and a package.json or loader whose symlinks lead outside
// the plugin folder is refused (the host can read only that folder, and
// a jail will show only it). The URL names the loader under dir as given,
// so it stays valid where the folder is visible at the same path.
func tsxImport(dir string) (string, error) {
	pkg := filepath.Join(dir, "node_modules", "tsx")
	if _, err := os.Lstat(pkg); errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	root, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return "", fmt.Errorf("resolve plugin folder: %w", err)
	}
	pj, err := insideFolder(root, dir, filepath.Join(pkg, "package.json"))
	if err != nil {
		return "", err
	}
	raw, err := os.ReadFile(pj)
	if err != nil {
		return "", fmt.Errorf("read tsx package.json: %w", err)
	}
	target, err := packageEntry(raw)
	if err != nil {
		return "", fmt.Errorf("tsx package.json: %w", err)
	}
	// The target is relative to the package's real folder (where Node
	// finds it after following node_modules/tsx).
	loader, err := insideFolder(root, dir, filepath.Join(filepath.Dir(pj), filepath.FromSlash(target)))
	if err != nil {
		return "", err
	}
	return (&url.URL{Scheme: "file", Path: loader}).String(), nil
}

// insideFolder resolves the symlinks of p and returns it under dir (whose
// real path is root), or an error when it does not exist or leads outside.
func insideFolder(root, dir, p string) (string, error) {
	real, err := filepath.EvalSymlinks(p)
	if err != nil {
		return "", fmt.Errorf("resolve %s: %w", p, err)
	}
	rel, err := filepath.Rel(root, real)
	if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) || filepath.IsAbs(rel) {
		return "", fmt.Errorf("%s leads outside the plugin folder (to %s)", p, real)
	}
	return filepath.Join(dir, rel), nil
}

// importConditions are the conditions Node matches for an ESM import.
var importConditions = []string{"node", "import", "module-sync", "default"}

// packageEntry returns the package-relative path ("./dist/loader.mjs")
// that importing the package's main entry resolves to: its exports "."
// (a path or conditions, matched in the order they are written), else
// main, else index.js.
func packageEntry(raw []byte) (string, error) {
	var pj struct {
		Exports json.RawMessage `json:"exports"`
		Main    string          `json:"main"`
	}
	if err := json.Unmarshal(raw, &pj); err != nil {
		return "", err
	}
	var target string
	switch ex := bytes.TrimSpace(pj.Exports); {
	case len(ex) == 0:
		target = "./" + strings.TrimPrefix(cmp.Or(pj.Main, "index.js"), "./")
	default:
		if ex[0] == '{' {
			kv, err := orderedObject(ex)
			if err != nil {
				return "", fmt.Errorf("exports: %w", err)
			}
			if len(kv) > 0 && strings.HasPrefix(kv[0].key, ".") {
				// Subpaths: the main entry is ".".
				i := slices.IndexFunc(kv, func(e keyValue) bool { return e.key == "." })
				if i < 0 {
					return "", errors.New(`exports has no "."`)
				}
				ex = kv[i].value
			}
		}
		t, err := exportTarget(ex, 0)
		if err != nil {
			return "", fmt.Errorf("exports: %w", err)
		}
		target = t
	}
	if !strings.HasPrefix(target, "./") || slices.Contains(strings.Split(target, "/"), "..") {
		return "", fmt.Errorf("entry %q is not a path inside the package", target)
	}
	return target, nil
}

// exportTarget resolves one exports value: a path, conditions (the first
// that matches, in written order) or an array (the first that resolves).
func exportTarget(v json.RawMessage, depth int) (string, error) {
	v = bytes.TrimSpace(v)
	if depth > 8 {
		return "", errors.New("conditions nested too deep")
	}
	if len(v) == 0 {
		return "", errors.New("empty")
	}
	switch v[0] {
	case '"':
		var s string
		err := json.Unmarshal(v, &s)
		return s, err
	case '[':
		var arr []json.RawMessage
		if err := json.Unmarshal(v, &arr); err != nil {
			return "", err
		}
		for _, a := range arr {
			if s, err := exportTarget(a, depth+1); err == nil {
				return s, nil
			}
		}
		return "", errors.New("no entry of the array resolves")
	case '{':
		kv, err := orderedObject(v)
		if err != nil {
			return "", err
		}
		for _, e := range kv {
			if slices.Contains(importConditions, e.key) {
				if s, err := exportTarget(e.value, depth+1); err == nil {
					return s, nil
				}
			}
		}
		return "", fmt.Errorf("no condition of %v matches", importConditions)
	}
	return "", errors.New("not exported")
}

type keyValue struct {
	key   string
	value json.RawMessage
}

// orderedObject decodes a JSON object keeping its keys' order (conditions
// are matched in the order they are written).
func orderedObject(raw []byte) ([]keyValue, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil, errors.New("not an object")
	}
	var kv []keyValue
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return nil, err
		}
		k, _ := t.(string)
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, err
		}
		kv = append(kv, keyValue{k, v})
	}
	return kv, nil
}
