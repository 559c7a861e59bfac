package install

import (
	"archive/tar"
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// FuzzParseSource: what parses prints as a source that parses the same.
func FuzzParseSource(f *testing.F) {
	for _, s := range []string{"npm:@scope/pkg@1.2.3", "pkg@latest", "github:o/r/a/b#v1", "./x", "/abs", "github:o/r.git"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		src, err := ParseSource(s, "/w")
		if err != nil {
			return
		}
		again, err := ParseSource(src.String(), "/w")
		if err != nil || again != src {
			t.Fatalf("%q parses as %+v, printed %q, which parses as %+v (%v)", s, src, src.String(), again, err)
		}
		// ".." as a path element would leave the repository; "0.." is a
		// name like any other.
		if src.Kind == KindGitHub && (strings.HasPrefix(src.Ref, "-") || slices.Contains(strings.Split(src.SubPath, "/"), "..")) {
			t.Fatalf("%q: unsafe %+v", s, src)
		}
	})
}

// FuzzExtract: whatever the archive, nothing is written outside the
// folder, and every symlink made resolves inside it.
func FuzzExtract(f *testing.F) {
	f.Add(buildTgz(f, []tarEntry{{name: "package/a", body: "x"}, {name: "package/l", typ: tar.TypeSymlink, link: "a"}}))
	f.Add(buildTgz(f, []tarEntry{{name: "package/d/", typ: tar.TypeDir}, {name: "package/d/l", typ: tar.TypeSymlink, link: "../a"}, {name: "package/h", typ: tar.TypeLink, link: "package/d/l"}}))
	f.Fuzz(func(t *testing.T, data []byte) {
		parent := t.TempDir()
		dir := filepath.Join(parent, "x")
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		root, err := os.OpenRoot(dir)
		if err != nil {
			t.Fatal(err)
		}
		defer root.Close()
		_ = extractTarGz(bytes.NewReader(data), root, Limits{MaxFiles: 50, MaxBytes: 1 << 16})
		if entries, _ := os.ReadDir(parent); len(entries) != 1 {
			t.Fatalf("written beside the folder: %v", entries)
		}
		filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.Type()&fs.ModeSymlink == 0 {
				return nil
			}
			real, err := filepath.EvalSymlinks(p)
			if err != nil {
				return nil // dangling: points at nothing
			}
			if rel, err := filepath.Rel(dir, real); err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
				t.Fatalf("symlink %s resolves to %s, outside", p, real)
			}
			return nil
		})
	})
}
