package telegram

import (
	"context"
	"errors"
	"regexp"
	"strings"

	"github.com/go-telegram/bot"

	"github.com/beige-dev/beige/internal/proto"
	"github.com/beige-dev/beige/internal/routing"
)

// userError is the short text a chat is shown for a failed prompt. An
// error's own text can hold anything (a provider's answer, a URL with a
// key, a path on the host): only errors meant for clients (proto.Error)
// are shown as they are; the detail goes to the log.
func userError(err error) string {
	var pe *proto.Error
	var ex *routing.ExhaustedError
	switch {
	case errors.As(err, &pe) && pe.Msg != "":
		return clip(strings.TrimSpace(pe.Msg), 300) + "."
	case errors.Is(err, routing.ErrIdleTimeout):
		return "the model stopped answering."
	case errors.As(err, &ex):
		return "every model of the agent failed (try again later)."
	case errors.Is(err, context.DeadlineExceeded):
		return "the agent took too long."
	}
	return "the agent failed."
}

// deliveryReason says, briefly, why Telegram did not take an answer: ""
// or " (...)".
func deliveryReason(err error) string {
	var tm *bot.TooManyRequestsError
	switch {
	case errors.As(err, &tm):
		return " (Telegram asked to slow down)"
	case errors.Is(err, context.DeadlineExceeded):
		return " (Telegram did not answer in time)"
	case errors.Is(err, bot.ErrorBadRequest):
		return " (Telegram refused it)"
	case strings.Contains(err.Error(), "error response from telegram"):
		return " (Telegram is having trouble)"
	}
	return ""
}

// secretREs match secrets an error text may carry whatever their source:
// API keys, bearer tokens, key=value credentials in URLs and headers.
var secretREs = []*regexp.Regexp{
	regexp.MustCompile(`\b(sk|pk|rk)-[A-Za-z0-9_-]{8,}`),
	regexp.MustCompile(`(?i)\bbearer\s+[A-Za-z0-9._~+/=-]{8,}`),
	regexp.MustCompile(`(?i)\b((?:x-)?api[_-]?key|token|secret|password|key|access_token)(["']?\s*[:=]\s*["']?)[^\s"'&,;]{6,}`),
}

// redactSecrets returns s without the bot token and without what looks
// like a credential.
func (r *run) redactSecrets(s string) string {
	s = redactToken(s, r.cfg.Token)
	for i, re := range secretREs {
		if i == 2 {
			s = re.ReplaceAllString(s, "${1}${2}[redacted]")
		} else {
			s = re.ReplaceAllString(s, "[redacted]")
		}
	}
	return s
}
