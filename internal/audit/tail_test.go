package audit

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func appendTo(t *testing.T, path, s string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(s); err != nil {
		t.Fatal(err)
	}
}

func readNew(t *testing.T, path string, cur Cursor, limit int64) ([]string, Cursor) {
	t.Helper()
	var lines []string
	cur, err := ReadNew(path, cur, limit, func(rl RawLine) error {
		lines = append(lines, string(rl.Bytes))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return lines, cur
}

// ReadNew goes on from its cursor across rotations: what was written to
// the old file after the cursor comes first, a torn end of a rotated file
// is skipped, a torn end of the current file waits for its newline.
func TestReadNewAcrossRotation(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	got, cur := readNew(t, path, Cursor{}, 0)
	if len(got) != 0 {
		t.Fatalf("no file: %q", got)
	}
	appendTo(t, path, "1\n2\n3")
	got, cur = readNew(t, path, cur, 0)
	if !slices.Equal(got, []string{"1", "2"}) {
		t.Fatalf("first read %q", got)
	}
	appendTo(t, path, "\n4\n5")
	if err := os.Rename(path, path+".1"); err != nil {
		t.Fatal(err)
	}
	appendTo(t, path, "6\n")
	got, cur = readNew(t, path, cur, 0)
	if !slices.Equal(got, []string{"3", "4", "6"}) {
		t.Fatalf("after a rotation %q, want 3 4 6", got)
	}
	// Two rotations between reads: the cursor's file is now PATH.2.
	appendTo(t, path, "7\n")
	os.Rename(path+".1", path+".2")
	os.Rename(path, path+".1")
	appendTo(t, path, "8\n")
	got, cur = readNew(t, path, cur, 0)
	if !slices.Equal(got, []string{"7", "8"}) {
		t.Fatalf("after two rotations %q, want 7 8", got)
	}
	if got, _ = readNew(t, path, cur, 0); len(got) != 0 {
		t.Fatalf("nothing new: %q", got)
	}
}

// A line longer than what is kept of it does not put the cursor off: the
// lines after it are read whole, once.
func TestReadNewAfterALongLine(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	appendTo(t, path, strings.Repeat("x", maxReadLine+100<<10)+"\n2\n")
	got, cur := readNew(t, path, Cursor{}, 0)
	if len(got) != 2 || got[1] != "2" {
		t.Fatalf("read %d lines, want the long one and 2", len(got))
	}
	appendTo(t, path, "3\n")
	if got, _ = readNew(t, path, cur, 0); !slices.Equal(got, []string{"3"}) {
		t.Fatalf("next read gave %d lines (the first %d bytes), want only 3", len(got), len(got[0]))
	}
}

// The limit stops a read after a line, and the next read goes on there;
// Backlog starts at the first whole line of the file's last bytes.
func TestReadNewLimitAndBacklog(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	appendTo(t, path, "aaaa\nbbbb\ncccc\n")
	got, cur := readNew(t, path, Cursor{}, 6)
	if !slices.Equal(got, []string{"aaaa", "bbbb"}) {
		t.Fatalf("limited read %q", got)
	}
	if got, _ = readNew(t, path, cur, 0); !slices.Equal(got, []string{"cccc"}) {
		t.Fatalf("the rest %q", got)
	}
	for _, tt := range []struct {
		n    int64
		want []string
	}{{5, []string{"cccc"}}, {6, []string{"cccc"}}, {7, []string{"cccc"}}, {10, []string{"bbbb", "cccc"}}, {100, []string{"aaaa", "bbbb", "cccc"}}} {
		bl, err := Backlog(path, tt.n)
		if err != nil {
			t.Fatal(err)
		}
		if got, _ := readNew(t, path, bl, 0); !slices.Equal(got, tt.want) {
			t.Errorf("backlog of %d bytes: %q, want %q", tt.n, got, tt.want)
		}
	}
}
