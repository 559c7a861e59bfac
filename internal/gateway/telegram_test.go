package gateway

import (
	"fmt"
	"strings"
	"testing"

	"github.com/beige-dev/beige/internal/channel/telegram/bottest"
	"github.com/beige-dev/beige/internal/llm/llmtest"
)

// TestTelegramChannel runs the telegram plugin inside a real gateway
// against a Bot API server on loopback: answers, unknown users, /new,
// verbose mode and long answers.
func TestTelegramChannel(t *testing.T) {
	const user, stranger = 111, 999
	bot := bottest.New(t)
	srv := llmtest.NewAnthropic(t)
	startGatewayWith(t, gatewaySetup{
		names:     []string{"tg"},
		providers: fmt.Sprintf(`p: { api: "anthropic-messages", baseUrl: %q, apiKey: "k" }`, srv.URL()),
		model:     "{ provider: 'p', model: 'm' }",
		plugins: fmt.Sprintf(`telegram: { config: { token: %q, allowedUsers: [%d], apiUrl: %q,
			agentMapping: { default: "AGENT" }, defaults: { verbose: false, streaming: false } } }`, bottest.Token, user, bot.URL()),
		rename: map[string]string{"AGENT": "tg"},
	})
	texts := func() []string { return bottest.SentTexts(bot.Snapshot(), user) }
	waitText := func(what string, cond func([]string) bool) []string {
		t.Helper()
		bot.WaitFor(what, func([]bottest.Call) bool { return cond(texts()) })
		return texts()
	}
	has := func(want string) func([]string) bool {
		return func(ts []string) bool {
			for _, s := range ts {
				if strings.Contains(s, want) {
					return true
				}
			}
			return false
		}
	}

	// An allowed user's message gets the agent's answer.
	srv.Enqueue(llmtest.Text("hi there"))
	bot.Message(user, user, 0, "hello")
	waitText("the answer", has("hi there"))

	// A stranger gets nothing.
	before := srv.Count()
	bot.Message(stranger, stranger, 0, "let me in")
	srv.Enqueue(llmtest.Text("second answer"))
	bot.Message(user, user, 0, "again")
	waitText("the second answer", has("second answer"))
	if srv.Count() != before+1 || len(bottest.SentTexts(bot.Snapshot(), stranger)) != 0 {
		t.Errorf("the stranger was answered or reached the model")
	}
	if !strings.Contains(srv.Last().AllText(), "hello") {
		t.Error("the session lost its history")
	}

	// /new starts a fresh session: the model no longer sees "hello".
	bot.Message(user, user, 0, "/new")
	waitText("/new", has("New session"))
	srv.Enqueue(llmtest.Text("fresh"))
	bot.Message(user, user, 0, "anyone?")
	waitText("the fresh answer", has("fresh"))
	if strings.Contains(srv.Last().AllText(), "hello") {
		t.Error("/new kept the old history")
	}

	// /verbose on: a 🔧 message comes before the tool runs and the answer.
	bot.Message(user, user, 0, "/verbose on")
	srv.Enqueue(llmtest.ToolCall("exec", map[string]any{"command": "ls -la"}), llmtest.Text("listed"))
	bot.Message(user, user, 0, "list files")
	ts := waitText("the listed answer", has("listed"))
	tool, answer := -1, -1
	for i, s := range ts {
		if strings.Contains(s, "🔧 exec: ls -la") {
			tool = i
		}
		if strings.Contains(s, "listed") {
			answer = i
		}
	}
	if tool < 0 || tool > answer {
		t.Errorf("no 🔧 notice before the answer: %q", ts)
	}

	// A 10,000-character answer arrives in 3 messages.
	long := strings.Repeat("word ", 2000)
	n := len(texts())
	srv.Enqueue(llmtest.Text(long))
	bot.Message(user, user, 0, "/verbose off")
	bot.Message(user, user, 0, "say a lot")
	ts = waitText("the long answer", func(ts []string) bool {
		total := 0
		for _, s := range ts[min(n, len(ts)):] {
			total += len(s)
		}
		return total >= len(strings.TrimSpace(long))
	})
	var parts []string
	for _, s := range ts[n:] {
		if strings.HasPrefix(s, "word") {
			parts = append(parts, s)
		}
	}
	if len(parts) != 3 {
		t.Errorf("the long answer came in %d messages", len(parts))
	}
}
