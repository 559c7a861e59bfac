package agent

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"time"

	"github.com/beige-dev/beige/internal/atomicfile"
	"github.com/beige-dev/beige/internal/home"
	"github.com/beige-dev/beige/internal/llm"
)

// The session file format is pi's (@mariozechner/pi-coding-agent), version
// 3: JSON lines, a header first,
//
//	{"type":"session","version":3,"id":"<uuid>","timestamp":"<RFC 3339>","cwd":"/workspace"}
//
// Beige adds two fields to the header, "sessionKey" and "agentName", so
// that session-map.json can be rebuilt from the files when it is lost or
// corrupt (pi ignores fields it does not know).
//
// then entries, each with an 8-hex id and its parent's id (null for the
// first), forming a chain:
//
//	{"type":"message","id","parentId","timestamp","message":<llm.Message>}
//	{"type":"compaction","id","parentId","timestamp","summary","firstKeptEntryId","tokensBefore"}
//	{"type":"model_change","id","parentId","timestamp","provider","modelId"}
//
// Other entry types pi writes (thinking_level_change, labels, …) are kept
// in the chain and otherwise ignored.

// SessionVersion is the session file format version written and read.
const SessionVersion = 3

// Entry types.
const (
	entrySession     = "session"
	entryMessage     = "message"
	entryCompaction  = "compaction"
	entryModelChange = "model_change"
)

// sessionCWD is the working folder the header names: the agent's workspace
// as the sandbox sees it.
const sessionCWD = "/workspace"

// timeLayout is JavaScript's Date.toISOString(): UTC, milliseconds.
const timeLayout = "2006-01-02T15:04:05.000Z"

func isoTime(t time.Time) string { return t.UTC().Format(timeLayout) }

// millis reads an RFC 3339 time as Unix milliseconds; 0 if it is not one.
func millis(s string) int64 {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return 0
	}
	return t.UnixMilli()
}

func randomHex(nBytes int) string {
	b := make([]byte, nBytes)
	_, _ = rand.Read(b) // never fails (crypto/rand crashes the program instead)
	return hex.EncodeToString(b)
}

// newUUID returns a random (version 4) UUID.
func newUUID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b)
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32]
}

// Lines as written. ParentID is a pointer so that the first entry's is null.
type (
	headerLine struct {
		Type      string `json:"type"`
		Version   int    `json:"version"`
		ID        string `json:"id"`
		Timestamp string `json:"timestamp"`
		CWD       string `json:"cwd"`
		// SessionKey and AgentName are Beige's: whose session this is.
		SessionKey string `json:"sessionKey,omitempty"`
		AgentName  string `json:"agentName,omitempty"`
	}
	messageLine struct {
		Type      string      `json:"type"`
		ID        string      `json:"id"`
		ParentID  *string     `json:"parentId"`
		Timestamp string      `json:"timestamp"`
		Message   llm.Message `json:"message"`
	}
	compactionLine struct {
		Type             string  `json:"type"`
		ID               string  `json:"id"`
		ParentID         *string `json:"parentId"`
		Timestamp        string  `json:"timestamp"`
		Summary          string  `json:"summary"`
		FirstKeptEntryID string  `json:"firstKeptEntryId"`
		TokensBefore     int     `json:"tokensBefore"`
	}
	modelChangeLine struct {
		Type      string  `json:"type"`
		ID        string  `json:"id"`
		ParentID  *string `json:"parentId"`
		Timestamp string  `json:"timestamp"`
		Provider  string  `json:"provider"`
		ModelID   string  `json:"modelId"`
	}
)

// entry is one parsed line of a session file: the header or an entry.
type entry struct {
	Type      string
	ID        string
	ParentID  string // "" for null
	Timestamp string

	Version    int    // header
	CWD        string // header
	SessionKey string // header
	AgentName  string // header

	Message *llm.Message // message

	Summary          string // compaction
	FirstKeptEntryID string // compaction
	TokensBefore     int    // compaction

	Provider string // model_change
	ModelID  string // model_change
}

// parseEntry reads one line of a session file.
func parseEntry(line []byte) (entry, error) {
	var raw struct {
		Type             string          `json:"type"`
		ID               string          `json:"id"`
		ParentID         *string         `json:"parentId"`
		Timestamp        string          `json:"timestamp"`
		Version          int             `json:"version"`
		CWD              string          `json:"cwd"`
		SessionKey       string          `json:"sessionKey"`
		AgentName        string          `json:"agentName"`
		Message          json.RawMessage `json:"message"`
		Summary          string          `json:"summary"`
		FirstKeptEntryID string          `json:"firstKeptEntryId"`
		TokensBefore     int             `json:"tokensBefore"`
		Provider         string          `json:"provider"`
		ModelID          string          `json:"modelId"`
	}
	line = bytes.TrimSpace(line)
	if len(line) == 0 || line[0] != '{' {
		return entry{}, errors.New("not a JSON object")
	}
	if err := json.Unmarshal(line, &raw); err != nil {
		return entry{}, err
	}
	e := entry{
		Type: raw.Type, ID: raw.ID, Timestamp: raw.Timestamp,
		Version: raw.Version, CWD: raw.CWD, SessionKey: raw.SessionKey, AgentName: raw.AgentName,
		Summary: raw.Summary, FirstKeptEntryID: raw.FirstKeptEntryID, TokensBefore: raw.TokensBefore,
		Provider: raw.Provider, ModelID: raw.ModelID,
	}
	if raw.ParentID != nil {
		e.ParentID = *raw.ParentID
	}
	switch e.Type {
	case "":
		return entry{}, errors.New("entry without a type")
	case entrySession:
		return e, nil
	}
	if e.ID == "" {
		return entry{}, fmt.Errorf("%s entry without an id", e.Type)
	}
	if e.Type == entryMessage {
		if len(raw.Message) == 0 || string(raw.Message) == "null" {
			return entry{}, errors.New("message entry without a message")
		}
		m := new(llm.Message)
		if err := json.Unmarshal(raw.Message, m); err != nil {
			return entry{}, err
		}
		e.Message = m
	}
	return e, nil
}

// sessionFile is what readSessionFile found in a file.
type sessionFile struct {
	header  entry
	entries []entry // in file order
	// truncateAt, when ≥ 0, is where a torn last line starts: the next
	// writer cuts the file there.
	truncateAt int64
	// needNewline says the last line is whole but lacks its newline.
	needNewline bool
	// problems are the lines skipped, for the log.
	problems []string
}

var errNoHeader = errors.New("not a session file (no session header)")

// readSessionFile parses a session file. Lines that do not parse are
// skipped and reported in problems — a torn last line (a write cut short
// by a crash) is expected — so only a file that cannot be read, or that
// has no header, is an error.
func readSessionFile(path string) (*sessionFile, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return parseSessionFile(data)
}

// parseSessionFile parses the content of a session file; see readSessionFile.
func parseSessionFile(data []byte) (*sessionFile, error) {
	sf := &sessionFile{truncateAt: -1}
	haveHeader := false
	for off := 0; off < len(data); {
		end := bytes.IndexByte(data[off:], '\n')
		last := end < 0
		if last {
			end = len(data)
		} else {
			end += off
		}
		line := data[off:end]
		start := off
		off = end + 1
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		e, err := parseEntry(line)
		if err != nil {
			if last {
				sf.truncateAt = int64(start)
				sf.problems = append(sf.problems, fmt.Sprintf("torn last line at byte %d (%d bytes) dropped: %v", start, len(line), err))
			} else {
				sf.problems = append(sf.problems, fmt.Sprintf("line at byte %d skipped: %v", start, err))
			}
			continue
		}
		if last {
			sf.needNewline = true
		}
		if e.Type == entrySession {
			if !haveHeader {
				sf.header, haveHeader = e, true
			}
			continue
		}
		sf.entries = append(sf.entries, e)
	}
	if !haveHeader {
		return sf, errNoHeader
	}
	if sf.header.Version != 0 && sf.header.Version < SessionVersion {
		return sf, fmt.Errorf("session file version %d is not supported (want %d)", sf.header.Version, SessionVersion)
	}
	return sf, nil
}

// replayed is the conversation a session file holds.
type replayed struct {
	msgs        []llm.Message
	ids         []string // entry id of each message (the compaction's for its summary)
	lastID      string   // the leaf: parent of the next entry
	known       map[string]bool
	compactedAt int64 // Unix ms of the last compaction, 0 if none
	provider    string
	model       string
	problems    []string
}

// replay rebuilds the conversation: the path from the last entry back to
// the first through parentId links; from the last compaction on that path,
// its summary followed by the messages from its firstKeptEntryId on.
func replay(entries []entry) *replayed {
	r := &replayed{known: make(map[string]bool, len(entries))}
	byID := make(map[string]int, len(entries))
	for i, e := range entries {
		if e.ID != "" {
			byID[e.ID] = i
			r.known[e.ID] = true
		}
	}
	leaf := -1
	for i := len(entries) - 1; i >= 0; i-- {
		if entries[i].ID != "" {
			leaf = i
			break
		}
	}
	if leaf < 0 {
		return r
	}
	r.lastID = entries[leaf].ID
	var path []entry
	seen := map[string]bool{}
	for i := leaf; ; {
		e := entries[i]
		if seen[e.ID] {
			r.problems = append(r.problems, "parentId cycle at entry "+e.ID)
			break
		}
		seen[e.ID] = true
		path = append(path, e)
		if e.ParentID == "" {
			break
		}
		j, ok := byID[e.ParentID]
		if !ok {
			r.problems = append(r.problems, fmt.Sprintf("entry %s: parent %s not found; older entries left out", e.ID, e.ParentID))
			break
		}
		i = j
	}
	for i, j := 0, len(path)-1; i < j; i, j = i+1, j-1 {
		path[i], path[j] = path[j], path[i]
	}

	for _, e := range path {
		switch {
		case e.Type == entryModelChange:
			r.provider, r.model = e.Provider, e.ModelID
		case e.Message != nil && e.Message.Assistant != nil:
			r.provider, r.model = e.Message.Assistant.Provider, e.Message.Assistant.Model
		}
	}
	comp := -1
	for i := len(path) - 1; i >= 0; i-- {
		if path[i].Type == entryCompaction {
			comp = i
			break
		}
	}
	add := func(es []entry) {
		for _, e := range es {
			if e.Type == entryMessage && e.Message != nil {
				r.msgs = append(r.msgs, *e.Message)
				r.ids = append(r.ids, e.ID)
			}
		}
	}
	if comp < 0 {
		add(path)
		return r
	}
	c := path[comp]
	r.compactedAt = millis(c.Timestamp)
	r.msgs = append(r.msgs, SummaryMessage(c.Summary, r.compactedAt))
	r.ids = append(r.ids, c.ID)
	for k := range comp {
		if path[k].ID == c.FirstKeptEntryID {
			add(path[k:comp])
			break
		}
	}
	add(path[comp+1:])
	return r
}

// MapEntry is one session of session-map.json.
type mapEntry struct {
	AgentName   string          `json:"agentName"`
	SessionFile string          `json:"sessionFile"`
	CreatedAt   string          `json:"createdAt"`
	Metadata    json.RawMessage `json:"metadata,omitempty"`
}

// loadSessionMap reads session-map.json; a missing file is an empty map.
func loadSessionMap(path string) (map[string]mapEntry, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return map[string]mapEntry{}, nil
	}
	if err != nil {
		return nil, err
	}
	m := map[string]mapEntry{}
	if len(bytes.TrimSpace(data)) == 0 {
		return m, nil
	}
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if m == nil {
		m = map[string]mapEntry{}
	}
	return m, nil
}

// saveSessionMap writes session-map.json atomically.
func saveSessionMap(path string, m map[string]mapEntry) error {
	data, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	data = append(data, '\n')
	err = atomicfile.Write(path, data, 0o600)
	if home.ReleaseOnFull(err) {
		err = atomicfile.Write(path, data, 0o600)
	}
	return err
}
