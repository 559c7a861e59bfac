package audit

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// LogFile is one file of an audit log, opened.
type LogFile struct {
	Name string // audit.jsonl, audit.jsonl.1, …
	Path string
	N    int // 0 for the current file, i for PATH.i
	f    *os.File
}

// Snapshot is the files of an audit log, oldest first (PATH.N … PATH.1,
// PATH), opened together so that a rotation by a running gateway while they
// are read cannot make a file be read twice or missed.
type Snapshot struct {
	Path  string // of the current file
	Files []LogFile
	// Gaps lists the numbers i missing between PATH.1 and the highest PATH.N.
	Gaps []int
}

// Close closes the files.
func (s *Snapshot) Close() {
	for _, f := range s.Files {
		f.f.Close()
	}
}

// OpenSnapshot opens the files of the audit log at path. It retries when a
// rotation moved the files while they were being opened. A log with no file
// at all gives an empty Snapshot.
func OpenSnapshot(path string) (*Snapshot, error) {
	var lastErr error
	for range 20 {
		s, stable, err := openSnapshot(path)
		if err != nil {
			return nil, err
		}
		if stable {
			return s, nil
		}
		s.Close()
		lastErr = fmt.Errorf("open %s: the files kept moving (rotation)", path)
		time.Sleep(20 * time.Millisecond)
	}
	return nil, lastErr
}

func openSnapshot(path string) (*Snapshot, bool, error) {
	nums, err := rotatedNumbers(path)
	if err != nil {
		return nil, false, err
	}
	s := &Snapshot{Path: path}
	if len(nums) > 0 {
		for i := 1; i < nums[len(nums)-1]; i++ {
			if _, ok := slices.BinarySearch(nums, i); !ok {
				s.Gaps = append(s.Gaps, i)
			}
		}
	}
	slices.Reverse(nums)
	nums = append(nums, 0)
	for _, n := range nums {
		p := path
		if n > 0 {
			p = path + "." + strconv.Itoa(n)
		}
		f, err := os.Open(p)
		if errors.Is(err, os.ErrNotExist) {
			if n == 0 {
				continue // not created yet, or moved away: the re-check says
			}
			return s, false, nil
		}
		if err != nil {
			s.Close()
			return nil, false, fmt.Errorf("open %s: %w", p, err)
		}
		if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() {
			f.Close()
			s.Close()
			return nil, false, fmt.Errorf("open %s: not a regular file", p)
		}
		s.Files = append(s.Files, LogFile{Name: filepath.Base(p), Path: p, N: n, f: f})
	}
	// Stable when the same rotated files are there, every name still holds
	// the file opened under it, and the current file is there iff opened.
	again, err := rotatedNumbers(path)
	if err != nil {
		s.Close()
		return nil, false, err
	}
	var opened []int
	for _, lf := range s.Files {
		if lf.N > 0 {
			opened = append(opened, lf.N)
		}
		st1, err1 := lf.f.Stat()
		st2, err2 := os.Stat(lf.Path)
		if err1 != nil || err2 != nil || !os.SameFile(st1, st2) {
			return s, false, nil
		}
	}
	slices.Sort(opened)
	if !slices.Equal(opened, again) {
		return s, false, nil
	}
	hasCurrent := len(s.Files) > 0 && s.Files[len(s.Files)-1].N == 0
	if _, err := os.Stat(path); (err == nil) != hasCurrent {
		return s, false, nil
	}
	return s, true, nil
}

// rotatedNumbers returns the sorted i of the files PATH.i.
func rotatedNumbers(path string) ([]int, error) {
	ents, err := os.ReadDir(filepath.Dir(path))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", filepath.Dir(path), err)
	}
	prefix := filepath.Base(path) + "."
	var nums []int
	for _, e := range ents {
		if rest, ok := strings.CutPrefix(e.Name(), prefix); ok {
			if n, err := strconv.Atoi(rest); err == nil && n > 0 && strconv.Itoa(n) == rest {
				nums = append(nums, n)
			}
		}
	}
	slices.Sort(nums)
	return nums, nil
}

// RawLine is one line of a log file.
type RawLine struct {
	File   *LogFile
	Line   int   // 1-based
	Offset int64 // of its first byte in the file
	Bytes  []byte
	// Newline is false for a last line that does not end in one (a torn
	// record, or one being written).
	Newline bool
}

// maxReadLine bounds a line read back; the Logger's lines are a few KB.
const maxReadLine = 1 << 20

// Lines calls fn for each line of lf from the start, up to the end of the
// file as it is then. Bytes is only valid during the call.
func (lf *LogFile) Lines(fn func(RawLine) error) error {
	lr := lf.reader(0, 1)
	for {
		rl, ok, err := lr.next()
		if err != nil || !ok {
			return err
		}
		if err := fn(rl); err != nil {
			return err
		}
	}
}

// lineReader reads the lines of a LogFile one at a time.
type lineReader struct {
	lf   *LogFile
	r    *bufio.Reader
	off  int64
	line int
	eof  bool
}

// reader reads lf from off, which is the start of line number line.
func (lf *LogFile) reader(off int64, line int) *lineReader {
	return &lineReader{lf: lf, r: bufio.NewReaderSize(io.NewSectionReader(lf.f, off, 1<<62), 64<<10), off: off, line: line}
}

// next returns the next line; false at the end of the file. Bytes is valid
// until the next call.
func (lr *lineReader) next() (RawLine, bool, error) {
	var long []byte
	var dropped int64 // of a line longer than maxReadLine
	for !lr.eof {
		b, err := lr.r.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			if len(long) < maxReadLine {
				long = append(long, b...)
			} else {
				dropped += int64(len(b))
			}
			continue
		}
		if long != nil {
			b = append(long, b...)
		}
		if err == io.EOF {
			lr.eof = true
		} else if err != nil {
			return RawLine{}, false, fmt.Errorf("read %s: %w", lr.lf.Path, err)
		}
		if len(b) == 0 {
			continue
		}
		nl := b[len(b)-1] == '\n'
		if nl {
			b = b[:len(b)-1]
		}
		rl := RawLine{File: lr.lf, Line: lr.line, Offset: lr.off, Bytes: b, Newline: nl}
		lr.off += int64(len(b)) + dropped
		if nl {
			lr.off++
		}
		lr.line++
		return rl, true, nil
	}
	return RawLine{}, false, nil
}

// lastLink finds the newest chained record of the log at path: in the
// current file (before a torn fragment at fragOff, if fragLen > 0), else in
// the newest rotated file that holds one. A log with none gives Link{}.
func lastLink(path string, fragOff, fragLen int64) (Link, string, error) {
	nums, err := rotatedNumbers(path)
	if err != nil {
		return Link{}, "", err
	}
	for _, n := range append([]int{0}, nums...) { // newest first
		p := path
		if n > 0 {
			p = path + "." + strconv.Itoa(n)
		}
		l, found, err := lastLinkIn(p, n == 0 && fragLen > 0, fragOff)
		if err != nil {
			return Link{}, "", err
		}
		if found {
			return l, filepath.Base(p), nil
		}
	}
	return Link{}, "", nil
}

// lastLinkIn finds the last chained line of the file at p (before end, when
// cut): it reads the file's end, and further back only as needed.
func lastLinkIn(p string, cut bool, end int64) (Link, bool, error) {
	f, err := os.Open(p)
	if errors.Is(err, os.ErrNotExist) {
		return Link{}, false, nil
	}
	if err != nil {
		return Link{}, false, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return Link{}, false, err
	}
	size := st.Size()
	if cut && end < size {
		size = end
	}
	for chunk := int64(256 << 10); ; chunk *= 4 {
		start := max(0, size-chunk)
		data := make([]byte, size-start)
		if _, err := f.ReadAt(data, start); err != nil && !errors.Is(err, io.EOF) {
			return Link{}, false, fmt.Errorf("read %s: %w", p, err)
		}
		for len(data) > 0 {
			data = bytes.TrimSuffix(data, []byte{'\n'})
			i := bytes.LastIndexByte(data, '\n')
			if i < 0 && start > 0 {
				break // a line that may begin before the chunk
			}
			if l, err := ParseLink(data[i+1:]); err == nil {
				return l, true, nil
			}
			data = data[:max(i, 0)]
		}
		if start == 0 {
			return Link{}, false, nil
		}
	}
}
