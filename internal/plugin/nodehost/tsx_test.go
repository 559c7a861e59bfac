package nodehost

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// enumPlugin uses an enum, which Node's type stripping refuses.
const enumPlugin = `
enum Color { Red, Green }
export function createPlugin(config, ctx) {
  return { register(r) {
    r.tool({ name: "enumy", description: "", handler: async () => ({ output: "green=" + Color.Green + " tsx=" + (globalThis.__fakeTsx === true), exitCode: 0 }) });
  } };
}
`

// copyDir copies the files of src (one level of subfolders is enough for
// testdata/faketsx) to dst.
func copyDir(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.WalkDir(src, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// enumPluginDir writes the enum plugin's folder; install puts the fake tsx
// into it (or next to it).
func enumPluginDir(t *testing.T, install func(dir string)) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "enumy")
	if err := os.MkdirAll(filepath.Join(dir, "node_modules"), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, body := range map[string]string{"plugin.json": `{"name":"enumy","description":"test plugin"}`, "index.ts": enumPlugin} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	install(dir)
	return dir
}

// TestTsxFromPluginFolder: a plugin that ships tsx in its folder runs with
// it (--import of the loader its package exports, resolved inside the
// plugin folder), so TypeScript that type stripping refuses loads; also
// when node_modules/tsx is a symlink inside the folder (pnpm's layout).
func TestTsxFromPluginFolder(t *testing.T) {
	abs, err := filepath.Abs("testdata/faketsx")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		install func(dir string)
	}{
		{"copy", func(dir string) { copyDir(t, abs, filepath.Join(dir, "node_modules", "tsx")) }},
		{"symlink inside", func(dir string) {
			copyDir(t, abs, filepath.Join(dir, "node_modules", ".pnpm", "tsx@4", "node_modules", "tsx"))
			if err := os.Symlink(".pnpm/tsx@4/node_modules/tsx", filepath.Join(dir, "node_modules", "tsx")); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := enumPluginDir(t, tc.install)
			f := mustFixture(t, map[string][]string{"travel": {"enumy"}}, tsPlugin{name: "enumy", dir: dir})
			resp := f.call("travel", "enumy")
			if !resp.Success || resp.Output != "green=1 tsx=true" {
				t.Errorf("%+v\n%s", resp, f.log)
			}
		})
	}
}

// TestTsxSymlinkOutsideRefused: a node_modules/tsx (or its loader) that a
// symlink takes outside the plugin folder is not run; the plugin fails to
// load saying so.
func TestTsxSymlinkOutsideRefused(t *testing.T) {
	abs, err := filepath.Abs("testdata/faketsx")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		install func(dir string)
	}{
		{"package folder", func(dir string) {
			if err := os.Symlink(abs, filepath.Join(dir, "node_modules", "tsx")); err != nil {
				t.Fatal(err)
			}
		}},
		{"loader file", func(dir string) {
			pkg := filepath.Join(dir, "node_modules", "tsx")
			copyDir(t, abs, pkg)
			os.Remove(filepath.Join(pkg, "dist", "loader.mjs"))
			if err := os.Symlink(filepath.Join(abs, "dist", "loader.mjs"), filepath.Join(pkg, "dist", "loader.mjs")); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := enumPluginDir(t, tc.install)
			f := mustFixture(t, map[string][]string{"travel": {"enumy"}}, tsPlugin{name: "enumy", dir: dir})
			resp := f.call("travel", "enumy")
			if resp.Success || !strings.Contains(resp.Error, "leads outside the plugin folder") {
				t.Errorf("%+v\n%s", resp, f.log)
			}
		})
	}
}

// TestPackageEntry: the loader is found as Node resolves an ESM import of
// the package: exports "." (conditions in written order), else main.
func TestPackageEntry(t *testing.T) {
	for _, tc := range []struct{ pj, want, err string }{
		{`{"exports":"./a.mjs"}`, "./a.mjs", ""},
		{`{"exports":{".":"./a.mjs","./cli":"./c.mjs"}}`, "./a.mjs", ""},
		{`{"exports":{"./package.json":"./package.json",".":{"types":"./t.d.ts","import":"./a.mjs","default":"./d.cjs"}}}`, "./a.mjs", ""},
		{`{"exports":{".":{"require":"./r.cjs","default":"./d.mjs","import":"./a.mjs"}}}`, "./d.mjs", ""},
		{`{"exports":{"import":{"node":"./n.mjs"},"default":"./d.cjs"}}`, "./n.mjs", ""},
		{`{"exports":{".":[{"require":"./r.cjs"},"./b.mjs"]}}`, "./b.mjs", ""},
		{`{"main":"dist/m.js"}`, "./dist/m.js", ""},
		{`{}`, "./index.js", ""},
		{`{"exports":{"./cli":"./c.mjs"}}`, "", `no "."`},
		{`{"exports":{".":{"require":"./r.cjs"}}}`, "", "no condition"},
		{`{"exports":{".":null}}`, "", "not exported"},
		{`{"exports":"../x.mjs"}`, "", "not a path inside"},
		{`{"exports":"./a/../../x.mjs"}`, "", "not a path inside"},
		{`{"exports":"/etc/x.mjs"}`, "", "not a path inside"},
		{`{"main":"../x.js"}`, "", "not a path inside"},
		{`not json`, "", "invalid"},
	} {
		got, err := packageEntry([]byte(tc.pj))
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s: got %q, %v; want error %q", tc.pj, got, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%s: got %q, %v; want %q", tc.pj, got, err, tc.want)
		}
	}
}
