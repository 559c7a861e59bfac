package logfile

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

func open(t *testing.T, opts *Options) (*File, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "logs", "x.log")
	f, err := Open(path, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f, path
}

func TestConcurrentWritesStayWhole(t *testing.T) {
	f, path := open(t, nil)
	var wg sync.WaitGroup
	for g := range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 50 {
				line := fmt.Sprintf("writer %d line %d %s\n", g, i, strings.Repeat("x", g*10))
				if _, err := f.Write([]byte(line)); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	data, _ := os.ReadFile(path)
	lines := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
	if len(lines) != 1000 {
		t.Fatalf("%d lines", len(lines))
	}
	for _, l := range lines {
		var g, i int
		if _, err := fmt.Sscanf(l, "writer %d line %d", &g, &i); err != nil || !strings.HasSuffix(l, " "+strings.Repeat("x", g*10)) {
			t.Fatalf("torn line %q", l)
		}
	}
	if st, _ := os.Stat(filepath.Dir(path)); st.Mode().Perm() != 0o700 {
		t.Errorf("folder mode %v", st.Mode().Perm())
	}
	if st, _ := os.Stat(path); st.Mode().Perm() != 0o600 {
		t.Errorf("file mode %v", st.Mode().Perm())
	}
}

func TestRotation(t *testing.T) {
	f, path := open(t, &Options{MaxSizeBytes: 100, MaxFiles: 2})
	line := bytes.Repeat([]byte("a"), 39)
	line = append(line, '\n') // 40 bytes: two fit in 100, the third rotates
	for i := range 7 {
		line[0] = byte('0' + i)
		if _, err := f.Write(line); err != nil {
			t.Fatal(err)
		}
	}
	read := func(p string) string {
		b, _ := os.ReadFile(p)
		var firsts []byte
		for _, l := range bytes.Split(bytes.TrimSpace(b), []byte("\n")) {
			if len(l) > 0 {
				firsts = append(firsts, l[0])
			}
		}
		return string(firsts)
	}
	if got := read(path) + "|" + read(path+".1") + "|" + read(path+".2"); got != "6|45|23" {
		t.Errorf("files hold %q, want 6|45|23", got)
	}
	if _, err := os.Stat(path + ".3"); !errors.Is(err, os.ErrNotExist) {
		t.Error("kept more than MaxFiles rotated files")
	}
	// A write larger than the limit still goes out whole.
	big := append(bytes.Repeat([]byte("b"), 500), '\n')
	if _, err := f.Write(big); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(path); !bytes.Equal(b, big) {
		t.Errorf("big write: %d bytes", len(b))
	}
}

func TestWriteErrorsAndReopen(t *testing.T) {
	f, path := open(t, nil)
	f.mu.Lock()
	f.f.Close() // the file fails under the writer
	f.mu.Unlock()
	if _, err := f.Write([]byte("lost\n")); err == nil {
		t.Error("write to a closed file: no error")
	}
	f.mu.Lock()
	f.f = nil // as after a rotation whose reopen failed
	f.mu.Unlock()
	if _, err := f.Write([]byte("kept\n")); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(path); string(b) != "kept\n" {
		t.Errorf("file holds %q", b)
	}
	f.Close()
	if _, err := f.Write([]byte("x\n")); !errors.Is(err, ErrClosed) {
		t.Errorf("after Close: %v", err)
	}
}
