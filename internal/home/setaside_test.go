package home

import (
	"os"
	"path/filepath"
	"testing"
)

func TestSetAsideNeverOverwrites(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "state.json")
	for i, want := range []string{p + ".bad", p + ".bad.1", p + ".bad.2"} {
		content := []byte{'0' + byte(i)}
		os.WriteFile(p, content, 0o600)
		got, err := SetAside(p)
		if err != nil || got != want {
			t.Fatalf("SetAside #%d = %q, %v; want %q", i, got, err, want)
		}
		if b, _ := os.ReadFile(got); string(b) != string(content) {
			t.Errorf("%s holds %q, want %q", got, b, content)
		}
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Errorf("%s still there: %v", p, err)
		}
	}
	if b, _ := os.ReadFile(p + ".bad"); string(b) != "0" {
		t.Errorf("the first copy was overwritten: %q", b)
	}
	got, err := KeepCopy(p, []byte("tail"))
	if err != nil || got != p+".bad.3" {
		t.Fatalf("KeepCopy = %q, %v", got, err)
	}
}
