// Package llmtest runs scripted model provider servers on 127.0.0.1 for
// tests, like net/http/httptest: an Anthropic Messages endpoint, an OpenAI
// chat completions endpoint, an OpenAI Responses endpoint and a Gemini API
// endpoint that speak
// the real SSE event sequences,
// answer from a queue of scripted responses (text, thinking, tool calls,
// HTTP errors, broken and hanging streams), and record every request.
//
// It is test infrastructure: production code must not import it.
package llmtest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// Recorded is one request the server received.
type Recorded struct {
	// Seq is the arrival order, from 0.
	Seq    int
	Method string
	Path   string
	Header http.Header
	// Body is the decoded JSON body (nil if it was not JSON); Raw the bytes.
	Body map[string]any
	Raw  []byte
	Time time.Time
}

// APIKey returns the key the client sent: x-api-key (x-goog-api-key for
// Gemini), else the bearer token.
func (r Recorded) APIKey() string {
	if k := r.Header.Get("X-Api-Key"); k != "" {
		return k
	}
	if k := r.Header.Get("X-Goog-Api-Key"); k != "" {
		return k
	}
	return strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
}

// Model returns the requested model (for Gemini, the one in the path).
func (r Recorded) Model() string {
	if s, _ := r.Body["model"].(string); s != "" {
		return s
	}
	if rest, ok := strings.CutPrefix(r.Path, "/v1beta/models/"); ok {
		m, _, _ := strings.Cut(rest, ":")
		return m
	}
	return ""
}

// Decode decodes the raw body into v.
func (r Recorded) Decode(v any) error { return json.Unmarshal(r.Raw, v) }

// Messages returns the "messages" array of the body (the "input" array
// for the Responses API, "contents" for Gemini).
func (r Recorded) Messages() []map[string]any {
	arr, _ := r.Body["messages"].([]any)
	if arr == nil {
		arr, _ = r.Body["input"].([]any)
	}
	if arr == nil {
		arr, _ = r.Body["contents"].([]any)
	}
	out := make([]map[string]any, 0, len(arr))
	for _, m := range arr {
		if mm, ok := m.(map[string]any); ok {
			out = append(out, mm)
		}
	}
	return out
}

// System returns the system prompt: Anthropic's "system" (a string or text
// blocks), the Responses API's "instructions", Gemini's
// "systemInstruction", or the content of OpenAI system and developer
// messages.
func (r Recorded) System() string {
	var parts []string
	if si, ok := r.Body["systemInstruction"]; ok {
		parts = append(parts, texts(si)...)
	}
	if s, ok := r.Body["instructions"].(string); ok {
		parts = append(parts, s)
	}
	switch s := r.Body["system"].(type) {
	case string:
		parts = append(parts, s)
	case []any:
		parts = append(parts, texts(s)...)
	}
	for _, m := range r.Messages() {
		if m["role"] == "system" || m["role"] == "developer" {
			parts = append(parts, texts(m["content"])...)
		}
	}
	return strings.Join(parts, "\n")
}

// AllText returns every text found in the messages (message content, text
// blocks, tool results), joined by newlines: a quick way to assert that the
// model saw something.
func (r Recorded) AllText() string {
	var parts []string
	for _, m := range r.Messages() {
		parts = append(parts, texts(m["content"])...)
		parts = append(parts, texts(m["parts"])...)
	}
	return strings.Join(parts, "\n")
}

// Tools returns the names of the tools offered.
func (r Recorded) Tools() []string {
	arr, _ := r.Body["tools"].([]any)
	var names []string
	for _, t := range arr {
		tm, _ := t.(map[string]any)
		if decls, ok := tm["functionDeclarations"].([]any); ok { // Gemini
			for _, d := range decls {
				dm, _ := d.(map[string]any)
				n, _ := dm["name"].(string)
				names = append(names, n)
			}
		} else if n, ok := tm["name"].(string); ok {
			names = append(names, n)
		} else if f, ok := tm["function"].(map[string]any); ok {
			n, _ := f["name"].(string)
			names = append(names, n)
		}
	}
	return names
}

// texts collects the strings under "text", "content" and (for Responses
// function call outputs and Gemini function responses) "output" and
// "error" keys, recursively, looking into Gemini's "parts",
// "functionResponse" and "response" too.
func texts(v any) []string {
	switch x := v.(type) {
	case string:
		return []string{x}
	case []any:
		var out []string
		for _, e := range x {
			out = append(out, texts(e)...)
		}
		return out
	case map[string]any:
		var out []string
		if t, ok := x["text"].(string); ok {
			out = append(out, t)
		}
		if c, ok := x["content"]; ok {
			out = append(out, texts(c)...)
		}
		if o, ok := x["output"].(string); ok {
			out = append(out, o)
		}
		for _, k := range [...]string{"parts", "functionResponse", "response"} {
			if c, ok := x[k]; ok {
				out = append(out, texts(c)...)
			}
		}
		if e, ok := x["error"].(string); ok {
			out = append(out, e)
		}
		return out
	}
	return nil
}

// Server is a scripted provider endpoint. Its methods are safe for
// concurrent use.
type Server struct {
	t    testing.TB
	wire wire
	hs   *httptest.Server

	closeOnce sync.Once
	closing   chan struct{}

	mu          sync.Mutex
	changed     chan struct{}
	queue       []Response
	fallback    Response
	handler     func(Recorded) Response
	reqs        []Recorded
	inFlight    int
	maxInFlight int
	cancelled   int
	finished    int
}

// NewAnthropic starts an Anthropic Messages API server (POST /v1/messages).
// It closes when the test ends.
func NewAnthropic(t testing.TB) *Server { return newServer(t, anthropicWire{}) }

// NewOpenAI starts an OpenAI chat completions server (POST
// /v1/chat/completions). It closes when the test ends.
func NewOpenAI(t testing.TB) *Server { return newServer(t, openaiWire{}) }

func newServer(t testing.TB, w wire) *Server {
	t.Helper()
	s := &Server{
		t: t, wire: w,
		closing:  make(chan struct{}),
		changed:  make(chan struct{}),
		fallback: Text("ok"),
	}
	s.hs = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.Close)
	return s
}

// URL returns the base URL to configure: the server root for Anthropic,
// the root plus "/v1" for OpenAI (as the real APIs' base URLs).
func (s *Server) URL() string { return s.hs.URL + s.wire.basePath() }

// Close stops the server, releasing hanging and gated responses first.
func (s *Server) Close() {
	s.closeOnce.Do(func() {
		close(s.closing)
		s.hs.CloseClientConnections()
		s.hs.Close()
	})
}

// Enqueue adds responses to the queue; each request takes the next one.
func (s *Server) Enqueue(rs ...Response) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.queue = append(s.queue, rs...)
}

// SetDefault sets the response used when the queue is empty (at first
// Text("ok")).
func (s *Server) SetDefault(r Response) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fallback = r
}

// Handle makes f choose the response of every request, instead of the
// queue. Pass nil to go back to the queue.
func (s *Server) Handle(f func(Recorded) Response) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.handler = f
}

// Requests returns every request so far, in arrival order.
func (s *Server) Requests() []Recorded {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Recorded(nil), s.reqs...)
}

// Request returns request i (from 0); it fails the test if there is none.
func (s *Server) Request(i int) Recorded {
	s.t.Helper()
	reqs := s.Requests()
	if i < 0 || i >= len(reqs) {
		s.t.Fatalf("llmtest: request %d of %d", i, len(reqs))
	}
	return reqs[i]
}

// Last returns the latest request; it fails the test if there is none.
func (s *Server) Last() Recorded {
	s.t.Helper()
	return s.Request(s.Count() - 1)
}

// Count returns how many requests arrived.
func (s *Server) Count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.reqs)
}

// InFlight returns how many requests are being answered now.
func (s *Server) InFlight() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.inFlight
}

// MaxInFlight returns the most requests ever answered at once.
func (s *Server) MaxInFlight() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.maxInFlight
}

// Cancelled returns how many requests ended because the client went away
// before the answer was complete.
func (s *Server) Cancelled() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cancelled
}

// Finished returns how many requests were fully handled (answered or
// cancelled). A client can read the whole answer before its handler has
// returned: after the client's call, WaitFinished, not Finished.
func (s *Server) Finished() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.finished
}

// WaitInFlight waits until exactly n requests are in flight; false on timeout.
func (s *Server) WaitInFlight(n int, timeout time.Duration) bool {
	return s.wait(timeout, func() bool { return s.inFlight == n })
}

// WaitFinished waits until at least n requests were fully handled; false
// on timeout.
func (s *Server) WaitFinished(n int, timeout time.Duration) bool {
	return s.wait(timeout, func() bool { return s.finished >= n })
}

// WaitCount waits until at least n requests have arrived; false on timeout.
func (s *Server) WaitCount(n int, timeout time.Duration) bool {
	return s.wait(timeout, func() bool { return len(s.reqs) >= n })
}

// WaitCancelled waits until at least n requests were cancelled by the
// client; false on timeout.
func (s *Server) WaitCancelled(n int, timeout time.Duration) bool {
	return s.wait(timeout, func() bool { return s.cancelled >= n })
}

func (s *Server) wait(timeout time.Duration, cond func() bool) bool {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		s.mu.Lock()
		ok := cond()
		ch := s.changed
		s.mu.Unlock()
		if ok {
			return true
		}
		select {
		case <-ch:
		case <-deadline.C:
			return false
		}
	}
}

func (s *Server) notifyLocked() {
	close(s.changed)
	s.changed = make(chan struct{})
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	raw, _ := io.ReadAll(r.Body)
	rec := Recorded{
		Method: r.Method, Path: r.URL.Path, Header: r.Header.Clone(),
		Raw: raw, Time: time.Now(),
	}
	_ = json.Unmarshal(raw, &rec.Body)

	s.mu.Lock()
	rec.Seq = len(s.reqs)
	s.reqs = append(s.reqs, rec)
	s.inFlight++
	s.maxInFlight = max(s.maxInFlight, s.inFlight)
	handler := s.handler
	var resp Response
	if handler == nil {
		if len(s.queue) > 0 {
			resp = s.queue[0]
			s.queue = s.queue[1:]
		} else {
			resp = s.fallback
		}
	}
	s.notifyLocked()
	s.mu.Unlock()

	cancelled := false
	defer func() {
		s.mu.Lock()
		s.inFlight--
		s.finished++
		if cancelled {
			s.cancelled++
		}
		s.notifyLocked()
		s.mu.Unlock()
	}()

	if handler != nil {
		resp = handler(rec)
	}
	if r.Method != http.MethodPost || !s.routes(r) {
		resp = Error(http.StatusNotFound, "", nil)
		resp.ErrorType, resp.ErrorMessage = "not_found_error", fmt.Sprintf("no route %s %s", r.Method, r.URL.Path)
	}
	cancelled = !s.respond(w, r, rec, resp)
}

// routes reports whether r is for the wire's endpoint.
func (s *Server) routes(r *http.Request) bool {
	if m, ok := s.wire.(interface{ matches(*http.Request) bool }); ok {
		return m.matches(r)
	}
	return r.URL.Path == s.wire.path()
}

// respond writes resp; it returns false if the client went away first.
func (s *Server) respond(w http.ResponseWriter, r *http.Request, rec Recorded, resp Response) bool {
	ctx := r.Context()
	if resp.Gate != nil {
		select {
		case <-resp.Gate:
		case <-ctx.Done():
			return false
		case <-s.closing:
			return false
		}
	}
	for k, vs := range resp.Header {
		for _, v := range vs {
			w.Header().Add(k, v)
		}
	}
	if resp.Status != 0 && resp.Status != http.StatusOK {
		body := resp.Body
		if body == "" {
			typ, msg := s.wire.defaultError(resp.Status)
			if resp.ErrorType != "" {
				typ = resp.ErrorType
			}
			if resp.ErrorMessage != "" {
				msg = resp.ErrorMessage
			}
			body = s.wire.errorBody(typ, msg)
		}
		if w.Header().Get("Content-Type") == "" {
			w.Header().Set("Content-Type", "application/json")
		}
		w.WriteHeader(resp.Status)
		_, _ = io.WriteString(w, body)
		return true
	}

	events := s.wire.events(rec, resp)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	flusher, _ := w.(http.Flusher)
	if flusher != nil {
		flusher.Flush()
	}
	var buf bytes.Buffer
	for i, ev := range events {
		if resp.breakKind != "" && i == resp.breakAt {
			return s.breakStream(w, r, resp)
		}
		if resp.Delay > 0 {
			t := time.NewTimer(resp.Delay)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
				return false
			case <-s.closing:
				t.Stop()
				return false
			}
		}
		// A client that went away before this event was written is a
		// cancel; one that hung up after reading the last event is not
		// (clients close as soon as they have the final event).
		if ctx.Err() != nil {
			return false
		}
		buf.Reset()
		ev.writeTo(&buf)
		if _, err := w.Write(buf.Bytes()); err != nil {
			return false
		}
		if flusher != nil {
			flusher.Flush()
		}
	}
	if resp.breakKind != "" && resp.breakAt >= len(events) {
		return s.breakStream(w, r, resp)
	}
	return true
}

func (s *Server) breakStream(w http.ResponseWriter, r *http.Request, resp Response) bool {
	switch resp.breakKind {
	case "cut":
		// Abort the response: net/http closes the connection without the
		// terminating chunk.
		panic(http.ErrAbortHandler)
	case "fail":
		var buf bytes.Buffer
		s.wire.streamError(resp.failType, resp.failMsg).writeTo(&buf)
		_, _ = w.Write(buf.Bytes())
		if f, ok := w.(http.Flusher); ok {
			f.Flush()
		}
	case "hang":
		select {
		case <-r.Context().Done():
			return false
		case <-s.closing:
			return false
		}
	}
	return true
}

// sse is one server-sent event; an empty name writes only the data line.
type sse struct {
	name string
	data string
}

func (e sse) writeTo(b *bytes.Buffer) {
	if e.name != "" {
		b.WriteString("event: " + e.name + "\n")
	}
	b.WriteString("data: " + e.data + "\n\n")
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic("llmtest: " + err.Error())
	}
	return string(b)
}

// wire is a provider's wire format.
type wire interface {
	basePath() string
	path() string
	defaultError(status int) (typ, msg string)
	errorBody(typ, msg string) string
	events(req Recorded, r Response) []sse
	streamError(typ, msg string) sse
}
