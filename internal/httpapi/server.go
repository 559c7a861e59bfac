// Package httpapi is the gateway's HTTP API (http-api.md): routing, the
// DNS-rebinding guard, the browser (CSRF) guard, bearer-token auth, body
// limits and JSON errors. It owns no state: every endpoint calls the Backend.
// Its request and response bodies are in internal/proto and
// internal/proto/llmproto, so that clients need not import this package.
package httpapi

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/beige-dev/beige/internal/metrics"
	"github.com/beige-dev/beige/internal/proto"
	"github.com/beige-dev/beige/internal/proto/llmproto"
)

// MaxBodyBytes caps request bodies.
const MaxBodyBytes = 10 << 20

// Backend is what the API serves. The gateway implements it; tests use a stub.
type Backend interface {
	Health(ctx context.Context) proto.Health
	Agents(ctx context.Context) []proto.AgentInfo
	Config(ctx context.Context) proto.ConfigView
	// Exec runs a core tool. Bad input is a *proto.Error with status 400,
	// an unknown agent one with 404.
	Exec(ctx context.Context, agent string, req proto.ExecRequest) (proto.ToolResult, error)
	// Models lists the agent's models (primary, then fallbacks) with metadata.
	Models(ctx context.Context, agent string) ([]llmproto.AgentModel, error)
	// Prompt runs a prompt in a session and returns the final answer.
	Prompt(ctx context.Context, agent string, req proto.PromptRequest) (proto.PromptResponse, error)
	// Sessions lists an agent's saved sessions.
	Sessions(ctx context.Context, agent string) ([]proto.SessionInfo, error)
}

// Options configures the server. Host is the configured gateway.host; it
// is accepted in Host headers besides the loopback names.
type Options struct {
	Host      string
	AuthToken string // when set, every request needs Authorization: Bearer <token>
	Logger    *slog.Logger
	// Metrics counts the requests by route pattern and status, and is
	// served at GET /metrics behind the same guard and token; nil: neither.
	Metrics *metrics.Metrics
}

// Server is the HTTP handler of the API.
type Server struct {
	backend Backend
	opts    Options
	log     *slog.Logger
	mux     *http.ServeMux

	bodyTimeout time.Duration // set by HTTPServer; 0: no deadline
	reads       bodyReads
	// public are the routes ("METHOD /path", exact) served without the
	// token: the console's login page and its assets (HandlePublic).
	public map[string]bool
	// login maps a page's path to its login page: a browser that asks for
	// the page without the token is sent there (RedirectToLogin).
	login map[string]string
}

// New returns the API handler.
func New(b Backend, opts Options) *Server {
	s := &Server{backend: b, opts: opts, log: opts.Logger, mux: http.NewServeMux()}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	s.mux.HandleFunc("GET /api/health", s.health)
	s.mux.HandleFunc("GET /api/agents", s.agents)
	s.mux.HandleFunc("GET /api/config", s.config)
	s.mux.HandleFunc("POST /api/agents/{name}/exec", s.exec)
	s.mux.HandleFunc("GET /api/agents/{name}/models", s.models)
	s.mux.HandleFunc("POST /api/agents/{name}/prompt", s.prompt)
	s.mux.HandleFunc("GET /api/agents/{name}/sessions", s.sessions)
	s.mux.HandleFunc("POST /api/chat/stream", s.chatStream)
	s.mux.HandleFunc("POST /api/gateway/restart", s.restart)
	s.mux.HandleFunc("PATCH /api/agents/{name}/sessions/{key}/model", s.sessionModel)
	s.mux.HandleFunc("POST /api/agents/{name}/hooks/{hook}", s.hook)
	s.mux.HandleFunc("GET /api/approvals", s.approvals)
	s.mux.HandleFunc("POST /api/approvals/{id}", s.answerApproval)
	s.handleMetrics()
	s.mux.HandleFunc("/", s.notFound)
	return s
}

// NewMetrics returns a handler that serves only GET /metrics, behind the
// same DNS-rebinding and browser guards and the same token as the API: the
// gateway.metrics.listen listener.
func NewMetrics(opts Options) *Server {
	s := &Server{opts: opts, log: opts.Logger, mux: http.NewServeMux()}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	s.handleMetrics()
	s.mux.HandleFunc("/", s.notFound)
	return s
}

func (s *Server) handleMetrics() {
	if s.opts.Metrics != nil {
		s.mux.Handle("GET /metrics", s.opts.Metrics.Handler())
	}
}

// isPublic reports whether r is for a public route: its exact method and
// path, written without escapes (so that the mux, which routes on the
// escaped path, cannot see another route than the one checked here).
func (s *Server) isPublic(r *http.Request) bool {
	return r.URL.RawPath == "" && s.public[r.Method+" "+r.URL.Path]
}

// RedirectToLogin sends a GET of path without the token to the login page
// instead of answering 401 (for a page a person opens in a browser).
func (s *Server) RedirectToLogin(path, login string) {
	if s.login == nil {
		s.login = map[string]string{}
	}
	s.login[path] = login
}

// Handle adds an endpoint (for the parts of the API that other packages serve).
func (s *Server) Handle(pattern string, h http.HandlerFunc) { s.mux.HandleFunc(pattern, h) }

// HandlePublic adds an endpoint that is served without the token (the web
// console's login page, its assets and the login itself): method and path
// are matched exactly, and the DNS-rebinding and browser guards still apply.
// Everything else needs the token, whatever the mux would match.
func (s *Server) HandlePublic(method, path string, h http.HandlerFunc) {
	if s.public == nil {
		s.public = map[string]bool{}
	}
	s.public[method+" "+path] = true
	s.mux.HandleFunc(method+" "+path, h)
}

func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	if s.opts.Metrics != nil {
		sw := &statusWriter{ResponseWriter: w}
		w = sw
		// r.Pattern is the route the mux matched, set by it on r: a
		// request refused before routing has none. Never the raw path.
		defer func() { s.opts.Metrics.HTTPRequest(r.Pattern, sw.code(), time.Since(start)) }()
	}
	defer s.guardBody(w, r)() // first: an early answer must not wait for a slow body either
	if !s.hostAllowed(r.Host) {
		WriteError(w, http.StatusForbidden, fmt.Sprintf("host %q is not allowed (DNS-rebinding guard: use 127.0.0.1 or the configured gateway.host)", r.Host))
		return
	}
	if why := crossSite(r); why != "" {
		s.log.Warn("refused a cross-site request (a web page tried to drive the API)", "method", r.Method, "path", r.URL.Path, "why", truncate(why, 200))
		WriteError(w, http.StatusForbidden, "cross-site requests are refused (browsers may only call the API from the gateway's own origin)")
		return
	}
	if s.opts.AuthToken != "" && !s.isPublic(r) && !s.authorized(r) {
		if to, ok := s.login[r.URL.Path]; ok && r.Method == http.MethodGet {
			http.Redirect(w, r, to, http.StatusSeeOther) // the page is not served: its login is
			return
		}
		w.Header().Set("WWW-Authenticate", `Bearer realm="beige"`)
		WriteError(w, http.StatusUnauthorized, "missing or wrong bearer token (send Authorization: Bearer <gateway.authToken>)")
		return
	}
	if why := badContentType(r); why != "" {
		WriteError(w, http.StatusUnsupportedMediaType, why)
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, MaxBodyBytes)
	s.mux.ServeHTTP(w, r)
	s.log.Debug("http", "method", r.Method, "path", r.URL.Path, "duration", time.Since(start))
}

// statusWriter records the status of a response, for the metrics. It
// passes Flush through and unwraps for http.ResponseController.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 && code >= 200 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

func (w *statusWriter) Flush() {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// code is the status sent; 200 when the handler wrote nothing.
func (w *statusWriter) code() int {
	if w.status == 0 {
		return http.StatusOK
	}
	return w.status
}

// truncate cuts s to at most n bytes, for logging what a client sent.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "") + "…"
}

// authorized reports whether r carries the token: as a bearer token, or in
// the web console's cookie (TokenCookie), which is worth the same. The
// cookie is safe to accept on every route because a cross-site request is
// refused before this (crossSite) and the cookie is SameSite=Strict.
func (s *Server) authorized(r *http.Request) bool {
	if tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok {
		return subtle.ConstantTimeCompare([]byte(tok), []byte(s.opts.AuthToken)) == 1
	}
	ok := false
	for _, tok := range CookieTokens(r) {
		ok = subtle.ConstantTimeCompare([]byte(tok), []byte(s.opts.AuthToken)) == 1 || ok
	}
	return ok
}

// hostAllowed is the DNS-rebinding guard: a page on evil.example that
// resolves its name to 127.0.0.1 sends "Host: evil.example", which we refuse.
// Loopback names and addresses are allowed, and the configured host; when
// the gateway listens on every interface, any IP address literal is too
// (rebinding needs a DNS name).
func (s *Server) hostAllowed(hostport string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.Trim(host, "[]"), ".")
	if strings.EqualFold(host, "localhost") || strings.EqualFold(host, s.opts.Host) {
		return true
	}
	ip := net.ParseIP(host)
	if ip == nil {
		return false
	}
	if ip.IsLoopback() {
		return true
	}
	if c := net.ParseIP(s.opts.Host); c != nil && c.IsUnspecified() {
		return true
	}
	return false
}

func (s *Server) notFound(w http.ResponseWriter, r *http.Request) {
	WriteError(w, http.StatusNotFound, fmt.Sprintf("no such endpoint: %s %s", r.Method, r.URL.Path))
}

// WriteJSON writes v as the JSON response body.
func WriteJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
}

// WriteError writes {"error": msg}, with the userinfo and query of any URL
// in msg left out (see PublicURL).
func WriteError(w http.ResponseWriter, status int, msg string) {
	WriteJSON(w, status, proto.ErrorBody{Error: redactURLs(msg)})
}

// writeErr maps an error from the backend to a response: a *proto.Error
// keeps its status; anything else is a 500.
func (s *Server) writeErr(w http.ResponseWriter, r *http.Request, err error) {
	var pe *proto.Error
	if errors.As(err, &pe) {
		WriteError(w, pe.Status, pe.Msg)
		return
	}
	if errors.Is(err, context.Canceled) && r.Context().Err() != nil {
		return // the client went away
	}
	s.log.Error("request failed", "method", r.Method, "path", r.URL.Path, "err", err)
	WriteError(w, http.StatusInternalServerError, err.Error())
}

// DecodeBody decodes a JSON request body strictly into v: one object, no
// unknown fields, within MaxBodyBytes. The error is client-visible.
func DecodeBody(r *http.Request, v any) error {
	if r.Body == nil {
		return proto.Errorf(http.StatusBadRequest, "missing request body")
	}
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return bodyError(err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return proto.Errorf(http.StatusBadRequest, "invalid JSON body: trailing data after the object")
	}
	return nil
}

func bodyError(err error) error {
	var mbe *http.MaxBytesError
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case isTimeout(err):
		return proto.Errorf(http.StatusRequestTimeout, "the request body did not arrive in time")
	case errors.As(err, &mbe):
		return proto.Errorf(http.StatusRequestEntityTooLarge, "request body too large (limit %d MB)", mbe.Limit>>20)
	case errors.Is(err, io.EOF):
		return proto.Errorf(http.StatusBadRequest, "missing request body (want a JSON object)")
	case errors.Is(err, io.ErrUnexpectedEOF):
		return proto.Errorf(http.StatusBadRequest, "invalid JSON body: unexpected end of input")
	case errors.As(err, &se):
		return proto.Errorf(http.StatusBadRequest, "invalid JSON body at byte %d: %v", se.Offset, se)
	case errors.As(err, &te):
		field := clipEcho(te.Field)
		if field == "" {
			return proto.Errorf(http.StatusBadRequest, "invalid JSON body: want an object, got %s", te.Value)
		}
		return proto.Errorf(http.StatusBadRequest, "invalid JSON body: %s: want %s, got %s", field, te.Type, te.Value)
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		return proto.Errorf(http.StatusBadRequest, "invalid JSON body: unknown field %s", clipEcho(strings.TrimPrefix(err.Error(), "json: unknown field ")))
	}
	return proto.Errorf(http.StatusBadRequest, "invalid JSON body: %v", err)
}

// clipEcho bounds a part of the client's body echoed in an error (a field
// name can be as long as the body), on a rune boundary.
func clipEcho(s string) string {
	const max = 120
	if len(s) <= max {
		return s
	}
	n := max
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

func (s *Server) health(w http.ResponseWriter, r *http.Request) {
	h := s.backend.Health(r.Context())
	status := http.StatusOK
	if h.Status != "ok" {
		status = http.StatusServiceUnavailable
	}
	WriteJSON(w, status, h)
}

func (s *Server) agents(w http.ResponseWriter, r *http.Request) {
	WriteJSON(w, http.StatusOK, proto.AgentList{Agents: s.backend.Agents(r.Context())})
}

func (s *Server) config(w http.ResponseWriter, r *http.Request) {
	v := s.backend.Config(r.Context())
	if v.LLM.Providers != nil { // a baseUrl may hold user:password or ?key=
		providers := make(map[string]proto.ProviderView, len(v.LLM.Providers))
		for name, p := range v.LLM.Providers {
			if p.BaseURL != nil {
				pub := PublicURL(*p.BaseURL)
				p.BaseURL = &pub
			}
			providers[name] = p
		}
		v.LLM.Providers = providers
	}
	WriteJSON(w, http.StatusOK, v)
}

func (s *Server) exec(w http.ResponseWriter, r *http.Request) {
	var req proto.ExecRequest
	if err := DecodeBody(r, &req); err != nil {
		s.writeErr(w, r, err)
		return
	}
	if req.Tool == "" {
		WriteError(w, http.StatusBadRequest, `missing "tool" (one of read, write, patch, exec)`)
		return
	}
	res, err := s.backend.Exec(r.Context(), r.PathValue("name"), req)
	if err != nil {
		s.writeErr(w, r, err)
		return
	}
	WriteJSON(w, http.StatusOK, res)
}

func (s *Server) models(w http.ResponseWriter, r *http.Request) {
	ms, err := s.backend.Models(r.Context(), r.PathValue("name"))
	if err != nil {
		s.writeErr(w, r, err)
		return
	}
	ms = slices.Clone(ms) // the backend's slice is not ours to change
	for i := range ms {
		if ms[i].BaseURL != "" {
			ms[i].BaseURL = PublicURL(ms[i].BaseURL)
		}
	}
	WriteJSON(w, http.StatusOK, struct {
		Models []llmproto.AgentModel `json:"models"`
	}{ms})
}

func (s *Server) prompt(w http.ResponseWriter, r *http.Request) {
	var req proto.PromptRequest
	if err := DecodeBody(r, &req); err != nil {
		s.writeErr(w, r, err)
		return
	}
	if req.Message == "" {
		WriteError(w, http.StatusBadRequest, `missing "message"`)
		return
	}
	res, err := s.backend.Prompt(r.Context(), r.PathValue("name"), req)
	if err != nil {
		s.writeErr(w, r, err)
		return
	}
	WriteJSON(w, http.StatusOK, res)
}

func (s *Server) sessions(w http.ResponseWriter, r *http.Request) {
	list, err := s.backend.Sessions(r.Context(), r.PathValue("name"))
	if err != nil {
		s.writeErr(w, r, err)
		return
	}
	if list == nil {
		list = []proto.SessionInfo{}
	}
	WriteJSON(w, http.StatusOK, struct {
		Sessions []proto.SessionInfo `json:"sessions"`
	}{list})
}
