package nodehost

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha512"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/beige-dev/beige/internal/config"
	"github.com/beige-dev/beige/internal/home"
	"github.com/beige-dev/beige/internal/plugin"
	"github.com/beige-dev/beige/internal/plugin/install"
	"github.com/beige-dev/beige/internal/plugin/jail"
)

// sharedPlugin imports its package's ../_shared/helper.ts, as the
// toolkit's github, slack, confluence and wrangler do, and tries to read
// what it must not: the home's config, plugins/, another package, a
// sibling through its link in plugins/.
const sharedPlugin = `
import fs from "node:fs";
import { where } from "../_shared/helper.ts";
const attempt = (f) => { try { return "ok " + String(f()).slice(0, 40); } catch (e) { return "fail " + (e.code || e.message); } };
export function createPlugin(config, ctx) {
  return {
    register(r) {
      r.tool({ name: "NAME", description: "", handler: async (args) => {
        const [home] = args;
        return { output: JSON.stringify({
          helper: where(),
          config: attempt(() => fs.readFileSync(home + "/config.json5", "utf8")),
          plugins: attempt(() => fs.readdirSync(home + "/plugins").join(",")),
          otherPackage: attempt(() => fs.readFileSync(home + "/packages/other@1.0.0/secret.ts", "utf8")),
          siblingLink: attempt(() => fs.readFileSync(home + "/plugins/two/index.ts", "utf8")),
        }), exitCode: 0 };
      }});
    },
  };
}
`

func kitFiles(prefix string) map[string]string {
	return map[string]string{
		prefix + "package.json":              `{"name": "@fix/kit", "version": "1.0.0"}`,
		prefix + "plugins/_shared/helper.ts": `export function where(): string { return "the shared helper"; }` + "\n",
		prefix + "plugins/one/plugin.json":   `{"name": "one", "description": "test"}`,
		prefix + "plugins/one/index.ts":      strings.Replace(sharedPlugin, "NAME", "one", 1),
		prefix + "plugins/two/plugin.json":   `{"name": "two", "description": "test"}`,
		prefix + "plugins/two/index.ts":      strings.Replace(sharedPlugin, "NAME", "two", 1),
	}
}

func tgz(t *testing.T, files map[string]string) []byte {
	t.Helper()
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for name, body := range files {
		if err := tw.WriteHeader(&tar.Header{Name: name, Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(body))}); err != nil {
			t.Fatal(err)
		}
		tw.Write([]byte(body))
	}
	tw.Close()
	gz.Close()
	return buf.Bytes()
}

// npmRegistry serves one package version on loopback, as the registry does.
func npmRegistry(t *testing.T, pkg, version string, tarball []byte) string {
	sum := sha512.Sum512(tarball)
	var srv *httptest.Server
	srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/t.tgz" {
			w.Write(tarball)
			return
		}
		json.NewEncoder(w).Encode(map[string]any{"name": pkg, "dist-tags": map[string]string{"latest": version},
			"versions": map[string]any{version: map[string]any{"version": version, "dist": map[string]any{
				"tarball": srv.URL + "/t.tgz", "integrity": "sha512-" + base64.StdEncoding.EncodeToString(sum[:])}}}})
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

func needJail(t *testing.T) {
	t.Helper()
	if runtime.GOOS != "linux" {
		t.Skip("the plugin jail needs Linux")
	}
	if err := jail.Available(); err != nil {
		t.Skipf("no plugin jail here: %v", err)
	}
}

// newHome is a $BEIGE_HOME with a config and another package beside.
func newHome(t *testing.T) string {
	t.Helper()
	h := filepath.Join(t.TempDir(), "home")
	for _, d := range []string{"plugins", "packages/other@1.0.0", "data"} {
		if err := os.MkdirAll(filepath.Join(h, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	os.WriteFile(filepath.Join(h, "config.json5"), home.ConfigTemplate(), 0o600)
	os.WriteFile(filepath.Join(h, "packages", "other@1.0.0", "secret.ts"), []byte("another package"), 0o644)
	return h
}

// runShared loads plugins/<name> of the home as the gateway does (its
// configured path) and calls its tool.
func runShared(t *testing.T, h, name string, unconfined bool) map[string]string {
	t.Helper()
	dir := filepath.Join(h, "plugins", name)
	man, err := config.ReadManifest(dir)
	if err != nil {
		t.Fatal(err)
	}
	out, code := jailedTool(t, plugin.Env{
		Name: name, Dir: dir, Manifest: man, Config: map[string]any{}, DataDir: filepath.Join(h, "data", name), Packages: filepath.Join(h, "packages"),
		Node: testNode(t), Logger: slog.New(slog.DiscardHandler), Unconfined: unconfined,
	}, name, []string{h}, t.TempDir())
	var got map[string]string
	if err := json.Unmarshal([]byte(out), &got); err != nil || code != 0 {
		t.Fatalf("tool answered %q (exit %d): %v", out, code, err)
	}
	return got
}

func assertOnlyPackage(t *testing.T, got map[string]string) {
	t.Helper()
	if got["helper"] != "the shared helper" {
		t.Errorf("helper: %q", got["helper"])
	}
	for _, k := range []string{"config", "plugins", "otherPackage", "siblingLink"} {
		if !strings.HasPrefix(got[k], "fail") {
			t.Errorf("%s: %q, want it refused", k, got[k])
		}
	}
}

// TestInstalledPackagePluginLoads: `beige plugins install npm:<kit>` of
// a package whose plugins import ../_shared, then loading one of them
// through its configured path plugins/<name>: it loads (jailed and, with
// Node's permissions only, unconfined), its tool uses the shared helper,
// and nothing else of the home is readable.
func TestInstalledPackagePluginLoads(t *testing.T) {
	testNode(t)
	h := newHome(t)
	reg := npmRegistry(t, "@fix/kit", "1.0.0", tgz(t, kitFiles("package/")))
	in := install.New(install.Options{Home: h, Config: filepath.Join(h, "config.json5"), Registry: reg, Progress: &install.Progress{W: &bytes.Buffer{}}})
	src, err := install.ParseSource("npm:@fix/kit", "/")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := in.Install(context.Background(), src, nil); err != nil {
		t.Fatal(err)
	}
	for _, unconfined := range []bool{false, true} {
		t.Run(fmt.Sprintf("unconfined=%v", unconfined), func(t *testing.T) {
			if !unconfined {
				needJail(t)
			}
			assertOnlyPackage(t, runShared(t, h, "one", unconfined))
		})
	}
}

// TestOriginalLayoutPackagePluginLoads: a home the original's installer
// made (packages/<pkg>/plugins/<p>, plugins/<p> an absolute link to it)
// loads the same way.
func TestOriginalLayoutPackagePluginLoads(t *testing.T) {
	testNode(t)
	needJail(t)
	h := newHome(t)
	pkg := filepath.Join(h, "packages", "fix-kit")
	for name, body := range kitFiles("") {
		p := filepath.Join(pkg, name)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range []string{"one", "two"} {
		if err := os.Symlink(filepath.Join(pkg, "plugins", p), filepath.Join(h, "plugins", p)); err != nil {
			t.Fatal(err)
		}
	}
	assertOnlyPackage(t, runShared(t, h, "two", false))
}

// TestPackageFolder: which folder a plugin may read besides its own.
func TestPackageFolder(t *testing.T) {
	h := t.TempDir()
	os.MkdirAll(filepath.Join(h, "packages", "kit@1", "plugins", "p"), 0o755)
	pk := filepath.Join(h, "packages")
	for _, tc := range []struct {
		packages, dir, want string
	}{
		{pk, filepath.Join(pk, "kit@1", "plugins", "p"), filepath.Join(pk, "kit@1")},
		{pk, filepath.Join(pk, "kit@1"), filepath.Join(pk, "kit@1")},
		{pk, pk, ""}, // never packages/ itself
		{pk, filepath.Join(h, "plugins", "p"), ""},        // not in a package
		{pk, filepath.Join(h, "packagesx", "a", "b"), ""}, // a look-alike
		{filepath.Join(h, "elsewhere"), filepath.Join(pk, "kit@1", "plugins", "p"), ""},
		{"", filepath.Join(pk, "kit@1", "plugins", "p"), ""}, // no home known
	} {
		if got := packageFolder(tc.packages, tc.dir); got != tc.want {
			t.Errorf("packageFolder(%q, %q) = %q, want %q", tc.packages, tc.dir, got, tc.want)
		}
	}
}

// TestTsxInPackageThroughLink: a plugin of a package that ships tsx, run
// through its link plugins/<name>, finds its tsx in its real folder; a tsx
// its node_modules links to elsewhere in the package (outside the plugin's
// own folder) is still refused.
func TestTsxInPackageThroughLink(t *testing.T) {
	testNode(t)
	needJail(t)
	abs, err := filepath.Abs("testdata/faketsx")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		install func(pkg, dir string)
		wantErr string
	}{
		{"own tsx", func(pkg, dir string) { copyDir(t, abs, filepath.Join(dir, "node_modules", "tsx")) }, ""},
		{"the package's tsx", func(pkg, dir string) {
			copyDir(t, abs, filepath.Join(pkg, "node_modules", "tsx"))
			if err := os.Symlink("../../../node_modules/tsx", filepath.Join(dir, "node_modules", "tsx")); err != nil {
				t.Fatal(err)
			}
		}, "leads outside the plugin folder"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHome(t)
			pkg := filepath.Join(h, "packages", "kit@1.0.0")
			dir := filepath.Join(pkg, "plugins", "enumy")
			os.MkdirAll(filepath.Join(dir, "node_modules"), 0o755)
			os.WriteFile(filepath.Join(dir, "plugin.json"), []byte(`{"name":"enumy","description":"test plugin"}`), 0o644)
			os.WriteFile(filepath.Join(dir, "index.ts"), []byte(enumPlugin), 0o644)
			tc.install(pkg, dir)
			link := filepath.Join(h, "plugins", "enumy")
			if err := os.Symlink("../packages/kit@1.0.0/plugins/enumy", link); err != nil {
				t.Fatal(err)
			}
			man, err := config.ReadManifest(link)
			if err != nil {
				t.Fatal(err)
			}
			env := plugin.Env{Name: "enumy", Dir: link, Manifest: man, Config: map[string]any{}, DataDir: filepath.Join(h, "data", "enumy"), Packages: filepath.Join(h, "packages"),
				Node: testNode(t), Logger: slog.New(slog.DiscardHandler)}
			if tc.wantErr != "" {
				pl, err := New(env)
				if err != nil {
					t.Fatal(err)
				}
				if pr, _, err := pl.(*Plugin).launch(); err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					if pr != nil {
						pr.kill("test over")
						<-pr.done
					}
					t.Fatalf("launch: %v, want %q", err, tc.wantErr)
				}
				return
			}
			if out, code := jailedTool(t, env, "enumy", nil, t.TempDir()); out != "green=1 tsx=true" || code != 0 {
				t.Fatalf("%q (exit %d)", out, code)
			}
		})
	}
}

// TestToolkitGitHubInstalledFromPackage: the real toolkit package
// ($BEIGE_TOOLKIT's parent), installed as `beige plugins install` does,
// and its github plugin (whose module imports ../_shared/resolve-bin.ts)
// loaded jailed from plugins/github, without allowRead: it registers its
// tool.
func TestToolkitGitHubInstalledFromPackage(t *testing.T) {
	tk := toolkitDir(t, "github")
	testNode(t)
	needJail(t)
	h := newHome(t)
	in := install.New(install.Options{Home: h, Config: filepath.Join(h, "config.json5"), Progress: &install.Progress{W: &bytes.Buffer{}}})
	src, err := install.ParseSource(filepath.Dir(tk), "/")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := in.Install(context.Background(), src, []string{"github"}); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(h, "plugins", "github")
	man, err := config.ReadManifest(dir)
	if err != nil {
		t.Fatal(err)
	}
	pl, err := New(plugin.Env{Name: "github", Dir: dir, Manifest: man, Config: map[string]any{}, DataDir: filepath.Join(h, "data", "github"), Packages: filepath.Join(h, "packages"),
		Node: testNode(t), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	pr, reg, err := pl.(*Plugin).launch()
	if err != nil {
		t.Fatalf("launch: %v", err)
	}
	defer func() { pr.kill("test over"); <-pr.done }()
	if len(reg.Tools) == 0 || reg.Tools[0].Name != "github" {
		t.Fatalf("registered %+v", reg.Tools)
	}
}

// TestPluginFolderNodeCannotGrant: a folder Node would read as a list or
// a wildcard in --allow-fs-read fails the plugin instead of granting
// something else.
func TestPluginFolderNodeCannotGrant(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "a,b")
	os.MkdirAll(dir, 0o755)
	os.WriteFile(filepath.Join(dir, "index.js"), []byte("export function createPlugin() {}"), 0o644)
	_, err := New(plugin.Env{Name: "p", Dir: dir, Manifest: &config.Manifest{}, DataDir: filepath.Join(t.TempDir(), "data", "p"), Node: "/nonexistent/node"})
	if err == nil || !strings.Contains(err.Error(), "cannot be granted") {
		t.Fatalf("New: %v", err)
	}
}
