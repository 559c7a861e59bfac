package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/beige-dev/beige/internal/home"
	"github.com/beige-dev/beige/internal/llm"
)

// conversation is one session file and the context it holds. Only the
// prompt holding its session's turn changes it.
type conversation struct {
	path      string
	f         *os.File
	createdAt time.Time
	log       *slog.Logger

	lastID      string          // parent of the next entry; "" before the first
	known       map[string]bool // entry ids in use
	msgs        []llm.Message   // the context: what the model sees
	ids         []string        // entry id of each message
	compactedAt int64           // Unix ms of the last compaction
	provider    string          // model of the last reply or model_change
	model       string
	newline     bool // write a newline before the next entry
	buf         []byte
}

// sessionFileName is <YYYYMMDD-HHMMSS>-<4 hex>.jsonl.
func sessionFileName(t time.Time) string {
	return t.UTC().Format("20060102-150405") + "-" + randomHex(2) + ".jsonl"
}

// createConversation starts a new session file in dir (created 0700), with
// its header naming agent and key, mode 0600.
func createConversation(dir, agent, key string, log *slog.Logger) (*conversation, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("create session folder: %w", err)
	}
	now := time.Now()
	var f *os.File
	var err error
	for range 20 {
		f, err = os.OpenFile(filepath.Join(dir, sessionFileName(now)), os.O_WRONLY|os.O_CREATE|os.O_EXCL|os.O_APPEND, 0o600)
		if !errors.Is(err, fs.ErrExist) {
			break
		}
	}
	if err != nil {
		return nil, fmt.Errorf("create session file: %w", err)
	}
	c := &conversation{path: f.Name(), f: f, createdAt: now, log: log, known: map[string]bool{}}
	if err := c.write(headerLine{Type: entrySession, Version: SessionVersion, ID: newUUID(), Timestamp: isoTime(now), CWD: sessionCWD,
		SessionKey: key, AgentName: agent}); err != nil {
		f.Close()
		os.Remove(f.Name())
		return nil, fmt.Errorf("create session file: %w", err)
	}
	return c, nil
}

// openConversation replays an existing session file and opens it for
// appending. A torn last line is cut off (with a warning) so that the next
// entry starts on a line of its own.
func openConversation(path string, log *slog.Logger) (*conversation, error) {
	sf, err := readSessionFile(path)
	if err != nil {
		return nil, fmt.Errorf("session file %s: %w", path, err)
	}
	for _, p := range sf.problems {
		log.Warn("session file: "+p, "file", path)
	}
	r := replay(sf.entries)
	for _, p := range r.problems {
		log.Warn("session file: "+p, "file", path)
	}
	if sf.truncateAt >= 0 {
		// Keep the bytes cut off beside the file: they may be more than a
		// torn line.
		if data, err := os.ReadFile(path); err == nil && int64(len(data)) > sf.truncateAt {
			bad, kerr := home.KeepCopy(path, data[sf.truncateAt:])
			if kerr != nil {
				return nil, fmt.Errorf("session file %s: keep torn last line: %w", path, kerr)
			}
			log.Warn("session file: torn last line cut off and kept", "file", path, "keptAs", bad, "bytes", len(data)-int(sf.truncateAt))
		}
		if err := os.Truncate(path, sf.truncateAt); err != nil {
			return nil, fmt.Errorf("session file %s: drop torn last line: %w", path, err)
		}
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return nil, fmt.Errorf("session file: %w", err)
	}
	created, _ := time.Parse(time.RFC3339Nano, sf.header.Timestamp)
	return &conversation{
		path: path, f: f, createdAt: created, log: log,
		lastID: r.lastID, known: r.known,
		msgs: r.msgs, ids: r.ids, compactedAt: r.compactedAt,
		provider: r.provider, model: r.model,
		newline: sf.needNewline,
	}, nil
}

// write appends one line with a single write call (O_APPEND), so that a
// crash tears at most the last line.
func (c *conversation) write(v any) error {
	if c.f == nil {
		return errors.New("session file is closed")
	}
	b := c.buf[:0]
	if c.newline {
		b = append(b, '\n')
	}
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	b = append(b, data...)
	b = append(b, '\n')
	if len(b) <= 64<<10 {
		c.buf = b
	}
	if _, err := c.f.Write(b); err != nil {
		// What reached the file is unknown: start the next entry on a line
		// of its own, so at most this one is lost.
		c.newline = true
		if !home.ReleaseOnFull(err) {
			return err
		}
		// The disk was full and the gateway's reserve is now free: once
		// more, on a line of its own (a partial line is skipped on reading).
		c.log.Warn("session file: disk full; written again after releasing the disk reserve", "file", c.path)
		if _, err := c.f.Write(append([]byte{'\n'}, b...)); err != nil {
			return err
		}
	}
	c.newline = false
	return nil
}

// nextID returns an unused 8-hex entry id.
func (c *conversation) nextID() string {
	for {
		id := randomHex(4)
		if !c.known[id] {
			c.known[id] = true
			return id
		}
	}
}

func (c *conversation) parent() *string {
	if c.lastID == "" {
		return nil
	}
	p := c.lastID
	return &p
}

// appendMessage persists m and adds it to the context. A reply from
// another model than the last is preceded by a model_change entry.
func (c *conversation) appendMessage(m llm.Message) error {
	now := time.Now()
	if a := m.Assistant; a != nil && (a.Provider != c.provider || a.Model != c.model) {
		id := c.nextID()
		if err := c.write(modelChangeLine{
			Type: entryModelChange, ID: id, ParentID: c.parent(), Timestamp: isoTime(now),
			Provider: a.Provider, ModelID: a.Model,
		}); err != nil {
			return err
		}
		c.lastID, c.provider, c.model = id, a.Provider, a.Model
	}
	id := c.nextID()
	if err := c.write(messageLine{Type: entryMessage, ID: id, ParentID: c.parent(), Timestamp: isoTime(now), Message: m}); err != nil {
		return err
	}
	c.lastID = id
	c.msgs = append(c.msgs, m)
	c.ids = append(c.ids, id)
	return nil
}

// appendCompaction persists a compaction of the first cut messages and
// replaces them with the summary.
func (c *conversation) appendCompaction(summary string, cut, tokensBefore int) error {
	if cut < 1 || cut >= len(c.msgs) {
		return fmt.Errorf("compaction cut %d out of range (%d messages)", cut, len(c.msgs))
	}
	now := time.Now()
	id := c.nextID()
	if err := c.write(compactionLine{
		Type: entryCompaction, ID: id, ParentID: c.parent(), Timestamp: isoTime(now),
		Summary: summary, FirstKeptEntryID: c.ids[cut], TokensBefore: tokensBefore,
	}); err != nil {
		return err
	}
	c.lastID = id
	// Replies before now measured the longer context; the timestamp is
	// read back from the file with millisecond precision.
	c.compactedAt = millis(isoTime(now))
	msgs := make([]llm.Message, 0, len(c.msgs)-cut+1)
	msgs = append(msgs, SummaryMessage(summary, c.compactedAt))
	c.msgs = append(msgs, c.msgs[cut:]...)
	c.ids = append([]string{id}, c.ids[cut:]...)
	return nil
}

// messages returns a copy of the context.
func (c *conversation) messages() []llm.Message { return slices.Clone(c.msgs) }

func (c *conversation) close() error {
	if c.f == nil {
		return nil
	}
	err := c.f.Close()
	c.f = nil
	return err
}

// compact summarises the older part of the context when it is over the
// compactor's threshold (or always, with force), and persists it. A failed
// summary is logged and leaves the context as it is; only a cancelled ctx
// or a failed write is an error.
func (c *conversation) compact(ctx context.Context, comp *Compactor, system string, tools []llm.Tool, force bool, notify *compactNotify) (*Compaction, error) {
	tokens := EstimateTokens(system, tools, c.msgs, c.compactedAt)
	cut := comp.Plan(c.msgs, tokens, force)
	if cut == 0 {
		return nil, nil
	}
	c.log.Info("compacting session", "file", c.path, "tokens", tokens, "limit", comp.Limit(),
		"messages", len(c.msgs), "summarised", cut)
	notify.started()
	summary, usage, err := comp.Summarize(ctx, c.msgs[:cut])
	if err != nil {
		if ctx.Err() != nil {
			notify.ended(CompactionOutcome{ErrorMessage: "the prompt was aborted"})
			return nil, ctx.Err()
		}
		c.log.Warn("compaction failed; going on without it", "file", c.path, "err", err)
		notify.ended(CompactionOutcome{ErrorMessage: err.Error()})
		if force {
			return nil, err
		}
		return nil, nil
	}
	if err := c.appendCompaction(summary, cut, tokens); err != nil {
		notify.ended(CompactionOutcome{ErrorMessage: "the compaction could not be saved"})
		return nil, fmt.Errorf("persist compaction: %w", err)
	}
	notify.ended(CompactionOutcome{Success: true, TokensBefore: tokens})
	return &Compaction{Summary: summary, Cut: cut, TokensBefore: tokens, Usage: usage}, nil
}

// compactNotify tells a prompt's observers about an automatic compaction;
// a nil one tells no one.
type compactNotify struct {
	start func()
	end   func(CompactionOutcome)
}

func (n *compactNotify) started() {
	if n != nil && n.start != nil {
		n.start()
	}
}

func (n *compactNotify) ended(o CompactionOutcome) {
	if n != nil && n.end != nil {
		n.end(o)
	}
}

// session is one session key of one agent: its conversation, and the turn
// its prompts take one at a time.
type session struct {
	agent, key string
	turn       fifo

	mu     sync.Mutex
	conv   *conversation // nil until loaded
	busy   *conversation // the conversation the running prompt uses
	cancel context.CancelCauseFunc
	steer  []string // Manager.Steer's messages not yet taken, oldest first
	// steerable says the running prompt will still poll for steering
	// messages (Manager.Steer with runningOnly).
	steerable bool
}

// takeSteering takes the oldest steering message. When there is none and
// last is set, the running prompt takes no more.
func (s *session) takeSteering(last bool) (string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.steer) == 0 {
		if last {
			s.steerable = false
		}
		return "", false
	}
	text := s.steer[0]
	s.steer[0] = ""
	s.steer = s.steer[1:]
	return text, true
}

// abort cancels the running prompt, if any.
func (s *session) abort(cause error) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cancel == nil {
		return false
	}
	s.cancel(cause)
	return true
}

// fifo is a lock handed to waiters in the order they came, each waiting
// only as long as its context allows.
type fifo struct {
	mu      sync.Mutex
	held    bool
	waiters []chan struct{}
}

func (l *fifo) lock(ctx context.Context) error {
	l.mu.Lock()
	if !l.held {
		l.held = true
		l.mu.Unlock()
		return nil
	}
	ch := make(chan struct{})
	l.waiters = append(l.waiters, ch)
	l.mu.Unlock()
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		l.mu.Lock()
		if i := slices.Index(l.waiters, ch); i >= 0 {
			l.waiters = slices.Delete(l.waiters, i, i+1)
			l.mu.Unlock()
			return ctx.Err()
		}
		l.mu.Unlock()
		// The lock was handed over just now: pass it on.
		l.unlock()
		return ctx.Err()
	}
}

func (l *fifo) unlock() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.waiters) > 0 {
		ch := l.waiters[0]
		l.waiters = l.waiters[1:]
		close(ch) // held stays true: the waiter has it
		return
	}
	l.held = false
}
