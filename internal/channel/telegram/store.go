package telegram

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/beige-dev/beige/internal/atomicfile"
)

// The durable queue: every update the channel accepted (a message for the
// agent, a command but /stop) is written to $BEIGE_HOME/data/<name>/
// queue.json before it is worked on, and removed only once it is done: its
// answer was delivered, or the user was told that it could not be. Updates
// left when the gateway stops (or dies) are answered, before any new one,
// by the next start.
const (
	queueFile    = "queue.json"
	queueVersion = 1
	// maxQueued bounds the updates waiting; one more is refused (and the
	// user told so).
	maxQueued = 500
	// maxAttempts is how many starts may work on one update: one that
	// brings the gateway down each time is given up, and the user told,
	// after that many.
	maxAttempts = 3
	// maxQueueFile bounds the size of queue.json that is read.
	maxQueueFile = 16 << 20
	// offsetMaxAge is how long the last update id is trusted as the offset
	// to resume from: Telegram keeps updates for 24 hours, and may restart
	// its numbering after a week without any.
	offsetMaxAge = 24 * time.Hour
)

// inbound is an accepted message, as much of it as the channel needs to
// work on it again after a restart.
type inbound struct {
	UpdateID int64  `json:"updateId"`
	MsgID    int    `json:"messageId"`
	ChatID   int64  `json:"chatId"`
	ChatType string `json:"chatType,omitempty"`
	ThreadID int    `json:"threadId,omitempty"` // the forum topic (target's rule applied)
	FromID   int64  `json:"fromId"`
	FromName string `json:"fromUsername,omitempty"`
	Text     string `json:"text,omitempty"`
	Media    bool   `json:"media,omitempty"` // a photo, file, voice ... without text
	// Attempts counts the starts that worked on it before this one.
	Attempts int       `json:"attempts,omitempty"`
	Received time.Time `json:"received"`
}

// queueState is queue.json.
type queueState struct {
	Version int `json:"version"`
	// LastUpdateID is the highest update_id accepted, to confirm to
	// Telegram on the next start (getUpdates offset).
	LastUpdateID int64     `json:"lastUpdateId"`
	SavedAt      time.Time `json:"savedAt"`
	Updates      []inbound `json:"updates"`
}

// store is the durable queue. Without a data dir it only keeps the queue
// in memory.
type store struct {
	path string // "" for memory only
	log  *slog.Logger

	mu    sync.Mutex
	state queueState
}

// openStore reads the queue of dir ("" for none). A queue that cannot be
// read is set aside (renamed queue.json.bad-<time>) with an error logged,
// so that one bad file does not stop the channel.
func openStore(dir string, log *slog.Logger) (*store, error) {
	s := &store{log: log, state: queueState{Version: queueVersion}}
	if dir == "" {
		return s, nil
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("telegram: create data dir: %w", err)
	}
	s.path = filepath.Join(dir, queueFile)
	data, err := readLimited(s.path, maxQueueFile)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return s, nil
	case err != nil:
		return nil, fmt.Errorf("telegram: read the queue: %w", err)
	}
	st, err := parseQueue(data)
	if err != nil {
		bad := s.path + ".bad-" + time.Now().UTC().Format("20060102T150405")
		log.Error("telegram: the queue of waiting messages does not read; set aside, its messages are lost",
			"file", s.path, "movedTo", bad, "error", err)
		if err := os.Rename(s.path, bad); err != nil {
			return nil, fmt.Errorf("telegram: set the unreadable queue aside: %w", err)
		}
		return s, nil
	}
	s.state = *st
	return s, nil
}

// readLimited reads a regular file of at most limit bytes, without
// following a symlink.
func readLimited(path string, limit int64) ([]byte, error) {
	fi, err := os.Lstat(path)
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file", path)
	}
	if fi.Size() > limit {
		return nil, fmt.Errorf("%s is larger than %d bytes", path, limit)
	}
	return os.ReadFile(path)
}

// parseQueue decodes queue.json and checks it: entries that make no sense
// (no chat, no sender, a duplicate update id) are dropped, and at most
// maxQueued are kept.
func parseQueue(data []byte) (*queueState, error) {
	var st queueState
	if err := json.Unmarshal(data, &st); err != nil {
		return nil, err
	}
	if st.Version != queueVersion {
		return nil, fmt.Errorf("version %d, want %d", st.Version, queueVersion)
	}
	seen := map[int64]bool{}
	kept := st.Updates[:0]
	for _, in := range st.Updates {
		if in.UpdateID <= 0 || in.ChatID == 0 || in.FromID <= 0 || in.MsgID < 0 || in.ThreadID < 0 ||
			in.Attempts < 0 || seen[in.UpdateID] || (in.Text == "" && !in.Media) {
			continue
		}
		seen[in.UpdateID] = true
		kept = append(kept, in)
		if len(kept) == maxQueued {
			break
		}
	}
	st.Updates = kept
	if st.LastUpdateID < 0 {
		st.LastUpdateID = 0
	}
	return &st, nil
}

// offset is the update id to resume polling after, 0 for none.
func (s *store) offset(now time.Time) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if now.Sub(s.state.SavedAt) > offsetMaxAge || s.state.SavedAt.After(now.Add(time.Hour)) {
		return 0
	}
	return s.state.LastUpdateID
}

// restore returns the updates left by the last start, with their attempt
// counted (and saved, so that a crash while working on them counts too).
func (s *store) restore() ([]inbound, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := range s.state.Updates {
		s.state.Updates[i].Attempts++
	}
	out := append([]inbound(nil), s.state.Updates...)
	return out, s.saveLocked()
}

// errQueueFull is accept's error when maxQueued updates wait already.
var errQueueFull = errors.New("telegram: too many messages are waiting")

// accept records an update; a message (a nil in for an update that needs
// no work) is queued until done is called. It reports false for an update
// already queued (sent again by Telegram).
func (s *store) accept(updateID int64, in *inbound) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if in != nil {
		for _, q := range s.state.Updates {
			if q.UpdateID == in.UpdateID {
				return false, nil
			}
		}
		if len(s.state.Updates) >= maxQueued {
			return true, errQueueFull
		}
		s.state.Updates = append(s.state.Updates, *in)
	}
	s.state.LastUpdateID = max(s.state.LastUpdateID, updateID)
	return true, s.saveLocked()
}

// done removes an update from the queue.
func (s *store) done(updateID int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, q := range s.state.Updates {
		if q.UpdateID == updateID {
			s.state.Updates = append(s.state.Updates[:i], s.state.Updates[i+1:]...)
			if err := s.saveLocked(); err != nil {
				s.log.Error("telegram: cannot save the queue of waiting messages", "error", err)
			}
			return
		}
	}
}

func (s *store) saveLocked() error {
	if s.path == "" {
		return nil
	}
	s.state.Version = queueVersion
	s.state.SavedAt = time.Now().UTC()
	if s.state.Updates == nil {
		s.state.Updates = []inbound{}
	}
	data, err := json.MarshalIndent(s.state, "", "  ")
	if err != nil {
		return fmt.Errorf("telegram: encode the queue: %w", err)
	}
	if err := atomicfile.Write(s.path, append(data, '\n'), 0o600); err != nil {
		return fmt.Errorf("telegram: save the queue: %w", err)
	}
	return nil
}
