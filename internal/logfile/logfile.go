// Package logfile owns Beige's size-rotated log files (logs/audit.jsonl and
// logs/gateway.log): each Write is one write(2) of whole lines on a file
// opened O_APPEND, under a lock, so concurrent writers never interleave; when
// the file would pass its size limit it is renamed PATH.1 (older files shift
// up to PATH.N, the oldest is dropped unless every file is kept) and a fresh
// file is opened. A file never holds a torn line followed by another: a file
// that ends mid-line when opened, or after a failed write, goes on on a
// fresh line, and a short write (a full disk) is cut off again.
package logfile

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

// Defaults of Options.
const (
	DefaultMaxSizeBytes = 10 << 20
	DefaultMaxFiles     = 5
)

// Options tune a File. A nil *Options, and every zero field, mean the defaults.
type Options struct {
	// MaxSizeBytes is the size the file may reach before it is rotated
	// (DefaultMaxSizeBytes when ≤ 0). A single write larger than this still
	// goes out whole, to a fresh file.
	MaxSizeBytes int64
	// MaxFiles is how many rotated files are kept, PATH.1 (newest) to
	// PATH.MaxFiles (oldest): DefaultMaxFiles when 0, every one when < 0.
	MaxFiles int
}

// ErrClosed is returned by Write after Close.
var ErrClosed = errors.New("logfile: closed")

// File is an append-only, size-rotated log file. It is safe for concurrent use.
type File struct {
	path     string
	maxSize  int64
	maxFiles int // < 0: keep all

	fragOff, fragLen int64 // the torn line found by Open

	mu     sync.Mutex
	f      *os.File // nil after a failed reopen, or when closed
	size   int64
	broken bool // the last write was short: start the next one on a new line
	closed bool
}

// Open opens (creating if needed) the log at path for appending. The parent
// folder is created with mode 0700 if missing; the file has mode 0600.
func Open(path string, opts *Options) (*File, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.MaxSizeBytes <= 0 {
		o.MaxSizeBytes = DefaultMaxSizeBytes
	}
	if o.MaxFiles == 0 {
		o.MaxFiles = DefaultMaxFiles
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("create log folder: %w", err)
	}
	l := &File{path: path, maxSize: o.MaxSizeBytes, maxFiles: o.MaxFiles}
	if err := l.open(); err != nil {
		return nil, err
	}
	if l.broken {
		l.fragOff, l.fragLen = l.fragment()
	}
	return l, nil
}

// Fragment reports the torn last line Open found (a crash or a full disk
// cut a write short): its offset and length in bytes, or 0, 0. The next
// write starts on a fresh line, so the fragment stays as it is, alone on
// its line.
func (l *File) Fragment() (offset, length int64) { return l.fragOff, l.fragLen }

// fragment finds where the torn last line of l.f begins, looking back at
// most 1 MB (a longer fragment is reported as its last MB). l.broken is set.
func (l *File) fragment() (offset, length int64) {
	const max = 1 << 20
	start := max64(0, l.size-max)
	buf := make([]byte, l.size-start)
	n, _ := l.f.ReadAt(buf, start)
	buf = buf[:n]
	if i := bytes.LastIndexByte(buf, '\n'); i >= 0 {
		start += int64(i) + 1
	}
	return start, l.size - start
}

func max64(a, b int64) int64 {
	if a > b {
		return a
	}
	return b
}

// Path returns the path of the current file.
func (l *File) Path() string { return l.path }

func (l *File) open() error {
	// O_RDWR, not O_WRONLY: open reads the last byte back.
	f, err := os.OpenFile(l.path, os.O_RDWR|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("open %s: %w", l.path, err)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return fmt.Errorf("stat %s: %w", l.path, err)
	}
	// A file left by an older run may be more open than it should be; tighten
	// it when we can (we may not own it, in which case it stays as it is).
	if fi.Mode().Perm()&0o077 != 0 {
		_ = f.Chmod(0o600)
	}
	l.f, l.size = f, fi.Size()
	l.broken = false
	if l.size > 0 {
		// A crash (or a full disk) in an earlier run may have left a torn
		// last line; the next write must not be glued onto it.
		var last [1]byte
		if _, err := f.ReadAt(last[:], l.size-1); err != nil || last[0] != '\n' {
			l.broken = true
		}
	}
	return nil
}

// Write appends p, which should be one or more whole lines, in one write(2).
// If an earlier write was cut short, p starts on a fresh line so that the
// torn line cannot swallow it. An error means p is not (or not wholly) in
// the log.
func (l *File) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return 0, ErrClosed
	}
	if l.f == nil {
		if err := l.open(); err != nil {
			return 0, err
		}
	}
	if l.size > 0 && l.size+int64(len(p)) > l.maxSize {
		if err := l.rotate(); err != nil {
			return 0, err
		}
		l.broken = false
	}
	if l.broken {
		if _, err := l.f.Write([]byte{'\n'}); err != nil {
			return 0, fmt.Errorf("write %s: %w", l.path, err)
		}
		l.size++
		l.broken = false
	}
	before := l.size
	n, err := l.f.Write(p)
	l.size += int64(n)
	if err != nil {
		if n > 0 {
			// Part of p is in the file (a full disk, say). Cut it off again,
			// so that no torn line is left; if that fails too, the next
			// write starts on a fresh line.
			if terr := l.f.Truncate(before); terr == nil {
				l.size, n = before, 0
			} else {
				l.broken = true
			}
		}
		return n, fmt.Errorf("write %s: %w", l.path, err)
	}
	return n, nil
}

// StartsFile reports whether a Write of n bytes made now would be the
// first line of a file: the file is empty, would be rotated first, or must
// be reopened. It is exact only while no other Write runs (the audit
// Logger calls it under the lock that orders its writes).
func (l *File) StartsFile(n int) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.f == nil || l.size == 0 || l.size+int64(n) > l.maxSize
}

// Sync flushes what was written to the current file to disk. The file is
// synced through a duplicate of its descriptor, outside the lock, so that
// writers do not wait for the disk.
func (l *File) Sync() error {
	l.mu.Lock()
	if l.f == nil {
		l.mu.Unlock()
		return nil
	}
	var fd int
	var derr error
	rc, err := l.f.SyscallConn()
	if err == nil {
		err = rc.Control(func(s uintptr) { fd, derr = syscall.Dup(int(s)) })
	}
	l.mu.Unlock()
	if err == nil {
		err = derr
	}
	if err != nil {
		return fmt.Errorf("sync %s: %w", l.path, err)
	}
	f := os.NewFile(uintptr(fd), l.path)
	defer f.Close()
	if err := f.Sync(); err != nil {
		return fmt.Errorf("sync %s: %w", l.path, err)
	}
	return nil
}

// rotate shifts PATH.i to PATH.i+1 (dropping PATH.maxFiles unless all are
// kept), renames PATH to PATH.1 and opens a fresh PATH. The file is synced
// before it is closed, so that a file once rotated is on disk (see Sync).
// l.mu is held.
func (l *File) rotate() error {
	_ = l.f.Sync()
	if err := l.f.Close(); err != nil {
		l.f = nil
		return fmt.Errorf("rotate %s: %w", l.path, err)
	}
	l.f = nil
	name := func(i int) string { return l.path + "." + strconv.Itoa(i) }
	top := l.maxFiles
	if top < 0 {
		top = l.highest() + 1 // keep all: nothing is dropped
	} else if err := os.Remove(name(top)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("rotate %s: %w", l.path, err)
	}
	for i := top - 1; i >= 1; i-- {
		if err := os.Rename(name(i), name(i+1)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("rotate %s: %w", l.path, err)
		}
	}
	if err := os.Rename(l.path, name(1)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("rotate %s: %w", l.path, err)
	}
	return l.open()
}

// highest returns the highest N of the rotated files PATH.N, or 0.
func (l *File) highest() int {
	ents, err := os.ReadDir(filepath.Dir(l.path))
	if err != nil {
		return 0
	}
	prefix, top := filepath.Base(l.path)+".", 0
	for _, e := range ents {
		if rest, ok := strings.CutPrefix(e.Name(), prefix); ok {
			if n, err := strconv.Atoi(rest); err == nil && n > top && strconv.Itoa(n) == rest {
				top = n
			}
		}
	}
	return top
}

// Close closes the file. Write returns ErrClosed afterwards.
func (l *File) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil
	}
	l.closed = true
	if l.f == nil {
		return nil
	}
	err := l.f.Close()
	l.f = nil
	return err
}
