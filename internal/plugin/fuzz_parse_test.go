package plugin

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"testing/fstest"

	"github.com/beige-dev/beige/internal/config"
)

var manifestSeeds = []string{
	`{"name":"git","description":"Git","provides":{"tools":["git"]},"configSchema":{"type":"object"},"defaultConfig":{"a":{"b":[1,2]}}}`,
	`{"name":"x","provides":{"channel":"c","hooks":["beforeToolCall"],"skills":["s"]},"run":{"command":["./run.sh","--flag"],"timeout":2.5}}`,
	`{"name":"telegram","provides":{"channel":true,"tools":["telegram"]}}`, `{"name":"x","provides":{"channel":false}}`,
	`{"name":"x","run":{"command":[]}}`, `{"name":""}`, `{"name":"x","unknown":1}`, `{"name":"x","run":null}`,
	`null`, `[]`, `{"name":"x","commands":["a"],"defaultConfig":null}`,
}

// FuzzDocsManifest reads a built-in plugin's plugin.json: no panic; one
// that reads has a name, and reads back the same after being written.
func FuzzDocsManifest(f *testing.F) {
	for _, s := range manifestSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := readDocsManifest(fstest.MapFS{"plugin.json": {Data: data}})
		if err != nil {
			return
		}
		if m.Name == "" {
			t.Fatal("a manifest without a name was accepted")
		}
		out, err := json.Marshal(m)
		if err != nil {
			t.Fatalf("write what was read: %v", err)
		}
		m2, err := readDocsManifest(fstest.MapFS{"plugin.json": {Data: out}})
		if err != nil {
			t.Fatalf("read back %s: %v", out, err)
		}
		if out2, _ := json.Marshal(m2); !bytes.Equal(out, out2) {
			t.Fatalf("round trip:\n%s\n%s", out, out2)
		}
	})
}

// FuzzFolderManifest reads an external plugin's plugin.json (config.
// ReadManifest): no panic; one that reads has a name, a run command when
// it has run, and reads back the same.
func FuzzFolderManifest(f *testing.F) {
	for _, s := range manifestSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "plugin.json"), data, 0o600); err != nil {
			t.Fatal(err)
		}
		m, err := config.ReadManifest(dir)
		if err != nil {
			return
		}
		if m.Name == "" || (m.Run != nil && len(m.Run.Command) == 0) {
			t.Fatalf("accepted %+v", m)
		}
		out, _ := json.Marshal(m)
		os.WriteFile(filepath.Join(dir, "plugin.json"), out, 0o600)
		m2, err := config.ReadManifest(dir)
		if err != nil {
			t.Fatalf("read back %s: %v", out, err)
		}
		if out2, _ := json.Marshal(m2); !bytes.Equal(out, out2) {
			t.Fatalf("round trip:\n%s\n%s", out, out2)
		}
	})
}

// FuzzSkillManifest reads a skill.json: no panic; one that reads names a
// context file, and reads back the same.
func FuzzSkillManifest(f *testing.F) {
	for _, s := range []string{
		`{"name":"travel","description":"Trips","contextFile":"GUIDE.md","requires":{"tools":["exec"],"skills":["maps"]}}`,
		`{}`, `{"contextFile":""}`, `{"requires":null}`, `null`, `{"name":5}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "skill.json"), data, 0o600); err != nil {
			t.Fatal(err)
		}
		m, err := config.ReadSkillManifest(dir)
		if err != nil {
			return
		}
		if m.ContextFile == "" {
			t.Fatal("no context file")
		}
		out, _ := json.Marshal(m)
		os.WriteFile(filepath.Join(dir, "skill.json"), out, 0o600)
		m2, err := config.ReadSkillManifest(dir)
		if err != nil {
			t.Fatalf("read back %s: %v", out, err)
		}
		if out2, _ := json.Marshal(m2); !bytes.Equal(out, out2) {
			t.Fatalf("round trip:\n%s\n%s", out, out2)
		}
	})
}
