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
	self       string    // Tool of a TypeAudit record
	head       *headArgs // of a ToolHead record
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
	if rep.Break != nil {
		return rep, nil
	}
	src := &source{snap: snap, liveWait: o.LiveWait, prevStored: GenesisHash}
	if err := walk(rep, src, o); err != nil {
		return nil, err
	}
	return rep, nil
}

// source reads the entries of a snapshot as the walk asks for them,
// keeping only a window of them in memory.
type source struct {
	snap       *Snapshot
	liveWait   time.Duration
	fi         int // the file being read
	lr         *lineReader
	waited     bool  // for a last line without a newline
	waitedOff  int64 // its offset
	base       int   // the index of buf[0]
	buf        []entry
	eof        bool
	prevStored string // the stored hash of the last chained line read
	prevLine   []byte // the last line read, for a repair record to match
}

// at returns entry i (0-based over all files), or nil past the end.
func (s *source) at(i int) (*entry, error) {
	for i >= s.base+len(s.buf) {
		if s.eof {
			return nil, nil
		}
		if err := s.loadOne(); err != nil {
			return nil, err
		}
	}
	return &s.buf[i-s.base], nil
}

// release drops the entries before i.
func (s *source) release(i int) {
	if n := i - s.base; n > 0 && n <= len(s.buf) {
		s.buf = append(s.buf[:0], s.buf[n:]...)
		s.base = i
	}
}

func (s *source) loadOne() error {
	for {
		if s.lr == nil {
			if s.fi >= len(s.snap.Files) {
				s.eof = true
				return nil
			}
			s.lr = s.snap.Files[s.fi].reader(0, 1)
		}
		rl, ok, err := s.lr.next()
		if err != nil {
			return err
		}
		if !ok {
			s.fi, s.lr = s.fi+1, nil
			continue
		}
		if !rl.Newline && s.snap.Files[s.fi].N == 0 {
			// A last line without a newline may be a record a running
			// gateway is writing: read it again in a moment.
			if !s.waited {
				s.waited, s.waitedOff = true, rl.Offset
				time.Sleep(s.liveWait)
				s.lr = s.snap.Files[s.fi].reader(rl.Offset, rl.Line)
				continue
			}
			if rl.Offset != s.waitedOff {
				// A newer line being written now: the gateway is writing,
				// it is not a cut end.
				s.fi, s.lr = s.fi+1, nil
				continue
			}
		}
		s.add(s.fi, rl)
		return nil
	}
}

// add makes the entry of one line. Its hash is checked here, against its
// own prev when it carries one, else against the chained line before it.
func (s *source) add(fi int, rl RawLine) {
	e := entry{file: fi, line: rl.Line, off: rl.Offset, n: int64(len(rl.Bytes)), newline: rl.Newline}
	if l, err := ParseLink(rl.Bytes); err == nil {
		e.chained, e.link = true, l
		base := s.prevStored
		if l.Prev != "" {
			base = l.Prev
		}
		e.ok = lineHash(base, rl.Bytes) == l.Hash
		s.prevStored = l.Hash
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
					if json.Unmarshal(rec.Args, &a) == nil && len(s.buf) > 0 {
						p := &s.buf[len(s.buf)-1]
						sum := sha256.Sum256(s.prevLine)
						if p.off == a.Offset && p.n == a.Bytes && hex.EncodeToString(sum[:]) == a.Sha256 {
							p.setAside = true
						}
					}
				case ToolHead:
					e.head = new(headArgs)
					json.Unmarshal(rec.Args, e.head)
				}
			}
		}
	}
	s.buf = append(s.buf, e)
	s.prevLine = append(s.prevLine[:0], rl.Bytes...)
}

func walk(rep *Report, src *source, o VerifyOptions) error {
	snap := src.snap
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
	var lastE entry // the last record that held
	var last Point  // lastE's, made when needed
	prevFile := -1
	defer func() {
		if lastE.chained {
			rep.Last = point(&lastE)
		}
	}()
	for i := 0; ; i++ {
		src.release(i)
		e, err := src.at(i)
		if err != nil {
			return err
		}
		if e == nil {
			break
		}
		ev := *e // e moves when the window does
		e = &ev
		next, err := src.at(i + 1) // loading it marks e set aside, if it is
		if err != nil {
			return err
		}
		*e = src.buf[i-src.base]
		firstOfFile := e.file != prevFile
		prevFile = e.file
		if firstOfFile {
			if n := snap.Files[e.file].N; gaps[n+1] {
				brk(BreakMissing, e, "the rotated file %s.%d is missing (rotated files are numbered without gaps)", filepath.Base(snap.Path), n+1)
				return nil
			}
		}
		if next == nil && !e.newline && snap.Files[e.file].N == 0 {
			// The Logger writes whole lines; the source waited for one in flight.
			brk(BreakTruncated, e, "the last record is cut (%d bytes, no newline): the end of the log was cut off, or the gateway crashed while writing it (its next start sets a torn record aside)", e.n)
			return nil
		}
		if e.setAside {
			rep.Repairs = append(rep.Repairs, Repair{File: name(e), Line: e.line, Bytes: e.n, RepairFile: name(next), RepairLine: next.line})
			continue
		}
		if !e.chained {
			if expect == 0 {
				rep.Unchained++
				continue
			}
			brk(BreakEdited, e, "not a chained audit record (after seq %d): a record was edited, or a line inserted", expect-1)
			return nil
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
					return nil
				}
			} else if e.link.Prev != "" && e.link.Prev != GenesisHash {
				brk(BreakEdited, e, "the first record (seq 1) does not start the chain (its prev is not %s…)", GenesisHash[:8])
				return nil
			}
			if !e.ok && (s == 1 || e.link.Prev != "") {
				brk(BreakEdited, e, "record seq %d does not match its hash: it was edited", s)
				return nil
			}
		case s == expect:
			if e.link.Prev != "" && e.link.Prev != prev {
				brk(BreakEdited, e, "record seq %d does not chain to seq %d (its prev is not that record's hash): a record was edited", s, s-1)
				return nil
			}
			if !e.ok {
				brk(BreakEdited, e, "record seq %d does not match its hash: it, or seq %d before it, was edited", s, s-1)
				return nil
			}
		default:
			return classify(rep, src, i, e, firstOfFile, expect, name)
		}
		if e.self == ToolHead && e.head != nil {
			h := e.head
			switch h.Reason {
			case "ahead":
				brk(BreakTruncated, e, "at a gateway start the log ended at seq %d but the audit head said %d: records %d..%d were cut off (or lost in a power failure)", h.Seq, h.HeadSeq, h.Seq+1, h.HeadSeq)
			case "mismatch":
				brk(BreakEdited, e, "at a gateway start the record seq %d was not the one the audit head saw: the end of the log was rewritten", h.Seq)
			default:
				brk(BreakHead, e, "at a gateway start the audit head was missing while the log held records up to seq %d: records cut off the end before then cannot be ruled out", h.Seq)
			}
			return nil
		}
		if rep.Head != nil && s == rep.Head.Seq && e.link.Hash != rep.Head.Hash {
			brk(BreakEdited, e, "record seq %d is not the one the audit head saw (hash %.12s…, the head says %.12s…): the log was rewritten", s, e.link.Hash, rep.Head.Hash)
			return nil
		}
		rep.Records++
		expect, prev, lastE = s+1, e.link.Hash, *e
	}
	if lastE.chained {
		last = point(&lastE)
	}
	if len(snap.Gaps) > 0 {
		rep.Break = &Break{Kind: BreakMissing, File: fmt.Sprintf("%s.%d", filepath.Base(snap.Path), snap.Gaps[0]), Line: 1, Detail: "this rotated file is missing (rotated files are numbered without gaps)"}
		return nil
	}
	if h := rep.Head; h != nil && h.Seq > 0 && (last.Seq == 0 || last.Seq < h.Seq) {
		b := &Break{Kind: BreakTruncated, File: "", Detail: fmt.Sprintf("the log is empty but the audit head (written %s) says seq %d", h.Time.Format(time.RFC3339), h.Seq)}
		if last.Seq > 0 {
			b.File, b.Line = last.File, last.Line+1
			b.Detail = fmt.Sprintf("the log ends at seq %d but the audit head (written %s) says %d: records %d..%d were cut off", last.Seq, h.Time.Format(time.RFC3339), h.Seq, last.Seq+1, h.Seq)
		}
		rep.Break = b
	}
	return nil
}

// maxLookahead bounds how far classify looks for a record out of place.
const maxLookahead = 1 << 16

// classify says why e, entry i, does not have seq expect.
func classify(rep *Report, src *source, i int, e *entry, firstOfFile bool, expect int64, name func(*entry) string) error {
	s := e.link.Seq
	brk := func(kind string, format string, args ...any) {
		rep.Break = &Break{Kind: kind, File: name(e), Line: e.line, Detail: fmt.Sprintf(format, args...)}
	}
	var next *entry
	for j := i + 1; j < i+maxLookahead; j++ {
		n, err := src.at(j)
		if err != nil {
			return err
		}
		if n == nil || n.chained && !n.setAside {
			next = n
			break
		}
	}
	if next != nil && next.link.Seq == expect+1 {
		brk(BreakEdited, "record has seq %d where %d was expected, and the next is %d: its seq was edited", s, expect, expect+1)
		return nil
	}
	if s < expect {
		brk(BreakReordered, "seq %d comes after seq %d: records are out of order (moved or duplicated)", s, expect-1)
		return nil
	}
	for j := i + 1; j < i+maxLookahead; j++ {
		n, err := src.at(j)
		if err != nil {
			return err
		}
		if n == nil {
			break
		}
		if n.chained && n.link.Seq == expect {
			brk(BreakReordered, "seq %d where %d was expected; seq %d is further on, at %s line %d: records are out of order (swapped or moved)", s, expect, expect, name(n), n.line)
			return nil
		}
	}
	what := fmt.Sprintf("records %d..%d are", expect, s-1)
	if s-1 == expect {
		what = "record " + strconv.FormatInt(expect, 10) + " is"
	}
	if firstOfFile && e.link.Prev != "" {
		// A file's first record (it carries prev): what is missing is
		// the end of the file before, or whole files.
		brk(BreakMissing, "%s missing before this file's first record (seq %d): a rotated file deleted, or the end of one cut", what, s)
		return nil
	}
	if firstOfFile {
		// Without prev this was not the file's first record.
		brk(BreakDeleted, "%s missing at the start of this file (seq %d comes first): its first lines deleted", what, s)
		return nil
	}
	brk(BreakDeleted, "%s missing before this record (seq %d): deleted", what, s)
	return nil
}
