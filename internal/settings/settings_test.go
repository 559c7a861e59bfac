package settings

import (
	"os"
	"path/filepath"
	"testing"
)

func TestLayers(t *testing.T) {
	path := filepath.Join(t.TempDir(), "session-settings.json")
	s := Open(path, nil)
	system := map[string]any{"verbose": false, "streaming": true}
	channel := map[string]any{"verbose": true}
	cases := []struct {
		name  string
		setup func()
		want  map[string]any
	}{
		{"system, then channel", func() {}, map[string]any{"verbose": true, "streaming": true}},
		{"session override wins", func() { s.Set("telegram:1", "verbose", false) }, map[string]any{"verbose": false, "streaming": true}},
		{"another setting", func() { s.Set("telegram:1", "streaming", false) }, map[string]any{"verbose": false, "streaming": false}},
		{"removed override", func() { s.Set("telegram:1", "verbose", nil) }, map[string]any{"verbose": true, "streaming": false}},
	}
	for _, tc := range cases {
		tc.setup()
		got := s.Resolve("telegram:1", system, channel)
		if len(got) != len(tc.want) || got["verbose"] != tc.want["verbose"] || got["streaming"] != tc.want["streaming"] {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
	if got := s.Resolve("telegram:2", system, nil); got["verbose"] != false {
		t.Errorf("another session: %v", got)
	}
	// Persisted across a restart.
	s2 := Open(path, nil)
	if v, ok := s2.Get("telegram:1", "streaming"); !ok || v != false {
		t.Errorf("after reopen: %v %v", v, ok)
	}
	if st, _ := os.Stat(path); st.Mode().Perm() != 0o600 {
		t.Errorf("mode %v", st.Mode().Perm())
	}
}

func TestCorruptFileIsSetAside(t *testing.T) {
	path := filepath.Join(t.TempDir(), "session-settings.json")
	os.WriteFile(path, []byte("{nope"), 0o600)
	s := Open(path, nil)
	if len(s.Overrides("x")) != 0 {
		t.Error("not empty")
	}
	if _, err := os.Stat(path + ".bad"); err != nil {
		t.Error("corrupt file not set aside")
	}
	if err := s.Set("x", "verbose", true); err != nil {
		t.Fatal(err)
	}
}

// A second corrupt file does not overwrite the first copy, and the
// sessions that can still be read are kept.
func TestCorruptFilesAreAllKept(t *testing.T) {
	path := filepath.Join(t.TempDir(), "session-settings.json")
	os.WriteFile(path, []byte("{nope"), 0o600)
	Open(path, nil)
	truncated := `{"telegram:1": {"verbose": true}, "telegram:2": {"verb`
	os.WriteFile(path, []byte(truncated), 0o600)
	s := Open(path, nil)
	if b, _ := os.ReadFile(path + ".bad"); string(b) != "{nope" {
		t.Errorf(".bad = %q: the first corrupt copy was overwritten", b)
	}
	if b, _ := os.ReadFile(path + ".bad.1"); string(b) != truncated {
		t.Errorf(".bad.1 = %q", b)
	}
	if v, ok := s.Get("telegram:1", "verbose"); !ok || v != true {
		t.Errorf("readable session lost: %v %v", v, ok)
	}
	if v, ok := Open(path, nil).Get("telegram:1", "verbose"); !ok || v != true {
		t.Errorf("kept session not written back: %v %v", v, ok)
	}
}
