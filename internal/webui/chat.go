package webui

import (
	"context"
	"encoding/json"
	"net/http"
	"time"

	"github.com/beige-dev/beige/internal/httpapi"
)

// Chat runs the Chat view's prompts; the gateway implements it over its
// agent manager.
type Chat interface {
	// PromptStream runs message in the agent's session, calling emit with
	// each event, from one goroutine, in order. An error returned before
	// the first emit is the request's (a *proto.Error keeps its status);
	// after that it is sent as an error event.
	PromptStream(ctx context.Context, agent, sessionKey, message string, emit func(ChatEvent)) error
	// Abort cancels the prompt running in the session; false: none ran.
	Abort(agent, sessionKey string) bool
	// NewSession starts the session afresh (/new).
	NewSession(ctx context.Context, agent, sessionKey string) error
	// History is the session so far, as the events a prompt would have
	// streamed, each user message a "user" event (resume).
	History(ctx context.Context, agent, sessionKey string) ([]ChatEvent, error)
	// SetThinking sets the session's thinking level (off, minimal, low,
	// medium, high, xhigh); "" returns it to the models' own.
	SetThinking(ctx context.Context, agent, sessionKey, level string) error
	// Thinking is the session's thinking level; "" for the models' own.
	Thinking(agent, sessionKey string) string
}

// ChatEvent is one line of the chat stream (application/x-ndjson).
type ChatEvent struct {
	// Type is text_delta, thinking_delta, tool_start, tool_end, done or
	// error; in a history also user (Text is the user's message).
	Type  string `json:"type"`
	Delta string `json:"delta,omitempty"`
	// ID, Tool and Args name a tool call (tool_start, tool_end).
	ID   string          `json:"id,omitempty"`
	Tool string          `json:"tool,omitempty"`
	Args json.RawMessage `json:"args,omitempty"`
	// Output, IsError, ExitCode and DurationMs are a tool call's result
	// (tool_end); ExitCode is set for exec.
	Output     string `json:"output,omitempty"`
	IsError    bool   `json:"isError,omitempty"`
	ExitCode   *int   `json:"exitCode,omitempty"`
	DurationMs int64  `json:"durationMs,omitempty"`
	// Text is the answer (done); Error what went wrong (error).
	Text  string `json:"text,omitempty"`
	Error string `json:"error,omitempty"`
}

// ChatRequest is the body of the chat endpoints.
type ChatRequest struct {
	Message    string `json:"message,omitempty"`
	SessionKey string `json:"sessionKey"`
	// Level is the thinking level (POST …/thinking).
	Level *string `json:"level,omitempty"`
}

func (u *UI) chatRequest(w http.ResponseWriter, r *http.Request) (ChatRequest, bool) {
	headers(w)
	var req ChatRequest
	if u.opts.Chat == nil {
		httpapi.WriteError(w, http.StatusNotFound, "chat is not available")
		return req, false
	}
	if err := httpapi.DecodeBody(r, &req); err != nil {
		writeErr(w, err)
		return req, false
	}
	if req.SessionKey == "" {
		req.SessionKey = "ui:" + r.PathValue("name") + ":default"
	}
	return req, true
}

// prompt streams a prompt's events as NDJSON.
func (u *UI) prompt(w http.ResponseWriter, r *http.Request) {
	req, ok := u.chatRequest(w, r)
	if !ok {
		return
	}
	if req.Message == "" {
		httpapi.WriteError(w, http.StatusBadRequest, `missing "message"`)
		return
	}
	rc := http.NewResponseController(w)
	started := false
	err := u.opts.Chat.PromptStream(r.Context(), r.PathValue("name"), req.SessionKey, req.Message, func(ev ChatEvent) {
		if !started {
			started = true
			w.Header().Set("Content-Type", "application/x-ndjson")
			w.WriteHeader(http.StatusOK)
		}
		// The events come on the prompt's goroutine: a client that stops
		// reading must not hold the prompt (and its session) for long.
		_ = rc.SetWriteDeadline(time.Now().Add(30 * time.Second))
		if writeJSONLine(w, ev) == nil {
			_ = rc.Flush()
		}
	})
	switch {
	case err != nil && !started:
		writeErr(w, err)
	case err != nil:
		_ = writeJSONLine(w, ChatEvent{Type: "error", Error: err.Error()})
	case !started:
		httpapi.WriteJSON(w, http.StatusOK, ChatEvent{Type: "done"})
	}
}

func (u *UI) abort(w http.ResponseWriter, r *http.Request) {
	req, ok := u.chatRequest(w, r)
	if !ok {
		return
	}
	httpapi.WriteJSON(w, http.StatusOK, map[string]bool{"aborted": u.opts.Chat.Abort(r.PathValue("name"), req.SessionKey)})
}

func (u *UI) newSession(w http.ResponseWriter, r *http.Request) {
	req, ok := u.chatRequest(w, r)
	if !ok {
		return
	}
	if err := u.opts.Chat.NewSession(r.Context(), r.PathValue("name"), req.SessionKey); err != nil {
		writeErr(w, err)
		return
	}
	httpapi.WriteJSON(w, http.StatusOK, map[string]string{"sessionKey": req.SessionKey})
}

// history returns the session's history: {"events": [...]}.
func (u *UI) history(w http.ResponseWriter, r *http.Request) {
	req, ok := u.chatRequest(w, r)
	if !ok {
		return
	}
	evs, err := u.opts.Chat.History(r.Context(), r.PathValue("name"), req.SessionKey)
	if err != nil {
		writeErr(w, err)
		return
	}
	if evs == nil {
		evs = []ChatEvent{}
	}
	httpapi.WriteJSON(w, http.StatusOK, struct {
		Events        []ChatEvent `json:"events"`
		ThinkingLevel string      `json:"thinkingLevel"`
	}{evs, u.opts.Chat.Thinking(r.PathValue("name"), req.SessionKey)})
}

// thinking sets the session's thinking level.
func (u *UI) thinking(w http.ResponseWriter, r *http.Request) {
	req, ok := u.chatRequest(w, r)
	if !ok {
		return
	}
	if req.Level == nil {
		httpapi.WriteError(w, http.StatusBadRequest, `missing "level" ("" for the models' own)`)
		return
	}
	if err := u.opts.Chat.SetThinking(r.Context(), r.PathValue("name"), req.SessionKey, *req.Level); err != nil {
		writeErr(w, err)
		return
	}
	httpapi.WriteJSON(w, http.StatusOK, map[string]string{"sessionKey": req.SessionKey, "level": *req.Level})
}
