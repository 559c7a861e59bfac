package webui

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// FuzzFileTail: whatever the audit file holds (records carry strings an
// agent chose; a crash can tear a line), the tail yields only whole,
// valid JSON lines, and reading it in two steps (a record being written
// when the first read ran) yields what one read of the whole file does.
func FuzzFileTail(f *testing.F) {
	f.Add([]byte(`{"agent":"a","tool":"exec"}`+"\n"+`{"agent":"b"}`+"\n"), 10)
	f.Add([]byte("{\"a\":\"x\\ny\"}\n{\"torn\":"), 5)
	f.Add([]byte("\n\n{}\nnot json\n{\"a\":1}"), 3)
	f.Add([]byte("{\"a\":\r1,\"b\":\"event: status\"}\n"), 4)
	f.Fuzz(func(t *testing.T, data []byte, cut int) {
		if cut < 0 || cut > len(data) {
			cut = len(data) / 2
		}
		path := filepath.Join(t.TempDir(), "audit.jsonl")
		if err := os.WriteFile(path, data[:cut], 0o600); err != nil {
			t.Fatal(err)
		}
		tail := NewFileTail(path)
		first, cur, err := tail.Read(Cursor{}, 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		fh, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		fh.Write(data[cut:])
		fh.Close()
		second, _, err := tail.Read(cur, 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		whole, _, err := NewFileTail(path).Read(Cursor{}, 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		got := append(first, second...)
		for _, rec := range got {
			if !json.Valid(rec) || bytes.ContainsAny(rec, "\n\r") {
				t.Fatalf("record %q: not one valid JSON line", rec)
			}
		}
		// The cursor stops after the last whole line, so the second read
		// starts where the first stopped.
		if len(got) != len(whole) {
			t.Fatalf("two reads gave %d records, one read %d", len(got), len(whole))
		}
		for i := range got {
			if !bytes.Equal(got[i], whole[i]) {
				t.Fatalf("record %d: %q in two reads, %q in one", i, got[i], whole[i])
			}
		}
	})
}
