// Package audit owns the audit log: one JSON object per line in
// $BEIGE_HOME/logs/audit.jsonl for every tool call, core or plugin, written
// before the call runs and again when it has finished. The file is rotated by
// size (audit.jsonl.1 … audit.jsonl.N), and rotated files are kept unless
// the operator sets a retention (Options.MaxFiles). Every field of a record
// is bounded, so a line is a few KB at most. A record that cannot be written
// is an error for the caller, who must then not run the call.
package audit

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/beige-dev/beige/internal/logfile"
)

// Values of Record.Phase.
const (
	PhaseStarted  = "started"
	PhaseFinished = "finished"
)

// Values of Record.Type.
const (
	TypeCoreTool = "core_tool" // read, write, patch, exec
	TypeTool     = "tool"      // a plugin tool called through a launcher
	TypeLLM      = "llm"       // one attempt of a model call (Tool is "<provider>/<model>")
	TypeNet      = "net"       // one connection (or forwarded HTTP request) through the egress proxy
)

// Values of Record.Decision.
const (
	DecisionAllowed = "allowed"
	DecisionDenied  = "denied"
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
	// OnRecord, if set, is called after each record is written (the
	// beige_audit_records_total counter).
	OnRecord func()
}

// Redactor replaces secret values in text and in JSON (see redact.Redactor).
type Redactor interface {
	String(string) string
	JSON(json.RawMessage) json.RawMessage
}

// ErrClosed is returned by Log after Close.
var ErrClosed = logfile.ErrClosed

// Logger appends records to an audit log file. It is safe for concurrent use:
// each record is one write(2) of one whole line, under a mutex, on a file
// opened with O_APPEND, so lines never interleave. It does not fsync.
type Logger struct {
	file     *logfile.File
	now      func() time.Time // for tests
	onError  func(error) bool
	onRecord func()
	redact   Redactor // nil: none
}

// Open opens (creating if needed) the audit log at path, for appending. The
// parent folder is created with mode 0700 if missing; the file has mode 0600.
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
	if off, n := f.Fragment(); n > 0 && o.Logger != nil {
		o.Logger.Warn("the audit log ended in a torn record (a crash or a full disk cut a write short); it stays as it is and the log goes on on the next line",
			"path", path, "offset", off, "bytes", n)
	}
	return &Logger{file: f, now: time.Now, onError: o.OnWriteError, redact: o.Redactor, onRecord: o.OnRecord}, nil
}

// Path returns the path of the current log file.
func (l *Logger) Path() string { return l.file.Path() }

var bufPool = sync.Pool{New: func() any { b := make([]byte, 0, 512); return &b }}

// Log writes rec as one line, its fields cut to their bounds (see
// MaxArgsBytes). It sets rec.Time to now when zero. An error means the
// record is not in the log.
func (l *Logger) Log(rec Record) error {
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
	line = append(line, '\n')
	*bp = line
	_, err = l.file.Write(line)
	if err != nil && !errors.Is(err, logfile.ErrClosed) && l.onError != nil && l.onError(err) {
		_, err = l.file.Write(line)
	}
	if err != nil {
		if errors.Is(err, logfile.ErrClosed) {
			return ErrClosed
		}
		return fmt.Errorf("audit: %w", err)
	}
	if l.onRecord != nil {
		l.onRecord()
	}
	return nil
}

// Close closes the file. Log returns ErrClosed afterwards.
func (l *Logger) Close() error { return l.file.Close() }

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
