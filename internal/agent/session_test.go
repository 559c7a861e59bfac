package agent

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/beige-dev/beige/internal/llm"
	"github.com/beige-dev/beige/internal/llm/llmtest"
	"github.com/beige-dev/beige/internal/proto"
)

// sessionLines reads a session file as decoded JSON lines; every line must parse.
func sessionLines(t *testing.T, path string) []map[string]any {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []map[string]any
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("%s: line %d does not parse: %v: %q", path, len(out)+1, err, sc.Text())
		}
		out = append(out, m)
	}
	return out
}

// readMap reads session-map.json.
func readMap(t *testing.T, dir string) map[string]mapEntry {
	t.Helper()
	m, err := loadSessionMap(filepath.Join(dir, SessionMapFile))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func sessionFileOf(t *testing.T, e *env, key string) string {
	t.Helper()
	me, ok := readMap(t, e.dir)[key]
	if !ok {
		t.Fatalf("no map entry for %q", key)
	}
	return me.SessionFile
}

func TestPersistenceRoundTrip(t *testing.T) {
	e := newEnv(t, wireAnthropic)
	e.srv.Enqueue(
		llmtest.ToolCall("exec", map[string]any{"command": "cat notes"}),
		llmtest.Text("The answer is 42."),
	)
	e.prompt("remember the number")
	e.restart()
	e.srv.Enqueue(llmtest.Text("It was 42."))
	if r := e.prompt("what was the number?"); r.Text != "It was 42." {
		t.Fatalf("text %q", r.Text)
	}
	last := e.srv.Last()
	msgs := last.Messages()
	if len(msgs) != 5 { // user, assistant(tool_use), user(tool_result), assistant, user
		t.Fatalf("request after restart has %d messages: %s", len(msgs), last.Raw)
	}
	all := last.AllText()
	for _, want := range []string{"remember the number", "ran: cat notes", "The answer is 42.", "what was the number?"} {
		if !strings.Contains(all, want) {
			t.Errorf("request after restart lacks %q", want)
		}
	}
	if trs := toolResults(last); len(trs) != 1 || toolCallIDs(last)[0] != trs[0].ID {
		t.Errorf("tool call and result not paired: %v %+v", toolCallIDs(last), trs)
	}

	// The file, line by line.
	path := sessionFileOf(t, e, "api:travel:default")
	if filepath.Dir(path) != filepath.Join(e.dir, testAgent) {
		t.Errorf("file %s not in the agent's folder", path)
	}
	if !regexp.MustCompile(`^\d{8}-\d{6}-[0-9a-f]{4}\.jsonl$`).MatchString(filepath.Base(path)) {
		t.Errorf("file name %s", filepath.Base(path))
	}
	lines := sessionLines(t, path)
	h := lines[0]
	isoRe := regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$`)
	if h["type"] != "session" || h["version"] != float64(3) || h["cwd"] != "/workspace" ||
		!regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`).MatchString(h["id"].(string)) ||
		!isoRe.MatchString(h["timestamp"].(string)) || len(h) != 7 ||
		h["sessionKey"] != "api:travel:default" || h["agentName"] != testAgent {
		t.Errorf("header %v", h)
	}
	var types []string
	prev := any(nil)
	for i, l := range lines[1:] {
		types = append(types, l["type"].(string))
		if !regexp.MustCompile(`^[0-9a-f]{8}$`).MatchString(l["id"].(string)) || !isoRe.MatchString(l["timestamp"].(string)) {
			t.Errorf("entry %d: %v", i, l)
		}
		if l["parentId"] != prev {
			t.Errorf("entry %d: parentId %v, want %v", i, l["parentId"], prev)
		}
		prev = l["id"]
	}
	want := "message model_change message message message message message"
	if got := strings.Join(types, " "); got != want {
		t.Errorf("entries %q, want %q", got, want)
	}
	if mc := lines[2]; mc["provider"] != "anthropic" || mc["modelId"] != "claude-test" {
		t.Errorf("model_change %v", mc)
	}
	if m := lines[1]["message"].(map[string]any); m["role"] != "user" {
		t.Errorf("first message %v", m)
	}
	if m := lines[3]["message"].(map[string]any); m["role"] != "assistant" || m["stopReason"] != "toolUse" {
		t.Errorf("assistant %v", m)
	}

	// Modes.
	for p, want := range map[string]os.FileMode{
		e.dir: 0o700, filepath.Dir(path): 0o700, path: 0o600, filepath.Join(e.dir, SessionMapFile): 0o600,
	} {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != want {
			t.Errorf("%s mode %v, want %v", p, fi.Mode().Perm(), want)
		}
	}
}

func TestAbortedTurnPersisted(t *testing.T) {
	e := newEnv(t, wireAnthropic)
	e.srv.Enqueue(llmtest.Text("half of it").HangAfter(4))
	ctx, cancel := context.WithCancel(context.Background())
	go func() { e.srv.WaitInFlight(1, 5*time.Second); time.Sleep(30 * time.Millisecond); cancel() }()
	if _, err := e.m.Prompt(ctx, testAgent, "", "go", nil); !errors.Is(err, ErrAborted) {
		t.Fatal(err)
	}
	lines := sessionLines(t, sessionFileOf(t, e, DefaultSessionKey(testAgent)))
	m := lines[len(lines)-1]["message"].(map[string]any)
	if m["role"] != "assistant" || m["stopReason"] != "aborted" || m["errorMessage"] == "" {
		t.Errorf("last entry %v", m)
	}
}

func TestTornLastLine(t *testing.T) {
	for _, tc := range []struct{ name, tail string }{
		{"torn", `{"type":"message","id":"0badf00d","parentId":"x","message":{"role":"assi`},
		{"garbage", "\x00\x00\x00"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, wireAnthropic)
			e.srv.Enqueue(llmtest.Text("first answer"))
			e.prompt("first question")
			e.m.Close()
			path := sessionFileOf(t, e, DefaultSessionKey(testAgent))
			f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
			if err != nil {
				t.Fatal(err)
			}
			f.WriteString(tc.tail) // as a crash mid-write leaves it: no newline
			f.Close()

			e.m = e.newManager()
			e.srv.Enqueue(llmtest.Text("second answer"))
			e.prompt("second question")
			if all := e.srv.Last().AllText(); !strings.Contains(all, "first answer") || !strings.Contains(all, "second question") {
				t.Errorf("request %q", all)
			}
			if !strings.Contains(e.logs.String(), "torn last line") {
				t.Errorf("no warning in %s", e.logs.String())
			}
			lines := sessionLines(t, path)   // every line parses again
			if got := len(lines); got != 6 { // header, user, model_change, assistant, user, assistant
				t.Errorf("%d lines", got)
			}
		})
	}
}

func TestLastLineWithoutNewline(t *testing.T) {
	e := newEnv(t, wireAnthropic)
	e.prompt("one")
	e.m.Close()
	path := sessionFileOf(t, e, DefaultSessionKey(testAgent))
	data, _ := os.ReadFile(path)
	os.WriteFile(path, data[:len(data)-1], 0o600) // the entry is whole, its newline is not
	e.m = e.newManager()
	e.prompt("two")
	lines := sessionLines(t, path)
	if len(lines) != 6 {
		t.Errorf("%d lines", len(lines))
	}
	if all := e.srv.Last().AllText(); !strings.Contains(all, "one") {
		t.Errorf("request %q", all)
	}
}

func TestSessionMapAndList(t *testing.T) {
	e := newEnv(t, wireAnthropic)
	ctx := context.Background()
	e.prompt("hello")
	if _, err := e.m.Prompt(ctx, testAgent, "telegram:123:45", "from telegram", nil); err != nil {
		t.Fatal(err)
	}
	m := readMap(t, e.dir)
	if len(m) != 2 {
		t.Fatalf("map %v", m)
	}
	for key, me := range m {
		if me.AgentName != testAgent || !strings.HasPrefix(me.SessionFile, filepath.Join(e.dir, testAgent)) || millis(me.CreatedAt) == 0 {
			t.Errorf("%s: %+v", key, me)
		}
	}
	list, err := e.m.Sessions(ctx, testAgent)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 2 {
		t.Fatalf("list %+v", list)
	}
	ids := map[string]proto.SessionInfo{}
	for _, s := range list {
		ids[s.ID] = s
		if s.File != m[s.ID].SessionFile || s.CreatedAt != m[s.ID].CreatedAt || millis(s.UpdatedAt) < millis(s.CreatedAt) {
			t.Errorf("%+v", s)
		}
	}
	if _, ok := ids["telegram:123:45"]; !ok {
		t.Errorf("list %+v", list)
	}
	b, _ := json.Marshal(list[0])
	var keys map[string]any
	json.Unmarshal(b, &keys)
	if len(keys) != 8 || keys["id"] == nil || keys["file"] == nil || keys["createdAt"] == nil || keys["updatedAt"] == nil {
		t.Errorf("JSON %s", b)
	}

	// A new session: a new file, the old one stays, the next prompt starts afresh.
	old := m[DefaultSessionKey(testAgent)].SessionFile
	if err := e.m.NewSession(ctx, testAgent, ""); err != nil {
		t.Fatal(err)
	}
	now := sessionFileOf(t, e, DefaultSessionKey(testAgent))
	if now == old {
		t.Fatal("map still points at the old file")
	}
	if _, err := os.Stat(old); err != nil {
		t.Errorf("old file: %v", err)
	}
	e.srv.Enqueue(llmtest.Text("new"))
	e.prompt("fresh start")
	if all := e.srv.Last().AllText(); strings.Contains(all, "hello") {
		t.Errorf("new session carries old history: %q", all)
	}
	if lines := sessionLines(t, now); len(lines) != 4 {
		t.Errorf("new file has %d lines", len(lines))
	}
	// And it is what a restart resumes.
	e.restart()
	e.prompt("after restart")
	if all := e.srv.Last().AllText(); strings.Contains(all, "hello") || !strings.Contains(all, "fresh start") {
		t.Errorf("after restart %q", all)
	}
	if list, _ := e.m.Sessions(ctx, testAgent); len(list) != 2 {
		t.Errorf("list after restart %+v", list)
	}
}

func TestNewSessionWhileRunning(t *testing.T) {
	e := newEnv(t, wireAnthropic)
	gate := make(chan struct{})
	e.srv.Enqueue(llmtest.Text("old answer").WithGate(gate))
	done := make(chan error, 1)
	go func() { _, err := e.m.Prompt(context.Background(), testAgent, "", "old question", nil); done <- err }()
	e.srv.WaitInFlight(1, 5*time.Second)
	old := sessionFileOf(t, e, DefaultSessionKey(testAgent))
	if err := e.m.NewSession(context.Background(), testAgent, ""); err != nil {
		t.Fatal(err)
	}
	close(gate)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	// The running prompt finished in the old file.
	if lines := sessionLines(t, old); len(lines) != 4 {
		t.Errorf("old file has %d lines", len(lines))
	}
	e.prompt("new question")
	if all := e.srv.Last().AllText(); strings.Contains(all, "old") {
		t.Errorf("new session carries %q", all)
	}
}

func TestCorruptSessionMap(t *testing.T) {
	e := newEnv(t, wireAnthropic)
	e.prompt("hello")
	e.m.Close()
	mp := filepath.Join(e.dir, SessionMapFile)
	os.WriteFile(mp, []byte("{not json"), 0o600)
	e.m = e.newManager()
	if b, err := os.ReadFile(mp + ".bad"); err != nil || string(b) != "{not json" {
		t.Errorf("corrupt map not kept: %q %v", b, err)
	}
	// Rebuilt from the session file's header: the session goes on.
	e.prompt("again")
	if all := e.srv.Last().AllText(); !strings.Contains(all, "hello") {
		t.Errorf("the session was detached by a corrupt map: request %q", all)
	}
}

// byMarker answers each request from the first marker its last user text holds.
func byMarker(rs map[string]llmtest.Response) func(llmtest.Recorded) llmtest.Response {
	return func(r llmtest.Recorded) llmtest.Response {
		msgs := r.Messages()
		last := textOf(msgs[len(msgs)-1]["content"])
		for k, resp := range rs {
			if strings.Contains(last, k) {
				return resp
			}
		}
		return llmtest.Text("default")
	}
}

func TestPromptsSerializePerSession(t *testing.T) {
	e := newEnv(t, wireAnthropic)
	gate := make(chan struct{})
	e.srv.Handle(byMarker(map[string]llmtest.Response{
		"A": llmtest.Text("answer A").WithGate(gate),
		"B": llmtest.Text("answer B"),
		"C": llmtest.Text("answer C"),
		"X": llmtest.Text("answer X"),
	}))
	ctx := context.Background()
	var wg sync.WaitGroup
	results := map[string]string{}
	var mu sync.Mutex
	run := func(ctx context.Context, key, msg string) {
		wg.Go(func() {
			res, err := e.m.Prompt(ctx, testAgent, key, msg, nil)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				results[msg] = "error: " + err.Error()
				return
			}
			results[msg] = res.Text
		})
	}
	s := e.m.session(testAgent, DefaultSessionKey(testAgent))
	waiters := func(n int) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for {
			s.turn.mu.Lock()
			got := len(s.turn.waiters)
			s.turn.mu.Unlock()
			if got == n {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%d waiters, want %d", got, n)
			}
			time.Sleep(time.Millisecond)
		}
	}

	run(ctx, "", "A")
	if !e.srv.WaitInFlight(1, 5*time.Second) {
		t.Fatal("A did not start")
	}
	run(ctx, "", "B")
	waiters(1)
	run(ctx, "", "C")
	waiters(2)
	// A prompt that gives up while waiting.
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	_, err := e.m.Prompt(short, testAgent, "", "D", nil)
	if !errors.Is(err, ErrAborted) || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("waiting prompt: %v", err)
	}
	waiters(2)
	// Another session runs meanwhile.
	if res, err := e.m.Prompt(ctx, testAgent, "telegram:9", "X", nil); err != nil || res.Text != "answer X" {
		t.Fatalf("other session: %v %v", res, err)
	}
	if e.srv.MaxInFlight() != 2 {
		t.Errorf("max in flight %d, want 2", e.srv.MaxInFlight())
	}
	if n := e.srv.Count(); n != 2 {
		t.Errorf("%d requests while A runs, want 2 (A and X)", n)
	}
	close(gate)
	wg.Wait()
	if results["A"] != "answer A" || results["B"] != "answer B" || results["C"] != "answer C" {
		t.Errorf("results %v", results)
	}
	// B came after A and C after B, each seeing the one before.
	reqs := e.srv.Requests()
	var order []string
	for _, r := range reqs {
		msgs := r.Messages()
		order = append(order, textOf(msgs[len(msgs)-1]["content"]))
	}
	if got := strings.Join(order, ","); got != "A,X,B,C" {
		t.Errorf("order %s", got)
	}
	if all := reqs[3].AllText(); !strings.Contains(all, "answer A") || !strings.Contains(all, "answer B") {
		t.Errorf("C's request %q", all)
	}
	if strings.Contains(reqs[3].AllText(), "D") {
		t.Error("the prompt that gave up is in the history")
	}
}

func TestManagerShutdownDrains(t *testing.T) {
	e := newEnv(t, wireAnthropic)
	gate := make(chan struct{})
	e.srv.Enqueue(llmtest.Text("finished").WithGate(gate))
	done := make(chan error, 1)
	go func() { _, err := e.m.Prompt(context.Background(), testAgent, "", "work", nil); done <- err }()
	e.srv.WaitInFlight(1, 5*time.Second)
	go func() { time.Sleep(50 * time.Millisecond); close(gate) }()
	if err := e.m.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Errorf("drained prompt: %v", err)
	}
	// Shutdown with a deadline aborts.
	e.m = e.newManager()
	e.srv.Enqueue(llmtest.Hang())
	go func() { _, err := e.m.Prompt(context.Background(), testAgent, "", "work", nil); done <- err }()
	e.srv.WaitInFlight(1, 5*time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := e.m.Shutdown(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("shutdown: %v", err)
	}
	if err := <-done; !errors.Is(err, ErrAborted) || !errors.Is(err, ErrClosed) {
		t.Errorf("aborted prompt: %v", err)
	}
}

func TestReplayFollowsParents(t *testing.T) {
	msg := func(id, parent, text string) entry {
		m := llm.UserText(text)
		return entry{Type: entryMessage, ID: id, ParentID: parent, Message: &m}
	}
	// A branch: c continues from a, so b is not on the path.
	r := replay([]entry{msg("a", "", "one"), msg("b", "a", "two"), msg("c", "a", "three")})
	if len(r.msgs) != 2 || r.msgs[1].User.Text() != "three" || r.lastID != "c" {
		t.Errorf("replay %+v", r)
	}
	// A missing parent stops the walk with a problem reported.
	r = replay([]entry{msg("a", "", "one"), msg("c", "zz", "three")})
	if len(r.msgs) != 1 || len(r.problems) != 1 {
		t.Errorf("replay %+v", r)
	}
	// A cycle does not hang.
	r = replay([]entry{msg("a", "b", "one"), msg("b", "a", "two")})
	if len(r.problems) != 1 {
		t.Errorf("replay %+v", r)
	}
}
