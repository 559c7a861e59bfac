package telegram

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/beige-dev/beige/internal/channel/telegram/bottest"
	"github.com/beige-dev/beige/internal/config"
	"github.com/beige-dev/beige/internal/home"
	"github.com/beige-dev/beige/internal/plugin"
	"github.com/beige-dev/beige/internal/routing"
	"github.com/beige-dev/beige/internal/testutil"
)

// harness is a running channel against a fake Bot API and a fake gateway.
type harness struct {
	t      *testing.T
	api    *bottest.Server
	pc     *fakePC
	p      *Plugin
	logs   *testutil.SyncBuffer
	dir    string // the data dir
	cancel context.CancelFunc
}

const (
	userID  = 42
	otherID = 999
)

// manifestDefaults is the defaultConfig of plugin.json.
func manifestDefaults(t *testing.T) map[string]any {
	t.Helper()
	data, err := fs.ReadFile(docs, "plugin.json")
	if err != nil {
		t.Fatal(err)
	}
	var m config.Manifest
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	return m.DefaultConfig
}

// newPlugin creates the plugin with the test's config over the base one.
func newPlugin(t *testing.T, api *bottest.Server, extra map[string]any, logs *testutil.SyncBuffer) (*Plugin, error) {
	return newPluginIn(t, api, "", extra, logs)
}

// newPluginIn is newPlugin with the data dir (the durable queue) in dir.
func newPluginIn(t *testing.T, api *bottest.Server, dir string, extra map[string]any, logs *testutil.SyncBuffer) (*Plugin, error) {
	t.Helper()
	cfg := map[string]any{
		"token":        bottest.Token,
		"allowedUsers": []any{float64(userID), "@alice_x"},
		"agentMapping": map[string]any{"default": "main"},
	}
	if api != nil {
		cfg["apiUrl"] = api.URL()
	}
	for k, v := range extra {
		cfg[k] = v
	}
	merged := plugin.MergeConfig(manifestDefaults(t), cfg, nil)
	p, err := New(plugin.Env{
		Name:    Name,
		Config:  merged,
		DataDir: dir,
		Logger:  slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	})
	if err != nil {
		return nil, err
	}
	return p.(*Plugin), nil
}

func start(t *testing.T, extra map[string]any, pc *fakePC) *harness {
	t.Helper()
	return startIn(t, bottest.New(t), t.TempDir(), extra, pc)
}

// startIn starts the channel against api with its data dir in dir.
func startIn(t *testing.T, api *bottest.Server, dir string, extra map[string]any, pc *fakePC) *harness {
	t.Helper()
	h := &harness{t: t, api: api, pc: pc, logs: &testutil.SyncBuffer{}, dir: dir}
	if h.pc == nil {
		h.pc = newFakePC()
	}
	p, err := newPluginIn(t, h.api, dir, extra, h.logs)
	if err != nil {
		t.Fatal(err)
	}
	h.p = p
	ctx, cancel := context.WithCancel(context.Background())
	h.cancel = cancel
	if err := p.Start(ctx, h.pc); err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		h.stop()
		checkNoLeaks(t)
		if strings.Contains(h.logs.String(), "TEST-secret") {
			t.Errorf("the token was logged:\n%s", h.logs)
		}
	})
	return h
}

// stopWithin is the time the harness gives Stop, as the gateway gives
// its 10 s: the running prompts may finish for most of it.
const stopWithin = 1500 * time.Millisecond

// stop stops the channel as the gateway does (Start's context ends, then
// Stop) and reports how long it took.
func (h *harness) stop() time.Duration {
	h.t.Helper()
	begin := time.Now()
	h.cancel()
	ctx, cancel := context.WithTimeout(context.Background(), stopWithin)
	defer cancel()
	if err := h.p.Stop(ctx); err != nil {
		h.t.Errorf("Stop: %v", err)
	}
	return time.Since(begin)
}

// checkNoLeaks fails if goroutines of the channel, the bot library or an
// HTTP client connection are still running.
func checkNoLeaks(t *testing.T) {
	t.Helper()
	markers := []string{"go-telegram/bot.", "channel/telegram.(*run)", "channel/telegram.(*reply)", "net/http.(*persistConn)"}
	var stacks string
	for deadline := time.Now().Add(3 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		buf := make([]byte, 1<<20)
		stacks = string(buf[:runtime.Stack(buf, true)])
		leaked := false
		for g := range strings.SplitSeq(stacks, "\n\n") {
			for _, m := range markers {
				if strings.Contains(g, m) {
					leaked = true
				}
			}
		}
		if !leaked {
			return
		}
	}
	t.Errorf("goroutines left after Stop:\n%s", stacks)
}

func textsTo(calls []bottest.Call, chat int64) []string { return bottest.SentTexts(calls, chat) }

func hasText(texts []string, want string) bool { return slices.Contains(texts, want) }

func TestAnswer(t *testing.T) {
	pc := newFakePC()
	pc.answer = func(ctx context.Context, req plugin.PromptRequest) (*plugin.PromptResult, error) {
		time.Sleep(200 * time.Millisecond) // long enough to show "typing…"
		return &plugin.PromptResult{Text: "echo: " + req.Message}, nil
	}
	h := start(t, nil, pc)
	msgID := h.api.Message(userID, userID, 0, "hello")
	calls := h.api.WaitFor("the answer", func(c []bottest.Call) bool { return hasText(textsTo(c, userID), "echo: hello") })
	if got := h.pc.promptKeys(); !slices.Equal(got, []string{"telegram:42"}) {
		t.Errorf("prompts went to %v, want [telegram:42]", got)
	}
	var send bottest.Call
	for _, c := range calls {
		if c.Method == "sendMessage" {
			send = c
		}
	}
	if send.Params["parse_mode"] != "MarkdownV2" {
		t.Errorf("parse_mode = %q, want MarkdownV2", send.Params["parse_mode"])
	}
	// Receipt and done reactions, and the typing indicator.
	calls = h.api.WaitFor("the reactions", func(c []bottest.Call) bool {
		n := 0
		for _, c := range c {
			if c.Method == "setMessageReaction" {
				n++
			}
		}
		return n >= 2
	})
	var reactions []string
	for _, c := range calls {
		switch c.Method {
		case "setMessageReaction":
			if c.Params["message_id"] != strconv.Itoa(msgID) {
				t.Errorf("reaction on message %s, want %d", c.Params["message_id"], msgID)
			}
			reactions = append(reactions, c.Params["reaction"])
		}
	}
	if len(reactions) != 2 || !strings.Contains(reactions[0], "👀") || !strings.Contains(reactions[1], "🎉") {
		t.Errorf("reactions = %v, want 👀 then 🎉", reactions)
	}
	if len(h.api.CallsOf("sendChatAction")) == 0 {
		t.Error("no typing indicator")
	}
}

func TestUnknownUserIgnored(t *testing.T) {
	h := start(t, nil, nil)
	h.api.Message(otherID, 777, 0, "let me in")
	h.api.Message(otherID, 777, 0, "/status")
	h.api.Message(userID, userID, 0, "after")
	calls := h.api.WaitFor("the allowed user's answer", func(c []bottest.Call) bool { return hasText(textsTo(c, userID), "echo: after") })
	for _, c := range calls {
		if c.Params["chat_id"] == "777" {
			t.Errorf("the unknown user's chat got %v", c)
		}
	}
	if got := h.pc.promptKeys(); !slices.Equal(got, []string{"telegram:42"}) {
		t.Errorf("prompts = %v", got)
	}
	logs := h.logs.String()
	if n := strings.Count(logs, "not in allowedUsers"); n != 2 {
		t.Errorf("%d log lines about the unknown user, want 2:\n%s", n, logs)
	}
	if !strings.Contains(logs, "user_id=999") || !strings.Contains(logs, "chat_id=777") {
		t.Errorf("the log line lacks the user or chat id:\n%s", logs)
	}
}

func TestAllowedByUsername(t *testing.T) {
	h := start(t, nil, nil)
	h.api.Push(map[string]any{"message": map[string]any{
		"message_id": 5, "date": 1, "text": "hi",
		"chat": map[string]any{"id": 555, "type": "private"},
		"from": map[string]any{"id": 555, "is_bot": false, "first_name": "A", "username": "Alice_X"},
	}})
	h.api.WaitFor("the answer", func(c []bottest.Call) bool { return hasText(textsTo(c, 555), "echo: hi") })
}

func TestNewSession(t *testing.T) {
	h := start(t, nil, nil)
	h.api.Message(userID, userID, 0, "/new")
	h.api.WaitFor("the reply", func(c []bottest.Call) bool { return hasText(textsTo(c, userID), "🆕 New session started.") })
	h.pc.mu.Lock()
	news := slices.Clone(h.pc.news)
	h.pc.mu.Unlock()
	if !slices.Equal(news, []string{"main telegram:42"}) {
		t.Errorf("NewSession calls = %v", news)
	}
	if n := h.pc.promptCount(); n != 0 {
		t.Errorf("/new reached the model (%d prompts)", n)
	}
}

func TestCommandsInGroups(t *testing.T) {
	h := start(t, nil, nil)
	h.api.Message(userID, -100, 0, "/status@other_bot")
	h.api.Message(userID, -100, 0, "/status@Beige_Bot")
	calls := h.api.WaitFor("the status", func(c []bottest.Call) bool {
		for _, s := range textsTo(c, -100) {
			if strings.Contains(s, "Session telegram:-100") {
				return true
			}
		}
		return false
	})
	if n := len(textsTo(calls, -100)); n != 1 {
		t.Errorf("%d replies, want 1 (the other bot's command is ignored): %v", n, textsTo(calls, -100))
	}
	if h.pc.promptCount() != 0 {
		t.Error("a command reached the model")
	}
}

func TestVerboseToolLine(t *testing.T) {
	pc := newFakePC()
	h := &harness{}
	pc.answer = func(ctx context.Context, req plugin.PromptRequest) (*plugin.PromptResult, error) {
		if req.OnToolStart == nil {
			return &plugin.PromptResult{Text: "not verbose"}, nil
		}
		req.OnToolStart("exec: ls -la")
		// The line is sent before the tool runs.
		if !hasText(textsTo(h.api.Snapshot(), userID), "🔧 exec: ls -la") {
			return nil, errors.New("the tool line was not sent before the tool ran")
		}
		return &plugin.PromptResult{Text: "the listing"}, nil
	}
	*h = *start(t, nil, pc)
	// Both in one batch: the prompt must see the setting.
	h.api.Message(userID, userID, 0, "/verbose on")
	h.api.Message(userID, userID, 0, "list the files")
	calls := h.api.WaitFor("the answer", func(c []bottest.Call) bool {
		texts := textsTo(c, userID)
		return hasText(texts, "the listing") || hasText(texts, "not verbose") || slices.ContainsFunc(texts, func(s string) bool { return strings.HasPrefix(s, "⚠️") })
	})
	texts := textsTo(calls, userID)
	tool := slices.Index(texts, "🔧 exec: ls -la")
	answer := slices.Index(texts, "the listing")
	if tool < 0 || answer < 0 || tool > answer {
		t.Fatalf("messages = %q, want the tool line before the answer", texts)
	}
	for _, c := range calls {
		if c.Method == "sendMessage" && c.Params["text"] == "🔧 exec: ls -la" && c.Params["parse_mode"] != "" {
			t.Errorf("the tool line was sent with parse_mode %q", c.Params["parse_mode"])
		}
	}
	h.pc.mu.Lock()
	v := h.pc.settings["telegram:42"]["verbose"]
	h.pc.mu.Unlock()
	if v != true {
		t.Errorf("verbose setting = %v", v)
	}
}

// longAnswer is 10,000 characters of lines of words, no Markdown.
func longAnswer() string {
	var b strings.Builder
	for i := 0; b.Len() < 10000; i++ {
		line := "line " + strconv.Itoa(i) + " " + strings.Repeat("word ", 18)
		line = strings.TrimSpace(line)
		b.WriteString(line)
		b.WriteString("\n")
	}
	return b.String()[:9999] + "\n"
}

func TestLongAnswerNotStreamed(t *testing.T) {
	answer := longAnswer()
	if len(answer) != 10000 {
		t.Fatalf("answer is %d characters", len(answer))
	}
	pc := newFakePC()
	pc.answer = func(ctx context.Context, req plugin.PromptRequest) (*plugin.PromptResult, error) {
		streamText(req, answer, 700) // ignored: streaming is off
		return &plugin.PromptResult{Text: answer}, nil
	}
	h := start(t, map[string]any{"defaults": map[string]any{"streaming": false}}, pc)
	h.api.Message(userID, userID, 0, "tell me everything")
	h.api.WaitFor("the reaction", func(c []bottest.Call) bool {
		for _, c := range c {
			if c.Method == "setMessageReaction" && strings.Contains(c.Params["reaction"], "🎉") {
				return true
			}
		}
		return false
	})
	texts := textsTo(h.api.Snapshot(), userID)
	if len(texts) != 3 {
		t.Fatalf("the answer came in %d messages, want 3", len(texts))
	}
	for i, s := range texts {
		if n := utf16Len(s); n > MaxMessageLen {
			t.Errorf("message %d has %d characters", i, n)
		}
	}
	if got := strings.Join(texts, "\n") + "\n"; got != answer {
		t.Errorf("the messages do not add up to the answer")
	}
	if len(h.api.CallsOf("editMessageText")) != 0 {
		t.Error("edits without streaming")
	}
}

func TestLongAnswerStreamed(t *testing.T) {
	answer := longAnswer()
	pc := newFakePC()
	pc.answer = func(ctx context.Context, req plugin.PromptRequest) (*plugin.PromptResult, error) {
		streamText(req, answer, 2500)
		return &plugin.PromptResult{Text: answer}, nil
	}
	h := start(t, nil, pc)
	h.api.Message(userID, userID, 0, "tell me everything")
	h.api.WaitFor("the reaction", func(c []bottest.Call) bool {
		for _, c := range c {
			if c.Method == "setMessageReaction" && strings.Contains(c.Params["reaction"], "🎉") {
				return true
			}
		}
		return false
	})
	final := finalTexts(h.api.Snapshot(), userID)
	if len(final) != 3 {
		t.Fatalf("the answer came in %d messages, want 3: %d sends", len(final), len(textsTo(h.api.Snapshot(), userID)))
	}
	var parts []string
	for _, m := range final {
		if n := utf16Len(m.text); n > MaxMessageLen {
			t.Errorf("message %d has %d characters", m.id, n)
		}
		parts = append(parts, m.text)
	}
	if got := strings.Join(parts, "\n") + "\n"; got != answer {
		t.Errorf("the messages do not add up to the answer:\n%q", parts)
	}
}

type finalMsg struct {
	id   int
	text string
}

// finalTexts replays sends and edits to a chat: each message's last text,
// in the order the messages were sent.
func finalTexts(calls []bottest.Call, chat int64) []finalMsg {
	var out []finalMsg
	for _, c := range calls {
		if c.Rejected || c.Params["chat_id"] != strconv.FormatInt(chat, 10) {
			continue
		}
		switch c.Method {
		case "sendMessage":
			out = append(out, finalMsg{id: c.ID, text: c.Params["text"]})
		case "editMessageText":
			for i := range out {
				if out[i].id == c.ID {
					out[i].text = c.Params["text"]
				}
			}
		}
	}
	return out
}

func TestStreamingEditsAtMostOnceASecond(t *testing.T) {
	var answer strings.Builder
	pc := newFakePC()
	pc.answer = func(ctx context.Context, req plugin.PromptRequest) (*plugin.PromptResult, error) {
		req.OnEvent(llmStart())
		for i := range 30 {
			d := "word" + strconv.Itoa(i) + " "
			answer.WriteString(d)
			req.OnEvent(llmDelta(d))
			time.Sleep(100 * time.Millisecond)
		}
		req.OnEvent(llmDone())
		return &plugin.PromptResult{Text: answer.String()}, nil
	}
	h := start(t, nil, pc)
	h.api.Message(userID, userID, 0, "stream please")
	h.api.WaitFor("the reaction", func(c []bottest.Call) bool {
		for _, c := range c {
			if c.Method == "setMessageReaction" && strings.Contains(c.Params["reaction"], "🎉") {
				return true
			}
		}
		return false
	})
	calls := h.api.CallsOf("sendMessage", "editMessageText")
	var times []time.Time
	var last string
	for _, c := range calls {
		if c.Params["chat_id"] != "42" {
			continue
		}
		times = append(times, c.At)
		last = c.Params["text"]
	}
	if len(h.api.CallsOf("sendMessage")) != 1 {
		t.Errorf("%d messages sent, want 1", len(h.api.CallsOf("sendMessage")))
	}
	if len(times) < 3 {
		t.Fatalf("%d updates of the message in 3 s of streaming, want several", len(times))
	}
	for i := 1; i < len(times); i++ {
		if d := times[i].Sub(times[i-1]); d < time.Second {
			t.Errorf("update %d came %v after the previous one", i, d)
		}
	}
	if want := strings.TrimSpace(answer.String()); last != want {
		t.Errorf("final text = %q, want %q", last, want)
	}
}

func TestMarkdownRefusedSentPlain(t *testing.T) {
	pc := newFakePC()
	pc.answer = func(ctx context.Context, req plugin.PromptRequest) (*plugin.PromptResult, error) {
		return &plugin.PromptResult{Text: "**bold** and a_b"}, nil
	}
	h := start(t, map[string]any{"defaults": map[string]any{"streaming": false}}, pc)
	h.api.SetReject(func(c bottest.Call) (int, string) {
		if c.Params["parse_mode"] == "MarkdownV2" {
			return 400, "Bad Request: can't parse entities: Can't find end of the entity starting at byte offset 3"
		}
		return 0, ""
	})
	h.api.Message(userID, userID, 0, "format")
	calls := h.api.WaitFor("the plain answer", func(c []bottest.Call) bool { return hasText(textsTo(c, userID), "**bold** and a_b") })
	var modes []string
	for _, c := range calls {
		if c.Method == "sendMessage" {
			modes = append(modes, c.Params["parse_mode"]+":"+c.Params["text"])
		}
	}
	want := []string{`MarkdownV2:*bold* and a\_b`, ":**bold** and a_b"}
	if !slices.Equal(modes, want) {
		t.Errorf("sends = %q, want %q", modes, want)
	}
}

func TestMarkdownRefusedWhileStreaming(t *testing.T) {
	answer := "**bold** and a_b, streamed"
	pc := newFakePC()
	pc.answer = func(ctx context.Context, req plugin.PromptRequest) (*plugin.PromptResult, error) {
		req.OnEvent(llmStart())
		req.OnEvent(llmDelta(answer[:10]))
		time.Sleep(200 * time.Millisecond)
		req.OnEvent(llmDelta(answer[10:]))
		req.OnEvent(llmDone())
		return &plugin.PromptResult{Text: answer}, nil
	}
	h := start(t, nil, pc)
	h.api.SetReject(func(c bottest.Call) (int, string) {
		if c.Params["parse_mode"] == "MarkdownV2" {
			return 400, "Bad Request: can't parse entities: Unsupported start tag"
		}
		return 0, ""
	})
	h.api.Message(userID, userID, 0, "go")
	h.api.WaitFor("the final plain edit", func(c []bottest.Call) bool {
		final := finalTexts(c, userID)
		return len(final) == 1 && final[0].text == answer
	})
	for _, c := range h.api.CallsOf("editMessageText") {
		if c.Params["parse_mode"] == "MarkdownV2" {
			continue
		}
		if c.Params["parse_mode"] != "" {
			t.Errorf("edit with parse_mode %q", c.Params["parse_mode"])
		}
	}
}

func TestTooManyRequestsRetried(t *testing.T) {
	h := start(t, map[string]any{"defaults": map[string]any{"streaming": false}}, nil)
	var once sync.Once
	h.api.SetReject(func(c bottest.Call) (code int, desc string) {
		if c.Method == "sendMessage" {
			once.Do(func() { code, desc = 429, "Too Many Requests: retry after 1" })
		}
		return code, desc
	})
	h.api.Message(userID, userID, 0, "hi")
	calls := h.api.WaitFor("the answer", func(c []bottest.Call) bool { return hasText(textsTo(c, userID), "echo: hi") })
	sends := 0
	var first, second time.Time
	for _, c := range calls {
		if c.Method == "sendMessage" {
			sends++
			if sends == 1 {
				first = c.At
			} else {
				second = c.At
			}
		}
	}
	if sends != 2 || second.Sub(first) < time.Second {
		t.Errorf("%d sends, %v apart; want 2, the second after retry_after (1 s)", sends, second.Sub(first))
	}
}

func TestStopDropsWaitingMessages(t *testing.T) {
	pc := newFakePC()
	started := make(chan string, 4)
	pc.answer = func(ctx context.Context, req plugin.PromptRequest) (*plugin.PromptResult, error) {
		started <- req.Message
		<-ctx.Done()
		return nil, context.Cause(ctx)
	}
	h := start(t, nil, pc)
	h.api.Message(userID, userID, 0, "first")
	if got := <-started; got != "first" {
		t.Fatalf("started %q", got)
	}
	h.api.Message(userID, userID, 0, "second")
	h.api.Message(userID, userID, 0, "third")
	// The two wait behind the first; their 👀 shows they arrived.
	h.api.WaitFor("three receipts", func(c []bottest.Call) bool {
		n := 0
		for _, c := range c {
			if c.Method == "setMessageReaction" {
				n++
			}
		}
		return n >= 3
	})
	h.api.Message(userID, userID, 0, "/stop")
	h.api.WaitFor("the stop reply", func(c []bottest.Call) bool {
		return hasText(textsTo(c, userID), "⏹ Stopped (and dropped 2 waiting messages).")
	})
	select {
	case m := <-started:
		t.Errorf("a dropped message ran: %q", m)
	case <-time.After(300 * time.Millisecond):
	}
}

func TestStopAbortsRunningPrompt(t *testing.T) {
	pc := newFakePC()
	started := make(chan struct{}, 1)
	pc.answer = func(ctx context.Context, req plugin.PromptRequest) (*plugin.PromptResult, error) {
		started <- struct{}{}
		<-ctx.Done()
		return nil, context.Cause(ctx)
	}
	h := start(t, nil, pc)
	msgID := h.api.Message(userID, userID, 0, "think hard")
	select {
	case <-started:
	case <-time.After(5 * time.Second):
		t.Fatal("the prompt did not start")
	}
	h.api.Message(userID, userID, 0, "/stop")
	calls := h.api.WaitFor("the stop reply", func(c []bottest.Call) bool { return hasText(textsTo(c, userID), "⏹ Stopped.") })
	_ = calls
	// The reaction is cleared; no error message follows.
	calls = h.api.WaitFor("the reaction cleared", func(c []bottest.Call) bool {
		n := 0
		for _, c := range c {
			if c.Method == "setMessageReaction" && c.Params["message_id"] == strconv.Itoa(msgID) {
				n++
			}
		}
		return n == 2
	})
	for _, s := range textsTo(calls, userID) {
		if strings.HasPrefix(s, "⚠️") {
			t.Errorf("an error message after /stop: %q", s)
		}
	}
	h.pc.mu.Lock()
	aborts := slices.Clone(h.pc.aborts)
	h.pc.mu.Unlock()
	if !slices.Equal(aborts, []string{"main telegram:42"}) {
		t.Errorf("Abort calls = %v", aborts)
	}
	h.api.Message(userID, userID, 0, "/stop")
	h.api.WaitFor("nothing to stop", func(c []bottest.Call) bool { return hasText(textsTo(c, userID), "Nothing to stop.") })
}

func TestPromptErrorReported(t *testing.T) {
	pc := newFakePC()
	pc.answer = func(ctx context.Context, req plugin.PromptRequest) (*plugin.PromptResult, error) {
		return nil, fmt.Errorf("prompt: %w", &routing.ExhaustedError{})
	}
	h := start(t, nil, pc)
	h.api.Message(userID, userID, 0, "hi")
	want := "⚠️ Sorry, no answer: every model of the agent failed (try again later). The gateway log has the details."
	h.api.WaitFor("the error", func(c []bottest.Call) bool { return hasText(textsTo(c, userID), want) })
	h.api.WaitFor("the 😢", func(c []bottest.Call) bool {
		for _, c := range c {
			if c.Method == "setMessageReaction" && strings.Contains(c.Params["reaction"], "😢") {
				return true
			}
		}
		return false
	})
}

func TestStartupReplacesCommands(t *testing.T) {
	h := start(t, nil, nil)
	calls := h.api.CallsOf("deleteMyCommands", "setMyCommands")
	if len(calls) != 2 || calls[0].Method != "deleteMyCommands" || calls[1].Method != "setMyCommands" {
		t.Fatalf("calls at start-up = %v, want deleteMyCommands then setMyCommands", calls)
	}
	var cmds []struct{ Command, Description string }
	if err := json.Unmarshal([]byte(calls[1].Params["commands"]), &cmds); err != nil {
		t.Fatalf("commands %q: %v", calls[1].Params["commands"], err)
	}
	var names []string
	for _, c := range cmds {
		names = append(names, c.Command)
		if c.Description == "" {
			t.Errorf("command %s has no description", c.Command)
		}
	}
	for _, want := range []string{"start", "new", "stop", "status", "verbose", "streaming", "model", "compact"} {
		if !slices.Contains(names, want) {
			t.Errorf("command %q not registered: %v", want, names)
		}
	}
}

func TestThreadsAreSessions(t *testing.T) {
	h := start(t, map[string]any{"agentMapping": map[string]any{"default": "main", "-100777:7": "coder"}}, newFakePC("main", "coder"))
	h.api.Message(userID, -100777, 7, "in a topic")
	h.api.Message(userID, -100777, 0, "in general")
	calls := h.api.WaitFor("both answers", func(c []bottest.Call) bool {
		texts := textsTo(c, -100777)
		return hasText(texts, "echo: in a topic") && hasText(texts, "echo: in general")
	})
	h.pc.mu.Lock()
	got := map[string]string{}
	for _, p := range h.pc.prompts {
		got[p.Message] = p.Agent + " " + p.SessionKey
	}
	h.pc.mu.Unlock()
	if got["in a topic"] != "coder telegram:-100777:7" || got["in general"] != "main telegram:-100777" {
		t.Errorf("prompts = %v", got)
	}
	for _, c := range calls {
		if c.Method != "sendMessage" {
			continue
		}
		want := ""
		if c.Params["text"] == "echo: in a topic" {
			want = "7"
		}
		if c.Params["message_thread_id"] != want {
			t.Errorf("%q sent to thread %q, want %q", c.Params["text"], c.Params["message_thread_id"], want)
		}
	}
}

func TestModelAndStatusCommands(t *testing.T) {
	h := start(t, nil, nil)
	h.api.Message(userID, userID, 0, "/model")
	h.api.Message(userID, userID, 0, "/model openai/gpt")
	h.api.Message(userID, userID, 0, "/status")
	h.api.Message(userID, userID, 0, "/model default")
	h.api.Message(userID, userID, 0, "/s off")
	h.api.Message(userID, userID, 0, "/compact")
	calls := h.api.WaitFor("six replies", func(c []bottest.Call) bool { return len(textsTo(c, userID)) >= 6 })
	texts := textsTo(calls, userID)
	checks := []string{"1. anthropic/claude ← current", "📌 Model pinned: openai/gpt", "Model: openai/gpt (pinned)", "Model unpinned", "Streaming off", "🗜 Session compacted."}
	for i, want := range checks {
		if !strings.Contains(texts[i], want) {
			t.Errorf("reply %d = %q, want it to contain %q", i, texts[i], want)
		}
	}
	if h.pc.promptCount() != 0 {
		t.Error("a command reached the model")
	}
}

func TestShutdownIsPromptAndClean(t *testing.T) {
	pc := newFakePC()
	started := make(chan struct{}, 1)
	pc.answer = func(ctx context.Context, req plugin.PromptRequest) (*plugin.PromptResult, error) {
		started <- struct{}{}
		<-ctx.Done()
		return nil, ctx.Err()
	}
	h := start(t, nil, pc)
	h.api.Message(userID, userID, 0, "a long task")
	select {
	case <-started:
	case <-time.After(5 * time.Second):
		t.Fatal("the prompt did not start")
	}
	// The prompt does not end by itself: it runs until Stop's time is
	// nearly over, is cancelled then, and stays queued for the next start.
	if d := h.stop(); d > stopWithin {
		t.Errorf("shutdown took %v, more than Stop was given", d)
	}
	if q := readQueue(t, h.dir); len(q.Updates) != 1 || q.Updates[0].Text != "a long task" {
		t.Errorf("queue after the shutdown: %+v", q.Updates)
	}
	checkNoLeaks(t)
	if h.p.SupportsMessaging() {
		t.Error("SupportsMessaging after Stop")
	}
	if err := h.p.SendMessage(context.Background(), "42", "", "x", plugin.SendOptions{}); !errors.Is(err, errNotStarted) {
		t.Errorf("SendMessage after Stop: %v", err)
	}
}

// TestSendMessage: a plugin's message (ctx.getChannel("telegram")) is sent
// as the toolkit's channel sends it: plain text without a parse mode,
// MarkdownV2 or HTML as written with one; when Telegram refuses the markup
// the same text arrives as plain text; another refusal is an error, with
// no plain retry. An invalid parse mode or thread id sends nothing.
func TestSendMessage(t *testing.T) {
	parseRefused := func(mode string) func(bottest.Call) (int, string) {
		return func(c bottest.Call) (int, string) {
			if c.Params["parse_mode"] == mode {
				return 400, "Bad Request: can't parse entities: Unsupported start tag \"x\" at byte offset 0"
			}
			return 0, ""
		}
	}
	for _, tc := range []struct {
		name, mode, text string
		reject           func(bottest.Call) (int, string)
		want             []string // parse_mode:text of each sendMessage
		err              string
	}{
		{name: "plain", text: "Model *switched* to x.y", want: []string{":Model *switched* to x.y"}},
		{name: "markdown", mode: "markdown", text: `Model *switched* to x\.y`, want: []string{`MarkdownV2:Model *switched* to x\.y`}},
		{name: "html", mode: "html", text: "Model <b>switched</b>", want: []string{"HTML:Model <b>switched</b>"}},
		{name: "html refused", mode: "html", text: "a <x>b", reject: parseRefused("HTML"),
			want: []string{"HTML:a <x>b", ":a <x>b"}},
		{name: "markdown refused", mode: "markdown", text: "a *b", reject: parseRefused("MarkdownV2"),
			want: []string{"MarkdownV2:a *b", ":a *b"}},
		{name: "forbidden", mode: "html", text: "<b>x</b>", reject: func(bottest.Call) (int, string) { return 403, "Forbidden: bot was blocked by the user" },
			want: []string{"HTML:<b>x</b>"}, err: "Forbidden"},
		{name: "invalid mode", mode: "MarkdownV2", text: "x", err: `invalid parseMode "MarkdownV2"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := start(t, nil, nil)
			if !h.p.SupportsMessaging() {
				t.Fatal("SupportsMessaging is false")
			}
			if tc.reject != nil {
				h.api.SetReject(tc.reject)
			}
			err := h.p.SendMessage(context.Background(), "-100123", "9", tc.text, plugin.SendOptions{ParseMode: tc.mode})
			if tc.err == "" && err != nil {
				t.Fatal(err)
			}
			if tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)) {
				t.Fatalf("error %v, want %q", err, tc.err)
			}
			var got []string
			for _, c := range h.api.CallsOf("sendMessage") {
				if c.Params["message_thread_id"] != "9" || c.Params["chat_id"] != "-100123" {
					t.Errorf("sent to %v", c)
				}
				got = append(got, c.Params["parse_mode"]+":"+c.Params["text"])
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("sends %q, want %q", got, tc.want)
			}
		})
	}
	h := start(t, nil, nil)
	if err := h.p.SendMessage(context.Background(), "-100123", "x", "hi", plugin.SendOptions{}); err == nil {
		t.Error("a bad thread id was accepted")
	}
}

func TestStartChecksAgents(t *testing.T) {
	api := bottest.New(t)
	p, err := newPlugin(t, api, map[string]any{"agentMapping": map[string]any{"default": "ghost", "5": "main"}}, &testutil.SyncBuffer{})
	if err != nil {
		t.Fatal(err)
	}
	err = p.Start(context.Background(), newFakePC("main"))
	if err == nil || !strings.Contains(err.Error(), "agentMapping.default") || !strings.Contains(err.Error(), `"ghost"`) {
		t.Fatalf("Start: %v, want an error naming agentMapping.default and ghost", err)
	}
	if err := p.Stop(context.Background()); err != nil {
		t.Error(err)
	}
}

func TestStartRefusedToken(t *testing.T) {
	api := bottest.New(t)
	api.SetToken("other:token")
	logs := &testutil.SyncBuffer{}
	p, err := newPlugin(t, api, nil, logs)
	if err != nil {
		t.Fatal(err)
	}
	err = p.Start(context.Background(), newFakePC())
	if err == nil || !strings.Contains(err.Error(), "refused the token") {
		t.Fatalf("Start: %v", err)
	}
	if strings.Contains(err.Error(), "TEST-secret") || strings.Contains(logs.String(), "TEST-secret") {
		t.Errorf("the token leaked: %v\n%s", err, logs)
	}
	p.Stop(context.Background())
	checkNoLeaks(t)
}

func TestUnreachableAPIKeepsTrying(t *testing.T) {
	api := bottest.New(t)
	url := api.URL()
	api.Close() // nothing listens there any more
	logs := &testutil.SyncBuffer{}
	p, err := newPlugin(t, nil, map[string]any{"apiUrl": url}, logs)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := p.Start(ctx, newFakePC()); err != nil {
		t.Fatalf("Start: %v", err)
	}
	time.Sleep(300 * time.Millisecond)
	cancel()
	sctx, scancel := context.WithTimeout(context.Background(), time.Second)
	defer scancel()
	if err := p.Stop(sctx); err != nil {
		t.Fatal(err)
	}
	checkNoLeaks(t)
	out := logs.String()
	if !strings.Contains(out, "cannot reach the Bot API") {
		t.Errorf("no warning logged:\n%s", out)
	}
	if strings.Contains(out, "TEST-secret") {
		t.Errorf("the token was logged:\n%s", out)
	}
}

func TestRegisterWithHost(t *testing.T) {
	t.Setenv("TELEGRAM_BOT_TOKEN", bottest.Token)
	src := `{
  llm: { providers: { anthropic: { apiKey: "x" } } },
  plugins: { telegram: { config: { token: "${TELEGRAM_BOT_TOKEN}", allowedUsers: [42], agentMapping: { default: "main" } } } },
  agents: { main: { model: { provider: "anthropic", model: "m" }, sandbox: { image: "i" } } },
}`
	dir := t.TempDir()
	hm := home.Home{Dir: filepath.Join(dir, "beige")}
	if _, err := hm.Setup(); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Parse(dir+"/config.json5", []byte(src), &config.LoadOptions{Builtins: plugin.Builtins()})
	if err != nil {
		t.Fatal(err)
	}
	lg := newAuditLogger(t, dir)
	host, err := plugin.NewHost(cfg, &plugin.Options{Home: hm, Audit: lg})
	if err != nil {
		t.Fatal(err)
	}
	defer host.Close(context.Background())
	ch := host.Channels()["telegram"]
	if ch == nil || ch.Name() != "telegram" {
		t.Fatalf("channels = %v", host.Channels())
	}
	if ch.SupportsMessaging() {
		t.Error("SupportsMessaging before Start")
	}
	for _, f := range []string{"plugin.json", "README.md", "SKILL.md"} {
		if _, err := os.Stat(filepath.Join(hm.ToolsDir(), "telegram", f)); err != nil {
			t.Errorf("docs not written: %v", err)
		}
	}
	p := ch.(*Plugin)
	if p.cfg.Token != bottest.Token || p.cfg.Defaults.Streaming == nil || !*p.cfg.Defaults.Streaming {
		t.Errorf("config = %+v", p.cfg)
	}

	bad := strings.Replace(src, `allowedUsers: [42], `, ``, 1)
	// Validation refuses it against the manifest's configSchema, with the
	// place; the plugin refuses it too, for a config not validated so.
	if _, err := config.Parse(dir+"/config.json5", []byte(bad), &config.LoadOptions{Builtins: plugin.Builtins()}); err == nil || !strings.Contains(err.Error(), `config.json5:3:34: plugins.telegram.config.allowedUsers: missing required field "allowedUsers"`) {
		t.Errorf("validation without allowedUsers: %v", err)
	}
	cfg, err = config.Parse(dir+"/config.json5", []byte(bad), nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := plugin.NewHost(cfg, &plugin.Options{Home: hm, Audit: lg}); err == nil || !strings.Contains(err.Error(), "allowedUsers") {
		t.Errorf("NewHost without allowedUsers: %v", err)
	}
}
