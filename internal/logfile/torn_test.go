package logfile

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestTornTailOnOpen: a file that ends mid-line (a crash during a write)
// goes on on a fresh line, and Fragment reports where the torn line is.
func TestTornTailOnOpen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.log")
	os.WriteFile(path, []byte("whole\ntorn"), 0o600)
	f, err := Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if off, n := f.Fragment(); off != 6 || n != 4 {
		t.Errorf("Fragment() = %d, %d; want 6, 4", off, n)
	}
	f.Write([]byte("next\n"))
	if b, _ := os.ReadFile(path); string(b) != "whole\ntorn\nnext\n" {
		t.Errorf("file holds %q", b)
	}
	// A whole file has no fragment.
	g, _ := Open(path, nil)
	defer g.Close()
	if _, n := g.Fragment(); n != 0 {
		t.Errorf("fragment of %d bytes in a whole file", n)
	}
}

// TestShortWriteCutOff: a write cut short (here by RLIMIT_FSIZE, as a full
// disk would) leaves no torn line: what it wrote is cut off again.
func TestShortWriteCutOff(t *testing.T) {
	var old syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_FSIZE, &old); err != nil {
		t.Skip(err)
	}
	f, path := open(t, nil)
	line := append(bytes.Repeat([]byte("a"), 299), '\n')
	low := old
	low.Cur = 1000
	if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &low); err != nil {
		t.Skip(err)
	}
	var failed int
	for range 4 { // 3 fit in 1000 bytes, the 4th is cut at 100
		if _, err := f.Write(line); err != nil {
			failed++
		}
	}
	syscall.Setrlimit(syscall.RLIMIT_FSIZE, &old)
	if failed != 1 {
		t.Fatalf("%d writes failed, want 1", failed)
	}
	if _, err := f.Write([]byte("after\n")); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(path)
	lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	if len(lines) != 4 || lines[3] != "after" {
		t.Fatalf("%d lines, last %.20q", len(lines), lines[len(lines)-1])
	}
	for i, l := range lines[:3] {
		if len(l) != 299 {
			t.Errorf("line %d is %d bytes: torn", i, len(l))
		}
	}
}

// TestKeepAll: MaxFiles < 0 keeps every rotated file.
func TestKeepAll(t *testing.T) {
	f, path := open(t, &Options{MaxSizeBytes: 100, MaxFiles: -1})
	for i := range 50 {
		fmt.Fprintf(f, "line %02d %s\n", i, strings.Repeat("x", 30)) // 2 a file
	}
	files, _ := filepath.Glob(path + "*")
	if len(files) != 25 {
		t.Errorf("%d files, want 25", len(files))
	}
	if b, _ := os.ReadFile(path + ".24"); !strings.HasPrefix(string(b), "line 00 ") {
		t.Errorf("oldest file holds %q", b)
	}
}

// TestStartsFile: StartsFile says whether the next write is a file's first
// line: an empty file, or one that would be rotated first.
func TestStartsFile(t *testing.T) {
	f, path := open(t, &Options{MaxSizeBytes: 100, MaxFiles: -1})
	if !f.StartsFile(10) {
		t.Error("empty file: not a first line")
	}
	f.Write([]byte(strings.Repeat("x", 59) + "\n"))
	if f.StartsFile(40) || !f.StartsFile(41) {
		t.Error("60 bytes written, limit 100: 40 more fit, 41 do not")
	}
	f.Write([]byte(strings.Repeat("y", 40) + "\n"))
	if b, _ := os.ReadFile(path); string(b) != strings.Repeat("y", 40)+"\n" {
		t.Errorf("the 41-byte line did not start a file: %q", b)
	}
}

// TestSync: Sync works on the current file, after a rotation, and after
// Close.
func TestSync(t *testing.T) {
	f, _ := open(t, &Options{MaxSizeBytes: 10, MaxFiles: -1})
	for range 3 {
		f.Write([]byte("0123456789\n"))
		if err := f.Sync(); err != nil {
			t.Fatal(err)
		}
	}
	f.Close()
	if err := f.Sync(); err != nil {
		t.Errorf("after Close: %v", err)
	}
}
