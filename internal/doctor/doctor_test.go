package doctor

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/beige-dev/beige/internal/config"
	"github.com/beige-dev/beige/internal/home"
)

// TestSensitiveMount: a mount is sensitive when its source is, lies under
// or contains a sensitive path, compared by path elements (not by string
// prefix).
func TestSensitiveMount(t *testing.T) {
	o := Options{UserHome: "/home/op", Home: home.Home{Dir: "/home/op/.beige"}}
	for _, tc := range []struct {
		src  string
		want bool
	}{
		{"/", true},
		{"/var/run/docker.sock", true},
		{"/var/run", true},
		{"/var/run/../run/docker.sock", true},
		{"/home/op/.ssh", true},
		{"/home/op/.ssh/id_ed25519", true},
		{"/home/op", true},
		{"/home", true},
		{"/home/op/.aws/credentials", true},
		{"/home/op/.beige/sockets", true},
		{"/home/op/.sshkeys-public", false},
		{"/home/op2/.ssh", false},
		{"/home/op/projects/x", false},
		{"/srv/data", false},
		{"/proc/self", true},
	} {
		if got := sensitiveMount(tc.src, o) != ""; got != tc.want {
			t.Errorf("sensitiveMount(%q) = %v, want %v", tc.src, got, tc.want)
		}
	}
}

func TestWithin(t *testing.T) {
	for _, tc := range []struct {
		path, dir string
		want      bool
	}{
		{"/a/b", "/a", true},
		{"/a", "/a", true},
		{"/ab", "/a", false},
		{"/a/../b", "/a", false},
		{"/", "/a", false},
		{filepath.Join("/a", "..", "a", "c"), "/a", true},
	} {
		if got := within(tc.path, tc.dir); got != tc.want {
			t.Errorf("within(%q, %q) = %v, want %v", tc.path, tc.dir, got, tc.want)
		}
	}
}

func TestWorst(t *testing.T) {
	if w := Worst(nil); w != Info {
		t.Errorf("Worst(nil) = %s", w)
	}
	if w := Worst([]Finding{{Severity: Info}, {Severity: Warning}}); w != Warning {
		t.Errorf("Worst = %s, want warning", w)
	}
	if w := Worst([]Finding{{Severity: Warning}, {Severity: Error}, {Severity: Info}}); w != Error {
		t.Errorf("Worst = %s, want error", w)
	}
}

// tsConfig is a config with one TypeScript/JavaScript plugin, "ts", and
// one external plugin, "ext", whose command runs node.
func tsConfig(t *testing.T, confine *bool) *config.Config {
	t.Helper()
	dir := t.TempDir()
	ts, ext := filepath.Join(dir, "ts"), filepath.Join(dir, "ext")
	for _, d := range []string{ts, ext} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	os.WriteFile(filepath.Join(ts, "index.ts"), []byte("export function createPlugin() {}\n"), 0o644)
	os.WriteFile(filepath.Join(ext, "index.js"), []byte("\n"), 0o644)
	return &config.Config{Plugins: map[string]*config.Plugin{
		"ts":  {Path: ts, Node: "/opt/node22/bin/node", Confine: confine, Manifest: &config.Manifest{Name: "ts"}},
		"ext": {Path: ext, Manifest: &config.Manifest{Name: "ext", Run: &config.RunSpec{Command: []string{"node", "index.js"}}}},
	}}
}

func findingsOf(fs []Finding, id string) []Finding {
	var out []Finding
	for _, f := range fs {
		if f.ID == id {
			out = append(out, f)
		}
	}
	return out
}

// TestJailCheck: a confined TypeScript plugin makes doctor probe the jail:
// available, an info; unavailable, an error naming the plugin, the probe's
// error and what the user can do (confine: false among it, saying that it
// gives the confinement up). An unconfined plugin is a warning and needs
// no probe; a config without TypeScript plugins probes nothing.
func TestJailCheck(t *testing.T) {
	probed := 0
	o := Options{Config: tsConfig(t, nil), Home: home.Home{Dir: t.TempDir()}, DiskFree: func(string) (uint64, error) { return 50 << 30, nil },
		JailProbe: func() error { probed++; return errors.New("operation not permitted") },
		ReadFile:  func(string) ([]byte, error) { return nil, os.ErrNotExist }}
	fs := findingsOf(Run(context.Background(), o), "jail.unavailable")
	if len(fs) != 1 || fs[0].Severity != Error || !strings.Contains(fs[0].Message, ": ts (operation not permitted)") ||
		!strings.Contains(fs[0].Fix, "confine: false") || !strings.Contains(fs[0].Fix, "gives its confinement up") {
		t.Errorf("jail unavailable: %+v", fs)
	}
	o.JailProbe = func() error { probed++; return nil }
	if fs := findingsOf(Run(context.Background(), o), "jail.ok"); len(fs) != 1 || fs[0].Severity != Info || !strings.Contains(fs[0].Message, "ts") {
		t.Errorf("jail available: %+v", fs)
	}
	off := false
	o.Config = tsConfig(t, &off)
	all := Run(context.Background(), o)
	if fs := findingsOf(all, "plugin.unconfined"); len(fs) != 1 || fs[0].Severity != Warning || !strings.Contains(fs[0].Message, "plugin ts runs without its jail") {
		t.Errorf("unconfined: %+v", all)
	}
	delete(o.Config.Plugins, "ts")
	Run(context.Background(), o)
	if probed != 2 {
		t.Errorf("the jail was probed %d times, want 2 (only for confined TypeScript plugins)", probed)
	}
}

// TestJailHints: what doctor says keeps the jail from being made, from the
// kernel's settings.
func TestJailHints(t *testing.T) {
	const rootCaps = "CapEff:\t000001ffffffffff\nSeccomp:\t0\n"
	const noSysAdmin = "CapEff:\t00000000a80425fb\nSeccomp:\t2\n"
	for _, tc := range []struct {
		name  string
		euid  int
		goos  string
		files map[string]string
		want  []string
	}{
		{"not Linux", 1000, "darwin", nil, []string{"needs Linux namespaces"}},
		{"userns disabled", 1000, "linux", map[string]string{"/proc/sys/user/max_user_namespaces": "0\n"}, []string{"user.max_user_namespaces = 0"}},
		{"unprivileged userns off", 1000, "linux", map[string]string{"/proc/sys/kernel/unprivileged_userns_clone": "0\n", "/proc/sys/user/max_user_namespaces": "63000\n"}, []string{"kernel.unprivileged_userns_clone = 0"}},
		{"AppArmor", 1000, "linux", map[string]string{"/proc/sys/kernel/apparmor_restrict_unprivileged_userns": "1\n"}, []string{"AppArmor restricts"}},
		{"root needs no userns", 0, "linux", map[string]string{"/proc/sys/user/max_user_namespaces": "0\n", "/proc/self/status": rootCaps}, nil},
		{"root in a container", 0, "linux", map[string]string{"/proc/self/status": noSysAdmin}, []string{"without CAP_SYS_ADMIN", "seccomp filter"}},
		{"nothing known", 1000, "linux", nil, nil},
	} {
		read := func(p string) ([]byte, error) {
			if v, ok := tc.files[p]; ok {
				return []byte(v), nil
			}
			return nil, os.ErrNotExist
		}
		hs := jailHints(tc.euid, tc.goos, read)
		if len(hs) != len(tc.want) {
			t.Errorf("%s: hints %+v, want %q", tc.name, hs, tc.want)
			continue
		}
		for i, w := range tc.want {
			if !strings.Contains(hs[i].what, w) || hs[i].fix == "" {
				t.Errorf("%s: hint %d %+v, want %q and a fix", tc.name, i, hs[i], w)
			}
		}
	}
}

// TestNodeCheckUsesConfigsRule: doctor checks the TypeScript plugin's own
// Node.js (plugins.<name>.node) with CheckNode, as config validation does,
// and node in PATH only for the external plugin whose command runs it.
func TestNodeCheckUsesConfigsRule(t *testing.T) {
	var checked []string
	o := Options{Config: tsConfig(t, nil), Home: home.Home{Dir: t.TempDir()}, DiskFree: func(string) (uint64, error) { return 50 << 30, nil },
		CheckNode: func(node string) error { checked = append(checked, node); return errors.New("is Node.js 20.1.0") },
		LookPath:  func(string) (string, error) { return "", errors.New("not found") }}
	fs := findingsOf(Run(context.Background(), o), "node.missing")
	if len(checked) != 1 || checked[0] != "/opt/node22/bin/node" || len(fs) != 2 ||
		!strings.Contains(fs[0].Message+fs[1].Message, "plugin ts is a TypeScript/JavaScript plugin and needs Node.js 22 or later: is Node.js 20.1.0") ||
		!strings.Contains(fs[0].Message+fs[1].Message, "these plugins need it: ext (its command runs node)") || strings.Contains(fs[0].Message+fs[1].Message, "ts (") {
		t.Errorf("checked %q, findings %+v", checked, fs)
	}
}
