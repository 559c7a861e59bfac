package httpapi

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync"

	"github.com/beige-dev/beige/internal/llm"
	"github.com/beige-dev/beige/internal/proto"
	"github.com/beige-dev/beige/internal/proto/llmproto"
)

// Streamer is the optional part of a Backend that proxies model calls.
type Streamer interface {
	// ChatStream runs the model call, calling emit with each event. An
	// error returned before the first emit is the request's error (a
	// *proto.Error for bad input); after that, failures are error events.
	ChatStream(ctx context.Context, req llmproto.ChatStreamRequest, emit func(llm.Event)) error
}

// Hooker is the optional part of a Backend that runs the hook endpoints.
type Hooker interface {
	PrePromptHook(ctx context.Context, agent string, req proto.PrePromptRequest) (proto.PrePromptResponse, error)
	PostResponseHook(ctx context.Context, agent string, req proto.PostResponseRequest) (proto.PostResponseResponse, error)
	SessionHook(ctx context.Context, agent, hook string, req proto.SessionHookRequest) error
}

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

func (s *Server) sessionModel(w http.ResponseWriter, r *http.Request) {
	mp, ok := s.backend.(ModelPinner)
	if !ok {
		s.notFound(w, r)
		return
	}
	var req proto.SessionModelRequest
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

func (s *Server) chatStream(w http.ResponseWriter, r *http.Request) {
	st, ok := s.backend.(Streamer)
	if !ok {
		s.notFound(w, r)
		return
	}
	var req llmproto.ChatStreamRequest
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
		var req proto.PrePromptRequest
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
		var req proto.PostResponseRequest
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
	case proto.HookSessionCreated, proto.HookSessionDisposed:
		var req proto.SessionHookRequest
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
