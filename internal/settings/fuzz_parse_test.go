package settings

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// FuzzOpen reads session-settings.json as it may be found: no panic, a
// store always (a corrupt file is set aside); what is read is saved and
// read back the same, and saving again writes the same bytes.
func FuzzOpen(f *testing.F) {
	for _, s := range []string{
		`{"telegram:42":{"verbose":true,"streaming":"off"},"tui:main":{"thinkingLevel":"high"}}`,
		`{"k":null}`, `{"k":{"n":null}}`, `null`, ``, `[]`, `{"k":{"n":[1,{"a":1e400}]}}`, `{"k":{"n":1.5e300}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		path := filepath.Join(t.TempDir(), "session-settings.json")
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		s := Open(path, nil)
		if s == nil {
			t.Fatal("no store")
		}
		if _, err := os.Stat(path); err != nil {
			return // set aside as corrupt
		}
		s.mu.Lock()
		err := s.save()
		s.mu.Unlock()
		if err != nil {
			t.Fatalf("save what was read: %v", err)
		}
		first, _ := os.ReadFile(path)
		// The first Open may have set a corrupt original aside; the second
		// must set nothing aside.
		before, _ := filepath.Glob(path + ".bad*")
		s2 := Open(path, nil)
		if after, _ := filepath.Glob(path + ".bad*"); len(after) != len(before) {
			t.Fatalf("what was saved reads as corrupt:\n%s", first)
		}
		if !reflect.DeepEqual(normalize(s.data), normalize(s2.data)) {
			t.Fatalf("round trip changed the settings:\n%v\n%v", s.data, s2.data)
		}
		s2.mu.Lock()
		s2.save()
		s2.mu.Unlock()
		if second, _ := os.ReadFile(path); !bytes.Equal(first, second) {
			t.Fatalf("not stable:\n%s\n%s", first, second)
		}
		for key := range s2.data {
			s2.Resolve(key, map[string]any{"verbose": false}, map[string]any{"streaming": true})
		}
	})
}

// normalize treats a nil and an empty session alike.
func normalize(m map[string]map[string]any) map[string]map[string]any {
	out := map[string]map[string]any{}
	for k, v := range m {
		if len(v) > 0 {
			out[k] = v
		}
	}
	return out
}
