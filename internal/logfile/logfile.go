// Package logfile owns Beige's size-rotated log files (logs/audit.jsonl and
// logs/gateway.log): each Write is one write(2) of whole lines on a file
// opened O_APPEND, under a lock, so concurrent writers never interleave; when
// the file would pass its size limit it is renamed PATH.1 (older files shift
// up to PATH.N, the oldest is dropped) and a fresh file is opened.
package logfile

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
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
	// PATH.MaxFiles (oldest) (DefaultMaxFiles when ≤ 0).
	MaxFiles int
}

// ErrClosed is returned by Write after Close.
var ErrClosed = errors.New("logfile: closed")

// File is an append-only, size-rotated log file. It is safe for concurrent use.
type File struct {
	path     string
	maxSize  int64
	maxFiles int

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
	if o.MaxFiles <= 0 {
		o.MaxFiles = DefaultMaxFiles
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("create log folder: %w", err)
	}
	l := &File{path: path, maxSize: o.MaxSizeBytes, maxFiles: o.MaxFiles}
	if err := l.open(); err != nil {
		return nil, err
	}
	return l, nil
}

// Path returns the path of the current file.
func (l *File) Path() string { return l.path }

func (l *File) open() error {
	f, err := os.OpenFile(l.path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
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
	n, err := l.f.Write(p)
	l.size += int64(n)
	if err != nil {
		l.broken = n > 0
		return n, fmt.Errorf("write %s: %w", l.path, err)
	}
	return n, nil
}

// rotate shifts PATH.i to PATH.i+1 (dropping PATH.maxFiles), renames PATH to
// PATH.1 and opens a fresh PATH. l.mu is held.
func (l *File) rotate() error {
	if err := l.f.Close(); err != nil {
		l.f = nil
		return fmt.Errorf("rotate %s: %w", l.path, err)
	}
	l.f = nil
	name := func(i int) string { return l.path + "." + strconv.Itoa(i) }
	if err := os.Remove(name(l.maxFiles)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("rotate %s: %w", l.path, err)
	}
	for i := l.maxFiles - 1; i >= 1; i-- {
		if err := os.Rename(name(i), name(i+1)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("rotate %s: %w", l.path, err)
		}
	}
	if err := os.Rename(l.path, name(1)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("rotate %s: %w", l.path, err)
	}
	return l.open()
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
