package telegram

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/go-telegram/bot"
	"github.com/go-telegram/bot/models"
)

// target is where a session's messages go.
type target struct {
	chatID   int64
	chat     string // chatID as text, or an @channel name given to SendMessage
	threadID int    // forum topic, 0 for none
	key      string // session key: <channel>:<chat>[:<thread>]
	agent    string
}

// chatRef is the chat_id to send to.
func (t target) chatRef() any {
	if t.chatID != 0 {
		return t.chatID
	}
	return t.chat
}

// The limits on Bot API calls: one attempt may take callTimeout; a call
// that fails for a reason that may pass (a 5xx, a 429, a timeout, a
// connection error) is retried with a growing delay, starting at
// retryFirst and at most retryMax apart (or as long as a 429's
// retry_after says), until sendDeadline after the first attempt. They are
// variables so that tests can shorten them.
var (
	callTimeout  = 30 * time.Second
	sendDeadline = 2 * time.Minute
	retryFirst   = time.Second
	retryMax     = 30 * time.Second
	// retryAfterUnit is the unit of a 429's retry_after.
	retryAfterUnit = time.Second
)

// withRetry runs one Bot API call, retrying it while it fails for a reason
// that may pass (see retryable), within sendDeadline. A 429's retry_after
// is honoured: when it points past the deadline the call fails at once.
func withRetry[T any](ctx context.Context, f func(context.Context) (T, error)) (T, error) {
	deadline := time.Now().Add(sendDeadline)
	delay := retryFirst
	for {
		cctx, cancel := context.WithTimeout(ctx, min(callTimeout, max(time.Until(deadline), time.Millisecond)))
		v, err := f(cctx)
		cancel()
		if err == nil || ctx.Err() != nil || !retryable(err) {
			return v, err
		}
		wait := delay
		delay = min(delay*2, retryMax)
		var tm *bot.TooManyRequestsError
		if errors.As(err, &tm) {
			wait = max(time.Duration(tm.RetryAfter)*retryAfterUnit, retryFirst)
		}
		if time.Now().Add(wait).After(deadline) {
			return v, err
		}
		if !sleep(ctx, wait) {
			return v, err
		}
	}
}

// retryable reports whether a failed Bot API call may work when tried
// again: Telegram refused it for a reason of its own (a 5xx, a 429, an
// answer that is not its JSON), or it did not answer in time, or the
// connection failed. A request Telegram judged (400, 401, 403, 404, 409,
// a migrated chat) fails the same way again.
func retryable(err error) bool {
	var mig *bot.MigrateError
	switch {
	case err == nil, errors.As(err, &mig):
		return false
	case errors.Is(err, bot.ErrorBadRequest), errors.Is(err, bot.ErrorUnauthorized),
		errors.Is(err, bot.ErrorForbidden), errors.Is(err, bot.ErrorNotFound), errors.Is(err, bot.ErrorConflict):
		return false
	}
	return true
}

// isParseError reports whether Telegram refused a message's formatting.
func isParseError(err error) bool {
	if err == nil || !errors.Is(err, bot.ErrorBadRequest) {
		return false
	}
	s := strings.ToLower(err.Error())
	return strings.Contains(s, "can't parse") || strings.Contains(s, "entit") ||
		strings.Contains(s, "can't find end")
}

// isNotModified reports whether an edit failed only because the text was
// already what it was edited to.
func isNotModified(err error) bool {
	return err != nil && errors.Is(err, bot.ErrorBadRequest) &&
		strings.Contains(strings.ToLower(err.Error()), "message is not modified")
}

// isGone reports whether the message to edit no longer exists.
func isGone(err error) bool {
	return err != nil && errors.Is(err, bot.ErrorBadRequest) &&
		strings.Contains(strings.ToLower(err.Error()), "message to edit not found")
}

// pieceText returns what a piece of an answer shows: without the line
// breaks before it and the white space after it (Telegram drops them),
// "" if it is blank.
func pieceText(piece string) string {
	body := strings.TrimRight(strings.TrimLeft(piece, "\r\n"), " \t\r\n")
	body = strings.ToValidUTF8(body, "\uFFFD")
	if strings.TrimSpace(body) == "" {
		return ""
	}
	return body
}

// sendText sends a Markdown text, cut into messages of at most
// MaxMessageLen characters. It returns the ids of the messages sent.
func (r *run) sendText(ctx context.Context, t target, text string) ([]int, error) {
	var ids []int
	off := 0
	for _, piece := range splitText(text, MaxMessageLen) {
		var in *fence
		if f, open := fenceAfter(text[:off]); open {
			in = &f
		}
		off += len(piece)
		id, err := r.sendPiece(ctx, t, piece, in)
		if err != nil {
			return ids, err
		}
		if id != 0 {
			ids = append(ids, id)
		}
	}
	return ids, nil
}

// sendPiece sends one piece of an answer (at most MaxMessageLen
// characters) as MarkdownV2, or as plain text if Telegram refuses the
// formatting. in is the fenced block the piece starts in, if any. A blank
// piece is not sent (id 0).
func (r *run) sendPiece(ctx context.Context, t target, piece string, in *fence) (int, error) {
	body := pieceText(piece)
	if body == "" {
		return 0, nil
	}
	if md := markdownV2(body, in); strings.TrimSpace(md) != "" {
		id, err := r.send(ctx, t, md, models.ParseModeMarkdown)
		if !isParseError(err) {
			return id, err
		}
		r.log.Debug("telegram: Markdown refused, sending plain text", "chat_id", t.chat, "error", r.redact(err))
	}
	return r.send(ctx, t, body, "")
}

// sendPlain sends a short text as it is (command replies, tool lines).
func (r *run) sendPlain(ctx context.Context, t target, text string) (int, error) {
	var id int
	for _, piece := range splitText(text, MaxMessageLen) {
		body := pieceText(piece)
		if body == "" {
			continue
		}
		n, err := r.send(ctx, t, body, "")
		if err != nil {
			return id, err
		}
		if id == 0 {
			id = n
		}
	}
	return id, nil
}

// sendMarkup sends a text written in mode (none: plain text), cut into
// messages of at most MaxMessageLen characters; a piece whose markup
// Telegram refuses is sent as plain text.
func (r *run) sendMarkup(ctx context.Context, t target, text string, mode models.ParseMode) error {
	for _, piece := range splitText(text, MaxMessageLen) {
		body := pieceText(piece)
		if body == "" {
			continue
		}
		if mode != "" {
			_, err := r.send(ctx, t, body, mode)
			if !isParseError(err) {
				if err != nil {
					return err
				}
				continue
			}
			r.log.Debug("telegram: markup refused, sending plain text", "chat_id", t.chat, "parse_mode", string(mode), "error", r.redact(err))
		}
		if _, err := r.send(ctx, t, body, ""); err != nil {
			return err
		}
	}
	return nil
}

// editPiece replaces the text of a message with a piece of an answer, as
// sendPiece sends it. Editing to the same text is not an error.
func (r *run) editPiece(ctx context.Context, t target, id int, piece string, in *fence) error {
	body := pieceText(piece)
	if body == "" {
		return nil
	}
	if md := markdownV2(body, in); strings.TrimSpace(md) != "" {
		err := r.edit(ctx, t, id, md, models.ParseModeMarkdown)
		if !isParseError(err) {
			return err
		}
		r.log.Debug("telegram: Markdown refused, editing to plain text", "chat_id", t.chat, "error", r.redact(err))
	}
	return r.edit(ctx, t, id, body, "")
}

func (r *run) send(ctx context.Context, t target, text string, mode models.ParseMode) (int, error) {
	msg, err := withRetry(ctx, func(ctx context.Context) (*models.Message, error) {
		return r.bot.SendMessage(ctx, &bot.SendMessageParams{
			ChatID:          t.chatRef(),
			MessageThreadID: t.threadID,
			Text:            text,
			ParseMode:       mode,
		})
	})
	if err != nil {
		return 0, r.apiError("sendMessage", err)
	}
	return msg.ID, nil
}

func (r *run) edit(ctx context.Context, t target, id int, text string, mode models.ParseMode) error {
	_, err := withRetry(ctx, func(ctx context.Context) (*models.Message, error) {
		return r.bot.EditMessageText(ctx, &bot.EditMessageTextParams{
			ChatID:    t.chatRef(),
			MessageID: id,
			Text:      text,
			ParseMode: mode,
		})
	})
	if err == nil || isNotModified(err) {
		return nil
	}
	return r.apiError("editMessageText", err)
}

// Reactions set on a user's message: on receipt, when answered, when the
// answer failed; reactionNone clears it.
const (
	reactionSeen   = "👀"
	reactionDone   = "🎉"
	reactionFailed = "😢"
	reactionNone   = ""
)

// react sets the bot's reaction on a message. Reactions are a courtesy:
// failures (reactions disabled in a group) are only logged at debug.
func (r *run) react(ctx context.Context, t target, msgID int, emoji string) {
	if msgID == 0 {
		return
	}
	params := &bot.SetMessageReactionParams{ChatID: t.chatRef(), MessageID: msgID}
	if emoji != reactionNone {
		params.Reaction = []models.ReactionType{{
			Type:              models.ReactionTypeTypeEmoji,
			ReactionTypeEmoji: &models.ReactionTypeEmoji{Type: models.ReactionTypeTypeEmoji, Emoji: emoji},
		}}
	}
	cctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	if _, err := r.bot.SetMessageReaction(cctx, params); err != nil && ctx.Err() == nil {
		r.log.Debug("telegram: setMessageReaction failed", "chat_id", t.chat, "error", r.redact(err))
	}
}

// typingEvery is how often the typing indicator is renewed while an agent
// works (Telegram shows it for 5 seconds).
const typingEvery = 4 * time.Second

// typing shows "typing…" in the chat until the returned stop is called;
// stop returns once the indicator's goroutine has ended.
func (r *run) typing(t target) (stop func()) {
	ctx, cancel := context.WithCancel(r.ctx)
	done := make(chan struct{})
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		defer close(done)
		tick := time.NewTicker(typingEvery)
		defer tick.Stop()
		for {
			cctx, ccancel := context.WithTimeout(ctx, callTimeout)
			_, err := r.bot.SendChatAction(cctx, &bot.SendChatActionParams{
				ChatID: t.chatRef(), MessageThreadID: t.threadID, Action: models.ChatActionTyping,
			})
			ccancel()
			if err != nil && ctx.Err() == nil {
				r.log.Debug("telegram: sendChatAction failed", "chat_id", t.chat, "error", r.redact(err))
			}
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	return func() {
		cancel()
		<-done
	}
}

// apiError wraps an error of a Bot API call, without the token.
func (r *run) apiError(method string, err error) error {
	if err == nil {
		return nil
	}
	return &apiError{method: method, msg: r.redact(err), err: err}
}

// apiError is a failed Bot API call; its text never holds the token.
type apiError struct {
	method string
	msg    string
	err    error
}

func (e *apiError) Error() string { return "telegram: " + e.method + ": " + e.msg }
func (e *apiError) Unwrap() error { return e.err }

// redact returns err's text without the bot token.
func (r *run) redact(err error) string {
	if err == nil {
		return ""
	}
	return redactToken(err.Error(), r.cfg.Token)
}

func redactToken(s, token string) string {
	if token == "" {
		return s
	}
	s = strings.ReplaceAll(s, token, "<token>")
	// The part after the bot id is the secret; never show it alone either.
	if _, secret, ok := strings.Cut(token, ":"); ok && len(secret) >= 8 {
		s = strings.ReplaceAll(s, secret, "<token>")
	}
	return s
}

// sessionKey builds <channel>:<chat>[:<thread>].
func sessionKey(channel string, chatID int64, threadID int) string {
	k := channel + ":" + strconv.FormatInt(chatID, 10)
	if threadID != 0 {
		k += ":" + strconv.Itoa(threadID)
	}
	return k
}
