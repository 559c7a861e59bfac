package install

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha512"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/titanous/json5"

	"github.com/beige-dev/beige/internal/config/json5edit"
	"github.com/beige-dev/beige/internal/home"
)

// testHome is a $BEIGE_HOME with the commented config template.
func testHome(t *testing.T) (dir, cfg string, orig []byte) {
	t.Helper()
	dir = t.TempDir()
	cfg = filepath.Join(dir, "config.json5")
	orig = home.ConfigTemplate()
	if err := os.WriteFile(cfg, orig, 0o600); err != nil {
		t.Fatal(err)
	}
	return dir, cfg, orig
}

func newInstaller(dir, cfg string, force bool, mod func(*Options)) *Installer {
	o := Options{Home: dir, Config: cfg, Force: force, Progress: &Progress{W: &bytes.Buffer{}}}
	if mod != nil {
		mod(&o)
	}
	return New(o)
}

func writeFiles(t *testing.T, root string, files map[string]string) {
	t.Helper()
	for name, body := range files {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

type cfgPlugins struct {
	Plugins map[string]struct {
		Path   string         `json:"path"`
		Source string         `json:"_source"`
		Config map[string]any `json:"config"`
	} `json:"plugins"`
}

func readCfg(t *testing.T, cfg string) ([]byte, cfgPlugins) {
	t.Helper()
	data, err := os.ReadFile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var c cfgPlugins
	if err := json5.Unmarshal(data, &c); err != nil {
		t.Fatalf("config does not parse: %v\n%s", err, data)
	}
	return data, c
}

// assertOnlyPluginsAdded: the config is the original plus a plugins
// object; every comment and byte of the original is there.
func assertOnlyPluginsAdded(t *testing.T, data, orig []byte) {
	t.Helper()
	back, err := json5edit.Delete(data, "plugins")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(back, orig) {
		t.Fatalf("config changed beyond plugins:\n%s", data)
	}
}

func mustParse(t *testing.T, s string) Source {
	t.Helper()
	src, err := ParseSource(s, "/")
	if err != nil {
		t.Fatal(err)
	}
	return src
}

func TestInstallLocal(t *testing.T) {
	dir, cfg, orig := testHome(t)
	src := t.TempDir()
	writeFiles(t, src, map[string]string{
		"plugin.json":       `{"name": "hello", "version": "1.2.3", "defaultConfig": {"greeting": "hi", "apiKey": "<KEY>"}}`,
		"index.ts":          "export {}",
		"lib/util.ts":       "export {}",
		".git/config":       "[core]",
		"node_modules/x/a":  "x",
		"tests/plugin.json": `{"name": "not-me"}`,
	})
	if err := os.Symlink("lib/util.ts", filepath.Join(src, "util.ts")); err != nil {
		t.Fatal(err)
	}
	out, err := newInstaller(dir, cfg, false, nil).Install(context.Background(), mustParse(t, src), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(out) != 1 || out[0].Name != "hello" || out[0].Version != "1.2.3" {
		t.Fatalf("installed %+v", out)
	}
	pdir := filepath.Join(dir, "plugins", "hello")
	for _, f := range []string{"plugin.json", "index.ts", "lib/util.ts", RecordFile} {
		if _, err := os.Stat(filepath.Join(pdir, f)); err != nil {
			t.Errorf("missing %s: %v", f, err)
		}
	}
	if tgt, err := os.Readlink(filepath.Join(pdir, "util.ts")); err != nil || tgt != "lib/util.ts" {
		t.Errorf("symlink inside the plugin: %q, %v", tgt, err)
	}
	for _, f := range []string{".git", "node_modules"} {
		if _, err := os.Stat(filepath.Join(pdir, f)); err == nil {
			t.Errorf("%s was copied", f)
		}
	}
	data, c := readCfg(t, cfg)
	e := c.Plugins["hello"]
	if e.Path != pdir || e.Source != src || e.Config["greeting"] != "hi" {
		t.Fatalf("config entry %+v", e)
	}
	assertOnlyPluginsAdded(t, data, orig)
	if entries := pluginEntries(t, dir); len(entries) != 1 {
		t.Errorf("plugins/ holds %v, want only hello (no temporary folder left)", entries)
	}
}

func TestInstallExistsAndForceKeepsConfig(t *testing.T) {
	dir, cfg, _ := testHome(t)
	src := t.TempDir()
	writeFiles(t, src, map[string]string{"plugin.json": `{"name": "hello", "version": "1.0.0", "defaultConfig": {"token": "<TOKEN>"}}`})
	ctx := context.Background()
	if _, err := newInstaller(dir, cfg, false, nil).Install(ctx, mustParse(t, src), nil); err != nil {
		t.Fatal(err)
	}
	// The user fills in the token, with a comment.
	data, _ := readCfg(t, cfg)
	data = bytes.Replace(data, []byte(`token: "<TOKEN>",`), []byte(`token: "${MY_TOKEN}", // mine`), 1)
	if err := os.WriteFile(cfg, data, 0o600); err != nil {
		t.Fatal(err)
	}
	writeFiles(t, src, map[string]string{"plugin.json": `{"name": "hello", "version": "2.0.0", "defaultConfig": {"token": "<TOKEN>"}}`})

	_, err := newInstaller(dir, cfg, false, nil).Install(ctx, mustParse(t, src), nil)
	var ee *ExistsError
	if !errors.As(err, &ee) || !strings.Contains(err.Error(), "already installed") || !strings.Contains(err.Error(), "hello") {
		t.Fatalf("reinstall without --force: %v, want: already installed", err)
	}
	if after, _ := os.ReadFile(cfg); !bytes.Equal(after, data) {
		t.Fatal("a refused install changed the config")
	}

	out, err := newInstaller(dir, cfg, true, nil).Install(ctx, mustParse(t, src), nil)
	if err != nil {
		t.Fatal(err)
	}
	if !out[0].Replaced || out[0].Version != "2.0.0" {
		t.Fatalf("forced install: %+v", out)
	}
	after, c := readCfg(t, cfg)
	if !bytes.Equal(after, data) {
		t.Fatalf("forced install changed the config (same path and source):\n%s", after)
	}
	if c.Plugins["hello"].Config["token"] != "${MY_TOKEN}" {
		t.Fatalf("the entry's config was touched: %v", c.Plugins["hello"].Config)
	}
	b, _ := os.ReadFile(filepath.Join(dir, "plugins", "hello", "plugin.json"))
	if !strings.Contains(string(b), "2.0.0") {
		t.Fatal("the folder was not replaced")
	}
}

func TestUpdateAndRemove(t *testing.T) {
	dir, cfg, orig := testHome(t)
	src := t.TempDir()
	writeFiles(t, src, map[string]string{
		"a/plugin.json": `{"name": "alpha", "version": "1.0.0", "defaultConfig": {"k": 1}}`,
		"b/plugin.json": `{"name": "beta", "version": "1.0.0"}`,
	})
	ctx := context.Background()
	in := newInstaller(dir, cfg, false, nil)
	if _, err := in.Install(ctx, mustParse(t, src), nil); err != nil {
		t.Fatal(err)
	}
	list, err := in.List()
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 2 || list[0].Name != "alpha" || list[0].Version != "1.0.0" || list[0].Source != src || !list[0].InConfig || !list[0].Installed {
		t.Fatalf("list: %+v", list)
	}

	writeFiles(t, src, map[string]string{"a/plugin.json": `{"name": "alpha", "version": "1.1.0", "defaultConfig": {"k": 2}}`})
	bySource, without, err := in.Sources([]string{"alpha"})
	if err != nil || len(without) != 0 || len(bySource[src]) != 1 {
		t.Fatalf("sources: %v %v %v", bySource, without, err)
	}
	if _, err := newInstaller(dir, cfg, true, nil).Install(ctx, mustParse(t, src), bySource[src]); err != nil {
		t.Fatal(err)
	}
	list, _ = in.List()
	if list[0].Version != "1.1.0" || list[1].Version != "1.0.0" {
		t.Fatalf("after update: %+v", list)
	}
	_, c := readCfg(t, cfg)
	if c.Plugins["alpha"].Config["k"] != float64(1) {
		t.Fatalf("update touched config: %v", c.Plugins["alpha"].Config)
	}

	for _, n := range []string{"alpha", "beta"} {
		if err := in.Remove(n); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(filepath.Join(dir, "plugins", n)); err == nil {
			t.Fatalf("%s still on disk", n)
		}
	}
	data, _ := readCfg(t, cfg)
	back, err := json5edit.Delete(data, "plugins")
	if err != nil || !bytes.Equal(back, orig) {
		t.Fatalf("after remove, the config is not the original plus an empty plugins:\n%s", data)
	}
	if err := in.Remove("alpha"); err == nil || !strings.Contains(err.Error(), "not installed") {
		t.Fatalf("removing it again: %v", err)
	}
}

func TestRemoveRefusesWhatItDidNotInstall(t *testing.T) {
	dir, cfg, _ := testHome(t)
	mine := t.TempDir()
	if err := os.WriteFile(cfg, []byte("{\n  plugins: {\n    mine: { path: "+quoteJSON(mine)+" },\n    git: {},\n  },\n}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	in := newInstaller(dir, cfg, false, nil)
	for _, name := range []string{"mine", "git", "../x", "a/b"} {
		if err := in.Remove(name); err == nil {
			t.Errorf("Remove(%q): no error", name)
		}
	}
	if _, err := os.Stat(mine); err != nil {
		t.Fatal("the user's folder was removed")
	}

	// A relative path is relative to the config's folder, as the loader
	// reads it: ./plugins/rel is the installed folder.
	writeFiles(t, filepath.Join(dir, "plugins", "rel"), map[string]string{"plugin.json": `{"name": "rel"}`})
	if err := os.WriteFile(cfg, []byte("{\n  plugins: {\n    rel: { path: './plugins/rel' },\n  },\n}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := in.Remove("rel"); err != nil {
		t.Fatalf("Remove(rel) with a relative path: %v", err)
	}
}

func quoteJSON(s string) string { b, _ := json.Marshal(s); return string(b) }

// --- npm ---

type tarEntry struct {
	name, body, link string
	typ              byte
	mode             int64
}

func buildTgz(t testing.TB, entries []tarEntry) []byte {
	t.Helper()
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for _, e := range entries {
		typ := e.typ
		if typ == 0 {
			typ = tar.TypeReg
		}
		mode := e.mode
		if mode == 0 {
			mode = 0o644
		}
		h := &tar.Header{Name: e.name, Typeflag: typ, Mode: mode, Linkname: e.link, Size: int64(len(e.body))}
		if typ != tar.TypeReg {
			h.Size = 0
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if typ == tar.TypeReg {
			if _, err := tw.Write([]byte(e.body)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := gz.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func sri(b []byte) string {
	sum := sha512.Sum512(b)
	return "sha512-" + base64.StdEncoding.EncodeToString(sum[:])
}

// registry serves one package's packument and tarballs on loopback.
type registry struct {
	*httptest.Server
	pkg      string
	tarballs map[string][]byte // version -> tgz
	// integrity overrides a version's dist.integrity.
	integrity map[string]string
	latest    string
	requests  []string
}

func newRegistry(t *testing.T, pkg, latest string, tarballs map[string][]byte) *registry {
	r := &registry{pkg: pkg, tarballs: tarballs, integrity: map[string]string{}, latest: latest}
	r.Server = httptest.NewServer(http.HandlerFunc(r.serve))
	t.Cleanup(r.Close)
	return r
}

func (r *registry) serve(w http.ResponseWriter, req *http.Request) {
	r.requests = append(r.requests, req.URL.EscapedPath())
	if v, ok := strings.CutPrefix(req.URL.Path, "/tarballs/"); ok {
		b, ok := r.tarballs[strings.TrimSuffix(v, ".tgz")]
		if !ok {
			http.NotFound(w, req)
			return
		}
		w.Write(b)
		return
	}
	if req.URL.EscapedPath() != "/"+strings.Replace(r.pkg, "/", "%2f", 1) {
		http.NotFound(w, req)
		return
	}
	versions := map[string]any{}
	for v, b := range r.tarballs {
		integ := sri(b)
		if o, ok := r.integrity[v]; ok {
			integ = o
		}
		versions[v] = map[string]any{"version": v, "dist": map[string]any{"tarball": r.URL + "/tarballs/" + v + ".tgz", "integrity": integ}}
	}
	json.NewEncoder(w).Encode(map[string]any{"name": r.pkg, "dist-tags": map[string]string{"latest": r.latest}, "versions": versions})
}

func kitTgz(t *testing.T, version string) []byte {
	return buildTgz(t, []tarEntry{
		{name: "package/package.json", body: `{"name": "@scope/kit", "version": "` + version + `"}`},
		{name: "package/plugins/one/plugin.json", body: `{"name": "one", "description": "x", "defaultConfig": {"apiKey": "<KEY>"}}`},
		{name: "package/plugins/one/index.ts", body: "export {}"},
		{name: "package/plugins/one/package.json", body: `{"type": "module", "peerDependencies": {"@scope/host": "*"}}`},
		{name: "package/plugins/two/plugin.json", body: `{"name": "two", "version": "0.0.9"}`},
		{name: "package/plugins/two/run.sh", body: "#!/bin/sh\n", mode: 0o755},
	})
}

func TestInstallNPMScopedVersionPin(t *testing.T) {
	dir, cfg, orig := testHome(t)
	reg := newRegistry(t, "@scope/kit", "2.0.0", map[string][]byte{"1.0.0": kitTgz(t, "1.0.0"), "2.0.0": kitTgz(t, "2.0.0")})
	in := newInstaller(dir, cfg, false, func(o *Options) { o.Registry = reg.URL + "/" })
	out, err := in.Install(context.Background(), mustParse(t, "npm:@scope/kit@1.0.0"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(out) != 2 || out[0].Name != "one" || out[0].Version != "1.0.0" || out[1].Name != "two" || out[1].Version != "0.0.9" {
		t.Fatalf("installed %+v", out)
	}
	if reg.requests[0] != "/@scope%2fkit" || reg.requests[1] != "/tarballs/1.0.0.tgz" {
		t.Fatalf("requests %v", reg.requests)
	}
	if fi, err := os.Stat(filepath.Join(dir, "plugins", "two", "run.sh")); err != nil || fi.Mode().Perm() != 0o755 {
		t.Fatalf("run.sh: %v %v", fi, err)
	}
	data, c := readCfg(t, cfg)
	if c.Plugins["one"].Source != "npm:@scope/kit@1.0.0" || c.Plugins["one"].Config["apiKey"] != "<KEY>" || c.Plugins["two"].Path != filepath.Join(dir, "plugins", "two") {
		t.Fatalf("config: %+v", c.Plugins)
	}
	assertOnlyPluginsAdded(t, data, orig)
	list, _ := in.List()
	if list[0].Version != "1.0.0" || list[0].Source != "npm:@scope/kit@1.0.0" {
		t.Fatalf("list: %+v", list)
	}

	// Unpinned: latest.
	in = newInstaller(dir, cfg, true, func(o *Options) { o.Registry = reg.URL })
	if out, err = in.Install(context.Background(), mustParse(t, "npm:@scope/kit"), nil); err != nil || out[0].Version != "2.0.0" {
		t.Fatalf("latest: %+v %v", out, err)
	}
}

func TestInstallNPMIntegrityMismatchRefused(t *testing.T) {
	dir, cfg, orig := testHome(t)
	reg := newRegistry(t, "@scope/kit", "1.0.0", map[string][]byte{"1.0.0": kitTgz(t, "1.0.0")})
	reg.integrity["1.0.0"] = sri([]byte("something else"))
	in := newInstaller(dir, cfg, false, func(o *Options) { o.Registry = reg.URL })
	_, err := in.Install(context.Background(), mustParse(t, "npm:@scope/kit"), nil)
	if err == nil || !strings.Contains(err.Error(), "does not match the registry's integrity") {
		t.Fatalf("mismatch: %v", err)
	}
	assertNothingInstalled(t, dir, cfg, orig)

	reg.integrity["1.0.0"] = ""
	if _, err := in.Install(context.Background(), mustParse(t, "npm:@scope/kit"), nil); err == nil || !strings.Contains(err.Error(), "no sha512 integrity") {
		t.Fatalf("no integrity: %v", err)
	}
	assertNothingInstalled(t, dir, cfg, orig)
}

// pluginEntries lists plugins/ but its lock file.
func pluginEntries(t *testing.T, dir string) []string {
	t.Helper()
	entries, _ := os.ReadDir(filepath.Join(dir, "plugins"))
	var names []string
	for _, e := range entries {
		if e.Name() != ".lock" {
			names = append(names, e.Name())
		}
	}
	return names
}

func assertNothingInstalled(t *testing.T, dir, cfg string, orig []byte) {
	t.Helper()
	if entries := pluginEntries(t, dir); len(entries) != 0 {
		t.Fatalf("plugins/ holds %v after a refused install", entries)
	}
	if data, _ := os.ReadFile(cfg); !bytes.Equal(data, orig) {
		t.Fatal("a refused install changed the config")
	}
}

func TestInstallNPMHostileTarball(t *testing.T) {
	ok := []tarEntry{{name: "package/plugin.json", body: `{"name": "evil"}`}}
	tests := []struct {
		name    string
		entries []tarEntry
		want    string
	}{
		{"dot-dot", []tarEntry{{name: "package/../../evil", body: "x"}}, "climbs out"},
		{"dot-dot inside", []tarEntry{{name: "package/a/../../../evil", body: "x"}}, "climbs out"},
		{"absolute", []tarEntry{{name: "/tmp/evil", body: "x"}}, "refused path"},
		{"symlink absolute", []tarEntry{{name: "package/l", typ: tar.TypeSymlink, link: "/etc"}}, "points out"},
		{"symlink up", []tarEntry{{name: "package/l", typ: tar.TypeSymlink, link: "../../x"}}, "points out"},
		{"symlink via a link to .", []tarEntry{{name: "package/d", typ: tar.TypeSymlink, link: "."}, {name: "package/l", typ: tar.TypeSymlink, link: "d/../.."}}, "points out"},
		{"write through a symlink", []tarEntry{{name: "package/d", typ: tar.TypeSymlink, link: "."}, {name: "package/d/x", body: "x"}}, "inside the symlink"},
		{"hardlink out", []tarEntry{{name: "package/h", typ: tar.TypeLink, link: "../etc/passwd"}}, "points out"},
		{"hardlink to nothing", []tarEntry{{name: "package/h", typ: tar.TypeLink, link: "package/none"}}, "not a file extracted"},
		{"device", []tarEntry{{name: "package/dev", typ: tar.TypeChar}}, "character device"},
		{"fifo", []tarEntry{{name: "package/f", typ: tar.TypeFifo}}, "fifo"},
		{"duplicate", []tarEntry{{name: "package/a", body: "1"}, {name: "package/a", body: "2"}}, "twice"},
		{"too many files", func() []tarEntry {
			var es []tarEntry
			for i := range 30 {
				es = append(es, tarEntry{name: fmt.Sprintf("package/f%d", i), body: "x"})
			}
			return es
		}(), "more than 20 files"},
		{"too big", []tarEntry{{name: "package/big", body: strings.Repeat("x", 5000)}}, "more than 4096 bytes"},
		{"bad plugin name", []tarEntry{{name: "package/p/plugin.json", body: `{"name": "../../x"}`}}, "bad plugin name"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir, cfg, orig := testHome(t)
			base := ok
			if tt.name == "bad plugin name" {
				base = nil // no plugin.json at the top, so p/ is searched
			}
			tgz := buildTgz(t, append(append([]tarEntry{}, base...), tt.entries...))
			reg := newRegistry(t, "evil", "1.0.0", map[string][]byte{"1.0.0": tgz})
			in := newInstaller(dir, cfg, false, func(o *Options) {
				o.Registry = reg.URL
				o.Limits = Limits{MaxFiles: 20, MaxBytes: 4096}
			})
			_, err := in.Install(context.Background(), mustParse(t, "npm:evil"), nil)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("got %v, want an error with %q", err, tt.want)
			}
			assertNothingInstalled(t, dir, cfg, orig)
			if _, err := os.Lstat(filepath.Join(dir, "evil")); err == nil {
				t.Fatal("a file was written outside plugins/")
			}
		})
	}
}

func TestNPMDependencies(t *testing.T) {
	dir, cfg, orig := testHome(t)
	src := t.TempDir()
	writeFiles(t, src, map[string]string{
		"plugin.json":  `{"name": "deps"}`,
		"package.json": `{"dependencies": {"x": "file:../../../etc"}}`,
	})
	in := newInstaller(dir, cfg, false, nil)
	if _, err := in.Install(context.Background(), mustParse(t, src), nil); err == nil || !strings.Contains(err.Error(), "refused") {
		t.Fatalf("file: dependency: %v", err)
	}
	assertNothingInstalled(t, dir, cfg, orig)

	writeFiles(t, src, map[string]string{"package.json": `{"dependencies": {"x": "^1.0.0"}}`})
	t.Setenv("PATH", t.TempDir())
	if _, err := in.Install(context.Background(), mustParse(t, src), nil); err == nil || !strings.Contains(err.Error(), "npm is not installed") {
		t.Fatalf("no npm: %v", err)
	}
	assertNothingInstalled(t, dir, cfg, orig)
}

// --- github ---

func gitRun(t *testing.T, dir string, args ...string) {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@t", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@t", "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
}

func TestInstallGitHubFileRemote(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed")
	}
	dir, cfg, orig := testHome(t)
	gh := t.TempDir()
	repo := filepath.Join(gh, "owner", "repo")
	writeFiles(t, repo, map[string]string{
		"plugins/git-one/plugin.json": `{"name": "ghone", "version": "1.0.0"}`,
		"plugins/other/plugin.json":   `{"name": "ghother", "version": "1.0.0"}`,
	})
	gitRun(t, repo, "init", "-q", "-b", "main")
	gitRun(t, repo, "add", ".")
	gitRun(t, repo, "commit", "-q", "-m", "one")
	gitRun(t, repo, "tag", "v1")
	writeFiles(t, repo, map[string]string{"plugins/git-one/plugin.json": `{"name": "ghone", "version": "2.0.0"}`})
	gitRun(t, repo, "commit", "-q", "-am", "two")

	mod := func(allow bool) func(*Options) {
		return func(o *Options) { o.GitHubURL = "file://" + gh; o.AllowFileGit = allow }
	}
	src := mustParse(t, "github:owner/repo/plugins/git-one#v1")
	if _, err := newInstaller(dir, cfg, false, mod(false)).Install(context.Background(), src, nil); err == nil || !strings.Contains(err.Error(), "BEIGE_GITHUB_ALLOW_FILE") {
		t.Fatalf("file:// without the override: %v", err)
	}
	out, err := newInstaller(dir, cfg, false, mod(true)).Install(context.Background(), src, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(out) != 1 || out[0].Name != "ghone" || out[0].Version != "1.0.0" {
		t.Fatalf("installed %+v (want only ghone at the tag v1)", out)
	}
	data, c := readCfg(t, cfg)
	if c.Plugins["ghone"].Source != "github:owner/repo/plugins/git-one#v1" {
		t.Fatalf("config %+v", c.Plugins)
	}
	assertOnlyPluginsAdded(t, data, orig)

	// The default branch, whole repository; a missing path.
	out, err = newInstaller(dir, cfg, true, mod(true)).Install(context.Background(), mustParse(t, "github:owner/repo"), nil)
	if err != nil || len(out) != 2 || out[0].Version != "2.0.0" {
		t.Fatalf("whole repo: %+v %v", out, err)
	}
	if _, err := newInstaller(dir, cfg, true, mod(true)).Install(context.Background(), mustParse(t, "github:owner/repo/nope"), nil); err == nil || !strings.Contains(err.Error(), "not a folder") {
		t.Fatalf("missing path: %v", err)
	}
	if _, err := newInstaller(dir, cfg, true, mod(true)).Install(context.Background(), mustParse(t, "github:owner/missing"), nil); err == nil || !strings.Contains(err.Error(), "git clone") {
		t.Fatalf("missing repo: %v", err)
	}
}

// --- rules ---

func TestParseSource(t *testing.T) {
	tests := []struct {
		in   string
		want Source
		err  bool
	}{
		{in: "npm:@scope/pkg", want: Source{Kind: KindNPM, Package: "@scope/pkg"}},
		{in: "npm:@scope/pkg@1.2.3", want: Source{Kind: KindNPM, Package: "@scope/pkg", Version: "1.2.3"}},
		{in: "npm:pkg@next", want: Source{Kind: KindNPM, Package: "pkg", Version: "next"}},
		{in: "pkg", want: Source{Kind: KindNPM, Package: "pkg"}},
		{in: "npm:@scope", err: true},
		{in: "npm:../x", err: true},
		{in: "npm:pkg@^1.0.0", want: Source{Kind: KindNPM, Package: "pkg", Version: "^1.0.0"}},
		{in: "npm:pkg@1.0.0;rm", err: true},
		{in: "npm:pkg@", err: true},
		{in: "github:o/r", want: Source{Kind: KindGitHub, Owner: "o", Repo: "r"}},
		{in: "github:o/r/plugins/git#v1.2", want: Source{Kind: KindGitHub, Owner: "o", Repo: "r", SubPath: "plugins/git", Ref: "v1.2"}},
		{in: "github:o", err: true},
		{in: "github:o/r/../x", err: true},
		{in: "github:../r", err: true},
		{in: "github:o/r#--upload-pack=x", err: true},
		{in: "github:o/r#a..b", err: true},
		{in: "./p", want: Source{Kind: KindLocal, Path: "/w/p"}},
		{in: "/abs/p", want: Source{Kind: KindLocal, Path: "/abs/p"}},
		{in: "", err: true},
	}
	for _, tt := range tests {
		got, err := ParseSource(tt.in, "/w")
		if (err != nil) != tt.err || (!tt.err && got != tt.want) {
			t.Errorf("ParseSource(%q) = %+v, %v; want %+v, error %v", tt.in, got, err, tt.want, tt.err)
		}
	}
}

func TestLinkStaysInside(t *testing.T) {
	tests := []struct {
		rel, target string
		want        bool
	}{
		{"a", "b", true},
		{"a", "./b/c", true},
		{"d/a", "../b", true},
		{"a", "../b", false},
		{"a", "/etc", false},
		{"a", "b/../..", false},
		{"a", "b/../c", false},
		{"d/e/a", "../../x", true},
		{"d/e/a", "../../../x", false},
		{"a", "", false},
	}
	for _, tt := range tests {
		if got := linkStaysInside(tt.rel, tt.target); got != tt.want {
			t.Errorf("linkStaysInside(%q, %q) = %v, want %v", tt.rel, tt.target, got, tt.want)
		}
	}
}

// TestConcurrentInstallsKeepEveryEntry: plugin commands run one at a time,
// so that no config edit is lost.
func TestConcurrentInstallsKeepEveryEntry(t *testing.T) {
	dir, cfg, _ := testHome(t)
	const n = 6
	errs := make(chan error, n)
	for i := range n {
		src := t.TempDir()
		writeFiles(t, src, map[string]string{"plugin.json": fmt.Sprintf(`{"name": "p%d"}`, i)})
		go func() {
			_, err := newInstaller(dir, cfg, false, nil).Install(context.Background(), mustParse(t, src), nil)
			errs <- err
		}()
	}
	for range n {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	_, c := readCfg(t, cfg)
	if len(c.Plugins) != n {
		t.Fatalf("config has %d entries, want %d: an edit was lost", len(c.Plugins), n)
	}
}

// TestCloneRunsNoHooks: a hooks folder in the host's git config (or one a
// repository could name) is not run by the clone.
func TestCloneRunsNoHooks(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed")
	}
	dir, cfg, _ := testHome(t)
	gh := t.TempDir()
	repo := filepath.Join(gh, "o", "r")
	writeFiles(t, repo, map[string]string{"plugin.json": `{"name": "hooked"}`})
	gitRun(t, repo, "init", "-q", "-b", "main")
	gitRun(t, repo, "add", ".")
	gitRun(t, repo, "commit", "-q", "-m", "one")

	hooks := t.TempDir()
	marker := filepath.Join(t.TempDir(), "ran")
	writeFiles(t, hooks, map[string]string{"post-checkout": "#!/bin/sh\ntouch " + marker + "\n"})
	os.Chmod(filepath.Join(hooks, "post-checkout"), 0o755)
	fakeHome := t.TempDir()
	writeFiles(t, fakeHome, map[string]string{".gitconfig": "[core]\n\thooksPath = " + hooks + "\n"})
	t.Setenv("HOME", fakeHome)
	t.Setenv("XDG_CONFIG_HOME", fakeHome)

	in := newInstaller(dir, cfg, false, func(o *Options) { o.GitHubURL = "file://" + gh; o.AllowFileGit = true })
	if _, err := in.Install(context.Background(), mustParse(t, "github:o/r"), nil); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("a post-checkout hook ran during the clone")
	}
}

// TestNPMRunsOnlyForDependenciesWithoutScripts: npm runs only for a
// plugin with dependencies, with --ignore-scripts, in the plugin's own
// folder, after the package's .npmrc and lockfiles are gone.
func TestNPMRunsOnlyForDependenciesWithoutScripts(t *testing.T) {
	dir, cfg, _ := testHome(t)
	log := filepath.Join(t.TempDir(), "npm.log")
	fake := filepath.Join(t.TempDir(), "npm")
	uc := filepath.Join(t.TempDir(), "userconfig")
	writeFiles(t, filepath.Dir(fake), map[string]string{"npm": "#!/bin/sh\necho \"$PWD $*\" >> " + log + "\nls -A >> " + log + "\n" +
		"while [ $# -gt 0 ]; do if [ \"$1\" = --userconfig ]; then stat -c %a \"$2\" > " + uc + ".mode; cp \"$2\" " + uc + "; echo \"$2\" > " + uc + ".path; fi; shift; done\n"})
	os.Chmod(fake, 0o755)
	src := t.TempDir()
	writeFiles(t, src, map[string]string{
		"nodeps/plugin.json":     `{"name": "nodeps"}`,
		"nodeps/package.json":    `{"peerDependencies": {"host": "*"}, "devDependencies": {"x": "1"}}`,
		"deps/plugin.json":       `{"name": "deps"}`,
		"deps/package.json":      `{"dependencies": {"cron-parser": "^5.5.0", "alias": "npm:other@^1"}, "scripts": {"postinstall": "touch /tmp/pwned"}}`,
		"deps/.npmrc":            "git=/tmp/evil\n",
		"deps/package-lock.json": `{}`,
	})
	npmrc := ParseNPMRC([]byte("@acme:registry=http://127.0.0.1:8/a/\n//127.0.0.1:8/a/:_authToken=${TOK}\n"), func(string) string { return "tok;en" })
	in := newInstaller(dir, cfg, false, func(o *Options) { o.NPM = fake; o.Registry = "http://127.0.0.1:9/"; o.NPMRC = npmrc })
	if _, err := in.Install(context.Background(), mustParse(t, src), nil); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(log)
	if err != nil {
		t.Fatal("npm did not run for the plugin with dependencies")
	}
	got := string(b)
	lines := strings.Split(strings.TrimSpace(got), "\n")
	// Plugins in subfolders are a package: staged whole in packages/.
	want := filepath.Join(dir, "packages") + "/.tmp-"
	if !strings.HasPrefix(lines[0], want) || !strings.Contains(lines[0], "/pkg/deps install --omit=dev --legacy-peer-deps --ignore-scripts --no-audit --no-fund --no-package-lock --userconfig /") {
		t.Fatalf("npm ran as %q", lines[0])
	}
	// npm got the same registries and token in a private 0600 userconfig,
	// removed after.
	ucb, _ := os.ReadFile(uc)
	mode, _ := os.ReadFile(uc + ".mode")
	ucPath, _ := os.ReadFile(uc + ".path")
	if string(ucb) != "registry=http://127.0.0.1:9/\n@acme:registry=http://127.0.0.1:8/a/\n//127.0.0.1:8/a/:_authToken=\"tok;en\"\n" || strings.TrimSpace(string(mode)) != "600" {
		t.Fatalf("npm userconfig (mode %s):\n%s", mode, ucb)
	}
	if _, err := os.Stat(strings.TrimSpace(string(ucPath))); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("userconfig %s left behind: %v", ucPath, err)
	}
	if strings.Count(got, " install ") != 1 || strings.Contains(got, ".npmrc") || strings.Contains(got, "package-lock.json") {
		t.Fatalf("npm log:\n%s", got)
	}
}
