package agent

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// FuzzSessionMap reads session-map.json as it may be found (damaged, hand
// edited): no panic; what reads, writes; and the written file reads back to
// the same file (the encoding is stable), so a restart never changes it.
func FuzzSessionMap(f *testing.F) {
	for _, s := range []string{
		`{"telegram:42":{"agentName":"main","sessionFile":"/home/u/.beige/sessions/main/2026-03-05T00-00-00-000Z_0b5f6c1e.jsonl","createdAt":"2026-03-05T00:00:00.000Z"}}`,
		`{"tui:main":{"agentName":"main","sessionFile":"f.jsonl","createdAt":"x","metadata":{"a":[1, 2,{"b":null}]}}}`,
		`{"k":null}`, `null`, ``, `  `, `[]`, `{"k":{"agentName":5}}`, `{"\u0000":{}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		dir := t.TempDir()
		path := filepath.Join(dir, SessionMapFile)
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		m, err := loadSessionMap(path)
		if err != nil {
			return
		}
		if m == nil {
			t.Fatal("nil map without an error")
		}
		if err := saveSessionMap(path, m); err != nil {
			t.Fatalf("save what was read: %v", err)
		}
		first, _ := os.ReadFile(path)
		m2, err := loadSessionMap(path)
		if err != nil {
			t.Fatalf("read back %s: %v", first, err)
		}
		if len(m2) != len(m) {
			t.Fatalf("%d entries, %d after a round trip", len(m), len(m2))
		}
		if err := saveSessionMap(path, m2); err != nil {
			t.Fatal(err)
		}
		second, _ := os.ReadFile(path)
		if !bytes.Equal(first, second) {
			t.Fatalf("not stable:\n%s\n%s", first, second)
		}
	})
}
