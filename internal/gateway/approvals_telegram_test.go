package gateway

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/beige-dev/beige/internal/audit"
	"github.com/beige-dev/beige/internal/channel/telegram/bottest"
	"github.com/beige-dev/beige/internal/llm/llmtest"
)

// TestTelegramApproval: an ask rule on exec "git push*" in a real gateway
// with the telegram channel against a Bot API server. Denied in Telegram,
// the call does not run and the model reads who refused it; "always" runs
// it and stops asking for the session; no answer in time denies. Every
// outcome is in the audit log with its approver.
func TestTelegramApproval(t *testing.T) {
	const user = 111
	bot := bottest.New(t)
	srv := llmtest.NewAnthropic(t)
	g := startGatewayWith(t, gatewaySetup{
		names:     []string{"tg"},
		providers: fmt.Sprintf(`p: { api: "anthropic-messages", baseUrl: %q, apiKey: "k" }`, srv.URL()),
		model:     "{ provider: 'p', model: 'm' }",
		plugins: fmt.Sprintf(`telegram: { config: { token: %q, allowedUsers: [%d], apiUrl: %q,
			agentMapping: { default: "AGENT" }, defaults: { verbose: false, streaming: false } } }`, bottest.Token, user, bot.URL()),
		extra:  map[string]string{"tg": `approval: { exec: ["git push*"], timeoutSeconds: 5 }`},
		rename: map[string]string{"AGENT": "tg"},
	})

	// asked waits for the n-th approval message and returns the callback
	// data of its button label.
	asked := func(n int, label string) (data string, msgID int) {
		t.Helper()
		var ask bottest.Call
		bot.WaitFor(fmt.Sprintf("approval message %d", n), func(calls []bottest.Call) bool {
			k := 0
			for _, c := range calls {
				if c.Method == "sendMessage" && c.Params["reply_markup"] != "" {
					if k++; k == n {
						ask = c
						return true
					}
				}
			}
			return false
		})
		var m struct {
			InlineKeyboard [][]struct {
				Text         string `json:"text"`
				CallbackData string `json:"callback_data"`
			} `json:"inline_keyboard"`
		}
		if err := json.Unmarshal([]byte(ask.Params["reply_markup"]), &m); err != nil {
			t.Fatal(err)
		}
		for _, row := range m.InlineKeyboard {
			for _, b := range row {
				if b.Text == label {
					return b.CallbackData, ask.ID
				}
			}
		}
		t.Fatalf("no %q button in %s", label, ask.Params["reply_markup"])
		return "", 0
	}
	tap := func(data string, msgID int) {
		bot.Push(map[string]any{"callback_query": map[string]any{
			"id": "q" + data, "chat_instance": "1", "data": data,
			"from":    map[string]any{"id": user, "is_bot": false, "first_name": "U", "username": "ann"},
			"message": map[string]any{"message_id": msgID, "date": time.Now().Unix(), "chat": map[string]any{"id": user, "type": "private"}},
		}})
	}
	answered := func(want string) {
		t.Helper()
		bot.WaitFor("the answer "+want, func(calls []bottest.Call) bool {
			for _, s := range bottest.SentTexts(calls, user) {
				if strings.Contains(s, want) {
					return true
				}
			}
			return false
		})
	}

	// Denied in Telegram: the model is told who refused.
	srv.Enqueue(llmtest.ToolCall("exec", map[string]any{"command": "git push origin main"}), llmtest.Text("not pushed"))
	bot.Message(user, user, 0, "push")
	tap(asked(1, "Deny"))
	answered("not pushed")
	if txt := srv.Last().AllText(); !strings.Contains(txt, "Permission denied: tool 'exec' blocked for agent '"+g.agents[0]+"': denied by @ann via telegram") {
		t.Errorf("the model was not told why: %s", txt)
	}

	// Always: it runs, and the next push of the session is not asked.
	srv.Enqueue(llmtest.ToolCall("exec", map[string]any{"command": "git push || true"}), llmtest.Text("pushed once"))
	bot.Message(user, user, 0, "push again")
	tap(asked(2, "Always for this session"))
	answered("pushed once")
	srv.Enqueue(llmtest.ToolCall("exec", map[string]any{"command": "git push -f || true"}), llmtest.Text("pushed twice"))
	bot.Message(user, user, 0, "and again")
	answered("pushed twice")

	// No answer in time denies (a call of the API's own session, which
	// no chat shows).
	start := time.Now()
	text, isErr := g.tool(t, g.agents[0], "exec", map[string]any{"command": "git push"})
	if !isErr || text != "Permission denied: tool 'exec' blocked for agent '"+g.agents[0]+"': no answer within 5 s" || time.Since(start) < 5*time.Second {
		t.Errorf("after %v: %q %v", time.Since(start), text, isErr)
	}

	recs, err := audit.ReadFile(g.home.AuditLog())
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range recs {
		if r.Tool == "exec" {
			got = append(got, r.Phase+"/"+r.Decision+"/"+r.Approval+"/"+r.ApprovedBy)
		}
	}
	want := []string{
		"pending/pending//", "finished/denied/deny/@ann via telegram",
		"pending/pending//", "started/allowed/always/@ann via telegram", "finished/allowed/always/@ann via telegram",
		"started/allowed/remembered/", "finished/allowed/remembered/",
		"pending/pending//", "finished/denied/timeout/",
	}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("audit\n%q\nwant\n%q", got, want)
	}
	n := 0
	for _, c := range bot.Snapshot() {
		if c.Method == "sendMessage" && c.Params["reply_markup"] != "" {
			n++
		}
	}
	if n != 2 { // the API's call is not shown in the chat
		t.Errorf("%d approval messages, want 2 (always stops asking)", n)
	}
}
