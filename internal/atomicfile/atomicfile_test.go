package atomicfile

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestWrite(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "f.json")
	if err := Write(p, []byte("one"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := Write(p, []byte("two"), 0o644); err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(p)
	st, _ := os.Stat(p)
	if string(data) != "two" || st.Mode().Perm() != 0o644 {
		t.Errorf("%q %v", data, st.Mode())
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("leftovers: %v", entries)
	}
	if err := Write(filepath.Join(dir, "missing", "f"), nil, 0o600); err == nil {
		t.Error("write into a missing folder succeeded")
	}
}

func TestWriteIfChanged(t *testing.T) {
	p := filepath.Join(t.TempDir(), "f")
	WriteIfChanged(p, []byte("x"), 0o755)
	old := time.Now().Add(-time.Hour)
	os.Chtimes(p, old, old)
	WriteIfChanged(p, []byte("x"), 0o755)
	if st, _ := os.Stat(p); !st.ModTime().Equal(old) {
		t.Error("unchanged content was rewritten")
	}
	WriteIfChanged(p, []byte("y"), 0o755)
	if data, _ := os.ReadFile(p); string(data) != "y" {
		t.Error("changed content was not written")
	}
	if !IsTemp(filepath.Join("a", TempPrefix+"123")) || IsTemp("git") {
		t.Error("IsTemp")
	}
}
