package audit

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
)

// Cursor is a place in an audit log: the start of a line of one of its
// files, which it knows by identity, so that it stays valid when a rotation
// renames the file. The zero Cursor is the start of the current file.
// ReadNew moves it; Backlog and LogFile.CursorAt make one.
type Cursor struct {
	file os.FileInfo
	off  int64
}

// CursorAt is the cursor at off in lf, the start of a line (for example
// the end of the last whole line Lines gave).
func (lf *LogFile) CursorAt(off int64) (Cursor, error) {
	st, err := lf.f.Stat()
	if err != nil {
		return Cursor{}, fmt.Errorf("stat %s: %w", lf.Path, err)
	}
	return Cursor{file: st, off: off}, nil
}

// Backlog is the cursor at the first line that starts in the last n bytes
// of the current file of the log at path (the zero Cursor when there is no
// such file yet).
func Backlog(path string, n int64) (Cursor, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return Cursor{}, nil
	}
	if err != nil {
		return Cursor{}, fmt.Errorf("open %s: %w", path, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return Cursor{}, fmt.Errorf("stat %s: %w", path, err)
	}
	start := st.Size() - n
	if start <= 0 {
		return Cursor{file: st}, nil
	}
	// The line before start ends at the first newline from start-1 on.
	buf := make([]byte, min(n+1, maxReadLine))
	m, err := f.ReadAt(buf, start-1)
	if err != nil && !errors.Is(err, io.EOF) {
		return Cursor{}, fmt.Errorf("read %s: %w", path, err)
	}
	i := bytes.IndexByte(buf[:m], '\n')
	if i < 0 {
		return Cursor{file: st, off: start - 1 + int64(m)}, nil // one long line: none starts here
	}
	return Cursor{file: st, off: start + int64(i)}, nil
}

// ReadNew calls fn for each whole line (ending in a newline) of the log at
// path from cur on, oldest first, and returns the cursor after the last
// one; it stops after limit bytes of lines (limit ≤ 0: no limit) or when fn
// fails. When a rotation has renamed cur's file it reads the rest of it
// first, then the newer files; when cur's file is gone (or cur is zero) it
// reads the current file from its start. A last line without a newline (a
// record being written) is left for the next call, except in a rotated
// file, which no one writes to any more. RawLine.Line counts from 0 at cur
// (it is not the line number in the file), and
// Bytes is only valid during the call.
func ReadNew(path string, cur Cursor, limit int64, fn func(RawLine) error) (Cursor, error) {
	// The common case, no rotation since cur: the current file alone.
	f, err := os.Open(path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return cur, fmt.Errorf("open %s: %w", path, err)
	}
	if err == nil {
		defer f.Close()
		st, err := f.Stat()
		if err != nil {
			return cur, fmt.Errorf("stat %s: %w", path, err)
		}
		if !st.Mode().IsRegular() {
			return cur, fmt.Errorf("open %s: not a regular file", path)
		}
		if cur.file != nil && os.SameFile(cur.file, st) {
			lf := &LogFile{Name: path, Path: path, f: f}
			cur, _, err := readFrom(lf, cur, true, &limit, fn)
			return cur, err
		}
	}
	snap, err := OpenSnapshot(path)
	if err != nil {
		return cur, err
	}
	defer snap.Close()
	from := -1
	for i := range snap.Files {
		if st, err := snap.Files[i].f.Stat(); err == nil && cur.file != nil && os.SameFile(cur.file, st) {
			from = i
		}
	}
	if from < 0 {
		if len(snap.Files) == 0 || snap.Files[len(snap.Files)-1].N != 0 {
			return cur, nil // no current file yet
		}
		from, cur.off = len(snap.Files)-1, 0
	}
	for i := from; i < len(snap.Files); i++ {
		lf := &snap.Files[i]
		if i > from {
			cur.off = 0
		}
		var done bool
		cur, done, err = readFrom(lf, cur, lf.N == 0, &limit, fn)
		if err != nil || done {
			return cur, err
		}
	}
	return cur, nil
}

// readFrom reads lf from cur.off (from 0 when the file is now shorter: it
// was cut) and returns the cursor after the last line given to fn; done
// when the limit was reached or fn failed.
func readFrom(lf *LogFile, cur Cursor, current bool, limit *int64, fn func(RawLine) error) (Cursor, bool, error) {
	st, err := lf.f.Stat()
	if err != nil {
		return cur, true, fmt.Errorf("stat %s: %w", lf.Path, err)
	}
	off := cur.off
	if off > st.Size() {
		off = 0
	}
	cur = Cursor{file: st, off: off}
	lr := lf.reader(off, 0)
	for {
		rl, ok, err := lr.next()
		if err != nil {
			return cur, true, err
		}
		if !ok {
			return cur, false, nil
		}
		if !rl.Newline {
			if !current {
				cur.off = lr.off // torn for good: past it
			}
			return cur, false, nil
		}
		if err := fn(rl); err != nil {
			return cur, true, err
		}
		cur.off = lr.off
		if *limit > 0 {
			if *limit -= int64(len(rl.Bytes)) + 1; *limit <= 0 {
				return cur, true, nil
			}
		}
	}
}
