package agent

import (
	"encoding/json"
	"errors"
	"fmt"
)

// Limits on what a plugin may keep in a session's metadata (it is not
// trusted, and the map is read whole at every start).
const (
	MaxMetadataName  = 256
	MaxMetadataValue = 16 << 10
	MaxMetadataTotal = 64 << 10
)

// ErrNoSessionEntry is returned for metadata of a session that has no
// entry in the session map yet (before its first message).
var ErrNoSessionEntry = errors.New("the session has no entry yet")

// SessionMetadata returns the session's metadata (what plugins set on it),
// as kept in its session-map.json entry; ok is false when the session has
// no entry.
func (m *Manager) SessionMetadata(sessionKey string) (meta map[string]json.RawMessage, ok bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	e, ok := m.entryLocked(sessionKey)
	if !ok {
		return nil, false
	}
	meta = map[string]json.RawMessage{}
	if len(e.Metadata) > 0 {
		if err := json.Unmarshal(e.Metadata, &meta); err != nil {
			meta = map[string]json.RawMessage{} // not an object: nothing a plugin set
		}
	}
	return meta, true
}

// SetSessionMetadata sets (or, for a nil value, removes) one key of the
// session's metadata in its session-map.json entry, so it survives
// restarts. The session must have an entry (ErrNoSessionEntry); names,
// values and the whole are bounded.
func (m *Manager) SetSessionMetadata(sessionKey, name string, value json.RawMessage) error {
	if name == "" || len(name) > MaxMetadataName {
		return fmt.Errorf("metadata name must be 1 to %d bytes", MaxMetadataName)
	}
	if len(value) > MaxMetadataValue {
		return fmt.Errorf("metadata value of %q is over %d bytes", name, MaxMetadataValue)
	}
	if value != nil && !json.Valid(value) {
		return fmt.Errorf("metadata value of %q is not JSON", name)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	e, ok := m.entryLocked(sessionKey)
	if !ok {
		return ErrNoSessionEntry
	}
	meta := map[string]json.RawMessage{}
	if len(e.Metadata) > 0 {
		_ = json.Unmarshal(e.Metadata, &meta) // not an object: replaced
	}
	if value == nil {
		delete(meta, name)
	} else {
		meta[name] = value
	}
	var raw json.RawMessage
	if len(meta) > 0 {
		b, err := json.Marshal(meta)
		if err != nil {
			return fmt.Errorf("encode metadata: %w", err)
		}
		if len(b) > MaxMetadataTotal {
			return fmt.Errorf("the session's metadata would be over %d bytes", MaxMetadataTotal)
		}
		raw = b
	}
	e.Metadata = raw
	m.index[sessionKey] = e
	if err := m.saveIndexLocked(); err != nil {
		return fmt.Errorf("save session map: %w", err)
	}
	return nil
}

// replyToKey is the metadata key of a session's reply target
// (PromptOptions.ReplyTo), as the original Beige names it.
const replyToKey = "_replyTo"
