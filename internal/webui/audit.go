package webui

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sync"
)

// AuditReader is where the Activity view reads the audit log: the records
// already written (the tail) and those written since. FileTail reads the
// audit file itself; audit's own reader can take its place.
type AuditReader interface {
	// Read returns the complete records after cur (one JSON object each,
	// as written), at most max of them, and the cursor after them. The zero
	// Cursor means "the last max records".
	Read(cur Cursor, max int) ([]json.RawMessage, Cursor, error)
	// Changed returns a channel that is closed when a record is written
	// after the call.
	Changed() <-chan struct{}
}

// Cursor is a place in the audit log.
type Cursor struct {
	file os.FileInfo // the file the offset is in: a rotation starts a new one
	off  int64
	set  bool
}

// FileTail reads an audit log file (audit.jsonl, JSON Lines). Notify is to
// be called after each record is written (audit.Options.OnRecord).
type FileTail struct {
	path string

	mu      sync.Mutex
	changed chan struct{}
}

// NewFileTail reads the audit log at path.
func NewFileTail(path string) *FileTail {
	return &FileTail{path: path, changed: make(chan struct{})}
}

// Notify says that a record was written.
func (t *FileTail) Notify() {
	t.mu.Lock()
	close(t.changed)
	t.changed = make(chan struct{})
	t.mu.Unlock()
}

// Changed implements AuditReader.
func (t *FileTail) Changed() <-chan struct{} {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.changed
}

// tailBytes bounds what is read of the file's end for the backlog, and
// readBytes one read of new records.
const (
	tailBytes = 1 << 20
	readBytes = 4 << 20
)

// Read implements AuditReader.
func (t *FileTail) Read(cur Cursor, max int) ([]json.RawMessage, Cursor, error) {
	f, err := os.Open(t.path)
	if os.IsNotExist(err) {
		return nil, cur, nil
	}
	if err != nil {
		return nil, cur, fmt.Errorf("open audit log: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, cur, fmt.Errorf("stat audit log: %w", err)
	}
	start := int64(0)
	backlog := !cur.set
	switch {
	case backlog:
		start = max64(0, fi.Size()-tailBytes)
	case os.SameFile(cur.file, fi) && fi.Size() >= cur.off:
		start = cur.off
	default:
		// rotated (a new file) or cut: read the new file from its start
	}
	n := min(fi.Size()-start, readBytes)
	buf := make([]byte, n)
	if _, err := f.ReadAt(buf, start); err != nil && err != io.EOF {
		return nil, cur, fmt.Errorf("read audit log: %w", err)
	}
	if backlog && start > 0 { // the first line is likely cut
		if i := bytes.IndexByte(buf, '\n'); i >= 0 {
			buf, start = buf[i+1:], start+int64(i+1)
		}
	}
	end := bytes.LastIndexByte(buf, '\n') + 1 // only complete lines
	var recs []json.RawMessage
	for line := range bytes.Lines(buf[:end]) {
		// Compacted, a record has no whitespace outside its strings, and
		// JSON escapes CR and LF inside them: it is one line in any framing
		// (an EventSource ends a line at a lone CR too).
		var rec bytes.Buffer
		if json.Compact(&rec, line) != nil || rec.Len() == 0 {
			continue
		}
		recs = append(recs, json.RawMessage(rec.Bytes()))
	}
	if len(recs) > max {
		recs = recs[len(recs)-max:]
	}
	return recs, Cursor{file: fi, off: start + int64(end), set: true}, nil
}

func max64(a, b int64) int64 {
	if a > b {
		return a
	}
	return b
}
