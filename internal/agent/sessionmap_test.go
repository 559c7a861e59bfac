package agent

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// promptKey sends msg in session key and returns the text of the request
// the model saw.
func (e *env) promptKey(key, msg string) string {
	e.t.Helper()
	if _, err := e.m.Prompt(context.Background(), testAgent, key, msg, nil); err != nil {
		e.t.Fatalf("Prompt(%q, %q): %v", key, msg, err)
	}
	return e.srv.Last().AllText()
}

// A lost or corrupt session map is rebuilt from the session files'
// headers: every session goes on with its history, the corrupt map is kept
// as .bad, and the repair is logged.
func TestSessionMapRebuiltFromHeaders(t *testing.T) {
	for name, damage := range map[string]func(path string){
		"garbage":   func(p string) { os.WriteFile(p, []byte("\x00\x00garbage"), 0o600) },
		"empty":     func(p string) { os.WriteFile(p, nil, 0o600) },
		"array":     func(p string) { os.WriteFile(p, []byte("[]"), 0o600) },
		"missing":   func(p string) { os.Remove(p) },
		"truncated": func(p string) { b, _ := os.ReadFile(p); os.WriteFile(p, b[:len(b)/3], 0o600) },
	} {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t, wireAnthropic)
			e.promptKey("telegram:1", "first chat says apple")
			e.promptKey("telegram:2", "second chat says pear")
			e.promptKey("telegram:1", "first chat again")
			e.m.Close()
			mp := filepath.Join(e.dir, SessionMapFile)
			before, _ := os.ReadFile(mp)
			damage(mp)
			damaged, _ := os.ReadFile(mp)
			e.m = e.newManager()

			if all := e.promptKey("telegram:1", "and now?"); !strings.Contains(all, "apple") || strings.Contains(all, "pear") {
				t.Errorf("telegram:1 lost its history: %q", all)
			}
			if all := e.promptKey("telegram:2", "and now?"); !strings.Contains(all, "pear") || strings.Contains(all, "apple") {
				t.Errorf("telegram:2 lost its history: %q", all)
			}
			logs := e.logs.String()
			if !strings.Contains(logs, "level=WARN") || !strings.Contains(logs, "rebuilt") {
				t.Errorf("the repair was not logged: %s", logs)
			}
			if name == "missing" || name == "empty" {
				return // nothing corrupt to keep (an empty map is a valid, empty one)
			}
			if b, err := os.ReadFile(mp + ".bad"); err != nil || string(b) != string(damaged) {
				t.Errorf("corrupt map not kept as .bad: %q, %v", b, err)
			}
			// The rebuilt map has the same entries as before.
			var m map[string]mapEntry
			if m = readMap(t, e.dir); len(m) != 2 {
				t.Errorf("rebuilt map %v (before: %s)", m, before)
			}
		})
	}
}

// Entries of a damaged map that can still be read are kept: that is all
// there is for an old session file whose header has no key.
func TestCorruptSessionMapKeepsReadableEntries(t *testing.T) {
	e := newEnv(t, wireAnthropic)
	e.promptKey("old", "legacy session says plum")
	e.promptKey("new", "new session says fig")
	e.m.Close()
	m := readMap(t, e.dir)
	// Make "old" a pre-rebuild file: its header names no key.
	oldFile := m["old"].SessionFile
	b, _ := os.ReadFile(oldFile)
	head, rest, _ := strings.Cut(string(b), "\n")
	head = strings.Replace(head, `,"sessionKey":"old","agentName":"travel"`, "", 1)
	if strings.Contains(head, "sessionKey") {
		t.Fatalf("header %s", head)
	}
	os.WriteFile(oldFile, []byte(head+"\n"+rest), 0o600)
	// A map whose "old" entry is whole and whose "new" one is cut short.
	mp := filepath.Join(e.dir, SessionMapFile)
	os.WriteFile(mp, []byte(`{"old": {"agentName": "travel", "sessionFile": "`+oldFile+`", "createdAt": "`+m["old"].CreatedAt+`"}, "new": {"agentName": "tra`), 0o600)
	e.m = e.newManager()

	if all := e.promptKey("old", "and?"); !strings.Contains(all, "plum") {
		t.Errorf("old session lost: %q", all)
	}
	if all := e.promptKey("new", "and?"); !strings.Contains(all, "fig") {
		t.Errorf("new session lost: %q", all)
	}
}

// A session file that cannot be resumed is kept beside the new one, and
// that is logged; a torn last line cut off is kept too.
func TestUnreadableSessionFileKept(t *testing.T) {
	for name, content := range map[string]string{
		"empty":     "",
		"garbage":   "garbage\nmore garbage\n",
		"zeroes":    "\x00\x00\x00\x00\x00\x00",
		"no header": `{"type":"message","id":"abcd0123","parentId":null,"timestamp":"2025-01-01T00:00:00.000Z","message":{"role":"user","content":"hi","timestamp":1}}` + "\n",
	} {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t, wireAnthropic)
			e.prompt("hello")
			e.m.Close()
			path := sessionFileOf(t, e, "api:travel:default")
			os.WriteFile(path, []byte(content), 0o600)
			e.m = e.newManager()
			e.prompt("again")
			if b, err := os.ReadFile(path + ".bad"); err != nil || string(b) != content {
				t.Errorf("unreadable session file not kept: %q, %v", b, err)
			}
			if logs := e.logs.String(); !strings.Contains(logs, "set aside") || !strings.Contains(logs, path+".bad") {
				t.Errorf("not logged: %s", logs)
			}
			if p := sessionFileOf(t, e, "api:travel:default"); p == path {
				t.Error("the map still names the unreadable file")
			}
		})
	}
}

func TestTornLastLineKept(t *testing.T) {
	e := newEnv(t, wireAnthropic)
	e.prompt("hello")
	e.m.Close()
	path := sessionFileOf(t, e, "api:travel:default")
	f, _ := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	torn := `{"type":"message","id":"0badc0de","parentId":null,"timest`
	f.WriteString(torn)
	f.Close()
	e.m = e.newManager()
	if all := e.promptKey("", "again"); !strings.Contains(all, "hello") {
		t.Errorf("history lost: %q", all)
	}
	if b, err := os.ReadFile(path + ".bad"); err != nil || string(b) != torn {
		t.Errorf("torn line not kept: %q, %v", b, err)
	}
}

func FuzzSalvageSessionMap(f *testing.F) {
	f.Add([]byte(`{"a": {"agentName": "x", "sessionFile": "/s/x/1.jsonl", "createdAt": "2025-01-01T00:00:00.000Z"}, "b": {`))
	f.Add([]byte(`[{"a": 1}]`))
	f.Add([]byte(`{"a": 1, "b": {"agentName": "x", "sessionFile": "f"}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		for k, e := range salvageSessionMap(data) {
			if k == "" || e.AgentName == "" || e.SessionFile == "" {
				t.Fatalf("incomplete entry kept: %q %+v", k, e)
			}
		}
	})
}

// The original Beige's terminal client keeps the same session-map.json and
// writes it whole. A session it made while the gateway runs is not lost at
// the gateway's next write, the gateway lists and resumes it, and an entry
// it changed that the gateway did not is taken as it is.
func TestSessionMapKeepsAnotherWritersEntries(t *testing.T) {
	e := newEnv(t, wireAnthropic)
	e.promptKey("telegram:1", "first chat says apple")
	mp := filepath.Join(e.dir, SessionMapFile)

	// The other writer: a session of its own, in the agent's folder.
	other := newEnv(t, wireAnthropic)
	other.promptKey("tui:"+testAgent+":default", "the client's chat says plum")
	other.m.Close()
	otherMap, err := loadSessionMap(filepath.Join(other.dir, SessionMapFile))
	if err != nil {
		t.Fatal(err)
	}
	tuiEntry := otherMap["tui:"+testAgent+":default"]
	onDisk, err := loadSessionMap(mp)
	if err != nil {
		t.Fatal(err)
	}
	onDisk["tui:"+testAgent+":default"] = tuiEntry
	if err := saveSessionMap(mp, onDisk); err != nil {
		t.Fatal(err)
	}

	// The gateway's next write (a new session) keeps the client's entry.
	e.promptKey("telegram:2", "second chat says pear")
	after, err := loadSessionMap(mp)
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"telegram:1", "telegram:2", "tui:" + testAgent + ":default"} {
		if _, ok := after[key]; !ok {
			t.Errorf("session map lost %q: %v", key, after)
		}
	}
	// Listed, and resumed with its history.
	infos, err := e.m.Sessions(context.Background(), testAgent)
	if err != nil {
		t.Fatal(err)
	}
	listed := false
	for _, in := range infos {
		listed = listed || in.ID == "tui:"+testAgent+":default"
	}
	if !listed {
		t.Errorf("the client's session is not listed: %+v", infos)
	}
	if all := e.promptKey("tui:"+testAgent+":default", "and now?"); !strings.Contains(all, "plum") {
		t.Errorf("the client's session was not resumed: %q", all)
	}
}
