package agent

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"unicode"

	"github.com/beige-dev/beige/internal/home"
)

// session-map.json is rebuildable: every session file written by Beige
// names its session key and agent in its header. A missing map is rebuilt
// from the headers; a corrupt one is set aside (<name>.bad, see
// home.SetAside), what can be read of it is kept, the headers fill in the
// rest, and the result is written back. Old files without a key in their
// header stay listed only where the map still has them.

// maxHeaderLine bounds how much of a session file is read for its header.
const maxHeaderLine = 64 << 10

// openSessionMap reads dir's session map, rebuilding it when it is missing
// or corrupt. Every repair is logged. Only a corrupt map that cannot be
// set aside is an error (it would be overwritten).
func openSessionMap(dir string, log *slog.Logger) (map[string]mapEntry, error) {
	mapPath := filepath.Join(dir, SessionMapFile)
	data, rerr := os.ReadFile(mapPath)
	if errors.Is(rerr, fs.ErrNotExist) || (rerr == nil && len(bytes.TrimSpace(data)) == 0) {
		// Missing or emptied: rebuild from the headers (nothing to do on a
		// first run).
		rebuilt, n := rebuildSessionMap(dir, log)
		if len(rebuilt) == 0 {
			return rebuilt, nil
		}
		if err := saveSessionMap(mapPath, rebuilt); err != nil {
			log.Warn("session map rebuilt but not saved; it is rebuilt again at the next start", "file", mapPath, "err", err)
		}
		log.Warn("session map missing or empty; rebuilt from session file headers", "file", mapPath, "sessions", len(rebuilt), "filesRead", n)
		return rebuilt, nil
	}
	index, err := loadSessionMap(mapPath)
	if err == nil {
		return index, nil
	}
	salvaged := salvageSessionMap(data)
	bad, serr := home.SetAside(mapPath)
	if serr != nil {
		return nil, errors.Join(err, serr)
	}
	rebuilt, n := rebuildSessionMap(dir, log)
	fromOld := 0
	for key, e := range salvaged {
		r, ok := rebuilt[key]
		switch {
		case !ok:
			rebuilt[key] = e
			fromOld++
		case r.SessionFile == e.SessionFile:
			r.Metadata = e.Metadata
			rebuilt[key] = r
		case e.CreatedAt > r.CreatedAt:
			rebuilt[key] = e
		}
	}
	if err := saveSessionMap(mapPath, rebuilt); err != nil {
		log.Warn("session map rebuilt but not saved", "file", mapPath, "err", err)
	}
	log.Warn("session map corrupt; set aside and rebuilt", "file", mapPath, "keptAs", bad, "err", err,
		"sessions", len(rebuilt), "fromHeaders", len(rebuilt)-fromOld, "fromOldMap", fromOld, "filesRead", n)
	return rebuilt, nil
}

// salvageSessionMap reads the entries of a damaged session map up to the
// first one that does not parse.
func salvageSessionMap(data []byte) map[string]mapEntry {
	out := map[string]mapEntry{}
	home.SalvageEntries(json.NewDecoder(bytes.NewReader(data)), func(key string, e mapEntry) {
		if key != "" && e.AgentName != "" && e.SessionFile != "" {
			out[key] = e
		}
	})
	return out
}

// rebuildSessionMap lists the session files under dir/<agent>/ whose header
// names a session key, and maps each key to its newest file. It returns
// the map and how many files it read. Symlinks are not followed.
func rebuildSessionMap(dir string, log *slog.Logger) (map[string]mapEntry, int) {
	out := map[string]mapEntry{}
	agents, err := os.ReadDir(dir)
	if err != nil {
		log.Warn("rebuild session map: cannot list sessions folder", "dir", dir, "err", err)
		return out, 0
	}
	n := 0
	for _, a := range agents {
		if !a.IsDir() { // DirEntry types come from lstat: a symlink is not a dir
			continue
		}
		agentDir := filepath.Join(dir, a.Name())
		files, err := os.ReadDir(agentDir)
		if err != nil {
			log.Warn("rebuild session map: cannot list agent folder", "dir", agentDir, "err", err)
			continue
		}
		for _, f := range files {
			if !f.Type().IsRegular() || !strings.HasSuffix(f.Name(), ".jsonl") {
				continue
			}
			path := filepath.Join(agentDir, f.Name())
			h, err := readSessionHeader(path)
			n++
			if err != nil || h.SessionKey == "" || checkKey(h.SessionKey) != nil {
				continue
			}
			if h.AgentName != a.Name() {
				log.Warn("rebuild session map: header names another agent than its folder; file skipped", "file", path, "agentName", h.AgentName)
				continue
			}
			e := mapEntry{AgentName: a.Name(), SessionFile: path, CreatedAt: h.Timestamp}
			if old, ok := out[h.SessionKey]; ok && !newerEntry(e, old) {
				continue
			}
			out[h.SessionKey] = e
		}
	}
	return out, n
}

// newerEntry orders session files by creation time, then name (names start
// with the time, to the second).
func newerEntry(a, b mapEntry) bool {
	ta, tb := millis(a.CreatedAt), millis(b.CreatedAt)
	if ta != tb {
		return ta > tb
	}
	return filepath.Base(a.SessionFile) > filepath.Base(b.SessionFile)
}

// readSessionHeader reads the header line of a session file.
func readSessionHeader(path string) (entry, error) {
	f, err := openRegular(path)
	if err != nil {
		return entry{}, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxHeaderLine))
	if err != nil {
		return entry{}, err
	}
	line, _, _ := bytes.Cut(data, []byte{'\n'})
	e, err := parseEntry(line)
	if err != nil {
		return entry{}, err
	}
	if e.Type != entrySession {
		return entry{}, errNoHeader
	}
	return e, nil
}

// setAsideSessionFile keeps a session file that cannot be resumed beside
// the new one, and logs it.
func setAsideSessionFile(path string, cause error, log *slog.Logger) {
	if _, err := os.Lstat(path); errors.Is(err, fs.ErrNotExist) {
		log.Warn("session file missing; starting a new session", "file", path)
		return
	}
	bad, err := home.SetAside(path)
	if err != nil {
		log.Error("session file cannot be resumed nor set aside; starting a new session, the file is left as it is", "file", path, "err", cause, "setAsideErr", err)
		return
	}
	log.Warn("session file cannot be resumed; set aside, starting a new session", "file", path, "keptAs", bad, "err", cause)
}

// saveIndexLocked writes m.index to session-map.json, first taking in what
// another writer put there since this process last read or wrote the file
// (see mergeDiskLocked), so that its entries are not lost. m.mu is held.
func (m *Manager) saveIndexLocked() error {
	m.mergeDiskLocked()
	if err := saveSessionMap(filepath.Join(m.dir, SessionMapFile), m.index); err != nil {
		return err
	}
	m.saved = maps.Clone(m.index)
	return nil
}

// entryLocked returns the session map's entry of key, reading the file
// again when this process does not know the key: another writer of the
// map (the original Beige's terminal client) may have made the session
// since. m.mu is held.
func (m *Manager) entryLocked(key string) (mapEntry, bool) {
	e, ok := m.index[key]
	if !ok {
		m.mergeDiskLocked()
		e, ok = m.index[key]
	}
	return e, ok
}

// mergeDiskLocked takes in the entries another writer of session-map.json
// (the original Beige's terminal client keeps the same file and writes it
// whole) made or changed since this process last read or wrote it: a key
// this process does not know, and a key it has not changed itself since.
// Where both changed a key, this process's entry wins. A file that cannot
// be read now is left to the repair at the next start. m.mu is held.
func (m *Manager) mergeDiskLocked() {
	disk, err := loadSessionMap(filepath.Join(m.dir, SessionMapFile))
	if err != nil {
		return
	}
	for key, d := range disk {
		if checkKey(key) != nil || d.AgentName == "" || d.SessionFile == "" {
			continue
		}
		ours, have := m.index[key]
		prev, known := m.saved[key]
		switch {
		case !have && !known:
		case have && known && sameEntry(ours, prev) && !sameEntry(d, prev):
		default:
			continue
		}
		m.index[key] = d
		if m.saved == nil {
			m.saved = map[string]mapEntry{}
		}
		m.saved[key] = d
	}
}

func sameEntry(a, b mapEntry) bool {
	return a.AgentName == b.AgentName && a.SessionFile == b.SessionFile && a.CreatedAt == b.CreatedAt &&
		bytes.Equal(a.Metadata, b.Metadata)
}

// maxModelName bounds each half of an imported activeModel.
const maxModelName = 256

// TakeActiveModels hands over the models the original Beige pinned
// sessions to: it kept a session's explicit model choice in session-map.json
// as metadata.activeModel {provider, modelId}; beige keeps it in
// session-settings.json. take is called with each session's key, agent and
// "provider/modelId"; once it returns nil, activeModel is removed from that
// session's metadata (the rest of the metadata stays), so that the settings
// are the one place the choice lives and an unpin is not undone by the next
// start. The map is saved once, when something was taken.
func (m *Manager) TakeActiveModels(take func(sessionKey, agent, model string) error) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	changed := false
	var errs []error
	for _, key := range sortedMapKeys(m.index) {
		e := m.index[key]
		model, rest, ok := activeModelOf(e.Metadata)
		if !ok {
			continue
		}
		if err := take(key, e.AgentName, model); err != nil {
			errs = append(errs, fmt.Errorf("session %q: %w", key, err))
			continue
		}
		e.Metadata = rest
		m.index[key] = e
		changed = true
		m.log.Info("pinned model taken over from the original session map", "session", key, "agent", e.AgentName, "model", model)
	}
	if changed {
		if err := m.saveIndexLocked(); err != nil {
			errs = append(errs, fmt.Errorf("save session map: %w", err))
		}
	}
	return errors.Join(errs...)
}

// activeModelOf reads metadata.activeModel: the model as "provider/modelId"
// and the metadata without it (nil when nothing else is left). A value
// that is not two short, printable, slash-free names is not a model.
func activeModelOf(meta json.RawMessage) (model string, rest json.RawMessage, ok bool) {
	if len(meta) == 0 {
		return "", nil, false
	}
	var obj map[string]json.RawMessage
	if json.Unmarshal(meta, &obj) != nil {
		return "", nil, false
	}
	raw, found := obj["activeModel"]
	if !found {
		return "", nil, false
	}
	var am struct {
		Provider string `json:"provider"`
		ModelID  string `json:"modelId"`
	}
	if json.Unmarshal(raw, &am) != nil || !modelName(am.Provider) || !modelName(am.ModelID) || strings.Contains(am.Provider, "/") {
		return "", nil, false
	}
	delete(obj, "activeModel")
	if len(obj) > 0 {
		rest, _ = json.Marshal(obj)
	}
	return am.Provider + "/" + am.ModelID, rest, true
}

func modelName(s string) bool {
	if s == "" || len(s) > maxModelName {
		return false
	}
	for _, r := range s {
		if r < 0x20 || r == 0x7f || unicode.IsSpace(r) {
			return false
		}
	}
	return true
}

func sortedMapKeys(m map[string]mapEntry) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
