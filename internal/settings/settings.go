// Package settings owns the per-session settings overrides persisted in
// $BEIGE_HOME/sessions/session-settings.json, and their resolution in three
// layers: the system defaults, overridden by a channel's defaults,
// overridden by the session's own choices (e.g. "/verbose on").
package settings

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
	"sync"

	"github.com/beige-dev/beige/internal/atomicfile"
	"github.com/beige-dev/beige/internal/home"
)

// Store holds every session's overrides. It is safe for concurrent use.
type Store struct {
	path string
	log  *slog.Logger

	mu   sync.Mutex
	data map[string]map[string]any // session key -> name -> value
}

// Open loads the overrides at path. A missing file is an empty store; an
// unreadable or corrupt one is logged and set aside as path.bad (or
// path.bad.<n>: an earlier copy is never overwritten), and the store starts
// with whatever sessions of it could still be read (settings are
// conveniences, never a reason not to start). When even setting it aside
// fails, the store keeps its changes in memory and leaves the file alone.
func Open(path string, log *slog.Logger) *Store {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Store{path: path, log: log, data: map[string]map[string]any{}}
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return s
	}
	if err == nil {
		if err = json.Unmarshal(data, &s.data); err == nil {
			if s.data == nil {
				s.data = map[string]map[string]any{}
			}
			return s
		}
	}
	s.data = salvage(data)
	bad, serr := home.SetAside(path)
	if serr != nil {
		log.Error("session settings unreadable and cannot be set aside; changes are kept in memory only", "file", path, "err", err, "setAsideErr", serr)
		s.path = ""
		return s
	}
	log.Warn("session settings corrupt; set aside", "file", path, "keptAs", bad, "sessionsKept", len(s.data), "err", err)
	if len(s.data) > 0 {
		if err := s.save(); err != nil {
			log.Warn("session settings: cannot write what was kept", "file", path, "err", err)
		}
	}
	return s
}

// salvage reads the sessions of a damaged settings file up to the first
// one that does not parse.
func salvage(data []byte) map[string]map[string]any {
	out := map[string]map[string]any{}
	home.SalvageEntries(json.NewDecoder(bytes.NewReader(data)), func(key string, v map[string]any) {
		if key != "" && len(v) > 0 {
			out[key] = v
		}
	})
	return out
}

// Overrides returns a copy of a session's own settings.
func (s *Store) Overrides(sessionKey string) map[string]any {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.data[sessionKey])
}

// Get returns one of a session's own settings.
func (s *Store) Get(sessionKey, name string) (any, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.data[sessionKey][name]
	return v, ok
}

// Resolve returns the session's settings: system, overridden by channel,
// overridden by the session's own.
func (s *Store) Resolve(sessionKey string, system, channel map[string]any) map[string]any {
	out := maps.Clone(system)
	if out == nil {
		out = map[string]any{}
	}
	maps.Copy(out, channel)
	maps.Copy(out, s.Overrides(sessionKey))
	return out
}

// Set overrides one setting of a session and saves the file; a nil value
// removes the override.
func (s *Store) Set(sessionKey, name string, value any) error {
	if sessionKey == "" || name == "" {
		return errors.New("settings: empty session key or name")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if value == nil {
		delete(s.data[sessionKey], name)
		if len(s.data[sessionKey]) == 0 {
			delete(s.data, sessionKey)
		}
	} else {
		if s.data[sessionKey] == nil {
			s.data[sessionKey] = map[string]any{}
		}
		s.data[sessionKey][name] = value
	}
	return s.save()
}

// save writes the file atomically (a temp file, then rename). s.mu is held.
func (s *Store) save() error {
	if s.path == "" {
		return errors.New("settings: not saved (the settings file could not be set aside; see the log)")
	}
	data, err := json.MarshalIndent(s.data, "", "  ")
	if err != nil {
		return fmt.Errorf("settings: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(s.path), 0o700); err != nil {
		return fmt.Errorf("settings: %w", err)
	}
	data = append(data, '\n')
	err = atomicfile.Write(s.path, data, 0o600)
	if home.ReleaseOnFull(err) { // the disk is full: the gateway's reserve is freed for this
		err = atomicfile.Write(s.path, data, 0o600)
	}
	if err != nil {
		return fmt.Errorf("settings: save %s: %w", s.path, err)
	}
	return nil
}
