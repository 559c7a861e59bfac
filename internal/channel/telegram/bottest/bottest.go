// Package bottest is a Telegram Bot API server on 127.0.0.1 for tests: it
// speaks the documented wire format (POST /bot<token>/<method>, JSON,
// urlencoded or multipart bodies; {"ok":true,"result":...} or
// {"ok":false,"error_code":...,"description":...}), long-polls getUpdates
// from a queue the test fills, and records every other call. Like
// net/http/httptest, it is test infrastructure: production code never
// imports it.
package bottest

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Server is a Bot API server on 127.0.0.1 speaking the documented wire
// format: POST /bot<token>/<method> with a JSON, urlencoded or multipart
// body, answered {"ok":true,"result":...} or {"ok":false,"error_code":...,
// "description":...}. getUpdates long-polls a queue the test fills; the
// other calls are recorded.
type Server struct {
	t     testing.TB
	srv   *httptest.Server
	token string

	mu      sync.Mutex
	updates []map[string]any
	nextUpd int
	nextMsg int
	calls   []Call
	changed chan struct{} // closed and replaced on every change
	// reject, if set, may refuse a call (SetReject).
	reject func(c Call) (int, string)
	// fault, if set, may make a call fail (SetFault).
	fault func(c Call) Fault
	// holds are the methods whose replies wait (Hold).
	holds map[string]chan struct{}
}

// Fault is how a call fails: after Delay (a timeout, when longer than the
// client waits), with Code and Desc (and retry_after for a 429), or with
// Body as it is (a proxy's HTML error page, say). The zero Fault lets the
// call through.
type Fault struct {
	Code       int
	Desc       string
	RetryAfter int // seconds, for a 429; 0 means 1
	Delay      time.Duration
	Body       string // sent instead of the JSON error, with status Code
}

func (f Fault) none() bool { return f.Code == 0 && f.Delay == 0 && f.Body == "" }

// Call is one recorded call: its method and parameters (values as
// sent: strings, or JSON text for objects).
type Call struct {
	Method string
	Params map[string]string
	At     time.Time
	ID     int // the message sent or edited
	// Rejected says the call was answered with an error (see reject).
	Rejected bool
}

func (c Call) String() string { return fmt.Sprintf("%s%v", c.Method, c.Params) }

// Token is the bot token the server answers to.
const Token = "123456:TEST-secret-token-abcdef"

// New starts a server, closed when the test ends.
func New(t testing.TB) *Server {
	t.Helper()
	f := &Server{t: t, token: Token, nextMsg: 1000, changed: make(chan struct{})}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.srv.Close)
	return f
}

// SetToken makes the server answer to another token (the bot's then fails).
func (f *Server) SetToken(token string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.token = token
}

// SetReject makes the server refuse the calls for which reject returns an
// error code (with its description); 0 lets a call through.
func (f *Server) SetReject(reject func(c Call) (code int, desc string)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reject = reject
}

// SetFault makes calls fail as fault says; it takes over from SetReject's
// function for the calls it fails.
func (f *Server) SetFault(fault func(c Call) Fault) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.fault = fault
}

// Close stops the server; nothing listens at its URL any more.
// Hold makes the replies to method wait, after the call is recorded, until
// release is called (or the client gives up): a test sees the call, and
// acts, before the client has the answer. Release is idempotent and is
// called at the test's end too.
func (f *Server) Hold(method string) (release func()) {
	ch := make(chan struct{})
	f.mu.Lock()
	if f.holds == nil {
		f.holds = make(map[string]chan struct{})
	}
	f.holds[method] = ch
	f.mu.Unlock()
	var once sync.Once
	release = func() {
		once.Do(func() {
			f.mu.Lock()
			if f.holds[method] == ch {
				delete(f.holds, method)
			}
			f.mu.Unlock()
			close(ch)
		})
	}
	f.t.Cleanup(release)
	return release
}

func (f *Server) Close() { f.srv.Close() }

func (f *Server) URL() string { return f.srv.URL }

func (f *Server) notify() {
	close(f.changed)
	f.changed = make(chan struct{})
}

// Push queues an update; its update_id is assigned.
func (f *Server) Push(upd map[string]any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.nextUpd++
	upd["update_id"] = f.nextUpd
	f.updates = append(f.updates, upd)
	f.notify()
}

// Message queues a text message from a user in a chat; thread 0 means none.
func (f *Server) Message(userID, chatID int64, thread int, text string) int {
	f.mu.Lock()
	f.nextMsg++
	id := f.nextMsg
	f.mu.Unlock()
	chatType := "private"
	if chatID < 0 {
		chatType = "supergroup"
	}
	msg := map[string]any{
		"message_id": id,
		"date":       time.Now().Unix(),
		"chat":       map[string]any{"id": chatID, "type": chatType},
		"from":       map[string]any{"id": userID, "is_bot": false, "first_name": "U", "username": "user" + strconv.FormatInt(userID, 10)},
		"text":       text,
	}
	if thread != 0 {
		msg["message_thread_id"] = thread
		msg["is_topic_message"] = true
		msg["chat"].(map[string]any)["is_forum"] = true
	}
	f.Push(map[string]any{"message": msg})
	return id
}

func (f *Server) serve(w http.ResponseWriter, r *http.Request) {
	path, ok := strings.CutPrefix(r.URL.Path, "/bot")
	token, method, ok2 := strings.Cut(path, "/")
	if r.Method != http.MethodPost || !ok || !ok2 {
		writeAPI(w, 404, "Not Found", nil)
		return
	}
	f.mu.Lock()
	want := f.token
	f.mu.Unlock()
	if token != want {
		writeAPI(w, 401, "Unauthorized", nil)
		return
	}
	params, err := readParams(r)
	if err != nil {
		writeAPI(w, 400, "Bad Request: "+err.Error(), nil)
		return
	}
	if method == "getUpdates" {
		f.getUpdates(w, r, params)
		return
	}
	c := Call{Method: method, Params: params, At: time.Now()}
	f.mu.Lock()
	reject, faultFn := f.reject, f.fault
	f.mu.Unlock()
	code, desc := 0, ""
	if reject != nil {
		code, desc = reject(c)
	}
	var fault Fault
	if faultFn != nil {
		if fault = faultFn(c); !fault.none() {
			code, desc = fault.Code, fault.Desc
		}
	}
	if fault.Delay > 0 {
		select {
		case <-time.After(fault.Delay):
		case <-r.Context().Done():
			c.Rejected = true
			f.mu.Lock()
			f.calls = append(f.calls, c)
			f.notify()
			f.mu.Unlock()
			return
		}
	}
	f.mu.Lock()
	c.Rejected = code != 0 || fault.Body != ""
	switch {
	case c.Rejected:
	case method == "sendMessage":
		f.nextMsg++
		c.ID = f.nextMsg
	case method == "editMessageText":
		c.ID, _ = strconv.Atoi(params["message_id"])
	}
	f.calls = append(f.calls, c)
	f.notify()
	hold := f.holds[method]
	f.mu.Unlock()
	if hold != nil {
		select {
		case <-hold:
		case <-r.Context().Done():
			return
		}
	}
	if fault.Body != "" {
		w.Header().Set("Content-Type", "text/html")
		w.WriteHeader(cmp.Or(code, http.StatusBadGateway))
		io.WriteString(w, fault.Body)
		return
	}
	if code != 0 {
		writeError(w, code, desc, fault.RetryAfter)
		return
	}
	switch method {
	case "getMe":
		writeAPI(w, 0, "", map[string]any{"id": 123456, "is_bot": true, "first_name": "Beige", "username": "beige_bot"})
	case "sendMessage", "editMessageText":
		id := c.ID
		chat, _ := strconv.ParseInt(params["chat_id"], 10, 64)
		writeAPI(w, 0, "", map[string]any{
			"message_id": id, "date": time.Now().Unix(),
			"chat": map[string]any{"id": chat, "type": "private"},
			"text": params["text"],
		})
	default:
		writeAPI(w, 0, "", true)
	}
}

func (f *Server) getUpdates(w http.ResponseWriter, r *http.Request, params map[string]string) {
	offset, _ := strconv.Atoi(params["offset"])
	timeout, _ := strconv.Atoi(params["timeout"])
	// Like Telegram, an offset confirms the updates before it: they are
	// never sent again.
	f.mu.Lock()
	kept := f.updates[:0]
	for _, u := range f.updates {
		if u["update_id"].(int) >= offset {
			kept = append(kept, u)
		}
	}
	f.updates = kept
	f.mu.Unlock()
	deadline := time.After(time.Duration(timeout) * time.Second)
	for {
		f.mu.Lock()
		var out []map[string]any
		for _, u := range f.updates {
			if u["update_id"].(int) >= offset {
				out = append(out, u)
			}
		}
		changed := f.changed
		f.mu.Unlock()
		if len(out) > 0 || timeout == 0 {
			writeAPI(w, 0, "", out)
			return
		}
		select {
		case <-changed:
		case <-deadline:
			writeAPI(w, 0, "", []any{})
			return
		case <-r.Context().Done():
			return
		}
	}
}

func writeAPI(w http.ResponseWriter, code int, desc string, result any) {
	if code != 0 {
		writeError(w, code, desc, 0)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]any{"ok": true, "result": result})
}

func writeError(w http.ResponseWriter, code int, desc string, retryAfter int) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	body := map[string]any{"ok": false, "error_code": code, "description": desc}
	if code == http.StatusTooManyRequests {
		body["parameters"] = map[string]any{"retry_after": cmp.Or(retryAfter, 1)}
	}
	json.NewEncoder(w).Encode(body)
}

// readParams reads a Bot API request's parameters, whatever its encoding.
func readParams(r *http.Request) (map[string]string, error) {
	out := map[string]string{}
	ct, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return nil, err
	}
	if len(bytes.TrimSpace(body)) == 0 {
		ct = "" // a call without parameters
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	switch ct {
	case "multipart/form-data":
		if err := r.ParseMultipartForm(1 << 20); err != nil {
			return nil, err
		}
		for k, v := range r.MultipartForm.Value {
			out[k] = v[0]
		}
	case "application/x-www-form-urlencoded":
		if err := r.ParseForm(); err != nil {
			return nil, err
		}
		for k, v := range r.PostForm {
			out[k] = v[0]
		}
	case "application/json":
		var m map[string]any
		if err := json.Unmarshal(body, &m); err != nil {
			return nil, err
		}
		for k, v := range m {
			if s, ok := v.(string); ok {
				out[k] = s
			} else {
				b, _ := json.Marshal(v)
				out[k] = string(b)
			}
		}
	case "":
	default:
		return nil, fmt.Errorf("unsupported content type %q", ct)
	}
	for k, v := range r.URL.Query() {
		if _, ok := out[k]; !ok {
			out[k] = v[0]
		}
	}
	return out, nil
}

// snapshot returns the calls so far, without getMe.
func (f *Server) Snapshot() []Call {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []Call
	for _, c := range f.calls {
		if c.Method != "getMe" {
			out = append(out, c)
		}
	}
	return out
}

// CallsOf returns the calls of some methods, in order.
func (f *Server) CallsOf(methods ...string) []Call {
	var out []Call
	for _, c := range f.Snapshot() {
		for _, m := range methods {
			if c.Method == m {
				out = append(out, c)
			}
		}
	}
	return out
}

// WaitFor waits until cond holds for the recorded calls.
func (f *Server) WaitFor(what string, cond func(calls []Call) bool) []Call {
	f.t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		f.mu.Lock()
		changed := f.changed
		f.mu.Unlock()
		calls := f.Snapshot()
		if cond(calls) {
			return calls
		}
		select {
		case <-changed:
		case <-time.After(50 * time.Millisecond):
		case <-deadline:
			f.t.Fatalf("timed out waiting for %s; calls: %v", what, calls)
			return nil
		}
	}
}

// SentTexts returns the texts of the sendMessage calls to chat, in order.
func SentTexts(calls []Call, chat int64) []string {
	var out []string
	for _, c := range calls {
		if c.Method == "sendMessage" && !c.Rejected && c.Params["chat_id"] == strconv.FormatInt(chat, 10) {
			out = append(out, c.Params["text"])
		}
	}
	return out
}
