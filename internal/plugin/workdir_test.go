package plugin

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestResolveDir(t *testing.T) {
	base := t.TempDir()
	ws := filepath.Join(base, "ws")
	outside := filepath.Join(base, "outside")
	for _, d := range []string{ws, filepath.Join(ws, "a", "b"), outside} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	os.WriteFile(filepath.Join(ws, "file"), nil, 0o644)
	os.Symlink(outside, filepath.Join(ws, "out"))
	os.Symlink("a/b", filepath.Join(ws, "in"))
	os.Symlink("../..", filepath.Join(ws, "a", "up"))
	// The workspace itself reached through a link.
	wsLink := filepath.Join(base, "wslink")
	os.Symlink(ws, wsLink)
	realWS, _ := filepath.EvalSymlinks(ws)

	tests := []struct {
		cwd, want, err string
	}{
		{"", realWS, ""},
		{".", realWS, ""},
		{"a/b", filepath.Join(realWS, "a", "b"), ""},
		{"a/./b/", filepath.Join(realWS, "a", "b"), ""},
		{"a/b/../..", realWS, ""},
		{"in", filepath.Join(realWS, "a", "b"), ""},
		{"a/up", "", "outside the workspace"},
		{"..", "", "outside the workspace"},
		{"../outside", "", "outside the workspace"},
		{"a/../../outside", "", "outside the workspace"},
		{"out", "", "outside the workspace"},
		{"/etc", "", "relative"},
		{"missing", "", "no such file"},
		{"file", "", "not a folder"},
	}
	for _, root := range []string{ws, wsLink} {
		for _, tt := range tests {
			dir, gotRoot, err := ResolveDir(root, tt.cwd)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Errorf("ResolveDir(%s, %q) = %q, %v; want error with %q", root, tt.cwd, dir, err, tt.err)
				}
				continue
			}
			if err != nil || dir != tt.want || gotRoot != realWS {
				t.Errorf("ResolveDir(%s, %q) = %q, %q, %v; want %q", root, tt.cwd, dir, gotRoot, err, tt.want)
			}
		}
	}
	if _, _, err := ResolveDir(ws, "out"); !errors.Is(err, ErrOutsideWorkspace) {
		t.Errorf("err = %v, want ErrOutsideWorkspace", err)
	}
	if _, _, err := ResolveDir(filepath.Join(base, "nope"), ""); err == nil {
		t.Error("missing workspace accepted")
	}
}

func TestWithin(t *testing.T) {
	for _, tt := range []struct {
		root, p string
		want    bool
	}{
		{"/a", "/a", true}, {"/a", "/a/b", true}, {"/a", "/ab", false}, {"/a", "/", false}, {"/", "/x", true},
	} {
		if got := Within(tt.root, tt.p); got != tt.want {
			t.Errorf("Within(%q, %q) = %v", tt.root, tt.p, got)
		}
	}
}

func TestOpenDir(t *testing.T) {
	needOpenBeneath(t)
	base, _ := filepath.EvalSymlinks(t.TempDir())
	ws := filepath.Join(base, "ws")
	os.MkdirAll(filepath.Join(ws, "a", "b"), 0o755)
	os.MkdirAll(filepath.Join(base, "outside"), 0o755)
	os.WriteFile(filepath.Join(ws, "file"), nil, 0o644)
	os.Symlink(filepath.Join(base, "outside"), filepath.Join(ws, "out"))
	os.Symlink("a", filepath.Join(ws, "in"))
	os.Symlink("/proc/self/cwd", filepath.Join(ws, "magic"))
	tests := []struct {
		dir string
		ok  bool
	}{
		{ws, true},
		{filepath.Join(ws, "a"), true},
		{filepath.Join(ws, "a", "b"), true},
		{filepath.Join(ws, "out"), false},     // a link out
		{filepath.Join(ws, "in", "b"), false}, // a link, even one that stays inside
		{filepath.Join(ws, "magic"), false},
		{filepath.Join(ws, "file"), false},
		{filepath.Join(ws, "missing"), false},
		{filepath.Join(base, "outside"), false},
		{base, false},
	}
	for _, tt := range tests {
		f, err := OpenDir(ws, tt.dir)
		if (err == nil) != tt.ok {
			t.Errorf("OpenDir(%s): %v, want ok=%v", tt.dir, err, tt.ok)
		}
		if fallback := testOpenDirFallback(t, ws, tt.dir); fallback != (err == nil) {
			t.Errorf("OpenDir(%s) without openat2: ok=%v, with it: %v", tt.dir, fallback, err)
		}
		if err == nil {
			fi, _ := f.Stat()
			want, _ := os.Stat(tt.dir)
			if !os.SameFile(fi, want) {
				t.Errorf("OpenDir(%s) opened another folder", tt.dir)
			}
			f.Close()
		}
	}
}
