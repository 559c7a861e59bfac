package providers_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/beige-dev/beige/internal/llm"
)

// The conformance suite replays streams recorded from, or transcribed from
// the documentation of, the servers Beige's users point it at
// (testdata/wire-streams, see its README.md and SOURCES.md), through the
// real providers, in 13-byte writes so that parsers meet events split at
// odd places, and checks for each what its README entry says must happen.

const wireDir = "testdata/wire-streams"

// writeSize is the size of each write of a replayed stream.
const writeSize = 13

// replayServer answers every request with one recorded body, in small
// flushed writes; hang keeps the response open afterwards, until the
// client goes away.
type replayServer struct {
	hs   *httptest.Server
	mu   sync.Mutex
	reqs [][]byte
}

func newReplay(t *testing.T, body []byte, contentType string, hang bool) *replayServer {
	t.Helper()
	s := &replayServer{}
	s.hs = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		raw, _ := io.ReadAll(r.Body)
		s.mu.Lock()
		s.reqs = append(s.reqs, raw)
		s.mu.Unlock()
		w.Header().Set("Content-Type", contentType)
		w.WriteHeader(http.StatusOK)
		f, _ := w.(http.Flusher)
		for i := 0; i < len(body); i += writeSize {
			if _, err := w.Write(body[i:min(i+writeSize, len(body))]); err != nil {
				return
			}
			if f != nil {
				f.Flush()
			}
		}
		if hang {
			<-r.Context().Done()
		}
	}))
	t.Cleanup(s.hs.Close)
	return s
}

func (s *replayServer) requests() [][]byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([][]byte(nil), s.reqs...)
}

// baseURL is where the API's base URL points on the replay server.
func (s *replayServer) baseURL(api string) string {
	if api == llm.APIAnthropicMessages {
		return s.hs.URL
	}
	return s.hs.URL + "/v1"
}

func apiOf(file string) string {
	switch {
	case strings.HasPrefix(file, "a_"):
		return llm.APIAnthropicMessages
	case strings.HasPrefix(file, "r_"):
		return llm.APIOpenAIResponses
	}
	return llm.APIOpenAICompletions
}

func readWire(t *testing.T, file string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(wireDir, file))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

type result struct {
	msg *llm.AssistantMessage
	err error
	srv *replayServer
}

func replay(t *testing.T, file string, timeout time.Duration) result {
	t.Helper()
	api := apiOf(file)
	ct := "text/event-stream"
	if strings.HasSuffix(file, ".json") {
		ct = "application/json"
	}
	srv := newReplay(t, readWire(t, file), ct, strings.HasPrefix(file, "o_hang"))
	p, err := llm.NewProvider(llm.ProviderConfig{Name: "wire", API: api, APIKey: "k", BaseURL: srv.baseURL(api)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	req := llm.Request{
		Model: llm.Lookup("wire", api, "m", srv.baseURL(api)),
		Context: llm.Context{
			Messages: []llm.Message{llm.UserText("run it")},
			Tools:    []llm.Tool{{Name: "exec", Description: "run a command", Parameters: json.RawMessage(`{"type":"object","properties":{"command":{"type":"string"}}}`)}},
		},
	}
	msg, err := p.Stream(ctx, req, nil)
	if msg == nil {
		t.Fatalf("%s: nil message (err %v)", file, err)
	}
	return result{msg, err, srv}
}

func jsonQ(s string) string { b, _ := json.Marshal(s); return string(b) }

// call is a tool call a stream must produce.
type call struct{ id, name, args string }

// wireWant is what one stream must do, from its README entry.
type wireWant struct {
	text     string // prefix of the text; "" means none
	thinking int    // thinking blocks
	signed   bool   // every thinking block keeps its signature
	redacted bool   // the thinking is redacted, and kept
	calls    []call
	stop     llm.StopReason
	usage    *llm.Usage // Input, Output, CacheRead, CacheWrite; nil: not checked
	// errText is the provider's own message the error must carry (and the
	// errorMessage the user sees); class how routing must treat it.
	errText string
	class   llm.ErrorClass
	unknown bool // the calls name a tool the agent lacks: the loop goes on with an error result
}

const angels = "This is a famous philosophical question"
const angelsOAI = "The question \"How many angels can dance on the head of a pin?\""

func u(in, out, read, write int) *llm.Usage {
	return &llm.Usage{Input: in, Output: out, CacheRead: read, CacheWrite: write}
}

var wireCases = map[string]wireWant{
	// text + thinking, usage, stop
	"a_simple.sse":      {text: angels, thinking: 1, stop: llm.StopReasonStop, usage: u(18, 240, 0, 0)},
	"a_simple_crlf.sse": {text: angels, thinking: 1, stop: llm.StopReasonStop, usage: u(18, 240, 0, 0)},
	// thinking with signature kept; exec runs; cache usage read
	"a_tool_thinking.sse": {thinking: 1, signed: true, stop: llm.StopReasonToolUse, usage: u(2, 61, 13993, 22),
		calls: []call{{"toolu_01RX68weRSquLx6HUTj65iBo", "exec", `{"command":"echo WIRE-OK"}`}}},
	// two exec calls, both run in order
	"a_parallel.sse": {thinking: 1, signed: true, stop: llm.StopReasonToolUse, usage: u(2, 72, 13993, 22), calls: []call{
		{"toolu_01ParallelFirst000000000", "exec", `{"command":"echo WIRE-OK-1"}`},
		{"toolu_01ParallelSecond00000000", "exec", `{"command":"echo WIRE-OK-2"}`}}},
	"o_ollama_parallel.sse": {stop: llm.StopReasonToolUse, calls: []call{
		{"call_aaaa1111", "exec", `{"command":"echo WIRE-OK-1"}`},
		{"call_bbbb2222", "exec", `{"command":"echo WIRE-OK-2"}`}}},
	// two thinking blocks; unknown tool → error result, loop goes on
	"a_multi_thinking.sse": {thinking: 2, signed: true, stop: llm.StopReasonToolUse, unknown: true, usage: u(2, 61, 13993, 22),
		calls: []call{{"toolu_01RX68weRSquLx6HUTj65iBo", "Read", `{"file_path":"/tmp/blah/foo"}`}}},
	"r_multi_reasoning.sse": {thinking: 2, stop: llm.StopReasonToolUse, unknown: true, usage: u(58, 18, 0, 0),
		calls: []call{{"call_7VaiUXZYuuuwWwviCrckxq6t", "add", `{"a":3,"b":5}`}}},
	// error mid-stream → fallback model, provider's message in the audit record
	"a_stream_error.sse":     {errText: "api_error: Overloaded", class: llm.ClassTransient},
	"a_overloaded.sse":       {text: "Hel", errText: "overloaded_error: Overloaded", class: llm.ClassTransient},
	"o_stream_error.sse":     {text: `The question "`, errText: "server_error: The server had an error while processing your request. Sorry about that!", class: llm.ClassOther},
	"o_openrouter_error.sse": {text: "The answer is", errText: "server_error: Provider disconnected unexpectedly", class: llm.ClassOther},
	"r_stream_error.sse":     {errText: "ERR_SOMETHING: Something went wrong", class: llm.ClassOther},
	"r_stream_failure.sse":   {errText: "server_error: The model failed to generate a response.", class: llm.ClassOther},
	// ends before the reply is complete → error + fallback
	"a_truncated.sse":  {text: angels, thinking: 1, errText: llm.ErrIncompleteStream.Error(), class: llm.ClassOther},
	"o_early_done.sse": {text: angelsOAI, errText: llm.ErrIncompleteStream.Error(), class: llm.ClassOther},
	// redacted thinking preserved, text kept
	"a_redacted.sse": {text: "Redacted but fine.", thinking: 1, signed: true, redacted: true, stop: llm.StopReasonStop, usage: u(30, 12, 0, 0)},
	// whole tool input in content_block_start, no deltas → exec runs
	"a_input_at_start.sse": {stop: llm.StopReasonToolUse, usage: u(10, 9, 0, 0),
		calls: []call{{"call_zai_01", "exec", `{"command":"echo WIRE-OK"}`}}},
	// text, usage; CRLF and a missing [DONE] are fine
	"o_simple.sse":      {text: angelsOAI, stop: llm.StopReasonStop, usage: u(19, 238, 0, 0)},
	"o_crlf_nodone.sse": {text: angelsOAI, stop: llm.StopReasonStop, usage: u(19, 238, 0, 0)},
	// exec runs; ids sent back unchanged
	"o_tool.sse": {stop: llm.StopReasonToolUse, usage: u(60, 15, 0, 0),
		calls: []call{{"call_HjeqP7YeRkoNj0de9e3U4X4B", "exec", `{"command":"echo WIRE-OK"}`}}},
	"o_nonzero_index.sse": {text: "Now listing your Coder workspaces:", stop: llm.StopReasonToolUse, usage: u(510, 58, 25429, 0),
		calls: []call{{"toolu_vrtx_01DbFqUgk6aAtJ4nDBqzFWDF", "exec", `{"command":"echo WIRE-OK"}`}}},
	"o_ollama.sse": {stop: llm.StopReasonToolUse, usage: u(190, 22, 0, 0),
		calls: []call{{"call_k4it8t6c", "exec", `{"command":"echo WIRE-OK"}`}}},
	"o_ollama_old.sse": {stop: llm.StopReasonToolUse,
		calls: []call{{"call_k4it8t6c", "exec", `{"command":"echo WIRE-OK"}`}}},
	"o_mistral.sse": {stop: llm.StopReasonToolUse, usage: u(91, 28, 0, 0),
		calls: []call{{"D681PevKs", "exec", `{"command":"echo WIRE-OK"}`}}},
	// reasoning_content / reasoning → thinking; SSE comment lines ignored
	"o_deepseek.sse":   {text: "9.8 is greater.", thinking: 1, stop: llm.StopReasonStop, usage: u(17, 120, 0, 0)},
	"o_openrouter.sse": {text: "Hello from OpenRouter.", thinking: 1, stop: llm.StopReasonStop, usage: u(12, 40, 0, 0)},
	// an error object without an "error" key → error with that message (not
	// "stream ended"); a context-length 400 is not retried
	"o_vllm_error.sse": {errText: "400 BadRequestError: This model's maximum context length is 4096 tokens.", class: llm.ClassFatal},
	// one chunk then silence → the watchdog's cancel aborts it (then fallback)
	"o_hang.sse": {text: "Partial", class: llm.ClassAborted, errText: "Request was aborted"},
	// text; exec runs, function_call_output sent back
	"r_simple.sse": {text: "Why did the scarecrow win an award?", stop: llm.StopReasonStop, usage: u(11, 18, 0, 0)},
	"r_tool.sse": {thinking: 1, stop: llm.StopReasonToolUse, usage: u(58, 18, 0, 0),
		calls: []call{{"call_7VaiUXZYuuuwWwviCrckxq6t", "exec", `{"command":"echo WIRE-OK","timeout":30}`}}},
	// HTTP 200, application/json {"error":{"code":"1113",…}} (z.ai) → error
	// with the provider's message, fallback: a balance problem is not a
	// rate limit (the provider did not say 429) nor fatal
	"o_200_error.json": {errText: "1113: Insufficient balance or no resource package. Please recharge.", class: llm.ClassOther},
}

// TestWireConformance replays every stream of testdata/wire-streams.
func TestWireConformance(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(wireDir, "*"))
	if err != nil {
		t.Fatal(err)
	}
	seen := 0
	for _, f := range files {
		name := filepath.Base(f)
		if !strings.HasSuffix(name, ".sse") && !strings.HasSuffix(name, ".json") {
			continue
		}
		want, ok := wireCases[name]
		if !ok {
			t.Errorf("%s: no expectation: add it to wireCases from the README", name)
			continue
		}
		seen++
		t.Run(strings.TrimSuffix(strings.TrimSuffix(name, ".sse"), ".json"), func(t *testing.T) {
			timeout := 10 * time.Second
			if name == "o_hang.sse" {
				timeout = 300 * time.Millisecond // the idle watchdog's cancel
			}
			r := replay(t, name, timeout)
			checkWire(t, r, want)
			if r.err == nil && len(want.calls) > 0 {
				checkSentBack(t, name, r.msg, want)
			}
		})
	}
	if seen != len(wireCases) {
		t.Errorf("%d streams replayed, %d expected", seen, len(wireCases))
	}
}

func checkWire(t *testing.T, r result, want wireWant) {
	t.Helper()
	m := r.msg
	if text := m.Text(); want.text == "" && text != "" || !strings.HasPrefix(text, want.text) {
		t.Errorf("text %q, want it to begin with %q", text, want.text)
	}
	var thinking []llm.Content
	for _, c := range m.Content {
		if c.Type == llm.ContentThinking {
			thinking = append(thinking, c)
		}
	}
	if len(thinking) != want.thinking {
		t.Errorf("%d thinking blocks, want %d", len(thinking), want.thinking)
	}
	for _, th := range thinking {
		if want.signed && th.ThinkingSignature == "" {
			t.Errorf("thinking %q lost its signature", th.Thinking)
		}
		if th.Redacted != want.redacted {
			t.Errorf("thinking redacted %v, want %v", th.Redacted, want.redacted)
		}
	}
	calls := m.ToolCalls()
	if len(calls) != len(want.calls) {
		t.Errorf("tool calls %+v, want %+v", calls, want.calls)
	} else {
		for i, c := range calls {
			if w := want.calls[i]; c.ID != w.id || c.Name != w.name || string(c.Arguments) != w.args || c.InvalidArguments != "" {
				t.Errorf("call %d = %s %s %s, want %s %s %s", i, c.ID, c.Name, c.Arguments, w.id, w.name, w.args)
			}
		}
	}
	if want.errText != "" {
		if r.err == nil {
			t.Fatalf("no error; stop %s", m.StopReason)
		}
		wantStop := llm.StopReasonError
		if want.class == llm.ClassAborted {
			wantStop = llm.StopReasonAborted
		}
		if m.StopReason != wantStop || !strings.Contains(m.ErrorMessage, want.errText) {
			t.Errorf("stop %s, errorMessage %q, want %s with %q", m.StopReason, m.ErrorMessage, wantStop, want.errText)
		}
		if want.errText != llm.ErrIncompleteStream.Error() && errors.Is(r.err, llm.ErrIncompleteStream) {
			t.Errorf("the provider's message was lost: %v", r.err)
		}
		if c := llm.Classify(r.err); c != want.class {
			t.Errorf("class %s, want %s (%v)", c, want.class, r.err)
		}
		return
	}
	if r.err != nil {
		t.Fatalf("error %v", r.err)
	}
	if m.StopReason != want.stop {
		t.Errorf("stop %s, want %s", m.StopReason, want.stop)
	}
	if w := want.usage; w != nil {
		if g := m.Usage; g.Input != w.Input || g.Output != w.Output || g.CacheRead != w.CacheRead || g.CacheWrite != w.CacheWrite {
			t.Errorf("usage %+v, want %+v", g, *w)
		}
	}
}

// checkSentBack runs the next turn, as the agent loop does: each call
// answered (an unknown tool with an error result), and checks what goes
// back: the ids unchanged, the signatures kept, the results (Responses:
// function_call_output).
func checkSentBack(t *testing.T, name string, msg *llm.AssistantMessage, want wireWant) {
	t.Helper()
	api := apiOf(name)
	next := map[string]string{llm.APIAnthropicMessages: "a_simple.sse", llm.APIOpenAICompletions: "o_simple.sse", llm.APIOpenAIResponses: "r_simple.sse"}[api]
	srv := newReplay(t, readWire(t, next), "text/event-stream", false)
	p, err := llm.NewProvider(llm.ProviderConfig{Name: "wire", API: api, APIKey: "k", BaseURL: srv.baseURL(api)})
	if err != nil {
		t.Fatal(err)
	}
	history := []llm.Message{llm.UserText("run it"), {Assistant: msg}}
	for _, c := range msg.ToolCalls() {
		res := &llm.ToolResultMessage{ToolCallID: c.ID, ToolName: c.Name, Content: []llm.Content{llm.Text("WIRE-OK from " + c.ID)}}
		if want.unknown {
			res.Content, res.IsError = []llm.Content{llm.Text("Tool " + c.Name + " not found")}, true
		}
		history = append(history, llm.Message{ToolResult: res})
	}
	model := llm.Lookup("wire", api, "m", srv.baseURL(api))
	// The reply came from the same provider and model, so signatures hold.
	msg.Provider, msg.API, msg.Model = model.Provider, model.API, model.ID
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := p.Stream(ctx, llm.Request{Model: model, Context: llm.Context{Messages: history}}, nil); err != nil {
		t.Fatalf("next turn: %v", err)
	}
	reqs := srv.requests()
	if len(reqs) != 1 {
		t.Fatalf("%d requests", len(reqs))
	}
	body := reqs[0]
	for _, c := range msg.ToolCalls() {
		if n := bytes.Count(body, []byte(jsonQ(c.ID))); n < 2 { // the call and its result
			t.Errorf("id %s sent back %d times, want the call and its result: %s", c.ID, n, body)
		}
		res := "WIRE-OK from " + c.ID
		if want.unknown {
			res = "Tool " + c.Name + " not found"
		}
		if !bytes.Contains(body, []byte(res)) {
			t.Errorf("result %q not sent: %s", res, body)
		}
	}
	for _, c := range msg.Content {
		if c.Type == llm.ContentThinking && want.signed && !bytes.Contains(body, []byte(c.ThinkingSignature)) {
			t.Errorf("thinking signature not sent back: %s", body)
		}
	}
	if api == llm.APIOpenAIResponses && !bytes.Contains(body, []byte(`"function_call_output"`)) {
		t.Errorf("no function_call_output: %s", body)
	}
}
