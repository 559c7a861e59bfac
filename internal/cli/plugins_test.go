package cli

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha512"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/beige-dev/beige/internal/config/json5edit"
	"github.com/beige-dev/beige/internal/home"
)

func tgz(t *testing.T, files map[string]string) []byte {
	t.Helper()
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for name, body := range files {
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(body)), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		tw.Write([]byte(body))
	}
	tw.Close()
	gz.Close()
	return buf.Bytes()
}

// npmRegistry serves @scope/kit on loopback; version says which is latest.
func npmRegistry(t *testing.T, version *atomic.Value) *httptest.Server {
	t.Helper()
	tarballs := map[string][]byte{}
	for _, v := range []string{"1.0.0", "1.1.0"} {
		tarballs[v] = tgz(t, map[string]string{
			"package/package.json":              `{"name": "@scope/kit", "version": "` + v + `"}`,
			"package/plugins/alpha/plugin.json": `{"name": "alpha", "defaultConfig": {"apiKey": "<KEY>"}}`,
			"package/plugins/beta/plugin.json":  `{"name": "beta", "run": {"command": ["./beta.sh"]}}`,
		})
	}
	var srv *httptest.Server
	srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if v, ok := strings.CutPrefix(r.URL.Path, "/t/"); ok {
			w.Write(tarballs[v])
			return
		}
		if r.URL.EscapedPath() != "/@scope%2fkit" {
			http.NotFound(w, r)
			return
		}
		versions := map[string]any{}
		for v, b := range tarballs {
			sum := sha512.Sum512(b)
			versions[v] = map[string]any{"dist": map[string]string{"tarball": srv.URL + "/t/" + v, "integrity": "sha512-" + base64.StdEncoding.EncodeToString(sum[:])}}
		}
		json.NewEncoder(w).Encode(map[string]any{"dist-tags": map[string]string{"latest": version.Load().(string)}, "versions": versions})
	}))
	t.Cleanup(srv.Close)
	return srv
}

// TestPluginsCommands is the acceptance run on a fresh home, against a
// loopback registry named by npm_config_registry.
func TestPluginsCommands(t *testing.T) {
	dir := withHome(t)
	var latest atomic.Value
	latest.Store("1.0.0")
	srv := npmRegistry(t, &latest)
	t.Setenv("npm_config_registry", srv.URL+"/")

	code, out, errOut := run(t, "plugins", "install", "npm:@scope/kit")
	if code != 0 {
		t.Fatalf("install: %d\n%s%s", code, out, errOut)
	}
	for _, want := range []string{"installed alpha 1.0.0", "installed beta 1.0.0", "note: alpha: TypeScript/JavaScript plugins, run by the gateway in a confined Node.js process"} {
		if !strings.Contains(out, want) {
			t.Errorf("install output lacks %q:\n%s", want, out)
		}
	}
	if !strings.Contains(errOut, "downloaded kit-1.0.0.tgz") {
		t.Errorf("no download progress on stderr:\n%s", errOut)
	}
	cfgPath := filepath.Join(dir, "config.json5")
	cfg, _ := os.ReadFile(cfgPath)
	back, err := json5edit.Delete(cfg, "plugins")
	if err != nil || !bytes.Equal(back, home.ConfigTemplate()) {
		t.Fatalf("the config's comments and formatting were not kept:\n%s", cfg)
	}

	code, out, _ = run(t, "plugins", "list")
	for _, want := range []string{"alpha", "beta", "1.0.0", "npm:@scope/kit", filepath.Join(dir, "plugins", "alpha"), "enabled"} {
		if code != 0 || !strings.Contains(out, want) {
			t.Errorf("list (%d) lacks %q:\n%s", code, want, out)
		}
	}

	if code, _, errOut = run(t, "plugins", "install", "npm:@scope/kit"); code != ExitFailure || !strings.Contains(errOut, "already installed") {
		t.Errorf("reinstall without --force: %d %q", code, errOut)
	}

	// The user fills in alpha's key; update keeps it.
	cfg = bytes.Replace(cfg, []byte(`apiKey: "<KEY>"`), []byte(`apiKey: "${ALPHA_KEY}" /* mine */`), 1)
	os.WriteFile(cfgPath, cfg, 0o600)
	latest.Store("1.1.0")
	if code, out, errOut = run(t, "plugins", "update"); code != 0 || !strings.Contains(out, "updated alpha 1.1.0") || !strings.Contains(out, "updated beta 1.1.0") {
		t.Fatalf("update: %d\n%s%s", code, out, errOut)
	}
	if after, _ := os.ReadFile(cfgPath); !bytes.Equal(after, cfg) {
		t.Fatalf("update changed the config:\n%s", after)
	}
	if code, out, errOut = run(t, "plugins", "install", "--force", "npm:@scope/kit"); code != 0 {
		t.Fatalf("install --force: %d\n%s%s", code, out, errOut)
	}

	if code, out, errOut = run(t, "plugins", "remove", "alpha"); code != 0 || !strings.Contains(out, "removed alpha") {
		t.Fatalf("remove: %d %s%s", code, out, errOut)
	}
	if _, err := os.Stat(filepath.Join(dir, "plugins", "alpha")); err == nil {
		t.Fatal("remove left the folder")
	}
	if after, _ := os.ReadFile(cfgPath); bytes.Contains(after, []byte("alpha")) || !bytes.Contains(after, []byte("beta: {")) {
		t.Fatalf("remove: config\n%s", after)
	}
	if code, _, errOut = run(t, "plugins", "remove", "alpha"); code != ExitFailure || !strings.Contains(errOut, "not installed") {
		t.Errorf("remove again: %d %q", code, errOut)
	}
}

func TestPluginsUsage(t *testing.T) {
	withHome(t)
	for _, args := range [][]string{
		{"plugins", "install"},
		{"plugins", "install", "npm:@scope"},
		{"plugins", "install", "github:owner"},
		{"plugins", "remove", "../etc"},
		{"plugins", "update", "a", "b"},
	} {
		if code, _, errOut := run(t, args...); code != ExitUsage {
			t.Errorf("%v: exit %d, want 2 (%s)", args, code, errOut)
		}
	}
	if code, out, _ := run(t, "plugins", "install", "--help"); code != 0 || !strings.Contains(out, "never running install") {
		t.Errorf("help: %d %s", code, out)
	}
}

// TestPluginsInstallGitHub: BEIGE_GITHUB_URL and BEIGE_GITHUB_ALLOW_FILE
// reach the installer.
func TestPluginsInstallGitHub(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed")
	}
	dir := withHome(t)
	gh := t.TempDir()
	repo := filepath.Join(gh, "o", "r")
	os.MkdirAll(filepath.Join(repo, "p"), 0o755)
	os.WriteFile(filepath.Join(repo, "p", "plugin.json"), []byte(`{"name": "ghp", "version": "3.0.0"}`), 0o644)
	for _, args := range [][]string{{"init", "-q", "-b", "main"}, {"add", "."}, {"commit", "-q", "-m", "x"}, {"tag", "v3"}} {
		cmd := exec.Command("git", args...)
		cmd.Dir = repo
		cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@t", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@t", "GIT_CONFIG_GLOBAL=/dev/null")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v %s", args, err, out)
		}
	}
	t.Setenv("BEIGE_GITHUB_URL", "file://"+gh)
	if code, _, errOut := run(t, "plugins", "install", "github:o/r/p#v3"); code != ExitFailure || !strings.Contains(errOut, "BEIGE_GITHUB_ALLOW_FILE") {
		t.Fatalf("file:// without the override: %d %s", code, errOut)
	}
	t.Setenv("BEIGE_GITHUB_ALLOW_FILE", "1")
	code, out, errOut := run(t, "plugins", "install", "github:o/r/p#v3")
	if code != 0 || !strings.Contains(out, "installed ghp 3.0.0 in "+filepath.Join(dir, "plugins", "ghp")) {
		t.Fatalf("install: %d\n%s%s", code, out, errOut)
	}
}
