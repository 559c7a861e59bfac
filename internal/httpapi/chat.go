package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"

	"github.com/beige-dev/beige/internal/llm"
)

// ChatStreamRequest is the body of POST /api/chat/stream. Its own fields
// and options are decoded strictly (a misspelt "modelId" or "maxTokens"
// would otherwise silently change the call); the context is pi's and is
// read leniently (see [llm.Context.UnmarshalJSON]): pi's clients send
// fields such as a tool's label or a message's usage that do not change
// what the model is sent.
type ChatStreamRequest struct {
	Provider   string       `json:"provider"`
	ModelID    string       `json:"modelId"`
	Context    llm.Context  `json:"context"`
	Options    *ChatOptions `json:"options,omitempty"`
	AgentName  string       `json:"agentName"`
	SessionKey string       `json:"sessionKey,omitempty"`
	// Partial false leaves the message so far out of the block events
	// (start keeps it), for a client that rebuilds it from the deltas,
	// as ours does: it is repeated in every event, so the stream's size
	// grows with the square of the answer's. Nil or true sends it, as
	// pi's clients need.
	Partial *bool `json:"partial,omitempty"`
}

// ChatOptions are the request options of a proxied model call.
type ChatOptions struct {
	// Reasoning turns thinking on (at the model's configured thinking
	// level, or medium), off, or to a level; nil keeps the configured one.
	Reasoning   *Reasoning `json:"reasoning,omitempty"`
	MaxTokens   int        `json:"maxTokens,omitempty"`
	Temperature *float64   `json:"temperature,omitempty"`
}

// Reasoning is options.reasoning: a bool (our clients, pi before its
// thinking levels) or one of pi's ThinkingLevel names, "minimal" to
// "xhigh" (what pi sends when the user picks a level); "off" is false.
type Reasoning struct {
	// Level is the level asked for, or "" for true and false.
	Level llm.ThinkingLevel
	// On is whether thinking is asked for at all.
	On bool
}

// UnmarshalJSON reads a bool or a level name.
func (r *Reasoning) UnmarshalJSON(b []byte) error {
	var on bool
	if err := json.Unmarshal(b, &on); err == nil {
		*r = Reasoning{On: on}
		return nil
	}
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return errors.New(`options.reasoning: want true, false or a thinking level (minimal, low, medium, high, xhigh)`)
	}
	l, err := llm.ParseThinkingLevel(s)
	if err != nil || s == "" {
		return fmt.Errorf(`options.reasoning: want true, false or a thinking level (minimal, low, medium, high, xhigh), got %q`, clipEcho(s))
	}
	if l == llm.ThinkingOff {
		*r = Reasoning{}
		return nil
	}
	*r = Reasoning{Level: l, On: true}
	return nil
}

// MarshalJSON writes the level, or the bool when there is none.
func (r Reasoning) MarshalJSON() ([]byte, error) {
	if r.On && r.Level != "" {
		return json.Marshal(string(r.Level))
	}
	return json.Marshal(r.On)
}

// Streamer is the optional part of a Backend that proxies model calls.
type Streamer interface {
	// ChatStream runs the model call, calling emit with each event. An
	// error returned before the first emit is the request's error (a
	// *proto.Error for bad input); after that, failures are error events.
	ChatStream(ctx context.Context, req ChatStreamRequest, emit func(llm.Event)) error
}

// Hooker is the optional part of a Backend that runs the hook endpoints.
type Hooker interface {
	PrePromptHook(ctx context.Context, agent string, req PrePromptRequest) (PrePromptResponse, error)
	PostResponseHook(ctx context.Context, agent string, req PostResponseRequest) (PostResponseResponse, error)
	SessionHook(ctx context.Context, agent, hook string, req SessionHookRequest) error
}

// Hook endpoint bodies, as http-api.md "Hook Endpoints".
type (
	PrePromptRequest struct {
		Message    string `json:"message"`
		SessionKey string `json:"sessionKey,omitempty"`
		Channel    string `json:"channel,omitempty"`
	}
	PrePromptResponse struct {
		Message string  `json:"message"`
		Block   bool    `json:"block"`
		Reason  *string `json:"reason"`
	}
	PostResponseRequest struct {
		Response   string `json:"response"`
		SessionKey string `json:"sessionKey,omitempty"`
		Channel    string `json:"channel,omitempty"`
	}
	PostResponseResponse struct {
		Response string `json:"response"`
		Block    bool   `json:"block"`
	}
	SessionHookRequest struct {
		SessionKey string `json:"sessionKey"`
		Channel    string `json:"channel,omitempty"`
	}
)

// Restarter is the optional part of a Backend that restarts the gateway.
type Restarter interface {
	// Restart starts a graceful restart and returns at once.
	Restart(ctx context.Context) error
}

func (s *Server) restart(w http.ResponseWriter, r *http.Request) {
	rs, ok := s.backend.(Restarter)
	if !ok {
		s.notFound(w, r)
		return
	}
	if err := rs.Restart(r.Context()); err != nil {
		s.writeErr(w, r, err)
		return
	}
	WriteJSON(w, http.StatusAccepted, map[string]string{
		"status":  "restarting",
		"message": "Graceful restart initiated. Follow progress with: beige gateway logs -f",
	})
}

// ModelPinner is the optional part of a Backend that pins a session to one
// of its agent's models.
type ModelPinner interface {
	SetSessionModel(ctx context.Context, agent, sessionKey, provider, modelID string) error
}

// SessionModelRequest is the body of PATCH /api/agents/:name/sessions/:key/model.
type SessionModelRequest struct {
	Provider string `json:"provider"`
	ModelID  string `json:"modelId"`
}

func (s *Server) sessionModel(w http.ResponseWriter, r *http.Request) {
	mp, ok := s.backend.(ModelPinner)
	if !ok {
		s.notFound(w, r)
		return
	}
	var req SessionModelRequest
	if err := DecodeBody(r, &req); err != nil {
		s.writeErr(w, r, err)
		return
	}
	if req.Provider == "" || req.ModelID == "" {
		WriteError(w, http.StatusBadRequest, `missing "provider" or "modelId"`)
		return
	}
	key := r.PathValue("key")
	if err := mp.SetSessionModel(r.Context(), r.PathValue("name"), key, req.Provider, req.ModelID); err != nil {
		s.writeErr(w, r, err)
		return
	}
	WriteJSON(w, http.StatusOK, map[string]string{"sessionKey": key, "provider": req.Provider, "modelId": req.ModelID})
}

// Session hook names of SessionHook.
const (
	HookSessionCreated  = "session-created"
	HookSessionDisposed = "session-disposed"
)

func (s *Server) chatStream(w http.ResponseWriter, r *http.Request) {
	st, ok := s.backend.(Streamer)
	if !ok {
		s.notFound(w, r)
		return
	}
	var req ChatStreamRequest
	if err := DecodeBody(r, &req); err != nil {
		s.writeErr(w, r, err)
		return
	}
	nd := &ndjson{w: w}
	err := st.ChatStream(r.Context(), req, nd.emit)
	if err != nil && !nd.started() {
		s.writeErr(w, r, err)
	}
}

// ndjson writes events as newline-delimited JSON, flushing each, and sends
// the 200 header with the first.
type ndjson struct {
	mu      sync.Mutex
	w       http.ResponseWriter
	began   bool
	failed  bool
	scratch []byte
}

func (n *ndjson) started() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.began
}

func (n *ndjson) emit(ev llm.Event) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.failed {
		return
	}
	if !n.began {
		n.w.Header().Set("Content-Type", "application/x-ndjson")
		n.w.Header().Set("Cache-Control", "no-cache")
		n.w.Header().Set("X-Accel-Buffering", "no")
		n.w.WriteHeader(http.StatusOK)
		n.began = true
	}
	if ev.Error != nil && strings.Contains(ev.Error.ErrorMessage, "://") {
		m := *ev.Error // the caller's message is not ours to change
		m.ErrorMessage = redactURLs(m.ErrorMessage)
		ev.Error = &m
	}
	b, err := json.Marshal(ev)
	if err != nil {
		return
	}
	n.scratch = append(append(n.scratch[:0], b...), '\n')
	if _, err := n.w.Write(n.scratch); err != nil {
		n.failed = true // the client went away; its context ends the call
		return
	}
	if f, ok := n.w.(http.Flusher); ok {
		f.Flush()
	}
}

func (s *Server) hook(w http.ResponseWriter, r *http.Request) {
	hk, ok := s.backend.(Hooker)
	if !ok {
		s.notFound(w, r)
		return
	}
	agent := r.PathValue("name")
	switch hook := r.PathValue("hook"); hook {
	case "pre-prompt":
		var req PrePromptRequest
		if err := DecodeBody(r, &req); err != nil {
			s.writeErr(w, r, err)
			return
		}
		res, err := hk.PrePromptHook(r.Context(), agent, req)
		if err != nil {
			s.writeErr(w, r, err)
			return
		}
		WriteJSON(w, http.StatusOK, res)
	case "post-response":
		var req PostResponseRequest
		if err := DecodeBody(r, &req); err != nil {
			s.writeErr(w, r, err)
			return
		}
		res, err := hk.PostResponseHook(r.Context(), agent, req)
		if err != nil {
			s.writeErr(w, r, err)
			return
		}
		WriteJSON(w, http.StatusOK, res)
	case HookSessionCreated, HookSessionDisposed:
		var req SessionHookRequest
		if err := DecodeBody(r, &req); err != nil {
			s.writeErr(w, r, err)
			return
		}
		if req.SessionKey == "" {
			WriteError(w, http.StatusBadRequest, `missing "sessionKey"`)
			return
		}
		if err := hk.SessionHook(r.Context(), agent, hook, req); err != nil {
			s.writeErr(w, r, err)
			return
		}
		WriteJSON(w, http.StatusOK, map[string]bool{"ok": true})
	default:
		WriteError(w, http.StatusNotFound, "no such hook: "+hook+" (pre-prompt, post-response, session-created, session-disposed)")
	}
}
