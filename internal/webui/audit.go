package webui

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sync"

	"github.com/beige-dev/beige/internal/audit"
)

// AuditReader is where the Activity view reads the audit log: the records
// already written (the tail) and those written since; FileTail is the
// audit log's.
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
	c   audit.Cursor
	set bool
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

// Read implements AuditReader. The audit package reads the file (across
// rotation), as for `beige audit tail`.
func (t *FileTail) Read(cur Cursor, max int) ([]json.RawMessage, Cursor, error) {
	c := cur.c
	if !cur.set {
		var err error
		if c, err = audit.Backlog(t.path, tailBytes); err != nil {
			return nil, cur, fmt.Errorf("read audit log: %w", err)
		}
	}
	var recs []json.RawMessage
	c, err := audit.ReadNew(t.path, c, readBytes, func(rl audit.RawLine) error {
		// Compacted, a record has no whitespace outside its strings, and
		// JSON escapes CR and LF inside them: it is one line in any framing
		// (an EventSource ends a line at a lone CR too).
		var rec bytes.Buffer
		if json.Compact(&rec, rl.Bytes) == nil && rec.Len() > 0 {
			recs = append(recs, json.RawMessage(rec.Bytes()))
		}
		return nil
	})
	if err != nil {
		return nil, cur, fmt.Errorf("read audit log: %w", err)
	}
	if len(recs) > max {
		recs = recs[len(recs)-max:]
	}
	return recs, Cursor{c: c, set: true}, nil
}
