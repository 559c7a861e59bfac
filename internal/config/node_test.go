package config

import (
	"os"
	"path/filepath"
	"testing"
)

// TestNodeNeeded: the one rule config validation and doctor share for
// whether a plugin needs Node.js, and whether it is the Node plugin host's.
func TestNodeNeeded(t *testing.T) {
	dir := t.TempDir()
	script, plain := filepath.Join(dir, "script"), filepath.Join(dir, "plain")
	os.MkdirAll(script, 0o755)
	os.MkdirAll(plain, 0o755)
	os.WriteFile(filepath.Join(script, "index.js"), []byte("\n"), 0o644)
	builtins := map[string]*Manifest{"git": {Name: "git"}}
	run := func(cmd ...string) *Manifest { return &Manifest{Name: "x", Run: &RunSpec{Command: cmd}} }
	for _, tc := range []struct {
		name string
		p    *Plugin
		why  string
		host bool
	}{
		{"TypeScript plugin", &Plugin{Path: script, Manifest: &Manifest{Name: "x"}}, "a TypeScript/JavaScript plugin", true},
		{"its folder names a built-in", &Plugin{Path: script, Manifest: &Manifest{Name: "git"}}, "", false},
		{"no index.ts or index.js", &Plugin{Path: plain, Manifest: &Manifest{Name: "x"}}, "", false},
		{"command runs node", &Plugin{Path: script, Manifest: run("/usr/bin/node", "server")}, "its command runs node", false},
		{"command runs a .mjs", &Plugin{Path: plain, Manifest: run("./start", "main.mjs")}, "its command runs main.mjs", false},
		{"command runs python", &Plugin{Path: script, Manifest: run("python3", "main.py")}, "", false},
		{"empty command", &Plugin{Path: script, Manifest: run()}, "", false},
		{"built-in without a path", &Plugin{Manifest: &Manifest{Name: "git"}}, "", false},
		{"nil", nil, "", false},
	} {
		why, host := NodeNeeded(tc.p, builtins)
		if why != tc.why || host != tc.host {
			t.Errorf("%s: (%q, %v), want (%q, %v)", tc.name, why, host, tc.why, tc.host)
		}
	}
}
