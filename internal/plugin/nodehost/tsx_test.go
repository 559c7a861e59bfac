package nodehost

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/beige-dev/beige/internal/config"
	"github.com/beige-dev/beige/internal/plugin"
	"github.com/beige-dev/beige/internal/plugin/jail"
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

// copyTree copies src to dst keeping the files' execute bits (esbuild's
// binary); symbolic links (node_modules/.bin) are left out.
func copyTree(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.WalkDir(src, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		switch {
		case d.IsDir():
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		case !d.Type().IsRegular():
			return nil
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), b, 0o644|fi.Mode().Perm()&0o111)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// realTsxPlugin uses what type stripping refuses (an enum, a namespace, a
// parameter property).
const realTsxPlugin = `
enum Color { Red, Green }
namespace Util { export const twice = (n: number): number => n * 2; }
class Box { constructor(private readonly v: number) {} get(): number { return this.v; } }
export function createPlugin(config: Record<string, unknown>, ctx: unknown) {
  return { register(r: any): void {
    r.tool({ name: "enumy", description: "", handler: async () => ({ output: "green=" + Color.Green + " twice=" + Util.twice(new Box(21).get()), exitCode: 0 }) });
  } };
}
`

// TestRealTsxJailed: a plugin folder that ships the real tsx from npm
// (BEIGE_TSX, scripts/ensure-tsx.sh) in its node_modules loads TypeScript
// that Node's type stripping refuses, in the jail with the permission
// model on.
func TestRealTsxJailed(t *testing.T) {
	src := os.Getenv("BEIGE_TSX")
	if src == "" {
		t.Skip("BEIGE_TSX is not set (the folder scripts/ensure-tsx.sh prints, holding node_modules/tsx)")
	}
	if _, err := os.Stat(filepath.Join(src, "node_modules", "tsx", "package.json")); err != nil {
		t.Fatalf("BEIGE_TSX=%s has no node_modules/tsx: %v", src, err)
	}
	dir := filepath.Join(t.TempDir(), "enumy")
	copyTree(t, filepath.Join(src, "node_modules"), filepath.Join(dir, "node_modules"))
	for name, body := range map[string]string{"plugin.json": `{"name":"enumy","description":"test plugin"}`, "index.ts": realTsxPlugin} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	f := mustFixture(t, map[string][]string{"travel": {"enumy"}}, tsPlugin{name: "enumy", dir: dir})
	resp := f.call("travel", "enumy")
	if !resp.Success || resp.Output != "green=1 twice=42" {
		t.Errorf("%+v\n%s", resp, f.log)
	}
	// Unconfined (the permission model alone), where the folders above
	// the plugin's exist: the same.
	man, err := config.ReadManifest(dir)
	if err != nil {
		t.Fatal(err)
	}
	env := plugin.Env{Name: "enumy", Dir: dir, Manifest: man, Config: map[string]any{}, DataDir: filepath.Join(t.TempDir(), "data"),
		Node: testNode(t), Logger: slog.New(slog.DiscardHandler), Unconfined: true}
	if out, code := jailedTool(t, env, "enumy", nil, env.DataDir); code != 0 || out != "green=1 twice=42" {
		t.Errorf("unconfined: %q (exit %d)", out, code)
	}
}

// workerEscapePlugin starts a Worker with execArgv: [] (as esbuild, which
// tsx runs, does): in Node 22 such a worker runs without the permission
// model, so it reads and spawns what the host may not.
const workerEscapePlugin = `
import { Worker } from "node:worker_threads";
import fs from "node:fs";
const code = 'const fs = require("node:fs"); const cp = require("node:child_process"); const { parentPort, workerData } = require("node:worker_threads");' +
  'const r = {}; try { r.read = "ok " + fs.readFileSync(workerData, "utf8"); } catch (e) { r.read = "fail " + e.code; }' +
  'try { r.spawn = "ok " + cp.execFileSync("/bin/echo", ["spawned"]).toString().trim(); } catch (e) { r.spawn = "fail " + e.code; }' +
  'parentPort.postMessage(r);';
export function createPlugin() {
  return { register(r) {
    r.tool({ name: "escape", description: "", handler: async (args) => {
      let main; try { main = "ok " + fs.readFileSync(args[0], "utf8"); } catch (e) { main = "fail " + e.code; }
      const w = await new Promise((resolve, reject) => {
        const wk = new Worker(code, { eval: true, execArgv: [], workerData: args[0] });
        wk.once("message", resolve);
        wk.once("error", reject);
      });
      return { output: JSON.stringify({ main, ...w }), exitCode: 0 };
    } });
  } };
}
`

// TestTsxWorkerEscapeStaysInJail: a plugin that ships tsx runs with worker
// threads, and a Worker started with execArgv: [] is not under Node's
// permission model (it reads any file, spawns any program). Jailed, it
// still sees only the jail: a file of the gateway's home does not exist
// for it. Unconfined it reads the file (hence the warning for confine:
// false with tsx).
func TestTsxWorkerEscapeStaysInJail(t *testing.T) {
	abs, err := filepath.Abs("testdata/faketsx")
	if err != nil {
		t.Fatal(err)
	}
	secret := filepath.Join(t.TempDir(), "config.json5")
	if err := os.WriteFile(secret, []byte("{secret: 1}"), 0o644); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "escape")
	copyDir(t, abs, filepath.Join(dir, "node_modules", "tsx"))
	for name, body := range map[string]string{"plugin.json": `{"name":"escape","description":"test plugin"}`, "index.js": workerEscapePlugin} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		unconfined bool
		want       map[string]string
	}{
		{false, map[string]string{"main": "fail ERR_ACCESS_DENIED", "read": "fail ENOENT", "spawn": "ok spawned"}},
		{true, map[string]string{"main": "fail ERR_ACCESS_DENIED", "read": "ok {secret: 1}", "spawn": "ok spawned"}},
	} {
		t.Run(fmt.Sprintf("unconfined=%v", tc.unconfined), func(t *testing.T) {
			node := testNode(t)
			if !tc.unconfined {
				if err := jail.Available(); err != nil {
					t.Skipf("no plugin jail here: %v", err)
				}
			}
			man, err := config.ReadManifest(dir)
			if err != nil {
				t.Fatal(err)
			}
			logs := &logBuf{}
			env := plugin.Env{Name: "escape", Dir: dir, Manifest: man, Config: map[string]any{}, DataDir: filepath.Join(t.TempDir(), "data"),
				Node: node, Logger: slog.New(slog.NewTextHandler(logs, nil)), Unconfined: tc.unconfined}
			out, _ := jailedTool(t, env, "escape", []string{secret}, env.DataDir)
			got := map[string]string{}
			if err := json.Unmarshal([]byte(out), &got); err != nil {
				t.Fatalf("%s: %v", out, err)
			}
			for k, w := range tc.want {
				if got[k] != w {
					t.Errorf("%s = %q, want %q", k, got[k], w)
				}
			}
			if warned := strings.Contains(logs.String(), "level=WARN") && strings.Contains(logs.String(), "outside Node's permission model"); warned != tc.unconfined {
				t.Errorf("warned about worker threads: %v, want %v:\n%s", warned, tc.unconfined, logs)
			}
		})
	}
}
