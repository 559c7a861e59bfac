package plugin

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"
)

func TestRegister(t *testing.T) {
	newOK := func(Env) (Plugin, error) { return RegisterFunc(func(*Registrar) error { return nil }), nil }
	mustPanic := func(name string, b Builtin, want string) {
		t.Helper()
		defer func() {
			r := recover()
			if r == nil || !strings.Contains(r.(string), want) {
				t.Errorf("%s: panic %v, want %q", name, r, want)
			}
		}()
		Register(b)
	}
	mustPanic("no name", Builtin{Docs: fakeDocs("x", ""), New: newOK}, "needs a Name")
	mustPanic("no docs", Builtin{Name: "x", New: newOK}, "needs a Name, Docs and New")
	mustPanic("bad json", Builtin{Name: "zz-bad", Docs: fstest.MapFS{"plugin.json": {Data: []byte("{")}}, New: newOK}, "plugin.json")
	mustPanic("unknown field", Builtin{Name: "zz-bad", Docs: fstest.MapFS{"plugin.json": {Data: []byte(`{"name":"zz-bad","nmae":1}`)}}, New: newOK}, "unknown field")
	mustPanic("other name", Builtin{Name: "zz-a", Docs: fakeDocs("zz-b", ""), New: newOK}, `plugin.json names "zz-b"`)

	Register(Builtin{Name: "zz-test", Docs: fakeDocs("zz-test", ""), New: newOK})
	t.Cleanup(func() {
		regMu.Lock()
		delete(registry, "zz-test")
		regMu.Unlock()
	})
	mustPanic("duplicate", Builtin{Name: "zz-test", Docs: fakeDocs("zz-test", ""), New: newOK}, "registered twice")
	if _, ok := Lookup("zz-test"); !ok {
		t.Error("Lookup failed")
	}
	m := Builtins()["zz-test"]
	if m == nil || m.Name != "zz-test" || m.Provides.Tools[0] != "zz-test" || m.Description != "The zz-test tool." {
		t.Errorf("Builtins()[zz-test] = %+v", m)
	}

	dir := t.TempDir()
	for range 2 { // idempotent
		if err := WriteDocs(dir); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range DocFiles {
		got, err := os.ReadFile(filepath.Join(dir, "zz-test", f))
		want, _ := fakeDocs("zz-test", "").ReadFile(f)
		if err != nil || string(got) != string(want) {
			t.Errorf("%s: %q, %v", f, got, err)
		}
	}
	// Stale docs are replaced.
	os.WriteFile(filepath.Join(dir, "zz-test", "README.md"), []byte("old"), 0o644)
	if err := WriteDocs(dir); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(filepath.Join(dir, "zz-test", "README.md")); string(got) != "# zz-test\n" {
		t.Errorf("README not refreshed: %q", got)
	}
}
