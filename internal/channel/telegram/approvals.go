package telegram

import (
	"strconv"
	"strings"
	"sync"

	"github.com/go-telegram/bot"
	"github.com/go-telegram/bot/models"

	"github.com/beige-dev/beige/internal/plugin"
)

// Tool calls that wait for approval (agents.<a>.approval): the chat of
// the call's session gets a message with three inline buttons — Approve,
// Deny, Always for this session —, an allowed user's tap answers, and the
// message is edited to say how it ended (whoever answered, on whichever
// channel). A tap is taken only from an allowed user, on the message the
// bot sent for that request, in that chat.

// callback_data of the buttons: "ap:<id>:<a|d|s>" (at most 64 bytes).
const approvalPrefix = "ap:"

var approvalCodes = map[string]string{"a": "approve", "d": "deny", "s": "always"}

// approvalMsg is where a request was asked.
type approvalMsg struct {
	t  target
	id int // the message's id; 0 while it is being sent
}

type approvals struct {
	ap   plugin.Approvals
	mu   sync.Mutex
	sent map[string]approvalMsg // request id -> its message
}

// maxApprovalEvents bounds the events waiting to be sent to Telegram.
const maxApprovalEvents = 64

// startApprovals subscribes to the gateway's approval requests, when its
// PluginContext offers them, until the run's work ends.
func (r *run) startApprovals() {
	ap, ok := r.pc.(plugin.Approvals)
	if !ok {
		return
	}
	r.approvals = &approvals{ap: ap, sent: map[string]approvalMsg{}}
	events := make(chan plugin.ApprovalEvent, maxApprovalEvents)
	cancel := ap.SubscribeApprovals(func(e plugin.ApprovalEvent) {
		if _, ok := r.approvalTarget(e.Session); !ok {
			return
		}
		select {
		case events <- e:
		default:
			r.log.Warn("telegram: too many approval requests at once; one is not shown here (answer it in the console)", "id", e.ID)
		}
	})
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		defer cancel()
		for {
			select {
			case <-r.ctx.Done():
				return
			case e := <-events:
				r.showApproval(e)
			}
		}
	}()
}

// approvalTarget is the chat of a session key of this channel.
func (r *run) approvalTarget(session string) (target, bool) {
	rest, ok := strings.CutPrefix(session, r.p.name+":")
	if !ok {
		return target{}, false
	}
	chat, thread, _ := strings.Cut(rest, ":")
	id, err := strconv.ParseInt(chat, 10, 64)
	if err != nil || id == 0 {
		return target{}, false
	}
	t := target{chatID: id, chat: chat}
	if thread != "" {
		n, err := strconv.Atoi(thread)
		if err != nil || n <= 0 {
			return target{}, false
		}
		t.threadID = n
	}
	t.key = sessionKey(r.p.name, t.chatID, t.threadID)
	return t, t.key == session
}

func approvalText(e plugin.ApprovalEvent) string {
	call := strings.Join(append([]string{e.Tool}, e.Args...), " ")
	return "⚠️ " + e.Agent + " wants to run:\n" + clip(call, 3000) + "\n(rule " + clip(e.Rule, 200) + ")"
}

func (r *run) showApproval(e plugin.ApprovalEvent) {
	t, _ := r.approvalTarget(e.Session)
	a := r.approvals
	if !e.Pending {
		a.mu.Lock()
		m, ok := a.sent[e.ID]
		delete(a.sent, e.ID)
		a.mu.Unlock()
		if ok {
			_, err := r.bot.EditMessageText(r.ctx, &bot.EditMessageTextParams{ChatID: m.t.chatRef(), MessageID: m.id, Text: approvalText(e) + "\n→ " + e.Outcome})
			if err != nil && !isNotModified(err) {
				r.logSendError(m.t, r.apiError("editMessageText", err))
			}
		}
		return
	}
	// Known before the message is sent: a tap can come in before
	// sendMessage's answer does (the user has the message first), and is
	// then checked against the chat alone.
	a.mu.Lock()
	a.sent[e.ID] = approvalMsg{t: t}
	a.mu.Unlock()
	button := func(text, code string) models.InlineKeyboardButton {
		return models.InlineKeyboardButton{Text: text, CallbackData: approvalPrefix + e.ID + ":" + code}
	}
	msg, err := r.bot.SendMessage(r.ctx, &bot.SendMessageParams{
		ChatID: t.chatRef(), MessageThreadID: t.threadID, Text: approvalText(e),
		ReplyMarkup: &models.InlineKeyboardMarkup{InlineKeyboard: [][]models.InlineKeyboardButton{
			{button("Approve", "a"), button("Deny", "d")},
			{button("Always for this session", "s")},
		}},
	})
	a.mu.Lock()
	if err != nil {
		delete(a.sent, e.ID)
	} else if _, still := a.sent[e.ID]; still {
		a.sent[e.ID] = approvalMsg{t: t, id: msg.ID}
	}
	a.mu.Unlock()
	if err != nil {
		r.logSendError(t, r.apiError("sendMessage", err))
	}
}

// onCallback answers a tap on an approval button.
func (r *run) onCallback(q *models.CallbackQuery) {
	reply := func(text string) {
		r.wg.Add(1)
		go func() {
			defer r.wg.Done()
			if _, err := r.bot.AnswerCallbackQuery(r.ctx, &bot.AnswerCallbackQueryParams{CallbackQueryID: q.ID, Text: text}); err != nil {
				r.log.Debug("telegram: answerCallbackQuery failed", "error", r.redact(err))
			}
		}()
	}
	if q.From.IsBot || !r.cfg.allowed(q.From.ID, q.From.Username) {
		r.log.Warn("telegram: approval button tapped by a user not in allowedUsers, ignored", "user_id", q.From.ID, "username", q.From.Username)
		reply("You may not answer this.")
		return
	}
	rest, ok := strings.CutPrefix(q.Data, approvalPrefix)
	id, code, ok2 := strings.Cut(rest, ":")
	decision, ok3 := approvalCodes[code]
	if !ok || !ok2 || !ok3 || r.approvals == nil {
		reply("")
		return
	}
	a := r.approvals
	a.mu.Lock()
	m, sent := a.sent[id]
	a.mu.Unlock()
	msg := q.Message.Message
	if !sent || msg == nil || msg.Chat.ID != m.t.chatID || (m.id != 0 && msg.ID != m.id) {
		reply("This request is no longer waiting.")
		return
	}
	by := "user " + strconv.FormatInt(q.From.ID, 10)
	if q.From.Username != "" {
		by = "@" + q.From.Username
	}
	if err := a.ap.AnswerApproval(id, decision, by, r.p.name); err != nil {
		reply("This request is no longer waiting.")
		return
	}
	r.log.Info("telegram: approval answered", "id", id, "decision", decision, "by", by)
	reply(map[string]string{"approve": "Approved", "deny": "Denied", "always": "Approved for this session"}[decision])
}
