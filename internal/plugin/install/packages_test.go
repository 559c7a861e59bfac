package install

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// sharedKitTgz is a package like the toolkit: two plugins in plugins/
// that both import ../_shared/helper.ts.
func sharedKitTgz(t *testing.T, version string) []byte {
	return buildTgz(t, []tarEntry{
		{name: "package/package.json", body: `{"name": "@scope/kit", "version": "` + version + `"}`},
		{name: "package/plugins/_shared/helper.ts", body: `export const where = "shared ` + version + `";` + "\n"},
		{name: "package/plugins/one/plugin.json", body: `{"name": "one"}`},
		{name: "package/plugins/one/index.ts", body: `import { where } from "../_shared/helper.ts"; // one ` + version + "\n"},
		{name: "package/plugins/two/plugin.json", body: `{"name": "two"}`},
		{name: "package/plugins/two/index.ts", body: `import { where } from "../_shared/helper.ts"; // two ` + version + "\n"},
	})
}

// packageFolders lists packages/ but hidden entries.
func packageFolders(t *testing.T, dir string) []string {
	t.Helper()
	entries, _ := os.ReadDir(filepath.Join(dir, "packages"))
	var names []string
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), ".") {
			names = append(names, e.Name())
		}
	}
	return names
}

func readSibling(t *testing.T, dir, plugin, rel string) string {
	t.Helper()
	// Not filepath.Join, which would take ".." lexically: the kernel
	// resolves it from the link's target, as Node does.
	b, err := os.ReadFile(filepath.Join(dir, "plugins", plugin) + "/" + rel)
	if err != nil {
		t.Fatalf("plugins/%s/%s: %v", plugin, rel, err)
	}
	return string(b)
}

func assertLink(t *testing.T, dir, plugin, want string) {
	t.Helper()
	got, err := os.Readlink(filepath.Join(dir, "plugins", plugin))
	if err != nil || got != want {
		t.Fatalf("plugins/%s: link %q (%v), want %q", plugin, got, err, want)
	}
}

// The toolkit's layout: a plugin's ../_shared must be there after install.
func TestInstallPackageKeepsSharedFiles(t *testing.T) {
	dir, cfg, orig := testHome(t)
	reg := newRegistry(t, "@scope/kit", "1.0.0", map[string][]byte{"1.0.0": sharedKitTgz(t, "1.0.0")})
	in := newInstaller(dir, cfg, false, func(o *Options) { o.Registry = reg.URL })
	out, err := in.Install(context.Background(), mustParse(t, "npm:@scope/kit"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(out) != 2 || out[0].Dir != filepath.Join(dir, "plugins", "one") || out[0].Version != "1.0.0" {
		t.Fatalf("installed %+v", out)
	}
	// What Node resolves from the plugin's real folder.
	real, err := filepath.EvalSymlinks(filepath.Join(dir, "plugins", "one"))
	if err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(real, "..", "_shared", "helper.ts")); err != nil || !strings.Contains(string(b), "shared 1.0.0") {
		t.Fatalf("../_shared/helper.ts from plugin one: %q %v", b, err)
	}
	assertLink(t, dir, "one", "../packages/scope-kit@1.0.0/plugins/one")
	assertLink(t, dir, "two", "../packages/scope-kit@1.0.0/plugins/two")
	if got := pluginEntries(t, dir); !slices.Equal(got, []string{"one", "two"}) {
		t.Fatalf("plugins/ holds %v", got)
	}
	data, c := readCfg(t, cfg)
	if c.Plugins["one"].Path != filepath.Join(dir, "plugins", "one") || c.Plugins["two"].Source != "npm:@scope/kit" {
		t.Fatalf("config: %+v", c.Plugins)
	}
	assertOnlyPluginsAdded(t, data, orig)
	list, err := in.List()
	if err != nil || len(list) != 2 || list[1].Name != "two" || list[1].Version != "1.0.0" || list[1].Source != "npm:@scope/kit" || !list[1].Installed {
		t.Fatalf("list: %+v %v", list, err)
	}
}

// Updating one plugin of a package leaves the other's code as it was;
// removing both removes the package folders.
func TestUpdateOnePluginOfPackage(t *testing.T) {
	dir, cfg, _ := testHome(t)
	reg := newRegistry(t, "@scope/kit", "1.0.0", map[string][]byte{"1.0.0": sharedKitTgz(t, "1.0.0"), "2.0.0": sharedKitTgz(t, "2.0.0")})
	ctx := context.Background()
	in := newInstaller(dir, cfg, false, func(o *Options) { o.Registry = reg.URL })
	if _, err := in.Install(ctx, mustParse(t, "npm:@scope/kit"), nil); err != nil {
		t.Fatal(err)
	}
	reg.latest = "2.0.0"
	up := newInstaller(dir, cfg, true, func(o *Options) { o.Registry = reg.URL })
	bySource, _, err := up.Sources([]string{"one"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := up.Install(ctx, mustParse(t, "npm:@scope/kit"), bySource["npm:@scope/kit"]); err != nil {
		t.Fatal(err)
	}
	if got := readSibling(t, dir, "one", "../_shared/helper.ts"); !strings.Contains(got, "shared 2.0.0") {
		t.Fatalf("one sees %q", got)
	}
	if got := readSibling(t, dir, "two", "index.ts"); !strings.Contains(got, "two 1.0.0") {
		t.Fatalf("updating one changed two's code: %q", got)
	}
	if got := readSibling(t, dir, "two", "../_shared/helper.ts"); !strings.Contains(got, "shared 1.0.0") {
		t.Fatalf("updating one changed two's shared code: %q", got)
	}
	if got := packageFolders(t, dir); !slices.Equal(got, []string{"scope-kit@1.0.0", "scope-kit@2.0.0"}) {
		t.Fatalf("packages/ holds %v", got)
	}
	list, _ := in.List()
	if list[0].Version != "2.0.0" || list[1].Version != "1.0.0" {
		t.Fatalf("list: %+v", list)
	}

	// --force reinstall of everything: both move to a new folder, the
	// old ones go.
	if _, err := up.Install(ctx, mustParse(t, "npm:@scope/kit"), nil); err != nil {
		t.Fatal(err)
	}
	if got := packageFolders(t, dir); !slices.Equal(got, []string{"scope-kit@2.0.0_2"}) {
		t.Fatalf("after --force, packages/ holds %v", got)
	}
	assertLink(t, dir, "two", "../packages/scope-kit@2.0.0_2/plugins/two")

	if err := in.Remove("one"); err != nil {
		t.Fatal(err)
	}
	if got := packageFolders(t, dir); len(got) != 1 {
		t.Fatalf("the package went while two uses it: %v", got)
	}
	if got := readSibling(t, dir, "two", "../_shared/helper.ts"); !strings.Contains(got, "shared 2.0.0") {
		t.Fatalf("two after removing one: %q", got)
	}
	if err := in.Remove("two"); err != nil {
		t.Fatal(err)
	}
	if got := packageFolders(t, dir); len(got) != 0 {
		t.Fatalf("after removing both, packages/ holds %v", got)
	}
	if got := pluginEntries(t, dir); len(got) != 0 {
		t.Fatalf("after removing both, plugins/ holds %v", got)
	}
}

// A home in the original's layout: packages/<pkg>/plugins/<p> with an
// absolute link plugins/<p>; remove takes the link and then the package.
func TestRemoveOriginalLayout(t *testing.T) {
	dir, cfg, _ := testHome(t)
	pkg := filepath.Join(dir, "packages", "matthias-hausberger-beige-toolkit")
	writeFiles(t, pkg, map[string]string{
		"package.json":              `{"version": "1.0.8"}`,
		"plugins/_shared/x.ts":      "export {}",
		"plugins/slack/plugin.json": `{"name": "slack"}`,
		"plugins/slack/index.ts":    "export {}",
	})
	os.MkdirAll(filepath.Join(dir, "plugins"), 0o755)
	if err := os.Symlink(filepath.Join(pkg, "plugins", "slack"), filepath.Join(dir, "plugins", "slack")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cfg, []byte("{\n  plugins: {\n    slack: { path: "+quoteJSON(filepath.Join(dir, "plugins", "slack"))+", _source: 'npm:@matthias-hausberger/beige-toolkit' },\n  },\n}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	in := newInstaller(dir, cfg, false, nil)
	list, err := in.List()
	if err != nil || len(list) != 1 || !list[0].Installed || list[0].Source != "npm:@matthias-hausberger/beige-toolkit" || list[0].Version != "1.0.8" {
		t.Fatalf("list: %+v %v", list, err)
	}
	if err := in.Remove("slack"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(filepath.Join(dir, "plugins", "slack")); err == nil {
		t.Fatal("the link is still there")
	}
	if got := packageFolders(t, dir); len(got) != 0 {
		t.Fatalf("packages/ holds %v", got)
	}
}

// Remove never deletes outside plugins/ and packages/: a link that points
// outside is removed as a link, and so is a package folder that is a link.
func TestRemoveNeverFollowsLinks(t *testing.T) {
	dir, cfg, _ := testHome(t)
	outside := t.TempDir()
	writeFiles(t, outside, map[string]string{"keep/plugin.json": `{"name": "evil"}`, "keep/index.ts": "x", "pkg/plugins/p/index.ts": "y"})
	os.MkdirAll(filepath.Join(dir, "plugins"), 0o755)
	os.MkdirAll(filepath.Join(dir, "packages"), 0o755)
	// plugins/evil -> outside/keep; plugins/p -> ../packages/d/plugins/p
	// where packages/d -> outside/pkg.
	if err := os.Symlink(filepath.Join(outside, "keep"), filepath.Join(dir, "plugins", "evil")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(outside, "pkg"), filepath.Join(dir, "packages", "d")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../packages/d/plugins/p", filepath.Join(dir, "plugins", "p")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cfg, []byte("{\n  plugins: {\n    evil: { path: "+quoteJSON(filepath.Join(dir, "plugins", "evil"))+" },\n  },\n}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	in := newInstaller(dir, cfg, false, nil)
	for _, n := range []string{"evil", "p"} {
		if err := in.Remove(n); err != nil {
			t.Fatalf("remove %s: %v", n, err)
		}
		if _, err := os.Lstat(filepath.Join(dir, "plugins", n)); err == nil {
			t.Fatalf("plugins/%s is still there", n)
		}
	}
	for _, f := range []string{"keep/plugin.json", "keep/index.ts", "pkg/plugins/p/index.ts"} {
		if _, err := os.Stat(filepath.Join(outside, f)); err != nil {
			t.Fatalf("removing deleted %s outside the home: %v", f, err)
		}
	}
	if got := packageFolders(t, dir); len(got) != 0 {
		t.Fatalf("packages/ holds %v (the link packages/d should be gone)", got)
	}
}

// A package's name and version become one harmless folder name.
func TestPackageDirNames(t *testing.T) {
	tests := []struct {
		src  Source
		want string
	}{
		{Source{Kind: KindNPM, Package: "@matthias-hausberger/beige-toolkit"}, "matthias-hausberger-beige-toolkit"},
		{Source{Kind: KindNPM, Package: "kit"}, "kit"},
		{Source{Kind: KindGitHub, Owner: "o", Repo: "r"}, "o-r"},
		{Source{Kind: KindLocal, Path: "/x/.hidden"}, "hidden"},
		{Source{Kind: KindLocal, Path: "/"}, "package"},
	}
	for _, tt := range tests {
		if got := packageBase(tt.src); got != tt.want {
			t.Errorf("packageBase(%+v) = %q, want %q", tt.src, got, tt.want)
		}
	}
	for _, v := range []string{"../../etc", "1.0.0/../x", "", ".", "a\x00b"} {
		got := safePart(v, "0")
		if got == "" || strings.ContainsAny(got, "/\x00") || strings.HasPrefix(got, ".") {
			t.Errorf("safePart(%q) = %q", v, got)
		}
	}
}

// A home where an older beige copied the package's plugins to plugins/<p>/
// (without ../_shared): install --force replaces the copies by links.
func TestForceReinstallMovesCopiesToPackage(t *testing.T) {
	dir, cfg, _ := testHome(t)
	writeFiles(t, filepath.Join(dir, "plugins", "one"), map[string]string{"plugin.json": `{"name": "one"}`, "index.ts": "old copy"})
	reg := newRegistry(t, "@scope/kit", "1.0.0", map[string][]byte{"1.0.0": sharedKitTgz(t, "1.0.0")})
	if _, err := newInstaller(dir, cfg, false, func(o *Options) { o.Registry = reg.URL }).Install(context.Background(), mustParse(t, "npm:@scope/kit"), nil); err == nil {
		t.Fatal("installed over plugins/one without --force")
	}
	if _, err := newInstaller(dir, cfg, true, func(o *Options) { o.Registry = reg.URL }).Install(context.Background(), mustParse(t, "npm:@scope/kit"), nil); err != nil {
		t.Fatal(err)
	}
	assertLink(t, dir, "one", "../packages/scope-kit@1.0.0/plugins/one")
	if got := readSibling(t, dir, "one", "../_shared/helper.ts"); !strings.Contains(got, "shared 1.0.0") {
		t.Fatalf("one sees %q", got)
	}
}
