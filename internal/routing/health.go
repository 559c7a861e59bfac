package routing

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/beige-dev/beige/internal/atomicfile"
	"github.com/beige-dev/beige/internal/home"
)

// HealthFile is the name of the health file in $BEIGE_HOME/data.
const HealthFile = "provider-health.json"

// DefaultFlushDelay is how long failure counts may wait before they are
// written; see HealthOptions.FlushDelay.
const DefaultFlushDelay = 5 * time.Second

// timeFormat is how times are written: RFC 3339 in UTC with milliseconds,
// as JavaScript's Date.toISOString writes them.
const timeFormat = "2006-01-02T15:04:05.000Z07:00"

// maxLastError caps the stored error text, in bytes.
const maxLastError = 500

// maxFailures caps the failure count, which only grows between successes.
const maxFailures = 1 << 30

// HealthOptions tune a Health. Nil or zero fields mean the defaults.
type HealthOptions struct {
	// Logger receives warnings (unreadable file, failed writes); nil
	// means slog.Default().
	Logger *slog.Logger
	// Now is the clock; nil means time.Now. Tests move it forward.
	Now func() time.Time
	// FlushDelay is how long a change that only touches failure counts
	// (RecordFailure, RecordSuccess) may wait before it is written, so a
	// burst of failures costs one write; 0 means DefaultFlushDelay, a
	// negative value writes at once. Rate-limit cooldowns are always
	// written at once.
	FlushDelay time.Duration
}

// Health is the provider-health store: per "<provider>/<model>" key, the
// rate-limit cooldown every session must respect, and the consecutive
// failures and last error. It is persisted to one JSON file, written
// atomically; it is safe for concurrent use.
//
// Cooldowns are written before RecordRateLimit returns; failure counts
// and their resets are batched (FlushDelay) and written by Flush or Close
// at the latest.
type Health struct {
	path  string // "" keeps the state in memory only
	log   *slog.Logger
	now   func() time.Time
	delay time.Duration

	mu      sync.Mutex
	entries map[string]*healthEntry
	dirty   bool
	timer   *time.Timer // pending batched flush
	closed  bool

	wmu sync.Mutex // serialises writes; taken before mu
}

// healthEntry is one model's state.
type healthEntry struct {
	RateLimitedAt       time.Time // zero if none
	RetryAfter          time.Time // end of the cooldown; zero if none
	ConsecutiveFailures int
	LastError           string
}

// HealthEntry is a copy of one model's state, as Health.Snapshot returns.
type HealthEntry struct {
	RateLimitedAt       time.Time // when the last rate limit was seen; zero if none
	RetryAfter          time.Time // end of the cooldown; zero if none
	ConsecutiveFailures int
	LastError           string
}

// healthFile is the JSON shape of provider-health.json.
type healthFile struct {
	Providers   map[string]healthFileEntry `json:"providers"`
	LastUpdated string                     `json:"lastUpdated"`
}

type healthFileEntry struct {
	RateLimitedAt       string `json:"rateLimitedAt,omitempty"`
	RetryAfter          string `json:"retryAfter,omitempty"`
	ConsecutiveFailures int    `json:"consecutiveFailures"`
	LastError           string `json:"lastError,omitempty"`
}

// OpenHealth loads the health file at path (usually
// filepath.Join(home.DataDir(), HealthFile)). It never fails: a missing
// file starts empty, and an unreadable or corrupt one is set aside as
// <path>.bad (or .bad.<n>; see home.SetAside), logged, and starts empty. Expired
// cooldowns are dropped. An empty path keeps everything in memory.
func OpenHealth(path string, opts *HealthOptions) *Health {
	var o HealthOptions
	if opts != nil {
		o = *opts
	}
	h := &Health{
		path: path, log: o.Logger, now: o.Now, delay: o.FlushDelay,
		entries: map[string]*healthEntry{},
	}
	if h.log == nil {
		h.log = slog.Default()
	}
	if h.now == nil {
		h.now = time.Now
	}
	if h.delay == 0 {
		h.delay = DefaultFlushDelay
	}
	if path == "" {
		return h
	}
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return h
	}
	if err == nil {
		var entries map[string]*healthEntry
		if entries, err = decodeHealth(data, h.now()); err == nil {
			h.entries = entries
			return h
		}
	}
	// Unreadable or corrupt: keep it beside the new one, never overwrite it
	// (it may hold a long cooldown that someone wants to read back).
	// What can still be read (a cooldown before the damage) is kept.
	h.entries = salvageHealth(data, h.now())
	bad, serr := home.SetAside(path)
	if serr != nil {
		h.log.Error("provider health: cannot read the file nor set it aside; health is kept in memory only and the file is left as it is",
			"path", path, "err", err, "setAsideErr", serr)
		h.path = ""
		return h
	}
	h.log.Warn("provider health: corrupt file set aside", "path", path, "keptAs", bad, "entriesKept", len(h.entries), "err", err)
	if len(h.entries) > 0 {
		h.dirty = true
		h.changedLocked()
	}
	return h
}

// salvageHealth reads the entries of a damaged health file up to the first
// one that does not parse, with decodeHealth's leniency.
func salvageHealth(data []byte, now time.Time) map[string]*healthEntry {
	out := map[string]*healthEntry{}
	dec := json.NewDecoder(bytes.NewReader(data))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return out
	}
	for dec.More() { // the top level: only "providers" holds entries
		t, err := dec.Token()
		name, ok := t.(string)
		if err != nil || !ok {
			return out
		}
		if name == "providers" {
			home.SalvageEntries(dec, func(key string, fe healthFileEntry) {
				if key != "" {
					out[key] = entryFromFile(fe, now)
				}
			})
			return out
		}
		var skip json.RawMessage
		if dec.Decode(&skip) != nil {
			return out
		}
	}
	return out
}

// decodeHealth parses a health file, dropping expired cooldowns and
// fields it cannot read (a bad timestamp loses that field, not the file).
// Only a file that is not a JSON object of the expected shape is an error.
func decodeHealth(data []byte, now time.Time) (map[string]*healthEntry, error) {
	var f healthFile
	if err := json.Unmarshal(data, &f); err != nil {
		return nil, fmt.Errorf("decode %s: %w", HealthFile, err)
	}
	entries := make(map[string]*healthEntry, len(f.Providers))
	for key, fe := range f.Providers {
		if key == "" {
			continue
		}
		entries[key] = entryFromFile(fe, now)
	}
	return entries, nil
}

func entryFromFile(fe healthFileEntry, now time.Time) *healthEntry {
	e := &healthEntry{
		ConsecutiveFailures: min(max(fe.ConsecutiveFailures, 0), maxFailures),
		LastError:           truncate(fe.LastError, maxLastError),
	}
	e.RateLimitedAt, _ = parseTime(fe.RateLimitedAt)
	e.RetryAfter, _ = parseTime(fe.RetryAfter)
	e.expire(now)
	return e
}

func parseTime(s string) (time.Time, bool) {
	if s == "" {
		return time.Time{}, false
	}
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return time.Time{}, false
	}
	// Kept as written back: UTC, milliseconds, a four-digit year.
	t = t.UTC().Truncate(time.Millisecond)
	if t.Year() < 1 || t.Year() > 9999 {
		return time.Time{}, false
	}
	return t, true
}

func formatTime(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(timeFormat)
}

// expire forgets a cooldown that has ended.
func (e *healthEntry) expire(now time.Time) {
	if !e.RetryAfter.After(now) {
		e.RetryAfter = time.Time{}
		e.RateLimitedAt = time.Time{}
	}
}

// encodeHealth writes the entries as the health file, without expired
// cooldowns; keys are sorted (encoding/json sorts map keys).
func encodeHealth(entries map[string]*healthEntry, now time.Time) ([]byte, error) {
	f := healthFile{Providers: make(map[string]healthFileEntry, len(entries)), LastUpdated: formatTime(now)}
	for key, e := range entries {
		c := *e
		c.expire(now)
		f.Providers[key] = healthFileEntry{
			RateLimitedAt:       formatTime(c.RateLimitedAt),
			RetryAfter:          formatTime(c.RetryAfter),
			ConsecutiveFailures: c.ConsecutiveFailures,
			LastError:           c.LastError,
		}
	}
	b, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// Now returns the store's clock reading.
func (h *Health) Now() time.Time { return h.now() }

// CooldownUntil returns when key's rate-limit cooldown ends, if one is
// active at now.
func (h *Health) CooldownUntil(key string, now time.Time) (time.Time, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	e := h.entries[key]
	if e == nil || !e.RetryAfter.After(now) {
		return time.Time{}, false
	}
	return e.RetryAfter, true
}

// RecordRateLimit starts (or lengthens) key's global cooldown until the
// given time, counts a failure and writes the file before returning. A
// shorter cooldown never shortens an active one.
func (h *Health) RecordRateLimit(key string, until time.Time, err error) {
	h.mu.Lock()
	now := h.now()
	e := h.entryLocked(key)
	e.expire(now)
	e.RateLimitedAt = now
	if until.After(e.RetryAfter) {
		e.RetryAfter = until
	}
	e.fail(err)
	h.dirty = true
	h.mu.Unlock()
	h.Flush()
}

// RecordFailure counts a failure of key (not a rate limit). The write is
// batched.
func (h *Health) RecordFailure(key string, err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.entryLocked(key).fail(err)
	h.changedLocked()
}

// RecordSuccess resets key's consecutive failures. An active cooldown is
// kept: a request that was already in flight when the provider started
// refusing says nothing about the limit. The write, if anything changed,
// is batched.
func (h *Health) RecordSuccess(key string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	e := h.entries[key]
	if e == nil || e.ConsecutiveFailures == 0 {
		return
	}
	e.ConsecutiveFailures = 0
	h.changedLocked()
}

// Snapshot returns a copy of every entry, without expired cooldowns.
func (h *Health) Snapshot() map[string]HealthEntry {
	h.mu.Lock()
	defer h.mu.Unlock()
	now := h.now()
	out := make(map[string]HealthEntry, len(h.entries))
	for k, e := range h.entries {
		c := *e
		c.expire(now)
		out[k] = HealthEntry(c)
	}
	return out
}

// Entry returns a copy of key's state, without an expired cooldown; false
// when nothing was recorded for key.
func (h *Health) Entry(key string) (HealthEntry, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	e := h.entries[key]
	if e == nil {
		return HealthEntry{}, false
	}
	c := *e
	c.expire(h.now())
	return HealthEntry(c), true
}

// Clear forgets key's cooldown, failures and last error (someone wants to
// retry the model now), and writes the file before returning, as a
// cooldown is written: a cleared cooldown must not come back on restart.
func (h *Health) Clear(key string) {
	h.mu.Lock()
	if _, ok := h.entries[key]; !ok {
		h.mu.Unlock()
		return
	}
	delete(h.entries, key)
	h.dirty = true
	h.mu.Unlock()
	h.Flush()
}

// Keys returns the keys with an entry, sorted.
func (h *Health) Keys() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Sorted(maps.Keys(h.entries))
}

func (h *Health) entryLocked(key string) *healthEntry {
	e := h.entries[key]
	if e == nil {
		e = &healthEntry{}
		h.entries[key] = e
	}
	return e
}

// fail counts a failure and keeps its message.
func (e *healthEntry) fail(err error) {
	e.ConsecutiveFailures = min(e.ConsecutiveFailures+1, maxFailures)
	if err != nil {
		e.LastError = truncate(err.Error(), maxLastError)
	}
}

// changedLocked marks the state dirty and schedules a batched write.
func (h *Health) changedLocked() {
	h.dirty = true
	if h.path == "" || h.closed {
		return
	}
	if h.delay < 0 {
		go h.Flush()
		return
	}
	if h.timer == nil {
		h.timer = time.AfterFunc(h.delay, h.Flush)
	}
}

// Flush writes the file now if anything changed since the last write. A
// failed write is logged and retried at the next change.
func (h *Health) Flush() {
	h.wmu.Lock()
	defer h.wmu.Unlock()
	h.mu.Lock()
	if h.timer != nil {
		h.timer.Stop()
		h.timer = nil
	}
	if !h.dirty || h.path == "" {
		h.mu.Unlock()
		return
	}
	data, err := encodeHealth(h.entries, h.now())
	h.dirty = false
	h.mu.Unlock()
	if err == nil {
		if err = os.MkdirAll(filepath.Dir(h.path), 0o700); err == nil {
			err = atomicfile.Write(h.path, data, 0o600)
			if home.ReleaseOnFull(err) {
				err = atomicfile.Write(h.path, data, 0o600)
			}
		}
	}
	if err != nil {
		h.log.Warn("provider health: cannot write file", "path", h.path, "err", err)
		h.mu.Lock()
		h.dirty = true
		h.mu.Unlock()
	}
}

// Close writes pending changes and stops batching; later changes are
// kept in memory, and cooldowns are still written at once.
func (h *Health) Close() error {
	h.mu.Lock()
	h.closed = true
	h.mu.Unlock()
	h.Flush()
	return nil
}

// truncate cuts s to at most n bytes (n ≥ 3), on a UTF-8 boundary, ending
// in "…" when cut.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	n -= len("…")
	for n > 0 && s[n]&0xC0 == 0x80 {
		n--
	}
	return s[:n] + "…"
}
