package telegram

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/beige-dev/beige/internal/channel/telegram/bottest"
	"github.com/beige-dev/beige/internal/plugin"
)

// fastRetries shortens the retry timings so that a test of a failing Bot
// API takes a second, not minutes.
func fastRetries(t *testing.T) {
	t.Helper()
	saved := []time.Duration{callTimeout, sendDeadline, retryFirst, retryMax, retryAfterUnit}
	callTimeout, sendDeadline, retryFirst, retryMax, retryAfterUnit =
		400*time.Millisecond, 2*time.Second, 20*time.Millisecond, 200*time.Millisecond, 10*time.Millisecond
	t.Cleanup(func() {
		callTimeout, sendDeadline, retryFirst, retryMax, retryAfterUnit = saved[0], saved[1], saved[2], saved[3], saved[4]
	})
}

// reactionsOn returns the reactions set on a message, in order ("" for a
// cleared one).
func reactionsOn(calls []bottest.Call, msgID int) []string {
	var out []string
	for _, c := range calls {
		if c.Method != "setMessageReaction" || c.Params["message_id"] != strconv.Itoa(msgID) {
			continue
		}
		var rs []struct{ Emoji string }
		json.Unmarshal([]byte(c.Params["reaction"]), &rs)
		e := ""
		if len(rs) > 0 {
			e = rs[0].Emoji
		}
		out = append(out, e)
	}
	return out
}

func lastReactionIs(msgID int, emoji string) func([]bottest.Call) bool {
	return func(c []bottest.Call) bool {
		rs := reactionsOn(c, msgID)
		return len(rs) > 0 && rs[len(rs)-1] == emoji
	}
}

// failing fails the first n sendMessage calls whose text starts with
// prefix with fault.
func failing(n int, prefix string, fault bottest.Fault) func(bottest.Call) bottest.Fault {
	var mu sync.Mutex
	return func(c bottest.Call) bottest.Fault {
		mu.Lock()
		defer mu.Unlock()
		if c.Method != "sendMessage" || !strings.HasPrefix(c.Params["text"], prefix) || n == 0 {
			return bottest.Fault{}
		}
		n--
		return fault
	}
}

// TestAnswerSurvivesTransientFailures: a piece of an answer that Telegram
// fails to take for a reason that passes (a 5xx, a proxy's error page, a
// 429 asking to wait longer than 30 s, a call that times out) is sent
// again, and every piece after it too, in order; the 🎉 follows.
func TestAnswerSurvivesTransientFailures(t *testing.T) {
	faults := map[string]bottest.Fault{
		"500":             {Code: 500, Desc: "Internal Server Error"},
		"502 html":        {Code: 502, Body: "<html><body>502 Bad Gateway</body></html>"},
		"429 over 30 s":   {Code: 429, Desc: "Too Many Requests: retry after 31", RetryAfter: 31},
		"timeout":         {Delay: time.Second},
		"500 three times": {Code: 500, Desc: "Internal Server Error"},
	}
	for name, fault := range faults {
		for _, streaming := range []bool{false, true} {
			t.Run(name+"/streaming="+strconv.FormatBool(streaming), func(t *testing.T) {
				fastRetries(t)
				answer := longAnswer()
				pc := newFakePC()
				pc.answer = func(ctx context.Context, req plugin.PromptRequest) (*plugin.PromptResult, error) {
					return &plugin.PromptResult{Text: answer}, nil
				}
				h := start(t, map[string]any{"defaults": map[string]any{"streaming": streaming}}, pc)
				times := 1
				if strings.Contains(name, "three") {
					times = 3
				}
				// The second of the three pieces fails, times times.
				var mu sync.Mutex
				sends := 0
				h.api.SetFault(func(c bottest.Call) bottest.Fault {
					mu.Lock()
					defer mu.Unlock()
					if c.Method != "sendMessage" || !strings.HasPrefix(c.Params["text"], "line") {
						return bottest.Fault{}
					}
					sends++
					if sends >= 2 && sends < 2+times {
						return fault
					}
					return bottest.Fault{}
				})
				msg := h.api.Message(userID, userID, 0, "tell me everything")
				calls := h.api.WaitFor("the 🎉", func(c []bottest.Call) bool {
					rs := reactionsOn(c, msg)
					return len(rs) > 0 && rs[len(rs)-1] != "👀"
				})
				if rs := reactionsOn(calls, msg); rs[len(rs)-1] != "🎉" {
					t.Errorf("reactions %q, want the last 🎉", rs)
				}
				var parts []string
				for _, m := range finalTexts(calls, userID) {
					parts = append(parts, m.text)
				}
				if got := strings.Join(parts, "\n") + "\n"; got != answer {
					t.Errorf("the answer did not arrive whole: %d messages: %.200q", len(parts), parts)
				}
			})
		}
	}
}

// TestUndeliverableAnswerToldAndMarkedFailed: when an answer cannot be
// delivered within the deadline, the message gets 😢, not 🎉, and the user
// a short note saying so.
func TestUndeliverableAnswerToldAndMarkedFailed(t *testing.T) {
	for _, streaming := range []bool{false, true} {
		t.Run("streaming="+strconv.FormatBool(streaming), func(t *testing.T) {
			fastRetries(t)
			h := start(t, map[string]any{"defaults": map[string]any{"streaming": streaming}}, nil)
			h.api.SetFault(failing(-1, "echo", bottest.Fault{Code: 500, Desc: "Internal Server Error"}))
			msg := h.api.Message(userID, userID, 0, "hi")
			calls := h.api.WaitFor("a final reaction", func(c []bottest.Call) bool {
				rs := reactionsOn(c, msg)
				return len(rs) > 0 && rs[len(rs)-1] != "👀"
			})
			if rs := reactionsOn(calls, msg); rs[len(rs)-1] != "😢" {
				t.Errorf("reactions %q, want the last 😢", rs)
			}
			want := "😢 Sorry, the answer could not be delivered (Telegram is having trouble)."
			if texts := textsTo(calls, userID); !hasText(texts, want) {
				t.Errorf("messages %q, want %q", texts, want)
			}
			// The user was told: the message is not answered again.
			if q := readQueue(t, h.dir); len(q.Updates) != 0 {
				t.Errorf("queue after the user was told: %+v", q.Updates)
			}
		})
	}
}

// TestModelErrorIsShortAndSafe: a failed prompt shows a short message,
// never the error's text (which may hold a key or a host path); the log
// has the detail, without the secrets.
func TestModelErrorIsShortAndSafe(t *testing.T) {
	pc := newFakePC()
	pc.answer = func(ctx context.Context, req plugin.PromptRequest) (*plugin.PromptResult, error) {
		return nil, errors.New(`anthropic: 401 invalid x-api-key "sk-ant-api03-SECRETSECRETSECRET" (config /home/me/.beige/config.json5, token ` + bottest.Token + `)`)
	}
	h := start(t, nil, pc)
	msg := h.api.Message(userID, userID, 0, "hi")
	calls := h.api.WaitFor("the 😢", lastReactionIs(msg, "😢"))
	texts := textsTo(calls, userID)
	want := "⚠️ Sorry, no answer: the agent failed. The gateway log has the details."
	if !slices.Equal(texts, []string{want}) {
		t.Errorf("messages %q, want [%q]", texts, want)
	}
	logs := h.logs.String()
	if !strings.Contains(logs, "invalid x-api-key") {
		t.Errorf("the log lacks the detail:\n%s", logs)
	}
	for _, secret := range []string{"SECRETSECRET", "TEST-secret"} {
		if strings.Contains(logs, secret) {
			t.Errorf("the log shows %q:\n%s", secret, logs)
		}
	}
}

func readQueue(t *testing.T, dir string) queueState {
	t.Helper()
	var q queueState
	data, err := os.ReadFile(filepath.Join(dir, queueFile))
	if errors.Is(err, os.ErrNotExist) {
		return q
	}
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &q); err != nil {
		t.Fatalf("queue.json: %v\n%s", err, data)
	}
	return q
}

// TestMessagesSurviveRestart: messages accepted but not answered when the
// gateway stops are answered, in order and before new ones, by the next
// start; Telegram does not send them again (they were confirmed).
func TestMessagesSurviveRestart(t *testing.T) {
	api := bottest.New(t)
	dir := t.TempDir()
	pc := newFakePC()
	started := make(chan string, 4)
	pc.answer = func(ctx context.Context, req plugin.PromptRequest) (*plugin.PromptResult, error) {
		started <- req.Message
		<-ctx.Done()
		return nil, ctx.Err()
	}
	h := startIn(t, api, dir, nil, pc)
	first := api.Message(userID, userID, 0, "first")
	if got := <-started; got != "first" {
		t.Fatalf("started %q", got)
	}
	second := api.Message(userID, userID, 0, "second")
	api.WaitFor("the 👀 of both", func(c []bottest.Call) bool {
		return len(reactionsOn(c, first)) == 1 && len(reactionsOn(c, second)) == 1
	})
	// Let a getUpdates confirm both to Telegram, as it would.
	time.Sleep(200 * time.Millisecond)
	h.stop() // at once: the running prompt is cancelled

	h2 := startIn(t, api, dir, nil, nil) // answers "echo: ..."
	third := api.Message(userID, userID, 0, "third")
	calls := api.WaitFor("three answers", func(c []bottest.Call) bool {
		return len(textsTo(c, userID)) >= 3 && lastReactionIs(third, "🎉")(c)
	})
	if got, want := textsTo(calls, userID), []string{"echo: first", "echo: second", "echo: third"}; !slices.Equal(got, want) {
		t.Errorf("answers %q, want %q", got, want)
	}
	for _, id := range []int{first, second} {
		if !lastReactionIs(id, "🎉")(calls) {
			t.Errorf("message %d: reactions %q, want the last 🎉", id, reactionsOn(calls, id))
		}
	}
	if keys := h2.pc.promptKeys(); len(keys) != 3 {
		t.Errorf("the second start ran %d prompts, want 3 (each once)", len(keys))
	}
	h2.stop()
	if q := readQueue(t, dir); len(q.Updates) != 0 {
		t.Errorf("queue after all were answered: %+v", q.Updates)
	}
}

// TestStopDrainsRunningPrompt: Stop lets a running prompt finish and its
// answer be delivered; the message waiting behind it is not started, and
// is answered by the next start.
func TestStopDrainsRunningPrompt(t *testing.T) {
	api := bottest.New(t)
	dir := t.TempDir()
	pc := newFakePC()
	release := make(chan struct{})
	pc.answer = func(ctx context.Context, req plugin.PromptRequest) (*plugin.PromptResult, error) {
		select {
		case <-release:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		return &plugin.PromptResult{Text: "done: " + req.Message}, nil
	}
	h := startIn(t, api, dir, nil, pc)
	first := api.Message(userID, userID, 0, "first")
	second := api.Message(userID, userID, 0, "second")
	api.WaitFor("the 👀 of both", func(c []bottest.Call) bool {
		return len(reactionsOn(c, first)) == 1 && len(reactionsOn(c, second)) == 1
	})
	// As the gateway stops: the channels' context ends, then Stop.
	h.cancel()
	stopped := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		stopped <- h.p.Stop(ctx)
	}()
	time.Sleep(100 * time.Millisecond)
	close(release)
	if err := <-stopped; err != nil {
		t.Fatalf("Stop: %v", err)
	}
	calls := api.Snapshot()
	if got := textsTo(calls, userID); !slices.Equal(got, []string{"done: first"}) {
		t.Errorf("answers during the drain %q, want [done: first]", got)
	}
	if !lastReactionIs(first, "🎉")(calls) {
		t.Errorf("reactions on the first %q", reactionsOn(calls, first))
	}
	if n := h.pc.promptCount(); n != 1 {
		t.Errorf("%d prompts ran, want 1", n)
	}

	startIn(t, api, dir, nil, nil)
	api.WaitFor("the second answered", lastReactionIs(second, "🎉"))
	if got := textsTo(api.Snapshot(), userID); !slices.Equal(got, []string{"done: first", "echo: second"}) {
		t.Errorf("answers %q", got)
	}
}

// TestQueuedMessageGivenUp: a message that was being worked on at
// maxAttempts starts (each ended by a crash, say) is not tried again; the
// user is told.
func TestQueuedMessageGivenUp(t *testing.T) {
	dir := t.TempDir()
	q := queueState{Version: queueVersion, Updates: []inbound{{
		UpdateID: 7, MsgID: 55, ChatID: userID, ChatType: "private", FromID: userID, Text: "crash me",
		Attempts: maxAttempts, Received: time.Now(),
	}}}
	data, _ := json.Marshal(q)
	if err := os.WriteFile(filepath.Join(dir, queueFile), data, 0o600); err != nil {
		t.Fatal(err)
	}
	h := startIn(t, bottest.New(t), dir, nil, nil)
	calls := h.api.WaitFor("the 😢", lastReactionIs(55, "😢"))
	if texts := textsTo(calls, userID); len(texts) != 1 || !strings.HasPrefix(texts[0], "😢 Sorry, I could not answer") {
		t.Errorf("messages %q", texts)
	}
	if n := h.pc.promptCount(); n != 0 {
		t.Errorf("%d prompts ran", n)
	}
	h.api.WaitFor("the queue emptied", func([]bottest.Call) bool { return len(readQueue(t, dir).Updates) == 0 })
}

// TestQueuedMessageFromRemovedUser: a queued message is checked against
// the allowlist of the start that answers it.
func TestQueuedMessageFromRemovedUser(t *testing.T) {
	dir := t.TempDir()
	q := queueState{Version: queueVersion, Updates: []inbound{{
		UpdateID: 7, MsgID: 55, ChatID: otherID, ChatType: "private", FromID: otherID, Text: "hi", Received: time.Now(),
	}}}
	data, _ := json.Marshal(q)
	if err := os.WriteFile(filepath.Join(dir, queueFile), data, 0o600); err != nil {
		t.Fatal(err)
	}
	h := startIn(t, bottest.New(t), dir, nil, nil)
	h.api.Message(userID, userID, 0, "me")
	calls := h.api.WaitFor("the answer", func(c []bottest.Call) bool { return hasText(textsTo(c, userID), "echo: me") })
	if texts := textsTo(calls, otherID); len(texts) != 0 {
		t.Errorf("answered a user not allowed: %q", texts)
	}
	if n := h.pc.promptCount(); n != 1 {
		t.Errorf("%d prompts ran, want 1", n)
	}
}

// TestUsernameInAllowlistWarned: an @username in allowedUsers is accepted
// with a warning at start.
func TestUsernameInAllowlistWarned(t *testing.T) {
	h := start(t, nil, nil) // allowedUsers: [42, "@alice_x"]
	if !strings.Contains(h.logs.String(), `\"@alice_x\" is a username, which can change hands`) {
		t.Errorf("no warning about @alice_x:\n%s", h.logs)
	}
	cfg, err := ParseConfig(Name, map[string]any{
		"token": "1:abc", "allowedUsers": []any{float64(5), "9"}, "agentMapping": map[string]any{"default": "main"},
	})
	if err != nil {
		t.Fatal(err)
	}
	if w := cfg.Warnings(Name); len(w) != 0 {
		t.Errorf("warnings for numeric ids: %q", w)
	}
}

// TestPromptCancelledByShutdownStaysQueued: the gateway cancels the
// prompts it could not drain; such a prompt is neither reported as failed
// nor dropped: the next start answers it.
func TestPromptCancelledByShutdownStaysQueued(t *testing.T) {
	api := bottest.New(t)
	dir := t.TempDir()
	pc := newFakePC()
	started := make(chan struct{}, 1)
	gatewayDrained := make(chan struct{})
	pc.answer = func(ctx context.Context, req plugin.PromptRequest) (*plugin.PromptResult, error) {
		started <- struct{}{}
		<-gatewayDrained // the gateway's drain time is over: it aborts the prompt
		return nil, errors.New("agent: prompt aborted: the gateway is shutting down")
	}
	h := startIn(t, api, dir, nil, pc)
	msg := api.Message(userID, userID, 0, "long job")
	<-started
	h.cancel() // the gateway stops: the channels' context ends first
	time.Sleep(50 * time.Millisecond)
	close(gatewayDrained)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := h.p.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	calls := api.Snapshot()
	if texts := textsTo(calls, userID); len(texts) != 0 {
		t.Errorf("sent %q at shutdown", texts)
	}
	if rs := reactionsOn(calls, msg); !slices.Equal(rs, []string{"👀"}) {
		t.Errorf("reactions %q, want only 👀", rs)
	}
	if q := readQueue(t, dir); len(q.Updates) != 1 {
		t.Fatalf("queue %+v, want the message", q.Updates)
	}
	startIn(t, api, dir, nil, nil)
	api.WaitFor("the answer after the restart", lastReactionIs(msg, "🎉"))
}

// TestCommandErrorIsShortAndSafe: a command whose work fails (/compact
// asks the model) shows a short text, not the error's.
func TestCommandErrorIsShortAndSafe(t *testing.T) {
	pc := newFakePC()
	pc.compactErr = errors.New(`compact: anthropic: 401 invalid x-api-key "sk-ant-api03-SECRETSECRETSECRET"`)
	h := start(t, nil, pc)
	h.api.Message(userID, userID, 0, "/compact")
	want := "⚠️ Could not compact the session: the agent failed."
	calls := h.api.WaitFor("the reply", func(c []bottest.Call) bool { return len(textsTo(c, userID)) > 0 })
	if texts := textsTo(calls, userID); !slices.Equal(texts, []string{want}) {
		t.Errorf("replies %q, want [%q]", texts, want)
	}
	if logs := h.logs.String(); !strings.Contains(logs, "invalid x-api-key") || strings.Contains(logs, "SECRETSECRET") {
		t.Errorf("the log lacks the detail or shows the key:\n%s", logs)
	}
}
