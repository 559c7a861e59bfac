// Package audit owns the audit log: one JSON object per line in
// $BEIGE_HOME/logs/audit.jsonl for every tool call, core or plugin, written
// before the call runs and again when it has finished. The file is rotated by
// size (audit.jsonl.1 … audit.jsonl.N), and rotated files are kept unless
// the operator sets a retention (Options.MaxFiles). Every field of a record
// is bounded, so a line is a few KB at most. A record that cannot be written
// is an error for the caller, who must then not run the call.
//
// The log is tamper-evident: every record carries a sequence number and a
// SHA-256 hash chained to the record before, across rotated files, and the
// newest record is also kept in a head file ($BEIGE_HOME/data/audit-head),
// so that Verify finds an edited, deleted, reordered or cut-off record
// (chain.go, verify.go, docs/audit.md).
package audit

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/beige-dev/beige/internal/atomicfile"
	"github.com/beige-dev/beige/internal/logfile"
)

// Values of Record.Phase.
const (
	PhaseStarted  = "started"
	PhaseFinished = "finished"
	// PhasePending: the call matched an approval ("ask") rule and waits for
	// an answer; Decision is DecisionPending and Rule the rule. A started
	// record follows if it is approved, a denied finished record if not.
	PhasePending = "pending"
)

// Values of Record.Type.
const (
	TypeCoreTool = "core_tool" // read, write, patch, exec
	TypeTool     = "tool"      // a plugin tool called through a launcher
	TypeLLM      = "llm"       // one attempt of a model call (Tool is "<provider>/<model>")
	TypeNet      = "net"       // one connection (or forwarded HTTP request) through the egress proxy
	// TypeAudit is a record of the audit log about itself, written by the
	// Logger when it opens the log: Tool ToolRepair or ToolHead.
	TypeAudit = "audit"
)

// Values of Record.Tool for TypeAudit records.
const (
	// ToolRepair: the log ended in a torn record (a crash cut a write
	// short); Args {"file","offset","bytes","sha256"} say which bytes were
	// set aside, and the chain goes on from the last whole record.
	ToolRepair = "repair"
	// ToolHead: the head did not match the log at open; Args {"reason":
	// "ahead" (records after seq are missing), "mismatch" (the record at
	// headSeq is not the one the head saw) or "missing" (no head), "seq",
	// "headSeq", "headHash"}.
	ToolHead = "head"
)

// Values of Record.Decision.
const (
	DecisionAllowed = "allowed"
	DecisionDenied  = "denied"
	DecisionPending = "pending" // PhasePending records
)

// Values of Record.Target.
const (
	TargetGateway = "gateway"
	TargetSandbox = "sandbox"
)

// Record is one line of the audit log. A call that is allowed gives two
// records, PhaseStarted before it runs and PhaseFinished after; a call that is
// denied gives one PhaseFinished record with DecisionDenied.
//
// Args of TypeTool and TypeCoreTool records is a JSON array of strings (see
// StringArgs), as in the original Beige's audit log: for a plugin tool the
// argument vector the launcher was given; for a core tool [path] (read,
// patch), [path, "(N bytes)"] (write: the content's size, not the content)
// or [command] (exec).
type Record struct {
	// Time is when the record was made; Log sets it when zero. It is written
	// in UTC with milliseconds: "2026-03-05T00:00:00.000Z".
	Time    time.Time `json:"ts"`
	Agent   string    `json:"agent"`
	Session string    `json:"session,omitempty"` // session key
	Model   string    `json:"model,omitempty"`   // model that asked for the call, if any
	Channel string    `json:"channel,omitempty"`
	Phase   string    `json:"phase"` // PhaseStarted or PhaseFinished
	Type    string    `json:"type"`  // TypeCoreTool or TypeTool
	Tool    string    `json:"tool"`  // "exec", "git", …
	// Args must be valid JSON; it is written compacted, and left out when empty.
	Args json.RawMessage `json:"args,omitempty"`
	// ArgsBytes and ArgsSha256 are set when Args was too large and was
	// cut (see MaxArgsBytes): the size and SHA-256 of the args as given.
	ArgsBytes  int64  `json:"argsBytes,omitempty"`
	ArgsSha256 string `json:"argsSha256,omitempty"`
	// Truncated is set when a field was cut to its bound.
	Truncated bool `json:"truncated,omitempty"`

	Decision string `json:"decision,omitempty"` // DecisionAllowed or DecisionDenied
	Target   string `json:"target,omitempty"`   // TargetGateway or TargetSandbox
	// The result summary, set on finished records; nil fields are left out.
	DurationMs  *int64 `json:"durationMs,omitempty"`
	ExitCode    *int   `json:"exitCode,omitempty"`
	OutputBytes *int64 `json:"outputBytes,omitempty"` // true size, even when the output shown was cut
	Error       string `json:"error,omitempty"`
	// Unattributed marks a tool call from the sandbox that could not be
	// attributed to a session (no valid call token): Session and Channel
	// are then empty, whatever the sandbox claimed.
	Unattributed bool `json:"unattributed,omitempty"`

	// The destination of a TypeNet record: the host (name or address) and
	// port the sandbox asked for, the method (CONNECT for a tunnel), the
	// egress rule that decided, and the bytes relayed each way (up: from the
	// sandbox). Tool is "egress".
	Host      string `json:"host,omitempty"`
	Port      int    `json:"port,omitempty"`
	Method    string `json:"method,omitempty"`
	Rule      string `json:"rule,omitempty"`
	BytesUp   *int64 `json:"bytesUp,omitempty"`
	BytesDown *int64 `json:"bytesDown,omitempty"`
	// Injected names the headers the egress proxy added to an intercepted
	// connection (sandbox.egress.credentials); never their values.
	Injected string `json:"injected,omitempty"`

	// ApprovedBy and Approval say who answered a call that waited for
	// approval, and how: ApprovedBy is "<who> via <channel>" (empty after a
	// timeout), Approval "approve", "always", "deny", "timeout" or
	// "remembered" (an earlier "always" of the session). Rule is the rule
	// that asked.
	ApprovedBy string `json:"approvedBy,omitempty"`
	Approval   string `json:"approval,omitempty"`
}

// StringArgs returns args as a JSON array of strings, the Args of a plugin
// tool call. A nil slice gives [].
func StringArgs(args []string) json.RawMessage {
	b := make([]byte, 0, 2+16*len(args))
	b = append(b, '[')
	for i, a := range args {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendString(b, a)
	}
	return append(b, ']')
}

// DefaultMaxSizeBytes is the default of Options.MaxSizeBytes.
const DefaultMaxSizeBytes = logfile.DefaultMaxSizeBytes

// Options tune a Logger: the rotation of its file. A nil *Options, and
// every zero field, mean the defaults.
type Options struct {
	// MaxSizeBytes is the size audit.jsonl may reach before it is renamed
	// audit.jsonl.1 (older files shift up) (DefaultMaxSizeBytes when ≤ 0).
	MaxSizeBytes int64
	// MaxFiles is how many rotated files are kept. 0, the default, keeps
	// every one: the log only grows, and no amount of traffic from an agent
	// can push older records out. A positive value is the operator's
	// retention, and gives that up: the oldest file is deleted when the
	// (MaxFiles+1)th rotation happens.
	MaxFiles int
	// Logger reports a torn last record found on opening. Nil: not reported.
	Logger *slog.Logger
	// OnWriteError, if set, is called when a write fails (the partial line
	// is already cut off again); when it returns true (e.g. it freed the
	// gateway's disk reserve on a full disk) the write is tried once more.
	OnWriteError func(error) bool
	// Redactor, if set, replaces configured secret values in each record's
	// Args and Error before the record is bounded and written (see
	// internal/redact).
	Redactor Redactor
	// Unchained writes records without seq and hash, as before the chain
	// existed: only for the benchmark that measures what the chain costs
	// (a gateway never sets it; Verify then finds nothing to check).
	Unchained bool
	// OnRecord, if set, is called after each record is written, with its
	// seq (0 when the chain is off): beige_audit_records_total and the
	// chain head gauge.
	OnRecord func(seq int64)
	// HeadPath, if set, is the head file ($BEIGE_HOME/data/audit-head): the
	// newest record's seq and hash, rewritten (atomically, after syncing the
	// log) at most every HeadInterval while records are written, and at
	// Close. Without it a log cut short at its end cannot be told from a
	// whole one.
	HeadPath string
	// HeadInterval is how often at most the head is rewritten
	// (DefaultHeadInterval when ≤ 0). Records written since the last head
	// update can be cut off the end of the log without Verify noticing.
	HeadInterval time.Duration
}

// DefaultHeadInterval is the default of Options.HeadInterval.
const DefaultHeadInterval = 100 * time.Millisecond

// Redactor replaces secret values in text and in JSON (see redact.Redactor).
type Redactor interface {
	String(string) string
	JSON(json.RawMessage) json.RawMessage
}

// ErrClosed is returned by Log after Close.
var ErrClosed = logfile.ErrClosed

// Logger appends records to an audit log file. It is safe for concurrent use:
// each record is one write(2) of one whole line, under a mutex that also
// assigns its seq and hash (so the file's order is the chain's), on a file
// opened with O_APPEND, so lines never interleave. It does not fsync a
// record before Log returns; the head is written after a sync.
type Logger struct {
	file     *logfile.File
	now      func() time.Time // for tests
	onError  func(error) bool
	onRecord func(seq int64)
	redact   Redactor // nil: none
	log      *slog.Logger
	plain    bool // no chain: the benchmark's baseline

	mu   sync.Mutex // orders seq, hash and the write
	seq  int64      // of the last record written
	hash [64]byte   // of the last record written, hex
	next [64]byte   // the hash being written, under mu
	dig  hash.Hash  // SHA-256, reused under mu

	headPath  string
	headEvery time.Duration
	headSeq   int64 // the seq the head file holds (flusher only)
	headErr   bool  // the last head write failed (flusher only)
	kick      chan struct{}
	stop      chan struct{}
	done      chan struct{}
	closeOnce sync.Once
}

// Open opens (creating if needed) the audit log at path, for appending. The
// parent folder is created with mode 0700 if missing; the file has mode 0600.
// The chain goes on from the newest record in the log (rotated files
// included). A torn last record is set aside with a ToolRepair record, and a
// head that does not match the log is recorded with a ToolHead record.
func Open(path string, opts *Options) (*Logger, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	lo := logfile.Options{MaxSizeBytes: o.MaxSizeBytes, MaxFiles: o.MaxFiles}
	if o.MaxFiles <= 0 {
		lo.MaxFiles = -1 // keep all
	}
	f, err := logfile.Open(path, &lo)
	if err != nil {
		return nil, fmt.Errorf("audit: %w", err)
	}
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	l := &Logger{file: f, now: time.Now, onError: o.OnWriteError, redact: o.Redactor, log: log,
		headPath: o.HeadPath, headEvery: o.HeadInterval, dig: sha256.New(), onRecord: o.OnRecord, plain: o.Unchained}
	if l.headEvery <= 0 {
		l.headEvery = DefaultHeadInterval
	}
	fragOff, fragLen := f.Fragment()
	last, lastFile, err := lastLink(path, fragOff, fragLen)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("audit: find the newest record: %w", err)
	}
	l.seq = last.Seq
	copy(l.hash[:], GenesisHash)
	if l.seq > 0 {
		copy(l.hash[:], last.Hash)
	}
	if fragLen > 0 {
		log.Warn("the audit log ended in a torn record (a crash or a full disk cut a write short); it is set aside, a repair record says so, and the chain goes on from the last whole record",
			"path", path, "offset", fragOff, "bytes", fragLen)
		if err := l.logRepair(path, fragOff, fragLen); err != nil {
			f.Close()
			return nil, err
		}
	}
	if l.headPath != "" {
		if err := l.checkHead(last, lastFile); err != nil {
			f.Close()
			return nil, err
		}
		l.kick, l.stop, l.done = make(chan struct{}, 1), make(chan struct{}), make(chan struct{})
		go l.flushLoop()
		l.poke()
	}
	return l, nil
}

// logRepair writes the ToolRepair record for the torn line at off.
func (l *Logger) logRepair(path string, off, n int64) error {
	frag := make([]byte, n)
	rf, err := os.Open(path)
	if err == nil {
		_, err = rf.ReadAt(frag, off)
		rf.Close()
	}
	if err != nil {
		return fmt.Errorf("audit: read the torn record: %w", err)
	}
	sum := sha256.Sum256(frag)
	args, _ := json.Marshal(repairArgs{File: filepath.Base(path), Offset: off, Bytes: n, Sha256: hex.EncodeToString(sum[:])})
	return l.logSelf(Record{Tool: ToolRepair, Args: args,
		Error: fmt.Sprintf("set aside a torn record (%d bytes at offset %d) left by a crash", n, off)})
}

// checkHead compares the head file with the newest record found at open,
// and records a mismatch in the chain itself (the head is rewritten soon,
// so it would otherwise be lost).
func (l *Logger) checkHead(last Link, lastFile string) error {
	if err := os.MkdirAll(filepath.Dir(l.headPath), 0o700); err != nil {
		return fmt.Errorf("audit: create the head's folder: %w", err)
	}
	h, err := ReadHead(l.headPath)
	var a headArgs
	switch {
	case err != nil && !errors.Is(err, os.ErrNotExist):
		l.log.Warn("the audit head does not read; it is rewritten, and a record in the log says so", "path", l.headPath, "err", err)
		a.Reason = "missing"
	case err != nil:
		if last.Seq == 0 {
			return nil // a new log (or one from before the chain)
		}
		a.Reason = "missing"
	case h.Seq > last.Seq:
		a.Reason = "ahead"
	case h.Seq == last.Seq && h.Hash != last.Hash:
		a.Reason = "mismatch"
	default:
		l.headSeq = h.Seq
		return nil
	}
	a.Seq, a.HeadSeq, a.HeadHash = last.Seq, h.Seq, h.Hash
	var msg string
	switch a.Reason {
	case "missing":
		msg = fmt.Sprintf("the audit head was missing or unreadable while the log holds records up to seq %d: records cut off its end before now cannot be detected", last.Seq)
	case "ahead":
		msg = fmt.Sprintf("the log ends at seq %d but the audit head says %d: records %d..%d are missing (the log was cut short, or lost in a power failure)", last.Seq, h.Seq, last.Seq+1, h.Seq)
	default:
		msg = fmt.Sprintf("the record at seq %d (in %s) is not the one the audit head saw: the log was rewritten", last.Seq, lastFile)
	}
	l.log.Error("the audit log does not match its head; a record in the log says so, and beige audit verify reports it", "reason", a.Reason, "seq", last.Seq, "headSeq", h.Seq)
	args, _ := json.Marshal(a)
	return l.logSelf(Record{Tool: ToolHead, Args: args, Error: msg})
}

type repairArgs struct {
	File   string `json:"file"`
	Offset int64  `json:"offset"`
	Bytes  int64  `json:"bytes"`
	Sha256 string `json:"sha256"`
}

type headArgs struct {
	Reason   string `json:"reason"`
	Seq      int64  `json:"seq"`
	HeadSeq  int64  `json:"headSeq"`
	HeadHash string `json:"headHash,omitempty"`
}

// logSelf writes a TypeAudit record, with its prev.
func (l *Logger) logSelf(rec Record) error {
	rec.Phase, rec.Type, rec.Decision = PhaseFinished, TypeAudit, ""
	if err := l.write(rec, true); err != nil {
		return fmt.Errorf("audit: write a %s record: %w", rec.Tool, err)
	}
	return nil
}

// poke tells the flusher there is a new record.
func (l *Logger) poke() {
	select {
	case l.kick <- struct{}{}:
	default:
	}
}

// flushLoop rewrites the head when records were written, at most every
// headEvery, and once more at Close.
func (l *Logger) flushLoop() {
	defer close(l.done)
	for {
		select {
		case <-l.kick:
		case <-l.stop:
			l.flushHead()
			return
		}
		l.flushHead()
		t := time.NewTimer(l.headEvery)
		select {
		case <-t.C:
		case <-l.stop:
			t.Stop()
			l.flushHead()
			return
		}
	}
}

// flushHead syncs the log, then writes the head: the head never names a
// record that a power failure could take from the log.
func (l *Logger) flushHead() {
	l.mu.Lock()
	seq, hash := l.seq, string(l.hash[:])
	l.mu.Unlock()
	if seq == l.headSeq {
		return
	}
	err := l.file.Sync()
	if err == nil {
		data, _ := json.Marshal(Head{Seq: seq, Hash: hash, File: filepath.Base(l.file.Path()), Time: l.now().UTC()})
		err = atomicfile.Write(l.headPath, append(data, '\n'), 0o600)
	}
	if err != nil {
		if !l.headErr {
			l.log.Warn("cannot write the audit head; records cut off the end of the log go unnoticed until it is written", "path", l.headPath, "err", err)
		}
		l.headErr = true
		return
	}
	l.headSeq, l.headErr = seq, false
}

// Path returns the path of the current log file.
func (l *Logger) Path() string { return l.file.Path() }

// Seq returns the seq of the newest record written (0 before any, or with
// the chain off).
func (l *Logger) Seq() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.seq
}

var bufPool = sync.Pool{New: func() any { b := make([]byte, 0, 512); return &b }}

// Log writes rec as one line, its fields cut to their bounds (see
// MaxArgsBytes). It sets rec.Time to now when zero. An error means the
// record is not in the log.
// TypeAudit records are the Logger's own: Log refuses them.
func (l *Logger) Log(rec Record) error {
	if rec.Type == TypeAudit {
		return fmt.Errorf("audit: records of type %q are the audit log's own", TypeAudit)
	}
	return l.write(rec, false)
}

func (l *Logger) write(rec Record, withPrev bool) error {
	if rec.Time.IsZero() {
		rec.Time = l.now()
	}
	if l.redact != nil {
		// Before bound, so that a cut never leaves half a secret behind.
		rec.Args = l.redact.JSON(rec.Args)
		rec.Error = l.redact.String(rec.Error)
	}
	if err := rec.bound(); err != nil {
		return fmt.Errorf("audit: args of %s: %w", cut(rec.Tool, MaxNameBytes), err)
	}
	bp := bufPool.Get().(*[]byte)
	defer func() {
		if cap(*bp) <= 64<<10 { // don't let one huge record pin memory
			bufPool.Put(bp)
		}
	}()
	line, err := rec.appendJSON((*bp)[:0])
	if err != nil {
		return err
	}
	if l.plain {
		line = append(line, '\n')
		*bp = line
		if err := l.writeLine(line); err != nil {
			return err
		}
		if l.onRecord != nil {
			l.onRecord(0)
		}
		return nil
	}
	l.mu.Lock()
	seq := l.seq + 1
	// The first record of a file carries prev, so that each file can be
	// checked from its first line (and a missing one is told apart).
	withPrev = withPrev || l.file.StartsFile(len(line)+len(seqKey)+20+prevTail+hashTail+1)
	l.next = l.hash
	line = appendChainTo(line, seq, &l.next, withPrev, l.dig)
	line = append(line, '\n')
	*bp = line
	err = l.writeLine(line)
	if err == nil {
		l.seq, l.hash = seq, l.next
	}
	l.mu.Unlock()
	if err == nil && l.onRecord != nil {
		l.onRecord(seq)
	}
	if err == nil && l.kick != nil {
		l.poke()
	}
	return err
}

func (l *Logger) writeLine(line []byte) error {
	_, err := l.file.Write(line)
	if err != nil && !errors.Is(err, logfile.ErrClosed) && l.onError != nil && l.onError(err) {
		_, err = l.file.Write(line)
	}
	if err != nil {
		if errors.Is(err, logfile.ErrClosed) {
			return ErrClosed
		}
		return fmt.Errorf("audit: %w", err)
	}
	return nil
}

// Close writes the head and closes the file. Log returns ErrClosed
// afterwards.
func (l *Logger) Close() error {
	l.closeOnce.Do(func() {
		if l.stop != nil {
			close(l.stop)
			<-l.done
		}
	})
	return l.file.Close()
}

// ReadFile reads the records of one audit log file, oldest first. It is meant
// for tests and tools; a line that is not a valid record is an error.
func ReadFile(path string) ([]Record, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var recs []Record
	r := bufio.NewReader(f)
	for n := 1; ; n++ {
		line, err := r.ReadBytes('\n')
		if len(bytes.TrimSpace(line)) > 0 {
			var rec Record
			if jerr := json.Unmarshal(line, &rec); jerr != nil {
				return recs, fmt.Errorf("audit: %s line %d: %w", path, n, jerr)
			}
			recs = append(recs, rec)
		}
		if err == io.EOF {
			return recs, nil
		}
		if err != nil {
			return recs, err
		}
	}
}
