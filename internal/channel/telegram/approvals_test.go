package telegram

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/beige-dev/beige/internal/approval"
	"github.com/beige-dev/beige/internal/channel/telegram/bottest"
	"github.com/beige-dev/beige/internal/plugin"
)

// SubscribeApprovals implements plugin.Approvals over f.broker (none: no
// requests), as the gateway's does.
func (f *fakePC) SubscribeApprovals(fn func(plugin.ApprovalEvent)) func() {
	if f.broker == nil {
		return func() {}
	}
	return f.broker.Subscribe(func(e approval.Event) {
		ev := plugin.ApprovalEvent{Pending: e.Type == approval.EventPending, ID: e.Request.ID, Agent: e.Request.Agent,
			Session: e.Request.Session, Tool: e.Request.Tool, Args: e.Request.Args, Rule: e.Request.Rule}
		if !ev.Pending {
			ev.Outcome = "answered " + string(e.Outcome.Answer.Decision) + " by " + e.Outcome.Answer.Who()
		}
		fn(ev)
	})
}

func (f *fakePC) AnswerApproval(id, decision, by, via string) error {
	d, err := approval.ParseDecision(decision)
	if err != nil {
		return err
	}
	return f.broker.Answer(id, approval.Answer{Decision: d, By: by, Via: via})
}

// buttons returns the callback_data of a sendMessage's inline keyboard.
func buttons(t *testing.T, c bottest.Call) []string {
	t.Helper()
	var m struct {
		InlineKeyboard [][]struct {
			Text         string `json:"text"`
			CallbackData string `json:"callback_data"`
		} `json:"inline_keyboard"`
	}
	if err := json.Unmarshal([]byte(c.Params["reply_markup"]), &m); err != nil {
		t.Fatalf("reply_markup %q: %v", c.Params["reply_markup"], err)
	}
	var out []string
	for _, row := range m.InlineKeyboard {
		for _, b := range row {
			out = append(out, b.Text+"="+b.CallbackData)
		}
	}
	return out
}

// lastSend returns the last sendMessage of calls.
func lastSend(calls []bottest.Call) bottest.Call {
	var ask bottest.Call
	for _, c := range calls {
		if c.Method == "sendMessage" {
			ask = c
		}
	}
	return ask
}

func tap(api *bottest.Server, userID, chatID int64, msgID int, data string) {
	api.Push(map[string]any{"callback_query": map[string]any{
		"id":   "cq" + data,
		"from": map[string]any{"id": userID, "is_bot": false, "first_name": "U", "username": "user" + strconv.FormatInt(userID, 10)},
		"message": map[string]any{
			"message_id": msgID, "date": time.Now().Unix(),
			"chat": map[string]any{"id": chatID, "type": "private"},
		},
		"chat_instance": "1",
		"data":          data,
	}})
}

// TestApprovalButtons: a call of this chat's session that waits for
// approval is asked in the chat with Approve / Deny / Always buttons; a tap
// by a user not allowed, or on another chat's message, does nothing; an
// allowed user's Deny refuses the call, names them, and the message says so.
func TestApprovalButtons(t *testing.T) {
	pc := newFakePC()
	pc.broker = approval.New(approval.Options{})
	h := start(t, nil, pc)
	const chatID = userID // a private chat
	session := sessionKey(Name, chatID, 0)

	type res struct {
		o   approval.Outcome
		err error
	}
	done := make(chan res, 1)
	go func() {
		o, err := pc.broker.Wait(context.Background(), approval.Request{Agent: "main", Session: session, Tool: "exec", Args: []string{"git push origin"}, Rule: "exec:git push*"}, time.Minute)
		done <- res{o, err}
	}()
	// A request of another session is not shown here.
	other := make(chan struct{})
	go func() {
		defer close(other)
		_, _ = pc.broker.Wait(context.Background(), approval.Request{Agent: "main", Session: "webui:x", Tool: "exec", Args: []string{"rm -rf /"}, Rule: "exec:rm*"}, 200*time.Millisecond)
	}()
	calls := h.api.WaitFor("the approval message", func(calls []bottest.Call) bool {
		return len(bottest.SentTexts(calls, chatID)) > 0
	})
	ask := lastSend(calls)
	if !strings.Contains(ask.Params["text"], "main wants to run:\nexec git push origin") {
		t.Errorf("message %q", ask.Params["text"])
	}
	bs := buttons(t, ask)
	if len(bs) != 3 || !strings.HasPrefix(bs[0], "Approve=ap:") || !strings.HasPrefix(bs[1], "Deny=ap:") || !strings.HasPrefix(bs[2], "Always for this session=ap:") {
		t.Fatalf("buttons %v", bs)
	}
	deny := strings.SplitN(bs[1], "=", 2)[1]
	approve := strings.SplitN(bs[0], "=", 2)[1]
	<-other

	// Not allowed, or on a message the bot did not send for it: ignored.
	tap(h.api, 999, chatID, ask.ID, approve)
	tap(h.api, userID, chatID, ask.ID+100, approve)
	h.api.WaitFor("two refused taps", func(calls []bottest.Call) bool {
		n := 0
		for _, c := range calls {
			if c.Method == "answerCallbackQuery" {
				n++
			}
		}
		return n == 2
	})
	if p := pc.broker.Pending(""); len(p) != 1 {
		t.Fatalf("a refused tap answered the request: pending %v", p)
	}

	tap(h.api, userID, chatID, ask.ID, deny)
	var r res
	select {
	case r = <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the deny tap did not answer")
	}
	if r.err != nil || r.o.Approved || r.o.Answer.Decision != approval.Deny || r.o.Answer.Who() != "@user42 via telegram" {
		t.Fatalf("outcome %+v %v", r.o, r.err)
	}
	h.api.WaitFor("the message edited with the outcome", func(calls []bottest.Call) bool {
		for _, c := range calls {
			if c.Method == "editMessageText" && strings.Contains(c.Params["text"], "→ answered deny by @user42 via telegram") {
				return true
			}
		}
		return false
	})
	for _, c := range h.api.Snapshot() {
		if c.Method == "sendMessage" && strings.Contains(c.Params["text"], "rm -rf") {
			t.Errorf("another session's request was shown in this chat: %q", c.Params["text"])
		}
	}
}

// TestApprovalTapBeforeSendAnswer: the user can tap a button of the
// approval message before the channel has sendMessage's answer (the user
// gets the message first); that tap answers the request.
func TestApprovalTapBeforeSendAnswer(t *testing.T) {
	pc := newFakePC()
	pc.broker = approval.New(approval.Options{})
	h := start(t, nil, pc)
	const chatID = userID
	session := sessionKey(Name, chatID, 0)
	release := h.api.Hold("sendMessage")

	done := make(chan approval.Outcome, 1)
	go func() {
		o, _ := pc.broker.Wait(context.Background(), approval.Request{Agent: "main", Session: session, Tool: "exec", Args: []string{"git push"}, Rule: "exec:git push*"}, time.Minute)
		done <- o
	}()
	calls := h.api.WaitFor("the approval message", func(calls []bottest.Call) bool {
		return len(bottest.SentTexts(calls, chatID)) > 0
	})
	ask := lastSend(calls)
	approve := strings.SplitN(buttons(t, ask)[0], "=", 2)[1]
	tap(h.api, userID, chatID, ask.ID, approve) // sendMessage's reply is still held
	select {
	case o := <-done:
		if !o.Approved {
			t.Fatalf("outcome %+v", o)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a tap that came before sendMessage's answer did not answer the request")
	}
	release()
}
