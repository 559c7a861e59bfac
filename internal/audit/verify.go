package audit

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"
)

// Kinds of Break: how the chain is broken.
const (
	BreakEdited    = "edited"    // a record does not match its hash, or a line is not a record
	BreakDeleted   = "deleted"   // a gap in seq: records are missing
	BreakReordered = "reordered" // seq goes back, or a record is out of its place
	BreakTruncated = "truncated" // the log ends before the head, or its last line is cut
	BreakMissing   = "missing"   // a rotated file (or the records of one) is missing
	BreakHead      = "head"      // the head was lost or does not read
)

// Break is where the chain breaks: the first record (file and line) that
// does not follow from the ones before.
type Break struct {
	Kind   string
	File   string // its name in the logs folder; "" when about the head
	Line   int
	Detail string
}

func (b *Break) String() string {
	if b.File == "" {
		return fmt.Sprintf("%s: %s", b.Kind, b.Detail)
	}
	return fmt.Sprintf("%s: %s line %d: %s", b.Kind, b.File, b.Line, b.Detail)
}

// Point is one record of the chain.
type Point struct {
	Seq  int64
	Time string // its ts
	File string
	Line int
	Hash string
}

// Repair is a torn record set aside after a crash, and the ToolRepair
// record that says so.
type Repair struct {
	File       string // of the torn line
	Line       int
	Bytes      int64
	RepairFile string // of the repair record
	RepairLine int
}

// Report is what Verify found.
type Report struct {
	Records     int64 // chained records checked, the Logger's own included
	First, Last Point // zero when Records is 0
	// Unchained counts lines before the first chained record (written
	// before the chain existed): they are not covered.
	Unchained int
	// Repairs are crashes the Logger repaired: not tampering.
	Repairs []Repair
	// Pruned is how many records before First are gone, when
	// VerifyOptions.Retention allows that.
	Pruned int64
	// Head is the head compared with the log; nil when there is none.
	Head *Head
	// Break is the first place where the chain breaks; nil when it holds.
	Break *Break
}

// VerifyOptions tune Verify.
type VerifyOptions struct {
	// HeadPath is the head file to compare the end of the log with; "":
	// none, and a log cut at its end goes unnoticed.
	HeadPath string
	// Retention says the oldest rotated files may have been deleted by
	// the operator's retention (gateway.audit.maxFiles): a chain that
	// starts after seq 1 is then not a break.
	Retention bool
	// LiveWait is how long Verify waits for a last line without a newline
	// to be completed by a running gateway (200 ms when 0).
	LiveWait time.Duration
}

type entry struct {
	file, line int
	off        int64
	n          int64
	newline    bool
	chained    bool
	setAside   bool // a torn line a repair record covers
	ok         bool // its hash matches (see load)
	link       Link
	ts         [24]byte
	self       string // Tool of a TypeAudit record
	head       headArgs
}

// Verify checks the audit log at path: every file, oldest first, each
// record chained to the one before, and the end of the log against the
// head. It can run beside a gateway writing the log. An error means the
// log could not be read; a broken chain is Report.Break.
func Verify(path string, opts *VerifyOptions) (*Report, error) {
	var o VerifyOptions
	if opts != nil {
		o = *opts
	}
	if o.LiveWait <= 0 {
		o.LiveWait = 200 * time.Millisecond
	}
	rep := &Report{}
	if o.HeadPath != "" {
		// The head first: it only moves forward, and never past what is
		// already in the log, so the files read next reach it.
		h, err := ReadHead(o.HeadPath)
		switch {
		case errors.Is(err, os.ErrNotExist):
		case err != nil:
			rep.Break = &Break{Kind: BreakHead, Detail: fmt.Sprintf("the audit head does not read: %v", err)}
		default:
			rep.Head = &h
		}
	}
	snap, err := OpenSnapshot(path)
	if err != nil {
		return nil, err
	}
	defer snap.Close()
	es, err := load(snap, o.LiveWait)
	if err != nil {
		return nil, err
	}
	if rep.Break != nil {
		return rep, nil
	}
	walk(rep, snap, es, o)
	return rep, nil
}

// load reads every line of the snapshot. The hash of each chained line is
// checked here, against its own prev when it carries one, else against
// the chained line before it.
func load(snap *Snapshot, liveWait time.Duration) ([]entry, error) {
	var es []entry
	prevStored := GenesisHash
	var prevLine []byte // the line before, for a repair record to match
	add := func(fi int, rl RawLine) error {
		e := entry{file: fi, line: rl.Line, off: rl.Offset, n: int64(len(rl.Bytes)), newline: rl.Newline}
		if l, err := ParseLink(rl.Bytes); err == nil {
			e.chained, e.link = true, l
			base := prevStored
			if l.Prev != "" {
				base = l.Prev
			}
			e.ok = lineHash(base, rl.Bytes) == l.Hash
			prevStored = l.Hash
			if bytes.HasPrefix(rl.Bytes, []byte(`{"ts":"`)) && len(rl.Bytes) > 31 {
				copy(e.ts[:], rl.Bytes[7:31])
			}
			if bytes.Contains(rl.Bytes, []byte(`"type":"audit"`)) {
				var rec Record
				if json.Unmarshal(rl.Bytes, &rec) == nil && rec.Type == TypeAudit {
					e.self = rec.Tool
					switch rec.Tool {
					case ToolRepair:
						var a repairArgs
						if json.Unmarshal(rec.Args, &a) == nil && len(es) > 0 {
							p := &es[len(es)-1]
							sum := sha256.Sum256(prevLine)
							if p.off == a.Offset && p.n == a.Bytes && hex.EncodeToString(sum[:]) == a.Sha256 {
								p.setAside = true
							}
						}
					case ToolHead:
						json.Unmarshal(rec.Args, &e.head)
					}
				}
			}
		}
		es = append(es, e)
		prevLine = append(prevLine[:0], rl.Bytes...)
		return nil
	}
	for fi := range snap.Files {
		lf := &snap.Files[fi]
		if err := lf.Lines(func(rl RawLine) error { return add(fi, rl) }); err != nil {
			return nil, err
		}
	}
	// A last line without a newline may be a record a running gateway is
	// writing: read it again in a moment.
	if n := len(es); n > 0 && !es[n-1].newline && snap.Files[es[n-1].file].N == 0 {
		last := es[n-1]
		time.Sleep(liveWait)
		es = es[:n-1]
		if n > 1 {
			// prevStored must be the stored hash before the last line.
			prevStored = GenesisHash
			for i := n - 2; i >= 0; i-- {
				if es[i].chained {
					prevStored = es[i].link.Hash
					break
				}
			}
		}
		lf := &snap.Files[last.file]
		if err := lf.linesFrom(last.off, last.line, func(rl RawLine) error { return add(last.file, rl) }); err != nil {
			return nil, err
		}
		// A new line being written now, after the one waited for: the
		// gateway is writing, it is not a cut end.
		if n := len(es); n > 0 && !es[n-1].newline && es[n-1].off != last.off {
			es = es[:n-1]
		}
	}
	return es, nil
}

func walk(rep *Report, snap *Snapshot, es []entry, o VerifyOptions) {
	name := func(e *entry) string { return snap.Files[e.file].Name }
	brk := func(kind string, e *entry, format string, args ...any) {
		rep.Break = &Break{Kind: kind, File: name(e), Line: e.line, Detail: fmt.Sprintf(format, args...)}
	}
	point := func(e *entry) Point {
		return Point{Seq: e.link.Seq, Time: string(bytes.TrimRight(e.ts[:], "\x00")), File: name(e), Line: e.line, Hash: e.link.Hash}
	}
	gaps := map[int]bool{}
	for _, g := range snap.Gaps {
		gaps[g] = true
	}
	var expect int64 // the next seq; 0 before the first chained record
	prev := ""
	var last *entry
	defer func() {
		if last != nil {
			rep.Last = point(last)
		}
	}()
	for i := range es {
		e := &es[i]
		if i == 0 || es[i-1].file != e.file {
			n := snap.Files[e.file].N
			if gaps[n+1] {
				brk(BreakMissing, e, "the rotated file %s.%d is missing (rotated files are numbered without gaps)", filepath.Base(snap.Path), n+1)
				return
			}
		}
		if i == len(es)-1 && !e.newline && snap.Files[e.file].N == 0 {
			// The Logger writes whole lines; load waited for one in flight.
			brk(BreakTruncated, e, "the last record is cut (%d bytes, no newline): the end of the log was cut off, or the gateway crashed while writing it (its next start sets a torn record aside)", e.n)
			return
		}
		if e.setAside {
			rep.Repairs = append(rep.Repairs, Repair{File: name(e), Line: e.line, Bytes: e.n, RepairFile: name(&es[i+1]), RepairLine: es[i+1].line})
			continue
		}
		if !e.chained {
			if expect == 0 {
				rep.Unchained++
				continue
			}
			brk(BreakEdited, e, "not a chained audit record (after seq %d): a record was edited, or a line inserted", expect-1)
			return
		}
		s := e.link.Seq
		switch {
		case expect == 0:
			rep.First = point(e)
			if s != 1 {
				if o.Retention {
					rep.Pruned = s - 1
				} else {
					brk(BreakMissing, e, "the log starts at seq %d: records 1..%d are missing (the oldest rotated file deleted?)", s, s-1)
					return
				}
			} else if e.link.Prev != "" && e.link.Prev != GenesisHash {
				brk(BreakEdited, e, "the first record (seq 1) does not start the chain (its prev is not %s…)", GenesisHash[:8])
				return
			}
			if !e.ok && (s == 1 || e.link.Prev != "") {
				brk(BreakEdited, e, "record seq %d does not match its hash: it was edited", s)
				return
			}
		case s == expect:
			if e.link.Prev != "" && e.link.Prev != prev {
				brk(BreakEdited, e, "record seq %d does not chain to seq %d (its prev is not that record's hash): a record was edited", s, s-1)
				return
			}
			if !e.ok {
				brk(BreakEdited, e, "record seq %d does not match its hash: it, or seq %d before it, was edited", s, s-1)
				return
			}
		default:
			classify(rep, es, i, expect, name)
			return
		}
		if e.self == ToolHead {
			h := e.head
			switch h.Reason {
			case "ahead":
				brk(BreakTruncated, e, "at a gateway start the log ended at seq %d but the audit head said %d: records %d..%d were cut off (or lost in a power failure)", h.Seq, h.HeadSeq, h.Seq+1, h.HeadSeq)
			case "mismatch":
				brk(BreakEdited, e, "at a gateway start the record seq %d was not the one the audit head saw: the end of the log was rewritten", h.Seq)
			default:
				brk(BreakHead, e, "at a gateway start the audit head was missing while the log held records up to seq %d: records cut off the end before then cannot be ruled out", h.Seq)
			}
			return
		}
		if rep.Head != nil && s == rep.Head.Seq && e.link.Hash != rep.Head.Hash {
			brk(BreakEdited, e, "record seq %d is not the one the audit head saw (hash %.12s…, the head says %.12s…): the log was rewritten", s, e.link.Hash, rep.Head.Hash)
			return
		}
		rep.Records++
		expect, prev, last = s+1, e.link.Hash, e
	}
	if len(snap.Gaps) > 0 {
		rep.Break = &Break{Kind: BreakMissing, File: fmt.Sprintf("%s.%d", filepath.Base(snap.Path), snap.Gaps[0]), Line: 1, Detail: "this rotated file is missing (rotated files are numbered without gaps)"}
		return
	}
	if h := rep.Head; h != nil && h.Seq > 0 && (last == nil || last.link.Seq < h.Seq) {
		b := &Break{Kind: BreakTruncated, File: "", Detail: fmt.Sprintf("the log is empty but the audit head (written %s) says seq %d", h.Time.Format(time.RFC3339), h.Seq)}
		if last != nil {
			b.File, b.Line = name(last), last.line+1
			b.Detail = fmt.Sprintf("the log ends at seq %d but the audit head (written %s) says %d: records %d..%d were cut off", last.link.Seq, h.Time.Format(time.RFC3339), h.Seq, last.link.Seq+1, h.Seq)
		}
		rep.Break = b
	}
}

// classify says why es[i] does not have seq expect.
func classify(rep *Report, es []entry, i int, expect int64, name func(*entry) string) {
	e := &es[i]
	s := e.link.Seq
	brk := func(kind string, format string, args ...any) {
		rep.Break = &Break{Kind: kind, File: name(e), Line: e.line, Detail: fmt.Sprintf(format, args...)}
	}
	next := func() *entry {
		for j := i + 1; j < len(es); j++ {
			if es[j].chained && !es[j].setAside {
				return &es[j]
			}
		}
		return nil
	}()
	if next != nil && next.link.Seq == expect+1 {
		brk(BreakEdited, "record has seq %d where %d was expected, and the next is %d: its seq was edited", s, expect, expect+1)
		return
	}
	if s < expect {
		brk(BreakReordered, "seq %d comes after seq %d: records are out of order (moved or duplicated)", s, expect-1)
		return
	}
	for j := i + 1; j < len(es); j++ {
		if es[j].chained && es[j].link.Seq == expect {
			brk(BreakReordered, "seq %d where %d was expected; seq %d is further on, at %s line %d: records are out of order (swapped or moved)", s, expect, expect, name(&es[j]), es[j].line)
			return
		}
	}
	firstOfFile := i == 0 || es[i-1].file != e.file
	what := fmt.Sprintf("records %d..%d are", expect, s-1)
	if s-1 == expect {
		what = "record " + strconv.FormatInt(expect, 10) + " is"
	}
	if firstOfFile {
		brk(BreakMissing, "%s missing before this file's first record (seq %d): a rotated file, or its first lines, deleted", what, s)
		return
	}
	brk(BreakDeleted, "%s missing before this record (seq %d): deleted", what, s)
}
